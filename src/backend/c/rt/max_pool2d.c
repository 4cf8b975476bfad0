/*
 * max_pool2d.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.max_pool2d over pool_geom.c's geometry: the lowest
 * finite RT_T, then every tap inside the data, NaN propagating; the CPU
 * target's loop (bitwise its result).
 */
#include <stdint.h>

/* One output row of rt_pool_is_2x2's windows from input rows r0, r1
 * (restrict: a pool's result never takes over its input's buffer). The
 * general loop's "v > m or v is NaN" compiles to branches on the data
 * (a third of LeNet's pool time went to mispredicting them); here the
 * window's max is four selects gcc turns into maxss, and a window with a
 * NaN, rare and so predicted, takes its last NaN, as that loop does: the
 * same bits, signed zeros and NaN payloads included. */
static void RT_(rt_max_pool_row2)(int64_t OW, const RT_T *restrict r0, const RT_T *restrict r1, RT_T *restrict y) {
    for (int64_t ow = 0; ow < OW; ow++) {
        const RT_T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        RT_T m = RT_LOWEST;
        m = a > m ? a : m, m = b > m ? b : m, m = c > m ? c : m, m = d > m ? d : m;
        if ((a != a) | (b != b) | (c != c) | (d != d)) m = d != d ? d : c != c ? c : b != b ? b : a;
        y[ow] = m;
    }
}

static void RT_(rt_max_pool2d)(const rt_pool *g, const RT_T *x, RT_T *y) {
    if (rt_pool_is_2x2(g)) {
        for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
            for (int64_t oh = 0; oh < g->OH; oh++, y += g->OW)
                RT_(rt_max_pool_row2)(g->OW, x + 2 * oh * g->W, x + (2 * oh + 1) * g->W, y);
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
