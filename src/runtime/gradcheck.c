/*
 * gradcheck.c: gradient checking, a runner over the interpreter (so it
 * lives with the engines, not with the transform). The gradient ry_grad
 * computes (seeded with ones, so it is the gradient of the sum of every
 * output tensor) is compared element by element with central finite
 * differences of that sum, computed by running the original function in
 * the interpreter with one element moved by +-h, h = eps * max(1, |x|). Float64 arguments give
 * differences good to about 1e-8; the tolerances are the caller's.
 * Arguments may be tuples and ADT values (lists, trees): every float tensor
 * leaf is checked. A large tensor may be sampled (max_elements), favouring
 * the elements of nonzero gradient so that an embedding's used rows are.
 */
#include <math.h>
#include <string.h>

#include "relayc/ad.h"
#include "relayc/vm.h"
#include "relayc/rng.h"

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

/* The elements of a tensor of n elements to check, with gradient g: all of
 * them (*k = n) or, past max_elements K, K distinct ones: up to K/2 among
 * those where g is nonzero, the rest uniformly among the others. NULL on
 * out-of-memory; the caller frees it. */
static int64_t *pick_elements(const ry_tensor *g, int64_t max, ry_rng *rng, int64_t *k) {
    int64_t n = g->size;
    *k = max > 0 && max < n ? max : n;
    int64_t *at = ry_malloc(sizeof *at * (size_t)(*k ? *k : 1));
    bool *taken = *k < n ? ry_calloc((size_t)n, sizeof *taken) : NULL;
    int64_t *nz = *k < n ? ry_malloc(sizeof *nz * (size_t)n) : NULL;
    if (!at || (*k < n && (!taken || !nz))) {
        ry_free(at);
        at = NULL;
    } else if (*k == n) {
        for (int64_t j = 0; j < n; j++) at[j] = j;
    } else {
        int64_t nnz = 0, m = 0;
        for (int64_t j = 0; j < n; j++)
            if (ry_tensor_get(g, j) != 0) nz[nnz++] = j;
        /* a partial Fisher-Yates over the nonzero ones, then rejection */
        for (; m < *k / 2 && m < nnz; m++) {
            int64_t r = m + (int64_t)ry_rng_below(rng, (uint64_t)(nnz - m)), t = nz[r];
            nz[r] = nz[m];
            taken[at[m] = t] = true;
        }
        while (m < *k) {
            int64_t j = (int64_t)ry_rng_below(rng, (uint64_t)n);
            if (!taken[j]) taken[at[m++] = j] = true;
        }
    }
    ry_free(taken);
    ry_free(nz);
    return at;
}

/* Compares tensor x's gradient g with central differences at the elements
 * pick_elements chooses, accumulating into p. */
static ry_status check_tensor(ry_module *m, const char *entry, int nargs, ry_value *const *a2,
                              ry_tensor *x, const ry_tensor *g, const ry_gradcheck_opts *o, ry_rng *rng,
                              ry_gradcheck_param *p, ry_error *err) {
    int64_t k;
    int64_t *at = pick_elements(g, o->max_elements, rng, &k);
    if (!at) return ry_error_at(err, RY_NO_SPAN, "gradcheck: out of memory");
    ry_status st = RY_OK;
    for (int64_t e = 0; e < k; e++) {
        int64_t j = at[e];
        double fd;
        if ((st = central(m, entry, nargs, a2, o, x, j, &fd, err))) break;
        double gj = ry_tensor_get(g, j), diff = fabs(gj - fd);
        double rel = diff / fmax(fmax(fabs(gj), fabs(fd)), 1e-12);
        if (diff > p->max_abs) p->max_abs = diff;
        if (rel > p->max_rel) p->max_rel = rel;
        if (!(diff <= o->atol + o->rtol * fabs(fd))) p->ok = false;
        p->nchecked++;
    }
    ry_free(at);
    return st;
}

/* Checks argument i (a tensor, or a tuple or ADT value holding tensors)
 * against ad, its gradient (the same structure): the float tensors of
 * both, flattened depth first, pair up. */
static ry_status check_param(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                             int i, const ry_value *ad, const ry_gradcheck_opts *o, ry_rng *rng,
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
        if (p->ok) st = check_tensor(m, entry, nargs, a2, xs[t], gs[t], o, rng, p, err);
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
    if (!o.target) {
        if (ry_interp_call(m, rep->grad_name, nargs, args, o.interp, &out, err)) return RY_ERR;
    } else {
        /* the compiled engine on the target (its result comes back to the host) */
        ry_vm_program *p = NULL;
        ry_vm_opts vo = {0};
        if (o.interp) vo.training = o.interp->training, vo.seed = o.interp->seed;
        ry_status st = ry_vm_compile(m, o.target, &p, err);
        if (st == RY_OK) st = ry_vm_call(p, rep->grad_name, nargs, args, &vo, &out, err);
        ry_vm_free(p);
        if (st) return RY_ERR;
    }
    const ry_value *grads = out->tuple.fields[1];
    ry_status st = RY_OK;
    rep->nparams = nargs;
    rep->ok = true;
    ry_rng rng;
    ry_rng_seed(&rng, o.sample_seed);
    for (int i = 0; i < nargs && st == RY_OK; i++) {
        ry_gradcheck_param *p = &rep->params[i];
        snprintf(p->name, sizeof p->name, "%s", g->func->func.params[i]->name);
        st = check_param(m, entry, nargs, args, i, grads->tuple.fields[i], &o, &rng, p, err);
        if (p->checked && !p->ok) rep->ok = false;
    }
    ry_value_release(out);
    return st;
}
