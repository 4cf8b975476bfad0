/*
 * device_alloc.c: the device layer's caching allocator (device_alloc.h).
 * Size classes are four per power of two from 256 bytes (a request wastes
 * under a quarter of its buffer), so one class serves the slightly
 * different shapes of a recursion's steps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/device_alloc.h"

#define MIN_SHIFT 8

/* The class of n bytes and its capacity. */
static int class_of(size_t n, size_t *cap) {
    if (n <= ((size_t)1 << MIN_SHIFT)) {
        *cap = (size_t)1 << MIN_SHIFT;
        return 0;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
    size_t quarter = (size_t)1 << (k - 1);                      /* steps of 2^k / 4 */
    size_t base = (size_t)1 << k;
    int step = (int)((n - base + quarter - 1) / quarter);       /* 1..4 */
    *cap = base + (size_t)step * quarter;
    int c = (k - MIN_SHIFT) * 4 + step;
    return c < RY_DEVHEAP_CLASSES ? c : -1;
}

static int64_t parse_limit(void) {
    const char *s = getenv("RELAYC_DEVICE_MEMORY_LIMIT");
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return 0;
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return v >= 9e18 ? 0 : (int64_t)v;
}

static void trim_locked(ry_device_heap *h) {
    for (int c = 0; c < RY_DEVHEAP_CLASSES; c++)
        while (h->waiting[c]) {
            ry_devbuf *b = h->waiting[c];
            h->waiting[c] = b->next;
            h->driver_free(b->handle);
            h->held -= (int64_t)b->bytes;
            free(b);
        }
}

static void *heap_alloc(ry_allocator *self, size_t nbytes) {
    ry_device_heap *h = (ry_device_heap *)self;
    size_t cap;
    int c = class_of(nbytes, &cap);
    if (c < 0) return NULL;
    pthread_mutex_lock(&h->lock);
    ry_devbuf *b = h->waiting[c];
    if (b) {
        h->waiting[c] = b->next;
        pthread_mutex_unlock(&h->lock);
        return b;
    }
    for (int attempt = 0; attempt < 2 && !b; attempt++) {
        if (attempt) trim_locked(h);
        if (h->limit && h->held + (int64_t)cap > h->limit) continue;
        void *handle = h->driver_alloc(cap);
        if (!handle) continue;
        /* plain malloc, not ry_malloc: the record lives with the buffer,
         * and a test counting a warm step's allocations counts the
         * driver's (driver_allocs) */
        if (!(b = malloc(sizeof *b))) {
            h->driver_free(handle);
            break;
        }
        *b = (ry_devbuf){handle, cap, c, NULL};
        h->held += (int64_t)cap;
        h->driver_allocs++;
    }
    pthread_mutex_unlock(&h->lock);
    return b;
}

static void heap_free(ry_allocator *self, void *ptr) {
    ry_device_heap *h = (ry_device_heap *)self;
    ry_devbuf *b = ptr;
    if (!b) return;
    pthread_mutex_lock(&h->lock);
    b->next = h->waiting[b->cls];
    h->waiting[b->cls] = b;
    pthread_mutex_unlock(&h->lock);
}

void ry_device_heap_init(ry_device_heap *h, ry_device dev, void *(*driver_alloc)(size_t),
                         void (*driver_free)(void *)) {
    memset(h, 0, sizeof *h);
    h->alloc = (ry_allocator){dev, heap_alloc, heap_free};
    h->driver_alloc = driver_alloc;
    h->driver_free = driver_free;
    pthread_mutex_init(&h->lock, NULL);
    h->limit = parse_limit();
}

void ry_device_heap_trim(ry_device_heap *h) {
    pthread_mutex_lock(&h->lock);
    trim_locked(h);
    pthread_mutex_unlock(&h->lock);
}
