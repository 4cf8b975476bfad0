/*
 * test_datasets.c: the data loaders and batching (datasets/): the RNG
 * against an independent Python implementation, loaders and splits, IDX
 * files (every element type, gzipped or not, broken ones with their byte
 * offsets), the treebank (parse, vocabulary, ADT values, broken files with
 * line and column), character text and BPTT windows, .npy datasets, and
 * out-of-memory injection. Fixtures come from tools/gen_dataset_tests.py;
 * the real Fashion-MNIST, SST and tinyshakespeare are read when present.
 */
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "test_util.h"

#include "relayc/datasets.h"

#define D "tests/data/"

static ry_error err;

/* A status that must be an error whose message contains want (and, when
 * file is non-NULL, whose file is file). */
static void expect_err(ry_status s, const char *file, const char *want) {
    if (s == RY_OK) fail_msg("expected an error containing '%s'", want);
    if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    if (file && strcmp(err.file, file) != 0) fail_msg("error names '%s', not '%s'", err.file, file);
}

static void check_ok(ry_status s) {
    if (s != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("unexpected error: %s", err.msg);
    }
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    assert_true(fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

static uint64_t u64_at(const ry_tensor *t, int64_t i) { return ((const uint64_t *)t->data)[i]; }

/* ---- RNG ------------------------------------------------------------------ */

static void test_rng_reference(void **state) {
    (void)state;
    const uint64_t seeds[3] = {0, 42, UINT64_MAX};
    const char *names[3] = {"0", "42", "615"}; /* seed % 1000 */
    for (int k = 0; k < 3; k++) {
        char p1[128], p2[128];
        snprintf(p1, sizeof p1, D "rng_seed%s_state.npy", names[k]);
        snprintf(p2, sizeof p2, D "rng_seed%s_next.npy", names[k]);
        ry_tensor *st = test_npy(p1), *nx = test_npy(p2);
        ry_rng r;
        ry_rng_seed(&r, seeds[k]);
        for (int i = 0; i < 4; i++) assert_int_equal(r.s[i], u64_at(st, i));
        for (int i = 0; i < 8; i++) assert_int_equal(ry_rng_next(&r), u64_at(nx, i));
        ry_tensor_release(st);
        ry_tensor_release(nx);
    }
    /* splitmix64's published first output for seed 0 */
    ry_rng r;
    ry_rng_seed(&r, 0);
    assert_int_equal(r.s[0], 0xe220a8397b1dcdafull);
}

static void test_rng_draws(void **state) {
    (void)state;
    ry_rng r;
    ry_rng_seed(&r, 42);
    ry_tensor *u = test_npy(D "rng_uniform42.npy");
    for (int i = 0; i < 6; i++) assert_true(ry_rng_uniform(&r) == ((double *)u->data)[i]);
    ry_tensor_release(u);

    ry_tensor *p = test_npy(D "rng_perm7.npy");
    int64_t perm[10];
    ry_rng_seed(&r, 7);
    ry_rng_permutation(&r, 10, perm);
    for (int i = 0; i < 10; i++) assert_int_equal(perm[i], ((int64_t *)p->data)[i]);
    ry_tensor_release(p);

    /* below stays in range and hits every value; normals have mean 0, var 1 */
    int seen[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = ry_rng_below(&r, 7);
        assert_true(v < 7);
        seen[v]++;
    }
    for (int i = 0; i < 7; i++) assert_in_range(seen[i], 850, 1150);
    assert_int_equal(ry_rng_below(&r, 0), 0);
    assert_int_equal(ry_rng_below(&r, 1), 0);
    double sum = 0, sq = 0;
    const int n = 40000;
    for (int i = 0; i < n; i++) {
        double x = ry_rng_normal(&r);
        assert_true(isfinite(x));
        sum += x;
        sq += x * x;
    }
    assert_true(fabs(sum / n) < 0.03);
    assert_true(fabs(sq / n - 1.0) < 0.03);
}

static void test_rng_state(void **state) {
    (void)state;
    ry_rng a, b;
    ry_rng_seed(&a, 123);
    for (int i = 0; i < 5; i++) ry_rng_next(&a);
    uint64_t words[4];
    ry_rng_get_state(&a, words);
    ry_rng_seed(&b, 999);
    check_ok(ry_rng_set_state(&b, words, &err));
    for (int i = 0; i < 100; i++) assert_int_equal(ry_rng_next(&a), ry_rng_next(&b));
    const uint64_t zero[4] = {0, 0, 0, 0};
    expect_err(ry_rng_set_state(&b, zero, &err), NULL, "all four words are zero");
}

/* ---- loaders and splits -------------------------------------------------------- */

static void test_loader_shuffled_epochs(void **state) {
    (void)state;
    ry_tensor *want = test_npy(D "loader_epochs11.npy"); /* (3 epochs, 10) */
    ry_loader *l;
    check_ok(ry_loader_new(10, &(ry_loader_opts){.batch = 4, .shuffle = true, .seed = 11}, &l, &err));
    assert_int_equal(ry_loader_batches(l), 3);
    for (int e = 0; e < 3; e++) {
        int64_t pos = 0, k;
        const int64_t *idx;
        int sizes[3], nb = 0;
        while ((k = ry_loader_next(l, &idx)) > 0) {
            for (int64_t i = 0; i < k; i++) assert_int_equal(idx[i], ((int64_t *)want->data)[e * 10 + pos + i]);
            pos += k;
            sizes[nb++] = (int)k;
        }
        assert_int_equal(pos, 10);
        assert_int_equal(nb, 3);
        assert_int_equal(sizes[0], 4);
        assert_int_equal(sizes[2], 2); /* the partial last batch is kept */
        ry_loader_state st;
        ry_loader_get_state(l, &st);
        assert_int_equal(st.epoch, e + 1);
        assert_int_equal(st.pos, 0);
    }
    ry_loader_free(l);
    ry_tensor_release(want);
}

static void test_loader_order_and_drop(void **state) {
    (void)state;
    ry_loader *l;
    check_ok(ry_loader_new(10, &(ry_loader_opts){.batch = 4, .drop_last = true}, &l, &err));
    assert_int_equal(ry_loader_batches(l), 2);
    const int64_t *idx;
    for (int e = 0; e < 2; e++) {
        for (int b = 0; b < 2; b++) {
            assert_int_equal(ry_loader_next(l, &idx), 4);
            for (int i = 0; i < 4; i++) assert_int_equal(idx[i], b * 4 + i);
        }
        assert_int_equal(ry_loader_next(l, &idx), 0);
    }
    ry_loader_free(l);
    /* more batch than items: one short batch, or none when dropped */
    check_ok(ry_loader_new(3, &(ry_loader_opts){.batch = 8}, &l, &err));
    assert_int_equal(ry_loader_batches(l), 1);
    assert_int_equal(ry_loader_next(l, &idx), 3);
    assert_int_equal(ry_loader_next(l, &idx), 0);
    ry_loader_free(l);
    check_ok(ry_loader_new(3, &(ry_loader_opts){.batch = 8, .drop_last = true}, &l, &err));
    assert_int_equal(ry_loader_batches(l), 0);
    assert_int_equal(ry_loader_next(l, &idx), 0);
    ry_loader_free(l);
    expect_err(ry_loader_new(3, &(ry_loader_opts){.batch = 0}, &l, &err), NULL, "batch size 0");
    assert_null(l);
    expect_err(ry_loader_new(-1, &(ry_loader_opts){.batch = 1}, &l, &err), NULL, "negative");
}

/* A resumed loader deals exactly the batches the original would have. */
static void test_loader_resume(void **state) {
    (void)state;
    ry_loader_opts o = {.batch = 3, .shuffle = true, .seed = 2026};
    ry_loader *a, *b;
    check_ok(ry_loader_new(17, &o, &a, &err));
    const int64_t *ia, *ib;
    for (int i = 0; i < 9; i++) ry_loader_next(a, &ia); /* into the second epoch */
    ry_loader_state st;
    ry_loader_get_state(a, &st);
    assert_int_equal(st.epoch, 1);
    check_ok(ry_loader_new(17, &o, &b, &err));
    check_ok(ry_loader_set_state(b, &st, &err));
    for (int i = 0; i < 30; i++) {
        int64_t ka = ry_loader_next(a, &ia), kb = ry_loader_next(b, &ib);
        assert_int_equal(ka, kb);
        for (int64_t j = 0; j < ka; j++) assert_int_equal(ia[j], ib[j]);
    }
    ry_loader_state bad = st;
    bad.pos = 18;
    expect_err(ry_loader_set_state(b, &bad, &err), NULL, "position 18");
    bad = st;
    memset(bad.rng, 0, sizeof bad.rng);
    expect_err(ry_loader_set_state(b, &bad, &err), NULL, "loader state");
    bad = st;
    bad.epoch = -2;
    expect_err(ry_loader_set_state(b, &bad, &err), NULL, "negative epoch");
    ry_loader_free(a);
    ry_loader_free(b);
}

static void test_take_rows_and_split(void **state) {
    (void)state;
    ry_tensor *x = test_npy(D "npy_x.npy"); /* (10, 3) */
    const int64_t idx[4] = {9, 0, 4, 4};
    ry_tensor *t;
    check_ok(ry_data_take_rows(x, idx, 4, &t, &err));
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 4);
    assert_int_equal(t->shape[1], 3);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) assert_true(ry_tensor_get(t, i * 3 + j) == ry_tensor_get(x, idx[i] * 3 + j));
    ry_tensor_release(t);
    const int64_t bad[2] = {1, 10};
    expect_err(ry_data_take_rows(x, bad, 2, &t, &err), NULL, "index 10 (position 1) outside 0..9");
    assert_null(t);

    int64_t *tr, *va;
    check_ok(ry_data_split(10, 3, 5, &tr, &va, &err));
    ry_tensor *wt = test_npy(D "split5_train.npy"), *wv = test_npy(D "split5_val.npy");
    for (int i = 0; i < 7; i++) assert_int_equal(tr[i], ((int64_t *)wt->data)[i]);
    for (int i = 0; i < 3; i++) assert_int_equal(va[i], ((int64_t *)wv->data)[i]);
    ry_free(tr);
    ry_free(va);
    expect_err(ry_data_split(10, 11, 5, &tr, &va, &err), NULL, "11 validation items out of 10");

    ry_tensor *y = test_npy(D "npy_y.npy");
    ry_tensor *arrays[2] = {x, y}, *trn[2], *val[2];
    check_ok(ry_data_split_tensors(2, arrays, 3, 5, trn, val, &err));
    assert_int_equal(trn[0]->shape[0], 7);
    assert_int_equal(val[1]->shape[0], 3);
    for (int i = 0; i < 3; i++) {
        int64_t r = ((int64_t *)wv->data)[i];
        assert_true(ry_tensor_get(val[0], i * 3 + 2) == ry_tensor_get(x, r * 3 + 2));
        assert_true(ry_tensor_get(val[1], i) == ry_tensor_get(y, r));
    }
    for (int i = 0; i < 2; i++) {
        ry_tensor_release(trn[i]);
        ry_tensor_release(val[i]);
    }
    ry_tensor *ys = test_npy(D "npy_y_short.npy");
    arrays[1] = ys;
    expect_err(ry_data_split_tensors(2, arrays, 3, 5, trn, val, &err), NULL, "array 1 has 9 rows");
    assert_null(trn[0]);
    ry_tensor_release(ys);
    ry_tensor_release(wt);
    ry_tensor_release(wv);
    ry_tensor_release(x);
    ry_tensor_release(y);
}

static void test_npy_dataset(void **state) {
    (void)state;
    const char *good[2] = {D "npy_x.npy", D "npy_y.npy"};
    ry_tensor *out[2];
    check_ok(ry_npy_data_read(2, good, out, &err));
    assert_int_equal(out[0]->shape[0], 10);
    assert_int_equal(out[1]->dtype, RY_INT32);
    assert_int_equal(ry_tensor_get(out[1], 4), 1);
    ry_tensor_release(out[0]);
    ry_tensor_release(out[1]);
    const char *mism[2] = {D "npy_x.npy", D "npy_y_short.npy"};
    expect_err(ry_npy_data_read(2, mism, out, &err), D "npy_y_short.npy", "9 examples");
    assert_null(out[0]);
    const char *scal[1] = {D "npy_scalar.npy"};
    expect_err(ry_npy_data_read(1, scal, out, &err), D "npy_scalar.npy", "scalar");
    const char *missing[2] = {D "npy_x.npy", D "nope.npy"};
    expect_err(ry_npy_data_read(2, missing, out, &err), D "nope.npy", "cannot open");
    assert_null(out[0]);
}

/* ---- IDX ---------------------------------------------------------------------- */

static void test_idx_types(void **state) {
    (void)state;
    const char *names[6] = {"u8", "i8", "i16", "i32", "f32", "f64"};
    const ry_dtype types[6] = {RY_UINT8, RY_INT8, RY_INT32, RY_INT32, RY_FLOAT32, RY_FLOAT64};
    for (int k = 0; k < 6; k++) {
        char p[128], q[128];
        snprintf(p, sizeof p, D "idx_%s.idx", names[k]);
        snprintf(q, sizeof q, D "idx_%s.npy", names[k]);
        ry_tensor *t, *want = test_npy(q);
        check_ok(ry_idx_read(p, &t, &err));
        assert_int_equal(t->dtype, types[k]);
        test_assert_close(t, want, 0, 0);
        ry_tensor_release(t);
        ry_tensor_release(want);
    }
    ry_tensor *a, *b;
    check_ok(ry_idx_read(D "idx_u8.idx.gz", &a, &err));
    check_ok(ry_idx_read(D "idx_u8.idx", &b, &err));
    test_assert_close(a, b, 0, 0);
    ry_tensor_release(a);
    ry_tensor_release(b);
    /* concatenated gzip members are one stream */
    check_ok(ry_idx_read(D "two_members.idx.gz", &a, &err));
    assert_int_equal(a->shape[0], 6);
    ry_tensor_release(a);
}

static void test_idx_broken(void **state) {
    (void)state;
    struct { const char *file, *want; } cases[] = {
        {D "bad_magic.idx", "bad IDX magic 12 34 08 03 at byte 0"},
        {D "bad_type.idx", "unknown IDX element type 0x0a at byte 2"},
        {D "bad_extra.idx", "IDX dims 6 x 5 x 4 need 120 data bytes but 123 follow the header (extra data from byte 136)"},
        {D "bad_short.idx", "truncated IDX data: dims 6 x 5 x 4 need more bytes than the 100 that follow the header (data ends at byte 116)"},
        {D "bad_header.idx", "truncated IDX header: 10 bytes, 3 dims need 16 (byte 10)"},
        {D "bad_tiny.idx", "3 bytes, the header needs 4"},
        {D "bad_trunc.idx.gz", "truncated gzip stream: ends at byte"},
        {D "bad_corrupt.idx.gz", "corrupt gzip data near byte"},
        {D "bad_trailing.idx.gz", "trailing garbage after gzip stream at byte"},
        {D "bad_extra.idx.gz", "(extra data from byte 136 of the decompressed data)"},
        {D "missing.idx", "cannot open"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ry_tensor *t = (ry_tensor *)&err; /* must be reset to NULL */
        expect_err(ry_idx_read(cases[i].file, &t, &err), cases[i].file, cases[i].want);
        assert_null(t);
    }
    /* the byte offset of a truncated gzip stream is the file's length */
    size_t len;
    free(slurp(D "bad_trunc.idx.gz", &len));
    ry_tensor *t;
    char want[64];
    snprintf(want, sizeof want, "ends at byte %zu", len);
    expect_err(ry_idx_read(D "bad_trunc.idx.gz", &t, &err), NULL, want);
    /* a directory is not a data file */
    expect_err(ry_idx_read("tests/data", &t, &err), "tests/data", "not a regular file");
}

/* ---- gzip bombs -------------------------------------------------------------- */

/* Appends one gzip member holding raw[0..n) to buf at *len. */
static void gz_member(uint8_t *buf, size_t cap, size_t *len, const uint8_t *raw, size_t n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)raw;
    z.avail_in = (uInt)n;
    z.next_out = buf + *len;
    z.avail_out = (uInt)(cap - *len);
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *len = cap - z.avail_out;
    deflateEnd(&z);
}

/* An IDX header (uint8, the given dims) and then `mib` MiB of zeros, as
 * that many gzip members: about 1 KB of gzip per MiB. */
static uint8_t *idx_bomb(int rank, const uint32_t *dims, int mib, size_t *len) {
    size_t mb = 1 << 20, cap = (size_t)mib * 2048 + 4096;
    uint8_t *raw = calloc(mb, 1), *gz = malloc(cap);
    assert_true(raw && gz);
    *len = 0;
    uint8_t hdr[4 + 4 * RY_MAX_RANK] = {0, 0, 0x08, (uint8_t)rank};
    for (int i = 0; i < rank; i++)
        for (int k = 0; k < 4; k++) hdr[4 + 4 * i + k] = (uint8_t)(dims[i] >> (24 - 8 * k));
    gz_member(gz, cap, len, hdr, 4 + 4 * (size_t)rank);
    for (int i = 0; i < mib; i++) gz_member(gz, cap, len, raw, mb);
    free(raw);
    return gz;
}

/* A header declaring 4 bytes in front of 256 MiB: inflating stops one byte
 * past the declared size (measured in a child: its peak memory grows by
 * far less than the payload), and the error says there is more data. */
static void test_idx_gzip_bomb(void **state) {
    (void)state;
    uint32_t dims[2] = {2, 2};
    size_t len;
    uint8_t *gz = idx_bomb(2, dims, 256, &len);
    assert_true(len < 1 << 20);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        ry_tensor *t = NULL;
        ry_status st = ry_idx_read_mem("bomb.idx.gz", gz, len, &t, &err);
        getrusage(RUSAGE_SELF, &after);
        long grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;
        bool said = st == RY_ERR && strstr(err.msg, "(extra data from byte 16 of the decompressed data)");
        if (!said) fprintf(stderr, "message: %s\n", err.msg);
        if (grown_mb >= 64) fprintf(stderr, "peak memory grew by %ld MB\n", grown_mb);
        ry_tensor_release(t);
        free(gz); /* valgrind checks the child's leaks too */
        _exit(said && grown_mb < 64 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    free(gz);
}

/* Declared sizes no gzip file of this length can hold are refused before
 * anything is inflated; so is one that overflows. */
static void test_idx_gzip_absurd_size(void **state) {
    (void)state;
    uint32_t big[2] = {60000, 100000}; /* 6 GB in a few KB of gzip */
    size_t len;
    uint8_t *gz = idx_bomb(2, big, 1, &len);
    ry_tensor *t = (ry_tensor *)&err;
    expect_err(ry_idx_read_mem("big.idx.gz", gz, len, &t, &err), "big.idx.gz",
               "the IDX header declares 6000000012 bytes, more than");
    assert_null(t);
    free(gz);
    uint32_t huge[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 7};
    gz = idx_bomb(4, huge, 1, &len);
    expect_err(ry_idx_read_mem("huge.idx.gz", gz, len, &t, &err), "huge.idx.gz",
               "the IDX header declares over");
    free(gz);
    /* the same header on a file of the right size still loads */
    uint32_t ok[2] = {1024, 1024};
    gz = idx_bomb(2, ok, 1, &len);
    check_ok(ry_idx_read_mem("ok.idx.gz", gz, len, &t, &err));
    assert_int_equal(t->size, 1 << 20);
    ry_tensor_release(t);
    free(gz);
}

static void test_mnist_fake(void **state) {
    (void)state;
    const char *splits[2] = {"train", "t10k"};
    for (int s = 0; s < 2; s++) {
        ry_tensor *x, *y;
        check_ok(ry_mnist_load(D "mnist", splits[s], NULL, &x, &y, &err));
        char px[64], py[64];
        snprintf(px, sizeof px, D "mnist_%s_x.npy", splits[s]);
        snprintf(py, sizeof py, D "mnist_%s_y.npy", splits[s]);
        ry_tensor *wx = test_npy(px), *wy = test_npy(py);
        assert_int_equal(x->ndim, 4);
        assert_int_equal(x->shape[1], 1);
        assert_int_equal(x->shape[2], 5);
        assert_int_equal(x->shape[3], 4);
        assert_int_equal(y->dtype, RY_INT32);
        for (int64_t i = 0; i < x->size; i++) assert_true(ry_tensor_get(x, i) == ry_tensor_get(wx, i));
        test_assert_close(y, wy, 0, 0);
        ry_tensor_release(x);
        ry_tensor_release(y);
        ry_tensor_release(wx);
        ry_tensor_release(wy);
    }
    ry_tensor *x, *y, *want = test_npy(D "mnist_train_x_norm.npy");
    ry_mnist_opts o = {.flatten = true, .mean = 0.2860f, .std = 0.3530f};
    check_ok(ry_mnist_load(D "mnist", "train", &o, &x, &y, &err));
    test_assert_close(x, want, 0, 0);
    ry_tensor_release(x);
    ry_tensor_release(y);
    ry_tensor_release(want);
    expect_err(ry_mnist_load(D "mnist", "valid", NULL, &x, &y, &err), D "mnist/valid-images-idx3-ubyte",
               "cannot open");
    assert_null(x);
    assert_null(y);
}

static void test_fashion_mnist_real(void **state) {
    (void)state;
    FILE *f = fopen(RY_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", "rb");
    if (!f) {
        print_message("Fashion-MNIST not found in " RY_FASHION_MNIST_DIR ": skipped\n");
        skip();
    }
    fclose(f);
    const int32_t first_train[6] = {9, 0, 0, 3, 0, 2}, first_test[6] = {9, 2, 1, 1, 6, 1};
    ry_tensor *x, *y;
    check_ok(ry_mnist_load(NULL, "train", NULL, &x, &y, &err));
    assert_int_equal(x->shape[0], 60000);
    assert_int_equal(x->shape[2], 28);
    assert_int_equal(y->shape[0], 60000);
    for (int i = 0; i < 6; i++) assert_int_equal(((int32_t *)y->data)[i], first_train[i]);
    double lo = 1, hi = 0, first = 0;
    for (int64_t i = 0; i < x->size; i++) {
        float v = ((float *)x->data)[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        if (i < 784) first += v;
    }
    assert_true(lo == 0.0 && hi == 1.0);
    assert_true(fabs(first - 76247.0 / 255.0) < 1e-3); /* pixel sum of image 0 */
    ry_tensor_release(x);
    ry_tensor_release(y);
    /* normalized with the published statistics: mean 0, deviation 1 */
    ry_mnist_opts o = {.flatten = true, .mean = RY_FASHION_MNIST_MEAN, .std = RY_FASHION_MNIST_STD};
    check_ok(ry_mnist_load(NULL, "train", &o, &x, &y, &err));
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < x->size; i++) {
        double v = ((float *)x->data)[i];
        sum += v;
        sq += v * v;
    }
    assert_true(fabs(sum / (double)x->size) < 1e-3);
    assert_true(fabs(sq / (double)x->size - 1.0) < 1e-3);
    ry_tensor_release(x);
    ry_tensor_release(y);
    check_ok(ry_mnist_load(NULL, "t10k", &(ry_mnist_opts){.flatten = true}, &x, &y, &err));
    assert_int_equal(x->shape[0], 10000);
    assert_int_equal(x->shape[1], 784);
    for (int i = 0; i < 6; i++) assert_int_equal(((int32_t *)y->data)[i], first_test[i]);
    ry_tensor_release(x);
    ry_tensor_release(y);
}

/* ---- vocabulary and treebank -------------------------------------------------- */

static void test_vocab(void **state) {
    (void)state;
    ry_vocab *v = ry_vocab_new();
    assert_non_null(v);
    assert_int_equal(ry_vocab_size(v), 1);
    assert_string_equal(ry_vocab_word(v, RY_VOCAB_UNK), "<unk>");
    char w[32];
    for (int i = 0; i < 2000; i++) { /* grows the table several times */
        snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(ry_vocab_add(v, w, strlen(w)), i + 1);
    }
    for (int i = 0; i < 2000; i += 7) {
        snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(ry_vocab_find(v, w, strlen(w)), i + 1);
        assert_int_equal(ry_vocab_add(v, w, strlen(w)), i + 1);
        assert_string_equal(ry_vocab_word(v, i + 1), w);
    }
    assert_int_equal(ry_vocab_find(v, "w2000", 5), RY_VOCAB_UNK);
    assert_int_equal(ry_vocab_find(v, "w1", 1), RY_VOCAB_UNK); /* "w" is a prefix, not a word */
    assert_int_equal(ry_vocab_size(v), 2001);
    assert_null(ry_vocab_word(v, 2001));
    assert_null(ry_vocab_word(v, -1));
    ry_vocab_free(v);
}

static void test_treebank_small(void **state) {
    (void)state;
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb;
    check_ok(ry_treebank_read(D "sst_small.txt", v, true, &tb, &err));
    ry_tensor *nodes = test_npy(D "sst_small_nodes.npy"), *counts = test_npy(D "sst_small_counts.npy");
    assert_int_equal(tb->ntrees, 4);
    const int lines[4] = {1, 3, 4, 5};
    int64_t k = 0;
    for (int t = 0; t < tb->ntrees; t++) {
        const ry_tree *tr = &tb->trees[t];
        assert_int_equal(tr->nnodes, ((int32_t *)counts->data)[t]);
        assert_int_equal(tr->line, lines[t]);
        for (int i = 0; i < tr->nnodes; i++, k++) {
            const int32_t *w = (int32_t *)nodes->data + 4 * k;
            assert_int_equal(tr->nodes[i].label, w[0]);
            assert_int_equal(tr->nodes[i].word, w[1]);
            assert_int_equal(tr->nodes[i].left, w[2]);
            assert_int_equal(tr->nodes[i].right, w[3]);
        }
    }
    /* the vocabulary holds the words in order of first appearance */
    FILE *f = fopen(D "sst_small_vocab.txt", "r");
    char line[64];
    int32_t id = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        assert_string_equal(ry_vocab_word(v, id), line);
        id++;
    }
    fclose(f);
    assert_int_equal(ry_vocab_size(v), id);
    /* dev with the vocabulary frozen: an unknown word maps to <unk> */
    ry_treebank *dev;
    check_ok(ry_treebank_read(D "sst_small_dev.txt", v, false, &dev, &err));
    assert_int_equal(dev->ntrees, 1);
    assert_int_equal(dev->trees[0].nodes[0].word, ry_vocab_find(v, "a", 1));
    assert_int_equal(dev->trees[0].nodes[1].word, RY_VOCAB_UNK);
    assert_int_equal(dev->trees[0].nodes[1].label, 3);
    assert_int_equal(ry_vocab_size(v), id);
    ry_treebank_free(dev);
    ry_treebank_free(tb);
    ry_tensor_release(nodes);
    ry_tensor_release(counts);
    ry_vocab_free(v);
}

static void test_treebank_broken(void **state) {
    (void)state;
    struct { const char *name; int line, col; const char *want; } cases[] = {
        {"unclosed", 2, 1, "unbalanced parentheses: this '(' is never closed"},
        {"extra_close", 1, 22, "unbalanced parentheses: ')' without a matching '('"},
        {"bad_label", 2, 11, "bad label '7'"},
        {"word_label", 1, 2, "bad label 'x'"},
        {"unary", 2, 9, "a node with 1 child"},
        {"ternary", 1, 16, "a third child"},
        {"two_words", 1, 8, "a leaf holds one word"},
        {"leaf_eof", 1, 10, "unbalanced parentheses: this '(' is never closed"},
        {"stray", 2, 1, "expected '(' to start a tree, found 'hello'"},
        {"inner_word", 1, 10, "expected '(' or ')' but found 'word'"},
        {"no_child", 1, 13, "a node with a label but no word or children"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, D "sst_bad_%s.txt", cases[i].name);
        ry_vocab *v = ry_vocab_new();
        ry_treebank *tb = (ry_treebank *)v;
        expect_err(ry_treebank_read(path, v, true, &tb, &err), path, cases[i].want);
        assert_null(tb);
        if (err.line != cases[i].line || err.col != cases[i].col)
            fail_msg("%s: error at %d:%d, expected %d:%d (%s)", cases[i].name, err.line, err.col,
                     cases[i].line, cases[i].col, err.msg);
        assert_true(err.source_line[0] != '\0');
        ry_vocab_free(v);
    }
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb;
    expect_err(ry_treebank_read(D "sst_bad_empty.txt", v, true, &tb, &err), D "sst_bad_empty.txt",
               "no trees");
    expect_err(ry_treebank_read(D "none.txt", v, true, &tb, &err), D "none.txt", "cannot open");
    ry_vocab_free(v);
}

static const char *tree_module =
    "#[version = \"0.0.5\"]\n"
    "type Tree {\n"
    "  Leaf(int32, int32),\n"
    "  Node(Tree, Tree, int32),\n"
    "}\n"
    "type Wrong {\n"
    "  WLeaf(int32),\n"
    "  WNode(Wrong, Wrong, float32),\n"
    "}\n"
    "def @main(%t: Tree) -> Tree { %t }\n";

/* Checks v against the post-order nodes below index i, walking v down. */
static void check_value(const ry_value *v, const ry_tree *t, int32_t i, const ry_ctor *leaf,
                        const ry_ctor *node) {
    const ry_tree_node *nd = &t->nodes[i];
    assert_int_equal(v->kind, RY_VAL_ADT);
    if (nd->left < 0) {
        assert_ptr_equal(v->adt.ctor, leaf);
        assert_int_equal(v->adt.n, 2);
        assert_int_equal(v->adt.fields[0]->tensor->ndim, 0);
        assert_int_equal(v->adt.fields[0]->tensor->dtype, RY_INT32);
        assert_int_equal(ry_tensor_get(v->adt.fields[0]->tensor, 0), nd->word);
        assert_int_equal(ry_tensor_get(v->adt.fields[1]->tensor, 0), nd->label);
        return;
    }
    assert_ptr_equal(v->adt.ctor, node);
    assert_int_equal(v->adt.n, 3);
    assert_int_equal(ry_tensor_get(v->adt.fields[2]->tensor, 0), nd->label);
    check_value(v->adt.fields[0], t, nd->left, leaf, node);
    check_value(v->adt.fields[1], t, nd->right, leaf, node);
}

static void test_tree_values(void **state) {
    (void)state;
    ry_module *m = test_parse(tree_module, true);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    assert_non_null(leaf);
    assert_non_null(node);
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb;
    check_ok(ry_treebank_read(D "sst_small.txt", v, true, &tb, &err));
    for (int t = 0; t < tb->ntrees; t++) {
        ry_value *val;
        check_ok(ry_tree_to_value(&tb->trees[t], leaf, node, &val, &err));
        check_value(val, &tb->trees[t], tb->trees[t].nnodes - 1, leaf, node);
        assert_int_equal(ry_value_count_tensors(val), tb->trees[t].nnodes + (tb->trees[t].nnodes + 1) / 2);
        ry_value_release(val);
    }
    ry_value *val = NULL;
    expect_err(ry_tree_to_value(&tb->trees[0], node, leaf, &val, &err), NULL, "leaf constructor Node");
    expect_err(ry_tree_to_value(&tb->trees[0], leaf, ry_module_find_ctor(m, "WNode"), &val, &err), NULL,
               "belong to different types");
    expect_err(ry_tree_to_value(&tb->trees[0], ry_module_find_ctor(m, "WLeaf"), ry_module_find_ctor(m, "WNode"),
                                &val, &err), NULL, "must be WNode(Wrong, Wrong) (left, right), as WLeaf has no label");
    assert_null(val);
    /* the layout without labels: words only */
    ry_module *mu = test_parse("#[version = \"0.0.5\"]\ntype U { ULeaf(int32), UNode(U, U) }\n"
                               "def @main(%t: U) -> U { %t }\n", true);
    check_ok(ry_tree_to_value(&tb->trees[0], ry_module_find_ctor(mu, "ULeaf"), ry_module_find_ctor(mu, "UNode"),
                              &val, &err));
    assert_int_equal(ry_value_count_tensors(val), (tb->trees[0].nnodes + 1) / 2);
    assert_int_equal(val->adt.n, 2);
    ry_value_release(val);
    val = NULL;
    ry_module_free(mu);
    /* a hand-made tree whose node points forward is rejected, not followed */
    ry_tree_node bad_nodes[3] = {{2, 1, -1, -1}, {2, -1, 0, 2}, {2, 1, -1, -1}};
    ry_tree bad = {3, bad_nodes, 1};
    expect_err(ry_tree_to_value(&bad, leaf, node, &val, &err), NULL, "not in post-order");
    ry_treebank_free(tb);
    ry_vocab_free(v);
    ry_module_free(m);
}

/* ---- character text ------------------------------------------------------------- */

static void test_text_and_bptt(void **state) {
    (void)state;
    ry_text *t;
    check_ok(ry_text_read(D "text_small.txt", &t, &err));
    ry_tensor *sym = test_npy(D "text_small_symbols.npy"), *ids = test_npy(D "text_small_ids.npy");
    assert_int_equal(t->nsymbols, sym->size);
    for (int i = 0; i < t->nsymbols; i++) {
        assert_int_equal(t->symbol[i], ((uint8_t *)sym->data)[i]);
        assert_int_equal(t->id_of[t->symbol[i]], i);
    }
    assert_int_equal(t->id_of['Z'], -1);
    assert_int_equal(t->n, ids->size);
    for (int64_t i = 0; i < t->n; i++) assert_int_equal(t->ids[i], ((int32_t *)ids->data)[i]);

    ry_tensor *meta = test_npy(D "bptt_meta.npy");
    const int64_t *mt = meta->data; /* begin, end, batch, seq, stream, nwindows */
    ry_bptt b;
    check_ok(ry_bptt_init(&b, t, mt[0], mt[1], mt[2], mt[3], true, &err));
    assert_int_equal(b.stream, mt[4]);
    assert_int_equal(b.nwindows, mt[5]);
    for (int64_t k = 0; k < b.nwindows; k++) {
        char px[64], py[64];
        snprintf(px, sizeof px, D "bptt_x%lld.npy", (long long)k);
        snprintf(py, sizeof py, D "bptt_y%lld.npy", (long long)k);
        ry_tensor *x, *y, *wx = test_npy(px), *wy = test_npy(py);
        check_ok(ry_bptt_window(&b, k, &x, &y, &err));
        assert_int_equal(x->dtype, RY_INT32);
        test_assert_close(x, wx, 0, 0);
        test_assert_close(y, wy, 0, 0);
        ry_tensor_release(x);
        ry_tensor_release(y);
        ry_tensor_release(wx);
        ry_tensor_release(wy);
    }
    ry_tensor *x, *y;
    expect_err(ry_bptt_window(&b, b.nwindows, &x, &y, &err), NULL, "outside");
    assert_null(x);
    /* without the partial window there is one fewer (16 = 3 * 5 + 1) */
    check_ok(ry_bptt_init(&b, t, mt[0], mt[1], mt[2], mt[3], false, &err));
    assert_int_equal(b.nwindows, mt[5] - 1);
    expect_err(ry_bptt_init(&b, t, 0, t->n + 1, 2, 2, false, &err), NULL, "not inside the text");
    expect_err(ry_bptt_init(&b, t, 0, t->n, 0, 2, false, &err), NULL, "must be at least 1");
    expect_err(ry_bptt_init(&b, t, 0, 10, 4, 5, false, &err), NULL, "less than one window");
    ry_text *e;
    expect_err(ry_text_from_mem("empty.txt", "", 0, &e, &err), "empty.txt", "empty text");
    ry_tensor_release(meta);
    ry_tensor_release(sym);
    ry_tensor_release(ids);
    ry_text_free(t);
}

/* ---- damaged files never crash ----------------------------------------------------
 * Every prefix and many single-byte edits of good files, each in a heap
 * buffer of exactly its length so ASan sees any read past the end. */

static ry_status parse_buf(int kind, const uint8_t *data, size_t len) {
    uint8_t *b = malloc(len ? len : 1);
    memcpy(b, data, len);
    ry_status s;
    if (kind == 0) {
        ry_vocab *v = ry_vocab_new();
        ry_treebank *tb;
        s = ry_treebank_parse("mut.txt", (const char *)b, len, v, true, &tb, &err);
        if (s == RY_OK) {
            for (int t = 0; t < tb->ntrees; t++) /* a parsed tree is well formed */
                for (int i = 0; i < tb->trees[t].nnodes; i++) {
                    const ry_tree_node *nd = &tb->trees[t].nodes[i];
                    assert_true(nd->left < i && nd->right < i);
                    assert_true((nd->left < 0) == (nd->word >= 0));
                }
        } else {
            assert_true(err.line >= 1 || strstr(err.msg, "no trees"));
        }
        ry_treebank_free(tb);
        ry_vocab_free(v);
    } else {
        ry_tensor *t;
        s = ry_idx_read_mem("mut.idx", b, len, &t, &err);
        ry_tensor_release(t);
    }
    free(b);
    return s;
}

static void test_damaged_files(void **state) {
    (void)state;
    const char *files[3] = {D "sst_small.txt", D "idx_f32.idx", D "idx_u8.idx.gz"};
    const int kinds[3] = {0, 1, 1};
    const uint8_t edits[5] = {'(', ')', 'x', ' ', 0xff};
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *b = slurp(files[f], &len);
        int ok = 0;
        for (size_t n = 0; n < len; n++) ok += parse_buf(kinds[f], b, n) == RY_OK;
        if (kinds[f] == 1) assert_int_equal(ok, 0); /* an IDX prefix is never whole */
        assert_int_equal(parse_buf(kinds[f], b, len), RY_OK);
        for (size_t i = 0; i < len; i++)
            for (int e = 0; e < 5; e++) {
                uint8_t old = b[i];
                b[i] = edits[e];
                parse_buf(kinds[f], b, len);
                b[i] = old;
            }
        free(b);
    }
}

/* ---- out of memory ------------------------------------------------------------------ */

/* Runs f with the Nth allocation failing, for N = 0, 1, ... until it
 * succeeds: every failure must be an error value (and ASan sees no leak). */
static void oom_sweep(ry_status (*f)(void)) {
    for (long n = 0; n < 100000; n++) {
        ry_alloc_fail_after(n);
        ry_status s = f();
        ry_alloc_fail_after(-1);
        if (s == RY_OK) return;
        assert_true(err.msg[0] != '\0');
    }
    fail_msg("never succeeded");
}

static ry_status oom_treebank(void) {
    ry_vocab *v = ry_vocab_new();
    if (!v) return ry_error_at(&err, RY_NO_SPAN, "vocab: out of memory");
    ry_treebank *tb;
    ry_status s = ry_treebank_read(D "sst_small.txt", v, true, &tb, &err);
    ry_treebank_free(tb);
    ry_vocab_free(v);
    return s;
}

static ry_status oom_idx(void) {
    ry_tensor *x, *y;
    ry_status s = ry_mnist_load(D "mnist", "train", NULL, &x, &y, &err);
    ry_tensor_release(x);
    ry_tensor_release(y);
    return s;
}

static ry_status oom_values(void) {
    ry_module *m = NULL;
    ry_alloc_fail_after(-1); /* the module is set up without failures */
    ry_status s = ry_module_parse("t.relay", tree_module, strlen(tree_module), &m, &err);
    assert_int_equal(s, RY_OK);
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = NULL;
    s = ry_treebank_read(D "sst_small.txt", v, true, &tb, &err);
    assert_int_equal(s, RY_OK);
    static long n = 0;
    ry_alloc_fail_after(n++);
    ry_value *val = NULL;
    s = ry_tree_to_value(&tb->trees[0], ry_module_find_ctor(m, "Leaf"), ry_module_find_ctor(m, "Node"), &val, &err);
    ry_alloc_fail_after(-1);
    ry_value_release(val);
    ry_treebank_free(tb);
    ry_vocab_free(v);
    ry_module_free(m);
    if (s == RY_OK) n = 0;
    return s;
}

static ry_status oom_misc(void) {
    ry_text *t = NULL;
    ry_loader *l = NULL;
    ry_tensor *x = NULL, *y = NULL;
    ry_bptt b;
    ry_status s = ry_text_read(D "text_small.txt", &t, &err);
    if (s == RY_OK) s = ry_bptt_init(&b, t, 0, t->n, 2, 4, true, &err);
    if (s == RY_OK) s = ry_bptt_window(&b, 1, &x, &y, &err);
    if (s == RY_OK) s = ry_loader_new(100, &(ry_loader_opts){.batch = 7, .shuffle = true}, &l, &err);
    ry_tensor *arrays[1] = {x}, *tr[1], *va[1];
    if (s == RY_OK) s = ry_data_split_tensors(1, arrays, 1, 3, tr, va, &err);
    if (s == RY_OK) {
        ry_tensor_release(tr[0]);
        ry_tensor_release(va[0]);
    }
    ry_loader_free(l);
    ry_tensor_release(x);
    ry_tensor_release(y);
    ry_text_free(t);
    return s;
}

static void test_out_of_memory(void **state) {
    (void)state;
    oom_sweep(oom_treebank);
    oom_sweep(oom_idx);
    oom_sweep(oom_values);
    oom_sweep(oom_misc);
}

/* ---- the real SST and tinyshakespeare, when present ---------------------------------- */

#define SST_DIR "../shared/data/sst/"

static void test_sst_real(void **state) {
    (void)state;
    FILE *f = fopen(SST_DIR "train.txt", "rb");
    if (!f) {
        print_message("SST not found in " SST_DIR ": skipped\n");
        skip();
    }
    fclose(f);
    ry_module *m = test_parse(tree_module, true);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    ry_vocab *v = ry_vocab_new();
    const char *files[3] = {SST_DIR "train.txt", SST_DIR "dev.txt", SST_DIR "test.txt"};
    const int32_t want[3] = {8544, 1101, 2210};
    for (int k = 0; k < 3; k++) {
        ry_treebank *tb;
        check_ok(ry_treebank_read(files[k], v, k == 0, &tb, &err));
        assert_int_equal(tb->ntrees, want[k]);
        int64_t leaves = 0, unk = 0;
        for (int t = 0; t < tb->ntrees; t++) {
            const ry_tree *tr = &tb->trees[t];
            assert_int_equal(tr->line, t + 1);
            for (int i = 0; i < tr->nnodes; i++) {
                assert_in_range(tr->nodes[i].label, 0, 4);
                if (tr->nodes[i].left < 0) {
                    leaves++;
                    unk += tr->nodes[i].word == RY_VOCAB_UNK;
                }
            }
            assert_int_equal(tr->nnodes, 2 * ((tr->nnodes + 1) / 2) - 1);
        }
        if (k == 0) {
            assert_int_equal(unk, 0);
            /* the first tree: (3 (2 (2 The) (2 Rock)) ...) */
            const ry_tree *t0 = &tb->trees[0];
            assert_int_equal(t0->nodes[t0->nnodes - 1].label, 3);
            assert_string_equal(ry_vocab_word(v, t0->nodes[0].word), "The");
            assert_string_equal(ry_vocab_word(v, t0->nodes[1].word), "Rock");
            for (int t = 0; t < tb->ntrees; t += 97) {
                ry_value *val;
                check_ok(ry_tree_to_value(&tb->trees[t], leaf, node, &val, &err));
                check_value(val, &tb->trees[t], tb->trees[t].nnodes - 1, leaf, node);
                ry_value_release(val);
            }
        } else {
            assert_true(unk > 0 && unk < leaves / 10);
        }
        print_message("%s: %d trees, %lld leaves, %lld unknown, vocabulary %d\n", files[k], tb->ntrees,
                      (long long)leaves, (long long)unk, ry_vocab_size(v));
        ry_treebank_free(tb);
    }
    ry_vocab_free(v);
    ry_module_free(m);
}

static void test_shakespeare_real(void **state) {
    (void)state;
    const char *path = "../shared/data/tinyshakespeare/input.txt";
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("%s not found: skipped\n", path);
        skip();
    }
    fclose(f);
    ry_text *t;
    check_ok(ry_text_read(path, &t, &err));
    assert_int_equal(t->nsymbols, 65);
    assert_int_equal(t->symbol[t->ids[0]], 'F'); /* "First Citizen:" */
    ry_bptt b;
    int64_t split = t->n * 9 / 10;
    check_ok(ry_bptt_init(&b, t, 0, split, 32, 64, false, &err));
    assert_int_equal(b.stream, (split - 1) / 32);
    ry_tensor *x, *y;
    check_ok(ry_bptt_window(&b, b.nwindows - 1, &x, &y, &err));
    assert_int_equal(x->shape[0], 32);
    assert_int_equal(x->shape[1], 64);
    for (int r = 0; r < 32; r++)
        for (int s = 0; s + 1 < 64; s++)
            assert_int_equal(((int32_t *)y->data)[r * 64 + s], ((int32_t *)x->data)[r * 64 + s + 1]);
    ry_tensor_release(x);
    ry_tensor_release(y);
    ry_text_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_reference),
        cmocka_unit_test(test_rng_draws),
        cmocka_unit_test(test_rng_state),
        cmocka_unit_test(test_loader_shuffled_epochs),
        cmocka_unit_test(test_loader_order_and_drop),
        cmocka_unit_test(test_loader_resume),
        cmocka_unit_test(test_take_rows_and_split),
        cmocka_unit_test(test_npy_dataset),
        cmocka_unit_test(test_idx_types),
        cmocka_unit_test(test_idx_broken),
        cmocka_unit_test(test_idx_gzip_bomb),
        cmocka_unit_test(test_idx_gzip_absurd_size),
        cmocka_unit_test(test_mnist_fake),
        cmocka_unit_test(test_fashion_mnist_real),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_treebank_small),
        cmocka_unit_test(test_treebank_broken),
        cmocka_unit_test(test_tree_values),
        cmocka_unit_test(test_text_and_bptt),
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_sst_real),
        cmocka_unit_test(test_shakespeare_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
