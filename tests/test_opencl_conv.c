/*
 * test_opencl_conv.c: the device convolutions' two paths (direct kernels,
 * and im2col + the device GEMM + col2im: src/backend/device/
 * dk_conv_gemm.c), each forced, against the CPU engine (test_opencl_util.h's
 * comparison, forward and through the gradient program, which calls
 * nn.conv2d_transpose and nn.conv2d_backward_weight): strides, padding,
 * dilation, groups, batches of one and more, float32 and float64; the
 * GEMM path with its batch cut into chunks (a small column-matrix bound:
 * the swaps, the last short chunk, the weight gradient summed over
 * chunks); the GEMM path's gradients against finite differences in
 * float64; and the rule's choice on the shapes it was set from. Without an
 * OpenCL device every test skips with a message.
 */
#include <stdarg.h>

#include "backend/device/dk_ops.h"
#include "test_opencl_util.h"

#define V "#[version = \"0.0.5\"]\n"

/* conv2d(x (N, C, H, W), w (O, C/G, K, K)) weighted by r, summed: the
 * program's text */
static void conv_text(char *text, size_t n, const char *dt, int64_t N, int64_t C, int64_t H,
                      int64_t O, int64_t K, int64_t s, int64_t p, int64_t d, int64_t G) {
    int64_t OH = (H + 2 * p - d * (K - 1) - 1) / s + 1;
    snprintf(text, n,
             V "def @main(%%x: Tensor[(%lld, %lld, %lld, %lld), %s], %%w: Tensor[(%lld, %lld, %lld, %lld), %s],\n"
               "          %%r: Tensor[(%lld, %lld, %lld, %lld), %s]) -> Tensor[(), %s] {\n"
               "  %%0 = nn.conv2d(%%x, %%w, strides=[%lld, %lld], padding=[%lld, %lld],\n"
               "                dilation=[%lld, %lld], groups=%lld);\n"
               "  sum(multiply(%%0, %%r))\n}\n",
             (long long)N, (long long)C, (long long)H, (long long)H, dt, (long long)O,
             (long long)(C / G), (long long)K, (long long)K, dt, (long long)N, (long long)O,
             (long long)OH, (long long)OH, dt, dt, (long long)s, (long long)s, (long long)p,
             (long long)p, (long long)d, (long long)d, (long long)G);
}

typedef struct geo {
    const char *dt;
    int64_t N, C, H, O, K, s, p, d, G;
} geo;

static const geo cases[] = {
    {"float32", 3, 1, 12, 6, 5, 1, 2, 1, 1},  /* LeNet's conv1, batch 3 */
    {"float32", 2, 6, 9, 16, 5, 1, 0, 1, 1},  /* LeNet's conv2 */
    {"float32", 2, 4, 9, 6, 3, 2, 1, 1, 1},   /* strided (an output_padding row in dx) */
    {"float32", 2, 4, 10, 4, 3, 3, 2, 1, 1},  /* stride 3 */
    {"float64", 3, 3, 8, 4, 3, 1, 2, 2, 1},   /* dilated, padded */
    {"float32", 2, 6, 7, 9, 3, 1, 1, 1, 3},   /* groups */
    {"float64", 2, 4, 6, 4, 3, 2, 1, 2, 2},   /* groups, stride, dilation */
    {"float32", 1, 3, 5, 3, 1, 1, 0, 1, 3},   /* depthwise 1x1 */
    {"float32", 1, 2, 4, 3, 1, 1, 0, 1, 1},   /* one image, 1x1 */
    {"float64", 4, 2, 5, 3, 5, 1, 0, 1, 1},   /* a 1x1 output */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void run_cases(void) {
    char text[2048];
    for (int k = 0; k < NCASES; k++) {
        const geo *c = &cases[k];
        conv_text(text, sizeof text, c->dt, c->N, c->C, c->H, c->O, c->K, c->s, c->p, c->d, c->G);
        same_as_cpu(text, false);
        same_as_cpu(text, true);
    }
}

static void test_gemm_path_matches_the_cpu(void **s) {
    NEED_DEVICE();
    ry_dk_conv_force = RY_DK_CONV_GEMM;
    run_cases();
    ry_dk_conv_force = RY_DK_CONV_AUTO;
}

static void test_direct_path_matches_the_cpu(void **s) {
    NEED_DEVICE();
    ry_dk_conv_force = RY_DK_CONV_DIRECT;
    run_cases();
    ry_dk_conv_force = RY_DK_CONV_AUTO;
}

/* a bound of 1296 elements: the batch of 3 runs as chunks of 2 + 1 (its
 * im2col holds 648 elements an image) and image by image (col2im: 1296),
 * the batch of 4 as 2 + 2 (576 both), with the swaps, and the weight
 * gradient summed by the GEMM across chunks; a bound under one image runs
 * image by image */
static void test_gemm_path_in_chunks(void **s) {
    NEED_DEVICE();
    int64_t cap = ry_dk_conv_col_cap;
    ry_dk_conv_force = RY_DK_CONV_GEMM;
    char text[2048];
    static const int64_t caps[] = {1296, 1};
    for (int i = 0; i < 2; i++) {
        ry_dk_conv_col_cap = caps[i];
        conv_text(text, sizeof text, "float32", 3, 2, 6, 4, 3, 1, 1, 1, 1);
        same_as_cpu(text, true);
        conv_text(text, sizeof text, "float64", 4, 4, 7, 4, 3, 2, 1, 1, 2);
        same_as_cpu(text, true);
    }
    ry_dk_conv_col_cap = cap;
    ry_dk_conv_force = RY_DK_CONV_AUTO;
}

/* the GEMM path's gradients (first and second order) against the
 * interpreter's central finite differences, float64 */
static void test_gemm_path_gradcheck(void **s) {
    NEED_DEVICE();
    ry_dk_conv_force = RY_DK_CONV_GEMM;
    int64_t cap = ry_dk_conv_col_cap;
    ry_dk_conv_col_cap = 700; /* chunks of 2 images + 1 (648 and 324 elements an image) */
    char text[2048];
    conv_text(text, sizeof text, "float64", 3, 4, 5, 4, 3, 2, 1, 1, 2);
    ry_module *m = test_parse(text, true);
    ry_value *args[3];
    for (int i = 0; i < 3; i++)
        args[i] = random_value(ry_module_find_global(m, "main")->func->func.params[i]->type);
    ry_gradcheck_opts o = {.rtol = 1e-6, .atol = 1e-8, .second_order = true, .target = cl};
    ry_gradcheck_report rep;
    ry_error err = {0};
    if (ry_gradcheck(m, "main", 3, args, &o, &rep, &err)) fail_msg("gradcheck: %s", err.msg);
    assert_true(rep.ok);
    for (int i = 0; i < 3; i++) {
        assert_true(rep.params[i].checked && rep.params[i].nchecked > 0);
        ry_value_release(args[i]);
    }
    ry_module_free(m);
    ry_dk_conv_col_cap = cap;
    ry_dk_conv_force = RY_DK_CONV_AUTO;
}

/* the rule (dk_conv_gemm.c): a group's filter Og*Cg*KH*KW of 64 and up
 * goes to GEMMs (512 for the weight gradient); empty sums never do */
static void test_the_rule(void **s) {
    /* C H W O OH OW KH KW Cg Og sh sw dh dw pt pl */
    int64_t lenet1[16] = {1, 28, 28, 6, 28, 28, 5, 5, 1, 6, 1, 1, 1, 1, 2, 2};
    int64_t lenet2[16] = {6, 14, 14, 16, 10, 10, 5, 5, 6, 16, 1, 1, 1, 1, 0, 0};
    int64_t depthwise[16] = {32, 16, 16, 32, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_true(ry_dk_conv_gemm_pays(RY_GEN_CONV_FWD, lenet1, 64));
    assert_false(ry_dk_conv_gemm_pays(RY_GEN_CONV_DW, lenet1, 64));
    assert_true(ry_dk_conv_gemm_pays(RY_GEN_CONV_FWD, lenet2, 64));
    assert_true(ry_dk_conv_gemm_pays(RY_GEN_CONV_DX, lenet2, 64));
    assert_true(ry_dk_conv_gemm_pays(RY_GEN_CONV_DW, lenet2, 64));
    assert_false(ry_dk_conv_gemm_pays(RY_GEN_CONV_FWD, depthwise, 8));
    assert_false(ry_dk_conv_gemm_pays(RY_GEN_CONV_DW, lenet2, 0));
    ry_dk_conv_force = RY_DK_CONV_GEMM;
    assert_true(ry_dk_conv_gemm_pays(RY_GEN_CONV_FWD, depthwise, 8));
    assert_false(ry_dk_conv_gemm_pays(RY_GEN_CONV_DW, lenet2, 0)); /* empty: always direct */
    ry_dk_conv_force = RY_DK_CONV_AUTO;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_path_matches_the_cpu),
        cmocka_unit_test(test_direct_path_matches_the_cpu),
        cmocka_unit_test(test_gemm_path_in_chunks),
        cmocka_unit_test(test_gemm_path_gradcheck),
        cmocka_unit_test(test_the_rule),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
