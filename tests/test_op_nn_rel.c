/*
 * test_op_nn_rel.c: the nn operator family's type relations (src/op/nn.c),
 * called directly on hand-built types, including symbolic and Any
 * dimensions, and their errors checked for place and wording; then the
 * family's attributes as TVM prints them and a relation's error through the
 * text format's type checker. The kernels are test_op_nn.c's.
 */
#include "op_nn_util.h"

/* ---- type relations ---- */

static ry_source src = {"t.relay", "%0 = nn.op(%x, %y, axis=5);\n", 28};
#define CALL_SPAN ((ry_span){&src, 1, 6, 5})
#define ATTR_SPAN ((ry_span){&src, 1, 20, 6})

static ry_rel_status rel(ry_arena *a, const char *opname, ry_attrs attrs, int n, ry_type **args,
                         ry_type **out, ry_error *err) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    for (int i = 0; i < attrs.n; i++) attrs.items[i].span = ATTR_SPAN;
    memset(err, 0, sizeof *err);
    ry_rel_ctx c = {a, op, &attrs, CALL_SPAN, err};
    return op->rel(&c, n, args, out);
}

#define T(dt, dims) ty(a, dt, dims)
#define ARGS(...)                                                                                  \
    (ry_type *[]){__VA_ARGS__}, (int)(sizeof((ry_type *[]){__VA_ARGS__}) / sizeof(ry_type *))

static ry_type *ok(ry_arena *a, const char *opname, ry_attrs attrs, ry_type **args, int n) {
    ry_error err;
    ry_type *out = NULL;
    if (rel(a, opname, attrs, n, args, &out, &err) != RY_REL_OK)
        fail_msg("%s: %s", opname, err.msg);
    return out;
}

/* The relation fails with a message containing needle, located at the
 * attribute (at_attr) or the call. */
static void bad(ry_arena *a, const char *opname, ry_attrs attrs, ry_type **args, int n,
                const char *needle, bool at_attr) {
    ry_error err;
    ry_type *out = NULL;
    assert_int_equal(rel(a, opname, attrs, n, args, &out, &err), RY_REL_FAIL);
    if (!strstr(err.msg, needle)) fail_msg("%s: message '%s' lacks '%s'", opname, err.msg, needle);
    assert_string_equal(err.file, "t.relay");
    assert_int_equal(err.line, 1);
    assert_int_equal(err.col, at_attr ? 20 : 6);
}

static void test_rel_dense(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    want_type(ok(a, "nn.dense", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "4, 5"))),
              "float32", "3, 4");
    want_type(ok(a, "nn.dense", NOATTRS, ARGS(T("float64", "n, 2, 5"), T("float64", "?, 5"))),
              "float64", "n, 2, ?");
    want_type(
        ok(a, "nn.dense", ATTRS(AI("units", 4)), ARGS(T("float32", "n, k"), T("float32", "m, k"))),
        "float32", "n, 4");
    want_type(ok(a, "nn.dense", ATTRS(AS("out_dtype", "int32")),
                 ARGS(T("int8", "2, 3"), T("int8", "4, 3"))),
              "int32", "2, 4");
    bad(a, "nn.dense", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "4, 6")),
        "reduction dimensions", false);
    bad(a, "nn.dense", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "5")), "rank 2", false);
    bad(a, "nn.dense", NOATTRS, ARGS(T("float32", ""), T("float32", "4, 5")), "rank >= 1", false);
    bad(a, "nn.dense", NOATTRS, ARGS(T("float32", "3, 5"), T("float64", "4, 5")), "dtype", false);
    bad(a, "nn.dense", ATTRS(AI("units", 3)), ARGS(T("float32", "3, 5"), T("float32", "4, 5")),
        "units=3", true);
    bad(a, "nn.dense", ATTRS(AS("out_dtype", "float31")),
        ARGS(T("float32", "3, 5"), T("float32", "4, 5")), "out_dtype", true);
    /* an argument still being inferred defers */
    ry_type inc = {.kind = RY_TYPE_INCOMPLETE};
    ry_error err;
    ry_type *out;
    assert_int_equal(
        rel(a, "nn.dense", NOATTRS, 2, (ry_type *[]){T("float32", "3, 5"), &inc}, &out, &err),
        RY_REL_DEFER);
    ry_arena_free(a);
}

static void test_rel_matmul(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    want_type(ok(a, "nn.matmul", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "5, 4"))),
              "float32", "3, 4");
    want_type(ok(a, "nn.matmul", ATTRS(AB("transpose_a", true)),
                 ARGS(T("float32", "b, 5, 3"), T("float32", "5, 4"))),
              "float32", "b, 3, 4");
    want_type(ok(a, "nn.matmul", ATTRS(AB("transpose_b", true)),
                 ARGS(T("float64", "3, 5"), T("float64", "4, 5"))),
              "float64", "3, 4");
    bad(a, "nn.matmul", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "4, 5")), "reduction",
        false);
    bad(a, "nn.matmul", ATTRS(AB("transpose_a", true)),
        ARGS(T("float32", "5"), T("float32", "5, 4")), "rank >= 2", false);
    bad(a, "nn.matmul", NOATTRS, ARGS(T("bool", "3, 5"), T("bool", "5, 4")), "bool", false);
    ry_arena_free(a);
}

static void test_rel_batch_matmul(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    want_type(
        ok(a, "nn.batch_matmul", NOATTRS, ARGS(T("float32", "2, 3, 5"), T("float32", "2, 5, 4"))),
        "float32", "2, 3, 4");
    want_type(
        ok(a, "nn.batch_matmul", NOATTRS, ARGS(T("float32", "1, 3, 5"), T("float32", "b, 5, 4"))),
        "float32", "b, 3, 4");
    want_type(ok(a, "nn.batch_matmul", ATTRS(AB("transpose_b", true)),
                 ARGS(T("float32", "?, 3, 5"), T("float32", "2, 4, 5"))),
              "float32", "2, 3, 4");
    want_type(ok(a, "nn.batch_matmul", ATTRS(AB("transpose_a", true)),
                 ARGS(T("float64", "2, 5, 3"), T("float64", "2, 5, 4"))),
              "float64", "2, 3, 4");
    bad(a, "nn.batch_matmul", NOATTRS, ARGS(T("float32", "2, 3, 5"), T("float32", "3, 5, 4")),
        "batch", false);
    bad(a, "nn.batch_matmul", NOATTRS, ARGS(T("float32", "2, 3, 5"), T("float32", "2, 4, 5")),
        "reduction", false);
    bad(a, "nn.batch_matmul", NOATTRS, ARGS(T("float32", "3, 5"), T("float32", "5, 4")), "rank-3",
        false);
    ry_arena_free(a);
}

static void test_rel_bias_softmax_flatten(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    want_type(ok(a, "nn.bias_add", NOATTRS, ARGS(T("float32", "n, 3, 4"), T("float32", "3"))),
              "float32", "n, 3, 4");
    want_type(
        ok(a, "nn.bias_add", ATTRS(AI("axis", -1)), ARGS(T("int32", "2, 4"), T("int32", "4"))),
        "int32", "2, 4");
    bad(a, "nn.bias_add", NOATTRS, ARGS(T("float32", "2, 3"), T("float32", "4")), "shape (3,)",
        false);
    bad(a, "nn.bias_add", ATTRS(AI("axis", 5)), ARGS(T("float32", "2, 3"), T("float32", "3")),
        "out of range", true);
    bad(a, "nn.bias_add", NOATTRS, ARGS(T("float32", "2, 3"), T("float32", "3, 1")), "shape (3,)",
        false);
    want_type(ok(a, "nn.softmax", NOATTRS, ARGS(T("float32", "n, 10"))), "float32", "n, 10");
    want_type(ok(a, "nn.log_softmax", ATTRS(AI("axis", 0)), ARGS(T("float64", "3"))), "float64",
              "3");
    bad(a, "nn.softmax", ATTRS(AI("axis", -3)), ARGS(T("float32", "2, 3")), "out of range", true);
    bad(a, "nn.log_softmax", NOATTRS, ARGS(T("int32", "2, 3")), "float", false);
    bad(a, "nn.softmax", NOATTRS, ARGS(T("float32", "")), "out of range", false);
    want_type(ok(a, "nn.batch_flatten", NOATTRS, ARGS(T("float32", "n, 3, 4"))), "float32",
              "n, 12");
    want_type(ok(a, "nn.batch_flatten", NOATTRS, ARGS(T("float32", "2, 1, m"))), "float32", "2, m");
    want_type(ok(a, "nn.batch_flatten", NOATTRS, ARGS(T("float32", "2, 3, ?"))), "float32", "2, ?");
    want_type(ok(a, "nn.batch_flatten", NOATTRS, ARGS(T("int8", "7"))), "int8", "7, 1");
    bad(a, "nn.batch_flatten", NOATTRS, ARGS(T("float32", "")), "rank >= 1", false);
    ry_arena_free(a);
}

static void test_rel_pad(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    ry_attr_value st[3 * RY_MAX_RANK];
    want_type(ok(a, "nn.pad", ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 2}, {0, 0}})),
                 ARGS(T("float32", "3, n"), T("float32", ""))),
              "float32", "6, n");
    want_type(ok(a, "nn.pad", ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 2}, {1, 0}})),
                 ARGS(T("float32", "?, n"), T("float64", ""))),
              "float32", "?, ?");
    want_type(ok(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{-1, 0}})),
                 ARGS(T("int32", "3"), T("int32", ""))),
              "int32", "2");
    bad(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{1, 1}})),
        ARGS(T("float32", "3, 4"), T("float32", "")), "1 pairs but data has rank 2", true);
    bad(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{-3, -1}})),
        ARGS(T("float32", "3"), T("float32", "")), "negative size", true);
    bad(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{-1, 0}}), AS("pad_mode", "edge")),
        ARGS(T("float32", "3"), T("float32", "")), "non-negative", true);
    bad(a, "nn.pad",
        ATTRS(pad_width(st, 1, (const int64_t[][2]){{3, 0}}), AS("pad_mode", "reflect")),
        ARGS(T("float32", "3"), T("float32", "")), "smaller than its size", true);
    bad(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{1, 0}}), AS("pad_mode", "wrap")),
        ARGS(T("float32", "3"), T("float32", "")), "pad_mode", true);
    bad(a, "nn.pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{1, 0}})),
        ARGS(T("float32", "3"), T("float32", "1")), "scalar", false);
    bad(a, "nn.pad", ATTRS(AI("pad_width", 1)), ARGS(T("float32", "3"), T("float32", "")),
        "pad_width", true);
    want_type(ok(a, "nn.mirror_pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{3, 0}})),
                 ARGS(T("float32", "3"))),
              "float32", "6");
    bad(a, "nn.mirror_pad", ATTRS(pad_width(st, 1, (const int64_t[][2]){{4, 0}})),
        ARGS(T("float32", "3")), "must not exceed", true);
    bad(a, "nn.mirror_pad",
        ATTRS(pad_width(st, 1, (const int64_t[][2]){{3, 0}}), AS("mode", "REFLECT")),
        ARGS(T("float32", "3")), "smaller than its size", true);
    bad(a, "nn.mirror_pad",
        ATTRS(pad_width(st, 1, (const int64_t[][2]){{1, 0}}), AS("mode", "edge")),
        ARGS(T("float32", "3")), "SYMMETRIC", true);
    ry_arena_free(a);
}

static void test_rel_norms_dropout(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    ry_type *vec = T("float32", "16");
    ry_type *bn =
        ok(a, "nn.batch_norm", NOATTRS, ARGS(T("float32", "n, 16, 8, 8"), vec, vec, vec, vec));
    assert_int_equal(bn->kind, RY_TYPE_TUPLE);
    assert_int_equal(bn->tuple.n, 3);
    want_type(bn->tuple.fields[0], "float32", "n, 16, 8, 8");
    want_type(bn->tuple.fields[1], "float32", "16");
    want_type(bn->tuple.fields[2], "float32", "16");
    bn = ok(a, "nn.batch_norm", ATTRS(AI("axis", 3)),
            ARGS(T("float32", "2, 8, 8, 16"), vec, vec, vec, vec));
    want_type(bn->tuple.fields[0], "float32", "2, 8, 8, 16");
    bad(a, "nn.batch_norm", NOATTRS, ARGS(T("float32", "2, 8, 8, 16"), vec, vec, vec, vec),
        "gamma must have shape (8,)", false);
    bad(a, "nn.batch_norm", NOATTRS, ARGS(T("float32", "2, 16"), vec, vec, vec, T("float64", "16")),
        "dtype", false);
    bad(a, "nn.batch_norm", ATTRS(AI("axis", 4)), ARGS(T("float32", "2, 16"), vec, vec, vec, vec),
        "out of range", true);
    bad(a, "nn.batch_norm", ATTRS(AF("epsilon", -1.0)),
        ARGS(T("float32", "2, 16"), vec, vec, vec, vec), "epsilon", true);
    bad(a, "nn.batch_norm", NOATTRS, ARGS(T("int32", "2, 16"), vec, vec, vec, vec), "float", false);
    want_type(ok(a, "nn.layer_norm", NOATTRS, ARGS(T("float32", "n, 4, 16"), vec, vec)), "float32",
              "n, 4, 16");
    want_type(ok(a, "nn.layer_norm", ATTRS(AI("axis", 0)), ARGS(T("float32", "16, 3"), vec, vec)),
              "float32", "16, 3");
    bad(a, "nn.layer_norm", NOATTRS, ARGS(T("float32", "16, 3"), vec, vec),
        "gamma must have shape (3,)", false);
    ry_type *d = ok(a, "nn.dropout", NOATTRS, ARGS(T("float32", "n, 10")));
    assert_int_equal(d->kind, RY_TYPE_TUPLE);
    assert_int_equal(d->tuple.n, 2);
    want_type(d->tuple.fields[0], "float32", "n, 10");
    want_type(d->tuple.fields[1], "float32", "n, 10");
    bad(a, "nn.dropout", ATTRS(AF("rate", 1.5)), ARGS(T("float32", "3")), "rate", true);
    bad(a, "nn.dropout", NOATTRS, ARGS(T("int64", "3")), "float", false);
    ry_arena_free(a);
}

static void test_rel_extras(void **state) {
    (void)state;
    ry_arena *a = ry_arena_new();
    ry_attr_value st[RY_MAX_RANK];
    ry_type *v3 = T("float32", "3");
    want_type(ok(a, "nn.prelu", NOATTRS, ARGS(T("float32", "n, 3, 8"), v3)), "float32", "n, 3, 8");
    bad(a, "nn.prelu", NOATTRS, ARGS(T("float32", "2, 4"), v3), "alpha must have shape (4,)",
        false);
    want_type(ok(a, "nn.instance_norm", NOATTRS, ARGS(T("float32", "2, 3, 5, 5"), v3, v3)),
              "float32", "2, 3, 5, 5");
    bad(a, "nn.instance_norm", ATTRS(AI("axis", 0)), ARGS(T("float32", "3, 2"), v3, v3),
        "batch dimension", true);
    want_type(
        ok(a, "nn.group_norm", ATTRS(AI("num_groups", 1)), ARGS(T("float32", "2, 3, 4"), v3, v3)),
        "float32", "2, 3, 4");
    bad(a, "nn.group_norm", ATTRS(AI("num_groups", 2)), ARGS(T("float32", "2, 3, 4"), v3, v3),
        "divide", true);
    bad(a, "nn.group_norm", NOATTRS, ARGS(T("float32", "2, 3, 4"), v3, v3), "num_groups=0", false);
    want_type(ok(a, "nn.l2_normalize",
                 ATTRS(AF("eps", 1e-6), axis_list(st, 1, (const int64_t[]){1})),
                 ARGS(T("float64", "n, 7"))),
              "float64", "n, 7");
    bad(a, "nn.l2_normalize", ATTRS(axis_list(st, 1, (const int64_t[]){1})),
        ARGS(T("float64", "n, 7")), "eps must be given", false);
    bad(a, "nn.l2_normalize", ATTRS(AF("eps", 1e-6), axis_list(st, 2, (const int64_t[]){1, -1})),
        ARGS(T("float64", "n, 7")), "repeated", true);
    bad(a, "nn.l2_normalize", ATTRS(AF("eps", 1e-6)), ARGS(T("float64", "n, 7")), "axis must list",
        false);
    want_type(
        ok(a, "nn.cross_entropy", NOATTRS, ARGS(T("float32", "n, 10"), T("float32", "n, 10"))),
        "float32", "");
    want_type(ok(a, "nn.lrn", NOATTRS, ARGS(T("float32", "n, 8, 4, 4"))), "float32", "n, 8, 4, 4");
    bad(a, "nn.lrn", ATTRS(AI("size", 4)), ARGS(T("float32", "n, 8, 4, 4")), "odd", true);
    bad(a, "nn.cross_entropy_with_logits", NOATTRS,
        ARGS(T("float32", "4, 10"), T("float32", "4, 9")), "one shape", false);
    ry_arena_free(a);
}

/* ---- through the text format: type-check ---- */

/* TVM's printed forms of the family's attributes, with symbolic shapes. */
static void test_text_types(void **state) {
    (void)state;
    ry_module *m =
        test_parse("#[version = \"0.0.5\"]\n"
                   "def @main(%x: Tensor[(n, 3, 8, 8), float32], %c: Tensor[(3), float32],\n"
                   "          %y: Tensor[(n, 4, 6), float32]) {\n"
                   "  %0 = nn.batch_norm(%x, %c, %c, %c, %c, axis=1, epsilon=0.001f, center=True, "
                   "scale=False);\n"
                   "  %1 = nn.pad(%0.0, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [2, 2]], "
                   "pad_mode=\"reflect\");\n"
                   "  %2 = nn.batch_matmul(%y, %y, transpose_b=True, out_dtype=\"\");\n"
                   "  %3 = nn.dropout(%2, rate=0.2f);\n"
                   "  (%1, %3.1, nn.batch_flatten(%1))\n"
                   "}\n",
                   true);
    const ry_type *t = ry_module_find_global(m, "main")->func->func.body->type;
    assert_int_equal(t->kind, RY_TYPE_TUPLE);
    want_type(t->tuple.fields[0], "float32", "n, 3, 10, 12");
    want_type(t->tuple.fields[1], "float32", "n, 4, 4");
    want_type(t->tuple.fields[2], "float32", "n, 360");
    ry_module_free(m);
}

/* A relation's error reaches the user located at the call. */
static void test_text_error(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2, 5), float32], %w: Tensor[(4, 6), float32]) {\n"
                       "  nn.dense(%x, %w)\n"
                       "}\n";
    ry_module *m = test_parse(text, false);
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_module_typecheck(m, &err), RY_ERR);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "reduction dimensions differ"));
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rel_dense),
        cmocka_unit_test(test_rel_matmul),
        cmocka_unit_test(test_rel_batch_matmul),
        cmocka_unit_test(test_rel_bias_softmax_flatten),
        cmocka_unit_test(test_rel_pad),
        cmocka_unit_test(test_rel_norms_dropout),
        cmocka_unit_test(test_rel_extras),
        cmocka_unit_test(test_text_types),
        cmocka_unit_test(test_text_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}