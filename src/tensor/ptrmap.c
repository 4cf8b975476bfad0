/*
 * ptrmap.c: the pointer-keyed map of base.h, for passes and engines that
 * attach facts to IR nodes: linear probing, keys hashed by address, storage
 * in the caller's arena.
 */
#include "relayc/base.h"

static uint64_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static void grow(ry_arena *a, ry_ptrmap *m) {
    ry_ptrmap fresh = {0};
    fresh.cap = m->cap ? m->cap * 2 : 16;
    fresh.keys = RY_NEW_ARRAY(a, const void *, fresh.cap);
    fresh.vals = RY_NEW_ARRAY(a, intptr_t, fresh.cap);
    for (int i = 0; i < m->cap; i++)
        if (m->keys[i]) ry_ptrmap_put(a, &fresh, m->keys[i], m->vals[i]);
    *m = fresh;
}

void ry_ptrmap_put(ry_arena *a, ry_ptrmap *m, const void *key, intptr_t val) {
    if ((m->n + 1) * 4 > m->cap * 3) grow(a, m);
    size_t mask = (size_t)m->cap - 1;
    for (size_t i = hash_ptr(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
        if (!m->keys[i]) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->n++;
            return;
        }
    }
}

bool ry_ptrmap_get(const ry_ptrmap *m, const void *key, intptr_t *val) {
    if (!m->cap) return false;
    size_t mask = (size_t)m->cap - 1;
    for (size_t i = hash_ptr(key) & mask; m->keys[i]; i = (i + 1) & mask)
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    return false;
}

