/*
 * comm_mpi.c: comm.h and dist.h over MPI_COMM_WORLD (built when the
 * Makefile finds MPI). Collectives are the blocking ones, with errors
 * returned (MPI_ERRORS_RETURN) rather than aborting. A watchdog thread,
 * which never calls MPI (the job runs at MPI_THREAD_FUNNELED), watches
 * the collective in progress: past the timeout it prints which one, on
 * which rank and step, and _exits, and mpirun then ends the other ranks.
 * That covers a rank that hangs; one that dies is noticed by mpirun
 * itself, which kills the job with its own message.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/comm.h"

static bool joined, finalized, active;
static MPI_Request *reqs; /* the started non-blocking sums (ry_comm_iallreduce_sum) */
static int nreq, capreq;
static int rank, size = 1;

static _Atomic double timeout_s = 300;
static _Atomic int64_t armed_ns;        /* when the current collective began; 0: none */
static _Atomic(const char *) armed_what;
static _Atomic int64_t armed_step;
static pthread_t dog;
static bool dog_running;
static pthread_mutex_t dog_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dog_cv = PTHREAD_COND_INITIALIZER;
static bool dog_quit;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&dog_mu);
    while (!dog_quit) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100000000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&dog_cv, &dog_mu, &t);
        int64_t since = atomic_load(&armed_ns);
        double lim = atomic_load(&timeout_s);
        if (dog_quit || !since || (double)(now_ns() - since) < lim * 1e9) continue;
        fprintf(stderr,
                "relayc: rank %d of %d: %s of step %lld has waited %.0f s for the other ranks "
                "(the timeout): a rank has died or hangs; stopping this one\n",
                rank, size, atomic_load(&armed_what), (long long)atomic_load(&armed_step), lim);
        fflush(stderr);
        _exit(3);
    }
    pthread_mutex_unlock(&dog_mu);
    return NULL;
}

static void arm(const char *what, int64_t step) {
    atomic_store(&armed_what, what);
    atomic_store(&armed_step, step);
    atomic_store(&armed_ns, now_ns());
}

static void disarm(void) { atomic_store(&armed_ns, 0); }

/* An MPI error code as the caller's error. */
static ry_status failed(int rc, const char *call, const char *what, int64_t step, ry_error *err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return ry_error_at(err, RY_NO_SPAN, "rank %d of %d: %s (%s) of step %lld failed: %s", rank,
                       size, what, call, (long long)step, msg);
}

/* Started by a launcher: OpenMPI's, MPICH's (hydra) or PMIx's variables. */
static bool launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

ry_status ry_dist_init(int *argc, char ***argv, ry_error *err) {
    if (joined || !launched()) return RY_OK;
    int provided = 0, rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return ry_error_at(err, RY_NO_SPAN, "MPI_Init failed (code %d)", rc);
    joined = true;
    atexit(ry_dist_finalize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    active = size > 1;
    if (active && pthread_create(&dog, NULL, watch, NULL) == 0) dog_running = true;
    return RY_OK;
}

bool ry_dist_available(void) { return true; }
int ry_dist_rank(void) { return rank; }
int ry_dist_size(void) { return size; }
bool ry_comm_active(void) { return active; }

void ry_dist_set_timeout(double seconds) { atomic_store(&timeout_s, seconds > 0 ? seconds : 300); }

void ry_dist_abort(int code) {
    if (joined && !finalized) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    exit(code);
}

void ry_dist_finalize(void) {
    if (dog_running) {
        pthread_mutex_lock(&dog_mu);
        dog_quit = true;
        pthread_cond_signal(&dog_cv);
        pthread_mutex_unlock(&dog_mu);
        pthread_join(dog, NULL);
        dog_running = false;
    }
    if (joined && !finalized) {
        finalized = true;
        active = false;
        MPI_Finalize();
    }
    ry_free(reqs);
    reqs = NULL;
    nreq = capreq = 0;
}

static MPI_Datatype mpi_type(ry_dtype dt) {
    return dt == RY_FLOAT64 ? MPI_DOUBLE : dt == RY_INT64 ? MPI_INT64_T : MPI_FLOAT;
}

ry_status ry_comm_allreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                int64_t step, ry_error *err) {
    if (n > INT32_MAX) return ry_error_at(err, RY_NO_SPAN, "%s: %lld elements in one call", what, (long long)n);
    arm(what, step);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Allreduce", what, step, err);
}

ry_status ry_comm_allgather(const void *send, int64_t nbytes, void *recv, const char *what,
                            int64_t step, ry_error *err) {
    if (nbytes > INT32_MAX) return ry_error_at(err, RY_NO_SPAN, "%s: %lld bytes in one call", what, (long long)nbytes);
    arm(what, step);
    int rc = MPI_Allgather(send, (int)nbytes, MPI_BYTE, recv, (int)nbytes, MPI_BYTE, MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Allgather", what, step, err);
}

ry_status ry_comm_allgather_runs(const void *send, int64_t count, int64_t len, int64_t stride,
                                 ry_dtype dtype, void *recv, const char *what, int64_t step,
                                 ry_error *err) {
    if (count > INT32_MAX || len > INT32_MAX || stride > INT32_MAX || count * len > INT32_MAX)
        return ry_error_at(err, RY_NO_SPAN, "%s: %lld runs of %lld elements in one call", what,
                           (long long)count, (long long)len);
    MPI_Datatype runs;
    int rc = MPI_Type_vector((int)count, (int)len, (int)stride, mpi_type(dtype), &runs);
    if (rc != MPI_SUCCESS) return failed(rc, "MPI_Type_vector", what, step, err);
    if ((rc = MPI_Type_commit(&runs)) != MPI_SUCCESS) {
        MPI_Type_free(&runs);
        return failed(rc, "MPI_Type_commit", what, step, err);
    }
    arm(what, step);
    rc = MPI_Allgather(send, 1, runs, recv, (int)(count * len), mpi_type(dtype), MPI_COMM_WORLD);
    disarm();
    MPI_Type_free(&runs);
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Allgather", what, step, err);
}

ry_status ry_comm_bcast(void *buf, int64_t nbytes, int root, const char *what, int64_t step,
                        ry_error *err) {
    if (nbytes > INT32_MAX) return ry_error_at(err, RY_NO_SPAN, "%s: %lld bytes in one call", what, (long long)nbytes);
    arm(what, step);
    int rc = MPI_Bcast(buf, (int)nbytes, MPI_BYTE, root, MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Bcast", what, step, err);
}

ry_status ry_comm_barrier(const char *what, int64_t step, ry_error *err) {
    arm(what, step);
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Barrier", what, step, err);
}

ry_status ry_comm_reduce_scatter_sum(const void *send, void *recv, const int *counts,
                                     ry_dtype dtype, const char *what, int64_t step,
                                     ry_error *err) {
    arm(what, step);
    int rc = MPI_Reduce_scatter(send, recv, counts, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Reduce_scatter", what, step, err);
}

ry_status ry_comm_alltoallv(const void *send, const int *scounts, const int *sdispls, void *recv,
                            const int *rcounts, const int *rdispls, ry_dtype dtype,
                            const char *what, int64_t step, ry_error *err) {
    arm(what, step);
    int rc = MPI_Alltoallv(send, scounts, sdispls, mpi_type(dtype), recv, rcounts, rdispls,
                           mpi_type(dtype), MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Alltoallv", what, step, err);
}

ry_status ry_comm_allgatherv(void *buf, const int *counts, const int *displs, ry_dtype dtype,
                             const char *what, int64_t step, ry_error *err) {
    arm(what, step);
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs,
                            mpi_type(dtype), MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Allgatherv", what, step, err);
}

ry_status ry_comm_gatherv(const void *send, int count, void *recv, const int *counts,
                          const int *displs, ry_dtype dtype, int root, const char *what,
                          int64_t step, ry_error *err) {
    arm(what, step);
    int rc = MPI_Gatherv(send, count, mpi_type(dtype), recv, counts, displs, mpi_type(dtype), root,
                         MPI_COMM_WORLD);
    disarm();
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Gatherv", what, step, err);
}

ry_status ry_comm_iallreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                 int64_t step, ry_error *err) {
    if (n > INT32_MAX) return ry_error_at(err, RY_NO_SPAN, "%s: %lld elements in one call", what, (long long)n);
    if (nreq == capreq) {
        int cap = capreq ? 2 * capreq : 64;
        MPI_Request *r = ry_realloc(reqs, (size_t)cap * sizeof *r);
        if (!r) return ry_error_at(err, RY_NO_SPAN, "%s: out of memory", what);
        reqs = r;
        capreq = cap;
    }
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD,
                            &reqs[nreq]);
    if (rc != MPI_SUCCESS) return failed(rc, "MPI_Iallreduce", what, step, err);
    nreq++;
    return RY_OK;
}

void ry_comm_progress(void) {
    int done = 0;
    if (nreq > 0) MPI_Testall(nreq, reqs, &done, MPI_STATUSES_IGNORE);
}

ry_status ry_comm_wait_all(const char *what, int64_t step, ry_error *err) {
    arm(what, step);
    int rc = nreq > 0 ? MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    disarm();
    nreq = 0;
    return rc == MPI_SUCCESS ? RY_OK : failed(rc, "MPI_Waitall", what, step, err);
}
