/*
 * check_params.c: the run-time check both engines make when a function
 * with annotated parameters is called: what the static type left open (Any
 * and symbolic dimensions) is checked against the arguments' real shapes.
 */
#include <string.h>

#include "relayc/value.h"

/* ---- run-time checks of annotated parameters ----
 * A tensor argument must have the annotation's dtype and rank; a constant
 * dimension must be equal; a symbolic dimension n takes the first value it
 * meets in this call and must keep it; ? accepts anything. Tuples are
 * checked field by field; other annotations were settled statically. */
typedef struct symbind {
    int n;
    const char *name[64];
    int64_t value[64];
    const ry_var *from[64];
} symbind;

static ry_status param_error(ry_error *err, ry_span span, int idx, const ry_var *p,
                             const ry_type *want, const ry_value *got, const char *why) {
    char tw[256], tg[128];
    ry_type_str(want, tw, sizeof tw);
    if (got->kind == RY_VAL_TENSOR) ry_tensor_describe(got->tensor, tg, sizeof tg);
    else snprintf(tg, sizeof tg, "%s", ry_value_kind_name(got));
    return ry_error_at(err, span, "argument %d (parameter %%%s): expected %s, got %s%s%s", idx + 1,
                       p->name, tw, tg, why[0] ? ": " : "", why);
}

static ry_status check_value(ry_error *err, ry_span span, int idx, const ry_var *p,
                             const ry_type *want, const ry_value *got, symbind *sb) {
    if (want->kind == RY_TYPE_TUPLE) {
        if (got->kind != RY_VAL_TUPLE || got->tuple.n != want->tuple.n)
            return param_error(err, span, idx, p, want, got, "");
        for (int i = 0; i < want->tuple.n; i++)
            if (check_value(err, span, idx, p, want->tuple.fields[i], got->tuple.fields[i], sb))
                return RY_ERR;
        return RY_OK;
    }
    if (want->kind != RY_TYPE_TENSOR) return RY_OK;
    /* a row-sparse value (the VM's embedding gradients) stands for a dense
     * tensor of its dtype and shape */
    ry_dtype dtype;
    int ndim;
    const int64_t *shape;
    if (got->kind == RY_VAL_TENSOR) {
        dtype = got->tensor->dtype;
        ndim = got->tensor->ndim;
        shape = got->tensor->shape;
    } else if (got->kind == RY_VAL_ROWS) {
        dtype = got->rows.dtype;
        ndim = got->rows.ndim;
        shape = got->rows.shape;
    } else
        return param_error(err, span, idx, p, want, got, "");
    if (dtype != want->tensor.dtype || ndim != want->tensor.ndim)
        return param_error(err, span, idx, p, want, got, "");
    for (int d = 0; d < ndim; d++) {
        const ry_dim *w = &want->tensor.dims[d];
        if (w->kind == RY_DIM_CONST && w->value != shape[d])
            return param_error(err, span, idx, p, want, got, "");
        if (w->kind != RY_DIM_SYM) continue;
        int k = 0;
        while (k < sb->n && strcmp(sb->name[k], w->name) != 0) k++;
        if (k < sb->n && sb->value[k] != shape[d]) {
            char why[160];
            snprintf(why, sizeof why, "%s is %lld from parameter %%%s but %lld here", w->name,
                     (long long)sb->value[k], sb->from[k]->name, (long long)shape[d]);
            return param_error(err, span, idx, p, want, got, why);
        }
        if (k == sb->n && sb->n < 64) {
            sb->name[k] = w->name;
            sb->value[k] = shape[d];
            sb->from[k] = p;
            sb->n++;
        }
    }
    return RY_OK;
}

ry_status ry_value_check_params(const ry_expr *fn, ry_value *const *args, ry_span span, ry_error *err) {
    symbind sb;
    sb.n = 0;
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        if (!p->annot) continue;
        ry_span at = span.src ? span : p->span;
        if (check_value(err, at, i, p, p->annot, args[i], &sb)) return RY_ERR;
    }
    return RY_OK;
}
