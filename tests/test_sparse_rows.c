/*
 * test_sparse_rows.c: row-sparse values (RY_VAL_ROWS) and the compiled
 * engine's row-sparse operators. The value API: construction and its
 * checks, densify (bit for bit a dense scatter-add), add into, describe,
 * in-place densify through tuples, refs and ADT values. The VM with
 * ry_vm_opts.sparse_rows against itself without it and against the
 * interpreter: zeros, scatter_nd, add and reshape of rows, other operators
 * densifying; take gradients of many shapes and modes, optimized or not;
 * and the Tree-LSTM's gradient (models/treelstm.relay, float64, a small
 * vocabulary), dense and row-sparse equal to 1e-12. A zeros_like (a known
 * zero, a tensor) passes a function's run-time parameter check.
 */
#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/datasets.h"
#include "relayc/pass.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static double urand(void) { /* xorshift64*, in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / (double)(1ull << 52) - 1.0;
}

static ry_tensor *rand_tensor(ry_dtype dt, int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, urand());
    return t;
}

static ry_value *ints(int ndim, const int64_t *shape, const int64_t *v) {
    ry_tensor *t = ry_tensor_new(RY_INT32, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, (double)v[i]);
    return ry_value_tensor(t);
}

/* ---- the value API ---- */

static void test_rows_value(void **state) {
    (void)state;
    const int64_t shape[2] = {5, 3}, idx[4] = {4, 0, 4, 2};
    ry_tensor *vals = rand_tensor(RY_FLOAT32, 2, (int64_t[]){4, 3});
    ry_value *r = ry_value_rows(2, shape, 4, idx, ry_tensor_retain(vals));
    assert_non_null(r);
    assert_int_equal(r->kind, RY_VAL_ROWS);
    assert_int_equal(r->rows.dtype, RY_FLOAT32);
    assert_string_equal(ry_value_kind_name(r), "a row-sparse tensor");
    char buf[96];
    assert_string_equal(ry_value_describe(r, buf, sizeof buf), "rows(4 of float32[5, 3])");
    assert_int_equal(ry_value_count_tensors(r), 1);
    ry_tensor *flat[1] = {vals};
    assert_int_equal(ry_value_flatten(r, flat, 1), 1);
    assert_null(flat[0]);
    /* densify equals the scatter_nd kernel on zeros, bit for bit */
    ry_tensor *d = ry_rows_densify(r);
    assert_non_null(d);
    const ry_op *sc = ry_op_find("scatter_nd");
    ry_attr at = {.name = "mode", .value = {.kind = RY_AV_STR, .s = "add"}};
    ry_attrs attrs = {1, &at};
    ry_tensor *z = ry_tensor_zeros(RY_FLOAT32, 2, shape), *it = ry_tensor_new(RY_INT64, 2, (int64_t[]){1, 4});
    memcpy(it->data, idx, sizeof idx);
    ry_tensor *in[3] = {z, it, vals}, *out = ry_tensor_new(RY_FLOAT32, 2, shape);
    ry_error err = {0};
    ry_kernel_ctx kc = {.op = sc, .attrs = &attrs, .err = &err};
    assert_int_equal(cpu_kernel(sc)(&kc, 3, in, 1, &out), RY_OK);
    assert_memory_equal(d->data, out->data, ry_tensor_nbytes(d));
    /* add into a dense tensor: its values plus the rows */
    ry_tensor *base = rand_tensor(RY_FLOAT32, 2, shape), *sum = ry_tensor_copy(base);
    assert_true(ry_rows_add_into(sum, r));
    for (int64_t i = 0; i < sum->size; i++)
        assert_true(fabs(ry_tensor_get(sum, i) - ry_tensor_get(base, i) - ry_tensor_get(d, i)) < 1e-6);
    ry_tensor *wrong = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){5, 2});
    assert_false(ry_rows_add_into(wrong, r));
    /* bad pieces: an index out of range, a values shape that disagrees */
    assert_null(ry_value_rows(2, shape, 4, (int64_t[]){4, 0, 5, 2}, ry_tensor_retain(vals)));
    assert_null(ry_value_rows(2, (int64_t[]){5, 4}, 4, idx, ry_tensor_retain(vals)));
    assert_null(ry_value_rows(2, shape, 3, idx, ry_tensor_retain(vals)));
    /* densify in place through a tuple holding a ref and an ADT-free tuple */
    ry_value *inner = ry_value_retain(r);
    ry_value *fields[2] = {ry_value_ref(inner), ry_value_retain(r)};
    ry_value *tup = ry_value_tuple(2, fields);
    assert_true(ry_value_densify_rows(tup));
    assert_int_equal(r->kind, RY_VAL_TENSOR); /* every holder sees the tensor */
    assert_memory_equal(r->tensor->data, d->data, ry_tensor_nbytes(d));
    /* an empty rows value is the zero tensor */
    ry_tensor *none = ry_tensor_new(RY_FLOAT64, 2, (int64_t[]){0, 3});
    ry_value *zr = ry_value_rows(2, shape, 0, NULL, none);
    ry_tensor *zd = ry_rows_densify(zr);
    for (int64_t i = 0; i < zd->size; i++) assert_true(ry_tensor_get(zd, i) == 0);
    ry_tensor *rel[] = {d, z, it, out, base, sum, wrong, vals, zd};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) ry_tensor_release(rel[i]);
    ry_value_release(zr);
    ry_value_release(tup);
    ry_value_release(r);
}

/* ---- comparing results ---- */

/* a and b (values of one type) hold the same tensors to tol (0: bit for
 * bit); a row-sparse value compares as its dense tensor. */
static void assert_same(const ry_value *a, const ry_value *b, double tol) {
    if (a->kind == RY_VAL_ROWS || b->kind == RY_VAL_ROWS) {
        ry_tensor *da = a->kind == RY_VAL_ROWS ? ry_rows_densify(a) : ry_tensor_retain(a->tensor);
        ry_tensor *db = b->kind == RY_VAL_ROWS ? ry_rows_densify(b) : ry_tensor_retain(b->tensor);
        ry_value *va = ry_value_tensor(da), *vb = ry_value_tensor(db);
        assert_same(va, vb, tol);
        ry_value_release(va);
        ry_value_release(vb);
        return;
    }
    assert_int_equal(a->kind, b->kind);
    switch (a->kind) {
    case RY_VAL_TENSOR:
        assert_int_equal(a->tensor->dtype, b->tensor->dtype);
        if (tol == 0) {
            assert_true(ry_tensor_same_shape(a->tensor, b->tensor));
            for (int64_t i = 0; i < a->tensor->size; i++)
                if (ry_tensor_get(a->tensor, i) != ry_tensor_get(b->tensor, i))
                    fail_msg("element %lld: %.17g vs %.17g", (long long)i, ry_tensor_get(a->tensor, i),
                             ry_tensor_get(b->tensor, i));
        } else {
            test_assert_close(a->tensor, b->tensor, tol, tol);
        }
        return;
    case RY_VAL_TUPLE:
        assert_int_equal(a->tuple.n, b->tuple.n);
        for (int i = 0; i < a->tuple.n; i++) assert_same(a->tuple.fields[i], b->tuple.fields[i], tol);
        return;
    case RY_VAL_ADT:
        assert_string_equal(a->adt.ctor->name, b->adt.ctor->name);
        assert_int_equal(a->adt.n, b->adt.n);
        for (int i = 0; i < a->adt.n; i++) assert_same(a->adt.fields[i], b->adt.fields[i], tol);
        return;
    default: fail_msg("unexpected %s", ry_value_kind_name(a));
    }
}

/* Counts the RY_VAL_ROWS values in a result (tuples only). */
static int count_rows(const ry_value *v) {
    if (v->kind == RY_VAL_ROWS) return 1;
    int n = 0;
    if (v->kind == RY_VAL_TUPLE)
        for (int i = 0; i < v->tuple.n; i++) n += count_rows(v->tuple.fields[i]);
    return n;
}

static ry_value *vm_run_opts(ry_vm_program *p, const char *entry, int n, ry_value *const *a,
                             const ry_vm_opts *o) {
    ry_value *out = NULL;
    ry_error err = {0};
    if (ry_vm_call(p, entry, n, a, o, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("vm (sparse %d): %s", o->sparse_rows, err.msg);
    }
    return out;
}

static ry_value *vm_run(ry_vm_program *p, const char *entry, int n, ry_value *const *a, bool sparse) {
    ry_vm_opts o = {.sparse_rows = sparse};
    return vm_run_opts(p, entry, n, a, &o);
}

/* Runs entry on the interpreter and on the VM without and with sparse
 * rows; the three agree to tol. Returns how many row-sparse values the
 * sparse run gave back. */
static int run_three(ry_module *m, const char *entry, int n, ry_value *const *a, double tol) {
    ry_vm_program *p = NULL;
    ry_value *ref = NULL;
    ry_error err = {0};
    if (ry_interp_call(m, entry, n, a, NULL, &ref, &err) != RY_OK || ry_vm_compile(m, NULL, &p, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s", err.msg);
    }
    ry_value *dense = vm_run(p, entry, n, a, false), *sparse = vm_run(p, entry, n, a, true);
    assert_int_equal(count_rows(dense), 0);
    int k = count_rows(sparse);
    assert_same(dense, ref, 0);
    assert_same(sparse, dense, tol);
    /* a second sparse call on the same program (kept machine, slots), and
     * one without the memory plan (fresh buffers: a dying dense operand of
     * add takes the rows in place) */
    ry_value *again = vm_run(p, entry, n, a, true);
    assert_same(again, sparse, 0);
    ry_value_release(again);
    ry_vm_opts np = {.sparse_rows = true, .no_plan = true};
    again = vm_run_opts(p, entry, n, a, &np);
    assert_same(again, sparse, 0);
    ry_value_release(again);
    ry_value_release(ref);
    ry_value_release(dense);
    ry_value_release(sparse);
    ry_vm_free(p);
    return k;
}

/* ---- the row-sparse operators ---- */

/* A row-sparse value stands for a dense tensor of its dtype and shape in
 * the run-time parameter check: symbolic dims bind from its dense shape,
 * and a mismatch names the parameter. */
static void test_rows_pass_param_check(void **state) {
    (void)state;
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @f(%a: Tensor[(n, 3), float32], %b: Tensor[(n, 3), float32]) {\n"
                              "  add(%a, %b)\n"
                              "}\n",
                              true);
    const ry_expr *fn = ry_module_find_global(m, "f")->func;
    const int64_t shape[2] = {5, 3}, idx[2] = {1, 4};
    ry_value *r = ry_value_rows(2, shape, 2, idx, rand_tensor(RY_FLOAT32, 2, (int64_t[]){2, 3}));
    ry_value *same = ry_value_tensor(rand_tensor(RY_FLOAT32, 2, shape));
    ry_value *other = ry_value_tensor(rand_tensor(RY_FLOAT32, 2, (int64_t[]){4, 3}));
    ry_error err = {0};
    ry_value *ok[2] = {r, same}, *bad[2] = {other, r};
    assert_int_equal(ry_value_check_params(fn, ok, RY_NO_SPAN, &err), RY_OK);
    assert_int_equal(ry_value_check_params(fn, bad, RY_NO_SPAN, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "parameter %b"));
    assert_non_null(strstr(err.msg, "n is 4 from parameter %a but 5 here"));
    ry_value_release(r);
    ry_value_release(same);
    ry_value_release(other);
    ry_module_free(m);
}

static void test_vm_rows_ops(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        /* scatter into zeros: rows; a second scatter appends; rows + rows */
        "def @rows(%e: Tensor[(7, 3), float64], %i: Tensor[(1, 4), int32], %u: Tensor[(4, 3), float64]) {\n"
        "  %0 = zeros_like(%e);\n"
        "  %1 = scatter_nd(%0, %i, %u, mode=\"add\");\n"
        "  %2 = scatter_nd(%1, %i, multiply(%u, %u), mode=\"add\");\n"
        "  %3 = add(%1, %2);\n"
        "  (%3, add(%0, %1), reshape(%2, newshape=[7, 3, 1]), zeros(shape=[4, 2], dtype=\"float64\"))\n"
        "}\n"
        /* rows meeting dense tensors: add scatters (either side), others densify */
        "def @mixed(%e: Tensor[(7, 3), float64], %i: Tensor[(2, 2), int32], %u: Tensor[(2, 2, 3), float64]) {\n"
        "  %0 = scatter_nd(zeros_like(%e), reshape(%i, newshape=[1, 2, 2]), %u, mode=\"add\");\n"
        "  %1 = add(%e, %0);\n"
        "  %2 = add(%0, tanh(%e));\n"
        "  %3 = multiply(%0, %e);\n"
        "  %4 = add(%0, sum(%e, axis=[0]));\n" /* broadcasting: densified */
        "  %5 = reshape(%0, newshape=[21]);\n"  /* axis 0 changes: densified */
        "  %6 = (%0, %e);\n"                    /* inside a tuple argument: densified */
        "  (%1, %2, %3, %4, %5, add(zeros_like(%e), %e), concatenate(%6, axis=1))\n"
        "}\n";
    ry_module *m = test_parse(text, true);
    ry_value *a[3] = {ry_value_tensor(rand_tensor(RY_FLOAT64, 2, (int64_t[]){7, 3})),
                      ints(2, (int64_t[]){1, 4}, (int64_t[]){6, 0, 6, 2}),
                      ry_value_tensor(rand_tensor(RY_FLOAT64, 2, (int64_t[]){4, 3}))};
    /* %3, add(%0, %1) and the reshape stay rows; zeros is dense */
    assert_int_equal(run_three(m, "rows", 3, a, 1e-12), 3);
    ry_value_release(a[1]);
    ry_value_release(a[2]);
    a[1] = ints(2, (int64_t[]){2, 2}, (int64_t[]){3, 3, 0, 6});
    a[2] = ry_value_tensor(rand_tensor(RY_FLOAT64, 3, (int64_t[]){2, 2, 3}));
    assert_int_equal(run_three(m, "mixed", 3, a, 1e-12), 0);
    for (int i = 0; i < 3; i++) ry_value_release(a[i]);
    ry_module_free(m);
}

/* The gradient of a table looked up once per step of a loop: rows added
 * step after step stay rows up to twice the table's rows, then
 * become one dense sum (rows_ops.c): the same values either way, up to
 * the order of additions where rows repeat. */
static void test_vm_rows_accumulate(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @loop(%k: int32, %h: Tensor[(2, 2), float64], %e: Tensor[(3, 2), float64], %x: Tensor[(2, 9), int32]) -> Tensor[(2, 2), float64] {\n"
        "  if (%k == 0) {\n"
        "    %h\n"
        "  } else {\n"
        "    %0 = subtract(%k, 1);\n"
        "    %1 = take(%x, %0, axis=1);\n"
        "    %2 = take(%e, %1, axis=0);\n"
        "    %3 = tanh(add(%h, %2));\n"
        "    @loop(%0, %3, %e, %x)\n"
        "  }\n"
        "}\n"
        "def @main(%e: Tensor[(3, 2), float64], %x: Tensor[(2, 9), int32], %h: Tensor[(2, 2), float64], %k: int32) {\n"
        "  %0 = @loop(%k, %h, %e, %x);\n"
        "  sum(multiply(%0, %0))\n"
        "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err = {0};
    const char *g = NULL;
    assert_int_equal(ry_grad(m, "main", NULL, NULL, &g, &err), RY_OK);
    ry_value *a[4] = {ry_value_tensor(rand_tensor(RY_FLOAT64, 2, (int64_t[]){3, 2})),
                      ints(2, (int64_t[]){2, 9}, (int64_t[]){2, 0, 1, 1, 2, 0, 0, 2, 1,
                                                             0, 0, 2, 1, 2, 2, 1, 0, 1}),
                      ry_value_tensor(rand_tensor(RY_FLOAT64, 2, (int64_t[]){2, 2})), NULL};
    for (int k = 1; k <= 9; k++) { /* 2 rows a step: dense past 6 */
        a[3] = ry_value_tensor(ry_tensor_scalar(RY_INT32, k));
        run_three(m, g, 4, a, 1e-12);
        ry_value_release(a[3]);
    }
    for (int i = 0; i < 3; i++) ry_value_release(a[i]);
    ry_module_free(m);
}

/* An index out of range in a row-sparse scatter is the kernel's error. */
static void test_vm_rows_error(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%e: Tensor[(4, 2), float32], %i: Tensor[(1, 2), int32], %u: Tensor[(2, 2), float32]) {\n"
                       "  scatter_nd(zeros_like(%e), %i, %u, mode=\"add\")\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_value *a[3] = {ry_value_tensor(rand_tensor(RY_FLOAT32, 2, (int64_t[]){4, 2})),
                      ints(2, (int64_t[]){1, 2}, (int64_t[]){1, -1}),
                      ry_value_tensor(rand_tensor(RY_FLOAT32, 2, (int64_t[]){2, 2}))};
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, NULL, &p, &err), RY_OK);
    for (int s = 0; s < 2; s++) {
        ry_vm_opts o = {.sparse_rows = s == 1};
        ry_value *out = NULL;
        assert_int_equal(ry_vm_call(p, "main", 3, a, &o, &out, &err), RY_ERR);
        assert_non_null(strstr(err.msg, "scatter_nd: index -1 out of range [0, 4) in dim 0"));
        assert_int_equal(err.line, 3);
    }
    ry_vm_free(p);
    for (int i = 0; i < 3; i++) ry_value_release(a[i]);
    ry_module_free(m);
}

/* ---- take gradients, dense and row-sparse ---- */

typedef struct tcase {
    const char *data, *ind, *call;
    int ndim;
    int64_t shape[4];
    int kdim;
    int64_t kshape[2];
    int64_t idx[8];
    int rows; /* row-sparse gradients expected with sparse_rows */
} tcase;

static const tcase tcases[] = {
    {"(6, 3)", "(5)", "take(%x, %i, axis=0)", 2, {6, 3}, 1, {5}, {5, 0, 5, 2, 0}, 1},
    {"(6, 3)", "(5)", "take(%x, %i, axis=0, mode=\"wrap\")", 2, {6, 3}, 1, {5}, {-1, 0, 11, 2, 6}, 1},
    {"(6)", "(2, 3)", "take(%x, %i, axis=0, mode=\"fast\")", 1, {6}, 2, {2, 3}, {1, 1, 0, 5, 1, 3}, 1},
    {"(4, 2, 3)", "(2, 2)", "take(%x, %i, axis=0, mode=\"clip\")", 3, {4, 2, 3}, 2, {2, 2}, {-2, 3, 9, 3}, 1},
    {"(2, 5, 3)", "(4)", "take(%x, %i, axis=1)", 3, {2, 5, 3}, 1, {4}, {4, 0, 4, 7}, 0},
    {"(1, 5, 2)", "(3)", "take(%x, %i, axis=1, mode=\"wrap\")", 3, {1, 5, 2}, 1, {3}, {2, -3, 4}, 0},
    {"(3, 4)", "(6)", "take(%x, %i)", 2, {3, 4}, 1, {6}, {11, 0, 11, 13, 5, -1}, 0},
};

static void test_vm_take_grads(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof tcases / sizeof tcases[0]; k++) {
        const tcase *c = &tcases[k];
        for (int level = 0; level < 3; level++) {
            char text[512];
            snprintf(text, sizeof text,
                     "#[version = \"0.0.5\"]\n"
                     "def @main(%%x: Tensor[%s, float64], %%i: Tensor[%s, int32]) {\n"
                     "  %%0 = %s;\n"
                     "  (multiply(%%0, tanh(%%0)), %s)\n"
                     "}\n",
                     c->data, c->ind, c->call, c->call);
            ry_module *m = test_parse(text, true);
            ry_error err = {0};
            const char *g = NULL;
            assert_int_equal(ry_grad(m, "main", NULL, NULL, &g, &err), RY_OK);
            if (level > 0 && ry_optimize(m, level, &err) != RY_OK) fail_msg("optimize: %s", err.msg);
            ry_value *a[2] = {ry_value_tensor(rand_tensor(RY_FLOAT64, c->ndim, c->shape)),
                              ints(c->kdim, c->kshape, c->idx)};
            int rows = run_three(m, g, 2, a, 1e-12);
            if (rows != c->rows) fail_msg("case %zu level %d: %d row-sparse results, expected %d", k, level, rows, c->rows);
            ry_value_release(a[0]);
            ry_value_release(a[1]);
            ry_module_free(m);
        }
    }
}

/* ---- the Tree-LSTM ----
 * models/treelstm.relay with a 64-word table (the trees' words are the
 * first ids of a fresh vocabulary), in float64: the gradient of @loss on
 * the VM with row-sparse embeddings equals the dense one to 1e-12, and the
 * embedding's gradient comes back row-sparse, holding a row per leaf. */
static char *small_treelstm(void) {
    FILE *f = fopen("models/treelstm.relay", "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *out = ry_malloc(n + 1), *o = out;
    for (const char *p = buf; *p;) {
        if (!strncmp(p, "18281", 5)) {
            memcpy(o, "64", 2), o += 2, p += 5;
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return out;
}

static void test_treelstm_grad(void **state) {
    (void)state;
    char *text = small_treelstm();
    ry_module *m = test_parse(text, true);
    ry_free(text);
    ry_error err = {0};
    const char *g = NULL;
    if (ry_module_to_float64(m, &err) || ry_grad(m, "loss", NULL, NULL, &g, &err) || ry_optimize(m, 1, &err))
        fail_msg("%s", err.msg);
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *tb = NULL;
    assert_int_equal(ry_treebank_read("tests/models/treelstm_trees.txt", vocab, true, &tb, &err), RY_OK);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    const int64_t shapes[9][2] = {{64, 300}, {150, 300}, {150, 0}, {150, 300}, {150, 0},
                                  {750, 300}, {750, 0}, {5, 150}, {5, 0}};
    ry_value *a[10];
    for (int i = 0; i < 9; i++) {
        ry_tensor *t = rand_tensor(RY_FLOAT64, shapes[i][1] ? 2 : 1, shapes[i]);
        for (int64_t j = 0; j < t->size; j++) ry_tensor_set(t, j, 0.2 * ry_tensor_get(t, j));
        a[1 + i] = ry_value_tensor(t);
    }
    ry_vm_program *p = NULL;
    assert_int_equal(ry_vm_compile(m, NULL, &p, &err), RY_OK);
    for (int k = 0; k < tb->ntrees; k++) {
        assert_int_equal(ry_tree_to_value(&tb->trees[k], leaf, node, &a[0], &err), RY_OK);
        ry_value *dense = vm_run(p, g, 10, a, false), *sparse = vm_run(p, g, 10, a, true);
        ry_value *ref = NULL;
        assert_int_equal(ry_interp_call(m, g, 10, a, NULL, &ref, &err), RY_OK);
        assert_same(dense, ref, 0);
        assert_same(sparse, dense, 1e-12);
        const ry_value *ge = sparse->tuple.fields[1]->tuple.fields[1];
        assert_int_equal(ge->kind, RY_VAL_ROWS);
        assert_true(ge->rows.n >= 1); /* a row per leaf */
        /* other gradients come back row-sparse only when nothing reached
         * them (u and bu of a one-leaf tree): empty, the zero tensor */
        for (int i = 2; i < 10; i++) {
            const ry_value *gi = sparse->tuple.fields[1]->tuple.fields[i];
            assert_true(gi->kind == RY_VAL_TENSOR || (gi->kind == RY_VAL_ROWS && gi->rows.n == 0));
        }
        ry_value_release(ref);
        ry_value_release(dense);
        ry_value_release(sparse);
        ry_value_release(a[0]);
    }
    ry_vm_free(p);
    for (int i = 1; i < 10; i++) ry_value_release(a[i]);
    ry_treebank_free(tb);
    ry_vocab_free(vocab);
    ry_module_free(m);
}

/* zeros_like (a known zero: a tensor, whatever the mode) may reach a
 * parameter whose type has symbolic dims (checked at run time), and
 * reshapes of it, adds to it and scatters into it give what zeros do. */
static void test_zeros_like_reach_calls(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @f(%h: Tensor[(n, 3), float32], %x: Tensor[(n, 3), float32]) {\n"
                       "  add(%h, %x)\n"
                       "}\n"
                       "def @main(%x: Tensor[(2, 3), float32]) {\n"
                       "  %0 = zeros_like(%x);\n"
                       "  %1 = reshape(%0, newshape=[3, 2]);\n"
                       "  (@f(%0, %x), add(%x, %0), add(%0, %x), multiply(%0, %x), %1,\n"
                       "   reshape(%1, newshape=[6]), %0, sum(%1, axis=[1]))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_value *x = ry_value_tensor(rand_tensor(RY_FLOAT32, 2, (int64_t[]){2, 3}));
    assert_int_equal(run_three(m, "main", 1, &x, 0), 0);
    ry_value_release(x);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_value),
        cmocka_unit_test(test_rows_pass_param_check),
        cmocka_unit_test(test_vm_rows_ops),
        cmocka_unit_test(test_vm_rows_accumulate),
        cmocka_unit_test(test_vm_rows_error),
        cmocka_unit_test(test_vm_take_grads),
        cmocka_unit_test(test_treelstm_grad),
        cmocka_unit_test(test_zeros_like_reach_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
