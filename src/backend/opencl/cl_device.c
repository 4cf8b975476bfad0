/*
 * cl_device.c (opencl): the device layer's OpenCL device: finding and
 * opening it, its buffers (through the caching allocator), copies each
 * way and fills, launching kernels (the device_kernels.h interface, with
 * cl_cache.c's builds and cl_blas.c's GEMM), and the driver's errors as
 * located ry_errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opencl/cl_impl.h"

cl_state ry_cl = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *ry_cl_errname(cl_int code) {
    switch (code) {
#define E(x) case x: return #x;
    E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
    E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_OPERATION)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PLATFORM)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
    }
}

ry_status ry_cl_fail(ry_error *err, ry_span span, const char *call, cl_int code) {
    return ry_error_at(err, span, "opencl:%d (%s): %s failed: %s (%d)", ry_cl.index,
                       ry_cl.open ? ry_cl.name : "not opened", call, ry_cl_errname(code), (int)code);
}

const char *ry_cl_type(ry_dtype dt) {
    switch (dt) {
    case RY_FLOAT32: return "float";
    case RY_FLOAT64: return "double";
    case RY_INT8: return "char";
    case RY_INT16: return "short";
    case RY_UINT16: return "ushort";
    case RY_INT32: return "int";
    case RY_INT64: return "long";
    case RY_UINT8:
    case RY_BOOL: return "uchar";
    default: return NULL;
    }
}

/* ---- finding devices: every device of every platform, numbered in order ---- */

typedef struct found {
    cl_platform_id platform;
    cl_device_id device;
} found;

static int enumerate(found *out, int cap) {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return 0;
    cl_platform_id ps[16];
    if (np > 16) np = 16;
    if (clGetPlatformIDs(np, ps, NULL) != CL_SUCCESS) return 0;
    int n = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS) continue;
        cl_device_id ds[32];
        if (nd > 32) nd = 32;
        if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ds, NULL) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd; d++, n++)
            if (n < cap) out[n] = (found){ps[p], ds[d]};
    }
    return n;
}

int ry_cl_devices(ry_device_info *out, int cap) {
    found fs[64];
    int n = enumerate(fs, 64);
    for (int i = 0; i < n && i < cap && i < 64; i++) {
        ry_device_info *d = &out[i];
        memset(d, 0, sizeof *d);
        snprintf(d->target, sizeof d->target, "opencl");
        d->index = i;
        clGetPlatformInfo(fs[i].platform, CL_PLATFORM_NAME, sizeof d->platform - 1, d->platform, NULL);
        clGetDeviceInfo(fs[i].device, CL_DEVICE_NAME, sizeof d->name - 1, d->name, NULL);
        cl_ulong mem = 0;
        cl_uint cu = 0;
        clGetDeviceInfo(fs[i].device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
        clGetDeviceInfo(fs[i].device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
        d->memory = (int64_t)mem;
        d->compute_units = (int)cu;
    }
    return n;
}

/* ---- buffers ---- */

static void *driver_alloc(size_t n) {
    cl_int rc;
    cl_mem m = clCreateBuffer(ry_cl.ctx, CL_MEM_READ_WRITE, n, NULL, &rc);
    return rc == CL_SUCCESS ? m : NULL;
}

static void driver_free(void *h) { clReleaseMemObject((cl_mem)h); }

static void close_device(void) {
    if (!ry_cl.open) return;
    clFinish(ry_cl.queue);
    ry_device_heap_trim(&ry_cl.heap);
}

ry_status ry_cl_open(int index, ry_error *err) {
    pthread_mutex_lock(&ry_cl.lock);
    if (ry_cl.open) {
        int have = ry_cl.index;
        pthread_mutex_unlock(&ry_cl.lock);
        if (index < 0 || index == have) return RY_OK;
        return ry_error_at(err, RY_NO_SPAN,
                           "opencl:%d: this process already uses opencl:%d (one OpenCL device per process)",
                           index, have);
    }
    if (index < 0) {
        const char *s = getenv("RELAYC_OPENCL_DEVICE");
        index = s && *s ? atoi(s) : 0;
    }
    found fs[64];
    int n = enumerate(fs, 64);
    ry_status st = RY_OK;
    if (n == 0) {
        st = ry_error_at(err, RY_NO_SPAN,
                         "no OpenCL device: no platform or device found (is an ICD such as PoCL installed?)");
    } else if (index < 0 || index >= n || index >= 64) {
        st = ry_error_at(err, RY_NO_SPAN, "no OpenCL device %d: this machine has %d (relayc devices lists them)",
                         index, n);
    } else {
        ry_cl.index = index;
        ry_cl.platform = fs[index].platform;
        ry_cl.device = fs[index].device;
        clGetDeviceInfo(ry_cl.device, CL_DEVICE_NAME, sizeof ry_cl.name - 1, ry_cl.name, NULL);
        clGetPlatformInfo(ry_cl.platform, CL_PLATFORM_NAME, sizeof ry_cl.platform_name - 1,
                          ry_cl.platform_name, NULL);
        clGetDeviceInfo(ry_cl.device, CL_DRIVER_VERSION, sizeof ry_cl.version - 1, ry_cl.version, NULL);
        cl_device_fp_config fp = 0;
        clGetDeviceInfo(ry_cl.device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL);
        ry_cl.fp64 = fp != 0;
        clGetDeviceInfo(ry_cl.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof ry_cl.max_group,
                        &ry_cl.max_group, NULL);
        cl_int rc;
        ry_cl.ctx = clCreateContext(NULL, 1, &ry_cl.device, NULL, NULL, &rc);
        if (rc != CL_SUCCESS) {
            st = ry_cl_fail(err, RY_NO_SPAN, "clCreateContext", rc);
        } else {
            ry_cl.queue = clCreateCommandQueue(ry_cl.ctx, ry_cl.device, CL_QUEUE_PROFILING_ENABLE, &rc);
            if (rc != CL_SUCCESS) {
                st = ry_cl_fail(err, RY_NO_SPAN, "clCreateCommandQueue", rc);
                clReleaseContext(ry_cl.ctx);
            }
        }
        if (st == RY_OK) {
            ry_device_heap_init(&ry_cl.heap, (ry_device){RY_DEVICE_OPENCL, index}, driver_alloc,
                                driver_free);
            ry_cl.open = true;
            ry_dk_register(&ry_cl_device);
            atexit(close_device);
        }
    }
    pthread_mutex_unlock(&ry_cl.lock);
    return st;
}

/* ---- copies ---- */

static ry_status on_device(const ry_tensor *t, const char *what, ry_error *err) {
    if (t->device.kind == RY_DEVICE_OPENCL && t->device.id == ry_cl.index) return RY_OK;
    return ry_error_at(err, RY_NO_SPAN, "%s: the tensor is on %s, not on opencl:%d", what,
                       ry_device_name(t->device), ry_cl.index);
}

static void count(int64_t *bytes, long *copies, size_t n) {
    pthread_mutex_lock(&ry_cl.lock);
    *bytes += (int64_t)n;
    (*copies)++;
    pthread_mutex_unlock(&ry_cl.lock);
}

ry_status ry_cl_upload(ry_tensor *t, const void *src, size_t nbytes, ry_error *err) {
    if (on_device(t, "copy to the device", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    cl_int rc = clEnqueueWriteBuffer(ry_cl.queue, ry_cl_mem(t), CL_TRUE, t->offset, nbytes, src, 0,
                                     NULL, NULL);
    if (rc != CL_SUCCESS) return ry_cl_fail(err, RY_NO_SPAN, "clEnqueueWriteBuffer", rc);
    count(&ry_cl.count.bytes_to_device, &ry_cl.count.copies_to_device, nbytes);
    return RY_OK;
}

ry_status ry_cl_download(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err) {
    if (on_device(t, "copy to the host", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    cl_int rc = clEnqueueReadBuffer(ry_cl.queue, ry_cl_mem(t), CL_TRUE, t->offset, nbytes, dst, 0,
                                    NULL, NULL);
    if (rc != CL_SUCCESS) return ry_cl_fail(err, RY_NO_SPAN, "clEnqueueReadBuffer", rc);
    count(&ry_cl.count.bytes_to_host, &ry_cl.count.copies_to_host, nbytes);
    return RY_OK;
}

ry_status ry_cl_copy(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err) {
    if (on_device(dst, "device copy", err) || on_device(src, "device copy", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    cl_int rc = clEnqueueCopyBuffer(ry_cl.queue, ry_cl_mem(src), ry_cl_mem(dst), src->offset,
                                    dst->offset, nbytes, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return ry_cl_fail(err, RY_NO_SPAN, "clEnqueueCopyBuffer", rc);
    return RY_OK;
}

void ry_cl_counters(ry_device_counters *out) {
    pthread_mutex_lock(&ry_cl.lock);
    *out = ry_cl.count;
    out->driver_allocs = ry_cl.heap.driver_allocs;
    out->driver_bytes = ry_cl.heap.held;
    pthread_mutex_unlock(&ry_cl.lock);
}

/* ---- kernels ---- */

static ry_status ry_cl_launch(ry_dk_kernel *kernel, size_t global, int nargs, const ry_karg *args,
                       ry_span span, ry_error *err) {
    if (global == 0) return RY_OK;
    cl_kernel k = (cl_kernel)kernel;
    size_t group = ry_cl.max_group < 256 ? ry_cl.max_group : 256;
    size_t padded = (global + group - 1) / group * group;
    pthread_mutex_lock(&ry_cl.lock);
    cl_int rc = CL_SUCCESS;
    const char *call = "clSetKernelArg";
    for (int i = 0; i < nargs && rc == CL_SUCCESS; i++) {
        const ry_karg *a = &args[i];
        float f = (float)a->d;
        cl_long l = (cl_long)a->l;
        cl_mem m = (cl_mem)a->buf;
        switch (a->kind) {
        case RY_KA_BUF: rc = clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), &m); break;
        case RY_KA_I64: rc = clSetKernelArg(k, (cl_uint)i, sizeof(cl_long), &l); break;
        case RY_KA_F64: rc = clSetKernelArg(k, (cl_uint)i, sizeof(double), &a->d); break;
        case RY_KA_F32: rc = clSetKernelArg(k, (cl_uint)i, sizeof(float), &f); break;
        }
    }
    if (rc == CL_SUCCESS) {
        call = "clEnqueueNDRangeKernel";
        rc = clEnqueueNDRangeKernel(ry_cl.queue, k, 1, NULL, &padded, &group, 0, NULL, ry_cl_event_slot());
        if (rc == CL_SUCCESS) ry_cl.count.launches++;
    }
    pthread_mutex_unlock(&ry_cl.lock);
    return rc == CL_SUCCESS ? RY_OK : ry_cl_fail(err, span, call, rc);
}

static ry_status zero(ry_tensor *t, size_t at, size_t nbytes, ry_error *err) {
    if (on_device(t, "device fill", err)) return RY_ERR;
    if (nbytes == 0) return RY_OK;
    /* the widest pattern that divides both the offset and the length */
    size_t off = t->offset + at, pat = 8;
    while (pat > 1 && (off % pat || nbytes % pat)) pat /= 2;
    uint64_t z = 0;
    cl_int rc = clEnqueueFillBuffer(ry_cl.queue, ry_cl_mem(t), &z, pat, off, nbytes, 0, NULL, NULL);
    return rc == CL_SUCCESS ? RY_OK : ry_cl_fail(err, RY_NO_SPAN, "clEnqueueFillBuffer", rc);
}

static ry_status finish(ry_error *err) {
    cl_int rc = clFinish(ry_cl.queue);
    return rc == CL_SUCCESS ? RY_OK : ry_cl_fail(err, RY_NO_SPAN, "clFinish", rc);
}

static ry_dk_kernel *build(const char *source, const char *name, ry_span span, ry_error *err) {
    return (ry_dk_kernel *)ry_cl_kernel(source, name, span, err);
}

extern const ry_dialect ry_cl_dialect;
static ry_device dev(void) { return (ry_device){RY_DEVICE_OPENCL, ry_cl.index}; }
static bool fp64(void) { return ry_cl.fp64; }
static ry_allocator *allocator(void) { return &ry_cl.heap.alloc; }

const ry_dk_device ry_cl_device = {
    .kind = RY_DEVICE_OPENCL,
    .dialect = &ry_cl_dialect,
    .dev = dev,
    .fp64 = fp64,
    .build = build,
    .launch = ry_cl_launch,
    .upload = ry_cl_upload,
    .download = ry_cl_download,
    .copy = ry_cl_copy,
    .zero = zero,
    .allocator = allocator,
    .gemm = ry_cl_gemm,
    .finish = finish,
};

/* ---- profiling: every launch between begin and end records an event ---- */

cl_event *ry_cl_event_slot(void) {
    if (!ry_cl.profiling) return NULL;
    if (ry_cl.nevents == ry_cl.capevents) {
        int cap = ry_cl.capevents ? ry_cl.capevents * 2 : 64;
        cl_event *e = realloc(ry_cl.events, sizeof *e * (size_t)cap);
        if (!e) return NULL;
        ry_cl.events = e;
        ry_cl.capevents = cap;
    }
    ry_cl.events[ry_cl.nevents] = NULL;
    return &ry_cl.events[ry_cl.nevents++];
}

void ry_cl_prof_begin(void) {
    pthread_mutex_lock(&ry_cl.lock);
    ry_cl.profiling = true;
    ry_cl.nevents = 0;
    pthread_mutex_unlock(&ry_cl.lock);
}

int64_t ry_cl_prof_end(void) {
    pthread_mutex_lock(&ry_cl.lock);
    ry_cl.profiling = false;
    int64_t ns = 0;
    for (int i = 0; i < ry_cl.nevents; i++) {
        cl_event e = ry_cl.events[i];
        if (!e) continue;
        cl_ulong a = 0, b = 0;
        if (clWaitForEvents(1, &e) == CL_SUCCESS &&
            clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) == CL_SUCCESS && b > a)
            ns += (int64_t)(b - a);
        clReleaseEvent(e);
    }
    ry_cl.nevents = 0;
    pthread_mutex_unlock(&ry_cl.lock);
    return ns;
}
