/*
 * file.c: whole-file reads and gzip inflation for the loaders. Data files
 * are small enough (tens of MB) to hold at once, which lets every parser
 * work on a buffer with exact offsets for its errors.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "file.h"

ry_status ry_ds_read_file(const char *path, uint8_t **buf, size_t *len, ry_error *err) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ry_error_file(err, path, "cannot open: %s", strerror(errno));
    struct stat st;
    ry_status s = RY_OK;
    if (fstat(fileno(f), &st) != 0)
        s = ry_error_file(err, path, "cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = ry_error_file(err, path, "not a regular file");
    else if ((uintmax_t)st.st_size >= SIZE_MAX)
        s = ry_error_file(err, path, "file too large");
    if (s != RY_OK) {
        fclose(f);
        return s;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = ry_malloc(n + 1);
    if (!b) {
        fclose(f);
        return ry_error_file(err, path, "out of memory reading %zu bytes", n);
    }
    size_t got = n ? fread(b, 1, n, f) : 0;
    int failed = ferror(f), e = errno;
    fclose(f);
    if (got != n) {
        ry_free(b);
        return ry_error_file(err, path, "read failed at byte %zu: %s", got,
                             failed ? strerror(e) : "file shrank");
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return RY_OK;
}

bool ry_ds_is_gzip(const uint8_t *buf, size_t len) {
    return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

/* zlib allocates through the library's hook, so injected failures reach it. */
static voidpf zalloc(voidpf opaque, uInt items, uInt size) {
    (void)opaque;
    return ry_calloc(items, size);
}
static void zfree(voidpf opaque, voidpf p) {
    (void)opaque;
    ry_free(p);
}

/* The gzip trailer's ISIZE (size mod 2^32) is a good first guess for the
 * output, when it is believable: deflate expands at most 1032 times, and a
 * truncated file's last four bytes are not a trailer at all. The buffer
 * doubles when the guess is short. */
static size_t size_hint(const uint8_t *buf, size_t len) {
    size_t fallback = len < SIZE_MAX / 8 ? 4 * len + 4096 : len;
    if (len < 18) return fallback;
    const uint8_t *t = buf + len - 4;
    size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    return isize && isize / 1032 <= len ? isize : fallback;
}

static ry_status grow(const char *name, uint8_t **out, size_t *cap, size_t max, ry_error *err) {
    size_t ncap = *cap * 2;
    if (ncap > max) ncap = max;
    uint8_t *p = ncap > *cap ? ry_realloc(*out, ncap + 1) : NULL;
    if (!p) return ry_error_file(err, name, "out of memory inflating %zu bytes", ncap);
    *out = p;
    *cap = ncap;
    return RY_OK;
}

/* One pass of inflate over buf: members one after another (gzip allows
 * concatenation); anything after a member that is not another member is an
 * error, as is a stream that ends early. Stops, without error, once max
 * bytes are out. */
static ry_status inflate_all(const char *name, z_stream *z, const uint8_t *buf, size_t len,
                             size_t max, uint8_t **out, size_t *cap, size_t *used, ry_error *err) {
    size_t in_pos = 0;
    for (;;) {
        size_t in_chunk = len - in_pos < UINT_MAX ? len - in_pos : UINT_MAX;
        z->next_in = (Bytef *)(buf + in_pos);
        z->avail_in = (uInt)in_chunk;
        if (*used == max) return RY_OK;
        if (*used == *cap && grow(name, out, cap, max, err) != RY_OK) return RY_ERR;
        size_t out_room = *cap - *used < UINT_MAX ? *cap - *used : UINT_MAX;
        z->next_out = *out + *used;
        z->avail_out = (uInt)out_room;
        int rc = inflate(z, Z_NO_FLUSH);
        in_pos += in_chunk - z->avail_in;
        *used += out_room - z->avail_out;
        if (rc == Z_STREAM_END) {
            if (in_pos == len) return RY_OK;
            if (!ry_ds_is_gzip(buf + in_pos, len - in_pos))
                return ry_error_file(err, name, "trailing garbage after gzip stream at byte %zu",
                                     in_pos);
            inflateReset(z);
            continue;
        }
        if (rc == Z_MEM_ERROR) return ry_error_file(err, name, "out of memory inflating");
        if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR)
            return ry_error_file(err, name, "corrupt gzip data near byte %zu: %s", in_pos,
                                 z->msg ? z->msg : "invalid stream");
        /* No progress with room to write: the input ran out mid-stream. */
        if (rc == Z_BUF_ERROR && z->avail_out > 0)
            return ry_error_file(err, name, "truncated gzip stream: ends at byte %zu", len);
    }
}

ry_status ry_ds_gunzip(const char *name, const uint8_t *buf, size_t len, size_t max,
                       uint8_t **out, size_t *outlen, ry_error *err) {
    *out = NULL;
    *outlen = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = zalloc;
    z.zfree = zfree;
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return ry_error_file(err, name, "cannot start gzip decoder (out of memory)");
    if (max == 0 || max == SIZE_MAX) max = SIZE_MAX - 1; /* room for the NUL */
    size_t cap = size_hint(buf, len), used = 0;
    if (cap > max) cap = max;
    uint8_t *o = ry_malloc(cap + 1);
    if (!o && cap > 4096) { /* a wrong guess too big to hold: start small */
        cap = 4096;
        o = ry_malloc(cap + 1);
    }
    ry_status s = o ? inflate_all(name, &z, buf, len, max, &o, &cap, &used, err)
                    : ry_error_file(err, name, "out of memory inflating %zu bytes", cap);
    inflateEnd(&z);
    if (s != RY_OK) {
        ry_free(o);
        return s;
    }
    o[used] = 0;
    *out = o;
    *outlen = used;
    return RY_OK;
}
