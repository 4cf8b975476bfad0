/*
 * train_rows.c: row-sparse gradients (an embedding's, RY_VAL_ROWS) reduced
 * across the shards of a step as rows instead of as a dense slab (issue 19
 * part 1). The Tree-LSTM's embedding is 18281 x 300 floats (21.9 MB), of
 * which a batch of 25 trees touches a few hundred rows.
 *
 * Every rank tells the others, in the step's exchange of losses (no
 * extra collective), how many rows each of its shards touched in each
 * parameter, or -1 where the gradient is dense. From those counts, which
 * every rank and one process with the same shards see alike, a parameter
 * goes as rows when every shard's gradient of it is row-sparse and
 *
 *     sum over shards of rows_s * (row bytes + 8)  <  the parameter's bytes
 *
 * (8: the row's id). Why that rule: gathered rows are what every rank
 * receives and adds, while the dense all-reduce moves about twice the
 * parameter per rank (a ring's reduce-scatter and all-gather) and the
 * deterministic gather S / N times it; below one dense copy the rows are
 * never more bytes and never more additions than the dense path, above
 * it they soon are (contiguous sums also run faster than row adds). The
 * decision is per parameter and per step.
 *
 * The rows go in two MPI_Allgatherv (the ids, int64, then the values),
 * each rank's shards' rows back to back in shard order. Every rank zeroes
 * its slab's rows of the parameter and adds every shard's rows into it in
 * shard order with the target's grad_add, listing the rows it touches, so
 * the parameter stays row-sparse for the update and the next step's
 * zeroing. Per element that is 0 + x_a + x_b ... over the shards that
 * touched the row, in shard order: the dense shard-order sum's bits (the
 * others' zeros add nothing, and a shard's rows are already 0 + x), so
 * --deterministic stays bitwise equal to one process, and without it the
 * rows are summed in rank order, exactly.
 *
 * With a sharded optimizer (train_zero.c) every rank gets the summed
 * rows whole and the reduce-scatter covers the rest of the slab.
 * Not used: with one shard (nothing to reduce), and in steps whose
 * all-reduce overlaps the backward pass (train_overlap.c: its buckets
 * cover the whole slab).
 */
#include <string.h>

#include "dist/comm.h"
#include "train/train_impl.h"

static int64_t row_len(const ry_tensor *t) { return t->size / t->shape[0]; }

int train_rows_head(const ry_trainer *tr) { return tr->params->n; }

ry_status train_rows_begin(ry_trainer *tr, train_dist *d, ry_error *err) {
    int np = tr->params->n, per = d->shards / d->size;
    d->rows_ok = false;
    /* a device's kernels have no row-sparse rules (RY_KERNEL_ROWS): its
     * gradients are dense, and the dense runs cover the slab */
    if (d->shards < 2 || tr->target->dev) return RY_OK;
    /* the dense runs between row-sparse parameters (train_dist.c) take
     * the views in index order */
    for (int i = 1; i < np; i++)
        if (train_view_offset(tr->grads, i) < train_view_offset(tr->grads, i - 1)) return RY_OK;
    d->as_rows = ry_calloc((size_t)np + 1, sizeof *d->as_rows);
    d->rcounts = ry_calloc(2 * (size_t)d->size, sizeof *d->rcounts);
    d->roff = ry_calloc(2 * ((size_t)d->shards + 1), sizeof *d->roff);
    d->scount = ry_calloc((size_t)d->shards * ((size_t)np + 1), sizeof *d->scount);
    d->shard_nids = ry_calloc((size_t)per, sizeof *d->shard_nids);
    if (!d->as_rows || !d->rcounts || !d->roff || !d->scount || !d->shard_nids)
        return ry_error_at(err, RY_NO_SPAN, "out of memory for the row-sparse reduction");
    d->rows_ok = true;
    return RY_OK;
}

void train_rows_end(train_dist *d) {
    ry_free(d->as_rows);
    ry_free(d->rcounts);
    ry_free(d->roff);
    ry_free(d->scount);
    ry_free(d->shard_nids);
    ry_free(d->shard_ids);
    ry_free(d->ids);
    ry_tensor_release(d->rows_buf);
    d->as_rows = NULL;
    d->rcounts = NULL;
    d->roff = d->scount = d->shard_nids = d->shard_ids = d->ids = NULL;
    d->rows_buf = NULL;
    d->shard_cap = d->ids_cap = 0;
    d->rows_ok = false;
}

/* Room for ids of every local shard (those before j kept). */
static ry_status grow_shard_ids(train_dist *d, int j, int64_t need, ry_error *err) {
    if (need <= d->shard_cap) return RY_OK;
    int per = d->shards / d->size;
    int64_t cap = need > 2 * d->shard_cap ? need : 2 * d->shard_cap;
    int64_t *fresh = ry_malloc(sizeof *fresh * (size_t)cap * (size_t)per);
    if (!fresh) return ry_error_at(err, RY_NO_SPAN, "out of memory for %lld row ids", (long long)need);
    for (int q = 0; d->shard_ids && q < j; q++)
        memcpy(fresh + q * cap, d->shard_ids + q * d->shard_cap, sizeof *fresh * (size_t)d->shard_nids[q]);
    ry_free(d->shard_ids);
    d->shard_ids = fresh;
    d->shard_cap = cap;
    return RY_OK;
}

ry_status train_rows_note(ry_trainer *tr, train_dist *d, int j, double *head, ry_error *err) {
    int np = tr->params->n;
    int64_t total = 0;
    for (int i = 0; i < np; i++) {
        int64_t n;
        train_grad_row_list(tr, i, &n);
        const ry_tensor *v = tr->grads->views[i];
        if (v->ndim < 1 || v->shape[0] < 1) n = -1;
        head[i] = (double)n;
        if (n > 0) total += n;
    }
    if (!d->rows_ok || !d->local) return RY_OK;
    /* the slab holds one shard at a time: keep this one's ids */
    if (grow_shard_ids(d, j, total, err)) return RY_ERR;
    if (!d->shard_ids) { /* no rows in any shard so far */
        d->shard_nids[j] = 0;
        return RY_OK;
    }
    int64_t *dst = d->shard_ids + j * d->shard_cap, k = 0;
    for (int i = 0; i < np; i++) {
        int64_t n;
        const int64_t *list = train_grad_row_list(tr, i, &n);
        if (head[i] <= 0) continue;
        memcpy(dst + k, list, sizeof *dst * (size_t)n);
        k += n;
    }
    d->shard_nids[j] = k;
    return RY_OK;
}

bool train_rows_plan(ry_trainer *tr, train_dist *d, const double *all, int nh, bool overlap) {
    int np = tr->params->n, per = d->shards / d->size, S = d->shards;
    if (!d->rows_ok) return false;
    int64_t es = (int64_t)ry_dtype_size(tr->grads->dtype);
    for (int s = 0; s < S; s++) /* shard s = rank s / per's local shard s % per */
        for (int i = 0; i < np; i++)
            d->scount[s * np + i] = (int64_t)all[(s / per) * nh + 2 + per + (s % per) * np + i];
    bool any = false;
    for (int i = 0; i < np; i++) {
        const ry_tensor *v = tr->grads->views[i];
        bool ok = !overlap && v->ndim >= 1 && v->shape[0] >= 1;
        int64_t len = ok ? row_len(v) : 0, bytes = 0;
        for (int s = 0; s < S && ok; s++) {
            int64_t c = d->scount[s * np + i];
            ok = c >= 0;
            if (ok) bytes += c * (len * es + 8);
        }
        d->as_rows[i] = ok && bytes < v->size * es;
        any |= d->as_rows[i];
    }
    /* where each shard's rows begin in the gathered buffers */
    int64_t *io = d->roff, *vo = d->roff + S + 1;
    io[0] = vo[0] = 0;
    for (int s = 0; s < S; s++) {
        io[s + 1] = io[s];
        vo[s + 1] = vo[s];
        for (int i = 0; i < np; i++)
            if (d->as_rows[i]) {
                io[s + 1] += d->scount[s * np + i];
                vo[s + 1] += d->scount[s * np + i] * row_len(tr->grads->views[i]);
            }
    }
    if (io[S] >= INT32_MAX || vo[S] >= INT32_MAX) { /* past one MPI call: dense */
        memset(d->as_rows, 0, sizeof *d->as_rows * (size_t)np);
        return false;
    }
    return any;
}

static ry_status room(ry_trainer *tr, train_dist *d, ry_error *err) {
    int S = d->shards;
    int64_t nid = d->roff[S] > 0 ? d->roff[S] : 1, nval = d->roff[2 * S + 1] > 0 ? d->roff[2 * S + 1] : 1;
    if (nid > d->ids_cap) {
        int64_t *fresh = ry_malloc(sizeof *fresh * (size_t)nid);
        if (!fresh) return ry_error_at(err, RY_NO_SPAN, "out of memory for %lld row ids", (long long)nid);
        ry_free(d->ids);
        d->ids = fresh;
        d->ids_cap = nid;
    }
    if (!d->rows_buf || d->rows_buf->size < nval) {
        ry_tensor *fresh = ry_tensor_new(tr->grads->dtype, 1, &nval);
        if (!fresh) return ry_error_at(err, RY_NO_SPAN, "out of memory for %lld gradient elements", (long long)nval);
        ry_tensor_release(d->rows_buf);
        d->rows_buf = fresh;
    }
    return RY_OK;
}

/* This rank's shards' rows into their places in ids and rows_buf. */
static void pack(ry_trainer *tr, train_dist *d) {
    int np = tr->params->n, per = d->shards / d->size, S = d->shards;
    const ry_param_set *g = tr->grads;
    for (int j = 0; j < per; j++) {
        int s = d->rank * per + j;
        int64_t io = d->roff[s], vo = d->roff[S + 1 + s], k = 0;
        for (int i = 0; i < np; i++) {
            int64_t c = d->scount[s * np + i], n;
            const int64_t *list = d->local ? d->shard_ids + j * d->shard_cap + k
                                           : train_grad_row_list(tr, i, &n);
            if (d->local && c > 0) k += c; /* kept for every row-sparse parameter */
            if (!d->as_rows[i] || c <= 0) continue;
            const ry_tensor *src = d->local ? d->local : g->slab;
            int64_t base = (d->local ? j * g->slab->size : 0) + train_view_offset(g, i);
            int64_t len = row_len(g->views[i]);
            memcpy(d->ids + io, list, sizeof *list * (size_t)c);
            for (int64_t q = 0; q < c; q++)
                tr->target->grad_add(d->rows_buf, src, vo + q * len, base + list[q] * len, len, true);
            io += c;
            vo += c * len;
        }
    }
}

ry_status train_rows_reduce(ry_trainer *tr, train_dist *d, int64_t *bytes, ry_error *err) {
    int np = tr->params->n, per = d->shards / d->size, S = d->shards;
    int64_t step = ry_trainer_steps(tr) + 1;
    ry_dtype dt = tr->grads->dtype;
    if (room(tr, d, err)) return RY_ERR;
    pack(tr, d);
    int64_t *io = d->roff, *vo = d->roff + S + 1;
    int lo = d->rank * per, hi = lo + per;
    *bytes = (io[hi] - io[lo]) * 8 + (vo[hi] - vo[lo]) * (int64_t)ry_dtype_size(dt);
    if (d->on) {
        int *counts = d->rcounts, *displs = d->rcounts + d->size;
        for (int r = 0; r < d->size; r++) {
            counts[r] = (int)(io[(r + 1) * per] - io[r * per]);
            displs[r] = (int)io[r * per];
        }
        if (ry_comm_allgatherv(d->ids, counts, displs, RY_INT64, "the gradient rows' ids' gather",
                               step, err))
            return RY_ERR;
        for (int r = 0; r < d->size; r++) {
            counts[r] = (int)(vo[(r + 1) * per] - vo[r * per]);
            displs[r] = (int)vo[r * per];
        }
        if (ry_comm_allgatherv(d->rows_buf->data, counts, displs, dt, "the gradient rows' gather",
                               step, err))
            return RY_ERR;
    }
    for (int i = 0; i < np; i++)
        if (d->as_rows[i]) train_grad_rows_clear(tr, i);
    for (int s = 0; s < S; s++) { /* shard order */
        int64_t ii = io[s], vv = vo[s];
        for (int i = 0; i < np; i++) {
            int64_t c = d->scount[s * np + i];
            if (!d->as_rows[i] || c <= 0) continue;
            if (train_grad_rows_add(tr, i, d->rows_buf, vv, d->ids + ii, c, err)) return RY_ERR;
            ii += c;
            vv += c * row_len(tr->grads->views[i]);
        }
    }
    return RY_OK;
}
