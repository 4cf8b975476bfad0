/*
 * grad_types.c: the type mapping of the gradient transform, the twins of
 * ADTs and the names of twins. Rules, as AD.md fixes them:
 *   float tensor T        -> (T, ref(T))     primal and adjoint cell
 *   int/bool tensor T     -> T               no adjoint
 *   (T1, .., Tn)          -> (T1', .., Tn')
 *   fn [A](T1..) -> R     -> fn [A](T1'.., ref(fn () -> ())) -> R'
 *   D[T1..]               -> D'[T1'..]       D' the twin of D, or D itself
 *                                            when no field changes
 *   ref(T)                -> ref(T')
 *   A (type variable)     -> A               instantiated with T' at calls
 * The block builder (gx_bind and friends) lives here too.
 */
#include <string.h>

#include "grad_impl.h"

bool gx_is_float(const ry_type *t) {
    return t && t->kind == RY_TYPE_TENSOR && ry_dtype_is_float(t->tensor.dtype);
}

static bool adt_needs_twin(gx *s, ry_typedef *td);

bool gx_changes(gx *s, const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_TENSOR: return ry_dtype_is_float(t->tensor.dtype);
    case RY_TYPE_FUNC: return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (gx_changes(s, t->tuple.fields[i])) return true;
        return false;
    case RY_TYPE_REF: return gx_changes(s, t->ref.inner);
    case RY_TYPE_CALL:
        if (adt_needs_twin(s, t->call.adt)) return true;
        for (int i = 0; i < t->call.nargs; i++)
            if (gx_changes(s, t->call.args[i])) return true;
        return false;
    default: return false;
    }
}

/* An ADT needs a twin when a field of a constructor changes under the
 * mapping. ADTs mention each other (and themselves), so the answer for all
 * of them is a least fixpoint: start from "no twin" and mark ADTs until
 * nothing changes (the marks only grow, so this ends). Computed once. */
static void decide_twins(gx *s) {
    s->adts_decided = true;
    for (bool again = true; again;) {
        again = false;
        for (int i = 0; i < s->m->ntypedefs; i++) {
            ry_typedef *td = s->m->typedefs[i];
            if (ad_map_get(&s->adt_need, td)) continue;
            bool need = false;
            for (int k = 0; k < td->nctors && !need; k++)
                for (int j = 0; j < td->ctors[k]->nfields && !need; j++)
                    need = gx_changes(s, td->ctors[k]->fields[j]);
            if (need) {
                ad_map_put(&s->adt_need, td, (void *)1);
                again = true;
            }
        }
    }
}

static bool adt_needs_twin(gx *s, ry_typedef *td) {
    if (!s->adts_decided) decide_twins(s);
    return ad_map_get(&s->adt_need, td) != NULL;
}

static bool name_taken(gx *s, const char *n) {
    if (ry_module_find_global(s->m, n) || ry_module_find_typedef(s->m, n) ||
        ry_module_find_ctor(s->m, n))
        return true;
    for (int i = 0; i < s->ntwins; i++)
        if (strcmp(s->twins[i].name, n) == 0) return true;
    for (int i = 0; i < s->ntds; i++) {
        if (strcmp(s->tds[i]->name, n) == 0) return true;
        for (int k = 0; k < s->tds[i]->nctors; k++)
            if (s->tds[i]->ctors[k] && strcmp(s->tds[i]->ctors[k]->name, n) == 0) return true;
    }
    return false;
}

const char *gx_unique(gx *s, const char *base, const char *suffix) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s", base, suffix);
    for (int k = 1; name_taken(s, buf); k++)
        snprintf(buf, sizeof buf, "%s%s%d", base, suffix, k);
    return ry_arena_strdup(s->m->arena, buf);
}

/* Adds to a growable array kept in the scratch arena. */
static void *grow(gx *s, void *items, int n, int *cap, size_t elem) {
    if (n < *cap) return items;
    int ncap = *cap ? *cap * 2 : 8;
    void *fresh = ry_arena_alloc(s->scratch, elem * (size_t)ncap);
    if (n) memcpy(fresh, items, elem * (size_t)n);
    *cap = ncap;
    return fresh;
}

ry_typedef *gx_adt(gx *s, ry_typedef *td) {
    ry_typedef *tw = ad_map_get(&s->adts, td);
    if (tw) return tw;
    if (!adt_needs_twin(s, td)) {
        ad_map_put(&s->adts, td, td);
        return td;
    }
    tw = RY_NEW(s->m->arena, ry_typedef);
    *tw = *td; /* the same type parameters: ids stay unique per use */
    tw->ctors = RY_NEW_ARRAY(s->m->arena, ry_ctor *, td->nctors);
    s->tds = grow(s, s->tds, s->ntds, &s->captds, sizeof *s->tds);
    s->tds[s->ntds++] = tw;
    tw->name = gx_unique(s, td->name, "_grad");
    ad_map_put(&s->adts, td, tw); /* before the fields: they may mention td */
    for (int i = 0; i < td->nctors; i++) {
        ry_ctor *k = td->ctors[i], *kw = RY_NEW(s->m->arena, ry_ctor);
        *kw = *k;
        kw->adt = tw;
        kw->name = gx_unique(s, k->name, "_grad");
        kw->fields = RY_NEW_ARRAY(s->m->arena, ry_type *, k->nfields);
        tw->ctors[i] = kw;
        ad_map_put(&s->ctors, k, kw);
        for (int j = 0; j < k->nfields; j++)
            kw->fields[j] = gx_type(s, k->fields[j]);
    }
    return tw;
}

ry_ctor *gx_ctor(gx *s, ry_ctor *k) {
    if (gx_adt(s, k->adt) == k->adt) return k;
    return ad_map_get(&s->ctors, k);
}

static ry_type *mk(gx *s, ry_type_kind kind) { return ry_type_new(s->m, kind, RY_NO_SPAN); }

ry_type *gx_type(gx *s, ry_type *t) {
    if (!t || !gx_changes(s, t)) return t;
    ry_type *r;
    switch (t->kind) {
    case RY_TYPE_TENSOR: {
        r = mk(s, RY_TYPE_REF);
        r->ref.inner = t;
        ry_type *pair[2] = {t, r};
        return ry_type_tuple_arena(s->m->arena, 2, pair);
    }
    case RY_TYPE_TUPLE: {
        ry_type **f = RY_NEW_ARRAY(s->m->arena, ry_type *, t->tuple.n);
        for (int i = 0; i < t->tuple.n; i++)
            f[i] = gx_type(s, t->tuple.fields[i]);
        return ry_type_tuple_arena(s->m->arena, t->tuple.n, f);
    }
    case RY_TYPE_FUNC:
        r = mk(s, RY_TYPE_FUNC);
        r->func = t->func;
        r->func.nargs = t->func.nargs + 1;
        r->func.args = RY_NEW_ARRAY(s->m->arena, ry_type *, r->func.nargs);
        for (int i = 0; i < t->func.nargs; i++)
            r->func.args[i] = gx_type(s, t->func.args[i]);
        r->func.args[t->func.nargs] = s->bp_type;
        r->func.ret = gx_type(s, t->func.ret);
        return r;
    case RY_TYPE_CALL:
        r = mk(s, RY_TYPE_CALL);
        r->call.adt = gx_adt(s, t->call.adt);
        r->call.nargs = t->call.nargs;
        r->call.args = RY_NEW_ARRAY(s->m->arena, ry_type *, t->call.nargs);
        for (int i = 0; i < t->call.nargs; i++)
            r->call.args[i] = gx_type(s, t->call.args[i]);
        return r;
    case RY_TYPE_REF:
        r = mk(s, RY_TYPE_REF);
        r->ref.inner = gx_type(s, t->ref.inner);
        return r;
    default: return t;
    }
}

const char *gx_twin_name(gx *s, ry_global *g) {
    const char *n = ad_map_get(&s->globals, g);
    if (n) return n;
    n = gx_unique(s, g->name, "_grad");
    ad_map_put(&s->globals, g, (void *)n);
    s->twins = grow(s, s->twins, s->ntwins, &s->captwins, sizeof *s->twins);
    s->twins[s->ntwins++] = (struct gx_twin){n, g, NULL};
    return n;
}

/* ---- blocks ---- */

void gx_push(gx *s, gx_block *b, ry_var *v, ry_expr *val) { ry_lets_push(s->scratch, b, v, val); }

ry_expr *gx_use(gx *s, ry_var *v) {
    ry_expr *e = ry_expr_var(s->m, v, RY_NO_SPAN);
    e->type = v->type;
    return e;
}

ry_expr *gx_bind(gx *s, gx_block *b, const char *name, ry_expr *val, ry_type *t) {
    ry_var *v = ry_gb_var(s->m, name, t);
    gx_push(s, b, v, val);
    return gx_use(s, v);
}

void gx_do(gx *s, gx_block *b, ry_expr *val) { gx_push(s, b, ry_gb_var(s->m, "u", NULL), val); }

ry_expr *gx_fold(gx *s, gx_block *b, ry_expr *tail) {
    for (int i = b->n - 1; i >= 0; i--)
        tail = ry_expr_let(s->m, b->vars[i], b->vals[i], tail, RY_NO_SPAN);
    return tail;
}

void gx_add_global(gx *s, const char *name, ry_expr *fn) {
    s->twins = grow(s, s->twins, s->ntwins, &s->captwins, sizeof *s->twins);
    s->twins[s->ntwins++] = (struct gx_twin){name, NULL, fn};
}

/* Whether t, or a type inside it, satisfies leaf. */
static bool mentions(const ry_type *t, bool (*leaf)(const ry_type *)) {
    if (!t) return false;
    if (leaf(t)) return true;
    switch (t->kind) {
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (mentions(t->tuple.fields[i], leaf)) return true;
        return false;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (mentions(t->func.args[i], leaf)) return true;
        return mentions(t->func.ret, leaf);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (mentions(t->call.args[i], leaf)) return true;
        return false;
    default: return false;
    }
}

static bool is_ref(const ry_type *t) { return t->kind == RY_TYPE_REF; }

static bool has_any_dim(const ry_type *t) {
    for (int i = 0; t->kind == RY_TYPE_TENSOR && i < t->tensor.ndim; i++)
        if (t->tensor.dims[i].kind == RY_DIM_ANY) return true;
    return false;
}

/* TVM prints ref types but cannot parse them back, so annotations that
 * mention a ref are left out and the type checker infers them: the printed
 * gradient program then loads in TVM too. */
ry_type *gx_annot(ry_type *t) { return mentions(t, is_ref) ? NULL : t; }

bool gx_has_any(const ry_type *t) { return mentions(t, has_any_dim); }
