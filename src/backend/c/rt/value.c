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
    int64_t esize; /* a tensor's bytes per element */
    int32_t dtype; /* a tensor's dtype: the header's code (NAME_FLOAT32, ...) */
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
    /* at least all the chunks so far hold: the total doubles, so a call that
     * needs ever larger buffers makes few chunks, and a later one reuses them */
    size_t cap = (size_t)1 << 16, total = 0;
    for (rt_chunk *c = a->head; c; c = c->next) total += c->cap;
    if (cap < total) cap = total;
    if (cap < n) cap = n;
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

/* A tensor value over data (not copied) of rank ndim, esize bytes an
 * element, dtype the header's code; the caller fills shape. */
static rt_val *rt_tensor(rt_arena *a, void *data, int ndim, int64_t esize, int32_t dtype) {
    rt_val *v = rt_new(a, RT_V_TENSOR, 0);
    if (!v) return NULL;
    v->n = ndim;
    v->esize = esize;
    v->dtype = dtype;
    v->data = data;
    return v;
}

static size_t rt_nbytes(const rt_val *v) {
    int64_t c = v->esize;
    for (int i = 0; i < v->n; i++) c *= v->shape[i];
    return (size_t)c;
}

/* A result value (tensors, tuples, ADT values) copied whole into a, the
 * tensors' data too, so it outlives the call's arena; NULL when a runs
 * out. (The type says it holds no closure or ref.) */
static rt_val *rt_copy_out(rt_arena *a, const rt_val *v) {
    int leaf = v->kind == RT_V_TENSOR;
    rt_val *c = rt_new(a, v->kind, leaf ? 0 : v->n);
    if (!c) return NULL;
    c->tag = v->tag, c->n = v->n, c->esize = v->esize, c->dtype = v->dtype;
    memcpy(c->shape, v->shape, sizeof c->shape);
    if (leaf) {
        size_t nb = rt_nbytes(v);
        if (!(c->data = rt_alloc(a, nb))) return NULL;
        if (nb) memcpy(c->data, v->data, nb);
        return c;
    }
    for (int i = 0; i < v->n; i++)
        if (!(c->f[i] = rt_copy_out(a, v->f[i]))) return NULL;
    return c;
}

/* ---- a frame's garbage ----
 * A function of a program without refs returns its result (tensors,
 * tuples, ADT values) and drops what else it made: the result's
 * nodes made since the function started are saved aside, the
 * arena rewound to where the function started, and the result made again
 * there (what lies below the mark, an argument's or a weight's data, is
 * kept in place). So a recursion holds its live values, not every step's
 * temporaries. */
typedef struct rt_mark {
    rt_chunk *k;
    size_t used;
} rt_mark;

static rt_mark rt_arena_mark(const rt_arena *a) { return (rt_mark){a->cur, a->cur ? a->cur->used : 0}; }

/* Whether p was allocated from a after mark m. */
static int rt_above(const rt_arena *a, rt_mark m, const void *p) {
    const char *q = p;
    for (rt_chunk *k = m.k ? m.k : a->head; k; k = k->next) {
        const char *base = (const char *)k + RT_CHUNK_HDR;
        size_t from = k == m.k ? m.used : 0;
        if (q >= base + from && q < base + k->used) return 1;
    }
    return 0;
}

static void rt_arena_rewind(rt_arena *a, rt_mark m) {
    for (rt_chunk *k = m.k ? m.k->next : a->head; k; k = k->next) k->used = 0;
    if (m.k) m.k->used = m.used;
    a->cur = m.k ? m.k : a->head;
}

/* The saved form's mark of a node made below the mark (an argument, a
 * value of the caller's): kept where it is, by pointer, so a function
 * that returns (part of) its argument copies nothing of it. */
enum { RT_V_KEPT = -1 };

/* Tuples and ADT values. (A closure may capture itself: a result that
 * holds one keeps its frame, emit_ctl.c.) */
static int rt_has_fields(const rt_val *v) { return v->kind == RT_V_TUPLE || v->kind == RT_V_ADT; }

/* Whether v's nodes made since m are tensors, tuples and ADT values only
 * (a polymorphic function's type may not say): else its frame is kept. */
static int rt_movable(const rt_arena *a, rt_mark m, const rt_val *v) {
    if (!rt_above(a, m, v) || v->kind == RT_V_TENSOR) return 1;
    if (!rt_has_fields(v)) return 0;
    for (int i = 0; i < v->n; i++)
        if (!rt_movable(a, m, v->f[i])) return 0;
    return 1;
}

/* The bytes v's saved form takes: each node above m, and the data above m. */
static size_t rt_saved_size(const rt_arena *a, rt_mark m, const rt_val *v) {
    size_t n = sizeof *v;
    if (!rt_above(a, m, v)) return n;
    if (rt_has_fields(v))
        for (int i = 0; i < v->n; i++) n += rt_saved_size(a, m, v->f[i]);
    else if (rt_above(a, m, v->data))
        n += (rt_nbytes(v) + 7) & ~(size_t)7; /* the next node stays aligned */
    return n;
}

static char *rt_save(const rt_arena *a, rt_mark m, const rt_val *v, char *p) {
    memcpy(p, v, sizeof *v);
    rt_val *saved = (rt_val *)p;
    p += sizeof *v;
    if (!rt_above(a, m, v)) {
        saved->kind = RT_V_KEPT;
        saved->data = (void *)v;
        return p;
    }
    if (rt_has_fields(v)) {
        for (int i = 0; i < v->n; i++) p = rt_save(a, m, v->f[i], p);
        return p;
    }
    saved->tag = rt_above(a, m, v->data); /* a tensor's tag: its data follows */
    if (saved->tag) {
        size_t c = rt_nbytes(v);
        memcpy(p, v->data, c);
        p += (c + 7) & ~(size_t)7;
    }
    return p;
}

static const char *rt_load(rt_arena *a, const char *p, rt_val **out) {
    const rt_val *s = (const rt_val *)p;
    p += sizeof *s;
    if (s->kind == RT_V_KEPT) {
        *out = (rt_val *)s->data;
        return p;
    }
    int fields = rt_has_fields(s);
    rt_val *v = rt_new(a, s->kind, fields ? s->n : 0);
    if (!v) return NULL;
    memcpy(v->shape, s->shape, sizeof v->shape);
    v->n = s->n, v->esize = s->esize, v->dtype = s->dtype, v->data = s->data;
    *out = v;
    if (fields) {
        v->tag = s->tag;
        for (int i = 0; i < s->n && p; i++) p = rt_load(a, p, &v->f[i]);
        return p;
    }
    if (s->tag) {
        size_t c = rt_nbytes(s);
        if (!(v->data = rt_alloc(a, c))) return NULL;
        memcpy(v->data, p, c);
        p += (c + 7) & ~(size_t)7;
    }
    return p;
}

/* *res kept, the rest since m dropped (a program without refs: nothing
 * made since m but the result is reachable); tmp: the context's buffer
 * for the saved form (grown, kept). */
static int rt_keep(rt_arena *a, rt_mark m, rt_val **res, rt_scratch *tmp) {
    if (!rt_movable(a, m, *res)) return RT_OK;
    /* A list the callees built is moved again by each level it passes
     * (time quadratic in a recursion's depth, which NAME_MAX_DEPTH bounds):
     * memory stays the live values'. */
    size_t need = rt_saved_size(a, m, *res);
    if (rt_reserve(tmp, need) != RT_OK) return RT_E_MEMORY;
    rt_save(a, m, *res, tmp->p);
    rt_arena_rewind(a, m);
    return rt_load(a, tmp->p, res) ? RT_OK : RT_E_MEMORY;
}
