/*
 * checkpoint_util.h: what the checkpoint suites share (test_checkpoint.c:
 * round trips, mismatches, atomic saves, a directory keeping the last K;
 * test_checkpoint_files.c: damaged, foreign and crafted files): a scratch
 * directory, a small parameter set, file helpers and the checks that
 * nothing stays open.
 */
#ifndef RELAYC_TESTS_CHECKPOINT_UTIL_H
#define RELAYC_TESTS_CHECKPOINT_UTIL_H

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "test_util.h"
#include "relayc/checkpoint.h"
#include "io/checkpoint_impl.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct scratch {
    char dir[64];
} scratch;

static inline void scratch_new(scratch *s) {
    snprintf(s->dir, sizeof s->dir, "/tmp/ry-ckpt-XXXXXX");
    assert_non_null(mkdtemp(s->dir));
}

static inline void scratch_free(scratch *s) {
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

static inline const char *in_dir(const scratch *s, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", s->dir, name);
    return buf;
}

/* Nothing may stay open inside libhdf5 after any of our calls. */
static inline void assert_no_h5_objects(void) {
    assert_int_equal(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
}

/* Open file descriptors of this process: a leaked HDF5 file or fd shows. */
static inline int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *de; (de = readdir(d)) != NULL;) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static inline uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void fill_random(ry_param_set *p, uint64_t seed) {
    for (int64_t i = 0; i < p->slab->size; i++)
        ry_tensor_set(p->slab, i, (double)(rng_next(&seed) >> 11) / 9007199254740992.0 - 0.5);
}

/* w1 [3, 4], b1 [4], scale [] (a scalar), empty [0, 5], and a nested
 * name as Relay identifiers allow. */
static inline ry_param_set *model_set(ry_dtype dt, uint64_t seed) {
    static const int64_t w[] = {3, 4}, b[] = {4}, e[] = {0, 5}, c[] = {2, 3, 2};
    const char *names[] = {"w1", "b1", "scale", "empty", "conv/w"};
    const int ndims[] = {2, 1, 0, 2, 3};
    const int64_t *shapes[] = {w, b, NULL, e, c};
    ry_param_set *p = ry_params_new(dt, 5, names, ndims, shapes);
    assert_non_null(p);
    fill_random(p, seed);
    return p;
}

static inline bool same_values(const ry_param_set *a, const ry_param_set *b) {
    if (!ry_params_same_layout(a, b)) return false;
    for (int i = 0; i < a->n; i++)
        if (memcmp(a->views[i]->data, b->views[i]->data, ry_tensor_nbytes(a->views[i])) != 0)
            return false;
    return true;
}

static inline char *long_text(size_t n) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    static const char line[] = "  %1 = nn.dense(%x, %w1, units=4); /* padding to make it long */\n";
    for (size_t i = 0; i < n; i++) s[i] = line[i % (sizeof line - 1)];
    s[n] = '\0';
    return s;
}

static inline void assert_err_has(const ry_error *err, const char *file, const char *what) {
    if (file && strcmp(err->file, file) != 0) fail_msg("error names %s, not %s", err->file, file);
    if (!strstr(err->msg, what)) fail_msg("error \"%s\" does not mention \"%s\"", err->msg, what);
}

static inline bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static inline long file_size(const char *p) {
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long)st.st_size;
}

static inline void read_whole(const char *p, unsigned char **buf, long *n) {
    *n = file_size(p);
    *buf = malloc((size_t)*n);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    assert_int_equal(fread(*buf, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
}

static inline void write_whole(const char *p, const void *buf, long n) {
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
}

#endif
