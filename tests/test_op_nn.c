/*
 * test_op_nn.c: the nn operator family's kernels and registry entries
 * (src/op/nn.c, src/backend/cpu/gemm.c, softmax.c, norm.c, nn.c). Kernels
 * run through ry_op_run on the fixtures of tools/gen_op_nn.py (numpy/torch
 * results in tests/ops/nn/), also under allocation failure and through the
 * text format's interpreter. The type relations are test_op_nn_rel.c's.
 */
#include "op_nn_util.h"

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
        cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_instance_group_norm),
        cmocka_unit_test(test_l2_normalize),
        cmocka_unit_test(test_lrn),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_text_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}