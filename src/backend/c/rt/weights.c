/*
 * weights.c (export runtime): reading an exported model's weights file
 * and checking it against the manifest the code was generated with: its
 * size, magic, parameter list and CRC-32. Left out of artifacts whose
 * weights are embedded as C arrays.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC-32 (zlib's: polynomial 0xEDB88320, initial value 0), bitwise: run
 * once per load over the weights, so a table buys nothing worth its text. */
static uint32_t rt_crc32(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

static uint32_t rt_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The weights file: "RYCWGT01", u32 manifest length L, the manifest (one
 * line per parameter, "name dtype d0,d1,...\n", padded with NULs to a
 * multiple of 64 bytes from the file's start), each parameter's data in
 * manifest order padded to 64 bytes, then u32 CRC-32 of everything before
 * it; little-endian. Reads path into a new 64-byte aligned block *out
 * after checking its size, magic, manifest and CRC against what the code
 * was generated for. */
static int rt_weights_read(const char *path, const char *manifest, size_t size, void **out, char *msg,
                           size_t nmsg) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, nmsg, "%s: cannot open the weights file", path);
        return RT_E_IO;
    }
    long got = -1;
    if (fseek(f, 0, SEEK_END) == 0) got = ftell(f);
    if (got < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        snprintf(msg, nmsg, "%s: cannot read the weights file", path);
        return RT_E_IO;
    }
    if ((size_t)got != size) {
        fclose(f);
        snprintf(msg, nmsg, "%s: the weights file has %ld bytes, the model needs %zu (another model's, or truncated)",
                 path, got, size);
        return RT_E_WEIGHTS;
    }
    unsigned char *b = aligned_alloc(64, RT_ALIGN(size));
    if (!b) {
        fclose(f);
        snprintf(msg, nmsg, "%s: out of memory for %zu bytes of weights", path, size);
        return RT_E_MEMORY;
    }
    size_t r = fread(b, 1, size, f);
    fclose(f);
    size_t L = strlen(manifest);
    const char *why = NULL;
    if (r != size) why = "cannot read the weights file";
    else if (memcmp(b, "RYCWGT01", 8) != 0) why = "not a relayc weights file (bad magic)";
    else if (rt_le32(b + 8) != L || memcmp(b + 12, manifest, L) != 0)
        why = "the weights file holds other parameters than the model's";
    else if (rt_crc32(b, size - 4) != rt_le32(b + size - 4))
        why = "CRC-32 mismatch: the weights file is damaged";
    if (why) {
        free(b);
        snprintf(msg, nmsg, "%s: %s", path, why);
        return r != size ? RT_E_IO : RT_E_WEIGHTS;
    }
    *out = b;
    return RT_OK;
}
