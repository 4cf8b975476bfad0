/*
 * max_pool2d.c (export runtime): nn.max_pool2d over pool_geom.c's
 * geometry: the lowest float, then every tap inside the data, NaN
 * propagating; the CPU target's loop (bitwise its result).
 */
#include <float.h>
#include <stdint.h>

static void rt_max_pool2d(const rt_pool *g, const float *x, float *y) {
    for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float m = -FLT_MAX;
                for (int64_t kh = 0; kh < g->PH; kh++) {
                    int64_t ih = oh * g->sh - g->pt + kh * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    for (int64_t kw = 0; kw < g->PW; kw++) {
                        int64_t iw = ow * g->sw - g->pl + kw * g->dw;
                        if (iw < 0 || iw >= g->W) continue;
                        float v = x[ih * g->W + iw];
                        if (v > m || v != v) m = v;
                    }
                }
                *y++ = m;
            }
}
