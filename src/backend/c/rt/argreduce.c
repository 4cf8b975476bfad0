/*
 * argreduce.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): argmax and argmin over one run of axes, the tensor viewed
 * as (O, R, I): the index within the run (int32) of the first extreme, or
 * the last with select_last_index; the first NaN wins, as in NumPy and
 * the CPU target (src/backend/cpu/reduce.c).
 */
#include <stdint.h>

static void RT_(rt_argreduce)(int64_t O, int64_t R, int64_t I, int is_max, int last, const RT_T *x, int32_t *y) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            int64_t at = -1;
            double cur = 0;
            for (int64_t r = 0; r < R; r++) {
                double v = x[(o * R + r) * I + i];
                int better = at < 0;
                if (!better && cur == cur)
                    better = v != v || (last ? (is_max ? v >= cur : v <= cur) : (is_max ? v > cur : v < cur));
                if (better) at = r, cur = v;
            }
            y[o * I + i] = (int32_t)(at < 0 ? 0 : at);
        }
}
