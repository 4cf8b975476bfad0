/*
 * softmax.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.softmax and nn.log_softmax along one axis, the tensor
 * viewed as (O, N, I) (N the axis). As the CPU target
 * (src/backend/cpu/softmax.c): the row's maximum subtracted, the sum of
 * exponentials accumulated in double in order, the result divided (or the
 * log-sum subtracted) in double. The exponentials are libm's (RT_EXP:
 * expf, exp) where the CPU target uses its vector exp for float32 (within
 * 2 ulp): the results agree to rounding.
 */
#include <math.h>
#include <stdint.h>

static void RT_(rt_softmax)(int64_t O, int64_t N, int64_t I, int log_, const RT_T *x, RT_T *y) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            const RT_T *xr = x + o * N * I + i;
            RT_T *yr = y + o * N * I + i;
            RT_T m = -INFINITY;
            for (int64_t n = 0; n < N; n++)
                if (xr[n * I] > m) m = xr[n * I];
            double z = 0;
            for (int64_t n = 0; n < N; n++) z += RT_EXP(xr[n * I] - m);
            if (log_) {
                double lz = m + log(z);
                for (int64_t n = 0; n < N; n++) yr[n * I] = (RT_T)((double)xr[n * I] - lz);
            } else {
                for (int64_t n = 0; n < N; n++) yr[n * I] = (RT_T)((double)RT_EXP(xr[n * I] - m) / z);
            }
        }
}
