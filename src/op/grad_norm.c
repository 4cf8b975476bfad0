/*
 * grad_norm.c: gradient rules of the per-channel operators, as IR: bias_add,
 * the normalizations (layer, instance, group, batch, l2, lrn) and prelu.
 * A parameter of these runs along one axis of the data (its channels); the
 * rules broadcast it back along that axis and sum the data's other axes
 * into its gradient, typed as the parameter. batch_norm's rule depends on
 * the mode (c->inference: see grad_nn.c's dropout).
 */
#include "op/grad_nn_impl.h"

/* d, a per-channel vector (the data x's channel axis summed out), typed as
 * parameter p (gamma, beta, a bias): when p's length is a constant L and
 * x's channel is not known to be L (a symbolic n the type checker matched
 * to it), reshaped to (L), else its adjoint would be typed (n) against
 * p's (L) and the gradient program would not type-check. */
static ry_expr *as_channel_param(ry_grad_ctx *c, ry_expr *d, const ry_expr *x, const ry_expr *p,
                                 int64_t axis) {
    const ry_type *pt = ry_gb_type(p), *xt = ry_gb_type(x);
    if (!pt || pt->kind != RY_TYPE_TENSOR || pt->tensor.ndim != 1 ||
        pt->tensor.dims[0].kind != RY_DIM_CONST)
        return d;
    int64_t len = pt->tensor.dims[0].value;
    if (xt && xt->kind == RY_TYPE_TENSOR && axis < xt->tensor.ndim &&
        xt->tensor.dims[axis].kind == RY_DIM_CONST && xt->tensor.dims[axis].value == len)
        return d;
    ry_expr *r = OP1("reshape", d);
    ry_gb_attr_ints(M_, r, "newshape", 1, &len);
    return r;
}

/* sum of v over every axis of x but `axis`, typed as parameter p */
static ry_expr *channel_sum(ry_grad_ctx *c, ry_expr *v, const ry_expr *x, const ry_expr *p,
                            int64_t axis) {
    int nd = tensor_rank(x);
    return as_channel_param(c, nd == 1 ? v : sum_axis(c, v, axis, false, true), x, p, axis);
}

/* bias_add: x (..., C at axis, ...) x b (C): dx = g, db = sum of g over
 * every axis but `axis` */
ry_status ry_grad_bias_add(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                           ry_expr **grads) {
    int nd = tensor_rank(args[0]);
    int64_t axis = norm_axis(ry_attr_int(call_op(c), call_attrs(c), "axis"), nd);
    grads[0] = g;
    grads[1] = channel_sum(c, g, args[0], args[1], axis);
    return RY_OK;
}

/* v (C) shaped to broadcast against x (ndim dims, C at axis): (C, 1, .., 1)
 * with ndim - axis - 1 trailing ones. When x's C is a constant and v's
 * length is not known to be that constant (a parameter `Tensor[(n)]` that
 * the type checker matched to a channel of 1), a reshape to the constant
 * shape, so that products with x's adjoint keep x's type rather than
 * broadcasting 1 against n. */
static ry_expr *along_axis(ry_grad_ctx *c, ry_expr *v, const ry_expr *x, int64_t axis, int ndim) {
    const ry_type *xt = ry_gb_type(x), *vt = ry_gb_type(v);
    const ry_dim *xc = xt && xt->kind == RY_TYPE_TENSOR && xt->tensor.ndim == ndim
                           ? &xt->tensor.dims[axis]
                           : NULL;
    bool v_is_c = vt && vt->kind == RY_TYPE_TENSOR && vt->tensor.ndim == 1 &&
                  vt->tensor.dims[0].kind == RY_DIM_CONST;
    if (xc && xc->kind == RY_DIM_CONST && !(v_is_c && vt->tensor.dims[0].value == xc->value)) {
        int64_t shape[RY_MAX_RANK];
        int n = 0;
        shape[n++] = xc->value;
        for (int i = (int)axis + 1; i < ndim; i++)
            shape[n++] = 1;
        ry_expr *e = OP1("reshape", v);
        ry_gb_attr_ints(M_, e, "newshape", n, shape);
        return e;
    }
    if (axis == ndim - 1) return v;
    ry_expr *e = OP1("expand_dims", v);
    ry_gb_attr_int(M_, e, "axis", 1);
    ry_gb_attr_int(M_, e, "num_newaxis", ndim - axis - 1);
    return e;
}

/* mean or sum over the axes marked in red[], keepdims */
static ry_expr *reduce_keep(ry_grad_ctx *c, const char *op, ry_expr *x, int nd, const bool *red) {
    int64_t axes[RY_MAX_RANK];
    int n = 0;
    for (int i = 0; i < nd; i++)
        if (red[i]) axes[n++] = i;
    ry_expr *s = OP1(op, x);
    ry_gb_attr_ints(M_, s, "axis", n, axes);
    ry_gb_attr_bool(M_, s, "keepdims", true);
    return s;
}

/* Normalization over the axes R, then scale and shift by gamma, beta (C)
 * along axis A (layer_norm: R = {A}; instance_norm: R = all but 0 and A):
 *   xhat = (x - mean_R(x)) * rstd,  rstd = rsqrt(mean_R((x - mean_R x)^2) + eps)
 *   y = xhat * gamma + beta
 *   dxhat  = g * gamma
 *   dx     = rstd * (dxhat - mean_R(dxhat) - xhat * mean_R(dxhat * xhat))
 *   dgamma = sum of g * xhat over every axis but A;  dbeta = sum of g likewise */
static ry_status norm_grads(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g, ry_expr **grads,
                            int64_t axis, const bool *red) {
    ry_expr *x = args[0];
    int nd = tensor_rank(x);
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    ry_dtype dt = ry_gb_dtype(x);
    ry_expr *xc = OP2("subtract", x, reduce_keep(c, "mean", x, nd, red));
    ry_expr *var = reduce_keep(c, "mean", OP2("multiply", xc, xc), nd, red);
    ry_expr *eps = ry_gb_scalar(M_, dt, ry_attr_float(op, at, "epsilon"));
    ry_expr *rstd = OP1("rsqrt", OP2("add", var, eps));
    ry_expr *xhat = OP2("multiply", xc, rstd);
    bool scale = ry_attr_bool(op, at, "scale"), center = ry_attr_bool(op, at, "center");
    ry_expr *dxhat = scale ? OP2("multiply", g, along_axis(c, args[1], x, axis, nd)) : g;
    ry_expr *m1 = reduce_keep(c, "mean", dxhat, nd, red);
    ry_expr *m2 = reduce_keep(c, "mean", OP2("multiply", dxhat, xhat), nd, red);
    ry_expr *inner = OP2("subtract", OP2("subtract", dxhat, m1), OP2("multiply", xhat, m2));
    grads[0] = OP2("multiply", rstd, inner);
    grads[1] = scale ? channel_sum(c, OP2("multiply", g, xhat), x, args[1], axis) : NULL;
    grads[2] = center ? channel_sum(c, g, x, args[2], axis) : NULL;
    return RY_OK;
}

ry_status ry_grad_layer_norm(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    int nd = tensor_rank(args[0]);
    int64_t axis = norm_axis(ry_attr_int(call_op(c), call_attrs(c), "axis"), nd);
    bool red[RY_MAX_RANK] = {false};
    if (axis >= 0 && axis < nd) red[axis] = true;
    return norm_grads(c, args, g, grads, axis, red);
}

ry_status ry_grad_instance_norm(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                ry_expr **grads) {
    int nd = tensor_rank(args[0]);
    int64_t axis = norm_axis(ry_attr_int(call_op(c), call_attrs(c), "axis"), nd);
    bool red[RY_MAX_RANK] = {false};
    for (int i = 1; i < nd; i++)
        red[i] = i != axis;
    return norm_grads(c, args, g, grads, axis, red);
}

/* group_norm with G groups along axis A: data (N, A', C, I) viewed as
 * (N, A', G, C/G, I) is normalized over axes R = {1, 3, 4} of the view
 * (instance_norm's rule in that view), scaled and shifted per channel:
 *   dxhat = g * gamma (as the view);  dx = the norm rule's dx, reshaped back
 *   dgamma = sum of g * xhat over every axis but A;  dbeta = sum of g likewise */
ry_status ry_grad_group_norm(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    ry_expr *x = args[0];
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int nd;
    int64_t shape[RY_MAX_RANK];
    if (!data_dims(x, &nd, shape) || nd < 2)
        return ry_error_at(c->err, c->span, "gradient of nn.group_norm needs data of rank >= 2");
    int64_t axis = norm_axis(ry_attr_int(op, at, "axis"), nd),
            groups = ry_attr_int(op, at, "num_groups");
    if (axis < 1 || axis >= nd || groups < 1 || shape[axis] < 0 || shape[axis] % groups)
        return ry_error_at(c->err, c->span,
                           "gradient of nn.group_norm: bad axis or num_groups, or an unknown "
                           "channel count");
    /* (N, before, G, C / G, after); one unknown factor becomes reshape's -1 */
    int64_t v5[5] = {shape[0], dims_product(shape, 1, (int)axis), groups, shape[axis] / groups,
                     dims_product(shape, (int)axis + 1, nd)};
    if ((v5[0] < 0) + (v5[1] < 0) + (v5[4] < 0) > 1)
        return ry_error_at(c->err, c->span,
                           "gradient of nn.group_norm needs a data shape with at most one "
                           "unknown dimension");
    const bool red[5] = {false, true, false, true, true};
    ry_dtype dt = ry_gb_dtype(x);
    ry_expr *xr = OP1("reshape", x);
    ry_gb_attr_ints(M_, xr, "newshape", 5, v5);
    ry_expr *xc = OP2("subtract", xr, reduce_keep(c, "mean", xr, 5, red));
    ry_expr *var = reduce_keep(c, "mean", OP2("multiply", xc, xc), 5, red);
    ry_expr *eps = ry_gb_scalar(M_, dt, ry_attr_float(op, at, "epsilon"));
    ry_expr *rstd = OP1("rsqrt", OP2("add", var, eps));
    ry_expr *xhat = OP2("multiply", xc, rstd);
    bool scale = ry_attr_bool(op, at, "scale"), center = ry_attr_bool(op, at, "center");
    ry_expr *dxhat =
        OP1("reshape", scale ? OP2("multiply", g, along_axis(c, args[1], x, axis, nd)) : g);
    ry_gb_attr_ints(M_, dxhat, "newshape", 5, v5);
    ry_expr *m1 = reduce_keep(c, "mean", dxhat, 5, red);
    ry_expr *m2 = reduce_keep(c, "mean", OP2("multiply", dxhat, xhat), 5, red);
    ry_expr *dx = OP2("multiply", rstd,
                      OP2("subtract", OP2("subtract", dxhat, m1), OP2("multiply", xhat, m2)));
    if (ry_gb_reshape_like(c, dx, x, &grads[0])) return RY_ERR;
    ry_expr *xhat_x;
    if (ry_gb_reshape_like(c, xhat, x, &xhat_x)) return RY_ERR;
    grads[1] = scale ? channel_sum(c, OP2("multiply", g, xhat_x), x, args[1], axis) : NULL;
    grads[2] = center ? channel_sum(c, g, x, args[2], axis) : NULL;
    return RY_OK;
}

/* l2_normalize over axes R: s = sum_R(x^2), n = max(s, eps), y = x * rsqrt(n)
 *   dx = g * rsqrt(n) - (x * sum_R(g * x) * n^(-3/2) where s > eps, else 0) */
ry_status ry_grad_l2_normalize(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                               ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = tensor_rank(x);
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int64_t axes[RY_MAX_RANK];
    int n = ry_attr_ints(op, at, "axis", axes, RY_MAX_RANK);
    bool red[RY_MAX_RANK] = {false};
    for (int i = 0; i < nd; i++)
        red[i] = n < 0;
    for (int i = 0; i < n && i < RY_MAX_RANK; i++) {
        int64_t a = norm_axis(axes[i], nd);
        if (a >= 0 && a < nd) red[a] = true;
    }
    ry_expr *eps = ry_gb_scalar(M_, ry_gb_dtype(x),
                                ry_attr_is_none(op, at, "eps") ? 0 : ry_attr_float(op, at, "eps"));
    ry_expr *s = reduce_keep(c, "sum", OP2("multiply", x, x), nd, red);
    ry_expr *r = OP1("rsqrt", OP2("maximum", s, eps));
    ry_expr *gx = reduce_keep(c, "sum", OP2("multiply", g, x), nd, red);
    ry_expr *through =
        OP2("multiply", OP2("multiply", x, gx), OP2("multiply", r, OP2("multiply", r, r)));
    ry_expr *norm_part =
        ry_gb_op3(M_, "where", OP2("greater", s, eps), through, OP1("zeros_like", x));
    grads[0] = OP2("subtract", OP2("multiply", g, r), norm_part);
    return RY_OK;
}

/* prelu: y = x where x > 0, alpha * x elsewhere (alpha (C) along axis)
 *   dx = g where x > 0, alpha * g elsewhere
 *   dalpha = sum over every axis but `axis` of (0 where x > 0, g * x elsewhere) */
ry_status ry_grad_prelu(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = tensor_rank(x);
    int64_t axis = norm_axis(ry_attr_int(call_op(c), call_attrs(c), "axis"), nd);
    ry_expr *pos = OP2("greater", x, ry_gb_scalar(M_, ry_gb_dtype(x), 0));
    ry_expr *zero = OP1("zeros_like", g);
    grads[0] = ry_gb_op3(M_, "where", pos, g, OP2("multiply", g, along_axis(c, args[1], x, axis, nd)));
    ry_expr *neg = ry_gb_op3(M_, "where", pos, zero, OP2("multiply", g, x));
    grads[1] = channel_sum(c, neg, x, args[1], axis);
    return RY_OK;
}

/* lrn along axis A (data (O, C, I) around it), window half = size / 2:
 *   s = W(x^2), W the channel window sum (W[ch][k] = 1 for |k - ch| <= half,
 *   clipped to [0, C), as the kernel), D = bias + alpha / size * s,
 *   y = x * D^-beta
 *   dx = g * D^-beta - (2 alpha beta / size) * x * W(g * x * D^(-beta-1))
 * (W is symmetric). W is applied as a product with a constant (C, C)
 * matrix: t as (O, C, I) -> (C, O*I), dense(W, that^T), and back. */
static ry_expr *window_sum(ry_grad_ctx *c, ry_expr *t, ry_expr *w, int64_t o, int64_t ch, int64_t i,
                           ry_expr *x) {
    const int64_t oci[3] = {o, ch, i}, cn[2] = {ch, -1}, coi[3] = {ch, o, i};
    const int64_t swap[3] = {1, 0, 2}, t2[2] = {1, 0};
    ry_expr *r = OP1("reshape", t);
    ry_gb_attr_ints(M_, r, "newshape", 3, oci);
    ry_expr *tr = OP1("transpose", r);
    ry_gb_attr_ints(M_, tr, "axes", 3, swap);
    ry_expr *t2d = OP1("reshape", tr);
    ry_gb_attr_ints(M_, t2d, "newshape", 2, cn);
    ry_expr *tt = OP1("transpose", t2d);
    ry_gb_attr_ints(M_, tt, "axes", 2, t2);
    ry_expr *sr = OP1("reshape", OP2("nn.dense", w, tt));
    ry_gb_attr_ints(M_, sr, "newshape", 3, coi);
    ry_expr *back = OP1("transpose", sr);
    ry_gb_attr_ints(M_, back, "axes", 3, swap);
    ry_expr *out = NULL;
    ry_gb_reshape_like(c, back, x, &out); /* x: at most one unknown dim (ry_grad_lrn) */
    return out;
}

ry_status ry_grad_lrn(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    ry_expr *x = args[0];
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int nd;
    int64_t shape[RY_MAX_RANK];
    if (!data_dims(x, &nd, shape) || nd < 1)
        return ry_error_at(c->err, c->span, "gradient of nn.lrn needs a tensor");
    int64_t axis = norm_axis(ry_attr_int(op, at, "axis"), nd);
    if (axis < 0 || axis >= nd) return ry_error_at(c->err, c->span, "nn.lrn: axis out of range");
    /* (O, C, I) around the axis; one of O and I may be unknown (-1) */
    int64_t o = dims_product(shape, 0, (int)axis), i = dims_product(shape, (int)axis + 1, nd);
    int unknown = 0;
    for (int k = 0; k < nd; k++) unknown += shape[k] < 0;
    if (shape[axis] < 0 || unknown > 1)
        return ry_error_at(c->err, c->span,
                           "gradient of nn.lrn needs a known channel count and at most one "
                           "unknown dimension");
    int64_t ch = shape[axis], size = ry_attr_int(op, at, "size"), half = size / 2;
    double bias = ry_attr_float(op, at, "bias"), alpha = ry_attr_float(op, at, "alpha");
    double beta = ry_attr_float(op, at, "beta");
    ry_dtype dt = ry_gb_dtype(x);
    ry_tensor *wt = ry_tensor_new(dt, 2, (int64_t[]){ch, ch});
    if (!wt) return ry_error_at(c->err, c->span, "gradient of nn.lrn: out of memory");
    for (int64_t r = 0; r < ch; r++)
        for (int64_t k = 0; k < ch; k++)
            ry_tensor_set(wt, r * ch + k, (k >= r - half && k <= r + half) ? 1 : 0);
    ry_expr *w = ry_expr_const(M_, wt, RY_NO_SPAN);
    w->type = ry_type_tensor(M_, dt, 2, (int64_t[]){ch, ch});
    ry_expr *s = window_sum(c, OP2("multiply", x, x), w, o, ch, i, x);
    ry_expr *d = OP2("add", ry_gb_scalar(M_, dt, bias),
                     OP2("multiply", s, ry_gb_scalar(M_, dt, alpha / (double)size)));
    ry_expr *u =
        OP2("multiply", OP2("multiply", g, x), OP2("power", d, ry_gb_scalar(M_, dt, -beta - 1)));
    ry_expr *back = OP2("multiply", x, window_sum(c, u, w, o, ch, i, x));
    grads[0] = OP2("subtract", OP2("multiply", g, OP2("power", d, ry_gb_scalar(M_, dt, -beta))),
                   OP2("multiply", back, ry_gb_scalar(M_, dt, 2 * alpha * beta / (double)size)));
    return RY_OK;
}

/* batch_norm(x, gamma, beta, mm, mv) -> (out, new_mean, new_var), per
 * channel along axis A, statistics over the other axes R (n values):
 * training (kernel: PyTorch's momentum 0.1, biased var to normalize,
 * unbiased to update):
 *   xhat = (x - mean) rstd, rstd = rsqrt(var + eps)
 *   dx   = rstd (dxhat - mean_R dxhat - xhat mean_R(dxhat xhat))
 *          + 0.1 g.1 / n + 0.2 (x - mean) g.2 / (n - 1),   dxhat = g.0 gamma
 *   dmm  = 0.9 g.1,  dmv = 0.9 g.2
 * inference (moving statistics normalize, come back unchanged):
 *   xhat = (x - mm) rstd, rstd = rsqrt(mv + eps),  dx = g.0 gamma rstd
 *   dmm  = g.1 - sum_R(g.0 gamma rstd)
 *   dmv  = g.2 - 0.5 sum_R(g.0 gamma (x - mm) rstd^3)
 * both: dgamma = sum_R(g.0 xhat), dbeta = sum_R(g.0) */
ry_status ry_grad_batch_norm(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    ry_expr *x = args[0];
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int nd;
    int64_t shape[RY_MAX_RANK];
    if (!data_dims(x, &nd, shape))
        return ry_error_at(c->err, c->span, "gradient of nn.batch_norm needs a tensor");
    int64_t axis = norm_axis(ry_attr_int(op, at, "axis"), nd);
    bool red[RY_MAX_RANK] = {false};
    double n = 1; /* values per channel, < 0 when a dim is unknown (a batch n) */
    for (int i = 0; i < nd; i++) {
        red[i] = i != axis;
        if (red[i]) n = n < 0 || shape[i] < 0 ? -1 : n * (double)shape[i];
    }
    ry_dtype dt = ry_gb_dtype(x);
#define K(v) ry_gb_scalar(M_, dt, (v))
#define ALONG(v) along_axis(c, (v), x, axis, nd)
    ry_expr *g0 = ry_expr_proj(M_, g, 0, RY_NO_SPAN), *g1 = ry_expr_proj(M_, g, 1, RY_NO_SPAN);
    ry_expr *g2 = ry_expr_proj(M_, g, 2, RY_NO_SPAN);
    ry_expr *mm = args[3], *mv = args[4], *eps = K(ry_attr_float(op, at, "epsilon"));
    bool scale = ry_attr_bool(op, at, "scale"), center = ry_attr_bool(op, at, "center");
    ry_expr *dxhat = scale ? OP2("multiply", g0, ALONG(args[1])) : g0;
    ry_expr *xhat;
    if (!c->inference) {
        ry_expr *xc = OP2("subtract", x, reduce_keep(c, "mean", x, nd, red));
        ry_expr *rstd = OP1(
            "rsqrt", OP2("add", reduce_keep(c, "mean", OP2("multiply", xc, xc), nd, red), eps));
        xhat = OP2("multiply", xc, rstd);
        ry_expr *m1 = reduce_keep(c, "mean", dxhat, nd, red);
        ry_expr *m2 = reduce_keep(c, "mean", OP2("multiply", dxhat, xhat), nd, red);
        ry_expr *dx = OP2("multiply", rstd,
                          OP2("subtract", OP2("subtract", dxhat, m1), OP2("multiply", xhat, m2)));
        /* 0.1 / n and 0.2 / (n - 1) (0 when n is 1); with n unknown until run
         * time, n counted as the elements of one channel's slice */
        ry_expr *k1, *k2;
        if (n >= 0) {
            k1 = K(0.1 / n);
            k2 = n > 1 ? K(0.2 / (n - 1)) : NULL;
        } else {
            ry_expr *slice = OP2("take", x, ry_gb_scalar(M_, RY_INT32, 0));
            ry_gb_attr_int(M_, slice, "axis", axis);
            ry_expr *cnt = OP1("sum", OP1("ones_like", slice));
            k1 = OP2("divide", K(0.1), cnt);
            k2 = ry_gb_op3(M_, "where", OP2("greater", cnt, K(1)),
                           OP2("divide", K(0.2), OP2("subtract", cnt, K(1))), K(0));
        }
        dx = OP2("add", dx, ALONG(OP2("multiply", g1, k1)));
        if (k2) dx = OP2("add", dx, OP2("multiply", OP2("multiply", xc, ALONG(g2)), k2));
        grads[0] = dx;
        grads[3] = as_channel_param(c, OP2("multiply", g1, K(0.9)), x, mm, axis);
        grads[4] = as_channel_param(c, OP2("multiply", g2, K(0.9)), x, mv, axis);
    } else {
        ry_expr *xm = OP2("subtract", x, ALONG(mm));
        ry_expr *rstd = OP1("rsqrt", OP2("add", ALONG(mv), eps));
        xhat = OP2("multiply", xm, rstd);
        ry_expr *dx = OP2("multiply", dxhat, rstd);
        ry_expr *r3 = OP2("multiply", rstd, OP2("multiply", rstd, rstd));
        grads[0] = dx;
        grads[3] = as_channel_param(
            c, OP2("subtract", g1, channel_sum(c, dx, x, mm, axis)), x, mm, axis);
        grads[4] = as_channel_param(
            c,
            OP2("subtract", g2,
                OP2("multiply", K(0.5),
                    channel_sum(c, OP2("multiply", OP2("multiply", dxhat, xm), r3), x, mv, axis))),
            x, mv, axis);
    }
    grads[1] = scale ? channel_sum(c, OP2("multiply", g0, xhat), x, args[1], axis) : NULL;
    grads[2] = center ? channel_sum(c, g0, x, args[2], axis) : NULL;
#undef K
#undef ALONG
    return RY_OK;
}
