/*
 * cl_impl.h (opencl, private): what the OpenCL target's files share: the
 * one device this process opened, with its context, in-order queue and
 * caching allocator; errors from the driver; the kernel cache; and helpers
 * to launch a kernel over n work-items.
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

#include "backend/device_alloc.h"
#include "backend/target.h"

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

/* The kernel "k" of a source template: the dialect's prelude, then tmpl
 * with each @D (a digit below nsubs) replaced by subs[D]. */
cl_kernel ry_cl_template(const char *tmpl, const char *const *subs, int nsubs, ry_span span,
                         ry_error *err);

/* A device tensor's buffer and its element offset. */
static inline cl_mem ry_cl_mem(const ry_tensor *t) { return (cl_mem)ry_devbuf_handle(t); }
static inline cl_long ry_cl_off(const ry_tensor *t) {
    return (cl_long)(t->offset / ry_dtype_size(t->dtype));
}

/* Argument lists for ry_cl_run: buffers (with their element offsets) and
 * 64-bit integers and doubles, in the kernel's parameter order. */
typedef enum { CLA_MEM, CLA_LONG, CLA_DOUBLE, CLA_FLOAT } cl_arg_kind;
typedef struct cl_arg {
    cl_arg_kind kind;
    cl_mem mem;
    cl_long l;
    double d;
} cl_arg;
#define CLA_T(t) (cl_arg){CLA_MEM, ry_cl_mem(t), 0, 0}, (cl_arg){CLA_LONG, NULL, ry_cl_off(t), 0}
#define CLA_L(v) (cl_arg){CLA_LONG, NULL, (cl_long)(v), 0}
#define CLA_D(v) (cl_arg){CLA_DOUBLE, NULL, 0, (double)(v)}
#define CLA_F(v) (cl_arg){CLA_FLOAT, NULL, 0, (double)(v)}

/* Queues k over `global` work-items (rounded up to the group size; the
 * kernel checks its index) with args. global 0 queues nothing. */
ry_status ry_cl_run(cl_kernel k, size_t global, int nargs, const cl_arg *args, ry_span span,
                    ry_error *err);

/* Every tensor of in/out is on this device (a host tensor handed to a
 * device kernel is an error naming the argument, not a crash). */
ry_status ry_cl_check_args(const ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                           ry_tensor *const *out);

/* The OpenCL C spelling of a dtype's element ("float", "uchar" for bool);
 * NULL for float16. */
const char *ry_cl_type(ry_dtype dt);

/* the device's copies and counters (target.h's) */
ry_status ry_cl_upload(ry_tensor *t, const void *src, size_t nbytes, ry_error *err);
ry_status ry_cl_download(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err);
ry_status ry_cl_copy(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err);
void ry_cl_counters(ry_device_counters *out);
int ry_cl_devices(ry_device_info *out, int cap);

/* cl_train.c: the training kernels (target.h) and the failures they kept */
void ry_cl_update(const ry_optim_config *c, const ry_update_args *a);
int64_t ry_cl_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm);
bool ry_cl_grad_add(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n, bool first);
void ry_cl_grad_clip(ry_tensor *t, int64_t lo, int64_t n, double c);
void ry_cl_grad_zero(ry_tensor *t, int64_t lo, int64_t n);
void ry_cl_grad_scale(ry_tensor *t, int64_t lo, int64_t n, double c);
ry_status ry_cl_sync(ry_error *err);

/* profiling: the event a kernel launch records (NULL when not profiling),
 * kept for ry_cl_prof_end; under ry_cl.lock */
cl_event *ry_cl_event_slot(void);
void ry_cl_prof_begin(void);
int64_t ry_cl_prof_end(void);

/* the target's pieces */
const ry_kernel *ry_cl_kernel_of(const ry_op *op);
ry_status ry_cl_open(int index, ry_error *err);

#endif
