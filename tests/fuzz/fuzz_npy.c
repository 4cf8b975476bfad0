/*
 * fuzz_npy.c: .npy reading from memory, and the same bytes as a file through
 * the dataset reader (which also checks ranks and the first dimension).
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_tensor *t = NULL;
    ry_status st = ry_npy_read_mem("fuzz.npy", data, size, &t, &err);
    fuzz_check_error(st, &err);
    ry_tensor_release(t);
    const char *path = fuzz_file(data, size, ".npy");
    if (!path) return 0;
    const char *paths[2] = {path, path};
    ry_tensor *out[2] = {NULL, NULL};
    memset(&err, 0, sizeof err);
    st = ry_npy_data_read(2, paths, out, &err);
    fuzz_check_error(st, &err);
    ry_tensor_release(out[0]);
    ry_tensor_release(out[1]);
    unlink(path);
    return 0;
}
