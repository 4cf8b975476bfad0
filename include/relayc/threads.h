/*
 * threads.h: how many cores relayc's CPU kernels use. One knob sets relayc's
 * own thread pool (src/backend/cpu/parallel.c), which runs im2col, pooling,
 * large elementwise loops and reductions, and the GEMMs: a large float32
 * GEMM is split into blocks of its result, each one single-threaded
 * OpenBLAS call (src/backend/cpu/blas.h). OpenBLAS itself is set to one
 * thread at the first kernel call or ry_set_num_threads, whatever
 * OPENBLAS_NUM_THREADS says (its busy-waiting workers and ours would fight
 * over the cores); RELAYC_NUM_THREADS is the variable to set. The default
 * is 1 thread, or RELAYC_NUM_THREADS when it is set.
 *
 * Kernels called from inside a parallel region, or from a thread that the
 * caller itself runs in parallel (a trainer's workers), must run serially:
 * such a thread brackets its work with ry_threads_serial_begin/end.
 */
#ifndef RELAYC_THREADS_H
#define RELAYC_THREADS_H

#include "relayc/base.h"

RY_BEGIN_API

/* Sets the number of threads (n < 1 means 1; capped at 64) for relayc's
 * kernels, GEMMs included. Call it from the main thread, outside any
 * parallel work: the pool is resized when the next parallel loop starts. */
void ry_set_num_threads(int n);

/* The number set (or taken from RELAYC_NUM_THREADS), >= 1. */
int ry_get_num_threads(void);

/* Within begin/end on the calling thread, every relayc kernel runs serially
 * on that thread (ry_parallel_for calls its function once, inline). Calls
 * nest (a depth counter); end without begin does nothing. Thread-local:
 * other threads are unaffected. */
void ry_threads_serial_begin(void);
void ry_threads_serial_end(void);

RY_END_API

#endif
