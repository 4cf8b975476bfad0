/*
 * dce.c: dead-code elimination. A let whose var is unused and whose value
 * is pure is dropped; a ref that is only ever written (its var appears only
 * as the target of ref_writes) is dropped with its writes: no one can
 * observe it. Dropping code frees the vars it used, so the pass repeats
 * until nothing changes. Functions are walked in A-normal form (ry_anf),
 * so a node shared in the DAG has one binding.
 */
#include <string.h>

#include "relayc/pass.h"
#include "pass/pass_impl.h"

typedef struct dce {
    ry_module *m;
    ry_arena *a;
    int *uses;     /* var id -> uses */
    int *writes;   /* var id -> uses as the target of a ref_write */
    bool *is_ref;  /* var id -> bound to ref(...) */
    int nids;
    bool changed;
} dce;

/* Adds delta to the use counts of every var e mentions. */
static void tally(dce *d, const ry_expr *e, int delta) {
    switch (e->kind) {
    case RY_EXPR_VAR:
        if (e->var.var->id < d->nids) d->uses[e->var.var->id] += delta;
        break;
    case RY_EXPR_CALL:
        tally(d, e->call.callee, delta);
        for (int i = 0; i < e->call.nargs; i++) tally(d, e->call.args[i], delta);
        break;
    case RY_EXPR_LET:
        for (; e->kind == RY_EXPR_LET; e = e->let.body) {
            if (e->let.value->kind == RY_EXPR_REF && e->let.var->id < d->nids)
                d->is_ref[e->let.var->id] = true;
            tally(d, e->let.value, delta);
        }
        tally(d, e, delta);
        break;
    case RY_EXPR_IF:
        tally(d, e->if_.cond, delta);
        tally(d, e->if_.then_, delta);
        tally(d, e->if_.else_, delta);
        break;
    case RY_EXPR_MATCH:
        tally(d, e->match.data, delta);
        for (int i = 0; i < e->match.nclauses; i++) tally(d, e->match.clauses[i].body, delta);
        break;
    case RY_EXPR_FUNC: tally(d, e->func.body, delta); break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) tally(d, e->tuple.fields[i], delta);
        break;
    case RY_EXPR_PROJ: tally(d, e->proj.tuple, delta); break;
    case RY_EXPR_REF: tally(d, e->ref.value, delta); break;
    case RY_EXPR_REF_READ: tally(d, e->ref_read.ref, delta); break;
    case RY_EXPR_REF_WRITE: {
        const ry_expr *r = e->ref_write.ref;
        if (r->kind == RY_EXPR_VAR && r->var.var->id < d->nids) d->writes[r->var.var->id] += delta;
        tally(d, r, delta);
        tally(d, e->ref_write.value, delta);
        break;
    }
    default: break;
    }
}

static bool dead_ref(const dce *d, const ry_expr *r) {
    if (r->kind != RY_EXPR_VAR || r->var.var->id >= d->nids) return false;
    int id = r->var.var->id;
    return d->is_ref[id] && d->uses[id] == d->writes[id];
}

static ry_expr *sweep(dce *d, ry_expr *e);
static ry_expr *sweep_scope(void *d, ry_expr *e) { return sweep(d, e); }

/* Uses of var id inside e (a recursive function's calls of itself). */
static int count_uses(const ry_expr *e, int id) {
    int n = 0;
    switch (e->kind) {
    case RY_EXPR_VAR: return e->var.var->id == id;
    case RY_EXPR_CALL:
        n = count_uses(e->call.callee, id);
        for (int i = 0; i < e->call.nargs; i++) n += count_uses(e->call.args[i], id);
        return n;
    case RY_EXPR_LET:
        for (; e->kind == RY_EXPR_LET; e = e->let.body) n += count_uses(e->let.value, id);
        return n + count_uses(e, id);
    case RY_EXPR_IF:
        return count_uses(e->if_.cond, id) + count_uses(e->if_.then_, id) +
               count_uses(e->if_.else_, id);
    case RY_EXPR_MATCH:
        n = count_uses(e->match.data, id);
        for (int i = 0; i < e->match.nclauses; i++) n += count_uses(e->match.clauses[i].body, id);
        return n;
    case RY_EXPR_FUNC: return count_uses(e->func.body, id);
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) n += count_uses(e->tuple.fields[i], id);
        return n;
    case RY_EXPR_PROJ: return count_uses(e->proj.tuple, id);
    case RY_EXPR_REF: return count_uses(e->ref.value, id);
    case RY_EXPR_REF_READ: return count_uses(e->ref_read.ref, id);
    case RY_EXPR_REF_WRITE:
        return count_uses(e->ref_write.ref, id) + count_uses(e->ref_write.value, id);
    default: return 0;
    }
}

/* let chains are walked as arrays: the body first, then each binding from
 * the last, so dropping a binding frees the ones before it in one pass. */
static ry_expr *sweep_lets(dce *d, ry_expr *e) {
    int n = 0;
    for (ry_expr *x = e; x->kind == RY_EXPR_LET; x = x->let.body) n++;
    ry_expr **chain = RY_NEW_ARRAY(d->a, ry_expr *, n);
    n = 0;
    ry_expr *x = e;
    for (; x->kind == RY_EXPR_LET; x = x->let.body) chain[n++] = x;
    ry_expr *body = sweep(d, x);
    ry_expr **kept = RY_NEW_ARRAY(d->a, ry_expr *, n); /* new values, NULL: dropped */
    for (int i = n - 1; i >= 0; i--) {
        ry_expr *l = chain[i];
        const ry_var *v = l->let.var;
        int used = v->id < d->nids ? d->uses[v->id] : 1;
        ry_expr *val = l->let.value;
        bool drop = false;
        if (val->kind == RY_EXPR_REF_WRITE && dead_ref(d, val->ref_write.ref) && used == 0)
            drop = true;
        else if (used == 0 && pass_is_pure(val))
            drop = true;
        else if (val->kind == RY_EXPR_FUNC && used == count_uses(val, v->id))
            drop = true; /* a recursive function no one else calls */
        if (drop) {
            tally(d, val, -1);
            d->changed = true;
            kept[i] = NULL;
            continue;
        }
        kept[i] = sweep(d, val);
    }
    lets out = {0};
    for (int i = 0; i < n; i++)
        if (kept[i]) ry_lets_push(d->a, &out, chain[i]->let.var, kept[i]);
    return lets_close(d->m, &out, body);
}

static ry_expr *sweep(dce *d, ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_LET: return sweep_lets(d, e);
    case RY_EXPR_IF: case RY_EXPR_MATCH: case RY_EXPR_FUNC:
        return pass_map_scopes(d->m, e, sweep_scope, d);
    default: return e; /* ANF: other nodes hold only atoms */
    }
}

/* Sweeps one function until nothing changes. */
static ry_expr *dce_func(dce *d, ry_expr *fn) {
    do {
        memset(d->uses, 0, sizeof(int) * (size_t)d->nids);
        memset(d->writes, 0, sizeof(int) * (size_t)d->nids);
        memset(d->is_ref, 0, sizeof(bool) * (size_t)d->nids);
        tally(d, fn, 1);
        d->changed = false;
        fn = sweep(d, fn);
    } while (d->changed);
    return fn;
}

static ry_status dce_module(ry_module *m, ry_error *err) {
    for (int i = 0; i < m->nglobals; i++) {
        ry_expr *old = m->globals[i]->func;
        ry_expr *fn = ry_anf(m, old);
        fn->type = old->type;
        dce d = {.m = m};
        d.a = ry_arena_new();
        d.nids = m->next_id;
        d.uses = RY_NEW_ARRAY(d.a, int, d.nids + 1);
        d.writes = RY_NEW_ARRAY(d.a, int, d.nids + 1);
        d.is_ref = RY_NEW_ARRAY(d.a, bool, d.nids + 1);
        m->globals[i]->func = dce_func(&d, fn);
        ry_arena_free(d.a);
    }
    return RY_OK;
}

ry_status ry_dce(ry_module *m, ry_error *err) { return pass_guarded("dce", dce_module, m, err); }
