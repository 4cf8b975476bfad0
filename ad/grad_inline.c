/*
 * grad_inline.c: before a function is differentiated, its calls of
 * non-recursive, monomorphic globals are replaced by their bodies (fresh
 * variables, parameters replaced by the argument atoms), projections of
 * known tuples are resolved, and pure operators move up to the run of their
 * operands. A call ends a run (grad_run.c); so an RNN step that calls @step,
 * which calls @cell, becomes one run whose adjoints are plain values.
 */
#include <string.h>

#include "grad_impl.h"
#include "ir/parse.h" /* ry_expr_child */
#include "relayc/pass.h" /* ry_global_recursive */

#define INLINE_BUDGET 200000 /* nodes copied into one function, at most */

typedef struct inl {
    gx *s;
    ad_map index;   /* ry_global -> its index + 1 */
    bool *rec;      /* per global: calls itself, through others too */
    bool *done;     /* per global: rec decided */
    ad_map sub;     /* old var -> the atom that replaces its uses */
    ad_map tuples;  /* new var -> the tuple of atoms it is bound to */
    ad_map uses;    /* new var -> occurrences (prune) */
    long budget;
} inl;

/* The global a call may be replaced by the body of, or NULL. */
static ry_global *inlinable(inl *c, const ry_expr *call) {
    const ry_expr *cal = call->call.callee;
    if (cal->kind != RY_EXPR_GLOBAL || c->budget <= 0) return NULL;
    ry_global *g = ry_module_find_global(c->s->m, cal->global.name);
    intptr_t i = g ? ad_map_int(&c->index, g) - 1 : -1;
    if (i < 0 || !g->func || g->func->kind != RY_EXPR_FUNC || !g->func->type) return NULL;
    if (g->func->func.ntparams || call->call.ntype_args ||
        g->func->func.nparams != call->call.nargs || ry_call_checks_shapes(g->func, call))
        return NULL;
    if (!c->done[i]) {
        c->rec[i] = ry_global_recursive(c->s->m, (int)i);
        c->done[i] = true;
    }
    return c->rec[i] ? NULL : g;
}

/* ---- copying with fresh variables ---- */

static ry_expr *copy(inl *c, const ry_expr *e);

static ry_var *fresh_name(inl *c, ry_var *v, bool keep_annot) {
    ry_var *nv = ry_var_new(c->s->m, v->name, keep_annot ? v->annot : NULL, v->span);
    nv->type = v->type;
    ad_map_put(&c->sub, v, gx_use(c->s, nv));
    return nv;
}

static ry_pattern *copy_pat(inl *c, const ry_pattern *p) {
    ry_pattern *q = RY_NEW(c->s->m->arena, ry_pattern);
    *q = *p;
    switch (p->kind) {
    case RY_PAT_WILDCARD: break;
    case RY_PAT_VAR: q->var = fresh_name(c, p->var, false); break;
    case RY_PAT_CTOR:
        q->ctor.args = RY_NEW_ARRAY(c->s->m->arena, ry_pattern *, p->ctor.n);
        for (int i = 0; i < p->ctor.n; i++)
            q->ctor.args[i] = copy_pat(c, p->ctor.args[i]);
        break;
    case RY_PAT_TUPLE:
        q->tuple.fields = RY_NEW_ARRAY(c->s->m->arena, ry_pattern *, p->tuple.n);
        for (int i = 0; i < p->tuple.n; i++)
            q->tuple.fields[i] = copy_pat(c, p->tuple.fields[i]);
        break;
    }
    return q;
}

static ry_expr *node(inl *c, const ry_expr *e) {
    ry_expr *n = ry_expr_new(c->s->m, e->kind, e->span);
    *n = *e;
    c->budget--;
    return n;
}

static ry_expr **copy_list(inl *c, int n, ry_expr *const *l) {
    ry_expr **r = RY_NEW_ARRAY(c->s->m->arena, ry_expr *, n + 1);
    for (int i = 0; i < n; i++)
        r[i] = copy(c, l[i]);
    return r;
}

static bool tuple_of_atoms(const ry_expr *t) {
    for (int i = 0; i < t->tuple.n; i++) {
        ry_expr_kind k = t->tuple.fields[i]->kind;
        if (k != RY_EXPR_VAR && k != RY_EXPR_CONST && k != RY_EXPR_GLOBAL) return false;
    }
    return true;
}

/* The let chain e, copied into b (calls of inlinable globals spliced in);
 * returns the copy of its tail. */
static ry_expr *chain(inl *c, ry_lets *b, const ry_expr *e) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body) {
        const ry_expr *v = e->let.value;
        ry_global *g = v->kind == RY_EXPR_CALL ? inlinable(c, v) : NULL;
        if (g) { /* `let x = @g(a..)`: g's body, then x means its result */
            ry_expr **args = copy_list(c, v->call.nargs, v->call.args);
            const ry_expr *f = ry_anf(c->s->m, g->func);
            for (int i = 0; i < f->func.nparams; i++)
                ad_map_put(&c->sub, f->func.params[i], args[i]);
            ry_expr *res = chain(c, b, f->func.body);
            if (res->kind != RY_EXPR_VAR && res->kind != RY_EXPR_CONST &&
                res->kind != RY_EXPR_GLOBAL) /* not in A-normal form: bind it once */
                ry_lets_push(c->s->scratch, b, fresh_name(c, e->let.var, false), res);
            else
                ad_map_put(&c->sub, e->let.var, res);
            continue;
        }
        ry_var *x = fresh_name(c, e->let.var, false); /* first: recursive closures */
        ry_expr *nv = copy(c, v);
        const ry_expr *t = nv->kind == RY_EXPR_PROJ && nv->proj.tuple->kind == RY_EXPR_VAR
                               ? ad_map_get(&c->tuples, nv->proj.tuple->var.var)
                               : NULL;
        if (t && nv->proj.index < t->tuple.n) { /* (a, b).0 is a: no tuple in the way */
            ad_map_put(&c->sub, e->let.var, t->tuple.fields[nv->proj.index]);
            continue;
        }
        if (nv->kind == RY_EXPR_TUPLE && tuple_of_atoms(nv)) ad_map_put(&c->tuples, x, nv);
        ry_lets_push(c->s->scratch, b, x, nv);
    }
    return copy(c, e);
}

static ry_expr *scope(inl *c, const ry_expr *e) {
    ry_lets b = {0};
    ry_expr *tail = chain(c, &b, e);
    for (int i = b.n - 1; i >= 0; i--) {
        ry_expr *l = ry_expr_let(c->s->m, b.vars[i], b.vals[i], tail, b.vals[i]->span);
        l->type = tail->type;
        tail = l;
    }
    return tail;
}

static ry_expr *copy(inl *c, const ry_expr *e) {
    ry_expr *r;
    switch (e->kind) {
    case RY_EXPR_VAR: {
        const ry_expr *a = ad_map_get(&c->sub, e->var.var);
        return node(c, a ? a : e);
    }
    case RY_EXPR_LET: return scope(c, e);
    case RY_EXPR_CALL:
        r = node(c, e);
        r->call.callee = copy(c, e->call.callee);
        r->call.args = copy_list(c, e->call.nargs, e->call.args);
        return r;
    case RY_EXPR_IF:
        r = node(c, e);
        r->if_.cond = copy(c, e->if_.cond);
        r->if_.then_ = scope(c, e->if_.then_);
        r->if_.else_ = scope(c, e->if_.else_);
        return r;
    case RY_EXPR_MATCH:
        r = node(c, e);
        r->match.data = copy(c, e->match.data);
        r->match.clauses = RY_NEW_ARRAY(c->s->m->arena, ry_clause, e->match.nclauses);
        for (int i = 0; i < e->match.nclauses; i++) {
            r->match.clauses[i].pat = copy_pat(c, e->match.clauses[i].pat);
            r->match.clauses[i].body = scope(c, e->match.clauses[i].body);
        }
        return r;
    case RY_EXPR_FUNC:
        r = node(c, e);
        r->func.params = RY_NEW_ARRAY(c->s->m->arena, ry_var *, e->func.nparams + 1);
        for (int i = 0; i < e->func.nparams; i++)
            r->func.params[i] = fresh_name(c, e->func.params[i], true);
        r->func.body = scope(c, e->func.body);
        return r;
    case RY_EXPR_TUPLE:
        r = node(c, e);
        r->tuple.fields = copy_list(c, e->tuple.n, e->tuple.fields);
        return r;
    case RY_EXPR_PROJ:
        r = node(c, e);
        r->proj.tuple = copy(c, e->proj.tuple);
        return r;
    case RY_EXPR_REF:
        r = node(c, e);
        r->ref.value = copy(c, e->ref.value);
        return r;
    case RY_EXPR_REF_READ:
        r = node(c, e);
        r->ref_read.ref = copy(c, e->ref_read.ref);
        return r;
    case RY_EXPR_REF_WRITE:
        r = node(c, e);
        r->ref_write.ref = copy(c, e->ref_write.ref);
        r->ref_write.value = copy(c, e->ref_write.value);
        return r;
    default: return node(c, e); /* globals, constants, operators, ctors */
    }
}

/* ---- pruning: tuples and projections no one uses any more ---- */

static void count(inl *c, const ry_expr *e) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body)
        count(c, e->let.value);
    if (e->kind == RY_EXPR_VAR)
        ad_map_put_int(&c->uses, e->var.var, ad_map_int(&c->uses, e->var.var) + 1);
    int slot;
    const ry_expr *k;
    for (int i = 0; (k = ry_expr_child(e, i, &slot)); i++)
        count(c, k);
}

static bool prunable(const ry_expr *v) {
    return v->kind == RY_EXPR_TUPLE || v->kind == RY_EXPR_PROJ || v->kind == RY_EXPR_VAR;
}

/* Unlinks the unused lets of tuples, projections and aliases from the
 * chains of *e and of the scopes inside it; whether it removed any. */
static bool prune(inl *c, ry_expr **e) {
    bool any = false;
    while ((*e)->kind == RY_EXPR_LET) {
        ry_expr *l = *e;
        if (prunable(l->let.value) && !ad_map_get(&c->uses, l->let.var)) {
            *e = l->let.body;
            any = true;
            continue;
        }
        any |= prune(c, &l->let.value);
        e = &l->let.body;
    }
    ry_expr *x = *e;
    switch (x->kind) {
    case RY_EXPR_IF:
        any |= prune(c, &x->if_.then_);
        any |= prune(c, &x->if_.else_);
        break;
    case RY_EXPR_MATCH:
        for (int i = 0; i < x->match.nclauses; i++)
            any |= prune(c, &x->match.clauses[i].body);
        break;
    case RY_EXPR_FUNC: any |= prune(c, &x->func.body); break;
    default: break;
    }
    return any;
}

/* ---- scheduling ----
 * A let chain is cut into segments by its bindings that end a run (calls
 * of functions, if, match). A pure operator call (or projection) whose
 * operands are all bound in an earlier segment moves to the end of the
 * latest of those: the text format binds `%3 = ...` where it is first
 * used, which puts a loss computed from an RNN step's output after the
 * recursive call, in another run than the step, with a cell between. */
static bool hoistable(const ry_expr *v) {
    if (v->kind == RY_EXPR_PROJ) return true;
    return v->kind == RY_EXPR_CALL && v->call.callee->kind == RY_EXPR_OP &&
           !v->call.callee->op.op->random;
}

static void schedule(inl *c, ry_expr **e);

static void schedule_inside(inl *c, ry_expr *x) {
    switch (x->kind) {
    case RY_EXPR_IF:
        schedule(c, &x->if_.then_);
        schedule(c, &x->if_.else_);
        break;
    case RY_EXPR_MATCH:
        for (int i = 0; i < x->match.nclauses; i++)
            schedule(c, &x->match.clauses[i].body);
        break;
    case RY_EXPR_FUNC: schedule(c, &x->func.body); break;
    default: break;
    }
}

static void schedule(inl *c, ry_expr **e) {
    int n = 0;
    for (ry_expr *x = *e; x->kind == RY_EXPR_LET; x = x->let.body)
        n++;
    if (n == 0) {
        schedule_inside(c, *e);
        return;
    }
    ry_expr **lets = RY_NEW_ARRAY(c->s->scratch, ry_expr *, n);
    int *seg = RY_NEW_ARRAY(c->s->scratch, int, n); /* segment each let goes to */
    ad_map segof;                                   /* var -> its segment + 1 */
    ad_map_init(&segof, c->s->scratch);
    int k = 0, cur = 0;
    ry_expr *tail = *e;
    for (; tail->kind == RY_EXPR_LET; tail = tail->let.body) {
        ry_expr *l = tail, *v = l->let.value;
        schedule_inside(c, v);
        int to = cur;
        if (gx_run_breaks(v)) {
            to = -1 - cur; /* a separator, after segment cur */
            cur++;
        } else if (hoistable(v)) {
            int hi = 0;
            ry_expr *const *ops = v->kind == RY_EXPR_PROJ ? &v->proj.tuple : v->call.args;
            int nops = v->kind == RY_EXPR_PROJ ? 1 : v->call.nargs;
            for (int i = 0; i < nops; i++)
                if (ops[i]->kind == RY_EXPR_VAR) {
                    intptr_t sg = ad_map_int(&segof, ops[i]->var.var) - 1;
                    if (sg > hi) hi = (int)sg;
                }
            to = hi;
        }
        lets[k] = l;
        seg[k++] = to;
        ad_map_put_int(&segof, l->let.var, (to < 0 ? cur : to) + 1);
    }
    schedule_inside(c, tail);
    if (cur == 0) return; /* no separator: nothing moves */
    /* Relink: segment 0, separator 0, segment 1, ... in original order
     * within each segment (a stable counting sort on 2 * segment, + 1 for
     * the separator after it). */
    int nkeys = 2 * cur + 2;
    int *start = RY_NEW_ARRAY(c->s->scratch, int, nkeys + 1);
    memset(start, 0, sizeof *start * (size_t)(nkeys + 1));
    for (int i = 0; i < k; i++) {
        seg[i] = seg[i] < 0 ? 2 * (-1 - seg[i]) + 1 : 2 * seg[i];
        start[seg[i] + 1]++;
    }
    for (int i = 0; i < nkeys; i++)
        start[i + 1] += start[i];
    ry_expr **order = RY_NEW_ARRAY(c->s->scratch, ry_expr *, k);
    for (int i = 0; i < k; i++)
        order[start[seg[i]]++] = lets[i];
    ry_expr **link = e;
    for (int i = 0; i < k; i++) {
        *link = order[i];
        link = &order[i]->let.body;
    }
    *link = tail;
}

const ry_expr *gx_inline(gx *s, const ry_expr *f) {
    int n = s->m->nglobals;
    inl c = {.s = s, .budget = INLINE_BUDGET};
    ad_map_init(&c.index, s->scratch);
    ad_map_init(&c.sub, s->scratch);
    c.rec = RY_NEW_ARRAY(s->scratch, bool, n + 1);
    c.done = RY_NEW_ARRAY(s->scratch, bool, n + 1);
    for (int i = 0; i < n; i++) {
        ad_map_put_int(&c.index, s->m->globals[i], i + 1);
        c.rec[i] = c.done[i] = false;
    }
    ad_map_init(&c.tuples, s->scratch);
    ry_expr *r = node(&c, f); /* the parameters stay: the twin maps them */
    r->func.body = scope(&c, f->func.body);
    /* A tuple a projection no longer reads would count as a use of its
     * fields and keep them from being local to their run. */
    for (int round = 0; round < 8; round++) {
        ad_map_init(&c.uses, s->scratch);
        count(&c, r->func.body);
        if (!prune(&c, &r->func.body)) break;
    }
    schedule(&c, &r->func.body);
    return r;
}
