/*
 * value.c (export runtime): the values of programs with control flow over
 * data: recursion, match, ADTs, closures and refs. Such a program's
 * globals become C functions that take and return rt_val pointers (a
 * tensor with its run-time shape, a tuple, a constructor's value, a
 * closure, a ref); every value and tensor buffer a call makes comes from
 * the context's arena, which the entry resets when it starts, so a call
 * frees nothing one by one and the chunks are kept from call to call (no
 * malloc once the largest call has run). Values the caller builds before
 * a call (a tree) live in a second arena of the context. Left out of the
 * artifacts of straight-line entries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { RT_V_TENSOR, RT_V_TUPLE, RT_V_ADT, RT_V_CLOSURE, RT_V_REF };

#define RT_VMAX_RANK 8

typedef struct rt_val rt_val;
/* A closure's code: res = self(args); self holds the captured values. */
typedef int (*rt_fn)(void *ctx, rt_val **res, rt_val *self, rt_val *const *args);

struct rt_val {
    int32_t kind; /* RT_V_* */
    int32_t tag;  /* RT_V_ADT: the constructor's index in its type */
    int32_t n;    /* fields (tuple, ADT, captures; a ref has one); a tensor's rank */
    int64_t shape[RT_VMAX_RANK];
    void *data;   /* a tensor's elements, row-major */
    rt_val **f;
    rt_fn fn;
};

/* A bump allocator over a list of chunks, each at least 64 KiB; reset
 * rewinds to the first chunk and keeps them all. */
typedef struct rt_chunk {
    struct rt_chunk *next;
    size_t cap, used;
} rt_chunk;

typedef struct rt_arena {
    rt_chunk *head, *cur;
} rt_arena;

#define RT_CHUNK_HDR (((sizeof(rt_chunk) + 63) / 64) * 64)

static void rt_arena_reset(rt_arena *a) {
    for (rt_chunk *k = a->head; k; k = k->next) k->used = 0;
    a->cur = a->head;
}

static void rt_arena_free(rt_arena *a) {
    for (rt_chunk *k = a->head, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    a->head = a->cur = NULL;
}

/* n bytes, 64-byte aligned, or NULL when memory runs out. */
static void *rt_alloc(rt_arena *a, size_t n) {
    n = (n + 63) & ~(size_t)63;
    if (n == 0) n = 64;
    for (rt_chunk *k = a->cur; k; k = k->next) {
        if (k->cap - k->used >= n) {
            void *p = (char *)k + RT_CHUNK_HDR + k->used;
            k->used += n;
            a->cur = k;
            return p;
        }
    }
    size_t cap = n > ((size_t)1 << 16) ? n : ((size_t)1 << 16);
    if (cap > SIZE_MAX - RT_CHUNK_HDR) return NULL;
    rt_chunk *k = aligned_alloc(64, ((RT_CHUNK_HDR + cap) + 63) & ~(size_t)63);
    if (!k) return NULL;
    k->cap = cap;
    k->used = n;
    /* after the current chunk, so that the next call reuses it in order */
    if (!a->cur) {
        k->next = a->head;
        a->head = k;
    } else {
        k->next = a->cur->next;
        a->cur->next = k;
    }
    a->cur = k;
    return (char *)k + RT_CHUNK_HDR;
}

/* A value of kind with n fields (their slots NULL), or NULL. */
static rt_val *rt_new(rt_arena *a, int kind, int n) {
    rt_val *v = rt_alloc(a, sizeof *v + sizeof(rt_val *) * (size_t)(n > 0 ? n : 0));
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->n = n;
    v->f = (rt_val **)(v + 1);
    for (int i = 0; i < n; i++) v->f[i] = NULL;
    return v;
}

/* A tensor value over data (not copied) of rank ndim; the caller fills shape. */
static rt_val *rt_tensor(rt_arena *a, void *data, int ndim) {
    rt_val *v = rt_new(a, RT_V_TENSOR, 0);
    if (!v) return NULL;
    v->n = ndim;
    v->data = data;
    return v;
}
