/*
 * idx.c: the IDX format of MNIST and Fashion-MNIST, plain or gzipped, and
 * the MNIST loader on top (images scaled to [0, 1], labels as int32).
 * Every header field is checked against the file's size before any data is
 * touched, so a malformed file is an error with its byte offset.
 */
#include <string.h>

#include "file.h"
#include "relayc/datasets.h"

/* idx -> 00 00 type rank dim[rank] (big-endian uint32) data (big-endian) */

static bool idx_dtype(uint8_t code, ry_dtype *dt, size_t *elem) {
    switch (code) {
    case 0x08: *dt = RY_UINT8, *elem = 1; return true;
    case 0x09: *dt = RY_INT8, *elem = 1; return true;
    case 0x0B: *dt = RY_INT32, *elem = 2; return true;
    case 0x0C: *dt = RY_INT32, *elem = 4; return true;
    case 0x0D: *dt = RY_FLOAT32, *elem = 4; return true;
    case 0x0E: *dt = RY_FLOAT64, *elem = 8; return true;
    default: return false;
    }
}

static uint64_t be(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* Element i of the big-endian data, stored into t in its dtype. */
static void decode(ry_tensor *t, uint8_t code, const uint8_t *data) {
    int64_t n = t->size;
    switch (code) {
    case 0x08:
    case 0x09: memcpy(t->data, data, (size_t)n); break;
    case 0x0B:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)t->data)[i] = (int16_t)(uint16_t)be(data + 2 * i, 2);
        break;
    case 0x0C:
        for (int64_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = (int32_t)(uint32_t)be(data + 4 * i, 4);
        break;
    case 0x0D:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)be(data + 4 * i, 4);
            memcpy((float *)t->data + i, &u, 4);
        }
        break;
    case 0x0E:
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = be(data + 8 * i, 8);
            memcpy((double *)t->data + i, &u, 8);
        }
        break;
    }
}

/* Parses a decompressed IDX image; `where` says whose offsets they are. */
static ry_status parse_idx(const char *name, const char *where, const uint8_t *b, size_t len,
                           ry_tensor **out, ry_error *err) {
    if (len < 4)
        return ry_error_file(err, name, "not an IDX file: %zu bytes, the header needs 4 (byte 0%s)",
                             len, where);
    if (b[0] != 0 || b[1] != 0)
        return ry_error_file(err, name, "bad IDX magic %02x %02x %02x %02x at byte 0%s: expected 00 00 <type> <rank>",
                             b[0], b[1], b[2], b[3], where);
    ry_dtype dt;
    size_t elem;
    if (!idx_dtype(b[2], &dt, &elem))
        return ry_error_file(err, name, "unknown IDX element type 0x%02x at byte 2%s", b[2], where);
    int rank = b[3];
    if (rank < 1 || rank > RY_MAX_RANK)
        return ry_error_file(err, name, "IDX rank %d at byte 3%s: expected 1..%d", rank, where,
                             RY_MAX_RANK);
    size_t hdr = 4 + 4 * (size_t)rank;
    if (len < hdr)
        return ry_error_file(err, name, "truncated IDX header: %zu bytes, %d dims need %zu (byte %zu%s)",
                             len, rank, hdr, len, where);
    int64_t shape[RY_MAX_RANK];
    uint64_t count = 1;
    bool overflow = false;
    for (int i = 0; i < rank; i++) {
        uint64_t d = be(b + 4 + 4 * i, 4);
        shape[i] = (int64_t)d;
        if (d && count > UINT64_MAX / d) overflow = true;
        count *= d;
    }
    size_t have = len - hdr;
    if (overflow || count > have / elem || count * elem != have) {
        char dims[128];
        size_t p = 0;
        for (int i = 0; i < rank && p < sizeof dims; i++)
            p += (size_t)snprintf(dims + p, sizeof dims - p, "%s%lld", i ? " x " : "", (long long)shape[i]);
        if (!overflow && count <= have / elem)
            return ry_error_file(err, name, "IDX dims %s need %llu data bytes but %zu follow the header "
                                 "(extra data from byte %zu%s)", dims,
                                 (unsigned long long)(count * elem), have,
                                 hdr + (size_t)(count * elem), where);
        return ry_error_file(err, name, "truncated IDX data: dims %s need more bytes than the %zu "
                             "that follow the header (data ends at byte %zu%s)", dims, have, len, where);
    }
    ry_tensor *t = ry_tensor_new(dt, rank, shape);
    if (!t) return ry_error_file(err, name, "out of memory for an IDX tensor of %llu elements",
                                 (unsigned long long)count);
    decode(t, b[2], b + hdr);
    *out = t;
    return RY_OK;
}

/* The whole size a complete, valid header declares (header and data), or
 * false when the header is incomplete or invalid (parse_idx says how).
 * UINT64_MAX when the size overflows. */
static bool declared_size(const uint8_t *b, size_t len, uint64_t *total) {
    ry_dtype dt;
    size_t elem;
    if (len < 4 || b[0] || b[1] || !idx_dtype(b[2], &dt, &elem) || b[3] < 1 || b[3] > RY_MAX_RANK ||
        len < 4 + 4 * (size_t)b[3])
        return false;
    uint64_t hdr = 4 + 4 * (uint64_t)b[3], count = 1;
    *total = UINT64_MAX;
    for (int i = 0; i < b[3]; i++) {
        uint64_t d = be(b + 4 + 4 * i, 4);
        if (d && count > UINT64_MAX / d) return true;
        count *= d;
    }
    if (count > (UINT64_MAX - hdr) / elem) return true;
    *total = hdr + count * elem;
    return true;
}

/* Deflate expands at most 1032 times: a header declaring more than the
 * compressed bytes can hold is refused before anything is inflated. */
#define DEFLATE_MAX_RATIO 1032

/* A gzipped IDX: the header first, its declared size checked, then the
 * data inflated up to that size and one byte more (to see there is more). */
static ry_status gunzip_idx(const char *name, const uint8_t *b, size_t len, uint8_t **raw,
                            size_t *rawlen, ry_error *err) {
    if (ry_ds_gunzip(name, b, len, 4 + 4 * RY_MAX_RANK, raw, rawlen, err)) return RY_ERR;
    uint64_t total;
    if (!declared_size(*raw, *rawlen, &total)) return RY_OK; /* parse_idx says what is wrong */
    ry_free(*raw);
    *raw = NULL;
    uint64_t most = (uint64_t)len * DEFLATE_MAX_RATIO + 64;
    if (total > most || total >= SIZE_MAX)
        return ry_error_file(err, name, "the IDX header declares %s%llu bytes, more than %zu bytes "
                                        "of gzip data can inflate to",
                             total == UINT64_MAX ? "over " : "", (unsigned long long)total, len);
    return ry_ds_gunzip(name, b, len, (size_t)total + 1, raw, rawlen, err);
}

ry_status ry_idx_read_mem(const char *name, const void *buf, size_t len, ry_tensor **out,
                          ry_error *err) {
    *out = NULL;
    const uint8_t *b = buf;
    if (!ry_ds_is_gzip(b, len)) return parse_idx(name, "", b, len, out, err);
    uint8_t *raw;
    size_t rawlen;
    if (gunzip_idx(name, b, len, &raw, &rawlen, err) != RY_OK) return RY_ERR;
    ry_status s = parse_idx(name, " of the decompressed data", raw, rawlen, out, err);
    ry_free(raw);
    return s;
}

ry_status ry_idx_read(const char *path, ry_tensor **out, ry_error *err) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    if (ry_ds_read_file(path, &buf, &len, err) != RY_OK) return RY_ERR;
    ry_status s = ry_idx_read_mem(path, buf, len, out, err);
    ry_free(buf);
    return s;
}

/* ---- MNIST ---------------------------------------------------------------- */

/* DIR/SPLIT-KIND.gz if it exists, else DIR/SPLIT-KIND. */
static ry_status read_part(const char *dir, const char *split, const char *kind, ry_tensor **out,
                           ry_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%s.gz", dir, split, kind);
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    else
        snprintf(path, sizeof path, "%s/%s-%s", dir, split, kind);
    return ry_idx_read(path, out, err);
}

static ry_status check_parts(const char *dir, const char *split, const ry_tensor *img,
                             const ry_tensor *lab, ry_error *err) {
    if (img->dtype != RY_UINT8 || img->ndim != 3)
        return ry_error_file(err, dir, "%s images: expected uint8 of rank 3, got %s of rank %d",
                             split, ry_dtype_name(img->dtype), img->ndim);
    if (lab->dtype != RY_UINT8 || lab->ndim != 1)
        return ry_error_file(err, dir, "%s labels: expected uint8 of rank 1, got %s of rank %d",
                             split, ry_dtype_name(lab->dtype), lab->ndim);
    if (img->shape[0] != lab->shape[0])
        return ry_error_file(err, dir, "%s: %lld images but %lld labels", split,
                             (long long)img->shape[0], (long long)lab->shape[0]);
    return RY_OK;
}

/* images: uint8 (N, R, C) -> float32 (N, 1, R, C) or (N, R*C), (p/255 - mean)/std */
static ry_tensor *to_float(const ry_tensor *img, const ry_mnist_opts *o) {
    int64_t n = img->shape[0], r = img->shape[1], c = img->shape[2];
    int64_t shape4[4] = {n, 1, r, c}, shape2[2] = {n, r * c};
    ry_tensor *t = o->flatten ? ry_tensor_new(RY_FLOAT32, 2, shape2) : ry_tensor_new(RY_FLOAT32, 4, shape4);
    if (!t) return NULL;
    const uint8_t *src = img->data;
    float *dst = t->data;
    /* divisions, not multiplications by reciprocals: exactly rounded, as
     * numpy's x / 255 is */
    for (int64_t i = 0; i < img->size; i++) dst[i] = (float)src[i] / 255.0f;
    if (o->std != 0)
        for (int64_t i = 0; i < img->size; i++) dst[i] = (dst[i] - o->mean) / o->std;
    return t;
}

ry_status ry_mnist_load(const char *dir, const char *split, const ry_mnist_opts *opts,
                        ry_tensor **images, ry_tensor **labels, ry_error *err) {
    *images = *labels = NULL;
    ry_mnist_opts o = opts ? *opts : (ry_mnist_opts){false, 0.0f, 0.0f};
    if (!dir) dir = RY_FASHION_MNIST_DIR;
    ry_tensor *img = NULL, *lab = NULL;
    if (read_part(dir, split, "images-idx3-ubyte", &img, err) != RY_OK ||
        read_part(dir, split, "labels-idx1-ubyte", &lab, err) != RY_OK ||
        check_parts(dir, split, img, lab, err) != RY_OK) {
        ry_tensor_release(img);
        ry_tensor_release(lab);
        return RY_ERR;
    }
    ry_tensor *x = to_float(img, &o);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, lab->shape);
    if (x && y)
        for (int64_t i = 0; i < lab->size; i++) ((int32_t *)y->data)[i] = ((const uint8_t *)lab->data)[i];
    ry_tensor_release(img);
    ry_tensor_release(lab);
    if (!x || !y) {
        ry_tensor_release(x);
        ry_tensor_release(y);
        return ry_error_file(err, dir, "out of memory converting %s", split);
    }
    *images = x;
    *labels = y;
    return RY_OK;
}
