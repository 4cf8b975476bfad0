/*
 * train_step.c: one training step and the evaluation calls. A step runs
 * the gradient program of @loss on the data, the carried state and the
 * parameter views (values wrapping views of the slab, so nothing is
 * copied) and hands its parameter gradients to train_grad.c, which checks,
 * clips and applies them.
 */
#include <math.h>
#include <string.h>

#include "train/train_impl.h"

/* The symbolic dimensions of the DATA types bound from the actual tensors
 * (e.g. the batch n from x), for building zero state of matching shape. */
typedef struct syms {
    int n;
    const char *name[32];
    int64_t value[32];
} syms;

static void bind_syms(const ry_trainer *tr, int ndata, ry_value *const *data, syms *s) {
    s->n = 0;
    for (int i = 0; i < tr->opts.nsyms && s->n < 32; i++) {
        s->name[s->n] = tr->opts.sym_names[i];
        s->value[s->n++] = tr->opts.sym_values[i];
    }
    for (int i = 0; i < ndata && i < tr->nloss_data; i++) {
        const ry_type *t = tr->data_vars[i]->type;
        if (!t || t->kind != RY_TYPE_TENSOR || data[i]->kind != RY_VAL_TENSOR) continue;
        const ry_tensor *x = data[i]->tensor;
        if (x->ndim != t->tensor.ndim) continue;
        for (int d = 0; d < x->ndim && s->n < 32; d++)
            if (t->tensor.dims[d].kind == RY_DIM_SYM) {
                s->name[s->n] = t->tensor.dims[d].name;
                s->value[s->n++] = x->shape[d];
            }
    }
}

/* State k (DATA index ndata + k): the carried value when use_carried and
 * its shape still fits, else zeros of the parameter's type. */
static ry_status state_value(ry_trainer *tr, int k, const syms *s, bool use_carried,
                             ry_value **out, ry_error *err) {
    const ry_var *v = tr->data_vars[tr->nloss_data - tr->nstate + k];
    const ry_type *t = v->type;
    if (!t || t->kind != RY_TYPE_TENSOR)
        return ry_error_at(err, v->span, "carried state %%%s is not a tensor", v->name);
    int64_t shape[RY_MAX_RANK];
    for (int d = 0; d < t->tensor.ndim; d++) {
        const ry_dim *dim = &t->tensor.dims[d];
        int j = -1;
        if (dim->kind == RY_DIM_CONST) shape[d] = dim->value;
        else if (dim->kind == RY_DIM_SYM) {
            for (j = 0; j < s->n; j++)
                if (strcmp(s->name[j], dim->name) == 0) break;
            if (j == s->n)
                return ry_error_at(err, v->span, "cannot tell dimension %s of state %%%s",
                                   dim->name, v->name);
            shape[d] = s->value[j];
        } else
            return ry_error_at(err, v->span, "state %%%s has an unknown dimension", v->name);
    }
    ry_value *c = tr->state[k];
    if (use_carried && c && c->kind == RY_VAL_TENSOR && c->tensor->ndim == t->tensor.ndim &&
        memcmp(c->tensor->shape, shape, sizeof(int64_t) * (size_t)t->tensor.ndim) == 0) {
        *out = ry_value_retain(c);
        return RY_OK;
    }
    ry_tensor *z = ry_tensor_zeros(t->tensor.dtype, t->tensor.ndim, shape);
    *out = z ? ry_value_tensor(z) : NULL;
    return *out ? RY_OK : ry_error_at(err, RY_NO_SPAN, "out of memory");
}

void train_release_args(int n, ry_value **args) {
    for (int i = 0; i < n; i++) ry_value_release(args[i]);
    ry_free(args);
}

/* args := DATA (given, then state), then the parameter views. */
static ry_status loss_args(ry_trainer *tr, int ndata, ry_value *const *data, bool use_carried,
                           ry_value ***out, int *nout, ry_error *err) {
    if (ndata != tr->nloss_data - tr->nstate)
        return ry_error_at(err, RY_NO_SPAN, "@%s takes %d data values, %d given", tr->loss_name,
                           tr->nloss_data - tr->nstate, ndata);
    int n = tr->nloss_data + tr->params->n;
    ry_value **a = ry_calloc((size_t)n, sizeof *a);
    if (!a) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    syms s;
    bind_syms(tr, ndata, data, &s);
    for (int i = 0; i < ndata; i++) a[i] = ry_value_retain(data[i]);
    for (int k = 0; k < tr->nstate; k++)
        if (state_value(tr, k, &s, use_carried, &a[ndata + k], err)) {
            train_release_args(n, a);
            return RY_ERR;
        }
    for (int i = 0; i < tr->params->n; i++)
        a[tr->nloss_data + i] = ry_value_retain(tr->param_vals[i]);
    *out = a;
    *nout = n;
    return RY_OK;
}

ry_status train_loss_of(const ry_value *res, double *loss, ry_error *err) {
    if (res->kind == RY_VAL_TUPLE && res->tuple.n > 0) res = res->tuple.fields[0];
    if (res->kind != RY_VAL_TENSOR || res->tensor->size != 1 ||
        !ry_dtype_is_float(res->tensor->dtype))
        return ry_error_at(err, RY_NO_SPAN, "the loss is not a float scalar");
    return train_read(res->tensor, 0, loss, err);
}

static ry_interp_opts interp_opts(const ry_trainer *tr);

ry_status train_call(ry_trainer *tr, const char *entry, int n, ry_value **args, bool eval,
                     ry_value **out, ry_error *err) {
    ry_interp_opts io =
        eval ? (ry_interp_opts){.max_resident = tr->opts.max_resident} : interp_opts(tr);
    if (!tr->vm) return ry_interp_call(tr->m, entry, n, args, &io, out, err);
    /* row-sparse gradients only from the gradient program, which the
     * trainer takes apart itself */
    /* a device run's gradients (and carried state) stay on the device */
    ry_vm_opts vo = {.training = io.training, .seed = io.seed, .max_depth = io.max_depth,
                     .max_resident = io.max_resident,
                     .sparse_rows = !eval && !tr->opts.dense_grads, .keep_on_device = !eval,
                     .on_final = eval ? NULL : tr->on_final, .final_ctx = tr->final_ctx};
    return ry_vm_call(tr->vm, entry, n, args, &vo, out, err);
}

ry_status train_read(const ry_tensor *t, int64_t i, double *v, ry_error *err) {
    if (t->device.kind == RY_DEVICE_CPU) {
        *v = ry_tensor_get(t, i);
        return RY_OK;
    }
    /* one element of a device tensor: a view of it, copied back */
    size_t es = ry_dtype_size(t->dtype);
    ry_tensor *one = ry_tensor_view((ry_tensor *)t, (size_t)i * es, t->dtype, 0, NULL), *h = NULL;
    if (!one) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    ry_status st = ry_tensor_to(ry_target_cpu(), one, &h, err);
    ry_tensor_release(one);
    if (st) return RY_ERR;
    *v = ry_tensor_get(h, 0);
    ry_tensor_release(h);
    return RY_OK;
}

uint64_t train_seed(const ry_trainer *tr, int64_t call) {
    /* dropout masks depend on the seed, the step and the call within it,
     * so a resumed run draws the same ones */
    return tr->opts.seed * 0x9E3779B97F4A7C15ull +
           (uint64_t)ry_optim_step_count(tr->optim) * 1000003u + (uint64_t)call;
}

static ry_interp_opts interp_opts(const ry_trainer *tr) {
    ry_interp_opts o = {.training = tr->opts.training, .seed = train_seed(tr, tr->naccum),
                        .max_resident = tr->opts.max_resident};
    return o;
}

/* The gradient program's result: (loss or (loss, state...), gradients),
 * where the gradients are a tuple of ngrad_fields holding PARAM i's at
 * grad_base + i. Takes the loss and the carried state; returns the
 * gradient tuple's checks. */
ry_status train_take_result(ry_trainer *tr, ry_value *out, double *loss, ry_error *err) {
    int64_t step = ry_optim_step_count(tr->optim) + 1;
    if (out->kind != RY_VAL_TUPLE || out->tuple.n != 2 ||
        out->tuple.fields[1]->kind != RY_VAL_TUPLE ||
        out->tuple.fields[1]->tuple.n != tr->ngrad_fields)
        return ry_error_at(err, RY_NO_SPAN, "the gradient program returned an unexpected value");
    const ry_value *res = out->tuple.fields[0];
    if (train_loss_of(res, loss, err)) return RY_ERR;
    if (!isfinite(*loss))
        return ry_error_at(err, RY_NO_SPAN, "step %lld: the loss is %s; training stopped",
                           (long long)step, isnan(*loss) ? "NaN" : "Inf");
    if (train_grad_take(tr, out->tuple.fields[1], err)) return RY_ERR;
    for (int k = 0; k < tr->nstate; k++) {
        ry_value_release(tr->state[k]);
        tr->state[k] = ry_value_retain(res->tuple.fields[1 + k]);
    }
    return RY_OK;
}

ry_status ry_trainer_accumulate(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                                ry_error *err) {
    /* a step's first call: last step's gradients go (their buffers back
     * to the engine's pool before it runs) */
    if (tr->naccum == 0) train_grad_begin(tr);
    ry_value **a;
    int n;
    if (loss_args(tr, ndata, data, true, &a, &n, err)) return RY_ERR;
    ry_value *out = NULL;
    ry_status st = train_call(tr, tr->grad_name, n, a, false, &out, err);
    train_release_args(n, a);
    double l = NAN;
    if (st == RY_OK) st = train_take_result(tr, out, &l, err);
    ry_value_release(out);
    if (st) {
        tr->naccum = 0; /* a failed call poisons the whole step */
        return RY_ERR;
    }
    tr->naccum++;
    if (loss) *loss = l;
    return RY_OK;
}

ry_status ry_trainer_step(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                          ry_error *err) {
    if (ry_trainer_accumulate(tr, ndata, data, loss, err)) return RY_ERR;
    return ry_trainer_apply(tr, err);
}

void ry_trainer_reset_state(ry_trainer *tr) {
    for (int k = 0; k < RY_TRAIN_MAX_DATA; k++) {
        ry_value_release(tr->state[k]);
        tr->state[k] = NULL;
    }
}

ry_status ry_trainer_loss(ry_trainer *tr, int ndata, ry_value *const *data, double *loss,
                          ry_error *err) {
    ry_value **a;
    int n;
    if (loss_args(tr, ndata, data, false, &a, &n, err)) return RY_ERR;
    ry_value *out = NULL;
    ry_status st = train_call(tr, tr->loss_name, n, a, true, &out, err);
    train_release_args(n, a);
    if (st == RY_OK) st = train_loss_of(out, loss, err);
    ry_value_release(out);
    return st;
}

ry_status ry_trainer_predict(ry_trainer *tr, int ndata, ry_value *const *data, ry_value **out,
                             ry_error *err) {
    *out = NULL;
    if (tr->npred_data < 0) return ry_error_at(err, RY_NO_SPAN, "the model has no @%s", tr->predict_name);
    if (ndata != tr->nloss_data - tr->nstate)
        return ry_error_at(err, RY_NO_SPAN, "@%s takes %d data values, %d given", tr->loss_name,
                           tr->nloss_data - tr->nstate, ndata);
    int n = tr->npred_data + tr->params->n;
    ry_value **a = ry_calloc((size_t)n, sizeof *a);
    if (!a) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    syms s;
    bind_syms(tr, ndata, data, &s);
    for (int i = 0; i < tr->npred_data; i++) {
        int j = tr->pred_map[i];
        if (j < ndata) a[i] = ry_value_retain(data[j]);
        else if (state_value(tr, j - ndata, &s, false, &a[i], err)) {
            train_release_args(n, a);
            return RY_ERR;
        }
    }
    for (int i = 0; i < tr->params->n; i++)
        a[tr->npred_data + i] = ry_value_retain(tr->param_vals[i]);
    ry_status st = train_call(tr, tr->predict_name, n, a, true, out, err);
    train_release_args(n, a);
    return st;
}

/* accuracy: scores (..., C), labels with one entry per row of scores
 * ((...), or a scalar for one row (1, C)) -> rows where argmax == label */
ry_status ry_accuracy_count(const ry_tensor *scores, const ry_tensor *labels, int64_t *correct,
                            int64_t *total, ry_error *err) {
    int64_t c = scores->ndim > 0 ? scores->shape[scores->ndim - 1] : 0;
    if (c < 1 || scores->size / c != labels->size || labels->size == 0) {
        char a[64], b[64];
        return ry_error_at(err, RY_NO_SPAN, "accuracy: scores %s do not match labels %s",
                           ry_tensor_describe(scores, a, sizeof a),
                           ry_tensor_describe(labels, b, sizeof b));
    }
    int64_t ok = 0;
    for (int64_t r = 0; r < labels->size; r++) {
        int64_t best = 0;
        double bv = ry_tensor_get(scores, r * c);
        for (int64_t j = 1; j < c; j++) {
            double v = ry_tensor_get(scores, r * c + j);
            if (v > bv) bv = v, best = j;
        }
        ok += (double)best == ry_tensor_get(labels, r);
    }
    *correct = ok;
    *total = labels->size;
    return RY_OK;
}
