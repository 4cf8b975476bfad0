/*
 * dist.h: data-parallel training across processes (MPI). One call,
 * ry_dist_init, joins the job mpirun started; ry_train_fit then shards
 * each global batch over the ranks, all-reduces the gradient slab and
 * lets rank 0 write the checkpoints (train.h's ry_fit_opts: deterministic,
 * shards, bucket_bytes). Outside mpirun, or in a library built without
 * MPI, there is one rank and everything runs as in one process; a library
 * built without MPI that finds itself started by mpirun with several
 * ranks says so (ry_dist_init's error) rather than train N copies.
 */
#ifndef RELAYC_DIST_H
#define RELAYC_DIST_H

#include <stdbool.h>

#include "relayc/base.h"

RY_BEGIN_API

/* Joins the MPI job when the process was started by mpirun (or another
 * MPI launcher), else does nothing: one rank. May be called again (a
 * no-op). argc/argv may be NULL. Finalizes at exit (atexit). Errors: MPI
 * failed to start; several ranks were started but the library was built
 * without MPI. */
ry_status ry_dist_init(int *argc, char ***argv, ry_error *err);
bool ry_dist_available(void);   /* built with MPI */
int ry_dist_rank(void);         /* 0 outside a job */
int ry_dist_size(void);         /* 1 outside a job */
/* Seconds a rank waits in one collective (the gradient all-reduce, a
 * checkpoint barrier) for the others before it decides one has died or
 * hangs, prints so and exits (status 3), which ends the job; 0: the
 * default, 300. */
void ry_dist_set_timeout(double seconds);
/* Ends the whole job at once (after an error one rank saw alone);
 * exit(code) when there is no job. */
RY_NORETURN void ry_dist_abort(int code);
/* MPI_Finalize (also run at exit); later calls are no-ops. */
void ry_dist_finalize(void);

RY_END_API

#endif
