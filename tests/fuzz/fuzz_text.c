/*
 * fuzz_text.c: character text as data, and truncated-BPTT windows over it
 * at a batch and sequence length taken from the first two bytes.
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int64_t batch = data[0] % 5, seq = data[1] % 9;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_text *t = NULL;
    ry_status st = ry_text_from_mem("fuzz.txt", data + 2, size - 2, &t, &err);
    fuzz_check_error(st, &err);
    if (st != RY_OK) return 0;
    ry_bptt b;
    memset(&err, 0, sizeof err);
    st = ry_bptt_init(&b, t, 0, t->n, batch, seq, data[0] & 0x80, &err);
    fuzz_check_error(st, &err);
    /* the first and last windows: the ends are where the bounds are */
    for (int64_t k = 0; st == RY_OK && k < b.nwindows; k += b.nwindows > 1 ? b.nwindows - 1 : 1) {
        ry_tensor *x = NULL, *y = NULL;
        memset(&err, 0, sizeof err);
        fuzz_check_error(ry_bptt_window(&b, k, &x, &y, &err), &err);
        ry_tensor_release(x);
        ry_tensor_release(y);
    }
    ry_text_free(t);
    return 0;
}
