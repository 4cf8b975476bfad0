/*
 * scatter_kernels.h: private interface between the scatter family's
 * registry entries (src/op/scatter.c), their CPU kernels
 * (src/backend/cpu/scatter.c) and the compiled engine's row-sparse
 * operators (src/runtime/rows_ops.c), which share the slice arithmetic.
 * Kernels trust what the type relation checked (ranks, dtypes, constant
 * dims) and report what only run time can tell: an index out of range.
 */
#ifndef RELAYC_CPU_SCATTER_KERNELS_H
#define RELAYC_CPU_SCATTER_KERNELS_H

#include "relayc/op.h"

ry_status ry_cpu_scatter_nd(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out);
ry_status ry_cpu_gather_nd(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                           ry_tensor *const *out);

/* Element i of an integer tensor (int8/int32/int64/uint8). */
int64_t ry_scatter_read_index(const ry_tensor *t, int64_t i);
/* dst[0..count) += src[0..count) in dtype d (integers wrap). */
void ry_scatter_add_slice(ry_dtype d, void *dst, const void *src, int64_t count);

#endif
