/*
 * grad_active.c: which values may depend on a parameter the gradient is
 * taken with respect to (ry_grad_opts.wrt), so that the rules of operators
 * whose arguments do not are never built, and a rule is told which of its
 * arguments' gradients are needed (ry_grad_ctx.need). A trainer
 * differentiates only the parameters: `take(%data, %t, axis=1)` on the
 * float data of an RNN then asks for no gradient, which it could not build
 * when the length of that axis is known only at run time.
 *
 * The analysis is conservative ("active" may be too often, never too
 * rarely): a value is active when it is computed from an active value;
 * refs, closures and the results of calling them are active. Across
 * globals, parameter k of @g is active when some call of @g anywhere in the
 * module passes an active argument there, or @g is used as a value; the
 * entry's active parameters are its wrt ones. A fixpoint over the module
 * settles the flags (they only ever turn on), then each function the
 * transform builds a twin of is analysed with its flags.
 */
#include <string.h>

#include "grad_impl.h"

typedef struct act {
    gx *s;
    ad_map *env;    /* var -> (void *)1 active, (void *)2 inactive */
    ad_map memo;    /* expression -> the same, for nodes a graph binding shares */
    bool changed;   /* a global's parameter flag turned on */
} act;

#define ACTIVE ((void *)1)
#define INACTIVE ((void *)2)

/* The flags of global g's parameters (allocated on first use). */
static bool *flags_of(gx *s, const ry_global *g) {
    bool *f = ad_map_get(&s->active_params, g);
    if (!f) {
        int n = g->func->func.nparams;
        f = RY_NEW_ARRAY(s->scratch, bool, n ? n : 1);
        memset(f, 0, sizeof *f * (size_t)(n ? n : 1));
        ad_map_put(&s->active_params, g, f);
    }
    return f;
}

static void set_var(act *a, const ry_var *v, bool on) { ad_map_put(a->env, v, on ? ACTIVE : INACTIVE); }

static bool all_params(act *a, const ry_global *g) {
    bool *f = flags_of(a->s, g);
    for (int i = 0; i < g->func->func.nparams; i++)
        if (!f[i]) a->changed = f[i] = true;
    return true;
}

static bool expr(act *a, const ry_expr *e);

static void pattern(act *a, const ry_pattern *p, bool on) {
    if (!p) return;
    if (p->kind == RY_PAT_VAR) set_var(a, p->var, on);
    if (p->kind == RY_PAT_CTOR)
        for (int i = 0; i < p->ctor.n; i++) pattern(a, p->ctor.args[i], on);
    if (p->kind == RY_PAT_TUPLE)
        for (int i = 0; i < p->tuple.n; i++) pattern(a, p->tuple.fields[i], on);
}

/* A function expression: its parameters may be given anything (they are
 * active), and so is its value (it may capture an active one). */
static bool func(act *a, const ry_expr *f) {
    for (int i = 0; i < f->func.nparams; i++) set_var(a, f->func.params[i], true);
    expr(a, f->func.body);
    return true;
}

static bool call(act *a, const ry_expr *e) {
    bool any = false;
    bool *on = RY_NEW_ARRAY(a->s->scratch, bool, e->call.nargs + 1);
    for (int i = 0; i < e->call.nargs; i++) any |= on[i] = expr(a, e->call.args[i]);
    const ry_expr *f = e->call.callee;
    if (f->kind == RY_EXPR_OP || f->kind == RY_EXPR_CTOR) return any;
    if (f->kind == RY_EXPR_GLOBAL) {
        const ry_global *g = ry_module_find_global(a->s->m, f->global.name);
        if (!g || !g->func || g->func->kind != RY_EXPR_FUNC) return true;
        bool *flags = flags_of(a->s, g);
        for (int i = 0; i < e->call.nargs && i < g->func->func.nparams; i++)
            if (on[i] && !flags[i]) a->changed = flags[i] = true;
        return any; /* a global's result depends on its arguments alone */
    }
    expr(a, f);
    return true; /* a closure's call */
}

static bool node(act *a, const ry_expr *e);

/* Whether e's value may depend on an active value; records let-bound and
 * pattern vars in a->env on the way. A let chain is walked as a loop. */
static bool expr(act *a, const ry_expr *e) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body) set_var(a, e->let.var, expr(a, e->let.value));
    if (e->kind == RY_EXPR_VAR) return ad_map_get(a->env, e->var.var) != INACTIVE;
    void *seen = ad_map_get(&a->memo, e);
    if (seen) return seen == ACTIVE;
    bool on = node(a, e);
    ad_map_put(&a->memo, e, on ? ACTIVE : INACTIVE);
    return on;
}

static bool node(act *a, const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_CONST:
    case RY_EXPR_OP:
    case RY_EXPR_CTOR: return false;
    case RY_EXPR_GLOBAL: { /* used as a value: it may be called with anything */
        const ry_global *g = ry_module_find_global(a->s->m, e->global.name);
        if (g && g->func && g->func->kind == RY_EXPR_FUNC) all_params(a, g);
        return false;
    }
    case RY_EXPR_CALL: return call(a, e);
    case RY_EXPR_IF: {
        expr(a, e->if_.cond);
        bool t = expr(a, e->if_.then_);
        return expr(a, e->if_.else_) || t;
    }
    case RY_EXPR_MATCH: {
        bool on = expr(a, e->match.data), any = false;
        for (int i = 0; i < e->match.nclauses; i++) {
            pattern(a, e->match.clauses[i].pat, on);
            any |= expr(a, e->match.clauses[i].body);
        }
        return any;
    }
    case RY_EXPR_FUNC: return func(a, e);
    case RY_EXPR_TUPLE: {
        bool any = false;
        for (int i = 0; i < e->tuple.n; i++) any |= expr(a, e->tuple.fields[i]);
        return any;
    }
    case RY_EXPR_PROJ: return expr(a, e->proj.tuple);
    case RY_EXPR_REF: expr(a, e->ref.value); return true;
    case RY_EXPR_REF_READ: expr(a, e->ref_read.ref); return true;
    case RY_EXPR_REF_WRITE:
        expr(a, e->ref_write.ref);
        expr(a, e->ref_write.value);
        return false; /* () */
    default: return true;
    }
}

/* Analyses function f with parameter flags `on` into env. */
static void analyse(gx *s, ad_map *env, const ry_expr *f, const bool *on, bool *changed) {
    act a = {.s = s, .env = env};
    ad_map_init(&a.memo, s->scratch);
    for (int i = 0; i < f->func.nparams; i++) set_var(&a, f->func.params[i], on && on[i]);
    expr(&a, f->func.body);
    if (changed) *changed |= a.changed;
}

void gx_active_module(gx *s, const ry_global *entry) {
    s->active_on = true;
    if (entry) {
        bool *f = flags_of(s, entry);
        for (int i = 0; i < entry->func->func.nparams; i++)
            f[i] = !s->opts.wrt || s->opts.wrt[i];
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < s->m->nglobals; i++) {
            const ry_global *g = s->m->globals[i];
            if (!g->func || g->func->kind != RY_EXPR_FUNC) continue;
            ad_map env;
            ad_map_init(&env, s->scratch);
            analyse(s, &env, g->func, flags_of(s, g), &changed);
        }
    }
}

void gx_active_func(gx *s, const ry_expr *f, const ry_global *g) {
    if (!s->active_on) return;
    bool *entry = NULL;
    if (!g) { /* a function expression given to ry_grad_ex: its wrt */
        entry = RY_NEW_ARRAY(s->scratch, bool, f->func.nparams + 1);
        for (int i = 0; i < f->func.nparams; i++) entry[i] = !s->opts.wrt || s->opts.wrt[i];
    }
    analyse(s, &s->active, f, g ? flags_of(s, g) : entry, NULL);
}

bool gx_active_atom(gx *s, const ry_expr *a) {
    if (a->kind == RY_EXPR_CONST) return false;
    if (!s->active_on || a->kind != RY_EXPR_VAR) return true;
    return ad_map_get(&s->active, a->var.var) != INACTIVE;
}
