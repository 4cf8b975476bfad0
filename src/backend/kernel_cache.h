/*
 * kernel_cache.h: the device targets' on-disk cache of built kernels (an
 * OpenCL program binary, NVRTC's PTX), so a second run builds nothing.
 * Files live in RELAYC_CACHE_DIR (default $XDG_CACHE_HOME/relayc, else
 * ~/.cache/relayc), one per key: TAG-KEY.bin holding a header (magic, the
 * key, the length and a hash of the bytes) before the bytes; a file that
 * does not match is ignored and written over. Files are written to a
 * temporary and renamed, so a crash or a second process never leaves
 * half a file. Keys are FNV-1a hashes of the source and the device.
 */
#ifndef RELAYC_BACKEND_KERNEL_CACHE_H
#define RELAYC_BACKEND_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define RY_KCACHE_SEED 14695981039346656037ull
uint64_t ry_kcache_hash(uint64_t h, const void *p, size_t n);
/* the hash of a string continued from h */
uint64_t ry_kcache_hash_str(uint64_t h, const char *s);

/* The bytes kept under (tag, key), malloc'd, or NULL. */
void *ry_kcache_load(const char *tag, uint64_t key, size_t *len);
/* Keeps bytes under (tag, key); best effort (no cache directory: nothing). */
void ry_kcache_store(const char *tag, uint64_t key, const void *bytes, size_t len);

#endif
