/*
 * free_vars.c: the free variables of a function expression, which both
 * engines capture when they make a closure. An explicit stack (no C
 * recursion: bodies may be long chains) over ry_expr_child.
 */
#include <string.h>

#include "ir/parse.h"

typedef struct walk {
    ry_arena *a;
    ry_ptrmap seen, bound, used;
    const ry_expr **stack;
    int n, cap;
    const ry_var **uses;
    int nuses, capuses;
} walk;

static void push(walk *w, const ry_expr *e) {
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        const ry_expr **fresh = RY_NEW_ARRAY(w->a, const ry_expr *, cap);
        if (w->n) memcpy(fresh, w->stack, sizeof *fresh * (size_t)w->n);
        w->stack = fresh;
        w->cap = cap;
    }
    w->stack[w->n++] = e;
}

static void use(walk *w, const ry_var *v) {
    intptr_t dummy;
    if (ry_ptrmap_get(&w->used, v, &dummy)) return;
    ry_ptrmap_put(w->a, &w->used, v, 1);
    if (w->nuses == w->capuses) {
        int cap = w->capuses ? w->capuses * 2 : 16;
        const ry_var **fresh = RY_NEW_ARRAY(w->a, const ry_var *, cap);
        if (w->nuses) memcpy(fresh, w->uses, sizeof *fresh * (size_t)w->nuses);
        w->uses = fresh;
        w->capuses = cap;
    }
    w->uses[w->nuses++] = v;
}

/* Patterns nest only as deep as the text wrote them: recursion is fine. */
static void bind_pattern(walk *w, const ry_pattern *p) {
    switch (p->kind) {
    case RY_PAT_WILDCARD: break;
    case RY_PAT_VAR: ry_ptrmap_put(w->a, &w->bound, p->var, 1); break;
    case RY_PAT_CTOR:
        for (int i = 0; i < p->ctor.n; i++) bind_pattern(w, p->ctor.args[i]);
        break;
    case RY_PAT_TUPLE:
        for (int i = 0; i < p->tuple.n; i++) bind_pattern(w, p->tuple.fields[i]);
        break;
    }
}

/* Used anywhere inside fn (nested functions included) and bound nowhere
 * inside it: each variable is bound once in a well-formed module, so "used
 * minus bound" is exact. */
const ry_var **ry_func_free_vars(ry_arena *scratch, ry_arena *out, const ry_expr *fn, int *n) {
    walk w = {.a = scratch};
    for (int i = 0; i < fn->func.nparams; i++) ry_ptrmap_put(scratch, &w.bound, fn->func.params[i], 1);
    push(&w, fn->func.body);
    while (w.n > 0) {
        const ry_expr *e = w.stack[--w.n];
        intptr_t dummy;
        if (ry_ptrmap_get(&w.seen, e, &dummy)) continue; /* a node shared in the DAG */
        ry_ptrmap_put(scratch, &w.seen, e, 1);
        if (e->kind == RY_EXPR_VAR) use(&w, e->var.var);
        if (e->kind == RY_EXPR_LET) ry_ptrmap_put(scratch, &w.bound, e->let.var, 1);
        if (e->kind == RY_EXPR_FUNC)
            for (int i = 0; i < e->func.nparams; i++) ry_ptrmap_put(scratch, &w.bound, e->func.params[i], 1);
        if (e->kind == RY_EXPR_MATCH)
            for (int i = 0; i < e->match.nclauses; i++) bind_pattern(&w, e->match.clauses[i].pat);
        int slot;
        const ry_expr *c;
        for (int i = 0; (c = ry_expr_child(e, i, &slot)); i++) push(&w, c);
    }
    const ry_var **free = RY_NEW_ARRAY(out, const ry_var *, w.nuses ? w.nuses : 1);
    *n = 0;
    for (int i = 0; i < w.nuses; i++) {
        intptr_t dummy;
        if (!ry_ptrmap_get(&w.bound, w.uses[i], &dummy)) free[(*n)++] = w.uses[i];
    }
    return free;
}
