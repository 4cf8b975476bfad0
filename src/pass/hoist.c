/*
 * hoist.c: loop-invariant code motion out of recursion. A recursive global
 * that passes some parameters unchanged to every call of itself (an RNN's
 * weights, `@run(%i + 1, ..., %w_ih, ...)`) is a loop, and work that
 * depends only on those parameters is repeated at every step. This pass
 * computes it once, before the loop:
 *
 *   @g(%p...)   -> let %t = <invariant work on %p>; @g_loop(%p..., %t)
 *   @g_loop(%p..., %t) = g's body without that work, calling @g_loop
 *
 * and, first, turns a lookup feeding row-wise work on invariants into a
 * lookup of a table of it (take(A, idx) is rows of A):
 *
 *   nn.dense(take(A, idx, axis=0), W)   -> take(nn.dense(A, W), idx, axis=0)
 *   nn.bias_add(take(T, idx, axis=0), b) -> take(nn.bias_add(T, b, axis=1), idx, axis=0)
 *
 * (an embedding followed by an input projection becomes a lookup in a
 * symbols x gates table, computed once per loop; each row holds the same
 * dot products in the same order). Only for a table of at most TABLE_ROWS
 * rows: a table computed once pays off after rows / batch steps, and a
 * vocabulary of 18,281 words (the Tree-LSTM's) would not pay off.
 *
 * Runs on a type-checked module before differentiation (ry_trainer runs it
 * before ry_grad: the gradient of the hoisted work is then summed over the
 * steps once, through the new parameter's adjoint). Non-recursive globals
 * are inlined first (ry_inline) so the work inside a step's helpers is seen;
 * when nothing is hoisted the module is left as it was. Only operators
 * that are pure and cannot fail on type-correct arguments move, and only
 * when every argument's and the result's shape is static (the type checker
 * then proved the call valid; with `?` or symbolic dims it may fail at run
 * time): they may run when the loop's body would not have, and
 * speculation is then harmless. One difference remains: moved work is
 * differentiated with a zero adjoint where the loop never used it (the
 * table's gradient dTable W puts 0 x W in the rows the window never looked
 * up; a loop of no step still pushes zero through its invariant work),
 * NaN where the work's inputs hold an infinity or NaN (the unhoisted
 * gradient has 0 there); with finite values the two agree to rounding.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h" /* ry_expr_child */
#include "relayc/pass.h"
#include "pass/pass_impl.h"

#define TABLE_ROWS 1024

typedef struct hoist {
    ry_module *m;
    ry_arena *a;
    ry_global *g;        /* the recursive global */
    const char *loop;    /* the name of its loop twin */
    bool *inv;           /* var id -> invariant */
    const ry_expr **def; /* var id -> its let value, as rewritten */
    int *uses;           /* var id -> uses in the rewritten body */
    int nids;            /* the arrays' length: ids of the vars this pass makes too */
    ry_lets moved;       /* invariant bindings, in evaluation order */
    ry_expr **calls;     /* the rewritten recursive calls, patched at the end */
    int ncalls, capcalls;
} hoist;

static bool is_op(const ry_expr *e, const char *name) {
    return e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_OP &&
           strcmp(e->call.callee->op.op->name, name) == 0;
}

static bool is_self(const hoist *h, const ry_expr *e) {
    return e->kind == RY_EXPR_GLOBAL && strcmp(e->global.name, h->g->name) == 0;
}

static bool inv_var(const hoist *h, const ry_expr *e) {
    return e->kind == RY_EXPR_VAR && e->var.var->id < h->nids && h->inv[e->var.var->id];
}

static const ry_expr *def_of(const hoist *h, const ry_expr *e) {
    return e->kind == RY_EXPR_VAR && e->var.var->id < h->nids ? h->def[e->var.var->id] : NULL;
}

/* Operators that may run once before the loop instead of at each step
 * (the registry's ry_op.movable). */
static bool movable_op(const ry_expr *e) {
    return e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_OP &&
           e->call.callee->op.op->movable;
}

/* A tensor type whose every dimension is a constant. */
static bool static_tensor(const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    for (int d = 0; d < t->tensor.ndim; d++)
        if (t->tensor.dims[d].kind != RY_DIM_CONST) return false;
    return true;
}

/* e = op(args) with every argument an invariant var or a constant, one a
 * var, all of static shape (so is the result). */
static bool invariant_call(const hoist *h, const ry_expr *e) {
    if (!movable_op(e) || !static_tensor(e->type)) return false;
    bool any = false;
    for (int i = 0; i < e->call.nargs; i++) {
        const ry_expr *x = e->call.args[i];
        if (!static_tensor(x->type)) return false;
        if (inv_var(h, x)) any = true;
        else if (x->kind != RY_EXPR_CONST) return false;
    }
    return any;
}

/* ---- lookups of tables ---- */

/* If e is a var bound to take(T, idx, axis=0) of a small invariant rank-2
 * table T, that take; else NULL. */
static const ry_expr *table_take(const hoist *h, const ry_expr *e) {
    const ry_expr *t = def_of(h, e);
    if (!t || !is_op(t, "take") || !inv_var(h, t->call.args[0])) return NULL;
    const ry_op *op = t->call.callee->op.op;
    if (ry_attr_is_none(op, &t->call.attrs, "axis") || ry_attr_int(op, &t->call.attrs, "axis") != 0 ||
        ry_attr_int(op, &t->call.attrs, "batch_dims") != 0)
        return NULL;
    const ry_type *ty = t->call.args[0]->type;
    if (!ty || ty->kind != RY_TYPE_TENSOR || ty->tensor.ndim != 2) return NULL;
    const ry_dim *rows = &ty->tensor.dims[0], *cols = &ty->tensor.dims[1];
    if (rows->kind != RY_DIM_CONST || rows->value > TABLE_ROWS || cols->kind != RY_DIM_CONST)
        return NULL;
    return t;
}

/* An earlier moved binding of the same operator on the same vars (a step
 * inlined into both branches of an `if` looks the table up twice). */
static ry_var *moved_already(const hoist *h, const ry_expr *like, int nargs, ry_expr **args,
                             const ry_attrs *attrs) {
    for (int i = 0; i < h->moved.n; i++) {
        const ry_expr *c = h->moved.vals[i];
        bool same = c->call.callee->op.op == like->call.callee->op.op && c->call.nargs == nargs &&
                    pass_same_attrs(&c->call.attrs, attrs);
        for (int k = 0; same && k < nargs; k++)
            same = args[k]->kind == RY_EXPR_VAR && c->call.args[k]->kind == RY_EXPR_VAR &&
                   args[k]->var.var == c->call.args[k]->var.var;
        if (same) return h->moved.vars[i];
    }
    return NULL;
}

/* A binding moved before the loop: var named name, typed t, bound to
 * op(args) with attrs. */
static ry_var *move(hoist *h, const char *name, ry_type *t, const ry_expr *like, int nargs,
                    ry_expr **args, ry_attrs attrs) {
    ry_var *old = moved_already(h, like, nargs, args, &attrs);
    if (old) return old;
    ry_expr *c = ry_expr_call(h->m, like->call.callee, nargs, args, like->span);
    c->call.attrs = attrs;
    c->type = t;
    ry_var *v = pass_fresh_var(h->m, name, t);
    v->annot = t;
    ry_lets_push(h->a, &h->moved, v, c);
    return v;
}

/* take(table, idx) with the take's attributes, typed like e. */
static ry_expr *lookup(hoist *h, ry_var *table, const ry_expr *take, const ry_expr *e) {
    ry_expr *args[2] = {pass_use(h->m, table), take->call.args[1]};
    ry_expr *c = ry_expr_call(h->m, take->call.callee, 2, args, e->span);
    c->call.attrs = take->call.attrs;
    c->type = e->type;
    return c;
}

/* (rows of the table, columns of e's result): the table's type. */
static ry_type *table_type(hoist *h, const ry_expr *take, const ry_expr *e) {
    const ry_type *rt = e->type;
    if (!rt || rt->kind != RY_TYPE_TENSOR || rt->tensor.ndim < 1) return NULL;
    const ry_dim *last = &rt->tensor.dims[rt->tensor.ndim - 1];
    if (last->kind != RY_DIM_CONST) return NULL;
    ry_dim d[2] = {take->call.args[0]->type->tensor.dims[0], *last};
    return ry_type_tensor_arena(h->m->arena, rt->tensor.dtype, 2, d);
}

/*   nn.dense(take(A, idx), W)    -> take(nn.dense(A, W), idx)
 *   nn.bias_add(take(T, idx), b) -> take(nn.bias_add(T, b, axis=1), idx)
 * (bias_add along the last axis only); e unchanged otherwise. */
static ry_expr *commute(hoist *h, ry_expr *e) {
    bool dense = is_op(e, "nn.dense"), bias = is_op(e, "nn.bias_add");
    if (!dense && !bias) return e;
    const ry_expr *take = table_take(h, e->call.args[0]);
    if (!take || !inv_var(h, e->call.args[1]) || !static_tensor(e->call.args[1]->type)) return e;
    ry_type *tt = table_type(h, take, e);
    if (!tt) return e;
    ry_attrs attrs = e->call.attrs;
    if (bias) {
        const ry_op *op = e->call.callee->op.op;
        int64_t axis = ry_attr_int(op, &attrs, "axis"), nd = e->type->tensor.ndim;
        if (axis != -1 && axis != nd - 1) return e;
        ry_attr *a1 = RY_NEW(h->m->arena, ry_attr);
        *a1 = (ry_attr){.name = "axis", .span = RY_NO_SPAN};
        a1->value.kind = RY_AV_INT;
        a1->value.i = 1;
        attrs = (ry_attrs){1, a1};
    }
    ry_expr *args[2] = {take->call.args[0], e->call.args[1]};
    ry_var *table = move(h, dense ? "table" : "table_bias", tt, e, 2, args, attrs);
    if (table->id >= h->nids) return e; /* cannot happen: see hoist_global */
    h->inv[table->id] = true;
    return lookup(h, table, take, e);
}

/* ---- the walk over the body ---- */

static ry_expr *walk(hoist *h, ry_expr *e);
static ry_expr *walk_scope(void *h, ry_expr *e) { return walk(h, e); }

/* A call of @g: to @g_loop, its extra arguments added at the end
 * (patch_calls, once they are known). */
static ry_expr *redirect(hoist *h, ry_expr *e) {
    ry_expr *c = ry_expr_new(h->m, RY_EXPR_CALL, e->span);
    *c = *e;
    if (h->ncalls == h->capcalls) {
        int cap = h->capcalls ? 2 * h->capcalls : 8;
        ry_expr **nc = RY_NEW_ARRAY(h->a, ry_expr *, cap);
        if (h->ncalls) memcpy(nc, h->calls, sizeof *nc * (size_t)h->ncalls);
        h->calls = nc;
        h->capcalls = cap;
    }
    h->calls[h->ncalls++] = c;
    return c;
}

static ry_expr *walk_node(hoist *h, ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_CALL:
        if (is_self(h, e->call.callee)) {
            for (int i = 0; i < e->call.nargs; i++) walk_node(h, e->call.args[i]);
            return redirect(h, e);
        }
        walk_node(h, e->call.callee);
        for (int i = 0; i < e->call.nargs; i++) walk_node(h, e->call.args[i]);
        return commute(h, e);
    case RY_EXPR_LET: return walk(h, e);
    case RY_EXPR_IF: case RY_EXPR_MATCH: case RY_EXPR_FUNC:
        return pass_map_scopes(h->m, e, walk_scope, h);
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) walk_node(h, e->tuple.fields[i]);
        return e;
    case RY_EXPR_PROJ: walk_node(h, e->proj.tuple); return e;
    case RY_EXPR_REF: walk_node(h, e->ref.value); return e;
    case RY_EXPR_REF_READ: walk_node(h, e->ref_read.ref); return e;
    case RY_EXPR_REF_WRITE:
        walk_node(h, e->ref_write.ref);
        walk_node(h, e->ref_write.value);
        return e;
    default: return e;
    }
}

/* A let chain (A-normal form: operands are atoms, so only let values and
 * the tail hold calls). Invariant bindings leave the chain for h->moved. */
static ry_expr *walk(hoist *h, ry_expr *e) {
    lets out = {0};
    for (; e->kind == RY_EXPR_LET; e = e->let.body) {
        ry_var *v = e->let.var;
        ry_expr *val = walk_node(h, e->let.value);
        if (v->id < h->nids && invariant_call(h, val)) {
            h->inv[v->id] = true;
            ry_lets_push(h->a, &h->moved, v, val);
            continue;
        }
        if (v->id < h->nids) h->def[v->id] = val;
        ry_lets_push(h->a, &out, v, val);
    }
    return lets_close(h->m, &out, walk_node(h, e));
}

/* ---- building the loop and its entry ---- */

static void count_uses(hoist *h, const ry_expr *e, int delta) {
    if (e->kind == RY_EXPR_VAR) {
        if (e->var.var->id < h->nids) h->uses[e->var.var->id] += delta;
        return;
    }
    int slot;
    const ry_expr *c;
    for (int i = 0; (c = ry_expr_child(e, i, &slot)); i++) count_uses(h, c, delta);
}

static ry_expr *sweep(hoist *h, ry_expr *e);

static ry_expr *sweep_node(hoist *h, ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_LET: return sweep(h, e);
    case RY_EXPR_IF:
        e->if_.else_ = sweep(h, e->if_.else_);
        e->if_.then_ = sweep(h, e->if_.then_);
        return e;
    case RY_EXPR_MATCH:
        for (int i = e->match.nclauses - 1; i >= 0; i--)
            e->match.clauses[i].body = sweep(h, e->match.clauses[i].body);
        return e;
    case RY_EXPR_FUNC: e->func.body = sweep(h, e->func.body); return e;
    default: return e;
    }
}

/* Drops the pure bindings no one uses any more (the lookups the tables
 * replaced), last first, so what only they used goes too; h->uses holds
 * the body's counts. The nodes are this pass's own copies (walk). */
static ry_expr *sweep(hoist *h, ry_expr *e) {
    lets all = {0};
    for (; e->kind == RY_EXPR_LET; e = e->let.body) ry_lets_push(h->a, &all, e->let.var, e->let.value);
    ry_expr *tail = sweep_node(h, e);
    bool *keep = RY_NEW_ARRAY(h->a, bool, all.n + 1);
    for (int i = all.n - 1; i >= 0; i--) {
        int id = all.vars[i]->id;
        keep[i] = id >= h->nids || h->uses[id] > 0 || !pass_is_pure(all.vals[i]);
        if (keep[i]) all.vals[i] = sweep_node(h, all.vals[i]);
        else count_uses(h, all.vals[i], -1);
    }
    lets out = {0};
    for (int i = 0; i < all.n; i++)
        if (keep[i]) ry_lets_push(h->a, &out, all.vars[i], all.vals[i]);
    return lets_close(h->m, &out, tail);
}

/* The moved vars the loop's body still uses (after the sweep): the loop's
 * extra parameters. */
static int passed(hoist *h, ry_expr **body, ry_var ***out) {
    count_uses(h, *body, 1);
    *body = sweep(h, *body);
    ry_var **p = RY_NEW_ARRAY(h->a, ry_var *, h->moved.n + 1);
    int n = 0;
    for (int i = 0; i < h->moved.n; i++) {
        ry_var *v = h->moved.vars[i];
        if (h->uses[v->id] > 0) {
            if (!v->annot) v->annot = v->type;
            p[n++] = v;
        }
    }
    *out = p;
    return n;
}

static ry_expr *global_use(hoist *h, const char *name, ry_span span) {
    ry_expr *g = ry_expr_new(h->m, RY_EXPR_GLOBAL, span);
    g->global.name = name;
    return g;
}

/* Every recursive call now calls the loop and passes the tables on. */
static void patch_calls(hoist *h, int np, ry_var **p) {
    for (int i = 0; i < h->ncalls; i++) {
        ry_expr *c = h->calls[i];
        int n = c->call.nargs;
        ry_expr **args = RY_NEW_ARRAY(h->m->arena, ry_expr *, n + np);
        memcpy(args, c->call.args, sizeof *args * (size_t)n);
        for (int j = 0; j < np; j++) args[n + j] = pass_use(h->m, p[j]);
        c->call.args = args;
        c->call.nargs = n + np;
        c->call.callee = global_use(h, h->loop, c->call.callee->span);
    }
}

static ry_expr *mapped(ry_var **map, const ry_expr *x, ry_module *m) {
    if (x->kind != RY_EXPR_VAR || !map[x->var.var->id]) return (ry_expr *)x;
    return pass_use(m, map[x->var.var->id]);
}

/* @g's new body: fn(%q...) { the moved bindings on %q; @g_loop(%q..., tables) }. */
static ry_expr *entry(hoist *h, const ry_expr *f, int np, ry_var **p) {
    ry_var **map = RY_NEW_ARRAY(h->a, ry_var *, h->m->next_id + 1);
    int n = f->func.nparams;
    ry_expr *w = ry_expr_new(h->m, RY_EXPR_FUNC, f->span);
    *w = *f;
    w->type = NULL;
    w->func.params = RY_NEW_ARRAY(h->m->arena, ry_var *, n ? n : 1);
    for (int i = 0; i < n; i++) {
        ry_var *old = f->func.params[i];
        ry_var *q = ry_var_new(h->m, old->name, old->annot ? old->annot : old->type, old->span);
        q->type = old->type;
        w->func.params[i] = map[old->id] = q;
    }
    lets body = {0};
    for (int i = 0; i < h->moved.n; i++) {
        ry_var *v = h->moved.vars[i];
        const ry_expr *c = h->moved.vals[i];
        ry_expr **args = RY_NEW_ARRAY(h->a, ry_expr *, c->call.nargs + 1);
        for (int k = 0; k < c->call.nargs; k++) args[k] = mapped(map, c->call.args[k], h->m);
        ry_expr *nc = ry_expr_call(h->m, c->call.callee, c->call.nargs, args, c->span);
        nc->call.attrs = c->call.attrs;
        nc->type = c->type;
        ry_var *nv = pass_fresh_var(h->m, v->name, v->type);
        map[v->id] = nv;
        ry_lets_push(h->a, &body, nv, nc);
    }
    ry_expr **args = RY_NEW_ARRAY(h->a, ry_expr *, n + np + 1);
    for (int i = 0; i < n; i++) args[i] = pass_use(h->m, w->func.params[i]);
    for (int j = 0; j < np; j++) args[n + j] = pass_use(h->m, map[p[j]->id]);
    ry_expr *call = ry_expr_call(h->m, global_use(h, h->loop, f->span), n + np, args, f->span);
    w->func.body = lets_close(h->m, &body, call);
    return w;
}

/* The loop twin: g's parameters, then the tables; g's rewritten body. */
static ry_expr *loop_func(hoist *h, const ry_expr *f, ry_expr *body, int np, ry_var **p) {
    int n = f->func.nparams;
    ry_expr *l = ry_expr_new(h->m, RY_EXPR_FUNC, f->span);
    *l = *f;
    l->type = NULL;
    l->func.params = RY_NEW_ARRAY(h->m->arena, ry_var *, n + np);
    memcpy(l->func.params, f->func.params, sizeof *p * (size_t)n);
    memcpy(l->func.params + n, p, sizeof *p * (size_t)np);
    l->func.nparams = n + np;
    l->func.body = body;
    return l;
}

static const char *loop_name(ry_module *m, const char *base) {
    char buf[300];
    snprintf(buf, sizeof buf, "%s_loop", base);
    for (int k = 2; ry_module_find_global(m, buf); k++)
        snprintf(buf, sizeof buf, "%s_loop%d", base, k);
    return ry_arena_strdup(m->arena, buf);
}

/* Whether any global body mentions, other than g, reaches g: then g's calls
 * come from there too, with arguments this pass does not see. */
static bool called_back(const ry_module *m, const ry_expr *e, int gi) {
    if (e->kind == RY_EXPR_GLOBAL)
        return strcmp(e->global.name, m->globals[gi]->name) != 0 &&
               pass_global_reaches(m, e->global.name, gi);
    int slot;
    const ry_expr *c;
    for (int i = 0; (c = ry_expr_child(e, i, &slot)); i++)
        if (called_back(m, c, gi)) return true;
    return false;
}

/* Every use of @g in e: a call with all its arguments clears the
 * invariance of the parameters it does not pass on as they are; any
 * other use (a value, a wrong count) makes the loop unknown: false. */
static bool scan_calls(hoist *h, const ry_expr *e, int *ncalls) {
    const ry_expr *f = h->g->func;
    if (e->kind == RY_EXPR_GLOBAL) return !is_self(h, e);
    if (e->kind == RY_EXPR_CALL && is_self(h, e->call.callee)) {
        if (e->call.nargs != f->func.nparams) return false;
        for (int i = 0; i < e->call.nargs; i++) {
            const ry_expr *x = e->call.args[i];
            ry_var *p = f->func.params[i];
            if (x->kind != RY_EXPR_VAR || x->var.var != p) h->inv[p->id] = false;
            if (!scan_calls(h, x, ncalls)) return false;
        }
        (*ncalls)++;
        return true;
    }
    int slot;
    const ry_expr *c;
    for (int i = 0; (c = ry_expr_child(e, i, &slot)); i++)
        if (!scan_calls(h, c, ncalls)) return false;
    return true;
}

/* Hoists out of global gi; true when it changed the module. */
static bool hoist_global(ry_module *m, int gi) {
    ry_global *g = m->globals[gi];
    const ry_expr *f = g->func;
    if (f->kind != RY_EXPR_FUNC || f->func.ntparams || called_back(m, f->func.body, gi))
        return false;
    /* each let of the body makes at most one var (a table) */
    hoist h = {.m = m, .g = g, .nids = 2 * m->next_id + 16};
    h.a = ry_arena_new();
    h.inv = RY_NEW_ARRAY(h.a, bool, h.nids + 1);
    h.def = RY_NEW_ARRAY(h.a, const ry_expr *, h.nids + 1);
    h.uses = RY_NEW_ARRAY(h.a, int, h.nids + 1);
    for (int i = 0; i < f->func.nparams; i++) h.inv[f->func.params[i]->id] = true;
    ry_expr *anf = ry_anf(m, f);
    int ncalls = 0;
    bool changed = false;
    if (scan_calls(&h, anf->func.body, &ncalls) && ncalls > 0) {
        h.loop = loop_name(m, g->name);
        ry_expr *body = walk(&h, anf->func.body);
        ry_var **p;
        int np = passed(&h, &body, &p);
        if (h.moved.n && np) {
            patch_calls(&h, np, p);
            ry_expr *l = loop_func(&h, anf, body, np, p);
            g->func = entry(&h, anf, np, p);
            ry_module_add_global(m, h.loop, l);
            changed = true;
        }
    }
    ry_arena_free(h.a);
    return changed;
}

static ry_status hoist_module(ry_module *m, ry_error *err) {
    int n = m->nglobals;
    bool loops = false;
    for (int i = 0; i < n && !loops; i++) loops = ry_global_recursive(m, i);
    if (!loops) return RY_OK;
    ry_arena *a = ry_arena_new();
    ry_expr **saved = RY_NEW_ARRAY(a, ry_expr *, n);
    for (int i = 0; i < n; i++) saved[i] = m->globals[i]->func;
    ry_status st = ry_inline(m, err);
    bool changed = false;
    for (int i = 0; i < n && !st; i++)
        if (ry_global_recursive(m, i) && hoist_global(m, i)) changed = true;
    if (!st && !changed)
        for (int i = 0; i < n; i++) m->globals[i]->func = saved[i];
    ry_arena_free(a);
    if (st || !changed) return st;
    if (ry_dce(m, err) || ry_module_typecheck(m, err)) {
        ry_error_prefix(err, "after hoisting invariant work out of recursion (a bug in ry_hoist)");
        return RY_ERR;
    }
    return RY_OK;
}

ry_status ry_hoist(ry_module *m, ry_error *err) { return pass_guarded("hoisting", hoist_module, m, err); }
