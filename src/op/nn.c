/*
 * nn.c: registry entries of the nn operator family: dense, matmul,
 * batch_matmul, bias_add, softmax, log_softmax, fast_softmax, batch_flatten,
 * pad, mirror_pad, batch_norm, layer_norm, instance_norm, group_norm, lrn, l2_normalize,
 * dropout, prelu, cross_entropy and cross_entropy_with_logits. Each entry
 * holds TVM's name, its attributes with the defaults of TVM's C++ attribute
 * classes (include/tvm/relay/attrs/nn.h), the type relation written here,
 * and its gradient rule; kernels are each target's (the CPU's: src/backend/
 * cpu/kernels.c, nn_kernels.h). Convolution and pooling live in conv.c; gradients are the AD transform's business.
 */
#include <string.h>

#include "op/families.h"
#include "op/grad_rules.h"
#include "relayc/op.h"

/* ---- helpers shared by the relations ---- */

/* Where attribute `name` was written, or the call when it was defaulted. */
static ry_span attr_span(const ry_rel_ctx *c, const char *name) {
    if (c->attrs)
        for (int i = 0; i < c->attrs->n; i++)
            if (strcmp(c->attrs->items[i].name, name) == 0 && c->attrs->items[i].span.src)
                return c->attrs->items[i].span;
    return c->span;
}

/* Every argument must be a tensor; an argument still being inferred defers. */
static ry_rel_status want_tensors(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                  const char *const *names) {
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != RY_TYPE_TENSOR) {
            char s[128];
            ry_error_at(c->err, c->span, "%s: argument %d (%s) must be a tensor, got %s",
                        c->op->name, i + 1, names[i], ry_type_str(args[i], s, sizeof s));
            return RY_REL_FAIL;
        }
    return RY_REL_OK;
}

static const char *tstr(const ry_type *t, char *buf, size_t n) {
    return ry_type_str(t, buf, n);
}

static const char *dim_str(const ry_dim *d, char *buf, size_t n) {
    if (d->kind == RY_DIM_CONST)
        snprintf(buf, n, "%lld", (long long)d->value);
    else if (d->kind == RY_DIM_SYM)
        snprintf(buf, n, "%s", d->name);
    else
        snprintf(buf, n, "?");
    return buf;
}

/* Two dims that might be equal: only two different constants surely are not
 * (a symbolic or Any dim is checked again on concrete types at run time). */
static bool dims_may_equal(const ry_dim *a, const ry_dim *b) {
    return !(a->kind == RY_DIM_CONST && b->kind == RY_DIM_CONST && a->value != b->value);
}

static bool is_one(const ry_dim *d) {
    return d->kind == RY_DIM_CONST && d->value == 1;
}

/* broadcast of one dim: 1 stretches, Any gives the other, equal stays;
 * differing symbols become Any (checked at run time). */
static bool bcast_dim(const ry_dim *a, const ry_dim *b, ry_dim *out) {
    if (is_one(a))
        *out = *b;
    else if (is_one(b))
        *out = *a;
    else if (a->kind == RY_DIM_ANY)
        *out = *b;
    else if (b->kind == RY_DIM_ANY)
        *out = *a;
    else if (a->kind == RY_DIM_CONST && b->kind == RY_DIM_CONST) {
        if (a->value != b->value) return false;
        *out = *a;
    } else if (a->kind == RY_DIM_SYM && b->kind == RY_DIM_SYM && strcmp(a->name, b->name) == 0)
        *out = *a;
    else
        *out = (ry_dim){RY_DIM_ANY, 0, NULL};
    return true;
}

/* An integer attribute (None is not an integer here). */
static bool int_attr(ry_rel_ctx *c, const char *name, int64_t *out) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, name);
    if (v->kind != RY_AV_INT && v->kind != RY_AV_BOOL) {
        ry_error_at(c->err, attr_span(c, name), "%s: attribute '%s' must be an integer",
                    c->op->name, name);
        return false;
    }
    *out = ry_attr_int(c->op, c->attrs, name);
    return true;
}

/* axis in [-ndim, ndim), made non-negative. */
static bool axis_attr(ry_rel_ctx *c, const char *name, int ndim, int *axis) {
    int64_t a;
    if (!int_attr(c, name, &a)) return false;
    if (a < -ndim || a >= ndim) {
        ry_error_at(c->err, attr_span(c, name),
                    "%s: %s=%lld is out of range for a tensor of rank %d (valid: %d to %d)",
                    c->op->name, name, (long long)a, ndim, -ndim, ndim - 1);
        return false;
    }
    *axis = (int)(a < 0 ? a + ndim : a);
    return true;
}

/* out_dtype: "" (TVM's null DataType) means the input's dtype. */
static bool out_dtype_attr(ry_rel_ctx *c, ry_dtype in, ry_dtype *out) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, "out_dtype");
    *out = in;
    if (v->kind == RY_AV_NONE || (v->kind == RY_AV_STR && v->s[0] == '\0')) return true;
    if (v->kind != RY_AV_STR || !ry_dtype_parse(v->s, strlen(v->s), out)) {
        ry_error_at(c->err, attr_span(c, "out_dtype"), "%s: out_dtype must name a dtype",
                    c->op->name);
        return false;
    }
    if (*out == RY_BOOL) {
        ry_error_at(c->err, attr_span(c, "out_dtype"), "%s: out_dtype bool is not supported",
                    c->op->name);
        return false;
    }
    return true;
}

static bool want_float(ry_rel_ctx *c, const ry_type *t) {
    if (ry_dtype_is_float(t->tensor.dtype)) return true;
    ry_error_at(c->err, c->span, "%s expects a float tensor, got %s", c->op->name,
                ry_dtype_name(t->tensor.dtype));
    return false;
}

static bool want_numeric(ry_rel_ctx *c, const ry_type *t) {
    if (t->tensor.dtype != RY_BOOL) return true;
    ry_error_at(c->err, c->span, "%s does not take bool tensors", c->op->name);
    return false;
}

static bool same_dtype(ry_rel_ctx *c, const ry_type *a, const ry_type *b, const char *bname) {
    if (a->tensor.dtype == b->tensor.dtype) return true;
    ry_error_at(c->err, c->span, "%s: %s has dtype %s but data has %s", c->op->name, bname,
                ry_dtype_name(b->tensor.dtype), ry_dtype_name(a->tensor.dtype));
    return false;
}

/* A vector argument (C,) matching data's dim C on the normalized axis. */
static bool want_channel_vec(ry_rel_ctx *c, const ry_type *data, int axis, const ry_type *v,
                             const char *vname) {
    char s[128], d1[32];
    const ry_dim *cd = &data->tensor.dims[axis];
    if (!same_dtype(c, data, v, vname)) return false;
    if (v->tensor.ndim != 1 || !dims_may_equal(&v->tensor.dims[0], cd)) {
        ry_error_at(c->err, c->span,
                    "%s: %s must have shape (%s,) to match axis %d of data, got %s", c->op->name,
                    vname, dim_str(cd, d1, sizeof d1), axis, tstr(v, s, sizeof s));
        return false;
    }
    return true;
}

/* ---- dense, matmul, batch_matmul ---- */

/* The reduction dims of the two operands must agree. */
static bool check_reduce(ry_rel_ctx *c, const ry_type *a, const ry_dim *ka, const ry_type *b,
                         const ry_dim *kb) {
    if (dims_may_equal(ka, kb)) return true;
    char sa[128], sb[128], da[32], db[32];
    ry_error_at(c->err, c->span, "%s: reduction dimensions differ: %s has %s but %s has %s",
                c->op->name, tstr(a, sa, sizeof sa), dim_str(ka, da, sizeof da),
                tstr(b, sb, sizeof sb), dim_str(kb, db, sizeof db));
    return false;
}

/* units, when given, names the output dim: it must agree with the weight. */
static bool check_units(ry_rel_ctx *c, const ry_dim *m, ry_dim *out) {
    *out = *m;
    if (ry_attr_is_none(c->op, c->attrs, "units")) return true;
    int64_t u;
    if (!int_attr(c, "units", &u)) return false;
    if (u < 0 || (m->kind == RY_DIM_CONST && m->value != u)) {
        char d[32];
        ry_error_at(c->err, attr_span(c, "units"), "%s: units=%lld but the weight gives %s",
                    c->op->name, (long long)u, dim_str(m, d, sizeof d));
        return false;
    }
    *out = (ry_dim){RY_DIM_CONST, u, NULL};
    return true;
}

/* matmul: (..., k) x (k, m) -> (..., m); transpose_a reads a as (..., k, n)
 * giving (..., n, m); transpose_b reads b as (m, k). dense is matmul with
 * transpose_b: (..., k) x (m, k) -> (..., m). */
static ry_rel_status rel_matmul_common(ry_rel_ctx *c, ry_type *const *args, bool ta, bool tb,
                                       ry_type **out) {
    const ry_type *a = args[0], *b = args[1];
    char s[128];
    int na = a->tensor.ndim;
    if (na < (ta ? 2 : 1)) {
        ry_error_at(c->err, c->span, "%s: data must have rank >= %d, got %s", c->op->name,
                    ta ? 2 : 1, tstr(a, s, sizeof s));
        return RY_REL_FAIL;
    }
    if (b->tensor.ndim != 2) {
        ry_error_at(c->err, c->span, "%s: weight must have rank 2, got %s", c->op->name,
                    tstr(b, s, sizeof s));
        return RY_REL_FAIL;
    }
    if (!want_numeric(c, a) || !same_dtype(c, a, b, "weight")) return RY_REL_FAIL;
    const ry_dim *ka = &a->tensor.dims[ta ? na - 2 : na - 1];
    const ry_dim *kb = &b->tensor.dims[tb ? 1 : 0];
    const ry_dim *m = &b->tensor.dims[tb ? 0 : 1];
    if (!check_reduce(c, a, ka, b, kb)) return RY_REL_FAIL;
    ry_dtype odt;
    if (!out_dtype_attr(c, a->tensor.dtype, &odt)) return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    memcpy(dims, a->tensor.dims, sizeof(ry_dim) * (size_t)na);
    if (ta) dims[na - 2] = a->tensor.dims[na - 1];
    if (!check_units(c, m, &dims[na - 1])) return RY_REL_FAIL;
    *out = ry_type_tensor_arena(c->arena, odt, na, dims);
    return RY_REL_OK;
}

static const char *const mm_names[] = {"data", "weight"};

/* dense: (d1, ..., dn, k) x (m, k) -> (d1, ..., dn, m) */
static ry_rel_status rel_dense(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s = want_tensors(c, nargs, args, mm_names);
    return s != RY_REL_OK ? s : rel_matmul_common(c, args, false, true, out);
}

/* matmul: (..., k) x (k, m) -> (..., m), with transpose_a / transpose_b */
static ry_rel_status rel_matmul(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s = want_tensors(c, nargs, args, mm_names);
    if (s != RY_REL_OK) return s;
    return rel_matmul_common(c, args, ry_attr_bool(c->op, c->attrs, "transpose_a"),
                             ry_attr_bool(c->op, c->attrs, "transpose_b"), out);
}

/* batch_matmul: (b1, i, k) x (b2, k, j) -> (max(b1, b2), i, j), where b1 and b2
 * are equal or one of them is 1; transpose_a: x is (b1, k, i); transpose_b: y
 * is (b2, j, k). */
static ry_rel_status rel_batch_matmul(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                      ry_type **out) {
    static const char *const names[] = {"x", "y"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    const ry_type *x = args[0], *y = args[1];
    char s[128], s2[128];
    if (x->tensor.ndim != 3 || y->tensor.ndim != 3) {
        ry_error_at(c->err, c->span, "%s expects two rank-3 tensors, got %s and %s", c->op->name,
                    tstr(x, s, sizeof s), tstr(y, s2, sizeof s2));
        return RY_REL_FAIL;
    }
    if (!want_numeric(c, x) || !same_dtype(c, x, y, "y")) return RY_REL_FAIL;
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    const ry_dim *xd = x->tensor.dims, *yd = y->tensor.dims;
    ry_dim dims[3];
    if (!bcast_dim(&xd[0], &yd[0], &dims[0])) {
        ry_error_at(c->err, c->span, "%s: batch dimensions differ: %s and %s", c->op->name,
                    tstr(x, s, sizeof s), tstr(y, s2, sizeof s2));
        return RY_REL_FAIL;
    }
    if (!check_reduce(c, x, &xd[ta ? 1 : 2], y, &yd[tb ? 2 : 1])) return RY_REL_FAIL;
    dims[1] = xd[ta ? 2 : 1];
    dims[2] = yd[tb ? 1 : 2];
    ry_dtype odt;
    if (!out_dtype_attr(c, x->tensor.dtype, &odt)) return RY_REL_FAIL;
    *out = ry_type_tensor_arena(c->arena, odt, 3, dims);
    return RY_REL_OK;
}

/* ---- bias_add, softmax, batch_flatten, pad ---- */

/* bias_add: (d0, ..., C at axis, ..., dn) x (C,) -> (d0, ..., dn) */
static ry_rel_status rel_bias_add(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "bias"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    if (!want_numeric(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis) ||
        !want_channel_vec(c, args[0], axis, args[1], "bias"))
        return RY_REL_FAIL;
    *out = args[0];
    return RY_REL_OK;
}

/* softmax, log_softmax: T -> T for a float T; axis in [-rank, rank) */
static ry_rel_status rel_softmax(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    if (!want_float(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis))
        return RY_REL_FAIL;
    *out = args[0];
    return RY_REL_OK;
}

/* batch_flatten: (d0, d1, ..., dn) -> (d0, d1 * ... * dn); rank >= 1 */
static ry_rel_status rel_batch_flatten(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                       ry_type **out) {
    static const char *const names[] = {"data"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    const ry_type *d = args[0];
    if (d->tensor.ndim < 1) {
        char s[128];
        ry_error_at(c->err, c->span, "%s expects rank >= 1, got %s", c->op->name,
                    tstr(d, s, sizeof s));
        return RY_REL_FAIL;
    }
    /* The product is a constant when every dim is; a single unknown dim
     * among ones stays itself; anything else is Any. */
    int64_t prod = 1;
    int nunknown = 0;
    ry_dim unknown = {RY_DIM_ANY, 0, NULL};
    for (int i = 1; i < d->tensor.ndim; i++) {
        const ry_dim *x = &d->tensor.dims[i];
        if (x->kind == RY_DIM_CONST)
            prod *= x->value;
        else
            nunknown++, unknown = *x;
    }
    ry_dim dims[2] = {d->tensor.dims[0], {RY_DIM_CONST, prod, NULL}};
    if (nunknown == 1 && prod == 1)
        dims[1] = unknown;
    else if (nunknown > 0)
        dims[1] = (ry_dim){prod == 0 ? RY_DIM_CONST : RY_DIM_ANY, 0, NULL};
    *out = ry_type_tensor_arena(c->arena, d->tensor.dtype, 2, dims);
    return RY_REL_OK;
}

/* Reads pad_width as ndim pairs of integers into before/after. */
static bool pad_widths(ry_rel_ctx *c, int ndim, int64_t *before, int64_t *after) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, "pad_width");
    ry_span sp = attr_span(c, "pad_width");
    if (v->kind != RY_AV_LIST) {
        ry_error_at(c->err, sp, "%s: pad_width must be a list of [before, after] pairs",
                    c->op->name);
        return false;
    }
    if (v->list.n != ndim) {
        ry_error_at(c->err, sp, "%s: pad_width has %d pairs but data has rank %d", c->op->name,
                    v->list.n, ndim);
        return false;
    }
    for (int i = 0; i < ndim; i++) {
        const ry_attr_value *p = &v->list.items[i];
        if (p->kind != RY_AV_LIST || p->list.n != 2 || p->list.items[0].kind != RY_AV_INT ||
            p->list.items[1].kind != RY_AV_INT) {
            ry_error_at(c->err, sp, "%s: pad_width[%d] must be a pair of integers [before, after]",
                        c->op->name, i);
            return false;
        }
        before[i] = p->list.items[0].i;
        after[i] = p->list.items[1].i;
    }
    return true;
}

/* pad: (d_0, ..., d_n) x () -> (b_0 + d_0 + a_0, ..., b_n + d_n + a_n)
 * with pad_width [[b_i, a_i], ...]. As in TVM, negative widths crop (the
 * result must not be negative); "edge" needs d_i > 0 where it pads and
 * "reflect" needs b_i, a_i < d_i (one reflection, as numpy's single pass).
 * mirror_pad: (d_i) -> (b_i + d_i + a_i), mode "REFLECT" (as pad's
 * "reflect") or "SYMMETRIC" (the edge repeated: b_i, a_i <= d_i). */
static ry_rel_status rel_pad(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "pad_value"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    const ry_type *d = args[0];
    int n = d->tensor.ndim;
    char s[128];
    if (nargs == 2 && args[1]->tensor.ndim != 0) {
        ry_error_at(c->err, c->span, "%s: pad_value must be a scalar, got %s", c->op->name,
                    tstr(args[1], s, sizeof s));
        return RY_REL_FAIL;
    }
    const char *mattr = nargs == 2 ? "pad_mode" : "mode";
    const char *mode = ry_attr_str(c->op, c->attrs, mattr);
    bool edge = false, reflect, sym = false;
    if (nargs == 2) {
        edge = strcmp(mode, "edge") == 0;
        reflect = strcmp(mode, "reflect") == 0;
        if (!edge && !reflect && strcmp(mode, "constant") != 0) {
            ry_error_at(c->err, attr_span(c, mattr),
                        "%s: pad_mode must be \"constant\", \"edge\" or \"reflect\", not \"%s\"",
                        c->op->name, mode);
            return RY_REL_FAIL;
        }
    } else {
        reflect = strcmp(mode, "REFLECT") == 0;
        sym = strcmp(mode, "SYMMETRIC") == 0;
        if (!reflect && !sym) {
            ry_error_at(c->err, attr_span(c, mattr),
                        "%s: mode must be \"SYMMETRIC\" or \"REFLECT\", not \"%s\"", c->op->name,
                        mode);
            return RY_REL_FAIL;
        }
    }
    int64_t before[RY_MAX_RANK], after[RY_MAX_RANK];
    if (!pad_widths(c, n, before, after)) return RY_REL_FAIL;
    ry_dim dims[RY_MAX_RANK];
    ry_span sp = attr_span(c, "pad_width");
    for (int i = 0; i < n; i++) {
        const ry_dim *x = &d->tensor.dims[i];
        if ((edge || reflect || sym) && (before[i] < 0 || after[i] < 0)) {
            ry_error_at(c->err, sp, "%s: mode \"%s\" needs non-negative widths (axis %d)",
                        c->op->name, mode, i);
            return RY_REL_FAIL;
        }
        if (x->kind != RY_DIM_CONST) {
            dims[i] = before[i] + after[i] == 0 ? *x : (ry_dim){RY_DIM_ANY, 0, NULL};
            continue;
        }
        int64_t o = x->value + before[i] + after[i];
        if (o < 0) {
            ry_error_at(c->err, sp, "%s: pad_width on axis %d gives a negative size %lld",
                        c->op->name, i, (long long)o);
            return RY_REL_FAIL;
        }
        bool pads = before[i] > 0 || after[i] > 0;
        if ((edge || sym) && pads && x->value == 0) {
            ry_error_at(c->err, sp, "%s: cannot %s-pad axis %d of size 0", c->op->name, mode, i);
            return RY_REL_FAIL;
        }
        if (reflect && pads && (before[i] >= x->value || after[i] >= x->value)) {
            ry_error_at(c->err, sp,
                        "%s: reflect padding on axis %d must be smaller than its size %lld",
                        c->op->name, i, (long long)x->value);
            return RY_REL_FAIL;
        }
        if (sym && (before[i] > x->value || after[i] > x->value)) {
            ry_error_at(c->err, sp,
                        "%s: symmetric padding on axis %d must not exceed its size %lld",
                        c->op->name, i, (long long)x->value);
            return RY_REL_FAIL;
        }
        dims[i] = (ry_dim){RY_DIM_CONST, o, NULL};
    }
    *out = ry_type_tensor_arena(c->arena, d->tensor.dtype, n, dims);
    return RY_REL_OK;
}

/* ---- batch_norm, layer_norm, dropout ---- */

static bool check_epsilon(ry_rel_ctx *c) {
    double e = ry_attr_float(c->op, c->attrs, "epsilon");
    if (e >= 0) return true;
    ry_error_at(c->err, attr_span(c, "epsilon"), "%s: epsilon must be >= 0, got %g", c->op->name,
                e);
    return false;
}

/* batch_norm: (..., C at axis, ...) x (C,) x (C,) x (C,) x (C,)
 *   -> ((..., C, ...), (C,), (C,))   [data, gamma, beta, moving_mean, moving_var] */
static ry_rel_status rel_batch_norm(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "gamma", "beta", "moving_mean", "moving_var"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    if (!want_float(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis) ||
        !check_epsilon(c))
        return RY_REL_FAIL;
    for (int i = 1; i < 5; i++)
        if (!want_channel_vec(c, args[0], axis, args[i], names[i])) return RY_REL_FAIL;
    ry_type *vec =
        ry_type_tensor_arena(c->arena, args[0]->tensor.dtype, 1, &args[0]->tensor.dims[axis]);
    ry_type *fields[3] = {args[0], vec, vec};
    *out = ry_type_tuple_arena(c->arena, 3, fields);
    return RY_REL_OK;
}

/* layer_norm: (..., C at axis, ...) x (C,) x (C,) -> (..., C, ...) */
static ry_rel_status rel_layer_norm(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "gamma", "beta"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    if (!want_float(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis) ||
        !check_epsilon(c))
        return RY_REL_FAIL;
    for (int i = 1; i < 3; i++)
        if (!want_channel_vec(c, args[0], axis, args[i], names[i])) return RY_REL_FAIL;
    *out = args[0];
    return RY_REL_OK;
}

/* dropout: T -> (T, T) for a float T, 0 <= rate <= 1 */
static ry_rel_status rel_dropout(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    if (!want_float(c, args[0])) return RY_REL_FAIL;
    double rate = ry_attr_float(c->op, c->attrs, "rate");
    if (!(rate >= 0 && rate <= 1)) {
        ry_error_at(c->err, attr_span(c, "rate"), "%s: rate must be in [0, 1], got %g", c->op->name,
                    rate);
        return RY_REL_FAIL;
    }
    ry_type *fields[2] = {args[0], args[0]};
    *out = ry_type_tuple_arena(c->arena, 2, fields);
    return RY_REL_OK;
}

/* ---- prelu, instance_norm, group_norm, l2_normalize, cross_entropy ---- */

/* prelu: (..., C at axis, ...) x (C,) -> (..., C, ...) for a float data */
static ry_rel_status rel_prelu(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "alpha"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    if (!want_float(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis) ||
        !want_channel_vec(c, args[0], axis, args[1], "alpha"))
        return RY_REL_FAIL;
    *out = args[0];
    return RY_REL_OK;
}

/* instance_norm, group_norm: (N, ..., C at axis, ...) x (C,) x (C,) -> same,
 * axis >= 1 (dim 0 is the batch); group_norm: C divisible by num_groups >= 1 */
static ry_rel_status rel_group_norm(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data", "gamma", "beta"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    const ry_type *d = args[0];
    if (!want_float(c, d) || !axis_attr(c, "axis", d->tensor.ndim, &axis) || !check_epsilon(c))
        return RY_REL_FAIL;
    if (axis == 0) {
        ry_error_at(c->err, attr_span(c, "axis"), "%s: axis must not be 0, the batch dimension",
                    c->op->name);
        return RY_REL_FAIL;
    }
    for (int i = 1; i < 3; i++)
        if (!want_channel_vec(c, d, axis, args[i], names[i])) return RY_REL_FAIL;
    if (strcmp(c->op->name, "nn.group_norm") == 0) {
        int64_t g;
        const ry_dim *cd = &d->tensor.dims[axis];
        if (!int_attr(c, "num_groups", &g)) return RY_REL_FAIL;
        if (g < 1 || (cd->kind == RY_DIM_CONST && cd->value % g != 0)) {
            char s[32];
            ry_error_at(c->err, attr_span(c, "num_groups"),
                        "%s: num_groups=%lld must be >= 1 and divide the %s channels", c->op->name,
                        (long long)g, dim_str(cd, s, sizeof s));
            return RY_REL_FAIL;
        }
    }
    *out = args[0];
    return RY_REL_OK;
}

/* l2_normalize: T -> T, x / sqrt(max(sum(x^2 over axis), eps)); eps and a
 * non-empty axis list are required (TVM gives them no default) */
static ry_rel_status rel_l2_normalize(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                      ry_type **out) {
    static const char *const names[] = {"data"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int nd = args[0]->tensor.ndim;
    if (!want_float(c, args[0])) return RY_REL_FAIL;
    if (ry_attr_is_none(c->op, c->attrs, "eps") || ry_attr_float(c->op, c->attrs, "eps") < 0) {
        ry_error_at(c->err, attr_span(c, "eps"), "%s: eps must be given and >= 0", c->op->name);
        return RY_REL_FAIL;
    }
    int64_t ax[RY_MAX_RANK + 1];
    int n = ry_attr_ints(c->op, c->attrs, "axis", ax, RY_MAX_RANK + 1);
    if (n < 1 || n > nd) {
        ry_error_at(c->err, attr_span(c, "axis"), "%s: axis must list 1 to %d axes", c->op->name,
                    nd);
        return RY_REL_FAIL;
    }
    bool seen[RY_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int64_t a = ax[i] < 0 ? ax[i] + nd : ax[i];
        if (a < 0 || a >= nd || seen[a]) {
            ry_error_at(c->err, attr_span(c, "axis"),
                        "%s: axis %lld is out of range or repeated for rank %d", c->op->name,
                        (long long)ax[i], nd);
            return RY_REL_FAIL;
        }
        seen[a] = true;
    }
    *out = args[0];
    return RY_REL_OK;
}

/* lrn: T -> T for a float T; axis in range, size odd and >= 1 (TVM's topi
 * further wants rank 4 and axis 1 or 3; any rank and axis work here) */
static ry_rel_status rel_lrn(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    static const char *const names[] = {"data"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    int axis;
    int64_t size;
    if (!want_float(c, args[0]) || !axis_attr(c, "axis", args[0]->tensor.ndim, &axis) ||
        !int_attr(c, "size", &size))
        return RY_REL_FAIL;
    if (size < 1 || size % 2 == 0) {
        ry_error_at(c->err, attr_span(c, "size"), "%s: size must be odd and >= 1, got %lld",
                    c->op->name, (long long)size);
        return RY_REL_FAIL;
    }
    *out = args[0];
    return RY_REL_OK;
}

/* cross_entropy, cross_entropy_with_logits: (n, ...) x (n, ...) -> () */
static ry_rel_status rel_cross_entropy(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                       ry_type **out) {
    static const char *const names[] = {"predictions", "targets"};
    ry_rel_status st = want_tensors(c, nargs, args, names);
    if (st != RY_REL_OK) return st;
    const ry_type *x = args[0], *y = args[1];
    char s1[128], s2[128];
    if (!want_float(c, x) || !same_dtype(c, x, y, "targets")) return RY_REL_FAIL;
    bool same = x->tensor.ndim == y->tensor.ndim && x->tensor.ndim >= 1;
    for (int i = 0; same && i < x->tensor.ndim; i++)
        same = dims_may_equal(&x->tensor.dims[i], &y->tensor.dims[i]);
    if (!same) {
        ry_error_at(c->err, c->span,
                    "%s: predictions and targets must have one shape of rank >= 1, got %s and %s",
                    c->op->name, tstr(x, s1, sizeof s1), tstr(y, s2, sizeof s2));
        return RY_REL_FAIL;
    }
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, 0, NULL);
    return RY_REL_OK;
}

/* ---- the table ---- */


const ry_op ry_ops_nn[] = {
    {.name = "nn.dense",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 2,
     .attrs = {{"units", RY_AREQUIRED}, {"out_dtype", RY_ASTR("")}},
     .rel = rel_dense,
     .doc = "dense: (d1, ..., dn, k) x (m, k) -> (d1, ..., dn, m)",
     .grad = ry_grad_dense,
     .batch = RY_BATCH_GEMM,
     .movable = true},
    {.name = "nn.matmul",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 4,
     .attrs = {{"units", RY_AREQUIRED},
               {"out_dtype", RY_ASTR("")},
               {"transpose_a", RY_ABOOL(false)},
               {"transpose_b", RY_ABOOL(false)}},
     .rel = rel_matmul,
     .doc = "matmul: (..., k) x (k, m) -> (..., m); transpose_a: (..., k, n); transpose_b: (m, k)",
     .grad = ry_grad_matmul,
     .batch = RY_BATCH_GEMM,
     .movable = true},
    {.name = "nn.batch_matmul",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 3,
     .attrs = {{"out_dtype", RY_ASTR("")},
               {"transpose_a", RY_ABOOL(false)},
               {"transpose_b", RY_ABOOL(false)}},
     .rel = rel_batch_matmul,
     .doc = "batch_matmul: (b, i, k) x (b, k, j) -> (b, i, j); a batch of 1 broadcasts",
     .grad = ry_grad_batch_matmul,
     .movable = true},
    {.name = "nn.bias_add",
     .nargs = 2,
     .pattern = RY_PAT_BROADCAST,
     .nattrs = 1,
     .attrs = {{"axis", RY_AINT(1)}},
     .rel = rel_bias_add,
     .doc = "bias_add: (..., C at axis, ...) x (C,) -> (..., C, ...)",
     .batch = RY_BATCH_MAP,
     .grad = ry_grad_bias_add,
     .movable = true},
    {.name = "nn.softmax",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 1,
     .attrs = {{"axis", RY_AINT(-1)}},
     .rel = rel_softmax,
     .doc = "softmax: T -> T, exp(x - max) / sum(exp(x - max)) along axis",
     .batch = RY_BATCH_MAP,
     .grad = ry_grad_softmax},
    {.name = "nn.log_softmax",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 1,
     .attrs = {{"axis", RY_AINT(-1)}},
     .rel = rel_softmax,
     .doc = "log_softmax: T -> T, x - max - log(sum(exp(x - max))) along axis",
     .batch = RY_BATCH_MAP,
     .grad = ry_grad_log_softmax},
    {.name = "nn.batch_flatten",
     .nargs = 1,
     .pattern = RY_PAT_INJECTIVE,
     .nattrs = 0,
     .rel = rel_batch_flatten,
     .doc = "batch_flatten: (d0, d1, ..., dn) -> (d0, d1 * ... * dn)",
     .grad = ry_grad_batch_flatten},
    {.name = "nn.pad",
     .nargs = 2,
     .pattern = RY_PAT_INJECTIVE,
     .nattrs = 2,
     .attrs = {{"pad_width", RY_AREQUIRED_EMPTY}, {"pad_mode", RY_ASTR("constant")}},
     .rel = rel_pad,
     .doc = "pad: (d_i) x () -> (before_i + d_i + after_i); constant, edge or reflect",
     .grad = ry_grad_pad},
    {.name = "nn.mirror_pad",
     .nargs = 1,
     .pattern = RY_PAT_INJECTIVE,
     .nattrs = 2,
     .attrs = {{"mode", RY_ASTR("SYMMETRIC")}, {"pad_width", RY_AREQUIRED_EMPTY}},
     .rel = rel_pad,
     .doc = "mirror_pad: (d_i) -> (before_i + d_i + after_i), SYMMETRIC or REFLECT",
     .grad = ry_grad_mirror_pad},
    {.name = "nn.batch_norm",
     .nargs = 5,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 4,
     .attrs = {{"axis", RY_AINT(1)},
               {"epsilon", RY_AFLOAT(1e-5)},
               {"center", RY_ABOOL(true)},
               {"scale", RY_ABOOL(true)}},
     .rel = rel_batch_norm,
     .doc = "batch_norm: (.., C, ..) x (C,)^4 -> ((.., C, ..), (C,), (C,)): out, mean, var",
     .grad = ry_grad_batch_norm},
    {.name = "nn.layer_norm",
     .nargs = 3,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 4,
     .attrs = {{"axis", RY_AINT(-1)},
               {"epsilon", RY_AFLOAT(1e-5)},
               {"center", RY_ABOOL(true)},
               {"scale", RY_ABOOL(true)}},
     .rel = rel_layer_norm,
     .doc = "layer_norm: (.., C, ..) x (C,) x (C,) -> (.., C, ..), normalized along axis",
     .grad = ry_grad_layer_norm},
    {.name = "nn.dropout",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 1,
     .attrs = {{"rate", RY_AFLOAT(0.5)}},
     .rel = rel_dropout,
     .doc = "dropout: T -> (T, T): (data * mask / (1 - rate), mask of 0/1) in training",
     .grad = ry_grad_dropout,
     .random = true},
    {.name = "nn.fast_softmax",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 1,
     .attrs = {{"axis", RY_AINT(-1)}},
     .rel = rel_softmax,
     .doc = "fast_softmax: T -> T, softmax (computed exactly here)",
     .grad = ry_grad_softmax},
    {.name = "nn.prelu",
     .nargs = 2,
     .pattern = RY_PAT_BROADCAST,
     .nattrs = 1,
     .attrs = {{"axis", RY_AINT(1)}},
     .rel = rel_prelu,
     .doc = "prelu: (.., C at axis, ..) x (C,) -> (.., C, ..), x < 0 ? alpha[c] * x : x",
     .grad = ry_grad_prelu},
    {.name = "nn.instance_norm",
     .nargs = 3,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 4,
     .attrs = {{"axis", RY_AINT(1)},
               {"epsilon", RY_AFLOAT(1e-5)},
               {"center", RY_ABOOL(true)},
               {"scale", RY_ABOOL(true)}},
     .rel = rel_group_norm,
     .doc = "instance_norm: (N, .., C, ..) x (C,) x (C,) -> same, per (n, c) statistics",
     .grad = ry_grad_instance_norm},
    {.name = "nn.group_norm",
     .nargs = 3,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 5,
     .attrs = {{"num_groups", RY_AINT(0)},
               {"axis", RY_AINT(1)},
               {"epsilon", RY_AFLOAT(1e-5)},
               {"center", RY_ABOOL(true)},
               {"scale", RY_ABOOL(true)}},
     .rel = rel_group_norm,
     .doc = "group_norm: (N, .., C, ..) x (C,) x (C,) -> same, per (n, group) statistics",
     .grad = ry_grad_group_norm},
    {.name = "nn.lrn",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 5,
     .attrs = {{"size", RY_AINT(5)},
               {"axis", RY_AINT(1)},
               {"bias", RY_AFLOAT(2)},
               {"alpha", RY_AFLOAT(0.0001)},
               {"beta", RY_AFLOAT(0.75)}},
     .rel = rel_lrn,
     .doc = "lrn: T -> T, x / (bias + alpha * sum(x^2 over size channels) / size)^beta",
     .grad = ry_grad_lrn},
    {.name = "nn.l2_normalize",
     .nargs = 1,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 2,
     .attrs = {{"eps", RY_AREQUIRED}, {"axis", RY_AREQUIRED}},
     .rel = rel_l2_normalize,
     .doc = "l2_normalize: T -> T, x / sqrt(max(sum(x^2, axis), eps))",
     .grad = ry_grad_l2_normalize},
    {.name = "nn.cross_entropy",
     .nargs = 2,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 0,
     .rel = rel_cross_entropy,
     .doc = "cross_entropy: (n, ..) x (n, ..) -> (), -sum(y * log(x)) / n",
     .grad = ry_grad_cross_entropy},
    {.name = "nn.cross_entropy_with_logits",
     .nargs = 2,
     .pattern = RY_PAT_OPAQUE,
     .nattrs = 0,
     .rel = rel_cross_entropy,
     .doc = "cross_entropy_with_logits: (n, ..) x (n, ..) -> (), -sum(y * x) / n",
     .grad = ry_grad_cross_entropy_with_logits},
};
const int ry_ops_nn_count = (int)(sizeof ry_ops_nn / sizeof ry_ops_nn[0]);
