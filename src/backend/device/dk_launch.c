/*
 * dk_launch.c (device): what every device kernel's host code shares: the
 * registered devices and the check that a call's tensors are all on one,
 * building and running a generated source or a template, the spellings
 * of accumulator and element-moving types, scratch tensors on the
 * device's heap.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/device_kernels.h"

#define MAX_KINDS 8
static const ry_dk_device *devices[MAX_KINDS];

void ry_dk_register(const ry_dk_device *d) {
    if ((int)d->kind >= 0 && (int)d->kind < MAX_KINDS)
        __atomic_store_n(&devices[d->kind], d, __ATOMIC_RELEASE);
}

const ry_dk_device *ry_dk_for(ry_device_kind kind) {
    if ((int)kind < 0 || (int)kind >= MAX_KINDS) return NULL;
    return __atomic_load_n(&devices[kind], __ATOMIC_ACQUIRE);
}

static const ry_tensor *arg(int i, int nin, ry_tensor *const *in, ry_tensor *const *out) {
    return i < nin ? in[i] : out[i - nin];
}

const ry_dk_device *ry_dk_of(const ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out) {
    /* the device of the results (else of the first device argument) */
    const ry_dk_device *d = NULL;
    for (int i = nin; i < nin + nout && !d; i++) d = ry_dk_for(arg(i, nin, in, out)->device.kind);
    for (int i = 0; i < nin && !d; i++) d = ry_dk_for(arg(i, nin, in, out)->device.kind);
    if (!d) {
        ry_error_at(c->err, c->span, "%s: no argument is on a device, but the kernel runs on one",
                    c->op->name);
        return NULL;
    }
    ry_device dev = d->dev();
    for (int i = 0; i < nin + nout; i++) {
        const ry_tensor *t = arg(i, nin, in, out);
        if (t->device.kind == dev.kind && t->device.id == dev.id) continue;
        char here[32]; /* ry_device_name's buffer is reused by the next call */
        snprintf(here, sizeof here, "%s", ry_device_name(dev));
        ry_error_at(c->err, c->span, "%s: %s %d is on %s, but the kernel runs on %s", c->op->name,
                    i < nin ? "argument" : "result", (i < nin ? i : i - nin) + 1,
                    ry_device_name(t->device), here);
        return NULL;
    }
    return d;
}

const ry_dk_device *ry_dk_of_float(ry_kernel_ctx *c, int nin, int want, ry_tensor *const *in, int nout,
                                   ry_tensor *const *out) {
    if (nin != want) {
        ry_error_at(c->err, c->span, "%s: expected %d inputs", c->op->name, want);
        return NULL;
    }
    const ry_dk_device *d = ry_dk_of(c, nin, in, nout, out);
    ry_dtype dt = nin > 0 ? in[0]->dtype : RY_FLOAT32;
    if (d && dt != RY_FLOAT32 && dt != RY_FLOAT64) {
        ry_dk_no_kernel(d, c, dt);
        return NULL;
    }
    return d;
}

ry_status ry_dk_no_kernel(const ry_dk_device *d, ry_kernel_ctx *c, ry_dtype dt) {
    return ry_error_at(c->err, c->span, "%s: %s has no kernel on %s", c->op->name, ry_dtype_name(dt),
                       d->dialect->name);
}

ry_status ry_dk_gen_run(const ry_dk_device *d, ry_kernel_ctx *c, char *src, ry_dtype what, size_t n,
                        int nargs, const ry_karg *args) {
    if (!src) {
        if (!ry_dk_type(d, what)) return ry_dk_no_kernel(d, c, what);
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    ry_dk_kernel *k = d->build(src, "k", c->span, c->err);
    free(src);
    if (!k) return RY_ERR;
    return d->launch(k, n, nargs, args, c->span, c->err);
}

ry_dk_kernel *ry_dk_template(const ry_dk_device *d, const char *tmpl, const char *const *subs,
                             int nsubs, ry_span span, ry_error *err) {
    ry_sbuf b = {0};
    ry_sbuf_add(&b, "%s", d->dialect->prelude);
    for (const char *p = tmpl; *p; p++) {
        if (*p == '@' && p[1] >= '0' && p[1] - '0' < nsubs) {
            ry_sbuf_add(&b, "%s", subs[p[1] - '0']);
            p++;
        } else {
            ry_sbuf_add(&b, "%c", *p);
        }
    }
    if (b.oom) {
        free(b.s);
        ry_error_at(err, span, "out of memory");
        return NULL;
    }
    ry_dk_kernel *k = d->build(b.s, "k", span, err);
    free(b.s);
    return k;
}

const char *ry_dk_acc_type(const ry_dk_device *d, ry_dtype dt) {
    return d->fp64() ? ry_dk_type(d, RY_FLOAT64) : ry_dk_type(d, dt);
}

const char *ry_dk_move_type(const ry_dk_device *d, ry_dtype dt) {
    return ry_dk_type(d, dt == RY_FLOAT16 ? RY_UINT16 : dt);
}

const char *ry_dk_word(const ry_dk_device *d, size_t es) {
    ry_dtype dt = es == 1 ? RY_UINT8 : es == 2 ? RY_UINT16 : es == 4 ? RY_INT32 : RY_INT64;
    return ry_dk_type(d, dt);
}

ry_tensor *ry_dk_scratch(const ry_dk_device *d, ry_kernel_ctx *c, ry_dtype dt, int nd,
                         const int64_t *shape) {
    ry_tensor *t = ry_tensor_new_on(d->allocator(), dt, nd, shape);
    if (!t)
        ry_error_at(c->err, c->span, "%s: out of memory on %s", c->op->name, ry_device_name(d->dev()));
    return t;
}

/* ---- a device target's pools: the device's one heap serves every
 * program (its size classes are the pool), so a pool is the heap ---- */
void ry_dk_pool_close(ry_pool *p) {}
long ry_dk_pool_kept(ry_pool *p) { return 0; }

size_t ry_dk_capacity(const ry_tensor *t) {
    const ry_dk_device *d = ry_dk_for(t->device.kind);
    return d && t->alloc == d->allocator() ? ry_devbuf_bytes(t) : 0;
}
