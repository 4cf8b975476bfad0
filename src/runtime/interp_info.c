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

static void find_free(machine *mc, const ry_expr *fn, fninfo *info) {
    info->free = ry_func_free_vars(mc->tmp, mc->info_arena, fn, &info->nfree);
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

typedef struct finding {
    machine *mc;
    const ry_expr *fn;
    fninfo *info;
} finding;

/* fn's info, entered in mc->infos last: out of memory before that, a
 * half-made info is left in the arena, unreachable. */
static void find_info(void *c) {
    finding *f = c;
    machine *mc = f->mc;
    fninfo *info = RY_NEW(mc->info_arena, fninfo);
    info->fn = f->fn;
    find_free(mc, f->fn, info);
    find_slots(mc, f->fn, info);
    ry_arena_reset(mc->tmp);
    ry_ptrmap_put(mc->info_arena, &mc->infos, f->fn, (intptr_t)info);
    f->info = info;
}

const fninfo *info_get(machine *mc, const ry_expr *fn) {
    intptr_t got;
    if (ry_ptrmap_get(&mc->infos, fn, &got)) return (const fninfo *)got;
    finding f = {mc, fn, NULL};
    if (!ry_oom_catch(find_info, &f)) return f.info;
    ry_arena_reset(mc->tmp);
    return NULL;
}
