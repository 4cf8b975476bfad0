/*
 * batch_norm.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.batch_norm at inference, as the CPU target computes
 * it (src/backend/cpu/norm.c): the data viewed as (O, C, I) around the
 * axis, each channel normalized with its moving mean and variance in
 * double, y = (x - mean) * g / sqrt(var + eps) + b; the same expression
 * in the same order, so the same bits.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_batch_norm)(int64_t O, int64_t C, int64_t I, double eps, int center, int scale, const RT_T *x,
                               const RT_T *gamma, const RT_T *beta, const RT_T *mean_, const RT_T *var_, RT_T *y) {
    for (int64_t ch = 0; ch < C; ch++) {
        double mean = mean_[ch], var = var_[ch];
        double g = (scale ? gamma[ch] : 1.0) / sqrt(var + eps), b = center ? beta[ch] : 0.0;
        for (int64_t o = 0; o < O; o++) {
            const RT_T *xs = x + (o * C + ch) * I;
            RT_T *ys = y + (o * C + ch) * I;
            for (int64_t i = 0; i < I; i++) ys[i] = (RT_T)((xs[i] - mean) * g + b);
        }
    }
}
