/*
 * pool.c (cpu): nn.max_pool2d, nn.avg_pool2d, the global and adaptive pools
 * on NCHW tensors, and the adjoints nn.max_pool2d_grad and nn.avg_pool2d_grad
 * (floats only), with TVM's semantics (topi pool_impl_nd): padding is
 * (top, left, bottom, right); ceil_mode pads the tail by stride-1 more, so
 * a last window may start in the padding (PyTorch drops such a window; TVM
 * keeps it, and so do we). Max pools pad with the dtype's lowest value;
 * average pools divide by TVM's element counts (below). float32/float64
 * natively, float16 widened to float32, integers to int64 (truncating
 * division). Shapes were checked by the type relation in src/op/conv.c.
 * Planes are split over threads (parallel.h); the common 2x2 stride-2 max
 * pool and its gradient have straight loops without bounds checks (the
 * float32 gradient in SSE), the rest goes through the general window loops.
 */
/* the 2x2 loops are selects; let gcc vectorize them (as clang does at -O2) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=unlimited", "no-trapping-math")
#endif

#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/parallel.h"

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

/* The common LeNet/VGG pool: 2x2 windows at stride 2, no dilation, every
 * window inside the data (no padding in use): straight loops, no checks. */
static bool is_2x2(const pgeom *g) {
    return g->PH == 2 && g->PW == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 &&
           g->pt == 0 && g->pl == 0 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

/* ---- window loops, once per compute type ----
 * max: y[p][oh][ow] = max(lowest, x[p][ih][iw] for taps inside the data),
 *   NaN propagating; avg: the sum of those taps over divisor(). */
#define DEFINE_POOL(T, SUF, ISNAN, DIV)                                                          \
    static void max_##SUF(const pgeom *g, const T *x, T *y, T lowest, int64_t p0, int64_t p1) {  \
        x += p0 * g->H * g->W;                                                                   \
        y += p0 * g->OH * g->OW;                                                                 \
        if (is_2x2(g)) {                                                                         \
            for (int64_t p = p0; p < p1; p++, x += g->H * g->W)                                  \
                for (int64_t oh = 0; oh < g->OH; oh++) {                                         \
                    const T *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;                            \
                    for (int64_t ow = 0; ow < g->OW; ow++) {                                     \
                        T m = lowest, v;                                                         \
                        v = r0[2 * ow], m = (v > m) | ISNAN(v) ? v : m;                           \
                        v = r0[2 * ow + 1], m = (v > m) | ISNAN(v) ? v : m;                      \
                        v = r1[2 * ow], m = (v > m) | ISNAN(v) ? v : m;                          \
                        v = r1[2 * ow + 1], m = (v > m) | ISNAN(v) ? v : m;                      \
                        *y++ = m;                                                                \
                    }                                                                            \
                }                                                                                \
            return;                                                                              \
        }                                                                                        \
        for (int64_t p = p0; p < p1; p++, x += g->H * g->W)                                     \
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
    static void avg_##SUF(const pgeom *g, const T *x, T *y, bool include_pad, int64_t p0,       \
                          int64_t p1) {                                                          \
        x += p0 * g->H * g->W;                                                                   \
        y += p0 * g->OH * g->OW;                                                                 \
        for (int64_t p = p0; p < p1; p++, x += g->H * g->W)                                     \
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

/* One row of 2x2 windows of max_pool2d_grad: each window's dy goes to the
 * first tap holding the max, or to the first NaN; written as selects over
 * restrict pointers so that the loop vectorizes (random data mispredicts
 * branches). d + 0 is what the general path's 0 + d gives (-0 becomes +0). */
#define DEFINE_GRAD2X2(T, SUF)                                                                   \
    static void grad2x2_##SUF(int64_t OW, const T *restrict r0, const T *restrict r1,            \
                              const T *restrict dy, T *restrict d0, T *restrict d1) {            \
        for (int64_t ow = 0; ow < OW; ow++) {                                                    \
            T v0 = r0[2 * ow], v1 = r0[2 * ow + 1];                                              \
            T v2 = r1[2 * ow], v3 = r1[2 * ow + 1], d = dy[ow] + (T)0;                           \
            T ma = v0 >= v1 ? v0 : v1, mb = v2 >= v3 ? v2 : v3;                                  \
            T m = ma >= mb ? ma : mb;                                                            \
            int n0 = isnan(v0) != 0, n1 = isnan(v1) != 0;                                        \
            int n2 = isnan(v2) != 0, n3 = isnan(v3) != 0, nan = n0 | n1 | n2 | n3;               \
            int e0 = nan ? n0 : v0 == m;                                                         \
            int e1 = (nan ? n1 : v1 == m) & !e0;                                                 \
            int e2 = (nan ? n2 : v2 == m) & !(e0 | e1);                                          \
            int e3 = !(e0 | e1 | e2);                                                            \
            d0[2 * ow] = e0 ? d : (T)0;                                                          \
            d0[2 * ow + 1] = e1 ? d : (T)0;                                                      \
            d1[2 * ow] = e2 ? d : (T)0;                                                          \
            d1[2 * ow + 1] = e3 ? d : (T)0;                                                      \
        }                                                                                        \
    }
DEFINE_GRAD2X2(float, f32_scalar)
DEFINE_GRAD2X2(double, f64)

#if defined(__SSE2__)
/* float32 by hand with SSE (x86-64's baseline): gcc leaves the loop above
 * scalar for LeNet's short rows, where it costs ~50 instructions a window.
 * Four windows at a time: deinterleave the even and odd columns, the same
 * selects as above as lane masks, interleave back. */
static void grad2x2_f32(int64_t OW, const float *restrict r0, const float *restrict r1,
                        const float *restrict dy, float *restrict d0, float *restrict d1) {
    int64_t ow = 0;
    const __m128 all = _mm_castsi128_ps(_mm_set1_epi32(-1));
    for (; ow + 4 <= OW; ow += 4) {
        __m128 a0 = _mm_loadu_ps(r0 + 2 * ow), a1 = _mm_loadu_ps(r0 + 2 * ow + 4);
        __m128 b0 = _mm_loadu_ps(r1 + 2 * ow), b1 = _mm_loadu_ps(r1 + 2 * ow + 4);
        __m128 v0 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 v1 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 v2 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 v3 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 d = _mm_add_ps(_mm_loadu_ps(dy + ow), _mm_setzero_ps());
        __m128 m = _mm_max_ps(_mm_max_ps(v0, v1), _mm_max_ps(v2, v3)); /* used without NaNs */
        __m128 n0 = _mm_cmpunord_ps(v0, v0), n1 = _mm_cmpunord_ps(v1, v1);
        __m128 n2 = _mm_cmpunord_ps(v2, v2), n3 = _mm_cmpunord_ps(v3, v3);
        __m128 nan = _mm_or_ps(_mm_or_ps(n0, n1), _mm_or_ps(n2, n3));
#define PICK(n, v) _mm_or_ps(_mm_and_ps(nan, n), _mm_andnot_ps(nan, _mm_cmpeq_ps(v, m)))
        __m128 e0 = PICK(n0, v0);
        __m128 e1 = _mm_andnot_ps(e0, PICK(n1, v1));
        __m128 e01 = _mm_or_ps(e0, e1);
        __m128 e2 = _mm_andnot_ps(e01, PICK(n2, v2));
        __m128 e3 = _mm_andnot_ps(_mm_or_ps(e01, e2), all);
#undef PICK
        __m128 o0 = _mm_and_ps(e0, d), o1 = _mm_and_ps(e1, d);
        __m128 o2 = _mm_and_ps(e2, d), o3 = _mm_and_ps(e3, d);
        _mm_storeu_ps(d0 + 2 * ow, _mm_unpacklo_ps(o0, o1));
        _mm_storeu_ps(d0 + 2 * ow + 4, _mm_unpackhi_ps(o0, o1));
        _mm_storeu_ps(d1 + 2 * ow, _mm_unpacklo_ps(o2, o3));
        _mm_storeu_ps(d1 + 2 * ow + 4, _mm_unpackhi_ps(o2, o3));
    }
    grad2x2_f32_scalar(OW - ow, r0 + 2 * ow, r1 + 2 * ow, dy + ow, d0 + 2 * ow, d1 + 2 * ow);
}
#else
#define grad2x2_f32 grad2x2_f32_scalar
#endif

/* ---- adjoints ----
 * max: dx[argmax of the window] += dy[p][oh][ow], argmax the first tap
 *   inside the data holding the window's max (none when the window lies
 *   wholly in padding); avg: every tap inside the data gets dy / divisor(). */
#define DEFINE_POOL_GRAD(T, SUF, ISNAN, DIV)                                                     \
    static void max_grad_##SUF(const pgeom *g, const T *dy, const T *x, T *dx, int64_t p0,      \
                               int64_t p1) {                                                     \
        x += p0 * g->H * g->W;                                                                   \
        dx += p0 * g->H * g->W;                                                                  \
        dy += p0 * g->OH * g->OW;                                                                \
        if (is_2x2(g)) {                                                                         \
            for (int64_t p = p0; p < p1; p++, x += g->H * g->W, dx += g->H * g->W)               \
                for (int64_t oh = 0; oh < g->OH; oh++) {                                         \
                    const T *r0 = x + 2 * oh * g->W;                                             \
                    T *d0 = dx + 2 * oh * g->W;                                                  \
                    grad2x2_##SUF(g->OW, r0, r0 + g->W, dy, d0, d0 + g->W);                      \
                    dy += g->OW;                                                                 \
                }                                                                                \
            return;                                                                              \
        }                                                                                        \
        for (int64_t p = p0; p < p1; p++, x += g->H * g->W, dx += g->H * g->W)                  \
            for (int64_t oh = 0; oh < g->OH; oh++)                                               \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
                    int64_t arg = -1;                                                            \
                    for (int64_t kh = 0; kh < g->PH; kh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        if (ih < 0 || ih >= g->H) continue;                                      \
                        for (int64_t kw = 0; kw < g->PW; kw++) {                                 \
                            int64_t iw = ow * g->sw - g->pl + kw * g->dw, i = ih * g->W + iw;    \
                            if (iw < 0 || iw >= g->W) continue;                                  \
                            if (arg < 0 || (!ISNAN(x[arg]) && (x[i] > x[arg] || ISNAN(x[i]))))   \
                                arg = i;                                                         \
                        }                                                                        \
                    }                                                                            \
                    T d = *dy++;                                                                 \
                    if (arg >= 0) dx[arg] = dx[arg] + d;                                         \
                }                                                                                \
    }                                                                                            \
    static void avg_grad_##SUF(const pgeom *g, const T *dy, T *dx, bool include_pad, int64_t p0, \
                               int64_t p1) {                                                     \
        dx += p0 * g->H * g->W;                                                                  \
        dy += p0 * g->OH * g->OW;                                                                \
        for (int64_t p = p0; p < p1; p++, dx += g->H * g->W)                                    \
            for (int64_t oh = 0; oh < g->OH; oh++)                                               \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
                    T d = *dy++;                                                                 \
                    int64_t n = divisor(g, include_pad, oh, ow);                                 \
                    for (int64_t kh = 0; kh < g->PH; kh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        if (ih < 0 || ih >= g->H) continue;                                      \
                        for (int64_t kw = 0; kw < g->PW; kw++) {                                 \
                            int64_t iw = ow * g->sw - g->pl + kw * g->dw;                        \
                            if (iw >= 0 && iw < g->W) dx[ih * g->W + iw] += DIV(d, n);           \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
    }

#define NOT_NAN(v) 0
#define DIV_F(s, n) ((s) / (n))
#define DIV_I(s, n) ((n) == 0 ? 0 : (s) / (n))
DEFINE_POOL(float, f32, isnan, DIV_F)
DEFINE_POOL(double, f64, isnan, DIV_F)
DEFINE_POOL(int64_t, i64, NOT_NAN, DIV_I)
DEFINE_POOL_GRAD(float, f32, isnan, DIV_F)
DEFINE_POOL_GRAD(double, f64, isnan, DIV_F)

/* TVM pads max pools with min_value of the data's own dtype. */
static int64_t lowest_int(ry_dtype d) {
    switch (d) {
    case RY_INT8: return INT8_MIN;
    case RY_UINT8: return 0;
    case RY_UINT16: return 0;
    case RY_INT16: return INT16_MIN;
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

/* One pool call, split over planes (each plane independent). */
typedef struct pjob {
    const pgeom *g;
    ry_conv_ctype ct;
    bool is_max, include_pad;
    const void *x, *dy;
    void *y;
    double lowest;
} pjob;

static void pool_chunk(void *ctx, int64_t p0, int64_t p1) {
    const pjob *j = ctx;
    if (j->is_max) {
        if (j->ct == RY_CT_F32) max_f32(j->g, j->x, j->y, (float)j->lowest, p0, p1);
        else if (j->ct == RY_CT_F64) max_f64(j->g, j->x, j->y, j->lowest, p0, p1);
        else max_i64(j->g, j->x, j->y, (int64_t)j->lowest, p0, p1);
    } else {
        if (j->ct == RY_CT_F32) avg_f32(j->g, j->x, j->y, j->include_pad, p0, p1);
        else if (j->ct == RY_CT_F64) avg_f64(j->g, j->x, j->y, j->include_pad, p0, p1);
        else avg_i64(j->g, j->x, j->y, j->include_pad, p0, p1);
    }
}

static void pool_grad_chunk(void *ctx, int64_t p0, int64_t p1) {
    const pjob *j = ctx;
    size_t es = j->ct == RY_CT_F32 ? 4 : 8;
    /* the 2x2 max path writes every element when the windows tile the plane */
    bool tiled = j->is_max && is_2x2(j->g) && 2 * j->g->OH == j->g->H && 2 * j->g->OW == j->g->W;
    if (!tiled)
        memset((char *)j->y + (size_t)(p0 * j->g->H * j->g->W) * es, 0,
               (size_t)((p1 - p0) * j->g->H * j->g->W) * es);
    if (j->is_max) {
        if (j->ct == RY_CT_F32) max_grad_f32(j->g, j->dy, j->x, j->y, p0, p1);
        else max_grad_f64(j->g, j->dy, j->x, j->y, p0, p1);
    } else {
        if (j->ct == RY_CT_F32) avg_grad_f32(j->g, j->dy, j->y, j->include_pad, p0, p1);
        else avg_grad_f64(j->g, j->dy, j->y, j->include_pad, p0, p1);
    }
}

/* planes per chunk so a chunk touches at least ~16K input elements */
static int64_t plane_grain(const pgeom *g) {
    int64_t per = g->H * g->W + g->OH * g->OW;
    return per >= 16384 ? 1 : 16384 / (per + 1) + 1;
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
    /* lowest fits a double exactly for the float dtypes and the int dtypes
     * but int64, whose INT64_MIN (-2^63) is exact in a double as well */
    double lowest = ct == RY_CT_F32 ? (x->dtype == RY_FLOAT16 ? -65504.0 : -FLT_MAX)
                    : ct == RY_CT_F64 ? -DBL_MAX
                                      : (double)lowest_int(x->dtype);
    pjob j = {&g, ct, is_max, p.count_include_pad, b.x, NULL, b.y, lowest};
    ry_parallel_for(g.P, plane_grain(&g), pool_chunk, &j);
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

/* ---- adaptive pools (global_max_pool2d is adaptive_max_pool2d to 1 x 1) ----
 * y[p][oh][ow] = mean / max of x[p][h0..h1)[w0..w1), h0 = floor(oh*H/OH),
 * h1 = ceil((oh+1)*H/OH) (w alike); windows are never empty (H >= 1). */
static int64_t win_start(int64_t o, int64_t n, int64_t on) { return o * n / on; }
static int64_t win_end(int64_t o, int64_t n, int64_t on) { return ((o + 1) * n + on - 1) / on; }

#define DEFINE_ADAPTIVE(T, SUF, ISNAN, DIV)                                                      \
    static void adaptive_##SUF(const pgeom *g, const T *x, T *y, bool is_max, T lowest) {        \
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)                                     \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                             \
                int64_t h0 = win_start(oh, g->H, g->OH), h1 = win_end(oh, g->H, g->OH);          \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                         \
                    int64_t w0 = win_start(ow, g->W, g->OW), w1 = win_end(ow, g->W, g->OW);      \
                    T acc = is_max ? lowest : (T)0;                                              \
                    for (int64_t ih = h0; ih < h1; ih++)                                         \
                        for (int64_t iw = w0; iw < w1; iw++) {                                   \
                            T v = x[ih * g->W + iw];                                             \
                            if (!is_max) acc = acc + v;                                          \
                            else if (v > acc || ISNAN(v)) acc = v;                               \
                        }                                                                        \
                    *y++ = is_max ? acc : DIV(acc, (h1 - h0) * (w1 - w0));                       \
                }                                                                                \
            }                                                                                    \
    }

DEFINE_ADAPTIVE(float, f32, isnan, DIV_F)
DEFINE_ADAPTIVE(double, f64, isnan, DIV_F)
DEFINE_ADAPTIVE(int64_t, i64, NOT_NAN, DIV_I)

static ry_status run_adaptive(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out,
                              bool is_max) {
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    if (y->size == 0) return RY_OK;
    pgeom g = {.P = x->shape[0] * x->shape[1], .H = x->shape[2], .W = x->shape[3],
               .OH = y->shape[2], .OW = y->shape[3]};
    ry_conv_ctype ct = ry_conv_ctype_of(x->dtype);
    pbufs b;
    if (pbufs_load(c, ct, x, y, &b)) return RY_ERR;
    if (ct == RY_CT_F32)
        adaptive_f32(&g, b.x, b.y, is_max, x->dtype == RY_FLOAT16 ? -65504.0f : -FLT_MAX);
    else if (ct == RY_CT_F64) adaptive_f64(&g, b.x, b.y, is_max, -DBL_MAX);
    else adaptive_i64(&g, b.x, b.y, is_max, lowest_int(x->dtype));
    pbufs_finish(&b, y, ct);
    return RY_OK;
}

ry_status ry_cpu_adaptive_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                     ry_tensor *const *out) {
    return run_adaptive(c, in, out, false);
}

ry_status ry_cpu_adaptive_max_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                     ry_tensor *const *out) {
    return run_adaptive(c, in, out, true);
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

/* max_pool2d_grad / avg_pool2d_grad: in = (dy (N, C, OH, OW), x (N, C, H, W)),
 * out = dx (N, C, H, W), accumulated window by window in order. The
 * relation admits float dtypes only (float16 widened to float32). */
static ry_status run_pool_grad(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out,
                               bool is_max) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *dy = in[0], *x = in[1];
    ry_tensor *dx = out[0];
    if (dx->size == 0) return RY_OK;
    pgeom g = pool_geom(&p, x, dy);
    ry_conv_ctype ct = ry_conv_ctype_of(x->dtype);
    bool own_dy;
    void *dyb = ry_conv_load(dy, ct, &own_dy);
    if (!dyb) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    pbufs b;
    if (pbufs_load(c, ct, x, dx, &b)) {
        if (own_dy) ry_free(dyb);
        return RY_ERR;
    }
    pjob j = {&g, ct, is_max, p.count_include_pad, b.x, dyb, b.y, 0};
    ry_parallel_for(g.P, plane_grain(&g), pool_grad_chunk, &j);
    pbufs_finish(&b, dx, ct);
    if (own_dy) ry_free(dyb);
    return RY_OK;
}

ry_status ry_cpu_max_pool2d_grad(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                 ry_tensor *const *out) {
    return run_pool_grad(c, in, out, true);
}

ry_status ry_cpu_avg_pool2d_grad(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                 ry_tensor *const *out) {
    return run_pool_grad(c, in, out, false);
}
