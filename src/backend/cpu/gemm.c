/*
 * gemm.c (cpu): dense, matmul and batch_matmul, and ry_cpu_gemm (blas.h),
 * the split of one large float32 GEMM across relayc's thread pool that the
 * conv and fused kernels share. float32 and float64 go to OpenBLAS (always
 * one-threaded: threads.h); other float mixes (float16, an out_dtype unlike
 * the inputs) are computed in float64 and converted; integers use a plain
 * loop accumulating in 64-bit unsigned arithmetic (so overflow wraps as in
 * a narrower integer, never UB) and are converted to out_dtype.
 * Deterministic: every C element comes from one OpenBLAS call over the
 * whole of K, at any thread count (blas.h says when a GEMM is split).
 */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/nn_kernels.h"
#include "backend/cpu/parallel.h"
#include "op/matmul_dims.h"

typedef enum { K_F32, K_F64, K_I64 } kind;

/* The operands as the compute kind wants them: borrowed when the dtypes
 * already fit, else converted copies (owned). */
typedef struct operands {
    kind k;
    const void *a, *b;
    void *out;
    ry_tensor *ta, *tb, *tout; /* converted copies, or NULL */
} operands;

static ry_tensor *convert(const ry_tensor *t, ry_dtype dt) {
    ry_tensor *r = ry_tensor_new(dt, t->ndim, t->shape);
    if (!r) return NULL;
    if (dt == RY_INT64) {
        int64_t *p = r->data;
        for (int64_t i = 0; i < t->size; i++) {
            switch (t->dtype) {
            case RY_INT8:
                p[i] = ((const int8_t *)t->data)[i];
                break;
            case RY_UINT8:
                p[i] = ((const uint8_t *)t->data)[i];
                break;
            case RY_INT32:
                p[i] = ((const int32_t *)t->data)[i];
                break;
            case RY_INT64:
                p[i] = ((const int64_t *)t->data)[i];
                break;
            default:
                p[i] = (int64_t)ry_tensor_get(t, i);
                break;
            }
        }
    } else {
        for (int64_t i = 0; i < t->size; i++) ry_tensor_set(r, i, ry_tensor_get(t, i));
    }
    return r;
}

static void operands_free(operands *o) {
    ry_tensor_release(o->ta);
    ry_tensor_release(o->tb);
    ry_tensor_release(o->tout);
}

static ry_status operands_get(ry_kernel_ctx *c, const ry_tensor *a, const ry_tensor *b,
                              ry_tensor *out, operands *o) {
    memset(o, 0, sizeof *o);
    ry_dtype dt = a->dtype;
    if (dt == RY_FLOAT32 && out->dtype == RY_FLOAT32)
        o->k = K_F32;
    else if (ry_dtype_is_float(dt) || ry_dtype_is_float(out->dtype))
        o->k = K_F64;
    else
        o->k = K_I64;
    ry_dtype want = o->k == K_F32 ? RY_FLOAT32 : o->k == K_F64 ? RY_FLOAT64 : RY_INT64;
    o->a = a->data;
    o->b = b->data;
    o->out = out->data;
    if (dt != want && !(o->ta = convert(a, want))) goto oom;
    if (dt != want && !(o->tb = convert(b, want))) goto oom;
    if (out->dtype != want && !(o->tout = ry_tensor_new(want, out->ndim, out->shape))) goto oom;
    if (o->ta) o->a = o->ta->data;
    if (o->tb) o->b = o->tb->data;
    if (o->tout) o->out = o->tout->data;
    return RY_OK;
oom:
    operands_free(o);
    return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
}

/* Writes the computed result into out (converting to its dtype) and frees. */
static void operands_finish(operands *o, ry_tensor *out) {
    if (o->tout) {
        if (o->k == K_I64) {
            const int64_t *p = o->tout->data;
            for (int64_t i = 0; i < out->size; i++) {
                switch (out->dtype) {
                case RY_INT8:
                    ((int8_t *)out->data)[i] = (int8_t)p[i];
                    break;
                case RY_UINT8:
                    ((uint8_t *)out->data)[i] = (uint8_t)p[i];
                    break;
                case RY_INT32:
                    ((int32_t *)out->data)[i] = (int32_t)p[i];
                    break;
                case RY_INT16:
                    ((int16_t *)out->data)[i] = (int16_t)p[i];
                    break;
                case RY_UINT16:
                    ((uint16_t *)out->data)[i] = (uint16_t)p[i];
                    break;
                default:
                    ry_tensor_set(out, i, (double)p[i]);
                    break;
                }
            }
        } else {
            for (int64_t i = 0; i < out->size; i++)
                ry_tensor_set(out, i, ry_tensor_get(o->tout, i));
        }
    }
    operands_free(o);
}

/* ---- ry_cpu_gemm: one GEMM split into blocks of C over the pool ----
 * Blocks are rows of C (rows of op(A)) or columns of C (columns of op(B)),
 * as plan_split says. Inner block boundaries fall on multiples of ALIGN
 * elements: whole micro-kernel tiles (16 x 4 in OpenBLAS's AVX-512 sgemm)
 * and, for column blocks, whole cache lines of C, so two threads never
 * write one line. */
#define ALIGN 16

typedef struct gemm_split {
    bool f64, ta, tb, by_n;
    int64_t M, N, K, lda, ldb, ldc, D; /* D: the side split (N or M) */
    int parts;
    double alpha, beta;
    const void *A, *B;
    void *C;
} gemm_split;

static int64_t part_bound(int64_t D, int parts, int p) {
    if (p <= 0) return 0;
    if (p >= parts) return D;
    return (D * p / parts + ALIGN / 2) / ALIGN * ALIGN;
}

/* Block [lo, hi) of the split side, as one OpenBLAS call. */
static void blas_block(const gemm_split *s, int64_t lo, int64_t hi) {
    int64_t m = s->by_n ? s->M : hi - lo, n = s->by_n ? hi - lo : s->N;
    size_t es = s->f64 ? sizeof(double) : sizeof(float);
    const char *a = s->A, *b = s->B;
    char *c = s->C;
    if (s->by_n) {
        b += (size_t)(s->tb ? lo * s->ldb : lo) * es;
        c += (size_t)lo * es;
    } else {
        a += (size_t)(s->ta ? lo : lo * s->lda) * es;
        c += (size_t)(lo * s->ldc) * es;
    }
    CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans, tb = s->tb ? CblasTrans : CblasNoTrans;
    if (s->f64)
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)s->K, s->alpha,
                    (const double *)a, (int)s->lda, (const double *)b, (int)s->ldb, s->beta,
                    (double *)c, (int)s->ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)s->K, (float)s->alpha,
                    (const float *)a, (int)s->lda, (const float *)b, (int)s->ldb,
                    (float)s->beta, (float *)c, (int)s->ldc);
    ry_cpu_after_blas();
}

static void run_blocks(void *ctx, int64_t lo, int64_t hi) {
    const gemm_split *s = ctx;
    for (int64_t p = lo; p < hi; p++)
        blas_block(s, part_bound(s->D, s->parts, (int)p), part_bound(s->D, s->parts, (int)p + 1));
}

/* The most blocks (<= threads) whose smallest keeps ALIGN elements of the
 * split side, at least RY_GEMM_PART_MIN multiply-adds, and the kind of
 * kernel the whole gets (blas.h); 1 when none. */
static int count_parts(int64_t D, int64_t other, int64_t K, int threads) {
    double row = (double)other * (double)K; /* multiply-adds per element of D */
    bool small = (double)D * row <= RY_BLAS_SMALL_MAX;
    for (int parts = threads; parts > 1; parts--) {
        int64_t least = D;
        for (int p = 0; p < parts; p++) {
            int64_t len = part_bound(D, parts, p + 1) - part_bound(D, parts, p);
            if (len < least) least = len;
        }
        double macs = (double)least * row;
        if (least >= ALIGN && macs >= RY_GEMM_PART_MIN && (small || macs > RY_BLAS_SMALL_MAX))
            return parts;
    }
    return 1;
}

/* The split of a GEMM: its blocks (1: none) and whether they are columns
 * of C (else rows). Blocks run along the larger side, so each re-packs
 * only the smaller operand. OpenBLAS's small kernel for C = A B^T
 * (row-major) rounds an element of C differently by where its block
 * starts (rows or columns), so a GEMM small enough for it stays whole. */
static int plan_split(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool *by_n) {
    *by_n = N > M;
    int threads = ry_get_num_threads();
    if (f64 || threads < 2 || ry_parallel_serial() || M <= 0 || N <= 0 || K <= 0) return 1;
    if (tb && !ta && (double)M * (double)N * (double)K <= RY_BLAS_SMALL_MAX) return 1;
    return *by_n ? count_parts(N, M, K, threads) : count_parts(M, N, K, threads);
}

int ry_cpu_gemm_parts(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
    bool by_n;
    return plan_split(f64, ta, tb, M, N, K, &by_n);
}

/* A GEMM with one row or one column of C is a matrix-vector product.
 * OpenBLAS's sgemm packs the whole of B even for one row of A: a
 * (1 x 300)(300 x 750) product took 100 us where sgemv takes 21 (the
 * Tree-LSTM's every node makes three). With one row, C's row is
 * op(B)^T op(A)'s row; with one column, op(A) times op(B)'s column (a
 * row of B as stored); the vector is read with its stride. beta 0 zeroes
 * C first: gemv reads y. */
static void gemv(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                 int64_t ldc) {
    size_t es = f64 ? sizeof(double) : sizeof(float);
    bool row = M == 1;
    /* the matrix, its shape as stored and whether gemv transposes it; the
     * vector and its stride; the result's stride */
    const void *mat = row ? B : A, *x = row ? A : B;
    int64_t ld = row ? ldb : lda;
    bool stored_t = row ? !tb : ta;  /* the product needs the stored matrix transposed */
    int64_t rows = row ? (tb ? N : K) : (ta ? K : M), cols = row ? (tb ? K : N) : (ta ? M : K);
    int64_t incx = row ? (ta ? lda : 1) : (tb ? 1 : ldb);
    int64_t n = row ? N : M, incy = row ? 1 : ldc;
    if (beta == 0.0)
        for (int64_t i = 0; i < n; i++) memset((char *)C + (size_t)(i * incy) * es, 0, es);
    enum CBLAS_TRANSPOSE t = stored_t ? CblasTrans : CblasNoTrans;
    if (f64)
        cblas_dgemv(CblasRowMajor, t, (int)rows, (int)cols, alpha, mat, (int)ld, x, (int)incx, beta,
                    C, (int)incy);
    else
        cblas_sgemv(CblasRowMajor, t, (int)rows, (int)cols, (float)alpha, mat, (int)ld, x, (int)incx,
                    (float)beta, C, (int)incy);
    ry_cpu_after_blas();
}

void ry_cpu_gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                 int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* an empty sum: C = beta * C */
        for (int64_t i = 0; i < M && beta != 1.0; i++)
            for (int64_t j = 0; j < N; j++) {
                if (f64) {
                    double *c = (double *)C + i * ldc + j;
                    *c = beta == 0.0 ? 0.0 : beta * *c; /* beta 0: C may hold NaN */
                } else {
                    float *c = (float *)C + i * ldc + j;
                    *c = beta == 0.0 ? 0.0f : (float)beta * *c;
                }
            }
        return;
    }
    /* (a column of B read with a stride: sgemm's packing pays for itself) */
    if (M == 1 || (N == 1 && tb)) {
        gemv(f64, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* a few rows (automatic batching's small groups): one GEMV each (blas.h) */
    if (!ta && M <= RY_GEMM_FEW_ROWS) {
        size_t es = f64 ? sizeof(double) : sizeof(float);
        for (int64_t m = 0; m < M; m++)
            gemv(f64, ta, tb, 1, N, K, alpha, (const char *)A + (size_t)(m * lda) * es, lda, B, ldb,
                 beta, (char *)C + (size_t)(m * ldc) * es, ldc);
        return;
    }
    gemm_split s = {f64, ta, tb, false, M, N, K, lda, ldb, ldc, 0, 1, alpha, beta, A, B, C};
    s.parts = plan_split(f64, ta, tb, M, N, K, &s.by_n);
    s.D = s.by_n ? N : M;
    if (s.parts < 2) {
        blas_block(&s, 0, s.D);
        return;
    }
    /* one pool chunk per block: n = parts, grain 1 */
    ry_parallel_for(s.parts, 1, run_blocks, &s);
}

/* C[M, N] = op(A)[M, K] * op(B)[K, N], row-major, with leading dimensions
 * lda, ldb, ldc; op(X) is X or X^T. Elements of the operands' kind; the
 * offsets (in elements) select one matrix of a batch. */
static void gemm(kind k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t aoff, int64_t lda, const void *B, int64_t boff, int64_t ldb, void *C,
                 int64_t coff, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (k != K_I64) {
        size_t es = k == K_F32 ? sizeof(float) : sizeof(double);
        ry_cpu_gemm(k == K_F64, ta, tb, M, N, K, 1.0, (const char *)A + (size_t)aoff * es, lda,
                    (const char *)B + (size_t)boff * es, ldb, 0.0,
                    (char *)C + (size_t)coff * es, ldc);
    } else {
        /* integer: with B transposed (dense) each C[i, j] is a dot product
         * of two contiguous rows; otherwise row i of C accumulates
         * a(i, p) * row p of B. */
        const uint64_t *a = (const uint64_t *)A + aoff, *b = (const uint64_t *)B + boff;
        uint64_t *c = (uint64_t *)C + coff;
        for (int64_t i = 0; i < M; i++) {
            uint64_t *ci = c + i * ldc;
            if (tb && !ta) {
                for (int64_t j = 0; j < N; j++) {
                    uint64_t s = 0;
                    for (int64_t p = 0; p < K; p++) s += a[i * lda + p] * b[j * ldb + p];
                    ci[j] = s;
                }
                continue;
            }
            for (int64_t j = 0; j < N; j++) ci[j] = 0;
            for (int64_t p = 0; p < K; p++) {
                uint64_t aip = ta ? a[p * lda + i] : a[i * lda + p];
                if (tb)
                    for (int64_t j = 0; j < N; j++) ci[j] += aip * b[j * ldb + p];
                else
                    for (int64_t j = 0; j < N; j++) ci[j] += aip * b[p * ldb + j];
            }
        }
    }
}

/* BLAS takes int sizes. */
static ry_status check_blas_dims(ry_kernel_ctx *c, int n, const int64_t *d) {
    for (int i = 0; i < n; i++)
        if (d[i] > INT_MAX)
            return ry_error_at(c->err, c->span, "%s: dimension %lld too large for BLAS",
                               c->op->name, (long long)d[i]);
    return RY_OK;
}

/* matmul core shared by dense and matmul.
 * a: (R..., K) or with ta (R..., K, N); b: (K, M) or with tb (M, K);
 * out: (R..., M) or with ta (R..., N, M). Without ta, the leading dims fold
 * into rows and one GEMM does it all; with ta, one GEMM per leading index. */
static ry_status matmul_core(ry_kernel_ctx *c, bool ta, bool tb, ry_tensor *const *in,
                             ry_tensor *out) {
    const ry_tensor *a = in[0], *b = in[1];
    ry_matmul_dims md = ry_matmul_dims_of(a, b, ta, tb);
    int64_t rows = md.rows, M = md.M, K = md.K, batch = md.batch;
    int64_t dims[3] = {rows, M, K};
    if (check_blas_dims(c, 3, dims) || ry_cpu_blas_ready(c)) return RY_ERR;
    operands o;
    if (operands_get(c, a, b, out, &o)) return RY_ERR;
    for (int64_t s = 0; s < batch; s++)
        gemm(o.k, ta, tb, rows, M, K, o.a, s * rows * K, ta ? rows : K, o.b, 0, tb ? K : M, o.out,
             s * rows * M, M);
    operands_finish(&o, out);
    return RY_OK;
}

/* dense: data (d1, ..., dn, k) x weight (m, k) -> (d1, ..., dn, m), i.e.
 * out = data * weight^T with the leading dims folded into rows. */
RY_NN_KERNEL(ry_cpu_dense) {
    return matmul_core(c, false, true, in, out[0]);
}

RY_NN_KERNEL(ry_cpu_matmul) {
    return matmul_core(c, ry_attr_bool(c->op, c->attrs, "transpose_a"),
                       ry_attr_bool(c->op, c->attrs, "transpose_b"), in, out[0]);
}

/* batch_matmul: x (Bx, I, K) [ta: (Bx, K, I)] x y (By, K, J) [tb: (By, J, K)]
 * -> (B, I, J), B = max(Bx, By); a batch of 1 is reused for every b.
 * (ni, nj, nk, nb below: I is complex.h's imaginary unit in <cblas.h>.) */
RY_NN_KERNEL(ry_cpu_batch_matmul) {
    const ry_tensor *x = in[0], *y = in[1];
    ry_tensor *z = out[0];
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    int64_t nb = z->shape[0], ni = z->shape[1], nj = z->shape[2];
    int64_t nk = ta ? x->shape[1] : x->shape[2];
    int64_t dims[3] = {ni, nj, nk};
    if (check_blas_dims(c, 3, dims) || ry_cpu_blas_ready(c)) return RY_ERR;
    int64_t xs = x->shape[0] == 1 ? 0 : ni * nk, ys = y->shape[0] == 1 ? 0 : nk * nj;
    operands o;
    if (operands_get(c, x, y, z, &o)) return RY_ERR;
    for (int64_t s = 0; s < nb; s++)
        gemm(o.k, ta, tb, ni, nj, nk, o.a, s * xs, ta ? ni : nk, o.b, s * ys, tb ? nk : nj, o.out,
             s * ni * nj, nj);
    operands_finish(&o, z);
    return RY_OK;
}
