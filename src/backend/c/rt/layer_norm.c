/*
 * layer_norm.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.layer_norm, the data viewed as (O, N, I) around the
 * axis, each (o, i) normalized over its N values with the biased
 * variance, in double, in the CPU target's order (src/backend/cpu/norm.c):
 * the same bits.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_layer_norm)(int64_t O, int64_t N, int64_t I, double eps, int center, int scale, const RT_T *x,
                               const RT_T *gamma, const RT_T *beta, RT_T *y) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            const RT_T *xo = x + o * N * I + i;
            RT_T *yo = y + o * N * I + i;
            double m = 0, q = 0;
            for (int64_t k = 0; k < N; k++) m += xo[k * I];
            m /= (double)N;
            for (int64_t k = 0; k < N; k++) q += (xo[k * I] - m) * (xo[k * I] - m);
            double r = 1.0 / sqrt(q / (double)N + eps);
            for (int64_t k = 0; k < N; k++)
                yo[k * I] = (RT_T)((xo[k * I] - m) * r * (scale ? gamma[k] : 1.0) + (center ? beta[k] : 0.0));
        }
}
