/*
 * alloc.c: the library's allocation hook and the default CPU allocator.
 * Tests make the Nth allocation fail to exercise every error path.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relayc/tensor.h"
#include "tensor/alloc_exempt.h"
#include "tensor/blockcache.h"
#include "tensor/mem_guard.h"

static atomic_long fail_countdown = -1;
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

void *ry_malloc(size_t n) {
    counted();
    return should_fail() ? NULL : malloc(n ? n : 1);
}

void *ry_calloc(size_t count, size_t size) {
    counted();
    return should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1);
}

void *ry_realloc(void *p, size_t n) {
    counted();
    return should_fail() ? NULL : realloc(p, n ? n : 1);
}

void ry_free(void *p) { free(p); }

char *ry_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ry_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static _Noreturn void ir_out_of_memory(void) {
    fprintf(stderr, "relayc: out of memory\n");
    exit(1);
}

ry_tensor *ry_ir_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape) {
    ry_alloc_exempt(true);
    ry_tensor *t = ry_tensor_new(dtype, ndim, shape);
    ry_alloc_exempt(false);
    if (!t) ir_out_of_memory();
    return t;
}

void *ry_ir_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) ir_out_of_memory();
    return q;
}

/* ---- the CPU allocator: 64-byte aligned for SIMD kernels and GEMM ---- */
static void *cpu_alloc(ry_allocator *self, size_t nbytes) {
    (void)self;
    counted();
    if (should_fail() || nbytes > SIZE_MAX - 63) return NULL;
    void *p = NULL;
    size_t n = (nbytes + 63) & ~(size_t)63;
    if (!ry_mem_guard_allows(n) || posix_memalign(&p, 64, n ? n : 64) != 0) return NULL;
    return p;
}

static void cpu_free(ry_allocator *self, void *p) {
    (void)self;
    free(p);
}

static ry_allocator cpu_allocator = {{RY_DEVICE_CPU, 0}, cpu_alloc, cpu_free};

ry_allocator *ry_cpu_allocator(void) { return &cpu_allocator; }
