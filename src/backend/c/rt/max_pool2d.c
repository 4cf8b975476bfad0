/*
 * max_pool2d.c (export runtime): nn.max_pool2d over pool_geom.c's
 * geometry: the lowest float, then every tap inside the data, NaN
 * propagating; the CPU target's loop (bitwise its result).
 */
#include <float.h>
#include <stdint.h>

/* The common LeNet/VGG pool, 2x2 windows at stride 2 wholly inside the
 * data: straight loops, no bounds checks (the CPU target's fast path). */
static int rt_pool_is_2x2(const rt_pool *g) {
    return g->PH == 2 && g->PW == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && g->pt == 0 &&
           g->pl == 0 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

static void rt_max_pool2d(const rt_pool *g, const float *x, float *y) {
    if (rt_pool_is_2x2(g)) {
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
            for (int64_t oh = 0; oh < g->OH; oh++) {
                const float *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    float m = -FLT_MAX, v;
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
