/*
 * params.c: parameter sets as views into one slab (see params.h). Each view
 * starts on a 64-byte boundary so kernels and GEMM see aligned data.
 */
#include <assert.h>
#include <string.h>

#include "relayc/params.h"
#include "relayc/target.h"

static int64_t aligned_elems(int64_t elems, size_t esize) {
    int64_t per_line = (int64_t)(64 / esize);
    return (elems + per_line - 1) / per_line * per_line;
}

static void free_partial(ry_param_set *p) {
    for (int i = 0; i < p->n; i++) {
        if (p->names) ry_free(p->names[i]);
        if (p->views) ry_tensor_release(p->views[i]);
    }
    ry_free(p->names);
    ry_free(p->views);
    ry_tensor_release(p->slab);
    ry_free(p);
}

ry_param_set *ry_params_new(ry_dtype dtype, int n, const char *const *names, const int *ndims,
                            const int64_t *const *shapes) {
    if (dtype != RY_FLOAT32 && dtype != RY_FLOAT64) return NULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) return NULL;
    size_t esize = ry_dtype_size(dtype);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ndims[i] < 0 || ndims[i] > RY_MAX_RANK) return NULL;
        int64_t elems = 1;
        for (int d = 0; d < ndims[i]; d++) {
            if (shapes[i][d] < 0 || (shapes[i][d] && elems > INT64_MAX / 8 / shapes[i][d])) return NULL;
            elems *= shapes[i][d];
        }
        int64_t need = aligned_elems(elems, esize);
        if (total > INT64_MAX / 8 - need) return NULL;
        total += need;
    }
    ry_param_set *p = ry_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->dtype = dtype;
    p->names = ry_calloc((size_t)(n ? n : 1), sizeof *p->names);
    p->views = ry_calloc((size_t)(n ? n : 1), sizeof *p->views);
    p->slab = ry_tensor_zeros(dtype, 1, &total);
    if (!p->names || !p->views || !p->slab) {
        free_partial(p);
        return NULL;
    }
    size_t offset = 0;
    for (int i = 0; i < n; i++, p->n = i) {
        p->names[i] = ry_strdup(names[i]);
        p->views[i] = ry_tensor_view(p->slab, offset, dtype, ndims[i], shapes[i]);
        if (!p->names[i] || !p->views[i]) {
            p->n = i + 1;
            free_partial(p);
            return NULL;
        }
        offset += (size_t)aligned_elems(p->views[i]->size, esize) * esize;
    }
    p->n = n;
    return p;
}

ry_param_set *ry_params_like(const ry_param_set *p) {
    const char **names = ry_calloc((size_t)(p->n ? p->n : 1), sizeof *names);
    int *ndims = ry_calloc((size_t)(p->n ? p->n : 1), sizeof *ndims);
    const int64_t **shapes = ry_calloc((size_t)(p->n ? p->n : 1), sizeof *shapes);
    ry_param_set *q = NULL;
    if (names && ndims && shapes) {
        for (int i = 0; i < p->n; i++) {
            names[i] = p->names[i];
            ndims[i] = p->views[i]->ndim;
            shapes[i] = p->views[i]->shape;
        }
        q = ry_params_new(p->dtype, p->n, names, ndims, shapes);
    }
    ry_free(names);
    ry_free(ndims);
    ry_free(shapes);
    return q;
}

void ry_params_free(ry_param_set *p) {
    if (p) free_partial(p);
}

int ry_params_find(const ry_param_set *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->names[i], name) == 0) return i;
    return -1;
}

bool ry_params_same_layout(const ry_param_set *a, const ry_param_set *b) {
    if (a->n != b->n || a->dtype != b->dtype) return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || !ry_tensor_same_shape(a->views[i], b->views[i]))
            return false;
    return true;
}

ry_status ry_params_copy(ry_param_set *dst, const ry_param_set *src) {
    assert(ry_params_same_layout(dst, src));
    ry_error err;
    return ry_tensor_copy_into(dst->slab, src->slab, &err);
}

ry_param_set *ry_params_to(const ry_target *t, const ry_param_set *p, ry_error *err) {
    ry_param_set *q = ry_params_like(p);
    if (!q) {
        ry_error_at(err, RY_NO_SPAN, "out of memory");
        return NULL;
    }
    ry_tensor *slab;
    if (ry_tensor_to(t, p->slab, &slab, err)) {
        ry_params_free(q);
        return NULL;
    }
    /* the same views, carved from the moved slab at the same offsets */
    for (int i = 0; i < q->n; i++) {
        ry_tensor *v = q->views[i];
        size_t off = (size_t)((const char *)v->data - (const char *)q->slab->data);
        ry_tensor *w = ry_tensor_view(slab, off, v->dtype, v->ndim, v->shape);
        if (!w) {
            ry_tensor_release(slab);
            ry_params_free(q);
            ry_error_at(err, RY_NO_SPAN, "out of memory");
            return NULL;
        }
        ry_tensor_release(v);
        q->views[i] = w;
    }
    ry_tensor_release(q->slab);
    q->slab = slab;
    return q;
}

/* Zeroing gradients runs every step: a typed loop, not ry_tensor_set. */
void ry_params_fill(ry_param_set *p, double v) {
    int64_t n = p->slab->size;
    if (p->dtype == RY_FLOAT32) {
        float *d = p->slab->data, f = (float)v;
        for (int64_t i = 0; i < n; i++) d[i] = f;
    } else {
        double *d = p->slab->data;
        for (int64_t i = 0; i < n; i++) d[i] = v;
    }
}
