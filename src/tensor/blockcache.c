/*
 * blockcache.c: per-thread free lists of small blocks (blockcache.h). A
 * Tree-LSTM step makes and drops tens of thousands of value and tensor
 * headers; glibc's own per-thread cache holds seven blocks per size, so
 * most of them went through the slower paths of malloc and free (a tenth
 * of the step). Here each thread keeps up to MAX_PER_CLASS blocks per
 * 16-byte size class. A block may be freed on another thread than the one
 * that made it: it then joins that thread's cache. When a thread exits
 * its cache waits for the next new thread (a few do; more are freed);
 * every cache is on one list, so what the main thread and the waiting
 * caches keep at exit stays reachable, never lost.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "tensor/blockcache.h"

#define STEP 16
#define NCLASS 32                    /* blocks up to 512 bytes */
#define MAX_PER_CLASS 2048

/* Per class a stack of pointers (not a list threaded through the blocks:
 * popping would then first load a word of a block that is likely out of
 * cache), made on the class's first use. */
typedef struct tcache {
    void **stack[NCLASS];
    int count[NCLASS];
    struct tcache *prev, *next;      /* on the list of live caches */
} tcache;

static _Thread_local tcache *mine;
static _Thread_local bool dead;      /* this thread's cache is gone: no new one */
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static tcache *live;
/* Caches of exited threads wait here for the next new thread (the
 * trainer starts its workers afresh each step: they find their blocks). */
#define MAX_PARKED 8
static tcache *parked[MAX_PARKED];
static int nparked;

static void drop_cache(void *arg) {
    tcache *c = arg;
    mine = NULL;
    dead = true;
    pthread_mutex_lock(&live_mu);
    bool park = nparked < MAX_PARKED;
    if (park) {
        parked[nparked++] = c;
    } else {
        if (c->prev) c->prev->next = c->next;
        else live = c->next;
        if (c->next) c->next->prev = c->prev;
    }
    pthread_mutex_unlock(&live_mu);
    if (park) return;
    for (int k = 0; k < NCLASS; k++) {
        for (int i = 0; i < c->count[k]; i++) ry_free(c->stack[k][i]);
        free(c->stack[k]);
    }
    free(c);
}

static void make_key(void) { key_ok = pthread_key_create(&key, drop_cache) == 0; }

/* This thread's cache: a parked one or a new one, on first use; NULL when
 * it cannot be had. Every cache is on the live list. */
static tcache *cache(void) {
    if (mine || dead) return mine;
    pthread_once(&key_once, make_key);
    if (!key_ok) return NULL;
    pthread_mutex_lock(&live_mu);
    tcache *c = nparked > 0 ? parked[--nparked] : NULL;
    pthread_mutex_unlock(&live_mu);
    if (!c) {
        c = calloc(1, sizeof *c); /* not ry_calloc: the failure hook counts the caller's */
        if (!c) return NULL;
        pthread_mutex_lock(&live_mu);
        c->next = live;
        if (live) live->prev = c;
        live = c;
        pthread_mutex_unlock(&live_mu);
    }
    if (pthread_setspecific(key, c) != 0) {
        pthread_mutex_lock(&live_mu);
        if (nparked < MAX_PARKED) parked[nparked++] = c; /* else it stays listed, unused */
        pthread_mutex_unlock(&live_mu);
        return NULL;
    }
    return mine = c;
}

static int class_of(size_t n) { return n ? (int)((n - 1) / STEP) : 0; }

void *ry_block_get(size_t n) {
    int k = class_of(n);
    if (k >= NCLASS) return ry_malloc(n);
    /* every block of a class has the class's size, whoever gives it back */
    tcache *c = ry_alloc_hooked() ? NULL : cache();
    if (!c || c->count[k] == 0) return ry_malloc((size_t)(k + 1) * STEP);
    void **st = c->stack[k];
    int i = --c->count[k];
    if (i > 0) __builtin_prefetch(st[i - 1], 1); /* the next one's first line */
    return st[i];
}

void ry_block_put(void *p, size_t n) {
    if (!p) return;
    int k = class_of(n);
    tcache *c = k < NCLASS ? cache() : NULL;
    if (c && !c->stack[k]) c->stack[k] = malloc(sizeof(void *) * MAX_PER_CLASS);
    if (!c || !c->stack[k] || c->count[k] >= MAX_PER_CLASS) {
        ry_free(p);
        return;
    }
    c->stack[k][c->count[k]++] = p;
}
