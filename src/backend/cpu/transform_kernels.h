/*
 * transform_kernels.h: private interface between the transform operator
 * family's registry entries (src/op/transform.c) and their CPU kernels
 * (src/backend/cpu/reduce.c, src/backend/cpu/transform.c).
 *
 * Kernels trust what the type relation already checked (attribute values,
 * ranks, shapes) and only report what run time alone can tell, such as an
 * out-of-range index in take with mode="fast".
 */
#ifndef RELAYC_CPU_TRANSFORM_KERNELS_H
#define RELAYC_CPU_TRANSFORM_KERNELS_H

#include "relayc/op.h"

/* The reduction axes of sum/mean/max/min/argmax for an input of rank ndim:
 * mask[d] is true when dimension d is reduced. axis=None or [] means every
 * axis; negative axes count from the end; exclude flips a non-empty set
 * (TVM's GetReduceAxes). Returns false
 * when an axis is out of range or repeated (the relation reports those). */
bool ry_reduce_mask(const ry_op *op, const ry_attrs *attrs, int ndim, bool mask[RY_MAX_RANK]);

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
ry_status ry_cpu_one_hot(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out);

#endif
