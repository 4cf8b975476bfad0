/*
 * optimizer.c: the optimizer object: configuration (PyTorch's defaults and
 * range checks), the slot sets it owns, per-parameter flags and step counts,
 * and the step that walks the parameters once, handing each contiguous run
 * of the slabs to the update kernel of the optimizer's target
 * (src/backend/target.h; the CPU's rules: src/backend/cpu/update_*.c).
 * Learning-rate schedules (schedule.c) and clipping (clip.c) live apart.
 */
#include <math.h>
#include <string.h>

#include "optim_impl.h"


static const char *const kind_names[RY_OPTIM_KIND_COUNT] = {"sgd", "adam", "adamw", "adagrad",
                                                            "rmsprop"};

const char *ry_optim_kind_name(ry_optim_kind kind) {
    return kind >= 0 && kind < RY_OPTIM_KIND_COUNT ? kind_names[kind] : "?";
}

bool ry_optim_kind_parse(const char *name, ry_optim_kind *out) {
    for (int k = 0; k < RY_OPTIM_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (ry_optim_kind)k;
            return true;
        }
    return false;
}

/* torch.optim's constructor defaults (torch 2.x). */
ry_optim_config ry_optim_defaults(ry_optim_kind kind) {
    ry_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.alpha = 0.99;
    if (kind == RY_OPTIM_ADAMW) c.weight_decay = 1e-2;
    if (kind == RY_OPTIM_ADAGRAD) {
        c.lr = 1e-2;
        c.eps = 1e-10;
    }
    if (kind == RY_OPTIM_RMSPROP) c.lr = 1e-2;
    return c;
}

/* A hyperparameter must be finite and at least lo (NaN fails too). */
static ry_status need_min(double v, double lo, const char *what, ry_error *err) {
    if (isfinite(v) && v >= lo) return RY_OK;
    return ry_error_at(err, RY_NO_SPAN, "optimizer: invalid %s %g (must be finite and >= %g)", what,
                       v, lo);
}

static ry_status need_beta(double v, const char *what, ry_error *err) {
    if (v >= 0 && v < 1) return RY_OK;
    return ry_error_at(err, RY_NO_SPAN, "optimizer: invalid %s %g (must be in [0, 1))", what, v);
}

ry_status ry_optim_config_check(const ry_optim_config *c, ry_error *err) {
    if (c->kind < 0 || c->kind >= RY_OPTIM_KIND_COUNT)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: unknown kind %d", (int)c->kind);
    if (need_min(c->lr, 0, "learning rate", err) || need_min(c->weight_decay, 0, "weight_decay", err))
        return RY_ERR;
    switch (c->kind) {
    case RY_OPTIM_SGD:
        if (need_min(c->momentum, 0, "momentum", err) || need_min(c->dampening, 0, "dampening", err))
            return RY_ERR;
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return ry_error_at(err, RY_NO_SPAN,
                               "optimizer: Nesterov momentum requires a momentum and zero dampening");
        return RY_OK;
    case RY_OPTIM_ADAM:
    case RY_OPTIM_ADAMW:
        if (need_min(c->eps, 0, "eps", err) || need_beta(c->beta1, "beta1", err) ||
            need_beta(c->beta2, "beta2", err))
            return RY_ERR;
        return RY_OK;
    case RY_OPTIM_ADAGRAD:
        if (need_min(c->eps, 0, "eps", err) || need_min(c->lr_decay, 0, "lr_decay", err) ||
            need_min(c->initial_accumulator_value, 0, "initial_accumulator_value", err))
            return RY_ERR;
        return RY_OK;
    case RY_OPTIM_RMSPROP:
        if (need_min(c->eps, 0, "eps", err) || need_min(c->momentum, 0, "momentum", err) ||
            need_min(c->alpha, 0, "alpha", err))
            return RY_ERR;
        return RY_OK;
    default:
        return RY_ERR;
    }
}

/* The slots a configuration needs, in the order its kernel takes them;
 * NULL marks a slot position the configuration leaves out. */
static int slot_plan(const ry_optim_config *c, const char *names[RY_OPTIM_MAX_SLOTS]) {
    for (int i = 0; i < RY_OPTIM_MAX_SLOTS; i++) names[i] = NULL;
    switch (c->kind) {
    case RY_OPTIM_SGD:
        names[0] = c->momentum != 0 ? "momentum_buffer" : NULL;
        return 1;
    case RY_OPTIM_ADAM:
    case RY_OPTIM_ADAMW:
        names[0] = "exp_avg";
        names[1] = "exp_avg_sq";
        names[2] = c->amsgrad ? "max_exp_avg_sq" : NULL;
        return 3;
    case RY_OPTIM_ADAGRAD:
        names[0] = "sum";
        return 1;
    case RY_OPTIM_RMSPROP:
        names[0] = "square_avg";
        names[1] = c->momentum > 0 ? "momentum_buffer" : NULL;
        names[2] = c->centered ? "grad_avg" : NULL;
        return 3;
    default:
        return 0;
    }
}

void ry_optim_free(ry_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < RY_OPTIM_MAX_SLOTS; i++) {
        ry_params_free(o->slots[i]);
        ry_tensor_release(o->shard[i]);
    }
    for (int i = 0; o->names && i < o->n_params; i++) ry_free(o->names[i]);
    ry_free(o->names);
    ry_free(o->ndims);
    ry_free(o->shapes);
    ry_params_free(o->step_set);
    ry_free(o->decay);
    ry_free(o->frozen);
    ry_free(o);
}

static ry_status oom(ry_optimizer *o, ry_error *err) {
    ry_optim_free(o);
    return ry_error_at(err, RY_NO_SPAN, "optimizer: out of memory");
}

/* The step counts: one float64 scalar per parameter, under its name, so a
 * checkpoint can store them as PyTorch's state_dict does (.../<param>/step). */
static bool step_set_new(ry_optimizer *o) {
    size_t n = (size_t)(o->n_params ? o->n_params : 1);
    int *ndims = ry_calloc(n, sizeof *ndims);
    const int64_t **shapes = ry_calloc(n, sizeof *shapes);
    static const int64_t none[1] = {0};
    if (ndims && shapes) {
        for (int i = 0; i < o->n_params; i++) shapes[i] = none;
        o->step_set = ry_params_new(RY_FLOAT64, o->n_params, (const char *const *)o->names, ndims,
                                    shapes);
    }
    ry_free(ndims);
    ry_free(shapes);
    return o->step_set != NULL;
}

static double *step_of(const ry_optimizer *o, int i) { return o->step_set->views[i]->data; }

/* Copies the names and shapes of params so later sets can be checked. */
static bool keep_layout(ry_optimizer *o, const ry_param_set *p) {
    size_t n = (size_t)(p->n ? p->n : 1);
    o->dtype = p->dtype;
    o->names = ry_calloc(n, sizeof *o->names);
    o->ndims = ry_calloc(n, sizeof *o->ndims);
    o->shapes = ry_calloc(n, sizeof *o->shapes);
    o->decay = ry_calloc(n, sizeof *o->decay);
    o->frozen = ry_calloc(n, sizeof *o->frozen);
    if (!o->names || !o->ndims || !o->shapes || !o->decay || !o->frozen) return false;
    for (int i = 0; i < p->n; i++, o->n_params = i) {
        o->names[i] = ry_strdup(p->names[i]);
        if (!o->names[i]) return false;
        o->ndims[i] = p->views[i]->ndim;
        memcpy(o->shapes[i], p->views[i]->shape, sizeof o->shapes[i]);
        o->decay[i] = true;
    }
    o->n_params = p->n;
    return step_set_new(o);
}

ry_status ry_optim_new(const ry_optim_config *cfg, const ry_param_set *params, ry_optimizer **out,
                       ry_error *err) {
    *out = NULL;
    if (ry_optim_config_check(cfg, err)) return RY_ERR;
    if (params->dtype != RY_FLOAT32 && params->dtype != RY_FLOAT64)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: parameters must be float32 or float64, not %s",
                           ry_dtype_name(params->dtype));
    ry_optimizer *o = ry_calloc(1, sizeof *o);
    if (!o || !keep_layout(o, params)) return oom(o, err);
    o->cfg = *cfg;
    o->target = ry_target_cpu();
    o->n_slots = slot_plan(cfg, o->slot_names);
    for (int i = 0; i < o->n_slots; i++) {
        if (!o->slot_names[i]) continue;
        o->slots[i] = ry_params_like(params);
        if (!o->slots[i]) return oom(o, err);
    }
    /* Adagrad starts its sum at initial_accumulator_value, eagerly (torch). */
    if (cfg->kind == RY_OPTIM_ADAGRAD && cfg->initial_accumulator_value != 0)
        ry_params_fill(o->slots[0], cfg->initial_accumulator_value);
    *out = o;
    return RY_OK;
}

/* Whether p has the names, shapes and dtype the optimizer was made for. */
static ry_status check_layout(const ry_optimizer *o, const ry_param_set *p, const char *what,
                              ry_error *err) {
    if (p->dtype != o->dtype)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: %s are %s, the optimizer's parameters %s",
                           what, ry_dtype_name(p->dtype), ry_dtype_name(o->dtype));
    if (p->n != o->n_params)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: %s hold %d tensors, expected %d", what, p->n,
                           o->n_params);
    for (int i = 0; i < p->n; i++) {
        const ry_tensor *v = p->views[i];
        if (strcmp(p->names[i], o->names[i]) != 0)
            return ry_error_at(err, RY_NO_SPAN, "optimizer: %s entry %d is '%s', expected '%s'", what,
                               i, p->names[i], o->names[i]);
        if (v->ndim != o->ndims[i] ||
            memcmp(v->shape, o->shapes[i], sizeof(int64_t) * (size_t)v->ndim) != 0) {
            char buf[64];
            return ry_error_at(err, RY_NO_SPAN, "optimizer: %s '%s' has shape %s, not the parameter's",
                               what, p->names[i], ry_tensor_describe(v, buf, sizeof buf));
        }
    }
    return RY_OK;
}

/* The counts may have been loaded from a file: whole numbers only. */
static ry_status check_steps(const ry_optimizer *o, ry_error *err) {
    for (int i = 0; i < o->n_params; i++) {
        double t = *step_of(o, i);
        if (!o->frozen[i] && !(t >= 0 && t < 9007199254740992.0 && t == floor(t)))
            return ry_error_at(err, RY_NO_SPAN,
                               "optimizer: parameter '%s' has step count %g, not a whole number >= 0",
                               o->names[i], t);
    }
    return RY_OK;
}

bool ry_optim_zero_grad_is_identity(const ry_optimizer *o, int i) {
    if (i < 0 || i >= o->n_params) return false;
    if (o->frozen[i]) return true;
    bool decays = o->decay[i] && o->cfg.weight_decay != 0;
    switch (o->cfg.kind) {
    case RY_OPTIM_SGD:
        /* p - lr (0 + 0) = p; a momentum buffer decays instead */
        return !decays && o->cfg.momentum == 0;
    case RY_OPTIM_ADAGRAD:
        /* s + 0 = s, and 0 / (sqrt(s) + eps) = 0 needs eps > 0 (s may be 0) */
        return !decays && o->cfg.eps > 0;
    default:
        /* Adam's and RMSprop's averages decay toward zero */
        return false;
    }
}

/* Whether [a, a + n) and [b, b + m) bytes overlap. */
static ry_status check_grad(const ry_optimizer *o, const ry_param_set *params, int i,
                            const ry_optim_grad *g, ry_error *err) {
    const ry_tensor *t = g->t, *p = params->views[i];
    if (!t) return ry_error_at(err, RY_NO_SPAN, "optimizer: no gradient for '%s'", o->names[i]);
    if (t->dtype != o->dtype || !ry_tensor_same_shape(t, p)) {
        char buf[64];
        return ry_error_at(err, RY_NO_SPAN, "optimizer: the gradient of '%s' is %s, not the parameter's",
                           o->names[i], ry_tensor_describe(t, buf, sizeof buf));
    }
    bool clash = ry_tensor_overlap(t, params->slab);
    for (int s = 0; s < o->n_slots; s++) {
        const ry_tensor *st = o->slots[s] ? o->slots[s]->slab : o->shard[s];
        if (st) clash |= ry_tensor_overlap(t, st);
    }
    if (clash)
        return ry_error_at(err, RY_NO_SPAN,
                           "optimizer: the gradient of '%s' shares memory with the parameters or "
                           "the optimizer's state",
                           o->names[i]);
    if (!g->rows) return RY_OK;
    if (!ry_optim_zero_grad_is_identity(o, i))
        return ry_error_at(err, RY_NO_SPAN,
                           "optimizer: %s changes rows of '%s' whose gradient is zero: update it densely",
                           ry_optim_kind_name(o->cfg.kind), o->names[i]);
    for (int64_t k = 0; k < g->nrows; k++)
        if (p->ndim < 1 || g->rows[k] < 0 || g->rows[k] >= p->shape[0] ||
            (k > 0 && g->rows[k] <= g->rows[k - 1]))
            return ry_error_at(err, RY_NO_SPAN,
                               "optimizer: the rows of '%s' are not increasing indices below %lld",
                               o->names[i], (long long)(p->ndim ? p->shape[0] : 0));
    return RY_OK;
}

/* The rule over elements [e, e + n) of parameter i, whose view starts at
 * element off of the slab; sharded, only over their part in [lo, hi). */
static void update_run(ry_optimizer *o, ry_param_set *params, int i, const ry_optim_grad *g,
                       ry_update_args *a, int64_t off, int64_t e, int64_t n) {
    if (o->sharded) {
        int64_t b = off + e + n < o->hi ? off + e + n : o->hi;
        if (off + e < o->lo) e = o->lo - off;
        n = b - (off + e);
        if (n <= 0) return;
    }
    size_t es = ry_dtype_size(o->dtype), at = (size_t)e * es;
    a->n = n;
    /* a device's kernels take the tensors and offsets (sharding is for
     * host runs: the trainer refuses it on a device) */
    a->tparam = params->views[i];
    a->tgrad = g->t;
    a->off = a->goff = e;
    for (int s = 0; s < o->n_slots; s++)
        a->tslot[s] = !o->sharded && o->slots[s] ? o->slots[s]->views[i] : NULL;
    if (params->views[i]->device.kind != RY_DEVICE_CPU) {
        o->target->update(&o->cfg, a);
        return;
    }
    a->param = (char *)params->views[i]->data + at;
    a->grad = (const char *)g->t->data + at;
    for (int s = 0; s < o->n_slots; s++)
        a->slot[s] = o->sharded ? (o->shard[s] ? (char *)o->shard[s]->data +
                                                     (size_t)(off + e - o->lo) * es
                                               : NULL)
                                : o->slots[s] ? (char *)o->slots[s]->views[i]->data + at : NULL;
    o->target->update(&o->cfg, a);
}

/* Parameter i's update, over all of it or over its listed rows (each row
 * one run of the slabs: the rules are elementwise). Its step count
 * advances even where a shard holds none of it, so that every rank
 * counts alike. */
static void update_param(ry_optimizer *o, ry_param_set *params, int i, const ry_optim_grad *g,
                         double scale) {
    const ry_tensor *p = params->views[i];
    size_t bytes = p->device.kind == RY_DEVICE_CPU
                       ? (size_t)((const char *)p->data - (const char *)params->slab->data)
                       : p->offset - params->slab->offset;
    int64_t off = (int64_t)(bytes / ry_dtype_size(o->dtype));
    ry_update_args a;
    memset(&a, 0, sizeof a);
    a.dtype = o->dtype;
    a.lr = o->cfg.lr;
    a.scale = scale;
    a.weight_decay = o->decay[i] ? o->cfg.weight_decay : 0;
    a.step = (int64_t)(*step_of(o, i) += 1);
    if (!g->rows) {
        update_run(o, params, i, g, &a, off, 0, p->size);
        return;
    }
    int64_t row = p->shape[0] ? p->size / p->shape[0] : 0;
    for (int64_t k = 0; k < g->nrows; k++) update_run(o, params, i, g, &a, off, g->rows[k] * row, row);
}

/* A sharded optimizer steps only sets of the slab it was sharded for. */
static ry_status check_shard(const ry_optimizer *o, const ry_param_set *params, ry_error *err) {
    if (!o->sharded || params->slab->size == o->slab_len) return RY_OK;
    return ry_error_at(err, RY_NO_SPAN,
                       "optimizer: sharded for a slab of %lld elements, given one of %lld",
                       (long long)o->slab_len, (long long)params->slab->size);
}

ry_status ry_optim_step_grads(ry_optimizer *o, ry_param_set *params, const ry_optim_grad *grads,
                              double scale, ry_error *err) {
    if (check_layout(o, params, "parameters", err) || check_shard(o, params, err) ||
        check_steps(o, err))
        return RY_ERR;
    for (int i = 0; i < o->n_params; i++)
        if (!o->frozen[i] && check_grad(o, params, i, &grads[i], err)) return RY_ERR;
    for (int i = 0; i < o->n_params; i++)
        if (!o->frozen[i]) update_param(o, params, i, &grads[i], scale);
    o->steps++;
    return RY_OK;
}

/* One pass: each parameter's run of params, grads and slots goes to the
 * rule once; frozen parameters are passed over. */
ry_status ry_optim_step(ry_optimizer *o, ry_param_set *params, const ry_param_set *grads,
                        ry_error *err) {
    if (check_layout(o, params, "parameters", err) || check_layout(o, grads, "gradients", err) ||
        check_shard(o, params, err) || check_steps(o, err))
        return RY_ERR;
    if (grads->slab->data == params->slab->data)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: the gradients are the parameters");
    for (int i = 0; i < o->n_params; i++) {
        if (o->frozen[i]) continue;
        ry_optim_grad g = {.t = grads->views[i]};
        update_param(o, params, i, &g, 1.0);
    }
    o->steps++;
    return RY_OK;
}

ry_status ry_optim_set_target(ry_optimizer *o, const ry_target *t, ry_error *err) {
    t = t ? t : ry_target_cpu();
    /* the state slots move to the target's device (step counts stay on
     * the host, which reads them) */
    ry_device d = ry_target_device(t);
    for (int s = 0; s < o->n_slots; s++) {
        if (!o->slots[s]) continue;
        ry_device at = o->slots[s]->slab->device;
        if (at.kind == d.kind && at.id == d.id) continue; /* there already */
        ry_param_set *moved = ry_params_to(t, o->slots[s], err);
        if (!moved) return RY_ERR;
        ry_params_free(o->slots[s]);
        o->slots[s] = moved;
    }
    o->target = t;
    return RY_OK;
}

double ry_optim_lr(const ry_optimizer *o) { return o->cfg.lr; }
void ry_optim_set_lr(ry_optimizer *o, double lr) { o->cfg.lr = lr; }
const ry_optim_config *ry_optim_get_config(const ry_optimizer *o) { return &o->cfg; }

static int find_param(const ry_optimizer *o, const char *name) {
    for (int i = 0; i < o->n_params; i++)
        if (strcmp(o->names[i], name) == 0) return i;
    return -1;
}

ry_status ry_optim_set_decay(ry_optimizer *o, const char *name, bool decay, ry_error *err) {
    int i = find_param(o, name);
    if (i < 0) return ry_error_at(err, RY_NO_SPAN, "optimizer: no parameter named '%s'", name);
    o->decay[i] = decay;
    return RY_OK;
}

ry_status ry_optim_set_frozen(ry_optimizer *o, const char *name, bool frozen, ry_error *err) {
    int i = find_param(o, name);
    if (i < 0) return ry_error_at(err, RY_NO_SPAN, "optimizer: no parameter named '%s'", name);
    o->frozen[i] = frozen;
    return RY_OK;
}

/* ---- state ----------------------------------------------------------
 * Slot positions the configuration leaves out (NULL) are skipped, so the
 * public index counts only slots that exist. */

static int slot_position(const ry_optimizer *o, int i) {
    for (int s = 0; s < o->n_slots; s++)
        if (o->slot_names[s] && i-- == 0) return s;
    return -1;
}

int ry_optim_slot_count(const ry_optimizer *o) {
    int n = 0;
    for (int s = 0; s < o->n_slots; s++) n += o->slot_names[s] != NULL;
    return n;
}

const char *ry_optim_slot_name(const ry_optimizer *o, int i) {
    int s = slot_position(o, i);
    return s < 0 ? NULL : o->slot_names[s];
}

ry_param_set *ry_optim_slot(ry_optimizer *o, int i) {
    int s = slot_position(o, i);
    return s < 0 ? NULL : o->slots[s];
}

static int slot_named(const ry_optimizer *o, const char *name) {
    for (int s = 0; s < o->n_slots; s++)
        if (o->slot_names[s] && strcmp(o->slot_names[s], name) == 0) return s;
    return -1;
}

ry_param_set *ry_optim_slot_find(ry_optimizer *o, const char *name) {
    int s = slot_named(o, name);
    return s < 0 ? NULL : o->slots[s];
}

ry_status ry_optim_load_slot(ry_optimizer *o, const char *name, const ry_param_set *src,
                             ry_error *err) {
    int s = slot_named(o, name);
    if (s < 0)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: %s has no slot '%s'",
                           ry_optim_kind_name(o->cfg.kind), name);
    if (check_layout(o, src, name, err) || check_shard(o, src, err)) return RY_ERR;
    if (!o->sharded) {
        if (ry_params_copy(o->slots[s], src))
            return ry_error_at(err, RY_NO_SPAN, "optimizer: copying slot '%s' failed", name);
        return RY_OK;
    }
    size_t es = ry_dtype_size(o->dtype);
    memcpy(o->shard[s]->data, (const char *)src->slab->data + (size_t)o->lo * es,
           (size_t)(o->hi - o->lo) * es);
    return RY_OK;
}

int64_t ry_optim_param_steps(const ry_optimizer *o, int i) {
    return i >= 0 && i < o->n_params ? (int64_t)*step_of(o, i) : -1;
}

ry_param_set *ry_optim_steps(ry_optimizer *o) { return o->step_set; }

ry_status ry_optim_set_param_steps(ry_optimizer *o, int i, int64_t steps, ry_error *err) {
    if (i < 0 || i >= o->n_params)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: no parameter %d (it has %d)", i, o->n_params);
    if (steps < 0 || steps >= INT64_C(1) << 53)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: step count %lld out of range for '%s'",
                           (long long)steps, o->names[i]);
    *step_of(o, i) = (double)steps;
    return RY_OK;
}

int64_t ry_optim_step_count(const ry_optimizer *o) { return o->steps; }
void ry_optim_set_step_count(ry_optimizer *o, int64_t steps) { o->steps = steps; }

/* ---- sharded state (ZeRO-1) ------------------------------------------ */

ry_status ry_optim_shard(ry_optimizer *o, const ry_param_set *params, int64_t lo, int64_t hi,
                         ry_error *err) {
    if (check_layout(o, params, "parameters", err)) return RY_ERR;
    int64_t len = params->slab->size;
    if (o->sharded) {
        if (o->lo == lo && o->hi == hi && o->slab_len == len) return RY_OK;
        return ry_error_at(err, RY_NO_SPAN, "optimizer: already sharded as [%lld, %lld)",
                           (long long)o->lo, (long long)o->hi);
    }
    if (lo < 0 || hi < lo || hi > len)
        return ry_error_at(err, RY_NO_SPAN, "optimizer: shard [%lld, %lld) outside the %lld elements",
                           (long long)lo, (long long)hi, (long long)len);
    ry_tensor *sh[RY_OPTIM_MAX_SLOTS] = {NULL};
    int64_t n = hi - lo;
    size_t es = ry_dtype_size(o->dtype);
    for (int s = 0; s < o->n_slots; s++) {
        if (!o->slots[s]) continue;
        if (!(sh[s] = ry_tensor_new(o->dtype, 1, &n))) {
            for (int t = 0; t < s; t++) ry_tensor_release(sh[t]);
            return ry_error_at(err, RY_NO_SPAN, "optimizer: out of memory");
        }
        memcpy(sh[s]->data, (const char *)o->slots[s]->slab->data + (size_t)lo * es, (size_t)n * es);
    }
    for (int s = 0; s < o->n_slots; s++) {
        ry_params_free(o->slots[s]);
        o->slots[s] = NULL;
        o->shard[s] = sh[s];
    }
    o->sharded = true;
    o->lo = lo;
    o->hi = hi;
    o->slab_len = len;
    return RY_OK;
}

ry_status ry_optim_unshard(ry_optimizer *o, const ry_param_set *params, ry_error *err) {
    if (!o->sharded) return RY_OK;
    if (check_layout(o, params, "parameters", err) || check_shard(o, params, err)) return RY_ERR;
    ry_param_set *full[RY_OPTIM_MAX_SLOTS] = {NULL};
    size_t es = ry_dtype_size(o->dtype);
    for (int s = 0; s < o->n_slots; s++) {
        if (!o->shard[s]) continue;
        if (!(full[s] = ry_params_like(params))) {
            for (int t = 0; t < s; t++) ry_params_free(full[t]);
            return ry_error_at(err, RY_NO_SPAN, "optimizer: out of memory");
        }
        memcpy((char *)full[s]->slab->data + (size_t)o->lo * es, o->shard[s]->data,
               (size_t)(o->hi - o->lo) * es);
    }
    for (int s = 0; s < o->n_slots; s++) {
        ry_tensor_release(o->shard[s]);
        o->shard[s] = NULL;
        o->slots[s] = full[s];
    }
    o->sharded = false;
    return RY_OK;
}

bool ry_optim_shard_range(const ry_optimizer *o, int64_t *lo, int64_t *hi) {
    if (lo) *lo = o->sharded ? o->lo : 0;
    if (hi) *hi = o->sharded ? o->hi : 0;
    return o->sharded;
}

ry_tensor *ry_optim_slot_shard(ry_optimizer *o, int i) {
    int s = slot_position(o, i);
    return s < 0 ? NULL : o->shard[s];
}
