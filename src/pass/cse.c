/*
 * cse.c: common-subexpression elimination and constant folding over
 * A-normal form. CSE: a let binding a pure operator call (or a projection)
 * whose operator, attributes and argument atoms equal those of an earlier
 * binding in scope reuses that binding's var. Folding: an operator call on
 * constants runs its kernel on the host target now. Both walk let chains with a scoped
 * table of available bindings (a hash table whose entries are popped when
 * their scope closes) and a substitution of vars by atoms.
 */
#include <string.h>

#include "relayc/pass.h"
#include "pass/pass_impl.h"

typedef struct avail {
    ry_expr *val;  /* the (rewritten) value */
    ry_var *var;
    struct avail *next;
} avail;

#define NBUCKETS 4096

typedef struct cse {
    ry_module *m;
    ry_arena *a;
    avail *buckets[NBUCKETS]; /* available bindings by hash of their value */
    int *undo;                /* buckets pushed, innermost scope last */
    int nundo, cap_undo;
    ry_expr **subst; /* var id -> replacement atom */
    int nids;
    bool fold, share;
} cse;

static ry_expr *atom(cse *c, ry_expr *e) {
    if (e->kind == RY_EXPR_VAR && e->var.var->id < c->nids && c->subst[e->var.var->id])
        return c->subst[e->var.var->id];
    return e;
}

static bool same_atom(const ry_expr *a, const ry_expr *b) {
    if (a == b) return true;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case RY_EXPR_VAR: return a->var.var == b->var.var;
    case RY_EXPR_GLOBAL: return strcmp(a->global.name, b->global.name) == 0;
    case RY_EXPR_OP: return a->op.op == b->op.op;
    case RY_EXPR_CTOR: return a->ctor.ctor == b->ctor.ctor;
    case RY_EXPR_CONST: return a->constant.value == b->constant.value;
    default: return false;
    }
}

/* Values CSE may share: pure operator calls on atoms, and projections. */
static bool shareable(const ry_expr *e) {
    if (e->kind == RY_EXPR_PROJ) return pass_is_atom(e->proj.tuple);
    if (e->kind != RY_EXPR_CALL || e->call.callee->kind != RY_EXPR_OP) return false;
    if (e->call.callee->op.op->random) return false;
    for (int i = 0; i < e->call.nargs; i++)
        if (!pass_is_atom(e->call.args[i])) return false;
    return true;
}

static bool same_value(const ry_expr *a, const ry_expr *b) {
    if (a->kind != b->kind) return false;
    if (a->kind == RY_EXPR_PROJ)
        return a->proj.index == b->proj.index && same_atom(a->proj.tuple, b->proj.tuple);
    if (a->call.callee->op.op != b->call.callee->op.op || a->call.nargs != b->call.nargs) return false;
    for (int i = 0; i < a->call.nargs; i++)
        if (!same_atom(a->call.args[i], b->call.args[i])) return false;
    if (a->type && b->type && !ry_type_equal(a->type, b->type)) return false;
    return pass_same_attrs(&a->call.attrs, &b->call.attrs);
}

static ry_expr *walk(cse *c, ry_expr *e);

/* Rewrites the atoms of a non-let node (and the scopes it holds). */
static ry_expr *rewrite(cse *c, ry_expr *e) {
    ry_expr *n = ry_expr_new(c->m, e->kind, e->span);
    *n = *e;
    switch (e->kind) {
    case RY_EXPR_VAR: return atom(c, e);
    case RY_EXPR_CALL:
        n->call.callee = atom(c, e->call.callee);
        n->call.args = RY_NEW_ARRAY(c->m->arena, ry_expr *, e->call.nargs ? e->call.nargs : 1);
        for (int i = 0; i < e->call.nargs; i++) n->call.args[i] = walk(c, e->call.args[i]);
        return n;
    case RY_EXPR_IF:
        n->if_.cond = atom(c, e->if_.cond);
        n->if_.then_ = walk(c, e->if_.then_);
        n->if_.else_ = walk(c, e->if_.else_);
        return n;
    case RY_EXPR_MATCH:
        n->match.data = atom(c, e->match.data);
        n->match.clauses = RY_NEW_ARRAY(c->m->arena, ry_clause, e->match.nclauses);
        for (int i = 0; i < e->match.nclauses; i++) {
            n->match.clauses[i].pat = e->match.clauses[i].pat;
            n->match.clauses[i].body = walk(c, e->match.clauses[i].body);
        }
        return n;
    case RY_EXPR_FUNC: n->func.body = walk(c, e->func.body); return n;
    case RY_EXPR_TUPLE:
        n->tuple.fields = RY_NEW_ARRAY(c->m->arena, ry_expr *, e->tuple.n ? e->tuple.n : 1);
        for (int i = 0; i < e->tuple.n; i++) n->tuple.fields[i] = walk(c, e->tuple.fields[i]);
        return n;
    case RY_EXPR_PROJ: n->proj.tuple = walk(c, e->proj.tuple); return n;
    case RY_EXPR_REF: n->ref.value = walk(c, e->ref.value); return n;
    case RY_EXPR_REF_READ: n->ref_read.ref = walk(c, e->ref_read.ref); return n;
    case RY_EXPR_REF_WRITE:
        n->ref_write.ref = walk(c, e->ref_write.ref);
        n->ref_write.value = walk(c, e->ref_write.value);
        return n;
    default: return e;
    }
}

/* op(c1, ..., cn) -> constant, with the op's kernel on the host target;
 * NULL if not. */
static ry_expr *fold_call(cse *c, const ry_expr *e) {
    if (e->kind != RY_EXPR_CALL || e->call.callee->kind != RY_EXPR_OP) return NULL;
    const ry_op *op = e->call.callee->op.op;
    int n = e->call.nargs;
    if (op->random || !pass_foldable_type(e->type)) return NULL;
    ry_type **types = RY_NEW_ARRAY(c->a, ry_type *, n ? n : 1);
    ry_tensor **in = RY_NEW_ARRAY(c->a, ry_tensor *, n ? n : 1);
    for (int i = 0; i < n; i++) {
        if (e->call.args[i]->kind != RY_EXPR_CONST) return NULL;
        in[i] = e->call.args[i]->constant.value;
        types[i] = ry_type_of_tensor(c->a, in[i]);
    }
    ry_error err;
    uint64_t rng = 0;
    ry_kernel_ctx k = {.span = e->span, .err = &err, .rng = &rng};
    ry_type *ot;
    int nout = 0;
    ry_tensor **out = NULL;
    if (ry_op_run(NULL, op, &e->call.attrs, c->a, n, types, n, in, &k, &ot, &nout, &out) != RY_OK)
        return NULL;
    ry_tensor *t = nout == 1 ? out[0] : NULL;
    for (int i = 0; !t && i < nout; i++) ry_tensor_release(out[i]);
    ry_free(out); /* before the node: out of the IR's memory, nothing else is held (oom.h) */
    if (!t) return NULL;
    ry_expr *r = ry_expr_const(c->m, t, e->span);
    r->type = e->type;
    return r;
}

static unsigned hash_ptr(unsigned h, const void *p) {
    uintptr_t x = (uintptr_t)p;
    return (h ^ (unsigned)(x >> 4) ^ (unsigned)(x >> 20)) * 16777619u;
}

/* The hash of a shareable value: operator (or projection index) and the
 * identities of its argument atoms. */
static unsigned value_hash(const ry_expr *e) {
    unsigned h = 2166136261u;
    if (e->kind == RY_EXPR_PROJ) {
        const ry_expr *t = e->proj.tuple;
        h = hash_ptr(h, t->kind == RY_EXPR_VAR ? (const void *)t->var.var : (const void *)t);
        return (h ^ (unsigned)e->proj.index) * 16777619u;
    }
    h = hash_ptr(h, e->call.callee->op.op);
    for (int i = 0; i < e->call.nargs; i++) {
        const ry_expr *a = e->call.args[i];
        h = hash_ptr(h, a->kind == RY_EXPR_VAR ? (const void *)a->var.var
                        : a->kind == RY_EXPR_CONST ? (const void *)a->constant.value
                                                   : (const void *)a);
    }
    return h;
}

static void push_avail(cse *c, unsigned h, ry_expr *val, ry_var *v) {
    int b = (int)(h % NBUCKETS);
    avail *na = RY_NEW(c->a, avail);
    na->val = val;
    na->var = v;
    na->next = c->buckets[b];
    c->buckets[b] = na;
    if (c->nundo == c->cap_undo) {
        int cap = c->cap_undo ? c->cap_undo * 2 : 256;
        int *u = RY_NEW_ARRAY(c->a, int, cap);
        if (c->nundo) memcpy(u, c->undo, sizeof *u * (size_t)c->nundo);
        c->undo = u;
        c->cap_undo = cap;
    }
    c->undo[c->nundo++] = b;
}

static ry_expr *walk(cse *c, ry_expr *e) {
    if (e->kind != RY_EXPR_LET) return rewrite(c, e);
    int mark = c->nundo;
    lets out = {0};
    ry_expr *x = e;
    for (; x->kind == RY_EXPR_LET; x = x->let.body) {
        ry_var *v = x->let.var;
        ry_expr *val = rewrite(c, x->let.value);
        ry_expr *k = c->fold ? fold_call(c, val) : NULL;
        if (k) {
            if (v->id < c->nids) c->subst[v->id] = k;
            continue;
        }
        if (c->share && shareable(val)) {
            unsigned h = value_hash(val);
            avail *hit = c->buckets[h % NBUCKETS];
            while (hit && !same_value(hit->val, val)) hit = hit->next;
            if (hit && v->id < c->nids) {
                c->subst[v->id] = pass_use(c->m, hit->var);
                continue;
            }
            push_avail(c, h, val, v);
        }
        ry_lets_push(c->a, &out, v, val);
    }
    ry_expr *r = lets_close(c->m, &out, rewrite(c, x));
    while (c->nundo > mark) { /* this scope's bindings are not available outside */
        int b = c->undo[--c->nundo];
        c->buckets[b] = c->buckets[b]->next;
    }
    return r;
}

static void run(ry_module *m, bool fold, bool share) {
    for (int i = 0; i < m->nglobals; i++) {
        ry_expr *old = m->globals[i]->func;
        ry_expr *fn = ry_anf(m, old);
        fn->type = old->type;
        ry_arena *a = ry_arena_new();
        cse *c = RY_NEW(a, cse); /* zeroed: empty buckets */
        c->m = m;
        c->a = a;
        c->fold = fold;
        c->share = share;
        c->nids = m->next_id;
        c->subst = RY_NEW_ARRAY(a, ry_expr *, c->nids + 1);
        m->globals[i]->func = rewrite(c, fn);
        ry_arena_free(a);
    }
}

static ry_status cse_module(ry_module *m, ry_error *err) {
    run(m, false, true);
    return RY_OK;
}

static ry_status fold_module(ry_module *m, ry_error *err) {
    run(m, true, false);
    return RY_OK;
}

ry_status ry_cse(ry_module *m, ry_error *err) { return pass_guarded("cse", cse_module, m, err); }

ry_status ry_fold_constants(ry_module *m, ry_error *err) {
    return pass_guarded("constant folding", fold_module, m, err);
}
