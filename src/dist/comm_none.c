/*
 * comm_none.c: comm.h and dist.h in a library built without MPI: one
 * rank, collectives that are copies. Started by mpirun with several
 * ranks, ry_dist_init says the library cannot join (each rank would
 * otherwise train alone and all of them write the same checkpoints).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"

static long launched_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v ? strtol(v, NULL, 10) : 1;
}

ry_status ry_dist_init(int *argc, char ***argv, ry_error *err) {
    (void)argc;
    (void)argv;
    long n = launched_size();
    if (n > 1)
        return ry_error_at(err, RY_NO_SPAN,
                           "started as one of %ld MPI ranks, but relayc was built without MPI "
                           "(install libopenmpi-dev and rebuild: make MPI=1)", n);
    return RY_OK;
}

bool ry_dist_available(void) { return false; }
int ry_dist_rank(void) { return 0; }
int ry_dist_size(void) { return 1; }
bool ry_comm_active(void) { return false; }
void ry_dist_set_timeout(double seconds) { (void)seconds; }
void ry_dist_abort(int code) { exit(code); }
void ry_dist_finalize(void) {}

ry_status ry_comm_allreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                int64_t step, ry_error *err) {
    (void)buf, (void)n, (void)dtype, (void)what, (void)step, (void)err;
    return RY_OK; /* the sum over one rank */
}

ry_status ry_comm_allgather(const void *send, int64_t nbytes, void *recv, const char *what,
                            int64_t step, ry_error *err) {
    (void)what, (void)step, (void)err;
    if (nbytes > 0 && recv != send) memmove(recv, send, (size_t)nbytes);
    return RY_OK;
}

ry_status ry_comm_allgather_runs(const void *send, int64_t count, int64_t len, int64_t stride,
                                 ry_dtype dtype, void *recv, const char *what, int64_t step,
                                 ry_error *err) {
    (void)what, (void)step, (void)err;
    size_t es = dtype == RY_FLOAT64 ? 8 : 4;
    for (int64_t j = 0; j < count; j++)
        memmove((char *)recv + (size_t)(j * len) * es, (const char *)send + (size_t)(j * stride) * es,
                (size_t)len * es);
    return RY_OK;
}

ry_status ry_comm_bcast(void *buf, int64_t nbytes, int root, const char *what, int64_t step,
                        ry_error *err) {
    (void)buf, (void)nbytes, (void)root, (void)what, (void)step, (void)err;
    return RY_OK;
}

ry_status ry_comm_barrier(const char *what, int64_t step, ry_error *err) {
    (void)what, (void)step, (void)err;
    return RY_OK;
}

/* One rank: each collective copies its own block where it goes. */
static size_t esize(ry_dtype dtype) { return dtype == RY_FLOAT64 ? 8 : 4; }

ry_status ry_comm_reduce_scatter_sum(const void *send, void *recv, const int *counts,
                                     ry_dtype dtype, const char *what, int64_t step,
                                     ry_error *err) {
    (void)what, (void)step, (void)err;
    if (counts[0] > 0 && recv != send) memmove(recv, send, (size_t)counts[0] * esize(dtype));
    return RY_OK;
}

ry_status ry_comm_alltoallv(const void *send, const int *scounts, const int *sdispls, void *recv,
                            const int *rcounts, const int *rdispls, ry_dtype dtype,
                            const char *what, int64_t step, ry_error *err) {
    (void)rcounts, (void)what, (void)step, (void)err;
    size_t es = esize(dtype);
    if (scounts[0] > 0)
        memmove((char *)recv + (size_t)rdispls[0] * es, (const char *)send + (size_t)sdispls[0] * es,
                (size_t)scounts[0] * es);
    return RY_OK;
}

ry_status ry_comm_allgatherv(void *buf, const int *counts, const int *displs, ry_dtype dtype,
                             const char *what, int64_t step, ry_error *err) {
    (void)buf, (void)counts, (void)displs, (void)dtype, (void)what, (void)step, (void)err;
    return RY_OK; /* the one block is in place */
}

ry_status ry_comm_gatherv(const void *send, int count, void *recv, const int *counts,
                          const int *displs, ry_dtype dtype, int root, const char *what,
                          int64_t step, ry_error *err) {
    (void)counts, (void)root, (void)what, (void)step, (void)err;
    void *to = (char *)recv + (size_t)displs[0] * esize(dtype);
    if (count > 0 && to != send) memmove(to, send, (size_t)count * esize(dtype));
    return RY_OK;
}

ry_status ry_comm_iallreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                 int64_t step, ry_error *err) {
    (void)buf, (void)n, (void)dtype, (void)what, (void)step, (void)err;
    return RY_OK;
}

void ry_comm_progress(void) {}

ry_status ry_comm_wait_all(const char *what, int64_t step, ry_error *err) {
    (void)what, (void)step, (void)err;
    return RY_OK;
}
