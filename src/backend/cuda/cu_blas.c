/*
 * cu_blas.c (cuda): the device layer's GEMM (device_kernels.h's
 * ry_dk_gemm, row-major) through cuBLAS, loaded with dlopen on the first
 * GEMM (libcublas.so.13, else .12) and bound to the device's stream.
 * cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
 * C^T = op(B)^T op(A)^T, so the operands are passed swapped with their
 * own transposes and leading dimensions, and nothing is copied.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "backend/cuda/cu_impl.h"

/* cuBLAS's types as its API spells them (cublas_api.h), without its
 * headers: a handle, a status, an operation (0: N, 1: T) */
typedef void *blas_handle;
typedef int blas_status;
enum { OP_N = 0, OP_T = 1 };

static struct {
    bool tried, ok;
    char why[300];
    blas_handle h;
    blas_status (*create)(blas_handle *);
    blas_status (*set_stream)(blas_handle, CUstream);
    blas_status (*sgemm)(blas_handle, int, int, int, int, int, const float *, const float *, int,
                         const float *, int, const float *, float *, int);
    blas_status (*dgemm)(blas_handle, int, int, int, int, int, const double *, const double *, int,
                         const double *, int, const double *, double *, int);
} blas;
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

/* cuBLAS loaded and its handle made on the device's stream, or false with why */
static bool ready(void) {
    pthread_mutex_lock(&blas_lock);
    if (!blas.tried) {
        blas.tried = true;
        void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            snprintf(blas.why, sizeof blas.why, "cuBLAS is not installed (%s)", dlerror());
        } else {
            *(void **)&blas.create = dlsym(lib, "cublasCreate_v2");
            *(void **)&blas.set_stream = dlsym(lib, "cublasSetStream_v2");
            *(void **)&blas.sgemm = dlsym(lib, "cublasSgemm_v2");
            *(void **)&blas.dgemm = dlsym(lib, "cublasDgemm_v2");
            blas_status st = -1;
            ry_error e = {0};
            if (!blas.create || !blas.set_stream || !blas.sgemm || !blas.dgemm)
                snprintf(blas.why, sizeof blas.why, "libcublas lacks a function relayc needs");
            else if (ry_cu_current(&e) != RY_OK)
                snprintf(blas.why, sizeof blas.why, "%s", e.msg);
            else if ((st = blas.create(&blas.h)) != 0)
                snprintf(blas.why, sizeof blas.why, "cublasCreate_v2 failed (status %d)", st);
            else if ((st = blas.set_stream(blas.h, ry_cu.stream)) != 0)
                snprintf(blas.why, sizeof blas.why, "cublasSetStream_v2 failed (status %d)", st);
            else
                blas.ok = true;
        }
    }
    pthread_mutex_unlock(&blas_lock);
    return blas.ok;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

ry_status ry_cu_gemm(ry_kernel_ctx *c, const ry_dk_gemm *g) {
    if (!ready())
        return ry_error_at(c->err, c->span, "cuda:%d (%s): %s: %s", ry_cu.index, ry_cu.name, c->op->name,
                           blas.why);
    if (!fits_int(g->m) || !fits_int(g->n) || !fits_int(g->k) || !fits_int(g->lda) ||
        !fits_int(g->ldb) || !fits_int(g->ldc))
        return ry_error_at(c->err, c->span, "%s: a GEMM dimension beyond 2^31 on cuda", c->op->name);
    size_t es = ry_dtype_size(g->c->dtype);
    CUdeviceptr A = ry_cu_ptr(g->a) + (size_t)g->aoff * es, B = ry_cu_ptr(g->b) + (size_t)g->boff * es,
                C = ry_cu_ptr(g->c) + (size_t)g->coff * es;
    int opa = g->ta ? OP_T : OP_N, opb = g->tb ? OP_T : OP_N;
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    ry_error e = {0};
    if (ry_cu_current(&e)) {
        *c->err = e;
        return RY_ERR;
    }
    blas_status st;
    if (g->c->dtype == RY_FLOAT32) {
        const float one = 1, zero = 0, *beta = g->acc ? &one : &zero;
        st = blas.sgemm(blas.h, opb, opa, n, m, k, &one, (const float *)(uintptr_t)B, (int)g->ldb,
                        (const float *)(uintptr_t)A, (int)g->lda, beta, (float *)(uintptr_t)C, (int)g->ldc);
    } else {
        const double one = 1, zero = 0, *beta = g->acc ? &one : &zero;
        st = blas.dgemm(blas.h, opb, opa, n, m, k, &one, (const double *)(uintptr_t)B, (int)g->ldb,
                        (const double *)(uintptr_t)A, (int)g->lda, beta, (double *)(uintptr_t)C, (int)g->ldc);
    }
    if (st != 0)
        return ry_error_at(c->err, c->span, "cuda:%d (%s): %s: cublas%cgemm_v2 failed (status %d)",
                           ry_cu.index, ry_cu.name, c->op->name, g->c->dtype == RY_FLOAT32 ? 'S' : 'D', st);
    pthread_mutex_lock(&ry_cu.lock);
    ry_cu.count.launches++;
    pthread_mutex_unlock(&ry_cu.lock);
    return RY_OK;
}
