/*
 * test_op_conv.c: the convolution and pooling family (src/op/conv.c and
 * src/backend/cpu/{conv,pool}.c). Kernels run through ry_op_run against
 * fixtures from tools/gen_op_conv.py (PyTorch references; TVM's own pooling
 * rules where PyTorch differs), one test per fixture listed in
 * tests/ops/conv/cases.h (inputs <name>_x, <name>_w in argument order);
 * then the type relations (inferred types, symbolic and Any dims, deferral,
 * located errors), the registry entries, the text format through the type
 * checker and interpreter, the gradient rules against PyTorch autograd and
 * (through the AD transform) finite differences, and out-of-memory
 * injection on the kernels.
 */
#include <stdlib.h>

#include "relayc/ad.h"
#include "op/families.h"
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
    if (ry_op_run(NULL, op, &attrs, a, k->nin, types, k->nin, in, &kc, &out_type, &nout, &out)) {
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
    expect_error("nn.conv2d", "channels=i:-1", F32("1,3,8,8"), F32("4,3,3,3"), "non-negative",
                 COL(0));
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
    expect_type("nn.global_max_pool2d", "", ty(A_, RY_INT8, "n,3,4,4"), NULL,
                ty(A_, RY_INT8, "n,3,1,1"));
    expect_type("nn.adaptive_avg_pool2d", "output_size=l:3,5", F32("2,3,h,w"), NULL,
                F32("2,3,3,5"));
    expect_type("nn.adaptive_max_pool2d", "output_size=l:7", F64("2,3,4,4"), NULL,
                F64("2,3,7,7"));
    expect_type("nn.adaptive_avg_pool2d", "", F64("2,3,4,4"), NULL, F64("2,3,1,1"));
    expect_error("nn.adaptive_avg_pool2d", "output_size=l:1,2,3", F32("2,3,4,4"), NULL,
                 "output_size", COL(0));
    expect_error("nn.adaptive_max_pool2d", "output_size=l:0,2", F32("2,3,4,4"), NULL,
                 "output_size", COL(0));
    expect_error("nn.adaptive_max_pool2d", "output_size=l:2,2;layout=s:NHWC", F32("2,4,4,3"),
                 NULL, "unsupported layout", COL(1));
}

static void test_adjoint_rel(void **state) {
    expect_type("nn.conv2d_backward_weight", "kernel_size=l:3,2;groups=i:2", F64("2,6,5,8"),
                F64("2,4,9,8"), F64("6,2,3,2"));
    expect_type("nn.conv2d_backward_weight", "kernel_size=l:3", F32("n,5,4,4"), F32("n,3,6,6"),
                F32("5,3,3,3"));
    /* TVM's layouts for it: dy's in kernel_layout, the weight's in out_layout */
    expect_type("nn.conv2d_backward_weight", "kernel_size=l:3;kernel_layout=s:NCHW;out_layout=s:OIHW",
                F32("1,5,4,4"), F32("1,3,6,6"), F32("5,3,3,3"));
    expect_error("nn.conv2d_backward_weight", "kernel_size=l:3;kernel_layout=s:OIHW", F32("1,5,4,4"),
                 F32("1,3,6,6"), "kernel_layout=\"OIHW\" (only \"NCHW\"", COL(1));
    expect_error("nn.conv2d_backward_weight", "kernel_size=l:3;out_layout=s:NCHW", F32("1,5,4,4"),
                 F32("1,3,6,6"), "out_layout=\"NCHW\" (only \"OIHW\"", COL(1));
    expect_error("nn.conv2d_backward_weight", "", F32("1,4,6,6"), F32("1,3,8,8"),
                 "kernel_size is required", CALL);
    expect_error("nn.conv2d_backward_weight", "kernel_size=l:3,3", ty(A_, RY_INT32, "1,4,6,6"),
                 ty(A_, RY_INT32, "1,3,8,8"), "float-only", CALL);
    expect_error("nn.conv2d_backward_weight", "kernel_size=l:3,3", F32("2,4,6,6"),
                 F32("1,3,8,8"), "batch", CALL);
    expect_error("nn.conv2d_backward_weight", "kernel_size=l:3,3;channels=i:5", F32("1,4,6,6"),
                 F32("1,3,8,8"), "channels=5", COL(1));
    expect_type("nn.max_pool2d_grad", "pool_size=l:2,2;strides=l:2,2", F32("1,3,4,4"),
                F32("1,3,8,8"), F32("1,3,8,8"));
    expect_type("nn.avg_pool2d_grad", "pool_size=l:3,3;padding=l:1;count_include_pad=b:1",
                F64("2,3,h,5"), F64("2,3,h,5"), F64("2,3,h,5"));
    expect_error("nn.max_pool2d_grad", "pool_size=l:2,2", F32("1,3,4,4"), F32("1,3,8,8"),
                 "out_grad has type", CALL);
    expect_error("nn.avg_pool2d_grad", "pool_size=l:2,2", F32("1,3,7,7"), F64("1,3,8,8"),
                 "out_grad has type", CALL);
    expect_error("nn.avg_pool2d_grad", "pool_size=l:2,2", ty(A_, RY_INT32, "1,3,7,7"),
                 ty(A_, RY_INT32, "1,3,8,8"), "float-only", CALL);
    expect_error("nn.max_pool2d_grad", "", F32("1,3,7,7"), F32("1,3,8,8"),
                 "pool_size is required", CALL);
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
    const ry_op *bw = ry_op_find("nn.conv2d_backward_weight");
    assert_non_null(bw);
    assert_true(ry_attr_is_none(bw, NULL, "kernel_size"));
    assert_non_null(ry_op_find("nn.max_pool2d_grad"));
    assert_false(ry_attr_bool(ry_op_find("nn.avg_pool2d_grad"), NULL, "count_include_pad"));
    /* Every entry has a CPU kernel and a doc line; the forward ops a
     * gradient rule. */
    int seen = 0;
    for (int i = 0; i < ry_op_count(); i++) {
        const ry_op *op = ry_op_at(i);
        if (op >= ry_ops_conv && op < ry_ops_conv + ry_ops_conv_count) {
            assert_non_null(cpu_kernel(op));
            assert_non_null(op->doc);
            assert_true(op->grad != NULL || strstr(op->name, "grad") ||
                        strstr(op->name, "backward") || strstr(op->name, "adaptive"));
            seen++;
        }
    }
    assert_int_equal(seen, 11);
    assert_int_equal(ry_attr_ints(ry_op_find("nn.adaptive_avg_pool2d"), NULL, "output_size", v, 4),
                     0);
}

/* ---- through the text format, the type checker and the interpreter ---- */

static void test_text_typecheck(void **state) {
    ry_module *m = test_parse(
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(n, 3, 16, 16), float32], %w: Tensor[(8, 3, 3, 3), float32],\n"
        "          %u: Tensor[(8, 4, 2, 2), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1], channels=8, kernel_size=[3, 3]);\n"
        "  %1 = nn.max_pool2d(%0, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], ceil_mode=True);\n"
        "  %2 = nn.conv2d_transpose(%1, %u, channels=4, kernel_size=[2, 2], strides=[2, 2]);\n"
        "  %3 = nn.avg_pool2d(%2, pool_size=[2, 2], count_include_pad=True);\n"
        "  nn.global_avg_pool2d(%3)\n"
        "}\n",
        true);
    const ry_expr *body = m->globals[0]->func->func.body;
    assert_true(ry_type_equal(body->type, F32("n,4,1,1")));
    /* conv 16 -> 8, pool (8+2-3+1)/2+1 = 5, transpose (5-1)*2+2 = 10, avg 9. */
    assert_true(ry_type_equal(body->call.args[0]->type, F32("n,4,9,9")));
    ry_module_free(m);
}

/* Parses and type-checks text that must fail at line:col with needle. */
static void expect_text_error(const char *text, const char *needle, int line, int col) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_status s = ry_module_parse("t.relay", text, strlen(text), &m, &err);
    if (s == RY_OK) s = ry_module_typecheck(m, &err);
    ry_module_free(m);
    if (s == RY_OK) fail_msg("expected an error about '%s'", needle);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
    if (err.line != line || err.col != col)
        fail_msg("'%s' at %d:%d, expected %d:%d", err.msg, err.line, err.col, line, col);
}

static void test_text_errors(void **state) {
    expect_text_error("#[version = \"0.0.5\"]\n"
                      "def @main(%x: Tensor[(1, 3, 8, 8), float32]) {\n"
                      "  nn.max_pool2d(%x, pool_size=[2, 2], layout=\"NHWC\")\n"
                      "}\n",
                      "unsupported layout", 3, 39);
    expect_text_error("#[version = \"0.0.5\"]\n"
                      "def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 2, 3, 3), float32]) {\n"
                      "  nn.conv2d(%x, %w, padding=[1, 1])\n"
                      "}\n",
                      "3 channels", 3, 3);
    expect_text_error("#[version = \"0.0.5\"]\n"
                      "def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {\n"
                      "  nn.conv2d(%x, %w, padding=[1, 1], kernel_size=[5, 5])\n"
                      "}\n",
                      "kernel_size", 3, 37);
}

/* Attributes written in text reach the kernels: the interpreter on two
 * fixtures. */
static void run_text(const char *text, const char *name, int nin) {
    ry_module *m = test_parse(text, true);
    char path[256];
    ry_value *args[2];
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "tests/ops/conv/%s_%c.npy", name, "xw"[i]);
        args[i] = ry_value_tensor(test_npy(path));
    }
    snprintf(path, sizeof path, "tests/ops/conv/%s_y.npy", name);
    ry_tensor *want = test_npy(path);
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "main", nin, args, NULL, &out, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("%s: %s", name, err.msg);
    }
    assert_int_equal(out->kind, RY_VAL_TENSOR);
    test_assert_close(out->tensor, want, 1e-10, 1e-10);
    ry_value_release(out);
    for (int i = 0; i < nin; i++) ry_value_release(args[i]);
    ry_tensor_release(want);
    ry_module_free(m);
}

static void test_text_run(void **state) {
    run_text("#[version = \"0.0.5\"]\n"
             "def @main(%x: Tensor[(1, 2, 7, 8), float64], %w: Tensor[(2, 2, 3, 2), float64]) {\n"
             "  nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 2, 1], dilation=[1, 2])\n"
             "}\n",
             "conv_pad4_dil", 2);
    /* Any and symbolic dims: shapes are known only at run time. */
    run_text("#[version = \"0.0.5\"]\n"
             "def @main(%x: Tensor[(?, 2, ?, ?), float64], %w: Tensor[(o, 2, 3, 2), float64]) {\n"
             "  nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 2, 1], dilation=[1, 2])\n"
             "}\n",
             "conv_pad4_dil", 2);
    run_text("#[version = \"0.0.5\"]\n"
             "def @main(%x: Tensor[(n, c, h, w), float64]) {\n"
             "  nn.avg_pool2d(%x, pool_size=[3, 2], dilation=[2, 3], padding=[2, 1])\n"
             "}\n",
             "avg_dilated", 1);
    run_text("#[version = \"0.0.5\"]\n"
             "def @main(%x: Tensor[(1, 1, 5, 5), float64]) {\n"
             "  nn.max_pool2d(%x, pool_size=[2, 2], strides=[2, 2], padding=[1, 1], ceil_mode=True)\n"
             "}\n",
             "max_ceil_tvm", 1);
}

/* ---- gradient rules ----
 * The rule of the one call in @main builds @grad(params..., %g) returning
 * the adjoints; it must type-check and, run by the interpreter, match
 * PyTorch's autograd (tests/ops/conv/<name>_{x,w,g,dx,dw}.npy). */
static void run_grad(const char *name, const char *params, const char *call, int nin) {
    char text[1024], path[256];
    snprintf(text, sizeof text, "#[version = \"0.0.5\"]\ndef @main(%s) {\n  %s\n}\n", params,
             call);
    ry_module *m = test_parse(text, true);
    ry_expr *fn = m->globals[0]->func, *body = fn->func.body;
    assert_int_equal(body->kind, RY_EXPR_CALL);
    const ry_op *op = body->call.callee->op.op;
    assert_non_null(op->grad);
    ry_var *gv = ry_var_new(m, "g", body->type, RY_NO_SPAN);
    ry_expr *g = ry_expr_var(m, gv, RY_NO_SPAN);
    g->type = body->type;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_grad_ctx gc = {m, body, body->span, &err, false, NULL};
    ry_expr *grads[2] = {NULL, NULL};
    if (op->grad(&gc, body->call.args, body, g, grads)) fail_msg("%s: %s", name, err.msg);
    ry_expr *gf = ry_expr_new(m, RY_EXPR_FUNC, RY_NO_SPAN);
    gf->func.nparams = nin + 1;
    gf->func.params = RY_NEW_ARRAY(m->arena, ry_var *, nin + 1);
    for (int i = 0; i < nin; i++) gf->func.params[i] = fn->func.params[i];
    gf->func.params[nin] = gv;
    gf->func.body = ry_expr_tuple(m, nin, grads, RY_NO_SPAN);
    ry_module_add_global(m, "grad", gf);
    if (ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("%s: the gradient does not type-check: %s", name, err.msg);
    }
    ry_value *args[3];
    for (int i = 0; i <= nin; i++) {
        snprintf(path, sizeof path, "tests/ops/conv/%s_%c.npy", name, i < nin ? "xw"[i] : 'g');
        args[i] = ry_value_tensor(test_npy(path));
    }
    ry_value *out = NULL;
    if (ry_interp_call(m, "grad", nin + 1, args, NULL, &out, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("%s: %s", name, err.msg);
    }
    assert_int_equal(out->kind, RY_VAL_TUPLE);
    assert_int_equal(out->tuple.n, nin);
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "tests/ops/conv/%s_d%c.npy", name, "xw"[i]);
        ry_tensor *want = test_npy(path);
        assert_int_equal(out->tuple.fields[i]->kind, RY_VAL_TENSOR);
        test_assert_close(out->tuple.fields[i]->tensor, want, 1e-10, 1e-10);
        ry_tensor_release(want);
    }
    ry_value_release(out);
    for (int i = 0; i <= nin; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

static void test_grad_rules(void **state) {
    run_grad("grad_conv2d",
             "%x: Tensor[(2, 4, 9, 8), float64], %w: Tensor[(6, 2, 3, 2), float64]",
             "nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 2, 1], dilation=[1, 2], groups=2)",
             2);
    run_grad("grad_conv2d_transpose",
             "%x: Tensor[(1, 4, 3, 4), float64], %w: Tensor[(4, 3, 3, 3), float64]",
             "nn.conv2d_transpose(%x, %w, strides=[2, 2], padding=[1, 1], output_padding=[1, 0], "
             "groups=2)",
             2);
    run_grad("grad_max_pool2d", "%x: Tensor[(2, 2, 7, 7), float64]",
             "nn.max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1], ceil_mode=True)",
             1);
    run_grad("grad_avg_pool2d", "%x: Tensor[(1, 2, 7, 8), float64]",
             "nn.avg_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1], ceil_mode=True, "
             "count_include_pad=True)",
             1);
    run_grad("grad_global_avg_pool2d", "%x: Tensor[(2, 3, 4, 5), float64]",
             "nn.global_avg_pool2d(%x)", 1);
    run_grad("grad_global_max_pool2d", "%x: Tensor[(2, 3, 4, 5), float64]",
             "nn.global_max_pool2d(%x)", 1);
}

/* Integer arguments have no adjoint; an unknown kernel size is a located
 * error (unknown data sizes are test_ad_dynamic's). */
static void test_grad_rule_edges(void **state) {
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(1, 1, 4, 4), int32], %w: Tensor[(1, 1, 2, 2), int32]) {\n"
                              "  nn.conv2d(%x, %w)\n"
                              "}\n"
                              "def @f(%x: Tensor[(1, 1, ?, 4), float32], %w: Tensor[(1, 1, ?, 2), float32]) {\n"
                              "  nn.conv2d(%x, %w)\n"
                              "}\n",
                              true);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_expr *grads[2] = {NULL, NULL};
    ry_expr *call = m->globals[0]->func->func.body;
    ry_grad_ctx gc = {m, call, call->span, &err, false, NULL};
    assert_int_equal(ry_op_find("nn.conv2d")->grad(&gc, call->call.args, call, call, grads), RY_OK);
    assert_null(grads[0]);
    assert_null(grads[1]);
    call = ry_module_find_global(m, "f")->func->func.body;
    gc.call = call;
    gc.span = call->span;
    assert_int_equal(ry_op_find("nn.conv2d")->grad(&gc, call->call.args, call, call, grads), RY_ERR);
    assert_non_null(strstr(err.msg, "needs the kernel's height and width"));
    assert_int_equal(err.line, 6);
    ry_module_free(m);
}

/* End to end: the AD transform over a small CNN using every rule, checked
 * against central finite differences in float64. */
static void test_gradcheck_cnn(void **state) {
    ry_module *m = test_parse(
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(2, 2, 7, 6), float64], %w: Tensor[(4, 1, 3, 3), float64],\n"
        "          %u: Tensor[(4, 2, 2, 2), float64]) {\n"
        "  %0 = nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 2, 1], groups=2);\n"
        "  %1 = nn.max_pool2d(%0, pool_size=[2, 2], padding=[1, 1], ceil_mode=True);\n"
        "  %2 = nn.conv2d_transpose(%1, %u, strides=[2, 2], padding=[1, 1], output_padding=[1, 0],\n"
        "                           groups=2);\n"
        "  %3 = nn.avg_pool2d(%2, pool_size=[3, 2], strides=[2, 1], padding=[1, 1],\n"
        "                     count_include_pad=True);\n"
        "  (nn.global_avg_pool2d(%3), nn.global_max_pool2d(%2))\n"
        "}\n",
        true);
    const int64_t shapes[3][4] = {{2, 2, 7, 6}, {4, 1, 3, 3}, {4, 2, 2, 2}};
    ry_value *args[3];
    uint64_t r = 12345;
    for (int i = 0; i < 3; i++) {
        ry_tensor *t = ry_tensor_new(RY_FLOAT64, 4, shapes[i]);
        for (int64_t k = 0; k < t->size; k++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            ((double *)t->data)[k] = (double)(r >> 11) / 9007199254740992.0 - 0.5;
        }
        args[i] = ry_value_tensor(t);
    }
    ry_gradcheck_report rep;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_gradcheck(m, "main", 3, args, NULL, &rep, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("gradcheck: %s", err.msg);
    }
    for (int i = 0; i < rep.nparams; i++)
        if (!rep.params[i].ok)
            fail_msg("gradient of %s: max abs error %g", rep.params[i].name, rep.params[i].max_abs);
    assert_int_equal(rep.nparams, 3);
    assert_true(rep.ok);
    for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

/* Every allocation a kernel makes may fail: the run reports it, without
 * leaking or crashing, then succeeds once memory is back. */
static void test_kernels_out_of_memory(void **state) {
    static const char *const names[] = {"conv_f32_groups", "conv_f16", "convt_i32", "max_i8",
                                        "avg_f32", "gap_i32", "bw_f32", "maxg_f32", "avgg_f32",
                                        "conv_f32_to_f64", "conv_i8_to_i32"};
    enum { NPICK = sizeof names / sizeof names[0] };
    const conv_case *picks[NPICK];
    int np = 0;
    for (int i = 0; i < NCASES; i++)
        for (int j = 0; j < NPICK; j++)
            if (!strcmp(cases[i].name, names[j])) picks[np++] = &cases[i];
    assert_int_equal(np, NPICK);
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
            ry_status s = ry_op_run(NULL, op, &attrs, a, k->nin, types, k->nin, in, &kc, &t, &nout, &out);
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
    struct CMUnitTest tests[NCASES + 12];
    for (int i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, run_fixture, NULL, NULL,
                                       (void *)&cases[i]};
    tests[NCASES + 0] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_rel);
    tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_rel_errors);
    tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_conv2d_transpose_rel);
    tests[NCASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_pool_rel);
    tests[NCASES + 4] = (struct CMUnitTest)cmocka_unit_test(test_registry_entries);
    tests[NCASES + 5] = (struct CMUnitTest)cmocka_unit_test(test_text_typecheck);
    tests[NCASES + 6] = (struct CMUnitTest)cmocka_unit_test(test_text_errors);
    tests[NCASES + 7] = (struct CMUnitTest)cmocka_unit_test(test_text_run);
    tests[NCASES + 8] = (struct CMUnitTest)cmocka_unit_test(test_grad_rules);
    tests[NCASES + 9] = (struct CMUnitTest)cmocka_unit_test(test_grad_rule_edges);
    tests[NCASES + 10] = (struct CMUnitTest)cmocka_unit_test(test_adjoint_rel);
    tests[NCASES + 11] = (struct CMUnitTest)cmocka_unit_test(test_gradcheck_cnn);
    struct CMUnitTest oom[] = {cmocka_unit_test(test_kernels_out_of_memory)};
    int fails = cmocka_run_group_tests_name("op_conv", tests, setup, teardown);
    return fails + cmocka_run_group_tests_name("op_conv_oom", oom, NULL, NULL);
}
