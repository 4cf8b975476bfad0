/*
 * ad_map.c: the pointer map of ad_impl.h: open addressing with linear
 * probing, keys hashed by address, storage in an arena (nothing to free).
 * A value of NULL reads as absent, which is how a binding is taken out of
 * scope.
 */
#include <string.h>

#include "ad_impl.h"

void ad_map_init(ad_map *m, ry_arena *a) {
    memset(m, 0, sizeof *m);
    m->arena = a;
}

static size_t slot_of(const void *key, int cap) {
    uintptr_t h = (uintptr_t)key;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 7) & (size_t)(cap - 1);
}

void *ad_map_get(const ad_map *m, const void *key) {
    if (!m->cap) return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (size_t)(m->cap - 1)) {
        if (!m->keys[i]) return NULL;
        if (m->keys[i] == key) return m->vals[i];
    }
}

static void grow(ad_map *m) {
    int ocap = m->cap;
    const void **okeys = m->keys;
    void **ovals = m->vals;
    m->cap = ocap ? ocap * 2 : 64;
    m->keys = RY_NEW_ARRAY(m->arena, const void *, m->cap);
    m->vals = RY_NEW_ARRAY(m->arena, void *, m->cap);
    m->n = 0;
    for (int i = 0; i < ocap; i++)
        if (okeys[i]) ad_map_put(m, okeys[i], ovals[i]);
}

void *ad_map_put(ad_map *m, const void *key, void *val) {
    if ((m->n + 1) * 4 >= m->cap * 3) grow(m);
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (size_t)(m->cap - 1)) {
        if (!m->keys[i]) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->n++;
            return NULL;
        }
        if (m->keys[i] == key) {
            void *old = m->vals[i];
            m->vals[i] = val;
            return old;
        }
    }
}
