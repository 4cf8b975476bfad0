/*
 * conv2d.c (export runtime): nn.conv2d on NCHW float32 data with OIHW
 * weights, any strides, padding, dilation and groups (the geometry the
 * type relation checked when the model was exported), as GEMMs: per image
 * and group, the input's patches (k = (channel, kh, kw), a column per
 * output pixel, taps in the padding 0) are gathered row by row, and
 * Y (Og, OH*OW) = W (Og, Cg*KH*KW) P with gemm_kernel.c's tiles reading
 * P in place. Each output
 * element is the sum over (channel, kh, kw) in that order; the VM's
 * im2col + OpenBLAS blocks that sum, so the two agree to rounding.
 * work holds rt_conv_work(...) floats.
 */
#include <stdint.h>

typedef struct rt_conv {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw, groups;
} rt_conv;

/* work: the patches (K, OH*OW) row-major and RT_NR floats after them
 * (rt_gemm_rows reads rows 16 wide). */
#define rt_conv_work(Cg, KH, KW, OH, OW) ((size_t)(Cg) * (KH) * (KW) * (OH) * (OW) + RT_NR)

#ifdef RT_GEMM_BLAS
#define rt_gemm_rows rt_gemm
#else
/* C (M, N) = A (M, K) B for a row-major B (K, N) read in place, which must
 * be followed by RT_NR readable floats (a short K, as a convolution's
 * patches have: their rows stay in cache, packing would cost more). */
static void rt_gemm_rows(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C) {
    for (int64_t j0 = 0; j0 < N; j0 += RT_NR) {
        int nc = N - j0 < RT_NR ? (int)(N - j0) : RT_NR;
        rt_gemm_panel(M, K, nc, A, B + j0, N, C + j0, N);
    }
}
#endif

/* The output columns [lo, hi) whose tap iw = ow*s - p + off lies in [0, W). */
static void rt_conv_cols(int64_t OW, int64_t W, int64_t s, int64_t p, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = p - off, b = W - 1 + p - off; /* a <= ow*s <= b */
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = b < 0 ? 0 : b / s + 1;
    if (*hi > OW) *hi = OW;
    if (*lo > *hi) *lo = *hi;
}

/* col (Cg*KH*KW, OH*OW) := the patches of channels [0, Cg) of x, a row per
 * (channel, kh, kw) written as runs of each output row (taps in the
 * padding 0). */
static void rt_im2col(const rt_conv *g, const float *restrict x, int64_t Cg, float *restrict col) {
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
                    const float *restrict xr = x + (c * g->H + ih) * g->W - g->pl + off;
                    for (int64_t ow = 0; ow < lo; ow++) col[ow] = 0;
                    if (g->sw == 1)
                        for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++) col[ow] = xr[ow * g->sw];
                    for (int64_t ow = hi; ow < g->OW; ow++) col[ow] = 0;
                }
            }
}

static void rt_conv2d(const rt_conv *g, const float *x, const float *w, float *y, float *work) {
    int64_t Cg = g->C / g->groups, Og = g->O / g->groups, K = Cg * g->KH * g->KW, npix = g->OH * g->OW;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t gr = 0; gr < g->groups; gr++) {
            rt_im2col(g, x + (n * g->C + gr * Cg) * g->H * g->W, Cg, work);
            rt_gemm_rows(Og, npix, K, w + gr * Og * K, work, y + (n * g->O + gr * Og) * npix);
        }
}
