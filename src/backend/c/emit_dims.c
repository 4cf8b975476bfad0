/*
 * emit_dims.c: the result type of an operator call where some dims are
 * known only at run time (c->dyn: a tensor that came out of a recursion,
 * a match or a closure has its dims in C locals). The op's own type
 * relation runs on the arguments' dims with each such dim a symbol named
 * by its C expression, so the shape logic stays in one place; where the
 * relation can only say "?" (two different symbols met), the dim is named
 * here: a concatenation's axis is the sum of its fields', a reshape's -1
 * the count over the other dims, and a broadcast (numpy's rule, a
 * run-time 1 stretching) or an equality the relation would have checked
 * becomes a run-time check that fails the call with a located message.
 * Any other op's "?" is an export-time error, not a guess.
 */
#include <string.h>

#include "backend/c/emit.h"

/* The type the code knows v by: its dims as they are held. */
static ry_type *type_of(cemit *c, const cval *v) {
    if (v->boxed) return (ry_type *)v->type;
    if (!v->tuple) return ry_type_tensor_arena(c->a, v->dtype, v->ndim, v->dims);
    ry_type **f = RY_NEW_ARRAY(c->a, ry_type *, v->n + 1);
    for (int i = 0; i < v->n; i++) f[i] = type_of(c, v->fields[i]);
    return ry_type_tuple_arena(c->a, v->n, f);
}

/* The arguments' tensors, flattened depth-first (concatenate's fields). */
static int flat_tensors(const cval *v, const cval **out, int k, int cap) {
    if (v->boxed) return k;
    if (!v->tuple) {
        if (k < cap) out[k++] = v;
        return k;
    }
    for (int i = 0; i < v->n; i++) k = flat_tensors(v->fields[i], out, k, cap);
    return k;
}

static bool is_one(const ry_dim *d) { return d->kind == RY_DIM_CONST && d->value == 1; }

/* Whether op's kernel reads an operand's dim that is 1 at run time as a
 * broadcast: emit_fused.c's loop nest (elementwise operators, fused
 * programs, broadcast_to_like) with stride 0, batch_matmul's batch loop
 * at batch 0. */
static bool loops_broadcast(const ry_op *op) {
    return op->pattern <= RY_PAT_BROADCAST || strncmp(op->name, "fused.elemwise", 14) == 0 ||
           strcmp(op->name, "nn.batch_matmul") == 0;
}

/* Names result dim i (of rank n) that the relation left as "?" from the
 * argument dims aligned with it. A broadcast (bcast: a loops_broadcast
 * op) runs numpy's rule, constant 1s left out: a constant among them is
 * the dim, each other dim checked to be it or 1; else a local starts as
 * the first and takes each next one where it is 1, each next one checked
 * to be it or 1. An equality (a concatenation's other dims): the first
 * one, every other checked equal to it. A failed check fails the call:
 * RT_E_DIM, located. */
static ry_status name_any(cemit *c, const ry_expr *e, const cval **ts, int nt, int n, int i, bool bcast, ry_dim *out) {
    const ry_dim *ds[64];
    int nd = 0, cst = -1;
    for (int k = 0; k < nt; k++) {
        int j = i - (n - ts[k]->ndim);
        if (j < 0 || (bcast && is_one(&ts[k]->dims[j])) || ts[k]->dims[j].kind == RY_DIM_ANY) continue;
        const ry_dim *d = &ts[k]->dims[j];
        bool seen = false;
        for (int q = 0; q < nd && !seen; q++) seen = strcmp(ry_c_dim(c, ds[q]), ry_c_dim(c, d)) == 0;
        if (seen) continue;
        if (d->kind == RY_DIM_CONST && cst < 0) cst = nd;
        ds[nd++] = d;
    }
    if (nd == 0)
        return ry_c_fail(c, e->span, "%s: dimension %d of the result is known only at run time, and the export cannot name it",
                         ry_c_op(e)->name, i);
    const char *msg = ry_c_fmt(c, "%s: %s: the operands' dimensions differ at run time (dimension %d)", ry_c_where(c, e->span),
                               ry_c_op(e)->name, i);
    const char *fail = ry_c_fail_stmt(c, "RT_E_DIM", msg);
    if (bcast && cst < 0 && nd > 1) { /* only run time knows which is not 1 */
        const char *r = ry_c_tmp(c, "_d");
        ry_sb_printf(&c->body, "    int64_t %s = %s;\n", r, ry_c_dim(c, ds[0]));
        for (int q = 1; q < nd; q++) {
            const char *d = ry_c_dim(c, ds[q]);
            ry_sb_printf(&c->body, "    if (%s == 1) %s = %s;\n    else if (%s != 1 && %s != %s) %s\n", r, r, d, d, d, r, fail);
        }
        *out = (ry_dim){.kind = RY_DIM_SYM, .name = r};
        ry_ptrmap_put(c->a, &c->bcast_dims, r, 1);
        return RY_OK;
    }
    const ry_dim *pick = ds[cst >= 0 ? cst : 0];
    const char *p = ry_c_dim(c, pick);
    for (int q = 0; q < nd; q++) {
        if (ds[q] == pick) continue;
        const char *d = ry_c_dim(c, ds[q]);
        if (bcast) ry_sb_printf(&c->body, "    if (%s != 1 && %s != %s) %s\n", d, d, p, fail);
        else ry_sb_printf(&c->body, "    if (%s != %s) %s\n", d, p, fail);
    }
    *out = *pick;
    return RY_OK;
}

/* Whether op's result holds its first argument's elements in another
 * shape, so a dim the relation left "?" (reshape's -1 over run-time dims)
 * is the argument's count over the product of the result's other dims. */
static bool keeps_count(const ry_op *op) {
    return strcmp(op->name, "reshape") == 0 || strcmp(op->name, "nn.batch_flatten") == 0 ||
           strcmp(op->name, "reshape_like") == 0;
}

/* dims[i] of a keeps_count op's result (rank n) over argument x: the
 * quotient, checked to leave no remainder (RT_E_DIM, located). */
static ry_status name_quotient(cemit *c, const ry_expr *e, const cval *x, ry_dim *dims, int n, int i) {
    char rest[1024] = "(int64_t)1";
    size_t len = strlen(rest);
    for (int k = 0; k < n && len < sizeof rest; k++)
        if (k != i) len += (size_t)snprintf(rest + len, sizeof rest - len, " * %s", ry_c_dim(c, &dims[k]));
    if (len >= sizeof rest) return ry_c_fail(c, e->span, "%s: a result shape too long to name", ry_c_op(e)->name);
    const char *d = ry_c_tmp(c, "_d"), *r = ry_c_tmp(c, "_n"), *all = ry_c_count(c, x->ndim, x->dims);
    const char *msg = ry_c_fmt(c, "%s: %s: the input's elements do not fill the result's shape at run time", ry_c_where(c, e->span),
                               ry_c_op(e)->name);
    ry_sb_printf(&c->body, "    const int64_t %s = %s;\n    const int64_t %s = %s ? %s / %s : 0;\n", r, rest, d, r, all, r);
    ry_sb_printf(&c->body, "    if (%s ? %s %% %s != 0 : %s != 0) %s\n", r, all, r, all, ry_c_fail_stmt(c, "RT_E_DIM", msg));
    dims[i] = (ry_dim){.kind = RY_DIM_SYM, .name = d};
    return RY_OK;
}

static ry_status fill(cemit *c, const ry_expr *e, const cval **ts, int nt, ry_type *t) {
    if (!t) return RY_OK;
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (fill(c, e, ts, nt, t->tuple.fields[i])) return RY_ERR;
        return RY_OK;
    }
    if (t->kind != RY_TYPE_TENSOR) return RY_OK;
    const ry_op *op = ry_c_op(e);
    bool concat = strcmp(op->name, "concatenate") == 0;
    int n = t->tensor.ndim;
    int64_t axis = concat ? ry_attr_int(op, &e->call.attrs, "axis") : 0;
    if (axis < 0) axis += n;
    ry_dim *dims = RY_NEW_ARRAY(c->a, ry_dim, n + 1);
    memcpy(dims, t->tensor.dims, sizeof *dims * (size_t)n);
    int nany = 0;
    for (int i = 0; i < n; i++) nany += dims[i].kind == RY_DIM_ANY;
    for (int i = 0; i < n; i++) {
        if (dims[i].kind != RY_DIM_ANY) continue;
        if (keeps_count(op)) {
            if (nany > 1 || nt < 1)
                return ry_c_fail(c, e->span, "%s: %d dimensions of the result are known only at run time, and the export cannot name them",
                                 op->name, nany);
            if (name_quotient(c, e, ts[0], dims, n, i)) return RY_ERR;
            continue;
        }
        if (!concat && !loops_broadcast(op))
            return ry_c_fail(c, e->span, "%s: dimension %d of the result is known only at run time, and the export cannot name it",
                             op->name, i);
        if (concat && i == axis) { /* the sum of the fields' */
            char buf[1024] = "(int64_t)0";
            size_t len = strlen(buf);
            for (int k = 0; k < nt && len < sizeof buf; k++)
                len += (size_t)snprintf(buf + len, sizeof buf - len, " + %s", ry_c_dim(c, &ts[k]->dims[i]));
            const char *d = ry_c_tmp(c, "_d");
            ry_sb_printf(&c->body, "    const int64_t %s = %s;\n", d, buf);
            dims[i] = (ry_dim){.kind = RY_DIM_SYM, .name = d};
        } else if (name_any(c, e, ts, nt, n, i, !concat, &dims[i])) {
            return RY_ERR;
        }
    }
    t->tensor.dims = dims;
    return RY_OK;
}

ry_type *ry_c_call_type(cemit *c, const ry_expr *e, cval *const *args) {
    const ry_op *op = ry_c_op(e);
    int n = e->call.nargs;
    ry_type **at = RY_NEW_ARRAY(c->a, ry_type *, n + 1);
    const cval *ts[64];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        at[i] = type_of(c, args[i]);
        nt = flat_tensors(args[i], ts, nt, 64);
    }
    ry_rel_ctx rc = {.arena = c->a, .op = op, .attrs = &e->call.attrs, .span = e->span, .err = c->err};
    ry_type *out = NULL;
    ry_rel_status st = op->rel ? op->rel(&rc, n, at, &out) : RY_REL_FAIL;
    if (st != RY_REL_OK || !out) {
        if (!op->rel || st == RY_REL_DEFER) ry_c_fail(c, e->span, "%s: no type for its arguments' run-time dims", op->name);
        c->failed = true;
        return NULL;
    }
    /* a dtype the relation cannot tell from the dims alone stays the checker's */
    if (out->kind == RY_TYPE_TENSOR && e->type && e->type->kind == RY_TYPE_TENSOR) out->tensor.dtype = e->type->tensor.dtype;
    if (fill(c, e, ts, nt, out)) return NULL;
    return out;
}
