/*
 * bench_models.h: the four training workloads of the benchmarks (the MLP,
 * LeNet, the char-LSTM and the Tree-LSTM), built the way the PyTorch
 * mirrors configure them (bench/mirror_*.py): the trainer with its
 * optimizer, the data (random batches cycled through, or SST trees), and
 * one optimizer step. train_step.c times these steps; soak.c watches the
 * memory over many of them. Not part of the library.
 *   mlp, lenet  random Fashion-MNIST-shaped batches of 64; SGD 0.05, momentum 0.9
 *   charlstm    random ids, batch 32, sequence 64, state carried; Adam 2e-3,
 *               clip norm 5
 *   treelstm    SST train trees in order (sst directory) or, when absent,
 *               random binary trees of 2..36 leaves; Adagrad 0.05, weight
 *               decay 1e-4 except the embeddings, 25 trees per update
 */
#ifndef RELAYC_BENCH_MODELS_H
#define RELAYC_BENCH_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "relayc/relayc.h"

#define BENCH_POOL 8              /* random batches cycled through */
#define BENCH_TREES_PER_UPDATE 25 /* trees of one Tree-LSTM step */

typedef struct bench_workload {
    const char *name, *path, *unit;
    int64_t batch, seq;
    int32_t bound; /* integer data drawn below this */
} bench_workload;

/* The workload called name, or NULL. */
const bench_workload *bench_workload_find(const char *name);

typedef struct bench_model {
    const bench_workload *w;
    ry_train_opts opts;
    ry_trainer *tr;
    int ndata;
    ry_value *pool[BENCH_POOL][RY_TRAIN_MAX_DATA]; /* tensor workloads */
    ry_treebank *tb;                               /* tree workload */
    bool own_tb;                                   /* tb built here (random trees) */
    bool real_data;                                /* SST trees, not random ones */
    ry_vocab *vocab;
    ry_tree_source src;
    ry_train_data td;
    int64_t next_tree;
} bench_model;

/* Builds the trainer of w (parse, check, initialize, differentiate,
 * optimize, compile: *compile_s gets the seconds it took) with threads
 * workers, then its data; sst is the treebank's directory ("" for random
 * trees). Free *b with bench_model_free, also after an error. */
ry_status bench_model_new(bench_model *b, const bench_workload *w, int threads, const char *sst,
                          double *compile_s, ry_error *err);
/* Where bench_model_new's trainers run (NULL: the CPU; train_step's
 * --target). */
extern const ry_target *bench_model_target;
/* the trainer's ry_train_opts.no_autobatch (train_step --no-autobatch) */
extern bool bench_model_no_autobatch;
/* One optimizer step (k picks the batch of the pool); *items gets the
 * samples, sequences or trees it used, *loss their mean loss. */
ry_status bench_model_step(bench_model *b, int64_t k, int64_t *items, double *loss,
                           ry_error *err);
void bench_model_free(bench_model *b);

#endif
