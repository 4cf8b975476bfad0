/*
 * train_grad.c: the trainer's hot path after the gradient program: where a
 * step's gradients live, their NaN/Inf check, clipping and the optimizer's
 * update. Each parameter is read as few times as the step allows: one call
 * per step hands the program's own output tensors to the optimizer (no
 * zero-fill, no copy, no add; one read-only finiteness scan, so that a bad
 * gradient leaves every parameter unchanged); several calls add into the
 * gradient set (the check rides on the add); row-sparse gradients
 * (RY_VAL_ROWS, embeddings) scatter into it, and when the optimizer's
 * update of a zero row is the identity only the touched rows are checked,
 * clipped, updated and zeroed again.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_impl.h"

ry_status train_grad_init(ry_trainer *tr, ry_error *err) {
    train_grad_state *g = &tr->g;
    size_t n = (size_t)tr->params->n;
    g->direct = ry_calloc(n, sizeof *g->direct);
    g->state = ry_calloc(n, sizeof *g->state);
    g->bad = ry_calloc(n, sizeof *g->bad);
    g->rows = ry_calloc(n, sizeof *g->rows);
    g->ograds = ry_calloc(n, sizeof *g->ograds);
    g->norms = ry_calloc(n, sizeof *g->norms);
    g->taken = ry_calloc(n, sizeof *g->taken);
    g->last_scale = 1;
    if (!g->direct || !g->state || !g->bad || !g->rows || !g->ograds || !g->norms || !g->taken)
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    return RY_OK;
}

void train_grad_free(ry_trainer *tr) {
    train_grad_state *g = &tr->g;
    ry_value_release(g->pending);
    for (int i = 0; g->rows && tr->params && i < tr->params->n; i++) {
        ry_free(g->rows[i].mark);
        ry_free(g->rows[i].list);
    }
    ry_free(g->direct);
    ry_free(g->state);
    ry_free(g->bad);
    ry_free(g->rows);
    ry_free(g->ograds);
    ry_free(g->norms);
    ry_free(g->taken);
}

/* ---- slab writes ------------------------------------------------------ */

static int64_t row_len(const ry_tensor *t) {
    return t->ndim > 0 && t->shape[0] > 0 ? t->size / t->shape[0] : t->size;
}

static void zero_rows(ry_trainer *tr, ry_tensor *t, const int64_t *rows, int64_t n) {
    int64_t len = row_len(t);
    for (int64_t k = 0; k < n; k++) tr->target->grad_zero(t, rows[k] * len, len);
}

static void forget_rows(train_rows *r) {
    for (int64_t k = 0; k < r->n; k++) r->mark[r->list[k]] = 0;
    r->n = 0;
}

/* grads[i] += x (a dense gradient of the parameter's size). */
static void add_dense(ry_trainer *tr, int i, const ry_tensor *x) {
    train_grad_state *g = &tr->g;
    ry_tensor *d = tr->grads->views[i];
    bool first = g->state[i] == TRAIN_G_ZERO || g->state[i] == TRAIN_G_STALE;
    g->bad[i] |= tr->target->grad_add(d, x, 0, 0, d->size, first);
    g->state[i] = TRAIN_G_DENSE;
}

/* grads[i]'s rows ids[0..n) += src's rows from element src_off on, one
 * row of the parameter after another, in order; rows touched in a ZERO
 * or ROWS slab are listed. */
static ry_status add_row_run(ry_trainer *tr, int i, const ry_tensor *src, int64_t src_off,
                             const int64_t *ids, int64_t n, ry_error *err) {
    train_grad_state *g = &tr->g;
    ry_tensor *d = tr->grads->views[i];
    train_rows *r = &g->rows[i];
    int64_t rows = d->shape[0], len = row_len(d);
    if (g->state[i] == TRAIN_G_STALE) {
        tr->target->grad_zero(d, 0, d->size);
        g->state[i] = TRAIN_G_ZERO;
    }
    bool track = g->state[i] != TRAIN_G_DENSE;
    if (track && !r->mark) {
        r->mark = ry_calloc((size_t)rows, 1);
        r->list = ry_calloc((size_t)rows, sizeof *r->list);
        if (!r->mark || !r->list) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t row = ids[k];
        if (track && !r->mark[row]) {
            r->mark[row] = 1;
            r->list[r->n++] = row;
        }
        /* a ZERO slab's rows are zeros: adding into them is 0 + x */
        g->bad[i] |= tr->target->grad_add(d, src, row * len, src_off + k * len, len, false);
    }
    if (track) g->state[i] = TRAIN_G_ROWS;
    return RY_OK;
}

/* grads[i] += v, a RY_VAL_ROWS of the parameter's shape: slice k added to
 * row index[k]. */
static ry_status add_rows(ry_trainer *tr, int i, const ry_value *v, ry_error *err) {
    return add_row_run(tr, i, v->rows.values, 0, v->rows.index, v->rows.n, err);
}

/* Whether the optimizer may read x where it is: the set's dtype, and not
 * inside the parameters or the optimizer's slots it writes. */
static bool readable_in_place(ry_trainer *tr, int i, const ry_tensor *x) {
    if (x->dtype != tr->grads->dtype || !ry_tensor_same_shape(x, tr->params->views[i]) ||
        ry_tensor_overlap(x, tr->params->slab))
        return false;
    for (int s = 0; s < ry_optim_slot_count(tr->optim); s++) {
        const ry_param_set *set = ry_optim_slot(tr->optim, s);
        const ry_tensor *st = set ? set->slab : ry_optim_slot_shard(tr->optim, s);
        if (st && ry_tensor_overlap(x, st)) return false;
    }
    return true;
}

/* The pending tuple's direct gradients go into the slab after all. */
static void flush_pending(ry_trainer *tr) {
    train_grad_state *g = &tr->g;
    if (!g->pending) return;
    const ry_value *t = g->pending;
    for (int i = 0; i < tr->params->n; i++)
        if (g->direct[i]) {
            add_dense(tr, i, t->tuple.fields[tr->grad_base + i]->tensor);
            g->direct[i] = false;
        }
    ry_value_release(g->pending);
    g->pending = NULL;
}

/* ---- sharded steps (train_dist.c) ------------------------------------ */

void train_grad_dense(ry_trainer *tr) {
    train_grad_state *g = &tr->g;
    flush_pending(tr);
    for (int i = 0; i < tr->params->n; i++)
        if (g->state[i] == TRAIN_G_STALE) {
            ry_tensor *t = tr->grads->views[i];
            tr->target->grad_zero(t, 0, t->size);
            g->state[i] = TRAIN_G_ZERO;
        }
}

const int64_t *train_grad_row_list(const ry_trainer *tr, int i, int64_t *n) {
    uint8_t st = tr->g.state[i];
    *n = st == TRAIN_G_ROWS ? tr->g.rows[i].n : st == TRAIN_G_ZERO ? 0 : -1;
    return *n > 0 ? tr->g.rows[i].list : NULL;
}

void train_grad_rows_clear(ry_trainer *tr, int i) {
    train_grad_state *g = &tr->g;
    if (g->state[i] == TRAIN_G_ROWS) zero_rows(tr, tr->grads->views[i], g->rows[i].list, g->rows[i].n);
    if (g->rows[i].mark) forget_rows(&g->rows[i]);
    g->state[i] = TRAIN_G_ZERO;
}

ry_status train_grad_rows_add(ry_trainer *tr, int i, const ry_tensor *src, int64_t src_off,
                              const int64_t *ids, int64_t n, ry_error *err) {
    return add_row_run(tr, i, src, src_off, ids, n, err);
}

void train_grad_zero_all(ry_trainer *tr) {
    train_grad_begin(tr);
    for (int i = 0; i < tr->params->n; i++) {
        ry_tensor *t = tr->grads->views[i];
        tr->target->grad_zero(t, 0, t->size);
        tr->g.state[i] = TRAIN_G_ZERO;
    }
}

void train_grad_reduced(ry_trainer *tr, const bool *as_rows) {
    train_grad_state *g = &tr->g;
    for (int i = 0; i < tr->params->n; i++) {
        if (as_rows && as_rows[i]) { /* train_rows.c left it ZERO or ROWS */
            g->direct[i] = false;
            g->bad[i] = true;
            continue;
        }
        if (g->rows[i].mark) forget_rows(&g->rows[i]);
        g->state[i] = TRAIN_G_DENSE;
        g->direct[i] = false;
        g->bad[i] = true; /* another rank's NaN: scan before the update */
    }
}

/* ---- steps ----------------------------------------------------------- */

void train_grad_begin(ry_trainer *tr) {
    train_grad_state *g = &tr->g;
    ry_value_release(g->pending);
    g->pending = NULL;
    for (int i = 0; i < tr->params->n; i++) {
        train_rows *r = &g->rows[i];
        if (g->state[i] == TRAIN_G_ROWS) {
            zero_rows(tr, tr->grads->views[i], r->list, r->n);
            g->state[i] = TRAIN_G_ZERO;
        } else if (g->state[i] == TRAIN_G_DENSE)
            g->state[i] = TRAIN_G_STALE;
        if (r->mark) forget_rows(r);
        g->direct[i] = false;
        g->bad[i] = false;
        g->taken[i] = false;
    }
    g->applied = false;
    g->last_scale = 1;
}

ry_status train_grad_take(ry_trainer *tr, ry_value *grads, ry_error *err) {
    train_grad_state *g = &tr->g;
    int n = tr->params->n;
    for (int i = 0; i < n; i++) {
        const ry_value *f = grads->tuple.fields[tr->grad_base + i];
        const ry_tensor *p = tr->params->views[i];
        bool ok = f->kind == RY_VAL_TENSOR ? f->tensor->size == p->size
                  : f->kind == RY_VAL_ROWS
                      ? f->rows.dtype == p->dtype && f->rows.ndim == p->ndim && p->ndim >= 1 &&
                            memcmp(f->rows.shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) == 0
                      : false;
        if (!ok)
            return ry_error_at(err, RY_NO_SPAN, "gradient of %%%s has the wrong shape",
                               tr->params->names[i]);
    }
    bool first = tr->naccum == 0 && !g->pending && !g->no_keep;
    if (!first) flush_pending(tr);
    bool keep = false;
    for (int i = 0; i < n; i++) {
        const ry_value *f = grads->tuple.fields[tr->grad_base + i];
        if (g->taken[i]) { /* copied in as the program finished it */
            g->taken[i] = false;
            continue;
        }
        if (f->kind == RY_VAL_ROWS) {
            if (add_rows(tr, i, f, err)) return RY_ERR;
        } else if (first && readable_in_place(tr, i, f->tensor))
            keep = g->direct[i] = true;
        else
            add_dense(tr, i, f->tensor);
    }
    if (keep) g->pending = ry_value_retain(grads);
    return RY_OK;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* clip_grad_value_ on the slab (after the pending gradients joined it);
 * rows outside a ROWS list are zeros and stay so. */
static void clip_values(ry_trainer *tr, double c) {
    for (int i = 0; i < tr->params->n; i++) {
        ry_tensor *t = tr->grads->views[i];
        train_rows *r = &tr->g.rows[i];
        /* ZERO: nothing to clamp; ROWS: the listed rows only */
        bool rows = tr->g.state[i] == TRAIN_G_ROWS || tr->g.state[i] == TRAIN_G_ZERO;
        int64_t len = rows ? row_len(t) : t->size, runs = rows ? r->n : 1;
        for (int64_t k = 0; k < runs; k++) {
            int64_t lo = rows ? r->list[k] * len : 0;
            tr->target->grad_clip(t, lo, len, c);
        }
    }
}

/* Parameter i's gradient for the optimizer, scanned for NaN/Inf (and its
 * norm taken) where no add pass did it already. -1, or the bad element. */
static int64_t prepare(ry_trainer *tr, int i, bool want_norm) {
    train_grad_state *g = &tr->g;
    ry_optim_grad *og = &g->ograds[i];
    double *norm = want_norm ? &g->norms[i] : NULL;
    memset(og, 0, sizeof *og);
    g->norms[i] = 0;
    if (g->direct[i]) {
        og->t = g->pending->tuple.fields[tr->grad_base + i]->tensor;
        return tr->target->grad_scan(og->t, NULL, 0, norm);
    }
    ry_tensor *t = tr->grads->views[i];
    og->t = t;
    if (g->state[i] == TRAIN_G_STALE) { /* no call wrote it: a zero gradient */
        tr->target->grad_zero(t, 0, t->size);
        g->state[i] = TRAIN_G_ZERO;
    }
    if (g->state[i] == TRAIN_G_ZERO || g->state[i] == TRAIN_G_ROWS) {
        train_rows *r = &g->rows[i];
        if (r->n > 1) qsort(r->list, (size_t)r->n, sizeof *r->list, cmp_i64);
        static const int64_t no_rows[1] = {0};
        if (ry_optim_zero_grad_is_identity(tr->optim, i) && t->ndim >= 1) {
            og->rows = r->list ? r->list : no_rows; /* none touched: nothing to do */
            og->nrows = r->n;
        }
        if (!norm && !g->bad[i]) return -1;
        return r->n ? tr->target->grad_scan(t, r->list, r->n, norm) : -1;
    }
    if (!norm && !g->bad[i]) return -1;
    return tr->target->grad_scan(t, NULL, 0, norm);
}

ry_status ry_trainer_apply(ry_trainer *tr, ry_error *err) {
    train_grad_state *g = &tr->g;
    int64_t step = ry_optim_step_count(tr->optim) + 1;
    if (tr->naccum == 0) return ry_error_at(err, RY_NO_SPAN, "apply without a gradient");
    tr->naccum = 0; /* whatever happens, the next accumulate starts a step */
    /* a sharded step's slab holds a sum of which the optimizer applies
     * w = dist_scale times: the clipping limits are divided by w, so they
     * bound the applied gradient, as in one process */
    double w = tr->dist_scale > 0 ? tr->dist_scale : 1;
    tr->dist_scale = 1;
    if (tr->opts.clip_value > 0) {
        flush_pending(tr);
        clip_values(tr, tr->opts.clip_value / w);
    }
    bool want_norm = tr->opts.clip_norm > 0;
    for (int i = 0; i < tr->params->n; i++) {
        int64_t elem = prepare(tr, i, want_norm);
        if (elem >= 0) {
            double v = NAN;
            if (train_read(g->ograds[i].t, elem, &v, err)) return RY_ERR;
            return ry_error_at(err, RY_NO_SPAN,
                               "step %lld: the gradient of parameter %%%s is %s at element %lld; "
                               "training stopped",
                               (long long)step, tr->params->names[i], isnan(v) ? "NaN" : "Inf",
                               (long long)elem);
        }
    }
    double scale = want_norm ? ry_clip_coef(tr->grads->dtype, g->norms, tr->params->n,
                                            tr->opts.clip_norm / w, NULL)
                             : 1.0;
    scale *= w;
    ry_optim_set_lr(tr->optim, ry_schedule_lr(&tr->opts.schedule, tr->base_lr, step - 1));
    if (ry_optim_step_grads(tr->optim, tr->params, g->ograds, scale, err)) return RY_ERR;
    /* a device's kernels report their failures here */
    if (tr->target->sync && tr->target->sync(err)) return RY_ERR;
    g->applied = true;
    g->last_scale = scale;
    return RY_OK;
}

/* The gradient set as the old path left it: every gradient in the slab,
 * clipped as the last apply clipped it. */
ry_param_set *ry_trainer_grads(ry_trainer *tr) {
    train_grad_state *g = &tr->g;
    flush_pending(tr);
    for (int i = 0; i < tr->params->n; i++) {
        ry_tensor *t = tr->grads->views[i];
        if (g->state[i] == TRAIN_G_STALE) {
            tr->target->grad_zero(t, 0, t->size);
            g->state[i] = TRAIN_G_ZERO;
        }
        if (!g->applied || g->last_scale == 1) continue;
        bool rows = g->state[i] == TRAIN_G_ROWS || g->state[i] == TRAIN_G_ZERO;
        int64_t len = rows ? row_len(t) : t->size, runs = rows ? g->rows[i].n : 1;
        for (int64_t k = 0; k < runs; k++)
            tr->target->grad_scale(t, rows ? g->rows[i].list[k] * len : 0, len, g->last_scale);
    }
    g->last_scale = 1;
    return tr->grads;
}

int64_t ry_trainer_grad_rows(const ry_trainer *tr, int i) {
    if (i < 0 || i >= tr->params->n) return -1;
    uint8_t st = tr->g.state[i];
    return st == TRAIN_G_ROWS ? tr->g.rows[i].n : st == TRAIN_G_ZERO && !tr->g.direct[i] ? 0 : -1;
}
