/*
 * test_autobatch.c: automatic batching (vm.h: ry_vm_call_batch, the
 * agenda of src/runtime/vm_batch.c; deferred weight-gradient accumulation,
 * vm_defer.c) against the same calls run one by one. The values and every
 * gradient of the corpus programs that recursion drives (a Tree-LSTM over
 * trees of very different shapes, a single leaf beside a 50-node chain)
 * and that a loop over a list drives (an LSTM over sequences of lengths
 * 1 to 200 in one batch), to float32 rounding; a batch of one bitwise; an
 * empty batch; errors naming the instance; the Tree-LSTM of models/ on
 * SST trees, its embedding gradient still row-sparse; and 100 training
 * updates of a small Tree-LSTM batched and not, equal to rounding; the
 * few-rows GEMM that small stacked groups run as, row by row bitwise. Each
 * case also checks that calls were stacked (the profile's kernels).
 */
#include <math.h>
#include <stdlib.h>

#include "test_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"
#include "backend/cpu/blas.h"
#include "runtime/vm_impl.h"

/* ---- helpers ---- */

static void assert_values_close(const ry_value *a, const ry_value *b, double rtol, double atol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->kind, b->kind);
    switch (a->kind) {
    case RY_VAL_TENSOR: test_assert_close(a->tensor, b->tensor, rtol, atol); return;
    case RY_VAL_TUPLE:
        assert_int_equal(a->tuple.n, b->tuple.n);
        for (int i = 0; i < a->tuple.n; i++)
            assert_values_close(a->tuple.fields[i], b->tuple.fields[i], rtol, atol);
        return;
    case RY_VAL_ADT:
        assert_int_equal(a->adt.n, b->adt.n);
        for (int i = 0; i < a->adt.n; i++)
            assert_values_close(a->adt.fields[i], b->adt.fields[i], rtol, atol);
        return;
    case RY_VAL_ROWS:
        assert_int_equal(a->rows.n, b->rows.n);
        for (int64_t k = 0; k < a->rows.n; k++) assert_int_equal(a->rows.index[k], b->rows.index[k]);
        test_assert_close(a->rows.values, b->rows.values, rtol, atol);
        return;
    default: fail_msg("unexpected value kind %d", a->kind);
    }
}

static void assert_values_same(const ry_value *a, const ry_value *b) {
    assert_values_close(a, b, 0, 0);
}

/* Whether some call site of p ran fewer kernels than calls (was stacked). */
static bool stacked_some(const ry_vm_program *p) {
    for (int f = 0; f < p->nfns; f++)
        for (int i = 0; i < p->fns[f]->ncode; i++) {
            const insn *I = &p->fns[f]->code[i];
            if (I->op == I_OP && I->opcall->prof_kernels < I->opcall->prof_calls) return true;
        }
    return false;
}

static ry_module *load_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return test_parse(buf, true);
}

static ry_value *randn(ry_rng *rng, int ndim, const int64_t *shape, double scale) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, scale * (2 * ry_rng_uniform(rng) - 1));
    return ry_value_tensor(t);
}

/* The gradient of global fn, optimized as the trainer does, compiled. */
static ry_vm_program *grad_program(ry_module *m, const char *fn, const char **gname) {
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_grad(m, fn, NULL, NULL, gname, &err) || ry_optimize(m, 2, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("grad of %s: %s", fn, err.msg);
    }
    ry_vm_program *p = NULL;
    if (ry_vm_compile(m, NULL, &p, &err)) fail_msg("compile: %s", err.msg);
    return p;
}

/* Runs entry on count calls (args[j * nargs ..]) batched and one by one
 * with opts; compares to rtol; returns whether calls were stacked. */
static bool compare_batched(ry_vm_program *p, const char *entry, int count, int nargs,
                            ry_value **args, const ry_vm_opts *opts, double rtol, double atol) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_value **one = calloc((size_t)count, sizeof *one), **bat = calloc((size_t)count, sizeof *bat);
    ry_vm_opts o = opts ? *opts : (ry_vm_opts){0};
    o.defer_accumulation = false;
    for (int j = 0; j < count; j++)
        if (ry_vm_call(p, entry, nargs, args + (size_t)j * nargs, &o, &one[j], &err))
            fail_msg("call %d: %s", j, err.msg);
    ry_vm_set_profile(p, true);
    if (ry_vm_call_batch(p, entry, count, nargs, args, opts, bat, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("batch: %s", err.msg);
    }
    bool stacked = stacked_some(p);
    ry_vm_set_profile(p, false);
    for (int j = 0; j < count; j++) {
        assert_values_close(bat[j], one[j], rtol, atol);
        ry_value_release(one[j]);
        ry_value_release(bat[j]);
    }
    free(one);
    free(bat);
    return stacked;
}

/* ---- the corpus Tree-LSTM: trees of very different shapes ---- */

typedef struct trees {
    const ry_ctor *leaf, *node;
    ry_rng rng;
} trees;

static ry_value *leaf16(trees *t) {
    ry_value *x = randn(&t->rng, 2, (int64_t[]){1, 16}, 1.0);
    return ry_value_adt(t->leaf, 1, &x);
}

static ry_value *node2(trees *t, ry_value *l, ry_value *r) {
    ry_value *f[2] = {l, r};
    return ry_value_adt(t->node, 2, f);
}

/* A random binary tree with k leaves. */
static ry_value *random_tree(trees *t, int k) {
    if (k == 1) return leaf16(t);
    int left = 1 + (int)ry_rng_below(&t->rng, (uint64_t)(k - 1));
    return node2(t, random_tree(t, left), random_tree(t, k - left));
}

/* A chain of n internal nodes (a leaf hanging at each). */
static ry_value *chain(trees *t, int n) {
    ry_value *v = leaf16(t);
    for (int i = 0; i < n; i++) v = node2(t, v, leaf16(t));
    return v;
}

static void corpus_treelstm(void **state) {
    (void)state;
    ry_module *m = load_file("tests/corpus/treelstm.relay");
    trees t = {.leaf = ry_module_find_ctor(m, "Leaf"), .node = ry_module_find_ctor(m, "Node")};
    ry_rng_seed(&t.rng, 7);
    const char *g = NULL;
    ry_vm_program *p = grad_program(m, "tree_lstm", &g);
    enum { B = 12 };
    ry_value *w = randn(&t.rng, 2, (int64_t[]){64, 16}, 0.3), *u = randn(&t.rng, 2, (int64_t[]){64, 32}, 0.3);
    ry_value *args[B * 3];
    for (int j = 0; j < B; j++) {
        /* a single leaf next to a 50-node chain, then random shapes */
        ry_value *tree = j == 0 ? leaf16(&t) : j == 1 ? chain(&t, 50) : random_tree(&t, 1 + j * 3);
        args[j * 3] = tree;
        args[j * 3 + 1] = w;
        args[j * 3 + 2] = u;
    }
    /* the forward program and its gradient; with deferred accumulation too */
    assert_true(compare_batched(p, "tree_lstm", B, 3, args, NULL, 1e-5, 1e-6));
    assert_true(compare_batched(p, g, B, 3, args, NULL, 1e-4, 1e-5));
    ry_vm_opts d = {.defer_accumulation = true};
    assert_true(compare_batched(p, g, B, 3, args, &d, 1e-4, 1e-5));
    /* the leaf and the chain alone as a batch of two */
    assert_true(compare_batched(p, g, 2, 3, args, &d, 1e-4, 1e-5));
    for (int j = 0; j < B; j++) ry_value_release(args[j * 3]);
    ry_value_release(w);
    ry_value_release(u);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- a batch of one, an empty batch, errors ---- */

static void one_empty_and_errors(void **state) {
    (void)state;
    ry_module *m = load_file("tests/corpus/treelstm.relay");
    trees t = {.leaf = ry_module_find_ctor(m, "Leaf"), .node = ry_module_find_ctor(m, "Node")};
    ry_rng_seed(&t.rng, 3);
    const char *g = NULL;
    ry_vm_program *p = grad_program(m, "tree_lstm", &g);
    ry_value *args[3] = {random_tree(&t, 9), randn(&t.rng, 2, (int64_t[]){64, 16}, 0.3),
                         randn(&t.rng, 2, (int64_t[]){64, 32}, 0.3)};
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_value *one = NULL, *bat = NULL;
    assert_int_equal(ry_vm_call(p, g, 3, args, NULL, &one, &err), RY_OK);
    assert_int_equal(ry_vm_call_batch(p, g, 1, 3, args, NULL, &bat, &err), RY_OK);
    assert_values_same(bat, one); /* a batch of one runs as the call does: the same bits */
    ry_value_release(bat);
    ry_value_release(one);
    ry_value *sentinel = (ry_value *)&err;
    bat = sentinel;
    assert_int_equal(ry_vm_call_batch(p, g, 0, 3, args, NULL, &bat, &err), RY_OK);
    assert_ptr_equal(bat, sentinel); /* nothing written for no calls */
    /* wrong arity, unknown entry: errors, no results */
    ry_value *outs[2] = {NULL, NULL};
    assert_int_equal(ry_vm_call_batch(p, g, 1, 2, args, NULL, outs, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "takes 3 arguments"));
    assert_int_equal(ry_vm_call_batch(p, "nope", 1, 3, args, NULL, outs, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "no global function"));
    /* an instance whose weight has the wrong shape fails the batch, named */
    ry_value *bad = randn(&t.rng, 2, (int64_t[]){64, 15}, 0.3);
    ry_value *two[6] = {args[0], args[1], args[2], args[0], bad, args[2]};
    assert_int_equal(ry_vm_call_batch(p, g, 2, 3, two, NULL, outs, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "instance 2 of the batch"));
    assert_null(outs[0]);
    assert_null(outs[1]);
    ry_value_release(bad);
    for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- sequences of lengths 1 to 200 in one batch (a loop over a list) ---- */

static void lstm_sequences(void **state) {
    (void)state;
    ry_module *m = load_file("tests/corpus/lstm_list.relay");
    const ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    const char *g = NULL;
    ry_vm_program *p = grad_program(m, "main", &g);
    ry_rng rng;
    ry_rng_seed(&rng, 11);
    enum { B = 200 };
    ry_value *wi = randn(&rng, 2, (int64_t[]){64, 8}, 0.3), *wh = randn(&rng, 2, (int64_t[]){64, 16}, 0.3),
             *b = randn(&rng, 1, (int64_t[]){64}, 0.1);
    ry_value **args = calloc(B * 4, sizeof *args);
    for (int j = 0; j < B; j++) {
        ry_value *xs = ry_value_adt(nil, 0, NULL);
        for (int k = 0; k <= j; k++) { /* sequence j has length j + 1 */
            ry_value *f[2] = {randn(&rng, 2, (int64_t[]){1, 8}, 1.0), xs};
            xs = ry_value_adt(cons, 2, f);
        }
        args[j * 4] = xs;
        args[j * 4 + 1] = wi;
        args[j * 4 + 2] = wh;
        args[j * 4 + 3] = b;
    }
    ry_vm_opts d = {.defer_accumulation = true};
    assert_true(compare_batched(p, g, B, 4, args, &d, 1e-4, 1e-5));
    for (int j = 0; j < B; j++) ry_value_release(args[j * 4]);
    free(args);
    ry_value_release(wi);
    ry_value_release(wh);
    ry_value_release(b);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- the Tree-LSTM of models/ on SST trees ---- */

static void models_treelstm_sst(void **state) {
    (void)state;
    ry_module *m = load_file("models/treelstm.relay");
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_vocab *voc = ry_vocab_new();
    ry_treebank *tb = NULL;
    if (ry_treebank_read("tests/data/sst_small.txt", voc, true, &tb, &err)) fail_msg("%s", err.msg);
    const char *g = NULL;
    ry_vm_program *p = grad_program(m, "loss", &g);
    const ry_ctor *lf = ry_module_find_ctor(m, "Leaf"), *nd = ry_module_find_ctor(m, "Node");
    ry_rng rng;
    ry_rng_seed(&rng, 5);
    int64_t shapes[9][2] = {{18281, 300}, {150, 300}, {150, 0}, {150, 300}, {150, 0},
                            {750, 300},   {750, 0},   {5, 150}, {5, 0}};
    ry_value *params[9];
    for (int i = 0; i < 9; i++)
        params[i] = randn(&rng, shapes[i][1] ? 2 : 1, shapes[i], 0.1);
    int B = tb->ntrees;
    ry_value **args = calloc((size_t)B * 10, sizeof *args);
    for (int j = 0; j < B; j++) {
        if (ry_tree_to_value(&tb->trees[j], lf, nd, &args[j * 10], &err)) fail_msg("%s", err.msg);
        for (int i = 0; i < 9; i++) args[j * 10 + 1 + i] = params[i];
    }
    /* the trainer's options: row-sparse embedding gradients, deferred weight gradients */
    ry_vm_opts o = {.training = true, .sparse_rows = true, .defer_accumulation = true};
    assert_true(compare_batched(p, g, B, 10, args, &o, 1e-3, 1e-7));
    /* the embedding's gradient stays row-sparse when batched */
    ry_value **outs = calloc((size_t)B, sizeof *outs);
    assert_int_equal(ry_vm_call_batch(p, g, B, 10, args, &o, outs, &err), RY_OK);
    const ry_value *grads = outs[0]->tuple.fields[1];
    assert_int_equal(grads->tuple.fields[1]->kind, RY_VAL_ROWS); /* d emb (field 0 is the tree's) */
    /* inference: @predict batched */
    assert_true(compare_batched(p, "predict", B, 10, args, NULL, 1e-5, 1e-6));
    for (int j = 0; j < B; j++) {
        ry_value_release(outs[j]);
        ry_value_release(args[j * 10]);
    }
    free(outs);
    free(args);
    for (int i = 0; i < 9; i++) ry_value_release(params[i]);
    ry_treebank_free(tb);
    ry_vocab_free(voc);
    ry_vm_free(p);
    ry_module_free(m);
}

/* ---- 100 training updates, batched and not ---- */

/* models/treelstm.relay at toy sizes: embeddings 16, memory 8, 64 words. */
static char *small_treelstm(void) {
    FILE *f = fopen("models/treelstm.relay", "rb");
    assert_non_null(f);
    static char src[1 << 16];
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    src[n] = 0;
    const char *from[] = {"18281", "750", "300", "150"}, *to[] = {"64", "40", "16", "8"};
    char *out = malloc(sizeof src), *o = out;
    for (const char *s = src; *s;) {
        int k = 0;
        while (k < 4 && strncmp(s, from[k], strlen(from[k])) != 0) k++;
        if (k < 4) {
            strcpy(o, to[k]);
            o += strlen(to[k]);
            s += strlen(from[k]);
        } else {
            *o++ = *s++;
        }
    }
    *o = 0;
    return out;
}

static ry_value *word_tree(const ry_ctor *lf, const ry_ctor *nd, ry_rng *rng, int k) {
    if (k == 1) {
        ry_value *f[2] = {ry_value_tensor(ry_tensor_scalar(RY_INT32, (double)ry_rng_below(rng, 64))),
                          ry_value_tensor(ry_tensor_scalar(RY_INT32, (double)ry_rng_below(rng, 5)))};
        return ry_value_adt(lf, 2, f);
    }
    int left = 1 + (int)ry_rng_below(rng, (uint64_t)(k - 1));
    ry_value *f[3] = {word_tree(lf, nd, rng, left), word_tree(lf, nd, rng, k - left),
                      ry_value_tensor(ry_tensor_scalar(RY_INT32, (double)ry_rng_below(rng, 5)))};
    return ry_value_adt(nd, 3, f);
}

static ry_trainer *small_trainer(const char *text, bool no_autobatch) {
    ry_train_opts o = ry_train_defaults();
    o.optim.kind = RY_OPTIM_ADAGRAD;
    o.optim.lr = 0.05;
    o.threads = 1;
    o.no_autobatch = no_autobatch;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("small_treelstm.relay", text, strlen(text), &o, &tr, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("trainer: %s", err.msg);
    }
    return tr;
}

static void trainer_100_updates(void **state) {
    (void)state;
    char *text = small_treelstm();
    ry_trainer *on = small_trainer(text, false), *off = small_trainer(text, true);
    ry_rng rng;
    ry_rng_seed(&rng, 9);
    enum { K = 4 };
    ry_error err;
    for (int s = 0; s < 100; s++) {
        ry_value *data[2][K];
        double lon[K], loff[K];
        for (int i = 0; i < 2; i++) { /* each trainer's trees, of its own module, alike */
            ry_trainer *tr = i ? off : on;
            ry_module *m = ry_trainer_module(tr);
            ry_rng r = rng;
            for (int j = 0; j < K; j++)
                data[i][j] = word_tree(ry_module_find_ctor(m, "Leaf"), ry_module_find_ctor(m, "Node"), &r,
                                       1 + (int)ry_rng_below(&r, 20));
            if (i) rng = r;
        }
        if (ry_trainer_accumulate_n(on, K, 1, data[0], lon, &err) || ry_trainer_apply(on, &err) ||
            ry_trainer_accumulate_n(off, K, 1, data[1], loff, &err) || ry_trainer_apply(off, &err)) {
            ry_error_print(stderr, &err);
            fail_msg("step %d: %s", s, err.msg);
        }
        for (int j = 0; j < K; j++) {
            if (!(fabs(lon[j] - loff[j]) <= 1e-3 * fabs(loff[j]) + 1e-4))
                fail_msg("step %d tree %d: loss %.9g batched, %.9g not", s, j, lon[j], loff[j]);
            ry_value_release(data[0][j]);
            ry_value_release(data[1][j]);
        }
    }
    test_assert_close(ry_trainer_params(on)->slab, ry_trainer_params(off)->slab, 1e-3, 1e-4);
    /* ... and the calls were batched: the profile of one more step */
    ry_vm_set_profile(ry_trainer_vm(on), true);
    ry_value *data[K];
    ry_module *m = ry_trainer_module(on);
    for (int j = 0; j < K; j++)
        data[j] = word_tree(ry_module_find_ctor(m, "Leaf"), ry_module_find_ctor(m, "Node"), &rng, 12);
    assert_int_equal(ry_trainer_accumulate_n(on, K, 1, data, NULL, &err), RY_OK);
    assert_true(stacked_some(ry_trainer_vm(on)));
    for (int j = 0; j < K; j++) ry_value_release(data[j]);
    ry_trainer_free(on);
    ry_trainer_free(off);
    free(text);
}

/* ---- a GEMM of a few rows: the bits of its one-row products (blas.h) ---- */

static void few_rows_gemm(void **state) {
    (void)state;
    ry_rng rng;
    ry_rng_seed(&rng, 13);
    enum { K = 300, N = 750 };
    float *a = malloc(sizeof(float) * 8 * K), *b = malloc(sizeof(float) * K * N),
          *c = malloc(sizeof(float) * 8 * N), *r = malloc(sizeof(float) * N);
    for (int i = 0; i < 8 * K; i++) a[i] = (float)(2 * ry_rng_uniform(&rng) - 1);
    for (int i = 0; i < K * N; i++) b[i] = (float)(2 * ry_rng_uniform(&rng) - 1);
    for (int tb = 0; tb < 2; tb++)
        for (int M = 2; M <= RY_GEMM_FEW_ROWS + 1; M++)
            for (int beta = 0; beta < 2; beta++) {
                for (int i = 0; i < M * N; i++) c[i] = 0.5f;
                /* B as (K, N), or as (N, K) with tb */
                ry_cpu_gemm(false, false, tb, M, N, K, 1.5, a, K, b, tb ? K : N, beta, c, N);
                for (int m = 0; m < M; m++) {
                    for (int n = 0; n < N; n++) r[n] = 0.5f;
                    ry_cpu_gemm(false, false, tb, 1, N, K, 1.5, a + m * K, K, b, tb ? K : N, beta, r, N);
                    for (int n = 0; n < N; n++) {
                        if (M <= RY_GEMM_FEW_ROWS && c[m * N + n] != r[n])
                            fail_msg("M %d tb %d: C[%d, %d] = %.9g, its row alone %.9g", M, tb, m,
                                     n, c[m * N + n], r[n]);
                        if (!(fabs(c[m * N + n] - r[n]) <= 1e-4 * (1 + fabs(r[n]))))
                            fail_msg("M %d tb %d: C[%d, %d] = %.9g, want %.9g", M, tb, m, n,
                                     c[m * N + n], r[n]);
                    }
                }
            }
    free(a);
    free(b);
    free(c);
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(corpus_treelstm),     cmocka_unit_test(one_empty_and_errors),
        cmocka_unit_test(lstm_sequences),      cmocka_unit_test(models_treelstm_sst),
        cmocka_unit_test(trainer_100_updates), cmocka_unit_test(few_rows_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
