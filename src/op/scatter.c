/*
 * scatter.c: the n-d indexing operator family, TVM's scatter_nd and
 * gather_nd: name, attributes with TVM's C++ defaults, type relation (rule
 * above it) and gradient rule, side by side (the CPU's kernel:
 * src/backend/cpu/scatter.c). take's gradient is a scatter_nd into zeros (grad_transform.c);
 * the compiled engine may keep that result row-sparse (rows_ops.c). Legend:
 * indices (M, Y...) index the first M dims of data (after batch_dims B).
 */
#include <string.h>

#include "op/families.h"
#include "op/grad_rules.h"

static ry_rel_status fail(ry_rel_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ry_rel_status fail(ry_rel_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(c->err, c->span, fmt, ap);
    va_end(ap);
    return RY_REL_FAIL;
}

static bool is_index_dtype(ry_dtype d) {
    return ry_dtype_is_int(d);
}

/* Arguments must be tensors; DEFER while one is still unknown. */
static ry_rel_status tensors(ry_rel_ctx *c, int nargs, ry_type *const *args) {
    if (nargs != c->op->nargs)
        return fail(c, "%s takes %d arguments, not %d", c->op->name, c->op->nargs, nargs);
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != RY_TYPE_TENSOR) {
            char buf[128];
            return fail(c, "%s: argument %d must be a tensor, not %s", c->op->name, i + 1,
                        ry_type_str(args[i], buf, sizeof buf));
        }
    if (!is_index_dtype(args[1]->tensor.dtype))
        return fail(c, "%s: indices must be integers, not %s", c->op->name,
                    ry_dtype_name(args[1]->tensor.dtype));
    return RY_REL_OK;
}

/* Two dims that must agree: false only for two different constants (a
 * symbolic or Any dim is checked by the kernel at run time). */
static bool dims_agree(const ry_dim *a, const ry_dim *b) {
    return a->kind != RY_DIM_CONST || b->kind != RY_DIM_CONST || a->value == b->value;
}

/* M, indices' first dim, which must be a constant (it fixes ranks). */
static ry_rel_status index_depth(ry_rel_ctx *c, const ry_type *ind, int64_t *m) {
    if (ind->tensor.ndim < 1) return fail(c, "%s: indices must have rank >= 1 (M, ...)", c->op->name);
    const ry_dim *d = &ind->tensor.dims[0];
    if (d->kind != RY_DIM_CONST)
        return fail(c, "%s: the first dim of indices (M) must be a constant", c->op->name);
    *m = d->value;
    return RY_REL_OK;
}

/* scatter_nd: data (X0..Xn-1) x indices (M, Y...) x updates (Y..., XM..Xn-1)
 *   -> (X0..Xn-1); mode "update" writes, "add" accumulates */
static ry_rel_status rel_scatter_nd(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s = tensors(c, nargs, args);
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0], *ind = args[1], *up = args[2];
    const char *mode = ry_attr_str(c->op, c->attrs, "mode");
    if (strcmp(mode, "add") && strcmp(mode, "update"))
        return fail(c, "scatter_nd: mode must be \"add\" or \"update\", not \"%s\"", mode);
    int64_t m;
    if ((s = index_depth(c, ind, &m)) != RY_REL_OK) return s;
    int n = x->tensor.ndim, k = ind->tensor.ndim - 1;
    if (m < 1 || m > n)
        return fail(c, "scatter_nd: indices index %lld dims of data of rank %d", (long long)m, n);
    if (up->tensor.dtype != x->tensor.dtype)
        return fail(c, "scatter_nd: updates are %s, data %s", ry_dtype_name(up->tensor.dtype),
                    ry_dtype_name(x->tensor.dtype));
    if (up->tensor.ndim != k + n - (int)m)
        return fail(c, "scatter_nd: updates must have rank %d (indices' %d dims after M, data's %d "
                    "after the first %lld), not %d",
                    k + n - (int)m, k, n - (int)m, (long long)m, up->tensor.ndim);
    for (int i = 0; i < up->tensor.ndim; i++) {
        const ry_dim *want = i < k ? &ind->tensor.dims[1 + i] : &x->tensor.dims[m + i - k];
        if (!dims_agree(want, &up->tensor.dims[i]))
            return fail(c, "scatter_nd: updates dim %d is %lld, expected %lld", i,
                        (long long)up->tensor.dims[i].value, (long long)want->value);
    }
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, n, x->tensor.dims);
    return RY_REL_OK;
}

/* gather_nd: data (B..., X0..Xn-1) x indices (M, B..., Y...)
 *   -> (B..., Y..., XM..Xn-1); B = batch_dims leading dims shared */
static ry_rel_status rel_gather_nd(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s = tensors(c, nargs, args);
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0], *ind = args[1];
    int64_t m, b = ry_attr_int(c->op, c->attrs, "batch_dims");
    if ((s = index_depth(c, ind, &m)) != RY_REL_OK) return s;
    if (!ry_attr_is_none(c->op, c->attrs, "index_rank") &&
        ry_attr_int(c->op, c->attrs, "index_rank") != m)
        return fail(c, "gather_nd: index_rank=%lld but indices index %lld dims",
                    (long long)ry_attr_int(c->op, c->attrs, "index_rank"), (long long)m);
    int n = x->tensor.ndim, ni = ind->tensor.ndim;
    if (b < 0 || b > ni - 1 || b > n)
        return fail(c, "gather_nd: batch_dims=%lld is out of range", (long long)b);
    if (m < 1 || m + b > n)
        return fail(c, "gather_nd: indices index %lld dims after %lld batch dims of data of rank %d",
                    (long long)m, (long long)b, n);
    int rank = ni - 1 + n - (int)(m + b);
    if (rank > RY_MAX_RANK) return fail(c, "gather_nd: the result would have more than %d dims", RY_MAX_RANK);
    ry_dim dims[RY_MAX_RANK];
    int r = 0;
    for (int i = 1; i < ni; i++) {
        dims[r++] = ind->tensor.dims[i];
        if (i - 1 < b && !dims_agree(&ind->tensor.dims[i], &x->tensor.dims[i - 1]))
            return fail(c, "gather_nd: batch dim %d is %lld in data, %lld in indices", i - 1,
                        (long long)x->tensor.dims[i - 1].value, (long long)ind->tensor.dims[i].value);
    }
    for (int i = (int)(m + b); i < n; i++) dims[r++] = x->tensor.dims[i];
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, rank, dims);
    return RY_REL_OK;
}

/* ---- gradient rules ----
 * scatter_nd add:    d_data = g;  d_updates = gather_nd(g, indices)
 * scatter_nd update: d_data = g with the written slices zeroed
 *                    (scatter_nd(g, indices, zeros_like(updates), "update"));
 *                    d_updates = gather_nd(g, indices), exact when no index
 *                    repeats (a repeated one is overwritten by a later write)
 * gather_nd (B = 0): d_data = scatter_nd(zeros_like(data), indices, g, "add") */
static ry_status grad_scatter_nd(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                 ry_expr **grads) {
    const ry_op *op = c->call->call.callee->op.op;
    bool add = strcmp(ry_attr_str(op, &c->call->call.attrs, "mode"), "add") == 0;
    grads[1] = NULL;
    grads[2] = ry_gb_op2(c->m, "gather_nd", g, args[1]);
    if (add) {
        grads[0] = g;
    } else {
        ry_expr *z = ry_gb_op1(c->m, "zeros_like", args[2]);
        grads[0] = ry_gb_op3(c->m, "scatter_nd", g, args[1], z);
        ry_gb_attr_str(c->m, grads[0], "mode", "update");
    }
    return RY_OK;
}

static ry_status grad_gather_nd(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                ry_expr **grads) {
    const ry_op *op = c->call->call.callee->op.op;
    grads[1] = NULL;
    if (ry_attr_int(op, &c->call->call.attrs, "batch_dims") != 0)
        return ry_error_at(c->err, c->span, "gradient of gather_nd is written for batch_dims=0");
    ry_expr *z = ry_gb_op1(c->m, "zeros_like", args[0]);
    grads[0] = ry_gb_op3(c->m, "scatter_nd", z, args[1], g);
    ry_gb_attr_str(c->m, grads[0], "mode", "add");
    return RY_OK;
}

/* clang-format off */
const ry_op ry_ops_scatter[] = {
    {"scatter_nd", 3, RY_PAT_OPAQUE,
     1, {{"mode", RY_ASTR("update")}},
     rel_scatter_nd,
     "scatter_nd: (X) x (M, Y) x (Y, X[M:]) -> (X): out[idx[:, y]] (+)= updates[y]",
     grad_scatter_nd, false, false, false, false, "relay.attrs.ScatterNDAttrs", RY_BATCH_NO},
    {"gather_nd", 2, RY_PAT_INJECTIVE,
     2, {{"batch_dims", RY_AINT(0)}, {"index_rank", RY_ANONE}},
     rel_gather_nd,
     "gather_nd: (B, X) x (M, B, Y) -> (B, Y, X[M:]): out[b, y] = data[b, idx[:, b, y]]",
     grad_gather_nd, false, false, false, false, NULL, RY_BATCH_NO},
};
/* clang-format on */
const int ry_ops_scatter_count = (int)(sizeof ry_ops_scatter / sizeof ry_ops_scatter[0]);
