/*
 * clip.c: what a training loop does to a gradient set between the gradient
 * and the update: clipping by global norm (torch.nn.utils.clip_grad_norm_),
 * clipping by value (clip_grad_value_), and finding the first parameter
 * whose gradient holds a NaN or an Inf, so the loop can name it.
 */
#include <math.h>
#include <string.h>

#include "backend/target.h"
#include "relayc/optim.h"

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

/* The scans are the target's kernels; these host-tensor entry points use
 * the CPU's. */
int64_t ry_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm) {
    return ry_target_cpu()->grad_scan(t, rows, nrows, norm);
}

int ry_params_find_nonfinite(const ry_param_set *g, int64_t *elem) {
    for (int i = 0; i < g->n; i++) {
        int64_t k = ry_grad_scan(g->views[i], NULL, 0, NULL);
        if (k >= 0) {
            if (elem) *elem = k;
            return i;
        }
    }
    return -1;
}
