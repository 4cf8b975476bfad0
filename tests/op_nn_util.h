/*
 * op_nn_util.h: what the nn family's suites share (test_op_nn.c: the
 * kernels, registry entries and programs; test_op_nn_rel.c: the type
 * relations): attributes built in place (pad_width, axis lists) and tensor
 * types from short strings, with a check of a relation's result.
 */
#ifndef RELAYC_TESTS_OP_NN_UTIL_H
#define RELAYC_TESTS_OP_NN_UTIL_H

#include <stdlib.h>

#include "test_util.h"

/* ---- attributes ---- */

#define AI(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_INT, .i = (v)}})
#define AB(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_BOOL, .b = (v)}})
#define AF(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_FLOAT, .f = (v)}})
#define AS(nm, v) ((ry_attr){.name = (nm), .value = {.kind = RY_AV_STR, .s = (v)}})
#define ATTRS(...)                                                                                 \
    ((ry_attrs){(int)(sizeof((ry_attr[]){__VA_ARGS__}) / sizeof(ry_attr)),                         \
                (ry_attr[]){__VA_ARGS__}})
#define NOATTRS ((ry_attrs){0, NULL})

/* pad_width=[[b0, a0], [b1, a1], ...] built in store (3 * n values). */
static inline ry_attr pad_width(ry_attr_value *store, int n, const int64_t (*w)[2]) {
    ry_attr_value *pairs = store, *nums = store + n;
    for (int i = 0; i < n; i++) {
        nums[2 * i] = (ry_attr_value){.kind = RY_AV_INT, .i = w[i][0]};
        nums[2 * i + 1] = (ry_attr_value){.kind = RY_AV_INT, .i = w[i][1]};
        pairs[i] = (ry_attr_value){.kind = RY_AV_LIST, .list = {2, &nums[2 * i]}};
    }
    return (ry_attr){.name = "pad_width", .value = {.kind = RY_AV_LIST, .list = {n, pairs}}};
}

/* ---- types ---- */

/* A tensor type from "3, n, ?" (constants, symbols, Any) and a dtype name. */
static inline ry_type *ty(ry_arena *a, const char *dt, const char *dims) {
    ry_dim d[RY_MAX_RANK];
    int n = 0;
    const char *p = dims;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ') p++;
        if (*s == '?')
            d[n] = (ry_dim){RY_DIM_ANY, 0, NULL};
        else if (*s >= '0' && *s <= '9')
            d[n] = (ry_dim){RY_DIM_CONST, atoll(s), NULL};
        else
            d[n] = (ry_dim){RY_DIM_SYM, 0, ry_arena_strndup(a, s, (size_t)(p - s))};
        n++;
    }
    ry_dtype dtype;
    assert_true(ry_dtype_parse(dt, strlen(dt), &dtype));
    return ry_type_tensor_arena(a, dtype, n, d);
}

/* The relation succeeds and gives the tensor type dt[dims]. */
static inline void want_type(const ry_type *t, const char *dt, const char *dims) {
    ry_arena *a = ry_arena_new();
    ry_type *w = ty(a, dt, dims);
    assert_int_equal(t->kind, RY_TYPE_TENSOR);
    if (!ry_type_equal(t, w)) {
        char s1[128], s2[128];
        fail_msg("type %s, expected %s", ry_type_str(t, s1, sizeof s1),
                 ry_type_str(w, s2, sizeof s2));
    }
    ry_arena_free(a);
}

/* axis=[a, b] for l2_normalize, built in store. */
static inline ry_attr axis_list(ry_attr_value *store, int n, const int64_t *axes) {
    for (int i = 0; i < n; i++) store[i] = (ry_attr_value){.kind = RY_AV_INT, .i = axes[i]};
    return (ry_attr){.name = "axis", .value = {.kind = RY_AV_LIST, .list = {n, store}}};
}

#endif
