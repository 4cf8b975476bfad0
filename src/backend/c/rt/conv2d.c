/*
 * conv2d.c (export runtime, one copy per float dtype RT_T, emit_model.c):
 * nn.conv2d on NCHW data with OIHW weights, any strides, padding,
 * dilation and groups (conv_geom.c), as GEMMs: per image and group, the
 * input's patches (k = (channel, kh, kw), a column per output pixel, taps
 * in the padding 0) are gathered row by row, and
 * Y (Og, OH*OW) = W (Og, Cg*KH*KW) P with the GEMM reading P in place
 * (float32: gemm_kernel.c's tiles; float64: gemm_f64.c), where
 * conv_direct.c (float32 without --blas) does not take it. Each output
 * element is the sum over (channel, kh, kw) in that order; the VM's
 * im2col + OpenBLAS blocks that sum, so the two agree to rounding.
 * work holds rt_conv_work(...) values.
 */
#include <stdint.h>

/* col (Cg*KH*KW, OH*OW) := the patches of channels [0, Cg) of x, a row per
 * (channel, kh, kw) written as runs of each output row (taps in the
 * padding 0). */
static void RT_(rt_im2col)(const rt_conv *g, const RT_T *restrict x, int64_t Cg, RT_T *restrict col) {
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                int64_t lo, hi, off = kw * g->dw;
                rt_conv_cols(g->OW, g->W, g->sw, g->pl, off, &lo, &hi);
                for (int64_t oh = 0; oh < g->OH; oh++, col += g->OW) {
                    int64_t ih = oh * g->sh - g->pt + kh * g->dh;
                    if (ih < 0 || ih >= g->H) {
                        for (int64_t ow = 0; ow < g->OW; ow++) col[ow] = 0;
                        continue;
                    }
                    const RT_T *restrict xr = x + (c * g->H + ih) * g->W - g->pl + off;
                    for (int64_t ow = 0; ow < lo; ow++) col[ow] = 0;
                    if (g->sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow * g->sw];
                    for (int64_t ow = hi; ow < g->OW; ow++) col[ow] = 0;
                }
            }
}

static void RT_(rt_conv2d)(const rt_conv *g, const RT_T *x, const RT_T *w, RT_T *y, RT_T *work) {
    if (RT_(rt_conv_direct)(g, x, w, y, work)) return; /* float32: conv_direct.c, where it fits */
    int64_t Cg = g->C / g->groups, Og = g->O / g->groups, K = Cg * g->KH * g->KW, npix = g->OH * g->OW;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t gr = 0; gr < g->groups; gr++) {
            RT_(rt_im2col)(g, x + (n * g->C + gr * Cg) * g->H * g->W, Cg, work);
            RT_(rt_gemm_rows)(Og, npix, K, w + gr * Og * K, work, y + (n * g->O + gr * Og) * npix);
        }
}
