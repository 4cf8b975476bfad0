/*
 * blockcache.h: per-thread caches of small fixed-size blocks, for the
 * headers the runtime makes and drops by the thousand per training step
 * (values, tensor structs). Private to the library (src/).
 */
#ifndef RELAYC_BLOCKCACHE_H
#define RELAYC_BLOCKCACHE_H

#include "relayc/base.h"

/* A block of at least n bytes (uninitialized): from this thread's cache,
 * else ry_malloc. NULL on out-of-memory. While an allocation-failure hook
 * is armed (ry_alloc_fail_after), every call goes to ry_malloc, so tests
 * count and fail allocations as before. */
void *ry_block_get(size_t n);
/* Gives back a block that ry_block_get(n) returned (the same n; blocks
 * of other allocators must not come here): into this thread's cache,
 * else ry_free. NULL is fine. */
void ry_block_put(void *p, size_t n);
/* Whether an allocation-failure hook is armed (alloc.c). */
bool ry_alloc_hooked(void);

#endif
