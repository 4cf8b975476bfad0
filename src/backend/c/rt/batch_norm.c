/*
 * batch_norm.c (export runtime): nn.batch_norm at inference, as the CPU
 * target computes it (src/backend/cpu/norm.c): the data viewed as
 * (O, C, I) around the axis, each channel normalized with its moving
 * mean and variance in double, y = (x - mean) * g / sqrt(var + eps) + b;
 * the same expression in the same order, so the same bits.
 */
#include <math.h>
#include <stdint.h>

static void rt_batch_norm(int64_t O, int64_t C, int64_t I, double eps, int center, int scale, const float *x,
                          const float *gamma, const float *beta, const float *mean_, const float *var_, float *y) {
    for (int64_t ch = 0; ch < C; ch++) {
        double mean = mean_[ch], var = var_[ch];
        double g = (scale ? gamma[ch] : 1.0) / sqrt(var + eps), b = center ? beta[ch] : 0.0;
        for (int64_t o = 0; o < O; o++) {
            const float *xs = x + (o * C + ch) * I;
            float *ys = y + (o * C + ch) * I;
            for (int64_t i = 0; i < I; i++) ys[i] = (float)((xs[i] - mean) * g + b);
        }
    }
}
