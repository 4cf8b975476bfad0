/*
 * cl_elemwise.h (opencl, private): the kernels made by the generator, and
 * the others' way to run a fused program (a GEMM's epilogue).
 */
#ifndef RELAYC_BACKEND_OPENCL_ELEMWISE_H
#define RELAYC_BACKEND_OPENCL_ELEMWISE_H

#include "backend/kernel_gen.h"
#include "backend/opencl/cl_impl.h"
#include "op/fused_prog.h"

#define CL_KERNEL(name)                                                                       \
    ry_status name(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,                 \
                   ry_tensor *const *out)

/* p over in, results out (all on this device): broadcast per kernel_gen.h */
ry_status ry_cl_run_prog(ry_kernel_ctx *c, const ry_fz_prog *p, int nin, ry_tensor *const *in,
                         int nout, ry_tensor *const *out);

/* ... with the index space and access given (transpose's strides) */
ry_status ry_cl_launch_prog(ry_kernel_ctx *c, const ry_fz_prog *p, int nin, ry_tensor *const *in,
                            int nout, ry_tensor *const *out, const ry_gen_access *access, int rank,
                            const int64_t *dims, const int64_t (*strides)[RY_MAX_RANK]);

CL_KERNEL(ry_cl_elemwise);
CL_KERNEL(ry_cl_zeros);
CL_KERNEL(ry_cl_ones);
CL_KERNEL(ry_cl_full);
CL_KERNEL(ry_cl_full_like);
CL_KERNEL(ry_cl_copy_to);
CL_KERNEL(ry_cl_fused_elemwise);
/* cl_gemm.c */
CL_KERNEL(ry_cl_dense);
CL_KERNEL(ry_cl_matmul);
CL_KERNEL(ry_cl_batch_matmul);
CL_KERNEL(ry_cl_fused_matmul);
/* cl_reduce.c; ry_cl_reduce_into: y = the reduction `kind` of x over the
 * dimensions mask holds (y's dtype the result's; last: argmax/argmin ties
 * to the last index) */
ry_status ry_cl_reduce_into(ry_kernel_ctx *c, ry_gen_red kind, const ry_tensor *x, ry_tensor *y,
                            const bool *mask, bool last);
CL_KERNEL(ry_cl_reduce);
CL_KERNEL(ry_cl_collapse_sum_like);
CL_KERNEL(ry_cl_softmax);
CL_KERNEL(ry_cl_log_softmax);
/* cl_index.c */
CL_KERNEL(ry_cl_take);
CL_KERNEL(ry_cl_split);
CL_KERNEL(ry_cl_concatenate);
CL_KERNEL(ry_cl_bias_add);
/* cl_scan.c */
CL_KERNEL(ry_cl_cumsum);
CL_KERNEL(ry_cl_shape_of);
/* cl_layout.c */
CL_KERNEL(ry_cl_reshape);
CL_KERNEL(ry_cl_transpose);

#endif
