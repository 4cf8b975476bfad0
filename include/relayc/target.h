/*
 * target.h: where a program's kernels run, as a value. A target is the CPU
 * (always built in), an OpenCL device or a CUDA GPU (when built in and
 * present). The compiled engine (vm.h) and the trainer (train.h) are handed
 * one; the IR, the passes and the AD transform never name one. The
 * interpreter (interp.h) is the reference engine and runs on the CPU target
 * only. What a target answers (its kernels and their facts, its memory, its
 * optimizer and gradient kernels) is private to the library
 * (src/backend/target.h); this header names and finds targets.
 */
#ifndef RELAYC_TARGET_H
#define RELAYC_TARGET_H

#include "relayc/tensor.h"

RY_BEGIN_API

typedef struct ry_target ry_target;

/* How a program is run, which is another question than where its kernels
 * run: the compiled engine (vm.h), or the reference interpreter
 * (interp.h; CPU target only). */
typedef enum ry_engine { RY_ENGINE_VM = 0, RY_ENGINE_INTERP } ry_engine;

/* The CPU target (OpenBLAS and relayc's own kernels, on relayc's thread
 * pool: threads.h). Never NULL; lives as long as the process. */
const ry_target *ry_target_cpu(void);

/* The target called name ("cpu", "opencl", "cuda"). Errors: an unknown
 * name (the message lists the known ones), a target this build does not
 * include, or one whose device is not present. On success *out lives as
 * long as the process. */
ry_status ry_target_find(const char *name, const ry_target **out, ry_error *err);

/* Its name, as ry_target_find takes it. */
const char *ry_target_name(const ry_target *t);

/* The device t's tensors live on (RY_CPU for the CPU target). */
ry_device ry_target_device(const ry_target *t);

/* What a device target has done since the process started: the copies
 * each way (the bytes of inputs, results, branch conditions: parameters
 * never cross in a training step), the buffers its caching allocator got
 * from the driver (a warm step gets none) and the bytes it holds, and its
 * generated kernels built from source and loaded from the disk cache
 * (RELAYC_CACHE_DIR). All zero for the CPU. */
typedef struct ry_device_counters {
    int64_t bytes_to_device, bytes_to_host;
    long copies_to_device, copies_to_host;
    long driver_allocs;
    int64_t driver_bytes;
    long kernels_built, kernels_loaded, launches;
} ry_device_counters;
void ry_target_counters(const ry_target *t, ry_device_counters *out);

/* A copy of src on t's device (t's host memory for the CPU target); a new
 * reference. src may be on any device. Errors: out of memory on the
 * device, a driver failure (named). */
ry_status ry_tensor_to(const ry_target *t, const ry_tensor *src, ry_tensor **out, ry_error *err);

/* src's elements into dst's (the same number of bytes), between any
 * devices. */
ry_status ry_tensor_copy_into(ry_tensor *dst, const ry_tensor *src, ry_error *err);

/* One line per device the machine's drivers report, for `relayc devices`. */
typedef struct ry_device_info {
    char target[16];          /* "opencl" */
    int index;                /* as RELAYC_OPENCL_DEVICE and "opencl:N" take it */
    char platform[96];
    char name[96];
    int64_t memory;           /* bytes of global memory */
    int compute_units;
} ry_device_info;
/* Fills up to cap entries and returns how many devices there are (0 when
 * no driver is built in or none is present). */
int ry_devices(ry_device_info *out, int cap);

RY_END_API

#endif
