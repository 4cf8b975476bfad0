/*
 * update_adagrad.c (cpu): Adagrad (Duchi et al.) with learning-rate decay, an initial
 * accumulator and eps, as torch.optim.Adagrad updates one dense parameter.
 * The accumulator's starting value is set when the optimizer is made
 * (optimizer.c), as torch does. A zero gradient leaves a row unchanged
 * when there is no weight decay and eps > 0 (optimizer.c's
 * ry_optim_zero_grad_is_identity), which lets the trainer update only the
 * rows an embedding's gradient touched.
 */
#include <math.h>

#include "backend/cpu/update_rules.h"

RY_OPTIM_VECTORIZE

/* Per element, t the step (from 1), s the "sum" slot, sc the clip scale:
 *   d = g sc + wd p
 *   s = s + d d
 *   p = p - lr / (1 + (t - 1) lr_decay) * d / (sqrt(s) + eps)
 * The square root is rounded once to T (a float32 sqrt of a float32 is the
 * float32 rounding of the double sqrt, so sqrtf gives torch's bits). */
#define ADAGRAD_KERNEL(NAME, T, SQRT)                                                     \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {                \
        T *restrict p = a->param, *restrict s = a->slot[0];                              \
        const T *restrict g = a->grad;                                                   \
        const T wd = (T)a->weight_decay, eps = (T)c->eps, sc = (T)a->scale;              \
        const T neg_clr = (T)(-(a->lr / (1 + (double)(a->step - 1) * c->lr_decay)));     \
        const int64_t n = a->n;                                                          \
        if (wd == 0) {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                            \
                T d = g[i] * sc;                                                         \
                s[i] = s[i] + d * d;                                                     \
                p[i] = p[i] + neg_clr * (d / (SQRT(s[i]) + eps));                        \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                \
            T d = g[i] * sc + wd * p[i];                                                 \
            s[i] = s[i] + d * d;                                                         \
            p[i] = p[i] + neg_clr * (d / (SQRT(s[i]) + eps));                            \
        }                                                                                \
    }

ADAGRAD_KERNEL(adagrad_f32, float, sqrtf)
ADAGRAD_KERNEL(adagrad_f64, double, sqrt)

void ry_optim_adagrad_update(const ry_optim_config *c, const ry_update_args *a) {
    if (a->dtype == RY_FLOAT32)
        adagrad_f32(c, a);
    else
        adagrad_f64(c, a);
}
