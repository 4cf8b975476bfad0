/*
 * optim.h: optimizers (SGD, Adam, AdamW, Adagrad, RMSprop), learning-rate
 * schedules and gradient clipping over parameter sets (params.h).
 *
 * Each update rule is PyTorch's (torch.optim, single-tensor path) step for
 * step, in the set's own dtype (float32 or float64). An optimizer owns its
 * state: one ry_param_set per slot, laid out like the parameters and named
 * as PyTorch's state_dict names them, plus a step count per parameter.
 * Schedules are pure functions of the step; nothing here knows about IR.
 */
#ifndef RELAYC_OPTIM_H
#define RELAYC_OPTIM_H

#include "relayc/params.h"
#include "relayc/target.h"

RY_BEGIN_API

typedef enum ry_optim_kind {
    RY_OPTIM_SGD,
    RY_OPTIM_ADAM,
    RY_OPTIM_ADAMW,
    RY_OPTIM_ADAGRAD,
    RY_OPTIM_RMSPROP,
    RY_OPTIM_KIND_COUNT
} ry_optim_kind;

/* Hyperparameters; each field is read only by the kinds named beside it. */
typedef struct ry_optim_config {
    ry_optim_kind kind;
    double lr;              /* all */
    double weight_decay;    /* all; decoupled (param *= 1 - lr*wd) for AdamW */
    double momentum;        /* SGD, RMSprop */
    double dampening;       /* SGD */
    bool nesterov;          /* SGD: needs momentum > 0 and dampening == 0 */
    double beta1, beta2;    /* Adam, AdamW */
    double eps;             /* Adam, AdamW, Adagrad, RMSprop */
    bool amsgrad;           /* Adam, AdamW */
    double lr_decay;        /* Adagrad */
    double initial_accumulator_value; /* Adagrad */
    double alpha;           /* RMSprop */
    bool centered;          /* RMSprop */
} ry_optim_config;

/* PyTorch's defaults for kind (lr included: SGD 1e-3, Adam 1e-3, AdamW 1e-3
 * with weight_decay 1e-2, Adagrad 1e-2 with eps 1e-10, RMSprop 1e-2). */
ry_optim_config ry_optim_defaults(ry_optim_kind kind);
/* "sgd", "adam", "adamw", "adagrad", "rmsprop". */
const char *ry_optim_kind_name(ry_optim_kind kind);
/* Inverse of ry_optim_kind_name; false for an unknown name. */
bool ry_optim_kind_parse(const char *name, ry_optim_kind *out);
/* RY_ERR naming the field when a value is out of range (as torch rejects
 * it: negative lr, eps, weight decay or momentum, betas outside [0, 1),
 * Nesterov without momentum or with dampening, ...). */
ry_status ry_optim_config_check(const ry_optim_config *cfg, ry_error *err);

typedef struct ry_optimizer ry_optimizer;

/* An optimizer for parameters laid out like params (params itself is not
 * kept). Slots start as PyTorch starts them (zeros; Adagrad's "sum" at
 * initial_accumulator_value). On success *out is the caller's, freed with
 * ry_optim_free. Errors: a bad config, out of memory. */
ry_status ry_optim_new(const ry_optim_config *cfg, const ry_param_set *params,
                       ry_optimizer **out, ry_error *err);
void ry_optim_free(ry_optimizer *o); /* NULL is fine */

/* The target whose update kernel steps run on (default, and for NULL: the
 * CPU); the state slots move to its device here, and the parameters and
 * gradients handed to steps must live there too. The trainer sets its own
 * target. Errors: out of memory on the device, a driver failure. */
ry_status ry_optim_set_target(ry_optimizer *o, const ry_target *t, ry_error *err);

/* One update of params from grads, both laid out as at ry_optim_new, in one
 * pass over the slabs. Frozen parameters are skipped entirely (no update, no
 * state change, their step count stays). Errors (nothing is changed): a set
 * whose names, shapes or dtype differ from the optimizer's, grads being
 * params itself, a step count (ry_optim_steps) that is not a whole number
 * in [0, 2^53). Borrows both. */
ry_status ry_optim_step(ry_optimizer *o, ry_param_set *params, const ry_param_set *grads,
                        ry_error *err);

/* The gradient of one parameter for ry_optim_step_grads. */
typedef struct ry_optim_grad {
    /* The parameter's shape and the set's dtype, contiguous, anywhere in
     * memory (the gradient program's own output: nothing is copied) except
     * inside the parameters or the optimizer's slots. Borrowed. */
    const ry_tensor *t;
    /* NULL: a dense update. Otherwise nrows increasing indices along axis 0:
     * t is zero outside these rows and only they are updated, which equals
     * the dense update exactly when ry_optim_zero_grad_is_identity holds
     * for the parameter (required). */
    const int64_t *rows;
    int64_t nrows;
} ry_optim_grad;

/* ry_optim_step with the gradients given per parameter (grads[i] for
 * parameter i; frozen ones are not read), each element multiplied by scale
 * as it is read (clip_grad_norm's coefficient, applied in the same pass;
 * 1: none, exactly). The result equals copying the gradients into a set,
 * scaling it in place and calling ry_optim_step, bit for bit. Errors
 * (nothing changed): as ry_optim_step; a gradient of another shape or
 * dtype, one that overlaps the parameters or slots, rows out of order or
 * range, rows for a parameter whose zero-gradient update is not the
 * identity. */
ry_status ry_optim_step_grads(ry_optimizer *o, ry_param_set *params, const ry_optim_grad *grads,
                              double scale, ry_error *err);

/* Whether a step with a zero gradient leaves parameter i and its slots
 * exactly as they were (so rows with no gradient may be skipped): SGD
 * without momentum and without weight decay on it, Adagrad without weight
 * decay on it and eps > 0 (0 / (sqrt(0) + 0) would be NaN), and frozen
 * parameters; not Adam, AdamW or RMSprop, whose averages decay. The step
 * count still advances, as it does for a dense step. False for i out of
 * range. */
bool ry_optim_zero_grad_is_identity(const ry_optimizer *o, int i);

/* The learning rate the next step uses; a schedule sets it before each step
 * (a finite lr >= 0 is the caller's to keep). */
double ry_optim_lr(const ry_optimizer *o);
void ry_optim_set_lr(ry_optimizer *o, double lr);
/* The configuration (lr is the current one). Borrowed. */
const ry_optim_config *ry_optim_get_config(const ry_optimizer *o);

/* Per-parameter flags, by name: decay false exempts a parameter from weight
 * decay (embeddings, biases); frozen true leaves it untouched by steps.
 * RY_ERR for an unknown name. Both default to decay on, not frozen. */
ry_status ry_optim_set_decay(ry_optimizer *o, const char *name, bool decay, ry_error *err);
ry_status ry_optim_set_frozen(ry_optimizer *o, const char *name, bool frozen, ry_error *err);

/* ---- state, for checkpoints ------------------------------------------
 * Slots by PyTorch's state_dict names: SGD "momentum_buffer" (when
 * momentum != 0); Adam/AdamW "exp_avg", "exp_avg_sq", "max_exp_avg_sq"
 * (amsgrad); Adagrad "sum"; RMSprop "square_avg", "momentum_buffer" (when
 * momentum > 0), "grad_avg" (centered). Sets are borrowed: they live as long
 * as the optimizer; writing into them (e.g. loading) is allowed. */
int ry_optim_slot_count(const ry_optimizer *o);
const char *ry_optim_slot_name(const ry_optimizer *o, int i);
ry_param_set *ry_optim_slot(ry_optimizer *o, int i);
/* The slot named name, or NULL. */
ry_param_set *ry_optim_slot_find(ry_optimizer *o, const char *name);
/* Copies src into the slot named name. RY_ERR for an unknown slot or a
 * different layout (names, shapes, dtype). */
ry_status ry_optim_load_slot(ry_optimizer *o, const char *name, const ry_param_set *src,
                             ry_error *err);
/* Steps taken by each parameter (PyTorch's per-parameter state "step"; for
 * SGD it also says whether the momentum buffer has started): a set of
 * float64 scalars named as the parameters, for a checkpoint to store as
 * /optimizer/<param>/step. Borrowed, and may be loaded into; a step refuses
 * counts that are not whole numbers in [0, 2^53). */
ry_param_set *ry_optim_steps(ry_optimizer *o);
/* Steps taken by parameter i; -1 for i out of range. */
int64_t ry_optim_param_steps(const ry_optimizer *o, int i);
/* RY_ERR for i out of range or a count outside [0, 2^53). */
ry_status ry_optim_set_param_steps(ry_optimizer *o, int i, int64_t steps, ry_error *err);
/* Number of ry_optim_step calls (including ones that froze everything). */
int64_t ry_optim_step_count(const ry_optimizer *o);
void ry_optim_set_step_count(ry_optimizer *o, int64_t steps);

/* ---- sharded state (ZeRO-1: dist.h, ry_fit_opts.shard_optimizer) ------
 * ry_optim_shard keeps of every slot only the elements [lo, hi) of the
 * flat slab laid out like params (the whole set's memory is freed: one
 * tensor of hi - lo elements each), and steps then update only those
 * elements of the parameters; step counts still advance for every
 * parameter, so each rank of a job counts alike. The updated elements
 * get exactly the bits an unsharded step gives them (the rules are
 * elementwise). While sharded, ry_optim_slot and ry_optim_slot_find give
 * NULL, ry_optim_slot_shard gives the slice, and ry_optim_load_slot takes
 * a whole set and keeps its slice. Sharding again with the same range is
 * a no-op, with another an error. ry_optim_unshard makes whole sets
 * again, the slice in place and zeros elsewhere (the caller gathers the
 * other ranks' slices into them). */
ry_status ry_optim_shard(ry_optimizer *o, const ry_param_set *params, int64_t lo, int64_t hi,
                         ry_error *err);
ry_status ry_optim_unshard(ry_optimizer *o, const ry_param_set *params, ry_error *err);
/* Whether o is sharded; *lo, *hi (if non-NULL) get its range (0, 0 when
 * not). */
bool ry_optim_shard_range(const ry_optimizer *o, int64_t *lo, int64_t *hi);
/* Slot i's slice while sharded, else NULL. Borrowed. */
ry_tensor *ry_optim_slot_shard(ry_optimizer *o, int i);

/* ---- learning-rate schedules -----------------------------------------
 * lr(step) as torch.optim.lr_scheduler gives it after `step` calls of
 * scheduler.step(), computed in closed form:
 *   constant     base
 *   step         base * gamma^floor(step / step_size)            (StepLR)
 *   multistep    base * gamma^(number of milestones <= step)     (MultiStepLR)
 *   exponential  base * gamma^step                               (ExponentialLR)
 *   cosine       eta_min + (base - eta_min) (1 + cos(pi step / t_max)) / 2
 *                                                        (CosineAnnealingLR)
 *   linear       base * (start + (end - start) min(step, total) / total)
 *                                                        (LinearLR)
 * With warmup_steps W > 0 the schedule is preceded by a linear warm-up from
 * base * warmup_start_factor to base over W steps, and the schedule above
 * then runs on step - W: SequentialLR([LinearLR(warmup_start_factor, 1, W),
 * schedule], milestones=[W]). */
typedef enum ry_sched_kind {
    RY_SCHED_CONSTANT,
    RY_SCHED_STEP,
    RY_SCHED_MULTISTEP,
    RY_SCHED_EXPONENTIAL,
    RY_SCHED_COSINE,
    RY_SCHED_LINEAR
} ry_sched_kind;

#define RY_SCHED_MAX_MILESTONES 16

typedef struct ry_schedule {
    ry_sched_kind kind;
    double gamma;                                  /* step, multistep, exponential */
    int64_t step_size;                             /* step */
    int n_milestones;                              /* multistep: increasing */
    int64_t milestones[RY_SCHED_MAX_MILESTONES];
    int64_t t_max;                                 /* cosine */
    double eta_min;                                /* cosine */
    double start_factor, end_factor;               /* linear */
    int64_t total_iters;                           /* linear */
    int64_t warmup_steps;                          /* 0: no warm-up */
    double warmup_start_factor;                    /* in (0, 1] */
} ry_schedule;

/* RY_ERR naming the field for a value torch rejects (step_size <= 0, t_max
 * <= 0, milestones not increasing, factors outside (0, 1] / [0, 1], ...). */
ry_status ry_schedule_check(const ry_schedule *s, ry_error *err);
/* The learning rate at step (>= 0) for a checked schedule. */
double ry_schedule_lr(const ry_schedule *s, double base_lr, int64_t step);

/* ---- clipping and checks over a gradient set ------------------------- */

/* torch.nn.utils.clip_grad_norm_: total = the norm_type-norm of all
 * gradients together (norm_type > 0 or INFINITY), every tensor of the set
 * counting (torch counts only parameters that have a gradient: zero or
 * leave out the frozen ones' to match); every gradient is scaled
 * by min(1, max_norm / (total + 1e-6)). *total_norm (if non-NULL) gets the
 * norm before clipping; a NaN/Inf norm scales everything by NaN, as torch
 * does. RY_ERR for max_norm < 0 or norm_type <= 0. */
ry_status ry_clip_grad_norm(ry_param_set *grads, double max_norm, double norm_type,
                            double *total_norm, ry_error *err);
/* torch.nn.utils.clip_grad_value_: every element clamped to [-clip, clip]
 * (NaN stays NaN). RY_ERR for clip < 0. */
ry_status ry_clip_grad_value(ry_param_set *grads, double clip, ry_error *err);
/* One read of a gradient t (float32/float64), all of it (rows NULL) or
 * only rows[0..nrows) along axis 0 (increasing; the other rows are zero):
 * the flat index of its first NaN/Inf, or -1 when every element is finite.
 * With norm non-NULL, *norm also gets t's 2-norm exactly as
 * ry_clip_grad_norm computes a tensor's (squares summed in double in
 * element order; zero rows add nothing, so reading only rows gives the
 * same bits). */
int64_t ry_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm);
/* The coefficient ry_clip_grad_norm(grads, max_norm, 2) scales by, from
 * each gradient's 2-norm (norms[0..n), as ry_grad_scan gives them):
 * min(1, max_norm / (total + 1e-6)) rounded as it rounds. *total_norm (if
 * non-NULL) gets total. max_norm >= 0 is the caller's to check. */
double ry_clip_coef(ry_dtype dt, const double *norms, int n, double max_norm, double *total_norm);
/* Index of the first parameter holding a NaN or Inf, or -1 when all are
 * finite; *elem (if non-NULL) gets the flat index of the first bad element. */
int ry_params_find_nonfinite(const ry_param_set *g, int64_t *elem);

RY_END_API

#endif
