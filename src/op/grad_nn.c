/*
 * grad_nn.c: gradient rules of the neural-network operators (dense, the
 * matrix products, bias_add, softmax, log_softmax, batch_flatten), as IR.
 * Legend: N = rows (batch), K = input features, M = output features;
 * g is the adjoint of the result y. Convolution and pooling need backward
 * operators the registry does not have yet, so they have no rule here.
 */
#include "op/grad_rules.h"

#define M_ (c->m)
#define OP1(n, a) ry_gb_op1(M_, n, a)
#define OP2(n, a, b) ry_gb_op2(M_, n, a, b)

static const ry_op *call_op(ry_grad_ctx *c) { return c->call->call.callee->op.op; }
static const ry_attrs *call_attrs(ry_grad_ctx *c) { return &c->call->call.attrs; }

static ry_expr *transpose2(ry_grad_ctx *c, ry_expr *x) {
    ry_expr *t = OP1("transpose", x);
    const int64_t axes[2] = {1, 0};
    ry_gb_attr_ints(M_, t, "axes", 2, axes);
    return t;
}

static int tensor_rank(const ry_expr *e) {
    const ry_type *t = ry_gb_type(e);
    return t && t->kind == RY_TYPE_TENSOR ? t->tensor.ndim : -1;
}

/* reshape(x, [-1, last]) where last is x's last dimension (concrete) */
static ry_status flatten_rows(ry_grad_ctx *c, ry_expr *x, int64_t last, ry_expr **out) {
    if (tensor_rank(x) == 2) {
        *out = x;
        return RY_OK;
    }
    ry_expr *r = OP1("reshape", x);
    const int64_t shape[2] = {-1, last};
    ry_gb_attr_ints(M_, r, "newshape", 2, shape);
    *out = r;
    return RY_OK;
}

/* dense: x (..., K) x w (M, K) -> y (..., M)
 *   dx = dense(g, w^T)                   (..., M) x (K, M) -> (..., K)
 *   dw = dense(g2^T, x2^T)               (M, N) x (K, N) -> (M, K)
 * with g2, x2 the rows of g and x flattened to (N, M) and (N, K). */
ry_status ry_grad_dense(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *x = args[0], *w = args[1];
    int nd;
    int64_t ws[RY_MAX_RANK];
    if (!ry_gb_shape(ry_gb_type(w), &nd, ws) || nd != 2)
        return ry_error_at(c->err, c->span, "gradient of nn.dense needs a 2-D weight of known shape");
    grads[0] = OP2("nn.dense", g, transpose2(c, w));
    ry_expr *g2, *x2;
    if (flatten_rows(c, g, ws[0], &g2) || flatten_rows(c, x, ws[1], &x2)) return RY_ERR;
    grads[1] = OP2("nn.dense", transpose2(c, g2), transpose2(c, x2));
    return RY_OK;
}

static ry_expr *mm(ry_grad_ctx *c, const char *op, ry_expr *a, ry_expr *b, bool ta, bool tb) {
    ry_expr *e = OP2(op, a, b);
    if (ta) ry_gb_attr_bool(M_, e, "transpose_a", true);
    if (tb) ry_gb_attr_bool(M_, e, "transpose_b", true);
    return e;
}

/* C = op(A) op(B), op transposing where the flag says (the last two axes):
 *   A B:     dA = g B^T,      dB = A^T g
 *   A B^T:   dA = g B,        dB = g^T A
 *   A^T B:   dA = B g^T,      dB = A g
 *   A^T B^T: dA = B^T g^T,    dB = g^T A^T
 * Batch dimensions that broadcast are summed back with collapse_sum_like. */
static ry_status matmul_grads(ry_grad_ctx *c, const char *op, ry_expr *const *args, ry_expr *g,
                              ry_expr **grads) {
    ry_expr *a = args[0], *b = args[1];
    bool ta = ry_attr_bool(call_op(c), call_attrs(c), "transpose_a");
    bool tb = ry_attr_bool(call_op(c), call_attrs(c), "transpose_b");
    ry_expr *da, *db;
    if (!ta && !tb) {
        da = mm(c, op, g, b, false, true);
        db = mm(c, op, a, g, true, false);
    } else if (!ta && tb) {
        da = mm(c, op, g, b, false, false);
        db = mm(c, op, g, a, true, false);
    } else if (ta && !tb) {
        da = mm(c, op, b, g, false, true);
        db = mm(c, op, a, g, false, false);
    } else {
        da = mm(c, op, b, g, true, true);
        db = mm(c, op, g, a, true, true);
    }
    grads[0] = ry_gb_unbroadcast(M_, da, NULL, a);
    grads[1] = ry_gb_unbroadcast(M_, db, NULL, b);
    if (tensor_rank(a) == tensor_rank(b)) { /* no batch broadcasting possible to undo */
        const ry_type *ta_ = ry_gb_type(a), *tb_ = ry_gb_type(b);
        bool same_batch = true;
        for (int i = 0; ta_ && tb_ && i + 2 < ta_->tensor.ndim; i++) {
            const ry_dim *x = &ta_->tensor.dims[i], *z = &tb_->tensor.dims[i];
            same_batch &= x->kind == RY_DIM_CONST && z->kind == RY_DIM_CONST && x->value == z->value;
        }
        if (same_batch) {
            grads[0] = da;
            grads[1] = db;
        }
    }
    return RY_OK;
}

ry_status ry_grad_matmul(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                         ry_expr **grads) {
    return matmul_grads(c, "nn.matmul", args, g, grads);
}

ry_status ry_grad_batch_matmul(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                               ry_expr **grads) {
    return matmul_grads(c, "nn.batch_matmul", args, g, grads);
}

static int64_t norm_axis(int64_t axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

/* a sum over one axis (keepdims) or over every axis but one (exclude) */
static ry_expr *sum_axis(ry_grad_ctx *c, ry_expr *x, int64_t axis, bool keepdims, bool exclude) {
    ry_expr *s = OP1("sum", x);
    ry_gb_attr_ints(M_, s, "axis", 1, &axis);
    if (keepdims) ry_gb_attr_bool(M_, s, "keepdims", true);
    if (exclude) ry_gb_attr_bool(M_, s, "exclude", true);
    return s;
}

/* bias_add: x (..., C at axis, ...) x b (C): dx = g, db = sum of g over
 * every axis but `axis` */
ry_status ry_grad_bias_add(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                           ry_expr **grads) {
    int nd = tensor_rank(args[0]);
    int64_t axis = norm_axis(ry_attr_int(call_op(c), call_attrs(c), "axis"), nd);
    grads[0] = g;
    grads[1] = nd == 1 ? g : sum_axis(c, g, axis, false, true);
    return RY_OK;
}

/* softmax along axis: dx = (g - sum(g * y, axis, keepdims)) * y */
ry_status ry_grad_softmax(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    int64_t axis = ry_attr_int(call_op(c), call_attrs(c), "axis");
    ry_expr *s = sum_axis(c, OP2("multiply", g, y), axis, true, false);
    grads[0] = OP2("multiply", OP2("subtract", g, s), y);
    return RY_OK;
}

/* log_softmax along axis: dx = g - exp(y) * sum(g, axis, keepdims) */
ry_status ry_grad_log_softmax(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                              ry_expr **grads) {
    int64_t axis = ry_attr_int(call_op(c), call_attrs(c), "axis");
    ry_expr *s = sum_axis(c, g, axis, true, false);
    grads[0] = OP2("subtract", g, OP2("multiply", OP1("exp", y), s));
    return RY_OK;
}

/* batch_flatten: (N, a, b, ...) -> (N, a*b*...): dx = g reshaped back */
ry_status ry_grad_batch_flatten(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                ry_expr **grads) {
    return ry_gb_reshape_to(c, g, ry_gb_type(args[0]), &grads[0]);
}

/* cross_entropy: y = -sum(t * log(x)) / N  (N = rows of x)
 *   dx = -g * t / (N x),   dt = -g * log(x) / N
 * cross_entropy_with_logits: y = -sum(t * x) / N
 *   dx = -g * t / N,       dt = -g * x / N */
static ry_status xent_grads(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g, ry_expr **grads,
                            bool logits) {
    ry_expr *x = args[0], *t = args[1];
    const ry_type *xt = ry_gb_type(x);
    if (!xt || xt->kind != RY_TYPE_TENSOR || xt->tensor.ndim < 1 ||
        xt->tensor.dims[0].kind != RY_DIM_CONST || xt->tensor.dims[0].value < 1)
        return ry_error_at(c->err, c->span, "gradient of %s needs a known batch size",
                           call_op(c)->name);
    ry_expr *k = OP2("multiply", g,
                     ry_gb_scalar(M_, ry_gb_dtype(x), -1.0 / (double)xt->tensor.dims[0].value));
    if (logits) {
        grads[0] = OP2("multiply", k, t);
        grads[1] = OP2("multiply", k, x);
    } else {
        grads[0] = OP2("multiply", k, OP2("divide", t, x));
        grads[1] = OP2("multiply", k, OP1("log", x));
    }
    return RY_OK;
}

ry_status ry_grad_cross_entropy(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                ry_expr **grads) {
    return xent_grads(c, args, g, grads, false);
}

ry_status ry_grad_cross_entropy_with_logits(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                            ry_expr *g, ry_expr **grads) {
    return xent_grads(c, args, g, grads, true);
}

/* v (C) shaped to broadcast against an ndim-tensor whose C is at axis:
 * (C, 1, .., 1) with ndim - axis - 1 trailing ones */
static ry_expr *along_axis(ry_grad_ctx *c, ry_expr *v, int64_t axis, int ndim) {
    if (axis == ndim - 1) return v;
    ry_expr *e = OP1("expand_dims", v);
    ry_gb_attr_int(M_, e, "axis", 1);
    ry_gb_attr_int(M_, e, "num_newaxis", ndim - axis - 1);
    return e;
}

static ry_expr *mean_keep(ry_grad_ctx *c, ry_expr *x, int64_t axis) {
    ry_expr *s = OP1("mean", x);
    ry_gb_attr_ints(M_, s, "axis", 1, &axis);
    ry_gb_attr_bool(M_, s, "keepdims", true);
    return s;
}

/* layer_norm along axis A: xhat = (x - mean) * rstd, rstd = rsqrt(var + eps),
 * y = xhat * gamma + beta (gamma, beta (C) broadcast along A)
 *   dxhat  = g * gamma
 *   dx     = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *   dgamma = sum of g * xhat over every axis but A;  dbeta = sum of g likewise */
ry_status ry_grad_layer_norm(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = tensor_rank(x);
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int64_t axis = norm_axis(ry_attr_int(op, at, "axis"), nd);
    ry_dtype dt = ry_gb_dtype(x);
    ry_expr *xc = OP2("subtract", x, mean_keep(c, x, axis));
    ry_expr *var = mean_keep(c, OP2("multiply", xc, xc), axis);
    ry_expr *rstd = OP1("rsqrt", OP2("add", var, ry_gb_scalar(M_, dt, ry_attr_float(op, at, "epsilon"))));
    ry_expr *xhat = OP2("multiply", xc, rstd);
    bool scale = ry_attr_bool(op, at, "scale"), center = ry_attr_bool(op, at, "center");
    ry_expr *dxhat = scale ? OP2("multiply", g, along_axis(c, args[1], axis, nd)) : g;
    ry_expr *inner = OP2("subtract", OP2("subtract", dxhat, mean_keep(c, dxhat, axis)),
                         OP2("multiply", xhat, mean_keep(c, OP2("multiply", dxhat, xhat), axis)));
    grads[0] = OP2("multiply", rstd, inner);
    grads[1] = scale ? sum_axis(c, OP2("multiply", g, xhat), axis, false, true) : NULL;
    grads[2] = center ? sum_axis(c, g, axis, false, true) : NULL;
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
    grads[0] = ry_gb_op3(M_, "where", pos, g, OP2("multiply", g, along_axis(c, args[1], axis, nd)));
    ry_expr *neg = ry_gb_op3(M_, "where", pos, zero, OP2("multiply", g, x));
    grads[1] = nd == 1 ? neg : sum_axis(c, neg, axis, false, true);
    return RY_OK;
}
