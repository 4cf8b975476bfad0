/*
 * transform.c: CPU kernels of the shape and index transforms: reshape (also
 * expand_dims and squeeze), transpose, concatenate, split, stack, take and
 * one_hot. They move bytes, so every dtype works the same way; only take's
 * indices and one_hot's values are read as numbers.
 *
 * Shapes and attributes were validated by the type relations; the kernels
 * recompute only what they need (normalized axes) from the attributes.
 */
#include <assert.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

#include "tensor/dims.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/scatter_kernels.h"
#include "backend/cpu/transform_kernels.h"

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

/* reshape, expand_dims, squeeze: same elements, same order. */
ry_status ry_cpu_reshape(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out) {
    assert(nin >= 1 && nout == 1 && in[0]->size == out[0]->size);
    if (ry_tensor_nbytes(in[0])) memcpy(out[0]->data, in[0]->data, ry_tensor_nbytes(in[0]));
    return RY_OK;
}

/* ---- transpose ----
 * Shape legend: out has dims D0..Dn-1; out dim k is x's dim axes[k].
 * xs[k]: x's stride along out dim k; ys[k]: out's own stride. p: the out
 * dim that is x's last (contiguous) dim.
 * When p is out's last dim too, rows copy with unit stride on both sides.
 * Otherwise each (p, n-1) plane is a 2-D transpose, done in TILE x TILE
 * tiles so that both the reads and the writes stay in cache. The remaining
 * dims are walked by an odometer. */
enum { TILE = 32 };

typedef struct tplan {
    int n, p;
    int64_t shape[RY_MAX_RANK], xs[RY_MAX_RANK], ys[RY_MAX_RANK];
} tplan;

/* Advances the odometer over every out dim but `skip1` and `skip2`; returns
 * false after the last position. */
static bool odo_next(const tplan *pl, int skip1, int skip2, int64_t *idx, int64_t *bx,
                     int64_t *by) {
    for (int d = pl->n - 1; d >= 0; d--) {
        if (d == skip1 || d == skip2) continue;
        idx[d]++;
        *bx += pl->xs[d];
        *by += pl->ys[d];
        if (idx[d] < pl->shape[d]) return true;
        *bx -= pl->xs[d] * pl->shape[d];
        *by -= pl->ys[d] * pl->shape[d];
        idx[d] = 0;
    }
    return false;
}

#define DEF_TRANSPOSE(NAME, T)                                                                     \
    static void NAME(const void *xv, void *yv, const tplan *pl) {                                  \
        const T *x = xv;                                                                           \
        T *y = yv;                                                                                 \
        int n = pl->n, p = pl->p;                                                                  \
        int64_t idx[RY_MAX_RANK] = {0}, bx = 0, by = 0, L = pl->shape[n - 1];                      \
        int64_t xl = pl->xs[n - 1];                                                                \
        if (p == n - 1) { /* rows are contiguous in x and in y */                                  \
            do {                                                                                   \
                for (int64_t j = 0; j < L; j++) y[by + j] = x[bx + j];                             \
            } while (odo_next(pl, n - 1, n - 1, idx, &bx, &by));                                   \
            return;                                                                                \
        }                                                                                          \
        int64_t P = pl->shape[p], yp = pl->ys[p];                                                  \
        do {                                                                                       \
            for (int64_t i0 = 0; i0 < P; i0 += TILE)                                               \
                for (int64_t j0 = 0; j0 < L; j0 += TILE) {                                         \
                    int64_t i1 = i0 + TILE < P ? i0 + TILE : P,                                    \
                            j1 = j0 + TILE < L ? j0 + TILE : L;                                    \
                    for (int64_t i = i0; i < i1; i++)                                              \
                        for (int64_t j = j0; j < j1; j++) y[by + i * yp + j] = x[bx + i + j * xl]; \
                }                                                                                  \
        } while (odo_next(pl, p, n - 1, idx, &bx, &by));                                           \
    }

DEF_TRANSPOSE(transpose1, uint8_t)
DEF_TRANSPOSE(transpose2, uint16_t)
DEF_TRANSPOSE(transpose4, uint32_t)
DEF_TRANSPOSE(transpose8, uint64_t)

ry_status ry_cpu_transpose(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                           ry_tensor *const *out) {
    assert(nin == 1 && nout == 1);
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    int n = x->ndim;
    int64_t axes[RY_MAX_RANK];
    int na = ry_attr_ints(c->op, c->attrs, "axes", axes, RY_MAX_RANK);
    if (na <= 0) /* None or []: reverse the dimensions */
        for (int k = 0; k < n; k++) axes[k] = n - 1 - k;
    if (y->size == 0) return RY_OK;
    if (n == 0) {
        memcpy(y->data, x->data, ry_dtype_size(x->dtype));
        return RY_OK;
    }
    tplan pl = {.n = n, .p = n - 1};
    int64_t stride[RY_MAX_RANK], s = 1, t = 1;
    for (int d = n - 1; d >= 0; d--) {
        stride[d] = s;
        s *= x->shape[d];
        pl.ys[d] = t;
        t *= y->shape[d];
        pl.shape[d] = y->shape[d];
    }
    for (int k = 0; k < n; k++) {
        int a = norm_axis(axes[k], n);
        pl.xs[k] = stride[a];
        if (a == n - 1) pl.p = k;
    }
    switch (ry_dtype_size(x->dtype)) {
    case 1: transpose1(x->data, y->data, &pl); break;
    case 2: transpose2(x->data, y->data, &pl); break;
    case 4: transpose4(x->data, y->data, &pl); break;
    case 8: transpose8(x->data, y->data, &pl); break;
    default: return ry_error_at(c->err, c->span, "transpose: unsupported element size");
    }
    return RY_OK;
}

/* ---- concatenate / split / stack ----
 * Shape legend: outer = product of the dims before axis; a "chunk" is one
 * input's slab after the axis (its extent along axis times the inner dims).
 * The output interleaves, for each outer index, every input's chunk.
 * For outer index o, piece i is the stride[i] bytes at base[i] + o *
 * stride[i] and lies at offset at[i] of the packed row (row bytes at
 * packed + o * row). Large copies are split over the pool by outer index
 * (a copy is bound by memory, and each core brings its own bandwidth: an
 * LSTM step's 32 x 1024 gate gradients are 128 KB). */
#define PIECES_MAX 64
#define COPY_SPLIT_BYTES ((int64_t)1 << 16)

typedef struct pieces {
    bool gather; /* true: pieces -> packed (concatenate); false: packed -> pieces (split) */
    int n;
    char *packed;
    size_t row;
    char *base[PIECES_MAX];
    size_t stride[PIECES_MAX], at[PIECES_MAX];
} pieces;

static void copy_pieces(void *ctx, int64_t lo, int64_t hi) {
    const pieces *p = ctx;
    for (int64_t o = lo; o < hi; o++)
        for (int i = 0; i < p->n; i++) {
            char *packed = p->packed + (size_t)o * p->row + p->at[i];
            char *piece = p->base[i] + (size_t)o * p->stride[i];
            if (p->gather) memcpy(packed, piece, p->stride[i]);
            else memcpy(piece, packed, p->stride[i]);
        }
}

static void run_pieces(pieces *p, int64_t outer) {
    int64_t bytes = outer * (int64_t)p->row;
    if (bytes < COPY_SPLIT_BYTES || outer < 2 || !p->n) {
        copy_pieces(p, 0, outer);
        return;
    }
    int64_t grain = (COPY_SPLIT_BYTES / 2) / (int64_t)p->row; /* 32 KB a chunk */
    ry_parallel_for(outer, grain > 0 ? grain : 1, copy_pieces, p);
}

/* Copies between the tensors t[0..n) and packed (concatenate's y, split's
 * x: their pieces side by side along axis), PIECES_MAX tensors at a time. */
static void copy_along(bool gather, int n, ry_tensor *const *t, void *packed,
                       const ry_tensor *whole, int axis) {
    size_t es = ry_dtype_size(whole->dtype), at = 0;
    size_t row = (size_t)ry_dims_prod(whole->shape, axis, whole->ndim) * es;
    int64_t outer = ry_dims_prod(whole->shape, 0, axis);
    for (int first = 0; first < n; first += PIECES_MAX) {
        pieces p = {.gather = gather, .packed = packed, .row = row};
        for (int i = first; i < n && i < first + PIECES_MAX; i++) {
            size_t chunk = (size_t)ry_dims_prod(t[i]->shape, axis, t[i]->ndim) * es;
            if (!chunk) continue;
            p.base[p.n] = t[i]->data;
            p.stride[p.n] = chunk;
            p.at[p.n++] = at;
            at += chunk;
        }
        run_pieces(&p, outer);
    }
}

ry_status ry_cpu_concatenate(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out) {
    assert(nout == 1 && nin >= 1);
    ry_tensor *y = out[0];
    copy_along(true, nin, in, y->data, y, norm_axis(ry_attr_int(c->op, c->attrs, "axis"), y->ndim));
    return RY_OK;
}

ry_status ry_cpu_split(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                       ry_tensor *const *out) {
    assert(nin == 1 && nout >= 1);
    const ry_tensor *x = in[0];
    copy_along(false, nout, out, x->data, x, norm_axis(ry_attr_int(c->op, c->attrs, "axis"), x->ndim));
    return RY_OK;
}

/* stack: out has a new dim of extent nin at axis; each input contributes
 * one chunk (the dims from axis on) per outer index. */
ry_status ry_cpu_stack(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                       ry_tensor *const *out) {
    assert(nout == 1 && nin >= 1);
    ry_tensor *y = out[0];
    int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), y->ndim);
    size_t es = ry_dtype_size(y->dtype);
    int64_t outer = ry_dims_prod(y->shape, 0, axis);
    size_t chunk = (size_t)ry_dims_prod(in[0]->shape, axis, in[0]->ndim) * es;
    if (!chunk) return RY_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < nin; i++)
            memcpy((char *)y->data + ((size_t)o * (size_t)nin + (size_t)i) * chunk,
                   (const char *)in[i]->data + (size_t)o * chunk, chunk);
    return RY_OK;
}

/* ---- take ----
 * Shape legend: data = (B..., O..., N, I...), indices = (B..., K...) with
 * batch dims B shared; out = (B..., O..., K..., I...) and
 * out[b, o, k, i] = data[b, o, idx[b, k], i]. axis=None flattens data
 * (B = O = I = 1, N = data size). */

typedef enum take_mode { TAKE_CLIP, TAKE_WRAP, TAKE_FAST } take_mode;

/* Index j along an axis of extent n in clip or wrap mode (fast: as is). */
static int64_t take_index(int64_t j, int64_t n, take_mode mode) {
    if (mode == TAKE_CLIP) return j < 0 ? 0 : j >= n ? n - 1 : j;
    if (mode == TAKE_WRAP) return ((j % n) + n) % n;
    return j;
}

/* Rows of take in clip or wrap mode (no index can fail), a range of the
 * flattened (b, o, k) positions per chunk: large gathers (an LSTM step's
 * 32 rows of 4 KB) split over the pool. Rows of 256 bytes and more only,
 * so the divisions per row stay cheap next to the copy. */
#define TAKE_SPLIT_ROW 256

typedef struct take_rows {
    const char *src;
    const ry_tensor *ind;
    char *dst;
    size_t row;
    int64_t O, N, K;
    take_mode mode;
} take_rows;

static void take_chunk(void *ctx, int64_t lo, int64_t hi) {
    const take_rows *t = ctx;
    for (int64_t p = lo; p < hi; p++) {
        int64_t k = p % t->K, bo = p / t->K, b = bo / t->O;
        int64_t j = take_index(ry_scatter_read_index(t->ind, b * t->K + k), t->N, t->mode);
        memcpy(t->dst + (size_t)p * t->row, t->src + (size_t)(bo * t->N + j) * t->row, t->row);
    }
}

ry_status ry_cpu_take(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                      ry_tensor *const *out) {
    assert(nin == 2 && nout == 1);
    const ry_tensor *x = in[0], *ind = in[1];
    ry_tensor *y = out[0];
    const char *ms = ry_attr_str(c->op, c->attrs, "mode");
    take_mode mode = strcmp(ms, "wrap") == 0   ? TAKE_WRAP
                     : strcmp(ms, "fast") == 0 ? TAKE_FAST
                                               : TAKE_CLIP;
    int64_t B = 1, O = 1, N = x->size, I = 1, K = ind->size;
    if (!ry_attr_is_none(c->op, c->attrs, "axis")) {
        int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), x->ndim);
        int64_t bd = ry_attr_int(c->op, c->attrs, "batch_dims");
        int b = (int)(bd < 0 ? bd + ind->ndim : bd);
        B = ry_dims_prod(x->shape, 0, b);
        O = ry_dims_prod(x->shape, b, axis);
        N = x->shape[axis];
        I = ry_dims_prod(x->shape, axis + 1, x->ndim);
        K = ry_dims_prod(ind->shape, b, ind->ndim);
    }
    if (y->size == 0) return RY_OK;
    if (N == 0) return ry_error_at(c->err, c->span, "take: cannot take from an axis of extent 0");
    size_t es = ry_dtype_size(x->dtype), row = (size_t)I * es;
    if (mode != TAKE_FAST && row >= TAKE_SPLIT_ROW && (int64_t)ry_tensor_nbytes(y) >= COPY_SPLIT_BYTES) {
        take_rows t = {x->data, ind, y->data, row, O, N, K, mode};
        int64_t grain = (COPY_SPLIT_BYTES / 2) / (int64_t)row;
        ry_parallel_for(B * O * K, grain > 0 ? grain : 1, take_chunk, &t);
        return RY_OK;
    }
    char *dst = y->data;
    const char *src = x->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < K; k++) {
                int64_t j = take_index(ry_scatter_read_index(ind, b * K + k), N, mode);
                if (j < 0 || j >= N) /* fast mode only */
                    return ry_error_at(c->err, c->span,
                                       "take: index %lld out of range [0, %lld) with mode=\"fast\"",
                                       (long long)j, (long long)N);
                const char *from = src + ((size_t)((b * O + o) * N + j)) * row;
                switch (row) { /* single elements: skip memcpy's call */
                case 4: memcpy(dst, from, 4); break;
                case 8: memcpy(dst, from, 8); break;
                default: memcpy(dst, from, row);
                }
                dst += row;
            }
    return RY_OK;
}

/* ---- shape_of: the dims as numbers of the result's integer dtype ---- */
ry_status ry_cpu_shape_of(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                          ry_tensor *const *out) {
    assert(nin == 1 && nout == 1 && out[0]->size == in[0]->ndim);
    for (int i = 0; i < in[0]->ndim; i++) ry_tensor_set(out[0], i, (double)in[0]->shape[i]);
    return RY_OK;
}

/* ---- one_hot ----
 * Shape legend: indices = (P..., Q...), out = (P..., depth, Q...) where the
 * depth dim sits at axis; out[p, d, q] = on if indices[p, q] == d else off.
 * on and off are converted to the result dtype once, then copied as bytes. */
static void store_as(ry_dtype dt, void *dst, double v) {
    /* double -> narrow int is undefined out of range; go through int64 */
    int64_t iv = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
    switch (dt) {
    case RY_FLOAT32: *(float *)dst = (float)v; break;
    case RY_FLOAT64: *(double *)dst = v; break;
    case RY_FLOAT16: *(uint16_t *)dst = ry_f32_to_f16((float)v); break;
    case RY_INT8: *(int8_t *)dst = (int8_t)iv; break;
    case RY_UINT8: *(uint8_t *)dst = (uint8_t)iv; break;
    case RY_INT16: *(int16_t *)dst = (int16_t)iv; break;
    case RY_UINT16: *(uint16_t *)dst = (uint16_t)iv; break;
    case RY_BOOL: *(uint8_t *)dst = v != 0; break;
    case RY_INT32: *(int32_t *)dst = (int32_t)iv; break;
    case RY_INT64: *(int64_t *)dst = (int64_t)iv; break;
    default: break;
    }
}

ry_status ry_cpu_one_hot(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out) {
    assert(nin == 3 && nout == 1);
    const ry_tensor *ind = in[0];
    ry_tensor *y = out[0];
    int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), y->ndim);
    int64_t depth = y->shape[axis];
    int64_t P = ry_dims_prod(y->shape, 0, axis), Q = ry_dims_prod(y->shape, axis + 1, y->ndim);
    size_t es = ry_dtype_size(y->dtype);
    unsigned char on[8], off[8];
    /* same dtype: copy the bytes, so int64 values keep every bit */
    if (in[1]->dtype == y->dtype)
        memcpy(on, in[1]->data, es);
    else
        store_as(y->dtype, on, ry_tensor_get(in[1], 0));
    if (in[2]->dtype == y->dtype)
        memcpy(off, in[2]->data, es);
    else
        store_as(y->dtype, off, ry_tensor_get(in[2], 0));
    /* everything off, then on where an index lands (out of range: nowhere) */
    int64_t n = y->size;
    uint16_t o2;
    uint32_t o4;
    uint64_t o8;
    switch (es) {
    case 1: memset(y->data, off[0], (size_t)n); break;
    case 2: memcpy(&o2, off, 2); for (int64_t i = 0; i < n; i++) ((uint16_t *)y->data)[i] = o2; break;
    case 4: memcpy(&o4, off, 4); for (int64_t i = 0; i < n; i++) ((uint32_t *)y->data)[i] = o4; break;
    default: memcpy(&o8, off, 8); for (int64_t i = 0; i < n; i++) ((uint64_t *)y->data)[i] = o8; break;
    }
    char *dst = y->data;
    for (int64_t p = 0; p < P; p++)
        for (int64_t q = 0; q < Q; q++) {
            int64_t d = ry_scatter_read_index(ind, p * Q + q);
            if (d >= 0 && d < depth) memcpy(dst + (size_t)((p * depth + d) * Q + q) * es, on, es);
        }
    return RY_OK;
}
