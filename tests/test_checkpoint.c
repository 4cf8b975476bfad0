/*
 * test_checkpoint.c: HDF5 checkpoints: round trips (float32/float64 sets,
 * optimizer slots, attributes, long model text, nested names), mismatched
 * names/shapes/dtypes, truncated, bit-flipped and foreign files, a file
 * written by h5py, saves killed with SIGKILL at random moments, failed
 * saves, and a directory keeping the last K. After every test no HDF5
 * object may be left open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "relayc/checkpoint.h"
#include "io/checkpoint_impl.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct scratch {
    char dir[64];
} scratch;

static void scratch_new(scratch *s) {
    snprintf(s->dir, sizeof s->dir, "/tmp/ry-ckpt-XXXXXX");
    assert_non_null(mkdtemp(s->dir));
}

static void scratch_free(scratch *s) {
    DIR *d = opendir(s->dir);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", s->dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(s->dir);
}

static const char *in_dir(const scratch *s, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", s->dir, name);
    return buf;
}

/* Nothing may stay open inside libhdf5 after any of our calls. */
static void assert_no_h5_objects(void) {
    assert_int_equal(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
}

/* Open file descriptors of this process: a leaked HDF5 file or fd shows. */
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *de; (de = readdir(d)) != NULL;) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(ry_param_set *p, uint64_t seed) {
    for (int64_t i = 0; i < p->slab->size; i++)
        ry_tensor_set(p->slab, i, (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.5);
}

/* w1 [3, 4], b1 [4], scale [] (a scalar), empty [0, 5], and a nested
 * name as Relay identifiers allow. */
static ry_param_set *model_set(ry_dtype dt, uint64_t seed) {
    static const int64_t w[] = {3, 4}, b[] = {4}, e[] = {0, 5}, c[] = {2, 3, 2};
    const char *names[] = {"w1", "b1", "scale", "empty", "conv/w"};
    const int ndims[] = {2, 1, 0, 2, 3};
    const int64_t *shapes[] = {w, b, NULL, e, c};
    ry_param_set *p = ry_params_new(dt, 5, names, ndims, shapes);
    assert_non_null(p);
    fill_random(p, seed);
    return p;
}

static bool same_values(const ry_param_set *a, const ry_param_set *b) {
    if (!ry_params_same_layout(a, b)) return false;
    for (int i = 0; i < a->n; i++)
        if (memcmp(a->views[i]->data, b->views[i]->data, ry_tensor_nbytes(a->views[i])) != 0)
            return false;
    return true;
}

static char *long_text(size_t n) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    static const char line[] = "  %1 = nn.dense(%x, %w1, units=4); /* padding to make it long */\n";
    for (size_t i = 0; i < n; i++) s[i] = line[i % (sizeof line - 1)];
    s[n] = '\0';
    return s;
}

static void assert_err_has(const ry_error *err, const char *file, const char *what) {
    if (file && strcmp(err->file, file) != 0) fail_msg("error names %s, not %s", err->file, file);
    if (!strstr(err->msg, what)) fail_msg("error \"%s\" does not mention \"%s\"", err->msg, what);
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static long file_size(const char *p) {
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long)st.st_size;
}

static void read_whole(const char *p, unsigned char **buf, long *n) {
    *n = file_size(p);
    *buf = malloc((size_t)*n);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    assert_int_equal(fread(*buf, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
}

static void write_whole(const char *p, const void *buf, long n) {
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
}

/* ---- round trips ------------------------------------------------------------ */

static void test_round_trip_float32_with_slots(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "a.h5", path, sizeof path);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *m = ry_params_like(p), *v = ry_params_like(p);
    fill_random(m, 2);
    fill_random(v, 3);
    const char *slot_names[] = {"m", "v"};
    ry_param_set *sets[] = {m, v};
    ry_checkpoint_slots slots = {2, slot_names, sets};
    char *text = long_text(300000); /* past HDF5's 64 KiB compact attribute limit */
    ry_checkpoint_meta meta = {.step = 1234, .epoch = 7, .rng_len = 4,
                               .rng = {1, UINT64_MAX, 0x0123456789abcdefull, 0},
                               .model_text = text, .config = "optimizer=adam\nlr=0.001\n"};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, &slots, &meta, &err), RY_OK);
    assert_no_h5_objects();

    ry_param_set *p2 = ry_params_like(p), *m2 = ry_params_like(p), *v2 = ry_params_like(p);
    ry_param_set *sets2[] = {m2, v2};
    ry_checkpoint_slots slots2 = {2, slot_names, sets2};
    ry_checkpoint_meta got;
    memset(&got, 0xab, sizeof got);
    if (ry_checkpoint_load(path, p2, &slots2, &got, &err) != RY_OK) fail_msg("%s", err.msg);
    assert_no_h5_objects();
    assert_true(same_values(p, p2));
    assert_true(same_values(m, m2));
    assert_true(same_values(v, v2));
    assert_int_equal(got.step, 1234);
    assert_int_equal(got.epoch, 7);
    assert_int_equal(got.rng_len, 4);
    assert_memory_equal(got.rng, meta.rng, 4 * sizeof(uint64_t));
    assert_string_equal(got.model_text, text);
    assert_string_equal(got.config, meta.config);
    ry_checkpoint_meta_clear(&got);
    assert_null(got.model_text);

    /* optimizer state may be skipped (inference, export) */
    fill_random(p2, 99);
    assert_int_equal(ry_checkpoint_load(path, p2, NULL, NULL, &err), RY_OK);
    assert_true(same_values(p, p2));
    assert_no_h5_objects();

    free(text);
    ry_params_free(p);
    ry_params_free(m);
    ry_params_free(v);
    ry_params_free(p2);
    ry_params_free(m2);
    ry_params_free(v2);
    scratch_free(&s);
}

static void test_round_trip_float64_bare(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "b.h5", path, sizeof path);
    ry_param_set *p = model_set(RY_FLOAT64, 5), *q = ry_params_like(p);
    ry_error err;
    /* no slots, no meta: step 0, empty strings, no RNG words */
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    ry_checkpoint_meta got;
    assert_int_equal(ry_checkpoint_load(path, q, NULL, &got, &err), RY_OK);
    assert_true(same_values(p, q));
    assert_int_equal(got.step, 0);
    assert_int_equal(got.rng_len, 0);
    assert_string_equal(got.model_text, "");
    assert_string_equal(got.config, "");
    ry_checkpoint_meta_clear(&got);
    /* saving again replaces the file */
    fill_random(p, 6);
    ry_checkpoint_meta meta = {.step = -3, .epoch = INT64_MAX, .rng_len = RY_CHECKPOINT_RNG_MAX};
    for (int i = 0; i < RY_CHECKPOINT_RNG_MAX; i++) meta.rng[i] = (uint64_t)i * 977;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, &meta, &err), RY_OK);
    assert_int_equal(ry_checkpoint_load(path, q, NULL, &got, &err), RY_OK);
    assert_true(same_values(p, q));
    assert_int_equal(got.step, -3);
    assert_int_equal(got.epoch, INT64_MAX);
    assert_int_equal(got.rng_len, RY_CHECKPOINT_RNG_MAX);
    assert_int_equal(got.rng[63], 63 * 977);
    ry_checkpoint_meta_clear(&got);
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

static void test_inspect(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "c.h5", path, sizeof path);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *m = ry_params_like(p);
    const char *slot_names[] = {"momentum"};
    ry_param_set *sets[] = {m};
    ry_checkpoint_slots slots = {1, slot_names, sets};
    ry_checkpoint_meta meta = {.step = 10, .epoch = 1, .rng_len = 2, .rng = {5, 6},
                               .model_text = "def @main() { 0 }", .config = "lr=1"};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, &slots, &meta, &err), RY_OK);
    ry_checkpoint_info *info = NULL;
    assert_int_equal(ry_checkpoint_inspect(path, &info, &err), RY_OK);
    assert_no_h5_objects();
    assert_true(info->sealed);
    assert_int_equal(info->version, RY_CHECKPOINT_VERSION);
    char buf[2048] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    ry_checkpoint_info_print(f, info);
    fclose(f);
    char want[2048];
    snprintf(want, sizeof want,
             "format_version 1 (sealed)\nstep 10\nepoch 1\nchecksum 0x%08x\nrng_state [5, 6]\n"
             "model_text 17 bytes\nconfig 4 bytes\n"
             "/optimizer/b1/momentum float32[4]\n/optimizer/conv/w/momentum float32[2, 3, 2]\n"
             "/optimizer/empty/momentum float32[0, 5]\n/optimizer/scale/momentum float32[]\n"
             "/optimizer/w1/momentum float32[3, 4]\n/params/b1 float32[4]\n"
             "/params/conv/w float32[2, 3, 2]\n/params/empty float32[0, 5]\n"
             "/params/scale float32[]\n/params/w1 float32[3, 4]\n",
             info->checksum);
    assert_string_equal(buf, want);
    assert_int_equal(ry_checkpoint_verify(path, &err), RY_OK);
    ry_checkpoint_info_free(info);
    ry_params_free(p);
    ry_params_free(m);
    scratch_free(&s);
}

/* ---- mismatches ------------------------------------------------------------- */

/* Loads path into q and expects an error naming path and mentioning what;
 * q must come back untouched. */
static void expect_mismatch(const char *path, ry_param_set *q, const ry_checkpoint_slots *slots,
                            const char *what) {
    ry_params_fill(q, 42);
    ry_error err;
    assert_int_equal(ry_checkpoint_load(path, q, slots, NULL, &err), RY_ERR);
    assert_err_has(&err, path, what);
    for (int64_t i = 0; i < q->slab->size; i++) assert_true(ry_tensor_get(q->slab, i) == 42);
    for (int s = 0; slots && s < slots->n; s++)
        for (int64_t i = 0; i < slots->sets[s]->slab->size; i++)
            assert_true(ry_tensor_get(slots->sets[s]->slab, i) == 0);
    assert_no_h5_objects();
}

static void test_mismatched_layouts(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "d.h5", path, sizeof path);
    static const int64_t w[] = {3, 4}, wt[] = {4, 3}, b[] = {4};
    const char *names[] = {"w1", "b1"};
    const int ndims[] = {2, 1};
    const int64_t *shapes[] = {w, b};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);

    const int64_t *transposed[] = {wt, b};
    ry_param_set *q = ry_params_new(RY_FLOAT32, 2, names, ndims, transposed);
    expect_mismatch(path, q, NULL, "dataset /params/w1 is float32[3, 4], expected float32[4, 3]");
    ry_params_free(q);

    q = ry_params_new(RY_FLOAT64, 2, names, ndims, shapes);
    expect_mismatch(path, q, NULL, "dataset /params/w1 is float32[3, 4], expected float64[3, 4]");
    ry_params_free(q);

    const char *renamed[] = {"w1", "bias"};
    q = ry_params_new(RY_FLOAT32, 2, renamed, ndims, shapes);
    expect_mismatch(path, q, NULL, "dataset /params/bias is missing");
    ry_params_free(q);

    q = ry_params_new(RY_FLOAT32, 1, names, ndims, shapes); /* the file has more */
    expect_mismatch(path, q, NULL, "dataset /params/b1 is not part of the expected model");
    ry_params_free(q);

    q = ry_params_like(p); /* optimizer state asked for, none saved */
    ry_param_set *m = ry_params_like(p);
    const char *slot_names[] = {"m"};
    ry_param_set *sets[] = {m};
    ry_checkpoint_slots slots = {1, slot_names, sets};
    expect_mismatch(path, q, &slots, "dataset /optimizer/w1/m is missing");

    /* saved with slot m; loading asks for slot v only */
    assert_int_equal(ry_checkpoint_save(path, p, &slots, NULL, &err), RY_OK);
    const char *other[] = {"v"};
    ry_checkpoint_slots vslots = {1, other, sets};
    expect_mismatch(path, q, &vslots, "dataset /optimizer/w1/v is missing");
    ry_params_free(q);
    ry_params_free(m);
    ry_params_free(p);
    scratch_free(&s);
}

static void test_bad_names_are_refused(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "e.h5", path, sizeof path);
    static const int64_t b[] = {2};
    const int ndims[] = {1, 1};
    const int64_t *shapes[] = {b, b};
    const char *bad[][2] = {{"a", "a/b"}, {"x", "/lead"}, {"x", "trail/"}, {"x", "a//b"},
                            {"x", ".."}, {"x", "a/./b"}, {"x", ""}};
    ry_error err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ry_param_set *p = ry_params_new(RY_FLOAT32, 2, bad[i], ndims, shapes);
        assert_non_null(p);
        assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_ERR);
        assert_false(file_exists(path));
        ry_params_free(p);
    }
    const char *good[] = {"x", "y"};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 2, good, ndims, shapes);
    const char *slash_slot[] = {"m/1"};
    ry_param_set *sets[] = {p};
    ry_checkpoint_slots slots = {1, slash_slot, sets};
    assert_int_equal(ry_checkpoint_save(path, p, &slots, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "bad optimizer slot");
    const char *twice[] = {"m", "m"};
    ry_param_set *sets2[] = {p, p};
    ry_checkpoint_slots slots2 = {2, twice, sets2};
    assert_int_equal(ry_checkpoint_save(path, p, &slots2, NULL, &err), RY_ERR);
    assert_err_has(&err, path, "optimizer slot 'm' given twice");
    ry_checkpoint_meta meta = {.rng_len = RY_CHECKPOINT_RNG_MAX + 1};
    assert_int_equal(ry_checkpoint_save(path, p, NULL, &meta, &err), RY_ERR);
    assert_err_has(&err, path, "rng_len");
    assert_false(file_exists(path));
    ry_params_free(p);
    assert_no_h5_objects();
    scratch_free(&s);
}

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

/* ---- atomicity -------------------------------------------------------------------- */

/* Version k of the big set: every element k. */
static ry_param_set *big_set(void) {
    static const int64_t big[] = {1 << 20}, small[] = {7};
    const char *names[] = {"big", "small"};
    const int ndims[] = {1, 1};
    const int64_t *shapes[] = {big, small};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 2, names, ndims, shapes);
    assert_non_null(p);
    return p;
}

static void save_version(const char *path, ry_param_set *p, int64_t k) {
    float *x = p->slab->data; /* not ry_params_fill: this loop is hot under valgrind */
    for (int64_t i = 0; i < p->slab->size; i++) x[i] = (float)k;
    ry_checkpoint_meta meta = {.step = k, .epoch = k / 10, .rng_len = 1, .rng = {(uint64_t)k}};
    ry_error err;
    if (ry_checkpoint_save(path, p, NULL, &meta, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        _exit(3);
    }
}

/* The file at path must be one complete version k >= lo: all elements k. */
static int64_t assert_complete_version(const char *path, ry_param_set *q, int64_t lo) {
    ry_checkpoint_meta meta;
    ry_error err;
    if (ry_checkpoint_load(path, q, NULL, &meta, &err) != RY_OK) fail_msg("%s", err.msg);
    int64_t k = meta.step;
    ry_checkpoint_meta_clear(&meta);
    assert_true(k >= lo);
    assert_true(meta.rng_len == 1 && meta.rng[0] == (uint64_t)k);
    for (int64_t i = 0; i < q->slab->size; i += 4099) assert_true(ry_tensor_get(q->slab, i) == (double)k);
    assert_true(ry_tensor_get(q->views[0], (1 << 20) - 1) == (double)k);
    assert_true(ry_tensor_get(q->views[1], 6) == (double)k);
    return k;
}

static int count_tmp_files(const scratch *s) {
    DIR *d = opendir(s->dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) n += strstr(de->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* A child saves versions back to back over a good file, telling the
 * parent through a pipe after each complete save; the parent kills it
 * with SIGKILL at a random moment after the first. */
static void test_killed_saves_leave_a_complete_file(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "atomic.h5", path, sizeof path);
    ry_param_set *p = big_set(), *q = big_set();
    save_version(path, p, 0);
    srand(20261129); /* the kill points still vary with timing */
    int left_tmp = 0;
    /* 8 rounds, and more (up to 64) until a kill has landed inside a save:
     * where one falls depends on the machine's load */
    for (int round = 1; round <= 64 && (round <= 8 || left_tmp == 0); round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        int64_t base = round * 1000;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            for (int64_t k = base;; k++) {
                save_version(path, p, k);
                if (write(fds[1], "x", 1) != 1) _exit(4);
            }
        }
        close(fds[1]);
        /* time one save cycle (base+1), then kill at a random point of
         * the next: most of a cycle is spent inside the save */
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1); /* base is complete */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(read(fds[0], &c, 1), 1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long cycle_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
        usleep((useconds_t)(rand() % (cycle_us > 1 ? cycle_us : 1)));
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(fds[0]);
        assert_complete_version(path, q, base + 1);
        left_tmp += count_tmp_files(&s) > 0;
    }
    /* the kills did land inside saves */
    assert_true(left_tmp > 0);
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* A save that fails part-way (the file-size limit stands in for a full
 * disk) removes its temporary and leaves the previous file as it was. */
static void test_failed_save_keeps_previous(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "keep.h5", path, sizeof path);
    ry_param_set *p = big_set(), *q = big_set();
    save_version(path, p, 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1 << 20, 1 << 20};
        setrlimit(RLIMIT_FSIZE, &rl);
        ry_params_fill(p, 2);
        ry_error err;
        ry_status st = ry_checkpoint_save(path, p, NULL, &(ry_checkpoint_meta){.step = 2}, &err);
        ry_params_free(p); /* so valgrind finds no leak in the child */
        ry_params_free(q);
        _exit(st == RY_ERR && strstr(err.msg, "cannot") ? 0 : 5);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_tmp_files(&s), 0);
    assert_int_equal(assert_complete_version(path, q, 1), 1);

    /* a directory that does not exist */
    char nowhere[160];
    snprintf(nowhere, sizeof nowhere, "%s/no/such/dir/x.h5", s.dir);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(nowhere, p, NULL, NULL, &err), RY_ERR);
    assert_err_has(&err, nowhere, "cannot create");
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* A write the file system refuses (a full disk; here the file-size limit,
 * which fails the same write) is one line naming the file and the errno,
 * not HDF5's multi-line text. In a child, whose limit dies with it. */
static void test_failed_write_is_one_line(void **state) {
    (void)state;
    char msg[300] = "file write failed: time = Tue Dec  1 22:34:04 2026\n, filename = 'x.tmp', "
                    "file descriptor = 4, errno = 28, error message = 'No space left on device', "
                    "buf = 0x7f, total write size = 4131328";
    ry_ckpt_h5_tidy(msg);
    assert_string_equal(msg, "file write failed: No space left on device (errno 28)");
    char other[256] = "two\nlines";
    ry_ckpt_h5_tidy(other);
    assert_string_equal(other, "two lines");
    scratch s;
    scratch_new(&s);
    ry_param_set *p = big_set();
    char path[256];
    in_dir(&s, "ckpt-1.h5", path, sizeof path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {65536, 65536};
        setrlimit(RLIMIT_FSIZE, &rl);
        ry_error err;
        bool ok = ry_checkpoint_save(path, p, NULL, NULL, &err) == RY_ERR &&
                  strcmp(err.file, path) == 0 && !strchr(err.msg, '\n') &&
                  strstr(err.msg, "File too large (errno 27)");
        if (!ok) fprintf(stderr, "message: %s\n", err.msg);
        ry_params_free(p); /* valgrind checks the child's leaks too */
        _exit(ok ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_false(file_exists(path));
    ry_params_free(p);
    scratch_free(&s);
}

/* A link planted at the old predictable temporary name (PATH.tmp.<pid>) is
 * not followed: the save makes its own temporary, and the link's target
 * keeps its bytes. */
static void test_planted_link_not_followed(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 3), *q = ry_params_like(p);
    char path[256], link[300], victim[256];
    in_dir(&s, "ckpt-1.h5", path, sizeof path);
    in_dir(&s, "victim.txt", victim, sizeof victim);
    write_whole(victim, "precious", 8);
    snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(symlink(victim, link), 0);
    ry_error err;
    assert_int_equal(ry_checkpoint_save(path, p, NULL, NULL, &err), RY_OK);
    unsigned char *buf;
    long n;
    read_whole(victim, &buf, &n);
    assert_int_equal(n, 8);
    assert_memory_equal(buf, "precious", 8);
    free(buf);
    struct stat ls;
    assert_int_equal(lstat(link, &ls), 0);
    assert_true(S_ISLNK(ls.st_mode));
    assert_int_equal(ry_checkpoint_load(path, q, NULL, NULL, &err), RY_OK);
    assert_true(same_values(p, q));
    unlink(link);
    unlink(victim);
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* ---- a directory of checkpoints -------------------------------------------------- */

static void test_keep_last_k_and_latest(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p);
    char path[256], got[256];
    bool found = true;
    ry_error err;
    assert_int_equal(ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err), RY_OK);
    assert_false(found);

    /* a stale temporary of a dead process, and one of a live process */
    pid_t dead = fork();
    if (dead == 0) {
        ry_params_free(p); /* so valgrind finds no leak in the child */
        ry_params_free(q);
        _exit(0);
    }
    waitpid(dead, NULL, 0);
    char stale[128], live[128], name[64];
    snprintf(name, sizeof name, "ckpt-9.h5.tmp.%d", (int)dead);
    write_whole(in_dir(&s, name, stale, sizeof stale), "x", 1);
    snprintf(name, sizeof name, "ckpt-9.h5.tmp.%d", (int)getppid());
    write_whole(in_dir(&s, name, live, sizeof live), "x", 1);
    char stale2[128];
    snprintf(name, sizeof name, "ckpt-8.h5.tmp.%d.Ab3xYz", (int)dead); /* mkstemp's suffix */
    write_whole(in_dir(&s, name, stale2, sizeof stale2), "x", 1);

    for (int64_t step = 1; step <= 6; step++) {
        fill_random(p, (uint64_t)step);
        ry_checkpoint_meta meta = {.step = step * 100};
        assert_int_equal(ry_checkpoint_save_dir(s.dir, 3, p, NULL, &meta, path, sizeof path, &err), RY_OK);
        snprintf(got, sizeof got, "%s/ckpt-%lld.h5", s.dir, (long long)(step * 100));
        assert_string_equal(path, got);
    }
    assert_false(file_exists(stale));
    assert_false(file_exists(stale2));
    assert_true(file_exists(live));
    unlink(live);
    const char *expect[] = {"ckpt-100.h5", "ckpt-200.h5", "ckpt-300.h5", "ckpt-400.h5", "ckpt-500.h5", "ckpt-600.h5"};
    for (int i = 0; i < 6; i++) assert_int_equal(file_exists(in_dir(&s, expect[i], path, sizeof path)), i >= 3);

    assert_int_equal(ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err), RY_OK);
    assert_true(found);
    assert_string_equal(got, in_dir(&s, "ckpt-600.h5", path, sizeof path));
    /* numeric, not lexical, order: 1000 is newer than 600 */
    ry_checkpoint_meta meta = {.step = 1000};
    assert_int_equal(ry_checkpoint_save_dir(s.dir, 3, p, NULL, &meta, NULL, 0, &err), RY_OK);
    assert_false(file_exists(in_dir(&s, "ckpt-400.h5", path, sizeof path)));
    /* damage the newest: latest skips it with a warning */
    write_whole(in_dir(&s, "ckpt-1000.h5", path, sizeof path), "garbage", 7);
    assert_int_equal(ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err), RY_OK);
    assert_true(found);
    assert_string_equal(got, in_dir(&s, "ckpt-600.h5", path, sizeof path));
    fill_random(p, 6);
    assert_int_equal(ry_checkpoint_load(got, q, NULL, NULL, &err), RY_OK);
    assert_true(same_values(p, q));
    /* ... and renames it *.corrupt: it keeps its bytes but no keep-slot
     * (saving 1100 with keep 3 keeps 500, 600 and 1100) */
    assert_false(file_exists(in_dir(&s, "ckpt-1000.h5", path, sizeof path)));
    assert_int_equal(file_size(in_dir(&s, "ckpt-1000.h5.corrupt", path, sizeof path)), 7);
    meta.step = 1100;
    assert_int_equal(ry_checkpoint_save_dir(s.dir, 3, p, NULL, &meta, NULL, 0, &err), RY_OK);
    assert_true(file_exists(in_dir(&s, "ckpt-500.h5", path, sizeof path)));
    assert_true(file_exists(in_dir(&s, "ckpt-600.h5", path, sizeof path)));
    assert_int_equal(ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err), RY_OK);
    assert_string_equal(got, in_dir(&s, "ckpt-1100.h5", path, sizeof path));
    unlink(in_dir(&s, "ckpt-1000.h5.corrupt", path, sizeof path));
    /* a path buffer too small is an error, not a truncation */
    char tiny[8];
    assert_int_equal(ry_checkpoint_latest(s.dir, tiny, sizeof tiny, &found, &err), RY_ERR);
    assert_int_equal(ry_checkpoint_save_dir(s.dir, 0, p, NULL, &meta, NULL, 0, &err), RY_ERR);
    assert_int_equal(ry_checkpoint_latest("/nonexistent/ry", got, sizeof got, &found, &err), RY_ERR);
    assert_err_has(&err, "/nonexistent/ry", "cannot read checkpoint directory");
    assert_no_h5_objects();
    ry_params_free(p);
    ry_params_free(q);
    scratch_free(&s);
}

/* ---- allocation failures ------------------------------------------------------------ */

static void test_allocation_failures(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    char path[128];
    in_dir(&s, "oom.h5", path, sizeof path);
    ry_param_set *p = model_set(RY_FLOAT32, 1), *q = ry_params_like(p), *m = ry_params_like(p);
    const char *slot_names[] = {"m"};
    ry_param_set *sets[] = {m};
    ry_checkpoint_slots slots = {1, slot_names, sets};
    ry_checkpoint_meta meta = {.step = 3, .model_text = "text", .config = "c"};
    ry_error err;
    int saved = 0, loaded = 0, fds = count_fds();
    for (long n = 0; n < 200; n++) {
        ry_alloc_fail_after(n);
        ry_status st = ry_checkpoint_save(path, p, &slots, &meta, &err);
        ry_alloc_fail_after(-1);
        saved += st == RY_OK;
        assert_no_h5_objects();
    }
    assert_true(saved > 0);
    assert_int_equal(ry_checkpoint_save(path, p, &slots, &meta, &err), RY_OK);
    for (long n = 0; n < 200; n++) {
        ry_checkpoint_meta got = {0};
        ry_params_fill(q, 0);
        ry_alloc_fail_after(n);
        ry_status st = ry_checkpoint_load(path, q, &slots, &got, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            loaded++;
            assert_true(same_values(p, q));
            ry_checkpoint_meta_clear(&got);
        }
        assert_no_h5_objects();
    }
    assert_true(loaded > 0);
    assert_int_equal(count_fds(), fds);
    ry_params_free(p);
    ry_params_free(q);
    ry_params_free(m);
    scratch_free(&s);
}

/* A resume's scan when memory runs short, in this process or in the
 * reading child (which inherits the failure hook): an error, or the good
 * checkpoint found; never the file put aside as damaged, since a
 * shortage of memory says nothing of the file. */
static void test_short_memory_is_not_damage(void **state) {
    (void)state;
    scratch s;
    scratch_new(&s);
    ry_param_set *p = model_set(RY_FLOAT32, 1);
    ry_checkpoint_meta meta = {.step = 3, .model_text = "text", .config = "c"};
    char path[256], got[256], aside[300];
    ry_error err;
    assert_int_equal(ry_checkpoint_save_dir(s.dir, 5, p, NULL, &meta, path, sizeof path, &err), RY_OK);
    snprintf(aside, sizeof aside, "%s.corrupt", path);
    int failed = 0, child_oom = 0;
    long n = 0;
    for (;; n++) {
        assert_true(n < 5000);
        bool found = false;
        ry_alloc_fail_after(n);
        ry_status st = ry_checkpoint_latest(s.dir, got, sizeof got, &found, &err);
        ry_alloc_fail_after(-1);
        assert_true(file_exists(path));
        assert_false(file_exists(aside));
        if (st == RY_OK && found) break;
        assert_int_equal(st, RY_ERR);
        assert_non_null(strstr(err.msg, "out of memory"));
        failed++;
        child_oom += strstr(err.msg, "the reading process ran out of memory") != NULL;
    }
    assert_string_equal(got, path);
    assert_true(failed > 0 && child_oom > 0); /* both sides were reached */
    print_message("%ld allocation failures, %d of them in the reading child\n", n, child_oom);
    ry_params_free(p);
    scratch_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_float32_with_slots),
        cmocka_unit_test(test_round_trip_float64_bare),
        cmocka_unit_test(test_inspect),
        cmocka_unit_test(test_mismatched_layouts),
        cmocka_unit_test(test_bad_names_are_refused),
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
        cmocka_unit_test(test_killed_saves_leave_a_complete_file),
        cmocka_unit_test(test_failed_save_keeps_previous),
        cmocka_unit_test(test_planted_link_not_followed),
        cmocka_unit_test(test_failed_write_is_one_line),
        cmocka_unit_test(test_keep_last_k_and_latest),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_short_memory_is_not_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
