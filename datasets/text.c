/*
 * text.c: character text for char-level models: a byte vocabulary, the
 * text as int32 ids, and truncated-BPTT windows cut as classic char-rnn
 * cuts them (one contiguous stream per batch row, so hidden state carries
 * from one window to the next).
 */
#include <string.h>

#include "file.h"
#include "relayc/datasets.h"

ry_status ry_text_from_mem(const char *name, const void *buf, size_t len, ry_text **out,
                           ry_error *err) {
    *out = NULL;
    if (len == 0) return ry_error_file(err, name, "empty text: a char-level dataset needs at least one byte");
    if (len > SIZE_MAX / sizeof(int32_t) || len > (size_t)INT64_MAX)
        return ry_error_file(err, name, "text too large (%zu bytes)", len);
    const uint8_t *b = buf;
    ry_text *t = ry_calloc(1, sizeof *t);
    int32_t *ids = ry_malloc(len * sizeof *ids);
    if (!t || !ids) {
        ry_free(t);
        ry_free(ids);
        return ry_error_file(err, name, "out of memory for %zu bytes of text", len);
    }
    bool present[256] = {false};
    for (size_t i = 0; i < len; i++) present[b[i]] = true;
    for (int c = 0; c < 256; c++) {
        t->id_of[c] = -1;
        if (present[c]) {
            t->id_of[c] = (int16_t)t->nsymbols;
            t->symbol[t->nsymbols++] = (uint8_t)c;
        }
    }
    for (size_t i = 0; i < len; i++) ids[i] = t->id_of[b[i]];
    t->n = (int64_t)len;
    t->ids = ids;
    *out = t;
    return RY_OK;
}

ry_status ry_text_read(const char *path, ry_text **out, ry_error *err) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    if (ry_ds_read_file(path, &buf, &len, err) != RY_OK) return RY_ERR;
    ry_status s = ry_text_from_mem(path, buf, len, out, err);
    ry_free(buf);
    return s;
}

void ry_text_free(ry_text *t) {
    if (!t) return;
    ry_free(t->ids);
    ry_free(t);
}

/* ---- truncated BPTT ------------------------------------------------------------
 * B = batch rows, S = seq, L = stream length per row. Row r reads
 * ids[begin + r*L .. begin + r*L + L] (L inputs and one more for the last
 * target); the last row's final target is ids[begin + B*L] < end. */

ry_status ry_bptt_init(ry_bptt *b, const ry_text *t, int64_t begin, int64_t end, int64_t batch,
                       int64_t seq, bool keep_partial, ry_error *err) {
    memset(b, 0, sizeof *b);
    if (begin < 0 || end > t->n || begin >= end)
        return ry_error_at(err, RY_NO_SPAN, "bptt: range [%lld, %lld) is not inside the text's %lld bytes",
                           (long long)begin, (long long)end, (long long)t->n);
    if (batch < 1 || seq < 1)
        return ry_error_at(err, RY_NO_SPAN, "bptt: batch %lld and sequence length %lld must be at least 1",
                           (long long)batch, (long long)seq);
    int64_t stream = (end - begin - 1) / batch;
    int64_t nwin = keep_partial ? (stream + seq - 1) / seq : stream / seq;
    if (nwin < 1)
        return ry_error_at(err, RY_NO_SPAN, "bptt: %lld bytes give %lld per row for %lld rows, "
                           "less than one window of %lld", (long long)(end - begin),
                           (long long)stream, (long long)batch, (long long)seq);
    *b = (ry_bptt){t, begin, batch, seq, stream, nwin};
    return RY_OK;
}

ry_status ry_bptt_window(const ry_bptt *b, int64_t k, ry_tensor **x, ry_tensor **y,
                         ry_error *err) {
    *x = *y = NULL;
    if (k < 0 || k >= b->nwindows)
        return ry_error_at(err, RY_NO_SPAN, "bptt: window %lld outside 0..%lld", (long long)k,
                           (long long)b->nwindows - 1);
    int64_t start = k * b->seq;
    int64_t s = b->stream - start < b->seq ? b->stream - start : b->seq;
    int64_t shape[2] = {b->batch, s};
    ry_tensor *tx = ry_tensor_new(RY_INT32, 2, shape), *ty = ry_tensor_new(RY_INT32, 2, shape);
    if (!tx || !ty) {
        ry_tensor_release(tx);
        ry_tensor_release(ty);
        return ry_error_at(err, RY_NO_SPAN, "bptt: out of memory for a window");
    }
    const int32_t *ids = b->text->ids;
    for (int64_t r = 0; r < b->batch; r++) {
        const int32_t *row = ids + b->begin + r * b->stream + start;
        memcpy((int32_t *)tx->data + r * s, row, (size_t)s * sizeof(int32_t));
        memcpy((int32_t *)ty->data + r * s, row + 1, (size_t)s * sizeof(int32_t));
    }
    *x = tx;
    *y = ty;
    return RY_OK;
}
