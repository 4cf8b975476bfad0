/*
 * cu_driver.c (cuda): the CUDA driver API loaded with dlopen from
 * libcuda.so.1 on first use, so the library links nothing of CUDA and a
 * machine without a driver runs everything but this target. The names
 * dlsym looks up are the versioned ones cuda.h maps its calls to
 * (cuMemAlloc_v2, ...). Driver errors become ry_errors naming the call
 * and the device, as the OpenCL ones do.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cu_impl.h"

cu_api ry_cu_api;

static struct {
    bool tried, ok;
    char why[300];
} loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static bool find(void *h, void **slot, const char *name, const char *alt) {
    *slot = dlsym(h, name);
    if (!*slot && alt) *slot = dlsym(h, alt);
    if (!*slot) snprintf(loaded.why, sizeof loaded.why, "the CUDA driver lacks %s", name);
    return *slot != NULL;
}

static bool load_symbols(void *h) {
    cu_api *a = &ry_cu_api;
#define F(field, name, alt) find(h, (void **)&a->field, name, alt)
    return F(Init, "cuInit", NULL) && F(DriverGetVersion, "cuDriverGetVersion", NULL) &&
           F(DeviceGetCount, "cuDeviceGetCount", NULL) && F(DeviceGet, "cuDeviceGet", NULL) &&
           F(DeviceGetName, "cuDeviceGetName", NULL) &&
           F(DeviceTotalMem, "cuDeviceTotalMem_v2", NULL) &&
           F(DeviceGetAttribute, "cuDeviceGetAttribute", NULL) &&
           F(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL) &&
           F(CtxSetCurrent, "cuCtxSetCurrent", NULL) && F(StreamCreate, "cuStreamCreate", NULL) &&
           F(StreamSynchronize, "cuStreamSynchronize", NULL) &&
           F(MemAlloc, "cuMemAlloc_v2", NULL) && F(MemFree, "cuMemFree_v2", NULL) &&
           F(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL) &&
           F(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL) &&
           F(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL) &&
           F(MemsetD8Async, "cuMemsetD8Async", NULL) && F(ModuleLoadData, "cuModuleLoadData", NULL) &&
           F(ModuleGetFunction, "cuModuleGetFunction", NULL) && F(ModuleUnload, "cuModuleUnload", NULL) &&
           F(LaunchKernel, "cuLaunchKernel", NULL) && F(GetErrorName, "cuGetErrorName", NULL) &&
           F(EventCreate, "cuEventCreate", NULL) && F(EventRecord, "cuEventRecord", NULL) &&
           F(EventSynchronize, "cuEventSynchronize", NULL) &&
           /* cuda.h 12.8+ maps cuEventElapsedTime to _v2; older drivers have the first */
           F(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
#undef F
}

bool ry_cu_load(char *why, size_t n) {
    pthread_mutex_lock(&load_lock);
    if (!loaded.tried) {
        loaded.tried = true;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(loaded.why, sizeof loaded.why, "the CUDA driver is not installed (%s)",
                     e ? e : "libcuda.so.1 not found");
        } else {
            loaded.ok = load_symbols(h);
        }
    }
    pthread_mutex_unlock(&load_lock);
    if (!loaded.ok && why) snprintf(why, n, "%s", loaded.why);
    return loaded.ok;
}

/* the driver's own names first; these where it cannot say (the toolkit's
 * stub library answers every call with CUDA_ERROR_STUB_LIBRARY) */
static const char *known_name(CUresult rc) {
    switch (rc) {
#define E(x) case x: return #x;
    E(CUDA_ERROR_INVALID_VALUE) E(CUDA_ERROR_OUT_OF_MEMORY) E(CUDA_ERROR_NOT_INITIALIZED)
    E(CUDA_ERROR_DEINITIALIZED) E(CUDA_ERROR_STUB_LIBRARY) E(CUDA_ERROR_NO_DEVICE)
    E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) E(CUDA_ERROR_INVALID_DEVICE) E(CUDA_ERROR_INVALID_IMAGE)
    E(CUDA_ERROR_INVALID_CONTEXT) E(CUDA_ERROR_INVALID_PTX) E(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    E(CUDA_ERROR_NOT_FOUND) E(CUDA_ERROR_ILLEGAL_ADDRESS) E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    E(CUDA_ERROR_LAUNCH_FAILED) E(CUDA_ERROR_INVALID_HANDLE) E(CUDA_ERROR_UNKNOWN)
#undef E
    default: return "unknown CUDA error";
    }
}

const char *ry_cu_errname(CUresult rc) {
    const char *s = NULL;
    if (ry_cu_api.GetErrorName && ry_cu_api.GetErrorName(rc, &s) == CUDA_SUCCESS && s) return s;
    return known_name(rc);
}

ry_status ry_cu_fail(ry_error *err, ry_span span, const char *call, CUresult rc) {
    return ry_error_at(err, span, "cuda:%d (%s): %s failed: %s (%d)", ry_cu.index,
                       ry_cu.open ? ry_cu.name : "not opened", call, ry_cu_errname(rc), (int)rc);
}

ry_status ry_cu_current(ry_error *err) {
    CUresult rc = ry_cu_api.CtxSetCurrent(ry_cu.ctx);
    return rc == CUDA_SUCCESS ? RY_OK : ry_cu_fail(err, RY_NO_SPAN, "cuCtxSetCurrent", rc);
}
