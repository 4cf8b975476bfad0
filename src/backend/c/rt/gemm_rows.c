/*
 * gemm_rows.c (export runtime): the float32 convolution's GEMM
 * (conv2d.c) over gemm_kernel.c's tiles, written only where a float32
 * conv2d is (--blas: gemm_blas.c's rt_gemm instead).
 */
#include <stdint.h>

/* C (M, N) = A (M, K) B for a row-major B (K, N) read in place, which must
 * be followed by RT_NR readable floats (a short K, as a convolution's
 * patches have: their rows stay in cache, packing would cost more). */
static void rt_gemm_rows(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    for (int64_t j0 = 0; j0 < N; j0 += RT_NR) {
        int nc = N - j0 < RT_NR ? (int)(N - j0) : RT_NR;
        rt_gemm_panel(M, K, nc, A, B + j0, N, C + j0, N);
    }
}
