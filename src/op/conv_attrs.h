/*
 * conv_attrs.h: the attributes of a convolution or pooling call, read and
 * normalized once (src/op/conv.c), shared by the family's type relations,
 * gradient rules and every target's kernels, so all agree on what padding
 * [1, 2] means.
 */
#ifndef RELAYC_OP_CONV_ATTRS_H
#define RELAYC_OP_CONV_ATTRS_H

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

#endif
