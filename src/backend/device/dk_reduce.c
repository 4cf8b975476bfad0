/*
 * dk_reduce.c (device): sum, mean, max, min, argmax, argmin,
 * collapse_sum_like (the adjoint of broadcasting), softmax and
 * log_softmax, from the generator's reductions (kernel_gen_reduce.c).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_gen.h"
#include "backend/device/dk_ops.h"
#include "op/reduce_attrs.h"


/* The kernel "k" of a generated source (taken over; NULL: the generator
 * has no spelling for dt), or NULL with the error at the call. */
static ry_dk_kernel *generated(const ry_dk_device *d, ry_kernel_ctx *c, char *src, ry_dtype dt) {
    if (!src) {
        ry_dk_no_kernel(d, c, dt);
        return NULL;
    }
    ry_dk_kernel *k = d->build(src, "k", c->span, c->err);
    free(src);
    return k;
}

ry_status ry_dk_reduce_into(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_red kind,
                            const ry_tensor *x, ry_tensor *y, const bool *mask, bool last) {
    int kr, rr;
    int64_t kd[RY_MAX_RANK], ks[RY_MAX_RANK], rd[RY_MAX_RANK], rs[RY_MAX_RANK], m;
    ry_gen_reduce_dims(x->ndim, x->shape, mask, &kr, kd, ks, &rr, rd, rs, &m);
    ry_dk_kernel *k = generated(d, c, ry_gen_reduce(d->dialect, kind, x->dtype, y->dtype, d->fp64(), kr,
                                             rr, last, "k"), x->dtype);
    if (!k) return RY_ERR;
    ry_karg a[6 + 4 * RY_MAX_RANK];
    int n = 0;
    a[n++] = KA_L(y->size);
    a[n++] = KA_B(y);
    a[n++] = KA_L(ry_dk_off(y));
    a[n++] = KA_B(x);
    a[n++] = KA_L(ry_dk_off(x));
    a[n++] = KA_L(m);
    for (int i = 0; i < kr; i++) a[n++] = KA_L(kd[i]);
    for (int i = 0; i < kr; i++) a[n++] = KA_L(ks[i]);
    for (int i = 0; i < rr; i++) a[n++] = KA_L(rd[i]);
    for (int i = 0; i < rr; i++) a[n++] = KA_L(rs[i]);
    return d->launch(k, (size_t)y->size, n, a, c->span, c->err);
}

DK_KERNEL(ry_dk_reduce) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected one input", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    static const struct {
        const char *name;
        ry_gen_red kind;
    } kinds[] = {{"sum", RY_GEN_SUM}, {"mean", RY_GEN_MEAN}, {"max", RY_GEN_MAX},
                 {"min", RY_GEN_MIN}, {"argmax", RY_GEN_ARGMAX}, {"argmin", RY_GEN_ARGMIN}};
    int i = 0;
    while (i < 6 && strcmp(kinds[i].name, c->op->name) != 0) i++;
    if (i == 6) return ry_error_at(c->err, c->span, "%s: not a reduction", c->op->name);
    bool mask[RY_MAX_RANK];
    if (!ry_reduce_mask(c->op, c->attrs, in[0]->ndim, mask))
        return ry_error_at(c->err, c->span, "%s: invalid reduction axes", c->op->name);
    bool arg = kinds[i].kind == RY_GEN_ARGMAX || kinds[i].kind == RY_GEN_ARGMIN;
    return ry_dk_reduce_into(d, c, kinds[i].kind, in[0], out[0], mask,
                       arg && ry_attr_bool(c->op, c->attrs, "select_last_index"));
}

/* collapse_sum_like(x, like): x summed over the dimensions like broadcasts */
DK_KERNEL(ry_dk_collapse_sum_like) {
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0], *y = out[0];
    bool mask[RY_MAX_RANK];
    for (int d = 0; d < x->ndim; d++) {
        int yd = d - (x->ndim - y->ndim);
        mask[d] = yd < 0 || (y->shape[yd] == 1 && x->shape[d] != 1);
    }
    return ry_dk_reduce_into(d, c, RY_GEN_SUM, x, out[0], mask, false);
}

static ry_status softmax(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out, bool log) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected one input", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0];
    int64_t axis = ry_attr_int(c->op, c->attrs, "axis");
    if (axis < 0) axis += x->ndim;
    if (x->ndim == 0 || axis < 0 || axis >= x->ndim)
        return ry_error_at(c->err, c->span, "%s: axis out of range", c->op->name);
    int64_t len = x->shape[axis], inner = 1;
    for (int d = (int)axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    int64_t n = len ? x->size / len : 0;
    ry_dk_kernel *k = generated(d, c, ry_gen_softmax(d->dialect, x->dtype, log, "k"), x->dtype);
    if (!k) return RY_ERR;
    ry_karg a[] = {KA_L(n), KA_T(out[0]), KA_T(x), KA_L(len), KA_L(inner)};
    return d->launch(k, (size_t)n, 7, a, c->span, c->err);
}

DK_KERNEL(ry_dk_softmax) { return softmax(c, nin, in, nout, out, false); }
DK_KERNEL(ry_dk_log_softmax) { return softmax(c, nin, in, nout, out, true); }
