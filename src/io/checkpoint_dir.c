/*
 * checkpoint_dir.c: a directory of checkpoints, ckpt-<step>.h5, as a
 * training loop keeps them: save the next one and drop the oldest beyond K;
 * on restart, find the newest one that verifies, skipping (with a warning,
 * and renaming it *.corrupt) any that a crash, a full disk or bit rot
 * damaged. Each file is written by
 * ry_checkpoint_save, so a crash never leaves a partial ckpt-*.h5.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "io/checkpoint_impl.h"

typedef struct found_file {
    int64_t step;
    char name[256];
} found_file;

/* Parses the decimal number at s (no sign, at least one digit, no
 * overflow); *end points after it. */
static bool parse_u63(const char *s, int64_t *v, const char **end) {
    int64_t x = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (x > (INT64_MAX - (*p - '0')) / 10) return false;
        x = x * 10 + (*p - '0');
    }
    *v = x;
    *end = p;
    return p > s;
}

/* "ckpt-<step>.h5" exactly. */
static bool ckpt_name(const char *name, int64_t *step) {
    const char *end;
    return strncmp(name, "ckpt-", 5) == 0 && parse_u63(name + 5, step, &end) &&
           strcmp(end, ".h5") == 0;
}

/* "ckpt-<step>.h5.tmp.<pid>.XXXXXX" (or, from older versions, without the
 * random suffix) left by a process that no longer runs. */
static bool stale_tmp(const char *name) {
    int64_t step, pid;
    const char *end;
    if (strncmp(name, "ckpt-", 5) != 0 || !parse_u63(name + 5, &step, &end) ||
        strncmp(end, ".h5.tmp.", 8) != 0 || !parse_u63(end + 8, &pid, &end) ||
        (*end && (*end != '.' || strlen(end) != 7)) || pid <= 0 || pid > INT32_MAX ||
        pid == (int64_t)getpid())
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int by_step(const void *a, const void *b) {
    int64_t x = ((const found_file *)a)->step, y = ((const found_file *)b)->step;
    return (x > y) - (x < y);
}

/* The ckpt-*.h5 files of dir, sorted by step; removes stale temporaries
 * when sweep is set. *out is new (ry_free). */
static ry_status scan_dir(const char *dir, bool sweep, found_file **out, int *count, ry_error *err) {
    DIR *d = opendir(dir);
    if (!d) return ry_error_file(err, dir, "cannot read checkpoint directory: %s", strerror(errno));
    found_file *files = NULL;
    int n = 0, cap = 0;
    ry_status st = RY_OK;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        int64_t step;
        if (sweep && stale_tmp(de->d_name)) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p) unlink(p);
            continue;
        }
        if (!ckpt_name(de->d_name, &step) || strlen(de->d_name) >= sizeof files->name) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            found_file *g = ry_realloc(files, (size_t)cap * sizeof *g);
            if (!g) {
                st = ry_error_file(err, dir, "out of memory listing checkpoints");
                break;
            }
            files = g;
        }
        files[n].step = step;
        snprintf(files[n].name, sizeof files[n].name, "%s", de->d_name);
        n++;
    }
    closedir(d);
    if (st) {
        ry_free(files);
        return RY_ERR;
    }
    if (n) qsort(files, (size_t)n, sizeof *files, by_step);
    *out = files;
    *count = n;
    return RY_OK;
}

ry_status ry_checkpoint_save_dir(const char *dir, int keep, const ry_param_set *params,
                                 const ry_checkpoint_slots *slots, const ry_checkpoint_meta *meta,
                                 char *path_out, size_t n, ry_error *err) {
    if (!dir || keep < 1) return ry_error_file(err, dir, "cannot save: keep must be at least 1");
    if (!meta || meta->step < 0)
        return ry_error_file(err, dir, "cannot save: a checkpoint directory needs a step >= 0");
    char path[4096], mine[64];
    snprintf(mine, sizeof mine, "ckpt-%lld.h5", (long long)meta->step);
    if (snprintf(path, sizeof path, "%s/%s", dir, mine) >= (int)sizeof path)
        return ry_error_file(err, dir, "cannot save: path too long");
    if (path_out && snprintf(path_out, n, "%s", path) >= (int)n)
        return ry_error_file(err, dir, "cannot save: the path does not fit in %zu bytes", n);
    if (ry_checkpoint_save(path, params, slots, meta, err)) return RY_ERR;
    found_file *files = NULL;
    int count = 0;
    if (scan_dir(dir, true, &files, &count, err)) return RY_ERR;
    /* drop the oldest, never the file just written (a resumed run may
     * save a lower step than files left from before) */
    int excess = count - keep;
    for (int i = 0; i < count && excess > 0; i++) {
        if (strcmp(files[i].name, mine) == 0) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
        if (unlink(p) != 0 && errno != ENOENT) {
            ry_free(files);
            return ry_error_file(err, p, "cannot remove old checkpoint: %s", strerror(errno));
        }
        excess--;
    }
    ry_free(files);
    return RY_OK;
}

ry_status ry_checkpoint_latest(const char *dir, char *path, size_t n, bool *found, ry_error *err) {
    *found = false;
    if (!dir) return ry_error_file(err, dir, "no checkpoint directory");
    found_file *files = NULL;
    int count = 0;
    if (scan_dir(dir, false, &files, &count, err)) return RY_ERR;
    ry_status st = RY_OK;
    for (int i = count - 1; i >= 0; i--) {
        char p[4096];
        ry_error why;
        bool damaged;
        snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
        if (ry_ckpt_verify(p, &damaged, &why) != RY_OK) {
            /* this process could not check it (no memory, no fork): the
             * file may be good, so it is not put aside and there is no
             * answer */
            if (!damaged) {
                *err = why;
                st = RY_ERR;
                break;
            }
            /* renamed aside (never deleted), so it holds no keep-slot and
             * is warned about once, not at every later resume */
            char aside[4200];
            snprintf(aside, sizeof aside, "%s.corrupt", p);
            bool moved = rename(p, aside) == 0;
            fprintf(stderr, "relayc: warning: skipping checkpoint %s: %s%s%s\n", p, why.msg,
                    moved ? "; renamed to " : "", moved ? aside : "");
            continue;
        }
        if (snprintf(path, n, "%s", p) >= (int)n)
            st = ry_error_file(err, p, "the path does not fit in %zu bytes", n);
        else
            *found = true;
        break;
    }
    ry_free(files);
    return st;
}
