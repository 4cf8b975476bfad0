/*
 * dims.h: the product of a run of a shape's dimensions, shape[from..to):
 * how the kernels view a tensor as (outer, axis, inner) blocks.
 */
#ifndef RELAYC_TENSOR_DIMS_H
#define RELAYC_TENSOR_DIMS_H

#include <stdint.h>

static inline int64_t ry_dims_prod(const int64_t *shape, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= shape[i];
    return p;
}

#endif
