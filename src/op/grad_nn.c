/*
 * grad_nn.c: gradient rules of the neural-network operators (dense, the
 * matrix products, softmax, log_softmax, the cross-entropies,
 * batch_flatten), as IR. Legend: N = rows (batch), K = input features,
 * M = output features; g is the adjoint of the result y. Also pad,
 * dropout (whose rule depends on the mode, c->inference) and the adjoint
 * operators' own rules. The per-channel operators (bias_add, the norms,
 * prelu) are in grad_norm.c; convolution and the pools in conv.c and
 * grad_pool.c.
 */
#include <string.h>

#include "op/grad_nn_impl.h"

static ry_expr *transpose2(ry_grad_ctx *c, ry_expr *x) {
    ry_expr *t = OP1("transpose", x);
    const int64_t axes[2] = {1, 0};
    ry_gb_attr_ints(M_, t, "axes", 2, axes);
    return t;
}

static ry_expr *reshape_to(ry_grad_ctx *c, ry_expr *x, int n, const int64_t *shape) {
    ry_expr *r = OP1("reshape", x);
    ry_gb_attr_ints(M_, r, "newshape", n, shape);
    return r;
}

/* x (R..., last) as rows (R, last): reshape(x, [-1, last]) when last is
 * known (>= 0); else, last unknown, the leading dims merged two at a time
 * (TVM's -3 takes two dims, each 0 copies one), as many reshapes as x has
 * dims beyond 2, and a rank-1 x as one row. */
static ry_status flatten_rows(ry_grad_ctx *c, ry_expr *x, int64_t last, ry_expr **out) {
    int nd = tensor_rank(x);
    if (nd == 2 || nd < 1) {
        *out = x;
        return RY_OK;
    }
    int64_t shape[RY_MAX_RANK] = {-1, last};
    if (last >= 0) {
        *out = reshape_to(c, x, 2, shape);
        return RY_OK;
    }
    if (nd == 1) {
        shape[0] = 1;
        *out = reshape_to(c, x, 2, shape);
        return RY_OK;
    }
    for (; nd > 2; nd--) {
        shape[0] = -3;
        for (int i = 1; i < nd - 1; i++) shape[i] = 0;
        x = reshape_to(c, x, nd - 1, shape);
    }
    *out = x;
    return RY_OK;
}

/* A weight's (rows, cols) when its type is a 2-D tensor: each dim, or -1
 * where it is symbolic or Any. */
static bool weight_dims(const ry_expr *w, int64_t *rows, int64_t *cols) {
    const ry_type *t = ry_gb_type(w);
    if (!t || t->kind != RY_TYPE_TENSOR || t->tensor.ndim != 2) return false;
    const ry_dim *d = t->tensor.dims;
    *rows = d[0].kind == RY_DIM_CONST ? d[0].value : -1;
    *cols = d[1].kind == RY_DIM_CONST ? d[1].value : -1;
    return true;
}

/* Whether two dims the forward relation matched are one at run time as far
 * as the types tell: equal constants, the same symbol, or a ?. A symbol
 * matched to a constant (x (?, n) times w (4, 1)) is not: each operand's
 * adjoint, built from the other's dims, then takes its own operand's type
 * through reshape_like. */
static bool dims_agree(const ry_expr *a, int ia, const ry_expr *b, int ib) {
    const ry_type *ta = ry_gb_type(a), *tb = ry_gb_type(b);
    if (!ta || !tb || ta->kind != RY_TYPE_TENSOR || tb->kind != RY_TYPE_TENSOR) return true;
    if (ia < 0) ia += ta->tensor.ndim;
    if (ib < 0) ib += tb->tensor.ndim;
    if (ia < 0 || ib < 0 || ia >= ta->tensor.ndim || ib >= tb->tensor.ndim) return true;
    return ry_dim_compatible(&ta->tensor.dims[ia], &tb->tensor.dims[ib]);
}

static ry_expr *typed_like(ry_grad_ctx *c, ry_expr *d, ry_expr *operand) {
    return d ? OP2("reshape_like", d, operand) : NULL;
}

/* dense: x (..., K) x w (M, K) -> y (..., M)
 *   dx = dense(g, w^T)                   (..., M) x (K, M) -> (..., K)
 *   dw = dense(g2^T, x2^T)               (M, N) x (K, N) -> (M, K)
 * with g2, x2 the rows of g and x flattened to (N, M) and (N, K). */
ry_status ry_grad_dense(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *x = args[0], *w = args[1];
    int64_t M, K;
    if (!weight_dims(w, &M, &K))
        return ry_error_at(c->err, c->span, "gradient of nn.dense needs a 2-D weight");
    grads[0] = OP2("nn.dense", g, transpose2(c, w));
    if (M == 0 || K == 0) { /* an empty weight: rows of nothing cannot be inferred */
        grads[1] = OP1("zeros_like", w);
        return RY_OK;
    }
    ry_expr *g2, *x2;
    if (flatten_rows(c, g, M, &g2) || flatten_rows(c, x, K, &x2)) return RY_ERR;
    grads[1] = OP2("nn.dense", transpose2(c, g2), transpose2(c, x2));
    if (!dims_agree(x, -1, w, 1)) {
        grads[0] = typed_like(c, grads[0], x);
        grads[1] = typed_like(c, grads[1], w);
    }
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
            same_batch &=
                x->kind == RY_DIM_CONST && z->kind == RY_DIM_CONST && x->value == z->value;
        }
        if (same_batch && dims_agree(a, ta ? -2 : -1, b, tb ? -1 : -2)) {
            grads[0] = da;
            grads[1] = db;
        }
    }
    return RY_OK;
}

/* transpose of the last two axes of a rank-nd tensor */
static ry_expr *swap_last2(ry_grad_ctx *c, ry_expr *x, int nd) {
    ry_expr *t = OP1("transpose", x);
    int64_t axes[RY_MAX_RANK];
    for (int i = 0; i < nd; i++) axes[i] = i;
    axes[nd - 2] = nd - 1;
    axes[nd - 1] = nd - 2;
    ry_gb_attr_ints(M_, t, "axes", nd, axes);
    return t;
}

/* nn.matmul with data of rank 1 or above 2 (the weight is always 2-D):
 * without transpose_a the data's leading dims are rows, a (R..., K) x
 * op(b) (K, M) -> (R..., M):
 *   da = g op(b)^T (any rank: nn.matmul reads g's leading dims as rows)
 *   db = a2^T g2 (or its transpose), a2 and g2 flattened to rows;
 * with transpose_a they are a batch, a (R..., K, N) -> (R..., N, M):
 *   da = (g op(b)^T)^T per batch (the last two axes swapped)
 *   db = sum over the batch of a_r g_r (batch_matmul, then sum). */
static ry_status matmul_nd(ry_grad_ctx *c, ry_expr *a, ry_expr *b, ry_expr *g, bool ta, bool tb,
                           ry_expr **grads) {
    int na;
    int64_t as[RY_MAX_RANK], rows, cols;
    if (!weight_dims(b, &rows, &cols))
        return ry_error_at(c->err, c->span, "gradient of nn.matmul needs a 2-D weight");
    int64_t K = tb ? cols : rows, M = tb ? rows : cols;
    ry_expr *dg = mm(c, "nn.matmul", g, b, false, !tb); /* g op(b)^T: (R..., [N,] K) */
    if (M == 0 || K == 0) { /* an empty weight (as in dense) */
        grads[0] = ta ? swap_last2(c, dg, tensor_rank(a)) : dg;
        grads[1] = OP1("zeros_like", b);
        return RY_OK;
    }
    if (!ta) {
        grads[0] = dg;
        ry_expr *a2, *g2;
        if (flatten_rows(c, a, K, &a2) || flatten_rows(c, g, M, &g2)) return RY_ERR;
        grads[1] = tb ? mm(c, "nn.matmul", g2, a2, true, false) : mm(c, "nn.matmul", a2, g2, true, false);
        if (!dims_agree(a, -1, b, tb ? 1 : 0)) {
            grads[0] = typed_like(c, grads[0], a);
            grads[1] = typed_like(c, grads[1], b);
        }
        return RY_OK;
    }
    if (!ry_gb_shape(ry_gb_type(a), &na, as) || K < 0 || M < 0)
        return ry_error_at(c->err, c->span,
                           "gradient of nn.matmul with transpose_a needs data and weight of "
                           "known shape");
    int64_t N = as[na - 1], a3[3] = {-1, K, N}, g3[3] = {-1, N, M};
    grads[0] = swap_last2(c, dg, na);
    ry_expr *p = OP2("nn.batch_matmul", reshape_to(c, a, 3, a3), reshape_to(c, g, 3, g3));
    ry_expr *sum = OP1("sum", p); /* (K, M) */
    const int64_t axis0[1] = {0};
    ry_gb_attr_ints(M_, sum, "axis", 1, axis0);
    grads[1] = tb ? transpose2(c, sum) : sum;
    return RY_OK;
}

ry_status ry_grad_matmul(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                         ry_expr **grads) {
    int na = tensor_rank(args[0]);
    if (na == 2) return matmul_grads(c, "nn.matmul", args, g, grads);
    return matmul_nd(c, args[0], args[1], g, ry_attr_bool(call_op(c), call_attrs(c), "transpose_a"),
                     ry_attr_bool(call_op(c), call_attrs(c), "transpose_b"), grads);
}

ry_status ry_grad_batch_matmul(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                               ry_expr **grads) {
    return matmul_grads(c, "nn.batch_matmul", args, g, grads);
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
    return ry_gb_reshape_like(c, g, args[0], &grads[0]);
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

/* nn.pad and nn.mirror_pad: out[o] = data[s(o)] per axis, with the kernel's
 * map s_i(o) = o - b_i, outside [0, d_i): the pad value (constant), clamped
 * (edge), mirrored without (reflect) or with (symmetric) the edge repeated.
 *   constant, widths >= 0: dx = g cropped back, each padded axis cut with
 *       split at [b_i, b_i + d_i] (cheap, the common case)
 *   otherwise: dx = g scatter-added back along each padded axis through its
 *       map (ry_gb_scatter); positions of the pad value add nothing
 *   the pad value's adjoint is what reached no data: sum(g) - sum(dx) */
static int64_t pad_src(int64_t o, int64_t before, int64_t n, int mode) {
    int64_t j = o - before;
    if (j >= 0 && j < n) return j;
    if (mode == 0) return -1;
    if (mode == 1) return j < 0 ? 0 : n - 1;
    if (mode == 2) return j < 0 ? -j : 2 * (n - 1) - j;
    return j < 0 ? -j - 1 : 2 * n - 1 - j;
}

static ry_status pad_widths(ry_grad_ctx *c, int nd, int64_t *b, int64_t *a) {
    const ry_attr_value *pw = ry_attr_get(call_op(c), call_attrs(c), "pad_width");
    if (pw->kind != RY_AV_LIST || pw->list.n != nd)
        return ry_error_at(c->err, c->span, "gradient of %s: pad_width needs one pair per axis",
                           call_op(c)->name);
    for (int i = 0; i < nd; i++) {
        const ry_attr_value *p = &pw->list.items[i];
        if (p->kind != RY_AV_LIST || p->list.n != 2 || p->list.items[0].kind != RY_AV_INT ||
            p->list.items[1].kind != RY_AV_INT)
            return ry_error_at(c->err, c->span,
                               "gradient of %s: pad_width must hold pairs of integers",
                               call_op(c)->name);
        b[i] = p->list.items[0].i;
        a[i] = p->list.items[1].i;
    }
    return RY_OK;
}

static ry_status pad_grads(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g, ry_expr **grads,
                           const char *mode_name, bool has_value) {
    int nd, ndy;
    int64_t xs[RY_MAX_RANK], ys[RY_MAX_RANK], b[RY_MAX_RANK], a[RY_MAX_RANK];
    if (!data_dims(args[0], &nd, xs))
        return ry_error_at(c->err, c->span, "gradient of %s needs a tensor", call_op(c)->name);
    if (pad_widths(c, nd, b, a)) return RY_ERR;
    int mode = strcmp(mode_name, "edge") == 0                                           ? 1
               : strcmp(mode_name, "reflect") == 0 || strcmp(mode_name, "REFLECT") == 0 ? 2
               : strcmp(mode_name, "SYMMETRIC") == 0                                    ? 3
                                                                                        : 0;
    bool crop = mode == 0;
    for (int i = 0; i < nd; i++)
        crop &= b[i] >= 0 && a[i] >= 0;
    /* cropping needs the sizes of the padded axes only (a batch may stay
     * unknown); the other modes gather by index over known shapes */
    bool known = true;
    for (int i = 0; i < nd; i++)
        if (xs[i] < 0 && (b[i] != 0 || a[i] != 0)) known = false;
    if (!crop && (!ry_gb_shape(ry_gb_type(args[0]), &nd, xs) ||
                  !ry_gb_shape(c->call->type, &ndy, ys) || ndy != nd))
        known = false;
    if (!known)
        return ry_error_at(c->err, c->span, "gradient of %s needs known shapes%s",
                           call_op(c)->name, crop ? " along the padded axes" : "");
    ry_expr *cur = g;
    for (int i = 0; i < nd; i++) {
        if (b[i] == 0 && a[i] == 0) continue;
        if (crop) { /* split at [b, b + d]: the middle part is the data */
            int64_t idx[2] = {b[i], b[i] + xs[i]};
            ry_expr *sp = OP1("split", cur);
            if (b[i] == 0)
                ry_gb_attr_ints(M_, sp, "indices_or_sections", 1, &idx[1]);
            else if (a[i] == 0)
                ry_gb_attr_ints(M_, sp, "indices_or_sections", 1, &idx[0]);
            else
                ry_gb_attr_ints(M_, sp, "indices_or_sections", 2, idx);
            ry_gb_attr_int(M_, sp, "axis", i);
            cur = ry_expr_proj(M_, sp, b[i] == 0 ? 0 : 1, RY_NO_SPAN);
            continue;
        }
        int64_t *map = RY_NEW_ARRAY(c->m->arena, int64_t, ys[i] + 1), p = 1, q = 1;
        for (int64_t o = 0; o < ys[i]; o++)
            map[o] = pad_src(o, b[i], xs[i], mode);
        for (int k = 0; k < nd; k++) {
            if (k < i) p *= xs[k]; /* axes before i are already back to data's size */
            if (k > i) q *= ys[k];
        }
        if (ys[i] > INT32_MAX) return ry_error_at(c->err, c->span, "pad: axis too long");
        ry_expr *idx = ry_gb_index_const(M_, (int)ys[i], map);
        ry_expr *r = OP1("reshape", ry_gb_scatter(M_, cur, idx, p, xs[i], q, ry_gb_dtype(args[0])));
        int64_t shape[RY_MAX_RANK];
        for (int k = 0; k < nd; k++)
            shape[k] = k <= i ? xs[k] : ys[k];
        ry_gb_attr_ints(M_, r, "newshape", nd, shape);
        cur = r;
    }
    grads[0] = cur;
    if (has_value) grads[1] = OP2("subtract", OP1("sum", g), OP1("sum", cur));
    return RY_OK;
}

ry_status ry_grad_pad(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    return pad_grads(c, args, g, grads, ry_attr_str(call_op(c), call_attrs(c), "pad_mode"), true);
}

ry_status ry_grad_mirror_pad(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    return pad_grads(c, args, g, grads, ry_attr_str(call_op(c), call_attrs(c), "mode"), false);
}

/* conv2d_backward_weight(g, x) -> dW, the weight adjoint of
 * y = conv2d(x, W) for dy = g; it is linear in g and in x, so with H the
 * adjoint of dW (W's shape (O, C/groups, KH, KW)):
 *   dg = conv2d(x, H)                     the forward convolution
 *   dx = conv2d_transpose(g, H)           conv2d's data adjoint
 * both with the call's strides, padding, dilation, groups and kernel; the
 * transpose's output_padding restores x's height and width. This is what
 * second derivatives of convolutional programs need. */
static void conv_like_attrs(ry_grad_ctx *c, ry_expr *e, int64_t channels) {
    static const char *const keep[] = {"strides", "padding", "dilation", "groups", "kernel_size"};
    const ry_attrs *at = call_attrs(c);
    for (int i = 0; i < at->n; i++)
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            if (strcmp(at->items[i].name, keep[k]) == 0) ry_gb_attr_copy(M_, e, &at->items[i]);
    if (channels > 0) ry_gb_attr_int(M_, e, "channels", channels);
}

/* padding as (top, left, bottom, right) from 1, 2 or 4 values (TVM's rule) */
static void pads4(const int64_t *p, int n, int64_t *out) {
    for (int i = 0; i < 4; i++)
        out[i] = n == 4 ? p[i] : n == 2 ? p[i % 2] : n == 1 ? p[0] : 0;
}

/* The dims of a 4-d tensor type, -1 where not a constant; false if not 4-d. */
static bool dims4(const ry_type *t, int64_t *s) {
    if (!t || t->kind != RY_TYPE_TENSOR || t->tensor.ndim != 4) return false;
    for (int i = 0; i < 4; i++)
        s[i] = t->tensor.dims[i].kind == RY_DIM_CONST ? t->tensor.dims[i].value : -1;
    return true;
}

/* Sizes of x known at run time only: the transpose takes the largest
 * output_padding and is cut to x's height and width (as conv2d's rule). */
ry_status ry_grad_conv2d_backward_weight(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                         ry_expr *g, ry_expr **grads) {
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int64_t xs[4], ws[4], st[2] = {1, 1}, dil[2] = {1, 1}, pad[4], praw[4];
    if (!dims4(ry_gb_type(args[1]), xs) || !dims4(c->call->type, ws) || ws[2] < 0 || ws[3] < 0 ||
        strcmp(ry_attr_str(op, at, "data_layout"), "NCHW") || strcmp(ry_attr_str(op, at, "kernel_layout"), "NCHW"))
        return ry_error_at(c->err, c->span,
                           "gradient of nn.conv2d_backward_weight needs NCHW data and dy (kernel_layout, "
                           "TVM's name for dy's), 4-d tensors and a known kernel size");
    int ns = ry_attr_ints(op, at, "strides", st, 2), nd = ry_attr_ints(op, at, "dilation", dil, 2);
    int np = ry_attr_ints(op, at, "padding", praw, 4);
    if (ns == 1) st[1] = st[0];
    if (nd == 1) dil[1] = dil[0];
    pads4(praw, np < 0 ? 0 : np > 4 ? 4 : np, pad);
    int64_t opad[2];
    for (int i = 0; i < 2; i++) {
        if (st[i] < 1) return ry_error_at(c->err, c->span, "conv2d_backward_weight: bad strides");
        opad[i] = xs[2 + i] < 0 ? st[i] - 1
                                : (xs[2 + i] + pad[i] + pad[i + 2] - dil[i] * (ws[2 + i] - 1) - 1) % st[i];
    }
    ry_expr *dg = OP2("nn.conv2d", args[1], g);
    conv_like_attrs(c, dg, ws[0]);
    ry_expr *dx = OP2("nn.conv2d_transpose", args[0], g);
    conv_like_attrs(c, dx, xs[1]);
    ry_gb_attr_ints(M_, dx, "output_padding", 2, opad);
    for (int i = 0; i < 2; i++)
        if (xs[2 + i] < 0 && st[i] > 1) dx = ry_gb_crop_like(M_, dx, args[1], 4, 2 + i);
    grads[0] = dg;
    grads[1] = dx;
    return RY_OK;
}

/* avg_pool2d_grad(g, x) spreads each window's g evenly over the window
 * (x gives only a shape): it is the adjoint of avg_pool2d, whose adjoint is
 * avg_pool2d again with the same attributes:  dg = avg_pool2d(H) */
ry_status ry_grad_avg_pool2d_grad(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                  ry_expr **grads) {
    ry_expr *dg = OP1("nn.avg_pool2d", g);
    const ry_attrs *at = call_attrs(c);
    for (int i = 0; i < at->n; i++)
        ry_gb_attr_copy(M_, dg, &at->items[i]);
    grads[0] = dg;
    grads[1] = NULL;
    return RY_OK;
}

/* ---- operators whose result depends on the mode ----
 * nn.dropout and nn.batch_norm compute differently in training and at
 * inference. The mode is a property of the gradient program, chosen when
 * it is built (ry_grad_opts.inference, here c->inference): each rule emits
 * the adjoint of that one mode, statically, and the program is to be run in
 * the same mode. */

/* dropout: (out, mask) = dropout(x); training: out = x * mask / (1 - rate)
 *   training: dx = g.0 * mask / (1 - rate)   (0 when rate is 1), with the
 *             mask the forward call returned, so it is the forward's exactly
 *   inference: dx = g.0                       (out = x, mask all ones) */
ry_status ry_grad_dropout(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    ry_expr *x = args[0];
    ry_expr *g0 = ry_expr_proj(M_, g, 0, RY_NO_SPAN);
    if (c->inference) {
        grads[0] = g0;
        return RY_OK;
    }
    double rate = ry_attr_float(call_op(c), call_attrs(c), "rate");
    ry_expr *mask = ry_expr_proj(M_, y, 1, RY_NO_SPAN);
    ry_expr *scale = ry_gb_scalar(M_, ry_gb_dtype(x), rate < 1 ? 1 / (1 - rate) : 0);
    grads[0] = OP2("multiply", g0, OP2("multiply", mask, scale));
    return RY_OK;
}

