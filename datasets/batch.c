/*
 * batch.c: seeded shuffling and batching of example indices, gathering the
 * rows of a batch out of a tensor, and a seeded train / validation split.
 * What an index means (an image, a tree, a window) is the caller's business.
 */
#include <stdlib.h>
#include <string.h>

#include "relayc/datasets.h"

struct ry_loader {
    int64_t n;
    ry_loader_opts opts;
    ry_rng rng;          /* advances as epochs draw their orders */
    uint64_t epoch_rng[4]; /* rng before this epoch's draw */
    int64_t epoch, pos;
    int64_t *order;      /* this epoch's permutation of 0..n-1 */
};

/* An epoch's order: identity, shuffled from the current rng when asked.
 * Drawing from the identity (not from the last order) makes the order a
 * function of the saved state alone. */
static void start_epoch(ry_loader *l) {
    ry_rng_get_state(&l->rng, l->epoch_rng);
    for (int64_t i = 0; i < l->n; i++) l->order[i] = i;
    if (l->opts.shuffle) ry_rng_shuffle(&l->rng, l->order, l->n);
    l->pos = 0;
}

static int64_t epoch_end(const ry_loader *l) {
    return l->opts.drop_last ? l->n / l->opts.batch * l->opts.batch : l->n;
}

ry_status ry_loader_new(int64_t n, const ry_loader_opts *opts, ry_loader **out, ry_error *err) {
    *out = NULL;
    if (n < 0) return ry_error_at(err, RY_NO_SPAN, "loader: negative item count %lld", (long long)n);
    if (opts->batch < 1)
        return ry_error_at(err, RY_NO_SPAN, "loader: batch size %lld must be at least 1",
                           (long long)opts->batch);
    if ((uint64_t)n > SIZE_MAX / sizeof(int64_t))
        return ry_error_at(err, RY_NO_SPAN, "loader: %lld items is too many", (long long)n);
    ry_loader *l = ry_calloc(1, sizeof *l);
    int64_t *order = ry_malloc((size_t)n * sizeof(int64_t));
    if (!l || !order) {
        ry_free(l);
        ry_free(order);
        return ry_error_at(err, RY_NO_SPAN, "loader: out of memory for %lld items", (long long)n);
    }
    l->n = n;
    l->opts = *opts;
    l->order = order;
    ry_rng_seed(&l->rng, opts->seed);
    start_epoch(l);
    *out = l;
    return RY_OK;
}

void ry_loader_free(ry_loader *l) {
    if (!l) return;
    ry_free(l->order);
    ry_free(l);
}

int64_t ry_loader_batches(const ry_loader *l) {
    int64_t b = l->opts.batch;
    return l->opts.drop_last ? l->n / b : (l->n + b - 1) / b;
}

int64_t ry_loader_next(ry_loader *l, const int64_t **idx) {
    int64_t end = epoch_end(l);
    if (l->pos >= end) {
        l->epoch++;
        start_epoch(l);
        *idx = l->order;
        return 0;
    }
    int64_t k = end - l->pos < l->opts.batch ? end - l->pos : l->opts.batch;
    *idx = l->order + l->pos;
    l->pos += k;
    return k;
}

void ry_loader_get_state(const ry_loader *l, ry_loader_state *st) {
    memcpy(st->rng, l->epoch_rng, sizeof st->rng);
    st->epoch = l->epoch;
    st->pos = l->pos;
}

ry_status ry_loader_set_state(ry_loader *l, const ry_loader_state *st, ry_error *err) {
    if (st->epoch < 0)
        return ry_error_at(err, RY_NO_SPAN, "loader state: negative epoch %lld", (long long)st->epoch);
    if (st->pos < 0 || st->pos > epoch_end(l))
        return ry_error_at(err, RY_NO_SPAN, "loader state: position %lld outside the epoch's 0..%lld",
                           (long long)st->pos, (long long)epoch_end(l));
    if (ry_rng_set_state(&l->rng, st->rng, err) != RY_OK) {
        ry_error_prefix(err, "loader state");
        return RY_ERR;
    }
    start_epoch(l);
    l->epoch = st->epoch;
    l->pos = st->pos;
    return RY_OK;
}

/* ---- gathering rows ---------------------------------------------------------- */

ry_status ry_data_take_rows(const ry_tensor *t, const int64_t *idx, int64_t k, ry_tensor **out,
                            ry_error *err) {
    *out = NULL;
    if (t->ndim < 1) return ry_error_at(err, RY_NO_SPAN, "take rows: a scalar has no rows");
    int64_t rows = t->shape[0];
    for (int64_t i = 0; i < k; i++)
        if (idx[i] < 0 || idx[i] >= rows)
            return ry_error_at(err, RY_NO_SPAN, "take rows: index %lld (position %lld) outside 0..%lld",
                               (long long)idx[i], (long long)i, (long long)rows - 1);
    int64_t shape[RY_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = k;
    ry_tensor *o = ry_tensor_new(t->dtype, t->ndim, shape);
    if (!o) return ry_error_at(err, RY_NO_SPAN, "take rows: out of memory for %lld rows", (long long)k);
    size_t row = rows ? ry_tensor_nbytes(t) / (size_t)rows : 0;
    for (int64_t i = 0; i < k; i++)
        memcpy((char *)o->data + (size_t)i * row, (const char *)t->data + (size_t)idx[i] * row, row);
    *out = o;
    return RY_OK;
}

/* ---- train / validation split ---------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

ry_status ry_data_split(int64_t n, int64_t nval, uint64_t seed, int64_t **train, int64_t **val,
                        ry_error *err) {
    *train = *val = NULL;
    if (n < 0 || nval < 0 || nval > n)
        return ry_error_at(err, RY_NO_SPAN, "split: %lld validation items out of %lld",
                           (long long)nval, (long long)n);
    if ((uint64_t)n > SIZE_MAX / sizeof(int64_t))
        return ry_error_at(err, RY_NO_SPAN, "split: %lld items is too many", (long long)n);
    int64_t ntrain = n - nval;
    int64_t *perm = ry_malloc((size_t)n * sizeof(int64_t));
    int64_t *v = ry_malloc((size_t)nval * sizeof(int64_t));
    if (!perm || !v) {
        ry_free(perm);
        ry_free(v);
        return ry_error_at(err, RY_NO_SPAN, "split: out of memory for %lld items", (long long)n);
    }
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    ry_rng_permutation(&rng, n, perm);
    memcpy(v, perm + ntrain, (size_t)nval * sizeof(int64_t));
    qsort(perm, (size_t)ntrain, sizeof(int64_t), cmp_i64);
    qsort(v, (size_t)nval, sizeof(int64_t), cmp_i64);
    *train = perm; /* its first ntrain entries; the tail is unused */
    *val = v;
    return RY_OK;
}

ry_status ry_data_split_tensors(int narrays, ry_tensor *const *arrays, int64_t nval,
                                uint64_t seed, ry_tensor **train, ry_tensor **val, ry_error *err) {
    for (int i = 0; i < narrays; i++) train[i] = val[i] = NULL;
    if (narrays < 1) return ry_error_at(err, RY_NO_SPAN, "split: no arrays");
    for (int i = 0; i < narrays; i++)
        if (arrays[i]->ndim < 1 || arrays[i]->shape[0] != arrays[0]->shape[0])
            return ry_error_at(err, RY_NO_SPAN, "split: array %d has %lld rows, array 0 has %lld", i,
                               arrays[i]->ndim < 1 ? 0LL : (long long)arrays[i]->shape[0],
                               (long long)arrays[0]->shape[0]);
    int64_t n = arrays[0]->shape[0];
    int64_t *ti, *vi;
    if (ry_data_split(n, nval, seed, &ti, &vi, err) != RY_OK) return RY_ERR;
    ry_status s = RY_OK;
    for (int i = 0; i < narrays && s == RY_OK; i++) {
        s = ry_data_take_rows(arrays[i], ti, n - nval, &train[i], err);
        if (s == RY_OK) s = ry_data_take_rows(arrays[i], vi, nval, &val[i], err);
    }
    ry_free(ti);
    ry_free(vi);
    if (s != RY_OK)
        for (int i = 0; i < narrays; i++) {
            ry_tensor_release(train[i]);
            ry_tensor_release(val[i]);
            train[i] = val[i] = NULL;
        }
    return s;
}
