/*
 * update_sgd.c (cpu): stochastic gradient descent with momentum, dampening, Nesterov
 * momentum and (coupled) weight decay, as torch.optim.SGD updates one
 * parameter. One loop over the parameter's run of the slabs; the momentum
 * buffer starts as a copy of the first step's gradient, as torch's lazy
 * state does (the step count tells which step is the first). The common
 * configurations get loops of their own with no branch inside, so that
 * they vectorize; every loop does the same arithmetic per element.
 */
#include "backend/cpu/update_rules.h"

RY_OPTIM_VECTORIZE

/* Per element, p the parameter, g its gradient, s the clip scale, b the
 * momentum buffer:
 *   d = g s + wd p
 *   b = d                              on the first step (momentum != 0)
 *   b = momentum b + (1 - dampening) d later
 *   d = nesterov ? d + momentum b : b  (momentum != 0)
 *   p = p - lr d
 * Scalars are rounded to T first, as torch passes them to its kernels.
 * (g s is g when s is 1, and a clipped gradient is g s as torch's in-place
 * clip_grad_norm_ leaves it.) */
#define SGD_KERNEL(NAME, T)                                                              \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {               \
        T *restrict p = a->param, *restrict b = a->slot[0];                             \
        const T *restrict g = a->grad;                                                  \
        const T wd = (T)a->weight_decay, mom = (T)c->momentum, sc = (T)a->scale;        \
        const T damp = (T)(1 - c->dampening), neg_lr = (T)(-a->lr);                     \
        const bool first = a->step == 1, nesterov = c->nesterov;                        \
        const int64_t n = a->n;                                                         \
        if (!b && wd == 0) {                                                            \
            for (int64_t i = 0; i < n; i++) p[i] = p[i] + neg_lr * (g[i] * sc);         \
            return;                                                                     \
        }                                                                               \
        if (b && !first && !nesterov && wd == 0) {                                      \
            for (int64_t i = 0; i < n; i++) {                                           \
                b[i] = b[i] * mom + damp * (g[i] * sc);                                 \
                p[i] = p[i] + neg_lr * b[i];                                            \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        if (b && !first && !nesterov) {                                                 \
            for (int64_t i = 0; i < n; i++) {                                           \
                T d = g[i] * sc + wd * p[i];                                            \
                b[i] = b[i] * mom + damp * d;                                           \
                p[i] = p[i] + neg_lr * b[i];                                            \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        for (int64_t i = 0; i < n; i++) {                                               \
            T d = g[i] * sc;                                                            \
            if (wd != 0) d = d + wd * p[i];                                             \
            if (b) {                                                                    \
                b[i] = first ? d : b[i] * mom + damp * d;                               \
                d = nesterov ? d + mom * b[i] : b[i];                                   \
            }                                                                           \
            p[i] = p[i] + neg_lr * d;                                                   \
        }                                                                               \
    }

SGD_KERNEL(sgd_f32, float)
SGD_KERNEL(sgd_f64, double)

void ry_optim_sgd_update(const ry_optim_config *c, const ry_update_args *a) {
    if (a->dtype == RY_FLOAT32)
        sgd_f32(c, a);
    else
        sgd_f64(c, a);
}
