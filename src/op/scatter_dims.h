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
#include "tensor/dims.h"

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

/* gather_nd's operands: data (B..., X...), indices (M, B..., Y...), out
 * (B..., Y..., S...) with b = batch_dims leading dims shared, BY =
 * prod(B, Y) index tuples over Bn = prod(B) batches, each slice S =
 * prod(X[M:]) elements and each batch of data `batch` elements. */
typedef struct ry_gather_dims {
    int b, M;
    int64_t BY, Bn, S, batch;
} ry_gather_dims;

/* d of (x, ind), or a located error when their batch dims differ */
static inline ry_status ry_gather_nd_dims(const ry_kernel_ctx *c, const ry_tensor *x,
                                          const ry_tensor *ind, ry_gather_dims *d) {
    int b = (int)ry_attr_int(c->op, c->attrs, "batch_dims");
    int M = (int)ind->shape[0], n = x->ndim;
    for (int i = 0; i < b; i++)
        if (ind->shape[1 + i] != x->shape[i])
            return ry_error_at(c->err, c->span, "gather_nd: batch dim %d is %lld in data, %lld in indices",
                               i, (long long)x->shape[i], (long long)ind->shape[1 + i]);
    d->b = b;
    d->M = M;
    d->BY = ry_dims_prod(ind->shape, 1, ind->ndim);
    d->Bn = ry_dims_prod(x->shape, 0, b);
    d->S = ry_dims_prod(x->shape, b + M, n);
    d->batch = ry_dims_prod(x->shape, b, n);
    return RY_OK;
}

#endif
