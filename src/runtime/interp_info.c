/*
 * interp_info.c: what the interpreter computes once per function
 * expression: its free variables (what a closure captures), a slot for
 * every variable it binds, and a memo slot for every node shared within its
 * body (a `%0 = e;` used twice is evaluated once). Walks use explicit
 * stacks, so a program nested 100,000 deep does not grow the C stack.
 */
#include <string.h>

#include "runtime/interp_impl.h"

/* ---- an explicit stack of nodes ---- */

typedef struct nstack {
    const ry_expr **items;
    int n, cap;
} nstack;

static void push(ry_arena *a, nstack *s, const ry_expr *e) {
    if (s->n == s->cap) {
        int ncap = s->cap ? s->cap * 2 : 64;
        const ry_expr **fresh = RY_NEW_ARRAY(a, const ry_expr *, ncap);
        if (s->n) memcpy(fresh, s->items, sizeof *fresh * (size_t)s->n);
        s->items = fresh;
        s->cap = ncap;
    }
    s->items[s->n++] = e;
}

/* Pushes e's children; a nested function's body only when into_funcs. */
static void push_children(ry_arena *a, nstack *s, const ry_expr *e, bool into_funcs) {
    switch (e->kind) {
    case RY_EXPR_VAR:
    case RY_EXPR_GLOBAL:
    case RY_EXPR_CONST:
    case RY_EXPR_OP:
    case RY_EXPR_CTOR: break;
    case RY_EXPR_CALL:
        push(a, s, e->call.callee);
        for (int i = 0; i < e->call.nargs; i++) push(a, s, e->call.args[i]);
        break;
    case RY_EXPR_LET:
        push(a, s, e->let.value);
        push(a, s, e->let.body);
        break;
    case RY_EXPR_IF:
        push(a, s, e->if_.cond);
        push(a, s, e->if_.then_);
        push(a, s, e->if_.else_);
        break;
    case RY_EXPR_MATCH:
        push(a, s, e->match.data);
        for (int i = 0; i < e->match.nclauses; i++) push(a, s, e->match.clauses[i].body);
        break;
    case RY_EXPR_FUNC:
        if (into_funcs) push(a, s, e->func.body);
        break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) push(a, s, e->tuple.fields[i]);
        break;
    case RY_EXPR_PROJ: push(a, s, e->proj.tuple); break;
    case RY_EXPR_REF: push(a, s, e->ref.value); break;
    case RY_EXPR_REF_READ: push(a, s, e->ref_read.ref); break;
    case RY_EXPR_REF_WRITE:
        push(a, s, e->ref_write.ref);
        push(a, s, e->ref_write.value);
        break;
    }
}

/* Calls add(ctx, var) for every variable a pattern binds. Patterns nest
 * only as deep as the text writes them, so recursion here is fine. */
typedef void (*var_fn)(void *ctx, const ry_var *v);

static void pattern_vars(const ry_pattern *p, var_fn add, void *ctx) {
    switch (p->kind) {
    case RY_PAT_WILDCARD: return;
    case RY_PAT_VAR: add(ctx, p->var); return;
    case RY_PAT_CTOR:
        for (int i = 0; i < p->ctor.n; i++) pattern_vars(p->ctor.args[i], add, ctx);
        return;
    case RY_PAT_TUPLE:
        for (int i = 0; i < p->tuple.n; i++) pattern_vars(p->tuple.fields[i], add, ctx);
        return;
    }
}

typedef struct bind_ctx {
    ry_arena *a;
    ry_ptrmap *set;
} bind_ctx;

static void mark_bound(void *ctx, const ry_var *v) {
    bind_ctx *b = ctx;
    ry_ptrmap_put(b->a, b->set, v, 1);
}

/* Free variables of fn: every variable used anywhere inside it (nested
 * functions included) that nothing inside it binds. Variables are bound
 * once each in a well-formed module, so "used minus bound" is exact. */
static void find_free(machine *mc, const ry_expr *fn, fninfo *info) {
    ry_arena *a = mc->tmp;
    ry_ptrmap seen = {0}, bound = {0}, used = {0};
    nstack st = {0};
    int nused = 0, capused = 16;
    const ry_var **uses = RY_NEW_ARRAY(a, const ry_var *, capused);
    for (int i = 0; i < fn->func.nparams; i++) ry_ptrmap_put(a, &bound, fn->func.params[i], 1);
    push(a, &st, fn->func.body);
    while (st.n > 0) {
        const ry_expr *e = st.items[--st.n];
        intptr_t dummy;
        if (ry_ptrmap_get(&seen, e, &dummy)) continue;
        ry_ptrmap_put(a, &seen, e, 1);
        if (e->kind == RY_EXPR_VAR && !ry_ptrmap_get(&used, e->var.var, &dummy)) {
            ry_ptrmap_put(a, &used, e->var.var, 1);
            if (nused == capused) {
                const ry_var **fresh = RY_NEW_ARRAY(a, const ry_var *, capused * 2);
                memcpy(fresh, uses, sizeof *fresh * (size_t)nused);
                uses = fresh;
                capused *= 2;
            }
            uses[nused++] = e->var.var;
        }
        if (e->kind == RY_EXPR_LET) ry_ptrmap_put(a, &bound, e->let.var, 1);
        if (e->kind == RY_EXPR_FUNC)
            for (int i = 0; i < e->func.nparams; i++) ry_ptrmap_put(a, &bound, e->func.params[i], 1);
        if (e->kind == RY_EXPR_MATCH)
            for (int i = 0; i < e->match.nclauses; i++)
                pattern_vars(e->match.clauses[i].pat, mark_bound, &(bind_ctx){a, &bound});
        push_children(a, &st, e, true);
    }
    info->free = RY_NEW_ARRAY(mc->info_arena, const ry_var *, nused);
    for (int i = 0; i < nused; i++) {
        intptr_t dummy;
        if (!ry_ptrmap_get(&bound, uses[i], &dummy)) info->free[info->nfree++] = uses[i];
    }
}

static void add_slot(machine *mc, fninfo *info, const void *key) {
    intptr_t dummy;
    if (!ry_ptrmap_get(&info->slots, key, &dummy))
        ry_ptrmap_put(mc->info_arena, &info->slots, key, info->nslots++);
}

typedef struct slot_ctx {
    machine *mc;
    fninfo *info;
} slot_ctx;

static void slot_var(void *ctx, const ry_var *v) {
    slot_ctx *c = ctx;
    add_slot(c->mc, c->info, v);
}

/* Worth a memo slot: nodes whose evaluation costs or has effects. */
static bool memoizable(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_VAR:
    case RY_EXPR_GLOBAL:
    case RY_EXPR_CONST:
    case RY_EXPR_OP:
    case RY_EXPR_CTOR:
    case RY_EXPR_FUNC: return false;
    default: return true;
    }
}

/* Slots for this function's own scope: binders, and nodes reached along
 * more than one edge (nested function bodies are their own scopes). */
static void find_slots(machine *mc, const ry_expr *fn, fninfo *info) {
    ry_arena *a = mc->tmp;
    ry_ptrmap parents = {0};
    nstack st = {0};
    for (int i = 0; i < info->nfree; i++) add_slot(mc, info, info->free[i]);
    for (int i = 0; i < fn->func.nparams; i++) add_slot(mc, info, fn->func.params[i]);
    push(a, &st, fn->func.body);
    while (st.n > 0) {
        const ry_expr *e = st.items[--st.n];
        intptr_t count = 0;
        bool again = ry_ptrmap_get(&parents, e, &count);
        ry_ptrmap_put(a, &parents, e, count + 1);
        if (again) {
            if (count == 1 && memoizable(e)) add_slot(mc, info, e);
            continue;
        }
        if (e->kind == RY_EXPR_LET) add_slot(mc, info, e->let.var);
        if (e->kind == RY_EXPR_MATCH)
            for (int i = 0; i < e->match.nclauses; i++)
                pattern_vars(e->match.clauses[i].pat, slot_var, &(slot_ctx){mc, info});
        push_children(a, &st, e, false);
    }
}

const fninfo *info_get(machine *mc, const ry_expr *fn) {
    intptr_t got;
    if (ry_ptrmap_get(&mc->infos, fn, &got)) return (const fninfo *)got;
    fninfo *info = RY_NEW(mc->info_arena, fninfo);
    info->fn = fn;
    find_free(mc, fn, info);
    find_slots(mc, fn, info);
    ry_arena_reset(mc->tmp);
    ry_ptrmap_put(mc->info_arena, &mc->infos, fn, (intptr_t)info);
    return info;
}
