/*
 * ad_impl.h: private to ad/: a pointer -> pointer map in an arena, used by
 * A-normal form (node -> its binding) and the gradient transform (var ->
 * transformed var, global -> twin, typedef -> twin). Deletion is not needed:
 * scopes are handled by recording and undoing insertions.
 */
#ifndef RELAYC_AD_IMPL_H
#define RELAYC_AD_IMPL_H

#include "relayc/ir.h"

typedef struct ad_map {
    ry_arena *arena;
    int cap, n;
    const void **keys;
    void **vals;
} ad_map;

void ad_map_init(ad_map *m, ry_arena *a);
void *ad_map_get(const ad_map *m, const void *key);
/* Inserts or replaces; returns the previous value (NULL if none). */
void *ad_map_put(ad_map *m, const void *key, void *val);

/* Maps of counts and indices hold integers as (void *)(intptr_t)n; an
 * absent key reads as 0. The arithmetic is done on integers: pointer
 * arithmetic on the NULL of an absent key is undefined. */
static inline intptr_t ad_map_int(const ad_map *m, const void *key) {
    return (intptr_t)ad_map_get(m, key);
}
static inline void ad_map_put_int(ad_map *m, const void *key, intptr_t n) {
    ad_map_put(m, key, (void *)n);
}

#endif
