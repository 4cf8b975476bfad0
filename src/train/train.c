/*
 * train.c: building a trainer: parse and type-check the model, split
 * @loss's parameters into DATA and PARAMS (by the `// data:` line), carve
 * the parameters from one slab, initialize them, differentiate @loss once
 * and make the optimizer. Steps live in train_step.c, checkpoints in
 * train_ckpt.c, the loop in train_loop.c.
 */
#include <stdlib.h>
#include <string.h>

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "tensor/oom.h"
#include "train/train_impl.h"

ry_train_opts ry_train_defaults(void) {
    ry_train_opts o;
    memset(&o, 0, sizeof o);
    o.optim = ry_optim_defaults(RY_OPTIM_SGD);
    o.optim.lr = 0.01;
    return o;
}

static ry_global *entry(ry_module *m, const char *name, ry_error *err) {
    ry_global *g = ry_module_find_global(m, name);
    if (!g) ry_error_at(err, RY_NO_SPAN, "the model has no @%s entry", name);
    return g;
}

/* The number of @loss DATA parameters: opts.ndata, else the `// data:`
 * line, whose names must be the leading parameters in order. */
static ry_status find_ndata(ry_trainer *tr, const ry_expr *fn, ry_error *err) {
    int n = tr->opts.ndata;
    if (n <= 0) {
        if (!tr->spec->has_data)
            return ry_error_at(err, RY_NO_SPAN,
                               "the model has no `// data: NAMES` line saying which parameters "
                               "of @%s are data",
                               tr->loss_name);
        n = tr->spec->ndata;
        for (int i = 0; i < n && i < fn->func.nparams; i++)
            if (strcmp(tr->spec->data[i], fn->func.params[i]->name) != 0)
                return ry_error_at(err, fn->func.params[i]->span,
                                   "`// data:` names '%s' but parameter %d of @%s is %%%s",
                                   tr->spec->data[i], i + 1, tr->loss_name,
                                   fn->func.params[i]->name);
    }
    if (n > RY_TRAIN_MAX_DATA || n > fn->func.nparams)
        return ry_error_at(err, fn->span, "@%s has %d parameters, fewer than %d data ones",
                           tr->loss_name, fn->func.nparams, n);
    tr->nloss_data = n;
    for (int i = 0; i < n; i++) tr->data_vars[i] = fn->func.params[i];
    return RY_OK;
}

/* The carried state: @loss returning a tuple (loss, s1..sk) feeds s1..sk
 * back into its last k DATA parameters. */
static ry_status find_state(ry_trainer *tr, const ry_expr *fn, ry_error *err) {
    const ry_type *rt = fn->func.body->type;
    if (!rt || rt->kind != RY_TYPE_TUPLE) return RY_OK;
    int k = rt->tuple.n - 1;
    if (k < 0 || k >= tr->nloss_data)
        return ry_error_at(err, fn->span,
                           "@%s returns a tuple of %d fields: its %d carried state fields need as "
                           "many trailing data parameters",
                           tr->loss_name, rt->tuple.n, k);
    tr->nstate = k;
    return RY_OK;
}

static ry_status sym_value(const ry_train_opts *o, const ry_dim *d, int64_t *v, ry_error *err,
                           const ry_var *var) {
    if (d->kind == RY_DIM_CONST) {
        *v = d->value;
        return RY_OK;
    }
    if (d->kind == RY_DIM_SYM)
        for (int i = 0; i < o->nsyms; i++)
            if (o->sym_names[i] && strcmp(o->sym_names[i], d->name) == 0) {
                *v = o->sym_values[i];
                return RY_OK;
            }
    if (d->kind != RY_DIM_SYM)
        return ry_error_at(err, var->span, "parameter %%%s has a dimension ?: parameters need "
                           "known sizes", var->name);
    return ry_error_at(err, var->span,
                       "parameter %%%s has dimension %s: give its value (relayc train --dim %s=N; "
                       "from C, ry_train_opts.sym_names)",
                       var->name, d->name, d->name);
}

/* The checkpoint layout holds the parameters (/params/<name>) and the
 * carried state (/optimizer/<state>/carry) by name: a name it cannot hold
 * is found here, located, not at the first save after the work is done. */
static ry_status check_names(ry_trainer *tr, const char **names, int n, const ry_expr *fn,
                             ry_error *err) {
    const char **all = ry_calloc((size_t)(n + tr->nstate), sizeof *all);
    if (!all) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    for (int i = 0; i < n; i++) all[i] = names[i];
    for (int k = 0; k < tr->nstate; k++) all[n + k] = tr->data_vars[tr->nloss_data - tr->nstate + k]->name;
    int bad;
    ry_status st = ry_checkpoint_check_names(n + tr->nstate, all, &bad, err);
    ry_free(all);
    if (st == RY_OK) return RY_OK;
    const ry_var *v = bad < n ? fn->func.params[tr->nloss_data + bad]
                              : tr->data_vars[tr->nloss_data - tr->nstate + (bad - n)];
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return ry_error_at(err, v->span, "%%%s: %s", v->name, msg);
}

/* The parameter set (and its gradients) could not be allocated: the error
 * names the largest parameter, at its declaration, and the bytes asked for. */
static void params_oom(const ry_expr *fn, int first, int n, const int *ndims,
                       const int64_t *const *shapes, ry_dtype dt, ry_error *err) {
    double total = 0, most = -1;
    int big = 0;
    for (int i = 0; i < n; i++) {
        double b = (double)ry_dtype_size(dt);
        for (int d = 0; d < ndims[i]; d++) b *= (double)shapes[i][d];
        total += b;
        if (b > most) most = b, big = i;
    }
    const ry_var *v = fn->func.params[first + big];
    ry_error_at(err, v->span,
                "out of memory for the parameters: %%%s alone needs %.4g bytes (%.4g in all, "
                "twice that with the gradients)", v->name, most, total);
}

/* PARAMS: every @loss parameter after the DATA ones, a float tensor of one
 * dtype with known dimensions. */
static ry_status bind_params(ry_trainer *tr, const ry_expr *fn, ry_error *err) {
    int n = fn->func.nparams - tr->nloss_data;
    if (n <= 0) return ry_error_at(err, fn->span, "@%s has no parameters to train", tr->loss_name);
    const char **names = ry_calloc((size_t)n, sizeof *names);
    int *ndims = ry_calloc((size_t)n, sizeof *ndims);
    int64_t *dims = ry_calloc((size_t)n * RY_MAX_RANK, sizeof *dims);
    const int64_t **shapes = ry_calloc((size_t)n, sizeof *shapes);
    ry_status st = RY_ERR;
    if (!names || !ndims || !dims || !shapes) {
        ry_error_at(err, RY_NO_SPAN, "out of memory");
        goto done;
    }
    ry_dtype dt = RY_FLOAT32;
    for (int i = 0; i < n; i++) {
        const ry_var *v = fn->func.params[tr->nloss_data + i];
        const ry_type *t = v->type ? v->type : v->annot;
        if (!t || t->kind != RY_TYPE_TENSOR || !ry_dtype_is_float(t->tensor.dtype) ||
            t->tensor.dtype == RY_FLOAT16) {
            ry_error_at(err, v->span, "parameter %%%s is not a float32/float64 tensor", v->name);
            goto done;
        }
        if (i == 0) dt = t->tensor.dtype;
        if (t->tensor.dtype != dt) {
            ry_error_at(err, v->span, "parameter %%%s is %s but %%%s is %s: one dtype per model",
                        v->name, ry_dtype_name(t->tensor.dtype), names[0], ry_dtype_name(dt));
            goto done;
        }
        names[i] = v->name;
        ndims[i] = t->tensor.ndim;
        for (int d = 0; d < t->tensor.ndim; d++)
            if (sym_value(&tr->opts, &t->tensor.dims[d], &dims[i * RY_MAX_RANK + d], err, v))
                goto done;
        shapes[i] = &dims[i * RY_MAX_RANK];
    }
    if (check_names(tr, names, n, fn, err)) goto done;
    tr->params = ry_params_new(dt, n, names, ndims, shapes);
    tr->grads = tr->params ? ry_params_like(tr->params) : NULL;
    tr->param_vals = ry_calloc((size_t)n, sizeof *tr->param_vals);
    if (!tr->params || !tr->grads || !tr->param_vals) {
        params_oom(fn, tr->nloss_data, n, ndims, shapes, dt, err);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        tr->param_vals[i] = ry_value_tensor(ry_tensor_retain(tr->params->views[i]));
        if (!tr->param_vals[i]) {
            ry_error_at(err, RY_NO_SPAN, "out of memory");
            goto done;
        }
    }
    st = RY_OK;
done:
    ry_free(names);
    ry_free(ndims);
    ry_free(dims);
    ry_free(shapes);
    return st;
}

/* Each parameter starts by opts.init, else the file's `// init:` entry,
 * else xavier_uniform (rank >= 2) or zeros, drawn in parameter order from
 * one RNG seeded with opts.seed. */
static ry_status init_params(ry_trainer *tr, ry_error *err) {
    ry_init_spec *over = NULL;
    if (tr->opts.init) {
        size_t n = strlen(tr->opts.init) + 16;
        char *line = ry_malloc(n);
        if (!line) return ry_error_at(err, RY_NO_SPAN, "out of memory");
        snprintf(line, n, "// init: %s\n", tr->opts.init);
        ry_status st = ry_init_spec_parse("init option", line, strlen(line), &over, err);
        ry_free(line);
        if (st) return RY_ERR;
    }
    ry_rng_seed(&tr->rng, tr->opts.seed);
    ry_status st = RY_OK;
    for (int i = 0; i < tr->params->n && st == RY_OK; i++) {
        ry_tensor *t = tr->params->views[i];
        const char *name = tr->params->names[i];
        const ry_init *in = over ? ry_init_spec_find(over, name) : NULL;
        if (!in) in = ry_init_spec_find(tr->spec, name);
        ry_init def = {.kind = t->ndim >= 2 ? RY_INIT_XAVIER_UNIFORM : RY_INIT_ZEROS, .a = 1};
        if ((st = ry_init_fill(t, in ? in : &def, &tr->rng, err)))
            ry_error_prefix(err, "initializing %%%s", name);
    }
    ry_init_spec_free(over);
    return st;
}

/* @predict's DATA parameters, by name among @loss's; PARAMS the same. */
static ry_status bind_predict(ry_trainer *tr, ry_error *err) {
    tr->npred_data = -1;
    ry_global *g = ry_module_find_global(tr->m, tr->predict_name);
    if (!g) return RY_OK;
    const ry_expr *fn = g->func;
    int np = fn->func.nparams - tr->params->n;
    if (np < 0 || np > RY_TRAIN_MAX_DATA)
        return ry_error_at(err, fn->span, "@%s has %d parameters; @%s trains %d",
                           tr->predict_name, fn->func.nparams, tr->loss_name, tr->params->n);
    for (int i = 0; i < tr->params->n; i++)
        if (strcmp(fn->func.params[np + i]->name, tr->params->names[i]) != 0)
            return ry_error_at(err, fn->func.params[np + i]->span,
                               "@%s parameter %d is %%%s, @%s's is %%%s", tr->predict_name,
                               np + i + 1, fn->func.params[np + i]->name, tr->loss_name,
                               tr->params->names[i]);
    for (int i = 0; i < np; i++) {
        int j = 0;
        while (j < tr->nloss_data && strcmp(tr->data_vars[j]->name, fn->func.params[i]->name))
            j++;
        if (j == tr->nloss_data)
            return ry_error_at(err, fn->func.params[i]->span,
                               "@%s data parameter %%%s is not a data parameter of @%s",
                               tr->predict_name, fn->func.params[i]->name, tr->loss_name);
        tr->pred_map[i] = j;
    }
    tr->npred_data = np;
    return RY_OK;
}

/* The gradient of @loss with respect to PARAMS only: the data's and the
 * carried state's adjoints are never read, so the optimizer removes their
 * computation (the MLP's first-layer input gradient, a fifth of its
 * FLOPs). The gradient tuple then holds PARAM i's at field i. */
static ry_status differentiate(ry_trainer *tr, const ry_expr *fn, ry_error *err) {
    int n = fn->func.nparams;
    bool *wrt = ry_calloc((size_t)n, sizeof *wrt);
    if (!wrt) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    for (int i = tr->nloss_data; i < n; i++) wrt[i] = true;
    /* the gradient's mode follows the runs' (dropout, batch_norm) */
    ry_grad_opts go = {.inference = !tr->opts.training, .wrt = wrt, .nwrt = n};
    int held = ry_oom_hold(ry_free, wrt); /* out of the IR's memory, the jump passes here */
    ry_status st = ry_grad_ex(tr->m, tr->loss_name, NULL, NULL, &go, &tr->grad_name, err);
    ry_oom_unhold(held);
    ry_free(wrt);
    if (st) {
        ry_error_prefix(err, "differentiating @%s", tr->loss_name);
        return RY_ERR;
    }
    tr->grad_base = 0;
    tr->ngrad_fields = tr->params->n;
    return RY_OK;
}

/* A device run keeps the parameters and the gradient slab on the device
 * (the optimizer's slots went with ry_optim_set_target) from here to the
 * end: they were made and initialized on the host, and cross once. */
static ry_status to_device(ry_trainer *tr, ry_error *err) {
    ry_param_set *p = ry_params_to(tr->target, tr->params, err);
    ry_param_set *g = p ? ry_params_to(tr->target, tr->grads, err) : NULL;
    if (!g) {
        ry_params_free(p);
        ry_error_prefix(err, "moving the parameters to %s", tr->target->name);
        return RY_ERR;
    }
    ry_params_free(tr->params);
    ry_params_free(tr->grads);
    tr->params = p;
    tr->grads = g;
    for (int i = 0; i < p->n; i++) {
        ry_value_release(tr->param_vals[i]);
        if (!(tr->param_vals[i] = ry_value_tensor(ry_tensor_retain(p->views[i]))))
            return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    return RY_OK;
}

static ry_status setup(ry_trainer *tr, const char *name, size_t len, ry_error *err) {
    if (ry_module_parse(name, tr->text, len, &tr->m, err)) return RY_ERR;
    train_bind_dims(tr->m, &tr->opts);
    if (ry_module_typecheck(tr->m, err)) return RY_ERR;
    if (ry_init_spec_parse(name, tr->text, len, &tr->spec, err)) return RY_ERR;
    tr->loss_name = tr->opts.loss_entry ? tr->opts.loss_entry : "loss";
    tr->predict_name = tr->opts.predict_entry ? tr->opts.predict_entry : "predict";
    ry_global *g = entry(tr->m, tr->loss_name, err);
    if (!g) return RY_ERR;
    if (find_ndata(tr, g->func, err) || find_state(tr, g->func, err) ||
        bind_params(tr, g->func, err) || init_params(tr, err) || bind_predict(tr, err))
        return RY_ERR;
    if (train_grad_init(tr, err)) return RY_ERR;
    /* before differentiating: the hoisted work's gradient is then summed
     * over the steps once (RELAYC_HOIST=0 leaves it out, to measure it) */
    const char *hoist = getenv("RELAYC_HOIST");
    if ((!hoist || strcmp(hoist, "0") != 0) && ry_hoist(tr->m, err)) {
        ry_error_prefix(err, "hoisting invariant work out of the loops of %s", name);
        return RY_ERR;
    }
    g = ry_module_find_global(tr->m, tr->loss_name);
    if (differentiate(tr, g->func, err)) return RY_ERR;
    /* The transform's refs and closures are evaluated away where control
     * flow is static (straight-line code for the MLP and LeNet); recursion
     * whose stopping test depends on data (RNNs over time, trees) stays
     * recursion, its steps specialized (partial_eval.c). */
    if (ry_optimize(tr->m, 2, err)) {
        ry_error_prefix(err, "optimizing the gradient of @%s", tr->loss_name);
        return RY_ERR;
    }
    if (tr->opts.engine == RY_ENGINE_INTERP && tr->target != ry_target_cpu())
        return ry_error_at(err, RY_NO_SPAN, "the interpreter runs on the CPU target only, not %s",
                           tr->target->name);
    if (tr->opts.engine != RY_ENGINE_INTERP && ry_vm_compile(tr->m, tr->target, &tr->vm, err)) {
        ry_error_prefix(err, "compiling %s", name);
        return RY_ERR;
    }
    tr->base_lr = tr->opts.optim.lr;
    if (ry_schedule_check(&tr->opts.schedule, err)) return RY_ERR;
    if (tr->opts.clip_norm < 0 || tr->opts.clip_value < 0)
        return ry_error_at(err, RY_NO_SPAN, "clipping thresholds must not be negative");
    if (ry_optim_new(&tr->opts.optim, tr->params, &tr->optim, err)) return RY_ERR;
    if (ry_optim_set_target(tr->optim, tr->target, err)) return RY_ERR;
    return tr->target->dev ? to_device(tr, err) : RY_OK;
}

typedef struct setting_up {
    ry_trainer *tr;
    const char *name;
    size_t len;
} setting_up;

/* Frees the trainer as far as setup built it (on an error or out of
 * memory). */
static void unset_up(void *ctx) { ry_trainer_free(((setting_up *)ctx)->tr); }

static ry_status set_up(void *ctx, ry_error *err) {
    setting_up *s = ctx;
    if (!setup(s->tr, s->name, s->len, err)) return RY_OK;
    unset_up(s);
    return RY_ERR;
}

ry_status ry_trainer_new(const char *name, const char *text, size_t len,
                         const ry_train_opts *opts, ry_trainer **out, ry_error *err) {
    *out = NULL;
    ry_trainer *tr = ry_calloc(1, sizeof *tr);
    if (!tr) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    tr->opts = opts ? *opts : ry_train_defaults();
    tr->target = tr->opts.target ? tr->opts.target : ry_target_cpu();
    tr->text = ry_malloc(len + 1);
    if (!tr->text) {
        ry_free(tr);
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    memcpy(tr->text, text, len);
    tr->text[len] = '\0';
    /* Under a recovery point (oom.h): the IR built between the library
     * calls (which have points of their own) fails as an error too. */
    setting_up s = {tr, name, len};
    if (ry_oom_guard(name ? name : "<input>", set_up, unset_up, &s, err)) return RY_ERR;
    *out = tr;
    return RY_OK;
}

ry_status ry_trainer_new_file(const char *path, const ry_train_opts *opts, ry_trainer **out,
                              ry_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ry_error_file(err, path, "cannot open");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = ry_realloc(buf, cap);
            if (!nb) {
                ry_free(buf);
                fclose(f);
                return ry_error_file(err, path, "out of memory");
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        ry_free(buf);
        return ry_error_file(err, path, "read error");
    }
    ry_status st = ry_trainer_new(path, buf, len, opts, out, err);
    ry_free(buf);
    return st;
}

ry_vm_program *ry_trainer_vm(ry_trainer *tr) { return tr ? tr->vm : NULL; }

void ry_trainer_free(ry_trainer *tr) {
    if (!tr) return;
    for (int i = 0; i < RY_TRAIN_MAX_DATA; i++) ry_value_release(tr->state[i]);
    if (tr->param_vals && tr->params)
        for (int i = 0; i < tr->params->n; i++) ry_value_release(tr->param_vals[i]);
    ry_free(tr->param_vals);
    train_pool_free(tr->pool); /* its VMs before the module */
    train_grad_free(tr);
    ry_optim_free(tr->optim);
    ry_params_free(tr->params);
    ry_params_free(tr->grads);
    ry_vm_free(tr->vm); /* before the module it points into */
    ry_module_free(tr->m);
    ry_init_spec_free(tr->spec);
    ry_free(tr->text);
    ry_free(tr);
}

ry_module *ry_trainer_module(ry_trainer *tr) { return tr->m; }
ry_param_set *ry_trainer_params(ry_trainer *tr) { return tr->params; }
ry_optimizer *ry_trainer_optim(ry_trainer *tr) { return tr->optim; }
const char *ry_trainer_text(const ry_trainer *tr) { return tr->text; }
int ry_trainer_ndata(const ry_trainer *tr) { return tr->nloss_data - tr->nstate; }
int ry_trainer_nstate(const ry_trainer *tr) { return tr->nstate; }
int64_t ry_trainer_steps(const ry_trainer *tr) { return ry_optim_step_count(tr->optim); }

const char *ry_trainer_data_name(const ry_trainer *tr, int i) {
    return i >= 0 && i < tr->nloss_data ? tr->data_vars[i]->name : NULL;
}
