/*
 * core.c (export runtime): what every exported model's .c holds whatever
 * its operators: the error codes and the per-context scratch block the
 * entry carves its buffers from (reading a weights file is weights.c's).
 * Written into the artifact verbatim by relayc export (src/backend/c/);
 * it needs only the C11 library. Kernels are in the other files here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model header's error codes, shared by every export. */
enum {
    RT_OK = 0, RT_E_IO = 1, RT_E_WEIGHTS = 2, RT_E_MEMORY = 3, RT_E_DIM = 4, RT_E_ARG = 5,
    RT_E_DEPTH = 6, /* recursion deeper than NAME_MAX_DEPTH */
    RT_E_MATCH = 7, /* no clause of a match matches the value */
    RT_E_PARSE = 8  /* a malformed tree (NAME_parse_tree) */
};

#define RT_ALIGN(n) (((size_t)(n) + 63) & ~(size_t)63)

/* A 64-byte aligned block that grows to the largest call's need. */
typedef struct rt_scratch {
    void *p;
    size_t cap;
} rt_scratch;

static int rt_reserve(rt_scratch *s, size_t need) {
    if (need <= s->cap && s->p) return RT_OK;
    void *fresh = aligned_alloc(64, RT_ALIGN(need ? need : 1));
    if (!fresh) return RT_E_MEMORY;
    free(s->p);
    s->p = fresh;
    s->cap = need;
    return RT_OK;
}
