/*
 * train_impl.h: the trainer's private state and the helpers its files
 * share (setup in train.c, steps in train_step.c, checkpoints in
 * train_ckpt.c, the loop in train_loop.c).
 */
#ifndef RELAYC_TRAIN_IMPL_H
#define RELAYC_TRAIN_IMPL_H

#include "relayc/init.h"
#include "relayc/rng.h"
#include "relayc/train.h"
#include "relayc/vm.h"

struct ry_trainer {
    ry_module *m;
    ry_vm_program *vm;          /* m compiled; NULL: run the interpreter */
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
};

/* The loss value of an entry's result (a scalar, or field 0 of a tuple). */
ry_status train_loss_of(const ry_value *res, double *loss, ry_error *err);
void train_release_args(int n, ry_value **args);
/* Calls entry with the compiled program (or the interpreter): in training
 * mode with the step's dropout seed, or for evaluation (eval) in inference
 * mode. */
ry_status train_call(ry_trainer *tr, const char *entry, int n, ry_value **args, bool eval,
                     ry_value **out, ry_error *err);

#endif
