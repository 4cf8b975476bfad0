/*
 * transform_kernels.h: private interface between the reduction and
 * transform operator families' registry entries (src/op/reduce.c,
 * src/op/transform.c) and their CPU kernels
 * (src/backend/cpu/reduce.c, src/backend/cpu/transform.c).
 *
 * Kernels trust what the type relation already checked (attribute values,
 * ranks, shapes) and only report what run time alone can tell, such as an
 * out-of-range index in take with mode="fast".
 */
#ifndef RELAYC_CPU_TRANSFORM_KERNELS_H
#define RELAYC_CPU_TRANSFORM_KERNELS_H

#include "op/reduce_attrs.h"

/* reduce.c */
ry_status ry_cpu_reduce_sum(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_reduce_mean(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out);
ry_status ry_cpu_reduce_max(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_reduce_min(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_reduce_argmax(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out);
ry_status ry_cpu_reduce_argmin(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out);

/* transform.c. reshape also serves expand_dims and squeeze: all three keep
 * the elements in C order and only relabel the shape. */
ry_status ry_cpu_reshape(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out);
ry_status ry_cpu_transpose(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                           ry_tensor *const *out);
ry_status ry_cpu_concatenate(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out);
ry_status ry_cpu_split(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                       ry_tensor *const *out);
ry_status ry_cpu_take(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                      ry_tensor *const *out);
ry_status ry_cpu_stack(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                       ry_tensor *const *out);
ry_status ry_cpu_cumsum(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out);
ry_status ry_cpu_shape_of(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                          ry_tensor *const *out);
ry_status ry_cpu_one_hot(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out);

#endif
