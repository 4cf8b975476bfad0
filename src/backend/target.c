/*
 * target.c: the targets this build has, found by name, and what the
 * public target.h asks of any of them (device, counters, copies). A new
 * target adds its folder and one line in `targets` (and its name in
 * `known`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/target.h"

extern const ry_target ry_cpu_target;
#ifdef RY_HAVE_OPENCL
extern const ry_target ry_opencl_target;
#endif
#ifdef RY_HAVE_CUDA
extern const ry_target ry_cuda_target;
#endif

static const ry_target *const targets[] = {
    &ry_cpu_target,
#ifdef RY_HAVE_OPENCL
    &ry_opencl_target,
#endif
#ifdef RY_HAVE_CUDA
    &ry_cuda_target,
#endif
};
#define NTARGETS (int)(sizeof targets / sizeof targets[0])

/* every target relayc has, built in here or not */
static const char *const known[] = {"cpu", "opencl", "cuda"};

const ry_target *ry_target_cpu(void) { return &ry_cpu_target; }

const char *ry_target_name(const ry_target *t) { return t->name; }

/* "opencl" or "opencl:N" (N the device's index: relayc devices) */
ry_status ry_target_find(const char *name, const ry_target **out, ry_error *err) {
    *out = NULL;
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    int index = -1;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || v < 0 || v > 1000)
            return ry_error_at(err, RY_NO_SPAN, "target '%s': the device index after ':' must be a number", name);
        index = (int)v;
    }
    for (int i = 0; i < NTARGETS; i++)
        if (strlen(targets[i]->name) == len && strncmp(targets[i]->name, name, len) == 0) {
            const ry_target *t = targets[i];
            if (!t->open && index > 0)
                return ry_error_at(err, RY_NO_SPAN, "target %s has one device (%s:0)", t->name, t->name);
            if (t->open && t->open(index, err)) return RY_ERR;
            *out = t;
            return RY_OK;
        }
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strlen(known[i]) == len && strncmp(known[i], name, len) == 0)
            return ry_error_at(err, RY_NO_SPAN, "target %.*s is not built into this relayc", (int)len, name);
    return ry_error_at(err, RY_NO_SPAN, "unknown target '%s' (known: cpu, opencl, cuda)", name);
}

ry_device ry_target_device(const ry_target *t) { return t->dev ? t->dev() : RY_CPU; }

void ry_target_counters(const ry_target *t, ry_device_counters *out) {
    memset(out, 0, sizeof *out);
    if (t->counters) t->counters(out);
}

int ry_devices(ry_device_info *out, int cap) {
    int n = 0;
    for (int i = 0; i < NTARGETS; i++)
        if (targets[i]->devices) {
            int k = targets[i]->devices(n < cap ? out + n : NULL, n < cap ? cap - n : 0);
            n += k;
        }
    return n;
}

/* The target whose device d is, or NULL. */
static const ry_target *target_of(ry_device d) {
    for (int i = 0; i < NTARGETS; i++)
        if (targets[i]->device == d.kind) return targets[i];
    return NULL;
}

ry_status ry_tensor_to(const ry_target *t, const ry_tensor *src, ry_tensor **out, ry_error *err) {
    *out = NULL;
    ry_device to = ry_target_device(t);
    ry_tensor *dst = ry_tensor_new_on(t->allocator(), src->dtype, src->ndim, src->shape);
    if (!dst) return ry_error_at(err, RY_NO_SPAN, "out of memory on %s", ry_device_name(to));
    size_t n = ry_tensor_nbytes(src);
    ry_status st = RY_OK;
    const ry_target *from = target_of(src->device);
    if (src->device.kind == RY_DEVICE_CPU && to.kind == RY_DEVICE_CPU) {
        if (n) memcpy(dst->data, src->data, n);
    } else if (src->device.kind == RY_DEVICE_CPU) {
        st = t->upload(dst, src->data, n, err);
    } else if (to.kind == RY_DEVICE_CPU) {
        st = from ? from->download(dst->data, src, n, err)
                  : ry_error_at(err, RY_NO_SPAN, "a tensor on %s: no such target", ry_device_name(src->device));
    } else if (from == t) {
        st = t->copy(dst, src, n, err);
    } else {
        st = ry_error_at(err, RY_NO_SPAN, "no copy from %s to %s", ry_device_name(src->device),
                         ry_device_name(to));
    }
    if (st) {
        ry_tensor_release(dst);
        return RY_ERR;
    }
    *out = dst;
    return RY_OK;
}

ry_status ry_tensor_copy_into(ry_tensor *dst, const ry_tensor *src, ry_error *err) {
    size_t n = ry_tensor_nbytes(src);
    if (ry_tensor_nbytes(dst) != n)
        return ry_error_at(err, RY_NO_SPAN, "copying a tensor: %zu bytes into %zu", n, ry_tensor_nbytes(dst));
    bool dh = dst->device.kind == RY_DEVICE_CPU, sh = src->device.kind == RY_DEVICE_CPU;
    const ry_target *dt = target_of(dst->device), *st = target_of(src->device);
    if (dh && sh) {
        if (n) memmove(dst->data, src->data, n);
        return RY_OK;
    }
    if (sh) return dt->upload(dst, src->data, n, err);
    if (dh) return st->download(dst->data, src, n, err);
    if (dt == st) return dt->copy(dst, src, n, err);
    return ry_error_at(err, RY_NO_SPAN, "no copy from %s to %s", ry_device_name(src->device),
                       ry_device_name(dst->device));
}

void ry_kernel_table_index(const char *target, const ry_kernel *table, int n,
                           const ry_kernel **by_index, int max) {
    if (ry_op_count() > max) {
        fprintf(stderr, "relayc: internal error: more than %d operators\n", max);
        abort();
    }
    for (int i = 0; i < n; i++) {
        const ry_op *op = ry_op_find(table[i].op);
        if (!op) {
            fprintf(stderr, "relayc: internal error: %s kernel for unknown operator %s\n", target,
                    table[i].op);
            abort();
        }
        by_index[ry_op_index(op)] = &table[i];
    }
}
