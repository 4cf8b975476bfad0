/*
 * pool_geom.c (export runtime): the geometry of nn.max_pool2d and
 * nn.avg_pool2d (max_pool2d.c, avg_pool2d.c) on NCHW float32 planes, with
 * TVM's semantics as the CPU target computes them (src/backend/cpu/pool.c):
 * padding (top, left, bottom, right), taps in the padding skipped.
 * ceil_mode is already in the output size the type relation gave. The
 * same loops and order as the CPU's, so results are bitwise the VM's.
 */
#include <float.h>
#include <stdint.h>

typedef struct rt_pool {
    int64_t P, H, W, OH, OW, PH, PW, sh, sw, dh, dw, pt, pl, pb, pr;
    int include_pad; /* avg: count the padding (count_include_pad) */
} rt_pool;
