/*
 * grad.c: the higher-order reverse-mode gradient transform (Relay's, after
 * Wang et al.; see AD.md). Over A-normal form (calls of non-recursive
 * globals inlined: grad_inline.c), each float tensor is paired with a ref
 * holding its adjoint and every function takes `bp : ref(fn () -> ())`, the
 * backpropagator so far; the backward bodies of a run of operators become
 * one closure pushed onto bp (grad_run.c). The rest is rebuilt structurally.
 */
#include <stdlib.h>
#include <string.h>

#include "grad_impl.h"
#include "tensor/oom.h"

static ry_expr *xval(gx *s, gx_block *b, const ry_expr *e, ry_var *bp);

/* ---- small IR helpers ---- */

ry_expr *gx_ref_new(gx *s, ry_expr *v) {
    ry_expr *r = ry_expr_new(s->m, RY_EXPR_REF, RY_NO_SPAN);
    r->ref.value = v;
    return r;
}

ry_expr *gx_ref_read(gx *s, ry_expr *ref) {
    ry_expr *r = ry_expr_new(s->m, RY_EXPR_REF_READ, RY_NO_SPAN);
    r->ref_read.ref = ref;
    return r;
}

ry_expr *gx_ref_write(gx *s, ry_expr *ref, ry_expr *v) {
    ry_expr *r = ry_expr_new(s->m, RY_EXPR_REF_WRITE, RY_NO_SPAN);
    r->ref_write.ref = ref;
    r->ref_write.value = v;
    return r;
}

ry_expr *gx_proj(gx *s, ry_expr *t, int i) { return ry_expr_proj(s->m, t, i, RY_NO_SPAN); }

ry_expr *gx_unit(gx *s) { return ry_expr_tuple(s->m, 0, NULL, RY_NO_SPAN); }

static ry_expr *copy_node(gx *s, const ry_expr *e) {
    ry_expr *c = ry_expr_new(s->m, e->kind, e->span);
    *c = *e;
    return c;
}

static bool is_atom(const ry_expr *e) {
    return e->kind == RY_EXPR_VAR || e->kind == RY_EXPR_GLOBAL || e->kind == RY_EXPR_CONST;
}

/* e as an atom: bound to a fresh var unless it is one already. */
ry_expr *gx_atomize(gx *s, gx_block *b, ry_expr *e, ry_type *t) {
    return is_atom(e) ? e : gx_bind(s, b, "v", e, t);
}

static void fail(gx *s, ry_span span, const char *msg, const char *what) {
    if (!s->failed) ry_error_at(s->err, span, "gradient: %s%s", msg, what ? what : "");
    s->failed = true;
}

/* ---- values and their adjoints ----
 * primal(v', T):   float tensor -> v'.0; tuple -> fieldwise; else v'
 * fresh(y, T):     float tensor -> (y, ref(zeros_like(y))); tuple fieldwise
 * adjoint(v', T):  float tensor -> ref_read(v'.1); tuple fieldwise
 * accumulate(v', T, d): v'.1 := v'.1 + d for each float tensor field */
ry_expr *gx_primal(gx *s, ry_expr *v, const ry_type *t) {
    if (gx_is_float(t)) return gx_proj(s, v, 0);
    if (t->kind != RY_TYPE_TUPLE || !gx_changes(s, t)) return v;
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n);
    for (int i = 0; i < t->tuple.n; i++)
        f[i] = gx_primal(s, gx_proj(s, v, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

static ry_expr *fresh(gx *s, ry_expr *y, const ry_type *t) {
    if (gx_is_float(t)) {
        ry_expr *pair[2] = {y, gx_ref_new(s, ry_gb_op1(s->m, "zeros_like", y))};
        return ry_expr_tuple(s->m, 2, pair, RY_NO_SPAN);
    }
    if (t->kind != RY_TYPE_TUPLE) return y;
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n);
    for (int i = 0; i < t->tuple.n; i++)
        f[i] = fresh(s, gx_proj(s, y, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

ry_expr *gx_adjoint(gx *s, ry_expr *v, const ry_type *t) {
    if (gx_is_float(t)) return gx_ref_read(s, gx_proj(s, v, 1));
    if (t->kind != RY_TYPE_TUPLE) return ry_gb_op1(s->m, "zeros_like", v);
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n);
    for (int i = 0; i < t->tuple.n; i++)
        f[i] = gx_adjoint(s, gx_proj(s, v, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

void gx_accumulate(gx *s, gx_block *b, ry_expr *v, const ry_type *t, ry_expr *d) {
    if (gx_is_float(t)) {
        ry_expr *cell = gx_proj(s, v, 1);
        gx_do(s, b, gx_ref_write(s, cell, ry_gb_op2(s->m, "add", gx_ref_read(s, cell), d)));
        return;
    }
    if (t->kind != RY_TYPE_TUPLE || !gx_changes(s, t)) return;
    ry_expr *dv = gx_atomize(s, b, d, (ry_type *)t);
    for (int i = 0; i < t->tuple.n; i++)
        gx_accumulate(s, b, gx_proj(s, v, i), t->tuple.fields[i], gx_proj(s, dv, i));
}

/* The primal of a transformed var, bound once per scope that sees it: a
 * binding made in an enclosing open scope is reused. */
static bool scope_open(gx *s, int id) {
    for (int i = s->nscopes - 1; i >= 0; i--)
        if (s->scopes[i] == id) return true;
    return false;
}

static ry_expr *primal_var(gx *s, gx_block *b, ry_expr *v, ry_type *t) {
    const void *key = v->kind == RY_EXPR_VAR ? (const void *)v->var.var : NULL;
    struct gx_primal *c = key ? ad_map_get(&s->primals, key) : NULL;
    if (c && scope_open(s, c->scope)) return gx_use(s, c->use->var.var);
    ry_expr *p = gx_bind(s, b, "p", gx_primal(s, v, t), t);
    if (key && s->nscopes) {
        c = RY_NEW(s->scratch, struct gx_primal);
        *c = (struct gx_primal){p, s->scopes[s->nscopes - 1]};
        ad_map_put(&s->primals, key, c);
    }
    return p;
}

/* ---- operator calls ----
 *   y = op(primal(a1'), ..);  r = fresh(y)     (no r when y is local)
 * and, deferred to the flush of the open run (grad_run.c), its backward
 * body: g = adjoint of y; [d1, ..] = rule(a1, .., y, g); each di added to
 * ai's in-run adjoint or to its cell.
 * Integer results get no cell and no backward body; no_grad operators a
 * cell but no body; operators without a rule are recorded for the one
 * error. let_var is the primal var the call is bound to (NULL in tail
 * position). */
static void note_missing(gx *s, const ry_expr *e) {
    const char *name = e->call.callee->op.op->name;
    for (int i = 0; i < s->nmissing; i++)
        if (strcmp(s->missing[i], name) == 0) return;
    if (s->nmissing == 0) s->missing_span = e->span;
    if (s->nmissing < GX_MAX_MISSING) s->missing[s->nmissing++] = name;
}

static ry_expr *xop(gx *s, gx_block *b, const ry_expr *e, ry_var *bp, const ry_var *let_var) {
    const ry_op *op = e->call.callee->op.op;
    int n = e->call.nargs;
    ry_grad_rule rule;
    bool has = ry_grad_rule_lookup(op, &rule);
    if (!has) note_missing(s, e);
    ry_expr **targs = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    ry_expr **prim = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    gx_adj **aadj = RY_NEW_ARRAY(s->scratch, gx_adj *, n + 1);
    bool reaches = false; /* some argument has an adjoint to add to */
    bool *need = RY_NEW_ARRAY(s->scratch, bool, n + 1);
    bool active = false; /* some argument may depend on a wrt parameter */
    for (int i = 0; i < n; i++) {
        const ry_expr *a = e->call.args[i];
        active |= need[i] = gx_active_atom(s, a);
        targs[i] = NULL;
        aadj[i] = NULL;
        if (a->kind == RY_EXPR_CONST) { /* a constant's adjoint is never read */
            prim[i] = copy_node(s, a);
            continue;
        }
        if (a->kind == RY_EXPR_VAR && (aadj[i] = gx_run_arg(s, a->var.var)) != NULL) {
            prim[i] = gx_adj_primal(s, aadj[i]); /* bound in the open run */
            reaches = true;
            continue;
        }
        targs[i] = gx_atomize(s, b, xval(s, b, a, bp), gx_type(s, a->type));
        prim[i] = gx_changes(s, a->type) ? primal_var(s, b, targs[i], a->type) : targs[i];
        reaches |= gx_changes(s, a->type);
    }
    ry_expr *call = ry_gb_op(s->m, op->name, n, prim);
    call->span = e->span;
    call->call.attrs = e->call.attrs;
    ry_expr *y = gx_bind(s, b, "y", call, e->type);
    if (!gx_changes(s, e->type)) return y;
    bool local = let_var && gx_run_is_local(s, let_var);
    ry_expr *r = local ? NULL : gx_bind(s, b, "r", fresh(s, y, e->type), gx_type(s, e->type));
    gx_adj *out = gx_run_result(s, let_var, e->type, y, r);
    if (rule.fn && reaches && active && !gx_run_never_added(s, let_var))
        gx_run_defer(s, e, rule.fn, prim, out, aadj, targs, need);
    if (s->per_op) gx_run_flush(s, b); /* one closure per operator */
    return local ? y : r;
}

/* ---- the structural cases ---- */

static ry_var *map_var(gx *s, ry_var *v, bool annotate) {
    ry_var *nv =
        ry_var_new(s->m, v->name, annotate ? gx_annot(gx_type(s, v->type)) : NULL, v->span);
    nv->type = gx_type(s, v->type);
    ad_map_put(&s->vars, v, nv);
    return nv;
}

static ry_pattern *xpat(gx *s, const ry_pattern *p) {
    ry_pattern *q = RY_NEW(s->m->arena, ry_pattern);
    *q = *p;
    switch (p->kind) {
    case RY_PAT_WILDCARD: break;
    case RY_PAT_VAR: q->var = map_var(s, p->var, false); break;
    case RY_PAT_CTOR:
        q->ctor.ctor = gx_ctor(s, p->ctor.ctor);
        q->ctor.args = RY_NEW_ARRAY(s->m->arena, ry_pattern *, p->ctor.n);
        for (int i = 0; i < p->ctor.n; i++)
            q->ctor.args[i] = xpat(s, p->ctor.args[i]);
        break;
    case RY_PAT_TUPLE:
        q->tuple.fields = RY_NEW_ARRAY(s->m->arena, ry_pattern *, p->tuple.n);
        for (int i = 0; i < p->tuple.n; i++)
            q->tuple.fields[i] = xpat(s, p->tuple.fields[i]);
        break;
    }
    return q;
}

static ry_expr *xscope(gx *s, const ry_expr *e, ry_var *bp) {
    if (s->nscopes == s->capscopes) {
        int ncap = s->capscopes ? s->capscopes * 2 : 16;
        int *fresh = RY_NEW_ARRAY(s->scratch, int, ncap);
        if (s->nscopes) memcpy(fresh, s->scopes, sizeof *fresh * (size_t)s->nscopes);
        s->scopes = fresh;
        s->capscopes = ncap;
    }
    s->scopes[s->nscopes++] = ++s->next_scope;
    gx_run run;
    gx_run_enter(s, &run, bp, e);
    gx_block b = {0};
    ry_expr *tail = xval(s, &b, e, bp);
    gx_run_leave(s, &run, &b); /* the run open at the tail ends here */
    s->nscopes--;
    return gx_fold(s, &b, tail);
}

ry_expr *gx_func(gx *s, const ry_expr *f) {
    ry_expr *r = ry_expr_new(s->m, RY_EXPR_FUNC, f->span);
    r->func = f->func;
    int n = f->func.nparams;
    r->func.nparams = n + 1;
    r->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, n + 1);
    /* A polymorphic function keeps every annotation: inference alone would
     * not find its most general type; so do the types with an Any dim
     * (gx_has_any). Others drop those that mention refs (see gx_annot), so
     * the printed program loads in TVM. */
    bool poly = f->func.ntparams > 0;
    for (int i = 0; i < n; i++) {
        r->func.params[i] = map_var(s, f->func.params[i], true);
        if (poly || gx_has_any(f->func.params[i]->type))
            r->func.params[i]->annot = gx_type(s, f->func.params[i]->type);
    }
    ry_var *bp = ry_var_new(s->m, "bp", poly ? s->bp_type : NULL, f->span);
    bp->type = s->bp_type;
    r->func.params[n] = bp;
    r->func.ret_annot = NULL;
    if (f->type && f->type->kind == RY_TYPE_FUNC) {
        ry_type *rt = gx_type(s, f->type->func.ret);
        r->func.ret_annot = poly || gx_has_any(f->type->func.ret) ? rt : gx_annot(rt);
    }
    r->func.body = xscope(s, f->func.body, bp);
    return r;
}

/* A constructor used as a function value becomes a function of the
 * transformed kind, which callers give a bp too:
 *   C  =>  fn (%f1, .., %fn, %bp) { C'(%f1, .., %fn) } */
static ry_expr *eta_ctor(gx *s, ry_expr *ctor) {
    int n = ctor->ctor.ctor->nfields;
    ry_expr *f = ry_expr_new(s->m, RY_EXPR_FUNC, ctor->span);
    f->func.nparams = n + 1;
    f->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, n + 1);
    ry_expr **args = RY_NEW_ARRAY(s->m->arena, ry_expr *, n + 1);
    for (int i = 0; i < n; i++) {
        f->func.params[i] = ry_var_new(s->m, "f", NULL, ctor->span);
        args[i] = gx_use(s, f->func.params[i]);
    }
    f->func.params[n] = ry_var_new(s->m, "bp", NULL, ctor->span);
    f->func.body = ry_expr_call(s->m, ctor, n, args, ctor->span);
    return f;
}

static ry_expr *xcall(gx *s, gx_block *b, const ry_expr *e, ry_var *bp) {
    const ry_expr *cal = e->call.callee;
    if (cal->kind == RY_EXPR_OP) return xop(s, b, e, bp, NULL);
    int n = e->call.nargs;
    bool ctor = cal->kind == RY_EXPR_CTOR;
    ry_expr **args = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    for (int i = 0; i < n; i++)
        args[i] = xval(s, b, e->call.args[i], bp);
    if (!ctor) args[n] = gx_use(s, bp);
    ry_expr *callee;
    if (ctor) { /* called directly: no eta expansion, no bp */
        callee = copy_node(s, cal);
        callee->ctor.ctor = gx_ctor(s, cal->ctor.ctor);
    } else {
        callee = xval(s, b, cal, bp);
    }
    return ry_expr_call(s->m, callee, ctor ? n : n + 1, args, e->span);
}

static ry_expr *xconst(gx *s, const ry_expr *e) {
    ry_expr *c = copy_node(s, e);
    if (!gx_is_float(e->type)) return c;
    ry_expr *pair[2] = {c, gx_ref_new(s, ry_gb_op1(s->m, "zeros_like", copy_node(s, e)))};
    return ry_expr_tuple(s->m, 2, pair, e->span);
}

/* ---- an if whose branches differ in shape ----
 * The checker joins branches of different shapes into one type T with a ?
 * there, but each branch's value carries an adjoint ref of its own type,
 * and refs do not join. So each branch returns its primal and a function
 * taking the adjoint at type T into its own ref (one type in both
 * branches); after the if, the value gets a fresh cell of type T and a
 * backpropagator step that hands the cell's content to that function. */
static bool branches_differ(gx *s, const ry_expr *e) {
    return gx_changes(s, e->type) &&
           (!ry_type_equal(e->if_.then_->type, e->type) || !ry_type_equal(e->if_.else_->type, e->type));
}

static ry_expr *widen_branch(gx *s, const ry_expr *body, const ry_type *t, ry_var *bp) {
    gx_block wb = {0};
    ry_expr *v = gx_bind(s, &wb, "w", xscope(s, body, bp), gx_type(s, body->type));
    ry_var *adj = ry_var_new(s->m, "adj", (ry_type *)t, RY_NO_SPAN);
    adj->type = (ry_type *)t;
    gx_block fb = {0};
    gx_accumulate(s, &fb, v, body->type, gx_use(s, adj));
    ry_expr *fn = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
    fn->func.nparams = 1;
    fn->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, 1);
    fn->func.params[0] = adj;
    fn->func.body = gx_fold(s, &fb, gx_unit(s));
    /* the primal annotated with the branch's type, so that the checker
     * joins the branches' tensors (not still-unknown types) into t */
    ry_var *pv = ry_var_new(s->m, "pv", gx_annot((ry_type *)body->type), RY_NO_SPAN);
    pv->type = (ry_type *)body->type;
    gx_push(s, &wb, pv, gx_primal(s, v, body->type));
    ry_expr *pair[2] = {gx_use(s, pv), fn};
    return gx_fold(s, &wb, ry_expr_tuple(s->m, 2, pair, RY_NO_SPAN));
}

static ry_expr *xif_widened(gx *s, gx_block *b, const ry_expr *e, ry_expr *r, ry_var *bp) {
    const ry_type *t = e->type;
    r->if_.then_ = widen_branch(s, e->if_.then_, t, bp);
    r->if_.else_ = widen_branch(s, e->if_.else_, t, bp);
    r->type = NULL;
    ry_expr *z = gx_bind(s, b, "z", r, NULL);
    ry_expr *y = gx_bind(s, b, "p", gx_proj(s, z, 0), (ry_type *)t);
    ry_expr *f = gx_bind(s, b, "f", gx_proj(s, z, 1), NULL);
    ry_expr *cell = gx_bind(s, b, "r", fresh(s, y, t), gx_type(s, (ry_type *)t));
    ry_expr *k = gx_bind(s, b, "k", gx_ref_read(s, gx_use(s, bp)), NULL);
    gx_block cb = {0};
    ry_expr *arg = gx_adjoint(s, cell, t);
    gx_do(s, &cb, ry_expr_call(s->m, f, 1, &arg, RY_NO_SPAN));
    ry_expr *clo = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
    clo->func.body = gx_fold(s, &cb, ry_expr_call(s->m, k, 0, NULL, RY_NO_SPAN));
    gx_do(s, b, gx_ref_write(s, gx_use(s, bp), clo));
    return cell;
}

/* t names only tensors of static shape and tuples of them: an annotation
 * that means the same wherever it is written. */
static bool closed_type(const ry_type *t) {
    if (!t) return false;
    if (t->kind == RY_TYPE_TENSOR) {
        for (int i = 0; i < t->tensor.ndim; i++)
            if (t->tensor.dims[i].kind != RY_DIM_CONST) return false;
        return true;
    }
    if (t->kind != RY_TYPE_TUPLE) return false;
    for (int i = 0; i < t->tuple.n; i++)
        if (!closed_type(t->tuple.fields[i])) return false;
    return true;
}

static bool ctor_value(const ry_expr *e) {
    return e->kind == RY_EXPR_CTOR || (e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_CTOR);
}

/* value'(e): the transformed value of e; may add bindings to b.
 *   let x = v; body  =>  [x' = value'(v)] value'(body)   (x' known inside v
 *                                                        for recursive fns) */
static ry_expr *xval(gx *s, gx_block *b, const ry_expr *e, ry_var *bp) {
    ry_expr *r;
    while (e->kind == RY_EXPR_LET) {               /* a loop, not recursion: long let chains */
        ry_var *x = map_var(s, e->let.var, false); /* first: recursive closures */
        const ry_expr *val = e->let.value;
        ry_expr *v = NULL;
        if (val->kind == RY_EXPR_CALL && val->call.callee->kind == RY_EXPR_OP)
            v = xop(s, b, val, bp, e->let.var);
        else if (val->kind == RY_EXPR_PROJ)
            v = gx_run_proj(s, b, e->let.var, val);
        if (!v) v = xval(s, b, val, bp);
        if (v->kind == RY_EXPR_VAR) /* an alias: uses go to the var itself */
            ad_map_put(&s->vars, e->let.var, v->var.var);
        else
            gx_push(s, b, x, v);
        e = e->let.body;
    }
    if (gx_run_breaks(e)) gx_run_flush(s, b); /* it may read or extend bp */
    switch (e->kind) {
    case RY_EXPR_VAR: {
        ry_var *v = ad_map_get(&s->vars, e->var.var);
        if (!v) {
            fail(s, e->span, "unbound variable %", e->var.var->name);
            return gx_unit(s);
        }
        return gx_use(s, v);
    }
    case RY_EXPR_GLOBAL: {
        ry_global *g = ry_module_find_global(s->m, e->global.name);
        if (!g) {
            fail(s, e->span, "unknown global @", e->global.name);
            return gx_unit(s);
        }
        r = ry_expr_new(s->m, RY_EXPR_GLOBAL, e->span);
        r->global.name = gx_twin_name(s, g);
        return r;
    }
    case RY_EXPR_CONST: return xconst(s, e);
    case RY_EXPR_OP:
        fail(s, e->span, "an operator used as a value: ", e->op.op->name);
        return gx_unit(s);
    case RY_EXPR_CTOR:
        r = copy_node(s, e);
        r->ctor.ctor = gx_ctor(s, e->ctor.ctor);
        return e->ctor.ctor->nfields ? eta_ctor(s, r) : r;
    case RY_EXPR_CALL: return xcall(s, b, e, bp);
    case RY_EXPR_IF:
        r = copy_node(s, e);
        r->if_.cond = xval(s, b, e->if_.cond, bp);
        if (branches_differ(s, e)) return xif_widened(s, b, e, r, bp);
        r->if_.then_ = xscope(s, e->if_.then_, bp);
        r->if_.else_ = xscope(s, e->if_.else_, bp);
        break;
    case RY_EXPR_MATCH:
        r = copy_node(s, e);
        r->match.data = xval(s, b, e->match.data, bp);
        r->match.clauses = RY_NEW_ARRAY(s->m->arena, ry_clause, e->match.nclauses);
        for (int i = 0; i < e->match.nclauses; i++) {
            r->match.clauses[i].pat = xpat(s, e->match.clauses[i].pat);
            r->match.clauses[i].body = xscope(s, e->match.clauses[i].body, bp);
        }
        r->type = NULL;
        /* A match over a constructor value alone (`@head(Nil)` inlined)
         * leaves its field types to inference, and nothing constrains
         * them: the result is annotated where its type is closed (the
         * annotation names a ref, which only relayc's text can write;
         * printing for TVM leaves it out). */
        if (ctor_value(e->match.data) && closed_type(e->type)) {
            ry_type *t = gx_type(s, (ry_type *)e->type);
            ry_var *v = ry_var_new(s->m, "m", t, RY_NO_SPAN);
            v->type = t;
            gx_push(s, b, v, r);
            return gx_use(s, v);
        }
        return r;
    case RY_EXPR_FUNC: return gx_func(s, e);
    case RY_EXPR_TUPLE: {
        ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, e->tuple.n + 1);
        for (int i = 0; i < e->tuple.n; i++)
            f[i] = xval(s, b, e->tuple.fields[i], bp);
        return ry_expr_tuple(s->m, e->tuple.n, f, e->span);
    }
    case RY_EXPR_PROJ:
        return ry_expr_proj(s->m, xval(s, b, e->proj.tuple, bp), e->proj.index, e->span);
    case RY_EXPR_REF:
        r = copy_node(s, e);
        r->ref.value = xval(s, b, e->ref.value, bp);
        break;
    case RY_EXPR_REF_READ:
        r = copy_node(s, e);
        r->ref_read.ref = xval(s, b, e->ref_read.ref, bp);
        break;
    case RY_EXPR_REF_WRITE:
        r = copy_node(s, e);
        r->ref_write.ref = xval(s, b, e->ref_write.ref, bp);
        r->ref_write.value = xval(s, b, e->ref_write.value, bp);
        break;
    default: fail(s, e->span, "unsupported expression", NULL); return gx_unit(s);
    }
    r->type = NULL;
    return r;
}

/* ---- the driver ---- */

/* Builds the twins of every global requested so far (and of those they
 * request in turn): each from its A-normal form. */
static void build_twins(gx *s) {
    for (int i = 0; i < s->ntwins && !s->failed; i++) {
        if (s->twins[i].func) continue;
        const ry_expr *f = ry_anf(s->m, s->twins[i].g->func);
        if (!s->per_op) f = gx_inline(s, f);
        gx_active_func(s, f, s->twins[i].g);
        ry_expr *tw = gx_func(s, f);
        s->twins[i].func = tw; /* s->twins may have moved during gx_func */
    }
}

static ry_status missing_error(gx *s) {
    char list[700] = "";
    for (int i = 0; i < s->nmissing; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", s->missing[i]);
    }
    return ry_error_at(s->err, s->missing_span, "gradient: no gradient rule for operator%s %s",
                       s->nmissing > 1 ? "s" : "", list);
}

static ry_type *make_bp_type(ry_module *m) {
    ry_type *fn = ry_type_new(m, RY_TYPE_FUNC, RY_NO_SPAN);
    fn->func.ret = ry_type_tuple_arena(m->arena, 0, NULL);
    fn->func.args = NULL;
    ry_type *r = ry_type_new(m, RY_TYPE_REF, RY_NO_SPAN);
    r->ref.inner = fn;
    return r;
}

static ry_status run(gx *s, const char *fn_name, const ry_expr *fn, const char *out_name,
                     const char **used) {
    ry_global *g = NULL;
    if (fn_name) {
        g = ry_module_find_global(s->m, fn_name);
        if (!g) return ry_error_at(s->err, RY_NO_SPAN, "gradient: no global @%s", fn_name);
        fn = g->func;
    }
    if (!fn || fn->kind != RY_EXPR_FUNC)
        return ry_error_at(s->err, RY_NO_SPAN, "gradient: not a function");
    if (!fn->type && ry_module_typecheck(s->m, s->err)) /* not checked yet: do it now */
        return RY_ERR;
    if (!fn->type)
        return ry_error_at(s->err, fn->span, "gradient: the function is not in the module");
    const char *orig = g ? g->name : NULL; /* names the result, not the instance */
    if (g && fn->func.ntparams) { /* differentiate one instance (grad_outer.c) */
        if (gx_instantiate(s, &g)) return RY_ERR;
        fn = g->func;
    }
    gx_active_module(s, g);
    ry_expr *target;
    if (g) {
        target = ry_expr_new(s->m, RY_EXPR_GLOBAL, fn->span);
        target->global.name = gx_twin_name(s, g);
    } else {
        const ry_expr *f = ry_anf(s->m, fn);
        if (!s->per_op) f = gx_inline(s, f);
        gx_active_func(s, f, NULL);
        target = gx_func(s, f);
    }
    build_twins(s);
    ry_expr *wrapper = NULL;
    if (!s->failed && gx_wrapper(s, fn, target, &wrapper)) s->failed = true;
    build_twins(s);
    if (s->failed) return RY_ERR;
    if (s->nmissing) return missing_error(s);

    char base[300];
    snprintf(base, sizeof base, "%s_gradient", orig ? orig : "");
    const char *name = gx_unique(s, out_name ? out_name : g ? base : "gradient", "");
    if (out_name && strcmp(name, out_name) != 0) /* never replace a global silently */
        return ry_error_at(s->err, RY_NO_SPAN, "gradient: the name @%s is taken", out_name);
    s->added = true;
    for (int i = 0; i < s->ntwins; i++)
        gx_shape_uses(s->m, s->twins[i].func);
    gx_shape_uses(s->m, wrapper);
    for (int i = 0; i < s->ntds; i++)
        ry_module_add_typedef(s->m, s->tds[i]);
    for (int i = 0; i < s->ntwins; i++)
        ry_module_add_global(s->m, s->twins[i].name, s->twins[i].func);
    ry_module_add_global(s->m, name, wrapper);
    if (used) *used = name;
    if (ry_module_typecheck(s->m, s->err)) {
        ry_error_prefix(s->err, "the gradient program does not type-check (a bug in ry_grad)");
        return RY_ERR;
    }
    return RY_OK;
}

ry_status ry_grad(ry_module *m, const char *fn_name, const ry_expr *fn, const char *out_name,
                  const char **out_name_used, ry_error *err) {
    return ry_grad_ex(m, fn_name, fn, out_name, NULL, out_name_used, err);
}

/* A gradient under way, in the entry's frame for the undo (oom.h). */
typedef struct grad_call {
    gx s;
    int nglobals, ntypedefs; /* the module's before: run() only appends */
    const char *fn_name, *out_name, **out_name_used;
    const ry_expr *fn;
} grad_call;

static ry_status grad_body(void *ctx, ry_error *err) {
    (void)err; /* in g->s.err */
    grad_call *g = ctx;
    gx *s = &g->s;
    s->scratch = ry_arena_new();
    ad_map_init(&s->vars, s->scratch);
    ad_map_init(&s->globals, s->scratch);
    ad_map_init(&s->adts, s->scratch);
    ad_map_init(&s->ctors, s->scratch);
    ad_map_init(&s->adt_need, s->scratch);
    ad_map_init(&s->primals, s->scratch);
    ad_map_init(&s->cands, s->scratch);
    ad_map_init(&s->active_params, s->scratch);
    ad_map_init(&s->active, s->scratch);
    s->bp_type = make_bp_type(s->m);
    ry_status st = run(s, g->fn_name, g->fn, g->out_name, g->out_name_used);
    if (st && !s->added) gx_remove_instance(s);
    ry_arena_free(s->scratch);
    return st;
}

/* Out of memory: the globals and types it added (the instance, twins, the
 * wrapper) leave the module, their nodes staying in its arena; the scratch
 * arena goes with the recovery point. */
static void grad_undo(void *ctx) {
    grad_call *g = ctx;
    g->s.m->nglobals = g->nglobals;
    g->s.m->ntypedefs = g->ntypedefs;
}

ry_status ry_grad_ex(ry_module *m, const char *fn_name, const ry_expr *fn, const char *out_name,
                     const ry_grad_opts *opts, const char **out_name_used, ry_error *err) {
    grad_call g = {.s = {.m = m, .err = err}, .nglobals = m->nglobals, .ntypedefs = m->ntypedefs,
                   .fn_name = fn_name, .out_name = out_name, .out_name_used = out_name_used, .fn = fn};
    if (opts) g.s.opts = *opts;
    const char *runs = getenv("RELAYC_GRAD_RUNS"); /* "0": the former emitter, to compare */
    g.s.per_op = runs && strcmp(runs, "0") == 0;
    return ry_oom_guard("gradient", grad_body, grad_undo, &g, err);
}
