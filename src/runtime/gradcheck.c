/*
 * gradcheck.c: gradient checking, a runner over the interpreter (so it
 * lives with the engines, not with the transform). The gradient ry_grad
 * computes (seeded with ones, so it is the gradient of the sum of every
 * output tensor) is compared element by element with central finite
 * differences of that sum, computed by running the original function in
 * the interpreter with one element moved by +-h, h = eps * max(1, |x|). Float64 arguments give
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

/* A copy of v whose tensors are new buffers (tuples and ADT values are
 * rebuilt around them), so perturbing it leaves the caller's value alone.
 * NULL on out-of-memory; closures and refs are shared, not copied. */
static ry_value *deep_copy(ry_value *v) {
    switch (v->kind) {
    case RY_VAL_TENSOR: {
        ry_tensor *t = ry_tensor_copy(v->tensor);
        return t ? ry_value_tensor(t) : NULL;
    }
    case RY_VAL_TUPLE:
    case RY_VAL_ADT: {
        int n = v->kind == RY_VAL_TUPLE ? v->tuple.n : v->adt.n;
        ry_value *const *src = v->kind == RY_VAL_TUPLE ? v->tuple.fields : v->adt.fields;
        ry_value **f = ry_calloc((size_t)(n ? n : 1), sizeof *f);
        if (!f) return NULL;
        bool ok = true;
        for (int i = 0; i < n; i++)
            ok = ok && (f[i] = deep_copy(src[i])) != NULL;
        ry_value *r = NULL;
        if (ok) {
            r = v->kind == RY_VAL_TUPLE ? ry_value_tuple(n, f) : ry_value_adt(v->adt.ctor, n, f);
        } else {
            for (int i = 0; i < n; i++)
                ry_value_release(f[i]);
        }
        ry_free(f);
        return r;
    }
    default: return ry_value_retain(v);
    }
}

/* One element of x moved by +-h: the central difference of sum(f). */
static ry_status central(ry_module *m, const char *entry, int nargs, ry_value *const *a2,
                         const ry_gradcheck_opts *o, ry_tensor *x, int64_t j, double *fd,
                         ry_error *err) {
    double x0 = ry_tensor_get(x, j), h = o->eps * fmax(1.0, fabs(x0)), fp = 0, fm = 0;
    ry_tensor_set(x, j, x0 + h);
    ry_status st = eval_sum(m, entry, nargs, a2, o->interp, &fp, err);
    ry_tensor_set(x, j, x0 - h);
    if (st == RY_OK) st = eval_sum(m, entry, nargs, a2, o->interp, &fm, err);
    ry_tensor_set(x, j, x0);
    *fd = (fp - fm) / (2 * h);
    return st;
}

/* Checks argument i (a tensor, or a tuple or ADT value holding tensors)
 * against ad, its gradient (the same structure): the float tensors of
 * both, flattened depth first, pair up. */
static ry_status check_param(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                             int i, const ry_value *ad, const ry_gradcheck_opts *o,
                             ry_gradcheck_param *p, ry_error *err) {
    ry_value *xv = deep_copy(args[i]);
    ry_value **a2 = ry_calloc((size_t)nargs, sizeof *a2);
    int n = xv ? ry_value_count_tensors(xv) : -1;
    ry_tensor **xs = n > 0 ? ry_calloc((size_t)n, sizeof *xs) : NULL;
    ry_tensor **gs = n > 0 ? ry_calloc((size_t)n, sizeof *gs) : NULL;
    ry_status st = RY_OK;
    if (!xv || !a2 || n < 0 || (n > 0 && (!xs || !gs))) {
        st = ry_error_at(err, RY_NO_SPAN, "gradcheck: out of memory");
        goto done;
    }
    memcpy(a2, args, sizeof *a2 * (size_t)nargs);
    a2[i] = xv;
    p->ok = ry_value_flatten(xv, xs, n) == n && ry_value_flatten(ad, gs, n) == n;
    for (int t = 0; p->ok && t < n && st == RY_OK; t++) {
        if (!ry_dtype_is_float(xs[t]->dtype)) continue;
        p->checked = true;
        p->ok = ry_tensor_same_shape(xs[t], gs[t]);
        for (int64_t j = 0; p->ok && j < xs[t]->size && st == RY_OK; j++) {
            double fd;
            st = central(m, entry, nargs, a2, o, xs[t], j, &fd, err);
            if (st) break;
            double g = ry_tensor_get(gs[t], j), diff = fabs(g - fd);
            double rel = diff / fmax(fmax(fabs(g), fabs(fd)), 1e-12);
            if (diff > p->max_abs) p->max_abs = diff;
            if (rel > p->max_rel) p->max_rel = rel;
            if (!(diff <= o->atol + o->rtol * fabs(fd))) p->ok = false;
        }
    }
done:
    ry_free(xs);
    ry_free(gs);
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
    /* the gradient is built for the mode the runs are made in */
    ry_grad_opts go = {.inference = !(o.interp && o.interp->training)};
    if (ry_grad_ex(m, entry, NULL, NULL, &go, &rep->grad_name, err)) return RY_ERR;
    ry_value *out = NULL;
    if (ry_interp_call(m, rep->grad_name, nargs, args, o.interp, &out, err)) return RY_ERR;
    const ry_value *grads = out->tuple.fields[1];
    ry_status st = RY_OK;
    rep->nparams = nargs;
    rep->ok = true;
    for (int i = 0; i < nargs && st == RY_OK; i++) {
        ry_gradcheck_param *p = &rep->params[i];
        snprintf(p->name, sizeof p->name, "%s", g->func->func.params[i]->name);
        st = check_param(m, entry, nargs, args, i, grads->tuple.fields[i], &o, p, err);
        if (p->checked && !p->ok) rep->ok = false;
    }
    ry_value_release(out);
    return st;
}
