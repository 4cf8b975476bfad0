/*
 * gemm.c: per-call times of what the MLP's and the char-LSTM's training
 * steps spend their time in, at 1 and N threads side by side: the thread
 * pool's fork/join (two 2 us chunks, hot and after 30 us of serial work),
 * every GEMM shape of the two
 * steps through ry_cpu_gemm (blas.h), and the elementwise kernels of one
 * LSTM step (32 x 1024 maps, the bias-gradient sum). Calls the kernels
 * directly, no runtime around them; prints one JSON line per item with the
 * median microseconds per call at each thread count and their ratio, and
 * the same for the fastest samples (best_*: what the code does when no
 * other job takes its cores).
 *   gemm [--threads N] [--seconds S] [--only SUBSTRING]
 * Not a test: nothing here asserts a time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"
#include "bench_util.h"
#include "relayc/relayc.h"

#define MAX_SAMPLES 4096

typedef struct shape {
    const char *name;
    bool ta, tb;
    int64_t M, N, K;
    double beta;
} shape;

/* The steps' GEMMs, as ry_cpu_gemm sees them (row-major C = op(A) op(B)). */
static const shape SHAPES[] = {
    {"mlp fc1", false, true, 64, 256, 784, 0},
    {"mlp fc2", false, true, 64, 128, 256, 0},
    {"mlp fc3", false, true, 64, 10, 128, 0},
    {"mlp dW1", true, false, 256, 784, 64, 1},
    {"mlp dW2", true, false, 128, 256, 64, 1},
    {"mlp dh1", false, false, 64, 256, 128, 0},
    {"lstm x.W_ih", false, true, 32, 1024, 64, 0},
    {"lstm h.W_hh", false, true, 32, 1024, 256, 0},
    {"lstm decoder", false, true, 32, 65, 256, 0},
    {"lstm dh (gates)", false, false, 32, 256, 1024, 1},
    {"lstm dx (gates)", false, false, 32, 64, 1024, 1},
    {"lstm dh (decoder)", false, false, 32, 256, 65, 1},
    {"lstm dW_hh", true, false, 1024, 256, 32, 1},
    {"lstm dW_ih", true, false, 1024, 64, 32, 1},
    {"lstm dW_out", true, false, 65, 256, 32, 1},
};

typedef void (*item_fn)(void *ctx);

/* Microseconds per call of fn over about `seconds`: the median, and the
 * lowest of the samples (each the mean of 8 calls) in *best, which on a
 * machine shared with other jobs shows what the code can do when nothing
 * takes its cores away. */
static double time_item(item_fn fn, void *ctx, double seconds, double *best) {
    static double samples[MAX_SAMPLES];
    for (int i = 0; i < 20; i++) fn(ctx); /* warm: caches, the pool's workers */
    int n = 0;
    double end = bench_now() + seconds;
    while (n < MAX_SAMPLES && bench_now() < end) {
        double t0 = bench_now();
        for (int r = 0; r < 8; r++) fn(ctx);
        samples[n++] = (bench_now() - t0) / 8;
    }
    double med = bench_median(samples, n); /* sorts */
    *best = 1e6 * samples[0];
    return 1e6 * med;
}

typedef struct gemm_job {
    const shape *s;
    float *A, *B, *C;
} gemm_job;

static void run_gemm(void *ctx) {
    const gemm_job *g = ctx;
    const shape *s = g->s;
    ry_cpu_gemm(false, s->ta, s->tb, s->M, s->N, s->K, 1.0, g->A, s->ta ? s->M : s->K, g->B,
                s->tb ? s->K : s->N, s->beta, g->C, s->N);
}

/* A chunk of about 2 us of dependent arithmetic per index: two of them
 * take 4 us on one thread, 2 us plus the fork/join on two. */
static volatile double sink;
static void spin_work(void *ctx, int64_t lo, int64_t hi) {
    (void)ctx;
    for (int64_t i = lo; i < hi; i++) {
        double x = 1.0;
        for (int k = 0; k < 1500; k++) x = x * 0.999999 + 1e-7;
        sink = x;
    }
}
static void run_fork(void *ctx) { ry_parallel_for(2, 1, spin_work, ctx); }
/* the same after 12 such units of serial work (~30 us): the workers have
 * been waiting that long, as between a training step's kernels */
static void run_fork_gap(void *ctx) {
    spin_work(ctx, 0, 12);
    ry_parallel_for(2, 1, spin_work, ctx);
}

static void run_kernel(void *ctx);

typedef struct kern_job {
    const ry_op *op;
    ry_tensor *in[3], *out;
    int nin;
    ry_attrs *attrs;
} kern_job;

static void run_kernel(void *ctx) {
    kern_job *k = ctx;
    ry_error err;
    ry_kernel_ctx c = {.op = k->op, .attrs = k->attrs, .err = &err};
    if (cpu_kernel(k->op)(&c, k->nin, k->in, 1, &k->out)) {
        fprintf(stderr, "gemm: %s: %s\n", k->op->name, err.msg);
        exit(1);
    }
}

static float *rand_buf(ry_rng *r, int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)n);
    if (!p) {
        fprintf(stderr, "gemm: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) p[i] = (float)ry_rng_uniform(r) - 0.5f;
    return p;
}

static void report(const char *name, double flops, double us1, double usn, double best1,
                   double bestn, int threads) {
    printf("{\"bench\": \"gemm\", \"item\": \"%s\", \"threads\": %d, \"us_1\": %.2f, "
           "\"us_n\": %.2f, \"speedup\": %.3f, \"best_us_1\": %.2f, \"best_us_n\": %.2f, "
           "\"best_speedup\": %.3f",
           name, threads, us1, usn, us1 / usn, best1, bestn, best1 / bestn);
    if (flops > 0)
        printf(", \"gflops_1\": %.1f, \"gflops_n\": %.1f", flops / us1 / 1e3, flops / usn / 1e3);
    printf("}\n");
    fflush(stdout);
}

static void both(const char *name, double flops, item_fn fn, void *ctx, int threads,
                 double seconds) {
    double best1, bestn;
    bench_set_threads(1);
    double us1 = time_item(fn, ctx, seconds, &best1);
    bench_set_threads(threads);
    double usn = time_item(fn, ctx, seconds, &bestn);
    bench_set_threads(1);
    report(name, flops, us1, usn, best1, bestn, threads);
}

/* A fused.elemwiseN call (code: its program) on nin inputs of 32 x 1024. */
static void fused(const char *name, const char *code, int nin, ry_tensor **in, ry_tensor *out,
                  const char *only, int threads, double seconds) {
    char opname[32];
    snprintf(opname, sizeof opname, "fused.elemwise%d", nin);
    ry_attr attr = {.name = "code", .value = RY_ASTR(code)};
    ry_attrs attrs = {1, &attr};
    kern_job k = {ry_op_find(opname), {in[0], in[1], in[2]}, out, nin, &attrs};
    if (!k.op || (only && !strstr(name, only))) return;
    both(name, 0, run_kernel, &k, threads, seconds);
}

static void elementwise(const char *only, int threads, double seconds, ry_rng *r) {
    int64_t gshape[2] = {32, 1024}, bshape[1] = {1024};
    ry_tensor *x = bench_rand_f32(r, 2, gshape), *y = bench_rand_f32(r, 2, gshape);
    ry_tensor *o = ry_tensor_new(RY_FLOAT32, 2, gshape), *b = ry_tensor_new(RY_FLOAT32, 1, bshape);
    if (!x || !y || !o || !b) exit(1);
    ry_attr_value ax = {.kind = RY_AV_INT, .i = 0};
    ry_attr attr = {.name = "axis", .value = {.kind = RY_AV_LIST, .list = {1, &ax}}};
    ry_attrs sum_attrs = {1, &attr}, none = {0, NULL};
    struct {
        const char *name, *op;
        int nin;
        ry_tensor *out;
        ry_attrs *attrs;
    } items[] = {
        {"sigmoid 32x1024", "sigmoid", 1, o, &none},
        {"tanh 32x1024", "tanh", 1, o, &none},
        {"add 32x1024", "add", 2, o, &none},
        {"multiply 32x1024", "multiply", 2, o, &none},
        {"sum axis 0 32x1024", "sum", 1, b, &sum_attrs},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (only && !strstr(items[i].name, only)) continue;
        kern_job k = {ry_op_find(items[i].op), {x, y, NULL}, items[i].out, items[i].nin,
                      items[i].attrs};
        if (!k.op) exit(1);
        both(items[i].name, 0, run_kernel, &k, threads, seconds);
    }
    ry_tensor *z = bench_rand_f32(r, 2, gshape), *xyz[3] = {x, y, z};
    if (!z) exit(1);
    fused("fused multiply+add 32x1024", "multiply(x0, x1); add(x2, t0)", 3, xyz, o, only, threads,
          seconds);
    fused("fused lstm cell 32x1024", "sigmoid(x0); multiply(t0, x1); sigmoid(x2); tanh(t1); "
          "multiply(t2, t3); add(t1, t4)", 3, xyz, o, only, threads, seconds);
    ry_tensor_release(z);
    ry_tensor_release(x);
    ry_tensor_release(y);
    ry_tensor_release(o);
    ry_tensor_release(b);
}

int main(int argc, char **argv) {
    int threads = 2;
    double seconds = 0.5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--seconds"))) seconds = atof(v);
        else if ((v = bench_opt(argc, argv, &i, "--only"))) only = v;
        else {
            fprintf(stderr, "usage: gemm [--threads N] [--seconds S] [--only SUBSTRING]\n");
            return 2;
        }
    }
    if (threads < 2) threads = 2;
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    if (!only || strstr("fork/join 2 x 2us", only))
        both("fork/join 2 x 2us", 0, run_fork, NULL, threads, seconds);
    if (!only || strstr("fork/join 2 x 2us after 30 us", only))
        both("fork/join 2 x 2us after 30 us", 0, run_fork_gap, NULL, threads, seconds);
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const shape *s = &SHAPES[i];
        if (only && !strstr(s->name, only)) continue;
        gemm_job g = {s, rand_buf(&rng, s->M * s->K), rand_buf(&rng, s->K * s->N),
                      rand_buf(&rng, s->M * s->N)};
        both(s->name, 2.0 * (double)(s->M * s->N * s->K), run_gemm, &g, threads, seconds);
        free(g.A);
        free(g.B);
        free(g.C);
    }
    elementwise(only, threads, seconds, &rng);
    return 0;
}
