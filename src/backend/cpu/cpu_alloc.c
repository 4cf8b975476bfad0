/*
 * cpu_alloc.c: the CPU target's caching allocator, which the compiled
 * engine gives its operator results (target.h's memory functions).
 *
 * Large buffers (64 KiB and up) freed by one training step are kept
 * process-wide and handed to the next request of the same size, so a step
 * does not pay the kernel for fresh zeroed pages each time (page faults
 * were a quarter of a Tree-LSTM step). Smaller ones come from the pool of
 * the program that asked (a ry_pool): free lists by size class, so that the
 * results a recursion's closures hold on to (a fresh buffer each, which
 * posix_memalign made a tenth of a Tree-LSTM step) are recycled step after
 * step instead of going through malloc. A pool is the program's, but its
 * buffers may be freed by any thread and outlive the program: it is
 * locked, counts the buffers it has out, and goes when the program has
 * closed it and the last of them has come back.
 * Every block starts with a header holding its capacity, so the VM's
 * storage slots (vm_plan.c) can reuse a buffer for any result that fits.
 */
#include <pthread.h>

#include "backend/cpu/cpu_target.h"

#define HDR 64                             /* keeps the 64-byte alignment */
#define MIN_KEPT ((size_t)1 << 16)
#define MAX_KEPT_BYTES ((size_t)1 << 29)   /* 512 MiB */
#define MAX_KEPT 64

/* The header of every block: its capacity, its pool's size class (-1:
 * not a pooled block) and, while it waits in a pool, the next one. */
typedef struct hdr {
    size_t n;
    int cls;
    struct hdr *next;
} hdr;

_Static_assert(sizeof(hdr) <= HDR, "the block header fits its 64 bytes");

static hdr *hdr_of(void *ptr) { return (hdr *)((char *)ptr - HDR); }

/* ---- large blocks, kept process-wide ---- */

typedef struct kept {
    size_t n;
    char *p;
} kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept pool[MAX_KEPT];
static int npool;
static size_t pool_bytes;

/* A kept block of exactly n bytes, or NULL. */
static char *take(size_t n) {
    char *p = NULL;
    pthread_mutex_lock(&lock);
    for (int i = npool - 1; i >= 0; i--)
        if (pool[i].n == n) {
            p = pool[i].p;
            pool[i] = pool[--npool];
            pool_bytes -= n;
            break;
        }
    pthread_mutex_unlock(&lock);
    return p;
}

static void *result_alloc(ry_allocator *self, size_t n) {
    (void)self;
    char *p = n >= MIN_KEPT ? take(n) : NULL;
    if (!p) {
        ry_allocator *base = ry_cpu_allocator();
        if (!(p = base->alloc(base, n + HDR))) return NULL;
        *(hdr *)p = (hdr){.n = n, .cls = -1};
    }
    return p + HDR;
}

static void result_free(ry_allocator *self, void *ptr) {
    (void)self;
    if (!ptr) return;
    char *p = (char *)hdr_of(ptr);
    size_t n = ((hdr *)p)->n;
    if (n >= MIN_KEPT) {
        bool kept_it = false;
        pthread_mutex_lock(&lock);
        if (npool < MAX_KEPT && pool_bytes + n <= MAX_KEPT_BYTES) {
            pool[npool++] = (kept){n, p};
            pool_bytes += n;
            kept_it = true;
        }
        pthread_mutex_unlock(&lock);
        if (kept_it) return;
    }
    ry_allocator *base = ry_cpu_allocator();
    base->free(base, p);
}

static ry_allocator results = {.device = {RY_DEVICE_CPU, 0}, .alloc = result_alloc, .free = result_free};

ry_allocator *ry_cpu_result_allocator(void) { return &results; }

/* ---- a program's pool of small blocks ----
 * Size classes: 64-byte steps up to 1 KiB (0..15), then powers of two up
 * to 64 KiB (16..21); larger requests go to the blocks above. */
#define NCLASS 22
#define POOL_MAX ((size_t)1 << 16)
#define POOL_KEPT_BYTES ((size_t)1 << 26)  /* 64 MiB waiting per pool at most */

struct ry_pool {
    ry_allocator a;            /* first: an allocator's self is its pool */
    pthread_mutex_t mu;
    hdr *free[NCLASS];
    size_t kept;               /* bytes waiting in free[] */
    long out;                  /* blocks handed out, not yet back */
    bool closed;               /* its program is gone */
};

static int class_of(size_t n) {
    if (n <= 1024) return n ? (int)((n - 1) / 64) : 0;
    int c = 16;
    for (size_t cap = 2048; cap < n; cap *= 2) c++;
    return c;
}

static size_t class_bytes(int c) { return c < 16 ? (size_t)(c + 1) * 64 : (size_t)2048 << (c - 16); }

static void pool_destroy(ry_pool *p) {
    pthread_mutex_destroy(&p->mu);
    ry_free(p);
}

static void *pool_alloc(ry_allocator *self, size_t n) {
    ry_pool *p = (ry_pool *)self;
    int c = n <= POOL_MAX ? class_of(n) : -1;
    pthread_mutex_lock(&p->mu);
    hdr *h = c >= 0 ? p->free[c] : NULL;
    if (h) {
        p->free[c] = h->next;
        p->kept -= h->n;
    }
    p->out++;
    pthread_mutex_unlock(&p->mu);
    if (h) return (char *)h + HDR;
    void *ptr = NULL;
    if (c < 0) {
        ptr = result_alloc(NULL, n);
    } else {
        ry_allocator *base = ry_cpu_allocator();
        char *b = base->alloc(base, class_bytes(c) + HDR);
        if (b) {
            *(hdr *)b = (hdr){.n = class_bytes(c), .cls = c};
            ptr = b + HDR;
        }
    }
    if (!ptr) {
        pthread_mutex_lock(&p->mu);
        p->out--;
        pthread_mutex_unlock(&p->mu);
    }
    return ptr;
}

static void pool_free(ry_allocator *self, void *ptr) {
    if (!ptr) return;
    ry_pool *p = (ry_pool *)self;
    hdr *h = hdr_of(ptr);
    bool keep = false;
    pthread_mutex_lock(&p->mu);
    if (h->cls >= 0 && !p->closed && p->kept + h->n <= POOL_KEPT_BYTES) {
        h->next = p->free[h->cls];
        p->free[h->cls] = h;
        p->kept += h->n;
        keep = true;
    }
    bool gone = --p->out == 0 && p->closed;
    pthread_mutex_unlock(&p->mu);
    if (!keep) {
        if (h->cls < 0) result_free(NULL, ptr);
        else ry_cpu_allocator()->free(ry_cpu_allocator(), h);
    }
    if (gone) pool_destroy(p);
}

ry_pool *ry_cpu_pool_new(void) {
    ry_pool *p = ry_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->a = (ry_allocator){.device = {RY_DEVICE_CPU, 0}, .alloc = pool_alloc, .free = pool_free};
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

ry_allocator *ry_cpu_pool_allocator(ry_pool *p) { return p ? &p->a : ry_cpu_result_allocator(); }

void ry_cpu_pool_close(ry_pool *p) {
    if (!p) return;
    hdr *drop[NCLASS];
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    for (int c = 0; c < NCLASS; c++) {
        drop[c] = p->free[c];
        p->free[c] = NULL;
    }
    p->kept = 0;
    bool gone = p->out == 0;
    pthread_mutex_unlock(&p->mu);
    for (int c = 0; c < NCLASS; c++)
        for (hdr *h = drop[c], *next; h; h = next) {
            next = h->next;
            ry_cpu_allocator()->free(ry_cpu_allocator(), h);
        }
    if (gone) pool_destroy(p);
}

long ry_cpu_pool_kept(ry_pool *p) {
    if (!p) return 0;
    long n = 0;
    pthread_mutex_lock(&p->mu);
    for (int c = 0; c < NCLASS; c++)
        for (const hdr *h = p->free[c]; h; h = h->next) n++;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t ry_cpu_capacity(const ry_tensor *t) {
    if (!t || !t->alloc || !t->data) return 0;
    if (t->alloc != &results && t->alloc->alloc != pool_alloc) return 0;
    return hdr_of(t->data)->n;
}
