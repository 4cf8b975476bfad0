/*
 * elemwise.c: what the CPU elemwise kernels share: the broadcast iterator
 * (numpy rules, stride-0 broadcasting, dimension merging so same-shape and
 * scalar operands become flat loops), float16 widening around a kernel, and
 * conversion between dtypes (used by cast, the fill ops and accumulators).
 * Large float maps are split over threads (parallel.h).
 * The per-op loops live in elemwise_binary.c, elemwise_unary.c and
 * elemwise_init.c.
 */
#include <assert.h>
#include <string.h>

#include "backend/cpu/elemwise_kernels.h"
#include "backend/cpu/parallel.h"

/* GCC vectorizes loops only from -O3 (or with its cheapest cost model at
 * -O2, which rejects loops of unknown length); these loops are what
 * vectorization is for. Clang vectorizes at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

/* ---- broadcast iteration ---- */

/* Element stride of operand op along iteration dimension j (aligned from the
 * right; j < 0 is a dimension op does not have): 0 where op broadcasts. */
static int64_t stride_of(const ry_ew_operand *op, int j) {
    if (j < 0 || op->shape[j] == 1) return 0;
    int64_t s = 1;
    for (int k = j + 1; k < op->ndim; k++) s *= op->shape[k];
    return s;
}

void ry_ew_iterate(int ndim, const int64_t *shape, int nops, const ry_ew_operand *ops,
                   ry_ew_inner fn, void *ctx) {
    assert(nops <= RY_EW_MAX_OPS && ndim <= RY_MAX_RANK);
    int64_t dims[RY_MAX_RANK], st[RY_EW_MAX_OPS][RY_MAX_RANK];
    int m = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) return; /* empty: nothing to do */
        if (shape[i] == 1) continue;
        int64_t sti[RY_EW_MAX_OPS];
        bool merge = m > 0;
        for (int k = 0; k < nops; k++) {
            int j = i - (ndim - ops[k].ndim);
            assert(j < 0 || ops[k].shape[j] == 1 || ops[k].shape[j] == shape[i]);
            sti[k] = stride_of(&ops[k], j);
            if (merge && st[k][m - 1] != sti[k] * shape[i]) merge = false;
        }
        if (merge) {
            dims[m - 1] *= shape[i];
            for (int k = 0; k < nops; k++) st[k][m - 1] = sti[k];
        } else {
            dims[m] = shape[i];
            for (int k = 0; k < nops; k++) st[k][m] = sti[k];
            m++;
        }
    }
    char *p[RY_EW_MAX_OPS];
    int64_t s[RY_EW_MAX_OPS], off[RY_EW_MAX_OPS] = {0}, idx[RY_MAX_RANK] = {0};
    if (m == 0) { /* a single element */
        for (int k = 0; k < nops; k++) p[k] = ops[k].data, s[k] = 0;
        fn(1, p, s, ctx);
        return;
    }
    for (int k = 0; k < nops; k++) s[k] = st[k][m - 1];
    /* odometer over the outer dimensions; the last one is the inner loop */
    for (;;) {
        for (int k = 0; k < nops; k++) p[k] = (char *)ops[k].data + off[k] * (int64_t)ops[k].esize;
        fn(dims[m - 1], p, s, ctx);
        int d = m - 2;
        for (; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < nops; k++) off[k] += st[k][d];
            if (idx[d] < dims[d]) break;
            for (int k = 0; k < nops; k++) off[k] -= st[k][d] * dims[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
}

bool ry_ew_fits(int ndim, const int64_t *shape, int iter_ndim, const int64_t *iter_shape) {
    if (ndim > iter_ndim) return false;
    for (int j = 0; j < ndim; j++) {
        int64_t d = shape[j], e = iter_shape[j + iter_ndim - ndim];
        if (d != 1 && d != e) return false;
    }
    return true;
}

/* ry_ew_iterate split over the first dimension of extent > 1 (the batch,
 * usually) with ry_parallel_for: chunk [lo, hi) of that dimension walks
 * operands offset to row lo with the dimension shortened to hi - lo.
 * Every output element is written once, by one chunk, so the result does
 * not depend on the split. */
typedef struct ew_split {
    int ndim, nops, d;
    const int64_t *shape;
    const ry_ew_operand *ops;
    ry_ew_inner fn;
    void *ctx;
} ew_split;

static void ew_chunk(void *arg, int64_t lo, int64_t hi) {
    const ew_split *e = arg;
    int64_t shapes[RY_EW_MAX_OPS + 1][RY_MAX_RANK];
    ry_ew_operand ops[RY_EW_MAX_OPS];
    memcpy(shapes[RY_EW_MAX_OPS], e->shape, sizeof(int64_t) * (size_t)e->ndim);
    shapes[RY_EW_MAX_OPS][e->d] = hi - lo;
    for (int k = 0; k < e->nops; k++) {
        ops[k] = e->ops[k];
        int j = e->d - (e->ndim - ops[k].ndim);
        if (j < 0 || ops[k].shape[j] == 1) continue; /* broadcast along d */
        memcpy(shapes[k], ops[k].shape, sizeof(int64_t) * (size_t)ops[k].ndim);
        shapes[k][j] = hi - lo;
        ops[k].data = (char *)ops[k].data + lo * stride_of(&ops[k], j) * (int64_t)ops[k].esize;
        ops[k].shape = shapes[k];
    }
    ry_ew_iterate(e->ndim, shapes[RY_EW_MAX_OPS], e->nops, ops, e->fn, e->ctx);
}

static void iterate_parallel(int ndim, const int64_t *shape, int nops, const ry_ew_operand *ops,
                             ry_ew_inner fn, void *ctx, int cost) {
    int64_t total = 1, grain = RY_PAR_GRAIN_EW / (cost > 0 ? cost : 1);
    int d = -1;
    for (int i = 0; i < ndim; i++) {
        total *= shape[i];
        if (d < 0 && shape[i] > 1) d = i;
    }
    if (d < 0 || total < 2 * grain || ry_get_num_threads() < 2 || ry_parallel_serial()) {
        ry_ew_iterate(ndim, shape, nops, ops, fn, ctx);
        return;
    }
    int64_t row = total / shape[d];
    ew_split e = {ndim, nops, d, shape, ops, fn, ctx};
    ry_parallel_for(shape[d], (grain + row - 1) / row, ew_chunk, &e);
}

static ry_ew_operand operand(const ry_tensor *t) {
    return (ry_ew_operand){t->data, ry_dtype_size(t->dtype), t->ndim, t->shape};
}

static ry_tensor *widened(const ry_tensor *t) {
    ry_tensor *w = ry_tensor_new(RY_FLOAT32, t->ndim, t->shape);
    if (w) ry_ew_convert(w->data, RY_FLOAT32, t->data, RY_FLOAT16, t->size);
    return w;
}

ry_status ry_ew_map(ry_kernel_ctx *c, ry_tensor *out, int nin, ry_tensor *const *in,
                    bool widen, ry_ew_inner fn, void *ctx) {
    return ry_ew_map_cost(c, out, nin, in, widen, fn, ctx, 1);
}

ry_status ry_ew_map_cost(ry_kernel_ctx *c, ry_tensor *out, int nin, ry_tensor *const *in,
                         bool widen, ry_ew_inner fn, void *ctx, int cost) {
    assert(nin + 1 <= RY_EW_MAX_OPS);
    for (int k = 0; k < nin; k++)
        if (!ry_ew_fits(in[k]->ndim, in[k]->shape, out->ndim, out->shape))
            return ry_error_at(c->err, c->span, "%s: input %d does not broadcast to the result",
                               c->op->name, k + 1);
    ry_tensor *tmp[RY_EW_MAX_OPS] = {0}; /* widened copies; [0] for out */
    const ry_tensor *t[RY_EW_MAX_OPS];
    bool oom = false;
    t[0] = out;
    if (widen && out->dtype == RY_FLOAT16) {
        tmp[0] = ry_tensor_new(RY_FLOAT32, out->ndim, out->shape);
        oom |= !tmp[0];
        t[0] = tmp[0];
    }
    for (int k = 0; k < nin; k++) {
        t[k + 1] = in[k];
        if (widen && in[k]->dtype == RY_FLOAT16) {
            tmp[k + 1] = widened(in[k]);
            oom |= !tmp[k + 1];
            t[k + 1] = tmp[k + 1];
        }
    }
    if (!oom) {
        ry_ew_operand ops[RY_EW_MAX_OPS];
        for (int k = 0; k <= nin; k++) ops[k] = operand(t[k]);
        /* not integer binary ops: integer divide and power report errors
         * through ctx, which parallel chunks would write at once (the other
         * loops only read ctx, or get none) */
        bool par = nin > 0 && (ctx == NULL || ry_dtype_is_float(in[0]->dtype));
        if (par) iterate_parallel(out->ndim, out->shape, nin + 1, ops, fn, ctx, cost);
        else ry_ew_iterate(out->ndim, out->shape, nin + 1, ops, fn, ctx);
        if (tmp[0]) ry_ew_convert(out->data, RY_FLOAT16, tmp[0]->data, RY_FLOAT32, out->size);
    }
    for (int k = 0; k <= nin; k++) ry_tensor_release(tmp[k]);
    if (oom) return ry_error_at(c->err, c->span, "%s: out of memory widening float16", c->op->name);
    return RY_OK;
}

/* ---- dtype conversion ----
 * Through a chunk of int64 (integer and bool sources, exact) or double
 * (float sources, exact), then to the destination. */
#define CHUNK 256

static void load_i64(int64_t *b, const void *src, ry_dtype dt, int64_t n) {
    switch (dt) {
    case RY_INT8: for (int64_t i = 0; i < n; i++) b[i] = ((const int8_t *)src)[i]; break;
    case RY_INT32: for (int64_t i = 0; i < n; i++) b[i] = ((const int32_t *)src)[i]; break;
    case RY_INT64: memcpy(b, src, (size_t)n * sizeof *b); break;
    case RY_UINT8: for (int64_t i = 0; i < n; i++) b[i] = ((const uint8_t *)src)[i]; break;
    case RY_BOOL: for (int64_t i = 0; i < n; i++) b[i] = ((const uint8_t *)src)[i] != 0; break;
    case RY_INT16: for (int64_t i = 0; i < n; i++) b[i] = ((const int16_t *)src)[i]; break;
    case RY_UINT16: for (int64_t i = 0; i < n; i++) b[i] = ((const uint16_t *)src)[i]; break;
    default: assert(!"load_i64: not an integer dtype");
    }
}

static void load_f64(double *b, const void *src, ry_dtype dt, int64_t n) {
    switch (dt) {
    case RY_FLOAT32: for (int64_t i = 0; i < n; i++) b[i] = ((const float *)src)[i]; break;
    case RY_FLOAT64: memcpy(b, src, (size_t)n * sizeof *b); break;
    case RY_FLOAT16:
        for (int64_t i = 0; i < n; i++) b[i] = ry_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    default: assert(!"load_f64: not a float dtype");
    }
}

/* Integers wrap modulo 2^bits (through the unsigned type: defined in C). */
static void store_i64(void *dst, ry_dtype dt, const int64_t *b, int64_t n) {
    switch (dt) {
    case RY_INT8: for (int64_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)(uint8_t)b[i]; break;
    case RY_INT32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)(uint32_t)b[i];
        break;
    case RY_INT64: memcpy(dst, b, (size_t)n * sizeof *b); break;
    case RY_UINT8: for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)b[i]; break;
    case RY_BOOL: for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = b[i] != 0; break;
    case RY_INT16: for (int64_t i = 0; i < n; i++) ((int16_t *)dst)[i] = (int16_t)(uint16_t)b[i]; break;
    case RY_UINT16: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = (uint16_t)b[i]; break;
    case RY_FLOAT32: for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)b[i]; break;
    case RY_FLOAT64: for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = (double)b[i]; break;
    case RY_FLOAT16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ry_f32_to_f16((float)b[i]);
        break;
    default: assert(!"store_i64: bad dtype");
    }
}

/* Float to integer: truncate toward zero, saturate, NaN gives 0 (C leaves
 * out-of-range conversions undefined, so they are clamped first). */
#define SAT(T, v, lo, hi)                                                                \
    ((v) != (v) ? (T)0 : (v) <= (double)(lo) ? (T)(lo) : (v) >= (double)(hi) ? (T)(hi) : (T)(v))
#define SAT_LOOP(T, lo, hi) \
    for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = SAT(T, b[i], lo, hi)

static void store_f64(void *dst, ry_dtype dt, const double *b, int64_t n) {
    switch (dt) {
    case RY_INT8: SAT_LOOP(int8_t, INT8_MIN, INT8_MAX); break;
    case RY_INT32: SAT_LOOP(int32_t, INT32_MIN, INT32_MAX); break;
    case RY_INT64: SAT_LOOP(int64_t, INT64_MIN, INT64_MAX); break;
    case RY_UINT8: SAT_LOOP(uint8_t, 0, UINT8_MAX); break;
    case RY_INT16: SAT_LOOP(int16_t, INT16_MIN, INT16_MAX); break;
    case RY_UINT16: SAT_LOOP(uint16_t, 0, UINT16_MAX); break;
    case RY_BOOL: for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = b[i] != 0; break;
    case RY_FLOAT32: for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)b[i]; break;
    case RY_FLOAT64: memcpy(dst, b, (size_t)n * sizeof *b); break;
    case RY_FLOAT16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ry_f32_to_f16((float)b[i]);
        break;
    default: assert(!"store_f64: bad dtype");
    }
}

void ry_ew_convert(void *dst, ry_dtype ddt, const void *src, ry_dtype sdt, int64_t n) {
    size_t ds = ry_dtype_size(ddt), ss = ry_dtype_size(sdt);
    if (n <= 0) return;
    if (ddt == sdt) {
        memmove(dst, src, (size_t)n * ds);
        return;
    }
    if (sdt == RY_FLOAT32 && ddt == RY_FLOAT64) {
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = ((const float *)src)[i];
        return;
    }
    if (sdt == RY_FLOAT64 && ddt == RY_FLOAT32) {
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const double *)src)[i];
        return;
    }
    if (sdt == RY_FLOAT16 && ddt == RY_FLOAT32) { /* the widening around kernels */
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = ry_f16_to_f32(h[i]);
        return;
    }
    if (sdt == RY_FLOAT32 && ddt == RY_FLOAT16) {
        const float *f = src;
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ry_f32_to_f16(f[i]);
        return;
    }
    bool fsrc = ry_dtype_is_float(sdt);
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t k = n - i < CHUNK ? n - i : CHUNK;
        const char *s = (const char *)src + (size_t)i * ss;
        char *d = (char *)dst + (size_t)i * ds;
        if (fsrc) {
            double b[CHUNK];
            load_f64(b, s, sdt, k);
            store_f64(d, ddt, b, k);
        } else {
            int64_t b[CHUNK];
            load_i64(b, s, sdt, k);
            store_i64(d, ddt, b, k);
        }
    }
}

void ry_ew_fill(ry_tensor *t, const void *v, ry_dtype vdt) {
    union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; } e;
    int64_t n = t->size;
    if (n == 0) return;
    e.u64 = 0;
    ry_ew_convert(&e, t->dtype, v, vdt, 1);
    if (e.u64 == 0) { /* zeros (the common fill): memset is the fastest loop */
        memset(t->data, 0, (size_t)n * ry_dtype_size(t->dtype));
        return;
    }
    switch (ry_dtype_size(t->dtype)) {
    case 1: memset(t->data, e.u8, (size_t)n); break;
    case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = e.u16; break;
    case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)t->data)[i] = e.u32; break;
    case 8: for (int64_t i = 0; i < n; i++) ((uint64_t *)t->data)[i] = e.u64; break;
    default: assert(!"ry_ew_fill: element size");
    }
}
