/*
 * pool_divisor.c (export runtime): nn.avg_pool2d's divisor, TVM's element
 * count of a window (src/backend/cpu/pool.c has the formulas' derivation
 * and the same code: the artifact links nothing of relayc, so the runtime
 * carries its own copy), for avg_pool2d.c's loops of either dtype.
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
