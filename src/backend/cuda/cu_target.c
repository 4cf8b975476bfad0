/*
 * cu_target.c (cuda): the CUDA target as a value: the device layer's
 * kernel table and training kernels (src/backend/device/, run through
 * cu_device.c's ry_dk_device: NVRTC-built kernels in the CUDA dialect and
 * cuBLAS GEMMs), its memory (the device's caching allocator) and copies.
 * Opening it without a driver or a device is the clean error "no CUDA
 * device: ..."; nothing else of relayc needs CUDA.
 */
#include "backend/cuda/cu_impl.h"

static ry_allocator *allocator(void) { return &ry_cu.heap.alloc; }
static ry_pool *pool_new(void) { return (ry_pool *)&ry_cu.heap; }
static ry_allocator *pool_allocator(ry_pool *p) { return &ry_cu.heap.alloc; } /* NULL too */
static ry_device dev(void) { return (ry_device){RY_DEVICE_CUDA, ry_cu.index}; }
static ry_status sync(ry_error *err) { return ry_dk_sync(&ry_cu_device, err); }

const ry_target ry_cuda_target = {
    .name = "cuda",
    .device = RY_DEVICE_CUDA,
    .open = ry_cu_open,
    .dev = dev,
    .upload = ry_cu_upload,
    .download = ry_cu_download,
    .copy = ry_cu_copy,
    .counters = ry_cu_counters,
    .devices = ry_cu_devices,
    .prof_begin = ry_cu_prof_begin,
    .prof_end = ry_cu_prof_end,
    .allocator = allocator,
    .pool_new = pool_new,
    .pool_allocator = pool_allocator,
    RY_DK_TARGET_SHARED,
    .sync = sync,
};
