/*
 * train_dist.c: a fit's steps across the ranks of an MPI job (dist.h;
 * the collectives are src/dist/comm.h's), and the deterministic sharded
 * step, which one process runs the same way.
 *
 * A global batch of k examples (the seeded loader's, the same on every
 * rank) is cut into S shards of consecutive examples, shard s holding
 * [s*k/S, (s+1)*k/S); rank r of N computes shards r*S/N .. (r+1)*S/N - 1.
 * A shard's gradient is the trainer's as one process computes it for
 * those examples (one call, or one per example summed in order). Shards
 * are weighted as one process weighs its examples: a batched model's loss
 * is a mean, so shard s counts k_s/k (1/S for equal shards, applied by
 * the optimizer's scale, free; unequal ones are scaled before the
 * reduction); a per-example model's gradients are sums (weight 1).
 *
 * Without --deterministic, S = N and the slab is summed in place with
 * MPI_Allreduce in buckets: equal to one process to rounding (where
 * train_overlap.c can, each bucket starts as the backward pass finishes
 * its gradients, MPI_Iallreduce, before the exchange below). With
 * --shard-optimizer, train_zero.c reduce-scatters instead and each rank
 * updates its slice.
 * With it, every shard's gradient is gathered on every rank (a bucket at
 * a time, S buckets of memory) and summed there in shard order, left to
 * right, with the target's grad_add. One process with the same S runs the
 * same shards and the same sum, so for any N dividing S the parameters
 * after each step are bit for bit those of one process with S shards (and
 * of a run resumed on another N with the same S). Not promised: equality
 * to one process that takes the batch in one call (S = 1 is that process,
 * to rounding), or across different S.
 *
 * On a device target (the slab in device memory) one process sums its
 * shards there with the device's grad_add. Across ranks MPI reads host
 * memory, so each rank copies its gradient (each shard's, deterministic)
 * to a host buffer, the reduction above runs there with the CPU's
 * grad_add (the same IEEE additions in the same order: the device's bits)
 * and the sum goes back up before the device's optimizer update. Not
 * there: --shard-optimizer (refused), the overlap, and the row-sparse
 * reduction (a device's kernels yield no row-sparse gradients).
 *
 * Each step first exchanges, per rank, whether it failed, its stop
 * request and its shards' loss sums, so an error on one rank stops all of
 * them at that step with its message, and a stop request anywhere stops
 * all after it. The exchange also carries each shard's count of touched
 * rows per parameter: row-sparse gradients (embeddings) go as rows where
 * that is smaller (train_rows.c, its size rule), and the dense reduction
 * above covers the runs of the slab between them.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "train/train_impl.h"

#define MSG 256 /* bytes of a failed rank's message passed to the others */

ry_status train_dist_begin(ry_trainer *tr, const ry_fit_opts *fo, train_dist *d, ry_error *err) {
    memset(d, 0, sizeof *d);
    bool on = !fo->local && ry_comm_active();
    d->rank = on ? ry_dist_rank() : 0;
    d->size = on ? ry_dist_size() : 1;
    d->on = d->size > 1;
    d->det = fo->deterministic;
    d->sharded = d->on || d->det;
    if (fo->shards < 0 || (fo->shards > 0 && !d->det))
        return ry_error_at(err, RY_NO_SPAN, "%d shards: shards are for deterministic runs",
                           fo->shards);
    if (fo->shard_optimizer && d->on && tr->target->dev)
        return ry_error_at(err, RY_NO_SPAN,
                           "--shard-optimizer on target %s is not supported yet (its slices of the "
                           "optimizer's state and the parameters' all-gather are host memory): "
                           "leave it out, and each rank keeps the whole state on its device",
                           tr->target->name);
    /* MPI reads host memory: a device run's reduction across ranks goes
     * through a host copy of the slab (d->host); alone, the shards are
     * summed on the device */
    d->stage = d->on && tr->target->dev;
    d->shards = d->det && fo->shards > 0 ? fo->shards : d->size;
    if (d->shards % d->size != 0)
        return ry_error_at(err, RY_NO_SPAN,
                           "%d shards cannot be dealt evenly to %d ranks: use a multiple of them",
                           d->shards, d->size);
    int64_t es = (int64_t)ry_dtype_size(tr->grads->dtype), n = tr->grads->slab->size;
    int64_t bucket = (fo->bucket_bytes > 0 ? fo->bucket_bytes : 4 << 20) / es;
    if (bucket < 1) bucket = 1;
    if (bucket > (INT32_MAX - 64) / d->shards) bucket = (INT32_MAX - 64) / d->shards;
    d->bucket = bucket < n ? bucket : n;
    int per = d->shards / d->size;
    if (d->det && per > 1) {
        int64_t len = (int64_t)per * n;
        ry_allocator *on = tr->target->dev && !d->stage ? tr->target->allocator() : NULL;
        if (!(d->local = on ? ry_tensor_new_on(on, tr->grads->dtype, 1, &len)
                            : ry_tensor_new(tr->grads->dtype, 1, &len)))
            return ry_error_at(err, RY_NO_SPAN, "out of memory for %d shard gradients%s%s", per,
                               on ? " on " : "", on ? tr->target->name : "");
    }
    if (d->stage && !(d->host = ry_tensor_new(tr->grads->dtype, 1, &n))) {
        train_dist_end(tr, d, false);
        return ry_error_at(err, RY_NO_SPAN, "out of memory for the gradient's host copy");
    }
    d->reduce_bytes = n * es;
    d->zero = fo->shard_optimizer && d->on;
    if (d->zero) {
        if (train_zero_begin(tr, d, err)) {
            train_dist_end(tr, d, false);
            return RY_ERR;
        }
    } else if (d->det && d->on) {
        int64_t len = (int64_t)d->shards * d->bucket;
        if (!(d->gather = ry_tensor_new(tr->grads->dtype, 1, &len))) {
            train_dist_end(tr, d, false);
            return ry_error_at(err, RY_NO_SPAN, "out of memory for the gather buffer");
        }
        d->reduce_bytes = per * n * es; /* each rank's shards, gathered everywhere */
    }
    if (train_rows_begin(tr, d, err)) {
        train_dist_end(tr, d, false);
        return RY_ERR;
    }
    d->ov = fo->no_overlap ? NULL : train_overlap_new(tr, d);
    return RY_OK;
}

void train_dist_end(ry_trainer *tr, train_dist *d, bool whole) {
    if (d->zero) train_zero_end(tr, d, whole);
    train_overlap_free(d->ov);
    d->ov = NULL;
    train_rows_end(d);
    ry_tensor_release(d->local);
    ry_tensor_release(d->gather);
    ry_tensor_release(d->host);
    d->local = d->gather = d->host = NULL;
}

static int64_t step_of(const ry_trainer *tr) { return ry_trainer_steps(tr) + 1; }

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ry_status train_dist_agree(const train_dist *d, ry_status st, int64_t step, ry_error *err) {
    if (!d->on) return st;
    int n = d->size;
    char *all = ry_calloc((size_t)n, MSG + 1);
    char mine[MSG + 1];
    memset(mine, 0, sizeof mine);
    if (st) snprintf(mine + 1, MSG, "%s", err->msg[0] ? err->msg : "failed");
    mine[0] = st ? 1 : 0;
    ry_error e2;
    if (!all) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    if (ry_comm_allgather(mine, MSG + 1, all, "the exchange of the ranks' status", step, &e2)) {
        ry_free(all);
        *err = e2;
        return RY_ERR;
    }
    int bad = -1;
    for (int r = 0; r < n && bad < 0; r++)
        if (all[(size_t)r * (MSG + 1)]) bad = r;
    if (bad >= 0 && !st)
        ry_error_at(err, RY_NO_SPAN, "rank %d of %d: %s", bad, n, all + (size_t)bad * (MSG + 1) + 1);
    ry_free(all);
    return bad >= 0 ? RY_ERR : RY_OK;
}

ry_status train_dist_bcast(const train_dist *d, void *buf, int64_t n, int64_t step, ry_error *err) {
    return d->on ? ry_comm_bcast(buf, n, 0, "a broadcast from rank 0", step, err) : RY_OK;
}

ry_status train_dist_barrier(const train_dist *d, int64_t step, ry_error *err) {
    return d->on ? ry_comm_barrier("the barrier before a checkpoint", step, err) : RY_OK;
}

/* ---- a step's shards ------------------------------------------------ */

/* Shard s's gradient into the slab, alone (the step's earlier shards are
 * not in it); *lsum: its examples' loss sum. */
static ry_status shard_grad(ry_trainer *tr, const train_dist *d, const ry_train_data *data,
                            const int64_t *idx, int64_t k, int s, double *lsum, ry_error *err) {
    int64_t lo = s * k / d->shards, hi = (s + 1) * k / d->shards, ks = hi - lo;
    tr->naccum = 0; /* from zero: the next accumulate begins afresh */
    *lsum = 0;
    if (ks == 0) {
        train_grad_zero_all(tr);
        return RY_OK;
    }
    double mean;
    if (train_batch_grad(tr, data, idx + lo, ks, &mean, lsum, err)) return RY_ERR;
    train_grad_dense(tr);
    /* a mean loss: unequal shards weigh k_s/k before the sum */
    if (!data->per_example && k % d->shards != 0)
        tr->target->grad_scale(tr->grads->slab, 0, tr->grads->slab->size, (double)ks / (double)k);
    return RY_OK;
}

/* What the reduction sums into, and whose kernels sum: the slab, or
 * (staged) its host copy with the CPU's grad_add, the device's IEEE adds
 * in the same order, so the same bits. */
static ry_tensor *red_slab(const ry_trainer *tr, const train_dist *d) {
    return d->stage ? d->host : tr->grads->slab;
}

static const ry_target *red_target(const ry_trainer *tr, const train_dist *d) {
    return d->stage ? ry_target_cpu() : tr->target;
}

/* The staged gradient slab, whole, between the device and the host
 * buffer buf (down: to the host); the target counts the bytes as it
 * counts every copy (--profile's footer). */
static ry_status cross(ry_trainer *tr, void *buf, bool down, ry_error *err) {
    ry_tensor *g = tr->grads->slab;
    ry_status st = down ? tr->target->download(buf, g, ry_tensor_nbytes(g), err)
                        : tr->target->upload(g, buf, ry_tensor_nbytes(g), err);
    if (st) ry_error_prefix(err, "the gradient's copy %s for the reduction across ranks",
                            down ? "to the host" : "back to the device");
    return st;
}

/* The sum over shards in shard order of bucket [lo, lo+n), into the slab.
 * Shard s's values: the gather buffer (across ranks), this rank's local
 * copies (one process, several shards), or the slab itself (one shard). */
static void sum_bucket(ry_trainer *tr, const train_dist *d, int64_t lo, int64_t n) {
    ry_tensor *g = red_slab(tr, d);
    int64_t len = g->size;
    for (int s = 0; s < d->shards; s++) {
        const ry_tensor *src = d->on ? d->gather : d->local ? d->local : g;
        int64_t off = d->on ? s * n : d->local ? s * len + lo : lo;
        red_target(tr, d)->grad_add(g, src, lo, off, n, s == 0);
    }
}

/* The slab's elements [from, to) reduced (det, or the all-reduce). */
static ry_status reduce_det(ry_trainer *tr, const train_dist *d, int64_t from, int64_t to,
                            ry_error *err) {
    ry_tensor *g = red_slab(tr, d);
    int64_t len = g->size, es = (int64_t)ry_dtype_size(g->dtype), step = step_of(tr);
    int per = d->shards / d->size;
    for (int64_t lo = from; lo < to; lo += d->bucket) {
        int64_t n = to - lo < d->bucket ? to - lo : d->bucket;
        if (d->on) {
            const char *src = d->local ? (const char *)d->local->data : (const char *)g->data;
            if (ry_comm_allgather_runs(src + lo * es, per, n, len, g->dtype, d->gather->data,
                                       "the gradient gather", step, err))
                return RY_ERR;
        }
        sum_bucket(tr, d, lo, n);
    }
    return RY_OK;
}

static ry_status reduce_sum(ry_trainer *tr, const train_dist *d, int64_t from, int64_t to,
                            ry_error *err) {
    ry_tensor *g = red_slab(tr, d);
    int64_t es = (int64_t)ry_dtype_size(g->dtype);
    for (int64_t lo = from; lo < to; lo += d->bucket) {
        int64_t n = to - lo < d->bucket ? to - lo : d->bucket;
        if (ry_comm_allreduce_sum((char *)g->data + lo * es, n, g->dtype, "the gradient all-reduce",
                                  step_of(tr), err))
            return RY_ERR;
    }
    return RY_OK;
}

/* This rank's shards, each kept (det, several) in the local buffer
 * (staged: the host's copies of them, or of the one in the slab);
 * head[2 + j] gets shard j's loss sum, head[2 + per + j * params ..] its
 * row counts (train_rows.c). */
static ry_status local_shards(ry_trainer *tr, train_dist *d, const ry_train_data *data,
                              const int64_t *idx, int64_t k, double *head, ry_error *err) {
    int per = d->shards / d->size, np = train_rows_head(tr);
    ry_tensor *g = tr->grads->slab;
    for (int j = 0; j < per; j++) {
        if (shard_grad(tr, d, data, idx, k, d->rank * per + j, &head[2 + j], err) ||
            train_rows_note(tr, d, j, &head[2 + per + j * np], err))
            return RY_ERR;
        if (d->local && d->stage) {
            char *at = (char *)d->local->data + (size_t)j * ry_tensor_nbytes(g);
            if (cross(tr, at, true, err)) return RY_ERR;
        } else if (d->local)
            tr->target->grad_add(d->local, g, j * g->size, 0, g->size, true);
    }
    /* here, so that a failed copy rides the step's exchange to all ranks */
    return d->stage && !d->local ? cross(tr, d->host->data, true, err) : RY_OK;
}

static ry_status dist_step(ry_trainer *tr, train_dist *d, const ry_train_data *data,
                           const int64_t *idx, int64_t k, int local_stop, double *loss, int *stop,
                           ry_error *err);

ry_status train_dist_step(ry_trainer *tr, train_dist *d, const ry_train_data *data,
                          const int64_t *idx, int64_t k, int local_stop, double *loss, int *stop,
                          ry_error *err) {
    double t0 = seconds();
    ry_status st = dist_step(tr, d, data, idx, k, local_stop, loss, stop, err);
    d->t_step += seconds() - t0;
    return st;
}

static ry_status reduce_dense(ry_trainer *tr, train_dist *d, int64_t from, int64_t to,
                              ry_error *err) {
    return d->det ? reduce_det(tr, d, from, to, err) : d->on ? reduce_sum(tr, d, from, to, err) : RY_OK;
}

/* The bytes this rank handed to a step's reduction, averaged per step. */
static void count_bytes(train_dist *d, int64_t bytes) {
    d->bytes_sum += bytes;
    d->steps_reduced++;
    d->reduce_bytes = d->bytes_sum / d->steps_reduced;
}

/* The step's reduction once its gradient is in the slab, timed: the runs
 * of dense parameters (with the padding after each), then the rows of
 * the others (rows: some parameter goes so, d->as_rows). */
static ry_status reduce(ry_trainer *tr, train_dist *d, bool rows, ry_error *err) {
    double t0 = seconds();
    const ry_param_set *g = tr->grads;
    int64_t es = (int64_t)ry_dtype_size(g->dtype), bytes = 0, from = -1;
    int copies = d->det && d->on ? d->shards / d->size : 1; /* shards this rank hands over */
    ry_status st = RY_OK;
    if (d->zero) {
        int64_t n = 0; /* the slab less the parameters that go as rows */
        st = train_zero_reduce(tr, d, rows ? d->as_rows : NULL, &n, err);
        bytes = n * es;
    } else
        for (int i = 0; i <= g->n && st == RY_OK; i++) {
            bool dense = i < g->n && !(rows && d->as_rows[i]);
            int64_t at = i < g->n ? train_view_offset(g, i) : g->slab->size;
            if (dense && from < 0) from = i == 0 ? 0 : at;
            if (!dense && from >= 0) {
                st = reduce_dense(tr, d, from, at, err);
                bytes += (at - from) * es * copies;
                from = -1;
            }
        }
    int64_t b = 0;
    if (st == RY_OK && rows) st = train_rows_reduce(tr, d, &b, err);
    if (st == RY_OK && d->stage) st = cross(tr, d->host->data, false, err);
    d->t_reduce += seconds() - t0;
    count_bytes(d, bytes + b);
    return st;
}

static ry_status dist_step(ry_trainer *tr, train_dist *d, const ry_train_data *data,
                           const int64_t *idx, int64_t k, int local_stop, double *loss, int *stop,
                           ry_error *err) {
    int per = d->shards / d->size, nh = 2 + per + per * train_rows_head(tr);
    int64_t step = step_of(tr);
    double *head = ry_calloc((size_t)nh * (size_t)(d->size + 1), sizeof *head);
    if (!head) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    double *all = head + nh;
    /* overlapped: each bucket's all-reduce starts as the program finishes
     * its gradients (a step of equal shards only: unequal ones are
     * scaled after the call) */
    bool overlap = d->ov && !data->per_example && k % d->shards == 0;
    if (overlap) train_overlap_arm(tr, d);
    ry_status st = local_shards(tr, d, data, idx, k, head, err);
    ry_error e2;
    if (overlap && train_overlap_finish(tr, d, &e2)) {
        ry_free(head);
        *err = e2;
        return RY_ERR;
    }
    head[0] = st ? 1 : 0;
    head[1] = local_stop;
    if (d->on) {
        double t0 = seconds();
        ry_status xs = ry_comm_allgather(head, nh * (int64_t)sizeof *head, all,
                                         "the exchange of losses", step, &e2);
        d->t_sync += seconds() - t0;
        if (xs) {
            ry_free(head);
            *err = e2;
            return RY_ERR;
        }
    } else
        memcpy(all, head, (size_t)nh * sizeof *head);
    bool failed = false;
    double sum = 0, want_stop = 0;
    for (int r = 0; r < d->size; r++) {
        failed |= all[r * nh] != 0;
        if (all[r * nh + 1] > want_stop) want_stop = all[r * nh + 1];
        for (int j = 0; j < per; j++) sum += all[r * nh + 2 + j]; /* shard order */
    }
    bool rows = !failed && train_rows_plan(tr, d, all, nh, overlap); /* all is head's */
    ry_free(head);
    if (failed) {
        tr->naccum = 0;
        /* the failed rank's message to all (its own kept) */
        if (train_dist_agree(d, st, step, err) == RY_OK)
            ry_error_at(err, RY_NO_SPAN, "step %lld: a rank failed", (long long)step);
        return RY_ERR;
    }
    if (overlap)
        count_bytes(d, tr->grads->slab->size * (int64_t)ry_dtype_size(tr->grads->dtype));
    else if (reduce(tr, d, rows, err))
        return RY_ERR;
    train_grad_reduced(tr, rows ? d->as_rows : NULL);
    tr->naccum = 1;
    tr->dist_scale = !data->per_example && k % d->shards == 0 ? 1.0 / d->shards : 1.0;
    *loss = sum / (double)k;
    *stop = (int)want_stop;
    return d->zero ? train_zero_apply(tr, d, err) : ry_trainer_apply(tr, err);
}

ry_status train_dist_evaluate(ry_trainer *tr, const train_dist *d, const ry_train_data *data,
                              int64_t batch, double *loss, double *acc, ry_error *err) {
    double s[4] = {0, 0, 0, 0};
    ry_status st = train_evaluate_part(tr, data, batch, d->rank, d->size, s, err);
    if (train_dist_agree(d, st, ry_trainer_steps(tr), err)) return RY_ERR;
    if (d->on && ry_comm_allreduce_sum(s, 4, RY_FLOAT64, "the evaluation's sums",
                                       ry_trainer_steps(tr), err))
        return RY_ERR;
    *loss = s[1] > 0 ? s[0] / s[1] : NAN;
    *acc = s[3] > 0 ? s[2] / s[3] : NAN;
    return RY_OK;
}
