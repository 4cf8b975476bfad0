/*
 * alloc_exempt.h: the IR's allocations and the failure hook. The IR's
 * memory — a module's arena blocks, the constant tensors its nodes hold,
 * its table of them — is built by thousands of constructors that assume
 * success, so these allocations never return NULL: under a recovery point
 * (oom.h, set by each public entry point that builds IR) the hook counts
 * and may fail them and a failure jumps to the point, which frees what was
 * built and returns an error; without one (worker threads, code outside
 * an entry) the hook leaves them alone and a failure ends the process with
 * a message. Everything else (run-time values, programs, trainers,
 * checkpoints, loaders) fails as an error. Private to src/.
 */
#ifndef RELAYC_ALLOC_EXEMPT_H
#define RELAYC_ALLOC_EXEMPT_H

#include "relayc/tensor.h"

/* While on (nested, per thread), the hook fails nothing. */
void ry_alloc_exempt(bool on);
/* A tensor for an IR constant, an arena block, a realloc of an IR table;
 * never NULL (above). Free with ry_tensor_release and free. */
ry_tensor *ry_ir_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape);
void *ry_ir_malloc(size_t n);
void *ry_ir_realloc(void *p, size_t n);

#endif
