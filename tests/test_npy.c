/*
 * test_npy.c: .npy reading and writing against files numpy wrote (made by
 * tools/gen_npy_tests.py into tests/npy/): exact values for every dtype and
 * rank, big-endian data, header versions 2.0 and 3.0, odd but valid headers,
 * every refused or broken file with its message, byte-identical output,
 * atomic replacement, truncation and byte-flip fuzzing, and out-of-memory.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#define DIR_NPY "tests/npy/"

static const char *dtype_names[RY_DTYPE_COUNT] = {"float32", "float64", "float16", "int8",  "int32",
                                                  "int64",   "uint8",   "bool",    "int16", "uint16"};
static const int64_t rank_shapes[5][4] = {{0}, {5}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2}};

/* Element i of every generated array of dtype d: mirrors value_of() in
 * tools/gen_npy_tests.py, computed here independently. */
static double fixture_value(ry_dtype d, int64_t i) {
    double base = (double)((i * 7 + 3) % 19 - 9);
    switch (d) {
    case RY_FLOAT16: return base * 0.5;
    case RY_FLOAT32: return (float)(base * 0.5 + 0.1);
    case RY_FLOAT64: return base / 3.0;
    case RY_INT8: return base * 14;
    case RY_INT32: return base * 100003;
    case RY_INT64: return base * 1000000000007.0;
    case RY_UINT8: return (double)((i * 13 + 5) % 256);
    case RY_BOOL: return i % 3 == 0;
    case RY_INT16: return base * 3001;
    case RY_UINT16: return (double)((i * 2671 + 17) % 65536);
    default: return NAN;
    }
}

static void assert_values(const ry_tensor *t, ry_dtype d) {
    assert_int_equal(t->dtype, d);
    for (int64_t i = 0; i < t->size; i++)
        if (ry_tensor_get(t, i) != fixture_value(d, i))
            fail_msg("%s element %lld: got %.17g, expected %.17g", ry_dtype_name(d), (long long)i,
                     ry_tensor_get(t, i), fixture_value(d, i));
}

static void assert_shape(const ry_tensor *t, int ndim, const int64_t *shape) {
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
}

/* Whole file into a malloc'd buffer (test side, so plain malloc). */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* A fresh directory per test for written files, removed afterwards. */
static char tmpdir[64];

static int setup_tmp(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/relayc_npy_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state) {
    (void)state;
    DIR *d = opendir(tmpdir);
    if (!d) return 0;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (remove(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
    return 0;
}

static const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

/* Whether a temporary of path ("PATH.tmp.<pid>.XXXXXX") is left beside it. */
static bool tmp_left(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[256], prefix[200];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash + 1);
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));)
        found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return found;
}

/* ---- reading what numpy wrote -------------------------------------------- */

static void test_read_every_dtype_and_rank(void **state) {
    (void)state;
    for (int d = 0; d < RY_DTYPE_COUNT; d++)
        for (int r = 0; r <= 4; r++) {
            char path[128];
            snprintf(path, sizeof path, DIR_NPY "%s_r%d.npy", dtype_names[d], r);
            ry_tensor *t = test_npy(path);
            assert_shape(t, r, rank_shapes[r]);
            assert_values(t, (ry_dtype)d);
            ry_tensor_release(t);
        }
}

static void test_read_big_endian(void **state) {
    (void)state;
    const ry_dtype be[] = {RY_FLOAT16, RY_FLOAT32, RY_FLOAT64, RY_INT32, RY_INT64};
    for (size_t k = 0; k < sizeof be / sizeof be[0]; k++) {
        char path[128];
        snprintf(path, sizeof path, DIR_NPY "be_%s.npy", ry_dtype_name(be[k]));
        ry_tensor *t = test_npy(path);
        assert_shape(t, 2, (int64_t[]){2, 3});
        assert_values(t, be[k]);
        ry_tensor_release(t);
    }
}

static void test_read_versions(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = slurp(DIR_NPY "v2_float32.npy", &len);
    assert_int_equal(b[6], 2);
    free(b);
    ry_tensor *t = test_npy(DIR_NPY "v2_float32.npy");
    assert_shape(t, 2, (int64_t[]){2, 3});
    assert_values(t, RY_FLOAT32);
    ry_tensor_release(t);
    b = slurp(DIR_NPY "v3_int64.npy", &len);
    assert_int_equal(b[6], 3);
    free(b);
    t = test_npy(DIR_NPY "v3_int64.npy");
    assert_shape(t, 2, (int64_t[]){2, 3});
    assert_values(t, RY_INT64);
    ry_tensor_release(t);
}

static void test_read_empty(void **state) {
    (void)state;
    ry_tensor *t = test_npy(DIR_NPY "empty_float32.npy");
    assert_shape(t, 1, (int64_t[]){0});
    assert_int_equal(t->size, 0);
    assert_int_equal(t->dtype, RY_FLOAT32);
    ry_tensor_release(t);
    t = test_npy(DIR_NPY "empty_int32_2x0x3.npy");
    assert_shape(t, 3, (int64_t[]){2, 0, 3});
    assert_int_equal(t->size, 0);
    assert_int_equal(t->dtype, RY_INT32);
    ry_tensor_release(t);
}

static void test_read_special_floats(void **state) {
    (void)state;
    const double want[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 65504.0, 0x1p-14, 0x1p-24, -2.0, 1.0};
    ry_tensor *h = test_npy(DIR_NPY "special_float16.npy");
    ry_tensor *f = test_npy(DIR_NPY "special_float32.npy");
    assert_int_equal(h->size, 10);
    assert_int_equal(f->size, 12);
    for (int i = 0; i < 10; i++) {
        if (isnan(want[i])) {
            assert_true(isnan(ry_tensor_get(h, i)) && isnan(ry_tensor_get(f, i)));
            continue;
        }
        assert_true(ry_tensor_get(h, i) == want[i]);
        assert_int_equal(signbit(ry_tensor_get(h, i)), signbit(want[i]));
        /* float32 holds the values numpy rounded from these decimals */
        assert_true(ry_tensor_get(f, i) == (double)(float)want[i] || i == 6 || i == 7);
    }
    assert_true(ry_tensor_get(f, 6) == (double)6.1035156e-05f);
    assert_true(ry_tensor_get(f, 7) == (double)5.9604645e-08f);
    assert_true(ry_tensor_get(f, 10) == (double)3.4028235e38f);
    assert_true(ry_tensor_get(f, 11) == (double)1.4e-45f); /* float32 subnormal */
    ry_tensor_release(h);
    ry_tensor_release(f);
}

/* Keys reordered, double quotes, tabs, no padding, trailing commas. */
static void test_read_odd_headers(void **state) {
    (void)state;
    const char *files[] = {DIR_NPY "keys_reordered.npy", DIR_NPY "header_unpadded.npy"};
    for (int k = 0; k < 2; k++) {
        ry_tensor *t = test_npy(files[k]);
        assert_shape(t, 2, (int64_t[]){2, 3});
        assert_values(t, RY_FLOAT32);
        ry_tensor_release(t);
    }
    /* a 1-D array marked Fortran order has the same bytes: readable */
    ry_tensor *t = test_npy(DIR_NPY "fortran_1d.npy");
    assert_shape(t, 1, (int64_t[]){5});
    assert_values(t, RY_INT32);
    ry_tensor_release(t);
}

/* Headers built in memory: whitespace and spelling numpy's parser takes. */
static void test_read_mem_headers(void **state) {
    (void)state;
    const char *ok[] = {
        "{'descr':'<i4','fortran_order':False,'shape':(1,)}",
        "{\n 'shape': ( 1 , ),\n 'descr': \"<i4\",\n 'fortran_order': False,\n}\n",
        "{'fortran_order': False, 'shape': (1L,), 'descr': '=i4', }      \n",
        "{'descr':'i4','fortran_order':True,'shape':(1, 1, 1,)}",
        "{\t'descr'\t:\t'<i4'\t,\t'fortran_order'\t:\tFalse\t,\t'shape'\t:\t(1,)\t,\t}\r\n",
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        uint8_t buf[256];
        size_t hl = strlen(ok[k]);
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (uint8_t)hl;
        buf[9] = 0;
        memcpy(buf + 10, ok[k], hl);
        int32_t v = -123456;
        memcpy(buf + 10 + hl, &v, 4);
        ry_tensor *t = NULL;
        ry_error err;
        if (ry_npy_read_mem("mem.npy", buf, 14 + hl, &t, &err) != RY_OK)
            fail_msg("header %zu: %s", k, err.msg);
        assert_int_equal(t->dtype, RY_INT32);
        assert_int_equal(t->size, 1);
        assert_true(ry_tensor_get(t, 0) == -123456);
        ry_tensor_release(t);
    }
}

/* Bool bytes other than 0 and 1 (numpy keeps them) read as 1. */
static void test_read_bool_normalized(void **state) {
    (void)state;
    const char *hdr = "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }\n";
    uint8_t buf[128];
    size_t hl = strlen(hdr);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)hl;
    buf[9] = 0;
    memcpy(buf + 10, hdr, hl);
    memcpy(buf + 10 + hl, "\x00\x01\x02\xff", 4);
    ry_tensor *t = NULL;
    ry_error err;
    assert_int_equal(ry_npy_read_mem("b.npy", buf, 14 + hl, &t, &err), RY_OK);
    assert_int_equal(t->dtype, RY_BOOL);
    assert_memory_equal(t->data, "\x00\x01\x01\x01", 4);
    ry_tensor_release(t);
}

/* ---- refused and broken files ------------------------------------------- */

/* Reading path must fail with a message naming it that contains want (and
 * the same through ry_npy_read_mem). */
static void expect_error(const char *path, const char *want) {
    ry_tensor *t = (ry_tensor *)1;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_npy_read(path, &t, &err), RY_ERR);
    assert_null(t);
    assert_string_equal(err.file, path);
    if (!strstr(err.msg, want)) fail_msg("%s: message \"%s\" lacks \"%s\"", path, err.msg, want);
    size_t len;
    uint8_t *b = slurp(path, &len);
    ry_error err2;
    t = (ry_tensor *)1;
    assert_int_equal(ry_npy_read_mem(path, b, len, &t, &err2), RY_ERR);
    assert_null(t);
    assert_string_equal(err2.msg, err.msg);
    free(b);
}

static void test_refused_files(void **state) {
    (void)state;
    static const struct {
        const char *file, *msg;
    } cases[] = {
        {"fortran_2x3.npy", "Fortran-order arrays are not supported"},
        {"object.npy", "object arrays (descr '|O' at byte 20)"},
        {"complex64.npy", "unsupported dtype '<c8' at byte 20"},
        {"uint32.npy", "unsupported dtype '<u4'"},
        {"structured.npy", "structured dtypes"},
        {"rank9.npy", "more than 8 dimensions"},
        {"negative_dim.npy", "negative dimension -3 in shape at byte 64"},
        {"overflow_dim.npy", "at byte 61: dimension too large"},
        {"overflow_size.npy", "shape overflows"},
        {"missing_shape.npy", "no 'shape' key"},
        {"extra_key.npy", "unexpected key 'color'"},
        {"truncated_data.npy", "data truncated: the shape needs 24 bytes from byte 70 but only 20"},
        {"oversized_data.npy", "4 bytes of extra data after the array at byte 94"},
        {"bad_magic.npy", "not a .npy file: bad magic at byte 0"},
        {"bad_version.npy", "unsupported .npy version 4.0"},
        {"truncated_header.npy", "header truncated: 118 bytes declared at byte 8 but only 26 follow"},
        {"absurd_header.npy", "absurd header length 4294967280 at byte 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, DIR_NPY "%s", cases[i].file);
        expect_error(path, cases[i].msg);
    }
}

static void test_unreadable_paths(void **state) {
    (void)state;
    ry_tensor *t = NULL;
    ry_error err;
    assert_int_equal(ry_npy_read("tests/npy/no_such_file.npy", &t, &err), RY_ERR);
    assert_string_equal(err.file, "tests/npy/no_such_file.npy");
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_int_equal(ry_npy_read("tests/npy", &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_null(t);
    /* an empty file and a NULL buffer */
    assert_int_equal(ry_npy_read_mem("empty", "", 0, &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "bad magic"));
    assert_int_equal(ry_npy_read_mem("null", NULL, 100, &t, &err), RY_ERR);
    assert_null(t);
    /* a NULL error pointer is allowed */
    assert_int_equal(ry_npy_read_mem("null", NULL, 0, &t, NULL), RY_ERR);
}

/* Small headers with one thing wrong each, and what the message says. */
static void test_bad_mem_headers(void **state) {
    (void)state;
    static const struct {
        const char *hdr, *msg;
    } cases[] = {
        {"", "at byte 10: expected '{'"},
        {"{", "at byte 11: expected a string"},
        {"{'descr'", "expected ':' after a key"},
        {"{'descr': '<f4'", "expected ',' or '}'"},
        {"{'descr': '<f4}", "unterminated string"},
        {"{'descr': '<f4', 'descr': '<f4', }", "duplicate key 'descr'"},
        {"{'descr': '<f4', 'shape': (), }", "no 'fortran_order' key"},
        {"{'shape': (), 'fortran_order': False}", "no 'descr' key"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "expected '(' to open"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", "expected a dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "unexpected text after"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': ()}", "unsupported dtype '|f4'"},
        {"{'descr': '>f3', 'fortran_order': False, 'shape': ()}", "unsupported dtype '>f3'"},
        {"{'descr': '', 'fortran_order': False, 'shape': ()}", "unsupported dtype ''"},
        {"{'descr': 'a\\'b', 'fortran_order': False, 'shape': ()}", "unsupported character"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'shape': ()}", "duplicate key"},
        /* empty, yet numpy could not hold it either */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}",
         "shape overflows"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t buf[256];
        size_t hl = strlen(cases[k].hdr);
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (uint8_t)hl;
        buf[9] = 0;
        memcpy(buf + 10, cases[k].hdr, hl);
        memset(buf + 10 + hl, 0, 4);
        ry_tensor *t = NULL;
        ry_error err;
        assert_int_equal(ry_npy_read_mem("h.npy", buf, 14 + hl, &t, &err), RY_ERR);
        assert_null(t);
        assert_string_equal(err.file, "h.npy");
        if (!strstr(err.msg, cases[k].msg))
            fail_msg("header %zu: message \"%s\" lacks \"%s\"", k, err.msg, cases[k].msg);
    }
    /* prefixes cut short */
    ry_tensor *t = NULL;
    ry_error err;
    assert_int_equal(ry_npy_read_mem("p.npy", "\x93NUMPY\x01", 7, &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "no version"));
    assert_int_equal(ry_npy_read_mem("p.npy", "\x93NUMPY\x02\x00\x01\x00", 10, &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "no header length"));
    assert_int_equal(ry_npy_read_mem("p.npy", "\x93NUMPY\x01\x01\x00\x00", 10, &t, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "version 1.1"));
}

/* ---- writing ------------------------------------------------------------- */

/* What relayc writes is byte for byte what numpy's np.save wrote. */
static void test_write_matches_numpy(void **state) {
    (void)state;
    const char *extra[] = {"empty_float32", "empty_int32_2x0x3", "special_float16",
                           "special_float32", "f16_round_in"};
    char names[RY_DTYPE_COUNT * 5 + 5][64];
    int n = 0;
    for (int d = 0; d < RY_DTYPE_COUNT; d++)
        for (int r = 0; r <= 4; r++) snprintf(names[n++], 64, "%s_r%d", dtype_names[d], r);
    for (int k = 0; k < 5; k++) snprintf(names[n++], 64, "%s", extra[k]);
    for (int k = 0; k < n; k++) {
        char src[128], dst[128];
        snprintf(src, sizeof src, DIR_NPY "%s.npy", names[k]);
        tmp_path(dst, sizeof dst, "out.npy");
        ry_tensor *t = test_npy(src);
        ry_error err;
        if (ry_npy_write(dst, t, &err) != RY_OK) fail_msg("%s: %s", dst, err.msg);
        ry_tensor_release(t);
        size_t la, lb;
        uint8_t *a = slurp(src, &la), *b = slurp(dst, &lb);
        if (la != lb || memcmp(a, b, la) != 0) fail_msg("%s: written bytes differ from numpy's", src);
        free(a);
        free(b);
    }
}

/* Tensors made in C, every dtype at ranks 0..4: write, read, same values. */
static void test_write_roundtrip(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "rt.npy");
    for (int d = 0; d < RY_DTYPE_COUNT; d++)
        for (int r = 0; r <= 4; r++) {
            ry_tensor *t = ry_tensor_new((ry_dtype)d, r, rank_shapes[r]);
            for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, fixture_value((ry_dtype)d, i));
            ry_error err;
            assert_int_equal(ry_npy_write(path, t, &err), RY_OK);
            ry_tensor *back = test_npy(path);
            assert_shape(back, r, rank_shapes[r]);
            assert_values(back, (ry_dtype)d);
            assert_memory_equal(back->data, t->data, ry_tensor_nbytes(t));
            ry_tensor_release(back);
            ry_tensor_release(t);
        }
    /* a view writes just its own elements */
    ry_tensor *slab = ry_tensor_new(RY_INT64, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++) ry_tensor_set(slab, i, i * 10);
    ry_tensor *v = ry_tensor_view(slab, 16, RY_INT64, 2, (int64_t[]){2, 1});
    ry_error err;
    assert_int_equal(ry_npy_write(path, v, &err), RY_OK);
    ry_tensor *back = test_npy(path);
    assert_shape(back, 2, (int64_t[]){2, 1});
    assert_true(ry_tensor_get(back, 0) == 20 && ry_tensor_get(back, 1) == 30);
    ry_tensor_release(back);
    ry_tensor_release(v);
    ry_tensor_release(slab);
    /* large dimensions: the header grows, still 64-byte aligned */
    int64_t shape[RY_MAX_RANK] = {0, 1234567890123LL, 3, 4, 5, 6, 7, 9};
    ry_tensor *big = ry_tensor_new(RY_FLOAT32, RY_MAX_RANK, shape);
    assert_int_equal(ry_npy_write(path, big, &err), RY_OK);
    ry_tensor_release(big);
    back = test_npy(path);
    assert_shape(back, RY_MAX_RANK, shape);
    ry_tensor_release(back);
    size_t len;
    uint8_t *b = slurp(path, &len);
    assert_int_equal(len % 64, 0);
    assert_int_equal(b[len - 1], '\n');
    free(b);
}

/* A failed write leaves the old file as it was and no temporary behind. */
static void test_write_atomic(void **state) {
    (void)state;
    char path[128], tmp[140];
    tmp_path(path, sizeof path, "keep.npy");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ry_tensor *old = ry_tensor_scalar(RY_FLOAT64, 7.0);
    ry_error err;
    assert_int_equal(ry_npy_write(path, old, &err), RY_OK);
    assert_false(tmp_left(path));
    /* a link planted at the old predictable name PATH.tmp is not followed:
     * its target stays as it was */
    char victim[128];
    tmp_path(victim, sizeof victim, "victim.txt");
    FILE *v = fopen(victim, "w");
    fputs("precious", v);
    fclose(v);
    assert_int_equal(symlink(victim, tmp), 0);
    ry_tensor *fresh = ry_tensor_scalar(RY_FLOAT64, 8.0);
    assert_int_equal(ry_npy_write(path, fresh, &err), RY_OK);
    char got[32] = "";
    v = fopen(victim, "r");
    assert_non_null(fgets(got, sizeof got, v));
    fclose(v);
    assert_string_equal(got, "precious");
    struct stat ls;
    assert_int_equal(lstat(tmp, &ls), 0);
    assert_true(S_ISLNK(ls.st_mode));
    unlink(tmp);
    unlink(victim);
    ry_tensor *back = test_npy(path);
    assert_true(ry_tensor_get(back, 0) == 8.0);
    ry_tensor_release(back);
    assert_int_equal(ry_npy_write(path, old, &err), RY_OK);
    /* the rename fails (the target is a non-empty directory): the temporary
     * is removed */
    char dir[128], inner[160];
    tmp_path(dir, sizeof dir, "adir.npy");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(inner, sizeof inner, "%s/x", dir);
    FILE *f = fopen(inner, "w");
    fclose(f);
    assert_int_equal(ry_npy_write(dir, fresh, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "write failed"));
    assert_false(tmp_left(dir));
    remove(inner);
    rmdir(dir);
    /* no such directory */
    assert_int_equal(ry_npy_write("/nonexistent_relayc_dir/x.npy", fresh, &err), RY_ERR);
    assert_string_equal(err.file, "/nonexistent_relayc_dir/x.npy");
    /* a successful write replaces the old file */
    assert_int_equal(ry_npy_write(path, fresh, &err), RY_OK);
    back = test_npy(path);
    assert_true(ry_tensor_get(back, 0) == 8.0);
    ry_tensor_release(back);
    assert_int_equal(ry_npy_write(path, NULL, &err), RY_ERR);
    /* only CPU memory can be written; the old file stays */
    ry_tensor elsewhere = *fresh;
    elsewhere.device.kind = (ry_device_kind)1;
    assert_int_equal(ry_npy_write(path, &elsewhere, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "copy it to the CPU first"));
    back = test_npy(path);
    assert_true(ry_tensor_get(back, 0) == 8.0);
    ry_tensor_release(back);
    ry_tensor_release(old);
    ry_tensor_release(fresh);
}

/* ---- fuzzing: malformed input must never crash, leak or read past the end */

static void fuzz_one(const char *name, const uint8_t *b, size_t len, bool must_fail) {
    /* an exact-size heap copy, so ASan catches any read past the end */
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, b, len);
    ry_tensor *t = NULL;
    ry_error err;
    ry_status s = ry_npy_read_mem(name, copy, len, &t, &err);
    if (must_fail && s == RY_OK) fail_msg("%s: %zu bytes read without error", name, len);
    if (s == RY_OK) assert_non_null(t);
    else assert_null(t);
    ry_tensor_release(t);
    free(copy);
}

static void test_fuzz_truncate_and_flip(void **state) {
    (void)state;
    const char *files[] = {DIR_NPY "float32_r2.npy", DIR_NPY "be_float64.npy",
                           DIR_NPY "v2_float32.npy", DIR_NPY "v3_int64.npy",
                           DIR_NPY "keys_reordered.npy", DIR_NPY "bool_r0.npy"};
    const uint8_t flips[] = {0x01, 0x80, 0xff, 0x20};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        size_t len;
        uint8_t *b = slurp(files[k], &len);
        for (size_t cut = 0; cut < len; cut++) fuzz_one(files[k], b, cut, true);
        fuzz_one(files[k], b, len, false);
        uint8_t *m = malloc(len);
        for (size_t i = 0; i < len; i++)
            for (size_t f = 0; f < sizeof flips; f++) {
                memcpy(m, b, len);
                m[i] ^= flips[f];
                fuzz_one(files[k], m, len, false);
                /* a flipped file that also loses its last byte */
                fuzz_one(files[k], m, len - 1, false);
            }
        /* every byte value at each header position */
        for (size_t i = 0; i < len && i < 128; i++)
            for (int v = 0; v < 256; v++) {
                memcpy(m, b, len);
                m[i] = (uint8_t)v;
                fuzz_one(files[k], m, len, false);
            }
        free(m);
        free(b);
    }
    /* many random bytes changed at once, and random lengths (xorshift, fixed
     * seed, so a failure reproduces) */
    const char *seeds[] = {DIR_NPY "int8_r4.npy", DIR_NPY "be_int32.npy", DIR_NPY "v3_int64.npy"};
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        size_t len;
        uint8_t *b = slurp(seeds[k], &len);
        uint8_t *m = malloc(len);
        for (int round = 0; round < 5000; round++) {
            memcpy(m, b, len);
            for (int j = 0; j < 1 + round % 6; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                m[(x >> 8) % len] = (uint8_t)x;
            }
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            fuzz_one(seeds[k], m, round % 3 ? len : (size_t)(x % (len + 1)), false);
        }
        free(m);
        free(b);
    }
    /* through a real file too: truncated copies on disk */
    size_t len;
    uint8_t *b = slurp(DIR_NPY "int64_r2.npy", &len);
    char path[128];
    tmp_path(path, sizeof path, "cut.npy");
    for (size_t cut = 0; cut < len; cut++) {
        FILE *f = fopen(path, "wb");
        fwrite(b, 1, cut, f);
        fclose(f);
        ry_tensor *t = NULL;
        ry_error err;
        assert_int_equal(ry_npy_read(path, &t, &err), RY_ERR);
        assert_null(t);
        assert_string_equal(err.file, path);
    }
    free(b);
}

/* ---- out of memory --------------------------------------------------------- */

static void test_alloc_failures(void **state) {
    (void)state;
    char path[128];
    tmp_path(path, sizeof path, "oom.npy");
    ry_tensor *src = test_npy(DIR_NPY "float64_r3.npy");
    size_t len;
    uint8_t *b = slurp(DIR_NPY "float64_r3.npy", &len);
    for (int op = 0; op < 3; op++) {
        for (long n = 0;; n++) {
            ry_tensor *t = NULL;
            ry_error err;
            memset(&err, 0, sizeof err);
            ry_alloc_fail_after(n);
            ry_status s = op == 0   ? ry_npy_read(DIR_NPY "float64_r3.npy", &t, &err)
                          : op == 1 ? ry_npy_read_mem("m.npy", b, len, &t, &err)
                                    : ry_npy_write(path, src, &err);
            ry_alloc_fail_after(-1);
            if (s == RY_OK) {
                if (op < 2) {
                    assert_true(ry_tensor_same_shape(t, src));
                    assert_memory_equal(t->data, src->data, ry_tensor_nbytes(src));
                }
                ry_tensor_release(t);
                break;
            }
            assert_null(t);
            assert_non_null(strstr(err.msg, "out of memory"));
            assert_false(tmp_left(path));
            assert_true(n < 10);
        }
    }
    free(b);
    ry_tensor_release(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_every_dtype_and_rank),
        cmocka_unit_test(test_read_big_endian),
        cmocka_unit_test(test_read_versions),
        cmocka_unit_test(test_read_empty),
        cmocka_unit_test(test_read_special_floats),
        cmocka_unit_test(test_read_odd_headers),
        cmocka_unit_test(test_read_mem_headers),
        cmocka_unit_test(test_read_bool_normalized),
        cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_unreadable_paths),
        cmocka_unit_test(test_bad_mem_headers),
        cmocka_unit_test_setup_teardown(test_write_matches_numpy, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_roundtrip, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_atomic, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_fuzz_truncate_and_flip, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
