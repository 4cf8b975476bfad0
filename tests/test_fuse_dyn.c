/*
 * test_fuse_dyn.c: fusion over tensors whose shapes the types leave
 * unknown (`?`; src/pass/fuse_shape.c): chains that provably keep one
 * shape fuse, broadcasts that may grow a value do not, two GEMMs added
 * become one accumulating GEMM; every fused program gives the unfused
 * results (bitwise where the operations keep their order) on the
 * interpreter and the VM, and prints and parses back unchanged.
 */
#include <stdlib.h>

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "test_util.h"

static ry_error err;

static void ok(ry_status s) {
    if (s != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s", err.msg);
    }
}

static int occurrences(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static ry_value *random_input(int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, nd, shape);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, 4 * rnd() - 2);
    return ry_value_tensor(t);
}

static ry_value *call(ry_module *m, ry_vm_program *p, int n, ry_value **args) {
    ry_value *v = NULL;
    if (p) ok(ry_vm_call(p, "main", n, args, NULL, &v, &err));
    else ok(ry_interp_call(m, "main", n, args, NULL, &v, &err));
    return v;
}

static void assert_same(const ry_value *got, const ry_value *want, double rtol) {
    ry_tensor *tg[8], *tw[8];
    int n = ry_value_flatten(want, tw, 8);
    assert_int_equal(ry_value_flatten(got, tg, 8), n);
    for (int i = 0; i < n; i++) {
        assert_true(ry_tensor_same_shape(tg[i], tw[i]));
        if (rtol > 0) {
            test_assert_close(tg[i], tw[i], rtol, 1e-6);
            continue;
        }
        for (int64_t k = 0; k < tw[i]->size; k++)
            if (ry_tensor_get(tg[i], k) != ry_tensor_get(tw[i], k))
                fail_msg("result %d element %lld: fused %.9g, unfused %.9g", i, (long long)k,
                         ry_tensor_get(tg[i], k), ry_tensor_get(tw[i], k));
    }
}

/* Fuses text's module and checks @main on float32 inputs of the given
 * shapes (nin of them, rank 2) against the unfused program: the
 * interpreter within rtol (0: bitwise), the VM bitwise with the
 * interpreter; checks that the printed program parses back to the same
 * text. Returns the fused program's text. */
static char *check_fused(const char *text, int nin, const int64_t (*shapes)[2], double rtol) {
    ry_module *m = test_parse(text, true);
    ry_value *args[8];
    for (int i = 0; i < nin; i++) args[i] = random_input(2, shapes[i]);
    ry_value *want = call(m, NULL, nin, args);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *s = ry_module_print(m);
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    ry_value *gi = call(m, NULL, nin, args), *gv = call(m, p, nin, args);
    assert_same(gi, want, rtol);
    assert_same(gv, gi, 0);
    ry_module *m2 = NULL;
    ok(ry_module_parse("again.relay", s, strlen(s), &m2, &err));
    ok(ry_module_typecheck(m2, &err));
    char *s2 = ry_module_print(m2);
    assert_string_equal(s, s2);
    ry_free(s2);
    ry_module_free(m2);
    ry_value_release(want);
    ry_value_release(gi);
    ry_value_release(gv);
    ry_vm_free(p);
    for (int i = 0; i < nin; i++) ry_value_release(args[i]);
    ry_module_free(m);
    return s;
}

/* ---- chains that keep one shape ---- */

static void unknown_rows_fuse(void **state) {
    (void)state;
    const int64_t sh[1][2] = {{7, 5}};
    char *s = check_fused("#[version = \"0.0.5\"]\n"
                          "def @main(%a: Tensor[(?, 5), float32]) {\n"
                          "  %0 = multiply(%a, %a);\n  %1 = exp(%0);\n  %2 = add(%1, %a);\n"
                          "  %3 = sigmoid(%2);\n  negative(%3)\n}\n",
                          1, sh, 0);
    assert_non_null(strstr(s, "fused.elemwise1(%a, code=\"multiply(x0, x0); exp(t0); "
                              "add(t1, x0); sigmoid(t2); negative(t3)\")"));
    assert_int_equal(occurrences(s, "fused."), 1);
    ry_free(s);
}

/* The adjoint of @row in models/treelstm.relay: a (1, 5) row broadcast to
 * the table's (?, 5) (zeros_like + add), masked by a (?, 1) column: the
 * column's rows are the table's by construction (both from %m). */
static void broadcast_through_known_rows(void **state) {
    (void)state;
    const int64_t sh[3][2] = {{6, 5}, {6, 1}, {1, 5}};
    char *s = check_fused("#[version = \"0.0.5\"]\n"
                          "def @main(%a: Tensor[(?, 5), float32], %m: Tensor[(?, 1), float32],"
                          " %g: Tensor[(1, 5), float32]) {\n"
                          "  %0 = multiply(%a, %m);\n  %1 = sum(%0, axis=[0], keepdims=True);\n"
                          "  %2 = zeros_like(%0);\n  %3 = add(%2, %g);\n  %4 = multiply(%3, %m);\n"
                          "  %5 = expand_dims(%m, axis=0);\n  %6 = squeeze(%5, axis=[0]);\n"
                          "  (%1, %4, %6)\n}\n",
                          3, sh, 0);
    assert_non_null(strstr(s, "code=\"zeros_like(x0); add(t0, x1); multiply(t1, x2)\""));
    assert_int_equal(occurrences(s, "zeros_like(%"), 0);
    ry_free(s);
}

/* Values from one source keep its rows through take, expand_dims and a
 * GEMM: here every tensor has the rows of %i. */
static void sources_followed(void **state) {
    (void)state;
    ry_module *m = test_parse(
        "#[version = \"0.0.5\"]\n"
        "def @main(%e: Tensor[(10, 4), float32], %i: Tensor[(?), int32],"
        " %w: Tensor[(3, 4), float32], %b: Tensor[(3), float32]) {\n"
        "  %0 = take(%e, %i, axis=0);\n  %1 = nn.dense(%0, %w);\n  %2 = nn.bias_add(%1, %b);\n"
        "  %3 = cast(%i, dtype=\"float32\");\n  %4 = expand_dims(%3, axis=1);\n"
        "  %5 = tanh(%2);\n  multiply(%5, %4)\n}\n",
        true);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *s = ry_module_print(m);
    /* the dense, its bias, tanh and the product: one GEMM with an epilogue */
    assert_non_null(strstr(s, "fused.matmul4(%x, %w, %b, %x2, code=\"add(acc, x2); tanh(t0); "
                              "multiply(t1, x3)\""));
    assert_int_equal(occurrences(s, "fused."), 1);
    ry_free(s);
    ry_module_free(m);
}

/* ---- broadcasts that must not fuse ---- */

static void broadcasts_stay(void **state) {
    (void)state;
    /* %a and %b have unknown rows of their own: either may be 1 and
     * broadcast, so exp(%a) may be smaller than the sum and stays out */
    const int64_t sh[2][2] = {{1, 5}, {4, 5}};
    char *s = check_fused("#[version = \"0.0.5\"]\n"
                          "def @main(%a: Tensor[(?, 5), float32], %b: Tensor[(?, 5), float32]) {\n"
                          "  %0 = exp(%a);\n  %1 = add(%0, %b);\n  negative(%1)\n}\n",
                          2, sh, 0);
    assert_non_null(strstr(s, "exp(%a)"));
    assert_non_null(strstr(s, "code=\"add(x0, x1); negative(t0)\""));
    ry_free(s);
    /* a (1, 5) value is smaller than the (?, 5) sum it is added to */
    const int64_t sh2[2][2] = {{3, 5}, {1, 5}};
    s = check_fused("#[version = \"0.0.5\"]\n"
                    "def @main(%a: Tensor[(?, 5), float32], %c: Tensor[(1, 5), float32]) {\n"
                    "  %0 = exp(%c);\n  %1 = add(%a, %0);\n  negative(%1)\n}\n",
                    2, sh2, 0);
    assert_non_null(strstr(s, "exp(%c)"));
    ry_free(s);
    /* a (?, 1) column and a (?, 5) table from different sources */
    const int64_t sh3[2][2] = {{1, 1}, {3, 5}};
    s = check_fused("#[version = \"0.0.5\"]\n"
                    "def @main(%m: Tensor[(?, 1), float32], %a: Tensor[(?, 5), float32]) {\n"
                    "  %0 = sigmoid(%m);\n  %1 = multiply(%0, %a);\n  %2 = tanh(%1);\n"
                    "  %3 = add(%2, %m);\n  negative(%3)\n}\n",
                    2, sh3, 0);
    assert_non_null(strstr(s, "sigmoid(%m)"));
    assert_non_null(strstr(s, "code=\"multiply(x0, x1); tanh(t0); add(t1, x2); negative(t2)\""));
    ry_free(s);
}

/* ---- cells: the AD transform's (value, ref(adjoint)) pairs ---- */

static void adjoint_cells(void **state) {
    (void)state;
    const int64_t sh[2][2] = {{4, 5}, {4, 5}};
    char *s = check_fused(
        "#[version = \"0.0.5\"]\n"
        "def @acc(%p: (Tensor[(?, 5), float32], ref(Tensor[(?, 5), float32]))) {\n"
        "  let %x = %p.0;\n  let %r = %p.1;\n  let %g = ref_read(%r);\n"
        "  let %y = multiply(%x, %x);\n  let %z = add(%g, %y);\n  ref_write(%r, %z)\n}\n"
        "def @main(%a: Tensor[(?, 5), float32], %b: Tensor[(?, 5), float32]) {\n"
        "  let %c = ref(%b);\n  let %u = @acc((%a, %c));\n"
        "  let %d = exp(%a);\n  let %e = ref(%d);\n  let %f = ref_read(%e);\n"
        "  let %h = tanh(%a);\n  let %k = add(%f, %h);\n  (ref_read(%c), %k)\n}\n",
        2, sh, 0);
    /* the cell of a pair holds the first field's shape; a cell made here
     * holds what it was made with */
    assert_non_null(strstr(s, "fused.elemwise2(%x, %g, code=\"multiply(x0, x0); add(x1, t0)\")"));
    assert_non_null(strstr(s, "fused.elemwise2(%a, %f, code=\"tanh(x0); add(x1, t0)\")"));
    ry_free(s);
}

/* ---- two GEMMs added: one accumulates into the other ---- */

static void gemm_sum_accumulates(void **state) {
    (void)state;
    const int64_t sh[4][2] = {{9, 6}, {6, 4}, {6, 4}, {9, 6}};
    char *s = check_fused("#[version = \"0.0.5\"]\n"
                          "def @main(%x: Tensor[(?, 6), float32], %w1: Tensor[(6, 4), float32],"
                          " %w2: Tensor[(6, 4), float32], %y: Tensor[(?, 6), float32]) {\n"
                          "  %0 = nn.matmul(%x, %w1);\n  %1 = exp(%x);\n"
                          "  %2 = nn.matmul(%1, %w2);\n  add(%0, %2)\n}\n",
                          4, sh, 1e-5);
    assert_int_equal(occurrences(s, "fused.matmul3("), 1);
    assert_int_equal(occurrences(s, "nn.matmul("), 1);
    ry_free(s);
    /* the LSTM's gates, x W_ih^T + h W_hh^T, with symbolic rows */
    const int64_t sh2[4][2] = {{5, 3}, {8, 3}, {5, 2}, {8, 2}};
    s = check_fused("#[version = \"0.0.5\"]\n"
                    "def @main(%x: Tensor[(n, 3), float32], %wi: Tensor[(8, 3), float32],"
                    " %h: Tensor[(n, 2), float32], %wh: Tensor[(8, 2), float32]) {\n"
                    "  %0 = nn.dense(%x, %wi);\n  %1 = nn.dense(%h, %wh);\n  add(%0, %1)\n}\n",
                    4, sh2, 1e-5);
    assert_int_equal(occurrences(s, "fused.matmul3("), 1);
    ry_free(s);
    /* GEMMs of unrelated rows: the sum may broadcast, nothing joins */
    const int64_t sh3[4][2] = {{1, 6}, {6, 4}, {6, 4}, {3, 6}};
    s = check_fused("#[version = \"0.0.5\"]\n"
                    "def @main(%x: Tensor[(?, 6), float32], %w1: Tensor[(6, 4), float32],"
                    " %w2: Tensor[(6, 4), float32], %y: Tensor[(?, 6), float32]) {\n"
                    "  %0 = nn.matmul(%x, %w1);\n  %1 = nn.matmul(%y, %w2);\n  add(%0, %1)\n}\n",
                    4, sh3, 0);
    assert_int_equal(occurrences(s, "fused."), 0);
    ry_free(s);
}

/* ---- the Tree-LSTM's gradient ---- */

static int fused_calls(const char *path, bool shapes) {
    if (!shapes) setenv("RELAYC_FUSE_SHAPES", "0", 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = malloc(1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = 0;
    ry_module *m = test_parse(text, true);
    free(text);
    ok(ry_grad(m, "loss", NULL, NULL, NULL, &err));
    ok(ry_optimize(m, 2, &err));
    char *s = ry_module_print(m);
    int k = occurrences(s, "fused.");
    ry_free(s);
    ry_module_free(m);
    unsetenv("RELAYC_FUSE_SHAPES");
    return k;
}

static void treelstm_leaves_fuse(void **state) {
    (void)state;
    /* the leaves' (?, 150) chains and the @row adjoints now fuse */
    int before = fused_calls("models/treelstm.relay", false);
    int after = fused_calls("models/treelstm.relay", true);
    assert_true(after >= before + 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_rows_fuse),
        cmocka_unit_test(broadcast_through_known_rows),
        cmocka_unit_test(sources_followed),
        cmocka_unit_test(broadcasts_stay),
        cmocka_unit_test(adjoint_cells),
        cmocka_unit_test(gemm_sum_accumulates),
        cmocka_unit_test(treelstm_leaves_fuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
