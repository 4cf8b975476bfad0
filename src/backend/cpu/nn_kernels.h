/*
 * nn_kernels.h: the CPU kernels of the nn operator family (private to the
 * library). src/op/nn.c points its registry entries at these; the bodies live
 * in gemm.c (dense, matmul, batch_matmul), softmax.c (softmax, log_softmax,
 * cross_entropy), norm.c (batch_norm, layer_norm, instance_norm, group_norm,
 * lrn, l2_normalize) and nn.c (bias_add, batch_flatten, pad, dropout, prelu, and
 * the float16 widening every kernel shares). Shapes were checked by the type
 * relation before a kernel runs: kernels trust them.
 */
#ifndef RELAYC_BACKEND_CPU_NN_KERNELS_H
#define RELAYC_BACKEND_CPU_NN_KERNELS_H

#include "relayc/op.h"

#define RY_NN_KERNEL(name)                                                                         \
    ry_status name(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out)

RY_NN_KERNEL(ry_cpu_dense);
RY_NN_KERNEL(ry_cpu_matmul);
RY_NN_KERNEL(ry_cpu_batch_matmul);
RY_NN_KERNEL(ry_cpu_bias_add);
RY_NN_KERNEL(ry_cpu_softmax);
RY_NN_KERNEL(ry_cpu_log_softmax);
RY_NN_KERNEL(ry_cpu_batch_flatten);
RY_NN_KERNEL(ry_cpu_pad);
RY_NN_KERNEL(ry_cpu_batch_norm);
RY_NN_KERNEL(ry_cpu_layer_norm);
RY_NN_KERNEL(ry_cpu_dropout);
RY_NN_KERNEL(ry_cpu_prelu);
RY_NN_KERNEL(ry_cpu_instance_norm);
RY_NN_KERNEL(ry_cpu_group_norm);
RY_NN_KERNEL(ry_cpu_l2_normalize);
RY_NN_KERNEL(ry_cpu_lrn);
RY_NN_KERNEL(ry_cpu_cross_entropy);
RY_NN_KERNEL(ry_cpu_cross_entropy_with_logits);

/* Runs kernel f with every float16 input widened to float32 and every
 * float16 output computed in float32 then rounded back (nearest even). */
ry_status ry_cpu_nn_via_f32(ry_kernel_fn f, ry_kernel_ctx *c, int nin, ry_tensor *const *in,
                            int nout, ry_tensor *const *out);
/* Whether any of the n tensors is float16. */
bool ry_cpu_nn_any_f16(int n, ry_tensor *const *t);

/* Splits shape around axis: outer = prod(shape[:axis]), n = shape[axis],
 * inner = prod(shape[axis+1:]). */
void ry_cpu_nn_split(const ry_tensor *t, int axis, int64_t *outer, int64_t *n, int64_t *inner);
/* axis as the kernel's attribute `name`, made non-negative for rank ndim. */
int ry_cpu_nn_axis(ry_kernel_ctx *c, const char *name, int ndim);

#endif
