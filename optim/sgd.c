/*
 * sgd.c: stochastic gradient descent with momentum, dampening, Nesterov
 * momentum and (coupled) weight decay, as torch.optim.SGD updates one
 * parameter. One loop over the parameter's run of the slabs; the momentum
 * buffer starts as a copy of the first step's gradient, as torch's lazy
 * state does (the step count tells which step is the first).
 */
#include "optim_impl.h"

/* Per element, p the parameter, g its gradient, b the momentum buffer:
 *   d = g + wd p
 *   b = d                              on the first step (momentum != 0)
 *   b = momentum b + (1 - dampening) d later
 *   d = nesterov ? d + momentum b : b  (momentum != 0)
 *   p = p - lr d
 * Scalars are rounded to T first, as torch passes them to its kernels. */
#define SGD_KERNEL(NAME, T)                                                              \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {               \
        T *p = a->param, *b = a->slot[0];                                               \
        const T *g = a->grad;                                                           \
        const T wd = (T)a->weight_decay, mom = (T)c->momentum;                          \
        const T damp = (T)(1 - c->dampening), neg_lr = (T)(-a->lr);                     \
        const bool first = a->step == 1, nesterov = c->nesterov;                        \
        for (int64_t i = 0; i < a->n; i++) {                                            \
            T d = g[i];                                                                 \
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
