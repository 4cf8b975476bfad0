/*
 * transform.c: the transform operator family: shape_of, cumsum and the
 * shape/index transforms (reshape, reshape_like, transpose, concatenate,
 * split, take, expand_dims, squeeze, stack, one_hot). Each entry holds TVM's
 * name, its attributes with TVM's C++ defaults, its type relation (rule in
 * one line above it); kernels are each target's (the CPU's in
 * src/backend/cpu/{transform,scan}.c). The reductions are reduce.c's; the
 * relation helpers both share, transform_rel.h's.
 * Gradient rules: .grad points at src/op/grad_transform.c; shape_of and
 * one_hot are no_grad.
 */
#include <string.h>

#include "op/families.h"
#include "op/grad_rules.h"
#include "op/transform_rel.h"

/* ---- shape_of and cumsum ---- */

/* shape_of: (d0, ..., dn-1) -> (n), dtype: the dims at run time (gradient
 * rules read a length the types do not know from it) */
static ry_rel_status rel_shape_of(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const char *ds = ry_attr_str(c->op, c->attrs, "dtype");
    ry_dtype dt;
    if (!ds || !ry_dtype_parse(ds, strlen(ds), &dt) || !ry_dtype_is_int(dt))
        return fail(c, attr_span(c, "dtype"), "shape_of: dtype must name an integer type such as \"int32\"");
    ry_dim n = cdim(args[0]->tensor.ndim);
    *out = tensor_type(c, dt, 1, &n);
    return RY_REL_OK;
}

static int64_t mul_sat(int64_t a, int64_t b);

/* cumsum: (d...) -> (d...) along axis, or (prod d) over the flattened data
 * (axis=None); dtype: the result's (None: data's) */
static ry_rel_status rel_cumsum(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    ry_dtype dt = x->tensor.dtype;
    const ry_attr_value *dv = ry_attr_get(c->op, c->attrs, "dtype");
    if (dv->kind == RY_AV_STR && *dv->s && !ry_dtype_parse(dv->s, strlen(dv->s), &dt))
        return fail(c, attr_span(c, "dtype"), "cumsum: unknown dtype \"%s\"", dv->s);
    if (dt == RY_BOOL) return fail(c, c->span, "cumsum: a sum of bools needs dtype=\"int32\" or another");
    int64_t a = 0;
    bool none = false;
    if (!read_int(c, "axis", true, &a, &none)) return RY_REL_FAIL;
    if (!none) {
        int axis;
        if (!norm_axis(c, "axis", a, x->tensor.ndim, false, &axis)) return RY_REL_FAIL;
        *out = tensor_type(c, dt, x->tensor.ndim, x->tensor.dims);
        return RY_REL_OK;
    }
    ry_dim n = cdim(1);
    for (int i = 0; i < x->tensor.ndim && is_const(&n); i++)
        n = is_const(&x->tensor.dims[i]) ? cdim(mul_sat(n.value, x->tensor.dims[i].value)) : anydim();
    *out = tensor_type(c, dt, 1, &n);
    return RY_REL_OK;
}

/* ---- reshape ----
 * reshape: (d...) -> newshape, where 0 copies the input dim at the same
 * position (a literal 0 with allowzero), -1 is inferred from the rest, -2
 * copies all remaining input dims, -3 merges two input dims, and -4 a b
 * splits one input dim into a and b (one of them may be -1). Same number of
 * elements. This follows TVM's InferNewShape, including that -1 consumes an
 * input position. */
typedef struct reshape_state {
    ry_dim out[RY_MAX_RANK];
    bool used_out[RY_MAX_RANK];
    int nout;
} reshape_state;

static bool push_dim(ry_rel_ctx *c, reshape_state *st, ry_dim d, bool used) {
    if (st->nout == RY_MAX_RANK) {
        fail(c, attr_span(c, "newshape"), "reshape: the result would have more than %d dims",
             RY_MAX_RANK);
        return false;
    }
    st->used_out[st->nout] = used;
    st->out[st->nout++] = d;
    return true;
}

/* Products saturate instead of overflowing: an absurd shape then fails
 * the element-count check rather than wrapping around. */
static int64_t mul_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t add_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static ry_dim dim_mul(const ry_dim *a, const ry_dim *b) {
    if (is_const(a) && is_const(b)) return cdim(mul_sat(a->value, b->value));
    return anydim();
}

static ry_dim dim_div(const ry_dim *a, int64_t b) {
    return is_const(a) ? cdim(a->value / b) : anydim();
}

static ry_rel_status rel_reshape(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    int n = x->tensor.ndim, ns;
    const ry_dim *in = x->tensor.dims;
    int64_t spec[3 * RY_MAX_RANK];
    ry_span sp = attr_span(c, "newshape");
    if (!read_ints(c, "newshape", spec, 3 * RY_MAX_RANK, &ns)) return RY_REL_FAIL;
    if (ns < 0) return fail(c, c->span, "reshape: attribute newshape is required");
    bool allowzero = ry_attr_bool(c->op, c->attrs, "allowzero");
    reshape_state st = {.nout = 0};
    bool used_in[RY_MAX_RANK] = {false};
    int src = 0, infer = -1;
    for (int i = 0; i < ns; i++) {
        int64_t v = spec[i];
        if (v > 0 || (v == 0 && allowzero)) {
            if (!push_dim(c, &st, cdim(v), false)) return RY_REL_FAIL;
            src++;
        } else if (v == 0) {
            if (src >= n)
                return fail(c, sp, "reshape: newshape entry %d is 0 but the input has only %d dims",
                            i, n);
            used_in[src] = true;
            if (!push_dim(c, &st, in[src++], true)) return RY_REL_FAIL;
        } else if (v == -1) {
            if (infer >= 0) return fail(c, sp, "reshape: newshape may contain only one -1");
            infer = st.nout;
            if (!push_dim(c, &st, cdim(1), false)) return RY_REL_FAIL;
            src++;
        } else if (v == -2) {
            for (; src < n; src++) {
                used_in[src] = true;
                if (!push_dim(c, &st, in[src], true)) return RY_REL_FAIL;
            }
        } else if (v == -3) {
            if (src + 1 >= n)
                return fail(c, sp,
                            "reshape: -3 at entry %d needs two more input dims (input rank %d)", i,
                            n);
            used_in[src] = used_in[src + 1] = true;
            if (!push_dim(c, &st, dim_mul(&in[src], &in[src + 1]), true)) return RY_REL_FAIL;
            src += 2;
        } else if (v == -4) {
            if (i + 2 >= ns)
                return fail(c, sp, "reshape: -4 at entry %d must be followed by two dims", i);
            if (src >= n)
                return fail(c, sp, "reshape: -4 at entry %d has no input dim to split", i);
            int64_t a = spec[++i], b = spec[++i];
            if (a == -1 && b == -1) return fail(c, sp, "reshape: -4 split dims cannot both be -1");
            if ((a <= 0 && a != -1) || (b <= 0 && b != -1))
                return fail(c, sp,
                            "reshape: -4 split dims must be positive or -1, not %lld and %lld",
                            (long long)a, (long long)b);
            const ry_dim *d0 = &in[src];
            used_in[src++] = true;
            ry_dim da = a == -1 ? dim_div(d0, b) : cdim(a), db = b == -1 ? dim_div(d0, a) : cdim(b);
            if (is_const(d0) && is_const(&da) && is_const(&db) && da.value * db.value != d0->value)
                return fail(c, sp, "reshape: -4 cannot split dim %lld into %lld x %lld",
                            (long long)d0->value, (long long)da.value, (long long)db.value);
            if (!push_dim(c, &st, da, true) || !push_dim(c, &st, db, true)) return RY_REL_FAIL;
        } else {
            return fail(c, sp,
                        "reshape: unsupported special value %lld in newshape (0, -1, -2, -3 and -4 "
                        "are defined)",
                        (long long)v);
        }
    }
    if (infer >= 0) {
        ry_dim d = cdim(1);
        for (int i = 0; i < n && d.kind == RY_DIM_CONST; i++)
            if (!used_in[i]) d = dim_mul(&d, &in[i]);
        for (int i = 0; i < st.nout && d.kind == RY_DIM_CONST; i++) {
            if (st.used_out[i] || i == infer) continue;
            if (!is_const(&st.out[i]))
                d = anydim();
            else if (st.out[i].value == 0)
                return fail(c, sp, "reshape: cannot infer -1 next to a dimension of size 0");
            else
                d = dim_div(&d, st.out[i].value);
        }
        st.out[infer] = d;
    }
    /* same number of elements, when both sides are known */
    int64_t isz = 1, osz = 1;
    bool known = true;
    for (int i = 0; i < n; i++) {
        known = known && is_const(&in[i]);
        isz = mul_sat(isz, in[i].value);
    }
    for (int i = 0; i < st.nout; i++) {
        known = known && is_const(&st.out[i]);
        osz = mul_sat(osz, st.out[i].value);
    }
    if (known && isz != osz) {
        char a[128], b[128] = "(";
        for (int i = 0; i < st.nout; i++) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, "%s%lld", i ? ", " : "", (long long)st.out[i].value);
        }
        strncat(b, ")", sizeof b - strlen(b) - 1);
        return fail(c, sp, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                    ry_type_str(x, a, sizeof a), (long long)isz, b, (long long)osz);
    }
    *out = tensor_type(c, x->tensor.dtype, st.nout, st.out);
    return RY_REL_OK;
}

/* ---- reshape_like ----
 * reshape_like: data x like -> data's dims [lhs_begin, lhs_end) replaced by
 * like's [rhs_begin, rhs_end) (TVM's attributes; None ends are the ranks,
 * negative ones count from the end). The replaced runs must hold the same
 * number of elements, checked here when both are known and at run time
 * (where every type is) otherwise. */
static bool dim_range(ry_rel_ctx *c, const char *bname, const char *ename, int rank, int *lo,
                      int *hi) {
    int64_t b = 0, e = rank;
    bool none;
    if (!read_int(c, bname, false, &b, NULL) || !read_int(c, ename, true, &e, &none)) return false;
    if (none) e = rank;
    if (b < 0) b += rank;
    if (e < 0) e += rank;
    if (b < 0 || b > rank || e < b || e > rank) {
        fail(c, attr_span(c, written(c, bname) ? bname : ename),
             "%s: [%s, %s) is not a range of dims of a rank-%d tensor", nm(c), bname, ename, rank);
        return false;
    }
    *lo = (int)b;
    *hi = (int)e;
    return true;
}

static ry_rel_status rel_reshape_like(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                      ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s == RY_REL_OK) s = tensor_arg(c, args[1], "shape_like");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0], *l = args[1];
    int xb, xe, lb, le;
    if (!dim_range(c, "lhs_begin", "lhs_end", x->tensor.ndim, &xb, &xe) ||
        !dim_range(c, "rhs_begin", "rhs_end", l->tensor.ndim, &lb, &le))
        return RY_REL_FAIL;
    int n = xb + (le - lb) + (x->tensor.ndim - xe);
    if (n > RY_MAX_RANK)
        return fail(c, c->span, "%s: the result would have more than %d dims", nm(c), RY_MAX_RANK);
    ry_dim dims[RY_MAX_RANK];
    int k = 0;
    for (int i = 0; i < xb; i++) dims[k++] = x->tensor.dims[i];
    for (int i = lb; i < le; i++) dims[k++] = l->tensor.dims[i];
    for (int i = xe; i < x->tensor.ndim; i++) dims[k++] = x->tensor.dims[i];
    int64_t xs = 1, ls = 1;
    bool known = true;
    for (int i = xb; i < xe; i++) {
        known = known && is_const(&x->tensor.dims[i]);
        xs = mul_sat(xs, x->tensor.dims[i].value);
    }
    for (int i = lb; i < le; i++) {
        known = known && is_const(&l->tensor.dims[i]);
        ls = mul_sat(ls, l->tensor.dims[i].value);
    }
    if (known && xs != ls) {
        char a[128], b[128];
        if (xb == 0 && xe == x->tensor.ndim && lb == 0 && le == l->tensor.ndim)
            return fail(c, c->span, "%s: cannot reshape %s (%lld elements) to the shape of %s (%lld)",
                        nm(c), ry_type_str(x, a, sizeof a), (long long)xs,
                        ry_type_str(l, b, sizeof b), (long long)ls);
        return fail(c, c->span,
                    "%s: dims [%d, %d) of %s (%lld elements) cannot take the shape of dims [%d, "
                    "%d) of %s (%lld)",
                    nm(c), xb, xe, ry_type_str(x, a, sizeof a), (long long)xs, lb, le,
                    ry_type_str(l, b, sizeof b), (long long)ls);
    }
    *out = tensor_type(c, x->tensor.dtype, n, dims);
    return RY_REL_OK;
}

/* ---- transpose ----
 * transpose: (d0, ..., dn-1) -> (d[axes[0]], ..., d[axes[n-1]]); axes=None
 * (or []) reverses the dims. */
static ry_rel_status rel_transpose(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    int n = x->tensor.ndim, na;
    int64_t axes[RY_MAX_RANK];
    if (!read_ints(c, "axes", axes, RY_MAX_RANK, &na)) return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    if (na <= 0) {
        for (int k = 0; k < n; k++) dims[k] = x->tensor.dims[n - 1 - k];
    } else {
        if (na != n)
            return fail(c, attr_span(c, "axes"),
                        "transpose: axes has %d entries but the input has rank %d", na, n);
        bool seen[RY_MAX_RANK] = {false};
        for (int k = 0; k < n; k++) {
            int a;
            if (!norm_axis(c, "axes", axes[k], n, false, &a)) return RY_REL_FAIL;
            if (seen[a])
                return fail(c, attr_span(c, "axes"),
                            "transpose: axes is not a permutation (%d repeats)", a);
            seen[a] = true;
            dims[k] = x->tensor.dims[a];
        }
    }
    *out = tensor_type(c, x->tensor.dtype, n, dims);
    return RY_REL_OK;
}

/* ---- concatenate and stack ---- */

/* The fields of a tuple argument, each a tensor of one dtype and rank. */
static ry_rel_status tensor_fields(ry_rel_ctx *c, const ry_type *t) {
    if (t->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    char buf[128];
    if (t->kind != RY_TYPE_TUPLE)
        return fail(c, c->span, "%s expects a tuple of tensors, not %s", nm(c),
                    ry_type_str(t, buf, sizeof buf));
    if (t->tuple.n == 0) return fail(c, c->span, "%s: the tuple is empty", nm(c));
    for (int i = 0; i < t->tuple.n; i++)
        if (t->tuple.fields[i]->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    const ry_type *f0 = t->tuple.fields[0];
    for (int i = 0; i < t->tuple.n; i++) {
        const ry_type *f = t->tuple.fields[i];
        if (f->kind != RY_TYPE_TENSOR)
            return fail(c, c->span, "%s: field %d is %s, not a tensor", nm(c), i,
                        ry_type_str(f, buf, sizeof buf));
        if (f->tensor.dtype != f0->tensor.dtype)
            return fail(c, c->span, "%s: field %d has dtype %s but field 0 has %s", nm(c), i,
                        ry_dtype_name(f->tensor.dtype), ry_dtype_name(f0->tensor.dtype));
        if (f->tensor.ndim != f0->tensor.ndim)
            return fail(c, c->span, "%s: field %d has rank %d but field 0 has rank %d", nm(c), i,
                        f->tensor.ndim, f0->tensor.ndim);
    }
    return RY_REL_OK;
}

/* concatenate: (a..., ki, b...) for each field -> (a..., sum ki, b...) */
static ry_rel_status rel_concatenate(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                     ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_fields(c, args[0]);
    if (s != RY_REL_OK) return s;
    const ry_type *t = args[0], *f0 = t->tuple.fields[0];
    int n = f0->tensor.ndim, axis;
    int64_t a;
    if (!read_int(c, "axis", false, &a, NULL) || !norm_axis(c, "axis", a, n, false, &axis))
        return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    memcpy(dims, f0->tensor.dims, sizeof(ry_dim) * (size_t)n);
    for (int i = 1; i < t->tuple.n; i++) {
        const ry_dim *fd = t->tuple.fields[i]->tensor.dims;
        for (int d = 0; d < n; d++) {
            if (d == axis) {
                dims[d] = is_const(&dims[d]) && is_const(&fd[d])
                              ? cdim(add_sat(dims[d].value, fd[d].value))
                              : anydim();
            } else if (!unify_dim(&dims[d], &fd[d], &dims[d])) {
                return fail(c, c->span,
                            "concatenate: field %d has %lld at dim %d but earlier fields have %lld",
                            i, (long long)fd[d].value, d, (long long)dims[d].value);
            }
        }
    }
    *out = tensor_type(c, f0->tensor.dtype, n, dims);
    return RY_REL_OK;
}

/* stack: k fields of shape (d...) -> (d[:axis]..., k, d[axis:]...) */
static ry_rel_status rel_stack(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_fields(c, args[0]);
    if (s != RY_REL_OK) return s;
    const ry_type *t = args[0], *f0 = t->tuple.fields[0];
    int n = f0->tensor.ndim, axis;
    int64_t a;
    if (n + 1 > RY_MAX_RANK)
        return fail(c, c->span, "stack: the result would have more than %d dims", RY_MAX_RANK);
    if (!read_int(c, "axis", false, &a, NULL) || !norm_axis(c, "axis", a, n, true, &axis))
        return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    memcpy(dims, f0->tensor.dims, sizeof(ry_dim) * (size_t)n);
    for (int i = 1; i < t->tuple.n; i++) {
        const ry_dim *fd = t->tuple.fields[i]->tensor.dims;
        for (int d = 0; d < n; d++)
            if (!unify_dim(&dims[d], &fd[d], &dims[d]))
                return fail(c, c->span, "stack: field %d has %lld at dim %d but field 0 has %lld",
                            i, (long long)fd[d].value, d, (long long)dims[d].value);
    }
    memmove(dims + axis + 1, dims + axis, sizeof(ry_dim) * (size_t)(n - axis));
    dims[axis] = cdim(t->tuple.n);
    *out = tensor_type(c, f0->tensor.dtype, n + 1, dims);
    return RY_REL_OK;
}

/* ---- split ----
 * split: (a..., d, b...) -> a tuple of (a..., di, b...): sections=k gives k
 * parts of d/k (k must divide d); indices [i1 < i2 < ...] with 0 < i1 and
 * the last < d give parts i1, i2-i1, ..., d-ilast. */
static ry_rel_status rel_split(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    int n = x->tensor.ndim, axis;
    int64_t a;
    if (!read_int(c, "axis", false, &a, NULL) || !norm_axis(c, "axis", a, n, false, &axis))
        return RY_REL_FAIL;
    const ry_attr_value *ios = ry_attr_get(c->op, c->attrs, "indices_or_sections");
    ry_span sp = attr_span(c, "indices_or_sections");
    const ry_dim *d = &x->tensor.dims[axis];
    int nparts;
    int64_t idx[1024];
    if (ios->kind == RY_AV_INT) {
        if (ios->i <= 0 || ios->i > 1024)
            return fail(c, sp, "split: sections must be in 1..1024, not %lld", (long long)ios->i);
        if (is_const(d) && d->value % ios->i != 0)
            return fail(c, sp, "split: %lld sections do not divide dim %d of extent %lld",
                        (long long)ios->i, axis, (long long)d->value);
        nparts = (int)ios->i;
    } else if (ios->kind == RY_AV_LIST) {
        if (ios->list.n >= 1024) return fail(c, sp, "split: too many indices (at most 1023)");
        int64_t prev = 0;
        for (int i = 0; i < ios->list.n; i++) {
            if (ios->list.items[i].kind != RY_AV_INT)
                return fail(c, sp, "split: indices must be integers");
            idx[i] = ios->list.items[i].i;
            if (idx[i] <= prev)
                return fail(
                    c, sp,
                    "split: indices must be positive and strictly ascending (%lld after %lld)",
                    (long long)idx[i], (long long)prev);
            prev = idx[i];
        }
        if (is_const(d) && prev >= d->value && ios->list.n > 0)
            return fail(c, sp, "split: index %lld is not inside dim %d of extent %lld",
                        (long long)prev, axis, (long long)d->value);
        nparts = ios->list.n + 1;
    } else {
        return fail(c, sp,
                    "split: indices_or_sections (an integer or a list of integers) is required");
    }
    ry_type **fields = RY_NEW_ARRAY(c->arena, ry_type *, nparts);
    for (int p = 0; p < nparts; p++) {
        ry_dim dims[RY_MAX_RANK];
        memcpy(dims, x->tensor.dims, sizeof(ry_dim) * (size_t)n);
        if (ios->kind == RY_AV_INT)
            dims[axis] = dim_div(d, ios->i);
        else if (p < nparts - 1)
            dims[axis] = cdim(idx[p] - (p ? idx[p - 1] : 0));
        else
            dims[axis] = is_const(d) ? cdim(d->value - (p ? idx[p - 1] : 0)) : anydim();
        fields[p] = tensor_type(c, x->tensor.dtype, n, dims);
    }
    *out = ry_type_tuple_arena(c->arena, nparts, fields);
    return RY_REL_OK;
}

/* ---- take ----
 * take: data (B..., O..., n, I...), indices (B..., K...) ->
 * (B..., O..., K..., I...) along axis with batch_dims B; axis=None takes
 * from the flattened data: -> (K...). Indices are integers. */
static ry_rel_status rel_take(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s == RY_REL_OK) s = tensor_arg(c, args[1], "indices");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0], *ind = args[1];
    if (!is_index_dtype(ind->tensor.dtype))
        return fail(c, c->span, "take: indices must be integers, not %s",
                    ry_dtype_name(ind->tensor.dtype));
    const char *mode = ry_attr_str(c->op, c->attrs, "mode");
    if (strcmp(mode, "clip") && strcmp(mode, "wrap") && strcmp(mode, "fast"))
        return fail(c, attr_span(c, "mode"), "take: mode must be \"clip\", \"wrap\" or \"fast\"");
    int64_t a = 0, bd = 0;
    bool none = false;
    if (!read_int(c, "axis", true, &a, &none) || !read_int(c, "batch_dims", false, &bd, NULL))
        return RY_REL_FAIL;
    if (none) {
        *out = tensor_type(c, x->tensor.dtype, ind->tensor.ndim, ind->tensor.dims);
        return RY_REL_OK;
    }
    int n = x->tensor.ndim, ni = ind->tensor.ndim, axis;
    if (!norm_axis(c, "axis", a, n, false, &axis)) return RY_REL_FAIL;
    int64_t b = bd < 0 ? bd + ni : bd;
    if (b < 0 || b > ni)
        return fail(c, attr_span(c, "batch_dims"),
                    "take: batch_dims=%lld is out of range for indices of rank %d", (long long)bd,
                    ni);
    if (b > axis)
        return fail(c, attr_span(c, "batch_dims"),
                    "take: batch_dims (%lld) must not exceed axis (%d)", (long long)b, axis);
    int rank = n - 1 + ni - (int)b;
    if (rank > RY_MAX_RANK)
        return fail(c, c->span, "take: the result would have more than %d dims", RY_MAX_RANK);
    ry_dim dims[RY_MAX_RANK];
    int k = 0;
    for (int i = 0; i < axis; i++) {
        dims[k] = x->tensor.dims[i];
        if (i < b && !unify_dim(&x->tensor.dims[i], &ind->tensor.dims[i], &dims[k]))
            return fail(c, c->span, "take: batch dim %d differs: %lld in data, %lld in indices", i,
                        (long long)x->tensor.dims[i].value, (long long)ind->tensor.dims[i].value);
        k++;
    }
    for (int i = (int)b; i < ni; i++) dims[k++] = ind->tensor.dims[i];
    for (int i = axis + 1; i < n; i++) dims[k++] = x->tensor.dims[i];
    *out = tensor_type(c, x->tensor.dtype, k, dims);
    return RY_REL_OK;
}

/* ---- expand_dims and squeeze ---- */

/* expand_dims: (d...) -> (d[:axis]..., 1 x num_newaxis, d[axis:]...);
 * axis in [-n-1, n], a negative axis counting from the end. */
static ry_rel_status rel_expand_dims(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                     ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    int n = x->tensor.ndim, axis;
    int64_t a, k;
    if (!read_int(c, "axis", false, &a, NULL) || !read_int(c, "num_newaxis", false, &k, NULL))
        return RY_REL_FAIL;
    if (k < 0)
        return fail(c, attr_span(c, "num_newaxis"),
                    "expand_dims: num_newaxis must be >= 0, not %lld", (long long)k);
    if (n + k > RY_MAX_RANK)
        return fail(c, c->span, "expand_dims: the result would have more than %d dims",
                    RY_MAX_RANK);
    if (!norm_axis(c, "axis", a, n, true, &axis)) return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    int j = 0;
    for (int i = 0; i < axis; i++) dims[j++] = x->tensor.dims[i];
    for (int i = 0; i < k; i++) dims[j++] = cdim(1);
    for (int i = axis; i < n; i++) dims[j++] = x->tensor.dims[i];
    *out = tensor_type(c, x->tensor.dtype, j, dims);
    return RY_REL_OK;
}

/* squeeze: (d...) -> d without the listed dims (each must be 1); axis=None
 * drops every dim of extent 1 (all dims must then be known). */
static ry_rel_status rel_squeeze(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    const ry_type *x = args[0];
    int n = x->tensor.ndim, na;
    int64_t axes[RY_MAX_RANK];
    if (!read_ints(c, "axis", axes, RY_MAX_RANK, &na)) return RY_REL_FAIL;
    bool drop[RY_MAX_RANK] = {false};
    const ry_dim *xd = x->tensor.dims;
    if (na < 0) {
        for (int d = 0; d < n; d++) {
            /* an unknown dim might be 1 at run time: the result's rank
             * would then depend on the data (TVM refuses this too) */
            if (!is_const(&xd[d]))
                return fail(c, c->span, "squeeze: dim %d is not known, so axis must be given", d);
            drop[d] = xd[d].value == 1;
        }
    } else {
        for (int i = 0; i < na; i++) {
            int a;
            if (!norm_axis(c, "axis", axes[i], n, false, &a)) return RY_REL_FAIL;
            if (drop[a])
                return fail(c, attr_span(c, "axis"), "squeeze: axis %d is listed twice", a);
            if (is_const(&xd[a]) && xd[a].value != 1)
                return fail(c, attr_span(c, "axis"), "squeeze: dim %d has extent %lld, not 1", a,
                            (long long)xd[a].value);
            drop[a] = true;
        }
    }
    ry_dim dims[RY_MAX_RANK];
    int k = 0;
    for (int d = 0; d < n; d++)
        if (!drop[d]) dims[k++] = xd[d];
    *out = tensor_type(c, x->tensor.dtype, k, dims);
    return RY_REL_OK;
}

/* ---- one_hot ----
 * one_hot: indices (P..., Q...), on (), off () -> (P..., depth, Q...) with
 * depth at axis (-1: last), of dtype `dtype` (None: on_value's dtype). */
static ry_rel_status rel_one_hot(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "indices");
    if (s == RY_REL_OK) s = tensor_arg(c, args[1], "on_value");
    if (s == RY_REL_OK) s = tensor_arg(c, args[2], "off_value");
    if (s != RY_REL_OK) return s;
    const ry_type *ind = args[0];
    if (!is_index_dtype(ind->tensor.dtype))
        return fail(c, c->span, "one_hot: indices must be integers, not %s",
                    ry_dtype_name(ind->tensor.dtype));
    if (args[1]->tensor.ndim != 0 || args[2]->tensor.ndim != 0)
        return fail(c, c->span, "one_hot: on_value and off_value must be scalars");
    int n = ind->tensor.ndim, axis;
    int64_t depth, a;
    if (!read_int(c, "depth", false, &depth, NULL) || !read_int(c, "axis", false, &a, NULL))
        return RY_REL_FAIL;
    if (depth <= 0)
        return fail(c, attr_span(c, "depth"), "one_hot: depth must be positive, not %lld",
                    (long long)depth);
    if (n + 1 > RY_MAX_RANK)
        return fail(c, c->span, "one_hot: the result would have more than %d dims", RY_MAX_RANK);
    if (!norm_axis(c, "axis", a, n, true, &axis)) return RY_REL_FAIL;
    const ry_attr_value *dv = ry_attr_get(c->op, c->attrs, "dtype");
    ry_dtype dt = args[1]->tensor.dtype;
    if (dv->kind == RY_AV_STR) {
        if (!ry_dtype_parse(dv->s, strlen(dv->s), &dt))
            return fail(c, attr_span(c, "dtype"), "one_hot: unknown dtype \"%s\"", dv->s);
    } else if (dv->kind != RY_AV_NONE) {
        return fail(c, attr_span(c, "dtype"),
                    "one_hot: dtype must be a string such as \"float32\"");
    }
    ry_dim dims[RY_MAX_RANK];
    int k = 0;
    for (int i = 0; i <= n; i++) {
        if (i == axis) dims[k++] = cdim(depth);
        if (i < n) dims[k++] = ind->tensor.dims[i];
    }
    *out = tensor_type(c, dt, n + 1, dims);
    return RY_REL_OK;
}

/* ---- the table ---- */

/* clang-format off */
const ry_op ry_ops_transform[] = {
    {"shape_of", 1, RY_PAT_OPAQUE, 1, {{"dtype", RY_ASTR("int32")}}, rel_shape_of,
     "shape_of: (d0, ..., dn-1) -> (n) of dtype: the dims",
     NULL, true, false, false, false, NULL, RY_BATCH_NO},
    {"cumsum", 1, RY_PAT_OPAQUE,
     3, {{"axis", RY_ANONE}, {"dtype", RY_ANONE}, {"exclusive", RY_ABOOL(false)}}, rel_cumsum,
     "cumsum: (d...) -> (d...), y[j] = sum of x[k] for k <= j (k < j: exclusive) along axis",
     ry_grad_cumsum, false, false, false, false, "relay.attrs.ScanopAttrs", RY_BATCH_NO},
    {"reshape", 1, RY_PAT_INJECTIVE,
     2, {{"newshape", RY_AREQUIRED}, {"allowzero", RY_ABOOL(false)}},
     rel_reshape,
     "reshape: (d...) -> newshape with 0 (copy), -1 (infer), -2, -3, -4 as TVM",
     ry_grad_reshape, false, false, false, false, NULL, RY_BATCH_NO},
    {"reshape_like", 2, RY_PAT_INJECTIVE,
     4, {{"lhs_begin", RY_AINT(0)}, {"lhs_end", RY_ANONE}, {"rhs_begin", RY_AINT(0)},
         {"rhs_end", RY_ANONE}},
     rel_reshape_like,
     "reshape_like: data x like -> data with dims [lhs_begin, lhs_end) as like's [rhs_begin, rhs_end)",
     ry_grad_reshape_like, false, false, false, false, NULL, RY_BATCH_NO},
    {"transpose", 1, RY_PAT_INJECTIVE,
     1, {{"axes", RY_AREQUIRED}},
     rel_transpose,
     "transpose: (d0, ..., dn-1) -> (d[axes[0]], ...); None reverses",
     ry_grad_transpose, false, false, false, true, NULL, RY_BATCH_NO},
    {"concatenate", 1, RY_PAT_INJECTIVE,
     1, {{"axis", RY_AINT(0)}},
     rel_concatenate,
     "concatenate: ((a, ki, b)...) -> (a, sum ki, b)",
     ry_grad_concatenate, false, false, false, false, NULL, RY_BATCH_NO},
    {"split", 1, RY_PAT_INJECTIVE,
     2, {{"indices_or_sections", RY_AREQUIRED}, {"axis", RY_AINT(0)}},
     rel_split,
     "split: (a, d, b) -> ((a, di, b)...) by sections or indices",
     ry_grad_split, false, false, false, false, NULL, RY_BATCH_NO},
    {"take", 2, RY_PAT_INJECTIVE,
     3, {{"batch_dims", RY_AINT(0)}, {"axis", RY_ANONE}, {"mode", RY_ASTR("clip")}},
     rel_take,
     "take: (B, O, n, I) x (B, K) -> (B, O, K, I); axis=None flattens",
     ry_grad_take, false, false, false, false, NULL, RY_BATCH_NO},
    {"expand_dims", 1, RY_PAT_BROADCAST,
     2, {{"axis", RY_AREQUIRED}, {"num_newaxis", RY_AINT(1)}},
     rel_expand_dims,
     "expand_dims: (a, b) -> (a, 1 x num_newaxis, b)",
     ry_grad_reshape, false, false, false, false, NULL, RY_BATCH_NO},
    {"squeeze", 1, RY_PAT_INJECTIVE,
     1, {{"axis", RY_ANONE}},
     rel_squeeze,
     "squeeze: (a, 1, b) -> (a, b); None drops every 1",
     ry_grad_reshape, false, false, false, false, NULL, RY_BATCH_NO},
    {"stack", 1, RY_PAT_INJECTIVE,
     1, {{"axis", RY_AINT(0)}},
     rel_stack,
     "stack: k x (a, b) -> (a, k, b)",
     ry_grad_stack, false, false, false, false, NULL, RY_BATCH_NO},
    {"one_hot", 3, RY_PAT_OUT_ELEMWISE,
     3, {{"depth", RY_AINT(1)}, {"axis", RY_AINT(-1)}, {"dtype", RY_ANONE}},
     rel_one_hot,
     "one_hot: (P, Q) x () x () -> (P, depth, Q) of dtype",
     NULL, true, false, false, false, NULL, RY_BATCH_NO},
};
/* clang-format on */
const int ry_ops_transform_count = (int)(sizeof ry_ops_transform / sizeof ry_ops_transform[0]);
