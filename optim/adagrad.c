/*
 * adagrad.c: Adagrad (Duchi et al.) with learning-rate decay, an initial
 * accumulator and eps, as torch.optim.Adagrad updates one dense parameter.
 * The accumulator's starting value is set when the optimizer is made
 * (optimizer.c), as torch does.
 */
#include <math.h>

#include "optim_impl.h"

/* Per element, t the step (from 1), s the "sum" slot:
 *   d = g + wd p
 *   s = s + d d
 *   p = p - lr / (1 + (t - 1) lr_decay) * d / (sqrt(s) + eps) */
#define ADAGRAD_KERNEL(NAME, T)                                                           \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {                \
        T *p = a->param, *s = a->slot[0];                                                \
        const T *g = a->grad;                                                            \
        const T wd = (T)a->weight_decay, eps = (T)c->eps;                                \
        const T neg_clr = (T)(-(a->lr / (1 + (double)(a->step - 1) * c->lr_decay)));     \
        for (int64_t i = 0; i < a->n; i++) {                                             \
            T d = g[i];                                                                  \
            if (wd != 0) d = d + wd * p[i];                                              \
            s[i] = s[i] + d * d;                                                         \
            T std = (T)sqrt(s[i]) + eps;                                                 \
            p[i] = p[i] + neg_clr * (d / std);                                           \
        }                                                                                \
    }

ADAGRAD_KERNEL(adagrad_f32, float)
ADAGRAD_KERNEL(adagrad_f64, double)

void ry_optim_adagrad_update(const ry_optim_config *c, const ry_update_args *a) {
    if (a->dtype == RY_FLOAT32)
        adagrad_f32(c, a);
    else
        adagrad_f64(c, a);
}
