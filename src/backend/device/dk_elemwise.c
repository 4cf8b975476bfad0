/*
 * dk_elemwise.c (device): every elementwise operator, the fills and the
 * fused elementwise programs, through the one generator (kernel_gen.h) in
 * the device's dialect. A kernel is specialized on the program, the
 * dtypes, the rank of the collapsed index space and how each input is
 * read (kernel_gen.h), and built once (the device's cache).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_gen.h"
#include "backend/device/dk_ops.h"

ry_status ry_dk_run_prog(const ry_dk_device *d, ry_kernel_ctx *c, const ry_fz_prog *p, int nin,
                         ry_tensor *const *in, int nout, ry_tensor *const *out) {
    if (!ry_dk_of(c, nin, in, nout, out)) return RY_ERR;
    int nd[RY_FZ_MAX_IN + 1];
    const int64_t *shapes[RY_FZ_MAX_IN + 1];
    for (int k = 0; k < nin; k++) nd[k] = in[k]->ndim, shapes[k] = in[k]->shape;
    int rank;
    int64_t dims[RY_MAX_RANK], strides[RY_FZ_MAX_IN + 1][RY_MAX_RANK];
    ry_gen_access access[RY_FZ_MAX_IN + 1];
    ry_gen_bcast(nin, nd, shapes, out[0]->ndim, out[0]->shape, &rank, dims, access, strides);
    return ry_dk_launch_prog(d, c, p, nin, in, nout, out, access, rank, dims, strides);
}

ry_status ry_dk_launch_prog(const ry_dk_device *d, ry_kernel_ctx *c, const ry_fz_prog *p, int nin,
                            ry_tensor *const *in, int nout, ry_tensor *const *out,
                            const ry_gen_access *access, int rank, const int64_t *dims,
                            const int64_t (*strides)[RY_MAX_RANK]) {
    char *src = ry_gen_elemwise(d->dialect, p, access, rank, "k");
    if (!src) {
        for (int k = 0; k < nin; k++)
            if (!ry_dk_type(d, in[k]->dtype)) return ry_dk_no_kernel(d, c, in[k]->dtype);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    ry_dk_kernel *k = d->build(src, "k", c->span, c->err);
    free(src);
    if (!k) return RY_ERR;
    ry_karg args[2 + 2 * (RY_FZ_MAX_OUT + RY_FZ_MAX_IN + 1) + RY_MAX_RANK * (RY_FZ_MAX_IN + 2)];
    int n = 0;
    args[n++] = KA_L(out[0]->size);
    for (int o = 0; o < nout; o++) {
        args[n++] = KA_B(out[o]);
        args[n++] = KA_L(ry_dk_off(out[o]));
    }
    for (int i = 0; i < nin; i++) {
        args[n++] = KA_B(in[i]);
        args[n++] = KA_L(ry_dk_off(in[i]));
    }
    for (int r = 0; r < rank; r++) args[n++] = KA_L(dims[r]);
    for (int i = 0; i < nin; i++)
        if (access[i] == RY_GEN_STRIDED)
            for (int r = 0; r < rank; r++) args[n++] = KA_L(strides[i][r]);
    return d->launch(k, (size_t)out[0]->size, n, args, c->span, c->err);
}

/* An operator of one instruction (add, exp, clip, cast, where, ...). */
ry_status ry_dk_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out) {
    int op = ry_fz_opcode_of(c->op->name);
    if (op < 0 || nout != 1 || nin < 1 || nin > 3)
        return ry_error_at(c->err, c->span, "%s: not an elementwise operator", c->op->name);
    double prm[2] = {0, 0};
    if (op == RY_FZ_CLIP) {
        prm[0] = ry_attr_float(c->op, c->attrs, "a_min");
        prm[1] = ry_attr_float(c->op, c->attrs, "a_max");
    } else if (op == RY_FZ_LEAKY) {
        prm[0] = ry_attr_float(c->op, c->attrs, "alpha");
    }
    ry_dtype dts[3];
    for (int i = 0; i < nin; i++) dts[i] = in[i]->dtype;
    ry_fz_prog p;
    ry_gen_single(&p, (ry_fz_opcode)op, nin, dts, out[0]->dtype, prm);
    DK_DEVICE(nin, in, nout, out);
    return ry_dk_run_prog(d, c, &p, nin, in, nout, out);
}

/* out = the scalar in[src] cast to out's dtype, or 0 / 1 (src < 0: -1, -2). */
static ry_status fill(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *out, int src) {
    DK_DEVICE(0, NULL, 1, &out);
    ry_fz_prog p;
    ry_dtype dt = src >= 0 ? in[src]->dtype : out->dtype;
    if (src >= 0) {
        ry_gen_single(&p, RY_FZ_CAST, 1, &dt, out->dtype, NULL);
        return ry_dk_run_prog(d, c, &p, 1, &in[src], 1, &out);
    }
    ry_gen_single(&p, src == -1 ? RY_FZ_ZEROS : RY_FZ_ONES, 0, &dt, out->dtype, NULL);
    return ry_dk_run_prog(d, c, &p, 0, NULL, 1, &out);
}

ry_status ry_dk_zeros(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], -1);
}
ry_status ry_dk_ones(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], -2);
}
ry_status ry_dk_full(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], 0);
}
ry_status ry_dk_full_like(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                          ry_tensor *const *out) {
    return fill(c, in, out[0], 1);
}
/* copy, stop_gradient, broadcast_to(_like): a copy broadcast to the result */
ry_status ry_dk_copy_to(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out) {
    ry_fz_prog p;
    ry_dtype dt = in[0]->dtype;
    ry_gen_single(&p, RY_FZ_COPY, 1, &dt, dt, NULL);
    DK_DEVICE(1, in, 1, out);
    return ry_dk_run_prog(d, c, &p, 1, in, 1, out);
}

/* fused.elemwiseN: the call's program (src/op/fused_prog.c, cached) */
ry_status ry_dk_fused_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    if (nin > RY_FZ_MAX_IN)
        return ry_error_at(c->err, c->span, "%s: too many inputs", c->op->name);
    for (int i = 0; i < nin; i++) dts[i] = in[i]->dtype;
    const ry_fz_prog *p = ry_fz_get(ry_attr_str(c->op, c->attrs, "code"), false, nin, dts, c->span, c->err);
    if (!p) return RY_ERR;
    DK_DEVICE(nin, in, nout, out);
    return ry_dk_run_prog(d, c, p, nin, in, nout, out);
}
