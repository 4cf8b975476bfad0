/*
 * test_checkpoint_files.c: checkpoints that are not what they claim:
 * truncated, bit-flipped, edited behind the seal, foreign, written by
 * h5py, damaged without a seal, crafted to crash libhdf5 or to declare more
 * than the file holds, in a directory of good ones; a refused load changes
 * nothing. After every test no HDF5 object may be left open.
 */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint_util.h"

/* ---- damaged and foreign files --------------------------------------------------- */

static void test_truncated_files(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128], cut[128];
    in_dir(&s, "f.h5", path, sizeof path);
    in_dir(&s, "cut.h5", cut, sizeof cut);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    unsigned char *buf;
    long n;
    read_whole(path, &buf, &n);
    const long lengths[] = {0, 1, 7, 39, 100, 511, 512, 600, n / 2, n - 100, n - 1};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        write_whole(cut, buf, lengths[i]);
        assert_int_equal(ry_checkpoint_load(cut, q, NULL, NULL, &err), RY_ERR);
        assert_string_equal(err.file, cut);
        if (lengths[i] < 40) assert_err_has(&err, cut, "not an HDF5 file");
        else assert_err_has(&err, cut, "truncated checkpoint");
        assert_no_h5_objects();
    }
    free(buf);
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* Byte offset of dataset dpath's data in the file, through libhdf5. */
static long data_offset(const char *path, const char *dpath) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, dpath, H5P_DEFAULT);
    assert_true(d >= 0);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    assert_true(off != HADDR_UNDEF);
    return (long)off;
}

static void test_flipped_bytes(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128], bad[128];
    in_dir(&s, "g.h5", path, sizeof path);
    in_dir(&s, "bad.h5", bad, sizeof bad);
    ry_param_set *p = model_set(RY_FLOAT64, 1), *q = ry_params_like(p);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    unsigned char *buf;
    long n;
    read_whole(path, &buf, &n);
    /* one bit in w1's data (offsets count from the superblock, after the
     * 512-byte user block) */
    long off = data_offset(path, "/params/w1");
    assert_true(off > 0 && off < n);
    buf[off + 3] ^= 0x10;
    write_whole(bad, buf, n);
    assert_int_equal(ry_checkpoint_load(bad, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, bad, "does not match its seal");
    buf[off + 3] ^= 0x10;
    /* a flip anywhere: an error, never a crash, never wrong data */
    uint64_t seed = 7;
    int fds = count_fds();
    for (int trial = 0; trial < 150; trial++) {
        long at = (long)(rng_next(&seed) % (uint64_t)n);
        unsigned char bit = (unsigned char)(1u << (rng_next(&seed) % 8));
        buf[at] ^= bit;
        write_whole(bad, buf, n);
        buf[at] ^= bit;
        ry_params_fill(q, 0);
        if (ry_checkpoint_load(bad, q, NULL, NULL, &err) == RY_OK) {
            /* only bytes of the seal nobody reads may change harmlessly */
            assert_true(at >= 40 && at < 512);
            assert_true(same_values(p, q));
        } else {
            assert_string_equal(err.file, bad);
        }
        assert_no_h5_objects();
    }
    assert_int_equal(count_fds(), fds);
    free(buf);
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* Changes w1's first element with libhdf5 (as a tool editing the file
 * would), then reseals so only the checksum attributes can notice. */
static void test_checksum_catches_edits_behind_the_seal(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "h.h5", path, sizeof path);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/params/w1", H5P_DEFAULT);
    float w[12];
    assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) >= 0);
    w[0] += 1;
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) >= 0);
    H5Dclose(d);
    H5Fclose(f);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "does not match its seal");
    int fd = open(path, O_RDWR);
    assert_int_equal(ry_ckpt_seal_write(fd, path, &err), RY_OK);
    close(fd);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "damaged checkpoint: dataset /params/w1 has CRC-32");
    /* an editor that also fixed the dataset's own crc32: the file checksum */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    d = H5Dopen2(f, "/params/w1", H5P_DEFAULT);
    assert_true(H5Adelete(d, "crc32") >= 0);
    assert_int_equal(ry_ckpt_attr_write_u32(d, "crc32", ry_ckpt_crc(0, w, sizeof w)), RY_OK);
    H5Dclose(d);
    H5Fclose(f);
    fd = open(path, O_RDWR);
    assert_int_equal(ry_ckpt_seal_write(fd, path, &err), RY_OK);
    close(fd);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "damaged checkpoint: checksum");
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* Seals path again over whatever it now holds. */
static void reseal(const char *path) {
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    ry_error err;
    if (ry_ckpt_seal_write(fd, path, &err)) fail_msg("%s", err.msg);
    close(fd);
}

/* Rewrites one root attribute through libhdf5 and reseals. */
static void set_attr_and_reseal(const char *path, const char *name, int64_t v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete(f, name) >= 0);
    assert_int_equal(ry_ckpt_attr_write_i64(f, name, v), RY_OK);
    H5Fclose(f);
    reseal(path);
}

static void test_foreign_files(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128], txt[128], plain[128];
    in_dir(&s, "i.h5", path, sizeof path);
    in_dir(&s, "notes.txt", txt, sizeof txt);
    in_dir(&s, "plain.h5", plain, sizeof plain);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    ry_error err;
    const char text[] = "this is not an HDF5 file, just text that is long enough to matter.\n";
    write_whole(txt, text, (long)sizeof text - 1);
    assert_int_equal(ry_checkpoint_load(txt, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, txt, "not an HDF5 file");
    assert_int_equal(ry_checkpoint_load(s.dir, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, s.dir, "not a regular file");
    in_dir(&s, "absent.h5", path, sizeof path);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "No such file");

    /* an HDF5 file, but not a checkpoint */
    hid_t f = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    assert_int_equal(ry_checkpoint_load(plain, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, plain, "not sealed by relayc");
    char out[128];
    assert_int_equal(ry_checkpoint_import(plain, in_dir(&s, "out.h5", out, sizeof out), &err), RY_ERR);
    assert_err_has(&err, plain, "attribute 'format' is missing");
    assert_false(file_exists(out));

    /* a checkpoint from a future format */
    in_dir(&s, "future.h5", path, sizeof path);
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    set_attr_and_reseal(path, "format_version", 2);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "format version 2; this relayc reads version 1");
    /* a wrong step is caught by the checksum */
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    set_attr_and_reseal(path, "step", 5);
    assert_int_equal(ry_checkpoint_inspect(path, &(ry_checkpoint_info *){NULL}, &err), RY_ERR);
    assert_err_has(&err, path, "checksum");
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* tests/checkpoint/h5py_written.h5 comes from tools/gen_checkpoint_tests.py:
 * no seal, variable-length strings, written by h5py, and the checksum
 * computed in Python. Its values are in the same folder as .npy files. */
static void test_reads_h5py_file(void **state) {
    (void)state;
    const char *foreign = "tests/checkpoint/h5py_written.h5";
    ry_checkpoint_info *info = NULL;
    ry_error err;
    /* not sealed: refused as a checkpoint until imported */
    assert_int_equal(ry_checkpoint_inspect(foreign, &info, &err), RY_ERR);
    assert_err_has(&err, foreign, "not sealed by relayc");
    assert_int_equal(ry_checkpoint_verify(foreign, &err), RY_ERR);
    assert_err_has(&err, foreign, "relayc checkpoint import");
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "imported.h5", path, sizeof path);
    if (ry_checkpoint_import(foreign, path, &err) != RY_OK) fail_msg("%s", err.msg);
    if (ry_checkpoint_inspect(path, &info, &err) != RY_OK) fail_msg("%s", err.msg);
    assert_true(info->sealed);
    assert_int_equal(info->n, 4);
    assert_int_equal(info->meta.step, 300);
    assert_int_equal(info->meta.epoch, 2);
    assert_int_equal(info->meta.rng_len, 2);
    assert_true(info->meta.rng[0] == 12345 && info->meta.rng[1] == UINT64_MAX);
    assert_string_equal(info->meta.model_text, "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2, 3), float32]) { %x }\n");
    assert_string_equal(info->meta.config, "optimizer=sgd\nlr=0.05\n");
    ry_checkpoint_info_free(info);

    static const int64_t w[] = {2, 3}, b[] = {3};
    const char *names[] = {"dense/w", "b"};
    const int ndims[] = {2, 1};
    const int64_t *shapes[] = {w, b};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes), *m = ry_params_like(p);
    const char *slot_names[] = {"momentum"};
    ry_param_set *sets[] = {m};
    ry_checkpoint_slots slots = {1, slot_names, sets};
    if (ry_checkpoint_load(path, p, &slots, NULL, &err) != RY_OK) fail_msg("%s", err.msg);
    ry_tensor *want = test_npy("tests/checkpoint/dense_w.npy");
    test_assert_close(p->views[0], want, 0, 0);
    ry_tensor_release(want);
    want = test_npy("tests/checkpoint/b.npy");
    test_assert_close(p->views[1], want, 0, 0);
    ry_tensor_release(want);
    want = test_npy("tests/checkpoint/dense_w_momentum.npy");
    test_assert_close(m->views[0], want, 0, 0);
    ry_tensor_release(want);
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(m);
    scratch_free(&s);
}

/* Without a seal libhdf5 parses damage itself: its error must come back
 * as our message, with nothing printed on stderr, and a flipped data byte
 * must be caught by the checksum. */
static void test_unsealed_damage_is_reported_quietly(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char cut[128], log[128];
    in_dir(&s, "cut.h5", cut, sizeof cut);
    in_dir(&s, "stderr.txt", log, sizeof log);
    unsigned char *buf;
    long n;
    read_whole("tests/checkpoint/h5py_written.h5", &buf, &n);
    write_whole(cut, buf, n / 2);
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    ry_error err;
    char out[128];
    in_dir(&s, "out.h5", out, sizeof out);
    ry_status st = ry_checkpoint_import(cut, out, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(st, RY_ERR);
    assert_err_has(&err, cut, "cannot open as HDF5: ");
    assert_int_equal(file_size(log), 0);

    long off = data_offset("tests/checkpoint/h5py_written.h5", "/params/b");
    buf[off] ^= 1;
    write_whole(cut, buf, n);
    assert_int_equal(ry_checkpoint_import(cut, out, &err), RY_ERR);
    assert_err_has(&err, cut, "damaged checkpoint: checksum");
    assert_false(file_exists(out));
    free(buf);
    assert_no_h5_objects();
    scratch_free(&s);
}

static void copy_file(const char *src, const char *dst) {
    unsigned char *buf;
    long n;
    read_whole(src, &buf, &n);
    write_whole(dst, buf, n);
    free(buf);
}

/* dst := src behind a 512-byte user block, sealed: the seal is a CRC
 * anyone can compute, so a crafted file can carry one. */
static void seal_copy(const char *src, const char *dst) {
    unsigned char *buf;
    long n;
    read_whole(src, &buf, &n);
    unsigned char *all = calloc(1, (size_t)n + CKPT_USERBLOCK);
    assert_non_null(all);
    memcpy(all + CKPT_USERBLOCK, buf, (size_t)n);
    write_whole(dst, all, n + CKPT_USERBLOCK);
    free(all);
    free(buf);
    reseal(dst);
}

/* tests/checkpoint/crash_h5hg.h5 is what the checkpoint fuzzer
 * (tests/fuzz/fuzz_checkpoint.c) made of h5py_written.h5: it makes
 * libhdf5 1.10 read a wild address in H5HG_read. As it is (unsealed) it
 * is refused before libhdf5 sees it, and an import reads it; sealed, it
 * reaches libhdf5 from every entry point. Either way libhdf5 runs in the
 * reading child, so this process gets an error naming the file, not the
 * crash. */
static void test_file_that_crashes_libhdf5_is_refused(void **state) {
    (void)state;
    ry_error err;
    scratch s;
    scratch_new(&s);
    char path[128], out[128];
    const char *raw = "tests/checkpoint/crash_h5hg.h5";
    assert_int_equal(ry_checkpoint_verify(raw, &err), RY_ERR);
    assert_err_has(&err, raw, "not sealed by relayc");
    assert_int_equal(ry_checkpoint_import(raw, in_dir(&s, "out.h5", out, sizeof out), &err), RY_ERR);
    assert_err_has(&err, raw, "damaged checkpoint: libhdf5 crashed reading it (signal");
    assert_false(file_exists(out));
    seal_copy(raw, in_dir(&s, "sealed.h5", path, sizeof path));
    ry_checkpoint_info *info = NULL;
    assert_int_equal(ry_checkpoint_inspect(path, &info, &err), RY_ERR);
    assert_null(info);
    assert_err_has(&err, path, "damaged checkpoint: libhdf5 crashed reading it (signal");
    assert_int_equal(ry_checkpoint_verify(path, &err), RY_ERR);
    assert_err_has(&err, path, "libhdf5 crashed");
    static const int64_t w[] = {2, 3}, b[] = {3};
    const char *names[] = {"dense/w", "b"};
    const int ndims[] = {2, 1};
    const int64_t *shapes[] = {w, b};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes);
    assert_int_equal(ry_checkpoint_load(path, p, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "libhdf5 crashed");
    ry_params_free(p);
    assert_no_h5_objects();
    scratch_free(&s);
}

/* A resume's directory holding, above a good checkpoint, one file that
 * crashes libhdf5 and one that never lets a read finish (a FIFO nobody
 * writes: opening it blocks): the good one is found, within the read time
 * limit, and both others are put aside. The load's libhdf5 runs only in
 * the reading child: this process answers whatever it does. */
static void test_crafted_files_in_a_directory_are_skipped(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    fill_random(p, 3);
    ry_checkpoint_meta meta = {.step = 3};
    char path[256], got[256];
    ry_error err;
    assert_int_equal(ry_checkpoint_save_dir(s.dir, 5, p, NULL, &meta, path, sizeof path, &err), RY_OK);
    seal_copy("tests/checkpoint/crash_h5hg.h5", in_dir(&s, "ckpt-9.h5", path, sizeof path));
    /* and a foreign file, unsealed: refused without reaching libhdf5 */
    copy_file("tests/checkpoint/h5py_written.h5", in_dir(&s, "ckpt-10.h5", path, sizeof path));
    assert_int_equal(mkfifo(in_dir(&s, "ckpt-12.h5", path, sizeof path), 0600), 0);
    ry_ckpt_set_read_seconds(1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool found = false;
    assert_int_equal(ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err), RY_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ry_ckpt_set_read_seconds(0); /* back to the default */
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    assert_true(found);
    assert_string_equal(got, in_dir(&s, "ckpt-3.h5", path, sizeof path));
    assert_true(secs < 10);
    assert_true(file_exists(in_dir(&s, "ckpt-9.h5.corrupt", path, sizeof path)));
    assert_true(file_exists(in_dir(&s, "ckpt-12.h5.corrupt", path, sizeof path)));
    assert_true(file_exists(in_dir(&s, "ckpt-10.h5.corrupt", path, sizeof path)));
    assert_int_equal(ry_checkpoint_load(got, q, NULL, NULL, &err), RY_OK);
    assert_true(same_values(p, q));
    /* the FIFO's read as an error of its own */
    ry_ckpt_set_read_seconds(1);
    assert_int_equal(ry_checkpoint_verify(in_dir(&s, "ckpt-12.h5.corrupt", path, sizeof path), &err), RY_ERR);
    ry_ckpt_set_read_seconds(0);
    assert_err_has(&err, path, "damaged checkpoint: reading it did not finish in 1 s");
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* A sealed file whose dataset declares far more data than the file holds
 * (float32[1000000, 1000], 4 GB, in a file of a few KB: libhdf5 would
 * hand back its fill value) is refused from the listing, before any of it
 * is read or allocated. */
static void test_declared_size_beyond_the_file(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 1);
    char path[256];
    ry_error err;
    assert_int_equal(ry_checkpoint_save(in_dir(&s, "big.h5", path, sizeof path), p, NULL, NULL, &err), RY_OK);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hsize_t dims[2] = {1000000, 1000};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f, "/params/huge", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(space >= 0 && d >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
    reseal(path);
    assert_true(file_size(path) < 1 << 20);
    assert_int_equal(ry_checkpoint_verify(path, &err), RY_ERR);
    assert_err_has(&err, path, "damaged checkpoint: dataset /params/huge declares more data than the file's");
    ry_params_free(p);
    scratch_free(&s);
}

/* A load refused by the reading child leaves the caller's sets as they
 * were, whatever the child had written into its copies. */
static void test_refused_load_changes_nothing(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    fill_random(p, 4);
    char path[256];
    ry_error err;
    ry_checkpoint_meta meta = {.step = 4};
    assert_int_equal(ry_checkpoint_save(in_dir(&s, "a.h5", path, sizeof path), p, NULL, &meta, &err), RY_OK);
    ry_params_fill(q, 7);
    /* a flipped data bit under a valid seal: the child reads the data
     * into its copies, then the dataset's CRC refuses it */
    unsigned char *buf;
    long n;
    read_whole(path, &buf, &n);
    long off = data_offset(path, "/params/w1");
    assert_true(off > 0 && off + 3 < n);
    buf[off + 3] ^= 0x40;
    write_whole(in_dir(&s, "b.h5", path, sizeof path), buf, n);
    free(buf);
    reseal(path);
    ry_checkpoint_meta got;
    memset(&got, 0, sizeof got);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, &got, &err), RY_ERR);
    assert_err_has(&err, path, "damaged checkpoint: dataset /params/w1 has CRC-32");
    assert_null(got.model_text);
    for (int64_t i = 0; i < q->slab->size; i++) assert_true(ry_tensor_get(q->slab, i) == 7.0);
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_files),
        cmocka_unit_test(test_flipped_bytes),
        cmocka_unit_test(test_checksum_catches_edits_behind_the_seal),
        cmocka_unit_test(test_foreign_files),
        cmocka_unit_test(test_reads_h5py_file),
        cmocka_unit_test(test_unsealed_damage_is_reported_quietly),
        cmocka_unit_test(test_file_that_crashes_libhdf5_is_refused),
        cmocka_unit_test(test_crafted_files_in_a_directory_are_skipped),
        cmocka_unit_test(test_refused_load_changes_nothing),
        cmocka_unit_test(test_declared_size_beyond_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
