/*
 * blas_reserve.c: OpenBLAS's work buffers, taken before a GEMM needs them,
 * so that running out of memory is an error and not a hang.
 *
 * Every OpenBLAS GEMM (and a large GEMV) takes a work buffer from a table
 * inside the library (blas_memory_alloc in OpenBLAS 0.3.21's memory.c:
 * 128 MiB of address space each, one per thread calling at once, kept for
 * reuse once freed). When no buffer is free it maps a new one, and when
 * every way of mapping fails it sets its base address to 0 and tries
 * again, forever: `do { ... } while (map_address == -1)`. It has no way to
 * report the failure, so a GEMM that needs a new buffer when the machine
 * (or RLIMIT_AS) has none spins on the calling thread and the step never
 * ends.
 *
 * So before a CPU kernel calls OpenBLAS, ry_cpu_blas_ready makes sure the
 * table holds a buffer for every thread that may call it at once (our
 * pool's threads, plus the caller and one more for OpenBLAS's own use),
 * by holding that many at once and giving them back. Getting them runs
 * on a helper thread with a deadline: first our own mmap of the same size
 * (so a plain shortage is a quick, exact error), then OpenBLAS's. If the
 * helper has not finished by the deadline, OpenBLAS is spinning, and every
 * GEMM from then on fails with the message instead of joining it (the
 * helper is left to spin, detached; a later ry_cpu_blas_ready that finds
 * it finished carries on). Once the buffers exist, steps map nothing in
 * OpenBLAS.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"

/* OpenBLAS's own entry points for its buffer table (exported by every
 * build of it; no header declares them). */
extern void *blas_memory_alloc(int procpos);
extern void blas_memory_free(void *buffer);

/* OpenBLAS 0.3.21's BUFFER_SIZE on x86-64 (32 << 22) and a page. */
#define BLAS_BUFFER_BYTES (((size_t)32 << 22) + 4096)
#define MAX_HELD 80
#define READY_SECONDS 5

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static atomic_int reserved;  /* buffers known to exist in OpenBLAS's table */
static bool busy;            /* a helper is working (under mu) */
static bool stuck;           /* the last helper passed its deadline (under mu) */
static int helper_want;      /* what the working helper is getting */
static int helper_errno;     /* its probe's errno, 0 when the probe passed */
static bool skip_probe;      /* tests: OpenBLAS meets a shortage itself */

void ry_cpu_blas_skip_probe(bool skip) { skip_probe = skip; }

static void *get_buffers(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    int want = helper_want, have = atomic_load(&reserved);
    pthread_mutex_unlock(&mu);
    int e = 0;
    /* our probe: as many as the table may have to map, held at once */
    void *probe[MAX_HELD];
    int mapped = 0;
    for (int i = have; i < want && !e && !skip_probe; i++) {
        void *p = mmap(NULL, BLAS_BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) e = errno ? errno : ENOMEM;
        else probe[mapped++] = p;
    }
    for (int i = 0; i < mapped; i++) munmap(probe[i], BLAS_BUFFER_BYTES);
    if (!e) {
        void *held[MAX_HELD];
        for (int i = 0; i < want; i++) held[i] = blas_memory_alloc(0);
        for (int i = 0; i < want; i++) blas_memory_free(held[i]);
    }
    pthread_mutex_lock(&mu);
    helper_errno = e;
    if (!e && want > atomic_load(&reserved)) atomic_store(&reserved, want);
    busy = false;
    stuck = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static ry_status fail(ry_kernel_ctx *c, int e) {
    const char *name = c && c->op ? c->op->name : "gemm";
    if (e)
        return ry_error_at(c ? c->err : NULL, c ? c->span : RY_NO_SPAN,
                           "%s: out of memory: OpenBLAS needs a %zu MiB work buffer per thread and "
                           "mmap refused one (%s)",
                           name, BLAS_BUFFER_BYTES >> 20, strerror(e));
    return ry_error_at(c ? c->err : NULL, c ? c->span : RY_NO_SPAN,
                       "%s: out of memory: OpenBLAS could not map its work buffers within %d s "
                       "(it retries without end rather than fail), so relayc stops its GEMMs here",
                       name, READY_SECONDS);
}

/* Starts a helper for want buffers; under mu. */
static int start_helper(int want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    busy = true;
    stuck = false;
    helper_want = want;
    helper_errno = 0;
    int rc = pthread_create(&t, &attr, get_buffers, NULL);
    pthread_attr_destroy(&attr);
    if (rc) busy = false;
    return rc;
}

ry_status ry_cpu_blas_ready(ry_kernel_ctx *c) {
    int want = ry_get_num_threads() + 2;
    if (want > MAX_HELD) want = MAX_HELD;
    if (atomic_load(&reserved) >= want) return RY_OK;
    pthread_mutex_lock(&mu);
    if (busy && stuck) { /* still spinning since an earlier call gave up on it */
        pthread_mutex_unlock(&mu);
        return fail(c, 0);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += READY_SECONDS;
    while (atomic_load(&reserved) < want) {
        if (!busy) {
            if (helper_errno && helper_want >= want) break; /* the last helper's probe failed */
            int rc = start_helper(want);
            if (rc) {
                pthread_mutex_unlock(&mu);
                return ry_error_at(c ? c->err : NULL, c ? c->span : RY_NO_SPAN,
                                   "%s: cannot start a thread to set up OpenBLAS: %s",
                                   c && c->op ? c->op->name : "gemm", strerror(rc));
            }
        }
        if (pthread_cond_timedwait(&cv, &mu, &deadline) == ETIMEDOUT && busy) {
            stuck = true;
            pthread_mutex_unlock(&mu);
            return fail(c, 0);
        }
    }
    int e = atomic_load(&reserved) >= want ? 0 : helper_errno;
    helper_errno = 0; /* the next call probes again: memory may have come back */
    pthread_mutex_unlock(&mu);
    return e ? fail(c, e) : RY_OK;
}
