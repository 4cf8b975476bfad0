/*
 * train_args.h: the options of `relayc train`, read from the command line
 * (train_args.c) and turned into the C API's ry_train_opts, so that every
 * training option of the library has its flag. cmd_train.c loads the data
 * and runs the fit.
 */
#ifndef RELAYC_CLI_TRAIN_ARGS_H
#define RELAYC_CLI_TRAIN_ARGS_H

#include "relayc/train.h"

extern const char *const train_help;

typedef struct train_args {
    const char *model, *data, *optimizer, *ckpt_dir, *csv, *export_dir;
    /* NAN where not given: the optimizer's defaults stand */
    double lr, momentum, weight_decay, dampening, beta1, beta2, eps, alpha, lr_decay,
        initial_accumulator;
    double clip_norm, clip_value, dist_timeout;
    /* 0 where not given */
    int64_t epochs, steps, batch, seq, val, ckpt_every, keep, log_every, threads, shards, bucket;
    int64_t max_memory_mib; /* --max-memory: ry_train_opts.max_resident in MiB */
    uint64_t seed;
    bool resume, resume_anyway, force, quiet, drop_last, profile, inference_grads;
    bool no_autobatch; /* ry_train_opts.no_autobatch */
    bool nesterov, amsgrad, centered, deterministic, shard_optimizer, no_overlap;
    ry_schedule schedule;
    int nsyms;                                /* --dim NAME=VALUE */
    const char *sym_names[RY_TRAIN_MAX_SYMS];
    int64_t sym_values[RY_TRAIN_MAX_SYMS];
    char dim_names[RY_TRAIN_MAX_SYMS][64];    /* --dim's names, kept here */
    ry_engine engine;
    const ry_target *target;
} train_args;

/* Reads argv into a (zeroed by the caller). Returns 0, -1 after printing
 * the help, or 1 after printing an error. */
int train_args_parse(int argc, char **argv, train_args *a);

/* a's values over ry_train_defaults() (also sets the thread count).
 * Returns the exit status: 1 after printing an error. */
int train_args_opts(const train_args *a, ry_train_opts *o);

/* Adds (or replaces) symbolic dimension name = value, e.g. a vocabulary
 * size the data knows; false when the table is full. */
bool train_args_set_dim(train_args *a, const char *name, int64_t value);

#endif
