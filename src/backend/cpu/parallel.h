/*
 * parallel.h: the CPU kernels' parallel loop over a small persistent thread
 * pool (parallel.c). The public knob is include/relayc/threads.h.
 *
 * ry_parallel_for(n, grain, fn, ctx) splits [0, n) into contiguous chunks
 * (at most 4 per thread), each at least `grain` long, calls fn(ctx, lo, hi)
 * on each and returns when all are done. The caller and the workers claim
 * chunks as they come free, so a late worker (asleep, or descheduled on a
 * busy machine) never holds the caller up. It runs fn(ctx, 0, n) inline,
 * on the calling thread, when there is one thread, when n < 2 * grain,
 * when called from inside another parallel region or from a thread inside
 * ry_threads_serial_begin/end, or when another thread is already using the
 * pool. Which thread runs a chunk varies; the chunks do not (a function of
 * n, grain and the thread count), so a kernel whose chunks write disjoint
 * ranges, each element computed the same way wherever the chunk starts,
 * gives the same bits at any thread count. The kernels keep to that; a
 * reduction does by splitting only across outputs (reduce.c), never
 * inside one output's sum; a float32 GEMM by splitting only C, each block
 * one OpenBLAS call over the whole of K (blas.h); the convolutions by
 * splitting the batch, each image computed the same way whichever thread
 * holds it, the weight gradient summing chunks fixed by the shapes alone
 * (conv.c).
 */
#ifndef RELAYC_CPU_PARALLEL_H
#define RELAYC_CPU_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include "relayc/threads.h"

typedef void (*ry_parallel_fn)(void *ctx, int64_t lo, int64_t hi);

void ry_parallel_for(int64_t n, int64_t grain, ry_parallel_fn fn, void *ctx);

/* Whether the calling thread must run serially (inside a parallel region or
 * within ry_threads_serial_begin/end). */
bool ry_parallel_serial(void);

/* A grain, in elements, below which splitting a cheap elementwise loop (one
 * add per element) costs more than it saves: a chunk of it is a microsecond
 * or two of memory traffic, a few times a hand-off to a polling worker
 * (a sleeping one takes tens, but a training step keeps them polling).
 * Loops doing more per element divide it by their cost, a transcendental
 * (exp, log, tanh, sigmoid) counting RY_PAR_MATH_COST adds (fused_exec.c,
 * elemwise_unary.c). Measured at 2 threads, interleaved: the char-LSTM
 * (its cell's maps are 8,192-32,768 elements) ran 950 sequences/s with
 * 1 << 15 and 986 with 1 << 14 (then ~1,050 with both 1 << 14 and 1 << 13
 * after later changes); LeNet ran 1-2% faster with 1 << 14 than 1 << 13,
 * whose smaller chunks made some maps slower than on one thread. */
#define RY_PAR_GRAIN_EW ((int64_t)1 << 14)
#define RY_PAR_MATH_COST 8

/* memcpy(dst, src, n) for buffers that do not overlap, split over the
 * pool when large (a copy is bound by memory, and each core brings its
 * own bandwidth from the shared cache). */
void ry_parallel_copy(void *dst, const void *src, size_t n);

/* Call after every OpenBLAS call. OpenBLAS's AVX-512 kernels may return
 * with the upper halves of the vector registers dirty (no vzeroupper); the
 * SSE code gcc emits for our kernels then runs many times slower (a
 * false dependency on every instruction) until something clears them. */
void ry_cpu_after_blas(void);

#endif
