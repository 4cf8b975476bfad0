/*
 * kernels.c: per-kernel times of the convolution family on LeNet-5's shapes
 * (batch 64): conv2d forward, its data gradient (conv2d_transpose) and
 * weight gradient (conv2d_backward_weight), max_pool2d and its gradient.
 * Calls the CPU kernels directly (no runtime around them) and prints one
 * JSON line per kernel with the median wall and process-CPU time over
 * repeated runs.
 *   kernels [--threads N] [--seconds S] [--batch B] [--only NAME]
 * Not a test: nothing here asserts a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "relayc/relayc.h"
#if defined(__has_include)
#if __has_include("relayc/threads.h")
#include "relayc/threads.h"
#define HAVE_THREADS 1
#endif
#endif

#define MAXA 6

/* CPU time of the whole process (all threads): on a shared machine it is
 * steadier than wall time for one thread. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct kcase {
    const char *name, *op;
    int nin;
    int64_t in_shape[2][4], out_shape[4];
    int nattrs;
    const char *attr_names[MAXA];
    int64_t attr_vals[MAXA][4]; /* each a list of attr_len[i] ints */
    int attr_len[MAXA];
} kcase;

static ry_attr_value ints(int n, const int64_t *v, ry_attr_value *items) {
    for (int i = 0; i < n; i++) items[i] = (ry_attr_value){.kind = RY_AV_INT, .i = v[i]};
    return (ry_attr_value){.kind = RY_AV_LIST, .list = {n, items}};
}

static int run_case(const kcase *k, int64_t batch, double seconds, ry_rng *rng) {
    const ry_op *op = ry_op_find(k->op);
    if (!op || !cpu_kernel(op)) {
        fprintf(stderr, "kernels: no CPU kernel for %s\n", k->op);
        return 1;
    }
    ry_attr attrs[MAXA];
    ry_attr_value items[MAXA][4];
    for (int i = 0; i < k->nattrs; i++) {
        attrs[i] = (ry_attr){.name = k->attr_names[i]};
        attrs[i].value = ints(k->attr_len[i], k->attr_vals[i], items[i]);
    }
    ry_attrs as = {k->nattrs, attrs};
    ry_tensor *in[2] = {NULL, NULL}, *out;
    for (int i = 0; i < k->nin; i++) {
        int64_t s[4];
        memcpy(s, k->in_shape[i], sizeof s);
        if (s[0] < 0) s[0] = batch;
        in[i] = bench_rand_f32(rng, 4, s);
    }
    int64_t os[4];
    memcpy(os, k->out_shape, sizeof os);
    if (os[0] < 0) os[0] = batch;
    out = ry_tensor_new(RY_FLOAT32, 4, os);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx c = {.op = op, .attrs = &as, .err = &err};
    double times[4096], cpu[4096];
    int reps = 0;
    double start = bench_now();
    while (reps < 4096 && (reps < 5 || bench_now() - start < seconds)) {
        double t0 = bench_now(), c0 = cpu_now();
        if (cpu_kernel(op)(&c, k->nin, in, 1, &out)) {
            fprintf(stderr, "kernels: %s: %s\n", k->name, err.msg);
            return 1;
        }
        cpu[reps] = cpu_now() - c0;
        times[reps++] = bench_now() - t0;
    }
    double checksum = 0;
    for (int64_t i = 0; i < out->size; i++) checksum += ((float *)out->data)[i];
    printf("{\"kernel\": \"%s\", \"batch\": %lld, \"median_us\": %.1f, \"median_cpu_us\": %.1f, "
           "\"reps\": %d, \"checksum\": %.6g}\n",
           k->name, (long long)batch, 1e6 * bench_median(times, reps), 1e6 * bench_median(cpu, reps),
           reps, checksum);
    for (int i = 0; i < k->nin; i++) ry_tensor_release(in[i]);
    ry_tensor_release(out);
    return 0;
}

#define N -1 /* the batch */
static const kcase cases[] = {
    {"conv1_fwd", "nn.conv2d", 2, {{N, 1, 28, 28}, {6, 1, 5, 5}}, {N, 6, 28, 28},
     2, {"padding", "kernel_size"}, {{2, 2, 2, 2}, {5, 5}}, {4, 2}},
    {"conv1_dw", "nn.conv2d_backward_weight", 2, {{N, 6, 28, 28}, {N, 1, 28, 28}}, {6, 1, 5, 5},
     2, {"padding", "kernel_size"}, {{2, 2, 2, 2}, {5, 5}}, {4, 2}},
    {"conv2_fwd", "nn.conv2d", 2, {{N, 6, 14, 14}, {16, 6, 5, 5}}, {N, 16, 10, 10},
     2, {"padding", "kernel_size"}, {{0, 0, 0, 0}, {5, 5}}, {4, 2}},
    {"conv2_dx", "nn.conv2d_transpose", 2, {{N, 16, 10, 10}, {16, 6, 5, 5}}, {N, 6, 14, 14},
     2, {"padding", "kernel_size"}, {{0, 0, 0, 0}, {5, 5}}, {4, 2}},
    {"conv2_dw", "nn.conv2d_backward_weight", 2, {{N, 16, 10, 10}, {N, 6, 14, 14}}, {16, 6, 5, 5},
     2, {"padding", "kernel_size"}, {{0, 0, 0, 0}, {5, 5}}, {4, 2}},
    {"pool1_fwd", "nn.max_pool2d", 1, {{N, 6, 28, 28}}, {N, 6, 14, 14},
     2, {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
    {"pool1_grad", "nn.max_pool2d_grad", 2, {{N, 6, 14, 14}, {N, 6, 28, 28}}, {N, 6, 28, 28},
     2, {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
    {"pool2_fwd", "nn.max_pool2d", 1, {{N, 16, 10, 10}}, {N, 16, 5, 5},
     2, {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
    {"pool2_grad", "nn.max_pool2d_grad", 2, {{N, 16, 5, 5}, {N, 16, 10, 10}}, {N, 16, 10, 10},
     2, {"pool_size", "strides"}, {{2, 2}, {2, 2}}, {2, 2}},
    /* the char-LSTM's cell (batch 32, hidden 256) and decoder's loss */
    {"lstm_sigmoid", "sigmoid", 1, {{N, 256, 1, 1}}, {N, 256, 1, 1}, 0, {0}, {{0}}, {0}},
    {"lstm_tanh", "tanh", 1, {{N, 256, 1, 1}}, {N, 256, 1, 1}, 0, {0}, {{0}}, {0}},
    {"lstm_add_gates", "add", 2, {{N, 1024, 1, 1}, {N, 1024, 1, 1}}, {N, 1024, 1, 1}, 0, {0}, {{0}}, {0}},
    {"lstm_mul", "multiply", 2, {{N, 256, 1, 1}, {N, 256, 1, 1}}, {N, 256, 1, 1}, 0, {0}, {{0}}, {0}},
    {"lstm_log_softmax", "nn.log_softmax", 1, {{N, 1, 1, 65}}, {N, 1, 1, 65}, 0, {0}, {{0}}, {0}},
};

int main(int argc, char **argv) {
    int threads = 1;
    double seconds = 0.5;
    int64_t batch = 64;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--seconds"))) seconds = atof(v);
        else if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoll(v);
        else if ((v = bench_opt(argc, argv, &i, "--only"))) only = v;
        else {
            fprintf(stderr, "usage: kernels [--threads N] [--seconds S] [--batch B] [--only NAME]\n");
            return 2;
        }
    }
    bench_set_threads(threads);
#ifdef HAVE_THREADS
    ry_set_num_threads(threads);
#endif
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((!only || !strcmp(only, cases[i].name)) && run_case(&cases[i], batch, seconds, &rng))
            return 1;
    return 0;
}
