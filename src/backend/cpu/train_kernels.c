/*
 * train_kernels.c (cpu): the CPU target's kernels over the parameter,
 * gradient and optimizer-state slabs (target.h): the optimizer's update
 * split over the thread pool, the finiteness scan and norm of a gradient,
 * and the trainer's sums, clamps and zero fills of the gradient slab.
 * Every kernel is elementwise or an order-independent test, so any split
 * gives the bits of one serial pass at any thread count.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/cpu_target.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/update_rules.h"

/* The finiteness scans and the sums' checks are integer tests on the
 * exponent bits, which vectorize (GCC needs the pragma at -O2; clang does
 * it anyway). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

/* ---- the optimizer's update ---- */

typedef void (*rule_fn)(const ry_optim_config *, const ry_update_args *);

static rule_fn rule_of(ry_optim_kind k) {
    return k == RY_OPTIM_SGD       ? ry_optim_sgd_update
           : k == RY_OPTIM_ADAGRAD ? ry_optim_adagrad_update
           : k == RY_OPTIM_RMSPROP ? ry_optim_rmsprop_update
                                   : ry_optim_adam_update;
}

/* Each chunk is the rule over a sub-run of the slabs. */
typedef struct update_split {
    rule_fn rule;
    const ry_optim_config *cfg;
    const ry_update_args *a;
    size_t es;
} update_split;

static void update_chunk(void *ctx, int64_t lo, int64_t hi) {
    const update_split *u = ctx;
    ry_update_args a = *u->a;
    size_t off = (size_t)lo * u->es;
    a.n = hi - lo;
    a.param = (char *)a.param + off;
    a.grad = (const char *)a.grad + off;
    for (int s = 0; s < RY_OPTIM_MAX_SLOTS; s++)
        if (a.slot[s]) a.slot[s] = (char *)a.slot[s] + off;
    u->rule(u->cfg, &a);
}

void ry_cpu_update(const ry_optim_config *c, const ry_update_args *a) {
    update_split u = {rule_of(c->kind), c, a, ry_dtype_size(a->dtype)};
    /* the update reads 2-5 runs and writes 1-4 per element, more than an
     * elementwise map does: split from half its grain */
    ry_parallel_for(a->n, RY_PAR_GRAIN_EW / 2, update_chunk, &u);
}

/* ---- finiteness and norms ---- */

/* Whether x[0..n) holds a NaN or Inf: an all-ones exponent. One OR over
 * the whole run (no early exit), so the loop vectorizes. */
static bool any_bad_f32(const float *x, int64_t n) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

static bool any_bad_f64(const double *x, int64_t n) {
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7ff0000000000000u) == 0x7ff0000000000000u;
    }
    return bad != 0;
}

/* The scan of a large run split over the pool: an OR of the chunks'
 * answers, so the split never changes the result. */
typedef struct bad_split {
    const ry_tensor *t;
    int64_t lo;
    atomic_bool bad;
} bad_split;

static void bad_chunk(void *ctx, int64_t lo, int64_t hi) {
    bad_split *b = ctx;
    const ry_tensor *t = b->t;
    bool bad = t->dtype == RY_FLOAT32 ? any_bad_f32((const float *)t->data + b->lo + lo, hi - lo)
                                      : any_bad_f64((const double *)t->data + b->lo + lo, hi - lo);
    if (bad) atomic_store_explicit(&b->bad, true, memory_order_relaxed);
}

/* The first NaN/Inf of t's elements [lo, hi), or -1. */
static int64_t first_bad(const ry_tensor *t, int64_t lo, int64_t hi) {
    bool f32 = t->dtype == RY_FLOAT32;
    bad_split b = {.t = t, .lo = lo};
    atomic_init(&b.bad, false);
    /* a read-only pass at memory speed: split only long runs */
    ry_parallel_for(hi - lo, RY_PAR_GRAIN_EW, bad_chunk, &b);
    if (!atomic_load_explicit(&b.bad, memory_order_relaxed)) return -1;
    for (int64_t k = lo; k < hi; k++)
        if (!isfinite(f32 ? (double)((const float *)t->data)[k] : ((const double *)t->data)[k]))
            return k;
    return -1;
}

int64_t ry_cpu_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm) {
    int64_t row = !rows ? t->size : t->shape[0] ? t->size / t->shape[0] : 0;
    int64_t runs = rows ? nrows : 1;
    double acc = 0;
    for (int64_t r = 0; r < runs; r++) {
        int64_t lo = rows ? rows[r] * row : 0, hi = lo + row;
        if (!norm) {
            int64_t k = first_bad(t, lo, hi);
            if (k >= 0) return k;
            continue;
        }
        /* as tensor_norm(t, 2): squares summed in double in element order
         * (rows left out are zero and would add exactly nothing) */
        if (t->dtype == RY_FLOAT32) {
            const float *x = t->data;
            for (int64_t k = lo; k < hi; k++) {
                double a = fabs((double)x[k]);
                acc += a * a;
            }
        } else {
            const double *x = t->data;
            for (int64_t k = lo; k < hi; k++) {
                double a = fabs(x[k]);
                acc += a * a;
            }
        }
    }
    if (!norm) return -1;
    *norm = sqrt(acc);
    if (isfinite(acc)) return -1; /* finite squares only come from finite elements */
    for (int64_t r = 0; r < runs; r++) {
        int64_t lo = rows ? rows[r] * row : 0, k = first_bad(t, lo, lo + row);
        if (k >= 0) return k;
    }
    return -1; /* float64 squares can overflow: a finite gradient, an infinite norm */
}

/* ---- the gradient slab ---- */

/* d := 0 + x (the sum's first term, as adding into zeros rounds it: -0
 * becomes +0) or d += x; true when a result is NaN or Inf. Two loops, the
 * check an integer OR: so that the compiler vectorizes both (one loop with
 * the choice inside stayed scalar, a tenth of a Tree-LSTM step). */
#define ADD_LOOP(NAME, T, U, EXP)                                                         \
    static bool NAME(T *restrict d, const T *restrict x, int64_t n, bool first) {       \
        U bad = 0;                                                                      \
        if (first)                                                                      \
            for (int64_t i = 0; i < n; i++) {                                           \
                T v = (T)0 + x[i];                                                      \
                U u;                                                                    \
                memcpy(&u, &v, sizeof u);                                               \
                bad |= (U)((u & EXP) == EXP);                                           \
                d[i] = v;                                                               \
            }                                                                           \
        else                                                                            \
            for (int64_t i = 0; i < n; i++) {                                           \
                T v = d[i] + x[i];                                                      \
                U u;                                                                    \
                memcpy(&u, &v, sizeof u);                                               \
                bad |= (U)((u & EXP) == EXP);                                           \
                d[i] = v;                                                               \
            }                                                                           \
        return bad != 0;                                                                \
    }
ADD_LOOP(grad_add_f32, float, uint32_t, 0x7f800000u)
ADD_LOOP(grad_add_f64, double, uint64_t, 0x7ff0000000000000u)

bool ry_cpu_grad_add(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n,
                     bool first) {
    if (d->dtype == RY_FLOAT32 && x->dtype == RY_FLOAT32)
        return grad_add_f32((float *)d->data + lo_d, (const float *)x->data + lo_x, n, first);
    if (d->dtype == RY_FLOAT64 && x->dtype == RY_FLOAT64)
        return grad_add_f64((double *)d->data + lo_d, (const double *)x->data + lo_x, n, first);
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        double v = (first ? 0 : ry_tensor_get(d, lo_d + i)) + ry_tensor_get(x, lo_x + i);
        ry_tensor_set(d, lo_d + i, v);
        bad |= !isfinite(ry_tensor_get(d, lo_d + i));
    }
    return bad;
}

/* clip_grad_value_: comparisons with NaN are false, so NaN stays. */
void ry_cpu_grad_clip(ry_tensor *t, int64_t lo, int64_t n, double c) {
    if (t->dtype == RY_FLOAT32) {
        float *x = (float *)t->data + lo, hi = (float)c;
        for (int64_t j = 0; j < n; j++) x[j] = x[j] < -hi ? -hi : x[j] > hi ? hi : x[j];
    } else {
        double *x = (double *)t->data + lo;
        for (int64_t j = 0; j < n; j++) x[j] = x[j] < -c ? -c : x[j] > c ? c : x[j];
    }
}

void ry_cpu_grad_zero(ry_tensor *t, int64_t lo, int64_t n) {
    size_t es = ry_dtype_size(t->dtype);
    memset((char *)t->data + (size_t)lo * es, 0, (size_t)n * es);
}

void ry_cpu_grad_scale(ry_tensor *t, int64_t lo, int64_t n, double c) {
    if (t->dtype == RY_FLOAT32) {
        float *x = (float *)t->data + lo, k = (float)c;
        for (int64_t j = 0; j < n; j++) x[j] *= k;
    } else {
        double *x = (double *)t->data + lo;
        for (int64_t j = 0; j < n; j++) x[j] *= c;
    }
}
