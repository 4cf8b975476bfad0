/*
 * checkpoint_save.c: writing a checkpoint so that a crash at any moment
 * leaves either the old file or the new one at PATH, never a partial one.
 * The file is built under PATH.tmp.<pid>.XXXXXX, made exclusively first
 * (ry_tmpfile_create: a random name, never through a planted link) and only
 * then handed to HDF5, flushed and closed by HDF5, sealed, fsynced, renamed
 * over PATH, and the directory is fsynced so the rename itself survives a
 * power loss. Reading is in checkpoint_load.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/checkpoint_impl.h"

/* One dataset to write: its full path and the tensor it comes from. */
typedef struct item {
    char *path;
    const ry_tensor *t;
    uint32_t crc; /* of the data alone */
} item;

static int item_cmp(const void *a, const void *b) {
    return strcmp(((const item *)a)->path, ((const item *)b)->path);
}

static void free_items(item *items, int n) {
    for (int i = 0; i < n; i++) ry_free(items[i].path);
    ry_free(items);
}

static char *join(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + (c ? strlen(c) + 1 : 0) + 2;
    char *s = ry_malloc(n);
    if (s) snprintf(s, n, c ? "%s/%s/%s" : "%s/%s", a, b, c ? c : "");
    return s;
}

/* Checks names and collects every dataset, sorted by path (the checksum's
 * order). */
static ry_status collect(const char *path, const ry_param_set *params,
                         const ry_checkpoint_slots *slots, item **out, int *count, ry_error *err) {
    int nslots = slots ? slots->n : 0, total = params->n;
    if (nslots < 0) return ry_error_file(err, path, "cannot save: negative slot count");
    for (int s = 0; s < nslots; s++) {
        if (!slots->sets[s] || !ry_ckpt_name_ok(slots->names[s], false))
            return ry_error_file(err, path, "cannot save: bad optimizer slot %d", s);
        for (int r = 0; r < s; r++)
            if (strcmp(slots->names[r], slots->names[s]) == 0)
                return ry_error_file(err, path, "cannot save: optimizer slot '%s' given twice",
                                     slots->names[s]);
        total += slots->sets[s]->n;
    }
    item *items = ry_calloc((size_t)(total ? total : 1), sizeof *items);
    if (!items) return ry_error_file(err, path, "cannot save: out of memory");
    /* names first, so an error never has to free half-built paths */
    for (int i = 0; i < params->n; i++)
        if (!ry_ckpt_name_ok(params->names[i], true)) {
            ry_free(items);
            return ry_error_file(err, path, "cannot save: bad parameter name '%s'", params->names[i]);
        }
    for (int s = 0; s < nslots; s++)
        for (int i = 0; i < slots->sets[s]->n; i++)
            if (!ry_ckpt_name_ok(slots->sets[s]->names[i], true)) {
                ry_free(items);
                return ry_error_file(err, path, "cannot save: bad parameter name '%s' in slot '%s'",
                                     slots->sets[s]->names[i], slots->names[s]);
            }
    int n = 0;
    for (int i = 0; i < params->n; i++, n++) {
        items[n].t = params->views[i];
        items[n].path = join("/params", params->names[i], NULL);
    }
    for (int s = 0; s < nslots; s++)
        for (int i = 0; i < slots->sets[s]->n; i++, n++) {
            items[n].t = slots->sets[s]->views[i];
            items[n].path = join("/optimizer", slots->sets[s]->names[i], slots->names[s]);
        }
    for (int i = 0; i < total; i++)
        if (!items[i].path) {
            free_items(items, total);
            return ry_error_file(err, path, "cannot save: out of memory");
        }
    qsort(items, (size_t)total, sizeof *items, item_cmp);
    for (int i = 0; i < total; i++) items[i].crc = ry_ckpt_crc_data(items[i].t);
    *out = items;
    *count = total;
    return RY_OK;
}

static uint32_t checksum(const item *items, int n, const ry_checkpoint_meta *meta) {
    uint32_t crc = ry_ckpt_crc_u64(0, RY_CHECKPOINT_VERSION);
    for (int i = 0; i < n; i++) {
        const ry_tensor *t = items[i].t;
        crc = ry_ckpt_crc_entry(crc, items[i].path, t->dtype, t->ndim, t->shape);
        crc = ry_ckpt_crc_combine(crc, items[i].crc, ry_tensor_nbytes(t));
    }
    return ry_ckpt_crc_meta(crc, meta);
}

/* ---- HDF5 writing ---------------------------------------------------------- */

/* lcpl creates the groups a path needs ("/optimizer/w1" for
 * "/optimizer/w1/m"). */
static ry_status write_item(hid_t file, hid_t lcpl, const item *it) {
    const ry_tensor *t = it->t;
    hsize_t dims[RY_MAX_RANK];
    for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
    bool f64 = t->dtype == RY_FLOAT64;
    hid_t space = t->ndim ? H5Screate_simple(t->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = space < 0 ? -1
                        : H5Dcreate2(file, it->path, f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE, space,
                                     lcpl, H5P_DEFAULT, H5P_DEFAULT);
    ry_status st = d < 0 ? RY_ERR : RY_OK;
    if (d >= 0 && t->size > 0 &&
        H5Dwrite(d, f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                 t->data) < 0)
        st = RY_ERR;
    if (d >= 0 && !st) st = ry_ckpt_attr_write_u32(d, "crc32", it->crc);
    if (d >= 0 && H5Dclose(d) < 0) st = RY_ERR;
    if (space >= 0) H5Sclose(space);
    return st;
}

static ry_status write_meta(hid_t file, const ry_checkpoint_meta *m, uint32_t crc) {
    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    if (root < 0) return RY_ERR;
    ry_status st = RY_ERR;
    if (!ry_ckpt_attr_write_str(root, "format", CKPT_FORMAT) &&
        !ry_ckpt_attr_write_i64(root, "format_version", RY_CHECKPOINT_VERSION) &&
        !ry_ckpt_attr_write_i64(root, "step", m->step) &&
        !ry_ckpt_attr_write_i64(root, "epoch", m->epoch) &&
        !ry_ckpt_attr_write_u64s(root, "rng_state", m->rng, m->rng_len) &&
        !ry_ckpt_attr_write_str(root, "model_text", m->model_text) &&
        !ry_ckpt_attr_write_str(root, "config", m->config) &&
        !ry_ckpt_attr_write_u32(root, "checksum", crc))
        st = RY_OK;
    if (H5Gclose(root) < 0) st = RY_ERR;
    return st;
}

/* HDF5 1.8 format: its dense attribute storage lifts the 64 KiB limit on
 * model_text, and every reader since 2008 (h5py included) opens it. The
 * strong close degree makes H5Fclose release the file on error paths. */
static hid_t create_file(const char *tmp) {
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    if (fcpl >= 0 && fapl >= 0 && H5Pset_userblock(fcpl, CKPT_USERBLOCK) >= 0 &&
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0 &&
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0)
        f = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (fapl >= 0) H5Pclose(fapl);
    return f;
}

static ry_status write_h5(const char *tmp, const char *path, const item *items, int n,
                          const ry_checkpoint_meta *meta, ry_error *err) {
    hid_t f = create_file(tmp);
    if (f < 0) return ry_ckpt_h5_error(err, path, "cannot create %s", tmp);
    ry_status st = RY_OK;
    const char *roots[2] = {"/params", "/optimizer"};
    for (int i = 0; i < 2 && !st; i++) {
        hid_t g = H5Gcreate2(f, roots[i], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0 || H5Gclose(g) < 0) st = ry_ckpt_h5_error(err, path, "cannot create group %s", roots[i]);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (!st && (lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0))
        st = ry_ckpt_h5_error(err, path, "cannot set up HDF5 link creation");
    for (int i = 0; i < n && !st; i++)
        if (write_item(f, lcpl, &items[i]))
            st = ry_ckpt_h5_error(err, path, "cannot write dataset %s", items[i].path);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (!st && write_meta(f, meta, checksum(items, n, meta)))
        st = ry_ckpt_h5_error(err, path, "cannot write the attributes of /");
    if (!st && H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) st = ry_ckpt_h5_error(err, path, "cannot flush %s", tmp);
    if (H5Fclose(f) < 0 && !st) st = ry_ckpt_h5_error(err, path, "cannot close %s", tmp);
    return st;
}

/* ---- in a child -------------------------------------------------------------
 * libhdf5 1.10 does not survive its own allocation failures: failing its
 * mallocs one at a time during a save (tests/test_oom_libc.c) crashed it
 * in 144 of 181 places (H5AC_create, and H5I_register, which calls exit()
 * and then crashes in the library's exit handler), and a write that fails
 * on a full disk leaves it unable to close the file and crashing at exit.
 * So a forked child does the libhdf5 part of a save and ends with _exit
 * (no atexit handlers); this process learns the outcome through a pipe
 * (a status byte and the error) and reports a child that died as an
 * error naming the signal. The child reads the parameters where they are
 * (copy on write: nothing is copied). */
static void write_child(const char *tmp, const char *path, const item *items, int n,
                        const ry_checkpoint_meta *meta, int fd) {
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_ckpt_quiet q;
    ry_ckpt_quiet_begin(&q);
    char done = write_h5(tmp, path, items, n, meta, &err) ? 'e' : 'k';
    bool ok = write(fd, &done, 1) == 1 && (done == 'k' || write(fd, &err, sizeof err) == sizeof err);
    _exit(ok ? 0 : 1);
}

static ry_status write_isolated(const char *tmp, const char *path, const item *items, int n,
                                const ry_checkpoint_meta *meta, ry_error *err) {
    int fds[2];
    if (pipe(fds) != 0) return ry_error_file(err, path, "cannot save: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return ry_error_file(err, path, "cannot save: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        write_child(tmp, path, items, n, meta, fds[1]);
    }
    close(fds[1]);
    char done = 0;
    ssize_t r;
    while ((r = read(fds[0], &done, 1)) < 0 && errno == EINTR) {}
    ry_error child;
    bool told = r == 1 && done == 'e' && read(fds[0], &child, sizeof child) == sizeof child;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (r == 1 && done == 'k') return RY_OK;
    if (told) {
        child.msg[sizeof child.msg - 1] = '\0';
        child.file[sizeof child.file - 1] = '\0';
        child.source_line[sizeof child.source_line - 1] = '\0';
        *err = child;
        return RY_ERR;
    }
    if (WIFSIGNALED(status))
        return ry_error_file(err, path, "cannot save: libhdf5 crashed writing %s (signal %d, %s)",
                             tmp, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return ry_error_file(err, path, "cannot save: libhdf5 failed writing %s (exit status %d)", tmp,
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* ---- the atomic dance -------------------------------------------------------- */

/* Seals and syncs through fd, the descriptor the temporary was made with,
 * once tmp is checked to still be that file (not replaced while HDF5 had
 * it by name). */
static ry_status seal_and_sync(int fd, const char *tmp, const char *path, ry_error *err) {
    struct stat mine, now;
    if (fstat(fd, &mine) != 0 || lstat(tmp, &now) != 0 || mine.st_ino != now.st_ino ||
        mine.st_dev != now.st_dev)
        return ry_error_file(err, path, "the temporary %s was replaced while it was written", tmp);
    ry_status st = ry_ckpt_seal_write(fd, path, err);
    if (!st && fsync(fd) != 0) st = ry_error_file(err, path, "cannot fsync %s: %s", tmp, strerror(errno));
    return st;
}

/* fsync the directory holding path so the rename is durable. */
static ry_status sync_dir(const char *path, ry_error *err) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ry_error_file(err, path, "cannot open directory %s: %s", dir, strerror(errno));
    /* some file systems refuse fsync on directories; the rename is done */
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EINVAL && e != EROFS)
        return ry_error_file(err, path, "cannot fsync directory %s: %s", dir, strerror(e));
    return RY_OK;
}

ry_status ry_checkpoint_save(const char *path, const ry_param_set *params,
                             const ry_checkpoint_slots *slots, const ry_checkpoint_meta *meta,
                             ry_error *err) {
    static const ry_checkpoint_meta none = {0};
    if (!meta) meta = &none;
    if (!path || !params) return ry_error_file(err, path, "cannot save: no path or no parameters");
    if (meta->rng_len < 0 || meta->rng_len > RY_CHECKPOINT_RNG_MAX)
        return ry_error_file(err, path, "cannot save: rng_len %d is outside 0..%d", meta->rng_len,
                             RY_CHECKPOINT_RNG_MAX);
    item *items = NULL;
    int n = 0;
    if (collect(path, params, slots, &items, &n, err)) return RY_ERR;
    char tmp[PATH_MAX];
    int fd;
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, err)) {
        free_items(items, n);
        return RY_ERR;
    }
    /* HDF5 opens it by name, truncating the empty file just made */
    ry_status st = write_isolated(tmp, path, items, n, meta, err);
    free_items(items, n);
    if (!st) st = seal_and_sync(fd, tmp, path, err);
    if (close(fd) != 0 && !st) st = ry_error_file(err, path, "cannot close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = ry_error_file(err, path, "cannot rename %s over it: %s", tmp, strerror(errno));
    if (st) {
        unlink(tmp); /* the previous checkpoint at path is untouched */
        return RY_ERR;
    }
    return sync_dir(path, err);
}
