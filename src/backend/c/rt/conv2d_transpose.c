/*
 * conv2d_transpose.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): nn.conv2d_transpose, NCHW data and IOHW weights
 * (C, O / G, KH, KW). Each output element gathers the inputs that land on
 * it: y[n, o, oh, ow] = sum over the group's channels c and taps (kh, kw)
 * with oh = h * sh - ph + kh * dh (and ow alike) of x[n, c, h, w] *
 * w[c, o % Og, kh, kw], in RT_T. The CPU target computes the same sums
 * through a GEMM and col2im in another order: equal to rounding. The
 * geometry (rt_convt) is convt_geom.c's.
 */
#include <stdint.h>

static void RT_(rt_conv2d_transpose)(const rt_convt *g, const RT_T *x, const RT_T *w, RT_T *y) {
    int64_t Cg = g->C / g->G, Og = g->O / g->G;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++) {
            int64_t c0 = o / Og * Cg, oo = o % Og;
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    RT_T acc = 0;
                    for (int64_t c = c0; c < c0 + Cg; c++)
                        for (int64_t kh = 0; kh < g->KH; kh++) {
                            int64_t th = oh + g->ph - kh * g->dh;
                            if (th < 0 || th % g->sh || th / g->sh >= g->H) continue;
                            const RT_T *xr = x + ((n * g->C + c) * g->H + th / g->sh) * g->W;
                            const RT_T *wr = w + ((c * Og + oo) * g->KH + kh) * g->KW;
                            for (int64_t kw = 0; kw < g->KW; kw++) {
                                int64_t tw = ow + g->pw - kw * g->dw;
                                if (tw < 0 || tw % g->sw || tw / g->sw >= g->W) continue;
                                acc += xr[tw / g->sw] * wr[kw];
                            }
                        }
                    y[((n * g->O + o) * g->OH + oh) * g->OW + ow] = acc;
                }
        }
}
