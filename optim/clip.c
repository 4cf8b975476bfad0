/*
 * clip.c: what a training loop does to a gradient set between the gradient
 * and the update: clipping by global norm (torch.nn.utils.clip_grad_norm_),
 * clipping by value (clip_grad_value_), and finding the first parameter
 * whose gradient holds a NaN or an Inf, so the loop can name it.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "relayc/optim.h"

#include "backend/cpu/parallel.h"

/* The finiteness scans are integer tests on the exponent bits, which
 * vectorize (GCC needs the pragma at -O2; clang does it anyway). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

/* The p-norm of one tensor's n elements, accumulated in double. */
static double tensor_norm(const ry_tensor *t, double p) {
    double acc = 0;
    for (int64_t i = 0; i < t->size; i++) {
        double a = fabs(t->dtype == RY_FLOAT32 ? (double)((const float *)t->data)[i]
                                               : ((const double *)t->data)[i]);
        if (isinf(p))
            acc = a > acc || isnan(a) ? a : acc;
        else if (p == 1)
            acc += a;
        else if (p == 2)
            acc += a * a;
        else
            acc += pow(a, p);
    }
    return isinf(p) || p == 1 ? acc : p == 2 ? sqrt(acc) : pow(acc, 1 / p);
}

/* Rounds to the set's dtype: torch holds these norms as tensors of it. */
static double as_dtype(ry_dtype d, double v) { return d == RY_FLOAT32 ? (double)(float)v : v; }

/* || (||g_1||, ..., ||g_n||) ||_p over the per-tensor norms a[0..n), each
 * rounded to the dtype first (torch's per-tensor norms are tensors). */
static double combine(ry_dtype dt, const double *a, int n, double norm_type) {
    double acc = 0;
    for (int i = 0; i < n; i++) {
        double x = as_dtype(dt, a[i]);
        if (isinf(norm_type))
            acc = x > acc || isnan(x) ? x : acc;
        else if (norm_type == 2)
            acc += x * x;
        else
            acc += pow(x, norm_type);
    }
    double total = isinf(norm_type) ? acc : norm_type == 2 ? sqrt(acc) : pow(acc, 1 / norm_type);
    return as_dtype(dt, total);
}

static double coef_of(ry_dtype dt, double total, double max_norm) {
    double coef = as_dtype(dt, max_norm / as_dtype(dt, total + 1e-6));
    return coef > 1 ? 1 : coef;
}

double ry_clip_coef(ry_dtype dt, const double *norms, int n, double max_norm, double *total_norm) {
    double total = combine(dt, norms, n, 2.0);
    if (total_norm) *total_norm = total;
    return coef_of(dt, total, max_norm);
}

/* total = || (||g_1||, ..., ||g_n||) ||_p; coef = min(1, max_norm / (total + 1e-6));
 * g_i *= coef for every i (coef may be NaN: then so is every gradient). */
ry_status ry_clip_grad_norm(ry_param_set *grads, double max_norm, double norm_type,
                            double *total_norm, ry_error *err) {
    if (!(max_norm >= 0))
        return ry_error_at(err, RY_NO_SPAN, "clip_grad_norm: max_norm %g must be >= 0", max_norm);
    if (!(norm_type > 0))
        return ry_error_at(err, RY_NO_SPAN, "clip_grad_norm: norm_type %g must be > 0 or inf",
                           norm_type);
    ry_dtype dt = grads->dtype;
    double *norms = ry_calloc((size_t)(grads->n ? grads->n : 1), sizeof *norms);
    if (!norms) return ry_error_at(err, RY_NO_SPAN, "clip_grad_norm: out of memory");
    for (int i = 0; i < grads->n; i++) norms[i] = tensor_norm(grads->views[i], norm_type);
    double total = combine(dt, norms, grads->n, norm_type);
    ry_free(norms);
    if (total_norm) *total_norm = total;
    double coef = coef_of(dt, total, max_norm);
    for (int i = 0; i < grads->n; i++) {
        ry_tensor *t = grads->views[i];
        if (dt == RY_FLOAT32) {
            float *x = t->data, c = (float)coef;
            for (int64_t k = 0; k < t->size; k++) x[k] *= c;
        } else {
            double *x = t->data;
            for (int64_t k = 0; k < t->size; k++) x[k] *= coef;
        }
    }
    return RY_OK;
}

/* g = clamp(g, -clip, clip); comparisons with NaN are false, so NaN stays. */
ry_status ry_clip_grad_value(ry_param_set *grads, double clip, ry_error *err) {
    if (!(clip >= 0))
        return ry_error_at(err, RY_NO_SPAN, "clip_grad_value: clip %g must be >= 0", clip);
    for (int i = 0; i < grads->n; i++) {
        ry_tensor *t = grads->views[i];
        if (grads->dtype == RY_FLOAT32) {
            float *x = t->data, hi = (float)clip;
            for (int64_t k = 0; k < t->size; k++) x[k] = x[k] < -hi ? -hi : x[k] > hi ? hi : x[k];
        } else {
            double *x = t->data;
            for (int64_t k = 0; k < t->size; k++) x[k] = x[k] < -clip ? -clip : x[k] > clip ? clip : x[k];
        }
    }
    return RY_OK;
}

/* Whether x[0..n) holds a NaN or Inf: an all-ones exponent. One OR over
 * the whole run (no early exit), so the loop vectorizes. */
static bool any_bad_f32(const float *x, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

static bool any_bad_f64(const double *x, int64_t n) {
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7ff0000000000000u) == 0x7ff0000000000000u;
    }
    return bad != 0;
}

/* The scan of a large run split over the CPU pool: an OR of the chunks'
 * answers, so the split never changes the result. */
typedef struct bad_split {
    const ry_tensor *t;
    int64_t lo;
    atomic_bool bad;
} bad_split;

static void bad_chunk(void *ctx, int64_t lo, int64_t hi) {
    bad_split *b = ctx;
    const ry_tensor *t = b->t;
    bool bad = t->dtype == RY_FLOAT32 ? any_bad_f32((const float *)t->data + b->lo + lo, hi - lo)
                                      : any_bad_f64((const double *)t->data + b->lo + lo, hi - lo);
    if (bad) atomic_store_explicit(&b->bad, true, memory_order_relaxed);
}

/* The first NaN/Inf of t's elements [lo, hi), or -1. */
static int64_t first_bad(const ry_tensor *t, int64_t lo, int64_t hi) {
    bool f32 = t->dtype == RY_FLOAT32;
    bad_split b = {.t = t, .lo = lo};
    atomic_init(&b.bad, false);
    /* a read-only pass at memory speed: split only long runs */
    ry_parallel_for(hi - lo, RY_PAR_GRAIN_EW, bad_chunk, &b);
    if (!atomic_load_explicit(&b.bad, memory_order_relaxed)) return -1;
    for (int64_t k = lo; k < hi; k++)
        if (!isfinite(f32 ? (double)((const float *)t->data)[k] : ((const double *)t->data)[k]))
            return k;
    return -1;
}

int64_t ry_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm) {
    int64_t row = !rows ? t->size : t->shape[0] ? t->size / t->shape[0] : 0;
    int64_t runs = rows ? nrows : 1;
    double acc = 0;
    for (int64_t r = 0; r < runs; r++) {
        int64_t lo = rows ? rows[r] * row : 0, hi = lo + row;
        if (!norm) {
            int64_t k = first_bad(t, lo, hi);
            if (k >= 0) return k;
            continue;
        }
        /* as tensor_norm(t, 2): squares summed in double in element order
         * (rows left out are zero and would add exactly nothing) */
        if (t->dtype == RY_FLOAT32) {
            const float *x = t->data;
            for (int64_t k = lo; k < hi; k++) {
                double a = fabs((double)x[k]);
                acc += a * a;
            }
        } else {
            const double *x = t->data;
            for (int64_t k = lo; k < hi; k++) {
                double a = fabs(x[k]);
                acc += a * a;
            }
        }
    }
    if (!norm) return -1;
    *norm = sqrt(acc);
    if (isfinite(acc)) return -1; /* finite squares only come from finite elements */
    for (int64_t r = 0; r < runs; r++) {
        int64_t lo = rows ? rows[r] * row : 0, k = first_bad(t, lo, lo + row);
        if (k >= 0) return k;
    }
    return -1; /* float64 squares can overflow: a finite gradient, an infinite norm */
}

int ry_params_find_nonfinite(const ry_param_set *g, int64_t *elem) {
    for (int i = 0; i < g->n; i++) {
        int64_t k = first_bad(g->views[i], 0, g->views[i]->size);
        if (k >= 0) {
            if (elem) *elem = k;
            return i;
        }
    }
    return -1;
}
