/*
 * checkpoint_h5.c: the small pieces the checkpoint reader and writer share:
 * the CRC-32 stream that defines a checkpoint's checksum (its order is
 * written in checkpoint.h), keeping libhdf5 quiet and turning its error
 * stack into one line of ours, and scalar/array/string attributes on "/".
 * Which attributes exist and what they mean is decided by the callers.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/checkpoint_impl.h"

/* ---- CRC-32 ---------------------------------------------------------------- */

uint32_t ry_ckpt_crc(uint32_t crc, const void *p, size_t n) {
    const Bytef *b = p;
    uLong c = crc;
    /* zlib takes uInt lengths: feed big buffers in 1 GiB pieces */
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, b, piece);
        b += piece;
        n -= piece;
    }
    return (uint32_t)c;
}

static bool host_is_little(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

uint32_t ry_ckpt_crc_u64(uint32_t crc, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return ry_ckpt_crc(crc, b, 8);
}

uint32_t ry_ckpt_crc_elems(uint32_t crc, const void *p, size_t count, size_t esize) {
    if (host_is_little() || esize == 1) return ry_ckpt_crc(crc, p, count * esize);
    /* big-endian host: hash each element's bytes reversed */
    const uint8_t *b = p;
    uint8_t tmp[8];
    for (size_t i = 0; i < count; i++) {
        for (size_t k = 0; k < esize; k++) tmp[k] = b[i * esize + esize - 1 - k];
        crc = ry_ckpt_crc(crc, tmp, esize);
    }
    return crc;
}

uint32_t ry_ckpt_crc_string(uint32_t crc, const char *s) {
    size_t n = s ? strlen(s) : 0;
    crc = ry_ckpt_crc_u64(crc, n);
    return ry_ckpt_crc(crc, s ? s : "", n);
}

uint32_t ry_ckpt_crc_combine(uint32_t a, uint32_t b, uint64_t len_b) {
    return (uint32_t)crc32_combine(a, b, (z_off_t)len_b);
}

uint32_t ry_ckpt_crc_data(const ry_tensor *t) {
    return ry_ckpt_crc_elems(0, t->data, (size_t)t->size, ry_dtype_size(t->dtype));
}

uint32_t ry_ckpt_crc_entry(uint32_t crc, const char *path, ry_dtype dtype, int ndim,
                           const int64_t *shape) {
    const char *dt = ry_dtype_name(dtype);
    crc = ry_ckpt_crc(crc, path, strlen(path) + 1);
    crc = ry_ckpt_crc(crc, dt, strlen(dt) + 1);
    crc = ry_ckpt_crc_u64(crc, (uint64_t)ndim);
    for (int d = 0; d < ndim; d++) crc = ry_ckpt_crc_u64(crc, (uint64_t)shape[d]);
    return crc;
}

uint32_t ry_ckpt_crc_meta(uint32_t crc, const ry_checkpoint_meta *meta) {
    crc = ry_ckpt_crc_u64(crc, (uint64_t)meta->step);
    crc = ry_ckpt_crc_u64(crc, (uint64_t)meta->epoch);
    crc = ry_ckpt_crc_u64(crc, (uint64_t)meta->rng_len);
    for (int i = 0; i < meta->rng_len; i++) crc = ry_ckpt_crc_u64(crc, meta->rng[i]);
    crc = ry_ckpt_crc_string(crc, meta->model_text);
    return ry_ckpt_crc_string(crc, meta->config);
}

/* name -> component ("/" component)*, components non-empty and not "."
 * or ".."; slashes only where allowed (parameter names, which Relay
 * identifiers may contain: they become nested groups). */
bool ry_ckpt_name_ok(const char *name, bool slashes) {
    if (!name || !name[0]) return false;
    for (const char *c = name;;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return false;
        if (!c[n]) return true;
        if (!slashes) return false;
        c += n + 1;
    }
}

/* "a/b" lies in group "a" when a is a whole leading component of it. */
static bool inside(const char *group, const char *name) {
    size_t n = strlen(group);
    return strncmp(group, name, n) == 0 && name[n] == '/';
}

ry_status ry_checkpoint_check_names(int n, const char *const *names, int *bad, ry_error *err) {
    for (int i = 0; i < n; i++) {
        *bad = i;
        if (!ry_ckpt_name_ok(names[i], true))
            return ry_error_at(err, RY_NO_SPAN,
                               "'%s' cannot be stored in a checkpoint (an empty, '.' or '..' "
                               "component)", names[i] ? names[i] : "");
        for (int j = 0; j < n; j++)
            if (j != i && (strcmp(names[i], names[j]) == 0 || inside(names[i], names[j])))
                return ry_error_at(err, RY_NO_SPAN,
                                   "'%s' cannot be stored in a checkpoint beside '%s' (a '/' in a "
                                   "name makes a group: /params/%s would be both a dataset and a "
                                   "group)", names[i], names[j], names[i]);
    }
    *bad = -1;
    return RY_OK;
}

/* ---- libhdf5's error stack ---------------------------------------------- */

/* Walked from the API call inward, so the last description seen is the
 * innermost one: the most specific ("truncated file: eof = ..."). */
static herr_t keep_innermost(unsigned n, const H5E_error2_t *e, void *data) {
    (void)n;
    if (e->desc && e->desc[0]) snprintf(data, 256, "%s", e->desc);
    return 0;
}

/* Every HDF5 API call clears the error stack on entry, so by the time a
 * caller has closed its handles the reason for a failure is gone. Instead
 * of printing, the automatic handler (run as the failing call returns)
 * keeps the innermost message here until ry_ckpt_h5_error takes it. */
static _Thread_local char last_failure[256];

static herr_t capture(hid_t stack, void *data) {
    (void)data;
    last_failure[0] = '\0';
    H5Ewalk2(stack, H5E_WALK_DOWNWARD, keep_innermost, last_failure);
    return 0;
}

void ry_ckpt_quiet_begin(ry_ckpt_quiet *q) {
    H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2(H5E_DEFAULT, capture, NULL);
    last_failure[0] = '\0';
}

void ry_ckpt_quiet_end(ry_ckpt_quiet *q) {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
    last_failure[0] = '\0';
}

void ry_ckpt_h5_tidy(char *msg) {
    /* "file write failed: time = Tue ...\n, filename = ..., errno = 28,
     * error message = 'No space left on device', buf = ..." */
    const char *e = strstr(msg, "errno = "), *m = strstr(msg, "error message = '");
    if (e && m) {
        int code = atoi(e + 8);
        const char *text = m + 17, *end = strchr(text, '\'');
        char head[64], tidy[256];
        size_t hl = strcspn(msg, ":");
        snprintf(head, sizeof head, "%.*s", (int)hl, msg);
        snprintf(tidy, sizeof tidy, "%s: %.*s (errno %d)", head,
                 (int)(end ? (size_t)(end - text) : strlen(text)), text, code);
        strcpy(msg, tidy);
        return;
    }
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

ry_status ry_ckpt_h5_error(ry_error *err, const char *path, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!last_failure[0]) H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, last_failure);
    H5Eclear2(H5E_DEFAULT);
    ry_ckpt_h5_tidy(last_failure);
    ry_status st = last_failure[0] ? ry_error_file(err, path, "%s: %s", what, last_failure)
                                   : ry_error_file(err, path, "%s", what);
    last_failure[0] = '\0';
    return st;
}

/* ---- writing attributes ----------------------------------------------------
 * Each returns RY_ERR with the HDF5 stack left for ry_ckpt_h5_error. */

static ry_status write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space,
                            const void *buf) {
    ry_status st = RY_ERR;
    hid_t a = space < 0 ? -1 : H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0 && H5Awrite(a, mtype, buf) >= 0) st = RY_OK;
    if (a >= 0 && H5Aclose(a) < 0) st = RY_ERR;
    if (space >= 0) H5Sclose(space);
    return st;
}

ry_status ry_ckpt_attr_write_i64(hid_t obj, const char *name, int64_t v) {
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, H5Screate(H5S_SCALAR), &v);
}

ry_status ry_ckpt_attr_write_u32(hid_t obj, const char *name, uint32_t v) {
    return write_attr(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, H5Screate(H5S_SCALAR), &v);
}

ry_status ry_ckpt_attr_write_u64s(hid_t obj, const char *name, const uint64_t *v, int n) {
    hsize_t dim = (hsize_t)n;
    static const uint64_t none = 0; /* a valid pointer for an empty array */
    return write_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, H5Screate_simple(1, &dim, NULL),
                      n ? (const void *)v : &none);
}

/* Fixed-length UTF-8, NUL-padded, exactly the string's bytes (one NUL for
 * "": HDF5 has no zero-length fixed strings). */
ry_status ry_ckpt_attr_write_str(hid_t obj, const char *name, const char *s) {
    if (!s) s = "";
    size_t n = strlen(s);
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return RY_ERR;
    ry_status st = RY_ERR;
    if (H5Tset_size(t, n ? n : 1) >= 0 && H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0 &&
        H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        st = write_attr(obj, name, t, t, H5Screate(H5S_SCALAR), s);
    H5Tclose(t);
    return st;
}

/* ---- reading attributes --------------------------------------------------- */

/* Opens attribute name and checks it holds `count` elements (-1: any);
 * *n gets the element count. */
static hid_t open_attr(hid_t obj, const char *path, const char *name, hssize_t count,
                       hssize_t *n, ry_error *err) {
    if (H5Aexists(obj, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        ry_error_file(err, path, "attribute '%s' is missing (not a relayc checkpoint?)", name);
        return -1;
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) {
        ry_ckpt_h5_error(err, path, "cannot open attribute '%s'", name);
        return -1;
    }
    hid_t space = H5Aget_space(a);
    *n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (space >= 0) H5Sclose(space);
    if (*n < 0 || rank > 1 || (count >= 0 && *n != count)) {
        H5Aclose(a);
        H5Eclear2(H5E_DEFAULT);
        ry_error_file(err, path, "attribute '%s' has the wrong shape", name);
        return -1;
    }
    return a;
}

/* Reads an integer attribute of any integer file type (HDF5 converts),
 * rejecting other classes so a string is not silently read as a number. */
static ry_status read_int_attr(hid_t obj, const char *path, const char *name, hid_t mtype,
                               void *buf, hssize_t count, hssize_t *n, ry_error *err) {
    hid_t a = open_attr(obj, path, name, count, n, err);
    if (a < 0) return RY_ERR;
    hid_t t = H5Aget_type(a);
    ry_status st = RY_ERR;
    if (t >= 0 && H5Tget_class(t) == H5T_INTEGER) {
        if (H5Aread(a, mtype, buf) >= 0) st = RY_OK;
        else ry_ckpt_h5_error(err, path, "cannot read attribute '%s'", name);
    } else {
        H5Eclear2(H5E_DEFAULT);
        ry_error_file(err, path, "attribute '%s' is not an integer", name);
    }
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return st;
}

ry_status ry_ckpt_attr_read_i64(hid_t obj, const char *path, const char *name, int64_t *v,
                                ry_error *err) {
    hssize_t n;
    return read_int_attr(obj, path, name, H5T_NATIVE_INT64, v, 1, &n, err);
}

ry_status ry_ckpt_attr_read_u32(hid_t obj, const char *path, const char *name, uint32_t *v,
                                ry_error *err) {
    hssize_t n;
    return read_int_attr(obj, path, name, H5T_NATIVE_UINT32, v, 1, &n, err);
}

ry_status ry_ckpt_attr_read_u64s(hid_t obj, const char *path, const char *name, uint64_t *v,
                                 int max, int *n, ry_error *err) {
    hssize_t count;
    hid_t a = open_attr(obj, path, name, -1, &count, err);
    if (a < 0) return RY_ERR;
    H5Aclose(a);
    if (count > max)
        return ry_error_file(err, path, "attribute '%s' has %lld words, more than %d", name,
                             (long long)count, max);
    uint64_t tmp[RY_CHECKPOINT_RNG_MAX + 1];
    if (read_int_attr(obj, path, name, H5T_NATIVE_UINT64, tmp, count, &count, err)) return RY_ERR;
    memcpy(v, tmp, (size_t)count * sizeof *v);
    *n = (int)count;
    return RY_OK;
}

/* Fixed-length strings (ours) and variable-length ones (h5py's default). */
static ry_status read_str(hid_t a, hid_t t, const char *path, const char *name, char **s,
                          ry_error *err) {
    if (H5Tis_variable_str(t) > 0) {
        hid_t m = H5Tcopy(H5T_C_S1);
        char *vl = NULL;
        ry_status st = RY_ERR;
        if (m >= 0 && H5Tset_size(m, H5T_VARIABLE) >= 0 && H5Tset_cset(m, H5Tget_cset(t)) >= 0 &&
            H5Aread(a, m, &vl) >= 0) {
            *s = ry_strdup(vl ? vl : "");
            st = *s ? RY_OK : ry_error_file(err, path, "out of memory reading '%s'", name);
        } else {
            ry_ckpt_h5_error(err, path, "cannot read attribute '%s'", name);
        }
        if (vl) H5free_memory(vl);
        if (m >= 0) H5Tclose(m);
        return st;
    }
    size_t size = H5Tget_size(t);
    char *buf = size ? ry_malloc(size + 1) : NULL;
    if (!buf) return ry_error_file(err, path, "cannot read attribute '%s': out of memory", name);
    hid_t m = H5Tcopy(H5T_C_S1);
    /* HDF5 converts between pads but not between ASCII and UTF-8 */
    if (m < 0 || H5Tset_size(m, size) < 0 || H5Tset_strpad(m, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(m, H5Tget_cset(t)) < 0 || H5Aread(a, m, buf) < 0) {
        if (m >= 0) H5Tclose(m);
        ry_free(buf);
        return ry_ckpt_h5_error(err, path, "cannot read attribute '%s'", name);
    }
    H5Tclose(m);
    buf[size] = '\0';
    *s = buf;
    return RY_OK;
}

ry_status ry_ckpt_attr_read_str(hid_t obj, const char *path, const char *name, char **s,
                                ry_error *err) {
    hssize_t n;
    hid_t a = open_attr(obj, path, name, 1, &n, err);
    if (a < 0) return RY_ERR;
    hid_t t = H5Aget_type(a);
    ry_status st;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
        st = read_str(a, t, path, name, s, err);
    } else {
        H5Eclear2(H5E_DEFAULT);
        st = ry_error_file(err, path, "attribute '%s' is not a string", name);
    }
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return st;
}
