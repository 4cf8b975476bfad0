/*
 * emit_dims.c: the result type of an operator call where some dims are
 * known only at run time (c->dyn: a tensor that came out of a recursion,
 * a match or a closure has its dims in C locals). The op's own type
 * relation runs on the arguments' dims with each such dim a symbol named
 * by its C expression, so the shape logic stays in one place; where the
 * relation can only say "?" (two different symbols met), the dim is named
 * here: a concatenation's axis is the sum of its fields', and a broadcast
 * or an equality the relation would have checked becomes a run-time check
 * that fails the call with a located message.
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

/* Names result dim i (of rank n) that the relation left as "?": the first
 * argument dim aligned with it that is not a broadcast 1 (any dim for an
 * equality), every other such dim checked equal to it at run time. */
static ry_status name_any(cemit *c, const ry_expr *e, const cval **ts, int nt, int n, int i, bool bcast, ry_dim *out) {
    const ry_dim *pick = NULL;
    for (int k = 0; k < nt; k++) {
        int j = i - (n - ts[k]->ndim);
        if (j < 0 || (bcast && is_one(&ts[k]->dims[j]))) continue;
        const ry_dim *d = &ts[k]->dims[j];
        if (d->kind == RY_DIM_ANY) continue;
        if (!pick) {
            pick = d;
            continue;
        }
        const char *a = ry_c_dim(c, pick), *b = ry_c_dim(c, d);
        if (strcmp(a, b) == 0) continue;
        const char *msg = ry_c_fmt(c, "%s: %s: the operands' dimensions differ at run time (dimension %d)",
                                   ry_c_where(c, e->span), ry_c_op(e)->name, i);
        ry_sb_printf(&c->body, "    if (%s != %s) %s\n", a, b, ry_c_fail_stmt(c, "RT_E_DIM", msg));
    }
    if (!pick)
        return ry_c_fail(c, e->span, "%s: dimension %d of the result is known only at run time, and the export cannot name it",
                         ry_c_op(e)->name, i);
    *out = *pick;
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
    for (int i = 0; i < n; i++) {
        if (dims[i].kind != RY_DIM_ANY) continue;
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
