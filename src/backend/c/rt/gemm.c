/*
 * gemm.c (export runtime): C = A B for row-major float32 A (M, K) and
 * B (K, N), the loops every exported dense, matmul and fused.matmul runs.
 * Transposed operands are transposed first (weights once, when the
 * context opens), so the inner loop always runs along a row of B and C,
 * which the compiler vectorizes without reassociating: each C element is
 * a sum over k in increasing order (OpenBLAS, which the VM calls, blocks
 * K, so the two agree to rounding, not bitwise). Four rows of A share each
 * pass over B; columns are blocked so that the four rows of C stay in L1.
 */
#include <stdint.h>
#include <string.h>

#define RT_GEMM_NB 512 /* columns of C per block: 4 rows x 2 KiB */

static void rt_gemm_rows4(int64_t N, int64_t K, int64_t lda, int64_t ldb, const float *restrict a,
                          const float *restrict b, float *restrict c0, float *restrict c1,
                          float *restrict c2, float *restrict c3) {
    for (int64_t j = 0; j < N; j++) c0[j] = c1[j] = c2[j] = c3[j] = 0;
    for (int64_t k = 0; k < K; k++) {
        const float a0 = a[k], a1 = a[lda + k], a2 = a[2 * lda + k], a3 = a[3 * lda + k];
        const float *restrict br = b + k * ldb;
        for (int64_t j = 0; j < N; j++) {
            const float bj = br[j];
            c0[j] += a0 * bj;
            c1[j] += a1 * bj;
            c2[j] += a2 * bj;
            c3[j] += a3 * bj;
        }
    }
}

static void rt_gemm_row(int64_t N, int64_t K, int64_t ldb, const float *restrict a, const float *restrict b,
                        float *restrict c) {
    for (int64_t j = 0; j < N; j++) c[j] = 0;
    for (int64_t k = 0; k < K; k++) {
        const float ak = a[k];
        const float *restrict br = b + k * ldb;
        for (int64_t j = 0; j < N; j++) c[j] += ak * br[j];
    }
}

/* C (M, N) = A (M, K) B (K, N); C does not overlap A or B. */
static void rt_gemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    for (int64_t j0 = 0; j0 < N; j0 += RT_GEMM_NB) {
        int64_t nb = N - j0 < RT_GEMM_NB ? N - j0 : RT_GEMM_NB;
        int64_t i = 0;
        for (; i + 4 <= M; i += 4)
            rt_gemm_rows4(nb, K, K, N, A + i * K, B + j0, C + i * N + j0, C + (i + 1) * N + j0,
                          C + (i + 2) * N + j0, C + (i + 3) * N + j0);
        for (; i < M; i++) rt_gemm_row(nb, K, N, A + i * K, B + j0, C + i * N + j0);
    }
}

/* T (C, R) = X (R, C) transposed. */
static void rt_transpose(int64_t R, int64_t C, const float *restrict X, float *restrict T) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) T[c * R + r] = X[r * C + c];
}
