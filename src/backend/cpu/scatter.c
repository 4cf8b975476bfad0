/*
 * scatter.c: CPU kernels of scatter_nd and gather_nd. Both move whole
 * slices: indices (M, Y...) pick, per position y, one slice of data's
 * trailing dims (S elements) through its first M dims. gather_nd copies
 * bytes, so every dtype works alike; scatter_nd with mode="add" adds in
 * index order y = 0, 1, ... (deterministic, and the order the row-sparse
 * path of the compiled engine reproduces bit for bit).
 */
/* before the includes: gcc vectorizes the slice additions below (the
 * -O2 default does not, for loops of unknown length) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include <assert.h>
#include <string.h>

#include "backend/cpu/scatter_kernels.h"
#include "op/scatter_dims.h"
#include "backend/cpu/simd.h"

RY_SIMD_NO_CONTRACT

/* a slice is added into another tensor's buffer, never into itself */
RY_SIMD_ACCUMULATE(add_f32, float, float)
RY_SIMD_ACCUMULATE(add_f64, double, double)

int64_t ry_scatter_read_index(const ry_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RY_INT8: return ((const int8_t *)t->data)[i];
    case RY_UINT8: return ((const uint8_t *)t->data)[i];
    case RY_INT32: return ((const int32_t *)t->data)[i];
    case RY_INT64: return ((const int64_t *)t->data)[i];
    default: return (int64_t)ry_tensor_get(t, i);
    }
}

void ry_scatter_add_slice(ry_dtype d, void *dst, const void *src, int64_t count) {
    switch (d) {
    case RY_FLOAT32: add_f32(dst, src, count); return;
    case RY_FLOAT64: add_f64(dst, src, count); return;
    case RY_INT32: {
        int32_t *y = dst;
        const int32_t *x = src;
        /* wraps like the dense integer kernels, without signed overflow */
        for (int64_t j = 0; j < count; j++) y[j] = (int32_t)((uint32_t)y[j] + (uint32_t)x[j]);
        return;
    }
    case RY_INT64: {
        int64_t *y = dst;
        const int64_t *x = src;
        for (int64_t j = 0; j < count; j++) y[j] = (int64_t)((uint64_t)y[j] + (uint64_t)x[j]);
        return;
    }
    default: break;
    }
    /* float16, int8, uint8, bool: the converting path (slow, rare) */
    ry_tensor ty = {.dtype = d, .ndim = 1, .shape = {count}, .size = count, .data = dst};
    ry_tensor tx = {.dtype = d, .ndim = 1, .shape = {count}, .size = count, .data = (void *)src};
    for (int64_t j = 0; j < count; j++) ry_tensor_set(&ty, j, ry_tensor_get(&ty, j) + ry_tensor_get(&tx, j));
}

/* The element offset (in slices) of index tuple y: idx[0, y], ...,
 * idx[M-1, y] into dims[0..M) (K tuples in all). Fails on an index out of
 * range. */
static ry_status slice_of(ry_kernel_ctx *c, const ry_tensor *ind, int64_t K, int64_t y,
                          const int64_t *dims, int M, int64_t *out) {
    int64_t off = 0;
    for (int m = 0; m < M; m++) {
        int64_t j = ry_scatter_read_index(ind, (int64_t)m * K + y);
        if (j < 0 || j >= dims[m])
            return ry_error_at(c->err, c->span, "%s: index %lld out of range [0, %lld) in dim %d",
                               c->op->name, (long long)j, (long long)dims[m], m);
        off = off * dims[m] + j;
    }
    *out = off;
    return RY_OK;
}

/* Shape legend: data (X0..Xn-1), indices (M, Y...), updates (Y..., S...)
 * with K = prod(Y), S = prod(X[M:]); out = data, then for y < K:
 * out[idx[:, y], :] (+)= updates[y, :]. */
ry_status ry_cpu_scatter_nd(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    assert(nin == 3 && nout == 1);
    const ry_tensor *x = in[0], *ind = in[1], *up = in[2];
    ry_tensor *y = out[0];
    bool add = strcmp(ry_attr_str(c->op, c->attrs, "mode"), "add") == 0;
    ry_scatter_dims sd;
    if (ry_scatter_nd_dims(c, x, ind, up, &sd)) return RY_ERR;
    int M = sd.M;
    int64_t K = sd.K, S = sd.S;
    size_t es = ry_dtype_size(x->dtype), row = (size_t)S * es;
    if (y->data != x->data && ry_tensor_nbytes(x)) memcpy(y->data, x->data, ry_tensor_nbytes(x));
    char *dst = y->data;
    const char *src = up->data;
    for (int64_t t = 0; t < K; t++) {
        int64_t off;
        if (slice_of(c, ind, K, t, x->shape, M, &off)) return RY_ERR;
        if (add) ry_scatter_add_slice(x->dtype, dst + (size_t)off * row, src + (size_t)t * row, S);
        else memcpy(dst + (size_t)off * row, src + (size_t)t * row, row);
    }
    return RY_OK;
}

/* Shape legend: data (B..., X...), indices (M, B..., Y...), out
 * (B..., Y..., S...) with S = prod(X[M:]): out[b, y, :] = data[b,
 * idx[:, b, y], :]. */
ry_status ry_cpu_gather_nd(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                           ry_tensor *const *out) {
    assert(nin == 2 && nout == 1);
    const ry_tensor *x = in[0], *ind = in[1];
    ry_tensor *y = out[0];
    ry_gather_dims gd = {0};
    if (ry_gather_nd_dims(c, x, ind, &gd)) return RY_ERR;
    int b = gd.b, M = gd.M;
    int64_t BY = gd.BY, Bn = gd.Bn, S = gd.S, batch = gd.batch;
    if (BY == 0 || S == 0) return RY_OK;
    int64_t Yn = BY / Bn;
    size_t es = ry_dtype_size(x->dtype), row = (size_t)S * es;
    char *dst = y->data;
    const char *src = x->data;
    for (int64_t j = 0; j < BY; j++) {
        int64_t off;
        if (slice_of(c, ind, BY, j, x->shape + b, M, &off)) return RY_ERR;
        memcpy(dst + (size_t)j * row, src + (size_t)((j / Yn) * batch) * es + (size_t)off * row, row);
    }
    return RY_OK;
}
