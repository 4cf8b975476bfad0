/*
 * target.c (cpu): the CPU target as a value: its kernel table, its caching
 * allocator and its training kernels behind target.h's struct.
 */
#include "backend/cpu/cpu_target.h"

const ry_target ry_cpu_target = {
    .name = "cpu",
    .device = RY_DEVICE_CPU,
    .kernel = ry_cpu_kernel,
    .allocator = ry_cpu_result_allocator,
    .pool_new = ry_cpu_pool_new,
    .pool_allocator = ry_cpu_pool_allocator,
    .pool_close = ry_cpu_pool_close,
    .pool_kept = ry_cpu_pool_kept,
    .capacity = ry_cpu_capacity,
    .update = ry_cpu_update,
    .grad_scan = ry_cpu_grad_scan,
    .grad_add = ry_cpu_grad_add,
    .grad_clip = ry_cpu_grad_clip,
    .grad_zero = ry_cpu_grad_zero,
    .grad_scale = ry_cpu_grad_scale,
};
