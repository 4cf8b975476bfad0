/*
 * train_loop.c: ry_train_fit, the loop around the steps: a seeded loader
 * deals batches, each batch is fetched and stepped, progress and the CSV
 * are updated, held-out data is evaluated after every epoch, checkpoints
 * are written every N steps and at the end, and a run resumes from the
 * latest checkpoint exactly where it stopped. A NaN/Inf stops the loop
 * before anything more is written, so the last good checkpoint stays; a
 * stop request (a signal the program caught) stops it after the current
 * step, with a checkpoint.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/train_impl.h"

/* The pending stop request; written by signal handlers, so nothing but a
 * volatile sig_atomic_t. */
static volatile sig_atomic_t stop_request;

void ry_train_request_stop(int sig) { stop_request = (sig_atomic_t)sig; }
int ry_train_stop_requested(void) { return (int)stop_request; }

static ry_status fetch_rows(const ry_train_data *d, const int64_t *idx, int64_t k,
                            ry_value **args, ry_error *err) {
    for (int i = 0; i < d->nargs; i++) {
        ry_tensor *t = NULL;
        if (ry_data_take_rows(d->arrays[i], idx, k, &t, err) || !(args[i] = ry_value_tensor(t))) {
            for (int j = 0; j < i; j++) ry_value_release(args[j]);
            return t ? ry_error_at(err, RY_NO_SPAN, "out of memory") : RY_ERR;
        }
    }
    return RY_OK;
}

void ry_train_data_tensors(int n, ry_tensor *const *arrays, int label_arg, ry_train_data *out) {
    memset(out, 0, sizeof *out);
    out->n = n > 0 ? arrays[0]->shape[0] : 0;
    out->nargs = n;
    out->arrays = arrays;
    out->fetch = fetch_rows;
    out->label_arg = label_arg;
}

static void release_n(int n, ry_value **a) {
    for (int i = 0; i < n; i++) ry_value_release(a[i]);
}

/* The labels of a fetched value: a tensor, or an ADT's last field (a tree's
 * root label). */
static const ry_tensor *labels_of(const ry_value *v) {
    if (v->kind == RY_VAL_ADT && v->adt.n > 0) v = v->adt.fields[v->adt.n - 1];
    return v->kind == RY_VAL_TENSOR ? v->tensor : NULL;
}

/* Adds the correct rows and the labelled rows of @predict's result out for
 * the example args. */
static ry_status count_correct(const ry_train_data *d, ry_value *const *args, const ry_value *out,
                               int64_t *correct, int64_t *total, ry_error *err) {
    const ry_value *s = out->kind == RY_VAL_TUPLE && out->tuple.n > 0 ? out->tuple.fields[0] : out;
    const ry_tensor *lab = labels_of(args[d->label_arg]);
    int64_t c = 0, t = 0;
    ry_status st = s->kind == RY_VAL_TENSOR && lab
                       ? ry_accuracy_count(s->tensor, lab, &c, &t, err)
                       : ry_error_at(err, RY_NO_SPAN, "@predict gave no scores to compare");
    *correct += c;
    *total += t;
    return st;
}

static ry_status eval_call(ry_trainer *tr, const ry_train_data *d, ry_value **args, double *loss,
                           int64_t *correct, int64_t *total, ry_error *err) {
    if (ry_trainer_loss(tr, d->nargs, args, loss, err)) return RY_ERR;
    if (d->label_arg < 0 || tr->npred_data < 0) return RY_OK;
    ry_value *out;
    if (ry_trainer_predict(tr, d->nargs, args, &out, err)) return RY_ERR;
    ry_status st = count_correct(d, args, out, correct, total, err);
    ry_value_release(out);
    return st;
}

/* The examples idx[0..k) of per-example data fetched one by one and
 * evaluated as one batch (train_batch.c): *sum += their losses. */
static ry_status eval_batch(ry_trainer *tr, const ry_train_data *d, const int64_t *idx, int64_t k,
                            double *sum, int64_t *correct, int64_t *total, ry_error *err) {
    if (k > INT32_MAX / RY_TRAIN_MAX_DATA)
        return ry_error_at(err, RY_NO_SPAN, "a batch of %lld examples is too large", (long long)k);
    ry_value **args = ry_calloc((size_t)k * (size_t)d->nargs + 1, sizeof *args);
    ry_value **preds = ry_calloc((size_t)k, sizeof *preds);
    double *losses = ry_calloc((size_t)k, sizeof *losses);
    ry_status st = args && preds && losses ? RY_OK : ry_error_at(err, RY_NO_SPAN, "out of memory");
    int64_t got = 0;
    for (; st == RY_OK && got < k; got++)
        if (d->fetch(d, &idx[got], 1, args + got * d->nargs, err)) st = RY_ERR;
    if (st) got--; /* a failed fetch holds nothing */
    bool acc = d->label_arg >= 0 && tr->npred_data >= 0;
    if (st == RY_OK)
        st = train_eval_batched(tr, (int)k, d->nargs, args, losses, acc ? preds : NULL, err);
    for (int64_t j = 0; st == RY_OK && j < k; j++) {
        *sum += losses[j];
        if (acc) st = count_correct(d, args + j * d->nargs, preds[j], correct, total, err);
    }
    for (int64_t j = 0; preds && j < k; j++) ry_value_release(preds[j]);
    if (args) release_n((int)(got * d->nargs), args);
    ry_free(args);
    ry_free(preds);
    ry_free(losses);
    return st;
}

ry_status train_evaluate_part(ry_trainer *tr, const ry_train_data *d, int64_t batch, int part,
                              int nparts, double sums[4], ry_error *err) {
    if (d->nargs != ry_trainer_ndata(tr))
        return ry_error_at(err, RY_NO_SPAN, "the data gives %d values, the model takes %d",
                           d->nargs, ry_trainer_ndata(tr));
    ry_loader *l;
    /* per-example data: one call per example, or (autobatch_eval) a batch of them batched */
    bool batched = d->per_example && train_batches(tr) && tr->opts.autobatch_eval && batch > 1;
    ry_loader_opts lo = {.batch = d->per_example && !batched ? 1 : (batch > 0 ? batch : 32),
                         .drop_last = d->drop_last};
    if (ry_loader_new(d->n, &lo, &l, err)) return RY_ERR;
    double sum = 0;
    int64_t seen = 0, correct = 0, total = 0;
    const int64_t *idx;
    ry_status st = RY_OK;
    for (int64_t k, b = 0; st == RY_OK && (k = ry_loader_next(l, &idx)) > 0; b++) {
        if (b % nparts != part) continue;
        if (batched) {
            st = eval_batch(tr, d, idx, k, &sum, &correct, &total, err);
            seen += k;
            continue;
        }
        ry_value *args[RY_TRAIN_MAX_DATA];
        double bl = 0;
        if ((st = d->fetch(d, idx, k, args, err))) break;
        st = eval_call(tr, d, args, &bl, &correct, &total, err);
        release_n(d->nargs, args);
        sum += bl * (double)k; /* a batch's loss is its mean */
        seen += k;
    }
    ry_loader_free(l);
    if (st) return RY_ERR;
    sums[0] += sum;
    sums[1] += (double)seen;
    sums[2] += (double)correct;
    sums[3] += (double)total;
    return RY_OK;
}

ry_status ry_train_evaluate(ry_trainer *tr, const ry_train_data *d, int64_t batch, double *loss,
                            double *acc, ry_error *err) {
    double s[4] = {0, 0, 0, 0};
    if (train_evaluate_part(tr, d, batch, 0, 1, s, err)) return RY_ERR;
    *loss = s[1] > 0 ? s[0] / s[1] : NAN;
    *acc = s[3] > 0 ? s[2] / s[3] : NAN;
    return RY_OK;
}

ry_status train_batch_grad(ry_trainer *tr, const ry_train_data *d, const int64_t *idx, int64_t k,
                           double *mean, double *sum, ry_error *err) {
    if (!d->per_example) {
        ry_value *args[RY_TRAIN_MAX_DATA];
        if (d->fetch(d, idx, k, args, err)) return RY_ERR;
        ry_status st = ry_trainer_accumulate(tr, d->nargs, args, mean, err);
        release_n(d->nargs, args);
        if (st == RY_OK) *sum = *mean * (double)k;
        return st;
    }
    if (k > INT32_MAX / RY_TRAIN_MAX_DATA)
        return ry_error_at(err, RY_NO_SPAN, "a batch of %lld examples is too large", (long long)k);
    ry_value **args = ry_calloc((size_t)k * (size_t)d->nargs + 1, sizeof *args);
    double *losses = ry_calloc((size_t)k, sizeof *losses);
    ry_status st = args && losses ? RY_OK : ry_error_at(err, RY_NO_SPAN, "out of memory");
    int64_t got = 0;
    for (; st == RY_OK && got < k; got++)
        if (d->fetch(d, &idx[got], 1, args + got * d->nargs, err)) {
            st = RY_ERR; /* a failed fetch holds nothing */
            break;
        }
    if (st == RY_OK) st = ry_trainer_accumulate_n(tr, (int)k, d->nargs, args, losses, err);
    if (args) release_n((int)(got * d->nargs), args);
    double total = 0;
    for (int64_t j = 0; st == RY_OK && j < k; j++) total += losses[j];
    ry_free(args);
    ry_free(losses);
    if (st) return RY_ERR;
    *sum = total;
    *mean = total / (double)k;
    return RY_OK;
}

/* One optimizer step on the batch idx[0..k): one call, or one per example
 * with the gradients summed (in example order, on the trainer's threads).
 * *loss: the batch's mean loss. */
static ry_status fit_step(ry_trainer *tr, const ry_train_data *d, const int64_t *idx, int64_t k,
                          double *loss, ry_error *err) {
    double sum;
    if (train_batch_grad(tr, d, idx, k, loss, &sum, err)) return RY_ERR;
    return ry_trainer_apply(tr, err);
}

typedef struct fit_state {
    ry_loader *l;
    ry_progress *p;
    double *losses;
    int64_t nlosses, cap;
    int64_t saved_step;
    int stopped; /* the stop request acted on */
    char *config; /* what checkpoints store (train_config_text) */
    int lock;     /* the checkpoint directory's, or -1 */
    train_dist dist; /* the ranks of an MPI job, or one process (train_dist.c) */
} fit_state;

/* Across ranks every one holds the same state: after a barrier (all have
 * finished the step) rank 0 alone writes (atomically, checkpoint_dir.c),
 * and its outcome and path go to all. */
static ry_status save(ry_trainer *tr, const ry_fit_opts *fo, fit_state *s, ry_fit_result *res,
                      ry_error *err) {
    int64_t step = ry_trainer_steps(tr);
    if (train_dist_barrier(&s->dist, step, err)) return RY_ERR;
    /* a sharded optimizer's slices gathered onto rank 0 */
    if (s->dist.zero && train_zero_gather(tr, &s->dist, err)) {
        train_zero_gather_free(tr);
        return RY_ERR;
    }
    ry_status st = s->dist.rank != 0
                       ? RY_OK
                       : ry_trainer_save(tr, fo->checkpoint_dir, fo->keep > 0 ? fo->keep : 3, s->l,
                                         s->config, res->checkpoint, sizeof res->checkpoint, err);
    train_zero_gather_free(tr);
    if (train_dist_agree(&s->dist, st, step, err) ||
        train_dist_bcast(&s->dist, res->checkpoint, sizeof res->checkpoint, step, err))
        return RY_ERR;
    s->saved_step = step;
    return RY_OK;
}

/* Rank 0 picks the checkpoint and checks its configuration; every rank
 * loads it (the same file: one machine, or a shared file system). The
 * loader's state is the global batch order's, so any number of ranks
 * continues it. */
static ry_status resume(ry_trainer *tr, const ry_fit_opts *fo, fit_state *s, ry_fit_result *res,
                        ry_error *err) {
    bool found = false;
    char path[512] = "";
    if (!fo->checkpoint_dir)
        return ry_error_at(err, RY_NO_SPAN, "resuming needs a checkpoint directory");
    ry_status st = RY_OK;
    if (s->dist.rank == 0) {
        st = ry_checkpoint_latest(fo->checkpoint_dir, path, sizeof path, &found, err);
        if (st == RY_OK && found && !fo->resume_anyway)
            st = train_config_compare(tr, path, s->config, err);
        if (!found) path[0] = 0;
    }
    if (train_dist_agree(&s->dist, st, 0, err) ||
        train_dist_bcast(&s->dist, path, sizeof path, 0, err))
        return RY_ERR;
    if (!path[0]) {
        ry_progress_note(s->p, "no checkpoint in %s: starting afresh", fo->checkpoint_dir);
        return RY_OK;
    }
    if (train_dist_agree(&s->dist, ry_trainer_load(tr, path, s->l, err), 0, err)) return RY_ERR;
    snprintf(res->checkpoint, sizeof res->checkpoint, "%s", path);
    s->saved_step = ry_trainer_steps(tr);
    ry_progress_note(s->p, "resumed from %s at step %lld", path, (long long)s->saved_step);
    return RY_OK;
}

static ry_status push_loss(fit_state *s, double l, ry_error *err) {
    if (s->nlosses == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 256;
        double *nl = ry_realloc(s->losses, (size_t)cap * sizeof *nl);
        if (!nl) return ry_error_at(err, RY_NO_SPAN, "out of memory");
        s->losses = nl;
        s->cap = cap;
    }
    s->losses[s->nlosses++] = l;
    return RY_OK;
}

static double mean_of(const double *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i];
    return n ? s / (double)n : NAN;
}

static ry_status end_epoch(ry_trainer *tr, const ry_train_data *eval, const ry_fit_opts *fo,
                           fit_state *s, ry_fit_result *res, ry_error *err) {
    ry_loader_state ls;
    ry_loader_get_state(s->l, &ls);
    ry_trainer_reset_state(tr);
    res->epochs_done = ls.epoch;
    if (!eval) return RY_OK;
    if (s->dist.on ? train_dist_evaluate(tr, &s->dist, eval, fo->batch, &res->eval_loss,
                                         &res->eval_acc, err)
                   : ry_train_evaluate(tr, eval, fo->batch, &res->eval_loss, &res->eval_acc, err))
        return RY_ERR;
    res->evaluated = true;
    res->eval_step = ry_trainer_steps(tr);
    ry_progress_eval(s->p, ry_trainer_steps(tr), ls.epoch - 1, res->eval_loss, res->eval_acc);
    return RY_OK;
}

static ry_status loop(ry_trainer *tr, const ry_train_data *train, const ry_train_data *eval,
                      const ry_fit_opts *fo, fit_state *s, ry_fit_result *res, ry_error *err) {
    int64_t epochs = fo->epochs > 0 ? fo->epochs : (fo->max_steps > 0 ? INT64_MAX : 1);
    for (;;) {
        ry_loader_state ls;
        ry_loader_get_state(s->l, &ls);
        if (ls.epoch >= epochs) break;
        if (fo->max_steps > 0 && ry_trainer_steps(tr) >= fo->max_steps) break;
        /* across ranks the request travels with the step (train_dist.c) */
        if (!s->dist.on && (s->stopped = (int)stop_request) != 0) {
            stop_request = 0;
            break;
        }
        const int64_t *idx;
        int64_t k = ry_loader_next(s->l, &idx);
        if (k == 0) {
            if (end_epoch(tr, eval, fo, s, res, err)) return RY_ERR;
            continue;
        }
        double loss;
        int stop = 0;
        if (s->dist.sharded) {
            int mine = (int)stop_request;
            stop_request = 0;
            if (train_dist_step(tr, &s->dist, train, idx, k, mine, &loss, &stop, err))
                return RY_ERR;
        } else if (fit_step(tr, train, idx, k, &loss, err))
            return RY_ERR;
        if (push_loss(s, loss, err)) return RY_ERR;
        int64_t step = ry_trainer_steps(tr);
        ry_progress_step(s->p, step, ls.epoch, loss, ry_optim_lr(tr->optim));
        if (fo->checkpoint_dir && fo->checkpoint_every > 0 && step % fo->checkpoint_every == 0 &&
            save(tr, fo, s, res, err))
            return RY_ERR;
        if (stop) {
            s->stopped = stop;
            break;
        }
    }
    return RY_OK;
}

ry_status ry_train_fit(ry_trainer *tr, const ry_train_data *train, const ry_train_data *eval,
                       const ry_fit_opts *fo, ry_fit_result *res, ry_error *err) {
    ry_fit_result local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->eval_loss = res->eval_acc = res->first_loss = res->last_loss = NAN;
    if (train->nargs != ry_trainer_ndata(tr))
        return ry_error_at(err, RY_NO_SPAN, "the data gives %d values, the model takes %d",
                           train->nargs, ry_trainer_ndata(tr));
    if (train->n <= 0 || (train->drop_last && train->n < (fo->batch > 0 ? fo->batch : 32)))
        return ry_error_at(err, RY_NO_SPAN, "no training batches (%lld examples)",
                           (long long)train->n);
    fit_state s = {.saved_step = -1, .lock = -1};
    if (train_dist_begin(tr, fo, &s.dist, err)) return RY_ERR;
    bool root = s.dist.rank == 0; /* the one that writes */
    ry_status st = RY_OK;
    if (root && fo->checkpoint_dir && mkdir(fo->checkpoint_dir, 0755) != 0 && errno != EEXIST)
        st = ry_error_file(err, fo->checkpoint_dir, "cannot create: %s", strerror(errno));
    if (train_dist_agree(&s.dist, st, 0, err)) {
        train_dist_end(tr, &s.dist, false);
        return RY_ERR;
    }
    if (!(s.config = train_config_text(tr, fo))) {
        train_dist_end(tr, &s.dist, false);
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    ry_loader_opts lo = {.batch = fo->batch > 0 ? fo->batch : 32, .shuffle = !fo->no_shuffle,
                         .drop_last = train->drop_last, .seed = fo->seed};
    if (ry_loader_new(train->n, &lo, &s.l, err)) {
        ry_free(s.config);
        train_dist_end(tr, &s.dist, false);
        return RY_ERR;
    }
    int64_t per_epoch = ry_loader_batches(s.l);
    int64_t total = fo->max_steps > 0 ? fo->max_steps
                                      : (fo->epochs > 0 ? fo->epochs : 1) * per_epoch;
    /* a resumed run continues its CSV once it knows the step */
    /* rank 0 reports, keeps the CSV and owns the checkpoint directory */
    const char *csv = root ? fo->csv_path : NULL;
    st = ry_progress_new(fo->out, root ? fo->progress : RY_PROGRESS_QUIET, total, fo->log_every,
                         fo->resume ? NULL : csv, &s.p, err);
    if (st == RY_OK && root && fo->checkpoint_dir)
        st = train_lock_dir(fo->checkpoint_dir, &s.lock, err);
    if (st == RY_OK && root && fo->checkpoint_dir && !fo->resume)
        st = train_claim_dir(fo->checkpoint_dir, fo->force, s.p, err);
    st = train_dist_agree(&s.dist, st, 0, err);
    if (st == RY_OK && fo->resume) st = resume(tr, fo, &s, res, err);
    if (st == RY_OK && fo->resume && csv)
        st = ry_progress_csv_continue(s.p, csv, ry_trainer_steps(tr), err);
    if (st == RY_OK) st = loop(tr, train, eval, fo, &s, res, err);
    if (st == RY_OK && fo->checkpoint_dir && s.saved_step != ry_trainer_steps(tr))
        st = save(tr, fo, &s, res, err);
    if (st) ry_progress_note(s.p, "stopped: %s", err->msg);
    bool together = st == RY_OK; /* every rank got here with it (agreed) */
    if (st == RY_OK && s.stopped) {
        res->stop_signal = s.stopped;
        st = res->checkpoint[0] && s.saved_step == ry_trainer_steps(tr)
                 ? ry_error_at(err, RY_NO_SPAN, "stopped on request after step %lld; checkpoint %s",
                               (long long)ry_trainer_steps(tr), res->checkpoint)
                 : ry_error_at(err, RY_NO_SPAN,
                               "stopped on request after step %lld (no checkpoint directory)",
                               (long long)ry_trainer_steps(tr));
    }
    res->steps = ry_trainer_steps(tr);
    int64_t tenth = s.nlosses / 10 > 0 ? s.nlosses / 10 : 1;
    if (s.nlosses) {
        res->first_loss = mean_of(s.losses, tenth);
        res->last_loss = mean_of(s.losses + s.nlosses - tenth, tenth);
    }
    if (s.dist.on) {
        res->dist_step_s = s.dist.t_step;
        res->dist_reduce_s = s.dist.t_reduce;
        res->dist_sync_s = s.dist.t_sync;
        res->dist_bytes = s.dist.reduce_bytes;
        res->dist_overlap =
            s.dist.buckets > 0 ? (double)s.dist.buckets_early / (double)s.dist.buckets : 0;
    }
    ry_progress_free(s.p);
    ry_loader_free(s.l);
    ry_free(s.config);
    train_dist_end(tr, &s.dist, together);
    if (s.lock >= 0) close(s.lock); /* releases the lock */
    ry_free(s.losses);
    return st;
}
