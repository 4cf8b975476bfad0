/*
 * device_alloc.h: a device's caching allocator (the device layer's, shared
 * by the OpenCL and CUDA targets). The driver's allocation calls are slow
 * and may synchronize the device, so buffers are kept by size class when
 * freed and handed out again: a training step that repeats its shapes gets
 * every buffer from the free lists and none from the driver (counted, so a
 * test can say so). A device tensor's data is its ry_devbuf: the driver's
 * handle and the capacity, the record staying with the buffer for its life.
 *
 * RELAYC_DEVICE_MEMORY_LIMIT (bytes, with an optional K, M or G) caps what
 * the allocator takes from the driver, so a device's out-of-memory can be
 * provoked on purpose (tests); without it the driver's own limit applies.
 * Either way an allocation that does not fit first returns the waiting
 * buffers to the driver and tries again, then fails (NULL: the caller's
 * located "out of memory").
 */
#ifndef RELAYC_BACKEND_DEVICE_ALLOC_H
#define RELAYC_BACKEND_DEVICE_ALLOC_H

#include <pthread.h>

#include "relayc/tensor.h"

typedef struct ry_devbuf {
    void *handle;            /* the driver's (cl_mem, a CUDA device pointer) */
    size_t bytes;            /* capacity: its size class */
    int cls;
    struct ry_devbuf *next;  /* while it waits */
} ry_devbuf;

#define RY_DEVHEAP_CLASSES 160

typedef struct ry_device_heap {
    ry_allocator alloc;      /* first: the allocator tensors are made with */
    void *(*driver_alloc)(size_t nbytes);  /* NULL on failure */
    void (*driver_free)(void *handle);
    pthread_mutex_t lock;
    ry_devbuf *waiting[RY_DEVHEAP_CLASSES];
    int64_t held;            /* bytes the driver has given (out and waiting) */
    int64_t limit;           /* RELAYC_DEVICE_MEMORY_LIMIT; 0: none */
    long driver_allocs;
} ry_device_heap;

void ry_device_heap_init(ry_device_heap *h, ry_device dev, void *(*driver_alloc)(size_t),
                         void (*driver_free)(void *));
/* Gives every waiting buffer back to the driver (at exit, on pressure). */
void ry_device_heap_trim(ry_device_heap *h);

/* The driver's handle of t's buffer (t a device tensor). */
static inline void *ry_devbuf_handle(const ry_tensor *t) { return ((const ry_devbuf *)t->data)->handle; }
/* Its capacity, for the VM's storage slots. */
static inline size_t ry_devbuf_bytes(const ry_tensor *t) { return ((const ry_devbuf *)t->data)->bytes; }

#endif
