/*
 * comm.h: the one interface between the trainer and MPI. comm_mpi.c
 * implements it over MPI_COMM_WORLD when the library is built with MPI,
 * comm_none.c as one rank otherwise (the Makefile compiles exactly one of
 * them), so nothing else in the library includes mpi.h or needs -lmpi.
 * Every collective is armed with the watchdog of ry_dist_set_timeout:
 * a rank that waits longer than the timeout for the others prints what it
 * waited in and exits, which ends the job instead of hanging it.
 * `what` names the collective in those messages ("the gradient
 * all-reduce"); `step` is the optimizer step it belongs to.
 */
#ifndef RELAYC_DIST_COMM_H
#define RELAYC_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "relayc/dist.h"
#include "relayc/tensor.h"

/* Whether ry_dist_init joined a job of more than one rank. */
bool ry_comm_active(void);

/* buf[0..n) summed over the ranks in place (MPI_Allreduce, the reduction
 * order MPI's); dtype float32 or float64; n <= INT32_MAX. */
ry_status ry_comm_allreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                int64_t step, ry_error *err);
/* recv[r * nbytes ..) := rank r's send[0..nbytes), on every rank. */
ry_status ry_comm_allgather(const void *send, int64_t nbytes, void *recv, const char *what,
                            int64_t step, ry_error *err);
/* The same for count runs of len elements of dtype, run j at send +
 * j * stride elements: rank r's runs land at recv + r * count * len,
 * back to back. */
ry_status ry_comm_allgather_runs(const void *send, int64_t count, int64_t len, int64_t stride,
                                 ry_dtype dtype, void *recv, const char *what, int64_t step,
                                 ry_error *err);
/* buf[0..nbytes) from root to every rank. */
ry_status ry_comm_bcast(void *buf, int64_t nbytes, int root, const char *what, int64_t step,
                        ry_error *err);
/* The collectives of a sharded optimizer (train_zero.c), counts and
 * displacements in elements of dtype, one per rank (int: each below
 * INT32_MAX, the caller's to keep).
 * reduce_scatter: recv[0..counts[me]) := the sum over ranks of their
 * send[displs[me] ..), where send holds rank q's block at displs[q]
 * (MPI_Reduce_scatter: blocks back to back in rank order).
 * alltoallv: rank p's send[sdispls[q] .. + scounts[q]) lands in rank q's
 * recv[rdispls[p] .. + rcounts[p]).
 * allgatherv: buf[displs[q] .. + counts[q]) of rank q to every rank, in
 * place (dtype int64 too: row ids). gatherv: the same onto root only, send being this rank's block
 * (recv is read only on root). */
ry_status ry_comm_reduce_scatter_sum(const void *send, void *recv, const int *counts,
                                     ry_dtype dtype, const char *what, int64_t step,
                                     ry_error *err);
ry_status ry_comm_alltoallv(const void *send, const int *scounts, const int *sdispls, void *recv,
                            const int *rcounts, const int *rdispls, ry_dtype dtype,
                            const char *what, int64_t step, ry_error *err);
ry_status ry_comm_allgatherv(void *buf, const int *counts, const int *displs, ry_dtype dtype,
                             const char *what, int64_t step, ry_error *err);
ry_status ry_comm_gatherv(const void *send, int count, void *recv, const int *counts,
                          const int *displs, ry_dtype dtype, int root, const char *what,
                          int64_t step, ry_error *err);

/* Non-blocking sums of gradient buckets, overlapped with the backward
 * pass (train_overlap.c): iallreduce starts summing buf[0..n) in place
 * (MPI_Iallreduce); progress lets MPI move the started ones on (MPI
 * advances them only inside its calls: MPI_Testall); wait_all finishes
 * every started one, under the watchdog. Every rank must start the same
 * buckets in the same order. */
ry_status ry_comm_iallreduce_sum(void *buf, int64_t n, ry_dtype dtype, const char *what,
                                 int64_t step, ry_error *err);
void ry_comm_progress(void);
ry_status ry_comm_wait_all(const char *what, int64_t step, ry_error *err);

ry_status ry_comm_barrier(const char *what, int64_t step, ry_error *err);

#endif
