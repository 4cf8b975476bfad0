/*
 * gemm_f64.c (export runtime): the float64 GEMM of every exported dense,
 * matmul, batch_matmul, fused.matmul and conv2d on double data:
 * C (M, N) = A (M, K) B for row-major A and B (K, N) (a b read transposed
 * is transposed into scratch first, transpose.c), in plain loops the C
 * compiler vectorizes along a row of C. Each C element is the sum over k
 * in increasing order (the VM's OpenBLAS dgemm blocks K: the two agree to
 * double rounding). --blas leaves it as it is: float64 models are for
 * checking, not speed.
 */
#include <stdint.h>

static void rt_gemm_f64(int64_t M, int64_t N, int64_t K, const double *restrict A, const double *restrict B,
                        double *restrict C) {
    for (int64_t i = 0; i < M; i++) {
        double *restrict c = C + i * N;
        for (int64_t j = 0; j < N; j++) c[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            const double a = A[i * K + k];
            const double *restrict b = B + k * N;
            for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

#define rt_gemm_rows_f64 rt_gemm_f64 /* conv2d.c: its patches are a row-major B already */
#define rt_conv_direct_f64(g, x, w, y, work) 0 /* conv2d.c: float64 convolutions run as im2col */
