/*
 * train_overlap.c: the gradient all-reduce overlapped with the backward
 * pass (issue 19 part 1), for the steps that can: across ranks, without
 * --deterministic or --shard-optimizer, on the compiled engine and the
 * CPU target (a device's slab is copied down after the step), one call
 * per shard (a batched model, every shard of equal size, so nothing is
 * scaled after the call).
 *
 * The slab is cut into buckets of --bucket-bytes. The compiled engine
 * reports each gradient as the program finishes it (ry_vm_opts.on_final:
 * the backward pass finishes the last layers first); it is copied into
 * the slab at once, and a bucket whose parameters are all final is
 * handed to MPI_Iallreduce while the program computes the rest. Buckets
 * start strictly from the last to the first, on every rank the same
 * (MPI matches collectives by their order): one that is ready waits for
 * the later ones. After the call the rest start, and the step waits for
 * all (the time measured as waiting on the reduction). Gradients the
 * engine does not report early (row-sparse ones, a program of another
 * shape) join after the call. A rank whose call failed still starts and
 * waits for every bucket, so that no rank is left in a collective the
 * others never enter; the step's exchange then stops all of them.
 */
#include <time.h>

#include "dist/comm.h"
#include "train/train_impl.h"

typedef struct train_overlap {
    ry_trainer *tr;
    train_dist *d;
    int64_t nbuckets;
    int *params_in;      /* per bucket: the parameters it holds part of */
    int *left;           /* ... not final yet, this step */
    int64_t next;        /* the bucket to start next, counting down; -1: all */
    ry_status st;        /* a failed start: the rest wait for finish */
    ry_error err;
} train_overlap;

/* The buckets parameter i lies in: [*b0, *b1]. */
static void buckets_of(const train_overlap *ov, int i, int64_t *b0, int64_t *b1) {
    const ry_param_set *g = ov->tr->grads;
    int64_t off = train_view_offset(g, i), n = g->views[i]->size, B = ov->d->bucket;
    *b0 = off / B;
    *b1 = n > 0 ? (off + n - 1) / B : *b0 - 1;
}

struct train_overlap *train_overlap_new(ry_trainer *tr, const train_dist *d) {
    /* a device's gradients reach the host only once the step is done */
    if (!d->on || d->det || d->zero || d->stage || !tr->vm || d->bucket < 1) return NULL;
    train_overlap *ov = ry_calloc(1, sizeof *ov);
    int64_t len = tr->grads->slab->size;
    if (!ov) return NULL;
    ov->tr = tr;
    ov->nbuckets = (len + d->bucket - 1) / d->bucket;
    ov->params_in = ry_calloc((size_t)ov->nbuckets + 1, sizeof *ov->params_in);
    ov->left = ry_calloc((size_t)ov->nbuckets + 1, sizeof *ov->left);
    if (!ov->params_in || !ov->left) {
        train_overlap_free(ov);
        return NULL; /* the blocking path, which needs nothing more */
    }
    ov->d = (train_dist *)d;
    for (int i = 0; i < tr->params->n; i++) {
        int64_t b0, b1;
        buckets_of(ov, i, &b0, &b1);
        for (int64_t b = b0; b <= b1; b++) ov->params_in[b]++;
    }
    return ov;
}

void train_overlap_free(struct train_overlap *ov) {
    if (!ov) return;
    ry_free(ov->params_in);
    ry_free(ov->left);
    ry_free(ov);
}

static ry_status start(train_overlap *ov, int64_t b) {
    ry_tensor *g = ov->tr->grads->slab;
    int64_t lo = b * ov->d->bucket, n = g->size - lo < ov->d->bucket ? g->size - lo : ov->d->bucket;
    return ry_comm_iallreduce_sum((char *)g->data + lo * (int64_t)ry_dtype_size(g->dtype), n,
                                  g->dtype, "the gradient all-reduce",
                                  ry_trainer_steps(ov->tr) + 1, &ov->err);
}

/* The ready buckets from the last down, up to the first that is not
 * (counted as started during the backward pass). */
static void start_ready(train_overlap *ov) {
    while (ov->st == RY_OK && ov->next >= 0 && ov->left[ov->next] == 0) {
        ov->st = start(ov, ov->next--);
        ov->d->buckets_early++;
    }
}

/* ry_vm_opts.on_final: field k of the gradient tuple is final. */
static void on_final(void *ctx, int field, const ry_value *v) {
    train_overlap *ov = ctx;
    ry_trainer *tr = ov->tr;
    int i = field - tr->grad_base;
    if (i < 0 || i >= tr->params->n || tr->g.taken[i] || v->kind != RY_VAL_TENSOR) return;
    ry_tensor *d = tr->grads->views[i];
    if (v->tensor->dtype != d->dtype || v->tensor->size != d->size) return; /* checked later */
    tr->g.bad[i] |= tr->target->grad_add(d, v->tensor, 0, 0, d->size, true);
    tr->g.state[i] = TRAIN_G_DENSE;
    tr->g.taken[i] = true;
    int64_t b0, b1;
    buckets_of(ov, i, &b0, &b1);
    for (int64_t b = b0; b <= b1; b++) ov->left[b]--;
    start_ready(ov);
    ry_comm_progress();
}

void train_overlap_arm(ry_trainer *tr, train_dist *d) {
    train_overlap *ov = d->ov;
    for (int64_t b = 0; b < ov->nbuckets; b++) ov->left[b] = ov->params_in[b];
    ov->next = ov->nbuckets - 1;
    ov->st = RY_OK;
    start_ready(ov); /* buckets of padding only */
    tr->on_final = on_final;
    tr->final_ctx = ov;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ry_status train_overlap_finish(ry_trainer *tr, train_dist *d, ry_error *err) {
    train_overlap *ov = d->ov;
    tr->on_final = NULL;
    tr->final_ctx = NULL;
    double t0 = seconds();
    d->buckets += ov->nbuckets;
    while (ov->st == RY_OK && ov->next >= 0) ov->st = start(ov, ov->next--);
    ry_status st = ry_comm_wait_all("the gradient all-reduce", ry_trainer_steps(tr) + 1, err);
    d->t_reduce += seconds() - t0;
    if (ov->st) *err = ov->err;
    return ov->st ? RY_ERR : st;
}
