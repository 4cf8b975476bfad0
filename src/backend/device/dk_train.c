/*
 * dk_train.c (device): the training kernels over the parameter, gradient
 * and optimizer-state slabs (target.h), so that a training run keeps them
 * on the device: the four optimizers' updates, spelled as the CPU's rules
 * compute them (src/backend/cpu/update_*.c: the same operations in the
 * same order, constants computed on the host in the same precision, no
 * contraction into fused multiply-adds), so a device step gives the CPU's
 * parameters to the rounding of sqrt and division; the finiteness scan and
 * norm (partial sums in double per chunk, added in order on the host: the
 * only bytes a step reads back besides the loss); sums, clamps, scales and
 * zero fills of the gradient slab.
 *
 * These kernels return no status (the CPU's cannot fail); a driver failure
 * is kept and reported by ry_dk_sync, which the trainer calls after each
 * update. The device is the one the slabs are on.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/device/dk_ops.h"


static ry_error sticky;
static bool failed;
static pthread_mutex_t sticky_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep(const ry_error *e) {
    pthread_mutex_lock(&sticky_lock);
    if (!failed) sticky = *e, failed = true;
    pthread_mutex_unlock(&sticky_lock);
}

ry_status ry_dk_sync(const ry_dk_device *d, ry_error *err) {
    ry_error fe = {0};
    ry_status rc = d->finish(&fe);
    pthread_mutex_lock(&sticky_lock);
    bool f = failed;
    ry_error e = sticky;
    failed = false;
    pthread_mutex_unlock(&sticky_lock);
    if (f) {
        *err = e;
        return RY_ERR;
    }
    if (rc != RY_OK) *err = fe;
    return rc;
}

/* the device of t (registered: a device tensor's device was opened) */
static const ry_dk_device *dev_of(const ry_tensor *t) { return ry_dk_for(t->device.kind); }

/* kernel tmpl for the slab's dtype (@0 kernel, @1 global, @2 index, @3
 * i64, @4 the element type) */
static ry_dk_kernel *kernel_for(const ry_dk_device *d, const char *tmpl, ry_dtype dt) {
    const ry_dialect *dl = d->dialect;
    const char *sub[5] = {dl->kernel, dl->global, dl->index, dl->i64, dl->type(dt)};
    ry_error e = {0};
    ry_dk_kernel *k = ry_dk_template(d, tmpl, sub, 5, RY_NO_SPAN, &e);
    if (!k) keep(&e);
    return k;
}

static void run(const ry_dk_device *d, ry_dk_kernel *k, int64_t n, int nargs, const ry_karg *a) {
    if (!k) return;
    ry_error e = {0};
    if (d->launch(k, (size_t)n, nargs, a, RY_NO_SPAN, &e)) keep(&e);
}

static ry_karg real(ry_dtype dt, double v) {
    return dt == RY_FLOAT32 ? KA_F((float)v) : KA_D(v);
}

/* a slot's buffer and element offset, or a null buffer */
#define SLOT(a, s) (ry_karg){RY_KA_BUF, (a)->tslot[s] ? ry_dk_buf((a)->tslot[s]) : NULL, 0, 0}, \
                   KA_L((a)->tslot[s] ? ry_dk_off((a)->tslot[s]) + (a)->off : 0)
#define PARAM(a) KA_B((a)->tparam), KA_L(ry_dk_off((a)->tparam) + (a)->off)
#define GRAD(a) KA_B((a)->tgrad), KA_L(ry_dk_off((a)->tgrad) + (a)->goff)

static const char *sgd_src =
    "@0 k(@3 n, @1@4 *p, @3 po, @1const @4 *g, @3 go, @1@4 *b, @3 bo, @3 has_b, @3 has_wd,\n"
    "     @4 wd, @4 mom, @4 sc, @4 damp, @4 neg_lr, @3 first, @3 nesterov) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @4 d = g[go + i] * sc;\n"
    "    if (has_wd) d = d + wd * p[po + i];\n"
    "    if (has_b) {\n"
    "        @4 v = first ? d : b[bo + i] * mom + damp * d;\n"
    "        b[bo + i] = v;\n"
    "        d = nesterov ? d + mom * v : v;\n"
    "    }\n"
    "    p[po + i] = p[po + i] + neg_lr * d;\n"
    "}\n";

static const char *adam_src =
    "@0 k(@3 n, @1@4 *p, @3 po, @1const @4 *g, @3 go, @1@4 *m, @3 mo, @1@4 *v, @3 vo,\n"
    "     @1@4 *vmax, @3 xo, @3 has_vmax, @3 has_wd, @3 decoupled, @4 wd, @4 shrink, @4 w1,\n"
    "     @4 beta2, @4 w2, @4 neg_step, @4 bc2, @4 eps, @4 sc) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @4 d = g[go + i] * sc, pi = p[po + i];\n"
    "    if (has_wd) { if (decoupled) pi = pi * shrink; else d = d + wd * pi; }\n"
    "    @4 mi = m[mo + i];\n"
    "    mi = w1 < 0.5 ? mi + w1 * (d - mi) : d - (d - mi) * (1 - w1);\n"
    "    m[mo + i] = mi;\n"
    "    @4 vi = v[vo + i] * beta2 + w2 * d * d;\n"
    "    v[vo + i] = vi;\n"
    "    @4 s = vi;\n"
    "    if (has_vmax) { @4 x = vmax[xo + i]; if (x < s || isnan(s)) x = s; vmax[xo + i] = x; s = x; }\n"
    "    @4 denom = sqrt(s) / bc2 + eps;\n"
    "    p[po + i] = pi + neg_step * (mi / denom);\n"
    "}\n";

static const char *adagrad_src =
    "@0 k(@3 n, @1@4 *p, @3 po, @1const @4 *g, @3 go, @1@4 *s, @3 so, @3 has_wd, @4 wd,\n"
    "     @4 eps, @4 sc, @4 neg_clr) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @4 d = has_wd ? g[go + i] * sc + wd * p[po + i] : g[go + i] * sc;\n"
    "    @4 si = s[so + i] + d * d;\n"
    "    s[so + i] = si;\n"
    "    p[po + i] = p[po + i] + neg_clr * (d / (sqrt(si) + eps));\n"
    "}\n";

static const char *rmsprop_src =
    "@0 k(@3 n, @1@4 *p, @3 po, @1const @4 *g, @3 go, @1@4 *sq, @3 qo, @1@4 *buf, @3 bo,\n"
    "     @1@4 *ga, @3 ao, @3 has_buf, @3 has_ga, @3 has_wd, @4 wd, @4 eps, @4 neg_lr, @4 alpha,\n"
    "     @4 w, @4 mom, @4 sc) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @4 d = g[go + i] * sc;\n"
    "    if (has_wd) d = d + wd * p[po + i];\n"
    "    @4 q = sq[qo + i] * alpha + w * d * d;\n"
    "    sq[qo + i] = q;\n"
    "    @4 avg;\n"
    "    if (has_ga) {\n"
    "        @4 a = ga[ao + i];\n"
    "        a = w < 0.5 ? a + w * (d - a) : d - (d - a) * (1 - w);\n"
    "        ga[ao + i] = a;\n"
    "        avg = sqrt(q + (@4)(-1) * a * a);\n"
    "    } else {\n"
    "        avg = sqrt(q);\n"
    "    }\n"
    "    avg = avg + eps;\n"
    "    if (has_buf) { @4 b = buf[bo + i] * mom + d / avg; buf[bo + i] = b; p[po + i] = p[po + i] + neg_lr * b; }\n"
    "    else p[po + i] = p[po + i] + neg_lr * (d / avg);\n"
    "}\n";

void ry_dk_update(const ry_optim_config *c, const ry_update_args *a) {
    ry_dtype dt = a->dtype;
    if (a->n == 0) return;
    const ry_dk_device *d = dev_of(a->tparam);
    if (c->kind == RY_OPTIM_SGD) {
        ry_karg args[] = {KA_L(a->n), PARAM(a), GRAD(a), SLOT(a, 0), KA_L(a->tslot[0] != NULL),
                         KA_L((dt == RY_FLOAT32 ? (double)(float)a->weight_decay : a->weight_decay) != 0),
                         real(dt, a->weight_decay), real(dt, c->momentum), real(dt, a->scale),
                         real(dt, 1 - c->dampening), real(dt, -a->lr), KA_L(a->step == 1),
                         KA_L(c->nesterov)};
        run(d, kernel_for(d, sgd_src, dt), a->n, (int)(sizeof args / sizeof *args), args);
    } else if (c->kind == RY_OPTIM_ADAGRAD) {
        double wd = dt == RY_FLOAT32 ? (double)(float)a->weight_decay : a->weight_decay;
        ry_karg args[] = {KA_L(a->n), PARAM(a), GRAD(a), SLOT(a, 0), KA_L(wd != 0),
                         real(dt, a->weight_decay), real(dt, c->eps), real(dt, a->scale),
                         real(dt, -(a->lr / (1 + (double)(a->step - 1) * c->lr_decay)))};
        run(d, kernel_for(d, adagrad_src, dt), a->n, (int)(sizeof args / sizeof *args), args);
    } else if (c->kind == RY_OPTIM_RMSPROP) {
        double wd = dt == RY_FLOAT32 ? (double)(float)a->weight_decay : a->weight_decay;
        ry_karg args[] = {KA_L(a->n), PARAM(a), GRAD(a), SLOT(a, 0), SLOT(a, 1), SLOT(a, 2),
                         KA_L(a->tslot[1] != NULL), KA_L(a->tslot[2] != NULL), KA_L(wd != 0),
                         real(dt, a->weight_decay), real(dt, c->eps), real(dt, -a->lr),
                         real(dt, c->alpha), real(dt, 1 - c->alpha), real(dt, c->momentum),
                         real(dt, a->scale)};
        run(d, kernel_for(d, rmsprop_src, dt), a->n, (int)(sizeof args / sizeof *args), args);
    } else { /* Adam, AdamW */
        double t = (double)a->step;
        ry_karg args[] = {KA_L(a->n), PARAM(a), GRAD(a), SLOT(a, 0), SLOT(a, 1), SLOT(a, 2),
                         KA_L(a->tslot[2] != NULL), KA_L(a->weight_decay != 0),
                         KA_L(c->kind == RY_OPTIM_ADAMW), real(dt, a->weight_decay),
                         real(dt, 1 - a->lr * a->weight_decay), real(dt, 1 - c->beta1),
                         real(dt, c->beta2), real(dt, 1 - c->beta2),
                         real(dt, -(a->lr / (1 - pow(c->beta1, t)))),
                         real(dt, sqrt(1 - pow(c->beta2, t))), real(dt, c->eps), real(dt, a->scale)};
        run(d, kernel_for(d, adam_src, dt), a->n, (int)(sizeof args / sizeof *args), args);
    }
}

/* ---- the gradient slab ---- */

static const char *add_src =
    "@0 k(@3 n, @1@4 *d, @3 dof, @1const @4 *x, @3 xo, @3 first) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    d[dof + i] = first ? (@4)0 + x[xo + i] : d[dof + i] + x[xo + i];\n"
    "}\n";

/* true: the sum may hold a NaN or Inf (the device does not say which
 * without a read back): the trainer then scans the gradient before the
 * update, which finds it */
bool ry_dk_grad_add(ry_tensor *dst, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n, bool first) {
    const ry_dk_device *d = dev_of(dst);
    ry_karg a[] = {KA_L(n), KA_B(dst), KA_L(ry_dk_off(dst) + lo_d), KA_B(x), KA_L(ry_dk_off(x) + lo_x),
                   KA_L(first)};
    run(d, kernel_for(d, add_src, dst->dtype), n, 6, a);
    return true;
}

static const char *clip_src =
    "@0 k(@3 n, @1@4 *x, @3 xo, @4 hi) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @4 v = x[xo + i];\n"
    "    x[xo + i] = v < -hi ? -hi : v > hi ? hi : v;\n"
    "}\n";

/* src over t's n elements from lo with the scalar c */
static void with_scalar(const char *src, ry_tensor *t, int64_t lo, int64_t n, double c) {
    const ry_dk_device *d = dev_of(t);
    ry_karg a[] = {KA_L(n), KA_B(t), KA_L(ry_dk_off(t) + lo),
                  real(t->dtype, c)};
    run(d, kernel_for(d, src, t->dtype), n, 4, a);
}

void ry_dk_grad_clip(ry_tensor *t, int64_t lo, int64_t n, double c) { with_scalar(clip_src, t, lo, n, c); }

static const char *scale_src =
    "@0 k(@3 n, @1@4 *x, @3 xo, @4 c) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    x[xo + i] *= c;\n"
    "}\n";

void ry_dk_grad_scale(ry_tensor *t, int64_t lo, int64_t n, double c) { with_scalar(scale_src, t, lo, n, c); }

void ry_dk_grad_zero(ry_tensor *t, int64_t lo, int64_t n) {
    if (n <= 0) return;
    size_t es = ry_dtype_size(t->dtype);
    ry_error e = {0};
    if (dev_of(t)->zero(t, (size_t)lo * es, (size_t)n * es, &e)) keep(&e);
}

/* ---- the finiteness scan and norm: CHUNKS work-items, each over a
 * contiguous part of the run, give their first NaN/Inf and their sum of
 * squares in double ---- */
#define CHUNKS 64

static const char *scan_src =
    "@0 k(@3 nchunks, @1const @4 *x, @3 xo, @3 n, @1@3 *bad, @1double *sq) {\n"
    "    @3 w = @2; if (w >= nchunks) return;\n"
    "    @3 per = (n + nchunks - 1) / nchunks, lo = w * per, hi = lo + per < n ? lo + per : n;\n"
    "    @3 first = -1; double acc = 0;\n"
    "    for (@3 i = lo; i < hi; i++) {\n"
    "        double a = fabs((double)x[xo + i]);\n"
    "        if (first < 0 && !isfinite(a)) first = i;\n"
    "        acc += a * a;\n"
    "    }\n"
    "    bad[w] = first; sq[w] = acc;\n"
    "}\n";

/* the chunks' first bad index and sum of squares, into scratch tensors of
 * the device's heap (no driver allocation once warm) and read back */
static int64_t scan_run(const ry_tensor *t, int64_t lo, int64_t n, double *acc) {
    if (n <= 0) return -1;
    const ry_dk_device *d = dev_of(t);
    int64_t nchunks = n < CHUNKS * 1024 ? (n + 1023) / 1024 : CHUNKS;
    ry_tensor *bad = ry_tensor_new_on(d->allocator(), RY_INT64, 1, (int64_t[]){CHUNKS});
    ry_tensor *sq = ry_tensor_new_on(d->allocator(), RY_FLOAT64, 1, (int64_t[]){CHUNKS});
    ry_dk_kernel *k = kernel_for(d, scan_src, t->dtype);
    int64_t first = -1;
    ry_error e = {0};
    if (!bad || !sq) {
        ry_error_at(&e, RY_NO_SPAN, "the gradient scan: out of memory on %s", ry_device_name(d->dev()));
        keep(&e);
    } else if (k) {
        ry_karg a[] = {KA_L(nchunks), KA_B(t), KA_L(ry_dk_off(t) + lo), KA_L(n), KA_B(bad), KA_B(sq)};
        run(d, k, nchunks, 6, a);
        int64_t b[CHUNKS];
        double s[CHUNKS];
        if (d->download(b, bad, (size_t)nchunks * 8, &e) || d->download(s, sq, (size_t)nchunks * 8, &e)) {
            keep(&e);
        } else {
            for (int64_t w = 0; w < nchunks; w++) {
                if (first < 0 && b[w] >= 0) first = lo + b[w];
                *acc += s[w];
            }
        }
    }
    ry_tensor_release(bad);
    ry_tensor_release(sq);
    return first;
}

int64_t ry_dk_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm) {
    int64_t row = !rows ? t->size : t->shape[0] ? t->size / t->shape[0] : 0;
    int64_t runs = rows ? nrows : 1, first = -1;
    double acc = 0;
    for (int64_t r = 0; r < runs; r++) {
        int64_t k = scan_run(t, rows ? rows[r] * row : 0, row, &acc);
        if (first < 0 && k >= 0) first = k;
    }
    if (norm) *norm = sqrt(acc);
    return first;
}
