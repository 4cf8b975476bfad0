/*
 * parallel.c: the persistent thread pool behind ry_parallel_for and the
 * thread-count knob of include/relayc/threads.h.
 *
 * A loop is cut into chunks (up to 4 per thread) that the caller and the
 * workers claim one at a time from a shared counter, so when a worker is
 * late (asleep, or descheduled on a busy machine) the caller simply runs
 * its chunks itself instead of waiting for it. Workers are started lazily
 * (only ever grown), wait for a new job (a tight poll, then a poll that
 * yields, then a condition variable) and are joined by an atexit handler,
 * so nothing leaks at exit. A hand-off costs no system call while the
 * workers poll: the mutex and condition variables are touched only when
 * someone actually sleeps (counted in sleepers / owner_sleeps).
 * One caller uses the pool at a time; another thread arriving meanwhile,
 * and any call from inside a region, runs its loop inline. OpenBLAS is
 * kept to one thread here (blas_serial): the GEMMs are split over this pool.
 */
#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/parallel.h"

/* Helgrind does not model C11 atomics: it would call every atomic load of
 * the job word a race, and cannot see the happens-before edges they make.
 * The annotations tell it (no-ops outside valgrind). */
#if defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#endif
#endif
#ifndef ANNOTATE_HAPPENS_BEFORE
#define ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#define VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)(addr), (void)(len))
#endif

#define MAX_THREADS 64
#define CHUNKS_PER_THREAD 4
/* How a thread waits (for a job, or for the workers to finish one):
 * first HOT_NS of plain polling (when the threads fit the cores: P.hot;
 * and while the thread waited for is on another core: shares_cpu), which
 * picks a job up within a fraction of a microsecond (a worker inside
 * sched_yield answers only when the system call returns, a microsecond or
 * more on a VM: a 2 x 2.4 us loop took 3.18 us with the old yielding poll,
 * 2.73 us with this one);
 * then SPIN polls with a yield every 64, so that runnable threads (a
 * trainer's workers, other processes on a machine with as many threads as
 * cores) are not held off: some hundreds of microseconds, enough to bridge
 * the serial stretches between a training step's kernels without a sleep
 * and a wake-up; then a condition variable. */
#define HOT_NS 50000
#define SPIN 32768

/* The job word: generation (32 bits) | workers taking part (8) | chunk
 * count (8) | next chunk (8). A claim is one CAS on it, so a claim can only
 * succeed for the job that is current, and the job's fields cannot change
 * until every claimed chunk has finished (the owner waits for that).
 * Workers beyond the thread count set now (the pool only grows) sit out. */
#define GEN(s) ((uint32_t)((s) >> 32))
#define ACTIVE(s) ((int)(((s) >> 16) & 0xff))
#define NCHUNKS(s) ((int)(((s) >> 8) & 0xff))
#define NEXT(s) ((int)((s)&0xff))

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_t tids[MAX_THREADS];
    uint32_t start_gen[MAX_THREADS]; /* the generation when each worker was made */
    int nworkers;                    /* started (under mu) */
    atomic_int nstarted;             /* the same, for reading without mu */
    int ncpu;                        /* online CPUs: set by the first grow, before any worker */
    /* whether the threads of the last job fit the online CPUs: only then
     * may a waiting thread poll without yielding (with more threads than
     * cores a hot poll would take the core from the thread doing the
     * serial work) */
    atomic_bool hot;
    bool exit_registered;
    _Atomic uint64_t state; /* the job word; a new generation is published under mu */
    atomic_int finished;    /* chunks of the current job finished */
    atomic_bool busy;       /* a caller owns the pool */
    atomic_bool quit;
    atomic_int sleepers;       /* workers that block (or are about to) on wake */
    atomic_bool owner_sleeps;  /* the caller blocks (or is about to) on done */
    /* the CPU each thread last polled on: [0] the caller, [1 + w] worker w;
     * -1 when unknown or asleep (see poll_until) */
    atomic_int cpu_of[MAX_THREADS + 1];
    /* the current job, written by the owner before its generation is published */
    ry_parallel_fn fn;
    void *ctx;
    int64_t n;
} pool;

static pool P = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .wake = PTHREAD_COND_INITIALIZER,
                 .done = PTHREAD_COND_INITIALIZER};

static atomic_int nthreads; /* 0: not yet read from the environment */
static _Thread_local int serial_depth;
static _Thread_local bool in_region;

/* No PAUSE in the spin: under a hypervisor a PAUSE loop traps
 * (pause-loop exiting) and the vCPU may be descheduled, so a worker
 * spinning that way joined a GEMM 25-40 us late (measured on this VM: a
 * 64x256x784 sgemm split in two took 195 us after a 20 us gap instead of
 * 145 us). A plain poll with a yield every 64 does not trap. */
static inline void cpu_relax(int i) {
    if ((i & 63) == 63) sched_yield();
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether thread `self` (0: the caller, 1 + w: worker w) shares its CPU
 * with the thread it waits for (the caller waits for the workers, a
 * worker for the caller): then a hot poll only delays that thread, which
 * runs when this one yields. On a machine busy with other work the
 * scheduler may put both of our threads on one core. */
static bool shares_cpu(int self) {
    int me = sched_getcpu();
    atomic_store_explicit(&P.cpu_of[self], me, memory_order_relaxed);
    if (me < 0) return false;
    if (self > 0) return atomic_load_explicit(&P.cpu_of[0], memory_order_relaxed) == me;
    int n = atomic_load_explicit(&P.nstarted, memory_order_relaxed);
    for (int w = 0; w < n; w++)
        if (atomic_load_explicit(&P.cpu_of[1 + w], memory_order_relaxed) == me) return true;
    return false;
}

/* Polls until done(arg) or the hot and yielding phases have passed;
 * returns whether done. The clock and the CPUs are read once per 256
 * polls; the hot phase ends early when self shares a CPU (shares_cpu). */
static bool poll_until(bool (*done)(const void *), const void *arg, int self) {
    int64_t until = atomic_load_explicit(&P.hot, memory_order_relaxed) ? 0 : -1;
    for (int i = 0; until >= 0; i++) {
        if (done(arg)) return true;
        if ((i & 255) == 255) {
            int64_t t = now_ns();
            if (!until) until = t + HOT_NS;
            else if (t > until || shares_cpu(self)) break;
        }
    }
    for (int i = 0; i < SPIN; i++) {
        cpu_relax(i);
        if (done(arg)) return true;
    }
    return false;
}

static void chunk_bounds(int64_t n, int chunks, int k, int64_t *lo, int64_t *hi) {
    *lo = n / chunks * k + (k < n % chunks ? k : n % chunks);
    *hi = *lo + n / chunks + (k < n % chunks ? 1 : 0);
}

/* Claims and runs chunks of job generation g until none are left. */
static void run_chunks(uint32_t g) {
    uint64_t s = atomic_load_explicit(&P.state, memory_order_acquire);
    for (;;) {
        if (GEN(s) != g || NEXT(s) >= NCHUNKS(s)) return;
        if (!atomic_compare_exchange_weak_explicit(&P.state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* s now holds the current word */
        ANNOTATE_HAPPENS_AFTER(&P.state);
        int chunks = NCHUNKS(s);
        int64_t lo, hi;
        chunk_bounds(P.n, chunks, NEXT(s), &lo, &hi);
        P.fn(P.ctx, lo, hi);
        ANNOTATE_HAPPENS_BEFORE(&P.finished);
        /* seq_cst, against the owner's owner_sleeps then finished: either
         * it sees this chunk finished or this sees it sleeping */
        if (atomic_fetch_add(&P.finished, 1) + 1 == chunks && atomic_load(&P.owner_sleeps)) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_signal(&P.done);
            pthread_mutex_unlock(&P.mu);
        }
        s = atomic_load_explicit(&P.state, memory_order_acquire);
    }
}

static bool new_job(const void *seen) {
    return GEN(atomic_load_explicit(&P.state, memory_order_acquire)) != *(const uint32_t *)seen;
}

/* Waits for a generation other than seen and returns it. */
static uint32_t wait_job(int w, uint32_t seen) {
    uint32_t g;
    if (poll_until(new_job, &seen, 1 + w))
        return GEN(atomic_load_explicit(&P.state, memory_order_acquire));
    atomic_store_explicit(&P.cpu_of[1 + w], -1, memory_order_relaxed); /* asleep */
    pthread_mutex_lock(&P.mu);
    /* seq_cst, against publish's store then load of sleepers: either this
     * sees the new job or publish sees a sleeper and broadcasts (under mu,
     * which this holds until cond_wait releases it) */
    atomic_fetch_add(&P.sleepers, 1);
    while ((g = GEN(atomic_load(&P.state))) == seen) pthread_cond_wait(&P.wake, &P.mu);
    atomic_fetch_sub(&P.sleepers, 1);
    pthread_mutex_unlock(&P.mu);
    return g;
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    in_region = true; /* whatever a worker runs is inside a region */
    uint32_t seen = P.start_gen[w]; /* not the generation now: a job may have started */
    for (;;) {
        uint32_t g = wait_job(w, seen);
        seen = g;
        if (atomic_load(&P.quit)) return NULL;
        if (w < ACTIVE(atomic_load_explicit(&P.state, memory_order_acquire))) run_chunks(g);
    }
}

/* Publishes a new generation; wakes the workers that sleep (wait_job says
 * why none can be missed). Polling workers see the word change. */
static void publish(uint64_t word) {
    atomic_store(&P.state, word);
    if (atomic_load(&P.sleepers) > 0) {
        pthread_mutex_lock(&P.mu);
        pthread_cond_broadcast(&P.wake);
        pthread_mutex_unlock(&P.mu);
    }
}

static void shutdown_pool(void) {
    atomic_store(&P.quit, true);
    uint32_t g = GEN(atomic_load(&P.state)) + 1;
    publish((uint64_t)g << 32); /* no chunks: workers wake, see quit, return */
    pthread_mutex_lock(&P.mu);
    int n = P.nworkers;
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < n; i++) pthread_join(P.tids[i], NULL);
    P.nworkers = 0;
    atomic_store(&P.nstarted, 0);
}

/* Starts workers up to want (the caller owns the pool, so no job runs);
 * returns how many there are (fewer when pthread_create fails). */
static int grow(int want) {
    pthread_mutex_lock(&P.mu);
    if (!P.exit_registered) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        P.ncpu = c < 1 ? 1 : c > 4096 ? 4096 : (int)c;
        P.exit_registered = atexit(shutdown_pool) == 0;
        VALGRIND_HG_DISABLE_CHECKING(&P.state, sizeof P.state);
        VALGRIND_HG_DISABLE_CHECKING(&P.finished, sizeof P.finished);
        VALGRIND_HG_DISABLE_CHECKING(&P.busy, sizeof P.busy);
        VALGRIND_HG_DISABLE_CHECKING(&P.quit, sizeof P.quit);
        VALGRIND_HG_DISABLE_CHECKING(&P.sleepers, sizeof P.sleepers);
        VALGRIND_HG_DISABLE_CHECKING(&P.owner_sleeps, sizeof P.owner_sleeps);
        VALGRIND_HG_DISABLE_CHECKING(&P.cpu_of, sizeof P.cpu_of);
        VALGRIND_HG_DISABLE_CHECKING(&P.nstarted, sizeof P.nstarted);
        VALGRIND_HG_DISABLE_CHECKING(&P.hot, sizeof P.hot);
    }
    while (P.exit_registered && P.nworkers < want) {
        P.start_gen[P.nworkers] = GEN(atomic_load(&P.state));
        atomic_store(&P.cpu_of[1 + P.nworkers], -1);
        if (pthread_create(&P.tids[P.nworkers], NULL, worker, (void *)(intptr_t)P.nworkers))
            break;
        P.nworkers++;
        atomic_store(&P.nstarted, P.nworkers);
    }
    int n = P.nworkers;
    pthread_mutex_unlock(&P.mu);
    return n;
}

static int clamp_threads(int n) { return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n; }

/* OpenBLAS runs on one thread, always: ry_cpu_gemm (blas.h) splits large
 * GEMMs over our pool instead. OpenBLAS's own workers would busy-wait
 * after every GEMM while our workers run the kernels around it; on as
 * many threads as cores the two pools fight (LeNet ran 18x slower at 2
 * threads). Set on the first read of the knob, which every GEMM makes;
 * OPENBLAS_NUM_THREADS is overridden (threads.h). */
static void blas_one_thread(void) { openblas_set_num_threads(1); }
static void blas_serial(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_one_thread); /* a racing first caller waits for it */
}

int ry_get_num_threads(void) {
    int n = atomic_load(&nthreads);
    if (n) return n;
    blas_serial();
    const char *env = getenv("RELAYC_NUM_THREADS");
    n = env && *env ? clamp_threads(atoi(env)) : 1;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&nthreads, &expected, n)) n = expected;
    return n;
}

void ry_set_num_threads(int n) {
    blas_serial();
    atomic_store(&nthreads, clamp_threads(n));
}

void ry_threads_serial_begin(void) { serial_depth++; }
void ry_threads_serial_end(void) {
    if (serial_depth > 0) serial_depth--;
}

bool ry_parallel_serial(void) { return in_region || serial_depth > 0; }

static bool all_finished(const void *chunks) {
    return atomic_load_explicit(&P.finished, memory_order_acquire) >= *(const int *)chunks;
}

void ry_parallel_for(int64_t n, int64_t grain, ry_parallel_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int threads = ry_get_num_threads();
    int64_t most = n / grain;
    if (threads < 2 || most < 2 || ry_parallel_serial() || atomic_load(&P.quit)) {
        fn(ctx, 0, n);
        return;
    }
    bool free_ = false;
    if (!atomic_compare_exchange_strong(&P.busy, &free_, true)) {
        fn(ctx, 0, n); /* another thread has the pool */
        return;
    }
    ANNOTATE_HAPPENS_AFTER(&P.busy);
    int workers = grow(threads - 1);
    if (workers > threads - 1) workers = threads - 1;
    int64_t cap = (int64_t)(workers + 1) * CHUNKS_PER_THREAD;
    int chunks = (int)(most < cap ? most : cap);
    if (workers < 1 || chunks < 2) {
        ANNOTATE_HAPPENS_BEFORE(&P.busy);
        atomic_store(&P.busy, false);
        fn(ctx, 0, n);
        return;
    }
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    atomic_store_explicit(&P.cpu_of[0], sched_getcpu(), memory_order_relaxed);
    atomic_store_explicit(&P.hot, threads <= P.ncpu, memory_order_relaxed);
    atomic_store_explicit(&P.finished, 0, memory_order_relaxed);
    uint32_t g = GEN(atomic_load(&P.state)) + 1;
    ANNOTATE_HAPPENS_BEFORE(&P.state);
    publish((uint64_t)g << 32 | (uint64_t)workers << 16 | (uint64_t)chunks << 8);

    in_region = true;
    run_chunks(g);
    in_region = false;

    /* chunks still running were claimed by workers that are running them */
    if (!poll_until(all_finished, &chunks, 0)) {
        pthread_mutex_lock(&P.mu);
        atomic_store(&P.owner_sleeps, true); /* seq_cst: see run_chunks */
        while (atomic_load(&P.finished) < chunks) pthread_cond_wait(&P.done, &P.mu);
        atomic_store(&P.owner_sleeps, false);
        pthread_mutex_unlock(&P.mu);
    }
    ANNOTATE_HAPPENS_AFTER(&P.finished);
    ANNOTATE_HAPPENS_BEFORE(&P.busy);
    atomic_store(&P.busy, false);
}

/* ---- copies ---- */

typedef struct copy_job {
    char *dst;
    const char *src;
} copy_job;

#define COPY_BLOCK ((int64_t)1 << 14) /* bytes: whole cache lines per block */
#define COPY_GRAIN 16                 /* blocks per chunk: 256 KB */

static void copy_blocks(void *ctx, int64_t lo, int64_t hi) {
    const copy_job *j = ctx;
    memcpy(j->dst + lo * COPY_BLOCK, j->src + lo * COPY_BLOCK, (size_t)((hi - lo) * COPY_BLOCK));
}

void ry_parallel_copy(void *dst, const void *src, size_t n) {
    int64_t blocks = (int64_t)(n / (size_t)COPY_BLOCK);
    size_t done = (size_t)blocks * (size_t)COPY_BLOCK;
    copy_job j = {dst, src};
    if (blocks > 0) ry_parallel_for(blocks, COPY_GRAIN, copy_blocks, &j);
    if (n > done) memcpy((char *)dst + done, (const char *)src + done, n - done);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
__attribute__((target("avx"))) static void vzeroupper(void) { __builtin_ia32_vzeroupper(); }
static bool have_avx(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
}
void ry_cpu_after_blas(void) {
    static atomic_int avx = -1; /* every thread computes the same value */
    int a = atomic_load_explicit(&avx, memory_order_relaxed);
    if (a < 0) atomic_store_explicit(&avx, a = have_avx(), memory_order_relaxed);
    if (a) vzeroupper();
}
#else
void ry_cpu_after_blas(void) {}
#endif
