/*
 * cu_cache.c (cuda): generated kernels, built once. A source is compiled
 * by NVRTC to PTX for the device's compute capability; the PTX is kept on
 * disk (kernel_cache.h, keyed by a hash of the source, the architecture
 * and NVRTC's version) and the module loaded into the context once per
 * process, its entry kept in memory (counted: kernels_built,
 * kernels_loaded). The driver compiles PTX to the GPU's code when the
 * module is loaded (its own cache keeps that).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cu_impl.h"
#include "backend/kernel_cache.h"

typedef struct built {
    uint64_t key;
    char *source, *name;
    CUmodule module;
    CUfunction fn;
    struct built *next;
} built;

static built *kernels;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_of(const char *source) {
    char arch[48];
    snprintf(arch, sizeof arch, "sm_%d nvrtc %d", ry_cu.arch, ry_nvrtc_version());
    return ry_kcache_hash_str(ry_kcache_hash_str(RY_KCACHE_SEED, source), arch);
}

/* the PTX of source, from the disk cache or NVRTC (NUL-terminated) */
static char *ptx_of(const char *source, uint64_t key, ry_span span, ry_error *err) {
    size_t len = 0;
    char *ptx = ry_kcache_load("cuda", key, &len);
    if (ptx && len > 0 && ptx[len - 1] == 0) {
        __atomic_fetch_add(&ry_cu.count.kernels_loaded, 1, __ATOMIC_RELAXED);
        return ptx;
    }
    free(ptx);
    ry_error e = {0};
    if (ry_nvrtc_ptx(source, ry_cu.arch, &ptx, &len, &e)) {
        ry_error_at(err, span, "%s", e.msg); /* at the call */
        return NULL;
    }
    if (len == 0 || ptx[len - 1] != 0) { /* NVRTC's size counts the NUL */
        free(ptx);
        ry_error_at(err, span, "cuda: NVRTC gave PTX without its terminator");
        return NULL;
    }
    __atomic_fetch_add(&ry_cu.count.kernels_built, 1, __ATOMIC_RELAXED);
    ry_kcache_store("cuda", key, ptx, len);
    return ptx;
}

static built *load(const char *source, const char *name, uint64_t key, ry_span span, ry_error *err) {
    char *ptx = ptx_of(source, key, span, err);
    if (!ptx) return NULL;
    if (ry_cu_current(err)) {
        free(ptx);
        return NULL;
    }
    CUmodule module;
    CUfunction fn;
    CUresult rc = ry_cu_api.ModuleLoadData(&module, ptx);
    free(ptx);
    if (rc != CUDA_SUCCESS) {
        ry_cu_fail(err, span, "cuModuleLoadData", rc);
        return NULL;
    }
    rc = ry_cu_api.ModuleGetFunction(&fn, module, name);
    built *b = rc == CUDA_SUCCESS ? calloc(1, sizeof *b) : NULL;
    if (b && (b->source = strdup(source)) && (b->name = strdup(name))) {
        b->key = key;
        b->module = module;
        b->fn = fn;
        return b;
    }
    if (b) free(b->source);
    free(b);
    ry_cu_api.ModuleUnload(module);
    if (rc != CUDA_SUCCESS) ry_cu_fail(err, span, "cuModuleGetFunction", rc);
    else ry_error_at(err, span, "out of memory");
    return NULL;
}

ry_dk_kernel *ry_cu_kernel(const char *source, const char *name, ry_span span, ry_error *err) {
    uint64_t key = key_of(source);
    pthread_mutex_lock(&cache_lock);
    built *b = kernels;
    while (b && !(b->key == key && strcmp(b->name, name) == 0 && strcmp(b->source, source) == 0)) b = b->next;
    if (!b && (b = load(source, name, key, span, err))) {
        b->next = kernels;
        kernels = b;
    }
    pthread_mutex_unlock(&cache_lock);
    return b ? (ry_dk_kernel *)b->fn : NULL;
}
