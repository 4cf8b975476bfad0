/*
 * dk_layout.c (device): operators that move elements: reshape and its
 * kin (a copy of the same bytes) and transpose (the generator's copy
 * program reading through the permuted strides).
 */
#include "backend/device/dk_ops.h"

/* reshape, reshape_like, expand_dims, squeeze, nn.batch_flatten */
DK_KERNEL(ry_dk_reshape) {
    if (nin < 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected an input", c->op->name);
    DK_DEVICE(1, in, nout, out);
    if (in[0] == out[0]) return RY_OK;
    return d->copy(out[0], in[0], ry_tensor_nbytes(out[0]), c->err);
}

DK_KERNEL(ry_dk_transpose) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected one input", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0];
    int n = x->ndim;
    int64_t axes[RY_MAX_RANK];
    int na = ry_attr_ints(c->op, c->attrs, "axes", axes, RY_MAX_RANK);
    if (na <= 0)
        for (int k = 0; k < n; k++) axes[k] = n - 1 - k;
    int64_t stride[RY_MAX_RANK], s = 1, strides[1][RY_MAX_RANK], dims[RY_MAX_RANK];
    for (int d = n - 1; d >= 0; d--) stride[d] = s, s *= x->shape[d];
    for (int k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + n : axes[k];
        if (a < 0 || a >= n) return ry_error_at(c->err, c->span, "transpose: axis out of range");
        strides[0][k] = stride[a];
        dims[k] = out[0]->shape[k];
    }
    if (n == 0) dims[0] = 1, strides[0][0] = 0;
    ry_fz_prog p;
    ry_dtype dt = x->dtype;
    ry_gen_single(&p, RY_FZ_COPY, 1, &dt, dt, NULL);
    ry_gen_access acc = RY_GEN_STRIDED;
    return ry_dk_launch_prog(d, c, &p, 1, in, 1, out, &acc, n ? n : 1, dims,
                             (const int64_t (*)[RY_MAX_RANK])strides);
}
