/*
 * grad_wrap.c: the function with TVM's `gradient` signature around the
 * transformed one:
 *   fn (x1, .., xn) {
 *     bp = ref(fn () { () });
 *     x1' = pair(x1); ..                  each float tensor with a zero cell
 *     res = f'(x1', .., xn', bp);
 *     seed(res);                          every float tensor cell += ones_like
 *     ref_read(bp)();                     run the backpropagator
 *     (primal(res), (grad(x1'), .., grad(xn')))
 *   }
 * Parameters and results may be tensors, tuples of them, or values the
 * mapping leaves unchanged; ADTs holding tensors, functions and type
 * variables are rejected here (the transform itself handles them inside).
 */
#include "grad_impl.h"

static bool wrappable(gx *s, const ry_type *t) {
    if (!t) return false;
    if (t->kind == RY_TYPE_TENSOR || !gx_changes(s, t)) return true;
    if (t->kind != RY_TYPE_TUPLE) return false;
    for (int i = 0; i < t->tuple.n; i++)
        if (!wrappable(s, t->tuple.fields[i])) return false;
    return true;
}

/* pair(x): float tensor -> (x, ref(zeros_like(x))); tuple fieldwise */
static ry_expr *pair(gx *s, ry_expr *x, const ry_type *t) {
    if (gx_is_float(t)) {
        ry_expr *p[2] = {x, gx_ref_new(s, ry_gb_op1(s->m, "zeros_like", x))};
        return ry_expr_tuple(s->m, 2, p, RY_NO_SPAN);
    }
    if (t->kind != RY_TYPE_TUPLE || !gx_changes(s, t)) return x;
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n + 1);
    for (int i = 0; i < t->tuple.n; i++) f[i] = pair(s, gx_proj(s, x, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

/* grad(x', x): float tensor -> ref_read(x'.1); other tensors -> zeros_like(x);
 * tuple fieldwise; () stays () */
static ry_expr *grad_of(gx *s, ry_expr *xp, ry_expr *x, const ry_type *t) {
    if (gx_is_float(t)) return gx_ref_read(s, gx_proj(s, xp, 1));
    if (t->kind == RY_TYPE_TENSOR) return ry_gb_op1(s->m, "zeros_like", x);
    if (t->kind != RY_TYPE_TUPLE) return gx_unit(s);
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n + 1);
    for (int i = 0; i < t->tuple.n; i++)
        f[i] = grad_of(s, gx_proj(s, xp, i), gx_proj(s, x, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

/* seed(r'): r'.1 := r'.1 + ones_like(r'.0) for every float tensor of r */
static void seed(gx *s, gx_block *b, ry_expr *r, const ry_type *t) {
    if (gx_is_float(t)) {
        ry_expr *cell = gx_proj(s, r, 1);
        ry_expr *one = ry_gb_op1(s->m, "ones_like", gx_proj(s, r, 0));
        gx_do(s, b, gx_ref_write(s, cell, ry_gb_op2(s->m, "add", gx_ref_read(s, cell), one)));
        return;
    }
    if (t->kind != RY_TYPE_TUPLE) return;
    for (int i = 0; i < t->tuple.n; i++) seed(s, b, gx_proj(s, r, i), t->tuple.fields[i]);
}

/* primal(r'): float tensor -> r'.0; tuple fieldwise; unchanged types as is */
static ry_expr *primal_of(gx *s, ry_expr *r, const ry_type *t) {
    if (gx_is_float(t)) return gx_proj(s, r, 0);
    if (t->kind != RY_TYPE_TUPLE || !gx_changes(s, t)) return r;
    ry_expr **f = RY_NEW_ARRAY(s->scratch, ry_expr *, t->tuple.n + 1);
    for (int i = 0; i < t->tuple.n; i++) f[i] = primal_of(s, gx_proj(s, r, i), t->tuple.fields[i]);
    return ry_expr_tuple(s->m, t->tuple.n, f, RY_NO_SPAN);
}

ry_status gx_wrapper(gx *s, const ry_expr *f, ry_expr *fnp, ry_expr **out) {
    int n = f->func.nparams;
    const ry_type *ft = f->type;
    if (!ft || ft->kind != RY_TYPE_FUNC)
        return ry_error_at(s->err, f->span, "gradient: the function is not typed");
    if (f->func.ntparams)
        return ry_error_at(s->err, f->span,
                           "gradient: the function to differentiate is polymorphic; "
                           "differentiate a monomorphic function that calls it");
    for (int i = 0; i < n; i++) {
        const ry_var *p = f->func.params[i];
        char tb[200];
        if (!wrappable(s, p->type))
            return ry_error_at(s->err, p->span,
                               "gradient: parameter %%%s has type %s; the gradient wrapper takes "
                               "tensors and tuples of them",
                               p->name, ry_type_str(p->type, tb, sizeof tb));
    }
    ry_type *rt = ft->func.ret;
    if (!wrappable(s, rt)) {
        char tb[200];
        return ry_error_at(s->err, f->span,
                           "gradient: the result has type %s; the gradient wrapper takes "
                           "tensors and tuples of them",
                           ry_type_str(rt, tb, sizeof tb));
    }

    ry_expr *w = ry_expr_new(s->m, RY_EXPR_FUNC, f->span);
    w->func.nparams = n;
    w->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, n + 1);
    gx_block b = {0};
    ry_expr *noop = ry_expr_new(s->m, RY_EXPR_FUNC, RY_NO_SPAN);
    noop->func.body = gx_unit(s);
    ry_expr *bp = gx_bind(s, &b, "bp", gx_ref_new(s, noop), s->bp_type);
    ry_expr **pp = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    ry_expr **args = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    for (int i = 0; i < n; i++) {
        const ry_var *p = f->func.params[i];
        ry_var *np = ry_var_new(s->m, p->name, p->type, p->span);
        np->type = p->type;
        w->func.params[i] = np;
        pp[i] = gx_bind(s, &b, p->name, pair(s, gx_use(s, np), p->type), gx_type(s, p->type));
        args[i] = pp[i];
    }
    args[n] = bp;
    ry_expr *res = gx_bind(s, &b, "res", ry_expr_call(s->m, fnp, n + 1, args, f->span),
                           gx_type(s, rt));
    seed(s, &b, res, rt);
    ry_expr *k = gx_bind(s, &b, "back", gx_ref_read(s, bp), NULL);
    gx_do(s, &b, ry_expr_call(s->m, k, 0, NULL, RY_NO_SPAN));
    ry_expr **grads = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    for (int i = 0; i < n; i++)
        grads[i] = grad_of(s, pp[i], gx_use(s, w->func.params[i]), f->func.params[i]->type);
    ry_expr *pair2[2] = {primal_of(s, res, rt), ry_expr_tuple(s->m, n, grads, RY_NO_SPAN)};
    w->func.body = gx_fold(s, &b, ry_expr_tuple(s->m, 2, pair2, RY_NO_SPAN));
    *out = w;
    return RY_OK;
}
