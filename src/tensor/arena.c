/*
 * arena.c: bump allocation for what dies together (a module's IR nodes and
 * types, a pass's temporaries). Freed all at once.
 */
#include <stdlib.h>
#include <string.h>

#include "relayc/base.h"
#include "tensor/alloc_exempt.h"
#include "tensor/oom.h"

typedef struct block {
    struct block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} block;

/* The link comes first: a failed recovery point frees its arenas from
 * their links (oom.c). */
struct ry_arena {
    ry_oom_link link;
    block *head;
};

ry_arena *ry_arena_new(void) {
    ry_arena *a = ry_ir_malloc(sizeof *a);
    a->head = NULL;
    ry_oom_track(&a->link);
    return a;
}

void ry_arena_free(ry_arena *a) {
    if (!a) return;
    ry_oom_untrack(&a->link);
    for (block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

void ry_arena_reset(ry_arena *a) {
    block *keep = a->head;
    if (!keep) return;
    for (block *b = keep->next, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    keep->next = NULL;
    keep->used = 0;
}

void *ry_arena_alloc(ry_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = ry_ir_malloc(sizeof *b + cap);
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *ry_arena_strndup(ry_arena *a, const char *s, size_t n) {
    char *d = ry_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *ry_arena_strdup(ry_arena *a, const char *s) { return ry_arena_strndup(a, s, strlen(s)); }
