/*
 * unify.c: the type checker's unknowns and their unification. Type unknowns
 * (RY_TYPE_INCOMPLETE) and dimension unknowns live in union-find tables of
 * the checker; unifying binds them, with an occurs check against infinite
 * types. Also substitution (instantiating type parameters and a global's
 * symbolic dims), zonking (replacing bound unknowns) and importing written
 * annotations. Walking expressions is typecheck.c's job.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/typecheck_ctx.h"

void *tc_grow(tc *c, void *items, int n, int *cap, size_t elem) {
    if (n < *cap) return items;
    int ncap = *cap ? *cap * 2 : 16;
    void *fresh = ry_arena_alloc(c->a, elem * (size_t)ncap);
    if (n) memcpy(fresh, items, elem * (size_t)n);
    *cap = ncap;
    return fresh;
}

/* ---- pointer maps ---- */

void tc_map_init(tc *c, tc_map *m) {
    m->cap = 64;
    m->n = 0;
    m->keys = ry_arena_alloc(c->a, sizeof(void *) * (size_t)m->cap);
    m->vals = ry_arena_alloc(c->a, sizeof(ry_type *) * (size_t)m->cap);
}

static size_t slot_of(const tc_map *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    size_t i = (size_t)h & (size_t)(m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (size_t)(m->cap - 1);
    return i;
}

ry_type *tc_map_get(const tc_map *m, const void *key) {
    size_t i = slot_of(m, key);
    return m->keys[i] ? m->vals[i] : NULL;
}

void tc_map_put(tc *c, tc_map *m, const void *key, ry_type *val) {
    if (2 * (m->n + 1) > m->cap) { /* keep at most half full */
        tc_map old = *m;
        m->cap *= 2;
        m->n = 0;
        m->keys = ry_arena_alloc(c->a, sizeof(void *) * (size_t)m->cap);
        m->vals = ry_arena_alloc(c->a, sizeof(ry_type *) * (size_t)m->cap);
        for (int i = 0; i < old.cap; i++)
            if (old.keys[i]) tc_map_put(c, m, old.keys[i], old.vals[i]);
    }
    size_t i = slot_of(m, key);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
}

/* ---- unknowns ---- */

ry_type *tc_fresh(tc *c) {
    c->ty = tc_grow(c, c->ty, c->nty, &c->capty, sizeof *c->ty);
    ry_type *t = RY_NEW(c->a, ry_type);
    t->kind = RY_TYPE_INCOMPLETE;
    t->incomplete.id = c->nty;
    c->ty[c->nty] = (struct tc_tslot){c->nty, NULL, t};
    c->nty++;
    return t;
}

static int tfind(tc *c, int id) {
    while (c->ty[id].parent != id) {
        c->ty[id].parent = c->ty[c->ty[id].parent].parent;
        id = c->ty[id].parent;
    }
    return id;
}

ry_dim tc_fresh_dim(tc *c) {
    c->dim = tc_grow(c, c->dim, c->ndim, &c->capdim, sizeof *c->dim);
    char name[24];
    snprintf(name, sizeof name, "?%d", c->ndim);
    ry_dim d = {RY_DIM_SYM, c->ndim, ry_arena_strdup(c->a, name)};
    c->dim[c->ndim] = (struct tc_dslot){c->ndim, false, d};
    c->ndim++;
    return d;
}

bool tc_is_dim_unknown(const ry_dim *d) {
    return d->kind == RY_DIM_SYM && d->name && d->name[0] == '?';
}

static int dfind(tc *c, int id) {
    while (c->dim[id].parent != id) {
        c->dim[id].parent = c->dim[c->dim[id].parent].parent;
        id = c->dim[id].parent;
    }
    return id;
}

/* A dim with bound unknowns replaced; an unbound one comes back as its root. */
static ry_dim dres(tc *c, ry_dim d) {
    if (!tc_is_dim_unknown(&d)) return d;
    return c->dim[dfind(c, (int)d.value)].val;
}

ry_type *tc_resolve(tc *c, ry_type *t) {
    while (t->kind == RY_TYPE_INCOMPLETE) {
        int root = tfind(c, t->incomplete.id);
        if (!c->ty[root].bound) return c->ty[root].node;
        t = c->ty[root].bound;
    }
    return t;
}

/* ---- unification ----
 * Dims: an unknown binds to anything; Any matches anything and binds
 * nothing; constants match equal constants; a symbolic dim only itself. */
static bool unify_dim(tc *c, ry_dim a, ry_dim b) {
    a = dres(c, a);
    b = dres(c, b);
    bool ua = tc_is_dim_unknown(&a), ub = tc_is_dim_unknown(&b);
    if (ua && ub) {
        if (a.value != b.value) c->dim[a.value].parent = (int)b.value;
        return true;
    }
    if (ua || ub) {
        struct tc_dslot *s = &c->dim[ua ? a.value : b.value];
        s->has = true;
        s->val = ua ? b : a;
        return true;
    }
    if (a.kind == RY_DIM_ANY || b.kind == RY_DIM_ANY) return true;
    if (a.kind != b.kind) return false;
    if (a.kind == RY_DIM_CONST) return a.value == b.value;
    return strcmp(a.name, b.name) == 0;
}

/* Whether unknown root occurs in t (binding it to t would make an
 * infinite type such as List[_1] = _1). */
static bool occurs(tc *c, int root, ry_type *t) {
    t = tc_resolve(c, t);
    switch (t->kind) {
    case RY_TYPE_INCOMPLETE: return tfind(c, t->incomplete.id) == root;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (occurs(c, root, t->tuple.fields[i])) return true;
        return false;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (occurs(c, root, t->func.args[i])) return true;
        return occurs(c, root, t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (occurs(c, root, t->call.args[i])) return true;
        return false;
    case RY_TYPE_REF: return occurs(c, root, t->ref.inner);
    default: return false;
    }
}

static tc_unify_result unify_all(tc *c, int n, ry_type **a, ry_type **b) {
    for (int i = 0; i < n; i++) {
        tc_unify_result r = tc_unify(c, a[i], b[i]);
        if (r != UNIFY_OK) return r;
    }
    return UNIFY_OK;
}

tc_unify_result tc_unify(tc *c, ry_type *a, ry_type *b) {
    a = tc_resolve(c, a);
    b = tc_resolve(c, b);
    if (a == b) return UNIFY_OK;
    if (a->kind == RY_TYPE_INCOMPLETE && b->kind == RY_TYPE_INCOMPLETE) {
        c->ty[a->incomplete.id].parent = b->incomplete.id;
        return UNIFY_OK;
    }
    if (a->kind == RY_TYPE_INCOMPLETE || b->kind == RY_TYPE_INCOMPLETE) {
        ry_type *u = a->kind == RY_TYPE_INCOMPLETE ? a : b, *t = u == a ? b : a;
        if (occurs(c, u->incomplete.id, t)) return UNIFY_INFINITE;
        c->ty[u->incomplete.id].bound = t;
        return UNIFY_OK;
    }
    if (a->kind != b->kind) return UNIFY_MISMATCH;
    switch (a->kind) {
    case RY_TYPE_TENSOR:
        if (a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim)
            return UNIFY_MISMATCH;
        for (int i = 0; i < a->tensor.ndim; i++)
            if (!unify_dim(c, a->tensor.dims[i], b->tensor.dims[i])) return UNIFY_MISMATCH;
        return UNIFY_OK;
    case RY_TYPE_TUPLE:
        if (a->tuple.n != b->tuple.n) return UNIFY_MISMATCH;
        return unify_all(c, a->tuple.n, a->tuple.fields, b->tuple.fields);
    case RY_TYPE_FUNC: {
        if (a->func.nargs != b->func.nargs || a->func.ntparams != b->func.ntparams)
            return UNIFY_MISMATCH;
        /* fn [A](A) -> A and fn [B](B) -> B: rename b's parameters to a's */
        if (a->func.ntparams)
            b = tc_subst(c, b, b->func.ntparams, b->func.tparams, a->func.tparams, false);
        tc_unify_result r = unify_all(c, a->func.nargs, a->func.args, b->func.args);
        return r != UNIFY_OK ? r : tc_unify(c, a->func.ret, b->func.ret);
    }
    case RY_TYPE_VAR: return a->var.id == b->var.id ? UNIFY_OK : UNIFY_MISMATCH;
    case RY_TYPE_CALL:
        if (a->call.adt != b->call.adt || a->call.nargs != b->call.nargs) return UNIFY_MISMATCH;
        return unify_all(c, a->call.nargs, a->call.args, b->call.args);
    case RY_TYPE_REF: return tc_unify(c, a->ref.inner, b->ref.inner);
    case RY_TYPE_INCOMPLETE: break;
    }
    return UNIFY_MISMATCH;
}

/* The type of a value that is either an a or a b: unification, except that
 * two different constant dims join to Any instead of failing (the branches
 * of an if that the optimizer specialized to different static shapes, under
 * a declared `?`). */
tc_unify_result tc_join(tc *c, ry_type *a, ry_type *b, ry_type **out) {
    a = tc_resolve(c, a);
    b = tc_resolve(c, b);
    *out = a;
    if (a->kind == RY_TYPE_TENSOR && b->kind == RY_TYPE_TENSOR && a->tensor.dtype == b->tensor.dtype &&
        a->tensor.ndim == b->tensor.ndim) {
        ry_dim dims[RY_MAX_RANK];
        bool widened = false;
        for (int i = 0; i < a->tensor.ndim; i++) {
            ry_dim x = dres(c, a->tensor.dims[i]), y = dres(c, b->tensor.dims[i]);
            dims[i] = a->tensor.dims[i];
            if (x.kind == RY_DIM_CONST && y.kind == RY_DIM_CONST && x.value != y.value) {
                dims[i] = (ry_dim){RY_DIM_ANY, 0, NULL};
                widened = true;
            } else if (!unify_dim(c, x, y)) {
                return UNIFY_MISMATCH;
            }
        }
        if (widened) *out = ry_type_tensor_arena(c->a, a->tensor.dtype, a->tensor.ndim, dims);
        return UNIFY_OK;
    }
    if (a->kind == RY_TYPE_TUPLE && b->kind == RY_TYPE_TUPLE && a->tuple.n == b->tuple.n) {
        ry_type **fields = RY_NEW_ARRAY(c->a, ry_type *, a->tuple.n);
        bool widened = false;
        for (int i = 0; i < a->tuple.n; i++) {
            tc_unify_result r = tc_join(c, a->tuple.fields[i], b->tuple.fields[i], &fields[i]);
            if (r != UNIFY_OK) return r;
            widened |= fields[i] != tc_resolve(c, a->tuple.fields[i]);
        }
        if (widened) *out = ry_type_tuple_arena(c->a, a->tuple.n, fields);
        return UNIFY_OK;
    }
    return tc_unify(c, a, b);
}

/* ---- copies: zonk, subst, import ----
 * One copier with three jobs, chosen by the fields of `copy`. */
typedef struct copy {
    tc *c;
    ry_arena *dst;
    bool resolve;        /* replace bound unknowns */
    bool final;          /* unbound dim unknowns -> Any, unknowns copied out */
    bool import;         /* written `_` -> fresh unknown; check ADT arity */
    int n;               /* type var substitution */
    ry_type **ids, **repl;
    bool syms;           /* symbolic dims -> fresh dim unknowns per name */
    int nsym, capsym;
    struct sym { const char *name; ry_dim dim; } *sym_map;
    ry_status status;
} copy;

static ry_dim copy_dim(copy *k, ry_dim d) {
    if (k->resolve) d = dres(k->c, d);
    if (k->final && tc_is_dim_unknown(&d)) return (ry_dim){RY_DIM_ANY, 0, NULL};
    if (k->syms && d.kind == RY_DIM_SYM && !tc_is_dim_unknown(&d)) {
        for (int i = 0; i < k->nsym; i++)
            if (strcmp(k->sym_map[i].name, d.name) == 0) return k->sym_map[i].dim;
        k->sym_map = tc_grow(k->c, k->sym_map, k->nsym, &k->capsym, sizeof *k->sym_map);
        k->sym_map[k->nsym] = (struct sym){d.name, tc_fresh_dim(k->c)};
        return k->sym_map[k->nsym++].dim;
    }
    return d;
}

static ry_type *copy_type(copy *k, ry_type *t);

static ry_type **copy_types(copy *k, int n, ry_type **ts) {
    ry_type **out = RY_NEW_ARRAY(k->dst, ry_type *, n);
    for (int i = 0; i < n; i++) out[i] = copy_type(k, ts[i]);
    return out;
}

static ry_type *copy_type(copy *k, ry_type *t) {
    if (!t) return k->import ? tc_fresh(k->c) : NULL;
    if (k->resolve) t = tc_resolve(k->c, t);
    if (t->kind == RY_TYPE_INCOMPLETE) {
        if (k->import) return tc_fresh(k->c);
        if (!k->final) return t; /* an unbound unknown stays shared */
    }
    if (t->kind == RY_TYPE_VAR)
        for (int i = 0; i < k->n; i++)
            if (k->ids[i]->var.id == t->var.id) return k->repl[i];
    ry_type *o = RY_NEW(k->dst, ry_type);
    *o = *t;
    switch (t->kind) {
    case RY_TYPE_TENSOR:
        o->tensor.dims = RY_NEW_ARRAY(k->dst, ry_dim, t->tensor.ndim);
        for (int i = 0; i < t->tensor.ndim; i++) o->tensor.dims[i] = copy_dim(k, t->tensor.dims[i]);
        break;
    case RY_TYPE_TUPLE: o->tuple.fields = copy_types(k, t->tuple.n, t->tuple.fields); break;
    case RY_TYPE_FUNC:
        o->func.tparams = copy_types(k, t->func.ntparams, t->func.tparams);
        o->func.args = copy_types(k, t->func.nargs, t->func.args);
        o->func.ret = copy_type(k, t->func.ret);
        break;
    case RY_TYPE_CALL:
        if (k->import && k->status == RY_OK && (!t->call.adt || t->call.nargs != t->call.adt->ntparams)) {
            if (!t->call.adt)
                k->status = ry_error_at(&k->c->err, t->span, "type call of an unknown type");
            else
                k->status = ry_error_at(&k->c->err, t->span, "type %s takes %d type argument%s, not %d",
                                        t->call.adt->name, t->call.adt->ntparams,
                                        t->call.adt->ntparams == 1 ? "" : "s", t->call.nargs);
        }
        o->call.args = copy_types(k, t->call.nargs, t->call.args);
        break;
    case RY_TYPE_REF: o->ref.inner = copy_type(k, t->ref.inner); break;
    case RY_TYPE_VAR:
    case RY_TYPE_INCOMPLETE: break;
    }
    return o;
}

ry_type *tc_zonk(tc *c, ry_type *t, ry_arena *dst, bool final) {
    copy k = {.c = c, .dst = dst, .resolve = true, .final = final};
    return copy_type(&k, t);
}

ry_type *tc_subst(tc *c, ry_type *t, int n, ry_type **ids, ry_type **repl, bool syms) {
    copy k = {.c = c, .dst = c->a, .resolve = true, .n = n, .ids = ids, .repl = repl, .syms = syms};
    return copy_type(&k, t);
}

ry_status tc_import(tc *c, ry_type *t, ry_type **out) {
    copy k = {.c = c, .dst = c->a, .import = true};
    *out = copy_type(&k, t);
    return k.status;
}

bool tc_known(tc *c, ry_type *t) {
    t = tc_resolve(c, t);
    switch (t->kind) {
    case RY_TYPE_INCOMPLETE: return false;
    case RY_TYPE_TENSOR:
        for (int i = 0; i < t->tensor.ndim; i++) {
            ry_dim d = dres(c, t->tensor.dims[i]);
            if (tc_is_dim_unknown(&d)) return false;
        }
        return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!tc_known(c, t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (!tc_known(c, t->func.args[i])) return false;
        return tc_known(c, t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!tc_known(c, t->call.args[i])) return false;
        return true;
    case RY_TYPE_REF: return tc_known(c, t->ref.inner);
    case RY_TYPE_VAR: return true;
    }
    return true;
}

const char *tc_str(tc *c, ry_type *t, char *buf, size_t n) {
    return ry_type_str(tc_zonk(c, t, c->a, false), buf, n);
}
