/*
 * alloc.c: the library's allocation hook and the default CPU allocator.
 * Tests make the Nth allocation fail to exercise every error path; the
 * IR's memory is failed only under a recovery point (alloc_exempt.h,
 * oom.h). The CPU allocator maps large
 * blocks itself and asks the memory guard (mem_guard.h) before it hands
 * out fresh memory during a run.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "relayc/tensor.h"
#include "tensor/alloc_exempt.h"
#include "tensor/alloc_failures.h"
#include "tensor/blockcache.h"
#include "tensor/mem_guard.h"
#include "tensor/oom.h"

static atomic_long fail_countdown = -1;
static atomic_long nfailed; /* alloc_failures.h */
static _Thread_local int exempt; /* alloc_exempt.h */

void ry_alloc_exempt(bool on) { exempt += on ? 1 : -1; }

void ry_alloc_fail_after(long n) { atomic_store(&fail_countdown, n); }

bool ry_alloc_hooked(void) { return atomic_load_explicit(&fail_countdown, memory_order_relaxed) >= 0; }

static bool should_fail(void) {
    long c = atomic_load(&fail_countdown);
    if (c < 0 || exempt) return false;
    if (c == 0) return true;
    atomic_fetch_sub(&fail_countdown, 1);
    return false;
}

/* Allocations of the calling thread the hook may fail, for tests
 * (ry_alloc_count); exempt ones are not counted. */
static _Thread_local long nallocs;

static void counted(void) {
    if (!exempt) nallocs++;
}

long ry_alloc_count(void) { return nallocs; }

long ry_alloc_failures(void) { return atomic_load(&nfailed); }

static void *noted(void *p) {
    if (!p) atomic_fetch_add(&nfailed, 1);
    return p;
}

void *ry_malloc(size_t n) {
    counted();
    return noted(should_fail() ? NULL : malloc(n ? n : 1));
}

void *ry_calloc(size_t count, size_t size) {
    counted();
    return noted(should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1));
}

void *ry_realloc(void *p, size_t n) {
    counted();
    return noted(should_fail() ? NULL : realloc(p, n ? n : 1));
}

void ry_free(void *p) { free(p); }

char *ry_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ry_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The IR's allocations: hooked (counted and failable) only under a
 * recovery point, where a failure jumps to it; elsewhere exempt, and a
 * failure ends the process (ry_oom_raise without a point). */
ry_tensor *ry_ir_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape) {
    bool hooked = ry_oom_active();
    if (!hooked) ry_alloc_exempt(true);
    ry_tensor *t = ry_tensor_new(dtype, ndim, shape);
    if (!hooked) ry_alloc_exempt(false);
    if (!t) ry_oom_raise();
    return t;
}

void *ry_ir_malloc(size_t n) {
    void *p = ry_oom_active() ? ry_malloc(n) : malloc(n ? n : 1);
    if (!p) ry_oom_raise();
    return p;
}

void *ry_ir_realloc(void *p, size_t n) {
    void *q = ry_oom_active() ? ry_realloc(p, n) : realloc(p, n ? n : 1);
    if (!q) ry_oom_raise();
    return q;
}

/* ---- the CPU allocator: 64-byte aligned for SIMD kernels and GEMM ----
 * Blocks of MAP_MIN and more are mapped here (mmap) rather than taken from
 * malloc. glibc raises its own mmap threshold to the size of every mapped
 * block that is freed (up to 32 MiB), and from then on blocks that large
 * come from its arenas; with a trainer's threads, each on an arena of its
 * own, the space they free fragments and is never given back: the
 * Tree-LSTM on two threads grew by 37 MB per 1,000 steps so (bench/soak),
 * flat with its large blocks mapped (as with MALLOC_MMAP_THRESHOLD_ set).
 * Each block starts with a header holding the length of its mapping (0:
 * from malloc). Sanitizer builds keep to malloc, whose blocks ASan checks
 * to the byte. */
#define CPU_HDR 64
#define MAP_MIN ((size_t)128 << 10)
#if defined(__SANITIZE_ADDRESS__)
#define MAP_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAP_BLOCKS 0
#endif
#endif
#ifndef MAP_BLOCKS
#define MAP_BLOCKS 1
#endif

static void *cpu_map(size_t nbytes);

static void *cpu_alloc(ry_allocator *self, size_t nbytes) {
    (void)self;
    return noted(cpu_map(nbytes));
}

static void *cpu_map(size_t nbytes) {
    counted();
    if (should_fail() || nbytes > SIZE_MAX / 2) return NULL;
    size_t n = ((nbytes ? nbytes : 1) + 63) & ~(size_t)63;
    if (!ry_mem_guard_allows(n)) return NULL;
    char *p = NULL;
    size_t len = 0;
    if (MAP_BLOCKS && n + CPU_HDR >= MAP_MIN) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        len = (n + CPU_HDR + page - 1) / page * page;
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
    } else {
        void *q = NULL;
        if (posix_memalign(&q, 64, n + CPU_HDR) != 0) return NULL;
        p = q;
    }
    *(size_t *)p = len;
    return p + CPU_HDR;
}

static void cpu_free(ry_allocator *self, void *ptr) {
    (void)self;
    if (!ptr) return;
    char *p = (char *)ptr - CPU_HDR;
    size_t len = *(size_t *)p;
    if (len) munmap(p, len);
    else free(p);
}

static ry_allocator cpu_allocator = {{RY_DEVICE_CPU, 0}, cpu_alloc, cpu_free};

ry_allocator *ry_cpu_allocator(void) { return &cpu_allocator; }
