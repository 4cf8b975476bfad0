/*
 * typecheck.c: Relay's type inference over a whole module. Walks every
 * global's body once, giving each expression a type in which unknowns
 * (incomplete types, dimension unknowns) are solved by unification
 * (unify.c); operator type relations and projections out of not-yet-known
 * tuples wait in a list solved to a fixpoint. At the end every expression,
 * var and instantiation is written back with unknowns replaced.
 * Polymorphism only where type parameters are declared (no let-generalization).
 */
#include <stdlib.h>
#include <string.h>

#include "ir/typecheck_ctx.h"
#include "tensor/oom.h"

static ry_status infer(tc *c, ry_expr *e, ry_type **out);

/* ---- small helpers ---- */

static ry_span pick(ry_span a, ry_span b) { return a.line ? a : b; }

static ry_type *func_type(tc *c, int ntparams, ry_type **tparams, int nargs, ry_type **args,
                          ry_type *ret) {
    ry_type *t = RY_NEW(c->a, ry_type);
    t->kind = RY_TYPE_FUNC;
    t->func.ntparams = ntparams;
    t->func.tparams = tparams;
    t->func.nargs = nargs;
    t->func.args = args;
    t->func.ret = ret;
    return t;
}

static ry_type *adt_type(tc *c, ry_typedef *td, ry_type **args) {
    ry_type *t = RY_NEW(c->a, ry_type);
    t->kind = RY_TYPE_CALL;
    t->call.adt = td;
    t->call.nargs = td->ntparams;
    t->call.args = args;
    return t;
}

static ry_type **fresh_n(tc *c, int n) {
    ry_type **ts = RY_NEW_ARRAY(c->a, ry_type *, n);
    for (int i = 0; i < n; i++) ts[i] = tc_fresh(c);
    return ts;
}

static ry_type *bool_scalar(tc *c) { return ry_type_tensor_arena(c->a, RY_BOOL, 0, NULL); }

/* "@f", "Cons", "%g", "nn.dense" or "the called function", for messages. */
static const char *callee_name(const ry_expr *f, char *buf, size_t n) {
    switch (f->kind) {
    case RY_EXPR_GLOBAL: snprintf(buf, n, "@%s", f->global.name); break;
    case RY_EXPR_CTOR: snprintf(buf, n, "%s", f->ctor.ctor ? f->ctor.ctor->name : "?"); break;
    case RY_EXPR_VAR: snprintf(buf, n, "%%%s", f->var.var->name); break;
    case RY_EXPR_OP: snprintf(buf, n, "%s", f->op.op->name); break;
    default: snprintf(buf, n, "the called function"); break;
    }
    return buf;
}

/* Unifies want with got; on failure the error is at span and reads
 * "type mismatch in WHAT: expected WANT, got GOT". */
static ry_status expect(tc *c, ry_type *want, ry_type *got, ry_span span, const char *what) {
    tc_unify_result r = tc_unify(c, want, got);
    if (r == UNIFY_OK) return RY_OK;
    char sw[256], sg[256];
    tc_str(c, want, sw, sizeof sw);
    tc_str(c, got, sg, sizeof sg);
    if (r == UNIFY_INFINITE)
        return ry_error_at(&c->err, span, "infinite type in %s: %s would have to contain itself (%s)",
                           what, sw, sg);
    return ry_error_at(&c->err, span, "type mismatch in %s: expected %s, got %s", what, sw, sg);
}

static void bind_var(tc *c, ry_var *v, ry_type *t) { tc_map_put(c, &c->vars, v, t); }

/* The type a var is bound with: its annotation (`_` made fresh), else fresh. */
static ry_status var_type(tc *c, ry_var *v, ry_type **out) {
    if (!v->annot) {
        *out = tc_fresh(c);
        return RY_OK;
    }
    return tc_import(c, v->annot, out);
}

/* ctor: fn [typedef params](fields) -> Adt[params] */
static ry_type *ctor_type(tc *c, ry_ctor *k) {
    ry_typedef *td = k->adt;
    return func_type(c, td->ntparams, td->tparams, k->nfields, k->fields,
                     adt_type(c, td, td->tparams));
}

/* A fresh monomorphic instance of a (possibly polymorphic) function type f:
 * its type params replaced by targs (or fresh unknowns), and, for globals
 * (syms), its symbolic dims by fresh dim unknowns per call site. */
static ry_type *instantiate(tc *c, ry_type *f, ry_type **targs, bool syms, ry_type ***inst) {
    int n = f->func.ntparams;
    ry_type **repl = targs ? targs : fresh_n(c, n);
    ry_type *r = tc_subst(c, f, n, f->func.tparams, repl, syms);
    r->func.ntparams = 0;
    r->func.tparams = NULL;
    if (inst) *inst = repl;
    return r;
}

static void record_inst(tc *c, ry_expr *call, int n, ry_type **types) {
    c->inst = tc_grow(c, c->inst, c->ninst, &c->capinst, sizeof *c->inst);
    c->inst[c->ninst++] = (tc_inst){call, n, types};
}

/* ---- deferred constraints ---- */

/* 1 solved, 0 not yet, -1 error. */
static int try_rel(tc *c, tc_pending *p) {
    const ry_op *op = p->e->call.callee->op.op;
    for (int i = 0; i < p->nargs; i++)
        if (!tc_known(c, p->args[i])) return 0;
    ry_type **args = RY_NEW_ARRAY(c->a, ry_type *, p->nargs);
    for (int i = 0; i < p->nargs; i++) args[i] = tc_zonk(c, p->args[i], c->a, false);
    ry_rel_ctx rc = {c->a, op, &p->e->call.attrs, p->e->span, &c->err};
    ry_type *out = NULL;
    c->err.msg[0] = '\0';
    ry_rel_status s = op->rel(&rc, p->nargs, (ry_type *const *)args, &out);
    if (s == RY_REL_DEFER) return 0;
    if (s == RY_REL_FAIL || !out) {
        if (!c->err.msg[0])
            ry_error_at(&c->err, p->e->span, "%s: the arguments do not satisfy its type relation",
                        op->name);
        return -1;
    }
    char what[160];
    snprintf(what, sizeof what, "the result of %s", op->name);
    return expect(c, p->result, out, p->e->span, what) ? -1 : 1;
}

/* proj: t.i where t : (T0, ..., Tn-1) and 0 <= i < n gives Ti */
static int try_proj(tc *c, tc_pending *p) {
    ry_type *t = tc_resolve(c, p->args[0]);
    int i = p->e->proj.index;
    char st[256];
    if (t->kind == RY_TYPE_INCOMPLETE) return 0;
    if (t->kind != RY_TYPE_TUPLE) {
        ry_error_at(&c->err, p->e->span, "cannot take field .%d of a value of type %s: not a tuple",
                    i, tc_str(c, t, st, sizeof st));
        return -1;
    }
    if (i < 0 || i >= t->tuple.n) {
        ry_error_at(&c->err, p->e->span, "index .%d out of range for a tuple of type %s (%d field%s)",
                    i, tc_str(c, t, st, sizeof st), t->tuple.n, t->tuple.n == 1 ? "" : "s");
        return -1;
    }
    char what[64];
    snprintf(what, sizeof what, "projection .%d", i);
    return expect(c, p->result, t->tuple.fields[i], p->e->span, what) ? -1 : 1;
}

static int try_pending(tc *c, tc_pending *p) {
    return p->kind == PEND_REL ? try_rel(c, p) : try_proj(c, p);
}

/* Adds a constraint, solving it at once when its inputs are known. */
static ry_status add_pending(tc *c, tc_pend_kind kind, ry_expr *e, int nargs, ry_type **args,
                             ry_type *result) {
    tc_pending p = {kind, e, nargs, args, result, false};
    int r = try_pending(c, &p);
    if (r < 0) return RY_ERR;
    if (r > 0) return RY_OK;
    c->pend = tc_grow(c, c->pend, c->npend, &c->cappend, sizeof *c->pend);
    c->pend[c->npend++] = p;
    return RY_OK;
}

/* Dimension unknowns nothing determined become Any; true if any did. */
static bool default_dims(tc *c) {
    bool any = false;
    for (int i = 0; i < c->ndim; i++)
        if (c->dim[i].parent == i && !c->dim[i].has) {
            c->dim[i].has = true;
            c->dim[i].val = (ry_dim){RY_DIM_ANY, 0, NULL};
            any = true;
        }
    return any;
}

static ry_status stuck(tc *c, tc_pending *p) {
    if (p->kind == PEND_PROJ)
        return ry_error_at(&c->err, p->e->span,
                           "cannot infer the type of the tuple projected by .%d (hint: annotate "
                           "the variable or parameter it comes from)",
                           p->e->proj.index);
    char args[512] = "", st[200];
    for (int i = 0; i < p->nargs; i++) {
        size_t len = strlen(args);
        snprintf(args + len, sizeof args - len, "%s%s", i ? ", " : "",
                 tc_str(c, p->args[i], st, sizeof st));
    }
    return ry_error_at(&c->err, p->e->span,
                       "cannot infer the argument types of %s (got %s; hint: annotate the "
                       "parameters they come from)",
                       p->e->call.callee->op.op->name, args);
}

/* Retries waiting constraints until none makes progress. final: what is
 * still waiting then is an error (after unknown dims default to Any). */
static ry_status solve(tc *c, bool final) {
    for (;;) {
        bool progress = false;
        for (int i = 0; i < c->npend; i++) {
            tc_pending *p = &c->pend[i];
            if (p->done) continue;
            int r = try_pending(c, p);
            if (r < 0) return RY_ERR;
            if (r > 0) p->done = progress = true;
        }
        if (progress) continue;
        int k = 0; /* drop the solved ones */
        for (int i = 0; i < c->npend; i++)
            if (!c->pend[i].done) c->pend[k++] = c->pend[i];
        c->npend = k;
        if (!final || k == 0) return RY_OK;
        if (default_dims(c)) continue;
        return stuck(c, &c->pend[0]);
    }
}

/* ---- patterns ----
 * _ : T            binds nothing
 * %x : T           binds x to T (unified with x's annotation)
 * (p1, ..., pn): (T1, ..., Tn)  each pi : Ti
 * C(p1, ..., pn): D[U...]  when C belongs to D, each pi : field i of C with
 *                          D's params replaced by fresh unknowns U */
static ry_status check_pattern(tc *c, ry_pattern *p, ry_type *t) {
    char st[256], what[160];
    switch (p->kind) {
    case RY_PAT_WILDCARD: return RY_OK;
    case RY_PAT_VAR: {
        ry_type *vt;
        if (var_type(c, p->var, &vt)) return RY_ERR;
        snprintf(what, sizeof what, "pattern variable %%%s", p->var->name);
        if (expect(c, vt, t, pick(p->span, p->var->span), what)) return RY_ERR;
        bind_var(c, p->var, vt);
        return RY_OK;
    }
    case RY_PAT_TUPLE: {
        ry_type *tt = ry_type_tuple_arena(c->a, p->tuple.n, fresh_n(c, p->tuple.n));
        if (tc_unify(c, tt, t) != UNIFY_OK)
            return ry_error_at(&c->err, p->span,
                               "a tuple pattern of %d field%s cannot match a value of type %s",
                               p->tuple.n, p->tuple.n == 1 ? "" : "s", tc_str(c, t, st, sizeof st));
        for (int i = 0; i < p->tuple.n; i++)
            if (check_pattern(c, p->tuple.fields[i], tt->tuple.fields[i])) return RY_ERR;
        return RY_OK;
    }
    case RY_PAT_CTOR: {
        ry_ctor *k = p->ctor.ctor;
        if (!k || !k->adt) return ry_error_at(&c->err, p->span, "pattern with an unknown constructor");
        if (p->ctor.n != k->nfields)
            return ry_error_at(&c->err, p->span, "constructor %s has %d field%s, the pattern gives %d",
                               k->name, k->nfields, k->nfields == 1 ? "" : "s", p->ctor.n);
        ry_typedef *td = k->adt;
        ry_type **u = fresh_n(c, td->ntparams);
        if (tc_unify(c, adt_type(c, td, u), t) != UNIFY_OK)
            return ry_error_at(&c->err, p->span,
                               "constructor %s belongs to type %s, but the matched value has type %s",
                               k->name, td->name, tc_str(c, t, st, sizeof st));
        for (int i = 0; i < k->nfields; i++) {
            ry_type *ft = tc_subst(c, k->fields[i], td->ntparams, td->tparams, u, false);
            if (check_pattern(c, p->ctor.args[i], ft)) return RY_ERR;
        }
        return RY_OK;
    }
    }
    return RY_OK;
}

/* ---- functions ----
 * fn [A..](%x1: T1, ..) -> R { body } : fn [A..](T1, ..) -> R   when body : R
 * sig, when given (globals), holds the parameter and return types already. */
static ry_status function_sig(tc *c, ry_expr *f, ry_type **out) {
    ry_type **args = RY_NEW_ARRAY(c->a, ry_type *, f->func.nparams);
    for (int i = 0; i < f->func.nparams; i++)
        if (var_type(c, f->func.params[i], &args[i])) return RY_ERR;
    ry_type *ret = tc_fresh(c);
    if (f->func.ret_annot && tc_import(c, f->func.ret_annot, &ret)) return RY_ERR;
    for (int i = 0; i < f->func.ntparams; i++)
        if (!f->func.tparams[i] || f->func.tparams[i]->kind != RY_TYPE_VAR)
            return ry_error_at(&c->err, f->span, "type parameter %d of a function is not a type variable",
                               i + 1);
    *out = func_type(c, f->func.ntparams, f->func.tparams, f->func.nparams, args, ret);
    return RY_OK;
}

static ry_status infer_func(tc *c, ry_expr *f, ry_type *sig, const char *name, ry_type **out) {
    if (!sig && function_sig(c, f, &sig)) return RY_ERR;
    tc_map_put(c, &c->exprs, f, sig);
    for (int i = 0; i < f->func.nparams; i++) bind_var(c, f->func.params[i], sig->func.args[i]);
    ry_type *bt;
    if (infer(c, f->func.body, &bt)) return RY_ERR;
    ry_expr *tail = f->func.body;
    while (tail->kind == RY_EXPR_LET) tail = tail->let.body;
    char what[200];
    snprintf(what, sizeof what, "the result of %s", name);
    if (expect(c, sig->func.ret, bt, pick(tail->span, f->span), what)) return RY_ERR;
    *out = sig;
    return RY_OK;
}

/* ---- calls ----
 * op(a1..an, attrs)   : R  when the op's relation gives R for the args' types
 * f(a1..an)           : R  when f : fn [A..](T1..Tn) -> R, instantiated with
 *                          fresh unknowns for A.. (and for a global's
 *                          symbolic dims), each ai : Ti */
static ry_status infer_op_call(tc *c, ry_expr *e, ry_type **out) {
    const ry_op *op = e->call.callee->op.op;
    if (ry_op_check_attrs(op, &e->call.attrs, &c->err)) return RY_ERR;
    if (e->call.nargs != op->nargs)
        return ry_error_at(&c->err, e->span, "%s takes %d argument%s, got %d", op->name, op->nargs,
                           op->nargs == 1 ? "" : "s", e->call.nargs);
    if (!op->rel) return ry_error_at(&c->err, e->span, "%s has no type relation", op->name);
    ry_type **args = RY_NEW_ARRAY(c->a, ry_type *, e->call.nargs);
    for (int i = 0; i < e->call.nargs; i++)
        if (infer(c, e->call.args[i], &args[i])) return RY_ERR;
    ry_type *r = tc_fresh(c);
    tc_map_put(c, &c->exprs, e->call.callee, func_type(c, 0, NULL, e->call.nargs, args, r));
    if (add_pending(c, PEND_REL, e, e->call.nargs, args, r)) return RY_ERR;
    *out = r;
    return RY_OK;
}

/* The callee's type: for globals and constructors their polymorphic type. */
static ry_status callee_type(tc *c, ry_expr *f, ry_type **out) {
    if (f->kind == RY_EXPR_GLOBAL || f->kind == RY_EXPR_CTOR) {
        ry_type *t;
        if (f->kind == RY_EXPR_CTOR) {
            if (!f->ctor.ctor || !f->ctor.ctor->adt)
                return ry_error_at(&c->err, f->span, "unknown constructor");
            t = ctor_type(c, f->ctor.ctor);
        } else {
            ry_global *g = ry_module_find_global(c->m, f->global.name);
            if (!g) return ry_error_at(&c->err, f->span, "unknown global @%s", f->global.name);
            t = tc_map_get(&c->globals, g);
        }
        tc_map_put(c, &c->exprs, f, t);
        *out = t;
        return RY_OK;
    }
    return infer(c, f, out);
}

static ry_status infer_call(tc *c, ry_expr *e, ry_type **out) {
    ry_expr *f = e->call.callee;
    if (f->kind == RY_EXPR_OP) return infer_op_call(c, e, out);
    char name[160], st[256], what[200];
    callee_name(f, name, sizeof name);
    /* attributes on a closure's call (TVM prints them with attrs_type_key)
     * mean nothing to its type or its value: they are carried, not read */
    ry_type *ft;
    if (callee_type(c, f, &ft)) return RY_ERR;
    ft = tc_resolve(c, ft);
    if (ft->kind == RY_TYPE_INCOMPLETE) { /* a var of unknown type: make it a function */
        ry_type *fresh = func_type(c, 0, NULL, e->call.nargs, fresh_n(c, e->call.nargs), tc_fresh(c));
        tc_unify(c, ft, fresh);
        ft = fresh;
    }
    if (ft->kind != RY_TYPE_FUNC)
        return ry_error_at(&c->err, pick(f->span, e->span), "cannot call %s: it has type %s, not a function type",
                           name, tc_str(c, ft, st, sizeof st));
    bool syms = f->kind == RY_EXPR_GLOBAL;
    if (ft->func.ntparams) {
        int n = ft->func.ntparams;
        ry_type **targs = NULL, **inst;
        if (e->call.ntype_args) {
            if (e->call.ntype_args != n)
                return ry_error_at(&c->err, e->span, "%s takes %d type argument%s, got %d", name, n,
                                   n == 1 ? "" : "s", e->call.ntype_args);
            targs = RY_NEW_ARRAY(c->a, ry_type *, n);
            for (int i = 0; i < n; i++)
                if (tc_import(c, e->call.type_args[i], &targs[i])) return RY_ERR;
        }
        ft = instantiate(c, ft, targs, syms, &inst);
        record_inst(c, e, n, inst);
    } else if (syms) {
        ft = instantiate(c, ft, NULL, true, NULL);
    }
    if (e->call.nargs != ft->func.nargs)
        return ry_error_at(&c->err, e->span, "%s takes %d argument%s, got %d", name, ft->func.nargs,
                           ft->func.nargs == 1 ? "" : "s", e->call.nargs);
    for (int i = 0; i < e->call.nargs; i++) {
        ry_type *at;
        if (infer(c, e->call.args[i], &at)) return RY_ERR;
        snprintf(what, sizeof what, "argument %d of %s", i + 1, name);
        if (expect(c, ft->func.args[i], at, pick(e->call.args[i]->span, e->span), what)) return RY_ERR;
    }
    *out = ft->func.ret;
    return RY_OK;
}

/* ---- the other expressions ---- */

/* let %x: T = v; body   : type of body, when v : T (T fresh if not written).
 * Chains of lets are walked in a loop, not by recursion: they can be long.
 * x is bound before v is checked, so a let-bound fn may call itself. */
static ry_status infer_let(tc *c, ry_expr *e, ry_type **out) {
    int n = 0, cap = 0;
    ry_expr **chain = NULL;
    ry_type *t;
    char what[200];
    while (e->kind == RY_EXPR_LET && !tc_map_get(&c->exprs, e)) {
        ry_var *v = e->let.var;
        ry_type *vt, *valt;
        if (var_type(c, v, &vt)) return RY_ERR;
        bind_var(c, v, vt);
        if (infer(c, e->let.value, &valt)) return RY_ERR;
        snprintf(what, sizeof what, "the value of let %%%s", v->name);
        if (expect(c, vt, valt, pick(e->let.value->span, e->span), what)) return RY_ERR;
        chain = tc_grow(c, chain, n, &cap, sizeof *chain);
        chain[n++] = e;
        e = e->let.body;
    }
    if (infer(c, e, &t)) return RY_ERR;
    for (int i = 0; i < n; i++) tc_map_put(c, &c->exprs, chain[i], t);
    *out = t;
    return RY_OK;
}

/* if (c) { t } else { f } : T  when c : bool (a scalar), t : T, f : T */
static ry_status infer_if(tc *c, ry_expr *e, ry_type **out) {
    ry_type *ct, *tt, *et;
    if (infer(c, e->if_.cond, &ct)) return RY_ERR;
    if (expect(c, bool_scalar(c), ct, pick(e->if_.cond->span, e->span), "the condition of if"))
        return RY_ERR;
    if (infer(c, e->if_.then_, &tt) || infer(c, e->if_.else_, &et)) return RY_ERR;
    ry_expr *tail = e->if_.else_;
    while (tail->kind == RY_EXPR_LET) tail = tail->let.body;
    if (tc_join(c, tt, et, out) != UNIFY_OK) {
        char s1[256], s2[256];
        return ry_error_at(&c->err, pick(tail->span, e->span),
                           "the branches of if differ: then gives %s, else gives %s",
                           tc_str(c, tt, s1, sizeof s1), tc_str(c, et, s2, sizeof s2));
    }
    return RY_OK;
}

/* match (d) { p1 => e1, ... } : T  when d : D, each pi matches D, each ei : T */
static ry_status infer_match(tc *c, ry_expr *e, ry_type **out) {
    ry_type *dt, *r = tc_fresh(c);
    if (infer(c, e->match.data, &dt)) return RY_ERR;
    char what[64];
    for (int i = 0; i < e->match.nclauses; i++) {
        ry_clause *cl = &e->match.clauses[i];
        ry_type *bt;
        if (check_pattern(c, cl->pat, dt) || infer(c, cl->body, &bt)) return RY_ERR;
        ry_expr *tail = cl->body;
        while (tail->kind == RY_EXPR_LET) tail = tail->let.body;
        snprintf(what, sizeof what, "clause %d of match", i + 1);
        if (expect(c, r, bt, pick(tail->span, e->span), what)) return RY_ERR;
    }
    *out = r;
    return RY_OK;
}

/* A global or a constructor used as a value: a fresh instance of it. A
 * nullary constructor is the value itself: Nil : List[_]. */
static ry_status infer_value_ref(tc *c, ry_expr *e, ry_type **out) {
    ry_type *t;
    if (callee_type(c, e, &t)) return RY_ERR;
    t = tc_resolve(c, t);
    if (t->kind == RY_TYPE_FUNC && (t->func.ntparams || e->kind == RY_EXPR_GLOBAL))
        t = instantiate(c, t, NULL, e->kind == RY_EXPR_GLOBAL, NULL);
    if (e->kind == RY_EXPR_CTOR && e->ctor.ctor->nfields == 0) t = t->func.ret;
    *out = t;
    return RY_OK;
}

static ry_status infer_kind(tc *c, ry_expr *e, ry_type **out) {
    char st[256];
    switch (e->kind) {
    case RY_EXPR_VAR:
        /* var: the type it was bound with */
        *out = tc_map_get(&c->vars, e->var.var);
        if (!*out) return ry_error_at(&c->err, e->span, "unbound variable %%%s", e->var.var->name);
        return RY_OK;
    case RY_EXPR_GLOBAL:
    case RY_EXPR_CTOR: return infer_value_ref(c, e, out);
    case RY_EXPR_CONST:
        /* constant: Tensor[its shape, its dtype] */
        if (!e->constant.value) return ry_error_at(&c->err, e->span, "constant without a value");
        *out = ry_type_of_tensor(c->a, e->constant.value);
        return RY_OK;
    case RY_EXPR_OP:
        return ry_error_at(&c->err, e->span, "operator %s must be called with its arguments",
                           e->op.op->name);
    case RY_EXPR_CALL: return infer_call(c, e, out);
    case RY_EXPR_LET: return infer_let(c, e, out);
    case RY_EXPR_IF: return infer_if(c, e, out);
    case RY_EXPR_MATCH: return infer_match(c, e, out);
    case RY_EXPR_FUNC: return infer_func(c, e, NULL, "the function", out);
    case RY_EXPR_TUPLE: {
        /* (e1, ..., en) : (T1, ..., Tn) */
        ry_type **fs = RY_NEW_ARRAY(c->a, ry_type *, e->tuple.n);
        for (int i = 0; i < e->tuple.n; i++)
            if (infer(c, e->tuple.fields[i], &fs[i])) return RY_ERR;
        *out = ry_type_tuple_arena(c->a, e->tuple.n, fs);
        return RY_OK;
    }
    case RY_EXPR_PROJ: {
        ry_type **t = RY_NEW_ARRAY(c->a, ry_type *, 1);
        if (infer(c, e->proj.tuple, &t[0])) return RY_ERR;
        *out = tc_fresh(c);
        return add_pending(c, PEND_PROJ, e, 1, t, *out);
    }
    case RY_EXPR_REF: {
        /* ref(v) : ref(T)  when v : T */
        ry_type *vt, *r = RY_NEW(c->a, ry_type);
        if (infer(c, e->ref.value, &vt)) return RY_ERR;
        r->kind = RY_TYPE_REF;
        r->ref.inner = vt;
        *out = r;
        return RY_OK;
    }
    case RY_EXPR_REF_READ: {
        /* ref_read(r) : T  when r : ref(T) */
        ry_type *rt, *want = RY_NEW(c->a, ry_type);
        if (infer(c, e->ref_read.ref, &rt)) return RY_ERR;
        want->kind = RY_TYPE_REF;
        want->ref.inner = tc_fresh(c);
        if (tc_unify(c, want, rt) != UNIFY_OK)
            return ry_error_at(&c->err, pick(e->ref_read.ref->span, e->span),
                               "ref_read expects a reference, got %s", tc_str(c, rt, st, sizeof st));
        *out = want->ref.inner;
        return RY_OK;
    }
    case RY_EXPR_REF_WRITE: {
        /* ref_write(r, v) : ()  when r : ref(T), v : T */
        ry_type *rt, *vt, *want = RY_NEW(c->a, ry_type);
        if (infer(c, e->ref_write.ref, &rt)) return RY_ERR;
        want->kind = RY_TYPE_REF;
        want->ref.inner = tc_fresh(c);
        if (tc_unify(c, want, rt) != UNIFY_OK)
            return ry_error_at(&c->err, pick(e->ref_write.ref->span, e->span),
                               "ref_write expects a reference, got %s", tc_str(c, rt, st, sizeof st));
        if (infer(c, e->ref_write.value, &vt)) return RY_ERR;
        if (expect(c, want->ref.inner, vt, pick(e->ref_write.value->span, e->span),
                   "the value written by ref_write"))
            return RY_ERR;
        *out = ry_type_tuple_arena(c->a, 0, NULL);
        return RY_OK;
    }
    }
    return ry_error_at(&c->err, e->span, "unknown expression kind %d", (int)e->kind);
}

/* Long chains of graph bindings (`%1 = f(%0); %2 = f(%1); ...`) nest calls
 * thousands deep. Past a depth, the subexpressions of e that bind nothing
 * are typed bottom-up from an explicit stack first, so the recursion below
 * finds them done. Binders (let, fn, match clauses) are typed where they stand. */
#define DEEP 200

static void push_child(tc *c, ry_expr ***stack, int *n, int *cap, ry_expr *x) {
    if (!x || tc_map_get(&c->exprs, x)) return;
    *stack = tc_grow(c, *stack, *n, cap, sizeof **stack);
    (*stack)[(*n)++] = x;
}

static ry_status prewarm(tc *c, ry_expr *root) {
    int n = 0, cap = 0, norder = 0, caporder = 0;
    ry_expr **stack = NULL, **order = NULL;
    push_child(c, &stack, &n, &cap, root);
    while (n) { /* reverse post-order: parents before children */
        ry_expr *x = stack[--n];
        order = tc_grow(c, order, norder, &caporder, sizeof *order);
        order[norder++] = x;
        switch (x->kind) {
        case RY_EXPR_CALL: {
            ry_expr_kind k = x->call.callee->kind;
            if (k != RY_EXPR_OP && k != RY_EXPR_GLOBAL && k != RY_EXPR_CTOR)
                push_child(c, &stack, &n, &cap, x->call.callee);
            for (int i = 0; i < x->call.nargs; i++) push_child(c, &stack, &n, &cap, x->call.args[i]);
            break;
        }
        case RY_EXPR_TUPLE:
            for (int i = 0; i < x->tuple.n; i++) push_child(c, &stack, &n, &cap, x->tuple.fields[i]);
            break;
        case RY_EXPR_IF:
            push_child(c, &stack, &n, &cap, x->if_.cond);
            push_child(c, &stack, &n, &cap, x->if_.then_);
            push_child(c, &stack, &n, &cap, x->if_.else_);
            break;
        case RY_EXPR_MATCH: push_child(c, &stack, &n, &cap, x->match.data); break;
        case RY_EXPR_PROJ: push_child(c, &stack, &n, &cap, x->proj.tuple); break;
        case RY_EXPR_REF: push_child(c, &stack, &n, &cap, x->ref.value); break;
        case RY_EXPR_REF_READ: push_child(c, &stack, &n, &cap, x->ref_read.ref); break;
        case RY_EXPR_REF_WRITE:
            push_child(c, &stack, &n, &cap, x->ref_write.ref);
            push_child(c, &stack, &n, &cap, x->ref_write.value);
            break;
        default: break;
        }
    }
    int depth = c->depth;
    c->depth = 0;
    ry_status st = RY_OK;
    for (int i = norder - 1; i > 0 && !st; i--) { /* children first; not root itself */
        ry_type *t;
        st = infer(c, order[i], &t);
    }
    c->depth = depth;
    return st;
}

static ry_status infer(tc *c, ry_expr *e, ry_type **out) {
    if (!e) return ry_error_at(&c->err, RY_NO_SPAN, "missing expression");
    ry_type *t = tc_map_get(&c->exprs, e);
    if (t) {
        *out = t;
        return RY_OK;
    }
    ry_status st = RY_OK;
    if (++c->depth > DEEP) st = prewarm(c, e);
    if (!st) st = infer_kind(c, e, &t);
    c->depth--;
    if (st) return RY_ERR;
    tc_map_put(c, &c->exprs, e, t);
    *out = t;
    return RY_OK;
}

/* ---- the module ---- */

/* Every expression, var and instantiation gets its solved type, copied
 * into the module's arena. */
static void write_back(tc *c) {
    ry_arena *dst = c->m->arena;
    for (int i = 0; i < c->exprs.cap; i++)
        if (c->exprs.keys[i])
            ((ry_expr *)c->exprs.keys[i])->type = tc_zonk(c, c->exprs.vals[i], dst, true);
    for (int i = 0; i < c->vars.cap; i++)
        if (c->vars.keys[i]) ((ry_var *)c->vars.keys[i])->type = tc_zonk(c, c->vars.vals[i], dst, true);
    for (int i = 0; i < c->ninst; i++) {
        tc_inst *in = &c->inst[i];
        ry_type **ts = RY_NEW_ARRAY(dst, ry_type *, in->n);
        for (int k = 0; k < in->n; k++) ts[k] = tc_zonk(c, in->types[k], dst, true);
        in->call->call.ntype_args = in->n;
        in->call->call.type_args = ts;
    }
}

/* Globals: each one's signature first (annotations, or fresh unknowns where
 * none are written), so globals can be used before their definition and be
 * (mutually) recursive; then the bodies in module order, solving what can be
 * solved after each, so a later caller instantiates a solved signature. */
static ry_status typecheck(void *mv, ry_error *err) {
    ry_module *m = mv;
    tc c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.a = ry_arena_new();
    tc_map_init(&c, &c.exprs);
    tc_map_init(&c, &c.vars);
    tc_map_init(&c, &c.globals);
    ry_status st = RY_OK;
    for (int i = 0; i < m->nglobals && !st; i++) {
        ry_global *g = m->globals[i];
        ry_type *sig;
        if (!g->func || g->func->kind != RY_EXPR_FUNC)
            st = ry_error_at(&c.err, g->span, "global @%s is not a function", g->name);
        else if (!(st = function_sig(&c, g->func, &sig)))
            tc_map_put(&c, &c.globals, g, sig);
    }
    for (int i = 0; i < m->nglobals && !st; i++) {
        ry_global *g = m->globals[i];
        char name[200];
        ry_type *t;
        snprintf(name, sizeof name, "@%s", g->name);
        st = infer_func(&c, g->func, tc_map_get(&c.globals, g), name, &t);
        if (!st) st = solve(&c, false);
    }
    if (!st) st = solve(&c, true);
    if (!st) write_back(&c);
    if (st && err) *err = c.err;
    ry_arena_free(c.a);
    return st;
}

/* Out of memory, c.a goes with the recovery point; the module keeps the
 * types written back so far, which a later check overwrites. */
ry_status ry_module_typecheck(ry_module *m, ry_error *err) {
    return ry_oom_guard("type check", typecheck, NULL, m, err);
}
