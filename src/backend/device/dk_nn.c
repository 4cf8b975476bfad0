/*
 * dk_nn.c (device): the small nn kernels and arrays: nn.pad and
 * nn.mirror_pad, nn.prelu, nn.cross_entropy(_with_logits), nn.dropout,
 * one_hot and stack, as the CPU's kernels define them (src/backend/cpu/
 * nn.c, softmax.c, transform.c), from kernel_gen_norm.c's kernels.
 */
#include <math.h>
#include <string.h>

#include "tensor/dims.h"
#include "backend/device/dk_ops.h"

/* the device of the call, with want_lo..want_hi inputs; NULL with the error */
static const ry_dk_device *need(ry_kernel_ctx *c, int nin, int want_lo, int want_hi,
                                ry_tensor *const *in, int nout, ry_tensor *const *out) {
    if (nin < want_lo || nin > want_hi) {
        ry_error_at(c->err, c->span, "%s: expected %d inputs", c->op->name, want_lo);
        return NULL;
    }
    return ry_dk_of(c, nin, in, nout, out);
}

static int axis_of(ry_kernel_ctx *c, int nd) {
    int64_t a = ry_attr_int(c->op, c->attrs, "axis");
    return (int)(a < 0 ? a + nd : a);
}

/* nn.pad (x, pad_value) and nn.mirror_pad (x): every dtype */
DK_KERNEL(ry_dk_pad) {
    const ry_dk_device *d = need(c, nin, 1, 2, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0], *pv = nin == 2 ? in[1] : in[0];
    ry_tensor *y = out[0];
    int nd = x->ndim;
    if (y->size == 0) return RY_OK;
    const char *mname = ry_attr_str(c->op, c->attrs, nin == 1 ? "mode" : "pad_mode");
    int mode = strcmp(mname, "edge") == 0                                       ? 1
               : strcmp(mname, "reflect") == 0 || strcmp(mname, "REFLECT") == 0 ? 2
               : strcmp(mname, "SYMMETRIC") == 0                                ? 3
                                                                                : 0;
    const ry_attr_value *pw = nd ? ry_attr_get(c->op, c->attrs, "pad_width") : NULL;
    ry_karg a[8 + 3 * RY_MAX_RANK];
    int n = 0;
    a[n++] = KA_L(y->size);
    a[n++] = KA_B(y);
    a[n++] = KA_L(ry_dk_off(y));
    a[n++] = KA_B(x);
    a[n++] = KA_L(ry_dk_off(x));
    a[n++] = KA_B(pv);
    a[n++] = KA_L(ry_dk_off(pv));
    a[n++] = KA_L(mode);
    for (int d = 0; d < nd; d++) {
        a[n++] = KA_L(y->shape[d]);
        a[n++] = KA_L(x->shape[d]);
        a[n++] = KA_L(pw->list.items[d].list.items[0].i);
    }
    /* float16 moves its bits: a pad value of another dtype would need a
     * conversion to half */
    if (x->dtype == RY_FLOAT16 && pv->dtype != RY_FLOAT16)
        return ry_error_at(c->err, c->span, "%s: a %s pad value for float16 data has no kernel on %s",
                           c->op->name, ry_dtype_name(pv->dtype), d->dialect->name);
    ry_gen_types t = {ry_dk_move_type(d, x->dtype), ry_dk_move_type(d, pv->dtype), NULL};
    return ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_PAD, nd, &t), x->dtype, (size_t)y->size, n, a);
}

static DK_KERNEL(prelu_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 2, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0];
    int axis = axis_of(c, x->ndim);
    ry_gen_types t = {ry_dk_type(d, x->dtype), NULL, NULL};
    ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(x), KA_T(in[1]), KA_L(x->shape[axis]),
                  KA_L(ry_dims_prod(x->shape, axis + 1, x->ndim))};
    return ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_PRELU, 0, &t), x->dtype, (size_t)x->size,
                         NARGS(a), a);
}

static ry_status xent(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out,
                      bool logits) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 2, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0];
    ry_gen_types t = {ry_dk_type(d, x->dtype), ry_dk_acc_type(d, x->dtype), NULL};
    ry_karg a[] = {KA_L(1), KA_T(out[0]), KA_T(x), KA_T(in[1]), KA_L(x->size), KA_L(x->shape[0])};
    return ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, logits ? RY_GEN_XENT_LOGITS : RY_GEN_XENT, 0, &t),
                         x->dtype, 1, NARGS(a), a);
}

static DK_KERNEL(cross_entropy_wide) { return xent(c, nin, in, nout, out, false); }
static DK_KERNEL(cross_entropy_with_logits_wide) { return xent(c, nin, in, nout, out, true); }

/* nn.dropout -> (out, mask): the CPU's splitmix64 stream (nn.c), draw i
 * = the mix of state + (i + 1) * gamma, computed per element on the
 * device; then the host's state moves past the n draws, as the CPU's
 * does. Kept when u = (draw >> 11) / 2^53 >= rate, that is when
 * draw >> 11 >= ceil(rate * 2^53) (exact in a double). */
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull
static DK_KERNEL(dropout_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 1, in, nout, out);
    if (!d) return RY_ERR;
    if (nout != 2 || out[1]->dtype != in[0]->dtype)
        return ry_error_at(c->err, c->span, "%s: expected (out, mask) of the data's dtype", c->op->name);
    double rate = ry_attr_float(c->op, c->attrs, "rate");
    double scale = rate < 1 ? 1.0 / (1.0 - rate) : 0;
    if (c->training && !c->rng)
        return ry_error_at(c->err, c->span, "%s in training mode needs a random state", c->op->name);
    const ry_tensor *x = in[0];
    double th = ceil(rate * 9007199254740992.0);
    uint64_t threshold = th <= 0 ? 0 : th >= 9007199254740992.0 ? (uint64_t)1 << 53 : (uint64_t)th;
    uint64_t state = c->training ? *c->rng : 0;
    ry_gen_types t = {ry_dk_type(d, x->dtype), NULL, NULL};
    ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(out[1]), KA_T(x), KA_L((int64_t)state),
                  KA_L((int64_t)threshold), x->dtype == RY_FLOAT32 ? KA_F(scale) : KA_D(scale),
                  KA_L(c->training)};
    ry_status s = ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_DROPOUT, 0, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    if (s == RY_OK && c->training) *c->rng += (uint64_t)x->size * SPLITMIX_GAMMA;
    return s;
}

/* one_hot(indices, on, off): on where the index along axis lands */
DK_KERNEL(ry_dk_one_hot) {
    const ry_dk_device *d = need(c, nin, 3, 3, in, nout, out);
    if (!d) return RY_ERR;
    ry_tensor *y = out[0];
    if (in[1]->dtype != in[2]->dtype)
        return ry_error_at(c->err, c->span, "%s: on and off values of %s and %s on %s (one dtype expected)",
                           c->op->name, ry_dtype_name(in[1]->dtype), ry_dtype_name(in[2]->dtype),
                           d->dialect->name);
    int axis = axis_of(c, y->ndim);
    int64_t depth = y->shape[axis], Q = ry_dims_prod(y->shape, axis + 1, y->ndim);
    if (y->dtype == RY_FLOAT16 && in[1]->dtype != RY_FLOAT16)
        return ry_error_at(c->err, c->span, "%s: %s values for a float16 result have no kernel on %s",
                           c->op->name, ry_dtype_name(in[1]->dtype), d->dialect->name);
    ry_gen_types t = {ry_dk_move_type(d, y->dtype), ry_dk_move_type(d, in[1]->dtype), ry_dk_type(d, in[0]->dtype)};
    if (!t.A || !t.X)
        return ry_dk_no_kernel(d, c, t.A ? in[0]->dtype : in[1]->dtype);
    ry_karg a[] = {KA_L(y->size), KA_T(y), KA_T(in[0]), KA_T(in[1]), KA_T(in[2]), KA_L(depth), KA_L(Q)};
    return ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_ONE_HOT, 0, &t), y->dtype, (size_t)y->size,
                         NARGS(a), a);
}

/* stack: concatenate of the inputs viewed with an extent of 1 at axis */
#define MAX_STACK 256
DK_KERNEL(ry_dk_stack) {
    if (nin < 1 || nin > MAX_STACK || nout != 1)
        return ry_error_at(c->err, c->span, "%s: expected 1 to %d inputs", c->op->name, MAX_STACK);
    DK_DEVICE(nin, in, nout, out);
    int axis = axis_of(c, out[0]->ndim);
    ry_tensor *views[MAX_STACK];
    ry_status s = RY_OK;
    int made = 0;
    for (; made < nin; made++) {
        int64_t shape[RY_MAX_RANK];
        const ry_tensor *t = in[made];
        for (int d = 0, k = 0; d < out[0]->ndim; d++) shape[d] = d == axis ? 1 : t->shape[k++];
        views[made] = ry_tensor_view(in[made], 0, t->dtype, out[0]->ndim, shape);
        if (!views[made]) {
            s = ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
            break;
        }
    }
    if (s == RY_OK) s = ry_dk_concatenate(c, nin, views, nout, out);
    for (int i = 0; i < made; i++) ry_tensor_release(views[i]);
    return s;
}

/* float16: widened to float32 around the kernels above (dk_widen.c) */
DK_WIDENING(ry_dk_prelu, prelu_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_dropout, dropout_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_cross_entropy, cross_entropy_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_cross_entropy_with_logits, cross_entropy_with_logits_wide, RY_FLOAT32)
