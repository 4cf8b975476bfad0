/*
 * max_pool2d.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.max_pool2d over pool_geom.c's geometry: the lowest
 * finite RT_T, then every tap inside the data, NaN propagating; the CPU
 * target's loop (bitwise its result).
 */
#include <stdint.h>

static void RT_(rt_max_pool2d)(const rt_pool *g, const RT_T *x, RT_T *y) {
    if (rt_pool_is_2x2(g)) {
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
            for (int64_t oh = 0; oh < g->OH; oh++) {
                const RT_T *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    RT_T m = RT_LOWEST, v;
                    v = r0[2 * ow], m = ((v > m) | (v != v)) ? v : m;
                    v = r0[2 * ow + 1], m = ((v > m) | (v != v)) ? v : m;
                    v = r1[2 * ow], m = ((v > m) | (v != v)) ? v : m;
                    v = r1[2 * ow + 1], m = ((v > m) | (v != v)) ? v : m;
                    *y++ = m;
                }
            }
        return;
    }
    for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                RT_T m = RT_LOWEST;
                for (int64_t kh = 0; kh < g->PH; kh++) {
                    int64_t ih = oh * g->sh - g->pt + kh * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int64_t kw = 0; kw < g->PW; kw++) {
                        int64_t iw = ow * g->sw - g->pl + kw * g->dw;
                        if (iw < 0 || iw >= g->W) continue;
                        RT_T v = x[ih * g->W + iw];
                        if (v > m || v != v) m = v;
                    }
                }
                *y++ = m;
            }
}
