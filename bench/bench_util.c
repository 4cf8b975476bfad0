/*
 * bench_util.c: the helpers of bench_util.h. GEMM accounting works by
 * linking with -Wl,--wrap=cblas_sgemm,--wrap=cblas_dgemm: the library's
 * calls then land in __wrap_* here, which time the real routine. This
 * measures exactly the BLAS time without touching the library's code.
 */
#include "bench_util.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- GEMM accounting ------------------------------------------------------
 * The trainer may call GEMM from several worker threads at once (one call
 * per tree each), so the totals are kept under a lock; the seconds are
 * then summed over the calling threads. */
static pthread_mutex_t gemm_lock = PTHREAD_MUTEX_INITIALIZER;
static double gemm_seconds;
static int64_t gemm_calls;

static void gemm_account(double s) {
    pthread_mutex_lock(&gemm_lock);
    gemm_seconds += s;
    gemm_calls++;
    pthread_mutex_unlock(&gemm_lock);
}

double bench_gemm_seconds(void) {
    pthread_mutex_lock(&gemm_lock);
    double s = gemm_seconds;
    pthread_mutex_unlock(&gemm_lock);
    return s;
}

int64_t bench_gemm_calls(void) {
    pthread_mutex_lock(&gemm_lock);
    int64_t n = gemm_calls;
    pthread_mutex_unlock(&gemm_lock);
    return n;
}

void __real_cblas_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, float alpha, const float *a,
                        blasint lda, const float *b, blasint ldb, float beta, float *c,
                        blasint ldc);
void __real_cblas_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, double alpha, const double *a,
                        blasint lda, const double *b, blasint ldb, double beta, double *c,
                        blasint ldc);
void __wrap_cblas_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, float alpha, const float *a,
                        blasint lda, const float *b, blasint ldb, float beta, float *c,
                        blasint ldc);
void __wrap_cblas_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, double alpha, const double *a,
                        blasint lda, const double *b, blasint ldb, double beta, double *c,
                        blasint ldc);

void __wrap_cblas_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, float alpha, const float *a,
                        blasint lda, const float *b, blasint ldb, float beta, float *c,
                        blasint ldc) {
    double t0 = bench_now();
    __real_cblas_sgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_account(bench_now() - t0);
}

void __wrap_cblas_dgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
                        blasint m, blasint n, blasint k, double alpha, const double *a,
                        blasint lda, const double *b, blasint ldb, double beta, double *c,
                        blasint ldc) {
    double t0 = bench_now();
    __real_cblas_dgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    gemm_account(bench_now() - t0);
}

/* threads.h's knob: relayc's kernel pool and OpenBLAS together. */
void bench_set_threads(int n) { ry_set_num_threads(n < 1 ? 1 : n); }

ry_tensor *bench_rand_f32(ry_rng *r, int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    if (!t) return NULL;
    float *p = t->data;
    for (int64_t i = 0; i < t->size; i++) p[i] = (float)ry_rng_uniform(r);
    return t;
}

ry_tensor *bench_rand_i32(ry_rng *r, int ndim, const int64_t *shape, int32_t bound) {
    ry_tensor *t = ry_tensor_new(RY_INT32, ndim, shape);
    if (!t) return NULL;
    int32_t *p = t->data;
    for (int64_t i = 0; i < t->size; i++) p[i] = (int32_t)ry_rng_below(r, (uint64_t)bound);
    return t;
}

ry_status bench_random_data(const ry_expr *fn, int n, int64_t batch, int64_t seq, int32_t bound,
                            ry_rng *r, ry_value **out, ry_error *err) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (fn->kind != RY_EXPR_FUNC || n > fn->func.nparams)
        return ry_error_at(err, RY_NO_SPAN, "not a function of %d parameters", n);
    for (int i = 0; i < n; i++) {
        const ry_var *v = fn->func.params[i];
        const ry_type *t = v->annot ? v->annot : v->type;
        if (!t || t->kind != RY_TYPE_TENSOR || t->tensor.ndim > RY_MAX_RANK) {
            bench_release_all(out, i);
            return ry_error_at(err, v->span, "data parameter %%%s is not a tensor", v->name);
        }
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++) {
            const ry_dim *dim = &t->tensor.dims[d];
            if (dim->kind == RY_DIM_CONST) shape[d] = dim->value;
            else if (dim->kind == RY_DIM_SYM && !strcmp(dim->name, "n")) shape[d] = batch;
            else if (dim->kind == RY_DIM_SYM && !strcmp(dim->name, "t")) shape[d] = seq;
            else {
                bench_release_all(out, i);
                return ry_error_at(err, v->span, "data parameter %%%s: unknown dimension %d",
                                   v->name, d);
            }
        }
        ry_tensor *x = ry_dtype_is_float(t->tensor.dtype)
                           ? bench_rand_f32(r, t->tensor.ndim, shape)
                           : bench_rand_i32(r, t->tensor.ndim, shape, bound);
        out[i] = x ? ry_value_tensor(x) : NULL;
        if (!out[i]) {
            bench_release_all(out, i);
            return ry_error_at(err, RY_NO_SPAN, "out of memory");
        }
    }
    return RY_OK;
}

void bench_release_all(ry_value **v, int n) {
    for (int i = 0; i < n; i++) {
        ry_value_release(v[i]);
        v[i] = NULL;
    }
}

ry_status bench_read_file(const char *path, char **out, size_t *len, ry_error *err) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ry_error_at(err, RY_NO_SPAN, "cannot open %s", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = ry_malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = ry_realloc(buf, cap * 2);
        if (!nb) ry_free(buf);
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) return ry_error_at(err, RY_NO_SPAN, "out of memory reading %s", path);
    if (bad) {
        ry_free(buf);
        return ry_error_at(err, RY_NO_SPAN, "cannot read %s", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return RY_OK;
}

const char *bench_opt(int argc, char **argv, int *i, const char *name) {
    if (strcmp(argv[*i], name) || *i + 1 >= argc) return NULL;
    return argv[++*i];
}
