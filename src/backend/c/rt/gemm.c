/*
 * gemm.c (export runtime): C = A B for row-major float32 A (M, K) and a
 * B packed by gemm_kernel.c's rt_pack (weights once, when the context
 * opens), over gemm_kernel.c's tiles; one row of A (batch 1) against four panels at
 * once. Each C element is the sum over k in increasing order.
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(RT_PLAIN_C)
/* One row of C (a single example: batch 1) against np <= 4 panels at once,
 * so that eight independent sums hide the adds' latency; c gets the
 * panels' nc columns, 16 per panel but the last. */
RT_CLONES static void rt_gemm_row(int64_t K, int np, int nc, const float *restrict a, const float *restrict p,
                                  float *restrict c) {
    rt_v8 acc[4][2];
    memset(acc, 0, sizeof acc);
    const int64_t ps = K * RT_NR; /* one panel */
    const float *p1 = p + (np > 1 ? ps : 0), *p2 = p + (np > 2 ? 2 * ps : 0), *p3 = p + (np > 3 ? 3 * ps : 0);
    rt_v8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
    for (int64_t k = 0; k < K; k++) {
        const float x = a[k];
        const int64_t o = k * RT_NR;
        rt_v8 b[8];
        memcpy(&b[0], p + o, sizeof b[0]), memcpy(&b[1], p + o + 8, sizeof b[0]);
        memcpy(&b[2], p1 + o, sizeof b[0]), memcpy(&b[3], p1 + o + 8, sizeof b[0]);
        memcpy(&b[4], p2 + o, sizeof b[0]), memcpy(&b[5], p2 + o + 8, sizeof b[0]);
        memcpy(&b[6], p3 + o, sizeof b[0]), memcpy(&b[7], p3 + o + 8, sizeof b[0]);
        s00 += x * b[0], s01 += x * b[1], s10 += x * b[2], s11 += x * b[3];
        s20 += x * b[4], s21 += x * b[5], s30 += x * b[6], s31 += x * b[7];
    }
    acc[0][0] = s00, acc[0][1] = s01, acc[1][0] = s10, acc[1][1] = s11;
    acc[2][0] = s20, acc[2][1] = s21, acc[3][0] = s30, acc[3][1] = s31;
    memcpy(c, acc, sizeof(float) * (size_t)nc);
}
#else
static void rt_gemm_row(int64_t K, int np, int nc, const float *restrict a, const float *restrict p,
                        float *restrict c) {
    for (int j = 0; j < nc; j++) {
        float s = 0;
        for (int64_t k = 0; k < K; k++) s += a[k] * p[(j / RT_NR) * K * RT_NR + k * RT_NR + j % RT_NR];
        c[j] = s;
    }
    (void)np;
}

#endif

/* C (M, N) = A (M, K) B, B packed by rt_pack; C overlaps neither. */
static void rt_gemm(int64_t M, int64_t N, int64_t K, const float *A, const float *P, float *C) {
    if (M == 1) {
        for (int64_t j0 = 0; j0 < N; j0 += 4 * RT_NR) {
            int64_t nc = N - j0 < 4 * RT_NR ? N - j0 : 4 * RT_NR;
            rt_gemm_row(K, (int)((nc + RT_NR - 1) / RT_NR), (int)nc, A, P + (size_t)(j0 / RT_NR) * (size_t)K * RT_NR, C + j0);
        }
        return;
    }
    for (int64_t j0 = 0; j0 < N; j0 += RT_NR) {
        int nc = N - j0 < RT_NR ? (int)(N - j0) : RT_NR;
        const float *panel = P + (size_t)(j0 / RT_NR) * (size_t)K * RT_NR;
        rt_gemm_panel(M, K, nc, A, panel, RT_NR, C + j0, N);
    }
}
