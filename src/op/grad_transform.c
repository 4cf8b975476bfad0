/*
 * grad_transform.c: gradient rules of the reductions and the data-movement
 * operators (reshape and its kin, transpose, concatenate, split, stack,
 * take, cumsum), as IR. Legend: x the primal argument, y the result, g the adjoint
 * of y, R the set of reduced axes. Reductions broadcast the adjoint back
 * over R; data movement applies the inverse movement to g.
 */
#include <string.h>

#include "op/grad_rules.h"

#define M_ (c->m)
#define OP1(n, a) ry_gb_op1(M_, n, a)
#define OP2(n, a, b) ry_gb_op2(M_, n, a, b)

static const ry_op *call_op(ry_grad_ctx *c) { return c->call->call.callee->op.op; }
static const ry_attrs *call_attrs(ry_grad_ctx *c) { return &c->call->call.attrs; }

static int rank_of(const ry_expr *e) {
    const ry_type *t = ry_gb_type(e);
    return t && t->kind == RY_TYPE_TENSOR ? t->tensor.ndim : 0;
}

/* Marks the reduced axes of a reduction of an ndim-tensor in red[]:
 * axis=None reduces all; exclude=True reduces the complement. */
static void reduced_axes(ry_grad_ctx *c, int ndim, bool *red) {
    int64_t axes[RY_MAX_RANK];
    int n = ry_attr_ints(call_op(c), call_attrs(c), "axis", axes, RY_MAX_RANK);
    bool exclude = ry_attr_bool(call_op(c), call_attrs(c), "exclude");
    for (int i = 0; i < ndim; i++)
        red[i] = n < 0;
    for (int i = 0; i < n && i < RY_MAX_RANK; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + ndim : axes[i];
        if (a >= 0 && a < ndim) red[a] = true;
    }
    if (exclude && n >= 0)
        for (int i = 0; i < ndim; i++)
            red[i] = !red[i];
}

/* The adjoint g of a reduction, with the reduced axes put back as 1s
 * (expand_dims at each, in ascending order) unless keepdims kept them. */
static ry_expr *keep_reduced(ry_grad_ctx *c, ry_expr *g, int ndim, const bool *red) {
    if (ry_attr_bool(call_op(c), call_attrs(c), "keepdims")) return g;
    for (int i = 0; i < ndim; i++) {
        if (!red[i]) continue;
        ry_expr *e = OP1("expand_dims", g);
        ry_gb_attr_int(M_, e, "axis", i);
        g = e;
    }
    return g;
}

/* sum: dx = broadcast of g (reduced axes restored) to x's shape */
ry_status ry_grad_sum(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = rank_of(x);
    bool red[RY_MAX_RANK];
    reduced_axes(c, nd, red);
    grads[0] = OP2("add", OP1("zeros_like", x), keep_reduced(c, g, nd, red));
    return RY_OK;
}

/* mean: dx = broadcast of g / |R| (the count of reduced elements) */
ry_status ry_grad_mean(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = rank_of(x);
    int64_t shape[RY_MAX_RANK];
    bool red[RY_MAX_RANK];
    reduced_axes(c, nd, red);
    ry_expr *scale;
    if (ry_gb_shape(ry_gb_type(x), &nd, shape)) {
        double count = 1;
        for (int i = 0; i < nd; i++)
            if (red[i]) count *= (double)shape[i];
        scale = ry_gb_scalar(M_, ry_gb_dtype(x), count ? 1.0 / count : 0);
    } else { /* symbolic dims: |R| = size(y) / size(x), counted at run time */
        scale = OP2("divide", OP1("sum", OP1("ones_like", y)), OP1("sum", OP1("ones_like", x)));
    }
    ry_expr *gk = keep_reduced(c, g, nd, red);
    grads[0] = OP2("add", OP1("zeros_like", x), OP2("multiply", gk, scale));
    return RY_OK;
}

/* max, min: dx = g where x equals the result (every tied element), else 0 */
ry_status ry_grad_max(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    ry_expr *x = args[0];
    int nd = rank_of(x);
    bool red[RY_MAX_RANK];
    reduced_axes(c, nd, red);
    ry_expr *hit = OP2("equal", x, keep_reduced(c, y, nd, red));
    grads[0] = ry_gb_op3(M_, "where", hit, keep_reduced(c, g, nd, red), OP1("zeros_like", x));
    return RY_OK;
}

/* reshape, expand_dims, squeeze: dx = g reshaped to x's shape */
ry_status ry_grad_reshape(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    return ry_gb_reshape_like(c, g, args[0], &grads[0]);
}

/* reshape_like(x, like): dx = g reshaped to x's shape; like gives only a
 * shape, so no gradient */
ry_status ry_grad_reshape_like(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                               ry_expr **grads) {
    grads[1] = NULL;
    return ry_gb_reshape_like(c, g, args[0], &grads[0]);
}

/* transpose by axes p: dx = transpose(g, p^-1); None reverses, its own inverse */
ry_status ry_grad_transpose(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                            ry_expr **grads) {
    int64_t axes[RY_MAX_RANK], inv[RY_MAX_RANK];
    int n = ry_attr_ints(call_op(c), call_attrs(c), "axes", axes, RY_MAX_RANK);
    ry_expr *t = OP1("transpose", g);
    if (n > 0 && n <= RY_MAX_RANK) {
        for (int i = 0; i < n; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + n : axes[i];
            if (a < 0 || a >= n) return ry_error_at(c->err, c->span, "transpose: bad axes");
            inv[a] = i;
        }
        ry_gb_attr_ints(M_, t, "axes", n, inv);
    }
    grads[0] = t;
    return RY_OK;
}

/* The tensor types of a tuple-typed argument (concatenate, stack). */
static const ry_type *tuple_type(ry_grad_ctx *c) {
    const ry_type *t = c->call->call.args[0]->type;
    return t && t->kind == RY_TYPE_TUPLE ? t : NULL;
}

/* Fields of widths known at run time only: dxi = take(g, oi + iota(wi),
 * axis), oi the sum of the widths before field i (constants where the types
 * know them, the lengths at run time where not). */
static ry_status concat_grad_unknown(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g, const ry_type *tt,
                                     int64_t axis, ry_expr **grads) {
    int k = tt->tuple.n, nd = tt->tuple.fields[0]->tensor.ndim;
    ry_expr **f = RY_NEW_ARRAY(M_->arena, ry_expr *, k);
    ry_expr *off = NULL; /* the run-time part of the offset */
    int64_t at = 0;      /* its constant part */
    for (int i = 0; i < k; i++) {
        ry_expr *xi = ry_expr_proj(M_, args[0], i, RY_NO_SPAN);
        ry_expr *o = ry_gb_scalar(M_, RY_INT32, (double)at);
        if (off) o = OP2("add", off, o);
        ry_expr *t = OP2("take", g, OP2("add", ry_gb_iota(M_, xi, nd, axis), o));
        ry_gb_attr_int(M_, t, "axis", axis);
        ry_gb_attr_str(M_, t, "mode", "fast");
        f[i] = t;
        const ry_dim *w = &tt->tuple.fields[i]->tensor.dims[axis];
        if (w->kind == RY_DIM_CONST) {
            at += w->value;
        } else {
            ry_expr *len = ry_gb_length(M_, xi, axis, RY_INT32);
            off = off ? OP2("add", off, len) : len;
        }
    }
    grads[0] = ry_expr_tuple(M_, k, f, RY_NO_SPAN);
    return RY_OK;
}

/* concatenate((x1, ..., xk), axis): (dx1, ..., dxk) = split(g) at the
 * running sums of the xi's sizes along axis (or, where a size is known at
 * run time only, concat_grad_unknown) */
ry_status ry_grad_concatenate(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                              ry_expr **grads) {
    const ry_type *tt = tuple_type(c);
    if (!tt || tt->tuple.n == 0)
        return ry_error_at(c->err, c->span, "gradient of concatenate needs a typed tuple");
    int nd = tt->tuple.fields[0]->tensor.ndim;
    int64_t axis = ry_attr_int(call_op(c), call_attrs(c), "axis");
    if (axis < 0) axis += nd;
    int64_t idx[64], width[64], at = 0;
    int k = tt->tuple.n, wide = 0;
    if (k > 64) return ry_error_at(c->err, c->span, "gradient of concatenate: too many fields");
    for (int i = 0; i < k; i++) {
        const ry_type *f = tt->tuple.fields[i];
        if (f->kind != RY_TYPE_TENSOR || axis < 0 || axis >= f->tensor.ndim)
            return ry_error_at(c->err, c->span, "gradient of concatenate: axis out of range");
        if (f->tensor.dims[axis].kind != RY_DIM_CONST) return concat_grad_unknown(c, args, g, tt, axis, grads);
        width[i] = f->tensor.dims[axis].value;
        if (width[i] == 0) continue;
        if (wide) idx[wide - 1] = at; /* a cut before each wide field but the first */
        at += width[i];
        wide++;
    }
    /* g cut at the wide fields' boundaries (split takes strictly
     * ascending indices); a field 0 wide gets zeros of its own shape */
    ry_expr *parts = g;
    if (wide > 1) {
        parts = OP1("split", g);
        ry_gb_attr_ints(M_, parts, "indices_or_sections", wide - 1, idx);
        ry_gb_attr_int(M_, parts, "axis", axis);
    }
    if (wide == k && k > 1) {
        grads[0] = parts;
        return RY_OK;
    }
    ry_expr *f[64];
    for (int i = 0, j = 0; i < k; i++)
        f[i] = width[i] == 0 ? OP1("zeros_like", ry_expr_proj(M_, args[0], i, RY_NO_SPAN))
               : wide > 1    ? ry_expr_proj(M_, parts, j++, RY_NO_SPAN)
                             : parts;
    grads[0] = ry_expr_tuple(M_, k, f, RY_NO_SPAN);
    return RY_OK;
}

/* split(x, axis): dx = concatenate(g, axis), g the tuple of the parts' adjoints */
ry_status ry_grad_split(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *e = OP1("concatenate", g);
    ry_gb_attr_int(M_, e, "axis", ry_attr_int(call_op(c), call_attrs(c), "axis"));
    grads[0] = e;
    return RY_OK;
}

/* stack((x1, ..., xk), axis): dxi = reshape(split(g, k, axis).i, shape of xi) */
ry_status ry_grad_stack(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    const ry_type *tt = tuple_type(c);
    if (!tt || tt->tuple.n == 0 || tt->tuple.n > 64)
        return ry_error_at(c->err, c->span, "gradient of stack needs a typed tuple");
    int k = tt->tuple.n;
    ry_expr *s = OP1("split", g);
    ry_gb_attr_int(M_, s, "indices_or_sections", k);
    ry_gb_attr_int(M_, s, "axis", ry_attr_int(call_op(c), call_attrs(c), "axis"));
    ry_var *sv = ry_gb_var(M_, "parts", NULL);
    ry_expr *fields[64];
    for (int i = 0; i < k; i++) {
        ry_expr *part = ry_expr_proj(M_, ry_expr_var(M_, sv, RY_NO_SPAN), i, RY_NO_SPAN);
        ry_expr *xi = ry_expr_proj(M_, args[0], i, RY_NO_SPAN); /* typed by tt's field */
        if (ry_gb_reshape_like(c, part, xi, &fields[i])) return RY_ERR;
    }
    grads[0] = ry_expr_let(M_, sv, s, ry_expr_tuple(M_, k, fields, RY_NO_SPAN), RY_NO_SPAN);
    return RY_OK;
}

/* take(data, indices, axis), batch_dims=0: the adjoint scatter-adds g
 * back into zeros shaped like data (scatter_nd, mode="add"): no one-hot
 * matrix, no GEMM, no transposes, and the compiled engine can keep the
 * result row-sparse (rows_ops.c). Legend: data (P, V, Q) around axis (P, Q
 * the products of the dims before and after it; axis=None flattens data:
 * P = Q = 1), indices (K...) with N = prod(K), g (P, K..., Q).
 *   axis 0: scatter_nd(zeros_like(data), i as (1, N), g as (N, data[1:]))
 *   P = 1:  the same into zeros (V, Q), reshaped back to data's shape
 *   P > 1:  indices (2, P, N) pair every p with every i[n]; into (P, V, Q)
 * mode="clip" clips the indices first and "wrap" wraps them (a take of
 * arange(V) with mode="wrap"), as the forward does; "fast" indices are in
 * range (the forward checked them). */
/* reshape to a shape of sizes (and -1): a 0 is a size, not "copy" */
static ry_expr *reshape_to(ry_grad_ctx *c, ry_expr *x, int n, const int64_t *shape) {
    ry_expr *r = OP1("reshape", x);
    ry_gb_attr_ints(M_, r, "newshape", n, shape);
    bool zero = false;
    for (int i = 0; i < n; i++) zero |= shape[i] == 0;
    if (zero) ry_gb_attr_bool(M_, r, "allowzero", true);
    return r;
}

/* The flat indices (N) the forward used along an axis of extent v; v < 0:
 * an extent known at run time only, len (a scalar of the indices' dtype):
 *   clip: min(max(i, 0), len - 1)
 *   wrap: r = i - (i / len) * len (division truncates), r < 0 ? r + len : r */
static ry_status take_indices(ry_grad_ctx *c, ry_expr *ind, int64_t v, ry_expr *len, ry_expr **out) {
    const ry_op *op = call_op(c);
    const char *mode = ry_attr_str(op, call_attrs(c), "mode");
    const int64_t flat[1] = {-1};
    ry_expr *idx = rank_of(ind) == 1 ? ind : reshape_to(c, ind, 1, flat);
    ry_dtype dt = ry_gb_dtype(ind);
    if (v < 0 && strcmp(mode, "clip") == 0) {
        ry_expr *last = OP2("subtract", len, ry_gb_scalar(M_, dt, 1));
        idx = OP2("minimum", OP2("maximum", idx, ry_gb_scalar(M_, dt, 0)), last);
    } else if (v < 0 && strcmp(mode, "wrap") == 0) {
        ry_expr *r = OP2("subtract", idx, OP2("multiply", OP2("divide", idx, len), len));
        idx = ry_gb_op3(M_, "where", OP2("less", r, ry_gb_scalar(M_, dt, 0)), OP2("add", r, len), r);
    } else if (strcmp(mode, "clip") == 0) {
        ry_expr *cl = OP1("clip", idx);
        ry_gb_attr_float(M_, cl, "a_min", 0); /* TVM's clip bounds are doubles */
        ry_gb_attr_float(M_, cl, "a_max", (double)(v - 1));
        idx = cl;
    } else if (strcmp(mode, "wrap") == 0) {
        if (v > INT32_MAX) return ry_error_at(c->err, c->span, "gradient of take: axis too long to wrap");
        int64_t *ar = RY_NEW_ARRAY(M_->arena, int64_t, v > 0 ? v : 1);
        for (int64_t i = 0; i < v; i++) ar[i] = i;
        ry_expr *w = OP2("take", ry_gb_index_const(M_, (int)v, ar), idx);
        ry_gb_attr_int(M_, w, "axis", 0);
        ry_gb_attr_str(M_, w, "mode", "wrap");
        idx = w;
    }
    *out = idx;
    return RY_OK;
}

static ry_expr *scatter_add(ry_grad_ctx *c, ry_expr *zeros, ry_expr *idx, ry_expr *upd) {
    ry_expr *s = ry_gb_op3(M_, "scatter_nd", zeros, idx, upd);
    ry_gb_attr_str(M_, s, "mode", "add");
    return s;
}

/* indices (2, P, N): row 0 holds p, row 1 holds idx[n], each broadcast
 * over the other's axis by adding a zero of the other. */
static ry_expr *pair_indices(ry_grad_ctx *c, ry_expr *idx, int64_t p) {
    const int64_t one_one_n[3] = {1, 1, -1}, one_p_one[3] = {1, p, 1};
    int64_t *ar = RY_NEW_ARRAY(M_->arena, int64_t, p);
    for (int64_t i = 0; i < p; i++) ar[i] = i;
    ry_expr *ci = OP1("cast", idx);
    ry_gb_attr_str(M_, ci, "dtype", "int32");
    ry_expr *in3 = reshape_to(c, ci, 3, one_one_n);
    ry_expr *p3 = reshape_to(c, ry_gb_index_const(M_, (int)p, ar), 3, one_p_one);
    ry_expr *zero = ry_gb_scalar(M_, RY_INT32, 0);
    ry_expr *rows[2] = {OP2("add", p3, OP2("multiply", in3, zero)),
                        OP2("add", in3, OP2("multiply", p3, zero))};
    ry_expr *cat = OP1("concatenate", ry_expr_tuple(M_, 2, rows, RY_NO_SPAN));
    ry_gb_attr_int(M_, cat, "axis", 0);
    return cat;
}

/* One element picked along the last axis by a scalar index (a class's
 * score: take(log_softmax(s), label, axis=1)): the adjoint is g where the
 * position is the index and 0 elsewhere, one where over (.., V) instead of
 * zeros + scatter_nd + four reshapes (a Tree-LSTM node's loss ran eleven
 * operators for it). The same values: scatter added g to zeros there. */
#define TAKE_PICK_MAX 4096

static ry_expr *take_pick_grad(ry_grad_ctx *c, ry_expr *data, ry_expr *ind, ry_expr *g, int nd,
                               int64_t v) {
    const ry_op *op = call_op(c);
    ry_expr *idx = ind;
    if (strcmp(ry_attr_str(op, call_attrs(c), "mode"), "clip") == 0) {
        idx = OP1("clip", ind);
        ry_gb_attr_float(M_, idx, "a_min", 0);
        ry_gb_attr_float(M_, idx, "a_max", (double)(v - 1));
    }
    if (ry_gb_dtype(ind) != RY_INT32) {
        idx = OP1("cast", idx);
        ry_gb_attr_str(M_, idx, "dtype", "int32");
    }
    int64_t *ar = RY_NEW_ARRAY(M_->arena, int64_t, v > 0 ? v : 1);
    for (int64_t i = 0; i < v; i++) ar[i] = i;
    ry_expr *hit = OP2("equal", ry_gb_index_const(M_, (int)v, ar), idx);
    ry_expr *gcol = OP1("expand_dims", g); /* g (P...) as (P..., 1) */
    ry_gb_attr_int(M_, gcol, "axis", nd - 1);
    return ry_gb_op3(M_, "where", hit, gcol, ry_gb_scalar(M_, ry_gb_dtype(data), 0));
}

static ry_expr *transposed(ry_grad_ctx *c, ry_expr *x, int n, const int64_t *axes) {
    for (int i = 0; i < n; i++)
        if (axes[i] != i) {
            ry_expr *t = OP1("transpose", x);
            ry_gb_attr_ints(M_, t, "axes", n, axes);
            return t;
        }
    return x; /* the identity */
}

/* take along `axis` of data (rank nd, extent v along the axis, -1 when not
 * a constant) whose shape is not all known (a batch n): the axis is moved
 * first, where the adjoint is rows scattered at the indices, and moved
 * back. g (P..., K..., Q...) has the index dims K (rank r) where the axis
 * was: they go first and merge into one, two at a time by reshape's -3 (a
 * scalar index: one row). An extent known at run time only clips or wraps
 * the indices with its value then (take_indices). */
static ry_status take_grad_unknown(ry_grad_ctx *c, ry_expr *data, int nd, int64_t v, ry_expr *ind, ry_expr *g,
                                   int64_t axis, ry_expr **out) {
    int r = rank_of(ind), ng = nd - 1 + r;
    if (r < 0 || ng > RY_MAX_RANK)
        return ry_error_at(c->err, c->span, "gradient of take: indices of unknown rank");
    ry_expr *idx, *len = v < 0 ? ry_gb_length(M_, data, axis, ry_gb_dtype(ind)) : NULL;
    if (take_indices(c, ind, v, len, &idx)) return RY_ERR;
    int64_t perm[RY_MAX_RANK], back[RY_MAX_RANK], gperm[RY_MAX_RANK];
    int k = 0;
    perm[k++] = axis;
    for (int i = 0; i < nd; i++)
        if (i != axis) perm[k++] = i;
    for (int i = 0; i < nd; i++) back[perm[i]] = i;
    k = 0;
    for (int i = 0; i < r; i++) gperm[k++] = axis + i;
    for (int i = 0; i < ng; i++)
        if (i < axis || i >= axis + r) gperm[k++] = i;
    ry_expr *rows = transposed(c, g, ng, gperm);
    if (r == 0) {
        rows = OP1("expand_dims", rows);
        ry_gb_attr_int(M_, rows, "axis", 0);
    }
    for (int n = ng; n > nd; n--) { /* (K1, K2, ...) -> (K1 K2, ...); 0 copies a dim */
        int64_t ms[RY_MAX_RANK] = {-3};
        for (int i = 1; i < n - 1; i++) ms[i] = 0;
        rows = OP1("reshape", rows);
        ry_gb_attr_ints(M_, rows, "newshape", n - 1, ms);
    }
    const int64_t one_n[2] = {1, -1};
    ry_expr *zeros = transposed(c, OP1("zeros_like", data), nd, perm);
    *out = transposed(c, scatter_add(c, zeros, reshape_to(c, idx, 2, one_n), rows), nd, back);
    return RY_OK;
}

/* axis=None over data of a shape not all known: the adjoint of the take
 * from data flattened (an extent known at run time), reshaped like data. */
static ry_status take_grad_flat_unknown(ry_grad_ctx *c, ry_expr *data, ry_expr *ind, ry_expr *g, ry_expr **out) {
    const int64_t flat[1] = {-1};
    ry_expr *gf;
    if (take_grad_unknown(c, reshape_to(c, data, 1, flat), 1, -1, ind, g, 0, &gf)) return RY_ERR;
    return ry_gb_reshape_like(c, gf, data, out);
}

ry_status ry_grad_take(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    ry_expr *data = args[0], *ind = args[1];
    const ry_op *op = call_op(c);
    const ry_attrs *at = call_attrs(c);
    int nd;
    int64_t shape[RY_MAX_RANK];
    grads[1] = NULL;
    const ry_type *dt = ry_gb_type(data);
    bool batch0 = ry_attr_int(op, at, "batch_dims") == 0;
    if (batch0 && dt && dt->kind == RY_TYPE_TENSOR && !ry_gb_shape(dt, &nd, shape) &&
        !ry_attr_is_none(op, at, "axis")) {
        int64_t axis = ry_attr_int(op, at, "axis");
        if (axis < 0) axis += dt->tensor.ndim;
        if (axis < 0 || axis >= dt->tensor.ndim)
            return ry_error_at(c->err, c->span, "take: axis out of range");
        const ry_dim *va = &dt->tensor.dims[axis];
        return take_grad_unknown(c, data, dt->tensor.ndim, va->kind == RY_DIM_CONST ? va->value : -1, ind, g,
                                 axis, &grads[0]);
    }
    if (batch0 && dt && dt->kind == RY_TYPE_TENSOR && !ry_gb_shape(dt, &nd, shape))
        return take_grad_flat_unknown(c, data, ind, g, &grads[0]);
    if (!batch0 || !ry_gb_shape(dt, &nd, shape))
        return ry_error_at(c->err, c->span, "gradient of take is written for batch_dims=0");
    int64_t p = 1, v = 1, q = 1, axis = -1;
    if (ry_attr_is_none(op, at, "axis")) {
        for (int i = 0; i < nd; i++)
            v *= shape[i];
    } else {
        axis = ry_attr_int(op, at, "axis");
        if (axis < 0) axis += nd;
        if (axis < 0 || axis >= nd) return ry_error_at(c->err, c->span, "take: axis out of range");
        for (int i = 0; i < nd; i++)
            *(i < axis ? &p : i == axis ? &v : &q) *= shape[i];
    }
    if (p > INT32_MAX) return ry_error_at(c->err, c->span, "gradient of take: data too large");
    if (p * v * q == 0) { /* no element to add to (and no -1 to infer beside a 0) */
        grads[0] = OP1("zeros_like", data);
        return RY_OK;
    }
    if (axis == nd - 1 && nd >= 1 && rank_of(ind) == 0 && v <= TAKE_PICK_MAX &&
        strcmp(ry_attr_str(op, at, "mode"), "wrap") != 0) {
        grads[0] = take_pick_grad(c, data, ind, g, nd, v);
        return RY_OK;
    }
    ry_expr *idx = NULL;
    if (take_indices(c, ind, v, NULL, &idx)) return RY_ERR;
    const int64_t one_n[2] = {1, -1};
    ry_expr *zeros = OP1("zeros_like", data);
    if (axis == 0) { /* embeddings: no reshape of data-sized tensors at all */
        int64_t us[RY_MAX_RANK] = {-1};
        for (int i = 1; i < nd; i++) us[i] = shape[i];
        ry_expr *upd = rank_of(ind) == 1 ? g : reshape_to(c, g, nd, us);
        grads[0] = scatter_add(c, zeros, reshape_to(c, idx, 2, one_n), upd);
        return RY_OK;
    }
    const int64_t vq[2] = {v, q}, nq[2] = {-1, q}, pvq[3] = {p, v, q}, pnq[3] = {p, -1, q};
    ry_expr *s;
    if (p == 1)
        s = scatter_add(c, reshape_to(c, zeros, 2, vq), reshape_to(c, idx, 2, one_n),
                        reshape_to(c, g, 2, nq));
    else
        s = scatter_add(c, reshape_to(c, zeros, 3, pvq), pair_indices(c, idx, p),
                        reshape_to(c, g, 3, pnq));
    grads[0] = reshape_to(c, s, nd, shape);
    return RY_OK;
}

/* y = cumsum(x, axis), S = sum(g, axis, keepdims):
 *   inclusive: dx[j] = sum of g[k], k >= j = S - cumsum(g, axis, exclusive)
 *   exclusive: dx[j] = sum of g[k], k > j  = S - cumsum(g, axis)
 * axis=None: the same over the flattened data, reshaped like x; a dtype
 * other than x's is cast back. Integers get no gradient. */
ry_status ry_grad_cumsum(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g, ry_expr **grads) {
    ry_expr *x = args[0];
    grads[0] = NULL;
    if (!ry_dtype_is_float(ry_gb_dtype(x)) || !ry_dtype_is_float(ry_gb_dtype(y))) return RY_OK;
    const ry_op *op = call_op(c);
    bool none = ry_attr_is_none(op, call_attrs(c), "axis");
    int64_t axis = none ? 0 : ry_attr_int(op, call_attrs(c), "axis");
    ry_expr *s = OP1("sum", g);
    ry_gb_attr_ints(M_, s, "axis", 1, &axis);
    ry_gb_attr_bool(M_, s, "keepdims", true);
    ry_expr *run = OP1("cumsum", g);
    ry_gb_attr_int(M_, run, "axis", axis);
    ry_gb_attr_bool(M_, run, "exclusive", !ry_attr_bool(op, call_attrs(c), "exclusive"));
    ry_expr *dx = OP2("subtract", s, run);
    if (ry_gb_dtype(y) != ry_gb_dtype(x)) {
        dx = OP1("cast", dx);
        ry_gb_attr_str(M_, dx, "dtype", ry_dtype_name(ry_gb_dtype(x)));
    }
    if (none) return ry_gb_reshape_like(c, dx, x, &grads[0]);
    grads[0] = dx;
    return RY_OK;
}
