/*
 * avg_pool2d.c (export runtime): nn.avg_pool2d over pool_geom.c's
 * geometry: the taps inside the data summed in order, divided by TVM's
 * element count (src/backend/cpu/pool.c has the formulas' derivation and
 * the same code: the artifact links nothing of relayc, so the runtime
 * carries its own copy); the CPU target's loop (bitwise its result).
 */
#include <stdint.h>

static int64_t rt_count_incl(int64_t o, int64_t s, int64_t d, int64_t k, int64_t head, int64_t len,
                             int64_t tail) {
    int64_t start = o * s - head, last = start + (k - 1) * d, lim = len + tail - 1;
    return ((last < lim ? last : lim) - start) / d + 1;
}

static int64_t rt_count_excl(int64_t o, int64_t s, int64_t d, int64_t k, int64_t head, int64_t len) {
    int64_t start = o * s - head, last = start + (k - 1) * d;
    int64_t jumps = (d - 1 - start) / d;
    if (jumps < 0) jumps = 0;
    if (last > len - 1) last = len - 1;
    return (last - (start + d * jumps)) / d + 1;
}

static int64_t rt_pool_divisor(const rt_pool *g, int64_t oh, int64_t ow) {
    if (g->include_pad)
        return rt_count_incl(oh, g->sh, g->dh, g->PH, g->pt, g->H, g->pb) *
               rt_count_incl(ow, g->sw, g->dw, g->PW, g->pl, g->W, g->pr);
    int64_t n = rt_count_excl(oh, g->sh, g->dh, g->PH, g->pt, g->H) *
                rt_count_excl(ow, g->sw, g->dw, g->PW, g->pl, g->W);
    return n > 1 ? n : 1;
}

static void rt_avg_pool2d(const rt_pool *g, const float *x, float *y) {
    for (int64_t p = 0; p < g->P; p++, x += g->H * g->W)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float sum = 0;
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
