/*
 * test_op_conv.c: the convolution and pooling family (src/op/conv.c and
 * src/backend/cpu/{conv,pool}.c). Kernels run through ry_op_run against
 * fixtures from tools/gen_op_conv.py (PyTorch references; TVM's own pooling
 * rules where PyTorch differs), one test per fixture listed in
 * tests/ops/conv/cases.h; then the type relations (inferred types, symbolic
 * and Any dims, deferral, located errors), the registry entries, and
 * out-of-memory injection on the kernels.
 */
#include <stdlib.h>

#include "test_util.h"

typedef struct conv_case {
    const char *name; /* tests/ops/conv/<name>_{x,w,y}.npy */
    const char *op;
    int nin;
    const char *attrs; /* name=kind:value;... */
    double rtol, atol;
} conv_case;

static const conv_case cases[] = {
#include "ops/conv/cases.h"
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* ---- building attributes and types ---- */

static const char SRC_TEXT[] = "  %y = nn.op(%x, %w, a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8);\n";
static const ry_source SRC = {"t.relay", SRC_TEXT, sizeof SRC_TEXT - 1};
#define CALL_SPAN ((ry_span){&SRC, 1, 3, 2})
/* Attribute i is "located" at column 22 + 5*i, so errors can be checked to
 * point at the attribute rather than the call. */
static ry_span attr_span_at(int i) { return (ry_span){&SRC, 1, 22 + 5 * i, 3}; }

/* Parses "strides=l:2,2;groups=i:2;ceil_mode=b:1;layout=s:NHWC" into attrs
 * in arena a. */
static ry_attrs make_attrs(ry_arena *a, const char *spec) {
    ry_attrs at = {0, RY_NEW_ARRAY(a, ry_attr, 16)};
    char *s = ry_arena_strdup(a, spec), *save = NULL;
    for (char *item = strtok_r(s, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        assert_non_null(eq);
        *eq = '\0';
        ry_attr *t = &at.items[at.n];
        t->name = item;
        t->span = attr_span_at(at.n);
        at.n++;
        char kind = eq[1], *v = eq + 3;
        if (kind == 'i') t->value = (ry_attr_value)RY_AINT(strtoll(v, NULL, 10));
        else if (kind == 'b') t->value = (ry_attr_value)RY_ABOOL(v[0] == '1');
        else if (kind == 's') t->value = (ry_attr_value)RY_ASTR(v);
        else if (kind == 'n') t->value = (ry_attr_value)RY_ANONE;
        else {
            ry_attr_value *items = RY_NEW_ARRAY(a, ry_attr_value, 8);
            int n = 0;
            for (char *p = v; *p && n < 8; n++) {
                items[n] = (ry_attr_value)RY_AINT(strtoll(p, &p, 10));
                if (*p == ',') p++;
            }
            t->value.kind = RY_AV_LIST;
            t->value.list.n = n;
            t->value.list.items = items;
        }
    }
    return at;
}

/* A tensor type from "1,3,n,?": numbers are constant dims, ? is Any,
 * names are symbolic. */
static ry_type *ty(ry_arena *a, ry_dtype dt, const char *dims) {
    ry_dim d[RY_MAX_RANK];
    int n = 0;
    for (const char *p = dims; *p;) {
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '?') {
            d[n++] = (ry_dim){RY_DIM_ANY, 0, NULL};
            p++;
        } else if (*p >= '0' && *p <= '9') {
            char *end;
            d[n++] = (ry_dim){RY_DIM_CONST, strtoll(p, &end, 10), NULL};
            p = end;
        } else {
            size_t len = strcspn(p, ",");
            d[n++] = (ry_dim){RY_DIM_SYM, 0, ry_arena_strndup(a, p, len)};
            p += len;
        }
    }
    return ry_type_tensor_arena(a, dt, n, d);
}

/* ---- kernels against fixtures ---- */

static void run_fixture(void **state) {
    const conv_case *k = *state;
    const ry_op *op = ry_op_find(k->op);
    assert_non_null(op);
    char path[256];
    ry_tensor *in[2] = {NULL, NULL};
    for (int i = 0; i < k->nin; i++) {
        snprintf(path, sizeof path, "tests/ops/conv/%s_%c.npy", k->name, "xw"[i]);
        in[i] = test_npy(path);
    }
    snprintf(path, sizeof path, "tests/ops/conv/%s_y.npy", k->name);
    ry_tensor *want = test_npy(path);
    ry_arena *a = ry_arena_new();
    ry_attrs attrs = make_attrs(a, k->attrs);
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_op_check_attrs(op, &attrs, &err), RY_OK);
    ry_type *types[2] = {NULL, NULL};
    for (int i = 0; i < k->nin; i++) types[i] = ry_type_of_tensor(a, in[i]);
    ry_kernel_ctx kc = {.span = CALL_SPAN, .err = &err};
    ry_type *out_type = NULL;
    int nout = 0;
    ry_tensor **out = NULL;
    if (ry_op_run(op, &attrs, a, k->nin, types, k->nin, in, &kc, &out_type, &nout, &out)) {
        ry_error_print(stderr, &err);
        fail_msg("%s: %s", k->name, err.msg);
    }
    assert_int_equal(nout, 1);
    assert_int_equal(out[0]->dtype, want->dtype);
    assert_true(ry_type_equal(out_type, ry_type_of_tensor(a, want)));
    test_assert_close(out[0], want, k->rtol, k->atol);
    ry_tensor_release(out[0]);
    ry_free(out);
    for (int i = 0; i < k->nin; i++) ry_tensor_release(in[i]);
    ry_tensor_release(want);
    ry_arena_free(a);
}

/* ---- type relations ---- */

/* Runs op's relation on args with attrs spec; returns the status and
 * fills *out or err. */
static ry_rel_status rel(ry_arena *a, const char *opname, const char *spec, int nargs,
                         ry_type **args, ry_type **out, ry_error *err) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    ry_attrs *attrs = RY_NEW(a, ry_attrs);
    *attrs = make_attrs(a, spec);
    memset(err, 0, sizeof *err);
    if (ry_op_check_attrs(op, attrs, err)) return RY_REL_FAIL;
    ry_rel_ctx c = {a, op, attrs, CALL_SPAN, err};
    *out = NULL;
    return op->rel(&c, nargs, args, out);
}

static void expect_type(const char *opname, const char *spec, ry_type *x, ry_type *w,
                        ry_type *want) {
    ry_arena *a = ry_arena_new();
    ry_type *args[2] = {x, w}, *out;
    ry_error err;
    ry_rel_status s = rel(a, opname, spec, w ? 2 : 1, args, &out, &err);
    char got[128], exp[128];
    if (s != RY_REL_OK) fail_msg("%s(%s): %s", opname, spec, err.msg);
    if (!ry_type_equal(out, want))
        fail_msg("%s(%s): got %s, expected %s", opname, spec, ry_type_str(out, got, sizeof got),
                 ry_type_str(want, exp, sizeof exp));
    ry_arena_free(a);
}

/* Expects a failure whose message contains `needle`, located at column
 * col (the call is column 3; attribute i is column 22 + 5*i). */
static void expect_error(const char *opname, const char *spec, ry_type *x, ry_type *w,
                         const char *needle, int col) {
    ry_arena *a = ry_arena_new();
    ry_type *args[2] = {x, w}, *out;
    ry_error err;
    ry_rel_status s = rel(a, opname, spec, w ? 2 : 1, args, &out, &err);
    if (s != RY_REL_FAIL) fail_msg("%s(%s): expected an error about '%s'", opname, spec, needle);
    if (!strstr(err.msg, needle))
        fail_msg("%s(%s): message '%s' lacks '%s'", opname, spec, err.msg, needle);
    assert_string_equal(err.file, "t.relay");
    assert_int_equal(err.line, 1);
    if (err.col != col) fail_msg("%s(%s): error at column %d, expected %d (%s)", opname, spec,
                                 err.col, col, err.msg);
    ry_arena_free(a);
}

#define A_ (ts_arena)
static ry_arena *ts_arena;
#define F32(d) ty(A_, RY_FLOAT32, d)
#define F64(d) ty(A_, RY_FLOAT64, d)
#define COL(i) (22 + 5 * (i))
#define CALL 3

static void test_conv2d_rel(void **state) {
    expect_type("nn.conv2d", "", F32("1,3,8,8"), F32("4,3,3,3"), F32("1,4,6,6"));
    expect_type("nn.conv2d", "strides=l:2,2;padding=l:1,1", F32("2,3,8,7"), F32("4,3,3,3"),
                F32("2,4,4,4"));
    expect_type("nn.conv2d", "padding=l:1,0,2,3;dilation=l:2,1;strides=l:1,2", F64("1,2,9,9"),
                F64("5,2,3,3"), F64("1,5,8,5"));
    expect_type("nn.conv2d", "groups=i:2;channels=i:6;kernel_size=l:3,3", F32("1,4,5,5"),
                F32("6,2,3,3"), F32("1,6,3,3"));
    expect_type("nn.conv2d", "out_dtype=s:float64", F32("1,1,3,3"), F32("1,1,3,3"),
                F64("1,1,1,1"));
    expect_type("nn.conv2d", "out_dtype=s:int32", ty(A_, RY_INT8, "1,1,3,3"),
                ty(A_, RY_INT8, "1,1,2,2"), ty(A_, RY_INT32, "1,1,2,2"));
    /* Symbolic batch passes through; symbolic spatial dims become Any. */
    expect_type("nn.conv2d", "", F32("n,3,h,8"), F32("o,3,3,3"), F32("n,o,?,6"));
    expect_type("nn.conv2d", "", F32("?,?,8,8"), F32("4,3,3,3"), F32("?,4,6,6"));
    /* Unknown weight: wait for the type checker. */
    ry_type inc = {.kind = RY_TYPE_INCOMPLETE};
    ry_type *args[2] = {F32("1,3,8,8"), &inc}, *out;
    ry_error err;
    assert_int_equal(rel(A_, "nn.conv2d", "", 2, args, &out, &err), RY_REL_DEFER);
}

static void test_conv2d_rel_errors(void **state) {
    expect_error("nn.conv2d", "", F32("3,8,8"), F32("4,3,3,3"), "rank 4", CALL);
    expect_error("nn.conv2d", "", F32("1,3,8,8"), F32("4,3,3"), "rank 4", CALL);
    expect_error("nn.conv2d", "", F32("1,3,8,8"), F32("4,2,3,3"), "3 channels", CALL);
    expect_error("nn.conv2d", "groups=i:2", F32("1,4,8,8"), F32("3,2,3,3"), "not divisible",
                 COL(0));
    expect_error("nn.conv2d", "groups=i:0", F32("1,4,8,8"), F32("4,4,3,3"), "groups", COL(0));
    expect_error("nn.conv2d", "channels=i:5", F32("1,3,8,8"), F32("4,3,3,3"), "channels=5",
                 COL(0));
    expect_error("nn.conv2d", "strides=l:1,1;kernel_size=l:3,5", F32("1,3,8,8"),
                 F32("4,3,3,3"), "kernel_size", COL(1));
    expect_error("nn.conv2d", "padding=l:1,-1", F32("1,3,8,8"), F32("4,3,3,3"), "negative",
                 COL(0));
    expect_error("nn.conv2d", "padding=l:1,1,1", F32("1,3,8,8"), F32("4,3,3,3"), "1, 2 or 4",
                 COL(0));
    expect_error("nn.conv2d", "strides=l:0,1", F32("1,3,8,8"), F32("4,3,3,3"), "strides",
                 COL(0));
    expect_error("nn.conv2d", "dilation=l:1,2,3", F32("1,3,8,8"), F32("4,3,3,3"), "dilation",
                 COL(0));
    expect_error("nn.conv2d", "data_layout=s:NHWC", F32("1,8,8,3"), F32("4,3,3,3"),
                 "unsupported layout", COL(0));
    expect_error("nn.conv2d", "kernel_layout=s:HWIO", F32("1,3,8,8"), F32("3,3,3,4"),
                 "unsupported layout", COL(0));
    expect_error("nn.conv2d", "out_layout=s:NHWC", F32("1,3,8,8"), F32("4,3,3,3"),
                 "unsupported layout", COL(0));
    expect_error("nn.conv2d", "out_dtype=s:int32", F32("1,3,8,8"), F32("4,3,3,3"),
                 "does not suit", COL(0));
    expect_error("nn.conv2d", "out_dtype=s:complex", F32("1,3,8,8"), F32("4,3,3,3"),
                 "unknown out_dtype", COL(0));
    expect_error("nn.conv2d", "", F32("1,3,8,8"), F64("4,3,3,3"), "must match", CALL);
    expect_error("nn.conv2d", "", ty(A_, RY_BOOL, "1,3,8,8"), ty(A_, RY_BOOL, "4,3,3,3"),
                 "bool", CALL);
    expect_error("nn.conv2d", "dilation=l:3,1", F32("1,3,6,8"), F32("4,3,3,3"),
                 "smaller than the window", CALL);
    expect_error("nn.conv2d", "", F32("1,3,8,8"), F32("4,3,0,3"), "empty", CALL);
    expect_error("nn.conv2d", "strides=l:3000000000", F32("1,3,8,8"), F32("4,3,3,3"), "int32",
                 COL(0));
    expect_error("nn.conv2d", "padding=l:2147483647", F32("1,3,9223372036854775000,8"),
                 F32("4,3,3,3"), "too large", CALL);
    expect_error("nn.conv2d_transpose", "strides=l:2147483647", F32("1,2,9223372036854775000,4"),
                 F32("2,3,3,3"), "too large", CALL);
    expect_error("nn.conv2d", "strides=s:two", F32("1,3,8,8"), F32("4,3,3,3"), "strides",
                 COL(0));
}

static void test_conv2d_transpose_rel(void **state) {
    expect_type("nn.conv2d_transpose", "", F32("1,2,4,4"), F32("2,3,3,3"), F32("1,3,6,6"));
    expect_type("nn.conv2d_transpose", "strides=l:2,2;padding=l:1,1;output_padding=l:1,1",
                F32("1,2,4,4"), F32("2,3,3,3"), F32("1,3,8,8"));
    expect_type("nn.conv2d_transpose", "groups=i:2;dilation=l:2,1;channels=i:6",
                F64("2,4,4,3"), F64("4,3,2,3"), F64("2,6,6,5"));
    expect_type("nn.conv2d_transpose", "padding=l:1,0,0,2", F32("n,2,h,4"), F32("2,3,3,3"),
                F32("n,3,?,4"));
    expect_error("nn.conv2d_transpose", "kernel_layout=s:OIHW", F32("1,2,4,4"),
                 F32("2,3,3,3"), "unsupported layout", COL(0));
    expect_error("nn.conv2d_transpose", "output_padding=l:1,1", F32("1,2,4,4"),
                 F32("2,3,3,3"), "output_padding", COL(0));
    expect_error("nn.conv2d_transpose", "", F32("1,3,4,4"), F32("2,3,3,3"), "3 channels", CALL);
    expect_error("nn.conv2d_transpose", "channels=i:4", F32("1,2,4,4"), F32("2,3,3,3"),
                 "channels=4", COL(0));
    expect_error("nn.conv2d_transpose", "padding=l:3,3", F32("1,2,2,2"), F32("2,3,3,3"),
                 "output height", CALL);
}

static void test_pool_rel(void **state) {
    expect_type("nn.max_pool2d", "pool_size=l:2,2;strides=l:2,2", F32("1,3,8,7"),
                NULL, F32("1,3,4,3"));
    expect_type("nn.max_pool2d", "pool_size=l:3;padding=l:1", F64("2,3,5,5"), NULL,
                F64("2,3,5,5"));
    /* ceil_mode: TVM keeps the window starting in the padding (PyTorch gives 3). */
    expect_type("nn.max_pool2d", "pool_size=l:2,2;strides=l:2,2;padding=l:1,1;ceil_mode=b:1",
                F32("1,1,5,5"), NULL, F32("1,1,4,4"));
    expect_type("nn.avg_pool2d", "pool_size=l:3,3;strides=l:2,2;dilation=l:2,2;count_include_pad=b:1",
                F32("n,c,11,?"), NULL, F32("n,c,4,?"));
    expect_type("nn.avg_pool2d", "pool_size=l:2,2", ty(A_, RY_INT32, "1,1,4,4"), NULL,
                ty(A_, RY_INT32, "1,1,3,3"));
    expect_error("nn.max_pool2d", "", F32("1,3,8,8"), NULL, "pool_size is required", CALL);
    expect_error("nn.max_pool2d", "pool_size=l:0,2", F32("1,3,8,8"), NULL, "pool_size",
                 COL(0));
    expect_error("nn.max_pool2d", "pool_size=l:2,2;layout=s:NHWC", F32("1,8,8,3"), NULL,
                 "unsupported layout", COL(1));
    expect_error("nn.avg_pool2d", "pool_size=l:2,2;padding=l:0,0,-1,0", F32("1,3,8,8"), NULL,
                 "negative", COL(1));
    expect_error("nn.avg_pool2d", "pool_size=l:5,5", F32("1,3,4,8"), NULL,
                 "smaller than the window", CALL);
    expect_error("nn.avg_pool2d", "pool_size=l:2,2", F32("3,8,8"), NULL, "rank 4", CALL);
    expect_error("nn.max_pool2d", "pool_size=l:2,2", ty(A_, RY_BOOL, "1,1,4,4"), NULL, "bool",
                 CALL);
    expect_type("nn.global_avg_pool2d", "", F32("2,3,h,w"), NULL, F32("2,3,1,1"));
    expect_type("nn.global_avg_pool2d", "layout=s:NCHW;out_layout=s:NCHW", F64("1,5,3,3"),
                NULL, F64("1,5,1,1"));
    expect_error("nn.global_avg_pool2d", "", F32("2,3,4"), NULL, "rank 4", CALL);
    expect_error("nn.global_avg_pool2d", "layout=s:NCHW16c", F32("2,3,4,4"), NULL,
                 "unsupported layout", COL(0));
    expect_error("nn.global_avg_pool2d", "", F32("2,3,0,4"), NULL, "empty height", CALL);
}

/* The entries carry TVM's names, arity, pattern and C++ defaults. */
static void test_registry_entries(void **state) {
    const ry_op *conv = ry_op_find("nn.conv2d"), *convt = ry_op_find("nn.conv2d_transpose");
    const ry_op *maxp = ry_op_find("nn.max_pool2d"), *avgp = ry_op_find("nn.avg_pool2d");
    const ry_op *gap = ry_op_find("nn.global_avg_pool2d");
    assert_non_null(conv);
    assert_non_null(convt);
    assert_non_null(maxp);
    assert_non_null(avgp);
    assert_non_null(gap);
    assert_int_equal(conv->nargs, 2);
    assert_int_equal(maxp->nargs, 1);
    assert_int_equal(conv->pattern, RY_PAT_OUT_ELEMWISE);
    assert_int_equal(gap->pattern, RY_PAT_OUT_ELEMWISE);
    int64_t v[4];
    assert_int_equal(ry_attr_ints(conv, NULL, "strides", v, 4), 2);
    assert_int_equal(v[0], 1);
    assert_int_equal(ry_attr_ints(conv, NULL, "padding", v, 4), 2);
    assert_int_equal(v[1], 0);
    assert_int_equal(ry_attr_int(conv, NULL, "groups"), 1);
    assert_true(ry_attr_is_none(conv, NULL, "channels"));
    assert_true(ry_attr_is_none(conv, NULL, "kernel_size"));
    assert_string_equal(ry_attr_str(conv, NULL, "kernel_layout"), "OIHW");
    assert_string_equal(ry_attr_str(convt, NULL, "kernel_layout"), "IOHW");
    assert_string_equal(ry_attr_str(convt, NULL, "out_dtype"), "");
    assert_int_equal(ry_attr_ints(convt, NULL, "output_padding", v, 4), 2);
    assert_true(ry_attr_is_none(maxp, NULL, "pool_size"));
    assert_int_equal(ry_attr_ints(maxp, NULL, "dilation", v, 4), 2);
    assert_false(ry_attr_bool(maxp, NULL, "ceil_mode"));
    assert_false(ry_attr_bool(avgp, NULL, "count_include_pad"));
    assert_string_equal(ry_attr_str(gap, NULL, "layout"), "NCHW");
    for (int i = 0; i < ry_op_count(); i++) {
        const ry_op *op = ry_op_at(i);
        if (op >= ry_ops_conv && op < ry_ops_conv + ry_ops_conv_count) {
            assert_non_null(op->kernels[RY_TARGET_CPU]);
            assert_non_null(op->doc);
        }
    }
}

/* Every allocation a kernel makes may fail: the run reports it, without
 * leaking or crashing, then succeeds once memory is back. */
static void test_kernels_out_of_memory(void **state) {
    static const conv_case *picks[8];
    int np = 0;
    for (int i = 0; i < NCASES && np < 8; i++)
        if (!strcmp(cases[i].name, "conv_f32_groups") || !strcmp(cases[i].name, "conv_f16") ||
            !strcmp(cases[i].name, "convt_i32") || !strcmp(cases[i].name, "max_i8") ||
            !strcmp(cases[i].name, "avg_f32") || !strcmp(cases[i].name, "gap_i32"))
            picks[np++] = &cases[i];
    assert_int_equal(np, 6);
    for (int p = 0; p < np; p++) {
        const conv_case *k = picks[p];
        const ry_op *op = ry_op_find(k->op);
        char path[256];
        ry_tensor *in[2] = {NULL, NULL};
        for (int i = 0; i < k->nin; i++) {
            snprintf(path, sizeof path, "tests/ops/conv/%s_%c.npy", k->name, "xw"[i]);
            in[i] = test_npy(path);
        }
        bool ok = false;
        for (long n = 0; n < 64 && !ok; n++) {
            ry_arena *a = ry_arena_new();
            ry_attrs attrs = make_attrs(a, k->attrs);
            ry_type *types[2] = {NULL, NULL};
            for (int i = 0; i < k->nin; i++) types[i] = ry_type_of_tensor(a, in[i]);
            ry_error err;
            ry_kernel_ctx kc = {.span = CALL_SPAN, .err = &err};
            ry_type *t;
            int nout = 0;
            ry_tensor **out = NULL;
            ry_alloc_fail_after(n);
            ry_status s = ry_op_run(op, &attrs, a, k->nin, types, k->nin, in, &kc, &t, &nout, &out);
            ry_alloc_fail_after(-1);
            if (s == RY_OK) {
                ok = true;
                ry_tensor_release(out[0]);
                ry_free(out);
            } else {
                assert_true(strstr(err.msg, "out of memory") != NULL);
            }
            ry_arena_free(a);
        }
        assert_true(ok);
        for (int i = 0; i < k->nin; i++) ry_tensor_release(in[i]);
    }
}

static int setup(void **state) {
    ts_arena = ry_arena_new();
    return 0;
}

static int teardown(void **state) {
    ry_arena_free(ts_arena);
    return 0;
}

int main(void) {
    struct CMUnitTest tests[NCASES + 5];
    for (int i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, run_fixture, NULL, NULL,
                                       (void *)&cases[i]};
    tests[NCASES + 0] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_rel);
    tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_rel_errors);
    tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_transpose_rel);
    tests[NCASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_pool_rel);
    tests[NCASES + 4] = (struct CMUnitTest)cmocka_unit_test(test_registry_entries);
    struct CMUnitTest oom[] = {cmocka_unit_test(test_kernels_out_of_memory)};
    int fails = cmocka_run_group_tests_name("op_conv", tests, setup, teardown);
    return fails + cmocka_run_group_tests_name("op_conv_oom", oom, NULL, NULL);
}
