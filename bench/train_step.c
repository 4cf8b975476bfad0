/*
 * train_step.c: training throughput of one model with the trainer's
 * engine (the register VM of vm.h), as issue 5's benchmarks ask: each step
 * runs the gradient program (ry_grad, then ry_optimize, both done by
 * ry_trainer_new) and an optimizer
 * update on the trainer's parameter set (train.h: gradients and parameters are one slab
 * each). Configurations follow the PyTorch mirrors (bench/mirror_*.py):
 *   mlp, lenet  random Fashion-MNIST-shaped batches of 64; SGD 0.05, momentum 0.9
 *   charlstm    random ids, batch 32, sequence 64, state carried; Adam 2e-3,
 *               clip norm 5
 *   treelstm    SST train trees in order (--sst DIR, default
 *               /work/shared/data/sst) or, when absent, random binary trees
 *               of 2..36 leaves; Adagrad 0.05, weight decay 1e-4 except the
 *               embeddings, 25 trees per update
 * Prints one JSON line with throughput (samples, sequences or trees per
 * second over the timed steps), its unit, the median step, the compile time
 * and the share of wall time inside cblas_*gemm (summed over threads).
 * --threads N sets the kernels' threads (threads.h: relayc's pool and
 * OpenBLAS) and the trainer's workers (ry_train_opts.threads).
 * --profile prints the operator call sites that took the most time in the
 * timed steps (vm.h: ry_vm_print_profile; ~50 ns per call added).
 *   train_step NAME [--threads N] [--seconds S] [--sst DIR] [--profile] [--target T]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_util.h"
#include "relayc/pass.h"
#include "relayc/train.h"

#define POOL 8          /* random batches cycled through */
#define MAX_STEPS 100000
#define TREES_PER_UPDATE 25

typedef struct workload {
    const char *name, *path, *unit;
    int64_t batch, seq;
    int32_t bound; /* integer data drawn below this */
} workload;

static const workload WORKLOADS[] = {
    {"mlp", "models/mlp.relay", "samples/s", 64, 0, 10},
    {"lenet", "models/lenet.relay", "samples/s", 64, 0, 10},
    {"charlstm", "models/charlstm.relay", "sequences/s", 32, 64, 65},
    {"treelstm", "models/treelstm.relay", "trees/s", TREES_PER_UPDATE, 0, 0},
};

typedef struct bench {
    const workload *w;
    ry_trainer *tr;
    int ndata;
    ry_value *pool[POOL][RY_TRAIN_MAX_DATA]; /* tensor workloads */
    ry_treebank *tb;                          /* tree workload */
    bool own_tb;                              /* tb built here (random trees) */
    ry_vocab *vocab;
    ry_tree_source src;
    ry_train_data td;
    int64_t next_tree;
} bench;

/* ---- random trees ---------------------------------------------------------
 * A binary tree over k leaves, split at a uniform point, written in
 * post-order (children before parents) as datasets.h stores trees. */
static int32_t gen_tree(ry_rng *r, int k, ry_tree_node *nodes, int32_t *n) {
    if (k == 1) {
        nodes[*n] = (ry_tree_node){(int32_t)ry_rng_below(r, 5), (int32_t)ry_rng_below(r, 18281),
                                   -1, -1};
        return (*n)++;
    }
    int left = 1 + (int)ry_rng_below(r, (uint64_t)(k - 1));
    int32_t l = gen_tree(r, left, nodes, n);
    int32_t rr = gen_tree(r, k - left, nodes, n);
    nodes[*n] = (ry_tree_node){(int32_t)ry_rng_below(r, 5), -1, l, rr};
    return (*n)++;
}

static ry_treebank *random_treebank(int ntrees, ry_rng *r) {
    enum { MAX_LEAVES = 36 };
    ry_treebank *tb = ry_calloc(1, sizeof *tb);
    if (!tb) return NULL;
    tb->trees = ry_calloc((size_t)ntrees, sizeof *tb->trees);
    tb->pool = ry_calloc((size_t)ntrees * (2 * MAX_LEAVES - 1), sizeof *tb->pool);
    if (!tb->trees || !tb->pool) {
        ry_free(tb->trees);
        ry_free(tb->pool);
        ry_free(tb);
        return NULL;
    }
    int32_t used = 0;
    for (int i = 0; i < ntrees; i++) {
        int k = 2 + (int)ry_rng_below(r, MAX_LEAVES - 1);
        int32_t n = 0;
        gen_tree(r, k, tb->pool + used, &n);
        tb->trees[i] = (ry_tree){n, tb->pool + used, i + 1};
        used += n;
    }
    tb->ntrees = ntrees;
    return tb;
}

static void free_random_treebank(ry_treebank *tb) {
    if (!tb) return;
    ry_free(tb->trees);
    ry_free(tb->pool);
    ry_free(tb);
}

/* --target: where the kernels, parameters and optimizer state live */
static const ry_target *bench_target;

/* ---- setup -------------------------------------------------------------------- */
static ry_train_opts options_for(const workload *w) {
    ry_train_opts o = ry_train_defaults();
    if (!strcmp(w->name, "charlstm")) {
        o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
        o.optim.lr = 2e-3;
        o.clip_norm = 5;
    } else if (!strcmp(w->name, "treelstm")) {
        o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
        o.optim.lr = 0.05;
        o.optim.weight_decay = 1e-4;
    } else {
        o.optim = ry_optim_defaults(RY_OPTIM_SGD);
        o.optim.lr = 0.05;
        o.optim.momentum = 0.9;
    }
    return o;
}

static ry_status setup_data(bench *b, const char *sst, ry_rng *rng, bool *real, ry_error *err) {
    const workload *w = b->w;
    *real = false;
    if (strcmp(w->name, "treelstm")) {
        ry_module *m = ry_trainer_module(b->tr);
        ry_global *g = ry_module_find_global(m, "loss");
        if (!g) return ry_error_at(err, RY_NO_SPAN, "%s has no @loss", w->path);
        for (int p = 0; p < POOL; p++)
            if (bench_random_data(g->func, b->ndata, w->batch, w->seq, w->bound, rng, b->pool[p],
                                  err))
                return RY_ERR;
        return RY_OK;
    }
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/train.txt", sst);
    if (sst[0] && stat(path, &sb) == 0) {
        /* the vocabulary of train is the embedding table's 18281 rows */
        b->vocab = ry_vocab_new();
        if (!b->vocab) return ry_error_at(err, RY_NO_SPAN, "out of memory");
        if (ry_treebank_read(path, b->vocab, true, &b->tb, err)) return RY_ERR;
        *real = true;
    } else {
        b->tb = random_treebank(500, rng);
        b->own_tb = true;
        if (!b->tb) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    if (ry_optim_set_decay(ry_trainer_optim(b->tr), "emb", false, err)) return RY_ERR;
    return ry_train_data_trees(b->tr, b->tb, &b->src, &b->td, err);
}

/* One optimizer step; *items gets the samples, sequences or trees it used. */
static ry_status step(bench *b, int64_t k, int64_t *items, double *loss, ry_error *err) {
    if (!b->tb) {
        *items = b->w->batch;
        return ry_trainer_step(b->tr, b->ndata, b->pool[k % POOL], loss, err);
    }
    ry_value *trees[TREES_PER_UPDATE] = {0};
    double losses[TREES_PER_UPDATE];
    ry_status st = RY_OK;
    for (int i = 0; i < TREES_PER_UPDATE && st == RY_OK; i++) {
        int64_t idx = b->next_tree;
        b->next_tree = (b->next_tree + 1) % b->tb->ntrees;
        st = b->td.fetch(&b->td, &idx, 1, &trees[i], err);
    }
    /* one call per tree, on the trainer's threads, summed in tree order */
    if (st == RY_OK)
        st = ry_trainer_accumulate_n(b->tr, TREES_PER_UPDATE, 1, trees, losses, err);
    bench_release_all(trees, TREES_PER_UPDATE);
    if (st) return RY_ERR;
    double sum = 0;
    for (int i = 0; i < TREES_PER_UPDATE; i++) sum += losses[i];
    *items = TREES_PER_UPDATE;
    *loss = sum / TREES_PER_UPDATE;
    return ry_trainer_apply(b->tr, err);
}

static void bench_free(bench *b) {
    for (int p = 0; p < POOL; p++) bench_release_all(b->pool[p], RY_TRAIN_MAX_DATA);
    if (b->own_tb) free_random_treebank(b->tb);
    else ry_treebank_free(b->tb);
    ry_vocab_free(b->vocab);
    ry_trainer_free(b->tr);
}

static ry_status run(const workload *w, int threads, double seconds, const char *sst,
                     bool profile, ry_error *err) {
    static double step_s[MAX_STEPS];
    bench b = {.w = w};
    ry_status st = RY_ERR;
    ry_train_opts o = options_for(w);
    o.threads = threads; /* the Tree-LSTM's trees run on this many workers */
    o.target = bench_target;
    /* ry_trainer_new parses, type-checks, initializes, differentiates and
     * optimizes (ry_optimize level 2): the compile time of the model. */
    double t_compile = bench_now();
    if (ry_trainer_new_file(w->path, &o, &b.tr, err)) goto out;
    t_compile = bench_now() - t_compile;
    b.ndata = ry_trainer_ndata(b.tr);
    if (b.ndata > RY_TRAIN_MAX_DATA) {
        ry_error_at(err, RY_NO_SPAN, "too many data parameters");
        goto out;
    }
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    bool real = false;
    if (setup_data(&b, sst, &rng, &real, err)) goto out;

    /* one warm-up step: first-touch allocations, OpenBLAS's buffers */
    int64_t items = 0;
    double loss = 0, first_loss = 0;
    /* on a device the first step also builds (or loads) its kernels */
    double t_first = bench_now();
    if (step(&b, 0, &items, &first_loss, err)) goto out;
    t_first = bench_now() - t_first;
    ry_device_counters c0, c1;
    ry_target_counters(bench_target ? bench_target : ry_target_cpu(), &c0);

    ry_vm_set_profile(ry_trainer_vm(b.tr), profile); /* the timed steps only */
    int n = 0;
    int64_t total_items = 0;
    double start = bench_now(), g0 = bench_gemm_seconds();
    while (n < MAX_STEPS && (n < 3 || bench_now() - start < seconds)) {
        double t0 = bench_now();
        if (step(&b, n + 1, &items, &loss, err)) goto out;
        step_s[n++] = bench_now() - t0;
        total_items += items;
    }
    double wall = bench_now() - start;
    double gemm = bench_gemm_seconds() - g0;
    ry_target_counters(bench_target ? bench_target : ry_target_cpu(), &c1);
    double med = bench_median(step_s, n);
    printf("{\"bench\": \"train_step\", \"name\": \"%s\", \"engine\": \"vm\", "
           "\"throughput\": %.1f, \"unit\": \"%s\", \"threads\": %d, \"batch\": %lld, "
           "\"seq\": %lld, \"data\": \"%s\", \"optimizer\": \"%s\", \"opt_level\": %d, "
           "\"steps\": %d, \"seconds\": %.3f, \"step_ms_median\": %.3f, "
           "\"throughput_median_step\": %.1f, \"compile_ms\": %.2f, \"gemm_share\": %.3f, "
           "\"first_loss\": %.5g, \"last_loss\": %.5g, \"target\": \"%s\", \"first_step_ms\": %.1f, "
           "\"bytes_to_device_per_step\": %.0f, \"bytes_to_host_per_step\": %.0f}\n",
           w->name, wall > 0 ? (double)total_items / wall : 0, w->unit, threads,
           (long long)w->batch, (long long)w->seq,
           b.tb ? (real ? "sst train" : "random trees") : "random",
           ry_optim_kind_name(o.optim.kind),
           2 /* the trainer's ry_optimize level */, n, wall, 1e3 * med,
           med > 0 ? (double)items / med : 0, 1e3 * t_compile, wall > 0 ? gemm / wall : 0,
           first_loss, loss, bench_target ? ry_target_name(bench_target) : "cpu", 1e3 * t_first,
           (double)(c1.bytes_to_device - c0.bytes_to_device) / n,
           (double)(c1.bytes_to_host - c0.bytes_to_host) / n);
    fflush(stdout);
    if (profile) ry_vm_print_profile(ry_trainer_vm(b.tr), stderr, 30);
    st = RY_OK;
out:
    bench_free(&b);
    return st;
}

int main(int argc, char **argv) {
    int threads = 1;
    double seconds = 10;
    const char *sst = "/work/shared/data/sst", *name = NULL;
    bool profile = false;
    const char *target = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--seconds"))) seconds = atof(v);
        else if ((v = bench_opt(argc, argv, &i, "--sst"))) sst = v;
        else if ((v = bench_opt(argc, argv, &i, "--target"))) target = v;
        else if (!strcmp(argv[i], "--profile")) profile = true;
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else name = NULL, i = argc;
    }
    const workload *w = NULL;
    for (size_t k = 0; name && k < sizeof WORKLOADS / sizeof *WORKLOADS; k++)
        if (!strcmp(name, WORKLOADS[k].name)) w = &WORKLOADS[k];
    if (!w || threads < 1 || !(seconds >= 0)) {
        fprintf(stderr, "usage: train_step mlp|lenet|charlstm|treelstm [--threads N] "
                        "[--seconds S] [--sst DIR] [--profile] [--target T]\n");
        return 2;
    }
    bench_set_threads(threads);
    ry_error err;
    if (target && ry_target_find(target, &bench_target, &err)) {
        fprintf(stderr, "train_step: %s\n", err.msg);
        return 1;
    }
    if (run(w, threads, seconds, sst, profile, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    return 0;
}
