/*
 * l2_normalize.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.l2_normalize, x / sqrt(max(s, eps)) with s the sum of
 * squares over the axes whose bits are set in red. For each kept index
 * the reduced axes are walked in index order, so each s adds the same
 * terms in the same order as the CPU target's one pass over the tensor
 * (src/backend/cpu/norm.c): the same bits, with no scratch.
 */
#include <math.h>
#include <stdint.h>

/* Steps the odometer idx over the axes whose bit in mask is set; *off
 * follows it by the row-major strides. */
static void RT_(rt_l2_step)(int nd, const int64_t *shape, const int64_t *stride, unsigned mask, int64_t *idx,
                            int64_t *off) {
    for (int a = nd - 1; a >= 0; a--) {
        if (!(mask >> a & 1)) continue;
        if (++idx[a] < shape[a]) {
            *off += stride[a];
            return;
        }
        *off -= stride[a] * (shape[a] - 1);
        idx[a] = 0;
    }
}

static void RT_(rt_l2_normalize)(int nd, const int64_t *shape, unsigned red, double eps, const RT_T *x, RT_T *y) {
    int64_t stride[8], kept = 1, reduced = 1, kidx[8] = {0}, base = 0;
    unsigned all = (1u << nd) - 1;
    for (int a = nd - 1; a >= 0; a--) {
        stride[a] = a == nd - 1 ? 1 : stride[a + 1] * shape[a + 1];
        if (red >> a & 1) reduced *= shape[a];
        else kept *= shape[a];
    }
    if (kept == 0 || reduced == 0) return;
    for (int64_t k = 0; k < kept; k++) {
        double s = 0;
        for (int pass = 0; pass < 2; pass++) {
            int64_t ridx[8] = {0}, off = 0;
            for (int64_t r = 0; r < reduced; r++) {
                const RT_T v = x[base + off];
                if (pass == 0) s += (double)v * (double)v;
                else y[base + off] = (RT_T)((double)v / sqrt(s > eps ? s : eps));
                RT_(rt_l2_step)(nd, shape, stride, red, ridx, &off);
            }
        }
        RT_(rt_l2_step)(nd, shape, stride, all & ~red, kidx, &base);
    }
}
