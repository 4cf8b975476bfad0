/*
 * update_rmsprop.c (cpu): RMSprop (Hinton), optionally centered and with momentum, as
 * torch.optim.RMSprop updates one parameter. eps is added after the square
 * root, as torch does (TensorFlow adds it inside).
 */
#include <math.h>

#include "backend/cpu/update_rules.h"

RY_OPTIM_VECTORIZE

/* torch.lerp: start + w (end - start), computed from the nearer end. */
#define LERP(start, end, w) ((w) < 0.5 ? (start) + (w) * ((end) - (start)) : (end) - ((end) - (start)) * (1 - (w)))

/* Per element, sq, buf, ga the slots square_avg, momentum_buffer, grad_avg:
 *   d = g sc + wd p                      (sc: the clip scale)
 *   sq = alpha sq + (1 - alpha) d d
 *   ga = lerp(ga, d, 1 - alpha)          centered
 *   avg = sqrt(sq - ga ga) + eps         centered; sqrt(sq) + eps otherwise
 *   buf = momentum buf + d / avg;  p = p - lr buf     (momentum > 0)
 *   p = p - lr d / avg                                (otherwise) */
#define RMSPROP_KERNEL(NAME, T)                                                           \
    static void NAME(const ry_optim_config *c, const ry_update_args *a) {                \
        T *p = a->param, *sq = a->slot[0], *buf = a->slot[1], *ga = a->slot[2];         \
        const T *g = a->grad;                                                            \
        const T wd = (T)a->weight_decay, eps = (T)c->eps, neg_lr = (T)(-a->lr);          \
        const T alpha = (T)c->alpha, w = (T)(1 - c->alpha), mom = (T)c->momentum;       \
        const T sc = (T)a->scale;                                                        \
        for (int64_t i = 0; i < a->n; i++) {                                             \
            T d = g[i] * sc;                                                             \
            if (wd != 0) d = d + wd * p[i];                                              \
            sq[i] = sq[i] * alpha + w * d * d;                                           \
            T avg;                                                                       \
            if (ga) {                                                                    \
                ga[i] = LERP(ga[i], d, w);                                               \
                avg = (T)sqrt(sq[i] + (T)(-1) * ga[i] * ga[i]);                          \
            } else {                                                                     \
                avg = (T)sqrt(sq[i]);                                                    \
            }                                                                            \
            avg = avg + eps;                                                             \
            if (buf) {                                                                   \
                buf[i] = buf[i] * mom + d / avg;                                         \
                p[i] = p[i] + neg_lr * buf[i];                                           \
            } else {                                                                     \
                p[i] = p[i] + neg_lr * (d / avg);                                        \
            }                                                                            \
        }                                                                                \
    }

RMSPROP_KERNEL(rmsprop_f32, float)
RMSPROP_KERNEL(rmsprop_f64, double)

void ry_optim_rmsprop_update(const ry_optim_config *c, const ry_update_args *a) {
    if (a->dtype == RY_FLOAT32)
        rmsprop_f32(c, a);
    else
        rmsprop_f64(c, a);
}
