/*
 * pool.c (cpu): nn.max_pool2d, nn.avg_pool2d and nn.global_avg_pool2d on
 * NCHW tensors, with TVM's semantics (topi pool_impl_nd): padding is
 * (top, left, bottom, right); ceil_mode pads the tail by stride-1 more, so
 * a last window may start in the padding (PyTorch drops such a window; TVM
 * keeps it, and so do we). Max pools pad with the dtype's lowest value;
 * average pools divide by TVM's element counts (below). float32/float64
 * natively, float16 widened to float32, integers to int64 (truncating
 * division). Shapes were checked by the type relation in src/op/conv.c.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/conv_kernels.h"

/* Legend: P = N*C planes, each H x W in and OH x OW out; window PH x PW
 * with stride (sh, sw), dilation (dh, dw) and head padding (pt, pl); pb, pr
 * the tail padding as written (without ceil_mode's extra). */
typedef struct pgeom {
    int64_t P, H, W, OH, OW, PH, PW, sh, sw, dh, dw, pt, pl, pb, pr;
} pgeom;

static pgeom pool_geom(const ry_conv2d_params *p, const ry_tensor *x, const ry_tensor *y) {
    pgeom g = {x->shape[0] * x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3],
               p->pool[0], p->pool[1], p->stride[0], p->stride[1], p->dilation[0], p->dilation[1],
               p->pad[0], p->pad[1], p->pad[2], p->pad[3]};
    return g;
}

/* ---- element counts for the average (TVM's formulas, per axis) ----
 * start = o*s - pad_head, last = start + (k-1)*d.
 * count_include_pad: taps up to the written tail padding:
 *   n = (min(last, len + pad_tail - 1) - start) / d + 1
 * otherwise taps inside the data:
 *   first = start + d*max(0, (d-1-start)/d), n = (min(last, len-1) - first) / d + 1
 * Divisions truncate toward zero (C's and TVM's). A window wholly in
 * ceil_mode's extra padding can give n <= 0: TVM then divides the zero sum
 * by that n with count_include_pad (0/0 is NaN for floats), and by
 * max(n_h*n_w, 1) without it; we do the same (0 for integers). */
static int64_t count_incl(int64_t o, int64_t s, int64_t d, int64_t k, int64_t head, int64_t len,
                          int64_t tail) {
    int64_t start = o * s - head, last = start + (k - 1) * d, lim = len + tail - 1;
    return ((last < lim ? last : lim) - start) / d + 1;
}

static int64_t count_excl(int64_t o, int64_t s, int64_t d, int64_t k, int64_t head, int64_t len) {
    int64_t start = o * s - head, last = start + (k - 1) * d;
    int64_t jumps = (d - 1 - start) / d;
    if (jumps < 0) jumps = 0;
    if (last > len - 1) last = len - 1;
    return (last - (start + d * jumps)) / d + 1;
}

static int64_t divisor(const pgeom *g, bool include_pad, int64_t oh, int64_t ow) {
    if (include_pad)
        return count_incl(oh, g->sh, g->dh, g->PH, g->pt, g->H, g->pb) *
               count_incl(ow, g->sw, g->dw, g->PW, g->pl, g->W, g->pr);
    int64_t n = count_excl(oh, g->sh, g->dh, g->PH, g->pt, g->H) *
                count_excl(ow, g->sw, g->dw, g->PW, g->pl, g->W);
    return n > 1 ? n : 1;
}

/* ---- window loops, once per compute type ----
 * max: y[p][oh][ow] = max(lowest, x[p][ih][iw] for taps inside the data),
 *   NaN propagating; avg: the sum of those taps over divisor(). */
#define DEFINE_POOL(T, SUF, ISNAN, DIV)                                                          \
    static void max_##SUF(const pgeom *g, const T *x, T *y, T lowest) {                          \
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)                                     \
            for (int64_t oh = 0; oh < g->OH; oh++)                                               \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
                    T m = lowest;                                                                \
                    for (int64_t kh = 0; kh < g->PH; kh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        if (ih < 0 || ih >= g->H) continue;                                      \
                        for (int64_t kw = 0; kw < g->PW; kw++) {                                 \
                            int64_t iw = ow * g->sw - g->pl + kw * g->dw;                        \
                            if (iw < 0 || iw >= g->W) continue;                                  \
                            T v = x[ih * g->W + iw];                                             \
                            if (v > m || ISNAN(v)) m = v;                                        \
                        }                                                                        \
                    }                                                                            \
                    *y++ = m;                                                                    \
                }                                                                                \
    }                                                                                            \
    static void avg_##SUF(const pgeom *g, const T *x, T *y, bool include_pad) {                  \
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)                                     \
            for (int64_t oh = 0; oh < g->OH; oh++)                                               \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
                    T sum = 0;                                                                   \
                    for (int64_t kh = 0; kh < g->PH; kh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        if (ih < 0 || ih >= g->H) continue;                                      \
                        for (int64_t kw = 0; kw < g->PW; kw++) {                                 \
                            int64_t iw = ow * g->sw - g->pl + kw * g->dw;                        \
                            if (iw >= 0 && iw < g->W) sum = sum + x[ih * g->W + iw];             \
                        }                                                                        \
                    }                                                                            \
                    *y++ = DIV(sum, divisor(g, include_pad, oh, ow));                            \
                }                                                                                \
    }

#define NOT_NAN(v) 0
#define DIV_F(s, n) ((s) / (n))
#define DIV_I(s, n) ((n) == 0 ? 0 : (s) / (n))
DEFINE_POOL(float, f32, isnan, DIV_F)
DEFINE_POOL(double, f64, isnan, DIV_F)
DEFINE_POOL(int64_t, i64, NOT_NAN, DIV_I)

/* TVM pads max pools with min_value of the data's own dtype. */
static int64_t lowest_int(ry_dtype d) {
    switch (d) {
    case RY_INT8: return INT8_MIN;
    case RY_UINT8: return 0;
    case RY_INT32: return INT32_MIN;
    default: return INT64_MIN;
    }
}

typedef struct pbufs {
    void *x, *y;
    bool own_x, own_y;
} pbufs;

static ry_status pbufs_load(ry_kernel_ctx *c, ry_conv_ctype ct, const ry_tensor *x,
                            const ry_tensor *y, pbufs *b) {
    memset(b, 0, sizeof *b);
    b->x = ry_conv_load(x, ct, &b->own_x);
    if (b->x && ry_conv_ctype_of(y->dtype) == ct &&
        (y->dtype == RY_FLOAT32 || y->dtype == RY_FLOAT64 || y->dtype == RY_INT64)) {
        b->y = y->data;
        return RY_OK;
    }
    if (b->x) b->y = ry_malloc((size_t)(y->size ? y->size : 1) * (ct == RY_CT_F32 ? 4 : 8));
    if (b->y) {
        b->own_y = true;
        return RY_OK;
    }
    if (b->own_x) ry_free(b->x);
    return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
}

static void pbufs_finish(pbufs *b, ry_tensor *y, ry_conv_ctype ct) {
    if (b->own_y) {
        ry_conv_store(y, b->y, ct);
        ry_free(b->y);
    }
    if (b->own_x) ry_free(b->x);
}

static ry_status run_pool(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out,
                          bool is_max) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    if (y->size == 0) return RY_OK;
    pgeom g = pool_geom(&p, x, y);
    ry_conv_ctype ct = ry_conv_ctype_of(x->dtype);
    pbufs b;
    if (pbufs_load(c, ct, x, y, &b)) return RY_ERR;
    if (is_max) {
        if (ct == RY_CT_F32) max_f32(&g, b.x, b.y, x->dtype == RY_FLOAT16 ? -65504.0f : -FLT_MAX);
        else if (ct == RY_CT_F64) max_f64(&g, b.x, b.y, -DBL_MAX);
        else max_i64(&g, b.x, b.y, lowest_int(x->dtype));
    } else {
        if (ct == RY_CT_F32) avg_f32(&g, b.x, b.y, p.count_include_pad);
        else if (ct == RY_CT_F64) avg_f64(&g, b.x, b.y, p.count_include_pad);
        else avg_i64(&g, b.x, b.y, p.count_include_pad);
    }
    pbufs_finish(&b, y, ct);
    return RY_OK;
}

ry_status ry_cpu_max_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    return run_pool(c, in, out, true);
}

ry_status ry_cpu_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    return run_pool(c, in, out, false);
}

/* global_avg_pool2d: y[p] = sum(x[p][0..H*W)) / (H*W), summed in order. */
ry_status ry_cpu_global_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                   ry_tensor *const *out) {
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    if (y->size == 0) return RY_OK;
    ry_conv_ctype ct = ry_conv_ctype_of(x->dtype);
    pbufs b;
    if (pbufs_load(c, ct, x, y, &b)) return RY_ERR;
    int64_t P = y->size, hw = x->shape[2] * x->shape[3];
    for (int64_t p = 0; p < P; p++) {
        if (ct == RY_CT_F32) {
            const float *s = (const float *)b.x + p * hw;
            float acc = 0;
            for (int64_t i = 0; i < hw; i++) acc += s[i];
            ((float *)b.y)[p] = acc / (float)hw;
        } else if (ct == RY_CT_F64) {
            const double *s = (const double *)b.x + p * hw;
            double acc = 0;
            for (int64_t i = 0; i < hw; i++) acc += s[i];
            ((double *)b.y)[p] = acc / (double)hw;
        } else {
            const int64_t *s = (const int64_t *)b.x + p * hw;
            uint64_t acc = 0; /* wraps instead of overflowing */
            for (int64_t i = 0; i < hw; i++) acc += (uint64_t)s[i];
            ((int64_t *)b.y)[p] = (int64_t)acc / hw;
        }
    }
    pbufs_finish(&b, y, ct);
    return RY_OK;
}
