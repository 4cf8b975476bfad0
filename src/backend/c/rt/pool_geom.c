/*
 * pool_geom.c (export runtime): the geometry of nn.max_pool2d and
 * nn.avg_pool2d (max_pool2d.c, avg_pool2d.c) on NCHW planes of either
 * float dtype, with TVM's semantics as the CPU target computes them
 * (src/backend/cpu/pool.c): padding (top, left, bottom, right), taps in
 * the padding skipped. ceil_mode is already in the output size the type
 * relation gave. The same loops and order as the CPU's, so results are
 * bitwise the VM's.
 */
#include <float.h>
#include <stdint.h>

typedef struct rt_pool {
    int64_t P, H, W, OH, OW, PH, PW, sh, sw, dh, dw, pt, pl, pb, pr;
    int include_pad; /* avg: count the padding (count_include_pad) */
} rt_pool;

/* The common LeNet/VGG pool, 2x2 windows at stride 2 wholly inside the
 * data: straight loops, no bounds checks (the CPU target's fast path).
 * inline: only a max pool asks. */
static inline int rt_pool_is_2x2(const rt_pool *g) {
    return g->PH == 2 && g->PW == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && g->pt == 0 &&
           g->pl == 0 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}
