/*
 * test_sparse.c: scatter_nd and gather_nd (TVM's semantics) and take's
 * gradient through them. Kernels run in a one-call program on the
 * interpreter and the VM against NumPy results (tools/gen_sparse_tests.py,
 * tests/sparse/); relations are checked for shapes and located errors;
 * every gradient rule, take's at every axis and mode, and second
 * derivatives through take's gradient are checked against central finite
 * differences in float64. The row-sparse values are tested in
 * test_sparse_rows.c.
 */
#include "test_util.h"

#include "relayc/ad.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* xorshift64*, in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / (double)(1ull << 52) - 1.0;
}

static ry_value *rand_f64(int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT64, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, urand());
    return ry_value_tensor(t);
}

static ry_value *ints(ry_dtype dt, int ndim, const int64_t *shape, const int64_t *v) {
    ry_tensor *t = ry_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, (double)v[i]);
    return ry_value_tensor(t);
}

/* "Tensor[(5, 3), float32]" */
static void type_text(const ry_tensor *t, char *buf, size_t n) {
    int k = snprintf(buf, n, "Tensor[(");
    for (int d = 0; d < t->ndim; d++)
        k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    snprintf(buf + k, n - (size_t)k, "), %s]", ry_dtype_name(t->dtype));
}

static ry_value *run_interp(ry_module *m, const char *entry, int n, ry_value *const *a) {
    ry_value *out = NULL;
    ry_error err = {0};
    if (ry_interp_call(m, entry, n, a, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("interpreter: %s", err.msg);
    }
    return out;
}

static ry_value *run_vm(ry_module *m, const char *entry, int n, ry_value *const *a) {
    ry_vm_program *p = NULL;
    ry_value *out = NULL;
    ry_error err = {0};
    if (ry_vm_compile(m, NULL, &p, &err) != RY_OK || ry_vm_call(p, entry, n, a, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_vm_free(p);
        fail_msg("vm: %s", err.msg);
    }
    ry_vm_free(p);
    return out;
}

/* ---- kernels against NumPy ----
 * One program per case: `def @main(%a, %b[, %c]) { op(%a, %b[, %c], attrs) }`
 * with the fixture's types, run on both engines; floats to 1e-6 (float32)
 * or exactly, integers exactly. */
typedef struct kcase {
    const char *name, *op, *attrs;
    int nin;
} kcase;

static const kcase kcases[] = {
    {"sc_add_rows", "scatter_nd", "mode=\"add\"", 3},
    {"sc_update_elems", "scatter_nd", "mode=\"update\"", 3},
    {"sc_add_int_2d", "scatter_nd", "mode=\"add\"", 3},
    {"sc_add_vec_y2", "scatter_nd", "mode=\"add\"", 3},
    {"sc_update_rows", "scatter_nd", "", 3}, /* TVM's default mode: update */
    {"sc_add_i64", "scatter_nd", "mode=\"add\"", 3},
    {"sc_add_f16", "scatter_nd", "mode=\"add\"", 3},
    {"ga_rows", "gather_nd", "", 2},
    {"ga_pairs", "gather_nd", "", 2},
    {"ga_elems_int", "gather_nd", "batch_dims=0", 2},
    {"ga_bool", "gather_nd", "", 2},
    {"ga_batch1", "gather_nd", "batch_dims=1", 2},
};

static void run_kcase(const kcase *kc) {
    char path[256], text[1024], ty[3][96];
    ry_value *in[3];
    for (int i = 0; i < kc->nin; i++) {
        snprintf(path, sizeof path, "tests/sparse/%s_in%d.npy", kc->name, i);
        in[i] = ry_value_tensor(test_npy(path));
        type_text(in[i]->tensor, ty[i], sizeof ty[i]);
    }
    snprintf(path, sizeof path, "tests/sparse/%s_out.npy", kc->name);
    ry_tensor *want = test_npy(path);
    if (kc->nin == 3)
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\ndef @main(%%a: %s, %%b: %s, %%c: %s) {\n  %s(%%a, %%b, %%c%s%s)\n}\n",
                 ty[0], ty[1], ty[2], kc->op, kc->attrs[0] ? ", " : "", kc->attrs);
    else
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\ndef @main(%%a: %s, %%b: %s) {\n  %s(%%a, %%b%s%s)\n}\n", ty[0],
                 ty[1], kc->op, kc->attrs[0] ? ", " : "", kc->attrs);
    ry_module *m = test_parse(text, true);
    ry_value *outs[2] = {run_interp(m, "main", kc->nin, in), run_vm(m, "main", kc->nin, in)};
    for (int e = 0; e < 2; e++) {
        assert_int_equal(outs[e]->kind, RY_VAL_TENSOR);
        assert_int_equal(outs[e]->tensor->dtype, want->dtype);
        double tol = want->dtype == RY_FLOAT32 ? 1e-6 : 0;
        test_assert_close(outs[e]->tensor, want, tol, tol);
        ry_value_release(outs[e]);
    }
    ry_tensor_release(want);
    for (int i = 0; i < kc->nin; i++) ry_value_release(in[i]);
    ry_module_free(m);
}

static void test_kernels(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof kcases / sizeof kcases[0]; i++) run_kcase(&kcases[i]);
}

/* ---- relations and run-time errors ---- */

/* Type-checks text; expects an error whose message contains want. */
static void expect_type_error(const char *body_params, const char *body, const char *want) {
    char text[1024];
    snprintf(text, sizeof text, "#[version = \"0.0.5\"]\ndef @main(%s) {\n  %s\n}\n", body_params, body);
    ry_module *m = NULL;
    ry_error err = {0};
    assert_int_equal(ry_module_parse("t.relay", text, strlen(text), &m, &err), RY_OK);
    assert_int_equal(ry_module_typecheck(m, &err), RY_ERR);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    assert_int_equal(err.line, 3);
    ry_module_free(m);
}

static void test_relations(void **state) {
    (void)state;
    /* inferred result types, Any and symbolic dims included */
    const char *ok = "#[version = \"0.0.5\"]\n"
                     "def @main(%d: Tensor[(n, 4, 3), float32], %i: Tensor[(2, ?), int64],\n"
                     "          %u: Tensor[(?, 3), float32], %b: Tensor[(1, 2, 5), int32]) {\n"
                     "  (scatter_nd(%d, %i, %u, mode=\"add\"), gather_nd(%d, %i),\n"
                     "   gather_nd(%d, %b, batch_dims=1, index_rank=1))\n"
                     "}\n";
    ry_module *m = test_parse(ok, true);
    char buf[256];
    ry_type_str(m->globals[0]->func->type, buf, sizeof buf);
    if (!strstr(buf, "(Tensor[(n, 4, 3), float32], Tensor[(?, 3), float32], Tensor[(2, 5, 3), float32])"))
        fail_msg("type %s", buf);
    ry_module_free(m);
    const char *p3 = "%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), int32], %u: Tensor[(4, 3), float32]";
    expect_type_error(p3, "scatter_nd(%d, %i, %u, mode=\"mul\")", "mode must be \"add\" or \"update\"");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), float32], %u: Tensor[(4, 3), float32]",
                      "scatter_nd(%d, %i, %u)", "indices must be integers");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(3, 4), int32], %u: Tensor[(4), float32]",
                      "scatter_nd(%d, %i, %u)", "indices index 3 dims of data of rank 2");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), int32], %u: Tensor[(4, 2), float32]",
                      "scatter_nd(%d, %i, %u)", "updates dim 1 is 2, expected 3");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), int32], %u: Tensor[(4, 3), float64]",
                      "scatter_nd(%d, %i, %u)", "updates are float64, data float32");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), int32], %u: Tensor[(4), float32]",
                      "scatter_nd(%d, %i, %u)", "updates must have rank 2");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(?, 4), int32]", "gather_nd(%d, %i)",
                      "first dim of indices (M) must be a constant");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4), int32]",
                      "gather_nd(%d, %i, index_rank=2)", "index_rank=2 but indices index 1 dims");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(2, 4), int32]",
                      "gather_nd(%d, %i, batch_dims=1)", "indices index 2 dims after 1 batch dims");
    expect_type_error("%d: Tensor[(5, 3), float32], %i: Tensor[(1, 4, 2), int32]",
                      "gather_nd(%d, %i, batch_dims=1)", "batch dim 0 is 5 in data, 4 in indices");
}

/* An index out of range is a located run-time error on both engines. */
static void test_index_out_of_range(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @s(%d: Tensor[(5, 3), float32], %i: Tensor[(1, 2), int32], %u: Tensor[(2, 3), float32]) {\n"
                       "  scatter_nd(%d, %i, %u, mode=\"add\")\n"
                       "}\n"
                       "def @g(%d: Tensor[(5, 3), float32], %i: Tensor[(1, 2), int32]) {\n"
                       "  gather_nd(%d, %i)\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_tensor *d = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){5, 3});
    ry_tensor *u = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){2, 3});
    ry_value *a[3] = {ry_value_tensor(d), ints(RY_INT32, 2, (int64_t[]){1, 2}, (int64_t[]){1, 5}),
                      ry_value_tensor(u)};
    ry_value *out = NULL;
    ry_vm_program *p = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, NULL, &p, &err), RY_OK);
    for (int f = 0; f < 2; f++) {
        const char *entry = f ? "g" : "s";
        int n = f ? 2 : 3;
        const char *want = f ? "gather_nd: index 5 out of range [0, 5) in dim 0"
                             : "scatter_nd: index 5 out of range [0, 5) in dim 0";
        assert_int_equal(ry_interp_call(m, entry, n, a, NULL, &out, &err), RY_ERR);
        assert_non_null(strstr(err.msg, want));
        assert_int_equal(err.line, f ? 6 : 3);
        assert_int_equal(ry_vm_call(p, entry, n, a, NULL, &out, &err), RY_ERR);
        assert_non_null(strstr(err.msg, want));
        assert_null(out);
    }
    ry_vm_free(p);
    for (int i = 0; i < 3; i++) ry_value_release(a[i]);
    ry_module_free(m);
}

/* ---- gradients against finite differences (float64) ---- */

static void gradcheck(const char *text, int nargs, ry_value **args, bool second) {
    ry_module *m = test_parse(text, true);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .second_order = second};
    ry_gradcheck_report rep;
    ry_error err = {0};
    if (ry_gradcheck(m, "main", nargs, args, &o, &rep, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        fail_msg("gradcheck could not run: %s", err.msg);
    }
    int checked = 0;
    for (int i = 0; i < rep.nparams; i++) {
        checked += rep.params[i].checked;
        if (rep.params[i].checked && !rep.params[i].ok)
            fprintf(stderr, "%%%s: abs %.3g rel %.3g\n", rep.params[i].name, rep.params[i].max_abs,
                    rep.params[i].max_rel);
        if (second && rep.second[i].checked && !rep.second[i].ok)
            fprintf(stderr, "second order %%%s: abs %.3g rel %.3g\n", rep.second[i].name,
                    rep.second[i].max_abs, rep.second[i].max_rel);
    }
    assert_true(checked > 0);
    if (!rep.ok) fail_msg("gradient mismatch in\n%s", text);
    ry_module_free(m);
}

static void test_grad_scatter_gather(void **state) {
    (void)state;
    /* scatter_nd add with repeated rows, update with distinct elements,
     * gather_nd of rows and of pairs; squares keep the adjoints non-constant */
    const char *add = "#[version = \"0.0.5\"]\n"
                      "def @main(%d: Tensor[(5, 3), float64], %i: Tensor[(1, 4), int32], %u: Tensor[(4, 3), float64]) {\n"
                      "  %0 = scatter_nd(%d, %i, %u, mode=\"add\");\n"
                      "  multiply(%0, %0)\n"
                      "}\n";
    ry_value *a[3] = {rand_f64(2, (int64_t[]){5, 3}), ints(RY_INT32, 2, (int64_t[]){1, 4}, (int64_t[]){4, 0, 4, 2}),
                      rand_f64(2, (int64_t[]){4, 3})};
    gradcheck(add, 3, a, true);
    const char *upd = "#[version = \"0.0.5\"]\n"
                      "def @main(%d: Tensor[(5, 3), float64], %i: Tensor[(2, 3), int64], %u: Tensor[(3), float64]) {\n"
                      "  %0 = scatter_nd(%d, %i, %u, mode=\"update\");\n"
                      "  multiply(%0, tanh(%0))\n"
                      "}\n";
    ry_value *b[3] = {rand_f64(2, (int64_t[]){5, 3}),
                      ints(RY_INT64, 2, (int64_t[]){2, 3}, (int64_t[]){4, 0, 4, 2, 1, 0}),
                      rand_f64(1, (int64_t[]){3})};
    gradcheck(upd, 3, b, true);
    const char *gat = "#[version = \"0.0.5\"]\n"
                      "def @main(%d: Tensor[(3, 4, 2), float64], %i: Tensor[(2, 2, 3), int32]) {\n"
                      "  %0 = gather_nd(%d, %i);\n"
                      "  (multiply(%0, %0), gather_nd(sigmoid(%d), %i))\n"
                      "}\n";
    ry_value *c[2] = {rand_f64(3, (int64_t[]){3, 4, 2}),
                      ints(RY_INT32, 3, (int64_t[]){2, 2, 3}, (int64_t[]){0, 2, 1, 2, 2, 0, 3, 0, 1, 1, 1, 3})};
    gradcheck(gat, 2, c, true);
    for (int i = 0; i < 3; i++) {
        ry_value_release(a[i]);
        ry_value_release(b[i]);
        if (i < 2) ry_value_release(c[i]);
    }
}

/* take's gradient at every axis and mode: repeated indices, indices out
 * of range for clip (clipped) and wrap (wrapped, negative ones too), K of
 * rank 2, and second derivatives through the scatter_nd it builds. */
typedef struct tcase {
    const char *data, *ind, *call;
    int ndim;
    int64_t shape[4];
    int kdim;
    int64_t kshape[2];
    int64_t idx[8];
} tcase;

static const tcase tcases[] = {
    {"(6, 3)", "(5)", "take(%x, %i, axis=0)", 2, {6, 3}, 1, {5}, {5, 0, 5, 2, 0}},
    {"(6)", "(2, 3)", "take(%x, %i, axis=0, mode=\"fast\")", 1, {6}, 2, {2, 3}, {1, 1, 0, 5, 1, 3}},
    {"(4, 2, 3)", "(2, 2)", "take(%x, %i, axis=0, mode=\"clip\")", 3, {4, 2, 3}, 2, {2, 2}, {-2, 3, 9, 3}},
    {"(4, 2, 3)", "(5)", "take(%x, %i, axis=0, mode=\"wrap\")", 3, {4, 2, 3}, 1, {5}, {-1, 3, 6, 0, -5}},
    {"(2, 5, 3)", "(4)", "take(%x, %i, axis=1)", 3, {2, 5, 3}, 1, {4}, {4, 0, 4, 7}},
    {"(2, 5, 3)", "(2, 2)", "take(%x, %i, axis=1, mode=\"wrap\")", 3, {2, 5, 3}, 2, {2, 2}, {-1, 6, 4, 4}},
    {"(3, 2, 4)", "(3)", "take(%x, %i, axis=-1, mode=\"fast\")", 3, {3, 2, 4}, 1, {3}, {3, 0, 3}},
    {"(1, 5, 2)", "(3)", "take(%x, %i, axis=1)", 3, {1, 5, 2}, 1, {3}, {2, 2, 4}},
    {"(3, 4)", "(6)", "take(%x, %i)", 2, {3, 4}, 1, {6}, {11, 0, 11, 13, 5, -1}},
    {"(3, 4)", "(2, 2)", "take(%x, %i, mode=\"wrap\")", 2, {3, 4}, 2, {2, 2}, {-1, 12, 25, 3}},
};

static void test_grad_take(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof tcases / sizeof tcases[0]; k++) {
        const tcase *c = &tcases[k];
        char text[512];
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\n"
                 "def @main(%%x: Tensor[%s, float64], %%i: Tensor[%s, int32]) {\n"
                 "  %%0 = %s;\n"
                 "  multiply(%%0, tanh(%%0))\n"
                 "}\n",
                 c->data, c->ind, c->call);
        ry_value *a[2] = {rand_f64(c->ndim, c->shape), ints(RY_INT32, c->kdim, c->kshape, c->idx)};
        gradcheck(text, 2, a, true);
        ry_value_release(a[0]);
        ry_value_release(a[1]);
    }
}

/* The gradient program of an embedding lookup holds a scatter_nd into
 * zeros and no one_hot, GEMM or transpose. */
static void test_take_grad_program(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%e: Tensor[(100, 8), float32], %i: Tensor[(?), int32]) {\n"
                       "  take(%e, %i, axis=0)\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err = {0};
    assert_int_equal(ry_grad(m, "main", NULL, NULL, NULL, &err), RY_OK);
    char *p = ry_module_print(m);
    assert_non_null(strstr(p, "scatter_nd("));
    assert_non_null(strstr(p, "zeros_like("));
    assert_null(strstr(p, "one_hot"));
    assert_null(strstr(p, "nn.dense"));
    assert_null(strstr(p, "transpose"));
    ry_free(p);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_relations),
        cmocka_unit_test(test_index_out_of_range),
        cmocka_unit_test(test_grad_scatter_gather),
        cmocka_unit_test(test_grad_take),
        cmocka_unit_test(test_take_grad_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
