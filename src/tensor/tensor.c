/*
 * tensor.c: reference-counted dense tensors: creation, views that keep their
 * base alive, deep copies, and slow per-element access by flat index.
 *
 * Tensors are C-contiguous. Arithmetic on tensors belongs to the kernels in
 * src/backend/; .npy I/O to npy.c. Every allocation goes through ry_malloc
 * or an ry_allocator so out-of-memory is a NULL return, never a crash.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "relayc/tensor.h"
#include "tensor/blockcache.h"

/* Fills t's shape and size from (ndim, shape); false when the rank is out of
 * range or a dimension is negative, or when the dimensions other than zero
 * multiply to more than PTRDIFF_MAX bytes. That last rule is numpy's: it
 * keeps every tensor expressible as a numpy array (an empty (0, 2^40, 2^40)
 * is not), no buffer too big for C to index, and allocators' rounding up
 * from wrapping. */
static bool set_shape(ry_tensor *t, ry_dtype dtype, int ndim, const int64_t *shape) {
    if ((unsigned)dtype >= RY_DTYPE_COUNT || ndim < 0 || ndim > RY_MAX_RANK) return false;
    if (ndim > 0 && !shape) return false;
    int64_t nonzero = (int64_t)ry_dtype_size(dtype); /* bytes, ignoring zero dims */
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] == 0) empty = true;
        else if (__builtin_mul_overflow(nonzero, shape[i], &nonzero)) return false;
        t->shape[i] = shape[i];
    }
    if ((uint64_t)nonzero > PTRDIFF_MAX) return false;
    for (int i = ndim; i < RY_MAX_RANK; i++) t->shape[i] = 0;
    t->dtype = dtype;
    t->ndim = ndim;
    t->size = empty ? 0 : nonzero / (int64_t)ry_dtype_size(dtype);
    return true;
}

ry_tensor *ry_tensor_new_on(ry_allocator *alloc, ry_dtype dtype, int ndim, const int64_t *shape) {
    if (!alloc) return NULL;
    ry_tensor *t = ry_block_get(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    if (!set_shape(t, dtype, ndim, shape)) {
        ry_block_put(t, sizeof *t);
        return NULL;
    }
    t->data = alloc->alloc(alloc, ry_tensor_nbytes(t));
    if (!t->data) {
        ry_block_put(t, sizeof *t);
        return NULL;
    }
    t->refcount = 1;
    t->device = alloc->device;
    t->alloc = alloc;
    t->base = NULL;
    return t;
}

ry_tensor *ry_tensor_new(ry_dtype dtype, int ndim, const int64_t *shape) {
    return ry_tensor_new_on(ry_cpu_allocator(), dtype, ndim, shape);
}

ry_tensor *ry_tensor_zeros(ry_dtype dtype, int ndim, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dtype, ndim, shape);
    if (t) memset(t->data, 0, ry_tensor_nbytes(t));
    return t;
}

ry_tensor *ry_tensor_scalar(ry_dtype dtype, double v) {
    ry_tensor *t = ry_tensor_new(dtype, 0, NULL);
    if (t) ry_tensor_set(t, 0, v);
    return t;
}

/* A view never owns memory: its data points into base's buffer and it holds
 * one reference on base, so a parameter slab outlives every view carved from
 * it. The fit check is done in bytes, overflow-safe. */
ry_tensor *ry_tensor_view(ry_tensor *base, size_t byte_offset, ry_dtype dtype, int ndim,
                          const int64_t *shape) {
    if (!base) return NULL;
    ry_tensor *t = ry_block_get(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    size_t base_bytes = ry_tensor_nbytes(base);
    if (!set_shape(t, dtype, ndim, shape) || byte_offset > base_bytes ||
        ry_tensor_nbytes(t) > base_bytes - byte_offset) {
        ry_block_put(t, sizeof *t);
        return NULL;
    }
    t->refcount = 1;
    t->device = base->device;
    if (base->device.kind == RY_DEVICE_CPU) {
        t->data = (char *)base->data + byte_offset;
    } else {
        t->data = base->data;
        t->offset = base->offset + byte_offset;
    }
    t->alloc = NULL;
    t->base = ry_tensor_retain(base);
    return t;
}

/* The allocator that owns t's memory: its own, or that of the root of its
 * chain of views. A copy lands on the same device. */
static ry_allocator *owner_alloc(const ry_tensor *t) {
    while (t->base) t = t->base;
    return t->alloc ? t->alloc : ry_cpu_allocator();
}

ry_tensor *ry_tensor_copy(const ry_tensor *t) {
    if (!t || t->device.kind != RY_DEVICE_CPU) return NULL; /* a device's: ry_tensor_to */
    ry_tensor *c = ry_tensor_new_on(owner_alloc(t), t->dtype, t->ndim, t->shape);
    if (c) memcpy(c->data, t->data, ry_tensor_nbytes(t));
    return c;
}

/* Atomic counts so values may be shared by worker threads (data loaders). */
ry_tensor *ry_tensor_retain(ry_tensor *t) {
    if (t) __atomic_fetch_add(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void ry_tensor_release(ry_tensor *t) {
    if (!t) return;
    if (__atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (t->alloc) t->alloc->free(t->alloc, t->data);
    ry_tensor_release(t->base);
    ry_block_put(t, sizeof *t);
}

size_t ry_tensor_nbytes(const ry_tensor *t) {
    return t ? (size_t)t->size * ry_dtype_size(t->dtype) : 0;
}

bool ry_tensor_overlap(const ry_tensor *a, const ry_tensor *b) {
    if (a->device.kind != b->device.kind || a->device.id != b->device.id) return false;
    size_t na = ry_tensor_nbytes(a), nb = ry_tensor_nbytes(b);
    if (a->device.kind == RY_DEVICE_CPU) {
        const char *x = a->data, *y = b->data;
        return x < y + nb && y < x + na;
    }
    return a->data == b->data && a->offset < b->offset + nb && b->offset < a->offset + na;
}

/* Shapes only; dtypes may differ. */
bool ry_tensor_same_shape(const ry_tensor *a, const ry_tensor *b) {
    if (!a || !b || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* ---- per-element access --------------------------------------------------
 * Stores saturate: nan becomes 0 and out-of-range values clamp to the
 * integer type's range, so no float->int conversion is undefined. */

static int64_t to_int(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

/* int64's bounds are not exact doubles: +2^63 is just outside the range. */
static int64_t to_int64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

double ry_tensor_get(const ry_tensor *t, int64_t i) {
    if (!t || i < 0 || i >= t->size || t->device.kind != RY_DEVICE_CPU) return NAN;
    const void *p = t->data;
    switch (t->dtype) {
    case RY_FLOAT32: return ((const float *)p)[i];
    case RY_FLOAT64: return ((const double *)p)[i];
    case RY_FLOAT16: return ry_f16_to_f32(((const uint16_t *)p)[i]);
    case RY_INT8: return ((const int8_t *)p)[i];
    case RY_INT32: return ((const int32_t *)p)[i];
    case RY_INT64: return (double)((const int64_t *)p)[i];
    case RY_UINT8: return ((const uint8_t *)p)[i];
    case RY_BOOL: return ((const uint8_t *)p)[i] != 0;
    case RY_INT16: return ((const int16_t *)p)[i];
    case RY_UINT16: return ((const uint16_t *)p)[i];
    default: return NAN;
    }
}

void ry_tensor_set(ry_tensor *t, int64_t i, double v) {
    if (!t || i < 0 || i >= t->size || t->device.kind != RY_DEVICE_CPU) return;
    void *p = t->data;
    switch (t->dtype) {
    case RY_FLOAT32: ((float *)p)[i] = (float)v; break;
    case RY_FLOAT64: ((double *)p)[i] = v; break;
    case RY_FLOAT16: ((uint16_t *)p)[i] = ry_f32_to_f16((float)v); break;
    case RY_INT8: ((int8_t *)p)[i] = (int8_t)to_int(v, INT8_MIN, INT8_MAX); break;
    case RY_INT32: ((int32_t *)p)[i] = (int32_t)to_int(v, INT32_MIN, INT32_MAX); break;
    case RY_INT64: ((int64_t *)p)[i] = to_int64(v); break;
    case RY_UINT8: ((uint8_t *)p)[i] = (uint8_t)to_int(v, 0, UINT8_MAX); break;
    case RY_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case RY_INT16: ((int16_t *)p)[i] = (int16_t)to_int(v, INT16_MIN, INT16_MAX); break;
    case RY_UINT16: ((uint16_t *)p)[i] = (uint16_t)to_int(v, 0, UINT16_MAX); break;
    default: break;
    }
}

/* "float32[2, 3]"; a scalar is "float32[]". Always NUL-terminates (n > 0). */
const char *ry_tensor_describe(const ry_tensor *t, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    if (!t) {
        snprintf(buf, n, "(null)");
        return buf;
    }
    size_t len = (size_t)snprintf(buf, n, "%s[", ry_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}
