/*
 * dk_conv.c (device): nn.conv2d, its data and weight gradients
 * (nn.conv2d_transpose, nn.conv2d_backward_weight), the pools and their
 * gradients, from the generated kernels of kernel_gen_conv.c. Attributes
 * are read as the CPU's kernels read them (src/op/conv_attrs.h); shapes
 * were checked by the type relations. Convolutions and pools of floats
 * and integers (float32 convolutions summed in double where the device
 * has it; integers in 64 bits, as the CPU does); the pools' gradients of
 * floats; float16 widened to float32 (dk_widen.c), as the CPU widens it.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include "backend/device/dk_ops.h"
#include "op/conv_attrs.h"

static ry_status float_only(const ry_dk_device *d, ry_kernel_ctx *c, ry_dtype dt) {
    if (dt == RY_FLOAT32 || dt == RY_FLOAT64) return RY_OK;
    return ry_dk_no_kernel(d, c, dt);
}

/* ---- convolutions ---- */

/* kind's kernel: y from a and b (see kernel_gen_nn.h), geometry g of
 * conv_kernels.h's legend, N the batch; through GEMMs (dk_conv_gemm.c)
 * where that pays, else the direct kernel */
static ry_status conv(ry_kernel_ctx *c, ry_gen_conv kind, ry_tensor *y, const ry_tensor *a,
                      const ry_tensor *b, const int64_t *g, int64_t N) {
    DK_DEVICE(2, ((ry_tensor *const[]){(ry_tensor *)a, (ry_tensor *)b}), 1, &y);
    const char *T = ry_dk_type(d, y->dtype), *X = ry_dk_type(d, a->dtype);
    if (!T || !X || y->dtype == RY_BOOL || a->dtype == RY_BOOL)
        return ry_dk_no_kernel(d, c, T ? a->dtype : y->dtype);
    if (a->dtype != b->dtype)
        return ry_error_at(c->err, c->span, "%s: operands of %s and %s on %s (one dtype expected)",
                           c->op->name, ry_dtype_name(a->dtype), ry_dtype_name(b->dtype), d->dialect->name);
    if (y->size == 0) return RY_OK;
    if ((y->dtype == RY_FLOAT32 || y->dtype == RY_FLOAT64) && y->dtype == a->dtype &&
        ry_dk_conv_gemm_pays(kind, g, N))
        return ry_dk_conv_gemm(d, c, kind, y, a, b, g, N);
    /* integers sum in 64 bits and narrow by wrapping, as the CPU's; the
     * operands are read in the result's compute type (out_dtype) */
    ry_gen_types t = {T, y->dtype == RY_FLOAT32 ? ry_dk_acc_type(d, RY_FLOAT32)
                         : ry_dtype_is_float(y->dtype) ? T : d->dialect->i64, X};
    ry_karg args[24];
    int n = 0;
    args[n++] = KA_L(y->size);
    args[n++] = KA_B(y);
    args[n++] = KA_L(ry_dk_off(y));
    args[n++] = KA_B(a);
    args[n++] = KA_L(ry_dk_off(a));
    args[n++] = KA_B(b);
    args[n++] = KA_L(ry_dk_off(b));
    if (kind == RY_GEN_CONV_DW) args[n++] = KA_L(N);
    for (int i = 0; i < 16; i++) args[n++] = KA_L(g[i]);
    return ry_dk_gen_run(d, c, ry_gen_conv2d(d->dialect, kind, &t), y->dtype, (size_t)y->size, n, args);
}

/* C H W O OH OW KH KW Cg Og sh sw dh dw pt pl of input shape xs, output
 * shape ys, kernel extents kh kw */
static void geom(const ry_conv2d_params *p, const int64_t *xs, const int64_t *ys, int64_t kh,
                 int64_t kw, int64_t *g) {
    int64_t G = p->groups;
    int64_t v[16] = {xs[1], xs[2], xs[3], ys[1], ys[2], ys[3], kh, kw, xs[1] / G, ys[1] / G,
                     p->stride[0], p->stride[1], p->dilation[0], p->dilation[1], p->pad[0], p->pad[1]};
    for (int i = 0; i < 16; i++) g[i] = v[i];
}

static DK_KERNEL(conv2d_wide) {
    ry_conv2d_params p;
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    int64_t g[16];
    geom(&p, in[0]->shape, out[0]->shape, in[1]->shape[2], in[1]->shape[3], g);
    return conv(c, RY_GEN_CONV_FWD, out[0], in[0], in[1], g, in[0]->shape[0]);
}

/* in = (dy (N, C, H, W), w (C, O/G, KH, KW)), out (N, O, OH, OW) */
static DK_KERNEL(conv2d_transpose_wide) {
    ry_conv2d_params p;
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    int64_t g[16];
    geom(&p, in[0]->shape, out[0]->shape, in[1]->shape[2], in[1]->shape[3], g);
    return conv(c, RY_GEN_CONV_DX, out[0], in[0], in[1], g, in[0]->shape[0]);
}

/* in = (dy (N, O, OH, OW), x (N, C, H, W)), out = dw (O, C/G, KH, KW) */
static DK_KERNEL(conv2d_backward_weight_wide) {
    ry_conv2d_params p;
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    int64_t g[16];
    geom(&p, in[1]->shape, in[0]->shape, out[0]->shape[2], out[0]->shape[3], g);
    return conv(c, RY_GEN_CONV_DW, out[0], in[0], in[1], g, in[1]->shape[0]);
}

/* ---- pools ---- */

/* TVM pads max pools with the lowest value of the data's dtype */
static double lowest(ry_dtype dt) {
    switch (dt) {
    case RY_FLOAT32: return -FLT_MAX;
    case RY_FLOAT64: return -DBL_MAX;
    case RY_INT8: return INT8_MIN;
    case RY_UINT8: return 0;
    case RY_INT32: return INT32_MIN;
    default: return (double)INT64_MIN;
    }
}

/* the compute type: floats their own, integers 64-bit */
static ry_gen_types pool_types(const ry_dk_device *d, ry_dtype dt) {
    const char *T = ry_dk_type(d, dt);
    return (ry_gen_types){T, ry_dtype_is_float(dt) ? T : d->dialect->i64, NULL};
}

static ry_karg compute_arg(ry_dtype dt, double v) {
    if (dt == RY_FLOAT32) return KA_F(v);
    if (dt == RY_FLOAT64) return KA_D(v);
    return KA_L((int64_t)v);
}

/* kind over x into y (forward), or into dx from dy and x (gradients);
 * max pools pad with low (NAN: the dtype's lowest value) */
static ry_status pool_low(ry_kernel_ctx *c, ry_gen_pool kind, int nin, ry_tensor *const *in,
                          ry_tensor *const *out, double low) {
    if (nin < 1 || nin > 2) return ry_error_at(c->err, c->span, "%s: expected its inputs", c->op->name);
    DK_DEVICE(nin, in, 1, out);
    bool grad = kind == RY_GEN_POOL_MAX_GRAD || kind == RY_GEN_POOL_AVG_GRAD;
    const ry_tensor *x = grad ? in[1] : in[0], *dy = grad ? in[0] : NULL;
    ry_tensor *y = out[0];
    const ry_tensor *small = grad ? dy : y; /* the pooled side */
    bool adaptive = kind == RY_GEN_POOL_ADAPTIVE_MAX || kind == RY_GEN_POOL_ADAPTIVE_AVG;
    ry_dtype dt = x->dtype;
    if (grad && float_only(d, c, dt)) return RY_ERR;
    if (!ry_dk_type(d, dt) || dt == RY_BOOL) return ry_dk_no_kernel(d, c, dt);
    if (y->size == 0) return RY_OK;
    ry_gen_types t = pool_types(d, dt);
    ry_karg a[24];
    int n = 0;
    a[n++] = KA_L(y->size);
    a[n++] = KA_B(y);
    a[n++] = KA_L(ry_dk_off(y));
    if (grad) {
        a[n++] = KA_B(dy);
        a[n++] = KA_L(ry_dk_off(dy));
    }
    a[n++] = KA_B(x);
    a[n++] = KA_L(ry_dk_off(x));
    ry_conv2d_params p = {0};
    if (!adaptive && ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    if (kind == RY_GEN_POOL_MAX || adaptive) a[n++] = compute_arg(dt, isnan(low) ? lowest(dt) : low);
    else a[n++] = KA_L(p.count_include_pad);
    int64_t H = x->shape[2], W = x->shape[3], OH = small->shape[2], OW = small->shape[3];
    a[n++] = KA_L(H);
    a[n++] = KA_L(W);
    a[n++] = KA_L(OH);
    a[n++] = KA_L(OW);
    if (!adaptive) {
        int64_t v[10] = {p.pool[0], p.pool[1], p.stride[0], p.stride[1], p.dilation[0],
                         p.dilation[1], p.pad[0], p.pad[1], p.pad[2], p.pad[3]};
        for (int i = 0; i < 10; i++) a[n++] = KA_L(v[i]);
    }
    char *src = ry_gen_pool2d(d->dialect, kind, !ry_dtype_is_float(dt), &t);
    return ry_dk_gen_run(d, c, src, dt, (size_t)y->size, n, a);
}

static ry_status pool(ry_kernel_ctx *c, ry_gen_pool kind, int nin, ry_tensor *const *in,
                      ry_tensor *const *out) {
    return pool_low(c, kind, nin, in, out, NAN);
}

/* float16 max pools pad with float16's lowest value (-65504), as the
 * CPU's, not with that of the float32 they are computed in */
static DK_KERNEL(max_pool2d_f16) { return pool_low(c, RY_GEN_POOL_MAX, 1, in, out, -65504.0); }
static DK_KERNEL(adaptive_max_pool2d_f16) {
    return pool_low(c, RY_GEN_POOL_ADAPTIVE_MAX, 1, in, out, -65504.0);
}

DK_KERNEL(ry_dk_max_pool2d) {
    if (in[0]->dtype == RY_FLOAT16) return ry_dk_via(max_pool2d_f16, RY_FLOAT32, c, 1, in, nout, out);
    return pool(c, RY_GEN_POOL_MAX, 1, in, out);
}
static DK_KERNEL(avg_pool2d_wide) { return pool(c, RY_GEN_POOL_AVG, 1, in, out); }
static DK_KERNEL(max_pool2d_grad_wide) { return pool(c, RY_GEN_POOL_MAX_GRAD, nin, in, out); }
static DK_KERNEL(avg_pool2d_grad_wide) { return pool(c, RY_GEN_POOL_AVG_GRAD, nin, in, out); }
/* nn.adaptive_max_pool2d and nn.global_max_pool2d (to 1 x 1) */
DK_KERNEL(ry_dk_adaptive_max_pool2d) {
    if (in[0]->dtype == RY_FLOAT16)
        return ry_dk_via(adaptive_max_pool2d_f16, RY_FLOAT32, c, 1, in, nout, out);
    return pool(c, RY_GEN_POOL_ADAPTIVE_MAX, 1, in, out);
}
/* nn.adaptive_avg_pool2d and nn.global_avg_pool2d: the CPU's global pool
 * sums the plane in order and divides by H*W, as the 1 x 1 adaptive one */
static DK_KERNEL(adaptive_avg_pool2d_wide) { return pool(c, RY_GEN_POOL_ADAPTIVE_AVG, 1, in, out); }

/* float16: widened to float32 around the kernels above (dk_widen.c) */
DK_WIDENING(ry_dk_conv2d, conv2d_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_conv2d_transpose, conv2d_transpose_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_conv2d_backward_weight, conv2d_backward_weight_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_max_pool2d_grad, max_pool2d_grad_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_avg_pool2d_grad, avg_pool2d_grad_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_avg_pool2d, avg_pool2d_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_adaptive_avg_pool2d, adaptive_avg_pool2d_wide, RY_FLOAT32)
