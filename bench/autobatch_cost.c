/*
 * autobatch_cost.c: what automatic batching's agenda (ry_vm_call_batch,
 * src/runtime/vm_batch.c) costs per operator call. The corpus Tree-LSTM
 * (tests/corpus/treelstm.relay, memory 16) runs on B random trees of 20
 * leaves, each with weights of its own, so that no GEMM stacks and every
 * GEMM call parks and runs alone: the batched run's extra time over B
 * separate calls, per parked call, is the agenda's cost (parking, choosing
 * the site, grouping; the elementwise calls still stack and save theirs).
 * Then the same with one weight shared by all (the GEMMs stack). Rounds
 * interleave the two ways; medians. One JSON line.
 *   autobatch_cost [--batch B] [--rounds R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "relayc/relayc.h"
#include "runtime/vm_impl.h"

static ry_value *randn(ry_rng *rng, int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    for (int64_t i = 0; t && i < t->size; i++) ry_tensor_set(t, i, 0.3 * (2 * ry_rng_uniform(rng) - 1));
    return t ? ry_value_tensor(t) : NULL;
}

static ry_value *tree(ry_module *m, ry_rng *rng, int k) {
    if (k == 1) {
        ry_value *x = randn(rng, 2, (int64_t[]){1, 16});
        return ry_value_adt(ry_module_find_ctor(m, "Leaf"), 1, &x);
    }
    int left = 1 + (int)ry_rng_below(rng, (uint64_t)(k - 1));
    ry_value *f[2] = {tree(m, rng, left), tree(m, rng, k - left)};
    return ry_value_adt(ry_module_find_ctor(m, "Node"), 2, f);
}

/* The calls of stackable sites in the last profiled run. */
static int64_t parked_calls(const ry_vm_program *p) {
    int64_t n = 0;
    for (int f = 0; f < p->nfns; f++)
        for (int i = 0; i < p->fns[f]->ncode; i++) {
            const insn *I = &p->fns[f]->code[i];
            if (I->op == I_OP && I->opcall->op->batch != RY_BATCH_NO) n += I->opcall->prof_calls;
        }
    return n;
}

int main(int argc, char **argv) {
    int B = 25, rounds = 30;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--batch"))) B = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--rounds"))) rounds = atoi(v);
    }
    if (B < 2 || B > 1000 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: autobatch_cost [--batch B (2..1000)] [--rounds R]\n");
        return 2;
    }
    ry_error err;
    ry_module *m = NULL;
    ry_vm_program *p = NULL;
    FILE *f = fopen("tests/corpus/treelstm.relay", "rb");
    static char src[1 << 16];
    size_t len = f ? fread(src, 1, sizeof src - 1, f) : 0;
    if (f) fclose(f);
    if (!len || ry_module_parse("treelstm.relay", src, len, &m, &err) || ry_module_typecheck(m, &err) ||
        ry_vm_compile(m, NULL, &p, &err)) {
        fprintf(stderr, "autobatch_cost: %s\n", len ? err.msg : "cannot read tests/corpus/treelstm.relay");
        return 1;
    }
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    ry_value **args = calloc((size_t)B * 3, sizeof *args), **outs = calloc((size_t)B, sizeof *outs);
    for (int j = 0; j < B; j++) {
        args[j * 3] = tree(m, &rng, 20);
        args[j * 3 + 1] = randn(&rng, 2, (int64_t[]){64, 16});
        args[j * 3 + 2] = randn(&rng, 2, (int64_t[]){64, 32});
    }
    double *t_own = calloc((size_t)rounds, sizeof(double)), *t_one = calloc((size_t)rounds, sizeof(double)),
           *t_shared = calloc((size_t)rounds, sizeof(double)), *t_one_sh = calloc((size_t)rounds, sizeof(double));
    ry_value **shared = calloc((size_t)B * 3, sizeof *shared);
    for (int j = 0; j < B; j++) {
        shared[j * 3] = args[j * 3];
        shared[j * 3 + 1] = args[1];
        shared[j * 3 + 2] = args[2];
    }
    int64_t parks = 0;
    for (int r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++) {
            ry_value **a = pass ? shared : args;
            double t0 = bench_now();
            if (r == 0 && pass == 0) ry_vm_set_profile(p, true);
            if (ry_vm_call_batch(p, "tree_lstm", B, 3, a, NULL, outs, &err)) goto fail;
            if (r == 0 && pass == 0) {
                parks = parked_calls(p);
                ry_vm_set_profile(p, false);
            }
            double t1 = bench_now();
            for (int j = 0; j < B; j++) ry_value_release(outs[j]);
            double t2 = bench_now();
            for (int j = 0; j < B; j++) {
                ry_value *o;
                if (ry_vm_call(p, "tree_lstm", 3, a + j * 3, NULL, &o, &err)) goto fail;
                ry_value_release(o);
            }
            double t3 = bench_now();
            (pass ? t_shared : t_own)[r] = t1 - t0;
            (pass ? t_one_sh : t_one)[r] = t3 - t2;
        }
    double own = bench_median(t_own, rounds), one = bench_median(t_one, rounds),
           sh = bench_median(t_shared, rounds), one_sh = bench_median(t_one_sh, rounds);
    printf("{\"bench\": \"autobatch_cost\", \"batch\": %d, \"rounds\": %d, \"parked_calls\": %lld, "
           "\"own_weights_batched_ms\": %.3f, \"own_weights_one_by_one_ms\": %.3f, "
           "\"agenda_ns_per_parked_call\": %.0f, \"shared_weights_batched_ms\": %.3f, "
           "\"shared_weights_one_by_one_ms\": %.3f, \"shared_speedup\": %.3f}\n",
           B, rounds, (long long)parks, 1e3 * own, 1e3 * one,
           parks ? 1e9 * (own - one) / (double)parks : 0, 1e3 * sh, 1e3 * one_sh, one_sh / sh);
    return 0;
fail:
    ry_error_print(stderr, &err);
    return 1;
}
