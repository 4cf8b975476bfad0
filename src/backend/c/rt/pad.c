/*
 * pad.c (export runtime): nn.pad's source index along one axis, as the CPU
 * target maps it (src/backend/cpu/nn.c): output index o reads data index
 * o - before when inside [0, n); outside, -1 (the pad value) for
 * "constant", the edge for "edge" (mode 1), mirrored without repeating the
 * edge for "reflect" (mode 2), mirrored repeating it for nn.mirror_pad's
 * "SYMMETRIC" (mode 3).
 */
#include <stdint.h>

static int64_t rt_pad_src(int64_t o, int64_t before, int64_t n, int mode) {
    int64_t j = o - before;
    if (j >= 0 && j < n) return j;
    if (mode == 0) return -1;
    if (mode == 1) return j < 0 ? 0 : n - 1;
    if (mode == 2) return j < 0 ? -j : 2 * (n - 1) - j;
    return j < 0 ? -j - 1 : 2 * n - 1 - j;
}
