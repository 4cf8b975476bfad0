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

/* GCC vectorizes loops only from -O3 (or, at -O2, with a cost model that
 * rejects loops of unknown length); the update loops are what vectorizing
 * is for (those calling sqrt too: the Makefile builds optim/ with
 * -fno-math-errno; Adam's scalar update of the char-LSTM's 380,000
 * parameters was 2% of its step). Clang
 * vectorizes at -O2 already. Vectorizing keeps each element's
 * arithmetic as written (no reassociation, no contraction), so results
 * do not change. */
#if defined(__GNUC__) && !defined(__clang__)
#define RY_OPTIM_VECTORIZE _Pragma("GCC optimize(\"tree-vectorize\", \"vect-cost-model=dynamic\")")
#else
#define RY_OPTIM_VECTORIZE
#endif

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

/* One parameter's run of the slabs (or one run of rows of it): n elements
 * of param, grad and each slot (slot order as the rule's file names them),
 * in the set's dtype. The gradient may live anywhere (the gradient
 * program's own output) but never overlaps the parameter or a slot, so the
 * kernels take their pointers as restrict and vectorize. */
typedef struct ry_update_args {
    ry_dtype dtype;
    int64_t n;
    void *param;
    const void *grad;
    void *slot[RY_OPTIM_MAX_SLOTS];
    double lr;
    double scale;            /* every gradient element is multiplied by it as
                                it is read (clip-by-norm's coefficient); 1:
                                the product is exact, so no clipping */
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
