/*
 * blas.h: the one door from the CPU kernels to OpenBLAS's GEMM (gemm.c).
 * OpenBLAS itself always runs on one thread (threads.h); ry_cpu_gemm splits
 * a large float32 GEMM into row or column blocks of C over relayc's own
 * pool (parallel.h), so the GEMMs and the kernels around them share the
 * same threads instead of fighting over the cores. The integer GEMMs stay
 * in the kernels that need them (gemm.c, conv.c).
 */
#ifndef RELAYC_CPU_BLAS_H
#define RELAYC_CPU_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "relayc/op.h"

/* C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C, row-major, as
 * cblas_sgemm (f64 false: float data) or cblas_dgemm (f64 true: double
 * data) with leading dimensions lda, ldb, ldc; op(X) is X^T when ta / tb.
 * With beta 0, C need not be initialized (K = 0 then zeroes it). Dimensions
 * must fit an int (callers check). Runs ry_cpu_after_blas() after every
 * OpenBLAS call, on whichever thread made it.
 *
 * Split over the pool (ry_get_num_threads() > 1, not in a serial context)
 * only for float32, and only when the whole and every block go to the same
 * kind of OpenBLAS kernel (RY_BLAS_SMALL_MAX) and each block is worth a
 * hand-off (RY_GEMM_PART_MIN); each C element is then still computed by
 * one OpenBLAS call over the whole of K, and the result is bit for bit the
 * unsplit one (tests/test_kernels_parallel.c checks it). float64 is never
 * split: OpenBLAS's double kernels round the edge tiles of a block
 * differently, so a split would change the bits (and float64 is for
 * gradient checks, not speed). */
void ry_cpu_gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                 int64_t ldc);

/* Call in a kernel before ry_cpu_gemm: makes sure OpenBLAS holds a work
 * buffer for every thread that may call it at once, which it would
 * otherwise try to map without end when memory is short
 * (blas_reserve.c); an error naming c's operator when it cannot. Cheap
 * once done (an atomic read). */
ry_status ry_cpu_blas_ready(ry_kernel_ctx *c);
/* Tests: leave out relayc's own check of the address space, so that a
 * shortage reaches OpenBLAS and only the deadline catches it. */
void ry_cpu_blas_skip_probe(bool skip);
/* A GEMM with at most RY_GEMM_FEW_ROWS rows of C (and op(A) = A) runs as
 * one GEMV per row: measured here for the Tree-LSTM's (M x 300)(300 x 750)
 * and (M x 750)(750 x 300), M GEMVs take 30 / 46 us at M = 2 and 92 / 67
 * at M = 4 where sgemm, packing all of B, takes 100-130 (at M = 8, 150
 * against 160-190). Each row then has the bits of its one-row product,
 * so automatic batching's small groups give the one-by-one results. */
#define RY_GEMM_FEW_ROWS 4

/* OpenBLAS sends GEMMs of at most 100^3 multiply-adds to its small-matrix
 * kernels (sgemm_small_kernel_permit), which round differently from its
 * blocked ones: a split keeps the bits when every block stays above that
 * (blocked kernels throughout) or the whole is at most that (small kernels
 * throughout: each C element one dot product over K, wherever its block
 * starts). A block is worth a hand-off to a polling worker (under a
 * microsecond) from RY_GEMM_PART_MIN multiply-adds (~4 us) on: the
 * gradients of the char-LSTM's 32 x 65 decoder (532K) split in two. */
#define RY_BLAS_SMALL_MAX 1000000.0
#define RY_GEMM_PART_MIN 200000.0

/* How many blocks ry_cpu_gemm would cut this GEMM into now (1: not split);
 * for tests and benchmarks. */
int ry_cpu_gemm_parts(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K);

#endif
