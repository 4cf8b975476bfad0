/*
 * conv.c (cpu): nn.conv2d as im2col + one GEMM per (image, group);
 * nn.conv2d_transpose as one GEMM per (image, group) + col2im; and
 * nn.conv2d_backward_weight (conv2d's weight adjoint) as im2col + GEMM
 * accumulating over images. NCHW data, OIHW / IOHW weights. float32 and
 * float64 go through OpenBLAS (cblas_sgemm / cblas_dgemm); float16 is
 * widened to float32 and integers to int64 (a plain loop), then narrowed
 * into the output dtype. Shapes were checked by the type relations
 * (src/op/conv.c). Also holds the widening helpers the pool kernels share.
 */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "backend/cpu/conv_kernels.h"

/* ---- widening and narrowing ---- */

ry_conv_ctype ry_conv_ctype_of(ry_dtype d) {
    if (d == RY_FLOAT64) return RY_CT_F64;
    if (d == RY_FLOAT32 || d == RY_FLOAT16) return RY_CT_F32;
    return RY_CT_I64;
}

static size_t ct_size(ry_conv_ctype ct) { return ct == RY_CT_F32 ? sizeof(float) : 8; }

static bool is_native(ry_dtype d, ry_conv_ctype ct) {
    return (ct == RY_CT_F32 && d == RY_FLOAT32) || (ct == RY_CT_F64 && d == RY_FLOAT64) ||
           (ct == RY_CT_I64 && d == RY_INT64);
}

/* Element i of t as double / int64, exactly for every dtype that fits. */
static double get_f(const ry_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RY_FLOAT32: return ((const float *)t->data)[i];
    case RY_FLOAT64: return ((const double *)t->data)[i];
    case RY_FLOAT16: return ry_f16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ry_tensor_get(t, i);
    }
}

static int64_t get_i(const ry_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RY_INT8: return ((const int8_t *)t->data)[i];
    case RY_UINT8: return ((const uint8_t *)t->data)[i];
    case RY_INT32: return ((const int32_t *)t->data)[i];
    case RY_INT64: return ((const int64_t *)t->data)[i];
    case RY_BOOL: return ((const uint8_t *)t->data)[i] != 0;
    default: return (int64_t)ry_tensor_get(t, i);
    }
}

void *ry_conv_load(const ry_tensor *t, ry_conv_ctype ct, bool *owned) {
    *owned = false;
    if (is_native(t->dtype, ct)) return t->data;
    void *buf = ry_malloc((size_t)(t->size ? t->size : 1) * ct_size(ct));
    if (!buf) return NULL;
    *owned = true;
    for (int64_t i = 0; i < t->size; i++) {
        if (ct == RY_CT_F32) ((float *)buf)[i] = (float)get_f(t, i);
        else if (ct == RY_CT_F64) ((double *)buf)[i] = get_f(t, i);
        else ((int64_t *)buf)[i] = get_i(t, i);
    }
    return buf;
}

/* Integers narrow by wrapping, as TVM's casts do. */
static void put_i(ry_tensor *t, int64_t i, int64_t v) {
    switch (t->dtype) {
    case RY_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case RY_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case RY_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case RY_INT64: ((int64_t *)t->data)[i] = v; break;
    default: ry_tensor_set(t, i, (double)v); break;
    }
}

static void put_f(ry_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case RY_FLOAT32: ((float *)t->data)[i] = (float)v; break;
    case RY_FLOAT64: ((double *)t->data)[i] = v; break;
    case RY_FLOAT16: ((uint16_t *)t->data)[i] = ry_f32_to_f16((float)v); break;
    default: ry_tensor_set(t, i, v); break;
    }
}

void ry_conv_store(ry_tensor *t, const void *buf, ry_conv_ctype ct) {
    if (is_native(t->dtype, ct)) {
        if (buf != t->data) memcpy(t->data, buf, (size_t)t->size * ct_size(ct));
        return;
    }
    for (int64_t i = 0; i < t->size; i++) {
        if (ct == RY_CT_F32) put_f(t, i, ((const float *)buf)[i]);
        else if (ct == RY_CT_F64) put_f(t, i, ((const double *)buf)[i]);
        else put_i(t, i, ((const int64_t *)buf)[i]);
    }
}

/* ---- geometry ----
 * Legend: N batch, C input channels, H W input height/width, O output
 * channels, G groups, KH KW kernel, OH OW output height/width;
 * Cg = C/G and Og = O/G channels per group. */
typedef struct geom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, G;
    int64_t sh, sw, dh, dw, pt, pl;
} geom;

static geom conv_geom(const ry_conv2d_params *p, const ry_tensor *x, const ry_tensor *w,
                      const ry_tensor *y) {
    geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[1], w->shape[2],
              w->shape[3], y->shape[2], y->shape[3], p->groups, p->stride[0], p->stride[1],
              p->dilation[0], p->dilation[1], p->pad[0], p->pad[1]};
    return g;
}

/* ---- im2col / col2im, once per compute type ----
 * im2col: col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][oh*sh - pt + kh*dh][ow*sw - pl + kw*dw],
 *   zero outside the image; x is one group's (Cg, H, W) slice.
 * col2im: the adjoint:
 *   y[o][ih*sh - pt + kh*dh][iw*sw - pl + kw*dw] += col[(o*KH + kh)*KW + kw][ih*W + iw],
 *   in a fixed order, so results are deterministic. */
#define DEFINE_IM2COL(T, SUF, ADD)                                                                  \
    static void im2col_##SUF(const geom *g, int64_t Cg, const T *x, T *col) {                    \
        int64_t ohw = g->OH * g->OW;                                                             \
        for (int64_t c = 0; c < Cg; c++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    T *row = col + ((c * g->KH + kh) * g->KW + kw) * ohw;                        \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        T *dst = row + oh * g->OW;                                               \
                        if (ih < 0 || ih >= g->H) {                                              \
                            memset(dst, 0, sizeof(T) * (size_t)g->OW);                           \
                            continue;                                                            \
                        }                                                                        \
                        const T *src = x + (c * g->H + ih) * g->W;                               \
                        for (int64_t ow = 0; ow < g->OW; ow++) {                                 \
                            int64_t iw = ow * g->sw - g->pl + kw * g->dw;                        \
                            dst[ow] = iw >= 0 && iw < g->W ? src[iw] : (T)0;                     \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
    }                                                                                            \
    static void col2im_##SUF(const geom *g, int64_t Og, const T *col, T *y) {                    \
        int64_t hw = g->H * g->W;                                                                \
        for (int64_t o = 0; o < Og; o++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    const T *row = col + ((o * g->KH + kh) * g->KW + kw) * hw;                   \
                    for (int64_t ih = 0; ih < g->H; ih++) {                                      \
                        int64_t oh = ih * g->sh - g->pt + kh * g->dh;                            \
                        if (oh < 0 || oh >= g->OH) continue;                                     \
                        T *dst = y + (o * g->OH + oh) * g->OW;                                   \
                        const T *src = row + ih * g->W;                                          \
                        for (int64_t iw = 0; iw < g->W; iw++) {                                  \
                            int64_t ow = iw * g->sw - g->pl + kw * g->dw;                        \
                            if (ow >= 0 && ow < g->OW) dst[ow] = ADD(dst[ow], src[iw]);          \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
    }

/* Integer sums wrap (as TVM's int arithmetic does) instead of overflowing. */
#define ADD_F(a, b) ((a) + (b))
#define ADD_I(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
DEFINE_IM2COL(float, f32, ADD_F)
DEFINE_IM2COL(double, f64, ADD_F)
DEFINE_IM2COL(int64_t, i64, ADD_I)

/* C (M x N) = op(A) (M x K) * op(B) (K x N) (+ C when accumulate), row-major.
 * transA: A is stored (K x M); transB: B is stored (N x K). Integers: a
 * plain loop over k in order (wrapping adds). */
static void gemm_i64(bool transA, bool transB, bool acc, int64_t M, int64_t N, int64_t K,
                     const int64_t *A, const int64_t *B, int64_t *Cm) {
    if (!acc) memset(Cm, 0, sizeof(int64_t) * (size_t)(M * N));
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) {
            uint64_t a = (uint64_t)(transA ? A[k * M + i] : A[i * K + k]);
            int64_t *c = Cm + i * N;
            for (int64_t j = 0; j < N; j++) {
                uint64_t b = (uint64_t)(transB ? B[j * K + k] : B[k * N + j]);
                c[j] = (int64_t)((uint64_t)c[j] + a * b);
            }
        }
}

static void gemm(ry_conv_ctype ct, bool transA, bool transB, bool acc, int64_t M, int64_t N,
                 int64_t K, const void *A, const void *B, void *Cm) {
    enum CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
    int lda = (int)(transA ? M : K), ldb = (int)(transB ? K : N);
    if (ct == RY_CT_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0f, A, lda, B, ldb,
                    acc ? 1.0f : 0.0f, Cm, (int)N);
    else if (ct == RY_CT_F64)
        cblas_dgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1.0, A, lda, B, ldb,
                    acc ? 1.0 : 0.0, Cm, (int)N);
    else
        gemm_i64(transA, transB, acc, M, N, K, A, B, Cm);
}

static ry_status too_big(ry_kernel_ctx *c, int64_t a, int64_t b, int64_t k) {
    if (a <= INT_MAX && b <= INT_MAX && k <= INT_MAX && a * b <= INT64_MAX / 8) return RY_OK;
    return ry_error_at(c->err, c->span, "%s: problem too large for one GEMM", c->op->name);
}

/* Widened inputs and output of one call; freed together. */
typedef struct bufs {
    void *x, *w, *y, *col;
    bool own_x, own_w, own_y;
} bufs;

static void bufs_free(bufs *b) {
    if (b->own_x) ry_free(b->x);
    if (b->own_w) ry_free(b->w);
    if (b->own_y) ry_free(b->y);
    ry_free(b->col);
}

static ry_status bufs_load(ry_kernel_ctx *c, ry_conv_ctype ct, const ry_tensor *x,
                           const ry_tensor *w, ry_tensor *y, int64_t col_elems, bufs *b) {
    memset(b, 0, sizeof *b);
    b->x = ry_conv_load(x, ct, &b->own_x);
    b->w = b->x ? ry_conv_load(w, ct, &b->own_w) : NULL;
    if (!b->w) {
        /* nothing more to try */
    } else if (is_native(y->dtype, ct)) {
        b->y = y->data;
    } else {
        b->y = ry_malloc((size_t)(y->size ? y->size : 1) * ct_size(ct));
        b->own_y = b->y != NULL;
    }
    b->col = b->y ? ry_malloc((size_t)(col_elems ? col_elems : 1) * ct_size(ct)) : NULL;
    if (b->col) return RY_OK;
    bufs_free(b);
    return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
}

/* nn.conv2d: for each image n and group g,
 *   y[n, g*Og:(g+1)*Og] (Og x OH*OW) =
 *     W[g*Og:(g+1)*Og] (Og x Cg*KH*KW) * im2col(x[n, g*Cg:(g+1)*Cg]). */
ry_status ry_cpu_conv2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *x = in[0], *w = in[1];
    ry_tensor *y = out[0];
    geom g = conv_geom(&p, x, w, y);
    ry_conv_ctype ct = ry_conv_ctype_of(y->dtype);
    int64_t Cg = g.C / g.G, Og = g.O / g.G, K = Cg * g.KH * g.KW, ohw = g.OH * g.OW;
    if (too_big(c, K, ohw, Og)) return RY_ERR;
    if (y->size == 0) return RY_OK;
    if (K == 0) { /* no input channels: an empty sum */
        memset(y->data, 0, ry_tensor_nbytes(y));
        return RY_OK;
    }
    bufs b;
    if (bufs_load(c, ct, x, w, y, K * ohw, &b)) return RY_ERR;
    size_t es = ct_size(ct);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            const char *xs = (const char *)b.x + (size_t)((n * g.C + gi * Cg) * g.H * g.W) * es;
            const char *ws = (const char *)b.w + (size_t)(gi * Og * K) * es;
            char *ys = (char *)b.y + (size_t)((n * g.O + gi * Og) * ohw) * es;
            if (ct == RY_CT_F32) im2col_f32(&g, Cg, (const float *)xs, b.col);
            else if (ct == RY_CT_F64) im2col_f64(&g, Cg, (const double *)xs, b.col);
            else im2col_i64(&g, Cg, (const int64_t *)xs, b.col);
            gemm(ct, false, false, false, Og, ohw, K, ws, b.col, ys);
        }
    if (b.own_y) ry_conv_store(y, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}

/* nn.conv2d_transpose: for each image n and group g,
 *   col (Og*KH*KW x H*W) =
 *     W[g*Cg:(g+1)*Cg]^T (stored Cg x Og*KH*KW) * x[n, g*Cg:(g+1)*Cg] (Cg x H*W),
 *   y[n, g*Og:(g+1)*Og] = col2im(col) (zero where nothing lands; output_padding rows included). */
ry_status ry_cpu_conv2d_transpose(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                  ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *x = in[0], *w = in[1];
    ry_tensor *y = out[0];
    geom g = conv_geom(&p, x, w, y);
    ry_conv_ctype ct = ry_conv_ctype_of(y->dtype);
    int64_t Cg = g.C / g.G, Og = g.O / g.G, M = Og * g.KH * g.KW, hw = g.H * g.W;
    if (too_big(c, M, hw, Cg)) return RY_ERR;
    if (y->size == 0) return RY_OK;
    if (Cg == 0 || hw == 0) { /* nothing lands anywhere */
        memset(y->data, 0, ry_tensor_nbytes(y));
        return RY_OK;
    }
    bufs b;
    if (bufs_load(c, ct, x, w, y, M * hw, &b)) return RY_ERR;
    size_t es = ct_size(ct);
    memset(b.y, 0, (size_t)y->size * es);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            const char *xs = (const char *)b.x + (size_t)((n * g.C + gi * Cg) * hw) * es;
            const char *ws = (const char *)b.w + (size_t)(gi * Cg * M) * es;
            char *ys = (char *)b.y + (size_t)((n * g.O + gi * Og) * g.OH * g.OW) * es;
            gemm(ct, true, false, false, M, hw, Cg, ws, xs, b.col);
            if (ct == RY_CT_F32) col2im_f32(&g, Og, b.col, (float *)ys);
            else if (ct == RY_CT_F64) col2im_f64(&g, Og, b.col, (double *)ys);
            else col2im_i64(&g, Og, b.col, (int64_t *)ys);
        }
    if (b.own_y) ry_conv_store(y, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}

/* nn.conv2d_backward_weight: in = (dy (N, O, OH, OW), x (N, C, H, W)); for each
 * group g, summed over images n in order,
 *   dw[g*Og:(g+1)*Og] (Og x Cg*KH*KW) += dy[n, g*Og:(g+1)*Og] (Og x OH*OW) * im2col(x[n, g])^T. */
ry_status ry_cpu_conv2d_backward_weight(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                        ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *dy = in[0], *x = in[1];
    ry_tensor *dw = out[0];
    geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], dy->shape[1], dw->shape[2],
              dw->shape[3], dy->shape[2], dy->shape[3], p.groups, p.stride[0], p.stride[1],
              p.dilation[0], p.dilation[1], p.pad[0], p.pad[1]};
    ry_conv_ctype ct = ry_conv_ctype_of(dw->dtype);
    int64_t Cg = g.C / g.G, Og = g.O / g.G, K = Cg * g.KH * g.KW, ohw = g.OH * g.OW;
    if (too_big(c, K, ohw, Og)) return RY_ERR;
    if (dw->size == 0) return RY_OK;
    if (ohw == 0 || g.N == 0) { /* an empty sum */
        memset(dw->data, 0, ry_tensor_nbytes(dw));
        return RY_OK;
    }
    bufs b; /* b.x holds dy and b.w holds x */
    if (bufs_load(c, ct, dy, x, dw, K * ohw, &b)) return RY_ERR;
    size_t es = ct_size(ct);
    memset(b.y, 0, (size_t)dw->size * es);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gi = 0; gi < g.G; gi++) {
            const char *xs = (const char *)b.w + (size_t)((n * g.C + gi * Cg) * g.H * g.W) * es;
            const char *dys = (const char *)b.x + (size_t)((n * g.O + gi * Og) * ohw) * es;
            char *dws = (char *)b.y + (size_t)(gi * Og * K) * es;
            if (ct == RY_CT_F32) im2col_f32(&g, Cg, (const float *)xs, b.col);
            else if (ct == RY_CT_F64) im2col_f64(&g, Cg, (const double *)xs, b.col);
            else im2col_i64(&g, Cg, (const int64_t *)xs, b.col);
            gemm(ct, false, true, true, Og, K, ohw, dys, b.col, dws);
        }
    if (b.own_y) ry_conv_store(dw, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}
