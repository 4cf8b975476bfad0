/*
 * cl_reduce.c (opencl): sum, mean, max, min, argmax, argmin,
 * collapse_sum_like (the adjoint of broadcasting), softmax and
 * log_softmax, from the generator's reductions (kernel_gen_reduce.c).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_gen.h"
#include "backend/opencl/cl_elemwise.h"
#include "op/reduce_attrs.h"

extern const ry_dialect ry_cl_dialect;

/* The kernel "k" of a generated source (taken over; NULL: the generator
 * has no spelling for dt), or NULL with the error at the call. */
static cl_kernel generated(ry_kernel_ctx *c, char *src, ry_dtype dt) {
    if (!src) {
        ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name, ry_dtype_name(dt));
        return NULL;
    }
    cl_kernel k = ry_cl_kernel(src, "k", c->span, c->err);
    free(src);
    return k;
}

ry_status ry_cl_reduce_into(ry_kernel_ctx *c, ry_gen_red kind, const ry_tensor *x, ry_tensor *y,
                             const bool *mask, bool last) {
    int kr, rr;
    int64_t kd[RY_MAX_RANK], ks[RY_MAX_RANK], rd[RY_MAX_RANK], rs[RY_MAX_RANK], m;
    ry_gen_reduce_dims(x->ndim, x->shape, mask, &kr, kd, ks, &rr, rd, rs, &m);
    cl_kernel k = generated(c, ry_gen_reduce(&ry_cl_dialect, kind, x->dtype, y->dtype, ry_cl.fp64, kr,
                                             rr, last, "k"), x->dtype);
    if (!k) return RY_ERR;
    cl_arg a[6 + 4 * RY_MAX_RANK];
    int n = 0;
    a[n++] = CLA_L(y->size);
    a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(y), 0, 0};
    a[n++] = CLA_L(ry_cl_off(y));
    a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(x), 0, 0};
    a[n++] = CLA_L(ry_cl_off(x));
    a[n++] = CLA_L(m);
    for (int i = 0; i < kr; i++) a[n++] = CLA_L(kd[i]);
    for (int i = 0; i < kr; i++) a[n++] = CLA_L(ks[i]);
    for (int i = 0; i < rr; i++) a[n++] = CLA_L(rd[i]);
    for (int i = 0; i < rr; i++) a[n++] = CLA_L(rs[i]);
    return ry_cl_run(k, (size_t)y->size, n, a, c->span, c->err);
}

CL_KERNEL(ry_cl_reduce) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected one input", c->op->name);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
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
    return ry_cl_reduce_into(c, kinds[i].kind, in[0], out[0], mask,
                       arg && ry_attr_bool(c->op, c->attrs, "select_last_index"));
}

/* collapse_sum_like(x, like): x summed over the dimensions like broadcasts */
CL_KERNEL(ry_cl_collapse_sum_like) {
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    const ry_tensor *x = in[0], *y = out[0];
    bool mask[RY_MAX_RANK];
    for (int d = 0; d < x->ndim; d++) {
        int yd = d - (x->ndim - y->ndim);
        mask[d] = yd < 0 || (y->shape[yd] == 1 && x->shape[d] != 1);
    }
    return ry_cl_reduce_into(c, RY_GEN_SUM, x, out[0], mask, false);
}

static ry_status softmax(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out, bool log) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected one input", c->op->name);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t axis = ry_attr_int(c->op, c->attrs, "axis");
    if (axis < 0) axis += x->ndim;
    if (x->ndim == 0 || axis < 0 || axis >= x->ndim)
        return ry_error_at(c->err, c->span, "%s: axis out of range", c->op->name);
    int64_t len = x->shape[axis], inner = 1;
    for (int d = (int)axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    int64_t n = len ? x->size / len : 0;
    cl_kernel k = generated(c, ry_gen_softmax(&ry_cl_dialect, x->dtype, log, "k"), x->dtype);
    if (!k) return RY_ERR;
    cl_arg a[] = {CLA_L(n), CLA_T(out[0]), CLA_T(x), CLA_L(len), CLA_L(inner)};
    return ry_cl_run(k, (size_t)n, 7, a, c->span, c->err);
}

CL_KERNEL(ry_cl_softmax) { return softmax(c, nin, in, nout, out, false); }
CL_KERNEL(ry_cl_log_softmax) { return softmax(c, nin, in, nout, out, true); }
