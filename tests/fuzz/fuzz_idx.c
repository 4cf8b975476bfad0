/*
 * fuzz_idx.c: IDX reading (plain and gzipped: the reader detects gzip by
 * its magic bytes, so the seeds hold both).
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_tensor *t = NULL;
    ry_status st = ry_idx_read_mem("fuzz.idx", data, size, &t, &err);
    fuzz_check_error(st, &err);
    ry_tensor_release(t);
    return 0;
}
