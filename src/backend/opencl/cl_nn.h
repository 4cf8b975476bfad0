/*
 * cl_nn.h (opencl, private): the nn family's kernels (kernel_gen_nn.h's
 * generators, launched here) and what their launch code shares.
 */
#ifndef RELAYC_BACKEND_OPENCL_NN_H
#define RELAYC_BACKEND_OPENCL_NN_H

#include "backend/kernel_gen_nn.h"
#include "backend/opencl/cl_elemwise.h"

extern const ry_dialect ry_cl_dialect;

/* ---- cl_launch.c ---- */

/* Builds src (freed here; NULL: the dtype of `what` has no kernel on this
 * device, or out of memory) and runs its kernel "k" over n work-items. */
ry_status ry_cl_gen_run(ry_kernel_ctx *c, char *src, ry_dtype what, size_t n, int nargs,
                        const cl_arg *args);

/* The accumulator of float sums: double where the device has it (as the
 * CPU's statistics and reductions), else the element type. */
const char *ry_cl_acc_type(ry_dtype dt);

/* a tensor's buffer and element offset, as kernel arguments; the count
 * of an argument array */
#define MEM(t) (cl_arg){CLA_MEM, ry_cl_mem(t), 0, 0}, CLA_L(ry_cl_off(t))
#define NARGS(a) (int)(sizeof a / sizeof a[0])

/* The type a kernel that only moves elements reads them as: the dtype's,
 * float16 as its 16 bits ("ushort") */
const char *ry_cl_move_type(ry_dtype dt);

/* A device tensor of the heap, NULL with err set when it does not fit. */
ry_tensor *ry_cl_scratch(ry_kernel_ctx *c, ry_dtype dt, int nd, const int64_t *shape);

/* ---- cl_widen.c ----
 * fn over in and out with every float16 tensor widened to
 * `wide` (cast into device scratch, results cast back), as the CPU
 * widens float16 for these kernels */
bool ry_cl_any_f16(int n, ry_tensor *const *t);
ry_status ry_cl_via(ry_kernel_fn fn, ry_dtype wide, ry_kernel_ctx *c, int nin, ry_tensor *const *in,
                    int nout, ry_tensor *const *out);
/* A kernel that runs fn, through ry_cl_via(fn, wide) when a tensor is
 * float16. */
#define CL_WIDENING(name, fn, wide)                                                           \
    CL_KERNEL(name) {                                                                         \
        if (ry_cl_any_f16(nin, in) || ry_cl_any_f16(nout, out))                               \
            return ry_cl_via(fn, wide, c, nin, in, nout, out);                                \
        return fn(c, nin, in, nout, out);                                                     \
    }
/* the GEMMs of cl_gemm.c with float16 (computed in float64, as the CPU's) */
CL_KERNEL(ry_cl_dense_f16);
CL_KERNEL(ry_cl_matmul_f16);
CL_KERNEL(ry_cl_batch_matmul_f16);

/* cl_conv.c */
CL_KERNEL(ry_cl_conv2d);
CL_KERNEL(ry_cl_conv2d_transpose);
CL_KERNEL(ry_cl_conv2d_backward_weight);
CL_KERNEL(ry_cl_max_pool2d);
CL_KERNEL(ry_cl_avg_pool2d);
CL_KERNEL(ry_cl_max_pool2d_grad);
CL_KERNEL(ry_cl_avg_pool2d_grad);
CL_KERNEL(ry_cl_adaptive_max_pool2d);
CL_KERNEL(ry_cl_adaptive_avg_pool2d);
/* cl_norm.c */
CL_KERNEL(ry_cl_batch_norm);
CL_KERNEL(ry_cl_layer_norm);
CL_KERNEL(ry_cl_instance_norm);
CL_KERNEL(ry_cl_group_norm);
CL_KERNEL(ry_cl_l2_normalize);
CL_KERNEL(ry_cl_lrn);
/* cl_nn.c */
CL_KERNEL(ry_cl_pad);
CL_KERNEL(ry_cl_prelu);
CL_KERNEL(ry_cl_cross_entropy);
CL_KERNEL(ry_cl_cross_entropy_with_logits);
CL_KERNEL(ry_cl_dropout);
CL_KERNEL(ry_cl_one_hot);
CL_KERNEL(ry_cl_stack);
/* cl_scatter.c */
CL_KERNEL(ry_cl_gather_nd);
CL_KERNEL(ry_cl_scatter_nd);

#endif
