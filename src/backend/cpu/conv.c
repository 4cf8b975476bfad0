/*
 * conv.c (cpu): nn.conv2d as im2col + GEMM; nn.conv2d_transpose (conv2d's
 * data gradient) as GEMM + col2im; nn.conv2d_backward_weight (its weight
 * gradient) as im2col + GEMM accumulating. Image by image, each image's
 * GEMMs reading and writing the NCHW tensors in place, with the batch split
 * over threads (parallel.h) so that each thread keeps its own scratch in
 * its own caches, and the same bits at any thread count (below). The copies
 * themselves are in conv_im2col.c; the GEMMs go through ry_cpu_gemm
 * (blas.h). NCHW data, OIHW / IOHW weights. float32 and float64 go through
 * OpenBLAS; float16 is widened to float32 and integers to int64 (a plain
 * loop), then narrowed into the output dtype. Shapes were checked by the
 * type relations (src/op/conv.c). Also holds the widening helpers the pool
 * kernels share. */
/* the partial sums' add loop is what vectorization is for (clang does at -O2) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#include <limits.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

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
    case RY_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case RY_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
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

/* ---- geometry ---- (legend in conv_kernels.h; Cg = C/G and Og = O/G
 * channels per group) */
static ry_conv_geom conv_geom(const ry_conv2d_params *p, const ry_tensor *x, const ry_tensor *w,
                              const ry_tensor *y) {
    ry_conv_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[1],
                      w->shape[2], w->shape[3], y->shape[2], y->shape[3], p->groups,
                      p->stride[0], p->stride[1], p->dilation[0], p->dilation[1], p->pad[0],
                      p->pad[1]};
    return g;
}

/* C (M x N) = op(A) (M x K) * op(B) (K x N) (+ C when accumulate), row-major,
 * with leading dimensions lda, ldb, ldc. transA: A is stored (K x M);
 * transB: B is stored (N x K). Integers: a plain loop over k in order
 * (wrapping adds). */
static void gemm_i64(bool transA, bool transB, bool acc, int64_t M, int64_t N, int64_t K,
                     const int64_t *A, int64_t lda, const int64_t *B, int64_t ldb, int64_t *Cm,
                     int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        int64_t *c = Cm + i * ldc;
        if (!acc) memset(c, 0, sizeof(int64_t) * (size_t)N);
        for (int64_t k = 0; k < K; k++) {
            uint64_t a = (uint64_t)(transA ? A[k * lda + i] : A[i * lda + k]);
            for (int64_t j = 0; j < N; j++) {
                uint64_t b = (uint64_t)(transB ? B[j * ldb + k] : B[k * ldb + j]);
                c[j] = (int64_t)((uint64_t)c[j] + a * b);
            }
        }
    }
}

static void gemm(ry_conv_ctype ct, bool transA, bool transB, bool acc, int64_t M, int64_t N,
                 int64_t K, const void *A, int64_t lda, const void *B, int64_t ldb, void *Cm,
                 int64_t ldc) {
    if (ct == RY_CT_I64) {
        gemm_i64(transA, transB, acc, M, N, K, A, lda, B, ldb, Cm, ldc);
        return;
    }
    ry_cpu_gemm(ct == RY_CT_F64, transA, transB, M, N, K, 1.0, A, lda, B, ldb, acc ? 1.0 : 0.0,
                Cm, ldc);
}

static ry_status too_big(ry_kernel_ctx *c, int64_t a, int64_t b, int64_t k) {
    if (a <= INT_MAX && b <= INT_MAX && k <= INT_MAX && a * b <= INT64_MAX / 8) return RY_OK;
    return ry_error_at(c->err, c->span, "%s: problem too large for one GEMM", c->op->name);
}

/* ---- the batch split over threads ----
 * Images are independent, so the kernels run image by image (per image and
 * group one im2col/col2im and one GEMM, straight from and into the NCHW
 * tensors: no gather or scatter copies), and the batch is cut into
 * `parts` contiguous ranges, a few per thread, each with its own scratch
 * (column matrix and padded image), kept in its core's L2 from image to
 * image. Each image is computed the same way whichever part holds it, so
 * conv2d and conv2d_transpose give the same bits at any thread count.
 * The weight gradient sums over images: its batch is cut into `chunks`
 * fixed by the shapes alone (never by the thread count), each summed in
 * image order into its own partial, and the partials added in chunk order:
 * again the same bits at any thread count. Part t runs chunks t, t +
 * parts, ... */
typedef enum { K_FWD, K_DX, K_DW } op_kind;

typedef struct plan {
    op_kind kind;
    ry_conv_geom g;
    ry_conv_ctype ct;
    size_t es;
    int64_t Cg, Og, K;       /* K: the GEMM's reduction length per group */
    int64_t col, pad;        /* scratch elements per part */
    int64_t parts, chunks;   /* chunks: K_DW only */
    int64_t band;            /* K_FWD: output rows per im2col band */
    bool dwT;                /* K_DW: sums dw's transpose (dw_image) */
    bool direct;             /* K_FWD: the direct kernel (conv_direct.c) */
    int64_t dyT;             /* K_DW with dwT: scratch elements for dy's transpose */
    const char *a, *b;       /* K_FWD: x, w; K_DX: dy, w; K_DW: dy, x */
    char *y, *scratch, *partials; /* partials: one per chunk (less chunk 0 without dwT) */
} plan;

/* Scratch of all parts together at most SCRATCH_CAP elements (fewer parts
 * when one image's column matrix is huge: it must not be multiplied by the
 * thread count); the weight gradient's batch in at most MAX_CHUNKS chunks. */
#define SCRATCH_CAP ((int64_t)1 << 24) /* elements, all parts together */
#define MAX_CHUNKS 8
#define PARTS_PER_THREAD 4
#define BAND_BYTES 65536 /* bounds a huge image's scratch (LeNet's images fit one band) */

/* t (cols x rows) = m (rows x cols)^T, elements of es bytes (4 or 8);
 * float32 in 4 x 4 SSE blocks where the sizes allow (LeNet's conv2: 16 x
 * 100 per image; element by element it was 1.5% of a training step) */
static void transpose(size_t es, int64_t rows, int64_t cols, const void *m, void *t) {
#if defined(__SSE2__)
    if (es == 4 && rows % 4 == 0 && cols % 4 == 0) {
        const float *a = m;
        float *b = t;
        for (int64_t i = 0; i < rows; i += 4)
            for (int64_t j = 0; j < cols; j += 4) {
                __m128 r0 = _mm_loadu_ps(a + i * cols + j);
                __m128 r1 = _mm_loadu_ps(a + (i + 1) * cols + j);
                __m128 r2 = _mm_loadu_ps(a + (i + 2) * cols + j);
                __m128 r3 = _mm_loadu_ps(a + (i + 3) * cols + j);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                _mm_storeu_ps(b + j * rows + i, r0);
                _mm_storeu_ps(b + (j + 1) * rows + i, r1);
                _mm_storeu_ps(b + (j + 2) * rows + i, r2);
                _mm_storeu_ps(b + (j + 3) * rows + i, r3);
            }
        return;
    }
#endif
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            if (es == 4) ((uint32_t *)t)[j * rows + i] = ((const uint32_t *)m)[i * cols + j];
            else ((uint64_t *)t)[j * rows + i] = ((const uint64_t *)m)[i * cols + j];
}

/* y (Og x OH*OW of image n, group gi) = W_g (Og x K) * im2col(x[n, g]),
 * a band of output rows at a time, so that a large image's column matrix
 * need not be held whole (bands of 8-24 KB, to stay in L1, measured slower
 * on LeNet's shapes than one 64 KB band: the GEMMs get too small) */
static void fwd_image(const plan *p, int64_t n, char *col, char *pad) {
    const ry_conv_geom *g = &p->g;
    int64_t ohw = g->OH * g->OW, hw = g->H * g->W;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *x = p->a + (size_t)((n * g->C + gi * p->Cg) * hw) * p->es;
        const void *src = ry_conv_im2col_source(g, p->ct, p->Cg, x, pad);
        const char *w = p->b + (size_t)(gi * p->Og * p->K) * p->es;
        char *y = p->y + (size_t)((n * g->O + gi * p->Og) * ohw) * p->es;
        for (int64_t r0 = 0; r0 < g->OH; r0 += p->band) {
            int64_t r1 = r0 + p->band < g->OH ? r0 + p->band : g->OH, nb = (r1 - r0) * g->OW;
            ry_conv_im2col_rows(g, p->ct, p->Cg, src, r0, r1, col);
            gemm(p->ct, false, false, false, p->Og, nb, p->K, w, p->K, col, nb,
                 y + (size_t)(r0 * g->OW) * p->es, ohw);
        }
    }
}

/* col (Og*KH*KW x H*W) = W_g^T (stored Cg x Og*KH*KW) * dy[n, g] (Cg x H*W);
 * y[n, g] = col2im(col) */
static void dx_image(const plan *p, int64_t n, char *col, char *pad) {
    const ry_conv_geom *g = &p->g;
    int64_t hw = g->H * g->W, M = p->Og * g->KH * g->KW;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *dy = p->a + (size_t)((n * g->C + gi * p->Cg) * hw) * p->es;
        gemm(p->ct, true, false, false, M, hw, p->Cg, p->b + (size_t)(gi * p->Cg * M) * p->es, M,
             dy, hw, col, hw);
        ry_conv_col2im(g, p->ct, p->Og, col,
                       p->y + (size_t)((n * g->O + gi * p->Og) * g->OH * g->OW) * p->es, pad);
    }
}

/* dw_g (Og x K) (+)= dy[n, g] (Og x OH*OW) * im2col(x[n, g])^T; or, with
 * p->dwT, its transpose dw_g^T (K x Og) (+)= im2col(x[n, g]) * dy[n, g]^T
 * (dy transposed into dyT first). OpenBLAS sends the first form's wide
 * outputs (LeNet's conv2: 16 x 150) to its general kernel, which packs both
 * operands on every call; the second is a plain NN product that its
 * small-matrix kernels take, at the cost of transposing dy. */
static void dw_image(const plan *p, int64_t n, char *col, char *pad, char *dyT, char *dw,
                     bool acc) {
    const ry_conv_geom *g = &p->g;
    int64_t ohw = g->OH * g->OW, hw = g->H * g->W;
    for (int64_t gi = 0; gi < g->G; gi++) {
        const char *x = p->b + (size_t)((n * g->C + gi * p->Cg) * hw) * p->es;
        const void *src = ry_conv_im2col_source(g, p->ct, p->Cg, x, pad);
        ry_conv_im2col_rows(g, p->ct, p->Cg, src, 0, g->OH, col);
        const char *dy = p->a + (size_t)((n * g->O + gi * p->Og) * ohw) * p->es;
        char *dwg = dw + (size_t)(gi * p->Og * p->K) * p->es;
        if (!p->dwT) {
            gemm(p->ct, false, true, acc, p->Og, p->K, ohw, dy, ohw, col, ohw, dwg, p->K);
            continue;
        }
        transpose(p->es, p->Og, ohw, dy, dyT);
        gemm(p->ct, false, false, acc, p->K, p->Og, ohw, col, ohw, dyT, p->Og, dwg, p->Og);
    }
}

static int64_t share(int64_t n, int64_t parts, int64_t t) { return n * t / parts; }

/* One image's forward by the direct kernel (conv_direct.c). */
static void direct_fwd_image(const plan *p, int64_t n, float *xp) {
    const ry_conv_geom *g = &p->g;
    ry_conv_direct_pad(g, (const float *)(const void *)p->a + n * g->C * g->H * g->W, xp);
    ry_conv_direct_fwd(g, xp, (const float *)(const void *)p->b,
                       (float *)(void *)p->y + n * g->O * g->OH * g->OW);
}

static void run_part(void *ctx, int64_t lo, int64_t hi) {
    const plan *p = ctx;
    for (int64_t t = lo; t < hi; t++) {
        char *col = p->scratch + (size_t)(t * (p->col + p->pad + p->dyT)) * p->es;
        char *pad = col + (size_t)p->col * p->es;
        char *dyT = pad + (size_t)p->pad * p->es;
        if (p->kind != K_DW) {
            for (int64_t n = share(p->g.N, p->parts, t); n < share(p->g.N, p->parts, t + 1); n++)
                if (p->direct) direct_fwd_image(p, n, (void *)pad);
                else (p->kind == K_FWD ? fwd_image : dx_image)(p, n, col, pad);
            continue;
        }
        size_t dwbytes = (size_t)(p->g.O * p->K) * p->es;
        for (int64_t j = t; j < p->chunks; j += p->parts) {
            /* chunk 0 sums straight into y, unless y wants the transpose */
            char *dw = j == 0 && !p->dwT ? p->y : p->partials + (size_t)(j - !p->dwT) * dwbytes;
            int64_t n0 = share(p->g.N, p->chunks, j), n1 = share(p->g.N, p->chunks, j + 1);
            for (int64_t n = n0; n < n1; n++) dw_image(p, n, col, pad, dyT, dw, n > n0);
        }
    }
}

#define DEFINE_SUM(T, SUF, ADD)                                                                  \
    static void sum_##SUF(T *restrict y, const T *restrict part, int64_t n) {                    \
        for (int64_t i = 0; i < n; i++) y[i] = ADD(y[i], part[i]);                               \
    }
#define ADD_F(a, b) ((a) + (b))
#define ADD_I(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
DEFINE_SUM(float, f32, ADD_F)
DEFINE_SUM(double, f64, ADD_F)
DEFINE_SUM(int64_t, i64, ADD_I)

/* Widened operands and output of one call; freed together. */
typedef struct bufs {
    void *a, *b, *y;
    bool own_a, own_b, own_y;
} bufs;

static void bufs_free(bufs *b) {
    if (b->own_a) ry_free(b->a);
    if (b->own_b) ry_free(b->b);
    if (b->own_y) ry_free(b->y);
}

/* Sizes the split, allocates scratch and partials, runs it, sums the
 * partials. The plan's kind, geometry, types and operands are set. */
static ry_status run_plan(ry_kernel_ctx *c, plan *p) {
    bool col2im = p->kind == K_DX;
    int64_t ch = col2im ? p->Og : p->Cg;
    p->band = p->g.OH;
    if (p->kind == K_FWD) { /* bands of about BAND_BYTES, at least one row */
        int64_t row = p->K * p->g.OW * (int64_t)p->es;
        p->band = row > 0 && BAND_BYTES / row < p->g.OH ? BAND_BYTES / row : p->g.OH;
        if (p->band < 1) p->band = 1;
    }
    p->direct = p->kind == K_FWD && ry_conv_direct_ok(&p->g, p->ct);
    p->col = (col2im ? p->g.H * p->g.W : p->band * p->g.OW) * ch * p->g.KH * p->g.KW;
    if (p->direct) p->col = 1; /* no column matrix */
    if (p->col < 1) p->col = 1;
    p->pad = p->direct ? ry_conv_direct_pad_elems(&p->g) : ry_conv_pad_elems(&p->g, ch, col2im);
    int64_t threads = ry_parallel_serial() ? 1 : ry_get_num_threads();
    int64_t dwsize = p->g.O * p->K;
    p->chunks = 1;
    if (p->kind == K_DW) {
        p->chunks = p->g.N < MAX_CHUNKS ? p->g.N : MAX_CHUNKS;
        if (p->chunks > 1 && dwsize * (p->chunks - 1) > SCRATCH_CAP)
            p->chunks = SCRATCH_CAP / dwsize + 1;
        if (p->chunks < 1) p->chunks = 1;
    }
    /* OpenBLAS's small-matrix kernels (products of at most 100^3, outputs of
     * at most 4096 elements) refuse the plain form's TN product
     * (column-major) when the output has more than 1200 elements, but take
     * the transposed form's NN one */
    double gsize = (double)p->Og * (double)p->K;
    p->dwT = p->kind == K_DW && p->ct != RY_CT_I64 && gsize > 1200 && gsize <= 4096 &&
             gsize * (double)(p->g.OH * p->g.OW) <= 1e6;
    p->dyT = p->dwT ? p->Og * p->g.OH * p->g.OW : 0;
    int64_t per = p->col + p->pad + p->dyT, nparts = p->chunks - !p->dwT;
    int64_t work = p->kind == K_DW ? p->chunks : p->g.N;
    /* a few parts per thread, as ry_parallel_for's chunks: a thread that
     * starts late (a busy machine) still finds parts left to take */
    int64_t want = threads > 1 ? threads * PARTS_PER_THREAD : 1;
    p->parts = want < work ? want : work;
    while (p->parts > 1 && p->parts * per > SCRATCH_CAP) p->parts--;
    if (p->parts < 1) p->parts = 1;
    p->scratch = ry_malloc((size_t)(p->parts * per) * p->es);
    p->partials = p->scratch && nparts > 0 ? ry_malloc((size_t)(nparts * dwsize) * p->es) : NULL;
    if (!p->scratch || (nparts > 0 && !p->partials)) {
        ry_free(p->scratch);
        ry_free(p->partials);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    ry_parallel_for(p->parts, 1, run_part, p);
    char *sum = p->dwT ? p->partials : p->y; /* partial 0's sum */
    for (int64_t j = 1; j < p->chunks; j++) {
        const void *part = p->partials + (size_t)((j - !p->dwT) * dwsize) * p->es;
        if (p->ct == RY_CT_F32) sum_f32((void *)sum, part, dwsize);
        else if (p->ct == RY_CT_F64) sum_f64((void *)sum, part, dwsize);
        else sum_i64((void *)sum, part, dwsize);
    }
    for (int64_t gi = 0; p->dwT && gi < p->g.G; gi++) {
        size_t off = (size_t)(gi * p->Og * p->K) * p->es;
        transpose(p->es, p->K, p->Og, sum + off, p->y + off);
    }
    ry_free(p->scratch);
    ry_free(p->partials);
    return RY_OK;
}

static ry_status bufs_load(ry_kernel_ctx *c, ry_conv_ctype ct, const ry_tensor *a,
                           const ry_tensor *b, ry_tensor *y, bufs *r) {
    memset(r, 0, sizeof *r);
    r->a = ry_conv_load(a, ct, &r->own_a);
    r->b = r->a ? ry_conv_load(b, ct, &r->own_b) : NULL;
    if (!r->b) {
        /* nothing more to try */
    } else if (is_native(y->dtype, ct)) {
        r->y = y->data;
    } else {
        r->y = ry_malloc((size_t)(y->size ? y->size : 1) * ct_size(ct));
        r->own_y = r->y != NULL;
    }
    if (r->y) return RY_OK;
    bufs_free(r);
    return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
}

/* Loads the operands, runs the plan, stores and frees. */
static ry_status run(ry_kernel_ctx *c, plan *p, const ry_tensor *a, const ry_tensor *b,
                     ry_tensor *y) {
    bufs r;
    if (bufs_load(c, p->ct, a, b, y, &r)) return RY_ERR;
    p->es = ct_size(p->ct);
    p->a = r.a;
    p->b = r.b;
    p->y = r.y;
    ry_status s = run_plan(c, p);
    if (s == RY_OK && r.own_y) ry_conv_store(y, r.y, p->ct);
    bufs_free(&r);
    return s;
}

/* nn.conv2d: per image n and group g,
 *   y[n, g*Og:(g+1)*Og] (Og x OH*OW) = W[g*Og:(g+1)*Og] (Og x K) * im2col(x[n, g*Cg:(g+1)*Cg]),
 *   K = Cg*KH*KW. */
ry_status ry_cpu_conv2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *x = in[0], *w = in[1];
    ry_tensor *y = out[0];
    plan pl = {.kind = K_FWD, .g = conv_geom(&p, x, w, y), .ct = ry_conv_ctype_of(y->dtype)};
    pl.Cg = pl.g.C / pl.g.G;
    pl.Og = pl.g.O / pl.g.G;
    pl.K = pl.Cg * pl.g.KH * pl.g.KW;
    if (too_big(c, pl.K, pl.g.OH * pl.g.OW, pl.Og) || ry_cpu_blas_ready(c)) return RY_ERR;
    if (y->size == 0) return RY_OK;
    if (pl.K == 0) { /* no input channels: an empty sum */
        memset(y->data, 0, ry_tensor_nbytes(y));
        return RY_OK;
    }
    return run(c, &pl, x, w, y);
}

/* nn.conv2d_transpose: per image n and group g,
 *   col (Og*KH*KW x H*W) = W[g*Cg:(g+1)*Cg]^T (stored Cg x Og*KH*KW) * x[n, g*Cg:(g+1)*Cg],
 *   y[n, g*Og:(g+1)*Og] = col2im(col) (zero where nothing lands; output_padding
 *   rows included). */
ry_status ry_cpu_conv2d_transpose(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                  ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *x = in[0], *w = in[1];
    ry_tensor *y = out[0];
    plan pl = {.kind = K_DX, .g = conv_geom(&p, x, w, y), .ct = ry_conv_ctype_of(y->dtype)};
    pl.Cg = pl.g.C / pl.g.G;
    pl.Og = pl.g.O / pl.g.G;
    pl.K = pl.Cg;
    int64_t M = pl.Og * pl.g.KH * pl.g.KW, hw = pl.g.H * pl.g.W;
    if (too_big(c, M, hw, pl.Cg) || ry_cpu_blas_ready(c)) return RY_ERR;
    if (y->size == 0) return RY_OK;
    if (pl.Cg == 0 || hw == 0) { /* nothing lands anywhere */
        memset(y->data, 0, ry_tensor_nbytes(y));
        return RY_OK;
    }
    return run(c, &pl, x, w, y);
}

/* nn.conv2d_backward_weight: in = (dy (N, O, OH, OW), x (N, C, H, W)); per
 * group g,
 *   dw[g*Og:(g+1)*Og] (Og x K) = sum over n of dy[n, g*Og:(g+1)*Og] (Og x OH*OW)
 *                                * im2col(x[n, g*Cg:(g+1)*Cg])^T,
 *   summed in the fixed chunks of the batch split (above). */
ry_status ry_cpu_conv2d_backward_weight(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                        ry_tensor *const *out) {
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_ERR;
    const ry_tensor *dy = in[0], *x = in[1];
    ry_tensor *dw = out[0];
    ry_conv_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], dy->shape[1],
                      dw->shape[2], dw->shape[3], dy->shape[2], dy->shape[3], p.groups,
                      p.stride[0], p.stride[1], p.dilation[0], p.dilation[1], p.pad[0], p.pad[1]};
    plan pl = {.kind = K_DW, .g = g, .ct = ry_conv_ctype_of(dw->dtype)};
    pl.Cg = g.C / g.G;
    pl.Og = g.O / g.G;
    pl.K = pl.Cg * g.KH * g.KW;
    int64_t ohw = g.OH * g.OW;
    if (too_big(c, pl.K, ohw, pl.Og) || ry_cpu_blas_ready(c)) return RY_ERR;
    if (dw->size == 0) return RY_OK;
    if (ohw == 0 || g.N == 0) { /* an empty sum */
        memset(dw->data, 0, ry_tensor_nbytes(dw));
        return RY_OK;
    }
    return run(c, &pl, dy, x, dw);
}
