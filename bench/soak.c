/*
 * soak.c: memory over a long training run (issue 13, part 6). Trains a
 * model of bench_models.h for --steps optimizer steps (default 10,000) and
 * prints, every --every steps (default 1,000), one JSON line with the
 * resident set size (/proc/self/statm) and malloc's own view of the heap
 * (mallinfo2: bytes in use, and bytes free inside the heap), so a growth can
 * be told apart: relayc holding more (in use grows) or the allocator
 * fragmenting (free grows, in use flat). A last line per model gives the
 * least-squares growth per 1,000 steps of the readings after --warmup
 * (default 2,000 steps). Without a NAME, every model in turn, each in its
 * own process. --trim calls malloc_trim(0) before each reading (an
 * experiment: what the allocator keeps but could give back);
 * MALLOC_ARENA_MAX and the other glibc tunables apply as usual.
 *   soak [NAME] [--steps N] [--every K] [--warmup W] [--threads N] [--sst DIR] [--trim]
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_models.h"
#include "bench_util.h"

#define MAX_READINGS 4096

typedef struct soak_opts {
    long steps, every, warmup;
    int threads;
    const char *sst;
    bool trim;
} soak_opts;

typedef struct reading {
    long step;
    double rss_kb;
} reading;

/* Resident pages of this process, in KiB (statm's second field). */
static double rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1024.0;
}

static reading read_memory(const bench_model *b, long step, double loss, double t0, bool trim) {
    if (trim) malloc_trim(0);
    reading r = {step, rss_kb()};
    struct mallinfo2 mi = mallinfo2();
    printf("{\"bench\": \"soak\", \"name\": \"%s\", \"step\": %ld, \"rss_kb\": %.0f, "
           "\"heap_in_use_kb\": %zu, \"heap_free_kb\": %zu, \"loss\": %.5g, \"seconds\": %.1f}\n",
           b->w->name, step, r.rss_kb, (mi.uordblks + mi.hblkhd) / 1024, mi.fordblks / 1024,
           loss, bench_now() - t0);
    fflush(stdout);
    return r;
}

/* Least-squares slope of rss over step, for readings at or after from. */
static double slope_per_1000(const reading *r, int n, long from, int *used) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].step < from) continue;
        double x = (double)r[i].step / 1000.0, y = r[i].rss_kb;
        sx += x, sy += y, sxx += x * x, sxy += x * y, k++;
    }
    *used = k;
    double d = k * sxx - sx * sx;
    return k >= 2 && d > 0 ? (k * sxy - sx * sy) / d : 0;
}

static ry_status soak(const bench_workload *w, const soak_opts *o, ry_error *err) {
    static reading readings[MAX_READINGS];
    int nread = 0;
    bench_model b;
    double compile_s = 0, loss = 0, t0 = bench_now();
    int64_t items = 0;
    ry_status st = bench_model_new(&b, w, o->threads, o->sst, &compile_s, err);
    if (st == RY_OK) readings[nread++] = read_memory(&b, 0, 0, t0, o->trim);
    for (long k = 1; st == RY_OK && k <= o->steps; k++) {
        st = bench_model_step(&b, k, &items, &loss, err);
        if (st == RY_OK && (k % o->every == 0 || k == o->steps) && nread < MAX_READINGS)
            readings[nread++] = read_memory(&b, k, loss, t0, o->trim);
    }
    if (st == RY_OK) {
        int used = 0;
        double g = slope_per_1000(readings, nread, o->warmup, &used);
        printf("{\"bench\": \"soak\", \"name\": \"%s\", \"steps\": %ld, \"data\": \"%s\", "
               "\"threads\": %d, \"trim\": %s, \"warmup\": %ld, \"readings_after_warmup\": %d, "
               "\"rss_growth_kb_per_1000_steps\": %.1f, \"rss_end_kb\": %.0f}\n",
               w->name, o->steps,
               b.tb ? (b.real_data ? "sst train" : "random trees") : "random", o->threads,
               o->trim ? "true" : "false", o->warmup, used, g, readings[nread - 1].rss_kb);
        fflush(stdout);
    }
    bench_model_free(&b);
    return st;
}

static int soak_one(const char *name, const soak_opts *o) {
    bench_set_threads(o->threads);
    ry_error err;
    if (soak(bench_workload_find(name), o, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    soak_opts o = {10000, 1000, 2000, 1, "/work/shared/data/sst", false};
    const char *name = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--steps"))) o.steps = atol(v);
        else if ((v = bench_opt(argc, argv, &i, "--every"))) o.every = atol(v);
        else if ((v = bench_opt(argc, argv, &i, "--warmup"))) o.warmup = atol(v);
        else if ((v = bench_opt(argc, argv, &i, "--threads"))) o.threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--sst"))) o.sst = v;
        else if (!strcmp(argv[i], "--trim")) o.trim = true;
        else if (argv[i][0] != '-' && !name && bench_workload_find(argv[i])) name = argv[i];
        else bad = true;
    }
    if (bad || o.steps < 1 || o.every < 1 || o.warmup < 0 || o.threads < 1) {
        fprintf(stderr, "usage: soak [mlp|lenet|charlstm|treelstm] [--steps N] [--every K] "
                        "[--warmup W] [--threads N] [--sst DIR] [--trim]\n");
        return 2;
    }
    if (name) return soak_one(name, &o);
    /* each model in a fresh process, so one's heap does not blur another's */
    static const char *const ALL[] = {"mlp", "lenet", "charlstm", "treelstm"};
    int rc = 0;
    for (size_t k = 0; k < sizeof ALL / sizeof *ALL; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) _exit(soak_one(ALL[k], &o));
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            rc = 1;
    }
    return rc;
}
