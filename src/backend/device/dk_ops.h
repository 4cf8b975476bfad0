/*
 * dk_ops.h (device, private): the operators' kernels of every device
 * target, written once against device_kernels.h, and what their files
 * share: running a fused program (the generator's, kernel_gen.h; a GEMM's
 * epilogue too), the float16 widening. Each kernel finds its device from
 * its tensors (DK_DEVICE).
 */
#ifndef RELAYC_BACKEND_DEVICE_OPS_H
#define RELAYC_BACKEND_DEVICE_OPS_H

#include "backend/device_kernels.h"
#include "backend/kernel_gen_nn.h"
#include "op/fused_prog.h"

#define DK_KERNEL(name)                                                                       \
    ry_status name(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,                 \
                   ry_tensor *const *out)

/* d: the device of the call's tensors (all of them on it), or return */
#define DK_DEVICE(nin, in, nout, out)                                                         \
    const ry_dk_device *d = ry_dk_of(c, nin, in, nout, out);                                  \
    if (!d) return RY_ERR

/* ry_dk_of for a call of `want` inputs whose data (in[0]) is float32 or
 * float64; NULL with the error */
const ry_dk_device *ry_dk_of_float(ry_kernel_ctx *c, int nin, int want, ry_tensor *const *in, int nout,
                                   ry_tensor *const *out);

/* p over in, results out (all on d): broadcast per kernel_gen.h */
ry_status ry_dk_run_prog(const ry_dk_device *d, ry_kernel_ctx *c, const ry_fz_prog *p, int nin,
                         ry_tensor *const *in, int nout, ry_tensor *const *out);

/* ... with the index space and access given (transpose's strides) */
ry_status ry_dk_launch_prog(const ry_dk_device *d, ry_kernel_ctx *c, const ry_fz_prog *p, int nin,
                            ry_tensor *const *in, int nout, ry_tensor *const *out,
                            const ry_gen_access *access, int rank, const int64_t *dims,
                            const int64_t (*strides)[RY_MAX_RANK]);

/* dk_elemwise.c */
DK_KERNEL(ry_dk_elemwise);
DK_KERNEL(ry_dk_zeros);
DK_KERNEL(ry_dk_ones);
DK_KERNEL(ry_dk_full);
DK_KERNEL(ry_dk_full_like);
DK_KERNEL(ry_dk_copy_to);
DK_KERNEL(ry_dk_fused_elemwise);
/* dk_gemm.c */
DK_KERNEL(ry_dk_dense);
DK_KERNEL(ry_dk_matmul);
DK_KERNEL(ry_dk_batch_matmul);
DK_KERNEL(ry_dk_fused_matmul);
/* dk_reduce.c; ry_dk_reduce_into: y = the reduction `kind` of x over the
 * dimensions mask holds (y's dtype the result's; last: argmax/argmin ties
 * to the last index) */
ry_status ry_dk_reduce_into(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_red kind,
                            const ry_tensor *x, ry_tensor *y, const bool *mask, bool last);
DK_KERNEL(ry_dk_reduce);
DK_KERNEL(ry_dk_collapse_sum_like);
DK_KERNEL(ry_dk_softmax);
DK_KERNEL(ry_dk_log_softmax);
/* dk_index.c */
DK_KERNEL(ry_dk_take);
DK_KERNEL(ry_dk_split);
DK_KERNEL(ry_dk_concatenate);
DK_KERNEL(ry_dk_bias_add);
/* dk_scan.c */
DK_KERNEL(ry_dk_cumsum);
DK_KERNEL(ry_dk_shape_of);
/* dk_layout.c */
DK_KERNEL(ry_dk_reshape);
DK_KERNEL(ry_dk_transpose);

/* ---- dk_widen.c ----
 * fn over in and out with every float16 tensor widened to `wide` (cast
 * into device scratch, results cast back), as the CPU widens float16 for
 * these kernels */
bool ry_dk_any_f16(int n, ry_tensor *const *t);
ry_status ry_dk_via(ry_kernel_fn fn, ry_dtype wide, ry_kernel_ctx *c, int nin, ry_tensor *const *in,
                    int nout, ry_tensor *const *out);
/* A kernel that runs fn, through ry_dk_via(fn, wide) when a tensor is
 * float16. */
#define DK_WIDENING(name, fn, wide)                                                           \
    DK_KERNEL(name) {                                                                         \
        if (ry_dk_any_f16(nin, in) || ry_dk_any_f16(nout, out))                               \
            return ry_dk_via(fn, wide, c, nin, in, nout, out);                                \
        return fn(c, nin, in, nout, out);                                                     \
    }
/* the GEMMs with float16 (computed in float64 where the device has it, as
 * the CPU's) */
DK_KERNEL(ry_dk_dense_f16);
DK_KERNEL(ry_dk_matmul_f16);
DK_KERNEL(ry_dk_batch_matmul_f16);

/* dk_conv_gemm.c: a convolution (kernel_gen_nn.h's kinds and geometry g,
 * N images) of float32 or float64 as im2col + GEMM (+ col2im), and the
 * rule dk_conv.c picks it by over the direct kernel. ry_dk_conv_force
 * overrides the rule (tests and bench/ run both paths; an empty sum or
 * result always goes direct). Set by tests and benchmarks only, with no
 * call running. */
typedef enum { RY_DK_CONV_AUTO, RY_DK_CONV_DIRECT, RY_DK_CONV_GEMM } ry_dk_conv_path;
extern ry_dk_conv_path ry_dk_conv_force;
/* the column matrix's bound in elements: a batch is cut into chunks of
 * images under it (at least one image each); tests lower it */
extern int64_t ry_dk_conv_col_cap;
bool ry_dk_conv_gemm_pays(ry_gen_conv kind, const int64_t *g, int64_t N);
ry_status ry_dk_conv_gemm(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_conv kind, ry_tensor *y,
                          const ry_tensor *a, const ry_tensor *b, const int64_t *g, int64_t N);
/* dk_conv.c */
DK_KERNEL(ry_dk_conv2d);
DK_KERNEL(ry_dk_conv2d_transpose);
DK_KERNEL(ry_dk_conv2d_backward_weight);
DK_KERNEL(ry_dk_max_pool2d);
DK_KERNEL(ry_dk_avg_pool2d);
DK_KERNEL(ry_dk_max_pool2d_grad);
DK_KERNEL(ry_dk_avg_pool2d_grad);
DK_KERNEL(ry_dk_adaptive_max_pool2d);
DK_KERNEL(ry_dk_adaptive_avg_pool2d);
/* dk_norm.c */
DK_KERNEL(ry_dk_batch_norm);
DK_KERNEL(ry_dk_layer_norm);
DK_KERNEL(ry_dk_instance_norm);
DK_KERNEL(ry_dk_group_norm);
DK_KERNEL(ry_dk_l2_normalize);
DK_KERNEL(ry_dk_lrn);
/* dk_nn.c */
DK_KERNEL(ry_dk_pad);
DK_KERNEL(ry_dk_prelu);
DK_KERNEL(ry_dk_cross_entropy);
DK_KERNEL(ry_dk_cross_entropy_with_logits);
DK_KERNEL(ry_dk_dropout);
DK_KERNEL(ry_dk_one_hot);
DK_KERNEL(ry_dk_stack);
/* dk_scatter.c */
DK_KERNEL(ry_dk_gather_nd);
DK_KERNEL(ry_dk_scatter_nd);

#endif
