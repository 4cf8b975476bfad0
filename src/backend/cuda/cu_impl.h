/*
 * cu_impl.h (cuda, private): what the CUDA target's files share. The
 * toolkit's libraries are loaded with dlopen when first needed (the
 * driver's libcuda.so.1, NVRTC, cuBLAS), so a relayc built with the
 * toolkit runs unchanged on a machine without it or without a driver
 * (the CUDA target then says why it is absent).
 *
 * One device per process, as for OpenCL: the first ry_target_find("cuda
 * [:N]") opens it (RELAYC_CUDA_DEVICE=N when no index is given; default
 * 0) with its primary context, one stream every kernel, copy and GEMM is
 * queued on (in order, as the OpenCL queue), and a caching allocator
 * (device_alloc.h). The context is made current on each calling thread.
 */
#ifndef RELAYC_BACKEND_CUDA_IMPL_H
#define RELAYC_BACKEND_CUDA_IMPL_H

#include <cuda.h>
#include <pthread.h>

#include "backend/cuda/cu_nvrtc.h"
#include "backend/device_kernels.h"

/* ---- the driver API, loaded from libcuda.so.1 (cu_driver.c) ---- */
typedef struct cu_api {
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
} cu_api;

extern cu_api ry_cu_api;
/* Loads the driver once; false with why (a sentence) when it is absent or
 * lacks a function relayc calls. */
bool ry_cu_load(char *why, size_t n);

typedef struct cu_state {
    bool open;
    int index;
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    char name[96];
    int arch;                    /* compute capability, 90 for sm_90 */
    int sms;
    ry_device_heap heap;
    ry_device_counters count;    /* under lock */
    bool profiling;
    CUevent prof_start, prof_end;
    pthread_mutex_t lock;        /* counters, profiling */
} cu_state;

extern cu_state ry_cu;

/* The name of a driver error ("CUDA_ERROR_OUT_OF_MEMORY"). */
const char *ry_cu_errname(CUresult rc);
/* err at span: "cuda:N (DEVICE): CALL failed: NAME (CODE)". */
ry_status ry_cu_fail(ry_error *err, ry_span span, const char *call, CUresult rc);
/* The device's context made current on this thread. */
ry_status ry_cu_current(ry_error *err);
static inline CUdeviceptr ry_cu_ptr(const ry_tensor *t) {
    return (CUdeviceptr)(uintptr_t)ry_devbuf_handle(t) + t->offset;
}

/* cu_device.c */
extern const ry_dk_device ry_cu_device;
ry_status ry_cu_open(int index, ry_error *err);
int ry_cu_devices(ry_device_info *out, int cap);
ry_status ry_cu_upload(ry_tensor *t, const void *src, size_t nbytes, ry_error *err);
ry_status ry_cu_download(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err);
ry_status ry_cu_copy(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err);
void ry_cu_counters(ry_device_counters *out);
void ry_cu_prof_begin(void);
int64_t ry_cu_prof_end(void);
/* cu_cache.c: entry `name` of CUDA C source, NVRTC's PTX kept in memory
 * and on disk, loaded into the context once */
ry_dk_kernel *ry_cu_kernel(const char *source, const char *name, ry_span span, ry_error *err);
/* cu_blas.c */
ry_status ry_cu_gemm(ry_kernel_ctx *c, const ry_dk_gemm *g);

#endif
