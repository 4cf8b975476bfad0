/*
 * pe_spec.c: specialization, the part of partial evaluation (partial_eval.c)
 * for the recursion it does not unroll. A call of a global that is not
 * inlined (recursion under dynamic control) but receives known functions
 * (a closure for map or foldl, a global) is specialized to them: the
 * global's body is evaluated once per (global, known functions) with the
 * other arguments unknown, as a let-bound recursive function, and every
 * call with the same signature in scope calls it, the recursive ones inside
 * it included. The functions are then inlined in its body instead of
 * called at run time. Calls whose arguments hold no known function stay
 * calls of the global itself.
 */
#include <stdio.h>
#include <string.h>

#include "pass/pe_impl.h"

#define MAX_SPECS 64 /* specializations per pass over a global */

static bool static_fn(const ps *v) {
    return v->kind == PS_CLOSURE && (v->fn || v->dyn->kind == RY_EXPR_GLOBAL);
}

static bool same_fn(const ps *a, const ps *b) {
    if (a->fn || b->fn) return a->fn == b->fn && a->env == b->env;
    return strcmp(a->dyn->global.name, b->dyn->global.name) == 0;
}

static spec *spec_find(pe *p, int gi, int n, ps **args) {
    for (spec *s = p->specs; s; s = s->next) {
        if (s->global != gi || s->nargs != n || pe_scope_index(p, s->scope) < 0) continue;
        bool same = true;
        for (int i = 0; i < n && same; i++) {
            bool st = static_fn(args[i]);
            same = st == (s->stat[i] != NULL) && (!st || same_fn(args[i], s->stat[i]));
        }
        if (same) return s;
    }
    return NULL;
}

static ps *spec_call(pe *p, const ry_expr *e, spec *s, ps **args) {
    int n = 0;
    ry_expr **dargs = RY_NEW_ARRAY(p->m->arena, ry_expr *, s->nargs ? s->nargs : 1);
    for (int i = 0; i < s->nargs; i++)
        if (!s->stat[i]) dargs[n++] = args[i]->dyn;
    ry_expr *c = ry_expr_new(p->m, RY_EXPR_CALL, e->span);
    *c = *e;
    c->call.callee = pass_use(p->m, s->var);
    c->call.nargs = n;
    c->call.args = dargs;
    c->call.ntype_args = 0;
    c->call.type_args = NULL;
    c->call.attrs = (ry_attrs){0};
    pe_store_forget(p); /* the callee may write any cell it can reach */
    return pe_mk(p, PS_DYN, pe_emit(p, "r", c, e->type));
}

ps *pe_specialize(pe *p, const ry_expr *e, int gi, ps **args) {
    const ry_expr *fn = p->orig[gi];
    int n = e->call.nargs;
    bool any = false;
    for (int i = 0; i < n; i++) any |= static_fn(args[i]);
    if (!any || n != fn->func.nparams || p->inline_only || p->depth >= MAX_INLINE_DEPTH)
        return NULL;
    spec *s = spec_find(p, gi, n, args);
    if (s) return spec_call(p, e, s, args);
    if (p->nspecs >= MAX_SPECS || p->fuel <= 0) return NULL;
    /* bound as far out as the functions' captures allow, so that later
     * calls with the same functions find it */
    int at = 0;
    for (int i = 0; i < n; i++)
        if (static_fn(args[i]) && args[i]->fn) {
            int k = pe_scope_index(p, args[i]->scope);
            if (k < 0) return NULL; /* made in a scope now closed: its captures are out of reach */
            at = k > at ? k : at;
        }
    p->nspecs++;
    p->fuel--;
    s = RY_NEW(p->a, spec);
    s->scope = p->scopes[at];
    s->global = gi;
    s->nargs = n;
    s->stat = RY_NEW_ARRAY(p->a, ps *, n ? n : 1);
    /* the residual function: one parameter per unknown argument */
    ry_expr *f = ry_expr_new(p->m, RY_EXPR_FUNC, fn->span);
    f->func.params = RY_NEW_ARRAY(p->m->arena, ry_var *, n ? n : 1);
    ry_type *ft = ry_type_new(p->m, RY_TYPE_FUNC, fn->span);
    ft->func.args = RY_NEW_ARRAY(p->m->arena, ry_type *, n ? n : 1);
    ft->func.ret = e->type;
    bool typed = pe_portable(e->type);
    env *en = NULL;
    for (int i = 0; i < n; i++) {
        const ry_var *old = fn->func.params[i];
        ps *v;
        if (static_fn(args[i])) {
            /* inlined in the body: made at its level */
            v = pe_mk(p, PS_CLOSURE, args[i]->dyn);
            *v = *args[i];
            v->level = p->level + 1;
            s->stat[i] = v;
        } else {
            ry_type *t = args[i]->dyn->type;
            ry_var *nv = pass_fresh_var(p->m, old->name, t);
            if (pe_portable(t)) nv->annot = t;
            else typed = false;
            f->func.params[f->func.nparams++] = nv;
            ft->func.args[ft->func.nargs++] = t;
            v = pe_mk(p, PS_DYN, pass_use(p->m, nv));
        }
        en = pe_bind(p, old, v, en);
    }
    f->type = typed ? ft : NULL;
    char name[96];
    snprintf(name, sizeof name, "%s_spec", p->m->globals[gi]->name);
    s->var = pass_fresh_var(p->m, name, f->type);
    s->next = p->specs;
    p->specs = s; /* before the body: its recursive calls find it */
    store saved = p->st;
    p->st = (store){NULL, p->ncells, 0};
    p->level++;
    p->stack_dyn[p->depth] = p->dyn_branches;
    p->stack[p->depth++] = fn;
    f->func.body = pe_eval_scope(p, fn->func.body, en);
    p->depth--;
    p->level--;
    p->st = saved;
    ry_lets_push(p->a, p->scope_lets[at], s->var, f);
    return spec_call(p, e, s, args);
}
