/*
 * test_op_elemwise.c: the elemwise operator family. Kernels run through
 * ry_op_run against results computed by numpy (tools/gen_op_elemwise.py
 * writes tests/ops/elemwise/: one line per case in cases.txt, inputs and the
 * expected result as .npy); one cmocka test per operator runs its cases.
 * Then the type relations: inferred types for good inputs, located errors
 * for bad ones, and the run-time errors of integer division and power.
 */
#include <stdlib.h>

#include "test_util.h"
#include "backend/cpu/elemwise_kernels.h"
#include "op/families.h"

#define DIR "tests/ops/elemwise/"

/* ---- fixture cases ---- */

/* Parses "name=kind:value" into a; strings and lists live in arena. */
static void parse_attr(ry_arena *arena, const char *tok, ry_attr *a) {
    const char *eq = strchr(tok, '=');
    assert_non_null(eq);
    a->name = ry_arena_strndup(arena, tok, (size_t)(eq - tok));
    a->span = RY_NO_SPAN;
    char kind = eq[1];
    const char *v = eq + 3;
    switch (kind) {
    case 'i': a->value = (ry_attr_value){.kind = RY_AV_INT, .i = strtoll(v, NULL, 10)}; break;
    case 'f': a->value = (ry_attr_value){.kind = RY_AV_FLOAT, .f = strtod(v, NULL)}; break;
    case 's': a->value = (ry_attr_value){.kind = RY_AV_STR, .s = ry_arena_strdup(arena, v)}; break;
    case 'l': {
        int n = 0;
        ry_attr_value *items = RY_NEW_ARRAY(arena, ry_attr_value, RY_MAX_RANK + 1);
        for (const char *p = v; *p && n <= RY_MAX_RANK;) {
            char *end;
            items[n++] = (ry_attr_value){.kind = RY_AV_INT, .i = strtoll(p, &end, 10)};
            p = *end == ',' ? end + 1 : end;
        }
        a->value = (ry_attr_value){.kind = RY_AV_LIST, .list = {n, items}};
        break;
    }
    default: fail_msg("bad attribute kind in %s", tok);
    }
}

static void tolerance(ry_dtype dt, double *rtol, double *atol) {
    switch (dt) {
    case RY_FLOAT64: *rtol = 1e-12, *atol = 1e-13; break;
    case RY_FLOAT32: *rtol = 2e-6, *atol = 1e-6; break;
    case RY_FLOAT16: *rtol = 2e-3, *atol = 1e-3; break;
    default: *rtol = 0, *atol = 0; /* integers and bool: exact */
    }
}

/* Runs one case: loads inputs, runs the op, compares with the expected. */
static void run_case(const ry_op *op, const char *name, int nin, int nattrs, char **toks) {
    ry_arena *arena = ry_arena_new();
    ry_attr attrs[8];
    assert_true(nattrs <= 8);
    for (int i = 0; i < nattrs; i++) parse_attr(arena, toks[i], &attrs[i]);
    ry_attrs as = {nattrs, attrs};
    ry_tensor *in[4] = {0};
    ry_type *types[4];
    char path[256];
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, DIR "%s_in%d.npy", name, i);
        in[i] = test_npy(path);
        types[i] = ry_type_of_tensor(arena, in[i]);
    }
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx kc = {.span = RY_NO_SPAN, .err = &err};
    ry_type *ot = NULL;
    int nout = 0;
    ry_tensor **outs = NULL;
    if (ry_op_check_attrs(op, &as, &err) ||
        ry_op_run(NULL, op, &as, arena, nin, types, nin, in, &kc, &ot, &nout, &outs))
        fail_msg("%s: %s", name, err.msg);
    assert_int_equal(nout, 1);
    snprintf(path, sizeof path, DIR "%s_out.npy", name);
    ry_tensor *want = test_npy(path);
    if (outs[0]->dtype != want->dtype)
        fail_msg("%s: dtype %s, expected %s", name, ry_dtype_name(outs[0]->dtype),
                 ry_dtype_name(want->dtype));
    double rtol, atol;
    tolerance(want->dtype, &rtol, &atol);
    test_assert_close(outs[0], want, rtol, atol);
    ry_tensor_release(want);
    ry_tensor_release(outs[0]);
    ry_free(outs);
    for (int i = 0; i < nin; i++) ry_tensor_release(in[i]);
    ry_arena_free(arena);
}

/* One test per op: every line of cases.txt naming it (at least 3). */
static void op_cases(void **state) {
    const char *opname = *state;
    const ry_op *op = ry_op_find(opname);
    if (!op) fail_msg("operator %s is not registered", opname);
    FILE *f = fopen(DIR "cases.txt", "r");
    if (!f) fail_msg("cannot open " DIR "cases.txt (run from the repository root)");
    char line[512];
    int ran = 0;
    while (fgets(line, sizeof line, f)) {
        char *toks[16];
        int n = 0;
        for (char *t = strtok(line, " \n"); t && n < 16; t = strtok(NULL, " \n")) toks[n++] = t;
        if (n < 3 || strcmp(toks[0], opname) != 0) continue;
        run_case(op, toks[1], atoi(toks[2]), n - 3, toks + 3);
        ran++;
    }
    fclose(f);
    if (ran < 3) fail_msg("%s: only %d fixture cases", opname, ran);
}

/* ---- type relations ---- */

#define SRC_TEXT "%0 = op(%x, %y, attr=1);\n"
static ry_source src = {"t.relay", SRC_TEXT, sizeof SRC_TEXT - 1};
static const ry_span call_span = {&src, 1, 6, 2};

typedef struct rel_run {
    ry_arena *arena;
    ry_error err;
    ry_type *out;
} rel_run;

static ry_type *tt(ry_arena *a, ry_dtype dt, int n, const int64_t *shape) {
    ry_dim dims[RY_MAX_RANK];
    for (int i = 0; i < n; i++)
        dims[i] = shape[i] < 0 ? (ry_dim){RY_DIM_ANY, 0, NULL}
                               : (ry_dim){RY_DIM_CONST, shape[i], NULL};
    return ry_type_tensor_arena(a, dt, n, dims);
}

static ry_type *tsym(ry_arena *a, ry_dtype dt, const char *sym, int64_t d1) {
    ry_dim dims[2] = {{RY_DIM_SYM, 0, sym}, {RY_DIM_CONST, d1, NULL}};
    return ry_type_tensor_arena(a, dt, 2, dims);
}

static ry_rel_status rel(rel_run *r, const char *opname, int nattrs, ry_attr *attrs, int nargs,
                         ry_type **args) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    ry_attrs as = {nattrs, attrs};
    ry_rel_ctx c = {r->arena, op, &as, call_span, &r->err};
    memset(&r->err, 0, sizeof r->err);
    r->out = NULL;
    return op->rel(&c, nargs, args, &r->out);
}

static void expect_type(rel_run *r, ry_dtype dt, int n, const int64_t *shape) {
    assert_non_null(r->out);
    assert_int_equal(r->out->kind, RY_TYPE_TENSOR);
    assert_int_equal(r->out->tensor.dtype, dt);
    assert_int_equal(r->out->tensor.ndim, n);
    for (int i = 0; i < n; i++) {
        if (shape[i] < 0) {
            assert_int_equal(r->out->tensor.dims[i].kind, RY_DIM_ANY);
        } else {
            assert_int_equal(r->out->tensor.dims[i].kind, RY_DIM_CONST);
            assert_int_equal(r->out->tensor.dims[i].value, shape[i]);
        }
    }
}

/* An error located at the call, whose message contains `part`. */
static void expect_error(rel_run *r, ry_rel_status s, int col, const char *part) {
    assert_int_equal(s, RY_REL_FAIL);
    assert_string_equal(r->err.file, "t.relay");
    assert_int_equal(r->err.line, 1);
    assert_int_equal(r->err.col, col);
    if (!strstr(r->err.msg, part)) fail_msg("message \"%s\" lacks \"%s\"", r->err.msg, part);
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}

static ry_attr attr_int(const char *name, int64_t v) {
    return (ry_attr){name, {.kind = RY_AV_INT, .i = v}, {&src, 1, 17, 6}};
}
static ry_attr attr_float(const char *name, double v) {
    return (ry_attr){name, {.kind = RY_AV_FLOAT, .f = v}, {&src, 1, 17, 6}};
}
static ry_attr attr_str(const char *name, const char *v) {
    return (ry_attr){name, {.kind = RY_AV_STR, .s = v}, {&src, 1, 17, 6}};
}
static ry_attr attr_list(ry_arena *a, const char *name, int n, const int64_t *v) {
    ry_attr_value *items = RY_NEW_ARRAY(a, ry_attr_value, n ? n : 1);
    for (int i = 0; i < n; i++) items[i] = (ry_attr_value){.kind = RY_AV_INT, .i = v[i]};
    return (ry_attr){name, {.kind = RY_AV_LIST, .list = {n, items}}, {&src, 1, 17, 6}};
}

static void rel_binary(void **state) {
    rel_run r = {.arena = ry_arena_new()};
    ry_arena *a = r.arena;
    ry_type *args[2] = {tt(a, RY_FLOAT32, 3, SHAPE(2, 1, 4)), tt(a, RY_FLOAT32, 2, SHAPE(3, 1))};
    assert_int_equal(rel(&r, "add", 0, NULL, 2, args), RY_REL_OK);
    expect_type(&r, RY_FLOAT32, 3, SHAPE(2, 3, 4));
    assert_int_equal(rel(&r, "less", 0, NULL, 2, args), RY_REL_OK);
    expect_type(&r, RY_BOOL, 3, SHAPE(2, 3, 4));
    /* symbolic n with 1 stays n; Any propagates */
    args[0] = tsym(a, RY_FLOAT64, "n", 3);
    args[1] = tt(a, RY_FLOAT64, 2, SHAPE(1, 3));
    assert_int_equal(rel(&r, "multiply", 0, NULL, 2, args), RY_REL_OK);
    assert_int_equal(r.out->tensor.dims[0].kind, RY_DIM_SYM);
    assert_string_equal(r.out->tensor.dims[0].name, "n");
    args[1] = tt(a, RY_FLOAT64, 1, SHAPE(-1));
    assert_int_equal(rel(&r, "subtract", 0, NULL, 2, args), RY_REL_OK);
    assert_int_equal(r.out->tensor.dims[1].kind, RY_DIM_CONST);
    /* incomplete argument: defer */
    ry_type inc = {.kind = RY_TYPE_INCOMPLETE};
    args[1] = &inc;
    assert_int_equal(rel(&r, "add", 0, NULL, 2, args), RY_REL_DEFER);
    /* errors: shapes, dtypes, bool arithmetic, non-tensor, logical on floats */
    args[0] = tt(a, RY_FLOAT32, 2, SHAPE(2, 3));
    args[1] = tt(a, RY_FLOAT32, 1, SHAPE(4));
    expect_error(&r, rel(&r, "add", 0, NULL, 2, args), 6, "do not broadcast");
    args[1] = tt(a, RY_FLOAT64, 1, SHAPE(3));
    expect_error(&r, rel(&r, "divide", 0, NULL, 2, args), 6,
                 "different dtypes, float32 and float64");
    args[0] = tt(a, RY_BOOL, 1, SHAPE(3));
    args[1] = tt(a, RY_BOOL, 1, SHAPE(3));
    expect_error(&r, rel(&r, "add", 0, NULL, 2, args), 6, "dtype bool not supported");
    assert_int_equal(rel(&r, "equal", 0, NULL, 2, args), RY_REL_OK);
    assert_int_equal(rel(&r, "logical_or", 0, NULL, 2, args), RY_REL_OK);
    expect_type(&r, RY_BOOL, 1, SHAPE(3));
    args[0] = tt(a, RY_FLOAT32, 1, SHAPE(3));
    args[1] = tt(a, RY_FLOAT32, 1, SHAPE(3));
    expect_error(&r, rel(&r, "logical_and", 0, NULL, 2, args), 6, "expected bool");
    args[1] = ry_type_tuple_arena(a, 1, args);
    expect_error(&r, rel(&r, "maximum", 0, NULL, 2, args), 6, "argument 2 must be a tensor");
    expect_error(&r, rel(&r, "maximum", 0, NULL, 1, args), 6, "takes 2 arguments, got 1");
    ry_arena_free(a);
}

static void rel_unary(void **state) {
    rel_run r = {.arena = ry_arena_new()};
    ry_arena *a = r.arena;
    ry_type *x[1] = {tt(a, RY_FLOAT64, 2, SHAPE(2, 3))};
    const char *floats[] = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "nn.leaky_relu"};
    const char *nums[] = {"negative", "abs", "nn.relu", "copy", "zeros_like", "ones_like"};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(rel(&r, floats[i], 0, NULL, 1, x), RY_REL_OK);
        expect_type(&r, RY_FLOAT64, 2, SHAPE(2, 3));
    }
    x[0] = tt(a, RY_INT32, 1, SHAPE(5));
    for (int i = 0; i < 6; i++) {
        assert_int_equal(rel(&r, nums[i], 0, NULL, 1, x), RY_REL_OK);
        expect_type(&r, RY_INT32, 1, SHAPE(5));
    }
    for (int i = 0; i < 7; i++)
        expect_error(&r, rel(&r, floats[i], 0, NULL, 1, x), 6, "dtype int32 not supported");
    expect_error(&r, rel(&r, "logical_not", 0, NULL, 1, x), 6, "expected bool");
    x[0] = tt(a, RY_BOOL, 0, NULL);
    assert_int_equal(rel(&r, "logical_not", 0, NULL, 1, x), RY_REL_OK);
    expect_type(&r, RY_BOOL, 0, NULL);
    expect_error(&r, rel(&r, "negative", 0, NULL, 1, x), 6, "dtype bool not supported");
    /* leaky_relu: alpha defaults to 0.25 (TVM's C++ default) and must be >= 0 */
    const ry_op *lr = ry_op_find("nn.leaky_relu");
    assert_true(ry_attr_float(lr, NULL, "alpha") == 0.25);
    x[0] = tt(a, RY_FLOAT32, 1, SHAPE(4));
    ry_attr al = attr_float("alpha", -0.5);
    expect_error(&r, rel(&r, "nn.leaky_relu", 1, &al, 1, x), 17, "alpha must be >= 0");
    /* clip: both bounds required and numeric */
    ry_attr cl[2] = {attr_float("a_min", -1), attr_int("a_max", 1)};
    assert_int_equal(rel(&r, "clip", 2, cl, 1, x), RY_REL_OK);
    expect_type(&r, RY_FLOAT32, 1, SHAPE(4));
    expect_error(&r, rel(&r, "clip", 1, cl, 1, x), 6, "attribute a_max is required");
    cl[1] = attr_str("a_max", "big");
    expect_error(&r, rel(&r, "clip", 2, cl, 1, x), 17, "a_max must be a number");
    ry_arena_free(a);
}

static void rel_cast_where(void **state) {
    rel_run r = {.arena = ry_arena_new()};
    ry_arena *a = r.arena;
    ry_type *x[1] = {tt(a, RY_FLOAT32, 2, SHAPE(2, 3))};
    ry_attr d = attr_str("dtype", "int64");
    assert_int_equal(rel(&r, "cast", 1, &d, 1, x), RY_REL_OK);
    expect_type(&r, RY_INT64, 2, SHAPE(2, 3));
    expect_error(&r, rel(&r, "cast", 0, NULL, 1, x), 6, "attribute dtype is required");
    d = attr_str("dtype", "float128");
    expect_error(&r, rel(&r, "cast", 1, &d, 1, x), 17, "dtype must be one of");
    /* where: three-way broadcast, bool condition, equal dtypes */
    ry_type *w[3] = {tt(a, RY_BOOL, 2, SHAPE(3, 1)), tt(a, RY_FLOAT64, 1, SHAPE(4)),
                     tt(a, RY_FLOAT64, 3, SHAPE(2, 1, 1))};
    assert_int_equal(rel(&r, "where", 0, NULL, 3, w), RY_REL_OK);
    expect_type(&r, RY_FLOAT64, 3, SHAPE(2, 3, 4));
    w[2] = tt(a, RY_FLOAT32, 1, SHAPE(4));
    expect_error(&r, rel(&r, "where", 0, NULL, 3, w), 6, "different dtypes, float64 and float32");
    w[2] = tt(a, RY_FLOAT64, 1, SHAPE(5));
    expect_error(&r, rel(&r, "where", 0, NULL, 3, w), 6, "do not broadcast");
    w[0] = tt(a, RY_INT32, 2, SHAPE(3, 1));
    expect_error(&r, rel(&r, "where", 0, NULL, 3, w), 6, "argument 1 (expected bool)");
    ry_arena_free(a);
}

static void rel_creation(void **state) {
    rel_run r = {.arena = ry_arena_new()};
    ry_arena *a = r.arena;
    ry_attr at[2] = {attr_list(a, "shape", 2, SHAPE(2, 3)), attr_str("dtype", "int32")};
    assert_int_equal(rel(&r, "zeros", 2, at, 0, NULL), RY_REL_OK);
    expect_type(&r, RY_INT32, 2, SHAPE(2, 3));
    assert_int_equal(rel(&r, "ones", 2, at, 0, NULL), RY_REL_OK);
    expect_type(&r, RY_INT32, 2, SHAPE(2, 3));
    expect_error(&r, rel(&r, "zeros", 1, at, 0, NULL), 6, "attribute dtype is required");
    expect_error(&r, rel(&r, "ones", 1, &at[1], 0, NULL), 6, "attribute shape is required");
    at[0] = attr_list(a, "shape", 2, SHAPE(2, -3));
    expect_error(&r, rel(&r, "zeros", 2, at, 0, NULL), 17, "dimension 1 is negative");
    at[0] = attr_list(a, "shape", 9, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1));
    expect_error(&r, rel(&r, "zeros", 2, at, 0, NULL), 17, "rank 9");
    at[0] = attr_list(a, "shape", 3, SHAPE(1 << 30, 1 << 30, 1 << 30));
    expect_error(&r, rel(&r, "zeros", 2, at, 0, NULL), 17, "more than 2^63 elements");
    /* full: dtype defaults to the fill value's; the fill value is a scalar */
    ry_type *v[1] = {tt(a, RY_FLOAT64, 0, NULL)};
    at[0] = attr_list(a, "shape", 1, SHAPE(4));
    assert_int_equal(rel(&r, "full", 1, at, 1, v), RY_REL_OK);
    expect_type(&r, RY_FLOAT64, 1, SHAPE(4));
    assert_int_equal(rel(&r, "full", 2, at, 1, v), RY_REL_OK);
    expect_type(&r, RY_INT32, 1, SHAPE(4));
    v[0] = tt(a, RY_FLOAT64, 1, SHAPE(1));
    expect_error(&r, rel(&r, "full", 1, at, 1, v), 6, "must be a scalar");
    ry_type *fl[2] = {tt(a, RY_INT8, 2, SHAPE(2, 2)), tt(a, RY_FLOAT32, 0, NULL)};
    assert_int_equal(rel(&r, "full_like", 0, NULL, 2, fl), RY_REL_OK);
    expect_type(&r, RY_INT8, 2, SHAPE(2, 2));
    fl[1] = tt(a, RY_FLOAT32, 1, SHAPE(2));
    expect_error(&r, rel(&r, "full_like", 0, NULL, 2, fl), 6, "must be a scalar");
    expect_error(&r, rel(&r, "zeros", 2, at, 1, fl), 6, "takes no arguments");
    ry_arena_free(a);
}

static void rel_broadcast_collapse(void **state) {
    rel_run r = {.arena = ry_arena_new()};
    ry_arena *a = r.arena;
    ry_attr sh = attr_list(a, "shape", 3, SHAPE(2, 3, 4));
    ry_type *x[2] = {tt(a, RY_FLOAT32, 2, SHAPE(3, 1))};
    assert_int_equal(rel(&r, "broadcast_to", 1, &sh, 1, x), RY_REL_OK);
    expect_type(&r, RY_FLOAT32, 3, SHAPE(2, 3, 4));
    x[0] = tsym(a, RY_FLOAT32, "n", 4); /* (n, 4): n is checked at run time */
    assert_int_equal(rel(&r, "broadcast_to", 1, &sh, 1, x), RY_REL_OK);
    x[0] = tt(a, RY_FLOAT32, 1, SHAPE(5));
    expect_error(&r, rel(&r, "broadcast_to", 1, &sh, 1, x), 6, "does not broadcast");
    x[0] = tt(a, RY_FLOAT32, 4, SHAPE(1, 2, 3, 4));
    expect_error(&r, rel(&r, "broadcast_to", 1, &sh, 1, x), 6, "has rank 4");
    expect_error(&r, rel(&r, "broadcast_to", 0, NULL, 1, x), 6, "attribute shape is required");
    /* collapse_sum_like: the second argument's type; it must broadcast to the first */
    x[0] = tt(a, RY_FLOAT64, 3, SHAPE(2, 3, 4));
    x[1] = tt(a, RY_FLOAT64, 2, SHAPE(3, 1));
    assert_int_equal(rel(&r, "collapse_sum_like", 0, NULL, 2, x), RY_REL_OK);
    expect_type(&r, RY_FLOAT64, 2, SHAPE(3, 1));
    x[1] = tt(a, RY_FLOAT64, 1, SHAPE(3));
    expect_error(&r, rel(&r, "collapse_sum_like", 0, NULL, 2, x), 6, "does not broadcast");
    x[1] = tt(a, RY_BOOL, 1, SHAPE(4));
    expect_error(&r, rel(&r, "collapse_sum_like", 0, NULL, 2, x), 6, "dtype bool");
    /* broadcast_to_like: the second argument's shape in the first's dtype */
    x[0] = tt(a, RY_INT32, 2, SHAPE(3, 1));
    x[1] = tt(a, RY_FLOAT64, 3, SHAPE(2, 3, 4));
    assert_int_equal(rel(&r, "broadcast_to_like", 0, NULL, 2, x), RY_REL_OK);
    expect_type(&r, RY_INT32, 3, SHAPE(2, 3, 4));
    x[0] = tt(a, RY_INT32, 1, SHAPE(5));
    expect_error(&r, rel(&r, "broadcast_to_like", 0, NULL, 2, x), 6, "does not broadcast");
    ry_arena_free(a);
}

/* Integer division by zero and 0 ** -1 are run-time errors, located. */
static void kernel_errors(void **state) {
    ry_arena *a = ry_arena_new();
    int64_t s3[1] = {3};
    ry_tensor *t[2] = {ry_tensor_new(RY_INT32, 1, s3), ry_tensor_new(RY_INT32, 1, s3)};
    for (int i = 0; i < 3; i++) {
        ry_tensor_set(t[0], i, i);
        ry_tensor_set(t[1], i, i - 1); /* -1, 0, 1 */
    }
    ry_type *ty[2] = {ry_type_of_tensor(a, t[0]), ry_type_of_tensor(a, t[1])};
    const char *ops[2] = {"divide", "power"};
    const char *msgs[2] = {"integer division by zero", "0 raised to a negative power"};
    for (int k = 0; k < 2; k++) {
        if (k == 1) ry_tensor_set(t[1], 1, -1); /* 0 ** -1 */
        ry_error err;
        memset(&err, 0, sizeof err);
        ry_kernel_ctx kc = {.span = call_span, .err = &err};
        ry_type *ot;
        int nout;
        ry_tensor **outs;
        ry_status st = ry_op_run(NULL, ry_op_find(ops[k]), NULL, a, 2, ty, 2, t, &kc, &ot, &nout, &outs);
        assert_int_equal(st, RY_ERR);
        assert_int_equal(err.col, 6);
        if (!strstr(err.msg, msgs[k])) fail_msg("message \"%s\"", err.msg);
    }
    ry_tensor_release(t[0]);
    ry_tensor_release(t[1]);
    ry_arena_free(a);
}

/* Kernels called directly with tensors that disagree with each other (a
 * caller's bug, not the relation's) answer with an error, never a wild
 * access. */
static void kernel_guards(void **state) {
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3};
    ry_tensor *a = ry_tensor_zeros(RY_FLOAT32, 2, s23), *b = ry_tensor_zeros(RY_FLOAT32, 1, s4);
    ry_tensor *o = ry_tensor_new(RY_FLOAT32, 2, s23), *d = ry_tensor_zeros(RY_FLOAT64, 1, s3);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx kc = {.op = ry_op_find("add"), .span = call_span, .err = &err};
    ry_tensor *ab[2] = {a, b}, *ad[2] = {a, d};
    assert_int_equal(ry_cpu_add(&kc, 2, ab, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "does not broadcast"));
    assert_int_equal(ry_cpu_add(&kc, 2, ad, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "dtypes float32 and float64 differ"));
    kc.op = ry_op_find("exp");
    assert_int_equal(ry_cpu_exp(&kc, 1, &d, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "does not match"));
    kc.op = ry_op_find("less");
    assert_int_equal(ry_cpu_less(&kc, 2, ab, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "result dtype float32"));
    kc.op = ry_op_find("collapse_sum_like");
    assert_int_equal(ry_cpu_collapse_sum_like(&kc, 2, (ry_tensor *[]){b, a}, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "does not broadcast"));
    kc.op = ry_op_find("full");
    assert_int_equal(ry_cpu_full(&kc, 1, &b, 1, &o), RY_ERR);
    assert_non_null(strstr(err.msg, "must be a scalar"));
    assert_int_equal(err.col, 6);
    ry_tensor_release(a), ry_tensor_release(b), ry_tensor_release(o), ry_tensor_release(d);
}

/* Allocation failures anywhere in a run (results, float16 widening,
 * accumulators) come back as errors; ASan and valgrind check for leaks. */
static void alloc_failures(void **state) {
    ry_arena *a = ry_arena_new();
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    ry_tensor *h[2] = {ry_tensor_zeros(RY_FLOAT16, 2, s23), ry_tensor_zeros(RY_FLOAT16, 1, s3)};
    ry_tensor *f[2] = {ry_tensor_zeros(RY_FLOAT32, 2, s23), ry_tensor_zeros(RY_FLOAT32, 1, s3)};
    struct { const char *op; int n; ry_tensor **in; } runs[] = {
        {"add", 2, h}, {"exp", 1, h}, {"collapse_sum_like", 2, f}, {"maximum", 2, f}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        ry_type *ty[2];
        for (int i = 0; i < runs[r].n; i++) ty[i] = ry_type_of_tensor(a, runs[r].in[i]);
        int failed = 0, ok = 0;
        for (long k = 0; k < 16; k++) {
            ry_error err;
            memset(&err, 0, sizeof err);
            ry_kernel_ctx kc = {.span = call_span, .err = &err};
            ry_type *ot;
            int nout;
            ry_tensor **outs;
            ry_alloc_fail_after(k);
            ry_status st = ry_op_run(NULL, ry_op_find(runs[r].op), NULL, a, runs[r].n, ty, runs[r].n,
                                     runs[r].in, &kc, &ot, &nout, &outs);
            ry_alloc_fail_after(-1);
            if (st == RY_OK) {
                ok++;
                ry_tensor_release(outs[0]);
                ry_free(outs);
            } else {
                failed++;
                assert_true(err.msg[0] != '\0');
            }
        }
        if (!failed || !ok) fail_msg("%s: %d failed, %d succeeded", runs[r].op, failed, ok);
    }
    for (int i = 0; i < 2; i++) ry_tensor_release(h[i]), ry_tensor_release(f[i]);
    ry_arena_free(a);
}

/* ---- through the text format, the type checker and the interpreter ---- */

static const char *program =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32],\n"
    "          %c: Tensor[(2, 1), bool]) {\n"
    "  %0 = add(%x, %y);\n"
    "  %1 = nn.leaky_relu(%0, alpha=0.1f);\n"
    "  %2 = clip(%1, a_min=-0.5f, a_max=1f);\n"
    "  %3 = where(%c, %2, %x);\n"
    "  %4 = cast(%3, dtype=\"float64\");\n"
    "  %5 = zeros(shape=[2, 3], dtype=\"float64\");\n"
    "  %6 = less(%4, %5);\n"
    "  %7 = full(1f, shape=[3], dtype=\"float32\");\n"
    "  %8 = collapse_sum_like(%x, %7);\n"
    "  %9 = broadcast_to(%8, shape=[4, 3]);\n"
    "  (%6, %9, %x * %y - %x / %y)\n"
    "}\n";

static void expect_tensor_type(const ry_type *t, ry_dtype dt, int n, const int64_t *shape) {
    rel_run r = {.out = (ry_type *)t};
    expect_type(&r, dt, n, shape);
}

static void text_typecheck(void **state) {
    ry_module *m = test_parse(program, true);
    const ry_type *t = m->globals[0]->func->func.body->type;
    assert_non_null(t);
    assert_int_equal(t->kind, RY_TYPE_TUPLE);
    assert_int_equal(t->tuple.n, 3);
    expect_tensor_type(t->tuple.fields[0], RY_BOOL, 2, SHAPE(2, 3));
    expect_tensor_type(t->tuple.fields[1], RY_FLOAT32, 2, SHAPE(4, 3));
    expect_tensor_type(t->tuple.fields[2], RY_FLOAT32, 2, SHAPE(2, 3));
    ry_module_free(m);
    /* a dtype mismatch is reported at the call, line 3 */
    const char *bad = "#[version = \"0.0.5\"]\n"
                      "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float64]) {\n"
                      "  add(%x, %y)\n"
                      "}\n";
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_module_parse("bad.relay", bad, strlen(bad), &m, &err), RY_OK);
    assert_int_equal(ry_module_typecheck(m, &err), RY_ERR);
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 3);
    if (!strstr(err.msg, "different dtypes")) fail_msg("message \"%s\"", err.msg);
    ry_module_free(m);
}

static void text_program(void **state) {
    ry_module *m = test_parse(program, true);
    ry_value *args[3];
    char path[128];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, DIR "program_in%d.npy", i);
        args[i] = ry_value_tensor(test_npy(path));
    }
    ry_value *out = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_interp_call(m, "main", 3, args, NULL, &out, &err)) fail_msg("run: %s", err.msg);
    ry_tensor *res[3];
    assert_int_equal(ry_value_flatten(out, res, 3), 3);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, DIR "program_out%d.npy", i);
        ry_tensor *want = test_npy(path);
        assert_int_equal(res[i]->dtype, want->dtype);
        test_assert_close(res[i], want, 2e-6, 1e-6);
        ry_tensor_release(want);
    }
    ry_value_release(out);
    for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

/* Every op of the family is registered once, with TVM's fusion pattern. */
static void registry(void **state) {
    struct { const char *name; ry_op_pattern pat; int nargs; } want[] = {
        {"add", RY_PAT_BROADCAST, 2}, {"where", RY_PAT_BROADCAST, 3},
        {"exp", RY_PAT_ELEMWISE, 1},  {"cast", RY_PAT_ELEMWISE, 1},
        {"zeros", RY_PAT_ELEMWISE, 0}, {"full", RY_PAT_ELEMWISE, 1},
        {"broadcast_to", RY_PAT_BROADCAST, 1}, {"collapse_sum_like", RY_PAT_COMM_REDUCE, 2},
        {"logical_and", RY_PAT_BROADCAST, 2}, {"nn.leaky_relu", RY_PAT_ELEMWISE, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ry_op *op = ry_op_find(want[i].name);
        assert_non_null(op);
        assert_int_equal(op->pattern, want[i].pat);
        assert_int_equal(op->nargs, want[i].nargs);
        assert_non_null(cpu_kernel(op));
        assert_non_null(op->doc);
    }
    assert_int_equal(ry_ops_elemwise_count, 40); /* 38 + stop_gradient + broadcast_to_like */
    /* boolean results have no gradient; arithmetic does */
    assert_true(ry_op_find("less")->no_grad && ry_op_find("logical_not")->no_grad);
    assert_false(ry_op_find("add")->no_grad || ry_op_find("where")->no_grad);
    for (int i = 0; i < ry_ops_elemwise_count; i++)
        assert_ptr_equal(ry_op_find(ry_ops_elemwise[i].name), &ry_ops_elemwise[i]);
}

#define OP(name) {name, op_cases, NULL, NULL, (void *)name}

int main(void) {
    const struct CMUnitTest tests[] = {
        OP("add"), OP("subtract"), OP("multiply"), OP("divide"), OP("power"), OP("maximum"),
        OP("minimum"), OP("equal"), OP("not_equal"), OP("less"), OP("less_equal"),
        OP("greater"), OP("greater_equal"), OP("logical_and"), OP("logical_or"),
        OP("logical_not"), OP("negative"), OP("exp"), OP("log"), OP("sqrt"), OP("rsqrt"),
        OP("tanh"), OP("sigmoid"), OP("abs"), OP("nn.relu"), OP("nn.leaky_relu"), OP("clip"),
        OP("where"), OP("cast"), OP("zeros"), OP("ones"), OP("full"), OP("zeros_like"),
        OP("ones_like"), OP("full_like"), OP("broadcast_to"), OP("collapse_sum_like"),
        OP("copy"),
        cmocka_unit_test(rel_binary),
        cmocka_unit_test(rel_unary),
        cmocka_unit_test(rel_cast_where),
        cmocka_unit_test(rel_creation),
        cmocka_unit_test(rel_broadcast_collapse),
        cmocka_unit_test(kernel_errors),
        cmocka_unit_test(kernel_guards),
        cmocka_unit_test(alloc_failures),
        cmocka_unit_test(text_typecheck),
        cmocka_unit_test(text_program),
        cmocka_unit_test(registry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
