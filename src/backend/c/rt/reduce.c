/*
 * reduce.c (export runtime, one copy per float dtype RT_T, emit_model.c):
 * sum, mean, max and min over one run of axes, the tensor viewed as
 * (O, R, I) (R the reduced run), each output accumulated in double in
 * index order and NaN winning a max or min, as the CPU target does
 * (src/backend/cpu/reduce.c; it breaks a long row's sum into four partial
 * sums, so sums agree to double rounding). kind: 0 sum, 1 mean, 2 max,
 * 3 min.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_reduce)(int64_t O, int64_t R, int64_t I, int kind, const RT_T *x, RT_T *y) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            double acc = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0.0;
            for (int64_t r = 0; r < R; r++) {
                double v = x[(o * R + r) * I + i];
                if (kind == 2) acc = (v > acc || v != v) ? v : acc;
                else if (kind == 3) acc = (v < acc || v != v) ? v : acc;
                else acc += v;
            }
            y[o * I + i] = (RT_T)(kind == 1 ? acc / (double)R : acc);
        }
}
