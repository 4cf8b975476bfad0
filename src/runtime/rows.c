/*
 * rows.c: row-sparse values (RY_VAL_ROWS, value.h) turned back into dense
 * tensors: densify, and add into an existing dense tensor. Slices are added
 * in index order with scatter_nd's own slice adder, so the result equals a
 * dense scatter-add of the same slices bit for bit. Making row-sparse
 * values, and the operators that keep them sparse, belong to the compiled
 * engine (rows_ops.c).
 */
#include <string.h>

#include "backend/cpu/scatter_kernels.h"
#include "relayc/value.h"

/* Elements per slice along axis 0 of v's dense shape. */
static int64_t slice_size(const ry_value *v) {
    int64_t s = 1;
    for (int d = 1; d < v->rows.ndim; d++) s *= v->rows.shape[d];
    return s;
}

bool ry_rows_add_into(ry_tensor *dst, const ry_value *v) {
    if (!dst || !v || v->kind != RY_VAL_ROWS || dst->dtype != v->rows.dtype ||
        dst->ndim != v->rows.ndim)
        return false;
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] != v->rows.shape[d]) return false;
    int64_t s = slice_size(v);
    size_t w = ry_dtype_size(dst->dtype);
    const char *src = v->rows.values->data;
    char *base = dst->data;
    for (int64_t i = 0; i < v->rows.n; i++)
        ry_scatter_add_slice(dst->dtype, base + (size_t)(v->rows.index[i] * s) * w, src + (size_t)(i * s) * w, s);
    return true;
}

ry_tensor *ry_rows_densify(const ry_value *v) {
    if (!v || v->kind != RY_VAL_ROWS) return NULL;
    ry_tensor *t = ry_tensor_zeros(v->rows.dtype, v->rows.ndim, v->rows.shape);
    if (t && !ry_rows_add_into(t, v)) {
        ry_tensor_release(t);
        return NULL;
    }
    return t;
}

/* v (RY_VAL_ROWS) becomes the RY_VAL_TENSOR it stands for. */
static bool materialize(ry_value *v) {
    ry_tensor *t = ry_rows_densify(v);
    if (!t) return false;
    ry_tensor_release(v->rows.values);
    ry_free(v->rows.index);
    v->kind = RY_VAL_TENSOR;
    v->tensor = t;
    return true;
}

/* ---- the deep walk: an explicit stack, and a set of the tuples, ADT
 * values and refs seen (a ref may hold a value that holds it again) ---- */

typedef struct seen_set {
    const ry_value **slot;
    size_t cap, n;
} seen_set;

static size_t hash_ptr(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull); }

/* Adds v; false when it was there already, *oom on out-of-memory. */
static bool seen_add(seen_set *s, const ry_value *v, bool *oom) {
    if (2 * (s->n + 1) > s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 64;
        const ry_value **fresh = ry_calloc(ncap, sizeof *fresh);
        if (!fresh) {
            *oom = true;
            return false;
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i]) continue;
            size_t h = hash_ptr(s->slot[i]) & (ncap - 1);
            while (fresh[h]) h = (h + 1) & (ncap - 1);
            fresh[h] = s->slot[i];
        }
        ry_free((void *)s->slot);
        s->slot = fresh;
        s->cap = ncap;
    }
    size_t h = hash_ptr(v) & (s->cap - 1);
    while (s->slot[h]) {
        if (s->slot[h] == v) return false;
        h = (h + 1) & (s->cap - 1);
    }
    s->slot[h] = v;
    s->n++;
    return true;
}

bool ry_value_densify_rows(ry_value *v) {
    if (!v) return true;
    if (v->kind == RY_VAL_ROWS) return materialize(v);
    if (v->kind == RY_VAL_TENSOR || v->kind == RY_VAL_CLOSURE) return true;
    seen_set seen = {0};
    size_t n = 0, cap = 64;
    ry_value **stack = ry_malloc(sizeof *stack * cap);
    bool ok = stack != NULL, oom = false;
    if (ok) stack[n++] = v;
    while (ok && n > 0) {
        ry_value *x = stack[--n];
        if (x->kind == RY_VAL_ROWS) {
            ok = materialize(x);
            continue;
        }
        if (x->kind == RY_VAL_TENSOR || x->kind == RY_VAL_CLOSURE) continue;
        if (!seen_add(&seen, x, &oom)) {
            ok = !oom;
            continue;
        }
        int k = x->kind == RY_VAL_TUPLE ? x->tuple.n : x->kind == RY_VAL_ADT ? x->adt.n : 1;
        ry_value **kids = x->kind == RY_VAL_TUPLE ? x->tuple.fields
                          : x->kind == RY_VAL_ADT ? x->adt.fields
                                                  : &x->ref.value;
        if (n + (size_t)k > cap) {
            size_t ncap = 2 * (n + (size_t)k);
            ry_value **fresh = ry_malloc(sizeof *fresh * ncap);
            if (!fresh) {
                ok = false;
                break;
            }
            memcpy(fresh, stack, sizeof *stack * n);
            ry_free(stack);
            stack = fresh;
            cap = ncap;
        }
        for (int i = 0; i < k; i++)
            if (kids[i]) stack[n++] = kids[i];
    }
    ry_free(stack);
    ry_free((void *)seen.slot);
    return ok;
}
