/*
 * test_programs.h: what the suites that run whole corpus programs share
 * (test_vm, test_vm_plan, test_fuse): the sorted .relay files of a folder
 * and random argument values of a parameter's type.
 */
#ifndef RELAYC_TEST_PROGRAMS_H
#define RELAYC_TEST_PROGRAMS_H

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* The names (without .relay) of the .relay files in dir, sorted. */
static inline int test_relay_files(const char *dir, char names[][128], int max) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || len >= 128 || strcmp(e->d_name + len - 6, ".relay") != 0) continue;
        assert_true(n < max);
        memcpy(names[n], e->d_name, len - 6);
        names[n++][len - 6] = '\0';
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Uniform in [0, 1) from a 64-bit LCG whose state the caller keeps. */
static inline double test_rnd(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*state >> 11) / 9007199254740992.0;
}

/* A random value of type t: tensors with floats in [-1, 1), integers in
 * [0, 3) and bools, symbolic and Any dims 3; a List of three. NULL for
 * other types. */
static inline ry_value *test_random_value(const ry_type *t, uint64_t *state) {
    if (t && t->kind == RY_TYPE_CALL && strcmp(t->call.adt->name, "List") == 0 &&
        t->call.nargs == 1) {
        const ry_typedef *td = t->call.adt;
        const ry_ctor *cons = NULL, *nil = NULL;
        for (int i = 0; i < td->nctors; i++) {
            if (strcmp(td->ctors[i]->name, "Cons") == 0) cons = td->ctors[i];
            if (strcmp(td->ctors[i]->name, "Nil") == 0) nil = td->ctors[i];
        }
        if (!cons || !nil) return NULL;
        ry_value *l = ry_value_adt(nil, 0, NULL);
        for (int i = 0; i < 3 && l; i++) {
            ry_value *x = test_random_value(t->call.args[0], state);
            if (!x) {
                ry_value_release(l);
                return NULL;
            }
            l = ry_value_adt(cons, 2, (ry_value *[]){x, l});
        }
        return l;
    }
    if (!t || t->kind != RY_TYPE_TENSOR) return NULL;
    int64_t shape[RY_MAX_RANK];
    for (int d = 0; d < t->tensor.ndim; d++)
        shape[d] = t->tensor.dims[d].kind == RY_DIM_CONST ? t->tensor.dims[d].value : 3;
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    for (int64_t i = 0; i < x->size; i++) {
        double r = test_rnd(state);
        if (ry_dtype_is_float(x->dtype)) ry_tensor_set(x, i, 2 * r - 1);
        else if (x->dtype == RY_BOOL) ry_tensor_set(x, i, r < 0.5);
        else ry_tensor_set(x, i, (double)(int)(3 * r));
    }
    return ry_value_tensor(x);
}

/* Random arguments for m's @main (test_random_value of each parameter's
 * type) into args[0..); their count, or -1 when @main is missing, takes
 * more than max or has a parameter of a type with no random value (those
 * made are released). */
static inline int test_main_args(const ry_module *m, uint64_t *state, ry_value **args, int max) {
    const ry_global *g = ry_module_find_global(m, "main");
    if (!g || g->func->func.nparams > max) return -1;
    int na = 0;
    for (int i = 0; i < g->func->func.nparams; i++, na++) {
        const ry_var *p = g->func->func.params[i];
        if (!(args[na] = test_random_value(p->annot ? p->annot : p->type, state))) {
            for (int k = 0; k < na; k++) ry_value_release(args[k]);
            return -1;
        }
    }
    return na;
}

#endif
