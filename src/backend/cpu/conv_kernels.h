/*
 * conv_kernels.h: the CPU kernels of the convolution and pooling family
 * (nn.conv2d, nn.conv2d_transpose, nn.max_pool2d, nn.avg_pool2d, the
 * global and adaptive pools, and the gradient helpers nn.conv2d_backward_weight,
 * nn.max_pool2d_grad, nn.avg_pool2d_grad), and the attribute reader they share with the type
 * relations in src/op/conv.c, so shapes and kernels agree on what padding
 * [1, 2] means. Private to the family: nothing outside it includes this.
 */
#ifndef RELAYC_BACKEND_CPU_CONV_KERNELS_H
#define RELAYC_BACKEND_CPU_CONV_KERNELS_H

#include "relayc/op.h"

/* The attributes of one conv/pool call, normalized: padding always four
 * values (top, left, bottom, right, TVM's get_pad_tuple), strides and
 * dilation two. Fields an op does not have keep their neutral values. */
typedef struct ry_conv2d_params {
    int64_t stride[2];
    int64_t dilation[2];
    int64_t pad[4];      /* top, left, bottom, right */
    int64_t out_pad[2];  /* conv2d_transpose: output_padding (h, w) */
    int64_t groups;
    int64_t pool[2];     /* pools: pool_size (h, w) */
    int64_t out_size[2]; /* adaptive pools: output_size (h, w); [] means (1, 1) */
    bool ceil_mode;
    bool count_include_pad;
    bool has_out_dtype;  /* out_dtype given and not "" */
    ry_dtype out_dtype;
} ry_conv2d_params;

/* Reads and validates op's attributes (defined in src/op/conv.c). Errors
 * point at the offending attribute when it was written, else at span. */
ry_status ry_conv2d_params_read(const ry_op *op, const ry_attrs *attrs, ry_span span,
                                ry_error *err, ry_conv2d_params *p);

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
