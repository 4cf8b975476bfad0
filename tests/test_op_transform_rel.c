/*
 * test_op_transform_rel.c: the transform operator family's type relations
 * (reductions, reshape, reshape_like, transpose, concatenate, stack, split,
 * take, expand_dims, squeeze, one_hot), checked for inferred types, symbolic
 * and Any dims, deferral, and located errors on bad ranks, shapes, dtypes
 * and attributes. The kernels are test_op_transform.c's.
 */
#include "op_transform_util.h"

/* ---- type relations ---- */

/* Runs op's relation on `|`-separated argument types. */
static ry_rel_status rel(ry_arena *a, const char *opname, const char *attrs, const char *args,
                         ry_type **out, ry_error *err) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    ry_type *at[8];
    int n = 0;
    const char *p = args;
    while (*skip_ws(p)) {
        at[n++] = parse_type(a, &p);
        p = skip_ws(p);
        if (*p == '|') p++;
    }
    ry_attrs at_ = parse_attrs(a, attrs);
    assert_int_equal(ry_op_check_attrs(op, &at_, err), RY_OK);
    ry_rel_ctx c = {a, op, &at_, CALL_SPAN, err};
    *out = NULL;
    return op->rel(&c, n, at, out);
}

static void expect_type(const char *op, const char *attrs, const char *args, const char *want) {
    ry_arena *a = ry_arena_new();
    ry_error err = {0};
    ry_type *t;
    ry_rel_status s = rel(a, op, attrs, args, &t, &err);
    if (s != RY_REL_OK) fail_msg("%s(%s) [%s]: status %d: %s", op, args, attrs, (int)s, err.msg);
    ry_type *w = type_of(a, want);
    if (!ry_type_equal(t, w)) {
        char got[256];
        fail_msg("%s(%s) [%s]: got %s, expected %s", op, args, attrs,
                 ry_type_str(t, got, sizeof got), want);
    }
    ry_arena_free(a);
}

/* The relation fails with a message containing `msg`, located at the
 * attribute `attr` when given (line 2, its column), else at the call. */
static void expect_error(const char *op, const char *attrs, const char *args, const char *msg,
                         const char *attr) {
    ry_arena *a = ry_arena_new();
    ry_error err = {0};
    ry_type *t;
    ry_rel_status s = rel(a, op, attrs, args, &t, &err);
    if (s != RY_REL_FAIL) fail_msg("%s(%s) [%s]: expected an error '%s'", op, args, attrs, msg);
    if (!strstr(err.msg, msg)) fail_msg("%s: message '%s' lacks '%s'", op, err.msg, msg);
    assert_string_equal(err.file, "t.relay");
    if (attr) {
        const char *at = strstr(attrs, attr);
        assert_non_null(at);
        assert_int_equal(err.line, 2);
        assert_int_equal(err.col, (int)(at - attrs) + 1);
    } else {
        assert_int_equal(err.line, 1);
        assert_int_equal(err.col, 1);
    }
    ry_arena_free(a);
}

static void expect_defer(const char *op, const char *attrs, const char *args) {
    ry_arena *a = ry_arena_new();
    ry_error err = {0};
    ry_type *t;
    assert_int_equal(rel(a, op, attrs, args, &t, &err), RY_REL_DEFER);
    ry_arena_free(a);
}

static void test_rel_reduce(void **state) {
    (void)state;
    expect_type("sum", "axis=1", "float32[2, 3, 4]", "float32[2, 4]");
    expect_type("sum", "axis=[0, -1]; keepdims=True", "float32[2, 3, 4]", "float32[1, 3, 1]");
    expect_type("sum", "", "float32[2, 3, 4]", "float32[]");
    expect_type("sum", "keepdims=True", "float64[2, 3]", "float64[1, 1]");
    expect_type("sum", "axis=[1]; exclude=True", "int32[2, 3, 4]", "int32[3]");
    expect_type("sum", "axis=[]", "float32[2, 3]", "float32[]");
    expect_type("sum", "axis=[]; exclude=True", "float32[2, 3]", "float32[]");
    expect_type("max", "exclude=True; keepdims=True", "float32[2, 3]", "float32[1, 1]");
    expect_type("sum", "axis=None", "float32[]", "float32[]");
    expect_type("mean", "axis=1", "float32[n, 3]", "float32[n]");
    expect_type("max", "axis=0; keepdims=True", "float32[?, 4]", "float32[1, 4]");
    expect_type("min", "axis=1", "bool[?, 4]", "bool[?]");
    expect_type("argmax", "axis=1", "float64[2, 3]", "int32[2]");
    expect_type("argmin", "axis=[1]; keepdims=True; select_last_index=True", "int8[2, 3]",
                "int32[2, 1]");
    expect_type("argmax", "", "float32[n, 3]", "int32[]");
    expect_error("sum", "axis=2", "float32[2, 3]", "out of range", "axis");
    expect_error("mean", "keepdims=True; axis=[-3]", "float32[2, 3]", "out of range", "axis");
    expect_error("sum", "axis=[0, -2]", "float32[2, 3]", "listed twice", "axis");
    expect_type("sum", "axis=0", "bool[2, 3]", "bool[3]");
    expect_error("mean", "", "bool[2]", "bool", NULL);
    expect_error("mean", "", "(float32[2], float32[2])", "must be a tensor", NULL);
    expect_error("max", "axis=\"x\"", "float32[2]", "must be", "axis");
    expect_error("argmax", "axis=[1.5f]", "float32[2]", "list of integers", "axis");
    expect_error("argmax", "axis=0", "float32[]", "scalar", "axis");
    expect_error("sum", "", "float32[2] | float32[2]", "takes 1 argument", NULL);
    expect_defer("sum", "axis=0", "_");
    expect_defer("argmax", "", "_");
}

static void test_rel_reshape(void **state) {
    (void)state;
    expect_type("reshape", "newshape=[-1, 4]", "float32[2, 3, 4]", "float32[6, 4]");
    expect_type("reshape", "newshape=[0, 2, 2]", "float32[n, 4]", "float32[n, 2, 2]");
    expect_type("reshape", "newshape=[-1]", "float32[n, 4]", "float32[?]");
    expect_type("reshape", "newshape=[-2, 1]", "int64[n, ?]", "int64[n, ?, 1]");
    expect_type("reshape", "newshape=[-3]", "float32[n, 4]", "float32[?]");
    expect_type("reshape", "newshape=[-4, -1, 2, 0]", "float32[8, 3]", "float32[4, 2, 3]");
    expect_type("reshape", "newshape=[]", "float32[1, 1]", "float32[]");
    expect_type("reshape", "newshape=[0, 3]; allowzero=True", "float32[3, 0]", "float32[0, 3]");
    expect_type("reshape", "newshape=5", "float32[5]", "float32[5]");
    expect_error("reshape", "newshape=[5, 5]", "float32[2, 3]", "cannot reshape", "newshape");
    expect_error("reshape", "newshape=[-1, -1]", "float32[2, 3]", "only one -1", "newshape");
    expect_error("reshape", "newshape=[-5]", "float32[2, 3]", "unsupported special value -5",
                 "newshape");
    expect_error("reshape", "", "float32[2, 3]", "newshape is required", NULL);
    expect_error("reshape", "newshape=[-4, 2, 2]", "float32[5]", "cannot split", "newshape");
    expect_error("reshape", "newshape=[-4, -1, -1]", "float32[4]", "both be -1", "newshape");
    expect_error("reshape", "newshape=[-4, 2]", "float32[4]", "followed by two", "newshape");
    expect_error("reshape", "newshape=[0, 0, 0]", "float32[2, 3]", "only 2 dims", "newshape");
    expect_error("reshape", "newshape=[2, -3]", "float32[2, 3]", "needs two more", "newshape");
    expect_error("reshape", "newshape=[0, -1]; allowzero=True", "float32[2, 3]", "size 0",
                 "newshape");
    expect_error("reshape", "newshape=[1, 1, 1, 1, 1, 1, 1, 1, 1]", "float32[1]", "more than 8",
                 "newshape");
    expect_defer("reshape", "newshape=[2]", "_");
}

static void test_rel_reshape_like(void **state) {
    (void)state;
    expect_type("reshape_like", "", "float32[2, 3, 4]|int32[6, 4]", "float32[6, 4]");
    expect_type("reshape_like", "", "float32[n, 4]|float32[?, ?]", "float32[?, ?]");
    expect_type("reshape_like", "lhs_end=2; rhs_end=1", "float64[2, 2, 5]|float32[4, 3]",
                "float64[4, 5]");
    expect_type("reshape_like", "lhs_begin=-1; rhs_begin=1", "float32[n, 12]|float32[m, 3, 4]",
                "float32[n, 3, 4]");
    expect_type("reshape_like", "lhs_begin=1; lhs_end=1; rhs_begin=1; rhs_end=1",
                "float32[2, 3]|float32[7]", "float32[2, 3]");
    expect_error("reshape_like", "", "float32[2, 2]|float32[2, 3]", "(4 elements) to the shape", NULL);
    expect_error("reshape_like", "lhs_begin=-1; rhs_begin=1", "float32[2, 5]|float32[4, 3]",
                 "dims [1, 2)", NULL);
    expect_error("reshape_like", "rhs_begin=5", "float32[2, 2]|float32[2, 2]", "not a range",
                 "rhs_begin");
    expect_error("reshape_like", "lhs_end=-3", "float32[2, 2]|float32[2, 2]", "not a range",
                 "lhs_end");
    expect_error("reshape_like", "lhs_begin=1.5f", "float32[2, 2]|float32[2, 2]", "integer",
                 "lhs_begin");
    expect_error("reshape_like", "lhs_begin=0; lhs_end=0; rhs_end=8",
                 "float32[1, 1, 1, 1, 1, 1, 1, 1]|float32[1, 1, 1, 1, 1, 1, 1, 1]", "more than 8",
                 NULL);
    expect_defer("reshape_like", "", "_|float32[2]");
    expect_defer("reshape_like", "", "float32[2]|_");
}

static void test_rel_transpose(void **state) {
    (void)state;
    expect_type("transpose", "", "float32[2, 3, 4]", "float32[4, 3, 2]");
    expect_type("transpose", "axes=[]", "float32[2, n]", "float32[n, 2]");
    expect_type("transpose", "axes=[0, 2, 1]", "int8[2, 3, ?]", "int8[2, ?, 3]");
    expect_type("transpose", "axes=[-1, 0]", "float64[2, 5]", "float64[5, 2]");
    expect_type("transpose", "axes=None", "float64[]", "float64[]");
    expect_error("transpose", "axes=[0, 1]", "float32[2, 3, 4]", "3", "axes");
    expect_error("transpose", "axes=[0, 0, 1]", "float32[2, 3, 4]", "permutation", "axes");
    expect_error("transpose", "axes=[0, 1, 5]", "float32[2, 3, 4]", "out of range", "axes");
    expect_defer("transpose", "", "_");
}

static void test_rel_concatenate_stack(void **state) {
    (void)state;
    expect_type("concatenate", "", "(float32[2, 3], float32[4, 3])", "float32[6, 3]");
    expect_type("concatenate", "axis=1", "(float32[2, n], float32[2, 1])", "float32[2, ?]");
    expect_type("concatenate", "axis=1", "(float32[?, 3], float32[2, 3])", "float32[2, 6]");
    expect_type("concatenate", "axis=-1", "(int32[n, 1], int32[n, 2], int32[n, 3])", "int32[n, 6]");
    expect_error("concatenate", "", "(float32[2, 3], float32[2, 4])", "field 1 has 4 at dim 1",
                 NULL);
    expect_error("concatenate", "", "(float32[2, 3], float64[2, 3])", "dtype", NULL);
    expect_error("concatenate", "", "(float32[2, 3], float32[2])", "rank", NULL);
    expect_error("concatenate", "axis=2", "(float32[2, 3], float32[2, 3])", "out of range", "axis");
    expect_error("concatenate", "", "float32[2]", "expects a tuple", NULL);
    expect_error("concatenate", "", "()", "empty", NULL);
    expect_error("concatenate", "", "(float32[2], (float32[2]))", "not a tensor", NULL);
    expect_defer("concatenate", "", "(float32[2], _)");
    expect_defer("concatenate", "", "_");
    expect_type("stack", "axis=1", "(float32[2, 3], float32[2, 3])", "float32[2, 2, 3]");
    expect_type("stack", "axis=-1", "(float32[2, 3], float32[2, 3], float32[2, 3])",
                "float32[2, 3, 3]");
    expect_type("stack", "", "(float32[n], float32[?])", "float32[2, n]");
    expect_type("stack", "", "(int32[], int32[])", "int32[2]");
    expect_error("stack", "", "(float32[2, 3], float32[3, 3])", "field 1 has 3 at dim 0", NULL);
    expect_error("stack", "axis=3", "(float32[2, 3], float32[2, 3])", "out of range", "axis");
    expect_error("stack", "axis=-4", "(float32[2, 3], float32[2, 3])", "out of range", "axis");
    expect_defer("stack", "", "(_, float32[2])");
}

/* Compares a tuple result field by field. */
static void expect_split(const char *attrs, const char *arg, int n, const char *const *want) {
    ry_arena *a = ry_arena_new();
    ry_error err = {0};
    ry_type *t;
    if (rel(a, "split", attrs, arg, &t, &err) != RY_REL_OK) fail_msg("split: %s", err.msg);
    assert_int_equal(t->kind, RY_TYPE_TUPLE);
    assert_int_equal(t->tuple.n, n);
    for (int i = 0; i < n; i++) assert_true(ry_type_equal(t->tuple.fields[i], type_of(a, want[i])));
    ry_arena_free(a);
}

static void test_rel_split(void **state) {
    (void)state;
    expect_split("indices_or_sections=3", "float32[6, 4]", 3,
                 (const char *[]){"float32[2, 4]", "float32[2, 4]", "float32[2, 4]"});
    expect_split("indices_or_sections=[1, 4]", "float32[6, 4]", 3,
                 (const char *[]){"float32[1, 4]", "float32[3, 4]", "float32[2, 4]"});
    expect_split("indices_or_sections=2; axis=-1", "int32[n, 4]", 2,
                 (const char *[]){"int32[n, 2]", "int32[n, 2]"});
    expect_split("indices_or_sections=2", "float32[n, 4]", 2,
                 (const char *[]){"float32[?, 4]", "float32[?, 4]"});
    expect_split("indices_or_sections=[2]", "float32[?]", 2,
                 (const char *[]){"float32[2]", "float32[?]"});
    expect_split("indices_or_sections=[]", "float32[3]", 1, (const char *[]){"float32[3]"});
    expect_error("split", "indices_or_sections=4", "float32[6]", "do not divide",
                 "indices_or_sections");
    expect_error("split", "indices_or_sections=0", "float32[6]", "sections must be",
                 "indices_or_sections");
    expect_error("split", "indices_or_sections=[3, 2]", "float32[6]", "ascending",
                 "indices_or_sections");
    expect_error("split", "indices_or_sections=[0, 2]", "float32[6]", "positive",
                 "indices_or_sections");
    expect_error("split", "indices_or_sections=[2, 6]", "float32[6]", "not inside",
                 "indices_or_sections");
    expect_error("split", "", "float32[6]", "required", NULL);
    expect_error("split", "indices_or_sections=2; axis=1", "float32[6]", "out of range", "axis");
    expect_defer("split", "indices_or_sections=2", "_");
}

static void test_rel_take(void **state) {
    (void)state;
    expect_type("take", "", "float32[3, 4] | int32[2, 5]", "float32[2, 5]");
    expect_type("take", "axis=1", "float32[3, 4] | int32[2, 5]", "float32[3, 2, 5]");
    expect_type("take", "axis=0", "float64[n, 4] | int64[]", "float64[4]");
    expect_type("take", "batch_dims=1; axis=1", "float32[2, 3, 4] | int64[2, 5]",
                "float32[2, 5, 4]");
    expect_type("take", "batch_dims=-1; axis=2", "float32[2, 3, 4] | uint8[?, 5]",
                "float32[2, 3, 5]");
    expect_type("take", "axis=-1; mode=\"fast\"", "int8[3, 4] | int8[m]", "int8[3, m]");
    expect_error("take", "", "float32[3] | float32[2]", "integers", NULL);
    expect_error("take", "axis=0; mode=\"nearest\"", "float32[3] | int32[2]", "mode", "mode");
    expect_error("take", "axis=2", "float32[3, 4] | int32[2]", "out of range", "axis");
    expect_error("take", "batch_dims=2; axis=1", "float32[2, 3, 4] | int32[2, 3]",
                 "must not exceed", "batch_dims");
    expect_error("take", "batch_dims=3; axis=2", "float32[2, 3, 4] | int32[2, 3]", "out of range",
                 "batch_dims");
    expect_error("take", "batch_dims=1; axis=1", "float32[2, 3, 4] | int32[3, 5]", "batch dim 0",
                 NULL);
    expect_error("take", "axis=\"x\"", "float32[2] | int32[2]", "must be an integer", "axis");
    expect_defer("take", "", "float32[2] | _");
    expect_defer("take", "", "_ | int32[2]");
}

static void test_rel_expand_squeeze(void **state) {
    (void)state;
    expect_type("expand_dims", "axis=1; num_newaxis=2", "float32[2, 3]", "float32[2, 1, 1, 3]");
    expect_type("expand_dims", "axis=-1", "float32[2, 3]", "float32[2, 3, 1]");
    expect_type("expand_dims", "axis=0", "int32[]", "int32[1]");
    expect_type("expand_dims", "axis=0; num_newaxis=0", "float32[n]", "float32[n]");
    expect_error("expand_dims", "axis=3", "float32[2, 3]", "out of range", "axis");
    expect_error("expand_dims", "axis=-4", "float32[2, 3]", "out of range", "axis");
    expect_error("expand_dims", "axis=0; num_newaxis=-1", "float32[2, 3]", ">= 0", "num_newaxis");
    expect_error("expand_dims", "", "float32[2, 3]", "axis is required", NULL);
    expect_error("expand_dims", "axis=0; num_newaxis=7", "float32[2, 3]", "more than 8", NULL);
    expect_type("squeeze", "", "float32[1, 3, 1]", "float32[3]");
    expect_type("squeeze", "axis=[0]", "float32[1, 3, 1]", "float32[3, 1]");
    expect_type("squeeze", "axis=[-1, 0]", "float32[1, 3, 1]", "float32[3]");
    expect_type("squeeze", "axis=[0]", "float32[1, n, ?]", "float32[n, ?]");
    expect_error("squeeze", "", "float32[1, n, 3]", "dim 1 is not known", NULL);
    expect_type("squeeze", "axis=[1]", "float32[2, ?]", "float32[2]");
    expect_error("squeeze", "axis=[1]", "float32[1, 3, 1]", "extent 3, not 1", "axis");
    expect_error("squeeze", "axis=[5]", "float32[1, 3, 1]", "out of range", "axis");
    expect_error("squeeze", "axis=[0, 0]", "float32[1, 3, 1]", "twice", "axis");
    expect_defer("squeeze", "", "_");
    expect_defer("expand_dims", "axis=0", "_");
}

static void test_rel_one_hot(void **state) {
    (void)state;
    expect_type("one_hot", "depth=4; dtype=\"float32\"", "int32[2, 3] | float32[] | float32[]",
                "float32[2, 3, 4]");
    expect_type("one_hot", "depth=4; axis=0; dtype=\"int64\"",
                "int32[2, 3] | float32[] | float32[]", "int64[4, 2, 3]");
    expect_type("one_hot", "depth=5; axis=1", "int64[n, 3] | float64[] | float64[]",
                "float64[n, 5, 3]");
    expect_type("one_hot", "axis=-2", "int8[3] | int32[] | int32[]", "int32[1, 3]");
    expect_error("one_hot", "depth=0", "int32[2] | float32[] | float32[]", "positive", "depth");
    expect_error("one_hot", "depth=2", "float32[2] | float32[] | float32[]", "integers", NULL);
    expect_error("one_hot", "depth=2", "int32[2] | float32[1] | float32[]", "scalars", NULL);
    expect_error("one_hot", "depth=2; dtype=\"foo\"", "int32[2] | float32[] | float32[]",
                 "unknown dtype", "dtype");
    expect_error("one_hot", "depth=2; axis=3", "int32[2, 2] | float32[] | float32[]",
                 "out of range", "axis");
    expect_error("one_hot", "depth=2; dtype=3", "int32[2] | float32[] | float32[]", "string",
                 "dtype");
    expect_defer("one_hot", "depth=2", "int32[2] | _ | float32[]");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rel_reduce),
        cmocka_unit_test(test_rel_reshape),
        cmocka_unit_test(test_rel_reshape_like),
        cmocka_unit_test(test_rel_transpose),
        cmocka_unit_test(test_rel_concatenate_stack),
        cmocka_unit_test(test_rel_split),
        cmocka_unit_test(test_rel_take),
        cmocka_unit_test(test_rel_expand_squeeze),
        cmocka_unit_test(test_rel_one_hot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}