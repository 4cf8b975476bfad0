/*
 * reduce_attrs.h: the axes a reduction's attributes select (src/op/
 * reduce.c), shared by the reductions' type relations and every
 * target's kernels.
 */
#ifndef RELAYC_OP_REDUCE_ATTRS_H
#define RELAYC_OP_REDUCE_ATTRS_H

#include "relayc/op.h"

/* The reduction axes of sum/mean/max/min/argmax for an input of rank ndim:
 * mask[d] is true when dimension d is reduced. axis=None or [] means every
 * axis; negative axes count from the end; exclude flips a non-empty set
 * (TVM's GetReduceAxes). Returns false
 * when an axis is out of range or repeated (the relation reports those). */
bool ry_reduce_mask(const ry_op *op, const ry_attrs *attrs, int ndim, bool mask[RY_MAX_RANK]);

/* cumsum's input x as (P, V, Q) around its axis (axis=None: the whole of x
 * flattened, P = Q = 1), for every target's kernel. */
static inline void ry_cumsum_dims(const ry_op *op, const ry_attrs *attrs, const ry_tensor *x,
                                  int64_t *P, int64_t *V, int64_t *Q) {
    *P = 1, *V = x->size, *Q = 1;
    if (ry_attr_is_none(op, attrs, "axis")) return;
    int64_t axis = ry_attr_int(op, attrs, "axis");
    if (axis < 0) axis += x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) *P *= x->shape[i];
        if (i > axis) *Q *= x->shape[i];
    }
    *V = x->shape[axis];
}

#endif
