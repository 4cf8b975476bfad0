/*
 * value.c: reference-counted runtime values (tensors, tuples, closures,
 * refs, ADT values, row-sparse tensors), shared by the interpreter and the
 * compiled engine.
 *
 * Releasing and flattening never recurse in C: a million-element List is
 * freed by threading dead values through their dead_next links, and walked
 * with an explicit stack. Cycles (a ref holding a closure that captures the
 * ref) are not collected; see value.h.
 */
#include <stdio.h>
#include <string.h>

#include "relayc/value.h"
#include "tensor/blockcache.h"

/* Values and their arrays (fields, captures, names) come from the
 * thread's block cache (blockcache.h): a step makes and drops them by the
 * thousand. */
static ry_value *new_value(ry_value_kind kind) {
    ry_value *v = ry_block_get(sizeof *v);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->refcount = 1;
    v->kind = kind;
    return v;
}

static size_t words(int n) { return sizeof(void *) * (size_t)n; }

/* Copies n pointers into a fresh array (NULL for n == 0). Sets *ok to
 * false on out-of-memory. */
static void *copy_words(int n, const void *src, bool *ok) {
    *ok = true;
    if (n <= 0) return NULL;
    void *a = ry_block_get(words(n));
    if (!a) {
        *ok = false;
        return NULL;
    }
    memcpy(a, src, words(n));
    return a;
}

static void put_words(void *a, int n) {
    if (n > 0) ry_block_put(a, words(n));
}

static void release_all(int n, ry_value **vs) {
    for (int i = 0; i < n; i++) ry_value_release(vs[i]);
}

ry_value *ry_value_tensor(ry_tensor *t) {
    ry_value *v = new_value(RY_VAL_TENSOR);
    if (!v) {
        ry_tensor_release(t);
        return NULL;
    }
    v->tensor = t;
    return v;
}

/* A tuple or ADT value holding a copy of fields[0..n) (taken over). */
static ry_value *with_fields(ry_value_kind kind, int n, ry_value **fields, ry_value ***out) {
    bool ok = true;
    ry_value *v = new_value(kind);
    ry_value **a = v ? copy_words(n, fields, &ok) : NULL;
    if (!v || !ok) {
        if (v) ry_block_put(v, sizeof *v);
        release_all(n, fields);
        return NULL;
    }
    *out = a;
    return v;
}

ry_value *ry_value_tuple(int n, ry_value **fields) {
    ry_value **a = NULL;
    ry_value *v = with_fields(RY_VAL_TUPLE, n, fields, &a);
    if (!v) return NULL;
    v->tuple.n = n;
    v->tuple.fields = a;
    return v;
}

ry_value *ry_value_adt(const ry_ctor *ctor, int n, ry_value **fields) {
    ry_value **a = NULL;
    ry_value *v = with_fields(RY_VAL_ADT, n, fields, &a);
    if (!v) return NULL;
    v->adt.ctor = ctor;
    v->adt.n = n;
    v->adt.fields = a;
    return v;
}

ry_value *ry_value_ref(ry_value *inner) {
    ry_value *v = new_value(RY_VAL_REF);
    if (!v) {
        ry_value_release(inner);
        return NULL;
    }
    v->ref.value = inner;
    return v;
}

ry_value *ry_value_closure(const ry_expr *func, int ncaptured, const ry_var **vars,
                           ry_value **captured) {
    bool ok = true;
    ry_value *v = new_value(RY_VAL_CLOSURE);
    ry_value **a = v ? copy_words(ncaptured, captured, &ok) : NULL;
    const ry_var **names = v && ok ? copy_words(ncaptured, vars, &ok) : NULL;
    if (!v || !ok) {
        if (a) put_words(a, ncaptured);
        if (v) ry_block_put(v, sizeof *v);
        release_all(ncaptured, captured);
        return NULL;
    }
    v->closure.func = func;
    v->closure.ncaptured = ncaptured;
    v->closure.captured_vars = names;
    v->closure.captured = a;
    return v;
}

ry_value *ry_value_ctor_fn(const ry_ctor *ctor) {
    ry_value *v = new_value(RY_VAL_CLOSURE);
    if (!v) return NULL;
    v->closure.ctor = ctor;
    return v;
}

/* Checks that values is (n, shape[1..]) of a rank-ndim dense shape and
 * that every index lies in [0, shape[0]). */
static bool rows_consistent(int ndim, const int64_t *shape, int64_t n, const int64_t *index,
                            const ry_tensor *values) {
    if (ndim < 1 || ndim > RY_MAX_RANK || n < 0 || (n > 0 && !index) || !values ||
        values->ndim != ndim || values->shape[0] != n)
        return false;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || (d > 0 && values->shape[d] != shape[d])) return false;
    for (int64_t i = 0; i < n; i++)
        if (index[i] < 0 || index[i] >= shape[0]) return false;
    return true;
}

ry_value *ry_value_rows(int ndim, const int64_t *shape, int64_t n, const int64_t *index,
                        ry_tensor *values) {
    if (!rows_consistent(ndim, shape, n, index, values)) {
        ry_tensor_release(values);
        return NULL;
    }
    ry_value *v = new_value(RY_VAL_ROWS);
    int64_t *ix = v ? ry_malloc(sizeof *ix * (size_t)(n > 0 ? n : 1)) : NULL;
    if (!ix) {
        ry_block_put(v, sizeof *v);
        ry_tensor_release(values);
        return NULL;
    }
    if (n > 0) memcpy(ix, index, sizeof *ix * (size_t)n);
    v->rows.dtype = values->dtype;
    v->rows.ndim = ndim;
    memcpy(v->rows.shape, shape, sizeof *shape * (size_t)ndim);
    v->rows.n = n;
    v->rows.index = ix;
    v->rows.values = values;
    return v;
}

ry_value *ry_value_retain(ry_value *v) {
    if (v) v->refcount++;
    return v;
}

/* Drops one reference to each child of a dead value d, threading children
 * that die in turn onto *dead. */
static void drop_children(ry_value *d, ry_value **dead) {
    int n = 0;
    ry_value **kids = NULL;
    switch (d->kind) {
    case RY_VAL_TENSOR: ry_tensor_release(d->tensor); return;
    case RY_VAL_ROWS:
        ry_tensor_release(d->rows.values);
        ry_free(d->rows.index);
        return;
    case RY_VAL_TUPLE: n = d->tuple.n, kids = d->tuple.fields; break;
    case RY_VAL_ADT: n = d->adt.n, kids = d->adt.fields; break;
    case RY_VAL_REF: n = 1, kids = &d->ref.value; break;
    case RY_VAL_CLOSURE: n = d->closure.ncaptured, kids = d->closure.captured; break;
    }
    for (int i = 0; i < n; i++) {
        ry_value *k = kids[i];
        if (k && --k->refcount == 0) {
            k->dead_next = *dead;
            *dead = k;
        }
    }
    if (d->kind == RY_VAL_TUPLE) put_words(d->tuple.fields, d->tuple.n);
    if (d->kind == RY_VAL_ADT) put_words(d->adt.fields, d->adt.n);
    if (d->kind == RY_VAL_CLOSURE) {
        put_words(d->closure.captured, d->closure.ncaptured);
        put_words((void *)d->closure.captured_vars, d->closure.ncaptured);
    }
}

void ry_value_release(ry_value *v) {
    if (!v || --v->refcount > 0) return;
    v->dead_next = NULL;
    for (ry_value *dead = v; dead;) {
        ry_value *d = dead;
        dead = d->dead_next;
        drop_children(d, &dead);
        ry_block_put(d, sizeof *d);
    }
}

/* ---- depth-first walks with an explicit stack ---- */

typedef struct walk {
    const ry_value **items;
    int n, cap;
    const ry_value *inline_items[64];
} walk;

static bool walk_push(walk *w, const ry_value *v) {
    if (w->n == w->cap) {
        int ncap = w->cap * 2;
        const ry_value **fresh = ry_malloc(sizeof *fresh * (size_t)ncap);
        if (!fresh) return false;
        memcpy(fresh, w->items, sizeof *fresh * (size_t)w->n);
        if (w->items != w->inline_items) ry_free((void *)w->items);
        w->items = fresh;
        w->cap = ncap;
    }
    w->items[w->n++] = v;
    return true;
}

/* Visits v's tensors depth first, left to right, writing the first max of
 * them to out (which may be NULL). Returns the count or -1 on OOM. */
static int walk_tensors(const ry_value *v, ry_tensor **out, int max) {
    walk w = {.n = 0, .cap = 64};
    w.items = w.inline_items;
    int count = 0;
    bool ok = walk_push(&w, v);
    while (ok && w.n > 0) {
        const ry_value *x = w.items[--w.n];
        int n = 0;
        ry_value *const *kids = NULL;
        switch (x->kind) {
        case RY_VAL_TENSOR:
            if (out && count < max) out[count] = x->tensor;
            count++;
            break;
        case RY_VAL_ROWS:
            /* Stands for one dense tensor that does not exist yet: counted,
             * flattened to NULL (value.h). */
            if (out && count < max) out[count] = NULL;
            count++;
            break;
        case RY_VAL_TUPLE: n = x->tuple.n, kids = x->tuple.fields; break;
        case RY_VAL_ADT: n = x->adt.n, kids = x->adt.fields; break;
        case RY_VAL_REF: n = 1, kids = &x->ref.value; break;
        case RY_VAL_CLOSURE: break;
        }
        /* Pushed in reverse so the first child is visited first. */
        for (int i = n - 1; ok && i >= 0; i--) ok = walk_push(&w, kids[i]);
    }
    if (w.items != w.inline_items) ry_free((void *)w.items);
    return ok ? count : -1;
}

int ry_value_count_tensors(const ry_value *v) { return walk_tensors(v, NULL, 0); }

int ry_value_flatten(const ry_value *v, ry_tensor **out, int max) {
    return walk_tensors(v, out, max);
}

ry_value *ry_value_unflatten(const ry_type *t, ry_tensor **res, int *k) {
    if (t->kind != RY_TYPE_TUPLE) {
        ry_tensor *x = res[*k];
        res[(*k)++] = NULL;
        return ry_value_tensor(x);
    }
    ry_value *inline_fields[8], **fields = inline_fields;
    if (t->tuple.n > 8 && !(fields = ry_malloc(sizeof *fields * (size_t)t->tuple.n))) return NULL;
    int made = 0;
    for (; made < t->tuple.n; made++)
        if (!(fields[made] = ry_value_unflatten(t->tuple.fields[made], res, k))) break;
    ry_value *v = NULL;
    if (made == t->tuple.n) v = ry_value_tuple(made, fields);
    else
        for (int i = 0; i < made; i++) ry_value_release(fields[i]);
    if (fields != inline_fields) ry_free(fields);
    return v;
}

const char *ry_value_kind_name(const ry_value *v) {
    switch (v->kind) {
    case RY_VAL_TENSOR: return "a tensor";
    case RY_VAL_TUPLE: return "a tuple";
    case RY_VAL_CLOSURE: return "a function";
    case RY_VAL_REF: return "a reference";
    case RY_VAL_ADT: return "a constructor value";
    case RY_VAL_ROWS: return "a row-sparse tensor";
    }
    return "a value";
}

const char *ry_value_describe(const ry_value *v, char *buf, size_t n) {
    char t[96];
    switch (v->kind) {
    case RY_VAL_TENSOR: return ry_tensor_describe(v->tensor, buf, n);
    case RY_VAL_ROWS: {
        int k = snprintf(t, sizeof t, "%s[", ry_dtype_name(v->rows.dtype));
        for (int d = 0; d < v->rows.ndim && k > 0 && (size_t)k < sizeof t; d++)
            k += snprintf(t + k, sizeof t - (size_t)k, "%s%lld", d ? ", " : "",
                          (long long)v->rows.shape[d]);
        snprintf(buf, n, "rows(%lld of %s])", (long long)v->rows.n, t);
        return buf;
    }
    case RY_VAL_TUPLE: snprintf(buf, n, "a tuple of %d", v->tuple.n); return buf;
    case RY_VAL_ADT: snprintf(buf, n, "%s(...)", v->adt.ctor->name); return buf;
    default: snprintf(buf, n, "%s", ry_value_kind_name(v)); return buf;
    }
}
