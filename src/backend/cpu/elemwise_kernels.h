/*
 * elemwise_kernels.h: the CPU kernels of the elemwise family (private to
 * src/op/elemwise.c and src/backend/cpu/elemwise*.c), and the machinery those
 * kernel files share: the broadcast iterator and dtype conversion.
 *
 * Kernels follow ry_kernel_fn: inputs flattened, outputs preallocated with
 * the shapes the type relation gave, so they never compute shapes.
 */
#ifndef RELAYC_CPU_ELEMWISE_KERNELS_H
#define RELAYC_CPU_ELEMWISE_KERNELS_H

#include "relayc/op.h"

#define RY_EW_KERNEL(name)                                                                 \
    ry_status ry_cpu_##name(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,   \
                            ry_tensor *const *out)

/* binary, broadcasting (elemwise_binary.c) */
RY_EW_KERNEL(add);
RY_EW_KERNEL(subtract);
RY_EW_KERNEL(multiply);
RY_EW_KERNEL(divide);
RY_EW_KERNEL(power);
RY_EW_KERNEL(maximum);
RY_EW_KERNEL(minimum);
RY_EW_KERNEL(equal);
RY_EW_KERNEL(not_equal);
RY_EW_KERNEL(less);
RY_EW_KERNEL(less_equal);
RY_EW_KERNEL(greater);
RY_EW_KERNEL(greater_equal);
RY_EW_KERNEL(logical_and);
RY_EW_KERNEL(logical_or);

/* unary (elemwise_unary.c) */
RY_EW_KERNEL(negative);
RY_EW_KERNEL(exp);
RY_EW_KERNEL(log);
RY_EW_KERNEL(sqrt);
RY_EW_KERNEL(rsqrt);
RY_EW_KERNEL(tanh);
RY_EW_KERNEL(sigmoid);
RY_EW_KERNEL(abs);
RY_EW_KERNEL(relu);
RY_EW_KERNEL(leaky_relu);
RY_EW_KERNEL(clip);
RY_EW_KERNEL(logical_not);
RY_EW_KERNEL(cast);
RY_EW_KERNEL(copy);

/* creation, selection and broadcasting (elemwise_init.c) */
RY_EW_KERNEL(zeros);
RY_EW_KERNEL(ones);
RY_EW_KERNEL(full);
RY_EW_KERNEL(zeros_like);
RY_EW_KERNEL(ones_like);
RY_EW_KERNEL(full_like);
RY_EW_KERNEL(where);
RY_EW_KERNEL(broadcast_to);
RY_EW_KERNEL(broadcast_to_like);
RY_EW_KERNEL(collapse_sum_like);

/* ---- shared by the elemwise kernel files (elemwise.c) ----------------------
 * The broadcast iterator walks an iteration shape; each operand is a dense
 * C-order array whose shape, aligned from the right, has every dimension
 * either equal to the iteration's or 1 (stride 0: broadcast). Adjacent
 * dimensions that are contiguous for every operand are merged, so same-shape
 * operands become one flat loop and a scalar becomes stride 0. The inner
 * function then sees n elements with per-operand strides s[k] of 0 or 1. */
#define RY_EW_MAX_OPS 4

typedef struct ry_ew_operand {
    void *data;
    size_t esize; /* bytes per element */
    int ndim;
    const int64_t *shape;
} ry_ew_operand;

typedef void (*ry_ew_inner)(int64_t n, char *const *p, const int64_t *s, void *ctx);

void ry_ew_iterate(int ndim, const int64_t *shape, int nops, const ry_ew_operand *ops,
                   ry_ew_inner fn, void *ctx);

/* Whether an array of shape (ndim, shape) broadcasts to iter_shape. */
bool ry_ew_fits(int ndim, const int64_t *shape, int iter_ndim, const int64_t *iter_shape);

/* out = fn(in...): operand 0 is out, operands 1..nin the inputs, over out's
 * shape. With widen, float16 operands are first widened to float32 (and a
 * float16 out narrowed back), so fn only ever sees float32 for them. */
ry_status ry_ew_map(ry_kernel_ctx *c, ry_tensor *out, int nin, ry_tensor *const *in,
                    bool widen, ry_ew_inner fn, void *ctx);
/* The same for a map costing `cost` adds per element (parallel.h): large
 * maps are split over threads in chunks of RY_PAR_GRAIN_EW / cost. */
ry_status ry_ew_map_cost(ry_kernel_ctx *c, ry_tensor *out, int nin, ry_tensor *const *in,
                         bool widen, ry_ew_inner fn, void *ctx, int cost);

/* Converts n elements from (src, sdt) to (dst, ddt). Integer to integer
 * wraps (two's complement); float to integer truncates toward zero and
 * saturates, NaN giving 0; anything to bool is `!= 0`. */
void ry_ew_convert(void *dst, ry_dtype ddt, const void *src, ry_dtype sdt, int64_t n);

/* Fills t with value (given as one element of dtype vdt at v). */
void ry_ew_fill(ry_tensor *t, const void *v, ry_dtype vdt);

#endif
