/*
 * alloc_exempt.h: allocations the failure hook (ry_alloc_fail_after) leaves
 * alone. The IR's memory — a module's arena blocks (plain malloc), the
 * constant tensors its nodes hold, its table of them — is built by
 * thousands of constructors that assume success, as chibicc's and QBE's
 * do, so running out of it ends the process with a message (arena.c)
 * rather than returning an error. These allocations belong to that class;
 * everything else (run-time values, programs, trainers, checkpoints,
 * loaders, the passes' own tables) fails as an error. Private to src/.
 */
#ifndef RELAYC_ALLOC_EXEMPT_H
#define RELAYC_ALLOC_EXEMPT_H

#include "relayc/tensor.h"

/* While on (nested, per thread), the hook fails nothing. */
void ry_alloc_exempt(bool on);
/* A tensor for an IR constant, outside the hook; on out-of-memory the
 * process ends with a message, as for the arena. */
ry_tensor *ry_ir_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape);
/* The same for a realloc of IR tables. */
void *ry_ir_realloc(void *p, size_t n);

#endif
