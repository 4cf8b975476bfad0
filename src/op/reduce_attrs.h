/*
 * reduce_attrs.h: the axes a reduction's attributes select (src/op/
 * transform.c), shared by the reductions' type relations and every
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

#endif
