/*
 * cl_cache.c (opencl): generated kernels, built once. A program's source
 * is hashed (FNV-1a, 64 bits) with the device's name and driver version;
 * the built program is kept in memory for the process and its binary on
 * disk (kernel_cache.h), so a second run builds nothing (counted:
 * kernels_built, kernels_loaded).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_cache.h"
#include "backend/opencl/cl_impl.h"

typedef struct built {
    uint64_t key;
    char *source;
    cl_program prog;
    struct kern {
        char *name;
        cl_kernel k;
        struct kern *next;
    } *kernels;
    struct built *next;
} built;

static built *programs;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The program from the disk cache, or NULL. */
static cl_program load(uint64_t key) {
    size_t len = 0;
    unsigned char *bin = ry_kcache_load("opencl", key, &len);
    if (!bin) return NULL;
    const unsigned char *b = bin;
    cl_int rc, brc;
    cl_program p = clCreateProgramWithBinary(ry_cl.ctx, 1, &ry_cl.device, &len, &b, &brc, &rc);
    if (rc != CL_SUCCESS || brc != CL_SUCCESS) p = NULL;
    else if (clBuildProgram(p, 1, &ry_cl.device, "", NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p);
        p = NULL;
    }
    free(bin);
    return p;
}

static void store(uint64_t key, cl_program p) {
    size_t len = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || len == 0)
        return;
    unsigned char *bin = malloc(len);
    if (!bin) return;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        ry_kcache_store("opencl", key, bin, len);
    free(bin);
}

static cl_program build(const char *source, uint64_t key, ry_span span, ry_error *err) {
    cl_program p = load(key);
    if (p) {
        __atomic_fetch_add(&ry_cl.count.kernels_loaded, 1, __ATOMIC_RELAXED);
        return p;
    }
    cl_int rc;
    size_t len = strlen(source);
    p = clCreateProgramWithSource(ry_cl.ctx, 1, &source, &len, &rc);
    if (rc != CL_SUCCESS) {
        ry_cl_fail(err, span, "clCreateProgramWithSource", rc);
        return NULL;
    }
    rc = clBuildProgram(p, 1, &ry_cl.device, "-cl-std=CL1.2", NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[2048] = "";
        clGetProgramBuildInfo(p, ry_cl.device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        ry_error_at(err, span, "opencl:%d (%s): a generated kernel does not build: %s (%d)\n%s",
                    ry_cl.index, ry_cl.name, ry_cl_errname(rc), (int)rc, log);
        clReleaseProgram(p);
        return NULL;
    }
    __atomic_fetch_add(&ry_cl.count.kernels_built, 1, __ATOMIC_RELAXED);
    store(key, p);
    return p;
}

cl_kernel ry_cl_kernel(const char *source, const char *name, ry_span span, ry_error *err) {
    uint64_t key = ry_kcache_hash_str(RY_KCACHE_SEED, source);
    key = ry_kcache_hash_str(key, ry_cl.name);
    key = ry_kcache_hash_str(key, ry_cl.version);
    pthread_mutex_lock(&cache_lock);
    built *b = programs;
    while (b && !(b->key == key && strcmp(b->source, source) == 0)) b = b->next;
    if (!b) {
        cl_program p = build(source, key, span, err);
        if (!p || !(b = calloc(1, sizeof *b)) || !(b->source = strdup(source))) {
            if (p) {
                clReleaseProgram(p);
                ry_error_at(err, span, "out of memory");
            }
            free(b);
            pthread_mutex_unlock(&cache_lock);
            return NULL;
        }
        b->key = key;
        b->prog = p;
        b->next = programs;
        programs = b;
    }
    struct kern *k = b->kernels;
    while (k && strcmp(k->name, name) != 0) k = k->next;
    if (!k) {
        cl_int rc;
        cl_kernel ck = clCreateKernel(b->prog, name, &rc);
        if (rc != CL_SUCCESS || !(k = calloc(1, sizeof *k)) || !(k->name = strdup(name))) {
            if (rc == CL_SUCCESS) clReleaseKernel(ck);
            free(k);
            pthread_mutex_unlock(&cache_lock);
            ry_cl_fail(err, span, "clCreateKernel", rc);
            return NULL;
        }
        k->k = ck;
        k->next = b->kernels;
        b->kernels = k;
    }
    pthread_mutex_unlock(&cache_lock);
    return k->k;
}
