/*
 * progress.c: what a training run shows and records. On a terminal one
 * line redrawn with \r (a bar, step/total, loss, steps/s, ETA); elsewhere
 * (a pipe, a log file) a plain line every log_every steps; and, when asked,
 * a CSV with one row per logged step and per evaluation, flushed as it
 * goes so a killed run keeps its metrics, and continued by a resumed run.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "relayc/train.h"

struct ry_progress {
    FILE *f, *csv;
    ry_progress_mode mode;
    int64_t total, log_every;
    double t0, tlast;      /* start, last redraw */
    int64_t first_step;    /* step at start: a resumed run's rate counts its own */
    bool dirty;            /* a bar line is open */
    double loss_avg;       /* exponential average shown on the bar */
    int64_t nlosses;
};

static const char csv_header[] = "kind,step,epoch,loss,lr,steps_per_s,elapsed_s,accuracy\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ry_status ry_progress_new(FILE *f, ry_progress_mode mode, int64_t total, int64_t log_every,
                          const char *csv_path, ry_progress **out, ry_error *err) {
    *out = NULL;
    ry_progress *p = ry_calloc(1, sizeof *p);
    if (!p) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    p->f = f ? f : stderr;
    if (mode == RY_PROGRESS_AUTO) mode = isatty(fileno(p->f)) ? RY_PROGRESS_BAR : RY_PROGRESS_LOG;
    p->mode = mode;
    p->total = total;
    p->log_every = log_every > 0 ? log_every : 50;
    p->t0 = p->tlast = now();
    p->first_step = -1;
    if (csv_path) {
        p->csv = fopen(csv_path, "w");
        if (!p->csv) {
            ry_free(p);
            return ry_error_file(err, csv_path, "cannot create the metrics CSV");
        }
        fputs(csv_header, p->csv);
        fflush(p->csv);
    }
    *out = p;
    return RY_OK;
}

static void fmt_time(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "--:--");
    else if (s >= 3600) snprintf(buf, n, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%02d:%02d", (int)(s / 60), (int)fmod(s, 60));
}

/* [#########.........] 123/500 loss 0.4321 12.3 it/s ETA 00:31 */
static void draw_bar(ry_progress *p, int64_t step, int64_t epoch, double rate) {
    char eta[32], bar[32];
    int w = 24, fill = 0;
    if (p->total > 0) fill = (int)(w * (double)(step < p->total ? step : p->total) / (double)p->total);
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = '\0';
    fmt_time(eta, sizeof eta, p->total > 0 && rate > 0 ? (double)(p->total - step) / rate : NAN);
    if (p->total > 0)
        fprintf(p->f, "\r[%s] %lld/%lld epoch %lld loss %.4f %.1f it/s ETA %s\033[K", bar,
                (long long)step, (long long)p->total, (long long)epoch + 1, p->loss_avg, rate, eta);
    else
        fprintf(p->f, "\rstep %lld epoch %lld loss %.4f %.1f it/s\033[K", (long long)step,
                (long long)epoch + 1, p->loss_avg, rate);
    fflush(p->f);
    p->dirty = true;
}

static void end_line(ry_progress *p) {
    if (p->dirty) fputc('\n', p->f);
    p->dirty = false;
}

void ry_progress_step(ry_progress *p, int64_t step, int64_t epoch, double loss, double lr) {
    if (!p) return;
    double t = now();
    if (p->first_step < 0) p->first_step = step - 1;
    p->loss_avg = p->nlosses == 0 ? loss : 0.9 * p->loss_avg + 0.1 * loss;
    p->nlosses++;
    double el = t - p->t0;
    double rate = el > 0 ? (double)(step - p->first_step) / el : 0;
    bool log_now = step % p->log_every == 0 || step == p->total;
    if (p->mode == RY_PROGRESS_BAR && (t - p->tlast > 0.1 || step == p->total)) {
        draw_bar(p, step, epoch, rate);
        p->tlast = t;
    } else if (p->mode == RY_PROGRESS_LOG && log_now) {
        char eta[32];
        fmt_time(eta, sizeof eta, p->total > 0 && rate > 0 ? (double)(p->total - step) / rate : NAN);
        fprintf(p->f, "step %lld epoch %lld loss %.6f lr %g %.2f it/s elapsed %.1fs eta %s\n",
                (long long)step, (long long)epoch + 1, loss, lr, rate, el, eta);
        fflush(p->f);
    }
    if (p->csv && log_now) {
        fprintf(p->csv, "train,%lld,%lld,%.9g,%.9g,%.6g,%.3f,\n", (long long)step,
                (long long)epoch, loss, lr, rate, el);
        fflush(p->csv);
    }
}

void ry_progress_eval(ry_progress *p, int64_t step, int64_t epoch, double loss, double acc) {
    if (!p) return;
    double el = now() - p->t0;
    if (p->mode != RY_PROGRESS_QUIET) {
        end_line(p);
        if (isnan(acc))
            fprintf(p->f, "eval after epoch %lld (step %lld): loss %.6f\n", (long long)epoch + 1,
                    (long long)step, loss);
        else
            fprintf(p->f, "eval after epoch %lld (step %lld): loss %.6f accuracy %.2f%%\n",
                    (long long)epoch + 1, (long long)step, loss, 100 * acc);
        fflush(p->f);
    }
    if (p->csv) {
        fprintf(p->csv, "eval,%lld,%lld,%.9g,,,%.3f,", (long long)step, (long long)epoch, loss, el);
        if (!isnan(acc)) fprintf(p->csv, "%.9g", acc);
        fputc('\n', p->csv);
        fflush(p->csv);
    }
}

/* The step of a row ("train,12,..." or "eval,12,..."); -1 when the row is
 * not whole (a run killed while writing it). */
static int64_t row_step(const char *line) {
    const char *c = strchr(line, ',');
    if (!c || !strchr(line, '\n')) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(c + 1, &end, 10);
    return errno || end == c + 1 || *end != ',' || v < 0 ? -1 : (int64_t)v;
}

/* The offset in f after its header and the rows up to step. */
static ry_status kept_length(FILE *f, const char *path, int64_t step, long *keep, ry_error *err) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t k = getline(&line, &cap, f);
    ry_status st = RY_OK;
    *keep = 0;
    if (k > 0 && strcmp(line, csv_header) != 0)
        st = ry_error_file(err, path, "cannot continue the metrics CSV: its first line is not "
                                      "relayc's header");
    else if (k > 0)
        *keep = (long)k;
    while (st == RY_OK && k > 0 && (k = getline(&line, &cap, f)) > 0) {
        int64_t s = row_step(line);
        if (s < 0 || s > step) break;
        *keep += (long)k;
    }
    free(line);
    return st;
}

ry_status ry_progress_csv_continue(ry_progress *p, const char *csv_path, int64_t step,
                                   ry_error *err) {
    FILE *f = fopen(csv_path, "r+");
    if (!f && errno == ENOENT) f = fopen(csv_path, "w+");
    if (!f) return ry_error_file(err, csv_path, "cannot open the metrics CSV: %s", strerror(errno));
    long keep;
    if (kept_length(f, csv_path, step, &keep, err)) {
        fclose(f);
        return RY_ERR;
    }
    fflush(f);
    if (ftruncate(fileno(f), (off_t)keep) != 0 || fseek(f, 0, SEEK_END) != 0) {
        int e = errno;
        fclose(f);
        return ry_error_file(err, csv_path, "cannot continue the metrics CSV: %s", strerror(e));
    }
    if (keep == 0) fputs(csv_header, f);
    fflush(f);
    if (p->csv) fclose(p->csv);
    p->csv = f;
    return RY_OK;
}

void ry_progress_note(ry_progress *p, const char *fmt, ...) {
    if (!p || p->mode == RY_PROGRESS_QUIET) return;
    end_line(p);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputc('\n', p->f);
    fflush(p->f);
}

void ry_progress_free(ry_progress *p) {
    if (!p) return;
    end_line(p);
    if (p->csv) fclose(p->csv);
    ry_free(p);
}
