/*
 * grad_wrap.c: the function with TVM's `gradient` signature around the
 * transformed one:
 *   fn (x1, .., xn) {
 *     bp = ref(fn () { () });
 *     x1' = in(x1); ..                    each float tensor with a zero cell
 *     res = f'(x1', .., xn', bp);
 *     seed(res);                          every float tensor cell += ones_like
 *     ref_read(bp)();                     run the backpropagator
 *     (primal(res), (grad(x1'), .., grad(xn')))
 *   }
 * Parameters and results may be tensors, tuples, concrete ADTs (converted
 * by generated globals, see grad_convert.c) and values the mapping leaves
 * unchanged, and first-order functions of those (lifted, see
 * grad_outer.c); type variables are rejected here (a polymorphic global is
 * instantiated first).
 */
#include "grad_impl.h"

static ry_status check_type(gx *s, const ry_type *t, ry_span span, const char *what,
                            bool param) {
    if (gx_convertible(s, t) || (param && gx_liftable(s, t))) return RY_OK;
    char tb[200];
    return ry_error_at(s->err, span,
                       "gradient: %s has type %s; the gradient wrapper takes tensors, tuples "
                       "and ADTs of them%s",
                       what, ry_type_str(t, tb, sizeof tb),
                       param ? ", and functions of those" : "");
}

ry_status gx_wrapper(gx *s, const ry_expr *f, ry_expr *fnp, ry_expr **out) {
    int n = f->func.nparams;
    const ry_type *ft = f->type;
    if (!ft || ft->kind != RY_TYPE_FUNC)
        return ry_error_at(s->err, f->span, "gradient: the function is not typed");
    if (f->func.ntparams) /* a global is instantiated first (grad_outer.c) */
        return ry_error_at(s->err, f->span,
                           "gradient: the function expression to differentiate is polymorphic; "
                           "make it a global (differentiated at one instance) or call it from "
                           "a monomorphic function");
    for (int i = 0; i < n; i++) {
        const ry_var *p = f->func.params[i];
        char what[200];
        snprintf(what, sizeof what, "parameter %%%s", p->name);
        if (check_type(s, p->type, p->span, what, true)) return RY_ERR;
    }
    if (s->opts.wrt && s->opts.nwrt != n)
        return ry_error_at(s->err, f->span,
                           "gradient: wrt has %d flags for a function of %d parameters",
                           s->opts.nwrt, n);
    ry_type *rt = ft->func.ret;
    if (check_type(s, rt, f->span, "the result", false)) return RY_ERR;

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
        bool fn = p->type->kind == RY_TYPE_FUNC; /* lifted: see grad_outer.c */
        ry_expr *in = fn ? gx_lift(s, gx_use(s, np), p->type)
                         : gx_convert(s, GX_IN, gx_use(s, np), p->type);
        pp[i] = gx_bind(s, &b, p->name, in, gx_type(s, p->type));
        args[i] = pp[i];
    }
    args[n] = bp;
    ry_expr *res =
        gx_bind(s, &b, "res", ry_expr_call(s->m, fnp, n + 1, args, f->span), gx_type(s, rt));
    if (gx_changes(s, rt)) gx_do(s, &b, gx_convert(s, GX_SEED, res, rt));
    ry_expr *k = gx_bind(s, &b, "back", gx_ref_read(s, bp), NULL);
    gx_do(s, &b, ry_expr_call(s->m, k, 0, NULL, RY_NO_SPAN));
    /* Only the adjoints asked for are read: the cells of the others are
     * written by the backpropagator but never read, which is what lets
     * partial evaluation and DCE drop their computation. */
    ry_expr **grads = RY_NEW_ARRAY(s->scratch, ry_expr *, n + 1);
    int ng = 0;
    for (int i = 0; i < n; i++)
        if (!s->opts.wrt || s->opts.wrt[i])
            grads[ng++] = f->func.params[i]->type->kind == RY_TYPE_FUNC
                              ? gx_unit(s) /* a function gets no gradient */
                              : gx_convert(s, GX_GRAD, pp[i], f->func.params[i]->type);
    ry_expr *pair2[2] = {gx_convert(s, GX_PRIMAL, res, rt),
                         ry_expr_tuple(s->m, ng, grads, RY_NO_SPAN)};
    w->func.body = gx_fold(s, &b, ry_expr_tuple(s->m, 2, pair2, RY_NO_SPAN));
    *out = w;
    return s->failed ? RY_ERR : RY_OK;
}
