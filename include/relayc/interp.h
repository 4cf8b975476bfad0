/*
 * interp.h: the reference interpreter. It evaluates the whole language on
 * a type-checked module and is the oracle the compiled engines are tested
 * against. It keeps its own stack on the heap, so deep recursion in the
 * program never grows the C stack; calls in tail position run in constant
 * space. Closures capture only their free variables; a `%0 = e;` node used
 * twice is evaluated once per call of the function holding it. Types are
 * not consulted, except annotated parameter types, checked at each call
 * against tensor arguments (dtype, rank, constant dims; a symbolic dim
 * binds once per call; `?` accepts anything).
 */
#ifndef RELAYC_INTERP_H
#define RELAYC_INTERP_H

#include "relayc/value.h"

RY_BEGIN_API

typedef struct ry_interp_opts {
    bool training;        /* nn.dropout active, batch_norm in training mode */
    uint64_t seed;        /* for dropout's random state */
    long max_depth;       /* continuation stack limit in frames; 0: default (10M) */
    size_t max_resident;  /* the memory guard of deep recursion, as ry_vm_opts's */
} ry_interp_opts;

/* Calls global `entry` of the type-checked module m with args (borrowed).
 * On success *out is a new reference. Runtime errors (a match that fails, a
 * shape that disagrees with an Any-typed signature, a kernel error, running
 * out of memory, the interpreter's own included, a stack deeper than
 * opts->max_depth) come back located at the expression that failed, with
 * everything the run held freed; *out is then NULL. opts may
 * be NULL. */
ry_status ry_interp_call(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                         const ry_interp_opts *opts, ry_value **out, ry_error *err);

/* Applies a closure value to args. */
ry_status ry_interp_apply(ry_module *m, ry_value *fn, int nargs, ry_value *const *args,
                          const ry_interp_opts *opts, ry_value **out, ry_error *err);

RY_END_API

#endif
