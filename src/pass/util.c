/*
 * util.c: helpers the passes share: the let-chain builder, fresh vars,
 * purity and atom predicates, and counting node kinds (for tests and
 * reports). Nothing here rewrites a program by itself.
 */
#include <string.h>

#include "pass/pass_impl.h"

ry_expr *lets_close(ry_module *m, const lets *l, ry_expr *body) {
    int n = l->n;
    /* `let %x = v; %x` is just v (not for a function: it may call itself) */
    if (n && body->kind == RY_EXPR_VAR && body->var.var == l->vars[n - 1] &&
        l->vals[n - 1]->kind != RY_EXPR_FUNC) {
        ry_type *t = body->type;
        body = l->vals[--n];
        if (!body->type) body->type = t;
    }
    for (int i = n - 1; i >= 0; i--) {
        ry_expr *e = ry_expr_let(m, l->vars[i], l->vals[i], body, l->vals[i]->span);
        e->type = body->type;
        body = e;
    }
    return body;
}

ry_var *pass_fresh_var(ry_module *m, const char *name, ry_type *t) {
    ry_var *v = ry_var_new(m, name && *name ? name : "x", NULL, RY_NO_SPAN);
    v->type = t;
    return v;
}

ry_expr *pass_use(ry_module *m, ry_var *v) {
    ry_expr *e = ry_expr_var(m, v, RY_NO_SPAN);
    e->type = v->type;
    return e;
}

bool pass_is_atom(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_VAR: case RY_EXPR_GLOBAL: case RY_EXPR_CONST: case RY_EXPR_OP:
    case RY_EXPR_CTOR:
        return true;
    case RY_EXPR_TUPLE:
        return e->tuple.n == 0;
    default:
        return false;
    }
}

bool pass_foldable_type(const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    int64_t n = 1;
    for (int i = 0; i < t->tensor.ndim; i++) {
        if (t->tensor.dims[i].kind != RY_DIM_CONST || t->tensor.dims[i].value < 0) return false;
        n *= t->tensor.dims[i].value;
        if (n > RY_FOLD_MAX) return false;
    }
    return true;
}

static bool same_attr_value(const ry_attr_value *x, const ry_attr_value *y) {
    if (x->kind != y->kind) return false;
    switch (x->kind) {
    case RY_AV_NONE: return true;
    case RY_AV_INT: return x->i == y->i;
    case RY_AV_FLOAT: return x->f == y->f;
    case RY_AV_BOOL: return x->b == y->b;
    case RY_AV_STR: return strcmp(x->s, y->s) == 0;
    case RY_AV_LIST:
        if (x->list.n != y->list.n) return false;
        for (int i = 0; i < x->list.n; i++)
            if (!same_attr_value(&x->list.items[i], &y->list.items[i])) return false;
        return true;
    }
    return false;
}

bool pass_same_attrs(const ry_attrs *x, const ry_attrs *y) {
    if (x->n != y->n) return false;
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->items[i].name, y->items[i].name) != 0 ||
            !same_attr_value(&x->items[i].value, &y->items[i].value))
            return false;
    return true;
}

/* Whether the value of static type at may fail the run-time check of a
 * parameter of type pt: a dimension at leaves open (?) that pt fixes or
 * names (the check binds a name across parameters). */
static bool looser(const ry_type *at, const ry_type *pt) {
    if (!at || !pt || at->kind != pt->kind) return false;
    if (at->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < at->tuple.n && i < pt->tuple.n; i++)
            if (looser(at->tuple.fields[i], pt->tuple.fields[i])) return true;
        return false;
    }
    if (at->kind != RY_TYPE_TENSOR || at->tensor.ndim != pt->tensor.ndim) return false;
    for (int d = 0; d < at->tensor.ndim; d++)
        if (at->tensor.dims[d].kind == RY_DIM_ANY && pt->tensor.dims[d].kind != RY_DIM_ANY)
            return true;
    return false;
}

bool ry_call_checks_shapes(const ry_expr *fn, const ry_expr *call) {
    if (fn->kind != RY_EXPR_FUNC) return false;
    for (int i = 0; i < call->call.nargs && i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        if (looser(call->call.args[i]->type, p->annot ? p->annot : p->type)) return true;
    }
    return false;
}

ry_expr *pass_map_scopes(ry_module *m, const ry_expr *e, pass_scope_fn fn, void *ctx) {
    if (e->kind != RY_EXPR_IF && e->kind != RY_EXPR_MATCH && e->kind != RY_EXPR_FUNC) return NULL;
    ry_expr *n = ry_expr_new(m, e->kind, e->span);
    *n = *e;
    switch (e->kind) {
    case RY_EXPR_IF:
        n->if_.then_ = fn(ctx, e->if_.then_);
        n->if_.else_ = fn(ctx, e->if_.else_);
        break;
    case RY_EXPR_MATCH:
        n->match.clauses = RY_NEW_ARRAY(m->arena, ry_clause, e->match.nclauses);
        for (int i = 0; i < e->match.nclauses; i++) {
            n->match.clauses[i].pat = e->match.clauses[i].pat;
            n->match.clauses[i].body = fn(ctx, e->match.clauses[i].body);
        }
        break;
    default: n->func.body = fn(ctx, e->func.body); break;
    }
    return n;
}

/* pure(e): the node and everything it evaluates (not the bodies of
 * functions it merely creates) may be dropped when its value is unused. */
bool pass_is_pure(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_VAR: case RY_EXPR_GLOBAL: case RY_EXPR_CONST: case RY_EXPR_OP:
    case RY_EXPR_CTOR: case RY_EXPR_FUNC:
        return true;
    case RY_EXPR_CALL:
        if (e->call.callee->kind != RY_EXPR_OP && e->call.callee->kind != RY_EXPR_CTOR)
            return false;
        /* a random operator draws from the run's stream even when its
         * result is dead: removing it would shift every later draw */
        if (e->call.callee->kind == RY_EXPR_OP && e->call.callee->op.op->random)
            return false;
        for (int i = 0; i < e->call.nargs; i++)
            if (!pass_is_pure(e->call.args[i])) return false;
        return true;
    case RY_EXPR_LET:
        return pass_is_pure(e->let.value) && pass_is_pure(e->let.body);
    case RY_EXPR_IF:
        return pass_is_pure(e->if_.cond) && pass_is_pure(e->if_.then_) &&
               pass_is_pure(e->if_.else_);
    case RY_EXPR_MATCH:
        if (!e->match.complete || !pass_is_pure(e->match.data)) return false;
        for (int i = 0; i < e->match.nclauses; i++)
            if (!pass_is_pure(e->match.clauses[i].body)) return false;
        return true;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++)
            if (!pass_is_pure(e->tuple.fields[i])) return false;
        return true;
    case RY_EXPR_PROJ: return pass_is_pure(e->proj.tuple);
    case RY_EXPR_REF: return pass_is_pure(e->ref.value);
    case RY_EXPR_REF_READ: return pass_is_pure(e->ref_read.ref);
    case RY_EXPR_REF_WRITE: return false;
    }
    return false;
}

static void count(const ry_expr *e, int *counts) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body) { /* chains are long: a loop */
        counts[RY_EXPR_LET]++;
        count(e->let.value, counts);
    }
    counts[e->kind]++;
    switch (e->kind) {
    case RY_EXPR_CALL:
        count(e->call.callee, counts);
        for (int i = 0; i < e->call.nargs; i++) count(e->call.args[i], counts);
        break;
    case RY_EXPR_IF:
        count(e->if_.cond, counts);
        count(e->if_.then_, counts);
        count(e->if_.else_, counts);
        break;
    case RY_EXPR_MATCH:
        count(e->match.data, counts);
        for (int i = 0; i < e->match.nclauses; i++) count(e->match.clauses[i].body, counts);
        break;
    case RY_EXPR_FUNC: count(e->func.body, counts); break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) count(e->tuple.fields[i], counts);
        break;
    case RY_EXPR_PROJ: count(e->proj.tuple, counts); break;
    case RY_EXPR_REF: count(e->ref.value, counts); break;
    case RY_EXPR_REF_READ: count(e->ref_read.ref, counts); break;
    case RY_EXPR_REF_WRITE:
        count(e->ref_write.ref, counts);
        count(e->ref_write.value, counts);
        break;
    default: break;
    }
}

void ry_expr_count_kinds(const ry_expr *e, int *counts) {
    memset(counts, 0, sizeof(int) * (RY_EXPR_REF_WRITE + 1));
    count(e, counts);
}

/* ---- recursion in the call graph ---- */

/* Calls visit(ctx, name) for every global e mentions (a DAG node shared by
 * %N bindings is visited once per path: fine for a yes/no question). */
static void each_global(const ry_expr *e, void (*visit)(void *, const char *), void *ctx) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body) each_global(e->let.value, visit, ctx);
    switch (e->kind) {
    case RY_EXPR_GLOBAL: visit(ctx, e->global.name); break;
    case RY_EXPR_CALL:
        each_global(e->call.callee, visit, ctx);
        for (int i = 0; i < e->call.nargs; i++) each_global(e->call.args[i], visit, ctx);
        break;
    case RY_EXPR_IF:
        each_global(e->if_.cond, visit, ctx);
        each_global(e->if_.then_, visit, ctx);
        each_global(e->if_.else_, visit, ctx);
        break;
    case RY_EXPR_MATCH:
        each_global(e->match.data, visit, ctx);
        for (int i = 0; i < e->match.nclauses; i++) each_global(e->match.clauses[i].body, visit, ctx);
        break;
    case RY_EXPR_FUNC: each_global(e->func.body, visit, ctx); break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) each_global(e->tuple.fields[i], visit, ctx);
        break;
    case RY_EXPR_PROJ: each_global(e->proj.tuple, visit, ctx); break;
    case RY_EXPR_REF: each_global(e->ref.value, visit, ctx); break;
    case RY_EXPR_REF_READ: each_global(e->ref_read.ref, visit, ctx); break;
    case RY_EXPR_REF_WRITE:
        each_global(e->ref_write.ref, visit, ctx);
        each_global(e->ref_write.value, visit, ctx);
        break;
    default: break;
    }
}

/* Depth-first search with three colours: a grey global met again closes a cycle. */
typedef struct cycle_search {
    const ry_module *m;
    char *colour; /* 0 white, 1 grey (on the path), 2 black (done) */
    bool found;
} cycle_search;

static void search_from(void *ctx, const char *name) {
    cycle_search *s = ctx;
    int i = 0;
    while (i < s->m->nglobals && strcmp(s->m->globals[i]->name, name) != 0) i++;
    if (i == s->m->nglobals || s->found || s->colour[i] == 2) return;
    if (s->colour[i] == 1) {
        s->found = true;
        return;
    }
    s->colour[i] = 1;
    each_global(s->m->globals[i]->func, search_from, s);
    s->colour[i] = 2;
}

bool ry_global_reaches_recursion(const ry_module *m, const char *name) {
    char *colour = ry_calloc((size_t)(m->nglobals ? m->nglobals : 1), 1);
    if (!colour) return true; /* the cautious answer */
    cycle_search s = {m, colour, false};
    search_from(&s, name);
    ry_free(colour);
    return s.found;
}

/* Whether global i calls itself, directly or through others. */
typedef struct self_search {
    const ry_module *m;
    char *seen;
    int target;
    bool found;
} self_search;

static void self_from(void *ctx, const char *name) {
    self_search *s = ctx;
    int i = 0;
    while (i < s->m->nglobals && strcmp(s->m->globals[i]->name, name) != 0) i++;
    if (i == s->m->nglobals || s->found || s->seen[i]) return;
    if (i == s->target) {
        s->found = true;
        return;
    }
    s->seen[i] = 1;
    each_global(s->m->globals[i]->func, self_from, s);
}

/* The visited marks of a search: on the stack for modules of up to 512
 * globals, so the answer (and what inlining does with it) never depends
 * on whether an allocation succeeds; larger modules allocate, and without
 * memory give the cautious answer (recursive: nothing is inlined). */
enum { STACK_GLOBALS = 512 };

static char *marks(const ry_module *m, char *stack) {
    size_t n = (size_t)(m->nglobals ? m->nglobals : 1);
    return n <= STACK_GLOBALS ? memset(stack, 0, n) : ry_calloc(n, 1);
}

bool pass_global_reaches(const ry_module *m, const char *from, int target) {
    char stack[STACK_GLOBALS], *seen = marks(m, stack);
    if (!seen) return true; /* the cautious answer */
    self_search s = {m, seen, target, false};
    self_from(&s, from);
    if (seen != stack) ry_free(seen);
    return s.found;
}

bool ry_global_recursive(const ry_module *m, int i) {
    char stack[STACK_GLOBALS], *seen = marks(m, stack);
    if (!seen) return true; /* the cautious answer */
    self_search s = {m, seen, i, false};
    each_global(m->globals[i]->func, self_from, &s);
    if (seen != stack) ry_free(seen);
    return s.found;
}
