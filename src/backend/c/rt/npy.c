/*
 * npy.c (export runtime): reading and writing NumPy .npy files for the
 * exported example program: little-endian float32, float64, int32, int64,
 * bool, int8, uint8, int16, uint16 and float16, C order, format versions 1
 * to 3 on read, 1 on write. dtype indices are the model header's codes
 * (0 float32, 1 float64, 2 int32, 3 int64, 4 bool, 6 int8, 7 uint8,
 * 8 int16, 9 uint16, 10 float16; 5, an ADT value, has no .npy form).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy_array {
    int dtype;
    int ndim;
    int64_t shape[8];
    void *data;
} npy_array;

#define NPY_NDTYPES 11
static const char *const npy_descr[NPY_NDTYPES] = {"<f4", "<f8", "<i4", "<i8", "|b1", NULL, "|i1", "|u1", "<i2", "<u2", "<f2"};
static const size_t npy_size[NPY_NDTYPES] = {4, 8, 4, 8, 1, 0, 1, 1, 2, 2, 2};

static int npy_fail(char *msg, size_t n, const char *path, const char *why) {
    snprintf(msg, n, "%s: %s", path, why);
    return -1;
}

/* The value of 'key' in the header dict h: a pointer just after "'key':". */
static const char *npy_key(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p = strchr(p + strlen(key), ':');
    if (!p) return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static int npy_read(const char *path, npy_array *t, char *msg, size_t n) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return npy_fail(msg, n, path, "cannot open");
    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fclose(f);
        return npy_fail(msg, n, path, "not a .npy file");
    }
    size_t hl = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (pre[6] >= 2) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            fclose(f);
            return npy_fail(msg, n, path, "truncated header");
        }
        hl |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    char *h = hl < (1u << 20) ? malloc(hl + 1) : NULL;
    if (!h || fread(h, 1, hl, f) != hl) {
        free(h);
        fclose(f);
        return npy_fail(msg, n, path, "bad header");
    }
    h[hl] = 0;
    const char *d = npy_key(h, "'descr'"), *fo = npy_key(h, "'fortran_order'"), *s = npy_key(h, "'shape'");
    int dt = -1;
    for (int i = 0; d && i < NPY_NDTYPES; i++)
        if (npy_descr[i] && strncmp(d + 1, npy_descr[i], 3) == 0) dt = i;
    int64_t count = 1;
    int ok = dt >= 0 && fo && strncmp(fo, "False", 5) == 0 && s && *s == '(';
    for (s = ok ? s + 1 : s; ok && *s != ')';) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || t->ndim == 8 || (v && count > INT64_MAX / v)) ok = 0;
        else t->shape[t->ndim++] = v, count *= v, s = end;
    }
    free(h);
    if (!ok) {
        fclose(f);
        return npy_fail(msg, n, path, "unsupported .npy header (dtype, order or shape)");
    }
    t->dtype = dt;
    size_t bytes = (size_t)count * npy_size[dt];
    t->data = malloc(bytes ? bytes : 1);
    if (!t->data || fread(t->data, 1, bytes, f) != bytes) {
        free(t->data);
        t->data = NULL;
        fclose(f);
        return npy_fail(msg, n, path, "truncated data");
    }
    fclose(f);
    return 0;
}

static int npy_write(const char *path, const npy_array *t, char *msg, size_t n) {
    char h[256];
    int k = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", npy_descr[t->dtype]);
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        k += snprintf(h + k, sizeof h - (size_t)k, "%lld%s", (long long)t->shape[i], t->ndim == 1 ? "," : i + 1 < t->ndim ? ", " : "");
        count *= t->shape[i];
    }
    k += snprintf(h + k, sizeof h - (size_t)k, "), }");
    while ((10 + k + 1) % 64) h[k++] = ' ';
    h[k++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(k & 0xff), (unsigned char)(k >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f) return npy_fail(msg, n, path, "cannot create");
    size_t bytes = (size_t)count * npy_size[t->dtype];
    int bad = fwrite(pre, 1, 10, f) != 10 || fwrite(h, 1, (size_t)k, f) != (size_t)k ||
              fwrite(t->data, 1, bytes, f) != bytes;
    if (fclose(f) != 0) bad = 1;
    return bad ? npy_fail(msg, n, path, "cannot write") : 0;
}
