/*
 * gradcheck.c: gradient checking. The gradient ry_grad computes (seeded
 * with ones, so it is the gradient of the sum of every output tensor) is
 * compared element by element with central finite differences of that sum,
 * computed by running the original function in the interpreter with one
 * element moved by +-h, h = eps * max(1, |x|). Float64 arguments give
 * differences good to about 1e-8; the tolerances are the caller's.
 */
#include <math.h>
#include <string.h>

#include "relayc/ad.h"

/* sum over every element of every tensor in f(args) */
static ry_status eval_sum(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                          const ry_interp_opts *io, double *out, ry_error *err) {
    ry_value *v = NULL;
    if (ry_interp_call(m, entry, nargs, args, io, &v, err)) return RY_ERR;
    int n = ry_value_count_tensors(v);
    ry_tensor **ts = n > 0 ? ry_calloc((size_t)n, sizeof *ts) : NULL;
    if (n < 0 || (n > 0 && !ts)) {
        ry_value_release(v);
        return ry_error_at(err, RY_NO_SPAN, "gradcheck: out of memory");
    }
    ry_value_flatten(v, ts, n);
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < ts[i]->size; j++)
            s += ry_tensor_get(ts[i], j);
    ry_free(ts);
    ry_value_release(v);
    *out = s;
    return RY_OK;
}

/* Checks one float tensor argument i against ad, its computed gradient. */
static ry_status check_param(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                             int i, const ry_tensor *ad, const ry_gradcheck_opts *o,
                             ry_gradcheck_param *p, ry_error *err) {
    ry_tensor *x = ry_tensor_copy(args[i]->tensor);
    ry_value *xv = x ? ry_value_tensor(x) : NULL;
    ry_value **a2 = ry_calloc((size_t)nargs, sizeof *a2);
    if (!xv || !a2) {
        ry_value_release(xv);
        ry_free(a2);
        return ry_error_at(err, RY_NO_SPAN, "gradcheck: out of memory");
    }
    memcpy(a2, args, sizeof *a2 * (size_t)nargs);
    a2[i] = xv;
    ry_status st = RY_OK;
    p->checked = true;
    p->ok = ry_tensor_same_shape(x, ad);
    for (int64_t j = 0; p->ok && j < x->size && st == RY_OK; j++) {
        double x0 = ry_tensor_get(x, j), h = o->eps * fmax(1.0, fabs(x0)), fp, fm;
        ry_tensor_set(x, j, x0 + h);
        st = eval_sum(m, entry, nargs, a2, o->interp, &fp, err);
        ry_tensor_set(x, j, x0 - h);
        if (st == RY_OK) st = eval_sum(m, entry, nargs, a2, o->interp, &fm, err);
        ry_tensor_set(x, j, x0);
        if (st) break;
        double fd = (fp - fm) / (2 * h), g = ry_tensor_get(ad, j), diff = fabs(g - fd);
        double rel = diff / fmax(fmax(fabs(g), fabs(fd)), 1e-12);
        if (diff > p->max_abs) p->max_abs = diff;
        if (rel > p->max_rel) p->max_rel = rel;
        if (!(diff <= o->atol + o->rtol * fabs(fd))) p->ok = false;
    }
    ry_value_release(xv);
    ry_free(a2);
    return st;
}

static ry_status check_first(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                             const ry_gradcheck_opts *opts, ry_gradcheck_report *rep,
                             ry_error *err);

ry_status ry_gradcheck(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                       const ry_gradcheck_opts *opts, ry_gradcheck_report *rep, ry_error *err) {
    ry_gradcheck_opts o = opts ? *opts : (ry_gradcheck_opts){0};
    if (o.eps <= 0) o.eps = 1e-6;
    if (o.rtol <= 0) o.rtol = 1e-5;
    if (o.atol <= 0) o.atol = 1e-7;
    memset(rep, 0, sizeof *rep);
    if (check_first(m, entry, nargs, args, &o, rep, err)) return RY_ERR;
    if (!o.second_order) return RY_OK;
    ry_gradcheck_report r2;
    if (check_first(m, rep->grad_name, nargs, args, &o, &r2, err)) return RY_ERR;
    memcpy(rep->second, r2.params, sizeof rep->second);
    rep->grad2_name = r2.grad_name;
    rep->ok = rep->ok && r2.ok;
    return RY_OK;
}

static ry_status check_first(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                             const ry_gradcheck_opts *opts, ry_gradcheck_report *rep,
                             ry_error *err) {
    const ry_gradcheck_opts o = *opts;
    memset(rep, 0, sizeof *rep);
    ry_global *g = ry_module_find_global(m, entry);
    if (!g) return ry_error_at(err, RY_NO_SPAN, "gradcheck: no global @%s", entry);
    if (nargs != g->func->func.nparams || nargs > RY_GRADCHECK_MAX_PARAMS)
        return ry_error_at(err, g->span, "gradcheck: @%s takes %d arguments, %d given (at most %d)",
                           entry, g->func->func.nparams, nargs, RY_GRADCHECK_MAX_PARAMS);
    if (ry_grad(m, entry, NULL, NULL, &rep->grad_name, err)) return RY_ERR;
    ry_value *out = NULL;
    if (ry_interp_call(m, rep->grad_name, nargs, args, o.interp, &out, err)) return RY_ERR;
    const ry_value *grads = out->tuple.fields[1];
    ry_status st = RY_OK;
    rep->nparams = nargs;
    rep->ok = true;
    for (int i = 0; i < nargs && st == RY_OK; i++) {
        ry_gradcheck_param *p = &rep->params[i];
        snprintf(p->name, sizeof p->name, "%s", g->func->func.params[i]->name);
        const ry_value *gv = grads->tuple.fields[i];
        if (args[i]->kind != RY_VAL_TENSOR || !ry_dtype_is_float(args[i]->tensor->dtype) ||
            gv->kind != RY_VAL_TENSOR)
            continue;
        st = check_param(m, entry, nargs, args, i, gv->tensor, &o, p, err);
        if (!p->ok) rep->ok = false;
    }
    ry_value_release(out);
    return st;
}
