/*
 * avg_pool2d.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.avg_pool2d over pool_geom.c's geometry: the taps
 * inside the data summed in order in RT_T, divided by pool_divisor.c's
 * count; the CPU target's loop (bitwise its result).
 */
#include <stdint.h>

static void RT_(rt_avg_pool2d)(const rt_pool *g, const RT_T *x, RT_T *y) {
    for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                RT_T sum = 0;
                for (int64_t kh = 0; kh < g->PH; kh++) {
                    int64_t ih = oh * g->sh - g->pt + kh * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int64_t kw = 0; kw < g->PW; kw++) {
                        int64_t iw = ow * g->sw - g->pl + kw * g->dw;
                        if (iw >= 0 && iw < g->W) sum = sum + x[ih * g->W + iw];
                    }
                }
                *y++ = sum / rt_pool_divisor(g, oh, ow);
            }
}
