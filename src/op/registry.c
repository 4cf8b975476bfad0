/*
 * registry.c: gathers the operator families into one table, reads
 * attributes with their defaults, and runs an operator's kernel on a
 * target on concrete host tensors (result shapes from the type relation).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/target.h"
#include "op/families.h"


typedef struct family {
    const ry_op *ops;
    const int *count;
} family;

static const family families[] = {
    {ry_ops_elemwise, &ry_ops_elemwise_count},
    {ry_ops_nn, &ry_ops_nn_count},
    {ry_ops_conv, &ry_ops_conv_count},
    {ry_ops_reduce, &ry_ops_reduce_count},
    {ry_ops_transform, &ry_ops_transform_count},
    {ry_ops_scatter, &ry_ops_scatter_count},
    {ry_ops_fused, &ry_ops_fused_count},
};
#define NFAMILIES (int)(sizeof families / sizeof families[0])

int ry_op_count(void) {
    int n = 0;
    for (int f = 0; f < NFAMILIES; f++) n += *families[f].count;
    return n;
}

const ry_op *ry_op_at(int i) {
    for (int f = 0; f < NFAMILIES; f++) {
        if (i < *families[f].count) return &families[f].ops[i];
        i -= *families[f].count;
    }
    return NULL;
}

int ry_op_index(const ry_op *op) {
    int base = 0;
    for (int f = 0; f < NFAMILIES; f++) {
        const ry_op *first = families[f].ops;
        if (op >= first && op < first + *families[f].count) return base + (int)(op - first);
        base += *families[f].count;
    }
    return -1;
}

const ry_op *ry_op_find(const char *name) {
    for (int f = 0; f < NFAMILIES; f++)
        for (int i = 0; i < *families[f].count; i++)
            if (strcmp(families[f].ops[i].name, name) == 0) return &families[f].ops[i];
    return NULL;
}

/* ---- attributes ---- */

static const ry_attr_def *find_def(const ry_op *op, const char *name) {
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
    return NULL;
}

static const char *kind_name(ry_attr_kind k) {
    switch (k) {
    case RY_AV_NONE: return "None";
    case RY_AV_INT: return "an integer";
    case RY_AV_FLOAT: return "a float";
    case RY_AV_BOOL: return "a boolean";
    case RY_AV_STR: return "a string";
    case RY_AV_LIST: return "a list";
    }
    return "?";
}

/* Whether a written value can stand where def's kind is expected. None is
 * accepted everywhere (TVM writes `axis=None`, `units=None`); numbers convert
 * among themselves and a single number stands for a list of one. */
static bool kind_fits(ry_attr_kind want, ry_attr_kind got) {
    if (got == want || got == RY_AV_NONE || want == RY_AV_NONE) return true;
    bool num_want = want == RY_AV_INT || want == RY_AV_FLOAT || want == RY_AV_BOOL;
    bool num_got = got == RY_AV_INT || got == RY_AV_FLOAT || got == RY_AV_BOOL;
    if (num_want && num_got) return true;
    if (want == RY_AV_LIST && num_got) return true;
    return false;
}

ry_status ry_op_check_attrs(const ry_op *op, const ry_attrs *attrs, ry_error *err) {
    for (int i = 0; i < attrs->n; i++) {
        const ry_attr *a = &attrs->items[i];
        const ry_attr_def *d = find_def(op, a->name);
        if (!d) {
            char known[512] = "";
            for (int k = 0; k < op->nattrs; k++) {
                size_t len = strlen(known);
                snprintf(known + len, sizeof known - len, "%s%s", k ? ", " : "", op->attrs[k].name);
            }
            return ry_error_at(err, a->span, "operator %s has no attribute '%s' (it has: %s)",
                               op->name, a->name, op->nattrs ? known : "none");
        }
        for (int j = 0; j < i; j++)
            if (strcmp(attrs->items[j].name, a->name) == 0)
                return ry_error_at(err, a->span, "attribute '%s' given twice", a->name);
        if (!kind_fits(d->def.kind, a->value.kind))
            return ry_error_at(err, a->span, "attribute '%s' of %s must be %s, not %s", a->name,
                               op->name, kind_name(d->def.kind), kind_name(a->value.kind));
    }
    return RY_OK;
}

const ry_attr_value *ry_attr_get(const ry_op *op, const ry_attrs *attrs, const char *name) {
    if (attrs)
        for (int i = 0; i < attrs->n; i++)
            if (strcmp(attrs->items[i].name, name) == 0) return &attrs->items[i].value;
    const ry_attr_def *d = find_def(op, name);
    if (!d) { /* a registry bug, never user input: attrs were checked */
        fprintf(stderr, "relayc: internal error: %s has no attribute %s\n", op->name, name);
        abort();
    }
    return &d->def;
}

bool ry_attr_is_none(const ry_op *op, const ry_attrs *attrs, const char *name) {
    return ry_attr_get(op, attrs, name)->kind == RY_AV_NONE;
}

static double as_number(const ry_attr_value *v) {
    switch (v->kind) {
    case RY_AV_INT: return (double)v->i;
    case RY_AV_FLOAT: return v->f;
    case RY_AV_BOOL: return v->b;
    case RY_AV_LIST: return v->list.n ? as_number(&v->list.items[0]) : 0;
    default: return 0;
    }
}

/* Integers are read exactly; a float is truncated, saturating at the int64
 * range so no conversion is undefined. */
static int64_t as_int(const ry_attr_value *v) {
    if (v->kind == RY_AV_INT) return v->i;
    if (v->kind == RY_AV_LIST) return v->list.n ? as_int(&v->list.items[0]) : 0;
    double d = as_number(v);
    if (d != d) return 0;
    if (d >= 9.2233720368547758e18) return INT64_MAX;
    if (d <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)d;
}

int64_t ry_attr_int(const ry_op *op, const ry_attrs *attrs, const char *name) {
    return as_int(ry_attr_get(op, attrs, name));
}

double ry_attr_float(const ry_op *op, const ry_attrs *attrs, const char *name) {
    return as_number(ry_attr_get(op, attrs, name));
}

bool ry_attr_bool(const ry_op *op, const ry_attrs *attrs, const char *name) {
    return as_number(ry_attr_get(op, attrs, name)) != 0;
}

const char *ry_attr_str(const ry_op *op, const ry_attrs *attrs, const char *name) {
    const ry_attr_value *v = ry_attr_get(op, attrs, name);
    return v->kind == RY_AV_STR ? v->s : "";
}

int ry_attr_ints(const ry_op *op, const ry_attrs *attrs, const char *name, int64_t *out, int max) {
    const ry_attr_value *v = ry_attr_get(op, attrs, name);
    if (v->kind == RY_AV_NONE) return -1;
    if (v->kind != RY_AV_LIST) {
        if (max > 0) out[0] = as_int(v);
        return 1;
    }
    for (int i = 0; i < v->list.n && i < max; i++) out[i] = as_int(&v->list.items[i]);
    return v->list.n;
}

/* ---- types of concrete values ---- */

ry_type *ry_type_of_tensor(ry_arena *a, const ry_tensor *t) {
    ry_dim dims[RY_MAX_RANK];
    for (int i = 0; i < t->ndim; i++) dims[i] = (ry_dim){RY_DIM_CONST, t->shape[i], NULL};
    return ry_type_tensor_arena(a, t->dtype, t->ndim, dims);
}

/* broadcast: numpy rules, aligned from the right; 1 stretches; Any and
 * symbolic dims propagate. */
ry_rel_status ry_rel_broadcast(ry_rel_ctx *c, const ry_type *a, const ry_type *b, ry_dtype out_dtype,
                               ry_type **out) {
    if (a->kind == RY_TYPE_INCOMPLETE || b->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    if (a->kind != RY_TYPE_TENSOR || b->kind != RY_TYPE_TENSOR) {
        ry_error_at(c->err, c->span, "%s expects tensors", c->op->name);
        return RY_REL_FAIL;
    }
    int na = a->tensor.ndim, nb = b->tensor.ndim, n = na > nb ? na : nb;
    ry_dim dims[RY_MAX_RANK];
    for (int i = 0; i < n; i++) {
        const ry_dim one = {RY_DIM_CONST, 1, NULL};
        const ry_dim *da = i < n - na ? &one : &a->tensor.dims[i - (n - na)];
        const ry_dim *db = i < n - nb ? &one : &b->tensor.dims[i - (n - nb)];
        if (da->kind == RY_DIM_CONST && da->value == 1) dims[i] = *db;
        else if (db->kind == RY_DIM_CONST && db->value == 1) dims[i] = *da;
        else if (da->kind == RY_DIM_ANY) dims[i] = *db;
        else if (db->kind == RY_DIM_ANY) dims[i] = *da;
        else if (da->kind == RY_DIM_CONST && db->kind == RY_DIM_CONST && da->value == db->value)
            dims[i] = *da;
        else if (da->kind == RY_DIM_SYM && db->kind == RY_DIM_SYM && strcmp(da->name, db->name) == 0)
            dims[i] = *da;
        else if (da->kind == RY_DIM_SYM || db->kind == RY_DIM_SYM)
            dims[i] = (ry_dim){RY_DIM_ANY, 0, NULL}; /* checked at run time */
        else {
            char sa[128], sb[128];
            ry_error_at(c->err, c->span, "%s: shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                        c->op->name, ry_type_str(a, sa, sizeof sa), ry_type_str(b, sb, sizeof sb), i,
                        (long long)da->value, (long long)db->value);
            return RY_REL_FAIL;
        }
    }
    *out = ry_type_tensor_arena(c->arena, out_dtype, n, dims);
    return RY_REL_OK;
}

/* ---- running an operator on concrete tensors ---- */

static int count_tensors(const ry_type *t) {
    if (t->kind == RY_TYPE_TENSOR) return 1;
    int n = 0;
    if (t->kind == RY_TYPE_TUPLE)
        for (int i = 0; i < t->tuple.n; i++) n += count_tensors(t->tuple.fields[i]);
    return n;
}

/* Allocates the result tensors of type t, depth first, into out[*k...]. */
static ry_status alloc_results(const ry_type *t, ry_allocator *a, ry_tensor **out, int *k,
                               ry_kernel_ctx *kc) {
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (alloc_results(t->tuple.fields[i], a, out, k, kc)) return RY_ERR;
        return RY_OK;
    }
    int64_t shape[RY_MAX_RANK];
    for (int i = 0; i < t->tensor.ndim; i++) {
        if (t->tensor.dims[i].kind != RY_DIM_CONST)
            return ry_error_at(kc->err, kc->span, "%s: result shape unknown at run time", kc->op->name);
        shape[i] = t->tensor.dims[i].value;
    }
    out[*k] = ry_tensor_new_on(a, t->tensor.dtype, t->tensor.ndim, shape);
    if (!out[*k]) return ry_error_at(kc->err, kc->span, "%s: out of memory for the result", kc->op->name);
    (*k)++;
    return RY_OK;
}

ry_status ry_op_run(const ry_target *target, const ry_op *op, const ry_attrs *attrs,
                    ry_arena *scratch, int nargs, ry_type *const *arg_types, int nin, ry_tensor *const *in, ry_kernel_ctx *kctx,
                    ry_type **out_type, int *nout, ry_tensor ***out) {
    return ry_op_run_in(target, op, attrs, scratch, nargs, arg_types, nin, in, kctx, NULL, out_type,
                        nout, out);
}

ry_status ry_op_run_in(const ry_target *target, const ry_op *op, const ry_attrs *attrs,
                       ry_arena *scratch, int nargs, ry_type *const *arg_types, int nin,
                       ry_tensor *const *in, ry_kernel_ctx *kctx, ry_allocator *results,
                       ry_type **out_type, int *nout, ry_tensor ***out) {
    kctx->op = op;
    kctx->attrs = attrs;
    ry_rel_ctx rc = {scratch, op, attrs, kctx->span, kctx->err};
    ry_type *t = NULL;
    ry_rel_status rs = op->rel(&rc, nargs, arg_types, &t);
    if (rs == RY_REL_FAIL) return RY_ERR;
    if (rs == RY_REL_DEFER || !t)
        return ry_error_at(kctx->err, kctx->span, "%s: cannot infer the result type", op->name);
    if (!target) target = ry_target_cpu();
    const ry_kernel *kernel = ry_target_kernel(target, op);
    if (!kernel)
        return ry_error_at(kctx->err, kctx->span, "%s has no kernel on target %s", op->name,
                           target->name);
    int n = count_tensors(t), k = 0;
    ry_tensor **res = ry_calloc((size_t)(n ? n : 1), sizeof *res);
    if (!res) return ry_error_at(kctx->err, kctx->span, "out of memory");
    /* the results on the target's device (its allocator), or host memory */
    ry_allocator *a = results ? results : target->dev ? target->allocator() : ry_cpu_allocator();
    if (alloc_results(t, a, res, &k, kctx) || kernel->fn(kctx, nin, in, n, res)) {
        for (int i = 0; i < n; i++) ry_tensor_release(res[i]);
        ry_free(res);
        return RY_ERR;
    }
    *out_type = t;
    *nout = n;
    *out = res;
    return RY_OK;
}
