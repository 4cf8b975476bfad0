/*
 * grad_nn_impl.h: what the rules of grad_nn.c and grad_norm.c share:
 * builders for the IR they emit and readers of their arguments' types.
 */
#ifndef RELAYC_OP_GRAD_NN_IMPL_H
#define RELAYC_OP_GRAD_NN_IMPL_H

#include <string.h>

#include "op/grad_rules.h"

#define M_ (c->m)
#define OP1(n, a) ry_gb_op1(M_, n, a)
#define OP2(n, a, b) ry_gb_op2(M_, n, a, b)

static inline const ry_op *call_op(ry_grad_ctx *c) { return c->call->call.callee->op.op; }

static inline const ry_attrs *call_attrs(ry_grad_ctx *c) { return &c->call->call.attrs; }

static inline int tensor_rank(const ry_expr *e) {
    const ry_type *t = ry_gb_type(e);
    return t && t->kind == RY_TYPE_TENSOR ? t->tensor.ndim : -1;
}

/* A tensor's rank and dims, -1 where a dim is symbolic or Any; false when
 * its type is not a tensor. */
static inline bool data_dims(const ry_expr *x, int *nd, int64_t *shape) {
    const ry_type *t = ry_gb_type(x);
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    *nd = t->tensor.ndim;
    for (int i = 0; i < *nd; i++)
        shape[i] = t->tensor.dims[i].kind == RY_DIM_CONST ? t->tensor.dims[i].value : -1;
    return true;
}

/* The product of dims [lo, hi), or -1 when one of them is unknown. */
static inline int64_t dims_product(const int64_t *shape, int lo, int hi) {
    int64_t p = 1;
    for (int i = lo; i < hi; i++) {
        if (shape[i] < 0) return -1;
        p *= shape[i];
    }
    return p;
}

static inline int64_t norm_axis(int64_t axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

/* a sum over one axis (keepdims) or over every axis but one (exclude) */
static inline ry_expr *sum_axis(ry_grad_ctx *c, ry_expr *x, int64_t axis, bool keepdims,
                                 bool exclude) {
    ry_expr *s = OP1("sum", x);
    ry_gb_attr_ints(M_, s, "axis", 1, &axis);
    if (keepdims) ry_gb_attr_bool(M_, s, "keepdims", true);
    if (exclude) ry_gb_attr_bool(M_, s, "exclude", true);
    return s;
}

#endif
