/*
 * softmax.c (export runtime): nn.softmax and nn.log_softmax of float32
 * along one axis, the tensor viewed as (O, N, I) (N the axis). As the CPU
 * target (src/backend/cpu/softmax.c): the row's maximum subtracted, the
 * sum of exponentials accumulated in double in order, the result
 * divided (or the log-sum subtracted) in double. The exponentials are
 * libm's expf where the CPU target uses its vector exp (within 2 ulp):
 * the results agree to rounding.
 */
#include <math.h>
#include <stdint.h>

static void rt_softmax(int64_t O, int64_t N, int64_t I, int log_, const float *x, float *y) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            const float *xr = x + o * N * I + i;
            float *yr = y + o * N * I + i;
            float m = -INFINITY;
            for (int64_t n = 0; n < N; n++)
                if (xr[n * I] > m) m = xr[n * I];
            double z = 0;
            for (int64_t n = 0; n < N; n++) z += expf(xr[n * I] - m);
            if (log_) {
                double lz = m + log(z);
                for (int64_t n = 0; n < N; n++) yr[n * I] = (float)((double)xr[n * I] - lz);
            } else {
                for (int64_t n = 0; n < N; n++) yr[n * I] = (float)((double)expf(xr[n * I] - m) / z);
            }
        }
}
