/*
 * cu_nvrtc.c (cuda): compiling generated CUDA C with NVRTC, loaded with
 * dlopen on first use (so the library needs no CUDA library at link or
 * load time). NVRTC needs no GPU or driver: the CPU-side tests build every
 * kernel the generator writes with it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "backend/cuda/cu_nvrtc.h"

static struct {
    bool tried, ok;
    char why[256];
    const char *(*error_string)(nvrtcResult);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    nvrtcResult (*version)(int *, int *);
} nv;
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

static bool load(void) {
    pthread_mutex_lock(&nv_lock);
    if (!nv.tried) {
        nv.tried = true;
        void *h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!h) h = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(nv.why, sizeof nv.why, "NVRTC is not installed (%s)", dlerror());
        } else {
#define SYM(field, name) *(void **)&nv.field = dlsym(h, name)
            SYM(error_string, "nvrtcGetErrorString");
            SYM(create, "nvrtcCreateProgram");
            SYM(compile, "nvrtcCompileProgram");
            SYM(ptx_size, "nvrtcGetPTXSize");
            SYM(ptx, "nvrtcGetPTX");
            SYM(log_size, "nvrtcGetProgramLogSize");
            SYM(log, "nvrtcGetProgramLog");
            SYM(destroy, "nvrtcDestroyProgram");
            SYM(version, "nvrtcVersion");
#undef SYM
            nv.ok = nv.error_string && nv.create && nv.compile && nv.ptx_size && nv.ptx &&
                    nv.log_size && nv.log && nv.destroy && nv.version;
            if (!nv.ok) snprintf(nv.why, sizeof nv.why, "libnvrtc lacks a function relayc needs");
        }
    }
    pthread_mutex_unlock(&nv_lock);
    return nv.ok;
}

ry_status ry_nvrtc_ptx(const char *source, int arch, char **ptx, size_t *len, ry_error *err) {
    *ptx = NULL;
    if (!load()) return ry_error_at(err, RY_NO_SPAN, "cuda: %s", nv.why);
    nvrtcProgram p;
    nvrtcResult r = nv.create(&p, source, "relayc_kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return ry_error_at(err, RY_NO_SPAN, "cuda: nvrtcCreateProgram failed: %s", nv.error_string(r));
    char gpu[64];
    snprintf(gpu, sizeof gpu, "--gpu-architecture=compute_%d", arch);
    /* no fused multiply-adds (the CPU's rounding), IEEE division and sqrt */
    const char *opts[] = {gpu, "--fmad=false", "--prec-div=true", "--prec-sqrt=true", "-default-device"};
    r = nv.compile(p, (int)(sizeof opts / sizeof *opts), opts);
    ry_status st = RY_OK;
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        char log[4096] = "";
        if (nv.log_size(p, &n) == NVRTC_SUCCESS && n > 0 && n < sizeof log) nv.log(p, log);
        st = ry_error_at(err, RY_NO_SPAN, "cuda: a generated kernel does not compile: %s\n%s",
                         nv.error_string(r), log);
    } else if (nv.ptx_size(p, len) != NVRTC_SUCCESS || !(*ptx = malloc(*len)) || nv.ptx(p, *ptx) != NVRTC_SUCCESS) {
        free(*ptx);
        *ptx = NULL;
        st = ry_error_at(err, RY_NO_SPAN, "cuda: reading the PTX failed");
    }
    nv.destroy(&p);
    return st;
}

int ry_nvrtc_version(void) {
    int major = 0, minor = 0;
    if (!load() || nv.version(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
}
