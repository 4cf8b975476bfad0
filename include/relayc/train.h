/*
 * train.h: the training loop API. A trainer binds a model's @loss entry to a
 * parameter set (names and shapes from the parameter types, one slab),
 * initializes it, takes the gradient with the AD transform once, and then
 * runs gradient + optimizer steps with the compiled engine (vm.h; or the
 * interpreter, on request). ry_train_fit adds
 * the loop around it: seeded batches, evaluation on held-out data,
 * progress, a CSV of metrics, NaN/Inf detection and HDF5 checkpoints that
 * resume exactly. Data loading is the caller's (datasets.h): the loop only
 * asks a ry_train_data for the values of a batch.
 *
 * Model conventions (the .relay files in models/): `def @loss(DATA..., PARAMS...)`
 * returns a float scalar loss, or a tuple (loss, state...) whose other
 * fields are carried state (RNNs: stop_gradient(h)); the last `state`
 * DATA parameters then receive it at the next step (zeros at the start of
 * each epoch). `def @predict(DATA..., PARAMS...)` returns class scores (or a
 * tuple whose field 0 holds them). Comment lines at the top of the file:
 *   // data: x y            names of @loss's DATA parameters
 *   // predict-data: x      names of @predict's DATA parameters (a subset)
 *   // init: w1=xavier_uniform b1=zeros ...
 */
#ifndef RELAYC_TRAIN_H
#define RELAYC_TRAIN_H

#include "relayc/checkpoint.h"
#include "relayc/datasets.h"
#include "relayc/interp.h"
#include "relayc/optim.h"
#include "relayc/vm.h"

RY_BEGIN_API

#define RY_TRAIN_MAX_DATA 16 /* most DATA parameters of an entry */
#define RY_TRAIN_MAX_SYMS 8

/* How a trainer is built. Start from ry_train_defaults(). */
typedef struct ry_train_opts {
    ry_optim_config optim;       /* the optimizer and its hyperparameters */
    ry_schedule schedule;        /* lr(step) from optim.lr; zero: constant */
    double clip_norm;            /* > 0: clip gradients to this global L2 norm */
    double clip_value;           /* > 0: clamp every gradient element */
    uint64_t seed;               /* parameter initialization (and dropout) */
    const char *loss_entry;      /* NULL: "loss" */
    const char *predict_entry;   /* NULL: "predict" (may be absent) */
    int ndata;                   /* DATA parameters of @loss; 0: from `// data:` */
    const char *init;            /* NULL: the `// init:` line; entries here win */
    /* Values of symbolic dimensions in parameter types (e.g. vocabulary
     * size "v"): name[i] = value[i]. */
    int nsyms;
    const char *sym_names[RY_TRAIN_MAX_SYMS];
    int64_t sym_values[RY_TRAIN_MAX_SYMS];
    bool training;               /* training mode (dropout) */
    ry_engine engine;            /* RY_ENGINE_VM (default): the compiled engine
                                    (vm.h); RY_ENGINE_INTERP: the reference
                                    interpreter (CPU only) */
    const ry_target *target;     /* where the kernels, parameters, gradients and
                                    optimizer state live; NULL: the CPU */
    bool dense_grads;            /* never ask the engine for row-sparse
                                    gradients (RY_VAL_ROWS); the results are
                                    the same to rounding (train_grad.c) */
    /* Threads for the independent calls of one step (ry_trainer_accumulate_n:
     * one per tree, each worker with its own compiled program; the sum is
     * taken in call order, so any count gives the serial run's bits);
     * 0: ry_get_num_threads() (threads.h). The kernels' own threads are
     * threads.h's. */
    int threads;
    /* Automatic batching off (ry_vm_call_batch, vm.h): by default the
     * compiled engine on the CPU runs ry_trainer_accumulate_n's calls of a
     * model without carried state together (their matching operator calls
     * as one kernel: the B trees of a Tree-LSTM update), its weight
     * gradients deferred into one GEMM per call (ry_vm_opts.
     * defer_accumulation); results equal the one-by-one run's to float32
     * rounding. true: one call at a time (on the threads above). */
    bool no_autobatch;
    /* Evaluation of per-example data batched as well (@loss and @predict
     * of a batch's examples together). Off by default: measured slower
     * than one by one for the SST Tree-LSTM on this project's machine
     * (README, Automatic batching). */
    bool autobatch_eval;
    /* The engines' memory guard of deep recursion (ry_vm_opts.max_resident):
     * a tree or sequence too deep for the machine is a located error. */
    size_t max_resident;
} ry_train_opts;

/* SGD with PyTorch's defaults except lr 0.01, constant schedule, seed 0. */
ry_train_opts ry_train_defaults(void);

typedef struct ry_trainer ry_trainer;

/* Parses and type-checks text (name used in error locations), binds @loss's
 * parameters after the DATA ones into a float parameter set, initializes
 * them from the seeded RNG by the init spec (default: xavier_uniform for
 * rank >= 2, zeros otherwise), differentiates @loss (ry_grad) and makes the
 * optimizer. The text is kept for checkpoints. *out is the caller's
 * (ry_trainer_free). Errors: parse/type errors, a missing entry, a
 * parameter that is not a float tensor of known shape, an unknown init
 * kind, a gradient the AD transform cannot build (its message). */
ry_status ry_trainer_new(const char *name, const char *text, size_t len,
                         const ry_train_opts *opts, ry_trainer **out, ry_error *err);
ry_status ry_trainer_new_file(const char *path, const ry_train_opts *opts, ry_trainer **out,
                              ry_error *err);
void ry_trainer_free(ry_trainer *tr); /* NULL is fine */

/* The compiled gradient program the trainer runs on the calling thread
 * (for ry_vm_set_profile and ry_vm_print_profile); NULL with the interpreter. */
ry_vm_program *ry_trainer_vm(ry_trainer *tr);

/* Borrowed views of the trainer's state. */
ry_module *ry_trainer_module(ry_trainer *tr);
ry_param_set *ry_trainer_params(ry_trainer *tr);
/* The gradients of the last step (clipped, as its apply used them), or
 * the sum so far while a step accumulates. The hot path keeps a lone
 * call's gradients where the program left them: this call copies them in. */
ry_param_set *ry_trainer_grads(ry_trainer *tr);
ry_optimizer *ry_trainer_optim(ry_trainer *tr);
const char *ry_trainer_text(const ry_trainer *tr);
/* DATA parameters the caller gives each call: @loss's DATA less its
 * carried state. */
int ry_trainer_ndata(const ry_trainer *tr);
const char *ry_trainer_data_name(const ry_trainer *tr, int i);
int ry_trainer_nstate(const ry_trainer *tr);
int64_t ry_trainer_steps(const ry_trainer *tr); /* optimizer steps taken */

/* ---- steps --------------------------------------------------------------
 * A step is accumulate (once or more) then apply. ry_trainer_accumulate runs
 * the gradient program on data (ndata borrowed values, then the carried
 * state, then the parameter views: no copies) and adds the gradients into
 * the gradient set (summed, as repeated backward() calls in PyTorch sum);
 * *loss gets the loss. (A step's first gradients are kept where the program
 * left them, and may be the data's own tensors: leave data unchanged until
 * the apply.) ry_trainer_apply checks the gradients, clips them,
 * sets the scheduled lr and updates the parameters; the next accumulate
 * starts a new step from zero gradients. A NaN or Inf in the loss or a gradient is an error naming the
 * step and the parameter; the parameters are then unchanged. */
ry_status ry_trainer_accumulate(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                                ry_error *err);
ry_status ry_trainer_apply(ry_trainer *tr, ry_error *err);
/* k independent calls' accumulate (call j's ndata values at
 * data[j * ndata]; losses[j] gets its loss, losses may be NULL), run on
 * opts.threads workers; the gradients are summed in call order, so the
 * result is that of k ry_trainer_accumulate calls, bit for bit, at any
 * thread count. Models with carried state (whose calls depend on each
 * other) and the interpreter run them one by one. On error (the first
 * failing call's, in call order) the step is dropped, as for accumulate. */
ry_status ry_trainer_accumulate_n(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                                  double *losses, ry_error *err);
/* (With automatic batching, opts.no_autobatch unset, the k calls run as
 * one batch on the calling thread instead: the same sum order, the
 * stacked kernels' rounding.) */
/* How parameter i's gradient of the current (or last) step is held: the
 * number of rows along axis 0 that row-sparse gradients touched (only
 * they are checked, clipped and, when the optimizer allows it exactly,
 * updated), or -1 when it is dense. For tests and diagnostics. */
int64_t ry_trainer_grad_rows(const ry_trainer *tr, int i);
/* accumulate + apply. */
ry_status ry_trainer_step(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                          ry_error *err);
/* Drops the carried state (the next step starts from zeros). */
void ry_trainer_reset_state(ry_trainer *tr);

/* ---- evaluation ---------------------------------------------------------- */
/* @loss without gradients (the carried state is neither used nor kept:
 * zeros). */
ry_status ry_trainer_loss(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                          ry_error *err);
/* @predict on the loss DATA values: the ones whose names @predict's DATA
 * parameters have are passed (state as zeros). *out is a new reference. */
ry_status ry_trainer_predict(ry_trainer *tr, int ndata, ry_value *const *data, ry_value **out,
                             ry_error *err);
/* Counts rows where argmax over the last axis of scores equals the label:
 * scores (..., C) float, labels holding one entry per row ((...), or a
 * scalar for scores (1, C)).
 * *correct and *total get the counts. */
ry_status ry_accuracy_count(const ry_tensor *scores, const ry_tensor *labels, int64_t *correct,
                            int64_t *total, ry_error *err);

/* ---- checkpoints --------------------------------------------------------
 * A checkpoint holds the parameters, every optimizer slot and the
 * per-parameter step counts (slot "step"), the optimizer's step count as
 * `step`, the loader's epoch as `epoch`, and in rng_state: the loader's
 * state (4 RNG words, epoch, position) when loader is non-NULL. */
ry_status ry_trainer_save(ry_trainer *tr, const char *dir, int keep, const ry_loader *loader,
                          const char *config, char *path_out, size_t n, ry_error *err);
/* Loads path into the trainer (and loader, if non-NULL and the file holds
 * its state). On error nothing is changed. */
ry_status ry_trainer_load(ry_trainer *tr, const char *path, ry_loader *loader, ry_error *err);

/* ---- the loop ------------------------------------------------------------ */

/* Where a batch's values come from. */
typedef struct ry_train_data ry_train_data;
struct ry_train_data {
    int64_t n;  /* examples */
    int nargs;  /* values per call: the trainer's ry_trainer_ndata */
    /* Fills args[0..nargs) with new references for examples idx[0..k). */
    ry_status (*fetch)(const ry_train_data *d, const int64_t *idx, int64_t k, ry_value **args,
                       ry_error *err);
    void *ctx;                   /* the caller's, for fetch */
    ry_tensor *const *arrays;    /* ry_train_data_tensors' */
    /* true: one call per example (trees); gradients summed over a batch */
    bool per_example;
    /* true: deal whole batches only (a model with a fixed batch size) */
    bool drop_last;
    /* DATA index holding the labels for accuracy (a tensor, or an ADT whose
     * last field is the root's label); -1: no accuracy */
    int label_arg;
};

/* A source over tensors sharing their first dimension: arg i of a batch is
 * rows idx of arrays[i]. The arrays are borrowed (and must outlive out). */
void ry_train_data_tensors(int n, ry_tensor *const *arrays, int label_arg, ry_train_data *out);

/* Truncated-BPTT windows as a source: example k is window k (x, y) of b
 * (borrowed); deal them in order, one per step (batch 1, no shuffle), so
 * the carried state flows from window to window. */
void ry_train_data_bptt(const ry_bptt *b, ry_train_data *out);

/* Trees of a treebank as a source, one call per tree (per_example): each
 * becomes a value of the ADT of the trainer's first DATA parameter, whose
 * constructors have datasets.h's Leaf(int32, int32) / Node(Tree, Tree,
 * int32) layout. src holds what fetch needs; both it and tb are borrowed
 * and must outlive out. Errors: the first DATA parameter is not such an
 * ADT. */
typedef struct ry_tree_source {
    const ry_treebank *tb;
    const ry_ctor *leaf, *node;
} ry_tree_source;
ry_status ry_train_data_trees(ry_trainer *tr, const ry_treebank *tb, ry_tree_source *src,
                              ry_train_data *out, ry_error *err);

typedef enum ry_progress_mode {
    RY_PROGRESS_AUTO,   /* a bar on a terminal, log lines otherwise */
    RY_PROGRESS_BAR,
    RY_PROGRESS_LOG,
    RY_PROGRESS_QUIET
} ry_progress_mode;

typedef struct ry_fit_opts {
    int64_t epochs;           /* 0: 1 */
    int64_t max_steps;        /* > 0: stop at this many optimizer steps in all */
    int64_t batch;            /* 0: 32 */
    bool no_shuffle;
    uint64_t seed;            /* the loader's order */
    const char *checkpoint_dir;   /* NULL: no checkpoints; made if missing */
    int64_t checkpoint_every;     /* steps; 0: only at the end */
    int keep;                     /* 0: 3 */
    bool resume;                  /* from the latest checkpoint in checkpoint_dir */
    /* The directory is locked for the run (DIR/.lock): a second run on it
     * fails at once. A run that does not resume refuses a directory that
     * holds checkpoints, unless force: they are then moved into
     * DIR/old-<time>/ (never deleted). A resumed run refuses a checkpoint
     * whose model text or configuration differs from its own (the error
     * lists the fields), unless resume_anyway. */
    bool force;
    bool resume_anyway;
    /* stored in checkpoints after the trainer's own key=value lines
     * (optimizer, optimizer.lr, ..., schedule, clip_norm, batch); its
     * key=value lines are compared on resume too, except `command` */
    const char *config;
    const char *csv_path;         /* NULL: no CSV */
    ry_progress_mode progress;
    FILE *out;                    /* NULL: stderr */
    int64_t log_every;            /* plain log lines; 0: 50 steps */
    /* ---- data parallel (dist.h) ----
     * In an MPI job (ry_dist_init), every rank calls ry_train_fit with the
     * same arguments and data: each global batch of `batch` examples (the
     * seeded order, the same everywhere) is shared out, the gradient slab
     * is all-reduced, every rank applies the same update, rank 0 alone
     * reports, keeps the CSV and writes checkpoints, and evaluation is
     * sharded with its sums reduced. Checkpoints resume on any number of
     * ranks. An error or a stop request on one rank stops all at that
     * step. */
    bool local;                   /* this fit alone, even inside a job */
    /* The gradient of a global batch is the sum, in shard order, of the
     * gradients of `shards` consecutive shards of it (0: one per rank),
     * gathered on every rank: N ranks give bit for bit the parameters of
     * one process with the same shards, for every N dividing shards
     * (train_dist.c). Without it: MPI_Allreduce, equal to rounding. */
    bool deterministic;
    int shards;
    int64_t bucket_bytes;         /* the reduction's pieces; 0: 4 MiB */
    /* ZeRO-1 (train_zero.c): each rank keeps and updates the optimizer
     * state of its slice of the parameter slab only; the gradients are
     * reduce-scattered, the parameters all-gathered. The same
     * parameters as unsharded (bit for bit with deterministic, except
     * clipping by norm: to rounding); checkpoints hold the whole state
     * and resume either way on any number of ranks. One rank: no-op.
     * After such a step ry_trainer_grads holds the reduced gradient only
     * in this rank's slice (elsewhere its own shards'). */
    bool shard_optimizer;
    /* The all-reduce (without deterministic or shard_optimizer) starts
     * each bucket as the compiled gradient program finishes its
     * gradients, overlapped with the rest of the backward pass
     * (train_overlap.c); no_overlap: only after it returns. */
    bool no_overlap;
} ry_fit_opts;

typedef struct ry_fit_result {
    int64_t steps;            /* optimizer steps in all (a resumed run's included) */
    int64_t epochs_done;
    double first_loss;        /* mean loss of this run's first epoch's first 10% */
    double last_loss;         /* mean loss of this run's last 10% of steps */
    bool evaluated;
    int64_t eval_step;        /* the step of the last evaluation */
    double eval_loss, eval_acc; /* acc NaN when there are no labels */
    char checkpoint[512];     /* the last checkpoint written or loaded, or "" */
    int stop_signal;          /* the request that stopped the run, or 0 */
    /* data parallel (dist.h), this rank's: seconds in the steps, waiting
     * on the gradient reduction once its own gradient was computed (for
     * an overlapped all-reduce, what was left of it after the backward
     * pass; a sharded optimizer's parameter all-gather included), and in
     * each step's exchange of losses (where it waits for slower ranks);
     * the gradient bytes it hands to the reduction per step; the share
     * of the all-reduce's buckets started during the backward pass (0:
     * none overlapped). Zero in one process. */
    double dist_step_s, dist_reduce_s, dist_sync_s;
    int64_t dist_bytes;
    double dist_overlap;
} ry_fit_result;

/* Trains on train for fo->epochs (or until max_steps), evaluating on eval
 * (may be NULL) after each epoch. With resume, continues from the latest
 * checkpoint exactly. On a NaN/Inf the error names the step and parameter
 * and no checkpoint is written after the last good one. res may be NULL. */
ry_status ry_train_fit(ry_trainer *tr, const ry_train_data *train, const ry_train_data *eval,
                       const ry_fit_opts *fo, ry_fit_result *res, ry_error *err);
/* Stopping a run from outside: ry_train_request_stop(sig) asks the running
 * ry_train_fit to stop after its current step. It then writes a checkpoint
 * (when it has a checkpoint directory and took steps since the last one)
 * and returns RY_ERR with res->stop_signal = sig and a message naming the
 * step and the checkpoint. The request is one volatile sig_atomic_t, so the
 * call is async-signal-safe: a program calls it from its own SIGINT/SIGTERM
 * handler (relayc train does; the library installs no handler). A request
 * made before ry_train_fit starts stops it before its first step; the fit
 * that acts on a request clears it; ry_train_request_stop(0) withdraws one.
 * sig is the caller's to choose (a signal number), non-zero. */
void ry_train_request_stop(int sig);
int ry_train_stop_requested(void); /* the pending request, or 0 */

/* Mean loss (and accuracy, when data has labels and @predict exists) over
 * all of data in batches. */
ry_status ry_train_evaluate(ry_trainer *tr, const ry_train_data *data, int64_t batch,
                            double *loss, double *acc, ry_error *err);

/* ---- progress and metrics (progress.c) ------------------------------------ */
typedef struct ry_progress ry_progress;
/* total: steps expected (0: unknown). csv_path NULL: no CSV. */
ry_status ry_progress_new(FILE *f, ry_progress_mode mode, int64_t total, int64_t log_every,
                          const char *csv_path, ry_progress **out, ry_error *err);
void ry_progress_step(ry_progress *p, int64_t step, int64_t epoch, double loss, double lr);
void ry_progress_eval(ry_progress *p, int64_t step, int64_t epoch, double loss, double acc);
/* Continues the CSV at csv_path after a resumed run's step: keeps its
 * header and the rows up to step, drops later ones (the resumed run writes
 * them again) and appends from there; a missing or empty file starts with
 * the header. Errors: a file whose first line is not this CSV's header. */
ry_status ry_progress_csv_continue(ry_progress *p, const char *csv_path, int64_t step,
                                   ry_error *err);
void ry_progress_note(ry_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ry_progress_free(ry_progress *p); /* NULL is fine; ends the bar's line */

RY_END_API

#endif
