/*
 * gemm_blas.c (export runtime, relayc export --blas): gemm.c's and
 * gemm_kernel.c's interface over CBLAS: a "packed" B is B itself as a row-major (K, N) copy
 * (transposed once when it is a dense weight), and rt_gemm is one
 * cblas_sgemm, the call the VM makes on the CPU target, so GEMMs sum in
 * OpenBLAS's order there too. Links with -lopenblas (or any CBLAS).
 */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#define rt_gemm_rows rt_gemm /* conv2d.c: a row-major B is rt_gemm's own */
#define rt_conv_direct(g, x, w, y, work) 0 /* conv2d.c: im2col and cblas_sgemm, as the VM */
#define RT_NR 16
#define RT_PACKED(K, N) ((size_t)(K) * (size_t)(N))

/* inline: a convolution alone never packs */
static inline void rt_pack(int64_t K, int64_t N, const float *restrict src, int trans, float *restrict P) {
    if (!trans) {
        memcpy(P, src, sizeof(float) * RT_PACKED(K, N));
        return;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) P[k * N + j] = src[j * K + k];
}

static void rt_gemm(int64_t M, int64_t N, int64_t K, const float *A, const float *P, float *C) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        memset(C, 0, sizeof(float) * (size_t)M * (size_t)N);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K, P, (int)N, 0.0f, C,
                (int)N);
}
