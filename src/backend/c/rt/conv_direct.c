/*
 * conv_direct.c (export runtime, float32 without --blas): nn.conv2d
 * without the patch matrix that conv2d.c's im2col writes (as many copies
 * of an image as it has taps, gathered in a pass of their own and read
 * back from beyond the L1 cache: half a LeNet call). Per image and group
 * the channels are copied once into a zero-bordered block (the padding;
 * read in place where there is none, by the tiles across channels) and
 * the kernels below read the taps from it through a table of offsets,
 * k = (channel, kh, kw) in conv2d.c's order: each output is the same sum,
 * in the same order, as im2col and gemm_kernel.c's tiles give (the same
 * bits). Two shapes of tile, whichever leaves fewer of its 16 lanes idle:
 * up to 6 output channels by 16 pixels of an output row (stride 1 across:
 * LeNet's conv1, 6 channels, rows of 28), or 6 pixels by 16 output
 * channels, the weights packed into rt_pack's panels (any stride: LeNet's
 * conv2, 16 channels, rows of 10). Taken where the bordered block fits in
 * the patch matrix's room (rt_conv_work), else conv2d.c's im2col runs.
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(RT_PLAIN_C)
/* Stores a tile of mr pixels' 16-float rows acc across: channel j of
 * pixel r at c[j * ldc + r], j < nc. */
static inline void rt_tile_store_across(int mr, int nc, const void *acc, float *restrict c, int64_t ldc) {
    float t[6][RT_NR];
    memcpy(t, acc, sizeof t);
    for (int j = 0; j < nc; j++)
        for (int r = 0; r < mr; r++) c[j * ldc + r] = t[r][j];
}

/* rows [0, mr) (mr <= 6) x columns [0, nc) of C (ldc apart) = a's rows
 * (output channels, K apart) times the taps of 16 pixels of a row: tap k
 * of pixel j at p[off[k] + j] (read 16 wide past column nc). */
RT_CLONES static void rt_conv_tile_px8(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                                       const int32_t *restrict off, float *restrict c, int64_t ldc) {
    RT_ACC6_DECL;
    const float *a1 = a + (mr > 1 ? K : 0), *a2 = a + (mr > 2 ? 2 * K : 0), *a3 = a + (mr > 3 ? 3 * K : 0),
                *a4 = a + (mr > 4 ? 4 * K : 0), *a5 = a + (mr > 5 ? 5 * K : 0);
    for (int64_t k = 0; k < K; k++) {
        rt_v8 b0, b1;
        rt_row8(p + off[k], &b0, &b1);
        RT_ACC6_ADD(a[k], a1[k], a2[k], a3[k], a4[k], a5[k]);
    }
    const rt_v8 acc[6][2] = RT_ACC6_ROWS;
    rt_tile_store(mr, nc, acc, c, ldc);
}

/* mr <= 6 pixels (tap k of pixel r at x[r][off[k]]) times a K x 16 panel
 * of rt_pack's (16 output channels), stored across: channel j of pixel r
 * at c[j * ldc + r], j < nc. */
RT_CLONES static void rt_conv_tile_ch8(int64_t K, int mr, int nc, const float *const *x, const float *restrict p,
                                       const int32_t *restrict off, float *restrict c, int64_t ldc) {
    RT_ACC6_DECL;
    const float *restrict x0 = x[0], *restrict x1 = x[mr > 1 ? 1 : 0], *restrict x2 = x[mr > 2 ? 2 : 0],
                          *restrict x3 = x[mr > 3 ? 3 : 0], *restrict x4 = x[mr > 4 ? 4 : 0],
                          *restrict x5 = x[mr > 5 ? 5 : 0];
    for (int64_t k = 0; k < K; k++, p += RT_NR) {
        rt_v8 b0, b1;
        rt_row8(p, &b0, &b1);
        const int32_t o = off[k];
        RT_ACC6_ADD(x0[o], x1[o], x2[o], x3[o], x4[o], x5[o]);
    }
    const rt_v8 acc[6][2] = RT_ACC6_ROWS;
    rt_tile_store_across(mr, nc, acc, c, ldc);
}

#ifdef RT_WIDE
/* rt_conv_tile_px8 and rt_conv_tile_ch8 over 16-float vectors (AVX-512,
 * gemm_kernel.c's RT_WIDE). */
RT_WIDE static void rt_conv_tile_px16(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                                      const int32_t *restrict off, float *restrict c, int64_t ldc) {
    rt_v16 c0 = {0}, c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const float *a1 = a + (mr > 1 ? K : 0), *a2 = a + (mr > 2 ? 2 * K : 0), *a3 = a + (mr > 3 ? 3 * K : 0),
                *a4 = a + (mr > 4 ? 4 * K : 0), *a5 = a + (mr > 5 ? 5 * K : 0);
    for (int64_t k = 0; k < K; k++) {
        rt_v16 b;
        memcpy(&b, p + off[k], sizeof b);
        c0 += a[k] * b, c1 += a1[k] * b, c2 += a2[k] * b, c3 += a3[k] * b, c4 += a4[k] * b, c5 += a5[k] * b;
    }
    const rt_v16 acc[6] = {c0, c1, c2, c3, c4, c5};
    rt_tile_store(mr, nc, acc, c, ldc);
}

RT_WIDE static void rt_conv_tile_ch16(int64_t K, int mr, int nc, const float *const *x, const float *restrict p,
                                      const int32_t *restrict off, float *restrict c, int64_t ldc) {
    rt_v16 c0 = {0}, c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const float *restrict x0 = x[0], *restrict x1 = x[mr > 1 ? 1 : 0], *restrict x2 = x[mr > 2 ? 2 : 0],
                          *restrict x3 = x[mr > 3 ? 3 : 0], *restrict x4 = x[mr > 4 ? 4 : 0],
                          *restrict x5 = x[mr > 5 ? 5 : 0];
    for (int64_t k = 0; k < K; k++, p += RT_NR) {
        rt_v16 b;
        memcpy(&b, p, sizeof b);
        const int32_t o = off[k];
        c0 += x0[o] * b, c1 += x1[o] * b, c2 += x2[o] * b, c3 += x3[o] * b, c4 += x4[o] * b, c5 += x5[o] * b;
    }
    const rt_v16 acc[6] = {c0, c1, c2, c3, c4, c5};
    rt_tile_store_across(mr, nc, acc, c, ldc);
}
#endif

/* The tiles in the widest build the CPU runs. */
static void rt_conv_tile_px(int64_t K, int mr, int nc, const float *a, const float *p, const int32_t *off, float *c,
                            int64_t ldc) {
    RT_PICK(rt_conv_tile_px)(K, mr, nc, a, p, off, c, ldc);
}

static void rt_conv_tile_ch(int64_t K, int mr, int nc, const float *const *x, const float *p, const int32_t *off,
                            float *c, int64_t ldc) {
    RT_PICK(rt_conv_tile_ch)(K, mr, nc, x, p, off, c, ldc);
}
#else
static void rt_conv_tile_px(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                            const int32_t *restrict off, float *restrict c, int64_t ldc) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nc; j++) {
            float s = 0;
            for (int64_t k = 0; k < K; k++) s += a[r * K + k] * p[off[k] + j];
            c[r * ldc + j] = s;
        }
}

static void rt_conv_tile_ch(int64_t K, int mr, int nc, const float *const *x, const float *restrict p,
                            const int32_t *restrict off, float *restrict c, int64_t ldc) {
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nc; j++) {
            float s = 0;
            for (int64_t k = 0; k < K; k++) s += x[r][off[k]] * p[k * RT_NR + j];
            c[j * ldc + r] = s;
        }
}
#endif

/* xp (Cg, hn, wn) := channels [0, Cg) of x with row i holding ih = i - pt
 * and column j iw = j - pl, zero outside the image; 16 zeros after it
 * (rt_conv_tile_px reads 16 wide). */
static void rt_conv_border(const rt_conv *g, const float *restrict x, int64_t Cg, int64_t hn, int64_t wn,
                           float *restrict xp) {
    int64_t lo, hi; /* the columns j with iw in [0, W) */
    rt_conv_cols(wn, g->W, 1, g->pl, 0, &lo, &hi);
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t i = 0; i < hn; i++, xp += wn) {
            int64_t ih = i - g->pt;
            if (ih < 0 || ih >= g->H) {
                memset(xp, 0, sizeof(float) * (size_t)wn);
                continue;
            }
            memset(xp, 0, sizeof(float) * (size_t)lo);
            if (hi > lo) memcpy(xp + lo, x + (c * g->H + ih) * g->W + lo - g->pl, sizeof(float) * (size_t)(hi - lo));
            memset(xp + hi, 0, sizeof(float) * (size_t)(wn - hi));
        }
    memset(xp, 0, sizeof(float) * 16);
}

/* One image group's output yg (Og, OH*OW) from its taps xb (rows rs
 * apart; offsets off) and weights wg (Og, K): output rows in 16s by up to
 * 6 channels. */
static void rt_conv_by_pixels(const rt_conv *g, int64_t Og, int64_t K, const float *wg, const float *xb, int64_t rs,
                              const int32_t *off, float *yg) {
    int64_t npix = g->OH * g->OW;
    for (int64_t o = 0; o < Og; o += 6)
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow += RT_NR)
                rt_conv_tile_px(K, Og - o < 6 ? (int)(Og - o) : 6, g->OW - ow < RT_NR ? (int)(g->OW - ow) : RT_NR,
                                wg + o * K, xb + oh * g->sh * rs + ow, off, yg + o * npix + oh * g->OW + ow, npix);
}

/* The same by 6 pixels at a time across the packed weights pw (panels of
 * 16 channels). */
static void rt_conv_by_channels(const rt_conv *g, int64_t Og, int64_t K, const float *pw, const float *xb, int64_t rs,
                                const int32_t *off, float *yg) {
    int64_t npix = g->OH * g->OW;
    for (int64_t q = 0; q < npix; q += 6) {
        int mr = npix - q < 6 ? (int)(npix - q) : 6;
        const float *px[6];
        for (int r = 0; r < mr; r++) px[r] = xb + (q + r) / g->OW * g->sh * rs + (q + r) % g->OW * g->sw;
        for (int64_t j = 0; j < Og; j += RT_NR)
            rt_conv_tile_ch(K, mr, Og - j < RT_NR ? (int)(Og - j) : RT_NR, px, pw + j * K, off, yg + j * npix + q, npix);
    }
}

/* nn.conv2d as above, or 0 where conv2d.c's im2col must run instead (the
 * bordered block is larger than the patch matrix, or its offsets pass
 * int32); work holds rt_conv_work(...) floats. */
static int rt_conv_direct(const rt_conv *g, const float *x, const float *w, float *y, float *work) {
    int64_t Cg = g->C / g->groups, Og = g->O / g->groups, K = Cg * g->KH * g->KW, npix = g->OH * g->OW;
    /* the rows and columns the taps reach, from the first tap of the first pixel */
    int64_t hn = (g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1, wn = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;
    if (npix == 0 || Cg * hn * wn > K * npix || Cg * hn * wn > INT32_MAX) return 0;
    /* lanes used of the tiles across pixels (an output row in 16s) against across channels */
    int64_t row16 = (g->OW + RT_NR - 1) / RT_NR * RT_NR, och16 = (Og + RT_NR - 1) / RT_NR * RT_NR;
    int by_pixel = g->sw == 1 && g->OW * och16 > Og * row16;
    /* across channels, with no border to add, the taps are read from x itself (a
     * pixel tile reads 16 wide: past the end of x, where a border copy has room) */
    int in_place = !by_pixel && g->pt == 0 && g->pl == 0 && hn <= g->H && wn <= g->W;
    int64_t rs = in_place ? g->W : wn, cs = in_place ? g->H * g->W : hn * wn;
    int32_t *off = (int32_t *)(void *)(work + K * npix + 16); /* K floats' room */
    float *pw = work + K * npix + 16 + K;                      /* rt_conv_tile_ch's panels */
    for (int64_t c = 0, k = 0; c < Cg; c++)
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) off[k++] = (int32_t)(c * cs + kh * g->dh * rs + kw * g->dw);
    for (int64_t gr = 0; gr < g->groups; gr++) {
        const float *wg = w + gr * Og * K;
        if (!by_pixel) rt_pack(K, Og, wg, 1, pw);
        for (int64_t n = 0; n < g->N; n++) {
            const float *xg = x + (n * g->C + gr * Cg) * g->H * g->W, *xb = xg;
            float *yg = y + (n * g->O + gr * Og) * npix;
            if (!in_place) rt_conv_border(g, xg, Cg, hn, wn, work), xb = work;
            if (by_pixel) rt_conv_by_pixels(g, Og, K, wg, xb, rs, off, yg);
            else rt_conv_by_channels(g, Og, K, pw, xb, rs, off, yg);
        }
    }
    return 1;
}
