/*
 * conv_kernels.h: the CPU kernels of the convolution and pooling family
 * (nn.conv2d, nn.conv2d_transpose, nn.max_pool2d, nn.avg_pool2d, the
 * global and adaptive pools, and the gradient helpers nn.conv2d_backward_weight,
 * nn.max_pool2d_grad, nn.avg_pool2d_grad). They read attributes with
 * src/op/conv_attrs.h, as the type relations do, so shapes and kernels
 * agree on what padding [1, 2] means. Private to the CPU target.
 */
#ifndef RELAYC_BACKEND_CPU_CONV_KERNELS_H
#define RELAYC_BACKEND_CPU_CONV_KERNELS_H

#include "op/conv_attrs.h"

/* The compute types the kernels work in; narrower dtypes are widened into
 * one of these and narrowed back on the way out (float16 -> float32,
 * int8/uint8/int32 -> int64). */
typedef enum ry_conv_ctype { RY_CT_F32, RY_CT_F64, RY_CT_I64 } ry_conv_ctype;

ry_conv_ctype ry_conv_ctype_of(ry_dtype d);
/* t's elements as a buffer of ct: t's own data when it already is ct
 * (*owned = false), else a new ry_malloc'ed copy (*owned = true). NULL on
 * out-of-memory. */
void *ry_conv_load(const ry_tensor *t, ry_conv_ctype ct, bool *owned);
/* Writes buf (t->size elements of ct) into t, converting per t's dtype. */
void ry_conv_store(ry_tensor *t, const void *buf, ry_conv_ctype ct);

/* Geometry of one convolution. Legend: N batch, C input channels, H W
 * input height/width, O output channels, G groups, KH KW kernel, OH OW
 * output height/width; (sh, sw) strides, (dh, dw) dilation, (pt, pl) head
 * padding. For conv2d_transpose the roles swap: its input (the forward's
 * output gradient) is (C, H, W) and its output (O, OH, OW). */
typedef struct ry_conv_geom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, G;
    int64_t sh, sw, dh, dw, pt, pl;
} ry_conv_geom;

/* im2col of one image's ch channels x (ch, H, W): the column matrix
 * (ch*KH*KW x OH*OW), which may be built a band of output rows at a time
 * (bounding the scratch for large images). ry_conv_im2col_source
 * returns what the bands are read from (x, or its zero-padded copy
 * written into pad); ry_conv_im2col_rows writes rows [oh0, oh1)'s columns
 * into col (ch*KH*KW x (oh1 - oh0)*OW). col2im, the adjoint, of col
 * (ch*KH*KW x H*W) into y (ch, OH, OW), which it overwrites
 * (conv_im2col.c). pad: scratch of ry_conv_pad_elems(g, ch, col2im)
 * elements (none when that is 0). */
const void *ry_conv_im2col_source(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch,
                                  const void *x, void *pad);
void ry_conv_im2col_rows(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch, const void *src,
                         int64_t oh0, int64_t oh1, void *col);
void ry_conv_col2im(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch, const void *col, void *y,
                    void *pad);
int64_t ry_conv_pad_elems(const ry_conv_geom *g, int64_t ch, bool col2im);

/* The direct float32 forward of few-tap convolutions (conv_direct.c).
 * ry_conv_direct_ok: whether g (stride 1, no dilation or groups, K =
 * C*KH*KW <= 64, OW >= 16) takes it on this CPU (AVX2 and FMA).
 * ry_conv_direct_pad: one image x (C, H, W) into xp, of
 * ry_conv_direct_pad_elems(g) floats. ry_conv_direct_fwd: y (O, OH, OW)
 * of one image from xp and w (O, C, KH, KW). */
bool ry_conv_direct_ok(const ry_conv_geom *g, ry_conv_ctype ct);
int64_t ry_conv_direct_stride(const ry_conv_geom *g);
int64_t ry_conv_direct_pad_elems(const ry_conv_geom *g);
void ry_conv_direct_pad(const ry_conv_geom *g, const float *x, float *xp);
void ry_conv_direct_fwd(const ry_conv_geom *g, const float *xp, const float *w, float *y);

ry_status ry_cpu_conv2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out);
ry_status ry_cpu_conv2d_transpose(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                  ry_tensor *const *out);
ry_status ry_cpu_max_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_global_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                   ry_tensor *const *out);
/* nn.global_max_pool2d, nn.adaptive_avg_pool2d, nn.adaptive_max_pool2d:
 * adaptive windows sized from the output tensor's shape. */
ry_status ry_cpu_adaptive_avg_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                     ry_tensor *const *out);
ry_status ry_cpu_adaptive_max_pool2d(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                     ry_tensor *const *out);
/* The adjoints the gradient rules use: in = (out_grad, data). */
ry_status ry_cpu_conv2d_backward_weight(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                        ry_tensor *const *out);
ry_status ry_cpu_max_pool2d_grad(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                 ry_tensor *const *out);
ry_status ry_cpu_avg_pool2d_grad(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                 ry_tensor *const *out);

#endif
