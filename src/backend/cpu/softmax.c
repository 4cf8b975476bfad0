/*
 * softmax.c (cpu): nn.softmax and nn.log_softmax along any axis, and the
 * cross-entropy losses; float32 and float64 (float16 widened to float32).
 * Numerically stable: the row's maximum is subtracted before
 * exponentiating, and sums accumulate in double in a fixed order, so
 * results are deterministic. float32 rows along the last axis (the
 * classifier's case) exponentiate with vmath.h's vector exp (within 2 ulp)
 * in float32, as PyTorch does, and rows are split over the thread pool
 * (each row computed the same way wherever it runs); the rest use libm's
 * exp in double.
 */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/nn_kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vmath.h"

/* float32 rows of N contiguous elements, rows [lo, hi) of x and y (y may
 * be x: each element is read before it is written). */
typedef struct rows_f32 {
    const float *x;
    float *y;
    int64_t N;
    bool log_;
} rows_f32;

#define EXP_BLOCK 256 /* exponentials per vector call: a stack buffer */

static void softmax_rows_f32(void *ctx, int64_t lo, int64_t hi) {
    const rows_f32 *r = ctx;
    int64_t N = r->N;
    float e[EXP_BLOCK];
    for (int64_t o = lo; o < hi; o++) {
        const float *x = r->x + o * N;
        float *y = r->y + o * N, m = -INFINITY;
        for (int64_t n = 0; n < N; n++)
            if (x[n] > m) m = x[n];
        double z = 0;
        for (int64_t b = 0; b < N; b += EXP_BLOCK) {
            int64_t k = N - b < EXP_BLOCK ? N - b : EXP_BLOCK;
            float *out = r->log_ ? e : y + b; /* softmax keeps e in y */
            for (int64_t n = 0; n < k; n++) out[n] = x[b + n] - m;
            ry_vexp_f32(out, out, k);
            for (int64_t n = 0; n < k; n++) z += out[n];
        }
        if (r->log_) {
            double lz = m + log(z);
            for (int64_t n = 0; n < N; n++) y[n] = (float)((double)x[n] - lz);
        } else {
            for (int64_t n = 0; n < N; n++) y[n] = (float)((double)y[n] / z);
        }
    }
}

/* Shape legend: the tensor is viewed as (O, N, I): O = prod(shape[:axis]),
 * N = shape[axis], I = prod(shape[axis+1:]). Each (o, i) is one row of N
 * elements with stride I; rows of one o are processed together, walking
 * i innermost, so memory is read contiguously. mx and sum hold I doubles:
 * the rows' maxima and sums. */
#define SOFTMAX(T, EXP, LOG)                                                                       \
    do {                                                                                           \
        const T *x = in[0]->data;                                                                  \
        T *y = out[0]->data;                                                                       \
        for (int64_t o = 0; o < O; o++) {                                                          \
            const T *xo = x + o * N * I;                                                           \
            T *yo = y + o * N * I;                                                                 \
            if (I == 1) { /* the common case (axis=-1): one contiguous row */                      \
                double m = -INFINITY, z = 0;                                                       \
                for (int64_t n = 0; n < N; n++)                                                    \
                    if (xo[n] > m) m = xo[n];                                                      \
                for (int64_t n = 0; n < N; n++) {                                                  \
                    double e = EXP((double)xo[n] - m);                                             \
                    z += e;                                                                        \
                    if (!log_) yo[n] = (T)e;                                                       \
                }                                                                                  \
                if (log_) {                                                                        \
                    double lz = m + LOG(z);                                                        \
                    for (int64_t n = 0; n < N; n++) yo[n] = (T)((double)xo[n] - lz);               \
                } else {                                                                           \
                    for (int64_t n = 0; n < N; n++) yo[n] = (T)((double)yo[n] / z);                \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < I; i++) mx[i] = -INFINITY, sum[i] = 0;                         \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t i = 0; i < I; i++)                                                    \
                    if (xo[n * I + i] > mx[i]) mx[i] = xo[n * I + i];                              \
            for (int64_t n = 0; n < N; n++)                                                        \
                for (int64_t i = 0; i < I; i++) {                                                  \
                    double e = EXP((double)xo[n * I + i] - mx[i]);                                 \
                    sum[i] += e;                                                                   \
                    if (!log_) yo[n * I + i] = (T)e;                                               \
                }                                                                                  \
            if (log_) {                                                                            \
                for (int64_t i = 0; i < I; i++) sum[i] = mx[i] + LOG(sum[i]);                      \
                for (int64_t n = 0; n < N; n++)                                                    \
                    for (int64_t i = 0; i < I; i++)                                                \
                        yo[n * I + i] = (T)((double)xo[n * I + i] - sum[i]);                       \
            } else {                                                                               \
                for (int64_t i = 0; i < I; i++) sum[i] = 1.0 / sum[i];                             \
                for (int64_t n = 0; n < N; n++)                                                    \
                    for (int64_t i = 0; i < I; i++)                                                \
                        yo[n * I + i] = (T)((double)yo[n * I + i] * sum[i]);                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static ry_status softmax(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out, bool log_) {
    int64_t O, N, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &N, &I);
    if (in[0]->size == 0) return RY_OK;
    if (in[0]->dtype == RY_FLOAT32 && I == 1) {
        rows_f32 r = {in[0]->data, out[0]->data, N, log_};
        int64_t grain = RY_PAR_GRAIN_EW / (N * RY_PAR_MATH_COST) + 1;
        ry_parallel_for(O, grain, softmax_rows_f32, &r);
        return RY_OK;
    }
    double *mx = ry_malloc(sizeof(double) * 2 * (size_t)I);
    if (!mx) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    double *sum = mx + I;
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        SOFTMAX(float, exp, log);
        break;
    case RY_FLOAT64:
        SOFTMAX(double, exp, log);
        break;
    default:
        ry_free(mx);
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    ry_free(mx);
    return RY_OK;
}

/* softmax: y = exp(x - max) / sum(exp(x - max)) along axis */
RY_NN_KERNEL(ry_cpu_softmax) {
    if (ry_cpu_nn_any_f16(nin, in)) return ry_cpu_nn_via_f32(ry_cpu_softmax, c, nin, in, nout, out);
    return softmax(c, in, out, false);
}

/* log_softmax: y = x - max - log(sum(exp(x - max))) along axis */
RY_NN_KERNEL(ry_cpu_log_softmax) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_log_softmax, c, nin, in, nout, out);
    return softmax(c, in, out, true);
}

/* cross_entropy:             -sum(y * log(x)) / n
 * cross_entropy_with_logits: -sum(y * x) / n
 * over predictions x and targets y of one shape (n, ...); the sum runs in
 * double in index order. */
#define XENT(T)                                                                                    \
    do {                                                                                           \
        const T *x = in[0]->data, *y = in[1]->data;                                                \
        for (int64_t i = 0; i < in[0]->size; i++)                                                  \
            s += (double)y[i] * (logits ? (double)x[i] : log((double)x[i]));                       \
        *(T *)out[0]->data = (T)(-s / (double)in[0]->shape[0]);                                    \
    } while (0)

static ry_status xent(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out, bool logits) {
    double s = 0;
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        XENT(float);
        break;
    case RY_FLOAT64:
        XENT(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}

RY_NN_KERNEL(ry_cpu_cross_entropy) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_cross_entropy, c, nin, in, nout, out);
    return xent(c, in, out, false);
}

RY_NN_KERNEL(ry_cpu_cross_entropy_with_logits) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_cross_entropy_with_logits, c, nin, in, nout, out);
    return xent(c, in, out, true);
}
