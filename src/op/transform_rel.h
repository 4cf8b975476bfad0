/*
 * transform_rel.h: the type-relation helpers of the reduction and
 * transform families (src/op/reduce.c, src/op/transform.c): dims, located
 * errors, reading integer attributes, normalizing axes and checking
 * arguments. Private to src/op/.
 */
#ifndef RELAYC_OP_TRANSFORM_REL_H
#define RELAYC_OP_TRANSFORM_REL_H

#include <stdarg.h>
#include <string.h>

#include "relayc/op.h"

static inline ry_dim cdim(int64_t v) { return (ry_dim){RY_DIM_CONST, v, NULL}; }
static inline ry_dim anydim(void) { return (ry_dim){RY_DIM_ANY, 0, NULL}; }
static inline bool is_const(const ry_dim *d) { return d->kind == RY_DIM_CONST; }

static inline ry_rel_status fail(ry_rel_ctx *c, ry_span sp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline ry_rel_status fail(ry_rel_ctx *c, ry_span sp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(c->err, sp.src ? sp : c->span, fmt, ap);
    va_end(ap);
    return RY_REL_FAIL;
}

/* The written attribute, or NULL when the default applies. */
static inline const ry_attr *written(const ry_rel_ctx *c, const char *name) {
    if (c->attrs)
        for (int i = 0; i < c->attrs->n; i++)
            if (strcmp(c->attrs->items[i].name, name) == 0) return &c->attrs->items[i];
    return NULL;
}

/* Errors about an attribute point at it when it was written. */
static inline ry_span attr_span(const ry_rel_ctx *c, const char *name) {
    const ry_attr *a = written(c, name);
    return a ? a->span : c->span;
}

static inline const char *nm(const ry_rel_ctx *c) { return c->op->name; }

/* Reads an integer-list attribute: a single integer reads as a list of one;
 * *n is -1 for None. Fails on other kinds or more than max entries. */
static inline bool read_ints(ry_rel_ctx *c, const char *name, int64_t *out, int max, int *n) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, name);
    ry_span sp = attr_span(c, name);
    if (v->kind == RY_AV_LIST)
        for (int i = 0; i < v->list.n; i++)
            if (v->list.items[i].kind != RY_AV_INT) {
                fail(c, sp, "%s: %s must be a list of integers", nm(c), name);
                return false;
            }
    if (v->kind != RY_AV_LIST && v->kind != RY_AV_INT && v->kind != RY_AV_NONE) {
        fail(c, sp, "%s: %s must be an integer, a list of integers or None", nm(c), name);
        return false;
    }
    *n = ry_attr_ints(c->op, c->attrs, name, out, max);
    if (*n > max) {
        fail(c, sp, "%s: %s has %d entries, at most %d are supported", nm(c), name, *n, max);
        return false;
    }
    return true;
}

/* Reads an integer attribute; None is accepted only when none_ok. */
static inline bool read_int(ry_rel_ctx *c, const char *name, bool none_ok, int64_t *out, bool *is_none) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, name);
    if (is_none) *is_none = v->kind == RY_AV_NONE;
    if (v->kind == RY_AV_NONE && none_ok) return true;
    if (v->kind != RY_AV_INT) {
        if (v->kind == RY_AV_NONE && !written(c, name))
            fail(c, c->span, "%s: attribute %s is required", nm(c), name);
        else
            fail(c, attr_span(c, name), "%s: %s must be an integer", nm(c), name);
        return false;
    }
    *out = v->i;
    return true;
}

/* Normalizes axis against [-rank, rank) (or [-rank-1, rank] when insert,
 * for ops that add a dimension). */
static inline bool norm_axis(ry_rel_ctx *c, const char *name, int64_t axis, int rank, bool insert,
                      int *out) {
    int hi = insert ? rank + 1 : rank;
    if (axis < -hi || axis >= hi) {
        if (hi == 0)
            fail(c, attr_span(c, name), "%s: %s=%lld is invalid for a scalar", nm(c), name,
                 (long long)axis);
        else
            fail(c, attr_span(c, name), "%s: %s=%lld is out of range for rank %d (expected %d..%d)",
                 nm(c), name, (long long)axis, rank, -hi, hi - 1);
        return false;
    }
    *out = (int)(axis < 0 ? axis + hi : axis);
    return true;
}

/* Argument i as a tensor type: DEFER while incomplete, FAIL if not a tensor. */
static inline ry_rel_status tensor_arg(ry_rel_ctx *c, const ry_type *t, const char *what) {
    if (t->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    if (t->kind != RY_TYPE_TENSOR) {
        char buf[128];
        return fail(c, c->span, "%s: %s must be a tensor, not %s", nm(c), what,
                    ry_type_str(t, buf, sizeof buf));
    }
    return RY_REL_OK;
}

static inline bool check_nargs(ry_rel_ctx *c, int nargs) {
    if (nargs == c->op->nargs) return true;
    fail(c, c->span, "%s takes %d argument%s, not %d", nm(c), c->op->nargs,
         c->op->nargs == 1 ? "" : "s", nargs);
    return false;
}

/* Two dims that must agree: equal ones stay; Any yields to the other; a
 * symbolic dim against a different one becomes Any (checked at run time).
 * Fails only on two different constants. */
static inline bool unify_dim(const ry_dim *a, const ry_dim *b, ry_dim *out) {
    if (is_const(a) && is_const(b)) {
        *out = *a;
        return a->value == b->value;
    }
    if (a->kind == RY_DIM_ANY)
        *out = *b;
    else if (b->kind == RY_DIM_ANY)
        *out = *a;
    else if (a->kind == RY_DIM_SYM && b->kind == RY_DIM_SYM && strcmp(a->name, b->name) == 0)
        *out = *a;
    else
        *out = anydim();
    return true;
}

static inline bool is_index_dtype(ry_dtype d) {
    return ry_dtype_is_int(d);
}

static inline ry_type *tensor_type(ry_rel_ctx *c, ry_dtype dt, int n, const ry_dim *dims) {
    return ry_type_tensor_arena(c->arena, dt, n, dims);
}

#endif
