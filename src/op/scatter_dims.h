/*
 * scatter_dims.h: scatter_nd's operands as every target's kernel reads
 * them: data (X0..Xn-1), indices (M, Y...), updates (Y..., S...), with
 * K = prod(Y) index tuples, each addressing a slice of S = prod(X[M:])
 * elements. Symbolic dims were left to run time by the type relation, so
 * the fit is checked here.
 */
#ifndef RELAYC_OP_SCATTER_DIMS_H
#define RELAYC_OP_SCATTER_DIMS_H

#include "relayc/op.h"

typedef struct ry_scatter_dims {
    int M;
    int64_t K, S;
} ry_scatter_dims;

/* d of (x, ind, up), or a located error when up does not fit them */
static inline ry_status ry_scatter_nd_dims(const ry_kernel_ctx *c, const ry_tensor *x,
                                           const ry_tensor *ind, const ry_tensor *up,
                                           ry_scatter_dims *d) {
    int M = (int)ind->shape[0], n = x->ndim, k = ind->ndim - 1;
    d->M = M;
    d->K = d->S = 1;
    for (int i = 1; i < ind->ndim; i++) d->K *= ind->shape[i];
    for (int i = M; i < n; i++) d->S *= x->shape[i];
    bool fits = up->ndim == k + n - M;
    for (int i = 0; fits && i < up->ndim; i++)
        fits = up->shape[i] == (i < k ? ind->shape[1 + i] : x->shape[M + i - k]);
    if (fits) return RY_OK;
    char su[64], sx[64], si[64];
    return ry_error_at(c->err, c->span, "scatter_nd: updates %s do not fit data %s and indices %s",
                       ry_tensor_describe(up, su, sizeof su), ry_tensor_describe(x, sx, sizeof sx),
                       ry_tensor_describe(ind, si, sizeof si));
}

#endif
