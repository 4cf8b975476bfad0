/*
 * conv_geom.c (export runtime): the geometry of nn.conv2d (conv2d.c) on
 * NCHW data with OIHW weights, whatever the dtype: the sizes the type
 * relation checked when the model was exported, the work block's size
 * and the output columns whose taps lie inside a row.
 */
#include <stdint.h>

typedef struct rt_conv {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw, groups;
} rt_conv;

/* work, K = Cg*KH*KW taps of Og output channels a group: the patches
 * (K, OH*OW) row-major and 16 values after them (gemm_kernel.c's
 * rt_gemm_rows reads rows 16 wide), or conv_direct.c's bordered image in
 * their place; then conv_direct.c's K tap offsets and its K x 16 panels
 * of the weights. */
#define rt_conv_work(Cg, Og, KH, KW, OH, OW)                                                                          \
    ((size_t)(Cg) * (KH) * (KW) * ((size_t)(OH) * (OW) + 1 + ((size_t)(Og) + 15) / 16 * 16) + 16)

/* The output columns [lo, hi) whose tap iw = ow*s - p + off lies in [0, W). */
static void rt_conv_cols(int64_t OW, int64_t W, int64_t s, int64_t p, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = p - off, b = W - 1 + p - off; /* a <= ow*s <= b */
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = b < 0 ? 0 : b / s + 1;
    if (*hi > OW) *hi = OW;
    if (*lo > *hi) *lo = *hi;
}
