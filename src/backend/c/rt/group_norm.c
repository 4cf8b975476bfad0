/*
 * group_norm.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.group_norm and nn.instance_norm (G = C), the data
 * viewed as (N, A, C, I) around the axis; group g of sample n normalized
 * over its A * (C / G) * I values with the biased variance, in double, in
 * the CPU target's order (src/backend/cpu/norm.c): the same bits.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_group_norm)(int64_t N, int64_t A, int64_t C, int64_t I, int64_t G, double eps, int center, int scale,
                               const RT_T *x, const RT_T *gamma, const RT_T *beta, RT_T *y) {
    int64_t cg = C / G, cnt = A * cg * I;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            double s = 0, q = 0;
            for (int64_t a = 0; a < A; a++)
                for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                    const RT_T *xs = x + ((n * A + a) * C + ch) * I;
                    for (int64_t i = 0; i < I; i++) s += xs[i];
                }
            double mean = s / (double)cnt;
            for (int64_t a = 0; a < A; a++)
                for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                    const RT_T *xs = x + ((n * A + a) * C + ch) * I;
                    for (int64_t i = 0; i < I; i++) q += (xs[i] - mean) * (xs[i] - mean);
                }
            double rstd = 1.0 / sqrt(q / (double)cnt + eps);
            for (int64_t a = 0; a < A; a++)
                for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {
                    const RT_T *xs = x + ((n * A + a) * C + ch) * I;
                    RT_T *ys = y + ((n * A + a) * C + ch) * I;
                    double gm = (scale ? gamma[ch] : 1.0) * rstd, b = center ? beta[ch] : 0.0;
                    for (int64_t i = 0; i < I; i++) ys[i] = (RT_T)((xs[i] - mean) * gm + b);
                }
        }
}
