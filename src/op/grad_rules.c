/*
 * grad_rules.c: the small IR builder that gradient rules and the AD
 * transform share, and the lookup of an operator's rule in its registry
 * entry. Rules build IR for the adjoints of one call; see op.h's
 * ry_grad_fn and grad_rules.h.
 */
#include <stdlib.h>
#include <string.h>

#include "op/grad_rules.h"
#include "tensor/alloc_exempt.h"

/* ---- lookup ----
 * The rules sit in the registry entries (.grad, .no_grad), next to the
 * forward definitions; the rule functions themselves are in
 * grad_elemwise.c, grad_nn.c, grad_norm.c, grad_pool.c and grad_transform.c
 * (conv.c keeps its own). */

const ry_grad_fn *ry_grad_rule_find(const char *op_name) {
    const ry_op *op = ry_op_find(op_name);
    return op && op->grad ? &op->grad : NULL;
}

/* Operators hidden by ry_grad_rules_hide_for_test: looked up as if they
 * had no rule. */
static const char *const *hidden;
static int nhidden;

void ry_grad_rules_hide_for_test(int n, const char *const *names) {
    hidden = n > 0 ? names : NULL;
    nhidden = n > 0 ? n : 0;
}

bool ry_grad_rule_lookup(const ry_op *op, ry_grad_rule *out) {
    for (int i = 0; i < nhidden; i++)
        if (strcmp(hidden[i], op->name) == 0) {
            *out = (ry_grad_rule){NULL, false};
            return false;
        }
    *out = (ry_grad_rule){op->grad, !op->grad && op->no_grad};
    return op->grad || op->no_grad;
}

/* ---- builder ---- */

ry_expr *ry_gb_op(ry_module *m, const char *op_name, int n, ry_expr *const *args) {
    const ry_op *op = ry_op_find(op_name);
    if (!op) { /* a rule names an operator the registry lacks: a bug here */
        fprintf(stderr, "relayc: internal error: gradient rule uses unknown operator %s\n",
                op_name);
        abort();
    }
    ry_expr *callee = ry_expr_new(m, RY_EXPR_OP, RY_NO_SPAN);
    callee->op.op = op;
    return ry_expr_call(m, callee, n, (ry_expr **)args, RY_NO_SPAN);
}

ry_expr *ry_gb_op1(ry_module *m, const char *op_name, ry_expr *a) {
    return ry_gb_op(m, op_name, 1, &a);
}

ry_expr *ry_gb_op2(ry_module *m, const char *op_name, ry_expr *a, ry_expr *b) {
    ry_expr *args[2] = {a, b};
    return ry_gb_op(m, op_name, 2, args);
}

ry_expr *ry_gb_op3(ry_module *m, const char *op_name, ry_expr *a, ry_expr *b, ry_expr *c) {
    ry_expr *args[3] = {a, b, c};
    return ry_gb_op(m, op_name, 3, args);
}

static ry_attr *push_attr(ry_module *m, ry_expr *call, const char *name) {
    ry_attrs *as = &call->call.attrs;
    ry_attr *items = RY_NEW_ARRAY(m->arena, ry_attr, as->n + 1);
    if (as->n) memcpy(items, as->items, sizeof *items * (size_t)as->n);
    as->items = items;
    ry_attr *a = &items[as->n++];
    a->name = ry_arena_strdup(m->arena, name);
    a->span = RY_NO_SPAN;
    return a;
}

void ry_gb_attr_int(ry_module *m, ry_expr *call, const char *name, int64_t v) {
    ry_attr *a = push_attr(m, call, name);
    a->value.kind = RY_AV_INT;
    a->value.i = v;
}

void ry_gb_attr_ints(ry_module *m, ry_expr *call, const char *name, int n, const int64_t *v) {
    ry_attr *a = push_attr(m, call, name);
    a->value.kind = RY_AV_LIST;
    a->value.list.n = n;
    a->value.list.items = RY_NEW_ARRAY(m->arena, ry_attr_value, n);
    for (int i = 0; i < n; i++) {
        a->value.list.items[i].kind = RY_AV_INT;
        a->value.list.items[i].i = v[i];
    }
}

void ry_gb_attr_float(ry_module *m, ry_expr *call, const char *name, double v) {
    ry_attr *a = push_attr(m, call, name);
    a->value.kind = RY_AV_FLOAT;
    a->value.f = v;
}

void ry_gb_attr_bool(ry_module *m, ry_expr *call, const char *name, bool v) {
    ry_attr *a = push_attr(m, call, name);
    a->value.kind = RY_AV_BOOL;
    a->value.b = v;
}

void ry_gb_attr_str(ry_module *m, ry_expr *call, const char *name, const char *v) {
    ry_attr *a = push_attr(m, call, name);
    a->value.kind = RY_AV_STR;
    a->value.s = ry_arena_strdup(m->arena, v);
}

void ry_gb_attr_copy(ry_module *m, ry_expr *call, const ry_attr *src) {
    ry_attr *a = push_attr(m, call, src->name);
    a->value = src->value; /* the values live in the same arena */
}

ry_expr *ry_gb_scalar(ry_module *m, ry_dtype dtype, double v) {
    ry_tensor *t = ry_ir_tensor_new(dtype, 0, NULL);
    ry_tensor_set(t, 0, v);
    ry_expr *e = ry_expr_const(m, t, RY_NO_SPAN);
    e->type = ry_type_tensor(m, dtype, 0, NULL);
    return e;
}

/* Whether t has a ? dim: two types equal with one may still differ when
 * the program runs (a ? that is 1 against one that is 3). */
static bool has_any_dim(const ry_type *t) {
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (has_any_dim(t->tuple.fields[i])) return true;
        return false;
    }
    if (t->kind != RY_TYPE_TENSOR) return false;
    for (int i = 0; i < t->tensor.ndim; i++)
        if (t->tensor.dims[i].kind == RY_DIM_ANY) return true;
    return false;
}

ry_expr *ry_gb_unbroadcast(ry_module *m, ry_expr *g, const ry_type *res, ry_expr *like) {
    const ry_type *lt = ry_gb_type(like);
    if (res && lt && ry_type_equal(res, lt) && !has_any_dim(lt)) return g;
    return ry_gb_op2(m, "collapse_sum_like", g, like);
}

ry_var *ry_gb_var(ry_module *m, const char *name, ry_type *type) {
    ry_var *v = ry_var_new(m, name, NULL, RY_NO_SPAN);
    v->type = type;
    return v;
}

ry_expr *ry_gb_ref(ry_module *m, ry_var *v) {
    ry_expr *e = ry_expr_var(m, v, RY_NO_SPAN);
    e->type = v->type;
    return e;
}

const ry_type *ry_gb_type(const ry_expr *e) {
    if (e->type) return e->type;
    if (e->kind == RY_EXPR_VAR) return e->var.var->type;
    if (e->kind == RY_EXPR_PROJ) { /* a field of a tuple-valued result (split's) */
        const ry_type *t = ry_gb_type(e->proj.tuple);
        if (t && t->kind == RY_TYPE_TUPLE && e->proj.index >= 0 && e->proj.index < t->tuple.n)
            return t->tuple.fields[e->proj.index];
    }
    return NULL;
}

ry_dtype ry_gb_dtype(const ry_expr *e) {
    const ry_type *t = ry_gb_type(e);
    if (t && t->kind == RY_TYPE_TENSOR) return t->tensor.dtype;
    if (e->kind == RY_EXPR_CONST) return e->constant.value->dtype;
    return RY_FLOAT32;
}

bool ry_gb_shape(const ry_type *t, int *ndim, int64_t *shape) {
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    *ndim = t->tensor.ndim;
    for (int i = 0; i < t->tensor.ndim; i++) {
        if (t->tensor.dims[i].kind != RY_DIM_CONST) return false;
        shape[i] = t->tensor.dims[i].value;
    }
    return true;
}

/* One dimension that is not a constant (symbolic or Any) is written -1,
 * which reshape infers from the size; two or more cannot be. */
ry_status ry_gb_reshape_to(ry_grad_ctx *c, ry_expr *g, const ry_type *t, ry_expr **out) {
    int64_t shape[RY_MAX_RANK];
    int unknown = 0;
    if (!t || t->kind != RY_TYPE_TENSOR)
        return ry_error_at(c->err, c->span, "gradient of %s needs a tensor input",
                           c->call->call.callee->op.op->name);
    for (int i = 0; i < t->tensor.ndim; i++) {
        const ry_dim *d = &t->tensor.dims[i];
        shape[i] = d->kind == RY_DIM_CONST ? d->value : -1;
        unknown += d->kind != RY_DIM_CONST;
    }
    if (unknown > 1)
        return ry_error_at(c->err, c->span,
                           "gradient of %s needs an input shape with at most one symbolic or "
                           "Any dimension",
                           c->call->call.callee->op.op->name);
    ry_expr *r = ry_gb_op1(c->m, "reshape", g);
    ry_gb_attr_ints(c->m, r, "newshape", t->tensor.ndim, shape);
    bool zero = false; /* a 0 in newshape copies the input's dim unless allowzero */
    for (int i = 0; i < t->tensor.ndim; i++) zero |= shape[i] == 0;
    if (zero) ry_gb_attr_bool(c->m, r, "allowzero", true);
    *out = r;
    return RY_OK;
}

ry_expr *ry_gb_length(ry_module *m, ry_expr *x, int64_t axis, ry_dtype dt) {
    ry_expr *s = ry_gb_op1(m, "shape_of", x);
    ry_gb_attr_str(m, s, "dtype", ry_dtype_name(dt));
    ry_expr *l = ry_gb_op2(m, "take", s, ry_gb_scalar(m, RY_INT32, (double)axis));
    ry_gb_attr_int(m, l, "axis", 0);
    return l;
}

ry_expr *ry_gb_iota(ry_module *m, ry_expr *x, int nd, int64_t axis) {
    int64_t others[RY_MAX_RANK];
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (i != axis) others[k++] = i;
    ry_expr *line = x;
    if (k) {
        line = ry_gb_op1(m, "sum", x);
        ry_gb_attr_ints(m, line, "axis", k, others);
    }
    ry_expr *iota = ry_gb_op1(m, "cumsum", ry_gb_op1(m, "ones_like", line));
    ry_gb_attr_int(m, iota, "axis", 0);
    ry_gb_attr_str(m, iota, "dtype", "int32");
    ry_gb_attr_bool(m, iota, "exclusive", true);
    return iota;
}

ry_expr *ry_gb_crop_like(ry_module *m, ry_expr *x, ry_expr *like, int nd, int64_t axis) {
    ry_expr *t = ry_gb_op2(m, "take", x, ry_gb_iota(m, like, nd, axis));
    ry_gb_attr_int(m, t, "axis", axis);
    ry_gb_attr_str(m, t, "mode", "fast");
    return t;
}

/* Global pools over H and W known at run time only (n = H W):
 *   avg: dx = broadcast_to_like(g, x) / n
 *   max: x as (N, C, n), a = argmax over n (the first maximum, as
 *        max_pool2d_grad's first tap), dx = where(iota(n) == a, g, 0) as x */
ry_expr *ry_gb_global_pool_grad(ry_module *m, ry_expr *x, ry_expr *g, bool max) {
    ry_dtype dt = ry_gb_dtype(x);
    if (!max) {
        ry_expr *n = ry_gb_op2(m, "multiply", ry_gb_length(m, x, 2, RY_INT64), ry_gb_length(m, x, 3, RY_INT64));
        ry_expr *nf = ry_gb_op1(m, "cast", n);
        ry_gb_attr_str(m, nf, "dtype", ry_dtype_name(dt));
        return ry_gb_op2(m, "divide", ry_gb_op2(m, "broadcast_to_like", g, x), nf);
    }
    const int64_t ncn[3] = {0, 0, -1};
    ry_expr *xf = ry_gb_op1(m, "reshape", x), *gf = ry_gb_op1(m, "reshape", g);
    ry_gb_attr_ints(m, xf, "newshape", 3, ncn);
    ry_gb_attr_ints(m, gf, "newshape", 3, ncn);
    ry_expr *a = ry_gb_op1(m, "argmax", xf);
    const int64_t last = 2;
    ry_gb_attr_ints(m, a, "axis", 1, &last);
    ry_gb_attr_bool(m, a, "keepdims", true);
    ry_expr *hit = ry_gb_op2(m, "equal", ry_gb_iota(m, xf, 3, 2), a);
    ry_expr *dxf = ry_gb_op3(m, "where", hit, gf, ry_gb_scalar(m, dt, 0));
    return ry_gb_op2(m, "reshape_like", dxf, x);
}

ry_status ry_gb_reshape_like(ry_grad_ctx *c, ry_expr *g, ry_expr *x, ry_expr **out) {
    const ry_type *t = ry_gb_type(x);
    int unknown = 0;
    bool empty = false; /* a 0 dim: a -1 beside it could not be inferred */
    for (int i = 0; t && t->kind == RY_TYPE_TENSOR && i < t->tensor.ndim; i++) {
        const ry_dim *d = &t->tensor.dims[i];
        unknown += d->kind != RY_DIM_CONST;
        empty |= d->kind == RY_DIM_CONST && d->value == 0;
    }
    if (unknown == 0 || (unknown == 1 && !empty)) return ry_gb_reshape_to(c, g, t, out);
    *out = ry_gb_op2(c->m, "reshape_like", g, x);
    return RY_OK;
}

/* scatter: g (P, N, Q) added into (P, V, Q) rows idx[n] along the middle
 * axis, as a product with a one-hot matrix (no scatter operator needed):
 *   H  = one_hot(idx, depth=V)                                 (N, V)
 *   G2 = g as (P, N, Q), transposed to (N, P, Q), as (N, P*Q)
 *   D2 = dense(H^T, G2^T)                     (V, N) x (P*Q, N) -> (V, P*Q)
 *   result = D2 as (V, P, Q), transposed to (P, V, Q)
 * An index outside [0, V) (one_hot gives a zero row) adds nothing. */
static ry_expr *reshaped(ry_module *m, ry_expr *x, int n, const int64_t *shape) {
    ry_expr *r = ry_gb_op1(m, "reshape", x);
    ry_gb_attr_ints(m, r, "newshape", n, shape);
    return r;
}

static ry_expr *transposed(ry_module *m, ry_expr *x, int n, const int64_t *axes) {
    ry_expr *t = ry_gb_op1(m, "transpose", x);
    ry_gb_attr_ints(m, t, "axes", n, axes);
    return t;
}

ry_expr *ry_gb_scatter(ry_module *m, ry_expr *g, ry_expr *idx, int64_t p, int64_t v, int64_t q,
                       ry_dtype dt) {
    const int64_t swap[3] = {1, 0, 2}, t2[2] = {1, 0};
    const int64_t pnq[3] = {p, -1, q}, npq[2] = {-1, p * q}, vpq[3] = {v, p, q};
    ry_expr *h = ry_gb_op3(m, "one_hot", idx, ry_gb_scalar(m, dt, 1), ry_gb_scalar(m, dt, 0));
    ry_gb_attr_int(m, h, "depth", v);
    ry_gb_attr_str(m, h, "dtype", ry_dtype_name(dt));
    ry_expr *g2 = reshaped(m, transposed(m, reshaped(m, g, 3, pnq), 3, swap), 2, npq);
    ry_expr *d2 = ry_gb_op2(m, "nn.dense", transposed(m, h, 2, t2), transposed(m, g2, 2, t2));
    return transposed(m, reshaped(m, d2, 3, vpq), 3, swap);
}

ry_expr *ry_gb_index_const(ry_module *m, int n, const int64_t *idx) {
    ry_tensor *t = ry_ir_tensor_new(RY_INT32, 1, (int64_t[]){n});
    for (int i = 0; i < n; i++)
        ((int32_t *)t->data)[i] = (int32_t)idx[i];
    ry_expr *e = ry_expr_const(m, t, RY_NO_SPAN);
    e->type = ry_type_tensor(m, RY_INT32, 1, (int64_t[]){n});
    return e;
}
