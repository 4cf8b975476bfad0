/*
 * update_adam.c (cpu): Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), with the
 * AMSGrad variant, as torch.optim.Adam/AdamW update one parameter (the
 * single-tensor, non-capturable path). AdamW differs only in decaying the
 * parameter itself instead of adding the decay to the gradient. Plain Adam
 * (no decay, no AMSGrad) has a loop of its own with no branch inside, so
 * that it vectorizes; both loops do the same arithmetic per element.
 */
#include <math.h>

#include "backend/cpu/update_rules.h"

RY_OPTIM_VECTORIZE

/* torch.lerp: start + w (end - start), computed from the nearer end. */
#define LERP(start, end, w) ((w) < 0.5 ? (start) + (w) * ((end) - (start)) : (end) - ((end) - (start)) * (1 - (w)))

/* Per element, t the step (from 1), m, v, vmax the slots, sc the clip scale:
 *   p = p (1 - lr wd)                   AdamW
 *   d = g sc + wd p                     Adam
 *   m = lerp(m, d, 1 - beta1)
 *   v = beta2 v + (1 - beta2) d d
 *   vmax = max(vmax, v)                 AMSGrad, which then uses vmax for v
 *   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * The bias corrections are computed in double, as torch does in Python;
 * the square root is rounded once to T (sqrtf for float32: the same bits). */
#define ADAM_KERNEL(NAME, T, SQRT)                                                        \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {                \
        T *restrict p = a->param, *restrict m = a->slot[0], *restrict v = a->slot[1];    \
        T *restrict vmax = a->slot[2];                                                   \
        const T *restrict g = a->grad;                                                   \
        const bool decoupled = c->kind == RY_OPTIM_ADAMW;                                \
        const double t = (double)a->step;                                                \
        const T wd = (T)a->weight_decay, shrink = (T)(1 - a->lr * a->weight_decay);      \
        const T w1 = (T)(1 - c->beta1), beta2 = (T)c->beta2, w2 = (T)(1 - c->beta2);     \
        const T neg_step = (T)(-(a->lr / (1 - pow(c->beta1, t))));                       \
        const T bc2_sqrt = (T)sqrt(1 - pow(c->beta2, t)), eps = (T)c->eps;               \
        const T sc = (T)a->scale;                                                        \
        const int64_t n = a->n;                                                          \
        if (a->weight_decay == 0 && !vmax && w1 < (T)0.5) {                              \
            for (int64_t i = 0; i < n; i++) {                                            \
                T d = g[i] * sc;                                                         \
                m[i] = m[i] + w1 * (d - m[i]);                                           \
                v[i] = v[i] * beta2 + w2 * d * d;                                        \
                T denom = SQRT(v[i]) / bc2_sqrt + eps;                                   \
                p[i] = p[i] + neg_step * (m[i] / denom);                                 \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                \
            T d = g[i] * sc;                                                             \
            if (a->weight_decay != 0) {                                                  \
                if (decoupled)                                                           \
                    p[i] = p[i] * shrink;                                                \
                else                                                                     \
                    d = d + wd * p[i];                                                   \
            }                                                                            \
            m[i] = LERP(m[i], d, w1);                                                    \
            v[i] = v[i] * beta2 + w2 * d * d;                                            \
            T s = v[i];                                                                  \
            if (vmax) {                                                                  \
                if (vmax[i] < s || isnan(s)) vmax[i] = s;                                \
                s = vmax[i];                                                             \
            }                                                                            \
            T denom = SQRT(s) / bc2_sqrt + eps;                                          \
            p[i] = p[i] + neg_step * (m[i] / denom);                                     \
        }                                                                                \
    }

ADAM_KERNEL(adam_f32, float, sqrtf)
ADAM_KERNEL(adam_f64, double, sqrt)

void ry_optim_adam_update(const ry_optim_config *c, const ry_update_args *a) {
    if (a->dtype == RY_FLOAT32)
        adam_f32(c, a);
    else
        adam_f64(c, a);
}
