/*
 * softmax.c (cpu): nn.softmax and nn.log_softmax along any axis, and the
 * cross-entropy losses; float32 and float64 (float16 widened to float32).
 * Numerically stable: the row's maximum is subtracted before
 * exponentiating, and sums accumulate in double in a fixed order, so
 * results are deterministic.
 */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/nn_kernels.h"

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
