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
     * integer convolutions (64-bit sums); an out_dtype wider than the
     * operands */
    check(false, V "def @main(%%img: Tensor[(2, 2, 4, 5), float32], %%k: Tensor[(2, 3, 3, 3), float32],\n"
                   "          %%a: Tensor[(1, 2, 5, 5), int32], %%b: Tensor[(3, 2, 2, 2), int32],\n"
                   "          %%c: Tensor[(1, 2, 5, 5), int8], %%d: Tensor[(3, 2, 2, 2), int8], %%x: Tensor[(1, 2, 5, 5), float32]) {\n"
                   "  (nn.conv2d_transpose(%%img, %%k, channels=3, kernel_size=[3, 3], strides=[2, 2],\n"
                   "                       padding=[1, 1, 1, 1], output_padding=[1, 1]),\n"
                   "   nn.conv2d(%%a, %%b, padding=[1, 1]), nn.conv2d(%%c, %%d, out_dtype=\"int32\"),\n"
                   "   nn.conv2d(%%x, cast(%%b, dtype=\"float32\"), out_dtype=\"float64\"))\n}\n");
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

/* ---- arrays: one_hot, scatter_nd, gather_nd, stack, pad ---- */

static void test_arrays(void **s) {
    NEED_DEVICE();
    /* indices made in range from float parameters (0..3) */
    check(false, V "def @main(%%f: Tensor[(2, 3), float32], %%d: Tensor[(4, 5, 3), float32], %%u: Tensor[(3, 3), float32],\n"
                   "          %%a: Tensor[(4, 7), float32], %%b: Tensor[(4, 7), float32], %%z: Tensor[(0, 7), float32],\n"
                   "          %%n: Tensor[(3, 4), int64]) {\n"
                   "  let %%i = cast(multiply(abs(%%f), 1.9f), dtype=\"int32\");\n"
                   "  let %%j = cast(multiply(abs(%%f), 1.9f), dtype=\"int64\");\n"
                   "  (one_hot(%%i, 1f, 0f, depth=4, axis=-1, dtype=\"float32\"),\n"
                   "   one_hot(%%j, 3, -1, depth=3, axis=0, dtype=\"int32\"),\n"
                   "   gather_nd(%%d, %%i), gather_nd(%%d, expand_dims(take(%%j, 0), axis=0)),\n"
                   "   take(%%d, %%i, axis=0, mode=\"fast\"), take(%%d, %%j, axis=1, mode=\"fast\"),\n"
                   "   gather_nd(%%d, reshape(cast(multiply(abs(%%a), 1.2f), dtype=\"int32\"), newshape=[1, 4, 7]), batch_dims=1),\n"
                   "   scatter_nd(%%d, %%i, %%u, mode=\"add\"), scatter_nd(%%d, %%j, %%u, mode=\"update\"),\n"
                   "   stack((%%a, %%b, %%a), axis=0), stack((%%a, %%b), axis=2), stack((%%z, %%z), axis=1),\n"
                   "   nn.pad(%%a, 1.5f, pad_width=[[1, 2], [0, 3]]),\n"
                   "   nn.pad(%%n, 7, pad_width=[[2, 0], [1, 1]], pad_mode=\"edge\"),\n"
                   "   nn.pad(%%d, 0f, pad_width=[[0, 0], [2, 2], [1, 0]], pad_mode=\"reflect\"),\n"
                   "   nn.mirror_pad(%%a, pad_width=[[2, 3], [3, 1]], mode=\"SYMMETRIC\"),\n"
                   "   nn.mirror_pad(%%a, pad_width=[[1, 1], [2, 2]], mode=\"REFLECT\"),\n"
                   "   nn.pad(%%z, 0f, pad_width=[[1, 1], [0, 0]]))\n}\n");
    /* the embedding gradient: take's adjoint, a scatter_nd add into zeros
     * with repeated rows (the CPU's order of adds); pad's and stack's */
    check(true, V "def @main(%%w: Tensor[(6, 5), float32], %%f: Tensor[(9), float32], %%r: Tensor[(9, 5), float32],\n"
                  "          %%a: Tensor[(3, 4), float32]) -> Tensor[(), float32] {\n"
                  "  let %%i = cast(multiply(abs(%%f), 2.9f), dtype=\"int32\");\n"
                  "  %%0 = multiply(take(%%w, %%i, axis=0), %%r);\n"
                  "  %%1 = nn.pad(%%a, 0f, pad_width=[[1, 0], [2, 1]]);\n"
                  "  add(sum(%%0), add(sum(multiply(%%1, %%1)), sum(multiply(stack((%%a, %%a), axis=0), %%a))))\n}\n");
}

/* text's @main run on the device with args (released here) fails with
 * msg, at line (0: any line) */
static void assert_run_fails(const char *text, int n, ry_value **args, const char *msg, int line) {
    ry_module *m = test_parse(text, true);
    ry_vm_program *p;
    ry_value *out = NULL;
    ry_error err = {0};
    assert_int_equal(ry_vm_compile(m, cl, &p, &err), RY_OK);
    assert_int_equal(ry_vm_call(p, "main", n, args, NULL, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, msg));
    if (line) assert_int_equal(err.line, line);
    for (int k = 0; k < n; k++) ry_value_release(args[k]);
    ry_vm_free(p);
    ry_module_free(m);
}

static ry_value *zeros(ry_dtype dt, int64_t r, int64_t c) {
    return ry_value_tensor(ry_tensor_zeros(dt, c ? 2 : 1, c ? (int64_t[]){r, c} : (int64_t[]){r}));
}

/* an index out of range: the CPU's located error, from the device */
static void test_index_out_of_range_is_an_error(void **s) {
    NEED_DEVICE();
    ry_value *args[3] = {zeros(RY_FLOAT32, 4, 3), zeros(RY_INT32, 1, 2), zeros(RY_FLOAT32, 2, 3)};
    ry_tensor_set(args[1]->tensor, 1, 4);
    assert_run_fails(V "def @main(%d: Tensor[(4, 3), float32], %i: Tensor[(1, 2), int32], %u: Tensor[(2, 3), float32]) {\n"
                     "  (gather_nd(%d, %i),\n   scatter_nd(%d, %i, %u, mode=\"add\"))\n}\n",
                     3, args, "index 4 out of range [0, 4) in dim 0", 3);
    /* scatter_nd's: the first bad tuple in order, a negative index */
    ry_value *sargs[3] = {zeros(RY_FLOAT32, 4, 3), zeros(RY_INT64, 1, 2), zeros(RY_FLOAT32, 2, 3)};
    ry_tensor_set(sargs[1]->tensor, 0, -1);
    ry_tensor_set(sargs[1]->tensor, 1, 9);
    assert_run_fails(V "def @main(%d: Tensor[(4, 3), float32], %i: Tensor[(1, 2), int64], %u: Tensor[(2, 3), float32]) {\n"
                     "  scatter_nd(%d, %i, %u, mode=\"update\")\n}\n",
                     3, sargs, "scatter_nd: index -1 out of range [0, 4) in dim 0", 0);
    /* take with mode="fast": the CPU's error naming the first bad index
     * (clip and wrap never fail) */
    ry_value *targs[2] = {zeros(RY_FLOAT32, 4, 3), zeros(RY_INT64, 3, 0)};
    ry_tensor_set(targs[1]->tensor, 1, 7);
    ry_tensor_set(targs[1]->tensor, 2, -2);
    assert_run_fails(V "def @main(%d: Tensor[(4, 3), float32], %i: Tensor[(3), int64]) {\n"
                     "  (take(%d, %i, axis=0, mode=\"clip\"),\n   take(%d, %i, axis=0, mode=\"fast\"))\n}\n",
                     2, targs, "take: index 7 out of range [0, 4) with mode=\"fast\"", 4);
}

/* ---- normalizations, losses, dropout ---- */

static void test_norms(void **s) {
    NEED_DEVICE();
    for (int k = 0; k < 3; k++) {
        const char *dt = k == 1 ? "float64" : "float32";
        long long N = pick(2, 4), C = 2 * pick(1, 3), H = pick(1, 9), W = pick(1, 9);
        check(false, V "def @main(%%x: Tensor[(%lld, %lld, %lld, %lld), %s], %%g: Tensor[(%lld), %s], %%b: Tensor[(%lld), %s],\n"
                       "          %%m: Tensor[(%lld), %s], %%v: Tensor[(%lld), %s], %%gw: Tensor[(%lld), %s], %%bw: Tensor[(%lld), %s],\n"
                       "          %%al: Tensor[(%lld), %s]) {\n"
                       "  %%0 = nn.batch_norm(%%x, %%g, %%b, %%m, abs(%%v), axis=1, epsilon=1e-3f);\n"
                       "  %%1 = nn.batch_norm(%%x, %%gw, %%bw, %%gw, abs(%%bw), axis=3, epsilon=1e-3f, center=False, scale=False);\n"
                       "  (%%0.0, %%0.1, %%0.2, %%1.0, nn.layer_norm(%%x, %%gw, %%bw, axis=-1),\n"
                       "   nn.layer_norm(%%x, %%g, %%b, axis=1, epsilon=1e-2f, scale=False),\n"
                       "   nn.instance_norm(%%x, %%g, %%b, axis=1), nn.group_norm(%%x, %%g, %%b, num_groups=2, axis=1),\n"
                       "   nn.lrn(%%x, size=3, axis=1, bias=2f, alpha=1e-3f, beta=0.75f), nn.lrn(%%x, size=5, axis=3),\n"
                       "   nn.l2_normalize(%%x, eps=1e-3f, axis=[1]), nn.l2_normalize(%%x, eps=1e-3f, axis=[0, 3]),\n"
                       "   nn.prelu(%%x, %%al, axis=1), nn.prelu(%%x, %%gw, axis=3))\n}\n",
              N, C, H, W, dt, C, dt, C, dt, C, dt, C, dt, W, dt, W, dt, C, dt);
    }
    /* group and instance norms over a later axis (A > 1 leading dims) */
    check(false, V "def @main(%%x: Tensor[(2, 3, 4, 5), float32], %%g: Tensor[(4), float32], %%b: Tensor[(4), float32]) {\n"
                   "  (nn.group_norm(%%x, %%g, %%b, num_groups=2, axis=2), nn.instance_norm(%%x, %%g, %%b, axis=2))\n}\n");
    /* training mode: the batch statistics and the moving ones' update */
    ry_vm_opts train = {.training = true, .seed = 7};
    same_as_cpu_opts(V "def @main(%x: Tensor[(5, 3, 4, 7), float32], %g: Tensor[(3), float32], %b: Tensor[(3), float32],\n"
                     "          %m: Tensor[(3), float32], %v: Tensor[(3), float32]) {\n"
                     "  %0 = nn.batch_norm(%x, %g, %b, %m, abs(%v), axis=1);\n"
                     "  (%0.0, %0.1, %0.2)\n}\n", false, &train);
    /* through gradient programs */
    check(true, V "def @main(%%x: Tensor[(4, 6, 3, 5), float32], %%g: Tensor[(6), float32], %%b: Tensor[(6), float32],\n"
                  "          %%w: Tensor[(5), float32], %%r: Tensor[(4, 6, 3, 5), float32]) -> Tensor[(), float32] {\n"
                  "  %%0 = nn.layer_norm(%%x, %%w, %%w, axis=-1);\n"
                  "  %%1 = nn.group_norm(%%x, %%g, %%b, num_groups=3, axis=1);\n"
                  "  %%2 = nn.l2_normalize(%%x, eps=1e-3f, axis=[2, 3]);\n"
                  "  %%3 = nn.prelu(%%x, %%g, axis=1);\n"
                  "  sum(multiply(add(add(%%0, %%1), add(%%2, %%3)), %%r))\n}\n");
}

static void test_losses_and_dropout(void **s) {
    NEED_DEVICE();
    check(true, V "def @main(%%x: Tensor[(7, 10), float32], %%t: Tensor[(7, 10), float32]) -> Tensor[(), float32] {\n"
                  "  add(nn.cross_entropy(nn.softmax(%%x), %%t), nn.cross_entropy_with_logits(nn.log_softmax(%%x), %%t))\n}\n");
    check(false, V "def @main(%%x: Tensor[(3, 5), float64], %%t: Tensor[(3, 5), float64], %%z: Tensor[(0, 4), float32]) {\n"
                   "  (nn.cross_entropy(sigmoid(%%x), %%t), nn.cross_entropy_with_logits(%%x, %%t), nn.cross_entropy_with_logits(%%z, %%z))\n}\n");
    /* the mask is the CPU's, bit for bit, for the same seed: in training
     * (several calls, each re-seeded), at inference, through the gradient */
    const char *drop = V "def @main(%x: Tensor[(37, 29), float32], %y: Tensor[(300), float64]) {\n"
                       "  %0 = nn.dropout(%x, rate=0.3f); %1 = nn.dropout(%y, rate=0.5f); %2 = nn.dropout(%x, rate=1f);\n"
                       "  (%0.0, %0.1, %1.0, %1.1, %2.0, %2.1, nn.dropout(%x, rate=0f).0)\n}\n";
    for (uint64_t seed = 1; seed < 4; seed++) {
        ry_vm_opts train = {.training = true, .seed = seed};
        same_as_cpu_opts(drop, false, &train);
    }
    same_as_cpu(drop, false);
    ry_vm_opts train = {.training = true, .seed = 11};
    same_as_cpu_opts(V "def @main(%x: Tensor[(8, 9), float32]) -> Tensor[(), float32] {\n"
                     "  %0 = nn.dropout(%x, rate=0.4f); sum(multiply(%0.0, %x))\n}\n", true, &train);
}

/* ---- LeNet: models/lenet.relay's loss and its gradient, batch 3 ---- */

/* s with every `from` replaced by `to` (into out) */
static void replace_all(const char *s, const char *from, const char *to, char *out, size_t cap) {
    size_t n = 0, lf = strlen(from), lt = strlen(to);
    while (*s && n + lt + 1 < cap) {
        if (strncmp(s, from, lf) == 0) {
            memcpy(out + n, to, lt);
            n += lt;
            s += lf;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
}

static void test_lenet(void **s) {
    NEED_DEVICE();
    FILE *f = fopen("models/lenet.relay", "r");
    assert_non_null(f);
    static char text[8192], a[8192], b[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    replace_all(text, "(n, ", "(3, ", a, sizeof a);
    replace_all(a, "(n)", "(3)", b, sizeof b);
    replace_all(b, "def @loss", "def @main", a, sizeof a);
    same_as_cpu(a, false);
    same_as_cpu(a, true);
}

/* ---- float16: stored as half, computed in float (the CPU widens) ---- */

static void test_float16(void **s) {
    NEED_DEVICE();
    check(false, V "def @main(%%a: Tensor[(3, 4, 5), float16], %%b: Tensor[(4, 1), float16], %%c: Tensor[(5), float16],\n"
                   "          %%f: Tensor[(3, 4, 5), float32], %%e: Tensor[(0, 5), float16]) {\n"
                   "  (add(%%a, %%b), multiply(%%a, %%c), divide(%%a, %%c), exp(%%b), tanh(%%a), sigmoid(%%a),\n"
                   "   nn.relu(%%a), clip(%%a, a_min=-0.5f16, a_max=0.5f16), maximum(%%a, %%b), greater(%%a, %%c),\n"
                   "   cast(%%a, dtype=\"float32\"), cast(%%f, dtype=\"float16\"), cast(%%a, dtype=\"int32\"),\n"
                   "   cast(cast(%%f, dtype=\"float64\"), dtype=\"float16\"), add(%%e, %%c), zeros_like(%%a),\n"
                   "   sum(%%a), sum(%%a, axis=[1]), mean(%%a, axis=[0, 2]), max(%%a, axis=[2]), argmax(%%a, axis=[1]),\n"
                   "   nn.softmax(%%a), nn.log_softmax(%%a, axis=1), transpose(%%a), nn.bias_add(%%a, %%c, axis=2),\n"
                   "   broadcast_to(%%b, shape=[2, 4, 3]), take(%%a, cast(%%c, dtype=\"int32\"), axis=2))\n}\n");
    check(true, V "def @main(%%a: Tensor[(6, 7), float16], %%b: Tensor[(7), float16]) -> Tensor[(), float16] {\n"
                  "  sum(multiply(tanh(add(%%a, %%b)), %%a))\n}\n");
    /* the kernels that widen float16 to float32 (float64 for GEMMs), as
     * the CPU's; and those that move its bits */
    check(false, V "def @main(%%x: Tensor[(2, 3, 7, 6), float16], %%w: Tensor[(4, 3, 3, 3), float16], %%g: Tensor[(3), float16],\n"
                   "          %%a: Tensor[(5, 9), float16], %%d: Tensor[(4, 9), float16], %%f: Tensor[(2, 3), float32]) {\n"
                   "  let %%i = cast(multiply(abs(%%f), 1.9f), dtype=\"int32\");\n"
                   "  %%0 = nn.batch_norm(%%x, %%g, %%g, %%g, abs(%%g), axis=1);\n"
                   "  (nn.conv2d(%%x, %%w, padding=[1, 1]), nn.max_pool2d(%%x, pool_size=[3, 3], strides=[2, 2], ceil_mode=True),\n"
                   "   nn.avg_pool2d(%%x, pool_size=[2, 2], padding=[1, 1]), nn.global_max_pool2d(%%x),\n"
                   "   nn.adaptive_avg_pool2d(%%x, output_size=[2, 2]), %%0.0, %%0.1,\n"
                   "   nn.layer_norm(%%x, %%g, %%g, axis=1), nn.dense(%%a, %%d), nn.matmul(%%a, %%d, transpose_b=True),\n"
                   "   nn.softmax(%%a), nn.cross_entropy(sigmoid(%%a), %%a), nn.prelu(%%x, %%g, axis=1),\n"
                   "   nn.l2_normalize(%%a, eps=1e-3f, axis=[1]), nn.pad(%%a, 0f16, pad_width=[[1, 1], [0, 2]]),\n"
                   "   gather_nd(%%a, %%i), stack((%%a, %%a), axis=1),\n"
                   "   scatter_nd(%%a, %%i, %%g, mode=\"add\"),\n"
                   "   scatter_nd(%%a, cast(multiply(%%f, 0f), dtype=\"int32\"), %%g, mode=\"add\"))\n}\n");
    check(true, V "def @main(%%x: Tensor[(2, 3, 6, 6), float16], %%w: Tensor[(4, 3, 3, 3), float16]) -> Tensor[(), float16] {\n"
                  "  %%0 = nn.max_pool2d(nn.conv2d(%%x, %%w, padding=[1, 1]), pool_size=[2, 2], strides=[2, 2]);\n"
                  "  sum(multiply(%%0, %%0))\n}\n");
    ry_vm_opts train = {.training = true, .seed = 5};
    same_as_cpu_opts(V "def @main(%x: Tensor[(33, 17), float16]) { %0 = nn.dropout(%x, rate=0.3f); (%0.0, %0.1) }\n",
                     false, &train);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_index_out_of_range_is_an_error),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_losses_and_dropout),
        cmocka_unit_test(test_lenet),
        cmocka_unit_test(test_float16),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
