/*
 * conv2d.c (export runtime): nn.conv2d on NCHW float32 data with OIHW
 * weights, any strides, padding, dilation and groups (the geometry the
 * type relation checked when the model was exported). Direct: for each
 * output plane, every weight tap adds a scaled row of the input to a row
 * of the output, so the inner loop is an axpy the compiler vectorizes.
 * Each output element is the sum over (input channel, kh, kw) in that
 * order; the VM's im2col + GEMM sums in OpenBLAS's order, so the two agree
 * to rounding.
 */
#include <stdint.h>

typedef struct rt_conv {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw, groups;
} rt_conv;

/* The first output column whose tap iw = ow*s - p + k*d is >= 0, and the
 * end of those with iw < W. */
static void rt_conv_cols(int64_t OW, int64_t W, int64_t s, int64_t p, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = p - off; /* ow*s >= a */
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t b = W - 1 + p - off; /* ow*s <= b */
    *hi = b < 0 ? 0 : b / s + 1;
    if (*hi > OW) *hi = OW;
    if (*lo > *hi) *lo = *hi;
}

static void rt_conv2d(const rt_conv *g, const float *restrict x, const float *restrict w, float *restrict y) {
    int64_t Cg = g->C / g->groups, Og = g->O / g->groups;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++) {
            float *restrict yp = y + (n * g->O + o) * g->OH * g->OW;
            for (int64_t i = 0; i < g->OH * g->OW; i++) yp[i] = 0;
            int64_t c0 = (o / Og) * Cg;
            for (int64_t ci = 0; ci < Cg; ci++) {
                const float *restrict xp = x + (n * g->C + c0 + ci) * g->H * g->W;
                const float *restrict wp = w + (o * Cg + ci) * g->KH * g->KW;
                for (int64_t kh = 0; kh < g->KH; kh++)
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        const float wv = wp[kh * g->KW + kw];
                        int64_t lo, hi, off = kw * g->dw;
                        rt_conv_cols(g->OW, g->W, g->sw, g->pl, off, &lo, &hi);
                        for (int64_t oh = 0; oh < g->OH; oh++) {
                            int64_t ih = oh * g->sh - g->pt + kh * g->dh;
                            if (ih < 0 || ih >= g->H) continue;
                            const float *restrict xr = xp + ih * g->W - g->pl + off;
                            float *restrict yr = yp + oh * g->OW;
                            if (g->sw == 1)
                                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow];
                            else
                                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * g->sw];
                        }
                    }
            }
        }
}
