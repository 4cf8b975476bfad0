/*
 * vm_alloc.c: the CPU allocator the VM gives its operator results. Large
 * buffers (64 KiB and up) freed by one training step are kept and handed
 * to the next request of the same size, so a step does not pay the kernel
 * for fresh zeroed pages each time (page faults were a quarter of a
 * Tree-LSTM step). Small buffers go straight to the default allocator.
 * Process-wide and locked: tensors may outlive the program that made them.
 * What is kept stays reachable (from this file) until the process ends.
 * The header before each block records its size, so the VM's storage
 * slots (vm_plan.c) can reuse a buffer for any result that fits.
 */
#include <pthread.h>

#include "runtime/vm_impl.h"

#define HDR 64                             /* keeps the 64-byte alignment */
#define MIN_KEPT ((size_t)1 << 16)
#define MAX_KEPT_BYTES ((size_t)1 << 29)   /* 512 MiB */
#define MAX_KEPT 64

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

/* Each block starts with a header holding its size (the allocator
 * interface frees by pointer alone). */
static void *vm_alloc(ry_allocator *self, size_t n) {
    (void)self;
    char *p = n >= MIN_KEPT ? take(n) : NULL;
    if (!p) {
        ry_allocator *base = ry_cpu_allocator();
        if (!(p = base->alloc(base, n + HDR))) return NULL;
        *(size_t *)p = n;
    }
    return p + HDR;
}

static void vm_free(ry_allocator *self, void *ptr) {
    (void)self;
    if (!ptr) return;
    char *p = (char *)ptr - HDR;
    size_t n = *(size_t *)p;
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

ry_allocator *vm_cpu_allocator(void) {
    static ry_allocator a = {.device = {RY_DEVICE_CPU, 0}, .alloc = vm_alloc, .free = vm_free};
    return &a;
}

size_t vm_alloc_capacity(const ry_tensor *t) {
    if (!t || t->alloc != vm_cpu_allocator() || !t->data) return 0;
    return *(const size_t *)((const char *)t->data - HDR);
}
