/*
 * npy_data.c: .npy files as a dataset: several arrays (inputs, labels)
 * whose first axis counts the same examples. Reading is ry_npy_read's; this
 * file only checks that the arrays agree.
 */
#include "relayc/datasets.h"

ry_status ry_npy_data_read(int n, const char *const *paths, ry_tensor **out, ry_error *err) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    ry_status s = RY_OK;
    for (int i = 0; i < n && s == RY_OK; i++) {
        s = ry_npy_read(paths[i], &out[i], err);
        if (s != RY_OK) break;
        const ry_tensor *t = out[i];
        if (t->ndim < 1)
            s = ry_error_file(err, paths[i], "a dataset array needs a first axis of examples, "
                              "this one is a scalar");
        else if (i > 0 && t->shape[0] != out[0]->shape[0])
            s = ry_error_file(err, paths[i], "%lld examples along the first axis, but %s has %lld",
                              (long long)t->shape[0], paths[0], (long long)out[0]->shape[0]);
    }
    if (s != RY_OK)
        for (int i = 0; i < n; i++) {
            ry_tensor_release(out[i]);
            out[i] = NULL;
        }
    return s;
}
