/*
 * grad_convert.c: conversions between primal values and transformed ones,
 * for the gradient wrapper's parameters and result. For a concrete type T:
 *   in(x)       T  -> T'   pair each float tensor with a zero adjoint cell
 *   grad(x')    T' -> T    each float tensor replaced by its adjoint
 *                          (integer tensors by zeros)
 *   primal(x')  T' -> T    each pair replaced by its primal
 *   seed(x')    T' -> ()   each adjoint cell += ones_like(primal)
 * Tensors and tuples convert inline. An ADT that has a twin converts by a
 * generated recursive global per (conversion, concrete type): a match over
 * the constructors that rebuilds each with converted fields. Types that the
 * mapping leaves unchanged convert to themselves (seed: nothing).
 */
#include <string.h>

#include "grad_impl.h"

static const char *const kind_names[] = {"in", "grad", "primal", "seed"};

ry_type *gx_subst(gx *s, ry_type *t, int n, ry_type **from, ry_type **to) {
    if (!t || n == 0) return t;
    ry_type *r;
    switch (t->kind) {
    case RY_TYPE_VAR:
        for (int i = 0; i < n; i++)
            if (from[i]->var.id == t->var.id) return to[i];
        return t;
    case RY_TYPE_TUPLE: {
        ry_type **f = RY_NEW_ARRAY(s->m->arena, ry_type *, t->tuple.n);
        for (int i = 0; i < t->tuple.n; i++)
            f[i] = gx_subst(s, t->tuple.fields[i], n, from, to);
        return ry_type_tuple_arena(s->m->arena, t->tuple.n, f);
    }
    case RY_TYPE_CALL:
        r = ry_type_new(s->m, RY_TYPE_CALL, t->span);
        r->call = t->call;
        r->call.args = RY_NEW_ARRAY(s->m->arena, ry_type *, t->call.nargs);
        for (int i = 0; i < t->call.nargs; i++)
            r->call.args[i] = gx_subst(s, t->call.args[i], n, from, to);
        return r;
    case RY_TYPE_REF:
        r = ry_type_new(s->m, RY_TYPE_REF, t->span);
        r->ref.inner = gx_subst(s, t->ref.inner, n, from, to);
        return r;
    case RY_TYPE_FUNC:
        r = ry_type_new(s->m, RY_TYPE_FUNC, t->span);
        r->func = t->func;
        r->func.args = RY_NEW_ARRAY(s->m->arena, ry_type *, t->func.nargs);
        for (int i = 0; i < t->func.nargs; i++)
            r->func.args[i] = gx_subst(s, t->func.args[i], n, from, to);
        r->func.ret = gx_subst(s, t->func.ret, n, from, to);
        return r;
    default: return t;
    }
}

bool gx_convertible(gx *s, const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_TENSOR: return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!gx_convertible(s, t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!gx_convertible(s, t->call.args[i])) return false;
        return true; /* the ctor fields are checked when the converter is built */
    default: return !gx_changes(s, t);
    }
}

static ry_type *unit_type(gx *s) { return ry_type_tuple_arena(s->m->arena, 0, NULL); }

static ry_expr *adt_convert(gx *s, gx_conv kind, ry_expr *x, ry_type *t);

ry_expr *gx_convert(gx *s, gx_conv kind, ry_expr *x, ry_type *t) {
    if (!gx_changes(s, t)) {
        if (kind == GX_SEED) return gx_unit(s);
        if (kind == GX_GRAD && t->kind == RY_TYPE_TENSOR) return ry_gb_op1(s->m, "zeros_like", x);
        return x;
    }
    if (gx_is_float(t)) {
        ry_expr *cell = gx_proj(s, x, 1);
        switch (kind) {
        case GX_IN: {
            ry_expr *p[2] = {x, gx_ref_new(s, ry_gb_op1(s->m, "zeros_like", x))};
            return ry_expr_tuple(s->m, 2, p, RY_NO_SPAN);
        }
        case GX_GRAD: return gx_ref_read(s, cell);
        case GX_PRIMAL: return gx_proj(s, x, 0);
        case GX_SEED: {
            ry_expr *one = ry_gb_op1(s->m, "ones_like", gx_proj(s, x, 0));
            return gx_ref_write(s, cell, ry_gb_op2(s->m, "add", gx_ref_read(s, cell), one));
        }
        }
    }
    if (t->kind == RY_TYPE_TUPLE) {
        gx_block b = {0};
        ry_expr *v = x->kind == RY_EXPR_VAR ? x : gx_bind(s, &b, "t", x, NULL);
        ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n + 1);
        for (int i = 0; i < t->tuple.n; i++) {
            f[i] = gx_convert(s, kind, gx_proj(s, v, i), t->tuple.fields[i]);
            if (kind == GX_SEED) gx_do(s, &b, f[i]);
        }
        ry_expr *r = kind == GX_SEED ? gx_unit(s) : ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
        return gx_fold(s, &b, r);
    }
    if (t->kind == RY_TYPE_CALL) return adt_convert(s, kind, x, t);
    return x; /* not reached: gx_convertible rejected it */
}

/* The converter global for (kind, t), built on first use:
 *   def @<kind>_<D>(%v) { match (%v) { C(%f..) => C'(convert(%f)..), .. } }
 * (seed: each clause converts its fields in sequence and gives ()). */
static ry_expr *adt_convert(gx *s, gx_conv kind, ry_expr *x, ry_type *t) {
    const char *name = NULL;
    for (int i = 0; i < s->nconvs && !name; i++)
        if (s->convs[i].kind == (int)kind && ry_type_equal(s->convs[i].type, t))
            name = s->convs[i].name;
    if (!name) {
        char base[300];
        snprintf(base, sizeof base, "%s_%s", kind_names[kind], t->call.adt->name);
        name = gx_unique(s, base, "");
        if (s->nconvs == s->capconvs) {
            int ncap = s->capconvs ? s->capconvs * 2 : 8;
            struct gx_conv_entry *fresh = RY_NEW_ARRAY(s->scratch, struct gx_conv_entry, ncap);
            if (s->nconvs) memcpy(fresh, s->convs, sizeof *fresh * (size_t)s->nconvs);
            s->convs = fresh;
            s->capconvs = ncap;
        }
        s->convs[s->nconvs++] = (struct gx_conv_entry){(int)kind, t, name};
        ry_expr *fn = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
        gx_add_global(s, name, fn); /* before the body: it may call itself */
        ry_type *src = kind == GX_IN ? t : gx_type(s, t);
        ry_var *v = ry_var_new(s->m, "v", gx_annot(src), RY_NO_SPAN);
        v->type = src;
        fn->func.nparams = 1;
        fn->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, 1);
        fn->func.params[0] = v;
        fn->func.ret_annot = gx_annot(kind == GX_SEED ? unit_type(s)
                                      : kind == GX_IN ? gx_type(s, t)
                                                      : t);
        ry_typedef *td = t->call.adt;
        ry_expr *mt = ry_expr_new(s->m, RY_EXPR_MATCH, RY_NO_SPAN);
        mt->match.data = gx_use(s, v);
        mt->match.complete = true;
        mt->match.nclauses = td->nctors;
        mt->match.clauses = RY_NEW_ARRAY(s->m->arena, ry_clause, td->nctors);
        for (int c = 0; c < td->nctors; c++) {
            ry_ctor *k = td->ctors[c], *kw = gx_ctor(s, k);
            ry_pattern *p = RY_NEW(s->m->arena, ry_pattern);
            p->kind = RY_PAT_CTOR;
            p->ctor.ctor = kind == GX_IN ? k : kw;
            p->ctor.n = k->nfields;
            p->ctor.args = RY_NEW_ARRAY(s->m->arena, ry_pattern *, k->nfields);
            gx_block b = {0};
            ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, k->nfields + 1);
            for (int j = 0; j < k->nfields; j++) {
                ry_type *ft = gx_subst(s, k->fields[j], td->ntparams, td->tparams, t->call.args);
                if (!gx_convertible(s, ft)) {
                    char fb[200];
                    if (!s->failed)
                        ry_error_at(s->err, k->span,
                                    "gradient: constructor %s holds a %s, which the gradient "
                                    "wrapper cannot convert",
                                    k->name, ry_type_str(ft, fb, sizeof fb));
                    s->failed = true;
                }
                ry_var *fv = ry_var_new(s->m, "f", NULL, RY_NO_SPAN);
                fv->type = kind == GX_IN ? ft : gx_type(s, ft);
                p->ctor.args[j] = RY_NEW(s->m->arena, ry_pattern);
                p->ctor.args[j]->kind = RY_PAT_VAR;
                p->ctor.args[j]->var = fv;
                f[j] = s->failed ? gx_unit(s) : gx_convert(s, kind, gx_use(s, fv), ft);
                if (kind == GX_SEED) gx_do(s, &b, f[j]);
            }
            ry_expr *body;
            if (kind == GX_SEED) {
                body = gx_unit(s);
            } else {
                ry_expr *ce = ry_expr_new(s->m, RY_EXPR_CTOR, RY_NO_SPAN);
                ce->ctor.ctor = kind == GX_IN ? kw : k;
                body = k->nfields ? ry_expr_call(s->m, ce, k->nfields, f, RY_NO_SPAN) : ce;
            }
            mt->match.clauses[c] = (ry_clause){p, gx_fold(s, &b, body)};
        }
        fn->func.body = mt;
    }
    ry_expr *g = ry_expr_new(s->m, RY_EXPR_GLOBAL, RY_NO_SPAN);
    g->global.name = name;
    return ry_expr_call(s->m, g, 1, &x, RY_NO_SPAN);
}
