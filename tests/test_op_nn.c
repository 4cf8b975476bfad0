/*
 * test_op_nn.c: the nn operator family (src/op/nn.c, src/backend/cpu/
 * gemm.c, softmax.c, norm.c, nn.c). Kernels run through ry_op_run on the
 * fixtures of tools/gen_op_nn.py (numpy/torch results in tests/ops/nn/);
 * type relations are called directly on hand-built types, including
 * symbolic and Any dimensions, and their errors are checked for place and
 * wording.
 */
#include "test_util.h"

#include <stdlib.h>

/* ---- attributes ---- */

#define AI(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_INT, .i = (v)}})
#define AB(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_BOOL, .b = (v)}})
#define AF(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_FLOAT, .f = (v)}})
#define AS(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_STR, .s = (v)}})
#define ATTRS(...)                                                                                 \
    ((ry_attrs){(int)(sizeof((ry_attr[]){__VA_ARGS__}) / sizeof(ry_attr)),                         \
                (ry_attr[]){__VA_ARGS__}})
#define NOATTRS ((ry_attrs){0, NULL})

/* pad_width=[[b0, a0], [b1, a1], ...] built in store (3 * n values). */
static ry_attr pad_width(ry_attr_value *store, int n, const int64_t (*w)[2]) {
    ry_attr_value *pairs = store, *nums = store + n;
    for (int i = 0; i < n; i++) {
        nums[2 * i] = (ry_attr_value){.kind = RY_AV_INT, .i = w[i][0]};
        nums[2 * i + 1] = (ry_attr_value){.kind = RY_AV_INT, .i = w[i][1]};
        pairs[i] = (ry_attr_value){.kind = RY_AV_LIST, .list = {2, &nums[2 * i]}};
    }
    return (ry_attr){.name = "pad_width", .value = {.kind = RY_AV_LIST, .list = {n, pairs}}};
}

/* ---- running fixtures ---- */

static ry_status run_op(const char *opname, ry_attrs attrs, int nin, ry_tensor **in, bool training,
                        uint64_t *rng, ry_arena *ar, int *nout, ry_tensor ***outs, ry_error *err) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    assert_int_equal(op->nargs, nin);
    if (ry_op_check_attrs(op, &attrs, err)) fail_msg("%s: bad attributes: %s", opname, err->msg);
    ry_type *types[8];
    for (int i = 0; i < nin; i++) types[i] = ry_type_of_tensor(ar, in[i]);
    ry_kernel_ctx kc = {.span = RY_NO_SPAN, .err = err, .training = training, .rng = rng};
    ry_type *ot = NULL;
    return ry_op_run(NULL, op, &attrs, ar, nin, types, nin, in, &kc, &ot, nout, outs);
}

static void release_all(int n, ry_tensor **t) {
    for (int i = 0; i < n; i++) ry_tensor_release(t[i]);
}

/* Runs the op on NAME_in*.npy and compares with NAME_out*.npy. */
static void run_case_ex(const char *name, const char *opname, int nin, int nexp, ry_attrs attrs,
                        bool training, uint64_t *rng, double rtol, double atol) {
    ry_arena *ar = ry_arena_new();
    ry_tensor *in[8];
    char path[256];
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "tests/ops/nn/%s_in%d.npy", name, i);
        in[i] = test_npy(path);
    }
    ry_error err;
    memset(&err, 0, sizeof err);
    int nout = 0;
    ry_tensor **outs = NULL;
    if (run_op(opname, attrs, nin, in, training, rng, ar, &nout, &outs, &err))
        fail_msg("%s (%s): %s", name, opname, err.msg);
    assert_int_equal(nout, nexp);
    for (int j = 0; j < nout; j++) {
        snprintf(path, sizeof path, "tests/ops/nn/%s_out%d.npy", name, j);
        ry_tensor *want = test_npy(path);
        if (outs[j]->dtype != want->dtype)
            fail_msg("%s: result %d has dtype %s, expected %s", name, j,
                     ry_dtype_name(outs[j]->dtype), ry_dtype_name(want->dtype));
        test_assert_close(outs[j], want, rtol, atol);
        ry_tensor_release(want);
    }
    release_all(nout, outs);
    ry_free(outs);
    release_all(nin, in);
    ry_arena_free(ar);
}

#define F64 1e-12, 1e-12
#define F32 1e-5, 1e-5

static void run_case(const char *name, const char *opname, int nin, int nexp, ry_attrs attrs,
                     double rtol, double atol) {
    run_case_ex(name, opname, nin, nexp, attrs, false, NULL, rtol, atol);
}

/* ---- kernels against numpy/torch ---- */

static void test_dense(void **state) {
    (void)state;
    run_case("dense_f64_2d", "nn.dense", 2, 1, NOATTRS, F64);
    run_case("dense_f64_2d", "nn.dense", 2, 1, ATTRS(AI("units", 4)), F64);
    run_case("dense_f64_3d", "nn.dense", 2, 1, NOATTRS, F64);
    run_case("dense_f64_1d", "nn.dense", 2, 1, NOATTRS, F64);
    run_case("dense_f32", "nn.dense", 2, 1, ATTRS(AS("out_dtype", "")), F32);
    run_case("dense_i32", "nn.dense", 2, 1, NOATTRS, 0, 0);
    run_case("dense_i8_i32", "nn.dense", 2, 1, ATTRS(AS("out_dtype", "int32")), 0, 0);
    run_case("dense_f32_f64", "nn.dense", 2, 1, ATTRS(AS("out_dtype", "float64")), 1e-6, 1e-6);
    run_case("dense_f16", "nn.dense", 2, 1, NOATTRS, 2e-3, 2e-3);
    /* on concrete tensors the relation still guards the kernel */
    ry_arena *ar = ry_arena_new();
    ry_tensor *in[2] = {test_npy("tests/ops/nn/dense_f64_2d_in0.npy"),
                        test_npy("tests/ops/nn/dense_f64_2d_in1.npy")};
    ry_error err;
    int n;
    ry_tensor **o;
    assert_int_equal(
        run_op("nn.dense", ATTRS(AI("units", 3)), 2, in, false, NULL, ar, &n, &o, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "units=3"));
    ry_tensor *swapped[2] = {in[1], in[0]};
    assert_int_equal(run_op("nn.dense", NOATTRS, 2, swapped, false, NULL, ar, &n, &o, &err), RY_OK);
    assert_int_equal(o[0]->shape[0], 4);
    assert_int_equal(o[0]->shape[1], 3);
    ry_tensor *want = test_npy("tests/ops/nn/dense_f64_2d_out0.npy"); /* (3, 4): its transpose */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            assert_true(fabs(ry_tensor_get(o[0], j * 3 + i) - ry_tensor_get(want, i * 4 + j)) <
                        1e-12);
    ry_tensor_release(want);
    release_all(n, o);
    ry_free(o);
    release_all(2, in);
    ry_arena_free(ar);
}

static void test_matmul(void **state) {
    (void)state;
    run_case("matmul_f64", "nn.matmul", 2, 1, NOATTRS, F64);
    run_case("matmul_f64_ta", "nn.matmul", 2, 1, ATTRS(AB("transpose_a", true)), F64);
    run_case("matmul_f64_tb", "nn.matmul", 2, 1, ATTRS(AB("transpose_b", true)), F64);
    run_case("matmul_f64_tatb", "nn.matmul", 2, 1,
             ATTRS(AB("transpose_a", true), AB("transpose_b", true), AI("units", 4)), F64);
    run_case("matmul_f64_batch_ta", "nn.matmul", 2, 1, ATTRS(AB("transpose_a", true)), F64);
    run_case("matmul_f32_3d", "nn.matmul", 2, 1, NOATTRS, F32);
}

static void test_batch_matmul(void **state) {
    (void)state;
    run_case("bmm_f64", "nn.batch_matmul", 2, 1, NOATTRS, F64);
    run_case("bmm_f64", "nn.batch_matmul", 2, 1,
             ATTRS(AB("transpose_a", false), AB("transpose_b", false)), F64);
    run_case("bmm_f64_ta", "nn.batch_matmul", 2, 1, ATTRS(AB("transpose_a", true)), F64);
    run_case("bmm_f64_tb", "nn.batch_matmul", 2, 1, ATTRS(AB("transpose_b", true)), F64);
    run_case("bmm_f64_tatb", "nn.batch_matmul", 2, 1,
             ATTRS(AB("transpose_a", true), AB("transpose_b", true)), F64);
    run_case("bmm_f64_bx", "nn.batch_matmul", 2, 1, NOATTRS, F64);
    run_case("bmm_f64_by", "nn.batch_matmul", 2, 1, NOATTRS, F64);
    run_case("bmm_f32", "nn.batch_matmul", 2, 1, NOATTRS, F32);
    run_case("bmm_i64", "nn.batch_matmul", 2, 1, NOATTRS, 0, 0);
}

static void test_bias_add(void **state) {
    (void)state;
    run_case("bias_f64_axis1", "nn.bias_add", 2, 1, NOATTRS, F64);
    run_case("bias_f64_axisneg1", "nn.bias_add", 2, 1, ATTRS(AI("axis", -1)), F64);
    run_case("bias_f64_axis0", "nn.bias_add", 2, 1, ATTRS(AI("axis", 0)), F64);
    run_case("bias_f32", "nn.bias_add", 2, 1, ATTRS(AI("axis", 1)), F32);
    run_case("bias_i32", "nn.bias_add", 2, 1, NOATTRS, 0, 0);
}

static void test_softmax(void **state) {
    (void)state;
    static const char *const ops[2] = {"nn.softmax", "nn.log_softmax"};
    for (int k = 0; k < 2; k++) {
        char n[64];
        const char *pre = k ? "log" : "";
        snprintf(n, sizeof n, "%ssm_f64_last", pre);
        run_case(n, ops[k], 1, 1, NOATTRS, F64);
        snprintf(n, sizeof n, "%ssm_f64_axis0", pre);
        run_case(n, ops[k], 1, 1, ATTRS(AI("axis", 0)), F64);
        snprintf(n, sizeof n, "%ssm_f64_mid", pre);
        run_case(n, ops[k], 1, 1, ATTRS(AI("axis", 1)), F64);
        snprintf(n, sizeof n, "%ssm_f64_mid", pre);
        run_case(n, ops[k], 1, 1, ATTRS(AI("axis", -2)), F64);
        snprintf(n, sizeof n, "%ssm_f64_big", pre);
        run_case(n, ops[k], 1, 1, NOATTRS, 1e-12, 1e-10);
        snprintf(n, sizeof n, "%ssm_f32", pre);
        run_case(n, ops[k], 1, 1, ATTRS(AI("axis", -1)), 1e-5, 1e-4);
    }
}

static void test_batch_flatten(void **state) {
    (void)state;
    run_case("flat_f64", "nn.batch_flatten", 1, 1, NOATTRS, 0, 0);
    run_case("flat_i32_1d", "nn.batch_flatten", 1, 1, NOATTRS, 0, 0);
}

static void test_pad(void **state) {
    (void)state;
    ry_attr_value st[3 * RY_MAX_RANK];
    run_case("pad_f64_const", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 2}, {0, 1}})), 0, 0);
    run_case(
        "pad_f64_const", "nn.pad", 2, 1,
        ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 2}, {0, 1}}), AS("pad_mode", "constant")),
        0, 0);
    run_case("pad_f64_edge", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{2, 1}, {1, 2}}), AS("pad_mode", "edge")),
             0, 0);
    run_case(
        "pad_f64_reflect", "nn.pad", 2, 1,
        ATTRS(pad_width(st, 2, (const int64_t[][2]){{2, 1}, {1, 3}}), AS("pad_mode", "reflect")), 0,
        0);
    run_case("pad_f64_reflect3", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 3, (const int64_t[][2]){{1, 1}, {0, 2}, {3, 0}}),
                   AS("pad_mode", "reflect")),
             0, 0);
    run_case("pad_f32_const3", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 3, (const int64_t[][2]){{0, 1}, {1, 0}, {2, 2}})), 0, 0);
    run_case("pad_i32_const", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 1}, {2, 0}})), 0, 0);
    run_case("pad_f64_crop", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{-1, 2}, {1, -2}})), 0, 0);
    run_case("pad_f64_castval", "nn.pad", 2, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 0}, {0, 1}})), 0, 0);
    run_case("mpad_f64_sym", "nn.mirror_pad", 1, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{3, 1}, {2, 4}})), 0, 0);
    run_case("mpad_f64_refl", "nn.mirror_pad", 1, 1,
             ATTRS(pad_width(st, 2, (const int64_t[][2]){{2, 1}, {3, 0}}), AS("mode", "REFLECT")),
             0, 0);
}

static void test_batch_norm(void **state) {
    (void)state;
    run_case("bn_f64_inf", "nn.batch_norm", 5, 3, NOATTRS, F64);
    run_case_ex("bn_f64_train", "nn.batch_norm", 5, 3, NOATTRS, true, NULL, F64);
    run_case_ex("bn_f64_last", "nn.batch_norm", 5, 3, ATTRS(AI("axis", -1), AF("epsilon", 1e-3)),
                true, NULL, F64);
    run_case("bn_f64_plain_inf", "nn.batch_norm", 5, 3,
             ATTRS(AB("center", false), AB("scale", false)), F64);
    run_case_ex("bn_f64_plain_train", "nn.batch_norm", 5, 3,
                ATTRS(AB("center", false), AB("scale", false), AI("axis", 1)), true, NULL, F64);
    run_case_ex("bn_f32_train", "nn.batch_norm", 5, 3, NOATTRS, true, NULL, 1e-5, 1e-5);
}

static void test_layer_norm(void **state) {
    (void)state;
    run_case("ln_f64_last", "nn.layer_norm", 3, 1, NOATTRS, F64);
    run_case("ln_f64_last", "nn.layer_norm", 3, 1, ATTRS(AI("axis", 1), AF("epsilon", 1e-5)), F64);
    run_case("ln_f32", "nn.layer_norm", 3, 1, NOATTRS, 1e-5, 1e-5);
    run_case("ln_f64_axis1", "nn.layer_norm", 3, 1, ATTRS(AI("axis", 1)), F64);
    run_case("ln_f64_axis1_plain", "nn.layer_norm", 3, 1,
             ATTRS(AI("axis", -2), AF("epsilon", 1e-2), AB("center", false), AB("scale", false)),
             F64);
}

static void test_dropout(void **state) {
    (void)state;
    uint64_t rng = 42;
    run_case_ex("drop_f64", "nn.dropout", 1, 2, ATTRS(AF("rate", 0.3)), true, &rng, F64);
    rng = 7;
    run_case_ex("drop_f64_half", "nn.dropout", 1, 2, NOATTRS, true, &rng, F64);
    /* inference: identity and an all-ones mask */
    ry_arena *ar = ry_arena_new();
    ry_tensor *x = test_npy("tests/ops/nn/drop_f64_in0.npy");
    ry_error err;
    int n;
    ry_tensor **o;
    assert_int_equal(run_op("nn.dropout", NOATTRS, 1, &x, false, NULL, ar, &n, &o, &err), RY_OK);
    assert_int_equal(n, 2);
    test_assert_close(o[0], x, 0, 0);
    for (int64_t i = 0; i < o[1]->size; i++) assert_true(ry_tensor_get(o[1], i) == 1.0);
    release_all(n, o);
    ry_free(o);
    /* same seed, same mask; mask values are 0 or 1, kept values scaled by
     * 1/(1-rate); rate 1 drops all */
    uint64_t s1 = 99, s2 = 99;
    ry_tensor **o1, **o2;
    assert_int_equal(
        run_op("nn.dropout", ATTRS(AF("rate", 0.25)), 1, &x, true, &s1, ar, &n, &o1, &err), RY_OK);
    assert_int_equal(
        run_op("nn.dropout", ATTRS(AF("rate", 0.25)), 1, &x, true, &s2, ar, &n, &o2, &err), RY_OK);
    test_assert_close(o1[1], o2[1], 0, 0);
    for (int64_t i = 0; i < o1[1]->size; i++) {
        double m = ry_tensor_get(o1[1], i);
        assert_true(m == 0.0 || m == 1.0);
        assert_true(ry_tensor_get(o1[0], i) == (m ? ry_tensor_get(x, i) * (1 / 0.75) : 0.0));
    }
    release_all(2, o1);
    release_all(2, o2);
    ry_free(o1);
    ry_free(o2);
    assert_int_equal(
        run_op("nn.dropout", ATTRS(AF("rate", 1.0)), 1, &x, true, &s1, ar, &n, &o, &err), RY_OK);
    for (int64_t i = 0; i < o[1]->size; i++) assert_true(ry_tensor_get(o[0], i) == 0.0);
    release_all(n, o);
    ry_free(o);
    /* training without a random state is a clear error */
    assert_int_equal(run_op("nn.dropout", NOATTRS, 1, &x, true, NULL, ar, &n, &o, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "random state"));
    ry_tensor_release(x);
    ry_arena_free(ar);
}

/* A large float32 dropout keeps about 1 - rate of its elements. */
static void test_dropout_rate(void **state) {
    (void)state;
    ry_arena *ar = ry_arena_new();
    int64_t shape[1] = {20000};
    ry_tensor *x = ry_tensor_zeros(RY_FLOAT32, 1, shape);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, 1.0);
    uint64_t s = 1;
    ry_error err;
    int n;
    ry_tensor **o;
    assert_int_equal(
        run_op("nn.dropout", ATTRS(AF("rate", 0.2)), 1, &x, true, &s, ar, &n, &o, &err), RY_OK);
    int64_t kept = 0;
    for (int64_t i = 0; i < x->size; i++) kept += ry_tensor_get(o[1], i) != 0;
    assert_true(kept > 15600 && kept < 16400);
    for (int64_t i = 0; i < x->size; i++)
        assert_true(ry_tensor_get(o[0], i) == 1.25f * (float)ry_tensor_get(o[1], i));
    release_all(n, o);
    ry_free(o);
    ry_tensor_release(x);
    ry_arena_free(ar);
}

/* float16 operands are widened to float32: compare with the float32 fixtures. */
static ry_tensor *to_f16(const ry_tensor *t) {
    ry_tensor *h = ry_tensor_new(RY_FLOAT16, t->ndim, t->shape);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(h, i, ry_tensor_get(t, i));
    return h;
}

static void f16_case(const char *name, const char *opname, int nin, ry_attrs attrs, double tol) {
    ry_arena *ar = ry_arena_new();
    ry_tensor *in[8];
    char path[256];
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "tests/ops/nn/%s_in%d.npy", name, i);
        ry_tensor *t = test_npy(path);
        in[i] = to_f16(t);
        ry_tensor_release(t);
    }
    ry_error err;
    int n;
    ry_tensor **o;
    if (run_op(opname, attrs, nin, in, false, NULL, ar, &n, &o, &err)) fail_msg("%s", err.msg);
    snprintf(path, sizeof path, "tests/ops/nn/%s_out0.npy", name);
    ry_tensor *want = test_npy(path);
    assert_int_equal(o[0]->dtype, RY_FLOAT16);
    test_assert_close(o[0], want, tol, tol);
    ry_tensor_release(want);
    release_all(n, o);
    ry_free(o);
    release_all(nin, in);
    ry_arena_free(ar);
}

static void test_float16(void **state) {
    (void)state;
    f16_case("ln_f32", "nn.layer_norm", 3, NOATTRS, 2e-2);
    f16_case("bias_f32", "nn.bias_add", 2, NOATTRS, 5e-3);
    f16_case("bn_f64_inf", "nn.batch_norm", 5, NOATTRS, 2e-2);
    f16_case("matmul_f64", "nn.matmul", 2, NOATTRS, 1e-2);
    f16_case("bmm_f64", "nn.batch_matmul", 2, NOATTRS, 1e-2);
    f16_case("flat_f64", "nn.batch_flatten", 1, NOATTRS, 1e-3);
    f16_case("sm_f64_mid", "nn.softmax", 1, ATTRS(AI("axis", 1)), 1e-2);
    f16_case("logsm_f64_last", "nn.log_softmax", 1, NOATTRS, 1e-2);
    f16_case("prelu_f64", "nn.prelu", 2, NOATTRS, 1e-2);
    f16_case("inorm_f64", "nn.instance_norm", 3, NOATTRS, 2e-2);
    f16_case("xent_f64", "nn.cross_entropy", 2, NOATTRS, 1e-2);
}

/* Empty and degenerate shapes: K = 0 gives zeros, empty batches do nothing. */
static void test_empty(void **state) {
    (void)state;
    ry_arena *ar = ry_arena_new();
    ry_error err;
    int n;
    ry_tensor **o;
    int64_t ds[2] = {3, 0}, ws[2] = {4, 0};
    ry_tensor *in[2] = {ry_tensor_zeros(RY_FLOAT32, 2, ds), ry_tensor_zeros(RY_FLOAT32, 2, ws)};
    assert_int_equal(run_op("nn.dense", NOATTRS, 2, in, false, NULL, ar, &n, &o, &err), RY_OK);
    assert_int_equal(o[0]->shape[0], 3);
    assert_int_equal(o[0]->shape[1], 4);
    for (int64_t i = 0; i < o[0]->size; i++) assert_true(ry_tensor_get(o[0], i) == 0.0);
    release_all(n, o);
    ry_free(o);
    release_all(2, in);
    int64_t es[2] = {0, 5};
    ry_tensor *e = ry_tensor_zeros(RY_FLOAT64, 2, es);
    assert_int_equal(run_op("nn.softmax", NOATTRS, 1, &e, false, NULL, ar, &n, &o, &err), RY_OK);
    assert_int_equal(o[0]->size, 0);
    release_all(n, o);
    ry_free(o);
    ry_tensor *ln[3] = {e, ry_tensor_zeros(RY_FLOAT64, 1, (int64_t[]){5}),
                        ry_tensor_zeros(RY_FLOAT64, 1, (int64_t[]){5})};
    assert_int_equal(run_op("nn.layer_norm", NOATTRS, 3, ln, false, NULL, ar, &n, &o, &err), RY_OK);
    assert_int_equal(o[0]->size, 0);
    release_all(n, o);
    ry_free(o);
    ry_tensor_release(ln[1]);
    ry_tensor_release(ln[2]);
    ry_tensor_release(e);
    ry_arena_free(ar);
}

/* batch_norm in training with one value per channel cannot give an unbiased variance. */
static void test_batch_norm_single(void **state) {
    (void)state;
    ry_arena *ar = ry_arena_new();
    ry_error err;
    int n;
    ry_tensor **o;
    ry_tensor *in[5] = {ry_tensor_zeros(RY_FLOAT64, 2, (int64_t[]){1, 3})};
    for (int i = 1; i < 5; i++) in[i] = ry_tensor_zeros(RY_FLOAT64, 1, (int64_t[]){3});
    assert_int_equal(run_op("nn.batch_norm", NOATTRS, 5, in, true, NULL, ar, &n, &o, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "more than one value per channel"));
    release_all(5, in);
    ry_arena_free(ar);
}

/* ---- type relations ---- */

static ry_source src = {"t.relay", "%0 = nn.op(%x, %y, axis=5);\n", 28};
#define CALL_SPAN ((ry_span){&src, 1, 6, 5})
#define ATTR_SPAN ((ry_span){&src, 1, 20, 6})

/* A tensor type from "3, n, ?" (constants, symbols, Any) and a dtype name. */
static ry_type *ty(ry_arena *a, const char *dt, const char *dims) {
    ry_dim d[RY_MAX_RANK];
    int n = 0;
    const char *p = dims;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ') p++;
        if (*s == '?')
            d[n] = (ry_dim){RY_DIM_ANY, 0, NULL};
        else if (*s >= '0' && *s <= '9')
            d[n] = (ry_dim){RY_DIM_CONST, atoll(s), NULL};
        else
            d[n] = (ry_dim){RY_DIM_SYM, 0, ry_arena_strndup(a, s, (size_t)(p - s))};
        n++;
    }
    ry_dtype dtype;
    assert_true(ry_dtype_parse(dt, strlen(dt), &dtype));
    return ry_type_tensor_arena(a, dtype, n, d);
}

static ry_rel_status rel(ry_arena *a, const char *opname, ry_attrs attrs, int n, ry_type **args,
                         ry_type **out, ry_error *err) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    for (int i = 0; i < attrs.n; i++) attrs.items[i].span = ATTR_SPAN;
    memset(err, 0, sizeof *err);
    ry_rel_ctx c = {a, op, &attrs, CALL_SPAN, err};
    return op->rel(&c, n, args, out);
}

/* The relation succeeds and gives the tensor type dt[dims]. */
static void want_type(const ry_type *t, const char *dt, const char *dims) {
    ry_arena *a = ry_arena_new();
    ry_type *w = ty(a, dt, dims);
    assert_int_equal(t->kind, RY_TYPE_TENSOR);
    if (!ry_type_equal(t, w)) {
        char s1[128], s2[128];
        fail_msg("type %s, expected %s", ry_type_str(t, s1, sizeof s1),
                 ry_type_str(w, s2, sizeof s2));
    }
    ry_arena_free(a);
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

static void test_prelu(void **state) {
    (void)state;
    run_case("prelu_f64", "nn.prelu", 2, 1, NOATTRS, F64);
    run_case("prelu_f32_last", "nn.prelu", 2, 1, ATTRS(AI("axis", -1)), 0, 0);
}

static void test_instance_group_norm(void **state) {
    (void)state;
    run_case("inorm_f64", "nn.instance_norm", 3, 1, NOATTRS, F64);
    run_case("inorm_f32_last", "nn.instance_norm", 3, 1, ATTRS(AI("axis", 2)), 1e-5, 1e-5);
    run_case("gnorm_f64", "nn.group_norm", 3, 1, ATTRS(AI("num_groups", 3)), F64);
    run_case(
        "gnorm_f64_plain", "nn.group_norm", 3, 1,
        ATTRS(AI("num_groups", 2), AF("epsilon", 1e-3), AB("center", false), AB("scale", false)),
        F64);
    /* group_norm with one group per channel is instance_norm */
    run_case("inorm_f64", "nn.group_norm", 3, 1, ATTRS(AI("num_groups", 3), AI("axis", 1)), F64);
}

/* axis=[a, b] for l2_normalize, built in store. */
static ry_attr axis_list(ry_attr_value *store, int n, const int64_t *axes) {
    for (int i = 0; i < n; i++) store[i] = (ry_attr_value){.kind = RY_AV_INT, .i = axes[i]};
    return (ry_attr){.name = "axis", .value = {.kind = RY_AV_LIST, .list = {n, store}}};
}

static void test_l2_normalize(void **state) {
    (void)state;
    ry_attr_value st[RY_MAX_RANK];
    run_case("l2n_f64_last", "nn.l2_normalize", 1, 1,
             ATTRS(AF("eps", 1e-12), axis_list(st, 1, (const int64_t[]){-1})), F64);
    run_case("l2n_f64_01", "nn.l2_normalize", 1, 1,
             ATTRS(AF("eps", 1e-12), axis_list(st, 2, (const int64_t[]){1, 0})), F64);
    run_case("l2n_f64_eps", "nn.l2_normalize", 1, 1,
             ATTRS(AF("eps", 50.0), axis_list(st, 1, (const int64_t[]){1})), F64);
}

static void test_lrn(void **state) {
    (void)state;
    run_case("lrn_f64", "nn.lrn", 1, 1, NOATTRS, F64);
    run_case(
        "lrn_f64_last", "nn.lrn", 1, 1,
        ATTRS(AI("size", 3), AI("axis", -1), AF("alpha", 0.5), AF("beta", 0.6), AF("bias", 1.0)),
        F64);
}

static void test_cross_entropy(void **state) {
    (void)state;
    run_case("xent_f64", "nn.cross_entropy", 2, 1, NOATTRS, F64);
    run_case("xent_f32", "nn.cross_entropy", 2, 1, NOATTRS, 1e-6, 1e-6);
    run_case("xentl_f64", "nn.cross_entropy_with_logits", 2, 1, NOATTRS, F64);
    run_case("sm_f64_last", "nn.fast_softmax", 1, 1, NOATTRS, F64);
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

/* ---- through the text format: parse, type-check, interpret ---- */

static const char *mlp_text = "#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(3, 5), float64], %w: Tensor[(4, 5), float64], "
                              "%b: Tensor[(4), float64],\n"
                              "          %g: Tensor[(4), float64], %be: Tensor[(4), float64]) {\n"
                              "  %0 = nn.dense(%x, %w, units=4);\n"
                              "  %1 = nn.bias_add(%0, %b);\n"
                              "  %2 = nn.layer_norm(%1, %g, %be, axis=-1, epsilon=1e-05f);\n"
                              "  nn.log_softmax(%2)\n"
                              "}\n";

static void test_text_program(void **state) {
    (void)state;
    ry_module *m = test_parse(mlp_text, true);
    ry_global *g = ry_module_find_global(m, "main");
    assert_non_null(g);
    want_type(g->func->func.body->type, "float64", "3, 4");
    ry_value *args[5];
    char path[64];
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "tests/ops/nn/prog_mlp_in%d.npy", i);
        args[i] = ry_value_tensor(test_npy(path));
    }
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "main", 5, args, NULL, &out, &err)) fail_msg("%s", err.msg);
    ry_tensor *want = test_npy("tests/ops/nn/prog_mlp_out0.npy");
    assert_int_equal(out->kind, RY_VAL_TENSOR);
    test_assert_close(out->tensor, want, 1e-12, 1e-12);
    ry_tensor_release(want);
    ry_value_release(out);
    for (int i = 0; i < 5; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

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

/* Every allocation a kernel makes may fail: the Nth failing gives an error
 * (never a crash or a leak), and enough room gives the right result. */
static void fail_allocs(const char *name, const char *opname, int nin, ry_attrs attrs) {
    ry_tensor *in[8];
    char path[256];
    for (int i = 0; i < nin; i++) {
        snprintf(path, sizeof path, "tests/ops/nn/%s_in%d.npy", name, i);
        in[i] = test_npy(path);
    }
    snprintf(path, sizeof path, "tests/ops/nn/%s_out0.npy", name);
    ry_tensor *want = test_npy(path);
    bool done = false;
    for (long n = 0; n < 64 && !done; n++) {
        ry_arena *ar = ry_arena_new();
        ry_error err;
        int nout = 0;
        ry_tensor **o = NULL;
        ry_alloc_fail_after(n);
        ry_status st = run_op(opname, attrs, nin, in, false, NULL, ar, &nout, &o, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            test_assert_close(o[0], want, 1e-5, 1e-5);
            release_all(nout, o);
            ry_free(o);
            done = true;
        }
        ry_arena_free(ar);
    }
    assert_true(done);
    ry_tensor_release(want);
    release_all(nin, in);
}

static void test_alloc_failures(void **state) {
    (void)state;
    ry_attr_value st[3 * RY_MAX_RANK];
    fail_allocs("dense_f16", "nn.dense", 2, NOATTRS);
    fail_allocs("dense_i8_i32", "nn.dense", 2, ATTRS(AS("out_dtype", "int32")));
    fail_allocs("sm_f64_mid", "nn.softmax", 1, ATTRS(AI("axis", 1)));
    fail_allocs("ln_f64_axis1", "nn.layer_norm", 3, ATTRS(AI("axis", 1)));
    fail_allocs("pad_f64_castval", "nn.pad", 2,
                ATTRS(pad_width(st, 2, (const int64_t[][2]){{1, 0}, {0, 1}})));
    fail_allocs("l2n_f64_01", "nn.l2_normalize", 1,
                ATTRS(AF("eps", 1e-12), axis_list(st, 2, (const int64_t[]){1, 0})));
}

/* ---- the registry entries: TVM's names, arities and C++ defaults ---- */

static void test_registry(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int nargs;
        ry_op_pattern pat;
    } ops[] = {{"nn.dense", 2, RY_PAT_OUT_ELEMWISE},
               {"nn.matmul", 2, RY_PAT_OUT_ELEMWISE},
               {"nn.batch_matmul", 2, RY_PAT_OUT_ELEMWISE},
               {"nn.bias_add", 2, RY_PAT_BROADCAST},
               {"nn.softmax", 1, RY_PAT_OPAQUE},
               {"nn.log_softmax", 1, RY_PAT_OPAQUE},
               {"nn.batch_flatten", 1, RY_PAT_INJECTIVE},
               {"nn.pad", 2, RY_PAT_INJECTIVE},
               {"nn.batch_norm", 5, RY_PAT_OPAQUE},
               {"nn.layer_norm", 3, RY_PAT_OPAQUE},
               {"nn.dropout", 1, RY_PAT_OPAQUE},
               {"nn.fast_softmax", 1, RY_PAT_OPAQUE},
               {"nn.prelu", 2, RY_PAT_BROADCAST},
               {"nn.instance_norm", 3, RY_PAT_OPAQUE},
               {"nn.group_norm", 3, RY_PAT_OPAQUE},
               {"nn.l2_normalize", 1, RY_PAT_OPAQUE},
               {"nn.lrn", 1, RY_PAT_OPAQUE},
               {"nn.cross_entropy", 2, RY_PAT_OPAQUE},
               {"nn.mirror_pad", 1, RY_PAT_INJECTIVE},
               {"nn.cross_entropy_with_logits", 2, RY_PAT_OPAQUE}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const ry_op *op = ry_op_find(ops[i].name);
        assert_non_null(op);
        assert_int_equal(op->nargs, ops[i].nargs);
        assert_int_equal(op->pattern, ops[i].pat);
        assert_non_null(op->rel);
        assert_non_null(cpu_kernel(op));
        assert_non_null(op->doc);
    }
    const ry_op *bmm = ry_op_find("nn.batch_matmul");
    assert_false(ry_attr_bool(bmm, NULL, "transpose_a"));
    assert_false(ry_attr_bool(bmm, NULL, "transpose_b"));
    assert_string_equal(ry_attr_str(bmm, NULL, "out_dtype"), "");
    assert_true(ry_attr_is_none(ry_op_find("nn.dense"), NULL, "units"));
    assert_int_equal(ry_attr_int(ry_op_find("nn.bias_add"), NULL, "axis"), 1);
    assert_int_equal(ry_attr_int(ry_op_find("nn.softmax"), NULL, "axis"), -1);
    assert_int_equal(ry_attr_int(ry_op_find("nn.layer_norm"), NULL, "axis"), -1);
    assert_int_equal(ry_attr_int(ry_op_find("nn.batch_norm"), NULL, "axis"), 1);
    assert_true(ry_attr_float(ry_op_find("nn.batch_norm"), NULL, "epsilon") == 1e-5);
    assert_true(ry_attr_bool(ry_op_find("nn.batch_norm"), NULL, "center"));
    assert_true(ry_attr_bool(ry_op_find("nn.layer_norm"), NULL, "scale"));
    assert_true(ry_attr_float(ry_op_find("nn.dropout"), NULL, "rate") == 0.5);
    assert_string_equal(ry_attr_str(ry_op_find("nn.pad"), NULL, "pad_mode"), "constant");
    assert_int_equal(ry_attr_int(ry_op_find("nn.prelu"), NULL, "axis"), 1);
    assert_int_equal(ry_attr_int(ry_op_find("nn.group_norm"), NULL, "num_groups"), 0);
    assert_int_equal(ry_attr_int(ry_op_find("nn.instance_norm"), NULL, "axis"), 1);
    assert_true(ry_attr_is_none(ry_op_find("nn.l2_normalize"), NULL, "eps"));
    assert_string_equal(ry_attr_str(ry_op_find("nn.mirror_pad"), NULL, "mode"), "SYMMETRIC");
    ry_error err;
    ry_attrs bad_attrs = ATTRS(AI("alpha", 1));
    assert_int_equal(ry_op_check_attrs(ry_op_find("nn.softmax"), &bad_attrs, &err), RY_ERR);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_batch_matmul),
        cmocka_unit_test(test_bias_add),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_batch_flatten),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_batch_norm_single),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_dropout_rate),
        cmocka_unit_test(test_float16),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_rel_dense),
        cmocka_unit_test(test_rel_matmul),
        cmocka_unit_test(test_rel_batch_matmul),
        cmocka_unit_test(test_rel_bias_softmax_flatten),
        cmocka_unit_test(test_rel_pad),
        cmocka_unit_test(test_rel_norms_dropout),
        cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_instance_group_norm),
        cmocka_unit_test(test_l2_normalize),
        cmocka_unit_test(test_lrn),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_rel_extras),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_text_program),
        cmocka_unit_test(test_text_types),
        cmocka_unit_test(test_text_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
