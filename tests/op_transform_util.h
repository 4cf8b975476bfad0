/*
 * op_transform_util.h: what the transform family's suites share
 * (test_op_transform.c: the kernels, defaults and programs;
 * test_op_transform_rel.c: the type relations): attributes and types built
 * from short strings, with spans an error can be checked against.
 */
#ifndef RELAYC_TESTS_OP_TRANSFORM_UTIL_H
#define RELAYC_TESTS_OP_TRANSFORM_UTIL_H

#include <stdlib.h>

#include "test_util.h"

/* ---- building attributes and types from short strings ----
 * Attributes: `axis=[1, -1]; keepdims=True; mode="wrap"; axis=None`.
 * Types: `float32[2, n, ?]` (n symbolic, ? Any), `float32[]` (a scalar),
 * `(float32[2], int32[3])` (a tuple), `_` (incomplete).
 * Every attribute gets a span on line 2 at its column, the call a span on
 * line 1, so tests can tell which one an error points at. */

static ry_source src = {"t.relay", "call\nattrs", 10};
#define CALL_SPAN ((ry_span){&src, 1, 1, 4})

static inline const char *skip_ws(const char *p) {
    while (*p == ' ') p++;
    return p;
}

static inline ry_attr_value parse_value(ry_arena *a, const char **pp) {
    const char *p = skip_ws(*pp);
    ry_attr_value v = {.kind = RY_AV_NONE};
    if (*p == '[') {
        ry_attr_value items[32];
        int n = 0;
        p = skip_ws(p + 1);
        while (*p != ']') {
            items[n++] = parse_value(a, &p);
            p = skip_ws(p);
            if (*p == ',') p = skip_ws(p + 1);
        }
        p++;
        v.kind = RY_AV_LIST;
        v.list.n = n;
        v.list.items = RY_NEW_ARRAY(a, ry_attr_value, n);
        memcpy(v.list.items, items, sizeof(ry_attr_value) * (size_t)n);
    } else if (*p == '"') {
        const char *e = strchr(p + 1, '"');
        v.kind = RY_AV_STR;
        v.s = ry_arena_strndup(a, p + 1, (size_t)(e - p - 1));
        p = e + 1;
    } else if (strncmp(p, "None", 4) == 0) {
        p += 4;
    } else if (strncmp(p, "True", 4) == 0 || strncmp(p, "False", 5) == 0) {
        v.kind = RY_AV_BOOL;
        v.b = *p == 'T';
        p += v.b ? 4 : 5;
    } else if (strchr(p, '.') && strchr(p, '.') < p + 8 && strchr(p, 'f')) {
        char *e;
        v.kind = RY_AV_FLOAT;
        v.f = strtod(p, &e);
        p = e + 1;
    } else {
        char *e;
        v.kind = RY_AV_INT;
        v.i = strtoll(p, &e, 10);
        assert_true(e != p);
        p = e;
    }
    *pp = p;
    return v;
}

static inline ry_attrs parse_attrs(ry_arena *a, const char *spec) {
    ry_attr items[16];
    int n = 0;
    const char *p = skip_ws(spec);
    while (*p) {
        const char *eq = strchr(p, '=');
        assert_non_null(eq);
        items[n].name = ry_arena_strndup(a, p, (size_t)(eq - p));
        items[n].span = (ry_span){&src, 2, (int)(p - spec) + 1, (int)(eq - p)};
        p = eq + 1;
        items[n].value = parse_value(a, &p);
        n++;
        p = skip_ws(p);
        if (*p == ';') p = skip_ws(p + 1);
    }
    ry_attrs at = {n, RY_NEW_ARRAY(a, ry_attr, n)};
    memcpy(at.items, items, sizeof(ry_attr) * (size_t)n);
    return at;
}

static inline ry_type *parse_type(ry_arena *a, const char **pp) {
    const char *p = skip_ws(*pp);
    if (*p == '_') {
        *pp = p + 1;
        ry_type *t = RY_NEW(a, ry_type);
        t->kind = RY_TYPE_INCOMPLETE;
        return t;
    }
    if (*p == '(') {
        ry_type *fields[16];
        int n = 0;
        p = skip_ws(p + 1);
        while (*p != ')') {
            fields[n++] = parse_type(a, &p);
            p = skip_ws(p);
            if (*p == ',') p = skip_ws(p + 1);
        }
        *pp = p + 1;
        return ry_type_tuple_arena(a, n, fields);
    }
    const char *br = strchr(p, '[');
    ry_dtype dt;
    assert_true(ry_dtype_parse(p, (size_t)(br - p), &dt));
    p = skip_ws(br + 1);
    ry_dim dims[RY_MAX_RANK];
    int n = 0;
    while (*p != ']') {
        if (*p == '?') {
            dims[n++] = (ry_dim){RY_DIM_ANY, 0, NULL};
            p++;
        } else if (*p >= 'a' && *p <= 'z') {
            dims[n++] = (ry_dim){RY_DIM_SYM, 0, ry_arena_strndup(a, p, 1)};
            p++;
        } else {
            char *e;
            dims[n++] = (ry_dim){RY_DIM_CONST, strtoll(p, &e, 10), NULL};
            p = e;
        }
        p = skip_ws(p);
        if (*p == ',') p = skip_ws(p + 1);
    }
    *pp = p + 1;
    return ry_type_tensor_arena(a, dt, n, dims);
}

static inline ry_type *type_of(ry_arena *a, const char *s) { return parse_type(a, &s); }

#endif
