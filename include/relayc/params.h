/*
 * params.h: named parameter sets carved from one slab. A model's
 * parameters, their gradients and each optimizer slot (momentum, Adam's
 * moments) are each one ry_param_set with the same layout, so a checkpoint,
 * an all-reduce or a fused optimizer update touches one contiguous buffer.
 */
#ifndef RELAYC_PARAMS_H
#define RELAYC_PARAMS_H

#include "relayc/tensor.h"

RY_BEGIN_API

typedef struct ry_param_set {
    int n;
    char **names;        /* owned copies, e.g. "w1" (no %) */
    ry_tensor **views;   /* views into slab, one per name, in order */
    ry_tensor *slab;     /* 1-d, all parameters back to back (64-byte aligned each) */
    ry_dtype dtype;      /* float32 or float64: one dtype per set */
} ry_param_set;

/* A zero-filled set with the given names and shapes. NULL on out-of-memory,
 * duplicate names, or a dtype that is not float32/float64. */
ry_param_set *ry_params_new(ry_dtype dtype, int n, const char *const *names, const int *ndims,
                            const int64_t *const *shapes);
/* A zero-filled set with the same names, shapes and layout as p. */
ry_param_set *ry_params_like(const ry_param_set *p);
void ry_params_free(ry_param_set *p); /* NULL is fine */
/* Index of name, or -1. */
int ry_params_find(const ry_param_set *p, const char *name);
/* Whether a and b have the same names, shapes and dtype, in order. */
bool ry_params_same_layout(const ry_param_set *a, const ry_param_set *b);
/* dst := src (same layout), between any devices (an error only from a
 * device's driver). */
ry_status ry_params_copy(ry_param_set *dst, const ry_param_set *src);
/* Every slab element set to v (a host set). */
void ry_params_fill(ry_param_set *p, double v);
/* A copy of p with its slab on t's device (a device run's parameters, or
 * ry_target_cpu() for a host copy of them); NULL with err set on out of
 * memory or a driver failure. */
typedef struct ry_target ry_target;
ry_param_set *ry_params_to(const ry_target *t, const ry_param_set *p, ry_error *err);

RY_END_API

#endif
