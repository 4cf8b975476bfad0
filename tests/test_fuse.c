/*
 * test_fuse.c: operator fusion (src/pass/fuse.c) and the fused kernels
 * (src/op/fused*.c, src/backend/cpu/fused*.c): the groups the pass forms on
 * small programs (printed IR), the single-use and same-shape rules, GEMM
 * epilogues, fused kernels against the unfused computation on random data
 * of many shapes and both float dtypes, printing and re-parsing fused
 * programs, errors, and fusion preserving the results of every program in
 * tests/run and tests/corpus (and their gradients) on both engines.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "test_programs.h"
#include "test_util.h"

static ry_error err;

static void ok(ry_status s) {
    if (s != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s", err.msg);
    }
}

static char *fused_text(const char *src) {
    ry_module *m = test_parse(src, true);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *s = ry_module_print(m);
    ry_module_free(m);
    return s;
}

static int occurrences(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* ---- the groups the pass forms ---- */

static void chain_becomes_one_call(void **state) {
    (void)state;
    char *s = fused_text("#[version = \"0.0.5\"]\n"
                         "def @main(%a: Tensor[(4, 5), float32], %b: Tensor[(4, 5), float32],"
                         " %c: Tensor[(5), float32]) {\n"
                         "  %0 = add(%a, %b);\n  %1 = sigmoid(%0);\n  %2 = multiply(%1, %c);\n"
                         "  %3 = tanh(%0);\n  add(%2, %3)\n}\n");
    /* five operators, %0 used twice but only inside the group */
    assert_non_null(strstr(s, "fused.elemwise3(%a, %b, %c, code=\"add(x0, x1); sigmoid(t0); "
                              "multiply(t1, x2); tanh(t0); add(t2, t3)\")"));
    assert_int_equal(occurrences(s, "fused."), 1);
    ry_free(s);
}

static char *fused_same(const char *text, int nd0, const int64_t *s0, int nd1, const int64_t *s1);

static void use_outside_returns(void **state) {
    (void)state;
    int64_t s3[1] = {3};
    char *s = fused_same("#[version = \"0.0.5\"]\n"
                         "def @main(%a: Tensor[(3), float32], %b: Tensor[(3), float32]) {\n"
                         "  %0 = add(%a, %b);\n  %1 = exp(%0);\n  %2 = multiply(%1, %b);\n"
                         "  (%2, %0)\n}\n",
                         1, s3, 1, s3);
    /* %0 escapes in the tuple: the group computes it once and returns it
     * too, the root's value first */
    assert_non_null(strstr(s, "code=\"add(x0, x1); exp(t0); multiply(t1, x1); (t2, t0)\""));
    assert_int_equal(occurrences(s, "fused."), 1);
    ry_free(s);
    /* a use between the value and the group's root keeps it out: the
     * fused call stands where the root was */
    s = fused_same("#[version = \"0.0.5\"]\n"
                   "def @main(%a: Tensor[(3), float32], %b: Tensor[(3), float32]) {\n"
                   "  %0 = add(%a, %b);\n  %1 = sum(%0);\n  %2 = exp(%0);\n  %3 = multiply(%2, %1);\n"
                   "  (%3, %0)\n}\n",
                   1, s3, 1, s3);
    assert_non_null(strstr(s, "add(%a, %b)"));
    ry_free(s);
}

static void nested_scopes(void **state) {
    (void)state;
    char *s = fused_text("#[version = \"0.0.5\"]\n"
                         "def @main(%a: Tensor[(3), float32], %p: bool) {\n"
                         "  let %x = exp(%a);\n  let %y = negative(%x);\n"
                         "  if (%p) { %x } else { let %z = sigmoid(%y); tanh(%z) }\n}\n");
    /* %x and %y are used in the branches, after the chain's last binding:
     * one call computes both and returns them; the branch's own chain
     * fuses too */
    assert_non_null(strstr(s, "code=\"exp(x0); negative(t0); (t1, t0)\""));
    assert_non_null(strstr(s, "code=\"sigmoid(x0); tanh(t0)\""));
    ry_free(s);
    s = fused_text("#[version = \"0.0.5\"]\n"
                   "def @main(%a: Tensor[(3), float32]) {\n"
                   "  let %x = exp(%a);\n  let %f = fn (%b: Tensor[(3), float32]) { add(%b, %x) };\n"
                   "  let %y = negative(%x);\n  %f(%y)\n}\n");
    assert_int_equal(occurrences(s, "fused."), 0); /* %x is captured by the closure */
    ry_free(s);
}

static void shapes_and_dtypes(void **state) {
    (void)state;
    /* exp(%c) has a smaller shape than the group: fusing it would compute it
     * once per row, so it stays and the group reads its result */
    char *s = fused_text("#[version = \"0.0.5\"]\n"
                         "def @main(%a: Tensor[(4, 5), float64], %c: Tensor[(5), float64]) {\n"
                         "  %0 = exp(%c);\n  %1 = add(%a, %0);\n  negative(%1)\n}\n");
    assert_non_null(strstr(s, "exp(%c)"));
    assert_non_null(strstr(s, "code=\"add(x0, x1); negative(t0)\""));
    ry_free(s);
    /* integers are not fused; comparisons and casts are, with literals */
    s = fused_text("#[version = \"0.0.5\"]\n"
                   "def @main(%i: Tensor[(4), int32], %x: Tensor[(4), float32]) {\n"
                   "  %0 = add(%i, %i);\n  %1 = multiply(%0, %i);\n"
                   "  %2 = greater(%x, 0.5f);\n  %3 = cast(%2, dtype=\"float64\");\n"
                   "  %4 = multiply(%3, 2f64);\n  (%1, %4)\n}\n");
    assert_int_equal(occurrences(s, "add(%i, %i)"), 1);
    assert_int_equal(occurrences(s, "fused."), 1);
    assert_non_null(strstr(s, "code=\"greater(x0, 0.5f); cast(t0, dtype=float64); "
                              "multiply(t1, 2f64)\""));
    ry_free(s);
}

static void gemm_epilogue(void **state) {
    (void)state;
    char *s = fused_text("#[version = \"0.0.5\"]\n"
                         "def @main(%x: Tensor[(n, 6), float32], %w: Tensor[(4, 6), float32],"
                         " %b: Tensor[(4), float32]) {\n"
                         "  %0 = nn.dense(%x, %w, units=4);\n  %1 = nn.bias_add(%0, %b);\n"
                         "  nn.relu(%1)\n}\n");
    assert_non_null(strstr(s, "fused.matmul3(%x, %w, %b, code=\"add(acc, x2); nn.relu(t0)\", "
                              "transpose_a=False, transpose_b=True)"));
    ry_free(s);
    /* a GEMM whose result is also used elsewhere is left alone */
    s = fused_text("#[version = \"0.0.5\"]\n"
                   "def @main(%x: Tensor[(3, 6), float32], %w: Tensor[(6, 4), float32]) {\n"
                   "  %0 = nn.matmul(%x, %w);\n  %1 = nn.relu(%0);\n  (%1, %0)\n}\n");
    assert_int_equal(occurrences(s, "fused."), 0);
    ry_free(s);
}

/* Runs @main (two float32 inputs of the given shapes) before and after
 * fusion and compares bitwise; returns the fused program's text. */
static char *fused_same(const char *text, int nd0, const int64_t *s0, int nd1, const int64_t *s1);

static void rewrites_open_groups(void **state) {
    (void)state;
    /* relu's gradient mask reads the relu's result, so the pre-activation
     * is used by the relu alone and joins the GEMM's epilogue */
    int64_t sx[2] = {5, 6}, sw[2] = {4, 6};
    char *s = fused_same("#[version = \"0.0.5\"]\n"
                         "def @main(%x: Tensor[(5, 6), float32], %w: Tensor[(4, 6), float32]) {\n"
                         "  %0 = nn.dense(%x, %w);\n  %1 = nn.relu(%0);\n  %2 = greater(%0, 0f);\n"
                         "  (%1, %2)\n}\n",
                         2, sx, 2, sw);
    assert_non_null(strstr(s, "code=\"nn.relu(acc)\""));
    ry_free(s);
    /* a convolution's bias (axis 1) broadcasts as (C, 1, 1) and fuses */
    int64_t sa[4] = {2, 3, 4, 5}, sb[1] = {3};
    s = fused_same("#[version = \"0.0.5\"]\n"
                   "def @main(%x: Tensor[(2, 3, 4, 5), float32], %b: Tensor[(3), float32]) {\n"
                   "  %0 = nn.bias_add(%x, %b);\n  %1 = nn.relu(%0);\n  %2 = greater(%0, 0f);\n"
                   "  (%1, %2)\n}\n",
                   4, sa, 1, sb);
    assert_non_null(strstr(s, "expand_dims(%b, axis=1, num_newaxis=2)"));
    /* ... with the relu and its mask: one call, two results */
    assert_non_null(strstr(s, "code=\"add(x0, x1); nn.relu(t0); greater(t1, 0f); (t2, t1)\""));
    ry_free(s);
}

/* ---- fused kernels against the unfused computation ---- */

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static double rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static ry_tensor *random_tensor(ry_dtype dt, int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dt, nd, shape);
    for (int64_t i = 0; i < t->size; i++) {
        double r = 4 * rnd() - 2;
        if (rnd() < 0.05) r = 0; /* exact zeros for the comparisons and relu */
        ry_tensor_set(t, i, r);
    }
    return t;
}

/* Units in the last place between a and b (0 when equal or both NaN). */
static double ulps(double a, double b, ry_dtype dt) {
    if ((isnan(a) && isnan(b)) || a == b) return 0;
    double m = fmax(fabs(a), fabs(b));
    double ulp = dt == RY_FLOAT32 ? ldexp(1, ilogb(fmax(m, 1.2e-38)) - 23)
                                  : ldexp(1, ilogb(fmax(m, 2.3e-308)) - 52);
    return fabs(a - b) / ulp;
}

static void assert_match(const ry_tensor *got, const ry_tensor *want, double max_ulps,
                         double atol, const char *what) {
    char s1[64], s2[64];
    if (!ry_tensor_same_shape(got, want) || got->dtype != want->dtype)
        fail_msg("%s: %s vs %s", what, ry_tensor_describe(got, s1, sizeof s1),
                 ry_tensor_describe(want, s2, sizeof s2));
    for (int64_t i = 0; i < got->size; i++) {
        double x = ry_tensor_get(got, i), y = ry_tensor_get(want, i);
        if (max_ulps == 0 ? !(x == y || (isnan(x) && isnan(y)))
                          : ulps(x, y, got->dtype) > max_ulps && fabs(x - y) > atol)
            fail_msg("%s: element %lld: fused %.17g, unfused %.17g", what, (long long)i, x, y);
    }
}

static ry_value *call(ry_module *m, ry_vm_program *p, const char *entry, int n, ry_value **args) {
    ry_value *v = NULL;
    if (p) ok(ry_vm_call(p, entry, n, args, NULL, &v, &err));
    else ok(ry_interp_call(m, entry, n, args, NULL, &v, &err));
    return v;
}

static char *fused_same(const char *text, int nd0, const int64_t *s0, int nd1, const int64_t *s1) {
    ry_module *m = test_parse(text, true);
    ry_value *args[2] = {ry_value_tensor(random_tensor(RY_FLOAT32, nd0, s0)),
                         ry_value_tensor(random_tensor(RY_FLOAT32, nd1, s1))};
    ry_value *want = call(m, NULL, "main", 2, args);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    ry_value *got = call(m, NULL, "main", 2, args);
    ry_tensor *tw[4], *tg[4];
    int n = ry_value_flatten(want, tw, 4);
    assert_int_equal(ry_value_flatten(got, tg, 4), n);
    for (int i = 0; i < n; i++) assert_match(tg[i], tw[i], 0, 0, "rewrite");
    char *s = ry_module_print(m);
    ry_value_release(want);
    ry_value_release(got);
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_module_free(m);
    return s;
}

typedef struct body {
    const char *text; /* over %a, %b, %c; DT is replaced by the dtype */
    double ulps;      /* 0: bitwise */
} body;

static const body bodies[] = {
    {"%0 = maximum(%a, %b); %1 = abs(%c); %2 = add(%1, 1DT); %3 = divide(%0, %2);"
     " %4 = minimum(%3, %b); %5 = clip(%4, a_min=-0.5f, a_max=0.75f); %6 = nn.relu(%a);"
     " %7 = subtract(%5, %6); %8 = nn.leaky_relu(%7, alpha=0.125f); negative(%8)", 0},
    {"%0 = greater(%a, 0DT); %1 = zeros_like(%b); %2 = where(%0, %b, %1); %3 = multiply(%2, %c);"
     " %4 = ones_like(%a); %5 = less_equal(%b, %c); %6 = logical_not(%5);"
     " %7 = logical_and(%0, %6); %8 = where(%7, %3, %4); %9 = sqrt(%8); rsqrt(%9)", 0},
    {"%0 = abs(%a); %1 = add(%0, 1DT); %2 = power(%1, %b); %3 = equal(%a, %b); %4 = not_equal(%c, 0DT);"
     " %5 = logical_or(%3, %4); %6 = cast(%5, dtype=\"DTN\"); multiply(%2, %6)", 0},
    {"%0 = sigmoid(%a); %1 = multiply(%0, %b); %2 = tanh(%c); %3 = add(%1, %2); %4 = exp(%3);"
     " %5 = abs(%b); %6 = add(%5, 0.5DT); %7 = log(%6); subtract(%4, %7)", 4},
};

/* shapes of a, b, c: same, scalar, rows, columns, odd sizes past a tile,
 * and broadcasts that need the general (odometer) path */
static const char *const shapes[][3] = {
    {"(7)", "(7)", "(7)"},
    {"()", "()", "()"},
    {"(3, 5)", "()", "(5)"},
    {"(3, 5)", "(3, 1)", "(1, 5)"},
    {"(600)", "(600)", "()"},
    {"(17, 33)", "(33)", "(17, 1)"},
    {"(2, 3, 5)", "(3, 1)", "(2, 1, 5)"},
    {"(4, 1, 300)", "(1, 6, 1)", "(300)"},
    {"(2, 70000)", "(70000)", "(2, 1)"},
};

static int parse_shape(const char *s, int64_t *dims) {
    int n = 0;
    for (const char *p = s + 1; *p && *p != ')';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        dims[n++] = v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return n;
}

static void replace_all(char *out, size_t n, const char *in, const char *key, const char *with) {
    size_t k = 0, lk = strlen(key), lw = strlen(with);
    while (*in && k + lw + 1 < n) {
        if (strncmp(in, key, lk) == 0) {
            memcpy(out + k, with, lw);
            k += lw;
            in += lk;
        } else {
            out[k++] = *in++;
        }
    }
    out[k] = 0;
}

static void check_body(const body *b, ry_dtype dt, const char *const *shp, int threads) {
    const char *dn = ry_dtype_name(dt), *suffix = dt == RY_FLOAT32 ? "f" : "f64";
    char text[4096], body1[2048], body2[2048];
    replace_all(body1, sizeof body1, b->text, "DTN", dn);
    replace_all(body2, sizeof body2, body1, "DT", suffix);
    /* attribute literals stay float32 (attributes are doubles either way) */
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\ndef @main(%%a: Tensor[%s, %s], %%b: Tensor[%s, %s], "
             "%%c: Tensor[%s, %s]) {\n  %s\n}\n",
             shp[0], dn, shp[1], dn, shp[2], dn, body2);
    ry_module *m = test_parse(text, true);
    ry_value *args[3];
    for (int k = 0; k < 3; k++) {
        int64_t dims[RY_MAX_RANK];
        int nd = parse_shape(shp[k], dims);
        args[k] = ry_value_tensor(random_tensor(dt, nd, dims));
    }
    ry_value *want = call(m, NULL, "main", 3, args);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *printed = ry_module_print(m);
    assert_true(occurrences(printed, "fused.elemwise") >= 1);
    ry_free(printed);
    ry_set_num_threads(threads);
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    ry_value *gi = call(m, NULL, "main", 3, args), *gv = call(m, p, "main", 3, args);
    ry_set_num_threads(1);
    char what[256];
    snprintf(what, sizeof what, "%s %s %s %s", dn, shp[0], shp[1], shp[2]);
    assert_match(gi->tensor, want->tensor, b->ulps, dt == RY_FLOAT32 ? 1e-6 : 1e-14, what);
    assert_match(gv->tensor, gi->tensor, 0, 0, what); /* the engines agree bitwise */
    ry_value_release(want);
    ry_value_release(gi);
    ry_value_release(gv);
    ry_vm_free(p);
    for (int k = 0; k < 3; k++) ry_value_release(args[k]);
    ry_module_free(m);
}

static void kernels_match_unfused(void **state) {
    (void)state;
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++)
        for (int s = 0; s < nshapes; s++)
            for (int d = 0; d < 2; d++)
                check_body(&bodies[b], d ? RY_FLOAT64 : RY_FLOAT32, shapes[s], 1 + (s == nshapes - 1));
}

static void gemm_epilogue_matches(void **state) {
    (void)state;
    const char *heads[] = {"nn.dense(%x, %w)", "nn.matmul(%x, %w, transpose_b=True)",
                           "nn.matmul(%t, %w, transpose_a=True, transpose_b=True)"};
    for (int d = 0; d < 2; d++)
        for (int h = 0; h < 3; h++) {
            const char *dn = d ? "float64" : "float32";
            char text[2048];
            snprintf(text, sizeof text,
                     "#[version = \"0.0.5\"]\ndef @main(%%x: Tensor[(37, 20), %s], "
                     "%%t: Tensor[(20, 37), %s], %%w: Tensor[(9, 20), %s], %%b: Tensor[(9), %s],"
                     " %%r: Tensor[(37, 1), %s]) {\n  %%0 = %s;\n  %%1 = nn.bias_add(%%0, %%b);\n"
                     "  %%2 = multiply(%%1, %%r);\n  %%3 = nn.relu(%%2);\n  %%4 = greater(%%3, "
                     "%%r);\n  (%%3, %%4)\n}\n",
                     dn, dn, dn, dn, dn, heads[h]);
            ry_module *m = test_parse(text, true);
            ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
            int64_t sx[2] = {37, 20}, st[2] = {20, 37}, sw[2] = {9, 20}, sb[1] = {9}, sr[2] = {37, 1};
            ry_value *args[5] = {ry_value_tensor(random_tensor(dt, 2, sx)),
                                 ry_value_tensor(random_tensor(dt, 2, st)),
                                 ry_value_tensor(random_tensor(dt, 2, sw)),
                                 ry_value_tensor(random_tensor(dt, 1, sb)),
                                 ry_value_tensor(random_tensor(dt, 2, sr))};
            ry_value *want = call(m, NULL, "main", 5, args);
            ok(ry_fuse(m, &err));
            ok(ry_module_typecheck(m, &err));
            char *s = ry_module_print(m);
            assert_int_equal(occurrences(s, "fused.matmul"), 1);
            ry_free(s);
            ry_value *got = call(m, NULL, "main", 5, args);
            for (int k = 0; k < 2; k++)
                assert_match(got->tuple.fields[k]->tensor, want->tuple.fields[k]->tensor, 0, 0,
                             heads[h]);
            ry_value_release(want);
            ry_value_release(got);
            for (int k = 0; k < 5; k++) ry_value_release(args[k]);
            ry_module_free(m);
        }
}

/* An input that would widen the group's type stays out: bias_add matched
 * a symbolic channel n to the data's 1 and typed its result (1); fused
 * with what follows, the call would broadcast (1) against (n) and be typed
 * (n). Nor does a group whose fused call its own relation would type
 * otherwise (both found by the fuzzer: the optimized module no longer
 * type-checked). */
static void inputs_never_widen(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(1), float32], %b: Tensor[(n), float32]) {\n"
                       "  %0 = nn.bias_add(%x, %b, axis=0);\n"
                       "  %1 = tanh(%0);\n"
                       "  multiply(%1, %x)\n"
                       "}\n";
    int64_t one[1] = {1};
    char *s = fused_same(text, 1, one, 1, one);
    assert_int_equal(occurrences(s, "fused.elemwise"), 1); /* tanh and multiply */
    assert_int_equal(occurrences(s, "nn.bias_add("), 1);
    ry_free(s);
    /* dense typed (2, 1) by units=1 while its weight says (n, ?): a fused
     * GEMM, typed from the weight, would come out (2, n) */
    const char *units = "#[version = \"0.0.5\"]\n"
                        "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(n, ?), float32]) {\n"
                        "  %0 = nn.dense(%x, %w, units=1);\n"
                        "  multiply(%0, 2f)\n"
                        "}\n";
    int64_t sx[2] = {2, 3}, sw[2] = {1, 3};
    s = fused_same(units, 2, sx, 2, sw);
    assert_int_equal(occurrences(s, "fused.matmul"), 0);
    ry_free(s);
}

/* An epilogue that reads the GEMM's addend again after the leading add
 * (`add(acc, x2); add(t0, x2)`: the AD transform's zero adjoints summed
 * into one weight gradient make these). When the VM runs the call in place
 * over x2, the add must not be folded into the GEMM: x2 would then read
 * acc + x2 (found by the fuzzer: a gradient 3x too large). */
static void epilogue_reads_addend_again(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%a: Tensor[(5, 3), float32], %b: Tensor[(3, 4), float32], "
        "%c: Tensor[(5, 4), float32]) {\n"
        "  %0 = add(%c, 1f);\n"
        "  fused.matmul3(%a, %b, %0, code=\"add(acc, x2); add(t0, x2); add(t1, x2)\", "
        "transpose_a=False, transpose_b=False)\n"
        "}\n";
    ry_module *m = test_parse(text, true);
    int64_t sa[2] = {5, 3}, sb[2] = {3, 4}, sc[2] = {5, 4};
    ry_value *args[3] = {ry_value_tensor(random_tensor(RY_FLOAT32, 2, sa)),
                         ry_value_tensor(random_tensor(RY_FLOAT32, 2, sb)),
                         ry_value_tensor(random_tensor(RY_FLOAT32, 2, sc))};
    ry_value *want = call(m, NULL, "main", 3, args);
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    for (int rep = 0; rep < 2; rep++) { /* cold, then with the plan's slots warm */
        ry_value *got = call(m, p, "main", 3, args);
        assert_match(got->tensor, want->tensor, 4, 1e-6, "in place over the addend");
        ry_value_release(got);
    }
    ry_vm_free(p);
    ry_value_release(want);
    for (int k = 0; k < 3; k++) ry_value_release(args[k]);
    ry_module_free(m);
}

/* A hand-written program holding more values than the executor keeps on
 * the stack (its buffers then come from the heap), with copies, casts to
 * the same dtype and every literal kind. */
static void large_program(void **state) {
    (void)state;
    char code[2048] = "";
    size_t n = 0;
    n += (size_t)snprintf(code + n, sizeof code - n, "copy(x0); cast(t0, dtype=float32)");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(code + n, sizeof code - n, "; multiply(t%d, %d.5f)", i + 1, i);
    n += (size_t)snprintf(code + n, sizeof code - n, "; greater(t21, 0f); logical_and(t22, True)");
    snprintf(code + n, sizeof code - n, "; where(t23, t21, x0)");
    char text[4096];
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\ndef @main(%%a: Tensor[(1000), float32]) {\n"
             "  fused.elemwise1(%%a, code=\"%s\")\n}\n", code);
    ry_module *m = test_parse(text, true);
    int64_t shape[1] = {1000};
    ry_value *arg = ry_value_tensor(random_tensor(RY_FLOAT32, 1, shape));
    ry_value *got = call(m, NULL, "main", 1, &arg);
    for (int64_t i = 0; i < 1000; i++) {
        float x = (float)ry_tensor_get(arg->tensor, i), y = x;
        for (int k = 0; k < 20; k++) y *= (float)k + 0.5f;
        float want = y > 0 ? y : x;
        assert_true((float)ry_tensor_get(got->tensor, i) == want);
    }
    ry_value_release(got);
    ry_value_release(arg);
    ry_module_free(m);
}

/* ---- printing, parsing, errors ---- */

static void fused_programs_reparse(void **state) {
    (void)state;
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32],"
                              " %b: Tensor[(4), float32], %v: Tensor[(2, 4), float64]) {\n"
                              "  %0 = nn.dense(%x, %w);\n  %1 = nn.bias_add(%0, %b);\n"
                              "  %2 = clip(%1, a_min=-0.1f, a_max=3.3f);\n"
                              "  %3 = cast(%2, dtype=\"float64\");\n  %4 = add(%3, 1e-07f64);\n"
                              "  %5 = less(%4, %v);\n  %6 = where(%5, %4, %v);\n  exp(%6)\n}\n",
                              true);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *a = ry_module_print(m);
    assert_non_null(strstr(a, "fused.matmul4"));
    assert_non_null(strstr(a, "clip(t0, a_min=-0.1f64, a_max=3.3f64)"));
    assert_non_null(strstr(a, "add(t2, 1e-07f64)"));
    ry_module *m2 = NULL;
    ok(ry_module_parse("again.relay", a, strlen(a), &m2, &err));
    ok(ry_module_typecheck(m2, &err));
    char *b = ry_module_print(m2);
    assert_string_equal(a, b);
    ry_free(a);
    ry_free(b);
    ry_module_free(m2);
    ry_module_free(m);
}

static void expect_type_error(const char *call_text, const char *msg) {
    char text[1024];
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\ndef @main(%%a: Tensor[(3), float32], %%i: Tensor[(3), int32], "
             "%%m: Tensor[(3, 3), float32]) "
             "{\n  %s\n}\n",
             call_text);
    ry_module *m = NULL;
    ok(ry_module_parse("bad.relay", text, strlen(text), &m, &err));
    assert_int_equal(ry_module_typecheck(m, &err), RY_ERR);
    if (!strstr(err.msg, msg)) fail_msg("expected '%s' in: %s", msg, err.msg);
    assert_int_equal(err.line, 3);
    ry_module_free(m);
}

static void bad_programs_are_errors(void **state) {
    (void)state;
    expect_type_error("fused.elemwise1(%a, code=\"frobnicate(x0)\")", "not an operator");
    expect_type_error("fused.elemwise1(%a, code=\"add(x0, x3)\")", "x3: the call has 1 inputs");
    expect_type_error("fused.elemwise1(%a, code=\"add(x0, 1f64)\")", "one dtype");
    expect_type_error("fused.elemwise1(%a, code=\"exp(t0)\")", "t0 is not computed");
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0) exp(x0)\")", "expected ';'");
    expect_type_error("fused.elemwise1(%a, code=\"\")", "expected an operator name");
    expect_type_error("fused.elemwise1(%a, code=\"clip(x0, a_min=0f)\")", "a_min and a_max");
    expect_type_error("fused.elemwise2(%a, %i, code=\"add(x0, x0)\")", "int32");
    expect_type_error("fused.matmul3(%m, %m, %a, code=\"exp(x0)\")", "GEMM operand");
    expect_type_error("fused.elemwise1(%a, code=\"exp(acc)\")", "fused.matmul only");
    /* lists of results */
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0); (t0)\")", "at least two");
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0); (t0, x0)\")", "instruction's (tI)");
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0); (t0, t1)\")", "no instruction t1");
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0); tanh(t0); (t0, t0)\")", "t0 returned twice");
    expect_type_error("fused.elemwise1(%a, code=\"exp(x0); tanh(t0); (t0, t1); exp(t1)\")",
                      "must come last");
    expect_type_error("fused.matmul3(%m, %m, %a, code=\"add(acc, x2); exp(t0); (t1, t0)\")",
                      "an epilogue has one result");
}

/* A program with a list of results: a tuple, each result its value (here
 * also bool and an input-independent zeros_like), on both engines, on one
 * and two threads, large enough to split over the pool. */
static void results_list(void **state) {
    (void)state;
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%a: Tensor[(70000), float32]) {\n"
                              "  fused.elemwise1(%a, code=\"exp(x0); greater(t0, 1f); zeros_like(x0); "
                              "negative(t0); (t3, t1, t0, t2)\")\n}\n",
                              true);
    int64_t shape[1] = {70000};
    ry_value *arg = ry_value_tensor(random_tensor(RY_FLOAT32, 1, shape));
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    for (int run = 0; run < 4; run++) { /* interpreter and VM, 1 and 2 threads */
        ry_set_num_threads(1 + run / 2);
        ry_value *got = call(m, run % 2 ? p : NULL, "main", 1, &arg);
        assert_int_equal(got->kind, RY_VAL_TUPLE);
        assert_int_equal(got->tuple.n, 4);
        for (int64_t i = 0; i < 70000; i += 7) {
            float x = (float)ry_tensor_get(arg->tensor, i);
            float e = (float)ry_tensor_get(got->tuple.fields[2]->tensor, i);
            assert_true((float)ry_tensor_get(got->tuple.fields[0]->tensor, i) == -e);
            assert_true(ry_tensor_get(got->tuple.fields[1]->tensor, i) == (e > 1.0f));
            assert_true(ry_tensor_get(got->tuple.fields[3]->tensor, i) == 0);
            assert_true(fabsf(e - expf(x)) <= 4e-7f * expf(x));
        }
        assert_int_equal(got->tuple.fields[1]->tensor->dtype, RY_BOOL);
        ry_value_release(got);
    }
    ry_set_num_threads(1);
    ry_value_release(arg);
    ry_vm_free(p);
    ry_module_free(m);
}

static void no_gradient_through_fused(void **state) {
    (void)state;
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%a: Tensor[(3), float32]) {\n"
                              "  %0 = exp(%a);\n  %1 = negative(%0);\n  sum(%1)\n}\n",
                              true);
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    const char *gname = NULL;
    assert_int_equal(ry_grad(m, "main", NULL, NULL, &gname, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "fused.elemwise1 has no gradient"));
    ry_module_free(m);
}

/* Two threads run fused kernels of distinct programs at once: the program
 * cache is shared. */
static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    ry_arena *a = ry_arena_new();
    int64_t shape[1] = {1000};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, shape);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, (double)i / 100);
    const ry_op *op = ry_op_find("fused.elemwise1");
    int bad = 0;
    for (int it = 0; it < 200; it++) {
        char code[128];
        snprintf(code, sizeof code, "multiply(x0, %d.5f); add(t0, %df)", id, it);
        ry_attr at = {"code", {.kind = RY_AV_STR, .s = code}, RY_NO_SPAN};
        ry_attrs attrs = {1, &at};
        ry_type *t = ry_type_of_tensor(a, x);
        ry_error e;
        ry_kernel_ctx kc = {.span = RY_NO_SPAN, .err = &e};
        ry_type *ot;
        int nout;
        ry_tensor **out;
        if (ry_op_run(NULL, op, &attrs, a, 1, &t, 1, &x, &kc, &ot, &nout, &out) != RY_OK) {
            bad++;
            continue;
        }
        for (int64_t i = 0; i < x->size; i += 97)
            bad += ry_tensor_get(out[0], i) != (double)((float)((float)i / 100 * (id + 0.5f)) + (float)it);
        ry_tensor_release(out[0]);
        ry_free(out);
        ry_arena_reset(a);
    }
    ry_tensor_release(x);
    ry_arena_free(a);
    return (void *)(intptr_t)bad;
}

static void kernels_on_two_threads(void **state) {
    (void)state;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < 2; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        assert_int_equal((int)(intptr_t)bad, 0);
    }
}

/* ---- whole programs: fusion keeps their results ---- */

static uint64_t program_rng = 0x2545F4914F6CDD1DULL;

static bool bind(ry_module *m, const char *dir, ry_value **args, int *na) {
    const ry_global *g = ry_module_find_global(m, "main");
    if (!g || g->func->func.nparams > 32) return false;
    *na = 0;
    for (int i = 0; i < g->func->func.nparams; i++) {
        const ry_var *p = g->func->func.params[i];
        char path[512];
        snprintf(path, sizeof path, "%s/in_%s.npy", dir ? dir : "", p->name);
        ry_tensor *t = NULL;
        ry_error e;
        if (dir && ry_npy_read(path, &t, &e) == RY_OK) args[i] = ry_value_tensor(t);
        else if (!(args[i] = test_random_value(p->annot ? p->annot : p->type, &program_rng))) return false;
        (*na)++;
    }
    return true;
}

/* Whole float32 programs, compared normwise: a fused GEMM accumulates
 * into its addend (beta=1) and epilogues add in another order than the
 * unfused program, and OpenBLAS picks other kernels on other CPUs (and
 * under valgrind). A weight gradient that sums large terms of both signs
 * then differs in its small elements by rounding of the terms' size, so the
 * tolerance scales with the tensor's largest element. */
static void assert_values_close(const ry_value *a, const ry_value *b) {
    ry_tensor *ta[256], *tb[256];
    int na = ry_value_flatten(a, ta, 256), nb = ry_value_flatten(b, tb, 256);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++) {
        double scale = 0;
        for (int64_t k = 0; k < tb[i]->size; k++)
            if (ry_dtype_is_float(tb[i]->dtype)) scale = fmax(scale, fabs(ry_tensor_get(tb[i], k)));
        test_assert_close(ta[i], tb[i], 1e-5, 1e-6 + 3e-5 * scale);
    }
}

/* The pipeline without fusion, as ry_optimize ran it before fusion existed. */
static void optimize_unfused(ry_module *m) {
    ok(ry_partial_eval(m, &err));
    ok(ry_dce(m, &err));
    ok(ry_fold_constants(m, &err));
    ok(ry_simplify(m, &err));
    ok(ry_cse(m, &err));
    ok(ry_dce(m, &err));
    ok(ry_module_typecheck(m, &err));
}

/* Runs @main and its gradient unfused and fused, on both engines. Returns
 * the number of fused calls in the program. */
static int check_program(const char *path, const char *dir) {
    ry_module *m = NULL;
    ok(ry_module_parse_file(path, &m, &err));
    ok(ry_module_typecheck(m, &err));
    ry_value *args[32];
    int na = 0, nfused = 0;
    ry_value *probe = NULL;
    ry_error e;
    if (!bind(m, dir, args, &na) || ry_interp_call(m, "main", na, args, NULL, &probe, &e)) {
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
        return -1;
    }
    ry_value_release(probe);
    const char *gname = NULL;
    bool grad = ry_grad(m, "main", NULL, NULL, &gname, &e) == RY_OK;
    optimize_unfused(m);
    ry_value *want = call(m, NULL, "main", na, args);
    ry_value *gwant = grad ? call(m, NULL, gname, na, args) : NULL;
    ok(ry_fuse(m, &err));
    ok(ry_module_typecheck(m, &err));
    char *s = ry_module_print(m);
    nfused = occurrences(s, "fused.");
    ry_free(s);
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    for (int engine = 0; engine < 2; engine++) {
        ry_value *got = call(m, engine ? p : NULL, "main", na, args);
        assert_values_close(got, want);
        ry_value_release(got);
        if (grad) {
            got = call(m, engine ? p : NULL, gname, na, args);
            assert_values_close(got, gwant);
            ry_value_release(got);
        }
    }
    ry_vm_free(p);
    ry_value_release(want);
    ry_value_release(gwant);
    for (int i = 0; i < na; i++) ry_value_release(args[i]);
    ry_module_free(m);
    return nfused;
}

static void programs_keep_results(void **state) {
    (void)state;
    const char *dirs[] = {"tests/run", "tests/corpus"};
    int ran = 0, fused = 0;
    for (int d = 0; d < 2; d++) {
        char names[64][128];
        int n = test_relay_files(dirs[d], names, 64);
        for (int k = 0; k < n; k++) {
            char path[512], dir[512];
            snprintf(path, sizeof path, "%s/%s.relay", dirs[d], names[k]);
            snprintf(dir, sizeof dir, "%s/%s", dirs[d], names[k]);
            int f = check_program(path, d == 0 ? dir : NULL);
            if (f < 0) continue;
            ran++;
            fused += f;
        }
    }
    print_message("fusion: %d programs (and gradients) keep their results; %d fused calls\n", ran,
                  fused);
    assert_true(ran >= 25);
    assert_true(fused >= 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chain_becomes_one_call),
        cmocka_unit_test(use_outside_returns),
        cmocka_unit_test(nested_scopes),
        cmocka_unit_test(shapes_and_dtypes),
        cmocka_unit_test(gemm_epilogue),
        cmocka_unit_test(rewrites_open_groups),
        cmocka_unit_test(kernels_match_unfused),
        cmocka_unit_test(gemm_epilogue_matches),
        cmocka_unit_test(epilogue_reads_addend_again),
        cmocka_unit_test(inputs_never_widen),
        cmocka_unit_test(large_program),
        cmocka_unit_test(fused_programs_reparse),
        cmocka_unit_test(bad_programs_are_errors),
        cmocka_unit_test(results_list),
        cmocka_unit_test(no_gradient_through_fused),
        cmocka_unit_test(kernels_on_two_threads),
        cmocka_unit_test(programs_keep_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
