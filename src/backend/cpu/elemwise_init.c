/*
 * elemwise_init.c: CPU kernels that make, select or move values without
 * arithmetic on them: zeros, ones, full and their *_like forms (the fill
 * value cast to the result's dtype, as `cast` does), where, broadcast_to,
 * and collapse_sum_like (the adjoint of broadcasting: a sum over the
 * broadcast dimensions, in a fixed order, accumulated in double or int64).
 * where and broadcast_to only move elements, so they work on bytes and take
 * every dtype, float16 included, without widening.
 */
#include <assert.h>

#include "backend/cpu/elemwise_kernels.h"

/* GCC vectorizes loops only from -O3 (or with its cheapest cost model at
 * -O2, which rejects loops of unknown length); these loops are what
 * vectorization is for. Clang vectorizes at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

static ry_status check_io(ry_kernel_ctx *c, int nin, int want, int nout) {
    if (nin != want || nout != 1)
        return ry_error_at(c->err, c->span, "%s: expected %d inputs and 1 output", c->op->name,
                           want);
    return RY_OK;
}

static ry_status fill_int(ry_kernel_ctx *c, int nin, int want, int nout, ry_tensor *const *out,
                          int64_t v) {
    if (check_io(c, nin, want, nout)) return RY_ERR;
    ry_ew_fill(out[0], &v, RY_INT64);
    return RY_OK;
}

/* out = value, the single element of `value` cast to out's dtype. */
static ry_status fill_from(ry_kernel_ctx *c, ry_tensor *out, const ry_tensor *value) {
    if (value->size != 1)
        return ry_error_at(c->err, c->span, "%s: the fill value must be a scalar", c->op->name);
    ry_ew_fill(out, value->data, value->dtype);
    return RY_OK;
}

RY_EW_KERNEL(zeros) { return fill_int(c, nin, 0, nout, out, 0); }
RY_EW_KERNEL(ones) { return fill_int(c, nin, 0, nout, out, 1); }
RY_EW_KERNEL(zeros_like) { return fill_int(c, nin, 1, nout, out, 0); }
RY_EW_KERNEL(ones_like) { return fill_int(c, nin, 1, nout, out, 1); }

RY_EW_KERNEL(full) {
    if (check_io(c, nin, 1, nout)) return RY_ERR;
    return fill_from(c, out[0], in[0]);
}

RY_EW_KERNEL(full_like) {
    if (check_io(c, nin, 2, nout)) return RY_ERR;
    return fill_from(c, out[0], in[1]);
}

/* ---- where: out = cond ? x : y, by element size ----
 * Shape legend: p[0] = out, p[1] = cond (bool bytes), p[2] = x, p[3] = y;
 * s[k] = 1 walks, 0 broadcasts. */
#define WHERE(NAME, T)                                                               \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        T *o = (T *)p[0];                                                            \
        const uint8_t *cond = (const uint8_t *)p[1];                                 \
        const T *x = (const T *)p[2], *y = (const T *)p[3];                          \
        if (s[1] && s[2] && s[3]) { /* all walk: both loads, then a select, */       \
            for (int64_t i = 0; i < n; i++) { /* which vectorizes as a blend */      \
                T a = x[i], b = y[i];                                                \
                o[i] = cond[i] ? a : b;                                              \
            }                                                                        \
            return;                                                                  \
        }                                                                            \
        for (int64_t i = 0, ic = 0, ix = 0, iy = 0; i < n;                           \
             i++, ic += s[1], ix += s[2], iy += s[3])                                \
            o[i] = cond[ic] ? x[ix] : y[iy];                                         \
    }
WHERE(where1, uint8_t)
WHERE(where2, uint16_t)
WHERE(where4, uint32_t)
WHERE(where8, uint64_t)

static ry_ew_inner by_size(size_t esize, ry_ew_inner f1, ry_ew_inner f2, ry_ew_inner f4,
                           ry_ew_inner f8) {
    switch (esize) {
    case 1: return f1;
    case 2: return f2;
    case 4: return f4;
    case 8: return f8;
    }
    assert(!"element size");
    return f1;
}

RY_EW_KERNEL(where) {
    if (check_io(c, nin, 3, nout)) return RY_ERR;
    if (in[0]->dtype != RY_BOOL)
        return ry_error_at(c->err, c->span, "where: the condition must be bool, not %s",
                           ry_dtype_name(in[0]->dtype));
    if (in[1]->dtype != in[2]->dtype || in[1]->dtype != out[0]->dtype)
        return ry_error_at(c->err, c->span, "where: x and y must have the same dtype");
    ry_ew_inner fn = by_size(ry_dtype_size(out[0]->dtype), where1, where2, where4, where8);
    return ry_ew_map(c, out[0], 3, in, false, fn, NULL);
}

/* ---- broadcast_to: out[i] = x[broadcast index] ---- */
#define MOVE(NAME, T)                                                                \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        T *o = (T *)p[0];                                                            \
        const T *x = (const T *)p[1];                                                \
        if (s[1])                                                                    \
            for (int64_t i = 0; i < n; i++) o[i] = x[i];                             \
        else                                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = x[0];                             \
    }
MOVE(move1, uint8_t)
MOVE(move2, uint16_t)
MOVE(move4, uint32_t)
MOVE(move8, uint64_t)

RY_EW_KERNEL(broadcast_to) {
    if (check_io(c, nin, 1, nout)) return RY_ERR;
    if (in[0]->dtype != out[0]->dtype)
        return ry_error_at(c->err, c->span, "broadcast_to: input and result dtypes differ");
    ry_ew_inner fn = by_size(ry_dtype_size(out[0]->dtype), move1, move2, move4, move8);
    return ry_ew_map(c, out[0], 1, in, false, fn, NULL);
}

/* broadcast_to_like(x, like): broadcast_to's move; like gives the result's
 * shape only and is not read */
RY_EW_KERNEL(broadcast_to_like) {
    if (check_io(c, nin, 2, nout)) return RY_ERR;
    if (in[0]->dtype != out[0]->dtype)
        return ry_error_at(c->err, c->span, "broadcast_to_like: input and result dtypes differ");
    ry_ew_inner fn = by_size(ry_dtype_size(out[0]->dtype), move1, move2, move4, move8);
    return ry_ew_map(c, out[0], 1, in, false, fn, NULL);
}

/* ---- collapse_sum_like: acc[collapsed index] += x[i], in x's order ----
 * Shape legend: iteration over data's shape; p[0] = data (s[0] = 1),
 * p[1] = accumulator shaped like the result (s[1] = 0 where summed). */
#define ACC(NAME, T, TA, LOAD)                                                       \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        const T *x = (const T *)p[0];                                            \
        TA *acc = (TA *)p[1];                                                        \
        if (s[1])                                                                    \
            for (int64_t i = 0; i < n; i++) acc[i] += LOAD(x[i]);                    \
        else {                                                                       \
            TA sum = acc[0];                                                         \
            for (int64_t i = 0; i < n; i++) sum += LOAD(x[i]);                       \
            acc[0] = sum;                                                            \
        }                                                                            \
    }
#define PLAIN(v) (v)
/* integers wrap modulo 2^64 (unsigned accumulation), then on the store */
#define WRAP(v) (uint64_t)(int64_t)(v)
ACC(acc_f32, float, double, PLAIN)
ACC(acc_f64, double, double, PLAIN)
ACC(acc_f16, uint16_t, double, ry_f16_to_f32)
ACC(acc_i8, int8_t, uint64_t, WRAP)
ACC(acc_i32, int32_t, uint64_t, WRAP)
ACC(acc_i64, int64_t, uint64_t, WRAP)
ACC(acc_u8, uint8_t, uint64_t, WRAP)
ACC(acc_i16, int16_t, uint64_t, WRAP)
ACC(acc_u16, uint16_t, uint64_t, WRAP)

static const ry_ew_inner acc_fns[RY_DTYPE_COUNT] = {
    [RY_FLOAT32] = acc_f32, [RY_FLOAT64] = acc_f64, [RY_FLOAT16] = acc_f16, [RY_INT8] = acc_i8,
    [RY_INT32] = acc_i32,   [RY_INT64] = acc_i64,   [RY_UINT8] = acc_u8,    [RY_INT16] = acc_i16,
    [RY_UINT16] = acc_u16};

RY_EW_KERNEL(collapse_sum_like) {
    if (check_io(c, nin, 2, nout)) return RY_ERR;
    const ry_tensor *x = in[0];
    ry_tensor *o = out[0];
    if (!acc_fns[x->dtype])
        return ry_error_at(c->err, c->span, "collapse_sum_like: dtype %s not supported",
                           ry_dtype_name(x->dtype));
    if (!ry_ew_fits(o->ndim, o->shape, x->ndim, x->shape))
        return ry_error_at(c->err, c->span,
                           "collapse_sum_like: the result does not broadcast to the input");
    bool flt = ry_dtype_is_float(x->dtype);
    void *acc = ry_calloc((size_t)(o->size ? o->size : 1), 8);
    if (!acc) return ry_error_at(c->err, c->span, "collapse_sum_like: out of memory");
    ry_ew_operand ops[2] = {{x->data, ry_dtype_size(x->dtype), x->ndim, x->shape},
                            {acc, 8, o->ndim, o->shape}};
    ry_ew_iterate(x->ndim, x->shape, 2, ops, acc_fns[x->dtype], NULL);
    ry_ew_convert(o->data, o->dtype, acc, flt ? RY_FLOAT64 : RY_INT64, o->size);
    ry_free(acc);
    return RY_OK;
}
