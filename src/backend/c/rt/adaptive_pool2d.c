/*
 * adaptive_pool2d.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.adaptive_avg_pool2d and nn.adaptive_max_pool2d over P
 * planes of H x W: output (oh, ow) pools rows [oh*H/OH, ceil((oh+1)*H/OH))
 * and the columns alike, summed in RT_T in order or its max from the
 * lowest finite value, NaN winning, as the CPU target does
 * (src/backend/cpu/pool.c): the same bits.
 */
#include <stdint.h>

static void RT_(rt_adaptive_pool2d)(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW, int is_max, const RT_T *x,
                                    RT_T *y) {
    for (int64_t p = 0; p < P; p++, x += H * W)
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
                RT_T acc = is_max ? RT_LOWEST : (RT_T)0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        RT_T v = x[ih * W + iw];
                        if (!is_max) acc = acc + v;
                        else if (v > acc || v != v) acc = v;
                    }
                *y++ = is_max ? acc : acc / (RT_T)((h1 - h0) * (w1 - w0));
            }
        }
}
