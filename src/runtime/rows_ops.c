/*
 * rows_ops.c: the compiled engine's row-sparse operators (rows_ops.h).
 * An embedding's gradient is a scatter-add of a few rows into zeros the
 * size of the table; kept as RY_VAL_ROWS it costs the rows, not the table.
 * The zeros it starts from are known zeros: zeros_like gives a view of a
 * zero-filled buffer (fresh pages nobody touches, when large), a plain
 * tensor to everything else. Each rule gives exactly what the dense
 * kernels give, up to the order of float additions where rows repeat
 * (rows.c adds them in index order). What a rule does not cover is
 * densified, once, in place, so kernels never see a row-sparse value. The
 * interpreter stays dense.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/cpu/scatter_kernels.h"
#include "runtime/rows_ops.h"
#include "tensor/oom.h"

static bool is_float(ry_dtype d) { return d == RY_FLOAT32 || d == RY_FLOAT64; }

static int64_t slice_elems(int ndim, const int64_t *shape) {
    int64_t s = 1;
    for (int d = 1; d < ndim; d++) s *= shape[d];
    return s;
}

static ry_status oom(ry_error *err, const ry_expr *call) {
    return ry_error_at(err, call->span, "%s: out of memory", call->call.callee->op.op->name);
}

/* ---- known zeros ----
 * A view (never written: kernels write only fresh or dying owned buffers,
 * and the engine takes no view in place) of a base tensor from this
 * allocator, whose blocks are zero when made. Large ones are fresh
 * anonymous mappings, whose pages stay untouched until something reads
 * them, so an embedding-sized zeros_like costs two system calls (calloc
 * would memset heap memory that malloc's adaptive mmap threshold hands
 * back). A 64-byte header keeps the mapping's length (0: not mapped). */
#define ZERO_MAP_BYTES ((size_t)1 << 20)
#define ZERO_HEADER 64

static void *zero_alloc(ry_allocator *self, size_t nbytes) {
    (void)self;
    size_t total = nbytes + ZERO_HEADER;
    char *p;
    if (nbytes >= ZERO_MAP_BYTES) {
        p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        *(size_t *)p = total;
    } else if ((p = ry_cpu_allocator()->alloc(ry_cpu_allocator(), total))) {
        memset(p, 0, total); /* small: 64-byte aligned like every tensor */
    }
    return p ? p + ZERO_HEADER : NULL;
}

static void zero_free(ry_allocator *self, void *ptr) {
    (void)self;
    if (!ptr) return;
    char *p = (char *)ptr - ZERO_HEADER;
    size_t mapped = *(size_t *)p;
    if (mapped) munmap(p, mapped);
    else ry_cpu_allocator()->free(ry_cpu_allocator(), p);
}

static ry_allocator zero_allocator = {{RY_DEVICE_CPU, 0}, zero_alloc, zero_free};

static bool known_zero(const ry_value *v) {
    return v->kind == RY_VAL_TENSOR && v->tensor->base && v->tensor->base->alloc == &zero_allocator;
}

/* A known zero of dtype and shape, a view of *cache when that is large
 * enough, else of a new zero block that replaces it there (views keep
 * the old one alive). Known zeros are never written, so any number of
 * them may share one block. cache NULL: a block of its own. */
#define ZERO_MIN_BLOCK ((int64_t)1 << 16)

static ry_value *zero_view(ry_tensor **cache, ry_dtype dt, int ndim, const int64_t *shape) {
    int64_t bytes = (int64_t)ry_dtype_size(dt);
    for (int d = 0; d < ndim; d++) bytes *= shape[d];
    ry_tensor *base = cache ? *cache : NULL;
    if (base && base->size >= bytes) {
        ry_tensor_retain(base);
    } else {
        int64_t n = cache && bytes < ZERO_MIN_BLOCK ? ZERO_MIN_BLOCK : bytes;
        if (!(base = ry_tensor_new_on(&zero_allocator, RY_UINT8, 1, &n))) return NULL;
        if (cache) {
            ry_tensor_release(*cache);
            *cache = ry_tensor_retain(base);
        }
    }
    ry_tensor *t = ry_tensor_view(base, 0, dt, ndim, shape);
    ry_tensor_release(base);
    return t ? ry_value_tensor(t) : NULL;
}

ry_value *ry_rows_zero_view(ry_tensor **cache, ry_dtype dt, int ndim, const int64_t *shape) {
    return zero_view(cache, dt, ndim, shape);
}

/* The dense dtype and shape of a tensor or rows value. */
static bool dense_type(const ry_value *v, ry_dtype *dt, int *ndim, const int64_t **shape) {
    if (v->kind == RY_VAL_TENSOR) {
        *dt = v->tensor->dtype, *ndim = v->tensor->ndim, *shape = v->tensor->shape;
        return true;
    }
    if (v->kind == RY_VAL_ROWS) {
        *dt = v->rows.dtype, *ndim = v->rows.ndim, *shape = v->rows.shape;
        return true;
    }
    return false;
}

typedef struct shaping {
    const ry_expr *call;
    int nargs;
    ry_value *const *args;
    ry_dtype *dt;
    int *ndim;
    int64_t *shape;
    ry_arena *a;
    bool ok;
} shaping;

static void find_shape(void *c) {
    shaping *sh = c;
    const ry_expr *call = sh->call;
    int nargs = sh->nargs;
    ry_value *const *args = sh->args;
    ry_arena *a = sh->a;
    const ry_op *op = call->call.callee->op.op;
    ry_type *types[4];
    bool ok = nargs <= 4;
    for (int i = 0; ok && i < nargs; i++) {
        ry_dtype d;
        int n;
        const int64_t *s;
        ry_dim dims[RY_MAX_RANK];
        ok = dense_type(args[i], &d, &n, &s);
        for (int k = 0; ok && k < n; k++) dims[k] = (ry_dim){RY_DIM_CONST, s[k], NULL};
        if (ok) types[i] = ry_type_tensor_arena(a, d, n, dims);
    }
    ry_error e;
    ry_rel_ctx rc = {a, op, &call->call.attrs, call->span, &e};
    ry_type *t = NULL;
    ok = ok && op->rel(&rc, nargs, types, &t) == RY_REL_OK && t && t->kind == RY_TYPE_TENSOR;
    for (int k = 0; ok && k < t->tensor.ndim; k++) {
        ok = t->tensor.dims[k].kind == RY_DIM_CONST;
        sh->shape[k] = t->tensor.dims[k].value;
    }
    if (ok) *sh->dt = t->tensor.dtype, *sh->ndim = t->tensor.ndim;
    sh->ok = ok;
}

/* The result type of op on the dense types of args (tensor types, constant
 * dims) by the type relation; false when it cannot be had (also without
 * the memory for the types: the caller then goes the dense way). */
static bool result_shape(const ry_expr *call, int nargs, ry_value *const *args, ry_dtype *dt,
                         int *ndim, int64_t *shape, ry_arena *scratch) {
    ry_arena *a = scratch ? scratch : ry_oom_arena_new();
    if (!a) return false;
    if (scratch) ry_arena_reset(a);
    shaping s = {call, nargs, args, dt, ndim, shape, a, false};
    bool ok = !ry_oom_catch(find_shape, &s) && s.ok;
    if (!scratch) ry_arena_free(a);
    return ok;
}

/* zeros_like(x) of a float x of rank >= 1: a known zero. */
static bool rows_zeros(const ry_expr *call, ry_value *const *args, ry_value **out, ry_status *st,
                       ry_error *err) {
    ry_dtype dt;
    int nd;
    const int64_t *shape;
    if (!dense_type(args[0], &dt, &nd, &shape) || nd < 1 || !is_float(dt)) return false;
    *out = zero_view(NULL, dt, nd, shape);
    *st = *out ? RY_OK : oom(err, call);
    return true;
}

/* a ++ b: the rows of both, a's first (so densifying adds them in the
 * order a dense a + b would see them within each operand). Rows listed
 * once per step of a loop would grow without bound, each step copying
 * them all again (an RNN's 65-row input-projection table gathers 32 rows
 * per step: 2,048 rows by step 64, 66,560 row copies in all), so past
 * twice the table's rows the sum is dense: listing them no longer saves
 * memory, and an add then copies at most two tables' worth. Densified,
 * the rows are added in the order a later densification would add them. */
#define ROWS_PER_TABLE 2

static ry_value *concat_rows(const ry_value *a, const ry_value *b) {
    int64_t n = a->rows.n + b->rows.n, vs[RY_MAX_RANK];
    if (n > ROWS_PER_TABLE * a->rows.shape[0]) {
        ry_tensor *t = ry_rows_densify(a);
        if (t && !ry_rows_add_into(t, b)) {
            ry_tensor_release(t);
            t = NULL;
        }
        return t ? ry_value_tensor(t) : NULL;
    }
    memcpy(vs, a->rows.shape, sizeof vs);
    vs[0] = n;
    ry_tensor *values = ry_tensor_new(a->rows.dtype, a->rows.ndim, vs);
    int64_t *index = ry_malloc(sizeof *index * (size_t)(n ? n : 1));
    if (!values || !index) {
        ry_tensor_release(values);
        ry_free(index);
        return NULL;
    }
    size_t na = ry_tensor_nbytes(a->rows.values);
    if (na) memcpy(values->data, a->rows.values->data, na);
    if (ry_tensor_nbytes(b->rows.values))
        memcpy((char *)values->data + na, b->rows.values->data, ry_tensor_nbytes(b->rows.values));
    if (a->rows.n) memcpy(index, a->rows.index, sizeof *index * (size_t)a->rows.n);
    if (b->rows.n) memcpy(index + a->rows.n, b->rows.index, sizeof *index * (size_t)b->rows.n);
    ry_value *v = ry_value_rows(a->rows.ndim, a->rows.shape, n, index, values);
    ry_free(index);
    return v;
}

/* scatter_nd(data, indices, updates, mode="add") with data row-sparse or
 * a known zero and indices (1, Y...): the updates (Y..., X[1:]) become
 * N = prod(Y) more rows, copied (the engine may reuse their buffer). */
static bool rows_scatter(const ry_expr *call, ry_value *const *args, ry_value **out,
                         ry_status *st, ry_error *err) {
    const ry_op *op = call->call.callee->op.op;
    const ry_value *data = args[0];
    ry_dtype dt;
    int nd;
    const int64_t *shape;
    if ((data->kind != RY_VAL_ROWS && !known_zero(data)) || args[1]->kind != RY_VAL_TENSOR ||
        args[2]->kind != RY_VAL_TENSOR || strcmp(ry_attr_str(op, &call->call.attrs, "mode"), "add") ||
        !dense_type(data, &dt, &nd, &shape) || nd < 1)
        return false;
    const ry_tensor *ind = args[1]->tensor, *up = args[2]->tensor;
    int k = ind->ndim - 1;
    if (ind->ndim < 1 || ind->shape[0] != 1 || up->dtype != dt || up->ndim != k + nd - 1) return false;
    for (int i = 0; i < up->ndim; i++)
        if (up->shape[i] != (i < k ? ind->shape[1 + i] : shape[1 + i - k])) return false;
    int64_t n = ind->size, vs[RY_MAX_RANK], rows = shape[0];
    memcpy(vs, shape, sizeof *vs * (size_t)nd);
    vs[0] = n;
    ry_tensor *values = ry_tensor_new(up->dtype, nd, vs);
    int64_t *index = ry_malloc(sizeof *index * (size_t)(n ? n : 1));
    ry_value *fresh = NULL;
    *st = RY_OK;
    if (values && index) {
        for (int64_t i = 0; i < n && *st == RY_OK; i++) {
            index[i] = ry_scatter_read_index(ind, i);
            if (index[i] < 0 || index[i] >= rows)
                *st = ry_error_at(err, call->span, "scatter_nd: index %lld out of range [0, %lld) in dim 0",
                                  (long long)index[i], (long long)rows);
        }
        if (ry_tensor_nbytes(up)) memcpy(values->data, up->data, ry_tensor_nbytes(up));
        if (*st == RY_OK) fresh = ry_value_rows(nd, shape, n, index, values);
        else ry_tensor_release(values);
        values = NULL;
    }
    ry_tensor_release(values);
    ry_free(index);
    if (*st != RY_OK) return true;
    if (!fresh) {
        *st = oom(err, call);
        return true;
    }
    *out = data->kind == RY_VAL_ROWS && data->rows.n ? concat_rows(data, fresh) : ry_value_retain(fresh);
    ry_value_release(fresh);
    if (!*out) *st = oom(err, call);
    return true;
}

/* Whether argument i dies at this call and nothing else holds it (but
 * acc, the ref the result replaces it in): its tensor may then take the
 * result in place. */
static bool reusable(const ry_value *v, int i, const int *regs, int nkill, const int *kill,
                     const ry_value *acc) {
    int holders = 1 + (acc == v);
    if (!regs || v->refcount != holders || v->kind != RY_VAL_TENSOR ||
        v->tensor->refcount != 1 || !v->tensor->alloc)
        return false;
    for (int k = 0; k < nkill; k++)
        if (kill[k] == regs[i]) return true;
    return false;
}

static bool same_type(const ry_value *a, const ry_value *b) {
    ry_dtype da, db;
    int na, nb;
    const int64_t *sa, *sb;
    return dense_type(a, &da, &na, &sa) && dense_type(b, &db, &nb, &sb) && da == db && na == nb &&
           !memcmp(sa, sb, sizeof *sa * (size_t)na);
}

/* add with a known zero or a row-sparse operand, both of one dtype and
 * shape (no broadcasting): zero + x is x; rows + rows concatenates; rows +
 * dense scatter-adds the rows into the dense operand (in place when it
 * dies here unshared). */
static bool rows_add(const ry_expr *call, ry_value *const *args, const int *regs, int nkill,
                     const int *kill, const ry_value *acc, ry_value **out, ry_status *st,
                     ry_error *err) {
    ry_value *a = args[0], *b = args[1];
    if (!same_type(a, b)) return false;
    *st = RY_OK;
    if (known_zero(a) || known_zero(b)) {
        *out = ry_value_retain(known_zero(a) ? b : a);
        return true;
    }
    if (a->kind == RY_VAL_ROWS && b->kind == RY_VAL_ROWS) {
        *out = !b->rows.n ? ry_value_retain(a) : !a->rows.n ? ry_value_retain(b) : concat_rows(a, b);
        if (!*out) *st = oom(err, call);
        return true;
    }
    int di = a->kind == RY_VAL_TENSOR ? 0 : 1;
    ry_value *dense = args[di], *rows = args[1 - di];
    if (rows->kind != RY_VAL_ROWS || dense->kind != RY_VAL_TENSOR) return false;
    if (!rows->rows.n) {
        *out = ry_value_retain(dense);
        return true;
    }
    if (reusable(dense, di, regs, nkill, kill, acc)) {
        ry_rows_add_into(dense->tensor, rows);
        *out = ry_value_retain(dense);
        return true;
    }
    ry_tensor *t = ry_tensor_copy(dense->tensor);
    if (t) ry_rows_add_into(t, rows);
    *out = t ? ry_value_tensor(t) : NULL;
    if (!*out) *st = oom(err, call);
    return true;
}

/* reshape of a known zero: a known zero of the new shape (the same
 * buffer); of rows, when it keeps axis 0 (and so each row's elements). */
static bool rows_reshape(const ry_expr *call, ry_value *const *args, ry_value **out,
                         ry_status *st, ry_error *err, ry_arena *scratch) {
    const ry_value *r = args[0];
    ry_dtype dt;
    int nd;
    int64_t shape[RY_MAX_RANK];
    if ((r->kind != RY_VAL_ROWS && !known_zero(r)) ||
        !result_shape(call, 1, args, &dt, &nd, shape, scratch))
        return false;
    if (r->kind == RY_VAL_TENSOR) {
        ry_tensor *t = ry_tensor_view(r->tensor->base, (size_t)((char *)r->tensor->data -
                                                                 (char *)r->tensor->base->data),
                                      dt, nd, shape);
        *out = t ? ry_value_tensor(t) : NULL;
        *st = *out ? RY_OK : oom(err, call);
        return true;
    }
    if (nd < 1 || shape[0] != r->rows.shape[0] ||
        slice_elems(nd, shape) != slice_elems(r->rows.ndim, r->rows.shape))
        return false;
    int64_t vs[RY_MAX_RANK];
    memcpy(vs, shape, sizeof vs);
    vs[0] = r->rows.n;
    /* a view: the values tensor is this value's own, never an engine buffer */
    ry_tensor *values = ry_tensor_view(r->rows.values, 0, dt, nd, vs);
    *out = values ? ry_value_rows(nd, shape, r->rows.n, r->rows.index, values) : NULL;
    *st = *out ? RY_OK : oom(err, call);
    return true;
}

/* Whether a tuple argument (concatenate's, stack's) holds rows. */
static bool holds_rows(const ry_value *v) {
    if (v->kind == RY_VAL_ROWS) return true;
    if (v->kind != RY_VAL_TUPLE) return false;
    for (int i = 0; i < v->tuple.n; i++)
        if (holds_rows(v->tuple.fields[i])) return true;
    return false;
}

/* The operators with row-sparse rules, found once (pthread_once: trainer
 * threads share them), so each call compares pointers, not names. */
enum { R_ZEROS_LIKE, R_SCATTER, R_ADD, R_RESHAPE, R_COUNT };
static const ry_op *rules[R_COUNT];
static pthread_once_t rules_once = PTHREAD_ONCE_INIT;

static void find_rules(void) {
    const char *names[R_COUNT] = {"zeros_like", "scatter_nd", "add", "reshape"};
    for (int i = 0; i < R_COUNT; i++) rules[i] = ry_op_find(names[i]);
}

bool ry_rows_op(bool sparse, const ry_op *op, const ry_expr *call, int nargs,
                ry_value *const *args, const int *regs, int nkill, const int *kill,
                const ry_value *acc, ry_value **out, ry_status *st, ry_error *err,
                ry_arena *scratch) {
    bool any = false, nested = false, zero = false;
    for (int i = 0; i < nargs; i++) {
        any |= args[i]->kind == RY_VAL_ROWS;
        nested |= args[i]->kind == RY_VAL_TUPLE && holds_rows(args[i]);
        zero |= sparse && known_zero(args[i]);
    }
    if (sparse) {
        pthread_once(&rules_once, find_rules);
        bool done = false;
        if (op == rules[R_ZEROS_LIKE]) done = rows_zeros(call, args, out, st, err);
        else if ((any || zero) && op == rules[R_SCATTER])
            done = rows_scatter(call, args, out, st, err);
        else if ((any || zero) && op == rules[R_ADD])
            done = rows_add(call, args, regs, nkill, kill, acc, out, st, err);
        else if ((any || zero) && op == rules[R_RESHAPE])
            done = rows_reshape(call, args, out, st, err, scratch);
        if (done) return true;
    }
    for (int i = 0; (any || nested) && i < nargs; i++)
        if (args[i]->kind != RY_VAL_TENSOR && !ry_value_densify_rows(args[i])) {
            *st = oom(err, call);
            return true;
        }
    return false;
}
