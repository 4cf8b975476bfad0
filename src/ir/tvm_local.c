/*
 * tvm_local.c: the rewrite printing for TVM needs beyond spelling (with
 * tvm_adt.c's for ADTs holding refs, which runs first). TVM's parser
 * type-checks each global on its own, and its text format has no way to
 * write a ref type, so a global whose parameters hold refs (the
 * gradient twins @f_grad, a user's function taking a ref) can never be
 * checked there: its parameters print unannotated and TVM cannot infer
 * them from one body. As a local function bound by `let`, TVM infers them
 * from the calls in the same body. So each such global becomes
 * `let %f_grad = fn (...) { ... };` at the top of every global that reaches
 * it, callees first, and is dropped from the module. Printing itself
 * (print.c) stays a function of a const module; this pass mutates one.
 */
#include <string.h>

#include "ir/parse.h"

typedef struct loc {
    ry_module *m;
    ry_arena *a;
    int n;
    bool *local;   /* per global: printed as a local function */
    int *state;    /* DFS: 0 new, 1 on the stack, 2 done */
    int **callees; /* per global: the globals its body names, -1 ended */
    ry_var **vars; /* per local global: the var that replaces it */
} loc;

/* Whether TVM must infer a parameter of this type: it holds a ref, which
 * its text format cannot write. Without an annotation only the checker's
 * type tells (relayc fmt does not check: a user's unannotated parameter
 * stays as written). */
static bool param_needs_local(const ry_var *v) {
    return ry_type_has_ref(v->annot ? v->annot : v->type);
}

/* A result holding refs counts too: TVM checks a recursive global's
 * unannotated result on its own and leaves the refs' contents unsolved
 * (the AD's @in_List, which pairs each tensor of a list with a cell). */
static bool needs_local(const ry_global *g) {
    const ry_expr *f = g->func;
    for (int i = 0; i < f->func.nparams; i++)
        if (param_needs_local(f->func.params[i])) return true;
    const ry_type *ret = f->func.ret_annot ? f->func.ret_annot
                         : f->type && f->type->kind == RY_TYPE_FUNC ? f->type->func.ret : NULL;
    return ry_type_has_ref(ret);
}

/* Each node of a DAG once, without C recursion (bodies may be long
 * chains): push the root, then take nodes and push their children. The
 * module is rewritten in place, hence nodes without const. */
typedef struct dag_walk {
    ry_arena *a;
    ry_ptrmap seen;
    ry_expr **st;
    int n, cap;
} dag_walk;

static void walk_push(dag_walk *w, const ry_expr *e) {
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        ry_expr **fresh = RY_NEW_ARRAY(w->a, ry_expr *, cap);
        if (w->n) memcpy(fresh, w->st, sizeof *fresh * (size_t)w->n);
        w->st = fresh;
        w->cap = cap;
    }
    w->st[w->n++] = (ry_expr *)e;
}

static ry_expr *walk_next(dag_walk *w) {
    while (w->n > 0) {
        ry_expr *e = w->st[--w->n];
        intptr_t dummy;
        if (ry_ptrmap_get(&w->seen, e, &dummy)) continue;
        ry_ptrmap_put(w->a, &w->seen, e, 1);
        return e;
    }
    return NULL;
}

static void walk_children(dag_walk *w, const ry_expr *e) {
    int slot;
    const ry_expr *c;
    for (int i = 0; (c = ry_expr_child(e, i, &slot)); i++) walk_push(w, c);
}

/* The global nodes of g's body, as indices (each once), -1 ended. */
static int *callees_of(loc *l, const ry_global *g) {
    ry_ptrmap named = {0};
    int nout = 0, capout = 8;
    int *out = RY_NEW_ARRAY(l->a, int, capout);
    dag_walk w = {.a = l->a};
    walk_push(&w, g->func);
    for (ry_expr *e; (e = walk_next(&w)); walk_children(&w, e)) {
        intptr_t dummy;
        int k = e->kind == RY_EXPR_GLOBAL ? ry_module_global_index(l->m, e->global.name) : -1;
        if (k < 0 || ry_ptrmap_get(&named, l->m->globals[k], &dummy)) continue;
        ry_ptrmap_put(l->a, &named, l->m->globals[k], 1);
        if (nout + 1 >= capout) {
            int *fresh = RY_NEW_ARRAY(l->a, int, capout * 2);
            memcpy(fresh, out, sizeof *out * (size_t)nout);
            out = fresh;
            capout *= 2;
        }
        out[nout++] = k;
    }
    out[nout] = -1;
    return out;
}

/* Marks as not local every local global on a cycle of two or more local
 * globals (mutual recursion: nested lets bind one name at a time, so such
 * globals stay globals, and TVM cannot check them). Returns how many. */
static int break_cycles_from(loc *l, int i, int *stack, int depth) {
    l->state[i] = 1;
    stack[depth] = i;
    int broken = 0;
    for (int *c = l->callees[i]; *c >= 0; c++) {
        int k = *c;
        if (k == i || !l->local[k]) continue;
        if (l->state[k] == 1) {
            for (int d = depth; d >= 0 && stack[d] != k; d--)
                if (l->local[stack[d]]) l->local[stack[d]] = false, broken++;
            if (l->local[k]) l->local[k] = false, broken++;
        } else if (l->state[k] == 0) {
            broken += break_cycles_from(l, k, stack, depth + 1);
        }
    }
    l->state[i] = 2;
    return broken;
}

/* Appends to order the local globals i reaches, callees first (each once:
 * state marks them). */
static void order_from(loc *l, int i, int *order, int *n) {
    l->state[i] = 1;
    for (int *c = l->callees[i]; *c >= 0; c++)
        if (l->local[*c] && l->state[*c] == 0) order_from(l, *c, order, n);
    order[(*n)++] = i;
}

/* Binds the local globals root (index ri) reaches at the top of its body,
 * callees first, and marks them reached. */
static void bind_locals(loc *l, int ri, bool *reached) {
    int *order = RY_NEW_ARRAY(l->a, int, l->n + 1);
    int n = 0;
    memset(l->state, 0, sizeof *l->state * (size_t)l->n);
    l->state[ri] = 1;
    for (int *c = l->callees[ri]; *c >= 0; c++)
        if (l->local[*c] && l->state[*c] == 0) order_from(l, *c, order, &n);
    ry_expr *f = l->m->globals[ri]->func, *body = f->func.body;
    for (int k = n - 1; k >= 0; k--) {
        ry_global *g = l->m->globals[order[k]];
        body = ry_expr_let(l->m, l->vars[order[k]], g->func, body, g->span);
        body->type = f->func.body->type;
        reached[order[k]] = true;
    }
    f->func.body = body;
}

/* Whether t mentions one of the n type variables tv (parse.h). */
bool ry_type_mentions(const ry_type *t, ry_type *const *tv, int n) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_VAR:
        for (int i = 0; i < n; i++)
            if (tv[i]->var.id == t->var.id) return true;
        return false;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (ry_type_mentions(t->tuple.fields[i], tv, n)) return true;
        return false;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (ry_type_mentions(t->func.args[i], tv, n)) return true;
        return ry_type_mentions(t->func.ret, tv, n);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (ry_type_mentions(t->call.args[i], tv, n)) return true;
        return false;
    case RY_TYPE_REF: return ry_type_mentions(t->ref.inner, tv, n);
    default: return false;
    }
}

static void forget_var(ry_var *v, ry_type *const *tv, int n) {
    if (ry_type_mentions(v->annot, tv, n)) v->annot = NULL;
    if (ry_type_mentions(v->type, tv, n)) v->type = NULL;
}

static void forget_pattern(ry_pattern *p, ry_type *const *tv, int n) {
    if (p->kind == RY_PAT_VAR) forget_var(p->var, tv, n);
    for (int i = 0; p->kind == RY_PAT_CTOR && i < p->ctor.n; i++) forget_pattern(p->ctor.args[i], tv, n);
    for (int i = 0; p->kind == RY_PAT_TUPLE && i < p->tuple.n; i++) forget_pattern(p->tuple.fields[i], tv, n);
}

/* A polymorphic global turned local loses its type parameters, and every
 * annotation inside it that names them: TVM instantiates a function's type
 * parameters at a call before it has solved the types of its unannotated
 * parameters, so the twin of @compose[A, B, C] fails there; monomorphic,
 * TVM infers it from its uses (tvm_mono.c made one copy per type). */
static void forget_tparams(loc *l, ry_expr *fn) {
    ry_type **tv = fn->func.tparams;
    int n = fn->func.ntparams;
    fn->func.ntparams = 0;
    dag_walk w = {.a = l->a};
    walk_push(&w, fn);
    for (ry_expr *e; (e = walk_next(&w)); walk_children(&w, e)) {
        if (e->kind == RY_EXPR_LET) forget_var(e->let.var, tv, n);
        if (e->kind == RY_EXPR_FUNC) {
            for (int i = 0; i < e->func.nparams; i++) forget_var(e->func.params[i], tv, n);
            if (ry_type_mentions(e->func.ret_annot, tv, n)) e->func.ret_annot = NULL;
        }
        for (int i = 0; e->kind == RY_EXPR_MATCH && i < e->match.nclauses; i++)
            forget_pattern(e->match.clauses[i].pat, tv, n);
    }
}

/* Every use of a local global (a shared node may stand for many) becomes
 * its variable: in place, since the module is printed and then freed. */
static void retarget_uses(loc *l) {
    for (int i = 0; i < l->n; i++) {
        dag_walk w = {.a = l->a};
        walk_push(&w, l->m->globals[i]->func);
        for (ry_expr *e; (e = walk_next(&w)); walk_children(&w, e)) {
            int k = e->kind == RY_EXPR_GLOBAL ? ry_module_global_index(l->m, e->global.name) : -1;
            if (k >= 0 && l->local[k]) {
                e->kind = RY_EXPR_VAR; /* a leaf: walk_children finds nothing */
                e->var.var = l->vars[k];
            }
        }
    }
}

void ry_module_localize_for_tvm(ry_module *m, ry_print_report *rep) {
    ry_tvm_generalize_ref_adts(m, rep);
    ry_tvm_monomorphize(m, needs_local, rep);
    int n = m->nglobals;
    if (n == 0) return;
    loc l = {.m = m, .a = ry_arena_new(), .n = n};
    l.local = RY_NEW_ARRAY(l.a, bool, n);
    l.state = RY_NEW_ARRAY(l.a, int, n);
    l.callees = RY_NEW_ARRAY(l.a, int *, n);
    l.vars = RY_NEW_ARRAY(l.a, ry_var *, n);
    int nlocal = 0;
    for (int i = 0; i < n; i++) {
        l.local[i] = needs_local(m->globals[i]);
        l.callees[i] = callees_of(&l, m->globals[i]);
        nlocal += l.local[i];
    }
    if (nlocal == 0) {
        ry_arena_free(l.a);
        return;
    }
    int *stack = RY_NEW_ARRAY(l.a, int, n);
    int cyclic = 0;
    for (int i = 0; i < n; i++)
        if (l.local[i] && l.state[i] == 0) cyclic += break_cycles_from(&l, i, stack, 0);
    for (int i = 0; i < n; i++)
        if (l.local[i]) {
            ry_global *g = m->globals[i];
            l.vars[i] = ry_var_new(m, g->name, NULL, g->span);
            l.vars[i]->type = g->func->func.ntparams ? NULL : g->func->type;
            if (g->func->func.ntparams) forget_tparams(&l, g->func);
        }
    retarget_uses(&l);
    int localized = 0, kept = 0;
    bool *reached = RY_NEW_ARRAY(l.a, bool, n); /* a local global no kept one reaches is printed nowhere */
    for (int i = 0; i < n; i++)
        if (!l.local[i]) bind_locals(&l, i, reached);
    for (int i = 0; i < n; i++) {
        if (!l.local[i]) {
            m->globals[kept++] = m->globals[i];
            continue;
        }
        localized += reached[i];
        if (rep) rep->dropped_globals += !reached[i];
    }
    m->nglobals = kept;
    if (rep) {
        rep->localized += localized;
        rep->unsupported += cyclic;
    }
    ry_arena_free(l.a);
}
