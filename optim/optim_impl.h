/*
 * optim_impl.h: what the optimizer files share and nobody else sees: the
 * optimizer's state and the per-parameter update kernels. optimizer.c owns
 * the state and walks the parameters; each rule's file (sgd.c, adam.c,
 * adagrad.c, rmsprop.c) updates one parameter's contiguous run of the slabs.
 */
#ifndef RELAYC_OPTIM_IMPL_H
#define RELAYC_OPTIM_IMPL_H

#include "relayc/optim.h"

#define RY_OPTIM_MAX_SLOTS 3

struct ry_optimizer {
    ry_optim_config cfg;     /* cfg.lr is the current learning rate */
    ry_dtype dtype;          /* the layout of the parameters, kept to check */
    int n_params;            /* every set handed to a step against it */
    char **names;
    int *ndims;
    int64_t (*shapes)[RY_MAX_RANK];
    int n_slots;
    const char *slot_names[RY_OPTIM_MAX_SLOTS];
    ry_param_set *slots[RY_OPTIM_MAX_SLOTS];
    ry_param_set *step_set;  /* per parameter, PyTorch's state["step"]: float64 scalars */
    bool *decay;             /* per parameter: weight decay applies */
    bool *frozen;            /* per parameter: skipped by steps */
    int64_t steps;           /* ry_optim_step calls */
};

/* One parameter's run of the slabs: n elements of param, grad and each slot
 * (slot order as the rule's file names them), in the set's dtype. */
typedef struct ry_update_args {
    ry_dtype dtype;
    int64_t n;
    void *param;
    const void *grad;
    void *slot[RY_OPTIM_MAX_SLOTS];
    double lr;
    double weight_decay;     /* 0 when the parameter is exempt */
    int64_t step;            /* this parameter's step count, already advanced */
} ry_update_args;

/* The rules. Slots: SGD {momentum_buffer}; Adam/AdamW {exp_avg, exp_avg_sq,
 * max_exp_avg_sq?}; Adagrad {sum}; RMSprop {square_avg, momentum_buffer?,
 * grad_avg?}, absent ones NULL. */
void ry_optim_sgd_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_adam_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_adagrad_update(const ry_optim_config *c, const ry_update_args *a);
void ry_optim_rmsprop_update(const ry_optim_config *c, const ry_update_args *a);

#endif
