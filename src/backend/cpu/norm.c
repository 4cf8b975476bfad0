/*
 * norm.c (cpu): nn.batch_norm, nn.layer_norm, nn.instance_norm,
 * nn.group_norm, nn.lrn and nn.l2_normalize, float32 and float64 (float16 widened
 * to float32). Statistics are computed in double, two passes (mean, then
 * squared deviations) in a fixed order: accurate and deterministic.
 */
#include <math.h>

#include "backend/cpu/nn_kernels.h"

/* batch_norm in training mode: TVM leaves the running-statistics update
 * undefined, so relayc mirrors PyTorch: momentum 0.1, the normalization uses
 * the biased batch variance, and the running variance is updated with the
 * unbiased one:
 *   new_mean = 0.9 * moving_mean + 0.1 * mean
 *   new_var  = 0.9 * moving_var  + 0.1 * var * n / (n - 1)
 * At inference the moving statistics normalize and come back unchanged.
 *
 * Shape legend: data is (O, C, I): O = prod(shape[:axis]), C = shape[axis],
 * I = prod(shape[axis+1:]); channel ch has the n = O * I values
 * x[o, ch, i]. out = (x - mean) * g / sqrt(var + eps) + b with g = gamma
 * (1 without scale) and b = beta (0 without center). */
#define BATCH_NORM(T)                                                                              \
    do {                                                                                           \
        const T *x = in[0]->data, *gamma = in[1]->data, *beta = in[2]->data;                       \
        const T *mm = in[3]->data, *mv = in[4]->data;                                              \
        T *y = out[0]->data, *nm = out[1]->data, *nv = out[2]->data;                               \
        for (int64_t ch = 0; ch < C; ch++) {                                                       \
            double mean = mm[ch], var = mv[ch];                                                    \
            if (c->training) {                                                                     \
                double s = 0, q = 0;                                                               \
                for (int64_t o = 0; o < O; o++)                                                    \
                    for (int64_t i = 0; i < I; i++) s += x[(o * C + ch) * I + i];                  \
                mean = s / (double)n;                                                              \
                for (int64_t o = 0; o < O; o++)                                                    \
                    for (int64_t i = 0; i < I; i++) {                                              \
                        double d = x[(o * C + ch) * I + i] - mean;                                 \
                        q += d * d;                                                                \
                    }                                                                              \
                var = q / (double)n;                                                               \
                nm[ch] = (T)(0.9 * mm[ch] + 0.1 * mean);                                           \
                nv[ch] = (T)(0.9 * mv[ch] + 0.1 * q / (double)(n - 1));                            \
            } else {                                                                               \
                nm[ch] = mm[ch];                                                                   \
                nv[ch] = mv[ch];                                                                   \
            }                                                                                      \
            double g = (scale ? gamma[ch] : 1.0) / sqrt(var + eps);                                \
            double b = center ? beta[ch] : 0.0;                                                    \
            for (int64_t o = 0; o < O; o++) {                                                      \
                const T *xs = x + (o * C + ch) * I;                                                \
                T *ys = y + (o * C + ch) * I;                                                      \
                for (int64_t i = 0; i < I; i++) ys[i] = (T)((xs[i] - mean) * g + b);               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

RY_NN_KERNEL(ry_cpu_batch_norm) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_batch_norm, c, nin, in, nout, out);
    int64_t O, C, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &C, &I);
    int64_t n = O * I;
    double eps = ry_attr_float(c->op, c->attrs, "epsilon");
    bool center = ry_attr_bool(c->op, c->attrs, "center");
    bool scale = ry_attr_bool(c->op, c->attrs, "scale");
    if (c->training && n < 2 && C > 0)
        return ry_error_at(c->err, c->span,
                           "%s in training mode needs more than one value per channel, got %lld",
                           c->op->name, (long long)n);
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        BATCH_NORM(float);
        break;
    case RY_FLOAT64:
        BATCH_NORM(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}

/* Shape legend: data is (O, N, I) around axis; each (o, i) is normalized
 * over its N values (stride I) with the biased variance:
 * out[o, k, i] = (x - mean) / sqrt(var + eps) * gamma[k] + beta[k].
 * mean and rstd hold I doubles for the rows of one o, walked i innermost. */
#define LAYER_NORM(T)                                                                              \
    do {                                                                                           \
        const T *x = in[0]->data, *gamma = in[1]->data, *beta = in[2]->data;                       \
        T *y = out[0]->data;                                                                       \
        for (int64_t o = 0; o < O; o++) {                                                          \
            const T *xo = x + o * N * I;                                                           \
            T *yo = y + o * N * I;                                                                 \
            if (I == 1) { /* the common case (axis=-1): one contiguous row */                      \
                double m = 0, q = 0;                                                               \
                for (int64_t k = 0; k < N; k++) m += xo[k];                                        \
                m /= (double)N;                                                                    \
                for (int64_t k = 0; k < N; k++) q += (xo[k] - m) * (xo[k] - m);                    \
                double r = 1.0 / sqrt(q / (double)N + eps);                                        \
                for (int64_t k = 0; k < N; k++)                                                    \
                    yo[k] = (T)((xo[k] - m) * r * (scale ? gamma[k] : 1.0) +                       \
                                (center ? beta[k] : 0.0));                                         \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < I; i++) mean[i] = 0, rstd[i] = 0;                              \
            for (int64_t k = 0; k < N; k++)                                                        \
                for (int64_t i = 0; i < I; i++) mean[i] += xo[k * I + i];                          \
            for (int64_t i = 0; i < I; i++) mean[i] /= (double)N;                                  \
            for (int64_t k = 0; k < N; k++)                                                        \
                for (int64_t i = 0; i < I; i++) {                                                  \
                    double d = xo[k * I + i] - mean[i];                                            \
                    rstd[i] += d * d;                                                              \
                }                                                                                  \
            for (int64_t i = 0; i < I; i++) rstd[i] = 1.0 / sqrt(rstd[i] / (double)N + eps);       \
            for (int64_t k = 0; k < N; k++) {                                                      \
                double g = scale ? gamma[k] : 1.0, b = center ? beta[k] : 0.0;                     \
                for (int64_t i = 0; i < I; i++)                                                    \
                    yo[k * I + i] = (T)((xo[k * I + i] - mean[i]) * rstd[i] * g + b);              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

RY_NN_KERNEL(ry_cpu_layer_norm) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_layer_norm, c, nin, in, nout, out);
    int64_t O, N, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &N, &I);
    double eps = ry_attr_float(c->op, c->attrs, "epsilon");
    bool center = ry_attr_bool(c->op, c->attrs, "center");
    bool scale = ry_attr_bool(c->op, c->attrs, "scale");
    if (in[0]->size == 0) return RY_OK;
    double *mean = ry_malloc(sizeof(double) * 2 * (size_t)I);
    if (!mean) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    double *rstd = mean + I;
    ry_status st = RY_OK;
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        LAYER_NORM(float);
        break;
    case RY_FLOAT64:
        LAYER_NORM(double);
        break;
    default:
        st = ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                         ry_dtype_name(in[0]->dtype));
    }
    ry_free(mean);
    return st;
}

/* Shape legend: data is (N, A, C, I): N = shape[0], A = prod(shape[1:axis]),
 * C = shape[axis] split into G groups of C / G channels, I =
 * prod(shape[axis+1:]). Group g of sample n is normalized over its
 * A * (C / G) * I values (biased variance), then channel ch is scaled by
 * gamma[ch] and shifted by beta[ch]. instance_norm is the case G = C. */
#define GROUP_NORM(T)                                                                              \
    do {                                                                                           \
        const T *x = in[0]->data, *gamma = in[1]->data, *beta = in[2]->data;                       \
        T *y = out[0]->data;                                                                       \
        int64_t cg = C / G, cnt = A * cg * I;                                                      \
        for (int64_t n = 0; n < N; n++)                                                            \
            for (int64_t g = 0; g < G; g++) {                                                      \
                double s = 0, q = 0;                                                               \
                for (int64_t a = 0; a < A; a++)                                                    \
                    for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {                           \
                        const T *xs = x + ((n * A + a) * C + ch) * I;                              \
                        for (int64_t i = 0; i < I; i++) s += xs[i];                                \
                    }                                                                              \
                double mean = s / (double)cnt;                                                     \
                for (int64_t a = 0; a < A; a++)                                                    \
                    for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {                           \
                        const T *xs = x + ((n * A + a) * C + ch) * I;                              \
                        for (int64_t i = 0; i < I; i++) q += (xs[i] - mean) * (xs[i] - mean);      \
                    }                                                                              \
                double rstd = 1.0 / sqrt(q / (double)cnt + eps);                                   \
                for (int64_t a = 0; a < A; a++)                                                    \
                    for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {                           \
                        const T *xs = x + ((n * A + a) * C + ch) * I;                              \
                        T *ys = y + ((n * A + a) * C + ch) * I;                                    \
                        double gm = (scale ? gamma[ch] : 1.0) * rstd;                              \
                        double b = center ? beta[ch] : 0.0;                                        \
                        for (int64_t i = 0; i < I; i++) ys[i] = (T)((xs[i] - mean) * gm + b);      \
                    }                                                                              \
            }                                                                                      \
    } while (0)

static ry_status group_norm(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *const *out,
                            bool instance) {
    const ry_tensor *d = in[0];
    int axis = ry_cpu_nn_axis(c, "axis", d->ndim);
    int64_t N = d->shape[0], A = 1, C = d->shape[axis], I = 1;
    for (int i = 1; i < axis; i++) A *= d->shape[i];
    for (int i = axis + 1; i < d->ndim; i++) I *= d->shape[i];
    int64_t G = instance ? C : ry_attr_int(c->op, c->attrs, "num_groups");
    double eps = ry_attr_float(c->op, c->attrs, "epsilon");
    bool center = ry_attr_bool(c->op, c->attrs, "center");
    bool scale = ry_attr_bool(c->op, c->attrs, "scale");
    if (d->size == 0) return RY_OK;
    switch (d->dtype) {
    case RY_FLOAT32:
        GROUP_NORM(float);
        break;
    case RY_FLOAT64:
        GROUP_NORM(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(d->dtype));
    }
    return RY_OK;
}

RY_NN_KERNEL(ry_cpu_instance_norm) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_instance_norm, c, nin, in, nout, out);
    return group_norm(c, in, out, true);
}

RY_NN_KERNEL(ry_cpu_group_norm) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_group_norm, c, nin, in, nout, out);
    return group_norm(c, in, out, false);
}

/* l2_normalize: out = x / sqrt(max(s, eps)), s the sum of x^2 over the
 * listed axes. Each element's kept index (the reduced axes dropped) is
 * tracked with an odometer; sums accumulate in double in index order. */
#define L2_NORMALIZE(T)                                                                            \
    do {                                                                                           \
        const T *x = in[0]->data;                                                                  \
        T *y = out[0]->data;                                                                       \
        for (int pass = 0; pass < 2; pass++) {                                                     \
            int64_t idx[RY_MAX_RANK] = {0}, k = 0;                                                 \
            for (int64_t e = 0; e < d->size; e++) {                                                \
                if (pass == 0)                                                                     \
                    sum[k] += (double)x[e] * (double)x[e];                                         \
                else                                                                               \
                    y[e] = (T)((double)x[e] / sqrt(sum[k] > eps ? sum[k] : eps));                  \
                for (int a = nd - 1; a >= 0; a--) {                                                \
                    if (++idx[a] < d->shape[a]) {                                                  \
                        k += kstride[a];                                                           \
                        break;                                                                     \
                    }                                                                              \
                    k -= kstride[a] * (d->shape[a] - 1);                                           \
                    idx[a] = 0;                                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

RY_NN_KERNEL(ry_cpu_l2_normalize) {
    if (ry_cpu_nn_any_f16(nin, in))
        return ry_cpu_nn_via_f32(ry_cpu_l2_normalize, c, nin, in, nout, out);
    const ry_tensor *d = in[0];
    int nd = d->ndim;
    double eps = ry_attr_float(c->op, c->attrs, "eps");
    int64_t ax[RY_MAX_RANK];
    int nax = ry_attr_ints(c->op, c->attrs, "axis", ax, RY_MAX_RANK);
    bool red[RY_MAX_RANK] = {0};
    for (int i = 0; i < nax; i++) red[ax[i] < 0 ? ax[i] + nd : ax[i]] = true;
    /* kstride[a]: the step of the kept index along axis a (0 if reduced) */
    int64_t kstride[RY_MAX_RANK], nkept = 1;
    for (int a = nd - 1; a >= 0; a--) {
        kstride[a] = red[a] ? 0 : nkept;
        if (!red[a]) nkept *= d->shape[a];
    }
    if (d->size == 0) return RY_OK;
    double *sum = ry_calloc((size_t)nkept, sizeof(double));
    if (!sum) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    ry_status st = RY_OK;
    switch (d->dtype) {
    case RY_FLOAT32:
        L2_NORMALIZE(float);
        break;
    case RY_FLOAT64:
        L2_NORMALIZE(double);
        break;
    default:
        st = ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                         ry_dtype_name(d->dtype));
    }
    ry_free(sum);
    return st;
}

/* lrn: out[o, ch, i] = x / (bias + alpha * s / size)^beta, where s sums
 * x[o, k, i]^2 over the window k in [ch - size/2, ch + size/2] clipped to
 * [0, C) (TVM pads the channel axis with zeros). (O, C, I) is the split of
 * the shape around axis. */
#define LRN(T)                                                                                     \
    do {                                                                                           \
        const T *x = in[0]->data;                                                                  \
        T *y = out[0]->data;                                                                       \
        for (int64_t o = 0; o < O; o++)                                                            \
            for (int64_t ch = 0; ch < C; ch++) {                                                   \
                int64_t lo = ch - half < 0 ? 0 : ch - half;                                        \
                int64_t hi = ch + half >= C ? C - 1 : ch + half;                                   \
                for (int64_t i = 0; i < I; i++) {                                                  \
                    double s = 0;                                                                  \
                    for (int64_t k = lo; k <= hi; k++) {                                           \
                        double v = x[(o * C + k) * I + i];                                         \
                        s += v * v;                                                                \
                    }                                                                              \
                    double d = pow(bias + alpha * s / (double)size, beta);                         \
                    y[(o * C + ch) * I + i] = (T)(x[(o * C + ch) * I + i] / d);                    \
                }                                                                                  \
            }                                                                                      \
    } while (0)

RY_NN_KERNEL(ry_cpu_lrn) {
    if (ry_cpu_nn_any_f16(nin, in)) return ry_cpu_nn_via_f32(ry_cpu_lrn, c, nin, in, nout, out);
    int64_t O, C, I;
    ry_cpu_nn_split(in[0], ry_cpu_nn_axis(c, "axis", in[0]->ndim), &O, &C, &I);
    int64_t size = ry_attr_int(c->op, c->attrs, "size"), half = size / 2;
    double bias = ry_attr_float(c->op, c->attrs, "bias");
    double alpha = ry_attr_float(c->op, c->attrs, "alpha");
    double beta = ry_attr_float(c->op, c->attrs, "beta");
    switch (in[0]->dtype) {
    case RY_FLOAT32:
        LRN(float);
        break;
    case RY_FLOAT64:
        LRN(double);
        break;
    default:
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(in[0]->dtype));
    }
    return RY_OK;
}
