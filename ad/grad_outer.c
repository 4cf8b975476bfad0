/*
 * grad_outer.c: what the outermost function of ry_grad_ex may be beyond a
 * monomorphic function of tensors, tuples and ADTs.
 *
 * Polymorphic functions. Inside the transform a type variable stays a type
 * variable (a value of type A is carried along opaquely, and a call site
 * instantiates A with the transformed type of what it passes), so the twin
 * of a polymorphic global is itself polymorphic and correct at every
 * instance. The wrapper cannot be: it has to pair each float tensor of the
 * arguments with an adjoint cell and seed the result's, and which values
 * are float tensors depends on the instance. Differentiating "generically"
 * by treating A-typed arguments as constants would silently give zero
 * gradients for the tensors a user passes as A: what a TVM user means by
 * the gradient of `@id[A](%x: A)` at a tensor is ones, not zeros. So the
 * gradient is that of one instance: the types the caller gives
 * (ry_grad_opts.type_args), or else the instantiation that the typed calls
 * of the global in the module agree on (as TVM's type inference would
 * instantiate it there). The instance is an ordinary global
 * `def @f_inst(%x: T) { @f(%x) }`, differentiated as usual; @f's twin stays
 * generic, so several instances share it.
 *
 * Function-typed parameters. A function that comes from outside is a
 * primal closure: nothing at run time can differentiate it. It is passed
 * lifted into the transformed world: called on the primals of its
 * arguments, its result paired with fresh zero cells. Gradients flow around
 * it (to everything else the result depends on) but not through it; its
 * slot in the gradient tuple is `()`, as TVM gives no gradient to
 * non-tensor values. A function built inside the differentiated code is a
 * transformed closure and gradients do flow through it, captures included.
 */
#include <string.h>

#include "grad_impl.h"

/* ---- polymorphic globals ---- */

static bool concrete(const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_TENSOR: return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!concrete(t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_FUNC:
        if (t->func.ntparams) return false;
        for (int i = 0; i < t->func.nargs; i++)
            if (!concrete(t->func.args[i])) return false;
        return concrete(t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!concrete(t->call.args[i])) return false;
        return true;
    case RY_TYPE_REF: return concrete(t->ref.inner);
    default: return false;
    }
}

/* What the typed calls of @name agree on. */
typedef struct sites {
    const char *name;
    int n;           /* type parameters */
    ry_type **found; /* the first concrete instantiation, or NULL */
    bool differ;     /* another concrete one differs */
} sites;

static void note_call(sites *st, const ry_expr *e) {
    const ry_expr *c = e->call.callee;
    if (c->kind != RY_EXPR_GLOBAL || strcmp(c->global.name, st->name) != 0) return;
    if (e->call.ntype_args != st->n) return;
    for (int i = 0; i < st->n; i++)
        if (!concrete(e->call.type_args[i])) return; /* inside a polymorphic caller */
    if (!st->found) {
        st->found = e->call.type_args;
        return;
    }
    for (int i = 0; i < st->n; i++)
        if (!ry_type_equal(st->found[i], e->call.type_args[i])) st->differ = true;
}

static void walk(sites *st, const ry_expr *e) {
    while (e) {
        switch (e->kind) {
        case RY_EXPR_CALL:
            note_call(st, e);
            walk(st, e->call.callee);
            for (int i = 0; i < e->call.nargs; i++)
                walk(st, e->call.args[i]);
            return;
        case RY_EXPR_LET: /* a loop over the body: long let chains */
            walk(st, e->let.value);
            e = e->let.body;
            continue;
        case RY_EXPR_IF:
            walk(st, e->if_.cond);
            walk(st, e->if_.then_);
            e = e->if_.else_;
            continue;
        case RY_EXPR_MATCH:
            walk(st, e->match.data);
            for (int i = 0; i < e->match.nclauses; i++)
                walk(st, e->match.clauses[i].body);
            return;
        case RY_EXPR_FUNC: e = e->func.body; continue;
        case RY_EXPR_TUPLE:
            for (int i = 0; i < e->tuple.n; i++)
                walk(st, e->tuple.fields[i]);
            return;
        case RY_EXPR_PROJ: e = e->proj.tuple; continue;
        case RY_EXPR_REF: e = e->ref.value; continue;
        case RY_EXPR_REF_READ: e = e->ref_read.ref; continue;
        case RY_EXPR_REF_WRITE:
            walk(st, e->ref_write.ref);
            e = e->ref_write.value;
            continue;
        default: return;
        }
    }
}

/* The instantiation: the caller's, else the call sites'. */
static ry_status pick_types(gx *s, const ry_global *g, ry_type ***out) {
    const ry_expr *f = g->func;
    int n = f->func.ntparams;
    if (s->opts.ntype_args || s->opts.type_args) {
        if (s->opts.ntype_args != n || !s->opts.type_args)
            return ry_error_at(s->err, f->span,
                               "gradient: @%s has %d type parameter%s, %d type argument%s given",
                               g->name, n, n == 1 ? "" : "s", s->opts.ntype_args,
                               s->opts.ntype_args == 1 ? "" : "s");
        for (int i = 0; i < n; i++)
            if (!concrete(s->opts.type_args[i])) {
                char tb[200];
                return ry_error_at(s->err, f->span,
                                   "gradient: type argument %d of @%s, %s, is not concrete", i,
                                   g->name, ry_type_str(s->opts.type_args[i], tb, sizeof tb));
            }
        *out = (ry_type **)s->opts.type_args;
        return RY_OK;
    }
    sites st = {.name = g->name, .n = n};
    for (int i = 0; i < s->m->nglobals; i++)
        walk(&st, s->m->globals[i]->func);
    if (!st.found || st.differ)
        return ry_error_at(s->err, f->span,
                           "gradient: @%s is polymorphic and %s; give the instance to "
                           "differentiate (ry_grad_opts.type_args)",
                           g->name,
                           st.differ ? "its calls instantiate it at different types"
                                     : "no call in the module instantiates it");
    *out = st.found;
    return RY_OK;
}

ry_status gx_instantiate(gx *s, ry_global **gp) {
    ry_global *g = *gp;
    const ry_expr *f = g->func;
    const ry_type *ft = f->type;
    ry_type **targs = NULL;
    if (!ft || ft->kind != RY_TYPE_FUNC || ft->func.ntparams != f->func.ntparams)
        return ry_error_at(s->err, f->span, "gradient: @%s is not typed", g->name);
    if (pick_types(s, g, &targs)) return RY_ERR;
    /* def @f_inst(%x1: T1, ..) -> R { @f(%x1, ..) } over the substituted types */
    int n = f->func.nparams, nt = ft->func.ntparams;
    ry_expr *inst = ry_expr_new(s->m, RY_EXPR_FUNC, f->span);
    inst->func.nparams = n;
    inst->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, n + 1);
    ry_expr **args = RY_NEW_ARRAY(s->m->arena, ry_expr *, n + 1);
    for (int i = 0; i < n; i++) {
        const ry_var *p = f->func.params[i];
        ry_type *t = gx_subst(s, ft->func.args[i], nt, ft->func.tparams, targs);
        inst->func.params[i] = ry_var_new(s->m, p->name, t, p->span);
        args[i] = ry_expr_var(s->m, inst->func.params[i], p->span);
    }
    inst->func.ret_annot = gx_subst(s, ft->func.ret, nt, ft->func.tparams, targs);
    ry_expr *callee = ry_expr_new(s->m, RY_EXPR_GLOBAL, f->span);
    callee->global.name = g->name;
    inst->func.body = ry_expr_call(s->m, callee, n, args, f->span);
    const char *name = gx_unique(s, g->name, "_inst");
    s->inst = ry_module_add_global(s->m, name, inst);
    if (ry_module_typecheck(s->m, s->err)) {
        ry_error_prefix(s->err, "gradient: the instance of a polymorphic function");
        return RY_ERR;
    }
    *gp = s->inst;
    return RY_OK;
}

void gx_remove_instance(gx *s) {
    ry_module *m = s->m;
    for (int i = 0; s->inst && i < m->nglobals; i++)
        if (m->globals[i] == s->inst) {
            memmove(&m->globals[i], &m->globals[i + 1],
                    sizeof *m->globals * (size_t)(m->nglobals - i - 1));
            m->nglobals--;
            break;
        }
    s->inst = NULL;
}

/* ---- function parameters ---- */

bool gx_liftable(gx *s, const ry_type *t) {
    if (!t || t->kind != RY_TYPE_FUNC || t->func.ntparams) return false;
    for (int i = 0; i < t->func.nargs; i++)
        if (!gx_convertible(s, t->func.args[i])) return false;
    return gx_convertible(s, t->func.ret);
}

/*   fn (%a1', .., %an', %bp) { in(f(primal(%a1'), .., primal(%an'))) } */
ry_expr *gx_lift(gx *s, ry_expr *f, const ry_type *t) {
    int n = t->func.nargs;
    ry_expr *fn = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
    fn->func.nparams = n + 1;
    fn->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, n + 1);
    ry_expr **args = RY_NEW_ARRAY(s->m->arena, ry_expr *, n + 1);
    for (int i = 0; i < n; i++) {
        ry_type *at = gx_type(s, t->func.args[i]);
        ry_var *v = ry_var_new(s->m, "a", gx_annot(at), RY_NO_SPAN);
        v->type = at;
        fn->func.params[i] = v;
        args[i] = gx_convert(s, GX_PRIMAL, gx_use(s, v), t->func.args[i]);
    }
    ry_var *bp = ry_var_new(s->m, "bp", NULL, RY_NO_SPAN);
    bp->type = s->bp_type;
    fn->func.params[n] = bp;
    gx_block b = {0}; /* the result is bound once: in() uses it twice */
    ry_expr *r = gx_bind(s, &b, "r", ry_expr_call(s->m, f, n, args, RY_NO_SPAN), t->func.ret);
    fn->func.body = gx_fold(s, &b, gx_convert(s, GX_IN, r, t->func.ret));
    return fn;
}
