/*
 * train_guard.c: what keeps a checkpoint directory one run's own. An
 * exclusive lock (flock on DIR/.lock) held for the whole run, so a second
 * run on the directory fails at once instead of overwriting and sweeping
 * away the first one's files; a new run refuses a directory that holds
 * checkpoints (force moves them aside into DIR/old-<time>/, never deletes
 * them); and a resumed run compares the configuration the checkpoint
 * stored with its own and names the fields that differ. Reading and
 * writing the checkpoints themselves is checkpoint.h's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train/train_impl.h"

ry_status train_lock_dir(const char *dir, int *fd, ry_error *err) {
    char p[4096];
    *fd = -1;
    if (snprintf(p, sizeof p, "%s/.lock", dir) >= (int)sizeof p)
        return ry_error_file(err, dir, "the path is too long");
    int f = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0) return ry_error_file(err, p, "cannot open the directory's lock: %s", strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(f);
        return e == EWOULDBLOCK
                   ? ry_error_file(err, dir, "another run is using this checkpoint directory (it "
                                             "holds %s); wait for it or choose another directory", p)
                   : ry_error_file(err, p, "cannot lock: %s", strerror(e));
    }
    *fd = f;
    return RY_OK;
}

/* The files of an earlier run: ckpt-<step>.h5 and what became of them
 * (damaged ones renamed .corrupt, temporaries). */
static bool run_file(const char *name) { return strncmp(name, "ckpt-", 5) == 0; }

/* DIR/old-<time>[-k]/, made; its path in out. */
static ry_status make_aside(const char *dir, char *out, size_t n, ry_error *err) {
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&t, &tm));
    for (int k = 0; k < 100; k++) {
        int len = k ? snprintf(out, n, "%s/old-%s-%d", dir, stamp, k)
                    : snprintf(out, n, "%s/old-%s", dir, stamp);
        if (len >= (int)n) return ry_error_file(err, dir, "the path is too long");
        if (mkdir(out, 0755) == 0) return RY_OK;
        if (errno != EEXIST) return ry_error_file(err, out, "cannot create: %s", strerror(errno));
    }
    return ry_error_file(err, dir, "cannot find a free old-%s-N name", stamp);
}

/* Moves the earlier run's files into a new DIR/old-<time>/. */
static ry_status move_aside(const char *dir, ry_progress *p, ry_error *err) {
    char aside[4096], from[8192], to[8192];
    if (make_aside(dir, aside, sizeof aside, err)) return RY_ERR;
    DIR *d = opendir(dir);
    if (!d) return ry_error_file(err, dir, "cannot read: %s", strerror(errno));
    ry_status st = RY_OK;
    int moved = 0;
    for (struct dirent *e; st == RY_OK && (e = readdir(d));) {
        if (!run_file(e->d_name)) continue;
        snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", aside, e->d_name);
        if (rename(from, to) != 0)
            st = ry_error_file(err, from, "cannot move it to %s: %s", aside, strerror(errno));
        else
            moved++;
    }
    closedir(d);
    if (st == RY_OK) ry_progress_note(p, "moved %d files of an earlier run to %s", moved, aside);
    return st;
}

ry_status train_claim_dir(const char *dir, bool force, ry_progress *p, ry_error *err) {
    DIR *d = opendir(dir);
    if (!d) return ry_error_file(err, dir, "cannot read checkpoint directory: %s", strerror(errno));
    char first[256] = "";
    int count = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (run_file(e->d_name) && count++ == 0) snprintf(first, sizeof first, "%s", e->d_name);
    closedir(d);
    if (count == 0) return RY_OK;
    if (force) return move_aside(dir, p, err);
    return ry_error_file(err, dir, "holds %d files of an earlier run (%s%s): continue it with "
                                   "--resume, or start over with --force (moves them into "
                                   "%s/old-<time>/)",
                         count, first, count > 1 ? ", ..." : "", dir);
}

/* ---- the stored configuration ---- */

/* Appends one "key=value\n" line; "%g" values in the fewest digits that
 * read back the same (0.1, not 0.10000000000000001). */
static void line(char *buf, size_t n, size_t *len, const char *key, const char *fmt, double v) {
    char val[64];
    snprintf(val, sizeof val, fmt, v);
    if (strcmp(fmt, "%g") == 0)
        for (int digits = 6; digits <= 17 && strtod(val, NULL) != v; digits++)
            snprintf(val, sizeof val, "%.*g", digits, v);
    if (*len < n) *len += (size_t)snprintf(buf + *len, n - *len, "%s=%s\n", key, val);
}

char *train_config_text(const ry_trainer *tr, const ry_fit_opts *fo) {
    const ry_optim_config *c = &tr->opts.optim;
    const ry_schedule *sc = &tr->opts.schedule;
    size_t n = 2048 + (fo->config ? strlen(fo->config) : 0), len = 0;
    char *buf = ry_malloc(n);
    if (!buf) return NULL;
    len = (size_t)snprintf(buf, n, "optimizer=%s\n", ry_optim_kind_name(c->kind));
    line(buf, n, &len, "optimizer.lr", "%g", tr->base_lr);
    line(buf, n, &len, "optimizer.weight_decay", "%g", c->weight_decay);
    line(buf, n, &len, "optimizer.momentum", "%g", c->momentum);
    line(buf, n, &len, "optimizer.dampening", "%g", c->dampening);
    line(buf, n, &len, "optimizer.nesterov", "%.0f", c->nesterov);
    line(buf, n, &len, "optimizer.beta1", "%g", c->beta1);
    line(buf, n, &len, "optimizer.beta2", "%g", c->beta2);
    line(buf, n, &len, "optimizer.eps", "%g", c->eps);
    line(buf, n, &len, "optimizer.amsgrad", "%.0f", c->amsgrad);
    line(buf, n, &len, "optimizer.lr_decay", "%g", c->lr_decay);
    line(buf, n, &len, "optimizer.initial_accumulator_value", "%g", c->initial_accumulator_value);
    line(buf, n, &len, "optimizer.alpha", "%g", c->alpha);
    line(buf, n, &len, "optimizer.centered", "%.0f", c->centered);
    line(buf, n, &len, "schedule", "%.0f", (double)sc->kind);
    line(buf, n, &len, "schedule.gamma", "%g", sc->gamma);
    line(buf, n, &len, "schedule.step_size", "%.0f", (double)sc->step_size);
    line(buf, n, &len, "schedule.t_max", "%.0f", (double)sc->t_max);
    line(buf, n, &len, "schedule.eta_min", "%g", sc->eta_min);
    line(buf, n, &len, "schedule.warmup_steps", "%.0f", (double)sc->warmup_steps);
    line(buf, n, &len, "clip_norm", "%g", tr->opts.clip_norm);
    line(buf, n, &len, "clip_value", "%g", tr->opts.clip_value);
    line(buf, n, &len, "batch", "%.0f", (double)(fo->batch > 0 ? fo->batch : 32));
    if (fo->config && len < n) snprintf(buf + len, n - len, "%s", fo->config);
    return buf;
}

/* The value of key in a config text (key=value lines), as [*v, *v + *n);
 * false when it has none. */
static bool lookup(const char *text, const char *key, const char **v, size_t *n) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == '=') {
            *v = l + kl + 1;
            *n = strcspn(*v, "\n");
            return true;
        }
    return false;
}

/* Appends ", " and s to the list of differences. */
static void add_diff(char *out, size_t n, const char *fmt, const char *key, int al, const char *a,
                     int bl, const char *b) {
    size_t len = strlen(out);
    if (len + 1 >= n) return;
    snprintf(out + len, n - len, fmt, len ? ", " : "", key, al, a, bl, b);
}

ry_status train_config_compare(const ry_trainer *tr, const char *path, const char *now,
                               ry_error *err) {
    ry_checkpoint_info *info;
    if (ry_checkpoint_inspect(path, &info, err)) return RY_ERR;
    const char *stored = info->meta.config ? info->meta.config : "";
    char diff[700] = "";
    if (strcmp(info->meta.model_text ? info->meta.model_text : "", tr->text) != 0)
        add_diff(diff, sizeof diff, "%s%s%.*s%.*s", "the model text", 0, "", 0, "");
    /* every key this run sets that the checkpoint also recorded; a key
     * the checkpoint lacks (written by an older relayc) is not compared,
     * and `command` (the whole command line) never is */
    for (const char *l = now; *l; l += strcspn(l, "\n"), l += *l == '\n') {
        size_t kl = strcspn(l, "=\n");
        char key[128];
        if (l[kl] != '=' || kl >= sizeof key) continue;
        snprintf(key, sizeof key, "%.*s", (int)kl, l);
        const char *a, *b;
        size_t an, bn;
        if (strcmp(key, "command") == 0 || !lookup(stored, key, &a, &an) ||
            !lookup(now, key, &b, &bn))
            continue;
        if (an != bn || strncmp(a, b, an) != 0)
            add_diff(diff, sizeof diff, "%s%s (stored %.*s, now %.*s)", key, (int)an, a, (int)bn, b);
    }
    ry_checkpoint_info_free(info);
    if (!diff[0]) return RY_OK;
    return ry_error_file(err, path, "this run differs from the one that wrote the checkpoint: "
                                    "%s; --resume-anyway resumes regardless", diff);
}
