/*
 * grad_run.c: one backpropagator closure per run of operators (grad_impl.h
 * says what a run is), pushed at the run's end: `bp := fn () { backward
 * bodies in reverse; k() }`. A value used only as an operator argument in
 * its own run is local: its adjoint is a compile-time sum of plain values
 * (no ref cell, no zeros_like), and zero when nothing was added (its rule
 * is skipped). Other values keep their cell; the merged body reads it.
 */
#include <string.h>

#include "grad_impl.h"
#include "ir/parse.h" /* ry_expr_child */

/* ---- soundness ----
 * Merging: between the operators of a run nothing reads or writes bp
 * (gx_run_breaks ends the run before every call that is not of an
 * operator or constructor, before if and match, and at the scope's tail;
 * function values get their own bp), so pushing the run's bodies as one
 * closure, in reverse order, replays exactly what the closures one per
 * operator replayed, in the same order relative to every other closure.
 * Locals: a value's cell is only ever read by the backward body of the
 * operator that made it. Uses outside the run write the cell before that
 * body runs (they come later in the forward order, so earlier backward);
 * uses inside the run are bodies that come earlier in the merged body. So
 * when every use is inside the run, the cell's content at the read is the
 * sum of the in-run terms, which the merged body holds as plain values.
 * This relies on each backpropagator being run exactly once, which the
 * wrapper guarantees by construction (grad_wrap.c runs bp once; nothing
 * else calls it): a second run would add the cells' contents twice while
 * the compile-time sums would not. */

/* A value's adjoint during the flush: for a float tensor the terms added
 * to it so far (and its cell, when it has one); for a tuple its fields. */
struct gx_adj {
    const ry_type *t;
    const gx_adj *parent; /* a field: of which tuple, at index */
    int index;
    ry_var *pvar; /* a root: its primal, and its cell pair (NULL: local) */
    ry_var *cvar;
    int n;
    gx_adj **fields;
    ry_expr **terms;
    int nterms, capterms;
};

/* An operator whose backward body waits for the flush. */
struct gx_pending {
    const ry_expr *e;
    ry_var *g;        /* its output adjoint, bound at the flush */
    ry_expr **grads;  /* the rule's argument adjoints, in terms of g */
    gx_adj *out;
    gx_adj **aadj;
    ry_expr **targs;
};

/* A let-bound operator result (or projection of one) whose type holds
 * float tensors: what the analysis found, then where it was emitted. */
struct gx_cand {
    int run;                      /* analysis: id of its run */
    int uses, ok;                 /* occurrences; in-run operator arguments */
    int writes;                   /* occurrences that may add to its adjoint */
    struct gx_cand *parent;       /* a projection: of which candidate */
    bool local;
    const gx_run *in;             /* emission: the scope's run and its */
    int serial;                   /* serial when the value was bound */
    gx_adj *adj;
};

/* ---- analysis ---- */

bool gx_run_breaks(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_IF:
    case RY_EXPR_MATCH: return true;
    case RY_EXPR_CALL:
        return e->call.callee->kind != RY_EXPR_OP && e->call.callee->kind != RY_EXPR_CTOR;
    default: return false;
    }
}

static bool is_op_call(const ry_expr *e) {
    return e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_OP;
}

/* Whether op's calls push no backward body (comparisons, argmax, ...):
 * their arguments' adjoints are never added to. */
static bool no_grad_op(const ry_expr *e) {
    ry_grad_rule rule;
    return is_op_call(e) && ry_grad_rule_lookup(e->call.callee->op.op, &rule) && !rule.fn;
}

/* Counts every occurrence of the candidates with run ids >= first (this
 * scope's) anywhere in e, nested functions and branches included, and
 * those that may add to the adjoint: all but the arguments of no_grad
 * operators. */
static void count_uses(gx *s, const ry_expr *e, int first, bool writes) {
    for (; e->kind == RY_EXPR_LET; e = e->let.body)
        count_uses(s, e->let.value, first, true);
    if (e->kind == RY_EXPR_VAR) {
        struct gx_cand *c = ad_map_get(&s->cands, e->var.var);
        if (c && c->run >= first) c->uses++, c->writes += writes;
    }
    bool args_write = !no_grad_op(e);
    int slot;
    const ry_expr *k;
    for (int i = 0; (k = ry_expr_child(e, i, &slot)); i++)
        count_uses(s, k, first, args_write);
}

/* Splits the scope's let chain e into runs the way the emitter will (a new
 * run after each binding that gx_run_breaks), makes a candidate of each
 * operator result and projection of one, counts their uses and decides
 * which are local (none with one closure per operator). */
static void analyse(gx *s, const ry_expr *e) {
    int first = s->next_run + 1, run = first, n = 0;
    s->next_run = first;
    for (const ry_expr *x = e; x->kind == RY_EXPR_LET; x = x->let.body) {
        const ry_expr *v = x->let.value;
        if (gx_run_breaks(v)) {
            run = ++s->next_run;
            continue;
        }
        struct gx_cand *parent = NULL;
        if (v->kind == RY_EXPR_PROJ && v->proj.tuple->kind == RY_EXPR_VAR) {
            parent = ad_map_get(&s->cands, v->proj.tuple->var.var);
            if (!parent || parent->run != run) continue;
        } else if (!is_op_call(v)) {
            continue;
        }
        if (!v->type || !gx_changes(s, v->type)) continue;
        struct gx_cand *c = RY_NEW(s->scratch, struct gx_cand);
        *c = (struct gx_cand){.run = run, .parent = parent};
        ad_map_put(&s->cands, x->let.var, c);
        n++;
    }
    if (!n) return;
    count_uses(s, e, first, true);
    struct gx_cand **chain = RY_NEW_ARRAY(s->scratch, struct gx_cand *, n);
    const ry_expr **values = RY_NEW_ARRAY(s->scratch, const ry_expr *, n);
    int k = 0;
    run = first;
    for (const ry_expr *x = e; x->kind == RY_EXPR_LET; x = x->let.body) {
        const ry_expr *v = x->let.value;
        if (gx_run_breaks(v)) run++;
        if (is_op_call(v))
            for (int i = 0; i < v->call.nargs; i++) {
                const ry_expr *a = v->call.args[i];
                struct gx_cand *c =
                    a->kind == RY_EXPR_VAR ? ad_map_get(&s->cands, a->var.var) : NULL;
                if (c && c->run == run) c->ok++;
            }
        struct gx_cand *c = ad_map_get(&s->cands, x->let.var);
        if (c && c->run >= first) values[k] = v, chain[k++] = c;
    }
    /* Backwards, so that every use of a value is settled before its
     * binding: an operator whose result nothing adds to has its rule
     * skipped, so its uses of its arguments add nothing either (nor does a
     * projection nothing adds to), e.g. a dead chain exp -> multiply. */
    for (int i = k - 1; i >= 0; i--) {
        if (chain[i]->writes) continue;
        const ry_expr *v = values[i];
        int nargs = v->kind == RY_EXPR_PROJ ? 1 : v->call.nargs;
        for (int j = 0; j < nargs; j++) {
            const ry_expr *a = v->kind == RY_EXPR_PROJ ? v->proj.tuple : v->call.args[j];
            struct gx_cand *c = a->kind == RY_EXPR_VAR ? ad_map_get(&s->cands, a->var.var) : NULL;
            if (c && c->run >= first && !no_grad_op(v)) c->writes--;
        }
    }
    /* Backwards: a projection is decided before the tuple it reads, whose
     * use by a local projection is then an in-run use. */
    for (int i = k - 1; i >= 0; i--) {
        chain[i]->local = !s->per_op && chain[i]->uses == chain[i]->ok;
        if (chain[i]->parent && chain[i]->local) chain[i]->parent->ok++;
    }
}

void gx_run_enter(gx *s, gx_run *run, ry_var *bp, const ry_expr *e) {
    *run = (gx_run){.bp = bp, .outer = s->run};
    s->run = run;
    analyse(s, e); /* per operator: nothing is local (see analyse) */
}

void gx_run_leave(gx *s, gx_run *run, gx_block *b) {
    gx_run_flush(s, b);
    s->run = run->outer;
}

/* ---- adjoint records ---- */

static gx_adj *adj_new(gx *s, const ry_type *t, const gx_adj *parent, int index) {
    gx_adj *a = RY_NEW(s->scratch, gx_adj);
    *a = (gx_adj){.t = t, .parent = parent, .index = index};
    if (t->kind == RY_TYPE_TUPLE && gx_changes(s, t)) {
        a->n = t->tuple.n;
        a->fields = RY_NEW_ARRAY(s->scratch, gx_adj *, a->n);
        for (int i = 0; i < a->n; i++)
            a->fields[i] = adj_new(s, t->tuple.fields[i], a, i);
    }
    return a;
}

ry_expr *gx_adj_primal(gx *s, const gx_adj *a) {
    if (a->parent) return gx_proj(s, gx_adj_primal(s, a->parent), a->index);
    return gx_use(s, a->pvar);
}

/* The transformed value (pair, or tuple of pairs) holding a's cells, or
 * NULL when a is local. */
static ry_expr *adj_cells(gx *s, const gx_adj *a) {
    if (!a->parent) return a->cvar ? gx_use(s, a->cvar) : NULL;
    ry_expr *p = adj_cells(s, a->parent);
    return p ? gx_proj(s, p, a->index) : NULL;
}

static struct gx_cand *open_cand(gx *s, const ry_var *v) {
    struct gx_cand *c = ad_map_get(&s->cands, v);
    if (!c || !s->run || c->in != s->run || c->serial != s->run->serial) return NULL;
    return c;
}

gx_adj *gx_run_arg(gx *s, const ry_var *v) {
    struct gx_cand *c = open_cand(s, v);
    return c ? c->adj : NULL;
}

bool gx_run_is_local(gx *s, const ry_var *var) {
    struct gx_cand *c = ad_map_get(&s->cands, var);
    return c && c->local && s->run;
}

bool gx_run_never_added(gx *s, const ry_var *var) {
    struct gx_cand *c = var ? ad_map_get(&s->cands, var) : NULL;
    return c && c->writes == 0 && s->run;
}

gx_adj *gx_run_result(gx *s, const ry_var *var, const ry_type *t, ry_expr *y, ry_expr *r) {
    gx_adj *a = adj_new(s, t, NULL, 0);
    a->pvar = y->var.var;
    a->cvar = r ? r->var.var : NULL;
    struct gx_cand *c = var ? ad_map_get(&s->cands, var) : NULL;
    if (c && s->run) {
        c->in = s->run;
        c->serial = s->run->serial;
        c->adj = a;
    }
    return a;
}

ry_expr *gx_run_proj(gx *s, gx_block *b, const ry_var *var, const ry_expr *e) {
    struct gx_cand *c = ad_map_get(&s->cands, var);
    if (!c || !c->parent || e->proj.tuple->kind != RY_EXPR_VAR) return NULL;
    struct gx_cand *p = open_cand(s, e->proj.tuple->var.var);
    if (!p || p != c->parent || !p->adj || p->adj->n <= e->proj.index) return NULL;
    c->in = s->run;
    c->serial = s->run->serial;
    c->adj = p->adj->fields[e->proj.index];
    return c->local ? gx_bind(s, b, "p", gx_adj_primal(s, c->adj), (ry_type *)e->type) : NULL;
}

/* ---- deferring and flushing ---- */

/* The rule is applied now, to a var g bound only at the flush, so that
 * the first failing rule in program order is the one reported. */
void gx_run_defer(gx *s, const ry_expr *e, ry_grad_fn fn, ry_expr **prim, gx_adj *out,
                  gx_adj **aadj, ry_expr **targs, const bool *need) {
    gx_run *run = s->run;
    if (!run) return; /* not reached: every operator is inside a scope */
    ry_var *g = ry_gb_var(s->m, "g", e->type);
    ry_expr **grads = RY_NEW_ARRAY(s->scratch, ry_expr *, e->call.nargs + 1);
    ry_error rerr = {0};
    ry_grad_ctx ctx = {s->m, e, e->span, &rerr, s->opts.inference, need};
    if (fn(&ctx, prim, gx_adj_primal(s, out), gx_use(s, g), grads)) {
        if (!s->failed && s->err) *s->err = rerr;
        s->failed = true;
        return;
    }
    for (int i = 0; need && i < e->call.nargs; i++)
        if (!need[i]) grads[i] = NULL; /* nothing reads it */
    if (run->npend == run->cappend) {
        int ncap = run->cappend ? run->cappend * 2 : 16;
        gx_pending *np = RY_NEW_ARRAY(s->scratch, gx_pending, ncap);
        if (run->npend) memcpy(np, run->pend, sizeof *np * (size_t)run->npend);
        run->pend = np;
        run->cappend = ncap;
    }
    run->pend[run->npend++] = (gx_pending){e, g, grads, out, aadj, targs};
}

static void add_term(gx *s, gx_adj *a, ry_expr *d) {
    if (a->nterms == a->capterms) {
        int ncap = a->capterms ? a->capterms * 2 : 4;
        ry_expr **nt = RY_NEW_ARRAY(s->scratch, ry_expr *, ncap);
        if (a->nterms) memcpy(nt, a->terms, sizeof *nt * (size_t)a->nterms);
        a->terms = nt;
        a->capterms = ncap;
    }
    a->terms[a->nterms++] = d;
}

/* a += d at compile time (d: an adjoint of a's type). */
static void contribute(gx *s, gx_block *cb, gx_adj *a, ry_expr *d) {
    if (!gx_changes(s, a->t)) return;
    if (gx_is_float(a->t)) {
        add_term(s, a, d);
        return;
    }
    if (a->t->kind != RY_TYPE_TUPLE) return;
    ry_expr *dv = gx_atomize(s, cb, d, (ry_type *)a->t);
    for (int i = 0; i < a->n; i++)
        contribute(s, cb, a->fields[i], gx_proj(s, dv, i));
}

/* The adjoint of a as an expression: its cell's content plus the in-run
 * terms; NULL when it is known to be zero (local, nothing contributed). A
 * tuple with some zero fields gets zeros_like for them. */
static ry_expr *materialize(gx *s, const gx_adj *a) {
    if (!gx_changes(s, a->t)) return NULL;
    if (gx_is_float(a->t)) {
        ry_expr *cells = adj_cells(s, a);
        ry_expr *sum = cells ? gx_ref_read(s, gx_proj(s, cells, 1)) : NULL;
        for (int i = 0; i < a->nterms; i++)
            sum = sum ? ry_gb_op2(s->m, "add", sum, a->terms[i]) : a->terms[i];
        return sum;
    }
    if (a->t->kind != RY_TYPE_TUPLE) return NULL;
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, a->n + 1);
    bool any = false;
    for (int i = 0; i < a->n; i++)
        any |= (f[i] = materialize(s, a->fields[i])) != NULL;
    if (!any) return NULL;
    for (int i = 0; i < a->n; i++)
        if (!f[i]) f[i] = ry_gb_op1(s->m, "zeros_like", gx_adj_primal(s, a->fields[i]));
    return ry_expr_tuple(s->m, a->n, f, RY_NO_SPAN);
}

/* One operator's backward body into cb; whether it wrote a cell. */
static bool backward(gx *s, gx_block *cb, const gx_pending *p) {
    ry_expr *g = materialize(s, p->out);
    if (!g) return false; /* a zero adjoint: the rule would add zeros */
    gx_push(s, cb, p->g, g);
    const ry_expr *e = p->e;
    bool wrote = false;
    for (int i = 0; i < e->call.nargs; i++) {
        if (!p->grads[i]) continue;
        if (p->aadj[i]) {
            contribute(s, cb, p->aadj[i], p->grads[i]);
        } else if (p->targs[i] && gx_changes(s, e->call.args[i]->type)) {
            gx_accumulate(s, cb, p->targs[i], e->call.args[i]->type, p->grads[i]);
            wrote = true;
        }
    }
    return wrote;
}

void gx_run_flush(gx *s, gx_block *b) {
    gx_run *run = s->run;
    if (!run) return;
    run->serial++; /* what was bound so far is no longer in the open run */
    if (!run->npend) return;
    gx_block cb = {0};
    bool wrote = false;
    for (int j = run->npend - 1; j >= 0; j--)
        wrote |= backward(s, &cb, &run->pend[j]);
    run->npend = 0;
    if (!wrote) return; /* every adjoint it would touch is zero or local */
    ry_expr *k = gx_bind(s, b, "k", gx_ref_read(s, gx_use(s, run->bp)), NULL);
    ry_expr *clo = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
    clo->func.body = gx_fold(s, &cb, ry_expr_call(s->m, k, 0, NULL, RY_NO_SPAN));
    gx_do(s, b, gx_ref_write(s, gx_use(s, run->bp), clo));
}
