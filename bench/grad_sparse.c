/*
 * grad_sparse.c: the Tree-LSTM's gradient call alone, dense against
 * row-sparse embeddings (ry_vm_opts.sparse_rows), for issue 5's sparse
 * embedding gradients. Per SST train tree: one ry_vm_call of the level-1
 * optimized gradient of models/treelstm.relay's @loss (as the trainer runs
 * it), then the embedding's gradient added into a float32 gradient buffer
 * (a dense add of 18281 x 300, or the rows' scatter-add). Rounds of the
 * modes alternate in one run; prints trees/s medians as one JSON line.
 * Built by `make bench-bins` into BUILD/bench/grad_sparse;
 * -DRY_ROWS=0 builds it against a tree without row-sparse values, where it
 * measures the dense call only.
 *   grad_sparse [--seconds S] [--sst DIR] [--mode dense|sparse]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/relayc.h"

#ifndef RY_ROWS
#define RY_ROWS 1
#endif

static void die(const ry_error *err) {
    ry_error_print(stderr, err);
    exit(1);
}

/* dst += the embedding gradient g (dense or rows). */
static void accumulate(ry_tensor *dst, const ry_value *g) {
#if RY_ROWS
    if (g->kind == RY_VAL_ROWS) {
        ry_rows_add_into(dst, g);
        return;
    }
#endif
    float *y = dst->data;
    const float *x = g->tensor->data;
    for (int64_t i = 0; i < dst->size; i++) y[i] += x[i];
}

int main(int argc, char **argv) {
    double seconds = 4;
    const char *sst = "/work/shared/data/sst", *only = "";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--sst")) sst = argv[i + 1];
        else if (!strcmp(argv[i], "--mode")) only = argv[i + 1]; /* dense or sparse: one mode (profiles) */
    }
    ry_error err = {0};
    ry_module *m = NULL;
    const char *g = NULL;
    ry_vm_program *p = NULL;
    if (ry_module_parse_file("models/treelstm.relay", &m, &err) || ry_module_typecheck(m, &err) ||
        ry_grad(m, "loss", NULL, NULL, &g, &err) || ry_optimize(m, 1, &err) ||
        ry_vm_compile(m, NULL, &p, &err))
        die(&err);
    char path[1024];
    snprintf(path, sizeof path, "%s/train.txt", sst);
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *tb = NULL;
    if (ry_treebank_read(path, vocab, true, &tb, &err)) die(&err);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    const ry_expr *fn = ry_module_find_global(m, "loss")->func;
    ry_value *args[10];
    uint64_t s = 12345;
    for (int i = 1; i < 10; i++) {
        const ry_type *t = fn->func.params[i]->type;
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++) shape[d] = t->tensor.dims[d].value;
        ry_tensor *x = ry_tensor_new(RY_FLOAT32, t->tensor.ndim, shape);
        for (int64_t j = 0; j < x->size; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ((float *)x->data)[j] = 0.1f * ((float)(s >> 40) / (float)(1 << 24) - 0.5f);
        }
        args[i] = ry_value_tensor(x);
    }
    ry_tensor *gbuf = ry_tensor_zeros(RY_FLOAT32, 2, args[1]->tensor->shape);
    int nmodes = RY_ROWS ? 2 : 1, rounds = 0, tree = 0;
    double rate[2][64];
    double t_end = bench_now() + seconds;
    while (bench_now() < t_end && rounds < 64) {
        for (int mode = 0; mode < nmodes; mode++) {
            if ((!strcmp(only, "dense") && mode) || (!strcmp(only, "sparse") && !mode)) {
                rate[mode][rounds] = 0;
                continue;
            }
            ry_vm_opts o = {0};
#if RY_ROWS
            o.sparse_rows = mode == 1;
#endif
            int n = 0;
            double t0 = bench_now();
            while (n < 10) {
                if (ry_tree_to_value(&tb->trees[tree], leaf, node, &args[0], &err)) die(&err);
                tree = (tree + 1) % (int)tb->ntrees;
                ry_value *out = NULL;
                if (ry_vm_call(p, g, 10, args, &o, &out, &err)) die(&err);
                accumulate(gbuf, out->tuple.fields[1]->tuple.fields[1]);
                ry_value_release(out);
                ry_value_release(args[0]);
                n++;
            }
            rate[mode][rounds] = n / (bench_now() - t0);
        }
        rounds++;
    }
    printf("{\"name\": \"treelstm_grad\", \"unit\": \"trees/s\", \"rounds\": %d, \"dense\": %.1f", rounds,
           bench_median(rate[0], rounds));
    if (nmodes == 2) printf(", \"sparse\": %.1f", bench_median(rate[1], rounds));
    printf("}\n");
    ry_tensor_release(gbuf);
    for (int i = 1; i < 10; i++) ry_value_release(args[i]);
    ry_vm_free(p);
    ry_treebank_free(tb);
    ry_vocab_free(vocab);
    ry_module_free(m);
    return 0;
}
