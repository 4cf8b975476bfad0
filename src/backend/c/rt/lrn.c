/*
 * lrn.c (export runtime, one copy per float dtype RT_T, emit_model.c):
 * nn.lrn, the data viewed as (O, C, I) around the axis: each value over
 * (bias + alpha * s / size)^beta, s the sum of squares over the channel
 * window [ch - size/2, ch + size/2] clipped to [0, C), in double, in the
 * CPU target's order (src/backend/cpu/norm.c): the same bits.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_lrn)(int64_t O, int64_t C, int64_t I, int64_t size, double bias, double alpha, double beta,
                        const RT_T *x, RT_T *y) {
    int64_t half = size / 2;
    for (int64_t o = 0; o < O; o++)
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t lo = ch - half < 0 ? 0 : ch - half, hi = ch + half >= C ? C - 1 : ch + half;
            for (int64_t i = 0; i < I; i++) {
                double s = 0;
                for (int64_t k = lo; k <= hi; k++) {
                    double v = x[(o * C + k) * I + i];
                    s += v * v;
                }
                y[(o * C + ch) * I + i] = (RT_T)(x[(o * C + ch) * I + i] / pow(bias + alpha * s / (double)size, beta));
            }
        }
}
