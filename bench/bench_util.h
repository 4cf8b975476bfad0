/*
 * bench_util.h: what the benchmark programs under bench/ share: a monotonic
 * clock, medians, GEMM time accounting (cblas_sgemm/dgemm wrapped at link
 * time with -Wl,--wrap, see the Makefile's bench rule), OpenBLAS thread control, random
 * inputs of a model's data shapes, and reading a whole file. Not part of
 * the library: only the programs under bench/ include it.
 */
#ifndef RELAYC_BENCH_UTIL_H
#define RELAYC_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/target.h"
#include "relayc/relayc.h"

/* Seconds on the monotonic clock. */
double bench_now(void);
/* Median of v[0..n) (sorts v in place); 0 for n == 0. */
double bench_median(double *v, int n);

/* Seconds spent inside cblas_sgemm/cblas_dgemm since the program started
 * (summed over the threads that call them), and the number of calls; both
 * only grow. */
double bench_gemm_seconds(void);
int64_t bench_gemm_calls(void);

/* Sets the thread count of relayc's kernels and OpenBLAS (threads.h's
 * ry_set_num_threads; n >= 1). */
void bench_set_threads(int n);

/* A float32 tensor of shape filled from U(0, 1), or an int32 tensor filled
 * with integers in [0, bound); NULL on out-of-memory. */
ry_tensor *bench_rand_f32(ry_rng *r, int ndim, const int64_t *shape);
ry_tensor *bench_rand_i32(ry_rng *r, int ndim, const int64_t *shape, int32_t bound);

/* Random values for the first n parameters of fn (an RY_EXPR_FUNC), from
 * their annotated tensor types: symbolic dimension "n" is batch, "t" is
 * seq; float tensors U(0, 1), integer tensors in [0, bound). out[0..n) get
 * new references. Errors: a parameter that is not an annotated tensor, an
 * unknown symbolic or `?` dimension. */
ry_status bench_random_data(const ry_expr *fn, int n, int64_t batch, int64_t seq, int32_t bound,
                            ry_rng *r, ry_value **out, ry_error *err);
/* Releases v[0..n) and sets them to NULL. */
void bench_release_all(ry_value **v, int n);

/* The whole file at path, NUL-terminated, in *out (free with ry_free), its
 * length in *len. */
ry_status bench_read_file(const char *path, char **out, size_t *len, ry_error *err);

/* Parses "--name VALUE" style options shared by the programs: returns the
 * value after argv[i] when argv[i] equals name (advancing *i), else NULL. */
const char *bench_opt(int argc, char **argv, int *i, const char *name);

/* op's kernel on the CPU target (src/backend/target.h), or NULL. */
static inline ry_kernel_fn cpu_kernel(const ry_op *op) {
    const ry_kernel *k = ry_target_kernel(ry_target_cpu(), op);
    return k ? k->fn : NULL;
}

#endif
