/*
 * bench_models.c: the workloads of bench_models.h: the trainer of each
 * model with the mirrors' configuration, its data, and one step. The
 * Tree-LSTM's step accumulates its 25 trees on the trainer's workers
 * (ry_trainer_accumulate_n) and then applies the update.
 */
#include "bench_models.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_util.h"

static const bench_workload WORKLOADS[] = {
    {"mlp", "models/mlp.relay", "samples/s", 64, 0, 10},
    {"lenet", "models/lenet.relay", "samples/s", 64, 0, 10},
    {"charlstm", "models/charlstm.relay", "sequences/s", 32, 64, 65},
    {"treelstm", "models/treelstm.relay", "trees/s", BENCH_TREES_PER_UPDATE, 0, 0},
};

const bench_workload *bench_workload_find(const char *name) {
    for (size_t k = 0; name && k < sizeof WORKLOADS / sizeof *WORKLOADS; k++)
        if (!strcmp(name, WORKLOADS[k].name)) return &WORKLOADS[k];
    return NULL;
}
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

/* ---- setup -------------------------------------------------------------------- */
static ry_train_opts options_for(const bench_workload *w) {
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

static ry_status setup_data(bench_model *b, const char *sst, ry_rng *rng, ry_error *err) {
    const bench_workload *w = b->w;
    if (strcmp(w->name, "treelstm")) {
        ry_module *m = ry_trainer_module(b->tr);
        ry_global *g = ry_module_find_global(m, "loss");
        if (!g) return ry_error_at(err, RY_NO_SPAN, "%s has no @loss", w->path);
        for (int p = 0; p < BENCH_POOL; p++)
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
        b->real_data = true;
    } else {
        b->tb = random_treebank(500, rng);
        b->own_tb = true;
        if (!b->tb) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    if (ry_optim_set_decay(ry_trainer_optim(b->tr), "emb", false, err)) return RY_ERR;
    return ry_train_data_trees(b->tr, b->tb, &b->src, &b->td, err);
}

ry_status bench_model_step(bench_model *b, int64_t k, int64_t *items, double *loss, ry_error *err) {
    if (!b->tb) {
        *items = b->w->batch;
        return ry_trainer_step(b->tr, b->ndata, b->pool[k % BENCH_POOL], loss, err);
    }
    ry_value *trees[BENCH_TREES_PER_UPDATE] = {0};
    double losses[BENCH_TREES_PER_UPDATE];
    ry_status st = RY_OK;
    for (int i = 0; i < BENCH_TREES_PER_UPDATE && st == RY_OK; i++) {
        int64_t idx = b->next_tree;
        b->next_tree = (b->next_tree + 1) % b->tb->ntrees;
        st = b->td.fetch(&b->td, &idx, 1, &trees[i], err);
    }
    /* one call per tree, on the trainer's threads, summed in tree order */
    if (st == RY_OK)
        st = ry_trainer_accumulate_n(b->tr, BENCH_TREES_PER_UPDATE, 1, trees, losses, err);
    bench_release_all(trees, BENCH_TREES_PER_UPDATE);
    if (st) return RY_ERR;
    double sum = 0;
    for (int i = 0; i < BENCH_TREES_PER_UPDATE; i++) sum += losses[i];
    *items = BENCH_TREES_PER_UPDATE;
    *loss = sum / BENCH_TREES_PER_UPDATE;
    return ry_trainer_apply(b->tr, err);
}

void bench_model_free(bench_model *b) {
    for (int p = 0; p < BENCH_POOL; p++) bench_release_all(b->pool[p], RY_TRAIN_MAX_DATA);
    if (b->own_tb) free_random_treebank(b->tb);
    else ry_treebank_free(b->tb);
    ry_vocab_free(b->vocab);
    ry_trainer_free(b->tr);
}

const ry_target *bench_model_target;
bool bench_model_no_autobatch;

ry_status bench_model_new(bench_model *b, const bench_workload *w, int threads, const char *sst,
                          double *compile_s, ry_error *err) {
    *b = (bench_model){.w = w, .opts = options_for(w)};
    b->opts.threads = threads; /* the Tree-LSTM's trees run on this many workers */
    b->opts.target = bench_model_target;
    b->opts.no_autobatch = bench_model_no_autobatch;
    b->opts.autobatch_eval = !bench_model_no_autobatch; /* measured by train_step --ab */
    /* ry_trainer_new parses, type-checks, initializes, differentiates and
     * optimizes (ry_optimize level 2): the compile time of the model. */
    double t = bench_now();
    if (ry_trainer_new_file(w->path, &b->opts, &b->tr, err)) return RY_ERR;
    *compile_s = bench_now() - t;
    b->ndata = ry_trainer_ndata(b->tr);
    if (b->ndata > RY_TRAIN_MAX_DATA) return ry_error_at(err, RY_NO_SPAN, "too many data parameters");
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    return setup_data(b, sst, &rng, err);
}
