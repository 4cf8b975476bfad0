/*
 * anf.c: A-normal form. Every non-atomic subexpression is let-bound once,
 * so operators, calls, tuples and refs take only atoms (vars, globals,
 * constants, operators, constructors) as operands. The gradient transform
 * relies on it: each value then has one name, to which one adjoint belongs.
 *
 * A node shared in the input DAG (`%0 = e;` in the text) is bound at its
 * first use and later uses in the same or an inner scope refer to that
 * binding. Scopes are if branches, match clauses and function bodies; a
 * binding made inside one is forgotten when it ends (a node first met in the
 * then-branch is bound again where the else-branch or later code needs it).
 * Types of the input nodes are copied to the nodes that replace them.
 * The passes that need it (DCE, CSE, simplify, partial evaluation, fusion,
 * hoisting) and the VM's compiler normalize with it too.
 */
#include <string.h>

#include "relayc/pass.h"

typedef struct anf {
    ry_module *m;
    ry_arena *scratch;
    ry_ptrmap memo;      /* input node -> ry_var bound to its value (0: none in scope) */
    const ry_expr **log; /* memo keys in insertion order, for leaving scopes */
    int nlog, caplog;
} anf;

/* Bindings made in one scope, folded into nested lets at its end. */
typedef ry_lets block;

static void push(anf *s, block *b, ry_var *v, ry_expr *val) { ry_lets_push(s->scratch, b, v, val); }

static void remember(anf *s, const ry_expr *e, ry_var *v) {
    if (s->nlog == s->caplog) {
        int ncap = s->caplog ? s->caplog * 2 : 64;
        const ry_expr **nl = RY_NEW_ARRAY(s->scratch, const ry_expr *, ncap);
        if (s->nlog) memcpy(nl, s->log, sizeof *nl * (size_t)s->nlog);
        s->log = nl;
        s->caplog = ncap;
    }
    s->log[s->nlog++] = e;
    ry_ptrmap_put(s->scratch, &s->memo, e, (intptr_t)v);
}

static ry_var *bound(const anf *s, const ry_expr *e) {
    intptr_t v = 0;
    return ry_ptrmap_get(&s->memo, e, &v) ? (ry_var *)v : NULL;
}

static void forget_since(anf *s, int mark) {
    while (s->nlog > mark)
        ry_ptrmap_put(s->scratch, &s->memo, s->log[--s->nlog], 0);
}

static bool is_atom(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_VAR:
    case RY_EXPR_GLOBAL:
    case RY_EXPR_CONST:
    case RY_EXPR_OP:
    case RY_EXPR_CTOR: return true;
    default: return false;
    }
}

/* A fresh node for an atom, so no node of the output is shared. */
static ry_expr *copy_atom(anf *s, const ry_expr *e) {
    ry_expr *c = ry_expr_new(s->m, e->kind, e->span);
    *c = *e;
    return c;
}

static ry_expr *to_value(anf *s, block *b, const ry_expr *e);
static ry_expr *scope(anf *s, const ry_expr *e);

/* atom(e): e itself if atomic, else the var bound to e's value. */
static ry_expr *to_atom(anf *s, block *b, const ry_expr *e) {
    if (is_atom(e)) return copy_atom(s, e);
    ry_var *v = bound(s, e);
    if (!v) {
        ry_expr *val = to_value(s, b, e);
        if (is_atom(val)) return val; /* a let whose body is an atom */
        v = ry_var_new(s->m, "x", NULL, e->span);
        v->type = e->type;
        push(s, b, v, val);
        remember(s, e, v);
    }
    ry_expr *r = ry_expr_var(s->m, v, e->span);
    r->type = v->type;
    return r;
}

/* fn (params) { body }: the body becomes a scope of its own */
static ry_expr *func(anf *s, const ry_expr *e) {
    ry_expr *f = ry_expr_new(s->m, RY_EXPR_FUNC, e->span);
    f->type = e->type;
    f->func = e->func;
    f->func.body = scope(s, e->func.body);
    return f;
}

static ry_expr *call(anf *s, block *b, const ry_expr *e) {
    const ry_expr *cal = e->call.callee;
    ry_expr *callee = is_atom(cal) ? copy_atom(s, cal) : to_atom(s, b, cal);
    ry_expr **args = RY_NEW_ARRAY(s->scratch, ry_expr *, e->call.nargs);
    for (int i = 0; i < e->call.nargs; i++)
        args[i] = to_atom(s, b, e->call.args[i]);
    ry_expr *c = ry_expr_call(s->m, callee, e->call.nargs, args, e->span);
    c->call.attrs = e->call.attrs;
    c->call.ntype_args = e->call.ntype_args;
    c->call.type_args = e->call.type_args;
    c->type = e->type;
    return c;
}

/* value(e): an expression whose operands are atoms; may add bindings to b.
 *   let x = v; body   =>   [x = value(v)] value(body)   (x keeps its var) */
static ry_expr *to_value(anf *s, block *b, const ry_expr *e) {
    ry_expr *r;
    while (e->kind == RY_EXPR_LET) { /* a loop, not recursion: long let chains */
        push(s, b, e->let.var, to_value(s, b, e->let.value));
        e = e->let.body;
    }
    switch (e->kind) {
    case RY_EXPR_VAR:
    case RY_EXPR_GLOBAL:
    case RY_EXPR_CONST:
    case RY_EXPR_OP:
    case RY_EXPR_CTOR: return copy_atom(s, e);
    case RY_EXPR_CALL: return call(s, b, e);
    case RY_EXPR_FUNC: return func(s, e);
    case RY_EXPR_IF:
        r = ry_expr_new(s->m, RY_EXPR_IF, e->span);
        r->if_.cond = to_atom(s, b, e->if_.cond);
        r->if_.then_ = scope(s, e->if_.then_);
        r->if_.else_ = scope(s, e->if_.else_);
        break;
    case RY_EXPR_MATCH:
        r = ry_expr_new(s->m, RY_EXPR_MATCH, e->span);
        r->match = e->match;
        r->match.data = to_atom(s, b, e->match.data);
        r->match.clauses = RY_NEW_ARRAY(s->m->arena, ry_clause, e->match.nclauses);
        for (int i = 0; i < e->match.nclauses; i++) {
            r->match.clauses[i].pat = e->match.clauses[i].pat;
            r->match.clauses[i].body = scope(s, e->match.clauses[i].body);
        }
        break;
    case RY_EXPR_TUPLE: {
        ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, e->tuple.n);
        for (int i = 0; i < e->tuple.n; i++)
            f[i] = to_atom(s, b, e->tuple.fields[i]);
        r = ry_expr_tuple(s->m, e->tuple.n, f, e->span);
        break;
    }
    case RY_EXPR_PROJ:
        r = ry_expr_proj(s->m, to_atom(s, b, e->proj.tuple), e->proj.index, e->span);
        break;
    case RY_EXPR_REF:
        r = ry_expr_new(s->m, RY_EXPR_REF, e->span);
        r->ref.value = to_atom(s, b, e->ref.value);
        break;
    case RY_EXPR_REF_READ:
        r = ry_expr_new(s->m, RY_EXPR_REF_READ, e->span);
        r->ref_read.ref = to_atom(s, b, e->ref_read.ref);
        break;
    case RY_EXPR_REF_WRITE:
        r = ry_expr_new(s->m, RY_EXPR_REF_WRITE, e->span);
        r->ref_write.ref = to_atom(s, b, e->ref_write.ref);
        r->ref_write.value = to_atom(s, b, e->ref_write.value);
        break;
    default: return copy_atom(s, e);
    }
    r->type = e->type;
    return r;
}

/* A scope: its bindings, then its result as an atom; bindings made inside
 * are forgotten at its end. */
static ry_expr *scope(anf *s, const ry_expr *e) {
    int mark = s->nlog;
    block b = {0};
    ry_expr *tail = to_atom(s, &b, e);
    forget_since(s, mark);
    for (int i = b.n - 1; i >= 0; i--) {
        ry_expr *l = ry_expr_let(s->m, b.vars[i], b.vals[i], tail, b.vals[i]->span);
        l->type = tail->type;
        tail = l;
    }
    return tail;
}

ry_expr *ry_anf(ry_module *m, const ry_expr *e) {
    anf s = {.m = m, .scratch = ry_arena_new()};
    ry_expr *r = e->kind == RY_EXPR_FUNC ? func(&s, e) : scope(&s, e);
    ry_arena_free(s.scratch);
    return r;
}

void ry_anf_module(ry_module *m) {
    for (int i = 0; i < m->nglobals; i++)
        m->globals[i]->func = ry_anf(m, m->globals[i]->func);
}
