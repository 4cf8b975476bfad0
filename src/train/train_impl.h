/*
 * train_impl.h: the trainer's private state and the helpers its files
 * share (setup in train.c, steps in train_step.c, checkpoints in
 * train_ckpt.c, the loop in train_loop.c).
 */
#ifndef RELAYC_TRAIN_IMPL_H
#define RELAYC_TRAIN_IMPL_H

#include "relayc/init.h"
#include "relayc/rng.h"
#include "backend/target.h"
#include "relayc/train.h"
#include "relayc/vm.h"

/* Where each parameter's gradient of the current step lives (train_grad.c).
 * A step's only call leaves its gradients where the program put them
 * (pending, direct[i]) and the optimizer reads them there; a second call
 * adds both into the gradient set, whose per-parameter state says what
 * its slab holds, so that nothing is zeroed or read that need not be:
 *   ZERO   all zeros                STALE  last step's, logically zero
 *   ROWS   zero but for rows[i]     DENSE  the sum so far */
enum { TRAIN_G_ZERO, TRAIN_G_STALE, TRAIN_G_ROWS, TRAIN_G_DENSE };

typedef struct train_rows {
    uint8_t *mark;              /* per row along axis 0: touched */
    int64_t *list;              /* the touched rows, first touch first */
    int64_t n;
} train_rows;

typedef struct train_grad_state {
    ry_value *pending;          /* the step's first gradient tuple, kept */
    bool *direct;               /* per param: its gradient is pending's field */
    uint8_t *state;             /* per param: TRAIN_G_* */
    bool *bad;                  /* per param: a NaN/Inf went into the slab */
    train_rows *rows;           /* per param */
    ry_optim_grad *ograds;      /* per param, for the optimizer */
    double *norms;              /* per param, for clip-by-norm */
    bool no_keep;               /* results belong to other threads' programs:
                                   add them, never keep them (train_par.c) */
    bool *taken;                /* per param: already in the slab, copied as the
                                   program finished it (train_overlap.c) */
    bool applied;               /* the last apply consumed this step's */
    double last_scale;          /* the clip coefficient it used */
} train_grad_state;

struct ry_trainer {
    ry_module *m;
    ry_vm_program *vm;          /* m compiled; NULL: run the interpreter */
    const ry_target *target;    /* opts.target, or the CPU */
    char *text;                 /* the model's text, for checkpoints */
    ry_init_spec *spec;         /* its header lines */
    ry_train_opts opts;
    const char *loss_name, *predict_name, *grad_name;
    int nloss_data;             /* DATA params of @loss, carried state included */
    int nstate;                 /* the last nstate of them */
    const ry_var *data_vars[RY_TRAIN_MAX_DATA];
    int npred_data;             /* -1: no @predict */
    int pred_map[RY_TRAIN_MAX_DATA]; /* @predict DATA i = loss DATA pred_map[i] */
    ry_param_set *params, *grads;
    ry_value **param_vals;      /* views of params wrapped as values */
    ry_optimizer *optim;
    ry_rng rng;                 /* initialization */
    ry_value *state[RY_TRAIN_MAX_DATA]; /* carried state; NULL: zeros */
    int64_t naccum;             /* accumulate calls since the last apply */
    double base_lr;
    int grad_base;              /* field of the gradient tuple holding PARAM 0's */
    int ngrad_fields;           /* fields the gradient tuple has */
    train_grad_state g;         /* train_grad.c */
    struct train_pool *pool;    /* train_par.c: worker VMs; NULL until needed */
    /* the weight of the summed gradient for the optimizer, set by a
     * sharded step (train_dist.c: 1/S for S equal shards of a mean loss);
     * 0 or 1: none */
    double dist_scale;
    /* while rank 0 saves a sharded optimizer's state (train_zero.c): its
     * slots whole, gathered from the ranks, in slot order, NULL-ended */
    ry_param_set **zero_full;
    /* the gradient program's ry_vm_opts.on_final while a data-parallel
     * step overlaps its reduction with it (train_overlap.c); NULL: none */
    void (*on_final)(void *ctx, int field, const ry_value *v);
    void *final_ctx;
};

/* The loss value of an entry's result (a scalar, or field 0 of a tuple). */
ry_status train_loss_of(const ry_value *res, double *loss, ry_error *err);
void train_release_args(int n, ry_value **args);
/* Calls entry with the compiled program (or the interpreter): in training
 * mode with the step's dropout seed, or for evaluation (eval) in inference
 * mode. */
ry_status train_call(ry_trainer *tr, const char *entry, int n, ry_value **args, bool eval,
                     ry_value **out, ry_error *err);

/* train_grad.c: the gradient set of a step. init after the parameters
 * are bound; begin when a step's first call starts; take a call's
 * gradient tuple (borrowed; kept when it is the step's first). */
ry_status train_grad_init(ry_trainer *tr, ry_error *err);
void train_grad_free(ry_trainer *tr);
void train_grad_begin(ry_trainer *tr);
ry_status train_grad_take(ry_trainer *tr, ry_value *grads, ry_error *err);

/* train_grad.c, for the sharded steps of train_dist.c: dense makes the
 * slab hold the whole gradient of the step so far (the pending tuple
 * added, stale parameters zeroed); zero_all starts a step whose gradient
 * is zero (a shard without examples); reduced says the slab now holds
 * the step's reduced gradient, dense and to be scanned. */
void train_grad_dense(ry_trainer *tr);
void train_grad_zero_all(ry_trainer *tr);
void train_grad_reduced(ry_trainer *tr, const bool *as_rows);
/* For the row-sparse reduction (train_rows.c), after dense: parameter
 * i's touched rows (*n of them; *n = 0: none, a zero gradient; *n = -1:
 * dense); rows_clear zeroes them again (the parameter's gradient is then
 * zero); rows_add adds n rows of src, row k from src_off + k * the row's
 * length on, into rows ids[k], listing them. as_rows[i] of reduced: the
 * parameter's rows were reduced so and it stays row-sparse. */
const int64_t *train_grad_row_list(const ry_trainer *tr, int i, int64_t *n);
void train_grad_rows_clear(ry_trainer *tr, int i);
ry_status train_grad_rows_add(ry_trainer *tr, int i, const ry_tensor *src, int64_t src_off,
                              const int64_t *ids, int64_t n, ry_error *err);

/* train_loop.c: the gradient of the batch idx[0..k) added into the
 * trainer's (one call, or one per example); *mean: the batch's mean
 * loss, *sum: the sum of its examples' losses. */
ry_status train_batch_grad(ry_trainer *tr, const ry_train_data *d, const int64_t *idx, int64_t k,
                           double *mean, double *sum, ry_error *err);
/* train_loop.c: evaluation of the batches b of data with b % nparts ==
 * part; sums[0] += loss * examples, [1] += examples, [2] += correct,
 * [3] += labelled rows. */
ry_status train_evaluate_part(ry_trainer *tr, const ry_train_data *d, int64_t batch, int part,
                              int nparts, double sums[4], ry_error *err);

/* train_step.c: element i of t as a double, from any device (a loss, a
 * metric, the element a message names) */
ry_status train_read(const ry_tensor *t, int64_t i, double *v, ry_error *err);

/* train_dist.c: a fit across the ranks of an MPI job (dist.h), or a
 * deterministic one in one process. */
typedef struct train_dist {
    int rank, size;             /* this fit's: size 1 when alone */
    bool on;                    /* size > 1 */
    bool sharded;               /* on, or deterministic: steps go through train_dist_step */
    bool det;                   /* fo->deterministic */
    int shards;                 /* S: groups per global batch (det), else size */
    int64_t bucket;             /* elements per all-reduce piece */
    ry_tensor *local;           /* det, S/size > 1: this rank's shard gradients
                                   (on the slab's device unless staged) */
    ry_tensor *gather;          /* det and on: a bucket of every shard */
    bool stage;                 /* on, and the slab is on a device: reduced in host */
    ry_tensor *host;            /* stage: the slab's host copy, reduced */
    /* --shard-optimizer across ranks (train_zero.c) */
    bool zero;
    int64_t *zbound;            /* size + 1: rank r's slice is [zbound[r], zbound[r+1]) */
    int *zcounts;               /* 4 * size: counts and displacements */
    int64_t zbucket;            /* elements of each slice per round */
    ry_tensor *zsend, *zrecv;   /* a round's buffers */
    /* the all-reduce overlapped with the backward pass (train_overlap.c):
     * NULL where it cannot be (deterministic, sharded optimizer, the
     * interpreter, one rank) */
    struct train_overlap *ov;
    /* measured: seconds in the steps, waiting on the gradient reduction
     * once this rank's gradient was computed, and in the exchange of
     * losses and failures (where a faster rank waits for a slower); the
     * gradient bytes each rank hands to the reduction per step */
    double t_step, t_reduce, t_sync;
    int64_t reduce_bytes;       /* per step: bytes_sum / steps_reduced */
    int64_t bytes_sum, steps_reduced;
    /* row-sparse gradients reduced as rows (train_rows.c): NULL rows_ok
     * where they cannot be (one shard, a sharded optimizer) */
    bool rows_ok;
    bool *as_rows;              /* per parameter, this step */
    int64_t *shard_ids;         /* d->local: each local shard's touched rows */
    int64_t *shard_nids;        /* per local shard: ids used */
    int64_t shard_cap;          /* ids each local shard has room for */
    int64_t *ids, ids_cap;      /* every shard's rows' ids, shard order */
    ry_tensor *rows_buf;        /* every shard's rows, the same order */
    int *rcounts;               /* 2 * size: the all-gathers' counts, displacements */
    int64_t *roff;              /* 2 * (shards + 1): where shard s begins in ids, rows_buf */
    int64_t *scount;            /* shards * params: this step's row counts */
    int64_t buckets, buckets_early; /* overlapped: started, and started during
                                       the backward pass */
} train_dist;

ry_status train_dist_begin(ry_trainer *tr, const ry_fit_opts *fo, train_dist *d, ry_error *err);
/* whole: every rank ends the fit here together (a sharded optimizer is
 * then gathered whole again; otherwise it keeps this rank's slice) */
void train_dist_end(ry_trainer *tr, train_dist *d, bool whole);
/* One optimizer step on the global batch idx[0..k): this rank's shards'
 * gradients, the exchange of losses, failures and stop requests, the
 * reduction of the gradient slab, the apply. *loss: the global batch's
 * mean loss; *stop: the stop request some rank had (local_stop is this
 * rank's), or 0. */
ry_status train_dist_step(ry_trainer *tr, train_dist *d, const ry_train_data *data,
                          const int64_t *idx, int64_t k, int local_stop, double *loss, int *stop,
                          ry_error *err);
/* Every rank's st: when one failed, all fail (with its message). */
ry_status train_dist_agree(const train_dist *d, ry_status st, int64_t step, ry_error *err);
/* buf[0..n) from rank 0 (no-op alone). */
ry_status train_dist_bcast(const train_dist *d, void *buf, int64_t n, int64_t step, ry_error *err);
ry_status train_dist_barrier(const train_dist *d, int64_t step, ry_error *err);
/* ry_train_evaluate sharded over the ranks, the sums reduced. */
ry_status train_dist_evaluate(ry_trainer *tr, const train_dist *d, const ry_train_data *data,
                              int64_t batch, double *loss, double *acc, ry_error *err);

/* Where view i of s begins in its slab, in elements. */
static inline int64_t train_view_offset(const ry_param_set *s, int i) {
    return (int64_t)(((const char *)s->views[i]->data - (const char *)s->slab->data) /
                     (ptrdiff_t)ry_dtype_size(s->dtype));
}

/* train_rows.c: row-sparse gradients reduced as rows. The head of each
 * rank's exchange (train_dist.c) carries, after its shards' losses,
 * train_rows_head doubles per local shard: that shard's count of touched
 * rows per parameter (-1: dense). begin/end: its buffers; note: after
 * local shard j, its counts into head (and its ids kept); plan: from
 * every rank's heads (all, nh doubles each), which parameters go as rows
 * this step (d->as_rows; false for all when overlap or !rows_ok);
 * reduce: those parameters' rows gathered and summed in shard order into
 * the slab, which keeps them row-sparse; *bytes: what this rank handed. */
int train_rows_head(const ry_trainer *tr);
ry_status train_rows_begin(ry_trainer *tr, train_dist *d, ry_error *err);
void train_rows_end(train_dist *d);
ry_status train_rows_note(ry_trainer *tr, train_dist *d, int j, double *head, ry_error *err);
bool train_rows_plan(ry_trainer *tr, train_dist *d, const double *all, int nh, bool overlap);
ry_status train_rows_reduce(ry_trainer *tr, train_dist *d, int64_t *bytes, ry_error *err);

/* train_zero.c: the sharded optimizer (ZeRO-1) of a fit across ranks.
 * begin shards the optimizer; end frees (whole: all-gathers the state
 * first); reduce reduce-scatters the step's gradient less the
 * parameters that go as rows (rows; *n: the elements it reduced); apply is
 * ry_trainer_apply for the slice, the parameters all-gathered after it;
 * gather fills zero_full on rank 0 for a checkpoint (gather_free ends
 * that). */
ry_status train_zero_begin(ry_trainer *tr, train_dist *d, ry_error *err);
void train_zero_end(ry_trainer *tr, train_dist *d, bool whole);
ry_status train_zero_reduce(ry_trainer *tr, const train_dist *d, const bool *rows, int64_t *n,
                            ry_error *err);
ry_status train_zero_apply(ry_trainer *tr, train_dist *d, ry_error *err);
ry_status train_zero_gather(ry_trainer *tr, const train_dist *d, ry_error *err);
void train_zero_gather_free(ry_trainer *tr);

/* train_overlap.c: the gradient buckets' all-reduce started as the
 * gradient program finishes their gradients (ry_vm_opts.on_final), in a
 * fixed order on every rank. new: NULL where the fit cannot overlap
 * (d->ov stays NULL, and the blocking path runs). arm before a step's
 * one call, finish after it (every bucket started, all waited for: the
 * slab then holds the sum). */
struct train_overlap *train_overlap_new(ry_trainer *tr, const train_dist *d);
void train_overlap_free(struct train_overlap *ov);
void train_overlap_arm(ry_trainer *tr, train_dist *d);
ry_status train_overlap_finish(ry_trainer *tr, train_dist *d, ry_error *err);

/* The gradient tuple of a gradient program's result, checked; the loss
 * and the carried state taken (train_step.c). */
ry_status train_take_result(ry_trainer *tr, ry_value *out, double *loss, ry_error *err);

/* The dropout seed of the step's call number call (train_step.c). */
uint64_t train_seed(const ry_trainer *tr, int64_t call);

/* train_batch.c: whether the trainer batches independent calls (the VM
 * on the CPU, no carried state, ry_train_opts.no_autobatch unset);
 * ry_trainer_accumulate_n's k calls as one batch; and k examples' losses
 * (losses[j]) and, with preds, @predict's results (preds[j], new) as
 * batches. */
bool train_batches(const ry_trainer *tr);
ry_status train_accumulate_batched(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                                   double *losses, ry_error *err);
ry_status train_eval_batched(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                             double *losses, ry_value **preds, ry_error *err);

/* train_par.c: the worker pool. */
void train_pool_free(struct train_pool *p);

/* The checkpoint directory's guards (train_guard.c). */
/* Takes DIR/.lock exclusively (*fd holds it until closed); another run
 * holding it is an error at once. */
ry_status train_lock_dir(const char *dir, int *fd, ry_error *err);
/* A new run's directory: empty of checkpoints, or (force) they are moved
 * into DIR/old-<time>/; otherwise an error saying how to go on. */
ry_status train_claim_dir(const char *dir, bool force, ry_progress *p, ry_error *err);
/* The configuration a checkpoint stores: the optimizer and its
 * hyperparameters, schedule, clipping and batch as key=value lines, then
 * fo->config. New (ry_free); NULL when out of memory. */
char *train_config_text(const ry_trainer *tr, const ry_fit_opts *fo);
/* An error listing the fields where the checkpoint at path (its model text
 * and configuration) differs from this run's config text now. */
ry_status train_config_compare(const ry_trainer *tr, const char *path, const char *now,
                               ry_error *err);

/* train_dims.c: the dimensions o names become constants in m's annotations
 * (before m is type-checked). */
void train_bind_dims(ry_module *m, const ry_train_opts *o);

#endif
