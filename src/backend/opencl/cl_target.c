/*
 * cl_target.c (opencl): the OpenCL target as a value: the device layer's
 * kernel table and training kernels (src/backend/device/, run here
 * through cl_device.c's ry_dk_device), its memory (the device's caching
 * allocator, device_alloc.h) and its copies.
 */
#include "backend/device_kernels.h"
#include "backend/opencl/cl_impl.h"

/* ---- memory: one caching allocator per device, shared by programs ---- */

static ry_allocator *allocator(void) { return &ry_cl.heap.alloc; }
static ry_pool *pool_new(void) { return (ry_pool *)&ry_cl.heap; }
static ry_allocator *pool_allocator(ry_pool *p) { return &ry_cl.heap.alloc; } /* NULL too */
static ry_device dev(void) { return (ry_device){RY_DEVICE_OPENCL, ry_cl.index}; }
static ry_status sync(ry_error *err) { return ry_dk_sync(&ry_cl_device, err); }

const ry_target ry_opencl_target = {
    .name = "opencl",
    .device = RY_DEVICE_OPENCL,
    .open = ry_cl_open,
    .dev = dev,
    .upload = ry_cl_upload,
    .download = ry_cl_download,
    .copy = ry_cl_copy,
    .counters = ry_cl_counters,
    .devices = ry_cl_devices,
    .prof_begin = ry_cl_prof_begin,
    .prof_end = ry_cl_prof_end,
    .allocator = allocator,
    .pool_new = pool_new,
    .pool_allocator = pool_allocator,
    RY_DK_TARGET_SHARED,
    .sync = sync,
};
