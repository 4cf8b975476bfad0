/*
 * npy.c: NumPy .npy files, read (versions 1.0, 2.0, 3.0, either byte order)
 * and written (version 1.0 as numpy writes it, byte for byte, atomically).
 *
 * Everything read is untrusted: every length is checked against what is
 * really there before it is used, and each way a file can be wrong is an
 * error naming the file, what is wrong and, where it helps, the byte offset.
 * Structured, object and Fortran-order arrays are refused, not guessed at.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/tensor.h"

/* Layout of a .npy file:
 *   "\x93NUMPY" major minor | header length (u16 LE for 1.0, u32 LE for 2.0
 *   and 3.0) | header: a Python dict literal, padded with spaces, ending in
 *   '\n' | the data, C order, in the byte order the header's descr says. */
#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define ALIGN 64               /* numpy pads magic+length+header to this */
#define GROWTH_DIGITS 21       /* numpy's spare room for the first axis */
#define MAX_HEADER (1u << 20)  /* a larger header is not a real array's */

static bool host_big_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 0;
}

static void swap_bytes(void *data, size_t count, size_t elem) {
    uint8_t *p = data;
    for (size_t i = 0; i < count; i++, p += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* What the header says, once checked. */
typedef struct npy_info {
    ry_dtype dtype;
    bool big_endian;           /* data bytes are big-endian */
    bool fortran;
    int ndim;
    int64_t shape[RY_MAX_RANK];
    size_t data_offset;        /* where the data starts in the file */
    size_t nbytes;             /* how much data the shape declares */
} npy_info;

/* ---- prefix: magic, version, header length ------------------------------ */

/* buf holds the first `avail` bytes of a file of `total` bytes. Sets
 * *hstart and *hlen to the header's place; checks it lies inside the file. */
static ry_status read_prefix(const char *name, const uint8_t *buf, size_t avail, size_t total,
                             size_t *hstart, size_t *hlen, ry_error *err) {
    if (total < MAGIC_LEN || avail < MAGIC_LEN || memcmp(buf, MAGIC, MAGIC_LEN) != 0)
        return ry_error_file(err, name, "not a .npy file: bad magic at byte 0 (expected \\x93NUMPY)");
    if (avail < 8)
        return ry_error_file(err, name, "header truncated at byte %zu: no version", avail);
    int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return ry_error_file(err, name, "unsupported .npy version %d.%d at byte 6 (1.0, 2.0 and 3.0 are)",
                             major, minor);
    size_t lenlen = major == 1 ? 2 : 4;
    if (avail < 8 + lenlen)
        return ry_error_file(err, name, "header truncated at byte %zu: no header length", avail);
    size_t n = (size_t)buf[8] | (size_t)buf[9] << 8;
    if (lenlen == 4) n |= (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (n > MAX_HEADER)
        return ry_error_file(err, name, "absurd header length %zu at byte 8 (more than %u)", n,
                             MAX_HEADER);
    *hstart = 8 + lenlen;
    *hlen = n;
    if (total - *hstart < n)
        return ry_error_file(err, name,
                             "header truncated: %zu bytes declared at byte 8 but only %zu follow",
                             n, total - *hstart);
    return RY_OK;
}

/* ---- the header dict ------------------------------------------------------
 *   dict  -> '{' [item (',' item)* [',']] '}' spaces
 *   item  -> string ':' value
 *   value -> string | 'True' | 'False' | tuple
 *   tuple -> '(' [int (',' int)* [',']] ')'
 * Keys may come in any order; each of descr, fortran_order, shape exactly
 * once and nothing else (numpy insists on the same). */

typedef struct cursor {
    const char *s;
    size_t i, n;
    size_t base;               /* file offset of s[0], for messages */
    const char *name;
    ry_error *err;
} cursor;

static ry_status fail(cursor *c, const char *what) {
    return ry_error_file(c->err, c->name, "malformed header at byte %zu: %s", c->base + c->i, what);
}

static void skip_ws(cursor *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' ||
                           c->s[c->i] == '\r'))
        c->i++;
}

/* Skips spaces then consumes ch if it is next. */
static bool accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == ch) {
        c->i++;
        return true;
    }
    return false;
}

static bool accept_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t k = strlen(w);
    if (c->n - c->i >= k && memcmp(c->s + c->i, w, k) == 0) {
        c->i += k;
        return true;
    }
    return false;
}

/* string -> "'" chars "'" | '"' chars '"'  (no escapes: no valid key or
 * descr needs one). Points *out into the header, not NUL-terminated. */
static ry_status parse_string(cursor *c, const char **out, size_t *len) {
    skip_ws(c);
    if (c->i >= c->n || (c->s[c->i] != '\'' && c->s[c->i] != '"')) return fail(c, "expected a string");
    char q = c->s[c->i++];
    size_t start = c->i;
    while (c->i < c->n && c->s[c->i] != q) {
        if (c->s[c->i] == '\\' || c->s[c->i] == '\n') return fail(c, "unsupported character in string");
        c->i++;
    }
    if (c->i >= c->n) return fail(c, "unterminated string");
    *out = c->s + start;
    *len = c->i - start;
    c->i++;
    return RY_OK;
}

/* descr -> order kind size, e.g. '<f4', '|b1', '>i8'. */
static ry_status parse_descr(cursor *c, npy_info *info) {
    size_t at = c->i;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == '[') {
        return fail(c, "structured dtypes (a list descr) are not supported");
    }
    const char *d;
    size_t n;
    if (parse_string(c, &d, &n) != RY_OK) return RY_ERR;
    static const struct {
        const char *code;
        ry_dtype dtype;
    } codes[] = {{"f2", RY_FLOAT16}, {"f4", RY_FLOAT32}, {"f8", RY_FLOAT64}, {"i1", RY_INT8},
                 {"i4", RY_INT32},   {"i8", RY_INT64},   {"u1", RY_UINT8},   {"b1", RY_BOOL},
                 {"i2", RY_INT16},   {"u2", RY_UINT16}};
    char order = n > 0 ? d[0] : 0;
    bool has_order = order == '<' || order == '>' || order == '|' || order == '=';
    const char *code = has_order ? d + 1 : d;
    size_t clen = has_order ? n - 1 : n;
    if (clen >= 1 && code[0] == 'O') {
        c->i = at;
        skip_ws(c);
        return ry_error_file(c->err, c->name,
                             "object arrays (descr '%.*s' at byte %zu) cannot be read: they hold "
                             "pickled Python objects",
                             (int)(n < 32 ? n : 32), d, c->base + c->i);
    }
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
        if (clen != 2 || memcmp(code, codes[k].code, 2) != 0) continue;
        size_t size = ry_dtype_size(codes[k].dtype);
        if (order == '|' && size > 1) break; /* '|' claims no byte order: only for bytes */
        info->dtype = codes[k].dtype;
        info->big_endian = size > 1 && (order == '>' || (order == '=' && host_big_endian()) ||
                                        (!has_order && host_big_endian()));
        return RY_OK;
    }
    c->i = at;
    skip_ws(c);
    return ry_error_file(c->err, c->name,
                         "unsupported dtype '%.*s' at byte %zu (relayc reads <f2 <f4 <f8 |i1 <i4 "
                         "<i8 |u1 |b1 and their big-endian forms)",
                         (int)(n < 32 ? n : 32), d, c->base + c->i);
}

static ry_status parse_bool(cursor *c, bool *out) {
    if (accept_word(c, "True")) *out = true;
    else if (accept_word(c, "False")) *out = false;
    else return fail(c, "expected True or False for 'fortran_order'");
    return RY_OK;
}

/* int -> ['-'] digits ['L']; a negative one is refused with its value. */
static ry_status parse_dim(cursor *c, int64_t *out) {
    skip_ws(c);
    size_t at = c->i;
    bool neg = c->i < c->n && c->s[c->i] == '-';
    if (neg) c->i++;
    if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9') return fail(c, "expected a dimension");
    int64_t v = 0;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c->s[c->i] - '0', &v)) {
            c->i = at;
            return fail(c, "dimension too large");
        }
        c->i++;
    }
    if (c->i < c->n && c->s[c->i] == 'L') c->i++; /* Python 2 long */
    if (neg && v != 0) {
        c->i = at;
        return ry_error_file(c->err, c->name, "negative dimension -%lld in shape at byte %zu",
                             (long long)v, c->base + at);
    }
    *out = v;
    return RY_OK;
}

static ry_status parse_shape(cursor *c, npy_info *info) {
    if (!accept(c, '(')) return fail(c, "expected '(' to open the shape");
    info->ndim = 0;
    if (accept(c, ')')) return RY_OK;
    for (;;) {
        int64_t d = 0;
        size_t at = c->i;
        if (parse_dim(c, &d) != RY_OK) return RY_ERR;
        if (info->ndim == RY_MAX_RANK) {
            c->i = at;
            skip_ws(c);
            return ry_error_file(c->err, c->name,
                                 "shape has more than %d dimensions (at byte %zu): rank too large",
                                 RY_MAX_RANK, c->base + c->i);
        }
        info->shape[info->ndim++] = d;
        if (accept(c, ')')) return RY_OK;
        if (!accept(c, ',')) return fail(c, "expected ',' or ')' in the shape");
        if (accept(c, ')')) return RY_OK;
    }
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

static ry_status parse_item(cursor *c, npy_info *info, int *seen) {
    const char *k;
    size_t kn, at = c->i;
    if (parse_string(c, &k, &kn) != RY_OK) return RY_ERR;
    int key = kn == 5 && memcmp(k, "descr", 5) == 0           ? KEY_DESCR
              : kn == 13 && memcmp(k, "fortran_order", 13) == 0 ? KEY_FORTRAN
              : kn == 5 && memcmp(k, "shape", 5) == 0           ? KEY_SHAPE
                                                                : 0;
    if (!key || (*seen & key)) {
        c->i = at;
        skip_ws(c);
        return ry_error_file(c->err, c->name, "malformed header at byte %zu: %s key '%.*s'",
                             c->base + c->i, key ? "duplicate" : "unexpected",
                             (int)(kn < 32 ? kn : 32), k);
    }
    *seen |= key;
    if (!accept(c, ':')) return fail(c, "expected ':' after a key");
    if (key == KEY_DESCR) return parse_descr(c, info);
    if (key == KEY_FORTRAN) return parse_bool(c, &info->fortran);
    return parse_shape(c, info);
}

static ry_status parse_dict(cursor *c, npy_info *info) {
    int seen = 0;
    if (!accept(c, '{')) return fail(c, "expected '{'");
    while (!accept(c, '}')) {
        if (parse_item(c, info, &seen) != RY_OK) return RY_ERR;
        if (accept(c, '}')) break;
        if (!accept(c, ',')) return fail(c, "expected ',' or '}'");
    }
    skip_ws(c);
    if (c->i != c->n) return fail(c, "unexpected text after the header dict");
    if (!(seen & KEY_DESCR)) return fail(c, "no 'descr' key");
    if (!(seen & KEY_FORTRAN)) return fail(c, "no 'fortran_order' key");
    if (!(seen & KEY_SHAPE)) return fail(c, "no 'shape' key");
    return RY_OK;
}

/* Fortran order matters only when two or more axes are longer than 1:
 * otherwise both orders lay down the same bytes and the file reads as is
 * (numpy itself writes False for such arrays, other writers may not). */
static bool layout_differs(const npy_info *info) {
    int long_axes = 0;
    for (int i = 0; i < info->ndim; i++) long_axes += info->shape[i] > 1;
    return long_axes > 1;
}

/* Parses the header at hdr[0..hlen) (file offset hstart) and works out the
 * data's size, checked for overflow. */
static ry_status read_header(const char *name, const char *hdr, size_t hstart, size_t hlen,
                             npy_info *info, ry_error *err) {
    cursor c = {hdr, 0, hlen, hstart, name, err};
    memset(info, 0, sizeof *info);
    if (parse_dict(&c, info) != RY_OK) return RY_ERR;
    if (info->fortran && layout_differs(info))
        return ry_error_file(err, name, "Fortran-order arrays are not supported "
                                        "(save np.ascontiguousarray(a) instead)");
    /* numpy's rule, as ry_tensor_new applies it: the dimensions other than
     * zero may not multiply to more than PTRDIFF_MAX bytes. */
    int64_t bytes = (int64_t)ry_dtype_size(info->dtype);
    bool empty = false;
    for (int i = 0; i < info->ndim; i++) {
        if (info->shape[i] == 0) empty = true;
        else if (__builtin_mul_overflow(bytes, info->shape[i], &bytes) || (uint64_t)bytes > PTRDIFF_MAX)
            return ry_error_file(err, name, "shape overflows: the array would not fit in memory");
    }
    info->nbytes = empty ? 0 : (size_t)bytes;
    info->data_offset = hstart + hlen;
    return RY_OK;
}

/* The file holds exactly the declared data, no more and no less. */
static ry_status check_data_len(const char *name, const npy_info *info, size_t total, ry_error *err) {
    size_t have = total - info->data_offset;
    if (have < info->nbytes)
        return ry_error_file(err, name,
                             "data truncated: the shape needs %zu bytes from byte %zu but only %zu "
                             "are there",
                             info->nbytes, info->data_offset, have);
    if (have > info->nbytes)
        return ry_error_file(err, name,
                             "%zu bytes of extra data after the array at byte %zu (the shape "
                             "declares %zu bytes)",
                             have - info->nbytes, info->data_offset + info->nbytes, info->nbytes);
    return RY_OK;
}

static ry_tensor *new_tensor(const char *name, const npy_info *info, ry_error *err) {
    ry_tensor *t = ry_tensor_new(info->dtype, info->ndim, info->shape);
    if (!t) ry_error_file(err, name, "out of memory for a %zu-byte array", info->nbytes);
    return t;
}

/* Puts freshly read bytes into the host's order and bools into {0, 1}. */
static void fix_data(ry_tensor *t, const npy_info *info) {
    size_t elem = ry_dtype_size(t->dtype);
    if (elem > 1 && info->big_endian != host_big_endian()) swap_bytes(t->data, (size_t)t->size, elem);
    if (t->dtype == RY_BOOL)
        for (int64_t i = 0; i < t->size; i++) ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
}

ry_status ry_npy_read_mem(const char *name, const void *buf, size_t len, ry_tensor **out,
                          ry_error *err) {
    *out = NULL;
    const uint8_t *b = buf;
    size_t hstart = 0, hlen = 0;
    npy_info info;
    if (!b) len = 0;
    if (read_prefix(name, b, len, len, &hstart, &hlen, err) != RY_OK ||
        read_header(name, (const char *)b + hstart, hstart, hlen, &info, err) != RY_OK ||
        check_data_len(name, &info, len, err) != RY_OK)
        return RY_ERR;
    ry_tensor *t = new_tensor(name, &info, err);
    if (!t) return RY_ERR;
    memcpy(t->data, b + info.data_offset, info.nbytes);
    fix_data(t, &info);
    *out = t;
    return RY_OK;
}

/* ---- reading a file ------------------------------------------------------
 * Reads only the header into memory, then the data straight into the new
 * tensor, so a large file is not held twice. */

static ry_status read_exact(FILE *f, void *p, size_t n, const char *path, ry_error *err) {
    if (n && fread(p, 1, n, f) != n)
        return ry_error_file(err, path, "read failed: %s", ferror(f) ? strerror(errno) : "file shrank");
    return RY_OK;
}

static ry_status read_file(FILE *f, const char *path, size_t total, ry_tensor **out, ry_error *err) {
    uint8_t pre[12];
    size_t avail = total < sizeof pre ? total : sizeof pre, hstart = 0, hlen = 0;
    if (read_exact(f, pre, avail, path, err) != RY_OK ||
        read_prefix(path, pre, avail, total, &hstart, &hlen, err) != RY_OK)
        return RY_ERR;
    /* The prefix read may have run past the header's start (version 1.0). */
    if (fseeko(f, (off_t)hstart, SEEK_SET) != 0)
        return ry_error_file(err, path, "seek failed: %s", strerror(errno));
    char *hdr = ry_malloc(hlen);
    if (!hdr) return ry_error_file(err, path, "out of memory for a %zu-byte header", hlen);
    npy_info info;
    ry_status st = read_exact(f, hdr, hlen, path, err);
    if (st == RY_OK) st = read_header(path, hdr, hstart, hlen, &info, err);
    ry_free(hdr);
    if (st != RY_OK || check_data_len(path, &info, total, err) != RY_OK) return RY_ERR;
    ry_tensor *t = new_tensor(path, &info, err);
    if (!t) return RY_ERR;
    if (read_exact(f, t->data, info.nbytes, path, err) != RY_OK) {
        ry_tensor_release(t);
        return RY_ERR;
    }
    fix_data(t, &info);
    *out = t;
    return RY_OK;
}

ry_status ry_npy_read(const char *path, ry_tensor **out, ry_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ry_error_file(err, path, "cannot open: %s", strerror(errno));
    struct stat st;
    ry_status s;
    if (fstat(fileno(f), &st) != 0)
        s = ry_error_file(err, path, "cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = ry_error_file(err, path, "not a regular file");
    else if ((uintmax_t)st.st_size > SIZE_MAX)
        s = ry_error_file(err, path, "file too large");
    else
        s = read_file(f, path, (size_t)st.st_size, out, err);
    fclose(f);
    return s;
}

/* ---- writing ----------------------------------------------------------------
 * Exactly numpy's bytes: keys sorted, "'key': repr(value), " each, then
 * spare spaces for the first axis to grow, then padding to ALIGN ending in
 * '\n'. Version 1.0 unless the header outgrows its 16-bit length. */

static const char *descr_of(ry_dtype d) {
    static const char *names[RY_DTYPE_COUNT] = {
        [RY_FLOAT32] = "<f4", [RY_FLOAT64] = "<f8", [RY_FLOAT16] = "<f2", [RY_INT8] = "|i1",
        [RY_INT32] = "<i4",   [RY_INT64] = "<i8",   [RY_UINT8] = "|u1",   [RY_BOOL] = "|b1",
        [RY_INT16] = "<i2",   [RY_UINT16] = "<u2",
    };
    return names[d];
}

/* Builds magic, length and header into out (at least 1024 bytes, which
 * rank <= 8 with 19-digit dimensions never fills); returns its length. */
static size_t build_header(const ry_tensor *t, char *out, size_t cap) {
    char dict[600], shape[300];
    size_t sl = (size_t)snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < t->ndim; i++)
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", i ? ", " : "",
                               (long long)t->shape[i]);
    snprintf(shape + sl, sizeof shape - sl, t->ndim == 1 ? ",)" : ")");
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr_of(t->dtype), shape);
    if (t->ndim > 0) {
        char first[32];
        int fl = snprintf(first, sizeof first, "%lld", (long long)t->shape[0]);
        dl += snprintf(dict + dl, sizeof dict - (size_t)dl, "%*s", GROWTH_DIGITS - fl, "");
    }
    size_t hlen = (size_t)dl + 1; /* with the final '\n' */
    size_t prefix = 10, pad = ALIGN - (prefix + hlen) % ALIGN;
    if (hlen + pad > 65535) { /* version 2.0: a 32-bit length */
        prefix = 12;
        pad = ALIGN - (prefix + hlen) % ALIGN;
    }
    size_t total = prefix + hlen + pad, field = hlen + pad;
    if (total > cap) return 0;
    memcpy(out, MAGIC, MAGIC_LEN);
    out[6] = prefix == 10 ? 1 : 2;
    out[7] = 0;
    for (size_t k = 0; k < prefix - 8; k++) out[8 + k] = (char)((field >> (8 * k)) & 0xff);
    memcpy(out + prefix, dict, (size_t)dl);
    memset(out + prefix + dl, ' ', pad);
    out[total - 1] = '\n';
    return total;
}

/* Data in little-endian order: as is on a little-endian host, swapped a
 * chunk at a time otherwise. */
static bool write_data(FILE *f, const ry_tensor *t) {
    size_t n = ry_tensor_nbytes(t), elem = ry_dtype_size(t->dtype);
    if (elem == 1 || !host_big_endian()) return fwrite(t->data, 1, n, f) == n;
    uint8_t chunk[4096];
    for (size_t off = 0; off < n; off += sizeof chunk) {
        size_t k = n - off < sizeof chunk ? n - off : sizeof chunk;
        memcpy(chunk, (const uint8_t *)t->data + off, k);
        swap_bytes(chunk, k / elem, elem);
        if (fwrite(chunk, 1, k, f) != k) return false;
    }
    return true;
}

/* Writes a temporary beside PATH (ry_tmpfile_create: never through a
 * planted link), flushes it to disk, then renames it over PATH, so a crash
 * or a full disk leaves either the old file or the new one, never half. */
ry_status ry_npy_write(const char *path, const ry_tensor *t, ry_error *err) {
    if (!t || (unsigned)t->dtype >= RY_DTYPE_COUNT)
        return ry_error_file(err, path, "no tensor to write");
    if (t->device.kind != RY_DEVICE_CPU)
        return ry_error_file(err, path, "cannot write a tensor on %s: copy it to the CPU first",
                             ry_device_name(t->device));
    char header[1024];
    size_t hn = build_header(t, header, sizeof header);
    if (hn == 0) return ry_error_file(err, path, "header too long");
    char tmp[4096];
    int fd;
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, err)) return RY_ERR;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        ry_error_file(err, path, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return RY_ERR;
    }
    bool ok = fwrite(header, 1, hn, f) == hn && write_data(f, t) && fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        ry_error_file(err, path, "write failed: %s", strerror(saved));
    }
    return ok ? RY_OK : RY_ERR;
}
