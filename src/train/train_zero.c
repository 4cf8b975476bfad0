/*
 * train_zero.c: --shard-optimizer (ry_fit_opts.shard_optimizer), ZeRO-1
 * as llm.c does it. The flat parameter slab of L elements is cut into
 * one slice per rank, rank r owning [r*L/N, (r+1)*L/N) (uneven when N
 * does not divide L; a slice may cut a parameter anywhere): its
 * optimizer keeps the state of that slice only (ry_optim_shard), the
 * step's gradient is reduce-scattered so each rank gets the reduced
 * gradient of its slice, each rank updates its slice and the parameters
 * are all-gathered. The gradient slab itself stays whole on every rank
 * (each rank's shards are computed into it): this is stage 1, the
 * optimizer state, which for Adam is twice the parameters.
 *
 * With --deterministic the reduce-scatter is train_dist.c's shard-order
 * sum restricted to the slice: every rank sends each other rank the
 * slice's part of its shard gradients (MPI_Alltoallv), and the owner
 * adds them in shard order with the target's grad_add, the same
 * additions in the same order per element as the unsharded sum; the
 * update rules are elementwise, so the parameters are bit for bit those
 * of the unsharded run. Without it, MPI_Reduce_scatter (to rounding).
 * Both go a bucket of each slice at a time, and leave out the parameters
 * that go as rows this step (train_rows.c gathers those whole on every
 * rank, so each owner finds its slice of them summed). Not bitwise: clipping by
 * norm, whose per-parameter norms are summed from the slices' partial
 * sums (to rounding).
 *
 * Checkpoints hold the whole state: before rank 0 saves, the slices are
 * gathered onto it (zero_full), so a sharded run resumes unsharded, on
 * another number of ranks, or sharded again (ry_optim_load_slot keeps
 * each rank's slice of a whole set). At the end of a fit the slices are
 * all-gathered and the optimizer is whole again.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "train/train_impl.h"

static int64_t lo_of(const train_dist *d, int r) { return d->zbound[r]; }
static int64_t len_of(const train_dist *d, int r) { return d->zbound[r + 1] - d->zbound[r]; }

ry_status train_zero_begin(ry_trainer *tr, train_dist *d, ry_error *err) {
    int n = d->size, per = d->shards / d->size;
    int64_t len = tr->params->slab->size, most = 0;
    d->zbound = ry_calloc((size_t)n + 1, sizeof *d->zbound);
    d->zcounts = ry_calloc(4 * (size_t)n, sizeof *d->zcounts);
    if (!d->zbound || !d->zcounts) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    for (int r = 0; r <= n; r++) d->zbound[r] = (int64_t)r * len / n;
    for (int r = 0; r < n; r++)
        if (len_of(d, r) > most) most = len_of(d, r);
    if (most > INT32_MAX) return ry_error_at(err, RY_NO_SPAN, "a slice of %lld elements", (long long)most);
    /* a round moves a bucket of every slice: per shards of each */
    int64_t b = d->bucket < most ? d->bucket : most > 0 ? most : 1;
    int64_t nsend = (int64_t)n * per * b, nrecv = d->det ? (int64_t)d->shards * b : b;
    if (nsend > INT32_MAX || nrecv > INT32_MAX) b = INT32_MAX / ((int64_t)n * per) / 2;
    d->zbucket = b;
    nsend = (int64_t)n * per * b;
    nrecv = d->det ? (int64_t)d->shards * b : b;
    if (!(d->zsend = ry_tensor_new(tr->grads->dtype, 1, &nsend)) ||
        !(d->zrecv = ry_tensor_new(tr->grads->dtype, 1, &nrecv)))
        return ry_error_at(err, RY_NO_SPAN, "out of memory for the reduce-scatter's buffers");
    return ry_optim_shard(tr->optim, tr->params, lo_of(d, d->rank), d->zbound[d->rank + 1], err);
}

/* counts/displs of every slice's whole, for the all-gathers */
static void slice_counts(const train_dist *d, int *counts, int *displs) {
    for (int r = 0; r < d->size; r++) {
        counts[r] = (int)len_of(d, r);
        displs[r] = (int)lo_of(d, r);
    }
}

static ry_status gather_slots(ry_trainer *tr, const train_dist *d, bool all, ry_error *err) {
    int *counts = d->zcounts, *displs = d->zcounts + d->size;
    slice_counts(d, counts, displs);
    int64_t step = ry_trainer_steps(tr);
    for (int i = 0; i < ry_optim_slot_count(tr->optim); i++) {
        ry_tensor *slab = all ? ry_optim_slot(tr->optim, i)->slab : NULL;
        if (all && ry_comm_allgatherv(slab->data, counts, displs, slab->dtype,
                                      "the optimizer state's all-gather", step, err))
            return RY_ERR;
        if (all) continue;
        const ry_tensor *mine = ry_optim_slot_shard(tr->optim, i);
        void *to = tr->zero_full ? tr->zero_full[i]->slab->data : NULL;
        if (ry_comm_gatherv(mine->data, (int)mine->size, to, counts, displs, mine->dtype, 0,
                            "the optimizer state's gather", step, err))
            return RY_ERR;
    }
    return RY_OK;
}

void train_zero_end(ry_trainer *tr, train_dist *d, bool whole) {
    ry_error e;
    /* only when every rank ends here together: a collective that the
     * others never reach would wait for the watchdog */
    if (whole && d->zbound && ry_optim_shard_range(tr->optim, NULL, NULL) &&
        ry_optim_unshard(tr->optim, tr->params, &e) == RY_OK)
        gather_slots(tr, d, true, &e);
    ry_free(d->zbound);
    ry_free(d->zcounts);
    ry_tensor_release(d->zsend);
    ry_tensor_release(d->zrecv);
    d->zbound = NULL;
    d->zcounts = NULL;
    d->zsend = d->zrecv = NULL;
}

ry_status train_zero_gather(ry_trainer *tr, const train_dist *d, ry_error *err) {
    int ns = ry_optim_slot_count(tr->optim);
    ry_status st = RY_OK;
    if (d->rank == 0) {
        tr->zero_full = ry_calloc((size_t)ns + 1, sizeof *tr->zero_full);
        for (int i = 0; tr->zero_full && i < ns; i++)
            if (!(tr->zero_full[i] = ry_params_like(tr->params))) {
                train_zero_gather_free(tr);
                break;
            }
        if (!tr->zero_full) st = ry_error_at(err, RY_NO_SPAN, "out of memory for the optimizer state");
    }
    /* rank 0 short of memory: all stop here rather than wait in the gather */
    if (train_dist_agree(d, st, ry_trainer_steps(tr), err)) return RY_ERR;
    return gather_slots(tr, d, false, err);
}

void train_zero_gather_free(ry_trainer *tr) {
    for (int i = 0; tr->zero_full && tr->zero_full[i]; i++) ry_params_free(tr->zero_full[i]);
    ry_free(tr->zero_full);
    tr->zero_full = NULL;
}

/* ---- the reduce-scatter ---------------------------------------------- */

/* Rank r's part of round t: [*lo, *lo + n) of the slab. */
static int64_t round_part(const train_dist *d, int r, int64_t t, int64_t *lo) {
    int64_t off = t * d->zbucket, n = len_of(d, r) - off;
    *lo = lo_of(d, r) + off;
    return n < 0 ? 0 : n < d->zbucket ? n : d->zbucket;
}

/* The dense pieces of the slab: it less the parameters that go as rows
 * this step (train_rows.c; rows NULL: none), which every rank has already
 * summed whole. The next piece at or after *at and before end: its start
 * (-1: none), *len its length; *at moves past it. Parameters lie in the
 * slab in index order (train_rows_begin checks it). */
static int64_t next_dense(const ry_trainer *tr, const bool *rows, int64_t *at, int64_t end,
                          int64_t *len) {
    const ry_param_set *g = tr->grads;
    int64_t a = *at;
    for (int i = 0; rows && i < g->n && a < end; i++) {
        int64_t o = train_view_offset(g, i), e = o + g->views[i]->size;
        if (!rows[i] || e <= a) continue;
        if (o > a) { /* [a, o) is dense */
            *len = (o < end ? o : end) - a;
            *at = a + *len;
            return a;
        }
        a = e; /* inside a parameter of rows: skip it */
    }
    if (a >= end) return -1;
    *len = end - a;
    *at = end;
    return a;
}

/* The count of dense elements in [lo, lo + n). */
static int64_t dense_count(const ry_trainer *tr, const bool *rows, int64_t lo, int64_t n) {
    int64_t c = 0, len, at = lo;
    while (next_dense(tr, rows, &at, lo + n, &len) >= 0) c += len;
    return c;
}

/* Round t with --deterministic: shard j of rank p's part for rank q goes
 * from p to q; q sums its S parts in shard order into the slab. */
static ry_status round_det(ry_trainer *tr, const train_dist *d, const bool *rows, int64_t t,
                           ry_error *err) {
    ry_tensor *g = tr->grads->slab;
    int n = d->size, per = d->shards / d->size;
    int *sc = d->zcounts, *sd = sc + n, *rc = sd + n, *rd = rc + n;
    size_t es = ry_dtype_size(g->dtype);
    int64_t at = 0, mylo, mymax = round_part(d, d->rank, t, &mylo);
    int64_t mine = dense_count(tr, rows, mylo, mymax), len, p;
    for (int q = 0; q < n; q++) {
        int64_t lo, m = round_part(d, q, t, &lo);
        sd[q] = (int)at;
        sc[q] = (int)(per * dense_count(tr, rows, lo, m));
        for (int j = 0; j < per; j++) {
            const char *src = d->local ? (const char *)d->local->data + (size_t)(j * g->size) * es
                                       : (const char *)g->data;
            for (int64_t c = lo; (p = next_dense(tr, rows, &c, lo + m, &len)) >= 0; at += len)
                memcpy((char *)d->zsend->data + (size_t)at * es, src + (size_t)p * es,
                       (size_t)len * es);
        }
        rc[q] = (int)(per * mine);
        rd[q] = (int)(q * per * mine);
    }
    if (ry_comm_alltoallv(d->zsend->data, sc, sd, d->zrecv->data, rc, rd, g->dtype,
                          "the gradient reduce-scatter", ry_trainer_steps(tr) + 1, err))
        return RY_ERR;
    for (int s = 0; mine > 0 && s < d->shards; s++) {
        int64_t k = 0;
        for (int64_t c = mylo; (p = next_dense(tr, rows, &c, mylo + mymax, &len)) >= 0; k += len)
            tr->target->grad_add(g, d->zrecv, p, s * mine + k, len, s == 0);
    }
    return RY_OK;
}

static ry_status round_sum(ry_trainer *tr, const train_dist *d, const bool *rows, int64_t t,
                           ry_error *err) {
    ry_tensor *g = tr->grads->slab;
    int *counts = d->zcounts;
    size_t es = ry_dtype_size(g->dtype);
    int64_t at = 0, mylo, mine = round_part(d, d->rank, t, &mylo), len, p;
    for (int q = 0; q < d->size; q++) {
        int64_t lo, m = round_part(d, q, t, &lo), from = at;
        for (int64_t c = lo; (p = next_dense(tr, rows, &c, lo + m, &len)) >= 0; at += len)
            memcpy((char *)d->zsend->data + (size_t)at * es, (const char *)g->data + (size_t)p * es,
                   (size_t)len * es);
        counts[q] = (int)(at - from);
    }
    if (ry_comm_reduce_scatter_sum(d->zsend->data, d->zrecv->data, counts, g->dtype,
                                   "the gradient reduce-scatter", ry_trainer_steps(tr) + 1, err))
        return RY_ERR;
    int64_t k = 0;
    for (int64_t c = mylo; (p = next_dense(tr, rows, &c, mylo + mine, &len)) >= 0; k += len)
        memcpy((char *)g->data + (size_t)p * es, (const char *)d->zrecv->data + (size_t)k * es,
               (size_t)len * es);
    return RY_OK;
}

ry_status train_zero_reduce(ry_trainer *tr, const train_dist *d, const bool *rows, int64_t *n,
                            ry_error *err) {
    int64_t most = 0;
    *n = dense_count(tr, rows, 0, tr->grads->slab->size);
    for (int r = 0; r < d->size; r++)
        if (len_of(d, r) > most) most = len_of(d, r);
    for (int64_t t = 0; t * d->zbucket < most; t++)
        if (d->det ? round_det(tr, d, rows, t, err) : round_sum(tr, d, rows, t, err)) return RY_ERR;
    return RY_OK;
}

/* ---- the update -------------------------------------------------------- */

/* Parameter i's part of this rank's slice as a view of t's slab, or NULL
 * (none, or out of memory: *oom). */
static ry_tensor *part_of(ry_param_set *set, int i, int64_t lo, int64_t hi, bool *oom) {
    size_t es = ry_dtype_size(set->dtype);
    const ry_tensor *v = set->views[i];
    int64_t off = (int64_t)(((const char *)v->data - (const char *)set->slab->data) / (ptrdiff_t)es);
    int64_t a = off > lo ? off : lo, b = off + v->size < hi ? off + v->size : hi, n = b - a;
    if (n <= 0) return NULL;
    ry_tensor *t = ry_tensor_view(set->slab, (size_t)a * es, set->dtype, 1, &n);
    *oom |= !t;
    return t;
}

/* exchanged per rank: [0] first bad parameter (or -1), [1] its element,
 * [2] the value, then per parameter the slice's sum of squares */
enum { Z_BAD, Z_ELEM, Z_VALUE, Z_SQ };

static ry_status scan_slice(ry_trainer *tr, const train_dist *d, bool want_norm, double *mine,
                            ry_error *err) {
    int64_t lo = lo_of(d, d->rank), hi = d->zbound[d->rank + 1];
    bool oom = false;
    mine[Z_BAD] = -1;
    for (int i = 0; i < tr->params->n; i++) {
        ry_tensor *t = part_of(tr->grads, i, lo, hi, &oom);
        double norm = 0;
        int64_t e = t ? tr->target->grad_scan(t, NULL, 0, want_norm ? &norm : NULL) : -1;
        mine[Z_SQ + i] = norm * norm;
        if (e >= 0 && mine[Z_BAD] < 0) {
            const ry_tensor *v = tr->grads->views[i];
            mine[Z_BAD] = i;
            mine[Z_ELEM] = (double)(((const char *)t->data - (const char *)v->data) /
                                    (ptrdiff_t)ry_dtype_size(v->dtype) + e);
            mine[Z_VALUE] = ry_tensor_get(t, e);
        }
        ry_tensor_release(t);
    }
    return oom ? ry_error_at(err, RY_NO_SPAN, "out of memory") : RY_OK;
}

/* ry_trainer_apply for a sharded optimizer: the slice's gradient (the
 * rest of the slab is this rank's own) is checked and clipped, the
 * checks and norms exchanged, the slice updated, the parameters
 * all-gathered. */
ry_status train_zero_apply(ry_trainer *tr, train_dist *d, ry_error *err) {
    train_grad_state *g = &tr->g;
    int np = tr->params->n, nx = Z_SQ + np;
    int64_t step = ry_optim_step_count(tr->optim) + 1, lo = lo_of(d, d->rank);
    tr->naccum = 0;
    double w = tr->dist_scale > 0 ? tr->dist_scale : 1;
    tr->dist_scale = 1;
    if (tr->opts.clip_value > 0)
        tr->target->grad_clip(tr->grads->slab, lo, len_of(d, d->rank), tr->opts.clip_value / w);
    bool want_norm = tr->opts.clip_norm > 0;
    double *x = ry_calloc((size_t)nx * (size_t)(d->size + 1), sizeof *x), *all = x + nx;
    if (!x) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    ry_status st = scan_slice(tr, d, want_norm, x, err);
    if (st == RY_OK)
        st = ry_comm_allgather(x, nx * (int64_t)sizeof *x, all, "the exchange of gradient checks",
                               step, err);
    int bad = -1;
    double elem = 0, val = 0;
    for (int i = 0; i < np; i++) g->norms[i] = 0;
    for (int r = 0; st == RY_OK && r < d->size; r++) {
        const double *y = all + (size_t)r * (size_t)nx;
        /* ranks hold the slab in order: the lowest rank's first is the first */
        if (y[Z_BAD] >= 0 && bad < 0) bad = (int)y[Z_BAD], elem = y[Z_ELEM], val = y[Z_VALUE];
        for (int i = 0; i < np; i++) g->norms[i] += y[Z_SQ + i];
    }
    ry_free(x);
    if (st) return RY_ERR;
    if (bad >= 0)
        return ry_error_at(err, RY_NO_SPAN,
                           "step %lld: the gradient of parameter %%%s is %s at element %lld; "
                           "training stopped",
                           (long long)step, tr->params->names[bad], isnan(val) ? "NaN" : "Inf",
                           (long long)elem);
    for (int i = 0; i < np; i++) {
        g->norms[i] = sqrt(g->norms[i]);
        g->ograds[i] = (ry_optim_grad){.t = tr->grads->views[i]};
    }
    double scale = want_norm ? ry_clip_coef(tr->grads->dtype, g->norms, np, tr->opts.clip_norm / w,
                                            NULL)
                             : 1.0;
    scale *= w;
    ry_optim_set_lr(tr->optim, ry_schedule_lr(&tr->opts.schedule, tr->base_lr, step - 1));
    if (ry_optim_step_grads(tr->optim, tr->params, g->ograds, scale, err)) return RY_ERR;
    int *counts = d->zcounts, *displs = d->zcounts + d->size;
    slice_counts(d, counts, displs);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = ry_comm_allgatherv(tr->params->slab->data, counts, displs, tr->params->dtype,
                            "the parameters' all-gather", step, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    d->t_reduce += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (st) return RY_ERR;
    g->applied = true;
    g->last_scale = scale;
    return RY_OK;
}
