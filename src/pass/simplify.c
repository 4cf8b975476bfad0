/*
 * simplify.c: algebraic simplification over A-normal form. Gradient rules
 * are written for clarity (the adjoint of dense(x, w) is written with
 * explicit transposes); this pass folds transposes of matrices into the
 * GEMM's transpose flags, so the kernel reads operands in place instead of
 * copying them:
 *   dense(a, transpose(b))             -> matmul(a, b)
 *   dense(transpose(a), w)             -> matmul(a, w, transpose_a, transpose_b)
 *   dense(transpose(a), transpose(b))  -> matmul(a, b, transpose_a)
 * (dense(a, w) is a * w^T; transpose here means a rank-2 transpose, axes
 * [1, 0] or None). The transposes then die in ry_dce.
 */
#include <string.h>

#include "relayc/pass.h"
#include "pass/pass_impl.h"

typedef struct simp {
    ry_module *m;
    ry_arena *a;
    const ry_expr **defs; /* var id -> its let value, in scope */
    int nids;
    const ry_op *dense, *matmul, *transpose;
} simp;

static int rank(const ry_expr *e) {
    return e->type && e->type->kind == RY_TYPE_TENSOR ? e->type->tensor.ndim : -1;
}

/* If e is a var bound to a rank-2 transpose, returns its operand. */
static ry_expr *transposed(const simp *s, const ry_expr *e) {
    if (e->kind != RY_EXPR_VAR || e->var.var->id >= s->nids) return NULL;
    const ry_expr *d = s->defs[e->var.var->id];
    if (!d || d->kind != RY_EXPR_CALL || d->call.callee->kind != RY_EXPR_OP ||
        d->call.callee->op.op != s->transpose || rank(d->call.args[0]) != 2)
        return NULL;
    int64_t axes[2];
    int n = ry_attr_ints(s->transpose, &d->call.attrs, "axes", axes, 2);
    if (n == 2 && !(axes[0] == 1 && axes[1] == 0)) return NULL;
    if (n != 2 && n != -1) return NULL;
    return d->call.args[0];
}

static ry_attr bool_attr(const char *name, bool v) {
    ry_attr a = {.name = name, .span = RY_NO_SPAN};
    a.value.kind = RY_AV_BOOL;
    a.value.b = v;
    return a;
}

static ry_expr *rewrite_dense(simp *s, ry_expr *e) {
    if (e->kind != RY_EXPR_CALL || e->call.callee->kind != RY_EXPR_OP ||
        e->call.callee->op.op != s->dense || !s->matmul)
        return e;
    ry_expr *a = e->call.args[0], *b = e->call.args[1];
    ry_expr *ta = rank(a) == 2 ? transposed(s, a) : NULL, *tb = transposed(s, b);
    if (!ta && !tb) return e;
    bool fa = ta != NULL, fb = !tb; /* matmul's flags */
    ry_expr *c = ry_expr_new(s->m, RY_EXPR_CALL, e->span);
    *c = *e;
    c->call.callee = ry_expr_new(s->m, RY_EXPR_OP, e->call.callee->span);
    c->call.callee->op.op = s->matmul;
    c->call.args = RY_NEW_ARRAY(s->m->arena, ry_expr *, 2);
    c->call.args[0] = ta ? ta : a;
    c->call.args[1] = tb ? tb : b;
    /* dense's attributes (units, out_dtype) are matmul's too */
    int n = e->call.attrs.n;
    ry_attr *items = RY_NEW_ARRAY(s->m->arena, ry_attr, n + 2);
    if (n) memcpy(items, e->call.attrs.items, sizeof *items * (size_t)n);
    if (fa) items[n++] = bool_attr("transpose_a", true);
    if (fb) items[n++] = bool_attr("transpose_b", true);
    c->call.attrs.n = n;
    c->call.attrs.items = items;
    return c;
}

static ry_expr *walk(simp *s, ry_expr *e);
static ry_expr *walk_scope(void *s, ry_expr *e) { return walk(s, e); }

static ry_expr *walk_scopes(simp *s, ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_IF: case RY_EXPR_MATCH: case RY_EXPR_FUNC:
        return pass_map_scopes(s->m, e, walk_scope, s);
    default: return rewrite_dense(s, e);
    }
}

static ry_expr *walk(simp *s, ry_expr *e) {
    lets out = {0};
    ry_expr *x = e;
    for (; x->kind == RY_EXPR_LET; x = x->let.body) {
        ry_expr *val = walk_scopes(s, x->let.value);
        if (x->let.var->id < s->nids) s->defs[x->let.var->id] = val;
        ry_lets_push(s->a, &out, x->let.var, val);
    }
    return lets_close(s->m, &out, walk_scopes(s, x));
}

static ry_status simplify_module(ry_module *m, ry_error *err) {
    for (int i = 0; i < m->nglobals; i++) {
        ry_expr *old = m->globals[i]->func;
        ry_expr *fn = ry_anf(m, old);
        fn->type = old->type;
        simp s = {.m = m};
        s.a = ry_arena_new();
        s.nids = m->next_id;
        s.defs = RY_NEW_ARRAY(s.a, const ry_expr *, s.nids + 1);
        s.dense = ry_op_find("nn.dense");
        s.matmul = ry_op_find("nn.matmul");
        s.transpose = ry_op_find("transpose");
        m->globals[i]->func = walk_scopes(&s, fn);
        ry_arena_free(s.a);
    }
    return RY_OK;
}

ry_status ry_simplify(ry_module *m, ry_error *err) {
    return pass_guarded("simplification", simplify_module, m, err);
}
