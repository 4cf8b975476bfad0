/*
 * elemwise.c: registry entries of the elemwise family: broadcasting binary
 * arithmetic, comparisons and logic, unary math, where, cast, the creation
 * ops (zeros, ones, full and their *_like forms), broadcast_to,
 * collapse_sum_like and copy. Each entry: TVM's name, arity, fusion pattern,
 * attributes with TVM's C++ defaults, type relation and a one-line rule
 * (the CPU's kernels: src/backend/cpu/elemwise*.c). Gradient rules live
 * with the AD transform (src/op/grad_*.c).
 */

/* dtype rules: arithmetic takes floats and integers (not bool); exp, log,
 * sqrt, rsqrt, tanh, sigmoid and nn.leaky_relu take floats only;
 * comparisons take any dtype and give bool; logical ops take bool. Binary
 * operands must have the same dtype (Relay does not promote). */
#include <stdarg.h>
#include <string.h>

#include "op/families.h"
#include "op/grad_rules.h"
#include "relayc/op.h"

/* ---- shared checks ---- */

__attribute__((format(printf, 3, 4))) static ry_rel_status fail(ry_rel_ctx *c, ry_span span,
                                                                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(c->err, span, fmt, ap);
    va_end(ap);
    return RY_REL_FAIL;
}

/* The attribute's own span when it was written, else the call's. */
static ry_span attr_span(ry_rel_ctx *c, const char *name) {
    if (c->attrs)
        for (int i = 0; i < c->attrs->n; i++)
            if (strcmp(c->attrs->items[i].name, name) == 0 && c->attrs->items[i].span.src)
                return c->attrs->items[i].span;
    return c->span;
}

/* dtype classes, as bit masks over ry_dtype */
#define BIT(d) (1u << (d))
#define DT_FLOAT (BIT(RY_FLOAT32) | BIT(RY_FLOAT64) | BIT(RY_FLOAT16))
#define DT_INT (BIT(RY_INT8) | BIT(RY_INT16) | BIT(RY_INT32) | BIT(RY_INT64) | BIT(RY_UINT8) | BIT(RY_UINT16))
#define DT_NUM (DT_FLOAT | DT_INT)
#define DT_BOOL BIT(RY_BOOL)
#define DT_ANY (DT_NUM | DT_BOOL)

static const char *class_name(unsigned mask) {
    switch (mask) {
    case DT_FLOAT: return "a float dtype (float16, float32, float64)";
    case DT_NUM: return "a float or integer dtype";
    case DT_BOOL: return "bool";
    default: return "a tensor dtype";
    }
}

/* Argument i as a tensor type: DEFER while unknown, FAIL (located) if it is
 * not a tensor or its dtype is outside mask. */
static ry_rel_status tensor_arg(ry_rel_ctx *c, int nargs, ry_type *const *args, int i,
                                unsigned mask, const ry_type **t) {
    if (nargs != c->op->nargs)
        return fail(c, c->span, "%s takes %d argument%s, got %d", c->op->name, c->op->nargs,
                    c->op->nargs == 1 ? "" : "s", nargs);
    const ry_type *a = args[i];
    if (a->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    if (a->kind != RY_TYPE_TENSOR) {
        char s[128];
        return fail(c, c->span, "%s: argument %d must be a tensor, not %s", c->op->name, i + 1,
                    ry_type_str(a, s, sizeof s));
    }
    if (!(mask & BIT(a->tensor.dtype)))
        return fail(c, c->span, "%s: dtype %s not supported for argument %d (expected %s)",
                    c->op->name, ry_dtype_name(a->tensor.dtype), i + 1, class_name(mask));
    *t = a;
    return RY_REL_OK;
}

static ry_type *retype(ry_rel_ctx *c, const ry_type *t, ry_dtype dt) {
    return ry_type_tensor_arena(c->arena, dt, t->tensor.ndim, t->tensor.dims);
}

/* Reads a required or optional dtype attribute ("" and None mean absent). */
static ry_rel_status dtype_attr(ry_rel_ctx *c, bool required, bool *given, ry_dtype *out) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, "dtype");
    *given = false;
    if (v->kind == RY_AV_NONE || (v->kind == RY_AV_STR && !v->s[0])) {
        if (required) return fail(c, c->span, "%s: attribute dtype is required", c->op->name);
        return RY_REL_OK;
    }
    if (v->kind != RY_AV_STR || !ry_dtype_parse(v->s, strlen(v->s), out))
        return fail(c, attr_span(c, "dtype"),
                    "%s: dtype must be one of \"float32\", \"float64\", \"float16\", \"int8\", "
                    "\"int32\", \"int64\", \"uint8\", \"bool\"",
                    c->op->name);
    *given = true;
    return RY_REL_OK;
}

/* Reads the shape attribute: a list of non-negative integers. */
static ry_rel_status shape_attr(ry_rel_ctx *c, int *ndim, ry_dim *dims) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, "shape");
    ry_span sp = attr_span(c, "shape");
    if (v->kind == RY_AV_NONE)
        return fail(c, c->span, "%s: attribute shape is required", c->op->name);
    int n = v->kind == RY_AV_LIST ? v->list.n : 1;
    const ry_attr_value *items = v->kind == RY_AV_LIST ? v->list.items : v;
    if (n > RY_MAX_RANK)
        return fail(c, sp, "%s: shape has rank %d, more than %d", c->op->name, n, RY_MAX_RANK);
    int64_t prod = 1;
    for (int i = 0; i < n; i++) {
        if (items[i].kind != RY_AV_INT)
            return fail(c, sp, "%s: shape must be a list of integers", c->op->name);
        if (items[i].i < 0)
            return fail(c, sp, "%s: shape dimension %d is negative (%lld)", c->op->name, i,
                        (long long)items[i].i);
        if (items[i].i > 0 && prod > INT64_MAX / items[i].i)
            return fail(c, sp, "%s: shape has more than 2^63 elements", c->op->name);
        prod *= items[i].i;
        dims[i] = (ry_dim){RY_DIM_CONST, items[i].i, NULL};
    }
    *ndim = n;
    return RY_REL_OK;
}

/* A number attribute that TVM declares without a default. */
static ry_rel_status number_attr(ry_rel_ctx *c, const char *name, double *out) {
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, name);
    if (v->kind == RY_AV_NONE)
        return fail(c, c->span, "%s: attribute %s is required", c->op->name, name);
    if (v->kind != RY_AV_INT && v->kind != RY_AV_FLOAT)
        return fail(c, attr_span(c, name), "%s: attribute %s must be a number", c->op->name, name);
    *out = v->kind == RY_AV_INT ? (double)v->i : v->f;
    return RY_REL_OK;
}

/* Whether dimension `from` may broadcast to `to`: 1 stretches, equal
 * constants match; symbolic and Any dims are checked again at run time,
 * when the relation sees concrete shapes. */
static bool dim_fits(const ry_dim *from, const ry_dim *to) {
    if (from->kind == RY_DIM_CONST && from->value == 1) return true;
    if (from->kind == RY_DIM_CONST && to->kind == RY_DIM_CONST) return from->value == to->value;
    return true;
}

/* Checks that `small` broadcasts to `big` (numpy rules, aligned right). */
static ry_rel_status fits(ry_rel_ctx *c, const ry_type *small, const ry_type *big,
                          const char *what) {
    int ns = small->tensor.ndim, nb = big->tensor.ndim;
    char s1[128], s2[128];
    if (ns > nb)
        return fail(c, c->span, "%s: %s has rank %d, more than the rank %d of %s", c->op->name,
                    what, ns, nb, ry_type_str(big, s2, sizeof s2));
    for (int i = 0; i < ns; i++)
        if (!dim_fits(&small->tensor.dims[i], &big->tensor.dims[i + nb - ns]))
            return fail(c, c->span, "%s: %s does not broadcast to %s (dimension %d: %lld vs %lld)",
                        c->op->name, ry_type_str(small, s1, sizeof s1),
                        ry_type_str(big, s2, sizeof s2), i + nb - ns,
                        (long long)small->tensor.dims[i].value,
                        (long long)big->tensor.dims[i + nb - ns].value);
    return RY_REL_OK;
}

#define TRY(e)                                                                        \
    do {                                                                              \
        ry_rel_status s_ = (e);                                                       \
        if (s_ != RY_REL_OK) return s_;                                               \
    } while (0)

/* ---- relations ---- */

/* unary: Tensor[s, d] -> Tensor[s, d], d in the op's dtype class */
static ry_rel_status unary(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out,
                           unsigned mask) {
    const ry_type *x;
    TRY(tensor_arg(c, nargs, args, 0, mask, &x));
    *out = retype(c, x, x->tensor.dtype);
    return RY_REL_OK;
}

static ry_rel_status rel_float(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return unary(c, n, a, o, DT_FLOAT);
}
static ry_rel_status rel_num(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return unary(c, n, a, o, DT_NUM);
}
static ry_rel_status rel_bool(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return unary(c, n, a, o, DT_BOOL);
}
static ry_rel_status rel_any(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return unary(c, n, a, o, DT_ANY);
}

/* nn.leaky_relu: Tensor[s, f] -> Tensor[s, f], alpha >= 0 (TVM's bound) */
static ry_rel_status rel_leaky_relu(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    double alpha;
    TRY(number_attr(c, "alpha", &alpha));
    if (!(alpha >= 0))
        return fail(c, attr_span(c, "alpha"), "nn.leaky_relu: alpha must be >= 0, got %g", alpha);
    return unary(c, n, a, o, DT_FLOAT);
}

/* clip: Tensor[s, d] -> Tensor[s, d]; a_min and a_max are required numbers */
static ry_rel_status rel_clip(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    double lo, hi;
    TRY(number_attr(c, "a_min", &lo));
    TRY(number_attr(c, "a_max", &hi));
    return unary(c, n, a, o, DT_NUM);
}

/* cast: Tensor[s, d] -> Tensor[s, dtype] */
static ry_rel_status rel_cast(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *x;
    ry_dtype dt;
    bool given;
    TRY(dtype_attr(c, true, &given, &dt));
    TRY(tensor_arg(c, n, a, 0, DT_ANY, &x));
    *o = retype(c, x, dt);
    return RY_REL_OK;
}

/* binary: Tensor[s1, d] x Tensor[s2, d] -> Tensor[broadcast(s1, s2), d or bool] */
static ry_rel_status binary(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out,
                            unsigned mask, bool to_bool) {
    const ry_type *x, *y;
    TRY(tensor_arg(c, nargs, args, 0, mask, &x));
    TRY(tensor_arg(c, nargs, args, 1, mask, &y));
    if (x->tensor.dtype != y->tensor.dtype)
        return fail(c, c->span, "%s: operands have different dtypes, %s and %s (cast one)",
                    c->op->name, ry_dtype_name(x->tensor.dtype), ry_dtype_name(y->tensor.dtype));
    return ry_rel_broadcast(c, x, y, to_bool ? RY_BOOL : x->tensor.dtype, out);
}

static ry_rel_status rel_arith(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return binary(c, n, a, o, DT_NUM, false);
}
static ry_rel_status rel_compare(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return binary(c, n, a, o, DT_ANY, true);
}
static ry_rel_status rel_logical(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    return binary(c, n, a, o, DT_BOOL, true);
}

/* where: Tensor[s1, bool] x Tensor[s2, d] x Tensor[s3, d]
 *        -> Tensor[broadcast(s1, s2, s3), d] */
static ry_rel_status rel_where(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *cond, *x, *y;
    ry_type *xy;
    TRY(tensor_arg(c, n, a, 0, DT_BOOL, &cond));
    TRY(tensor_arg(c, n, a, 1, DT_ANY, &x));
    TRY(tensor_arg(c, n, a, 2, DT_ANY, &y));
    if (x->tensor.dtype != y->tensor.dtype)
        return fail(c, c->span, "where: x and y have different dtypes, %s and %s",
                    ry_dtype_name(x->tensor.dtype), ry_dtype_name(y->tensor.dtype));
    TRY(ry_rel_broadcast(c, x, y, x->tensor.dtype, &xy));
    return ry_rel_broadcast(c, cond, xy, x->tensor.dtype, o);
}

/* zeros, ones: () -> Tensor[shape, dtype]; both attributes required */
static ry_rel_status rel_init(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    ry_dim dims[RY_MAX_RANK];
    int nd;
    ry_dtype dt;
    bool given;
    if (n != 0) return fail(c, c->span, "%s takes no arguments, got %d", c->op->name, n);
    TRY(shape_attr(c, &nd, dims));
    TRY(dtype_attr(c, true, &given, &dt));
    *o = ry_type_tensor_arena(c->arena, dt, nd, dims);
    return RY_REL_OK;
}

/* full: Tensor[(), v] -> Tensor[shape, dtype or v] */
static ry_rel_status rel_full(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *v;
    ry_dim dims[RY_MAX_RANK];
    int nd;
    ry_dtype dt;
    bool given;
    TRY(shape_attr(c, &nd, dims));
    TRY(dtype_attr(c, false, &given, &dt));
    TRY(tensor_arg(c, n, a, 0, DT_ANY, &v));
    if (v->tensor.ndim != 0)
        return fail(c, c->span, "full: the fill value must be a scalar, but it has rank %d",
                    v->tensor.ndim);
    *o = ry_type_tensor_arena(c->arena, given ? dt : v->tensor.dtype, nd, dims);
    return RY_REL_OK;
}

/* full_like: Tensor[s, d] x Tensor[(), v] -> Tensor[s, d] */
static ry_rel_status rel_full_like(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *x, *v;
    TRY(tensor_arg(c, n, a, 0, DT_ANY, &x));
    TRY(tensor_arg(c, n, a, 1, DT_ANY, &v));
    if (v->tensor.ndim != 0)
        return fail(c, c->span, "full_like: the fill value must be a scalar, but it has rank %d",
                    v->tensor.ndim);
    *o = retype(c, x, x->tensor.dtype);
    return RY_REL_OK;
}

/* broadcast_to: Tensor[s, d] -> Tensor[shape, d], s broadcasts to shape */
static ry_rel_status rel_broadcast_to(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *x;
    ry_dim dims[RY_MAX_RANK];
    int nd;
    TRY(shape_attr(c, &nd, dims));
    TRY(tensor_arg(c, n, a, 0, DT_ANY, &x));
    ry_type *t = ry_type_tensor_arena(c->arena, x->tensor.dtype, nd, dims);
    TRY(fits(c, x, t, "the input"));
    *o = t;
    return RY_REL_OK;
}

/* broadcast_to_like: Tensor[s1, d] x Tensor[s2, e] -> Tensor[s2, d],
 * s1 broadcasts to s2 (TVM's: the like argument gives only its shape) */
static ry_rel_status rel_broadcast_to_like(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *x, *like;
    TRY(tensor_arg(c, n, a, 0, DT_ANY, &x));
    TRY(tensor_arg(c, n, a, 1, DT_ANY, &like));
    ry_type *t = retype(c, like, x->tensor.dtype);
    TRY(fits(c, x, t, "the input"));
    *o = t;
    return RY_REL_OK;
}

/* collapse_sum_like: Tensor[s1, d] x Tensor[s2, e] -> Tensor[s2, e],
 * s2 broadcasts to s1 (the result is the second argument's type, as TVM's) */
static ry_rel_status rel_collapse_sum_like(ry_rel_ctx *c, int n, ry_type *const *a, ry_type **o) {
    const ry_type *x, *like;
    TRY(tensor_arg(c, n, a, 0, DT_NUM, &x));
    TRY(tensor_arg(c, n, a, 1, DT_NUM, &like));
    TRY(fits(c, like, x, "the target shape"));
    *o = retype(c, like, like->tensor.dtype);
    return RY_REL_OK;
}

/* ---- the table ---- */

#define BIN(NAME, REL, DOC, GRAD)                                                        \
    {.name = NAME, .nargs = 2, .pattern = RY_PAT_BROADCAST, .rel = REL, .doc = DOC, \
     .batch = RY_BATCH_MAP, .grad = GRAD}
/* comparisons and logic: bool results, zero adjoints */
#define CMP(NAME, REL, DOC)                                                        \
    {.name = NAME, .nargs = 2, .pattern = RY_PAT_BROADCAST, .rel = REL, .doc = DOC, \
     .batch = RY_BATCH_MAP, .no_grad = true}
#define UN(NAME, REL, DOC, GRAD)                                                        \
    {.name = NAME, .nargs = 1, .pattern = RY_PAT_ELEMWISE, .rel = REL, .doc = DOC, \
     .batch = RY_BATCH_MAP, .grad = GRAD}
/* a gradient rule, and the fact that the op may run before a loop instead
 * of in it (ry_op.movable) */
#define MOVABLE(GRAD) GRAD, .movable = true
#define INIT_ATTRS .nattrs = 2, .attrs = {{"shape", RY_AREQUIRED}, {"dtype", RY_ANONE}}

const ry_op ry_ops_elemwise[] = {
    BIN("add", rel_arith, "add: (s1, d) x (s2, d) -> (broadcast(s1, s2), d): x + y",
        MOVABLE(ry_grad_add)),
    BIN("subtract", rel_arith, "subtract: (s1, d) x (s2, d) -> (broadcast, d): x - y",
        MOVABLE(ry_grad_subtract)),
    BIN("multiply", rel_arith, "multiply: (s1, d) x (s2, d) -> (broadcast, d): x * y",
        MOVABLE(ry_grad_multiply)),
    BIN("divide", rel_arith,
        "divide: (s1, d) x (s2, d) -> (broadcast, d): x / y, integers truncate toward zero",
        ry_grad_divide),
    BIN("power", rel_arith, "power: (s1, d) x (s2, d) -> (broadcast, d): x ** y",
        ry_grad_power),
    BIN("maximum", rel_arith, "maximum: (s1, d) x (s2, d) -> (broadcast, d), NaN wins",
        ry_grad_maximum),
    BIN("minimum", rel_arith, "minimum: (s1, d) x (s2, d) -> (broadcast, d), NaN wins",
        ry_grad_minimum),
    CMP("equal", rel_compare, "equal: (s1, d) x (s2, d) -> (broadcast, bool): x == y"),
    CMP("not_equal", rel_compare, "not_equal: (s1, d) x (s2, d) -> (broadcast, bool)"),
    CMP("less", rel_compare, "less: (s1, d) x (s2, d) -> (broadcast, bool): x < y"),
    CMP("less_equal", rel_compare, "less_equal: -> (broadcast, bool): x <= y"),
    CMP("greater", rel_compare, "greater: (s1, d) x (s2, d) -> (broadcast, bool): x > y"),
    CMP("greater_equal", rel_compare, "greater_equal: -> (broadcast, bool): x >= y"),
    CMP("logical_and", rel_logical,
        "logical_and: (s1, bool) x (s2, bool) -> (broadcast, bool)"),
    CMP("logical_or", rel_logical,
        "logical_or: (s1, bool) x (s2, bool) -> (broadcast, bool)"),

    UN("negative", rel_num, "negative: (s, d) -> (s, d): -x, integers wrap",
         MOVABLE(ry_grad_negative)),
    UN("exp", rel_float, "exp: (s, f) -> (s, f)", MOVABLE(ry_grad_exp)),
    UN("log", rel_float, "log: (s, f) -> (s, f)", ry_grad_log),
    UN("sqrt", rel_float, "sqrt: (s, f) -> (s, f)", ry_grad_sqrt),
    UN("rsqrt", rel_float, "rsqrt: (s, f) -> (s, f): 1 / sqrt(x)", ry_grad_rsqrt),
    UN("tanh", rel_float, "tanh: (s, f) -> (s, f)", MOVABLE(ry_grad_tanh)),
    UN("sigmoid", rel_float, "sigmoid: (s, f) -> (s, f): 1 / (1 + exp(-x))",
        MOVABLE(ry_grad_sigmoid)),
    UN("abs", rel_num, "abs: (s, d) -> (s, d)", ry_grad_abs),
    UN("nn.relu", rel_num, "nn.relu: (s, d) -> (s, d): max(x, 0)", ry_grad_relu),
    {.name = "nn.leaky_relu", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .batch = RY_BATCH_MAP, .nattrs = 1,
     .attrs = {{"alpha", RY_AFLOAT(0.25)}}, .rel = rel_leaky_relu,
     .doc = "nn.leaky_relu: (s, f) -> (s, f): x > 0 ? x : alpha * x",
     .grad = ry_grad_leaky_relu},
    {.name = "clip", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .batch = RY_BATCH_MAP, .nattrs = 2,
     .attrs = {{"a_min", RY_AREQUIRED}, {"a_max", RY_AREQUIRED}}, .rel = rel_clip,
     .doc = "clip: (s, d) -> (s, d): max(min(x, a_max), a_min), bounds cast to d",
     .grad = ry_grad_clip},
    {.name = "logical_not", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .rel = rel_bool,
     .doc = "logical_not: (s, bool) -> (s, bool)", .no_grad = true},
    {.name = "where", .nargs = 3, .pattern = RY_PAT_BROADCAST, .rel = rel_where,
     .doc = "where: (s1, bool) x (s2, d) x (s3, d) -> (broadcast(s1, s2, s3), d)",
     .batch = RY_BATCH_MAP,
     .grad = ry_grad_where},
    {.name = "cast", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .nattrs = 1,
     .attrs = {{"dtype", RY_AREQUIRED}}, .rel = rel_cast,
     .doc = "cast: (s, d) -> (s, dtype); float to int truncates and saturates",
     .batch = RY_BATCH_MAP,
     .grad = ry_grad_cast},
    {.name = "zeros", .nargs = 0, .pattern = RY_PAT_ELEMWISE, INIT_ATTRS, .rel = rel_init,
     .doc = "zeros: () -> (shape, dtype)",
     .no_grad = true, .zeros = true},
    {.name = "ones", .nargs = 0, .pattern = RY_PAT_ELEMWISE, INIT_ATTRS, .rel = rel_init,
     .doc = "ones: () -> (shape, dtype)",
     .no_grad = true},
    {.name = "full", .nargs = 1, .pattern = RY_PAT_ELEMWISE, INIT_ATTRS, .rel = rel_full,
     .doc = "full: ((), v) -> (shape, dtype or v)",
     .grad = ry_grad_full},
    {.name = "zeros_like", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .rel = rel_any,
     .doc = "zeros_like: (s, d) -> (s, d)", .no_grad = true,
     .zeros = true},
    {.name = "ones_like", .nargs = 1, .pattern = RY_PAT_ELEMWISE, .rel = rel_any,
     .doc = "ones_like: (s, d) -> (s, d)", .no_grad = true},
    {.name = "full_like", .nargs = 2, .pattern = RY_PAT_ELEMWISE, .rel = rel_full_like,
     .doc = "full_like: (s, d) x ((), v) -> (s, d)",
     .grad = ry_grad_full_like},
    {.name = "broadcast_to", .nargs = 1, .pattern = RY_PAT_BROADCAST, INIT_ATTRS,
     .rel = rel_broadcast_to,
     .doc = "broadcast_to: (s, d) -> (shape, d), s broadcasts to shape",
     .grad = ry_grad_broadcast_to},
    {.name = "broadcast_to_like", .nargs = 2, .pattern = RY_PAT_BROADCAST,
     .rel = rel_broadcast_to_like,
     .doc = "broadcast_to_like: (s1, d) x (s2, e) -> (s2, d), s1 broadcasts to s2",
     .grad = ry_grad_broadcast_to_like},
    {.name = "collapse_sum_like", .nargs = 2, .pattern = RY_PAT_COMM_REDUCE,
     .rel = rel_collapse_sum_like,
     .doc = "collapse_sum_like: (s1, d) x (s2, e) -> (s2, e): sum over broadcast dims",
     .grad = ry_grad_collapse_sum_like},
    UN("copy", rel_any, "copy: (s, d) -> (s, d)", ry_grad_copy),
    /* stop_gradient: the identity whose adjoint is zero, so a model can hand
     * back carried RNN state without gradients flowing through it; the
     * identity kernel is copy's. */
    {.name = "stop_gradient", .nargs = 1, .pattern = RY_PAT_INJECTIVE, .rel = rel_any,
     .doc = "stop_gradient: (s, d) -> (s, d): x, with a zero adjoint",
     .no_grad = true},
};
const int ry_ops_elemwise_count = (int)(sizeof ry_ops_elemwise / sizeof ry_ops_elemwise[0]);
