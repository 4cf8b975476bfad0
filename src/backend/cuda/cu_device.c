/*
 * cu_device.c (cuda): the device layer's CUDA device: finding and opening
 * it (the primary context and one stream), its buffers through the
 * caching allocator (cuMemAlloc only when a size class has none waiting),
 * copies each way queued on the stream (then waited for: the host's
 * memory is the caller's again when a copy returns), fills, launching
 * NVRTC-built kernels (cu_cache.c) over n threads, and profiling by
 * events around the kernels queued between prof_begin and prof_end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cu_impl.h"

cu_state ry_cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define BLOCK 256

/* ---- finding devices ---- */

/* the driver initialized and its device count, or 0 with why */
static int count_devices(char *why, size_t n) {
    if (!ry_cu_load(why, n)) return 0;
    CUresult rc = ry_cu_api.Init(0);
    if (rc != CUDA_SUCCESS) {
        snprintf(why, n, "cuInit failed: %s (%d)", ry_cu_errname(rc), (int)rc);
        return 0;
    }
    int count = 0;
    rc = ry_cu_api.DeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) {
        snprintf(why, n, "cuDeviceGetCount failed: %s (%d)", ry_cu_errname(rc), (int)rc);
        return 0;
    }
    if (count == 0) snprintf(why, n, "the driver reports no device");
    return count;
}

int ry_cu_devices(ry_device_info *out, int cap) {
    char why[320];
    int n = count_devices(why, sizeof why);
    int drv = 0;
    if (n > 0) ry_cu_api.DriverGetVersion(&drv);
    for (int i = 0; i < n && i < cap; i++) {
        ry_device_info *d = &out[i];
        memset(d, 0, sizeof *d);
        snprintf(d->target, sizeof d->target, "cuda");
        d->index = i;
        snprintf(d->platform, sizeof d->platform, "CUDA %d.%d", drv / 1000, drv % 1000 / 10);
        CUdevice dev;
        if (ry_cu_api.DeviceGet(&dev, i) != CUDA_SUCCESS) continue;
        ry_cu_api.DeviceGetName(d->name, (int)sizeof d->name - 1, dev);
        size_t mem = 0;
        int sms = 0;
        ry_cu_api.DeviceTotalMem(&mem, dev);
        ry_cu_api.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        d->memory = (int64_t)mem;
        d->compute_units = sms;
    }
    return n;
}

/* ---- buffers ---- */

static void *driver_alloc(size_t n) {
    CUdeviceptr p = 0;
    if (ry_cu_api.CtxSetCurrent(ry_cu.ctx) != CUDA_SUCCESS || ry_cu_api.MemAlloc(&p, n) != CUDA_SUCCESS)
        return NULL;
    return (void *)(uintptr_t)p;
}

static void driver_free(void *h) {
    if (ry_cu_api.CtxSetCurrent(ry_cu.ctx) == CUDA_SUCCESS) ry_cu_api.MemFree((CUdeviceptr)(uintptr_t)h);
}

static void close_device(void) {
    if (!ry_cu.open || ry_cu_api.CtxSetCurrent(ry_cu.ctx) != CUDA_SUCCESS) return;
    ry_cu_api.StreamSynchronize(ry_cu.stream);
    ry_device_heap_trim(&ry_cu.heap);
}

/* opens device index (under ry_cu.lock) */
static ry_status open_locked(int index, ry_error *err) {
    char why[320];
    int n = count_devices(why, sizeof why);
    if (n == 0) return ry_error_at(err, RY_NO_SPAN, "no CUDA device: %s", why);
    if (index < 0 || index >= n)
        return ry_error_at(err, RY_NO_SPAN, "no CUDA device %d: this machine has %d (relayc devices lists them)",
                           index, n);
    cu_api *a = &ry_cu_api;
    ry_cu.index = index;
    CUresult rc = a->DeviceGet(&ry_cu.device, index);
    if (rc != CUDA_SUCCESS) return ry_cu_fail(err, RY_NO_SPAN, "cuDeviceGet", rc);
    a->DeviceGetName(ry_cu.name, (int)sizeof ry_cu.name - 1, ry_cu.device);
    int major = 0, minor = 0;
    a->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ry_cu.device);
    a->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ry_cu.device);
    a->DeviceGetAttribute(&ry_cu.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ry_cu.device);
    ry_cu.arch = major * 10 + minor;
    if ((rc = a->DevicePrimaryCtxRetain(&ry_cu.ctx, ry_cu.device)) != CUDA_SUCCESS)
        return ry_cu_fail(err, RY_NO_SPAN, "cuDevicePrimaryCtxRetain", rc);
    if ((rc = a->CtxSetCurrent(ry_cu.ctx)) != CUDA_SUCCESS)
        return ry_cu_fail(err, RY_NO_SPAN, "cuCtxSetCurrent", rc);
    if ((rc = a->StreamCreate(&ry_cu.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return ry_cu_fail(err, RY_NO_SPAN, "cuStreamCreate", rc);
    if ((rc = a->EventCreate(&ry_cu.prof_start, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
        (rc = a->EventCreate(&ry_cu.prof_end, CU_EVENT_DEFAULT)) != CUDA_SUCCESS)
        return ry_cu_fail(err, RY_NO_SPAN, "cuEventCreate", rc);
    ry_device_heap_init(&ry_cu.heap, (ry_device){RY_DEVICE_CUDA, index}, driver_alloc, driver_free);
    ry_cu.open = true;
    ry_dk_register(&ry_cu_device);
    atexit(close_device);
    return RY_OK;
}

ry_status ry_cu_open(int index, ry_error *err) {
    pthread_mutex_lock(&ry_cu.lock);
    if (ry_cu.open) {
        int have = ry_cu.index;
        pthread_mutex_unlock(&ry_cu.lock);
        if (index < 0 || index == have) return RY_OK;
        return ry_error_at(err, RY_NO_SPAN,
                           "cuda:%d: this process already uses cuda:%d (one CUDA device per process)",
                           index, have);
    }
    if (index < 0) {
        const char *s = getenv("RELAYC_CUDA_DEVICE");
        index = s && *s ? atoi(s) : 0;
    }
    ry_status st = open_locked(index, err);
    pthread_mutex_unlock(&ry_cu.lock);
    return st;
}

/* ---- copies ---- */

static ry_status on_device(const ry_tensor *t, const char *what, ry_error *err) {
    if (t->device.kind == RY_DEVICE_CUDA && t->device.id == ry_cu.index) return RY_OK;
    return ry_error_at(err, RY_NO_SPAN, "%s: the tensor is on %s, not on cuda:%d", what,
                       ry_device_name(t->device), ry_cu.index);
}

static void count(int64_t *bytes, long *copies, size_t n) {
    pthread_mutex_lock(&ry_cu.lock);
    *bytes += (int64_t)n;
    (*copies)++;
    pthread_mutex_unlock(&ry_cu.lock);
}

/* the stream's work done, or the failure named by call */
static ry_status wait_stream(const char *call, CUresult rc, ry_error *err) {
    if (rc != CUDA_SUCCESS) return ry_cu_fail(err, RY_NO_SPAN, call, rc);
    rc = ry_cu_api.StreamSynchronize(ry_cu.stream);
    return rc == CUDA_SUCCESS ? RY_OK : ry_cu_fail(err, RY_NO_SPAN, "cuStreamSynchronize", rc);
}

ry_status ry_cu_upload(ry_tensor *t, const void *src, size_t nbytes, ry_error *err) {
    if (on_device(t, "copy to the device", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.MemcpyHtoDAsync(ry_cu_ptr(t), src, nbytes, ry_cu.stream);
    if (wait_stream("cuMemcpyHtoDAsync", rc, err)) return RY_ERR;
    count(&ry_cu.count.bytes_to_device, &ry_cu.count.copies_to_device, nbytes);
    return RY_OK;
}

ry_status ry_cu_download(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err) {
    if (on_device(t, "copy to the host", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.MemcpyDtoHAsync(dst, ry_cu_ptr(t), nbytes, ry_cu.stream);
    if (wait_stream("cuMemcpyDtoHAsync", rc, err)) return RY_ERR;
    count(&ry_cu.count.bytes_to_host, &ry_cu.count.copies_to_host, nbytes);
    return RY_OK;
}

ry_status ry_cu_copy(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err) {
    if (on_device(dst, "device copy", err) || on_device(src, "device copy", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.MemcpyDtoDAsync(ry_cu_ptr(dst), ry_cu_ptr(src), nbytes, ry_cu.stream);
    return rc == CUDA_SUCCESS ? RY_OK : ry_cu_fail(err, RY_NO_SPAN, "cuMemcpyDtoDAsync", rc);
}

static ry_status zero(ry_tensor *t, size_t at, size_t nbytes, ry_error *err) {
    if (on_device(t, "device fill", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.MemsetD8Async(ry_cu_ptr(t) + at, 0, nbytes, ry_cu.stream);
    return rc == CUDA_SUCCESS ? RY_OK : ry_cu_fail(err, RY_NO_SPAN, "cuMemsetD8Async", rc);
}

static ry_status finish(ry_error *err) {
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.StreamSynchronize(ry_cu.stream);
    return rc == CUDA_SUCCESS ? RY_OK : ry_cu_fail(err, RY_NO_SPAN, "cuStreamSynchronize", rc);
}

void ry_cu_counters(ry_device_counters *out) {
    pthread_mutex_lock(&ry_cu.lock);
    *out = ry_cu.count;
    out->driver_allocs = ry_cu.heap.driver_allocs;
    out->driver_bytes = ry_cu.heap.held;
    pthread_mutex_unlock(&ry_cu.lock);
}

/* ---- launches: one thread per work-item, BLOCK to a block ---- */

#define MAX_ARGS 128

static ry_status launch(ry_dk_kernel *k, size_t global, int nargs, const ry_karg *args, ry_span span,
                        ry_error *err) {
    if (global == 0) return RY_OK;
    if (nargs > MAX_ARGS) return ry_error_at(err, span, "cuda: a kernel of %d arguments (at most %d)", nargs, MAX_ARGS);
    size_t blocks = (global + BLOCK - 1) / BLOCK;
    if (blocks > 0x7fffffffu) return ry_error_at(err, span, "cuda: %zu work-items exceed one grid", global);
    /* cuLaunchKernel takes the address of each argument's value */
    union {
        CUdeviceptr p;
        long long l;
        double d;
        float f;
    } vals[MAX_ARGS];
    void *ptrs[MAX_ARGS];
    for (int i = 0; i < nargs; i++) {
        const ry_karg *a = &args[i];
        switch (a->kind) {
        case RY_KA_BUF: vals[i].p = (CUdeviceptr)(uintptr_t)a->buf; break;
        case RY_KA_I64: vals[i].l = (long long)a->l; break;
        case RY_KA_F64: vals[i].d = a->d; break;
        case RY_KA_F32: vals[i].f = (float)a->d; break;
        }
        ptrs[i] = &vals[i];
    }
    if (ry_cu_current(err)) return RY_ERR;
    CUresult rc = ry_cu_api.LaunchKernel((CUfunction)k, (unsigned)blocks, 1, 1, BLOCK, 1, 1, 0,
                                         ry_cu.stream, ptrs, NULL);
    if (rc != CUDA_SUCCESS) return ry_cu_fail(err, span, "cuLaunchKernel", rc);
    pthread_mutex_lock(&ry_cu.lock);
    ry_cu.count.launches++;
    pthread_mutex_unlock(&ry_cu.lock);
    return RY_OK;
}

/* ---- profiling: the stream's time between two events ---- */

void ry_cu_prof_begin(void) {
    pthread_mutex_lock(&ry_cu.lock);
    ry_cu.profiling = ry_cu_api.CtxSetCurrent(ry_cu.ctx) == CUDA_SUCCESS &&
                      ry_cu_api.EventRecord(ry_cu.prof_start, ry_cu.stream) == CUDA_SUCCESS;
    pthread_mutex_unlock(&ry_cu.lock);
}

int64_t ry_cu_prof_end(void) {
    pthread_mutex_lock(&ry_cu.lock);
    float ms = 0;
    bool ok = ry_cu.profiling && ry_cu_api.CtxSetCurrent(ry_cu.ctx) == CUDA_SUCCESS &&
              ry_cu_api.EventRecord(ry_cu.prof_end, ry_cu.stream) == CUDA_SUCCESS &&
              ry_cu_api.EventSynchronize(ry_cu.prof_end) == CUDA_SUCCESS &&
              ry_cu_api.EventElapsedTime(&ms, ry_cu.prof_start, ry_cu.prof_end) == CUDA_SUCCESS;
    ry_cu.profiling = false;
    pthread_mutex_unlock(&ry_cu.lock);
    return ok ? (int64_t)((double)ms * 1e6) : 0;
}

/* ---- the device layer's interface ---- */

static ry_device dev(void) { return (ry_device){RY_DEVICE_CUDA, ry_cu.index}; }
static bool fp64(void) { return true; }
static ry_allocator *allocator(void) { return &ry_cu.heap.alloc; }

const ry_dk_device ry_cu_device = {
    .kind = RY_DEVICE_CUDA,
    .dialect = &ry_cuda_dialect,
    .dev = dev,
    .fp64 = fp64,
    .build = ry_cu_kernel,
    .launch = launch,
    .upload = ry_cu_upload,
    .download = ry_cu_download,
    .copy = ry_cu_copy,
    .zero = zero,
    .allocator = allocator,
    .gemm = ry_cu_gemm,
    .finish = finish,
};
