/*
 * test_opencl_ops.c: the OpenCL target's nn kernels against the CPU's
 * (test_opencl_util.h's comparison: each program compiled for both
 * targets from one optimized module, run on the same random inputs,
 * every result compared; float32 rtol 1e-5 plus 1e-5 of the largest
 * element, float64 1e-12). Shapes are drawn at random per case (from a
 * fixed seed) beside fixed edge cases: extents of 0, extents that are no
 * multiple of a work-group, broadcasting operands; strides, padding,
 * dilation and groups for the convolutions and pools. Each operator runs
 * forward and through the gradient program of the AD transform (which
 * calls the gradient operators: conv2d_transpose, conv2d_backward_weight,
 * the pools' _grad, scatter_nd). Without an OpenCL device every test
 * skips with a message.
 */
#include <stdarg.h>

#include "test_opencl_util.h"

#define V "#[version = \"0.0.5\"]\n"

/* an integer in [lo, hi] */
static int64_t pick(int64_t lo, int64_t hi) {
    return lo + (int64_t)((uniform() + 1) / 2 * (double)(hi - lo + 1)) % (hi - lo + 1);
}

/* same_as_cpu of a formatted program text */
static void check(bool grad, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool grad, const char *fmt, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    same_as_cpu(text, grad);
}

/* ---- convolutions ---- */

/* conv2d of random geometry, forward and its two gradients through a
 * weighted sum (so the gradients are not all ones) */
static void conv_case(const char *dt, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                      int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                      int64_t pb, int64_t pr, int64_t dh, int64_t dw, int64_t G) {
    int64_t OH = (H + ph + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pw + pr - dw * (KW - 1) - 1) / sw + 1;
    if (OH < 1 || OW < 1) return;
    const char *f = V "def @main(%%x: Tensor[(%lld, %lld, %lld, %lld), %s], %%w: Tensor[(%lld, %lld, %lld, %lld), %s],\n"
                    "          %%r: Tensor[(%lld, %lld, %lld, %lld), %s]) -> Tensor[(), %s] {\n"
                    "  %%0 = nn.conv2d(%%x, %%w, strides=[%lld, %lld], padding=[%lld, %lld, %lld, %lld],\n"
                    "                dilation=[%lld, %lld], groups=%lld);\n"
                    "  sum(multiply(%%0, %%r))\n}\n";
    for (int grad = 0; grad < 2; grad++)
        check(grad, f, (long long)N, (long long)C, (long long)H, (long long)W, dt, (long long)O,
              (long long)(C / G), (long long)KH, (long long)KW, dt, (long long)N, (long long)O,
              (long long)OH, (long long)OW, dt, dt, (long long)sh, (long long)sw, (long long)ph,
              (long long)pw, (long long)pb, (long long)pr, (long long)dh, (long long)dw, (long long)G);
}

static void test_conv2d(void **s) {
    NEED_DEVICE();
    /* LeNet's two convolutions, then strides, padding, dilation, groups */
    conv_case("float32", 3, 1, 12, 12, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1);
    conv_case("float32", 2, 6, 7, 9, 4, 3, 3, 2, 1, 1, 0, 1, 2, 1, 2, 2);
    conv_case("float64", 2, 4, 6, 5, 6, 3, 2, 1, 2, 0, 1, 1, 0, 2, 1, 2);
    conv_case("float32", 1, 3, 5, 5, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3); /* depthwise 1x1 */
    conv_case("float32", 0, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1); /* an empty batch */
    for (int k = 0; k < 6; k++) {
        int64_t G = pick(1, 3), C = G * pick(1, 3), O = G * pick(1, 3);
        conv_case(k % 3 ? "float32" : "float64", pick(1, 3), C, pick(3, 17), pick(3, 17), O,
                  pick(1, 4), pick(1, 4), pick(1, 3), pick(1, 3), pick(0, 2), pick(0, 2), pick(0, 2),
                  pick(0, 2), pick(1, 2), pick(1, 2), G);
    }
    /* conv2d_transpose called directly, output_padding rows included;
     * integer convolutions (64-bit sums) */
    check(false, V "def @main(%%img: Tensor[(2, 2, 4, 5), float32], %%k: Tensor[(2, 3, 3, 3), float32],\n"
                   "          %%a: Tensor[(1, 2, 5, 5), int32], %%b: Tensor[(3, 2, 2, 2), int32]) {\n"
                   "  (nn.conv2d_transpose(%%img, %%k, channels=3, kernel_size=[3, 3], strides=[2, 2],\n"
                   "                       padding=[1, 1, 1, 1], output_padding=[1, 1]),\n"
                   "   nn.conv2d(%%a, %%b, padding=[1, 1]))\n}\n");
}

/* ---- pools ---- */

static void pool_case(const char *dt, const char *op, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t PH, int64_t PW, int64_t sh, int64_t sw, int64_t pt, int64_t pl,
                      int64_t pb, int64_t pr, bool ceil, bool incl) {
    if (H + pt + pb < PH || W + pl + pr < PW) return;
    char extra[64] = "";
    if (strcmp(op, "nn.avg_pool2d") == 0)
        snprintf(extra, sizeof extra, ", count_include_pad=%s", incl ? "True" : "False");
    const char *f = V "def @main(%%x: Tensor[(%lld, %lld, %lld, %lld), %s]) -> Tensor[(), %s] {\n"
                    "  %%0 = %s(%%x, pool_size=[%lld, %lld], strides=[%lld, %lld],\n"
                    "           padding=[%lld, %lld, %lld, %lld], ceil_mode=%s%s);\n"
                    "  sum(multiply(%%0, %%0))\n}\n";
    for (int grad = 0; grad < 2; grad++)
        check(grad, f, (long long)N, (long long)C, (long long)H, (long long)W, dt, dt, op,
              (long long)PH, (long long)PW, (long long)sh, (long long)sw, (long long)pt,
              (long long)pl, (long long)pb, (long long)pr, ceil ? "True" : "False", extra);
}

static void test_pools(void **s) {
    NEED_DEVICE();
    /* LeNet's 2x2 stride-2 pool (an odd plane leaves a row out) */
    pool_case("float32", "nn.max_pool2d", 2, 3, 8, 9, 2, 2, 2, 2, 0, 0, 0, 0, false, false);
    pool_case("float32", "nn.avg_pool2d", 2, 3, 8, 9, 2, 2, 2, 2, 0, 0, 0, 0, false, false);
    pool_case("float64", "nn.max_pool2d", 1, 2, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, true, false);
    pool_case("float64", "nn.avg_pool2d", 1, 2, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, true, true);
    pool_case("float32", "nn.avg_pool2d", 0, 2, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, false, true);
    for (int k = 0; k < 8; k++)
        pool_case(k % 3 ? "float32" : "float64", k % 2 ? "nn.max_pool2d" : "nn.avg_pool2d",
                  pick(1, 3), pick(1, 4), pick(2, 19), pick(2, 19), pick(1, 3), pick(1, 3),
                  pick(1, 3), pick(1, 3), pick(0, 1), pick(0, 1), pick(0, 1), pick(0, 1),
                  pick(0, 1), pick(0, 1));
    /* overlapping windows with ties (relu zeros): the first
     * maximum takes the gradient, as on the CPU */
    check(true, V "def @main(%%x: Tensor[(1, 2, 6, 7), float32]) -> Tensor[(), float32] {\n"
                  "  %%0 = nn.max_pool2d(nn.relu(%%x), pool_size=[3, 3], strides=[1, 2], padding=[1, 1]);\n"
                  "  sum(multiply(%%0, %%0))\n}\n");
    /* dilation, integers, the global and adaptive pools */
    check(false, V "def @main(%%x: Tensor[(2, 3, 9, 10), float32], %%i: Tensor[(1, 2, 5, 6), int32],\n"
                   "          %%d: Tensor[(2, 3, 7, 5), float64]) {\n"
                   "  (nn.max_pool2d(%%x, pool_size=[2, 3], dilation=[2, 2], padding=[1, 0, 1, 2]),\n"
                   "   nn.avg_pool2d(%%x, pool_size=[3, 2], dilation=[2, 1], strides=[2, 2]),\n"
                   "   nn.max_pool2d(%%i, pool_size=[2, 2], padding=[1, 1]),\n"
                   "   nn.avg_pool2d(%%i, pool_size=[2, 2], padding=[1, 1], count_include_pad=True),\n"
                   "   nn.global_avg_pool2d(%%x), nn.global_max_pool2d(%%d),\n"
                   "   nn.adaptive_avg_pool2d(%%x, output_size=[4, 3]),\n"
                   "   nn.adaptive_max_pool2d(%%d, output_size=[3, 4]), nn.adaptive_avg_pool2d(%%i))\n}\n");
    check(true, V "def @main(%%x: Tensor[(2, 3, 9, 10), float32]) -> Tensor[(), float32] {\n"
                  "  %%0 = nn.avg_pool2d(%%x, pool_size=[3, 2], dilation=[2, 1], strides=[2, 2], padding=[1, 1]);\n"
                  "  %%1 = nn.max_pool2d(%%x, pool_size=[2, 3], dilation=[2, 2], padding=[1, 0, 1, 2]);\n"
                  "  add(sum(multiply(%%0, %%0)), add(sum(%%1), sum(nn.global_avg_pool2d(%%x))))\n}\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_pools),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
