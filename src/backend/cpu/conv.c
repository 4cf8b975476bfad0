/*
 * conv.c (cpu): nn.conv2d as im2col + GEMM; nn.conv2d_transpose (conv2d's
 * data gradient) as GEMM + col2im; nn.conv2d_backward_weight (its weight
 * gradient) as im2col + GEMM accumulating. Images go in blocks whose columns
 * sit side by side, so one GEMM per (block, group) covers a whole batch of
 * LeNet-sized images (conv2d's forward, where one image's GEMM is small,
 * instead runs one GEMM per image straight into NCHW); im2col, col2im and
 * the layout copies run in parallel over images (parallel.h), the GEMMs
 * through ry_cpu_gemm (blas.h). NCHW data,
 * OIHW / IOHW weights. float32 and float64 go through OpenBLAS; float16 is
 * widened to float32 and integers to int64 (a plain loop), then narrowed
 * into the output dtype. Shapes were checked by the type relations
 * (src/op/conv.c). Also holds the widening helpers the pool kernels share.
 */
/* the copy and add loops are what vectorization is for (clang does at -O2);
 * and gcc must not turn the short copy loops back into memmove calls */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", \
                     "no-tree-loop-distribute-patterns")
#endif

#include <limits.h>
#include <string.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/parallel.h"

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
 * Images are processed in blocks of nb; a block's columns sit side by side,
 * so one GEMM covers the block: col is (rows x L), L = nb * (pixels per
 * image), image j's columns at [j*pix, (j+1)*pix), row stride ld = L.
 * im2col: col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][oh*sh - pt + kh*dh][ow*sw - pl + kw*dw],
 *   zero outside the image; x is one group's (Cg, H, W) slice.
 * col2im: the adjoint:
 *   y[o][ih*sh - pt + kh*dh][iw*sw - pl + kw*dw] += col[(o*KH + kh)*KW + kw][ih*W + iw],
 *   in a fixed order (o, kh, kw, ih, iw), so results are deterministic.
 * The range of ow (iw) whose tap lands inside the image is computed once per
 * (kh, kw), so the interior loop has no bounds checks and, at stride 1, is
 * a plain copy (im2col) or a vectorizable add (col2im). */

/* ceil(a / b) for b > 0 and any a */
static int64_t cdiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* [lo, hi) of o in [0, n) with 0 <= o*s - pad + k*d < len */
static void tap_range(int64_t pad, int64_t k, int64_t d, int64_t s, int64_t len, int64_t n,
                      int64_t *lo, int64_t *hi) {
    /* stride 1 (LeNet's every conv) needs no division: this runs once per
     * (channel, kh, kw) per image, and two idivs there showed in profiles */
    int64_t a = s == 1 ? pad - k * d : cdiv(pad - k * d, s);
    int64_t b = s == 1 ? len + pad - k * d : cdiv(len + pad - k * d, s);
    *lo = a < 0 ? 0 : a > n ? n : a;
    *hi = b > n ? n : b < *lo ? *lo : b;
}

/* Rows are short (LeNet's conv2: 10 elements), so a memcpy call costs more
 * than the copy; restrict spares the vectorized loop its aliasing checks. */
#define DEFINE_COPY(T, SUF)                                                                      \
    static inline void copy_##SUF(T *restrict d, const T *restrict s, int64_t n) {               \
        for (int64_t i = 0; i < n; i++) d[i] = s[i];                                             \
    }                                                                                            \
    static inline void add_##SUF(T *restrict d, const T *restrict s, int64_t n) {                \
        for (int64_t i = 0; i < n; i++) d[i] = ADD_##SUF(d[i], s[i]);                            \
    }
#define ADD_f32(a, b) ((a) + (b))
#define ADD_f64(a, b) ((a) + (b))
#define ADD_i64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
DEFINE_COPY(float, f32)
DEFINE_COPY(double, f64)
DEFINE_COPY(int64_t, i64)

/* im2col's row copy. Even the vectorized loop costs its setup and a scalar
 * tail per 10-float row, which made the rows' overhead, not their bytes,
 * the cost of LeNet's im2col; fixed-size chunks (one or two vector moves
 * each) with the last one overlapping the previous end cover any n >= 4
 * without a tail. Rewriting a few elements with the same value is
 * harmless: d and s never overlap. */
static inline void wcopy_f32(float *restrict d, const float *restrict s, int64_t n) {
    if (n >= 8) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) memcpy(d + i, s + i, 8 * sizeof(float));
        if (i < n) memcpy(d + n - 8, s + n - 8, 8 * sizeof(float));
    } else if (n >= 4) {
        memcpy(d, s, 4 * sizeof(float));
        memcpy(d + n - 4, s + n - 4, 4 * sizeof(float));
    } else {
        copy_f32(d, s, n);
    }
}

/* col2im's row add, by the same reasoning: whole 4-float chunks (one
 * vector add each, no loop setup), then a scalar tail of at most 3. */
static inline void wadd_f32(float *restrict d, const float *restrict s, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float a[4], b[4];
        memcpy(a, d + i, sizeof a);
        memcpy(b, s + i, sizeof b);
        for (int k = 0; k < 4; k++) a[k] += b[k];
        memcpy(d + i, a, sizeof a);
    }
    add_f32(d + i, s + i, n - i);
}
#define wadd_f64 add_f64
#define wadd_i64 add_i64
#define wcopy_f64 copy_f64
#define wcopy_i64 copy_i64

#define DEFINE_IM2COL(T, SUF, ADD)                                                               \
    static void im2col_##SUF(const geom *g, int64_t Cg, const T *x, T *col, int64_t ld) {        \
        for (int64_t c = 0; c < Cg; c++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                         \
                    int64_t lo, hi;                                                              \
                    tap_range(g->pl, kw, g->dw, g->sw, g->W, g->OW, &lo, &hi);                   \
                    int64_t off = lo * g->sw - g->pl + kw * g->dw;                               \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        T *dst = row + oh * g->OW;                                               \
                        if (ih < 0 || ih >= g->H) {                                              \
                            memset(dst, 0, sizeof(T) * (size_t)g->OW);                           \
                            continue;                                                            \
                        }                                                                        \
                        const T *src = x + (c * g->H + ih) * g->W + off;                         \
                        for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;                         \
                        if (g->sw == 1) {                                                        \
                            wcopy_##SUF(dst + lo, src, hi - lo);                                 \
                        } else {                                                                 \
                            for (int64_t i = 0; i < hi - lo; i++) dst[lo + i] = src[i * g->sw];  \
                        }                                                                        \
                        for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0;                     \
                    }                                                                            \
                }                                                                                \
    }                                                                                            \
    static void col2im_##SUF(const geom *g, int64_t Og, const T *col, int64_t ld, T *y) {        \
        for (int64_t o = 0; o < Og; o++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    const T *row = col + ((o * g->KH + kh) * g->KW + kw) * ld;                   \
                    int64_t lo, hi;                                                              \
                    tap_range(g->pl, kw, g->dw, g->sw, g->OW, g->W, &lo, &hi);                   \
                    int64_t off = lo * g->sw - g->pl + kw * g->dw;                               \
                    for (int64_t ih = 0; ih < g->H; ih++) {                                      \
                        int64_t oh = ih * g->sh - g->pt + kh * g->dh;                            \
                        if (oh < 0 || oh >= g->OH) continue;                                     \
                        T *dst = y + (o * g->OH + oh) * g->OW + off;                             \
                        const T *src = row + ih * g->W + lo;                                     \
                        if (g->sw == 1) {                                                        \
                            wadd_##SUF(dst, src, hi - lo);                                       \
                        } else {                                                                 \
                            for (int64_t i = 0; i < hi - lo; i++)                                \
                                dst[i * g->sw] = ADD(dst[i * g->sw], src[i]);                    \
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

/* ---- per-block work, split over images with ry_parallel_for ----
 * A job covers images [n0, n0 + nb) of group gi. */
typedef enum { J_IM2COL, J_COL2IM, J_GATHER, J_SCATTER } job_kind;

typedef struct job {
    job_kind kind;
    const geom *g;
    ry_conv_ctype ct;
    size_t es;
    int64_t n0, gi, ch;      /* ch: channels per group of the tensor walked */
    int64_t chans, pix;      /* the NCHW tensor's channel count and pixels per plane */
    int64_t cpix, ld;        /* the block matrix: pixels per image, row length nb * cpix */
    const char *src;
    char *dst;
} job;

/* J_IM2COL: src x (N, C, H, W) -> dst col; J_COL2IM: src col -> dst y
 * (N, O, OH, OW), zeroed first; J_GATHER: src (N, chans, pix) -> dst
 * (ch x ld), channels gi*ch.. of each image side by side; J_SCATTER: the
 * inverse of gather. */
static void run_job(void *ctx, int64_t lo, int64_t hi) {
    const job *b = ctx;
    const geom *g = b->g;
    size_t es = b->es;
    for (int64_t j = lo; j < hi; j++) {
        int64_t n = b->n0 + j;
        size_t plane = (size_t)((n * b->chans + b->gi * b->ch) * b->pix) * es;
        size_t colj = (size_t)(j * b->cpix) * es;
        if (b->kind == J_IM2COL) {
            const void *x = b->src + plane;
            void *col = b->dst + colj;
            if (b->ct == RY_CT_F32) im2col_f32(g, b->ch, x, col, b->ld);
            else if (b->ct == RY_CT_F64) im2col_f64(g, b->ch, x, col, b->ld);
            else im2col_i64(g, b->ch, x, col, b->ld);
        } else if (b->kind == J_COL2IM) {
            void *y = b->dst + plane;
            const void *col = b->src + colj;
            memset(y, 0, (size_t)(b->ch * b->pix) * es);
            if (b->ct == RY_CT_F32) col2im_f32(g, b->ch, col, b->ld, y);
            else if (b->ct == RY_CT_F64) col2im_f64(g, b->ch, col, b->ld, y);
            else col2im_i64(g, b->ch, col, b->ld, y);
        } else {
            for (int64_t c = 0; c < b->ch; c++) {
                size_t t = plane + (size_t)(c * b->pix) * es, m = colj + (size_t)(c * b->ld) * es;
                size_t len = (size_t)b->pix * es;
                if (b->kind == J_GATHER) memcpy(b->dst + m, b->src + t, len);
                else memcpy(b->dst + t, b->src + m, len);
            }
        }
    }
}

/* Runs one job over nb images, split when each image's share is big enough. */
static void run_split(job *b, int64_t nb, int64_t work_per_image) {
    int64_t grain = work_per_image >= 16384 ? 1 : 16384 / (work_per_image + 1) + 1;
    ry_parallel_for(nb, grain, run_job, b);
}

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
    if (ct == RY_CT_I64) {
        gemm_i64(transA, transB, acc, M, N, K, A, B, Cm);
        return;
    }
    ry_cpu_gemm(ct == RY_CT_F64, transA, transB, M, N, K, 1.0, A, transA ? M : K, B,
                transB ? K : N, acc ? 1.0 : 0.0, Cm, N);
}

static ry_status too_big(ry_kernel_ctx *c, int64_t a, int64_t b, int64_t k) {
    if (a <= INT_MAX && b <= INT_MAX && k <= INT_MAX && a * b <= INT64_MAX / 8) return RY_OK;
    return ry_error_at(c->err, c->span, "%s: problem too large for one GEMM", c->op->name);
}

/* Widened inputs and output of one call, and the block buffers; freed
 * together. */
typedef struct bufs {
    void *x, *w, *y, *col, *stage;
    bool own_x, own_w, own_y;
} bufs;

static void bufs_free(bufs *b) {
    if (b->own_x) ry_free(b->x);
    if (b->own_w) ry_free(b->w);
    if (b->own_y) ry_free(b->y);
    ry_free(b->col);
    ry_free(b->stage);
}

static ry_status bufs_load(ry_kernel_ctx *c, ry_conv_ctype ct, const ry_tensor *x,
                           const ry_tensor *w, ry_tensor *y, int64_t col_elems,
                           int64_t stage_elems, bufs *b) {
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
    b->stage = b->col && stage_elems ? ry_malloc((size_t)stage_elems * ct_size(ct)) : NULL;
    if (b->col && (b->stage || !stage_elems)) return RY_OK;
    bufs_free(b);
    return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
}

/* Images per block: the largest block matrix (rows x nb*pix, rows the
 * tallest of the block's matrices) within 64K elements (256 KB in float32)
 * per thread, at least 1. The matrices are written once and read once by the GEMM's
 * packing: kept within L2 that costs a third of what a whole batch's
 * matrix costs from memory (measured on LeNet's shapes). */
static int64_t block_images(int64_t N, int64_t rows, int64_t pix, bool per_thread) {
    /* with threads, 64K elements each: every thread's share stays in its
     * L2, and a parallel region has enough work to pay for its wake-up.
     * Not where the block is the GEMM's reduction dimension (the weight
     * gradient): the sums' order, so their rounding, would then depend on
     * the thread count. */
    int64_t threads = !per_thread || ry_parallel_serial() ? 1 : ry_get_num_threads();
    int64_t per = (rows > 0 ? rows : 1) * (pix > 0 ? pix : 1);
    int64_t nb = ((int64_t)1 << 16) * threads / per;
    if (nb > INT_MAX / (pix > 0 ? pix : 1)) nb = INT_MAX / (pix > 0 ? pix : 1);
    return nb < 1 ? 1 : nb > N ? N : nb;
}

static job make_job(job_kind k, const geom *g, ry_conv_ctype ct, int64_t n0, int64_t nb,
                    int64_t gi, int64_t ch, int64_t chans, int64_t pix, int64_t cpix,
                    const void *src, void *dst) {
    job b = {k, g, ct, ct_size(ct), n0, gi, ch, chans, pix, cpix, nb * cpix, src, dst};
    return b;
}

/* One image's GEMM of conv2d, read from the block's col and written
 * straight into y's NCHW planes: where the per-image GEMM is small, this
 * saves the staging matrix and its scatter copy (a tenth of LeNet's conv2
 * forward). Images go in parallel; each is one whole-K OpenBLAS call
 * whatever the thread count, so the bits do not depend on it. */
typedef struct img_gemm {
    bool f64;
    int64_t Og, ohw, K, ld, n0, rowstride; /* rowstride: one image's y elements */
    size_t es;
    const char *w, *col;
    char *y;
} img_gemm;

static void run_img_gemm(void *ctx, int64_t lo, int64_t hi) {
    const img_gemm *m = ctx;
    for (int64_t j = lo; j < hi; j++)
        ry_cpu_gemm(m->f64, false, false, m->Og, m->ohw, m->K, 1.0, m->w, m->K,
                    m->col + (size_t)(j * m->ohw) * m->es, m->ld, 0.0,
                    m->y + (size_t)((m->n0 + j) * m->rowstride) * m->es, m->ohw);
}

/* nn.conv2d: per block of nb images and group g, with L = nb*OH*OW,
 *   col (K x L) = im2col of the block's images (K = Cg*KH*KW), side by side,
 *   Y (Og x L) = W[g*Og:(g+1)*Og] (Og x K) * col,
 *   y[n, g*Og:(g+1)*Og] = Y's columns of image n (directly when nb = 1). */
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
    int64_t NB = block_images(g.N, K > Og ? K : Og, ohw, true);
    /* small per-image GEMMs (OpenBLAS's small-matrix kernels either way)
     * write y directly; the test is on shapes only, for thread-count
     * independent bits */
    bool per_image = ct != RY_CT_I64 && (double)Og * (double)ohw * (double)K <= RY_GEMM_PART_MIN;
    bufs b;
    if (bufs_load(c, ct, x, w, y, K * NB * ohw, NB > 1 && !per_image ? Og * NB * ohw : 0, &b))
        return RY_ERR;
    size_t es = ct_size(ct);
    for (int64_t n0 = 0; n0 < g.N; n0 += NB) {
        int64_t nb = g.N - n0 < NB ? g.N - n0 : NB;
        for (int64_t gi = 0; gi < g.G; gi++) {
            job im = make_job(J_IM2COL, &g, ct, n0, nb, gi, Cg, g.C, g.H * g.W, ohw, b.x, b.col);
            run_split(&im, nb, K * ohw);
            const char *ws = (const char *)b.w + (size_t)(gi * Og * K) * es;
            if (per_image) {
                img_gemm m = {ct == RY_CT_F64, Og, ohw, K, nb * ohw, n0, g.O * ohw, es, ws,
                              b.col, (char *)b.y + (size_t)(gi * Og * ohw) * es};
                ry_parallel_for(nb, 1, run_img_gemm, &m);
                continue;
            }
            if (nb == 1) {
                char *ys = (char *)b.y + (size_t)((n0 * g.O + gi * Og) * ohw) * es;
                gemm(ct, false, false, false, Og, ohw, K, ws, b.col, ys);
                continue;
            }
            gemm(ct, false, false, false, Og, nb * ohw, K, ws, b.col, b.stage);
            job sc = make_job(J_SCATTER, &g, ct, n0, nb, gi, Og, g.O, ohw, ohw, b.stage, b.y);
            run_split(&sc, nb, Og * ohw);
        }
    }
    if (b.own_y) ry_conv_store(y, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}

/* nn.conv2d_transpose: per block of nb images and group g, with L = nb*H*W,
 *   X (Cg x L) = x[n, g*Cg:(g+1)*Cg] of the block's images side by side,
 *   col (Og*KH*KW x L) = W[g*Cg:(g+1)*Cg]^T (stored Cg x Og*KH*KW) * X,
 *   y[n, g*Og:(g+1)*Og] = col2im(col's columns of image n) (zero where
 *   nothing lands; output_padding rows included). */
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
    int64_t NB = block_images(g.N, M > Cg ? M : Cg, hw, true);
    bufs b;
    if (bufs_load(c, ct, x, w, y, M * NB * hw, NB > 1 ? Cg * NB * hw : 0, &b)) return RY_ERR;
    size_t es = ct_size(ct);
    for (int64_t n0 = 0; n0 < g.N; n0 += NB) {
        int64_t nb = g.N - n0 < NB ? g.N - n0 : NB;
        for (int64_t gi = 0; gi < g.G; gi++) {
            const char *ws = (const char *)b.w + (size_t)(gi * Cg * M) * es;
            const void *xs = (const char *)b.x + (size_t)((n0 * g.C + gi * Cg) * hw) * es;
            if (nb > 1) {
                job ga = make_job(J_GATHER, &g, ct, n0, nb, gi, Cg, g.C, hw, hw, b.x, b.stage);
                run_split(&ga, nb, Cg * hw);
                xs = b.stage;
            }
            gemm(ct, true, false, false, M, nb * hw, Cg, ws, xs, b.col);
            job ci = make_job(J_COL2IM, &g, ct, n0, nb, gi, Og, g.O, g.OH * g.OW, hw, b.col, b.y);
            run_split(&ci, nb, M * hw);
        }
    }
    if (b.own_y) ry_conv_store(y, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}

/* nn.conv2d_backward_weight: in = (dy (N, O, OH, OW), x (N, C, H, W)); per
 * group g, summed over blocks in order, with L = nb*OH*OW,
 *   dw[g*Og:(g+1)*Og] (Og x K) += DY (Og x L) * col^T (col = im2col of the block, K x L),
 *   DY the block's dy[n, g*Og:(g+1)*Og] side by side. */
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
    int64_t NB = block_images(g.N, K > Og ? K : Og, ohw, false);
    bufs b; /* b.x holds dy and b.w holds x */
    if (bufs_load(c, ct, dy, x, dw, K * NB * ohw, NB > 1 ? Og * NB * ohw : 0, &b)) return RY_ERR;
    size_t es = ct_size(ct);
    memset(b.y, 0, (size_t)dw->size * es);
    for (int64_t n0 = 0; n0 < g.N; n0 += NB) {
        int64_t nb = g.N - n0 < NB ? g.N - n0 : NB;
        for (int64_t gi = 0; gi < g.G; gi++) {
            job im = make_job(J_IM2COL, &g, ct, n0, nb, gi, Cg, g.C, g.H * g.W, ohw, b.w, b.col);
            run_split(&im, nb, K * ohw);
            const void *dys = (const char *)b.x + (size_t)((n0 * g.O + gi * Og) * ohw) * es;
            if (nb > 1) {
                job ga = make_job(J_GATHER, &g, ct, n0, nb, gi, Og, g.O, ohw, ohw, b.x, b.stage);
                run_split(&ga, nb, Og * ohw);
                dys = b.stage;
            }
            char *dws = (char *)b.y + (size_t)(gi * Og * K) * es;
            gemm(ct, false, true, true, Og, K, nb * ohw, dys, b.col, dws);
        }
    }
    if (b.own_y) ry_conv_store(dw, b.y, ct);
    bufs_free(&b);
    return RY_OK;
}
