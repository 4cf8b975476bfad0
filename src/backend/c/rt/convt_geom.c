/*
 * convt_geom.c (export runtime): the geometry of nn.conv2d_transpose that
 * both float dtypes' kernels (conv2d_transpose.c) take: data (N, C, H, W),
 * weights (C, O / G, KH, KW), output (N, O, OH, OW), strides, the top and
 * left padding, dilations, groups.
 */
#include <stdint.h>

typedef struct rt_convt {
    int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
} rt_convt;
