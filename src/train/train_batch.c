/*
 * train_batch.c: a step's independent calls, and an evaluation's examples,
 * run as one batch of the compiled engine (ry_vm_call_batch, vm_batch.c:
 * the B trees of a Tree-LSTM update with their node GEMVs stacked into
 * GEMMs), unless ry_train_opts.no_autobatch. The results are taken in call
 * order, as the one-by-one calls' are, so the gradient sum is formed in
 * the same order and differs from theirs only by the stacked kernels'
 * rounding. Models with carried state (calls that depend on each other),
 * the interpreter and device targets run one call at a time (train_par.c,
 * train_step.c).
 */
#include <math.h>

#include "train/train_impl.h"

bool train_batches(const ry_trainer *tr) {
    return tr->vm && !tr->opts.no_autobatch && tr->nstate == 0 && !tr->target->dev;
}

/* args[j * nargs ..]: call j's data (pick[i] of its ndata, or all when
 * pick is NULL), then the parameter views; borrowed. */
static ry_value **batch_args(const ry_trainer *tr, int k, int ndata, ry_value *const *data,
                             int nuse, const int *pick, int *nargs) {
    int np = tr->params->n, n = nuse + np;
    ry_value **a = ry_calloc((size_t)k * (size_t)n + 1, sizeof *a);
    if (!a) return NULL;
    for (int j = 0; j < k; j++) {
        ry_value **aj = a + (size_t)j * (size_t)n;
        ry_value *const *dj = data + (size_t)j * (size_t)ndata;
        for (int i = 0; i < nuse; i++) aj[i] = dj[pick ? pick[i] : i];
        for (int i = 0; i < np; i++) aj[nuse + i] = tr->param_vals[i];
    }
    *nargs = n;
    return a;
}

static void release_outs(int k, ry_value **outs) {
    for (int j = 0; j < k; j++) ry_value_release(outs[j]);
}

ry_status train_accumulate_batched(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                                   double *losses, ry_error *err) {
    int nargs = 0;
    ry_value **a = batch_args(tr, k, ndata, data, ndata, NULL, &nargs);
    ry_value **outs = ry_calloc((size_t)k, sizeof *outs);
    if (!a || !outs) {
        ry_free(a);
        ry_free(outs);
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    if (tr->naccum == 0) train_grad_begin(tr);
    /* call j's dropout seed is train_seed(tr, naccum + j): the batch's seed + j */
    ry_vm_opts vo = {.training = tr->opts.training, .seed = train_seed(tr, tr->naccum),
                     .max_resident = tr->opts.max_resident,
                     .sparse_rows = !tr->opts.dense_grads, .defer_accumulation = true};
    ry_status st = ry_vm_call_batch(tr->vm, tr->grad_name, k, nargs, a, &vo, outs, err);
    for (int j = 0; st == RY_OK && j < k; j++) {
        double l = NAN;
        st = train_take_result(tr, outs[j], &l, err);
        if (st == RY_OK && losses) losses[j] = l;
        if (st == RY_OK) tr->naccum++;
    }
    release_outs(k, outs);
    ry_free(outs);
    ry_free(a);
    if (st) tr->naccum = 0; /* a failed call poisons the whole step */
    return st;
}

ry_status train_eval_batched(ry_trainer *tr, int k, int ndata, ry_value *const *data,
                             double *losses, ry_value **preds, ry_error *err) {
    int nargs = 0;
    ry_vm_opts vo = {.max_resident = tr->opts.max_resident};
    ry_value **outs = ry_calloc((size_t)k, sizeof *outs);
    ry_value **a = outs ? batch_args(tr, k, ndata, data, ndata, NULL, &nargs) : NULL;
    ry_status st = a ? RY_OK : ry_error_at(err, RY_NO_SPAN, "out of memory");
    if (st == RY_OK) st = ry_vm_call_batch(tr->vm, tr->loss_name, k, nargs, a, &vo, outs, err);
    for (int j = 0; st == RY_OK && j < k; j++) st = train_loss_of(outs[j], &losses[j], err);
    if (outs) release_outs(k, outs);
    ry_free(a);
    ry_free(outs);
    if (st || !preds) return st;
    if (!(a = batch_args(tr, k, ndata, data, tr->npred_data, tr->pred_map, &nargs)))
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    st = ry_vm_call_batch(tr->vm, tr->predict_name, k, nargs, a, &vo, preds, err);
    ry_free(a);
    return st;
}
