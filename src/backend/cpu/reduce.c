/*
 * reduce.c: CPU kernels of the reductions sum, mean, max, min, argmax and
 * argmin over any set of axes (keepdims and exclude only change the result's
 * shape, not its C-order layout, so the kernels ignore them).
 *
 * Deterministic: every output element accumulates its inputs in a fixed
 * order (C order, or four interleaved partial sums along a summed row),
 * the same at any thread count (large float sums are split over threads
 * only where each output's terms stay on one thread, in that order).
 * Floats (float16 and float32 widened) accumulate in double; integers in
 * 64 bits, wrapping to the result dtype as TVM's own arithmetic does.
 */
/* the row conversions and strided accumulations vectorize (clang: at -O2) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#include <assert.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/transform_kernels.h"

RY_SIMD_NO_CONTRACT

/* ---- reading a row of any dtype as double or int64 ---- */

static bool is_floaty(ry_dtype d) { return ry_dtype_is_float(d); }

static void row_f64(const ry_tensor *t, int64_t off, int64_t n, double *dst) {
    const char *p = (const char *)t->data;
    switch (t->dtype) {
    case RY_FLOAT32:
        for (int64_t j = 0; j < n; j++) dst[j] = ((const float *)p)[off + j];
        break;
    case RY_FLOAT64: memcpy(dst, (const double *)p + off, sizeof(double) * (size_t)n); break;
    case RY_FLOAT16:
        for (int64_t j = 0; j < n; j++) dst[j] = ry_f16_to_f32(((const uint16_t *)p)[off + j]);
        break;
    default:
        for (int64_t j = 0; j < n; j++) dst[j] = ry_tensor_get(t, off + j);
    }
}

static void row_i64(const ry_tensor *t, int64_t off, int64_t n, int64_t *dst) {
    const char *p = (const char *)t->data;
    switch (t->dtype) {
    case RY_INT8:
        for (int64_t j = 0; j < n; j++) dst[j] = ((const int8_t *)p)[off + j];
        break;
    case RY_UINT8:
        for (int64_t j = 0; j < n; j++) dst[j] = ((const uint8_t *)p)[off + j];
        break;
    case RY_BOOL:
        for (int64_t j = 0; j < n; j++) dst[j] = ((const uint8_t *)p)[off + j] != 0;
        break;
    case RY_INT32:
        for (int64_t j = 0; j < n; j++) dst[j] = ((const int32_t *)p)[off + j];
        break;
    case RY_INT64: memcpy(dst, (const int64_t *)p + off, sizeof(int64_t) * (size_t)n); break;
    default:
        for (int64_t j = 0; j < n; j++) dst[j] = (int64_t)ry_tensor_get(t, off + j);
    }
}

/* Stores v (already wrapped to 64 bits) into element i of t, truncating to
 * the dtype's width the way a C cast from uint64 does. */
static void store_i64(ry_tensor *t, int64_t i, int64_t v) {
    char *p = (char *)t->data;
    switch (t->dtype) {
    case RY_INT8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case RY_UINT8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; break;
    case RY_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case RY_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case RY_INT64: ((int64_t *)p)[i] = v; break;
    case RY_INT16: ((int16_t *)p)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
    case RY_UINT16: ((uint16_t *)p)[i] = (uint16_t)(uint64_t)v; break;
    default: ry_tensor_set(t, i, (double)v);
    }
}

static void store_f64(ry_tensor *t, int64_t i, double v) {
    char *p = (char *)t->data;
    switch (t->dtype) {
    case RY_FLOAT32: ((float *)p)[i] = (float)v; break;
    case RY_FLOAT64: ((double *)p)[i] = v; break;
    case RY_FLOAT16: ((uint16_t *)p)[i] = ry_f32_to_f16((float)v); break;
    default: ry_tensor_set(t, i, v);
    }
}

/* ---- walking the input row by row ----
 * Shape legend: the input has dims D0..Dn-1; a "row" is the last dim Dn-1.
 * os[d]: the step of the output index along dimension d (0 when d is
 * reduced); rs[d]: the step of the index inside the reduced subspace (0 when
 * d is kept), which argmax reports. */
typedef struct walk {
    int ndim;
    int64_t shape[RY_MAX_RANK];
    int64_t os[RY_MAX_RANK], rs[RY_MAX_RANK];
    int64_t rows, len; /* number of rows, row length */
    int64_t count;     /* elements reduced into each output */
} walk;

static void walk_init(walk *w, const ry_tensor *t, const bool *mask) {
    w->ndim = t->ndim;
    int64_t ostep = 1, rstep = 1;
    w->count = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        w->shape[d] = t->shape[d];
        w->os[d] = mask[d] ? 0 : ostep;
        w->rs[d] = mask[d] ? rstep : 0;
        if (mask[d]) {
            rstep *= t->shape[d];
            w->count *= t->shape[d];
        } else {
            ostep *= t->shape[d];
        }
    }
    w->len = t->ndim ? t->shape[t->ndim - 1] : 1;
    w->rows = w->len ? t->size / w->len : 0;
}

/* Advances the odometer over dims 0..n-2 and returns the new row's output
 * and reduced-index bases. */
static void walk_next(const walk *w, int64_t *idx, int64_t *o, int64_t *r) {
    for (int d = w->ndim - 2; d >= 0; d--) {
        idx[d]++;
        *o += w->os[d];
        *r += w->rs[d];
        if (idx[d] < w->shape[d]) return;
        *o -= w->os[d] * w->shape[d];
        *r -= w->rs[d] * w->shape[d];
        idx[d] = 0;
    }
}

typedef enum red_kind { RED_SUM, RED_MEAN, RED_MAX, RED_MIN } red_kind;

/* A NaN wins a max or min, as in NumPy. */
static double fold_f(red_kind k, double acc, double v) {
    if (k == RED_MAX) return (v > acc || isnan(v)) ? v : acc;
    if (k == RED_MIN) return (v < acc || isnan(v)) ? v : acc;
    return acc + v;
}

static int64_t fold_i(red_kind k, int64_t acc, int64_t v) {
    if (k == RED_MAX) return v > acc ? v : acc;
    if (k == RED_MIN) return v < acc ? v : acc;
    return (int64_t)((uint64_t)acc + (uint64_t)v); /* wraps, no UB */
}

static int64_t int_lowest(ry_dtype d) {
    switch (d) {
    case RY_INT8: return INT8_MIN;
    case RY_INT16: return INT16_MIN;
    case RY_INT32: return INT32_MIN;
    case RY_INT64: return INT64_MIN;
    default: return 0; /* uint8, uint16, bool */
    }
}

static int64_t int_highest(ry_dtype d) {
    switch (d) {
    case RY_INT8: return INT8_MAX;
    case RY_UINT8: return UINT8_MAX;
    case RY_INT16: return INT16_MAX;
    case RY_UINT16: return UINT16_MAX;
    case RY_BOOL: return 1;
    case RY_INT32: return INT32_MAX;
    default: return INT64_MAX;
    }
}

/* Wraps v to dtype d's width and back, so that mean divides the sum TVM
 * would have computed in d. */
static int64_t wrap_to(ry_dtype d, int64_t v) {
    switch (d) {
    case RY_INT8: return (int8_t)(uint8_t)(uint64_t)v;
    case RY_UINT8: return (uint8_t)(uint64_t)v;
    case RY_INT16: return (int16_t)(uint16_t)(uint64_t)v;
    case RY_UINT16: return (uint16_t)(uint64_t)v;
    case RY_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

/* sum of row[0..n): four interleaved partial sums, combined in a fixed
 * order, so the result is deterministic and the adds do not wait on each
 * other (a single chain runs at one add per 4 cycles). */
static double sum_row(const double *row, int64_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        a0 += row[j];
        a1 += row[j + 1];
        a2 += row[j + 2];
        a3 += row[j + 3];
    }
    for (; j < n; j++) a0 += row[j];
    return (a0 + a1) + (a2 + a3);
}

/* ---- large float sums, split over threads ----
 * Three shapes of sum split cleanly, each output's terms still added in the
 * serial loop's order (so the bits do not depend on the thread count):
 * the last axis kept (bias gradients: sum over the batch), split over the
 * last axis's columns; only the last axis reduced (one output per row),
 * split over rows; and the last axis reduced with others (a conv bias
 * gradient), split over outputs. float32/float64 inputs read directly. */
typedef struct rsplit {
    const ry_tensor *x;
    const walk *w;
    double *acc;
    /* sum_outs only: the walk over blocks of rows feeding one output, and
     * a block's length in elements */
    walk blocks;
    int64_t block;
} rsplit;

static double sum_row_f32(const float *row, int64_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        a0 += row[j];
        a1 += row[j + 1];
        a2 += row[j + 2];
        a3 += row[j + 3];
    }
    for (; j < n; j++) a0 += row[j];
    return (a0 + a1) + (a2 + a3);
}

/* the double accumulators of sum_cols, never x's buffer */
RY_SIMD_ACCUMULATE(cols_f32, double, float)
RY_SIMD_ACCUMULATE(cols_f64, double, double)

static void sum_cols(void *ctx, int64_t j0, int64_t j1) {
    const rsplit *r = ctx;
    const walk *w = r->w;
    int64_t idx[RY_MAX_RANK] = {0}, o = 0, rr = 0;
    for (int64_t q = 0; q < w->rows; q++) {
        if (r->x->dtype == RY_FLOAT32)
            cols_f32(r->acc + o + j0, (const float *)r->x->data + q * w->len + j0, j1 - j0);
        else
            cols_f64(r->acc + o + j0, (const double *)r->x->data + q * w->len + j0, j1 - j0);
        walk_next(w, idx, &o, &rr);
    }
}

static double sum_row(const double *row, int64_t n);

static void sum_rows(void *ctx, int64_t q0, int64_t q1) {
    const rsplit *r = ctx;
    int64_t len = r->w->len;
    for (int64_t q = q0; q < q1; q++) {
        if (r->x->dtype == RY_FLOAT32)
            r->acc[q] += sum_row_f32((const float *)r->x->data + q * len, len);
        else
            r->acc[q] += sum_row((const double *)r->x->data + q * len, len);
    }
}

/* Outputs [o0, o1) of a sum whose last axis is reduced but whose rows feed
 * their outputs interleaved (a conv bias gradient: (N, C, H, W) summed over
 * N, H, W). The trailing reduced axes make blocks of whole rows that all
 * feed one output; every chunk walks all the blocks (a few hundred index
 * steps: r->blocks walks the axes before them) and sums only those of its
 * own outputs, so each output still takes its rows in the serial loop's
 * order, each by the same four-lane row sum (f32 to double is exact, then
 * the same adds): the same bits at any thread count. */
static void sum_outs(void *ctx, int64_t o0, int64_t o1) {
    const rsplit *r = ctx;
    const walk *bw = &r->blocks;
    int64_t len = r->w->len, nrows = r->block / len, nblocks = r->x->size / r->block;
    int64_t idx[RY_MAX_RANK] = {0}, o = 0, rr = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        if (o >= o0 && o < o1) {
            double a = r->acc[o];
            for (int64_t q = 0; q < nrows; q++) {
                int64_t off = b * r->block + q * len;
                a += r->x->dtype == RY_FLOAT32
                         ? sum_row_f32((const float *)r->x->data + off, len)
                         : sum_row((const double *)r->x->data + off, len);
            }
            r->acc[o] = a;
        }
        walk_next(bw, idx, &o, &rr);
    }
}

/* Chunks of at least this many input elements. A sum reads each element
 * once, converts and adds it: about twice an elementwise map's work per
 * element, so half its grain. The recurrent models' bias gradients, one
 * (batch, 4 hidden) sum per time step (32 x 1024 in the char-LSTM), then
 * split in two at 2 threads instead of running on one. */
#define SUM_GRAIN (RY_PAR_GRAIN_EW / 2)

/* Whether the sum was done here: split over threads when large enough,
 * else by the same loops on this thread (ry_parallel_for runs them inline),
 * which read float32 directly and vectorize (the generic walk below
 * converts each row to double first and strides its accumulator). */
static bool sum_parallel(const ry_tensor *x, const walk *w, double *acc, int64_t nout) {
    if ((x->dtype != RY_FLOAT32 && x->dtype != RY_FLOAT64) || w->ndim == 0 || w->len == 0 ||
        w->rows == 0)
        return false;
    rsplit r = {.x = x, .w = w, .acc = acc};
    if (w->os[w->ndim - 1] == 1) { /* last axis kept */
        ry_parallel_for(w->len, SUM_GRAIN / w->rows > 0 ? SUM_GRAIN / w->rows : 1, sum_cols, &r);
        return true;
    }
    if (w->count == w->len) { /* only the last axis reduced: output q is row q */
        ry_parallel_for(w->rows, SUM_GRAIN / w->len > 0 ? SUM_GRAIN / w->len : 1, sum_rows, &r);
        return true;
    }
    if (w->os[w->ndim - 1] == 0 && w->count > 0) { /* last axis reduced, outputs interleaved */
        int t = w->ndim; /* the first of the trailing reduced axes */
        r.block = 1;
        while (t > 0 && w->os[t - 1] == 0) r.block *= w->shape[--t];
        /* walk_next advances axes 0..ndim-2: axes 0..t-1 are the blocks' */
        r.blocks = *w;
        r.blocks.ndim = t + 1;
        ry_parallel_for(nout, SUM_GRAIN / w->count > 0 ? SUM_GRAIN / w->count : 1, sum_outs, &r);
        return true;
    }
    return false;
}

static ry_status reduce_float(ry_kernel_ctx *c, const ry_tensor *x, ry_tensor *y, const walk *w,
                              red_kind k) {
    double *acc = ry_malloc(sizeof(double) * (size_t)(y->size ? y->size : 1));
    double *row = ry_malloc(sizeof(double) * (size_t)(w->len ? w->len : 1));
    if (!acc || !row) {
        ry_free(acc);
        ry_free(row);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    double init = k == RED_MAX ? -INFINITY : k == RED_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < y->size; i++) acc[i] = init;
    int64_t idx[RY_MAX_RANK] = {0}, o = 0, r = 0;
    int64_t step = w->ndim ? w->os[w->ndim - 1] : 0;
    bool add = k == RED_SUM || k == RED_MEAN; /* the common case, without branches */
    bool done = add && sum_parallel(x, w, acc, y->size);
    for (int64_t q = 0; q < w->rows && !done; q++) {
        row_f64(x, q * w->len, w->len, row);
        if (step == 0 && add) { /* the row sums into one output: four lanes */
            acc[o] += sum_row(row, w->len); /* break the add chain */
        } else if (step == 0) { /* the row reduces into one output */
            double a = acc[o];
            if (add)
                for (int64_t j = 0; j < w->len; j++) a += row[j];
            else
                for (int64_t j = 0; j < w->len; j++) a = fold_f(k, a, row[j]);
            acc[o] = a;
        } else if (add) {
            for (int64_t j = 0; j < w->len; j++) acc[o + j * step] += row[j];
        } else {
            for (int64_t j = 0; j < w->len; j++)
                acc[o + j * step] = fold_f(k, acc[o + j * step], row[j]);
        }
        walk_next(w, idx, &o, &r);
    }
    for (int64_t i = 0; i < y->size; i++)
        store_f64(y, i, k == RED_MEAN ? acc[i] / (double)w->count : acc[i]);
    ry_free(acc);
    ry_free(row);
    return RY_OK;
}

static ry_status reduce_int(ry_kernel_ctx *c, const ry_tensor *x, ry_tensor *y, const walk *w,
                            red_kind k) {
    int64_t *acc = ry_malloc(sizeof(int64_t) * (size_t)(y->size ? y->size : 1));
    int64_t *row = ry_malloc(sizeof(int64_t) * (size_t)(w->len ? w->len : 1));
    if (!acc || !row) {
        ry_free(acc);
        ry_free(row);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    int64_t init = k == RED_MAX ? int_lowest(x->dtype) : k == RED_MIN ? int_highest(x->dtype) : 0;
    for (int64_t i = 0; i < y->size; i++) acc[i] = init;
    int64_t idx[RY_MAX_RANK] = {0}, o = 0, r = 0;
    int64_t step = w->ndim ? w->os[w->ndim - 1] : 0;
    for (int64_t q = 0; q < w->rows; q++) {
        row_i64(x, q * w->len, w->len, row);
        for (int64_t j = 0; j < w->len; j++)
            acc[o + j * step] = fold_i(k, acc[o + j * step], row[j]);
        walk_next(w, idx, &o, &r);
    }
    for (int64_t i = 0; i < y->size; i++) {
        int64_t v = acc[i];
        /* mean on integers: TVM divides the sum (in the input dtype) by the
         * count with truncating division; an empty reduction gives 0. */
        if (k == RED_MEAN) v = w->count ? wrap_to(x->dtype, v) / w->count : 0;
        store_i64(y, i, v);
    }
    ry_free(acc);
    ry_free(row);
    return RY_OK;
}

static ry_status reduce(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out, red_kind k) {
    assert(nin == 1 && nout == 1);
    bool mask[RY_MAX_RANK];
    if (!ry_reduce_mask(c->op, c->attrs, in[0]->ndim, mask))
        return ry_error_at(c->err, c->span, "%s: invalid reduction axes", c->op->name);
    walk w;
    walk_init(&w, in[0], mask);
    if (is_floaty(in[0]->dtype)) return reduce_float(c, in[0], out[0], &w, k);
    return reduce_int(c, in[0], out[0], &w, k);
}

ry_status ry_cpu_reduce_sum(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    return reduce(c, nin, in, nout, out, RED_SUM);
}

ry_status ry_cpu_reduce_mean(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out) {
    return reduce(c, nin, in, nout, out, RED_MEAN);
}

ry_status ry_cpu_reduce_max(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    return reduce(c, nin, in, nout, out, RED_MAX);
}

ry_status ry_cpu_reduce_min(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out) {
    return reduce(c, nin, in, nout, out, RED_MIN);
}

/* ---- argmax / argmin ----
 * The result (int32) is the index of the extreme element inside the reduced
 * subspace, flattened in C order over the reduced axes. Ties go to the first
 * index, or the last with select_last_index. A NaN counts as the extreme
 * (the first NaN wins), as in NumPy. */

typedef struct best {
    double v;
    int64_t iv; /* integer dtypes compare exactly */
    int64_t at; /* -1: nothing seen yet */
} best;

static bool better_f(double v, double cur, bool is_max, bool last) {
    if (isnan(cur)) return false;
    if (isnan(v)) return true;
    if (last) return is_max ? v >= cur : v <= cur;
    return is_max ? v > cur : v < cur;
}

static bool better_i(int64_t v, int64_t cur, bool is_max, bool last) {
    if (last) return is_max ? v >= cur : v <= cur;
    return is_max ? v > cur : v < cur;
}

static ry_status arg_reduce(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out, bool is_max) {
    assert(nin == 1 && nout == 1 && out[0]->dtype == RY_INT32);
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    bool mask[RY_MAX_RANK];
    if (!ry_reduce_mask(c->op, c->attrs, x->ndim, mask))
        return ry_error_at(c->err, c->span, "%s: invalid reduction axes", c->op->name);
    bool last = ry_attr_bool(c->op, c->attrs, "select_last_index");
    walk w;
    walk_init(&w, x, mask);
    bool fl = is_floaty(x->dtype);
    best *b = ry_malloc(sizeof(best) * (size_t)(y->size ? y->size : 1));
    double *rowf = ry_malloc(sizeof(double) * (size_t)(w.len ? w.len : 1));
    int64_t *rowi = ry_malloc(sizeof(int64_t) * (size_t)(w.len ? w.len : 1));
    if (!b || !rowf || !rowi) {
        ry_free(b);
        ry_free(rowf);
        ry_free(rowi);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    for (int64_t i = 0; i < y->size; i++) b[i] = (best){0, 0, -1};
    int64_t idx[RY_MAX_RANK] = {0}, o = 0, r = 0;
    int64_t ostep = w.ndim ? w.os[w.ndim - 1] : 0, rstep = w.ndim ? w.rs[w.ndim - 1] : 0;
    for (int64_t q = 0; q < w.rows; q++) {
        if (fl)
            row_f64(x, q * w.len, w.len, rowf);
        else
            row_i64(x, q * w.len, w.len, rowi);
        for (int64_t j = 0; j < w.len; j++) {
            best *bb = &b[o + j * ostep];
            bool take = bb->at < 0 || (fl ? better_f(rowf[j], bb->v, is_max, last)
                                          : better_i(rowi[j], bb->iv, is_max, last));
            if (take) *bb = (best){fl ? rowf[j] : 0, fl ? 0 : rowi[j], r + j * rstep};
        }
        walk_next(&w, idx, &o, &r);
    }
    int32_t *yd = y->data;
    for (int64_t i = 0; i < y->size; i++) yd[i] = (int32_t)(b[i].at < 0 ? 0 : b[i].at);
    ry_free(b);
    ry_free(rowf);
    ry_free(rowi);
    return RY_OK;
}

ry_status ry_cpu_reduce_argmax(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out) {
    return arg_reduce(c, nin, in, nout, out, true);
}

ry_status ry_cpu_reduce_argmin(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out) {
    return arg_reduce(c, nin, in, nout, out, false);
}
