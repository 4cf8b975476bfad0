/*
 * cl_impl.h (opencl, private): what the OpenCL target's files share: the
 * one device this process opened, with its context, in-order queue and
 * caching allocator; errors from the driver; the kernel cache; and the
 * device layer's interface (device_kernels.h) filled in with them.
 *
 * One device per process: the first ry_target_find("opencl[:N]") opens it
 * (RELAYC_OPENCL_DEVICE=N when no index is given; default the first device
 * of the first platform). Kernel arguments are set and the kernel queued
 * under one lock, since a cl_kernel's arguments are shared state.
 */
#ifndef RELAYC_BACKEND_OPENCL_IMPL_H
#define RELAYC_BACKEND_OPENCL_IMPL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "backend/device_kernels.h"

typedef struct cl_state {
    bool open;
    int index;
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    char name[96], platform_name[96], version[64];
    bool fp64;
    size_t max_group;            /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    ry_device_heap heap;
    ry_device_counters count;    /* under lock */
    bool profiling;              /* kernels record events (ry_cl_prof_begin) */
    cl_event *events;
    int nevents, capevents;
    pthread_mutex_t lock;        /* kernel arguments + enqueue; counters */
} cl_state;

extern cl_state ry_cl;

/* The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *ry_cl_errname(cl_int code);
/* err at span: "opencl:N (DEVICE): CALL failed: NAME (CODE)". */
ry_status ry_cl_fail(ry_error *err, ry_span span, const char *call, cl_int code);

/* The kernel `name` of OpenCL C `source`, built once per process (kept in
 * memory) and cached on disk by a hash of the source and the device
 * (cl_cache.c). NULL with err set on a build failure (the build log in
 * the message). */
cl_kernel ry_cl_kernel(const char *source, const char *name, ry_span span, ry_error *err);

/* A device tensor's buffer. */
static inline cl_mem ry_cl_mem(const ry_tensor *t) { return (cl_mem)ry_devbuf_handle(t); }

/* the device layer's interface on this device (cl_device.c); the GEMM
 * through CLBlast (cl_blas.c) */
extern const ry_dk_device ry_cl_device;
ry_status ry_cl_gemm(ry_kernel_ctx *c, const ry_dk_gemm *g);

/* The OpenCL C spelling of a dtype's element ("float", "uchar" for bool);
 * NULL for float16. */
const char *ry_cl_type(ry_dtype dt);

/* the device's copies and counters (target.h's) */
ry_status ry_cl_upload(ry_tensor *t, const void *src, size_t nbytes, ry_error *err);
ry_status ry_cl_download(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err);
ry_status ry_cl_copy(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err);
void ry_cl_counters(ry_device_counters *out);
int ry_cl_devices(ry_device_info *out, int cap);

/* profiling: the event a kernel launch records (NULL when not profiling),
 * kept for ry_cl_prof_end; under ry_cl.lock */
cl_event *ry_cl_event_slot(void);
void ry_cl_prof_begin(void);
int64_t ry_cl_prof_end(void);

ry_status ry_cl_open(int index, ry_error *err);

#endif
