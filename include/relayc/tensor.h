/*
 * tensor.h: dtypes, devices, allocators and reference-counted n-dimensional
 * tensors, plus NumPy .npy reading and writing.
 *
 * Tensors are dense and C-contiguous. A tensor either owns its buffer or is a
 * view into another tensor's buffer (used to carve parameters out of one
 * slab). Tensors know nothing of programs.
 */
#ifndef RELAYC_TENSOR_H
#define RELAYC_TENSOR_H

#include "relayc/base.h"

RY_BEGIN_API

typedef enum ry_dtype {
    RY_FLOAT32,
    RY_FLOAT64,
    RY_FLOAT16,
    RY_INT8,
    RY_INT32,
    RY_INT64,
    RY_UINT8,
    RY_BOOL,
    RY_INT16, /* appended: the order above is kept (targets' tables index by it) */
    RY_UINT16,
    RY_DTYPE_COUNT
} ry_dtype;

size_t ry_dtype_size(ry_dtype d);
const char *ry_dtype_name(ry_dtype d);          /* "float32", "bool", ... (TVM's) */
bool ry_dtype_parse(const char *s, size_t n, ry_dtype *out); /* inverse of _name */
bool ry_dtype_is_float(ry_dtype d);             /* float16/32/64 */
bool ry_dtype_is_int(ry_dtype d);               /* int8/16/32/64, uint8/16 */

/* IEEE half <-> single, round to nearest even. */
float ry_f16_to_f32(uint16_t h);
uint16_t ry_f32_to_f16(float f);

/* Where a tensor's buffer lives. A CPU tensor's data points at its
 * elements; a device tensor's data is the device's buffer handle (OpenCL's
 * cl_mem, CUDA's device pointer) and `offset` says where in that buffer
 * the elements start, so views of a device slab need no driver call. Only
 * the device's own kernels and copies (target.h) touch a device buffer. */
typedef enum ry_device_kind { RY_DEVICE_CPU = 0, RY_DEVICE_OPENCL, RY_DEVICE_CUDA } ry_device_kind;
typedef struct ry_device {
    ry_device_kind kind;
    int id;
} ry_device;
#define RY_CPU ((ry_device){RY_DEVICE_CPU, 0})
/* "cpu", "opencl:0", "cuda:1" (a static buffer per thread: copy it before
 * the next call) */
const char *ry_device_name(ry_device d);

/* Where tensor buffers come from. A GPU backend provides its own. */
typedef struct ry_allocator {
    ry_device device;
    void *(*alloc)(struct ry_allocator *self, size_t nbytes); /* NULL on OOM */
    void (*free)(struct ry_allocator *self, void *ptr);
} ry_allocator;
/* The default CPU allocator: 64-byte aligned, through ry_malloc's hook. */
ry_allocator *ry_cpu_allocator(void);
/* How many allocations the calling thread has made so far through
 * ry_malloc, ry_calloc, ry_realloc and the default CPU allocator that the
 * failure hook may fail (not the IR's constants, which it leaves alone;
 * for tests: a repeated step that allocates nothing new keeps it still). */
long ry_alloc_count(void);

#define RY_MAX_RANK 8

typedef struct ry_tensor ry_tensor;
struct ry_tensor {
    int refcount;
    ry_dtype dtype;
    int ndim;
    int64_t shape[RY_MAX_RANK];
    int64_t size;          /* number of elements (1 for a scalar) */
    ry_device device;
    void *data;            /* size * dtype_size bytes, C order (device: the buffer) */
    size_t offset;         /* device tensors: byte offset of the elements in data */
    ry_allocator *alloc;   /* owner of data; NULL for a view */
    ry_tensor *base;       /* the tensor a view keeps alive; NULL if owner */
};

/* New tensor with uninitialized contents; ndim 0 is a scalar. Returns NULL
 * on out-of-memory or ndim > RY_MAX_RANK or a negative dimension, or when
 * the nonzero dimensions need more than PTRDIFF_MAX bytes (numpy's limit,
 * also for empty tensors). The caller owns the one reference. */
ry_tensor *ry_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape);
ry_tensor *ry_tensor_zeros(ry_dtype dtype, int ndim, const int64_t *shape);
ry_tensor *ry_tensor_new_on(ry_allocator *alloc, ry_dtype dtype, int ndim,
                            const int64_t *shape);
/* A scalar (ndim 0) holding v converted to dtype. */
ry_tensor *ry_tensor_scalar(ry_dtype dtype, double v);
/* A view of base's buffer at byte_offset with its own shape; keeps base
 * alive. Returns NULL if it would not fit inside base. */
ry_tensor *ry_tensor_view(ry_tensor *base, size_t byte_offset, ry_dtype dtype,
                          int ndim, const int64_t *shape);
/* Deep copy (new buffer, on t's device). */
ry_tensor *ry_tensor_copy(const ry_tensor *t);
ry_tensor *ry_tensor_retain(ry_tensor *t);   /* returns t */
void ry_tensor_release(ry_tensor *t);         /* NULL is fine */

size_t ry_tensor_nbytes(const ry_tensor *t);
/* Whether a's and b's elements share bytes (never across devices; on a
 * device, views of one buffer by their offsets). */
bool ry_tensor_overlap(const ry_tensor *a, const ry_tensor *b);
bool ry_tensor_same_shape(const ry_tensor *a, const ry_tensor *b);
/* Element i (flat index) as double, and store double into element i,
 * for CPU tensors (a device tensor reads nan and writes nothing),
 * converting per dtype (bool stores v != 0; integers truncate toward zero,
 * saturate at their range and store nan as 0). An index out of range reads
 * nan and writes nothing. For tests, I/O and slow paths. */
double ry_tensor_get(const ry_tensor *t, int64_t i);
void ry_tensor_set(ry_tensor *t, int64_t i, double v);
/* "float32[2, 3]" into buf ("float32[]" for a scalar), truncated to n. */
const char *ry_tensor_describe(const ry_tensor *t, char *buf, size_t n);

/* ---- .npy ------------------------------------------------------------
 * Versions 1.0, 2.0 and 3.0; little-endian data of the eight dtypes (and
 * big-endian, byte-swapped on read). Fortran order, object arrays, unknown
 * dtypes, a header or data shorter than declared, or a shape whose size does
 * not match the file, are errors naming the file. */
ry_status ry_npy_read(const char *path, ry_tensor **out, ry_error *err);
ry_status ry_npy_read_mem(const char *name, const void *buf, size_t len,
                          ry_tensor **out, ry_error *err);
/* Writes atomically: to PATH.tmp, then renames. */
ry_status ry_npy_write(const char *path, const ry_tensor *t, ry_error *err);

RY_END_API

#endif
