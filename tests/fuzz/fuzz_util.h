/*
 * fuzz_util.h: what the libFuzzer targets in tests/fuzz/ share. Each target
 * hands the fuzzer's bytes to one reader of untrusted input and checks only
 * what a crash-free reader promises: an error is a value with a message.
 * The sanitizers (ASan, UBSan) and libFuzzer's leak, timeout and
 * out-of-memory checks do the rest. Build with `make fuzz`.
 */
#ifndef RY_FUZZ_UTIL_H
#define RY_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relayc/ad.h"
#include "relayc/relayc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A reader that fails must say why: an empty message is a bug. */
static inline void fuzz_check_error(ry_status st, const ry_error *err) {
    if (st != RY_OK && err->msg[0] == '\0') {
        fprintf(stderr, "fuzz: an error without a message\n");
        abort();
    }
}

/* The bytes as a file, for readers that take a path: one per process,
 * rewritten for every input (in /dev/shm when there is one, so the disk
 * is not worn). Returns the path, or NULL when it cannot be written. */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[256];
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/relayc-fuzz-%ld%s", dir, (long)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    bool ok = fwrite(data, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    return ok ? path : NULL;
}

#endif
