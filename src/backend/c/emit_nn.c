/*
 * emit_nn.c: the C export's emitters for the inference-mode nn operators
 * and the reductions: nn.batch_norm (moving statistics), nn.dropout (the
 * identity, a mask of ones), nn.layer_norm, the global pools, sum, mean,
 * max, min, argmax and argmin, and the two cross-entropy losses.
 * The export is for inference: these compute what the VM computes without
 * --train. Their kernels are in rt/ (batch_norm.c, layer_norm.c, reduce.c,
 * argreduce.c) or inline.
 */
#include <string.h>

#include "backend/c/emit.h"

/* data viewed as (O, C, I) around axis: C expressions. */
static void split_axis(cemit *c, const cval *x, int axis, const char **O, const char **C, const char **I) {
    *O = ry_c_dims_count(c, x, 0, axis);
    *C = ry_c_dim(c, &x->dims[axis]);
    *I = ry_c_dims_count(c, x, axis + 1, x->ndim);
}

/* batch_norm(x, gamma, beta, mean, var) -> (y, mean, var) at inference. */
static ry_status emit_batch_norm(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    if (ry_c_need_float(c, call, (const cval *const *)args, 5)) return RY_ERR;
    int axis = ry_c_attr_axis(call, args[0], "axis");
    if (axis < 0 || axis >= args[0]->ndim) return ry_c_fail(c, call->span, "nn.batch_norm: axis out of range");
    cval *t = RY_NEW(c->a, cval);
    t->tuple = true, t->n = 3, t->weight = -1;
    t->fields = RY_NEW_ARRAY(c->a, cval *, 3);
    if (!call->type || call->type->kind != RY_TYPE_TUPLE || call->type->tuple.n != 3 ||
        !(t->fields[0] = ry_c_buffer(c, call->type->tuple.fields[0], call->span)))
        return ry_c_fail(c, call->span, "nn.batch_norm: a result that is not (data, mean, var)");
    t->fields[1] = args[3], t->fields[2] = args[4]; /* unchanged at inference */
    const char *O, *C, *I;
    split_axis(c, args[0], axis, &O, &C, &I);
    ry_sb_printf(&c->body, "    rt_batch_norm%s(%s, %s, %s, %a, %d, %d, %s, %s, %s, %s, %s, %s);\n",
                 ry_c_kernel(c, RT_BATCH_NORM, args[0]->dtype), O, C, I,
                 ry_attr_float(op, &call->call.attrs, "epsilon"), ry_attr_bool(op, &call->call.attrs, "center"),
                 ry_attr_bool(op, &call->call.attrs, "scale"), args[0]->c, args[1]->c, args[2]->c, args[3]->c,
                 args[4]->c, t->fields[0]->c);
    *out = t;
    return RY_OK;
}

/* dropout(x) -> (x, ones) at inference. */
static ry_status emit_dropout(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (args[0]->tuple || !call->type || call->type->kind != RY_TYPE_TUPLE || call->type->tuple.n != 2)
        return ry_c_fail(c, call->span, "nn.dropout: a result that is not (data, mask)");
    cval *t = RY_NEW(c->a, cval);
    t->tuple = true, t->n = 2, t->weight = -1;
    t->fields = RY_NEW_ARRAY(c->a, cval *, 2);
    t->fields[0] = args[0];
    if (!(t->fields[1] = ry_c_buffer(c, call->type->tuple.fields[1], call->span))) return RY_ERR;
    const cval *m = t->fields[1];
    ry_sb_printf(&c->body, "    for (int64_t i = 0; i < %s; i++) %s[i] = 1;\n", ry_c_count(c, m->ndim, m->dims), m->c);
    *out = t;
    return RY_OK;
}

/* global_avg_pool2d / global_max_pool2d: each (n, c) plane to one value,
 * summed in order in its dtype (CPU: pool.c), or its max from the lowest
 * finite value, NaN winning. */
static ry_status emit_global_pool(cemit *c, const ry_expr *call, cval *const *args, cval **out, bool is_max) {
    const cval *x = args[0];
    const char *lay = ry_attr_str(ry_c_op(call), &call->call.attrs, "layout");
    if (ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    if (x->ndim != 4 || (lay && *lay && strcmp(lay, "NCHW") != 0))
        return ry_c_fail(c, call->span, "%s: the export takes NCHW data", ry_c_op(call)->name);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *P = ry_c_dims_count(c, x, 0, 2), *hw = ry_c_dims_count(c, x, 2, 4);
    const char *T = ry_c_ctype(x->dtype);
    ry_sb_printf(&c->body, "    for (int64_t _p = 0; _p < %s; _p++) {\n        const %s *_s = %s + _p * %s;\n", P, T, x->c, hw);
    if (is_max)
        ry_sb_printf(&c->body, "        %s _m = %s;\n        for (int64_t i = 0; i < %s; i++)\n"
                               "            if (_s[i] > _m || _s[i] != _s[i]) _m = _s[i];\n        %s[_p] = _m;\n    }\n",
                     T, x->dtype == RY_FLOAT64 ? "-DBL_MAX" : "-FLT_MAX", hw, (*out)->c);
    else
        ry_sb_printf(&c->body, "        %s _acc = 0;\n        for (int64_t i = 0; i < %s; i++) _acc += _s[i];\n"
                               "        %s[_p] = _acc / (%s)(%s);\n    }\n",
                     T, hw, (*out)->c, T, hw);
    return RY_OK;
}

static ry_status emit_global_avg_pool2d(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    return emit_global_pool(c, call, args, out, false);
}

static ry_status emit_global_max_pool2d(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    return emit_global_pool(c, call, args, out, true);
}

/* sum/mean/max/min over `axis` (None: all; exclude: the others), which
 * must be one run of consecutive axes; keepdims is only in the type. */
/* The run [*a0, *a1] of axes a reduction reduces (axis: None all; exclude:
 * the others), which must be consecutive; none: *a0 = *a1 = ndim. */
static ry_status reduced_run(cemit *c, const ry_expr *call, const cval *x, int *a0, int *a1) {
    const ry_op *op = ry_c_op(call);
    int64_t axes[RY_MAX_RANK];
    int na = ry_attr_ints(op, &call->call.attrs, "axis", axes, RY_MAX_RANK);
    bool red[RY_MAX_RANK] = {false}, excl = ry_attr_bool(op, &call->call.attrs, "exclude");
    for (int i = 0; i < x->ndim; i++) red[i] = na < 0;
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->ndim : axes[k];
        if (a < 0 || a >= x->ndim) return ry_c_fail(c, call->span, "%s: axis out of range", op->name);
        red[a] = true;
    }
    if (excl)
        for (int i = 0; i < x->ndim; i++) red[i] = !red[i];
    *a0 = *a1 = -1;
    for (int i = 0; i < x->ndim; i++)
        if (red[i]) *a1 = i, *a0 = *a0 < 0 ? i : *a0;
    for (int i = *a0; *a0 >= 0 && i <= *a1; i++)
        if (!red[i]) return ry_c_fail(c, call->span, "%s over axes that are not consecutive: not exported yet", op->name);
    if (*a0 < 0) *a0 = *a1 = x->ndim;
    return RY_OK;
}

/* "O, R, I" of x around the run [a0, a1]. */
static const char *ori(cemit *c, const cval *x, int a0, int a1) {
    bool none = a0 == x->ndim;
    return ry_c_fmt(c, "%s, %s, %s", ry_c_dims_count(c, x, 0, a0), ry_c_dims_count(c, x, a0, none ? a0 : a1 + 1),
                    ry_c_dims_count(c, x, none ? a0 : a1 + 1, x->ndim));
}

/* sum/max/min of int32 or int64 (a length counted from a tensor),
 * accumulated in int64 (the sum wraps to the dtype): a loop in index
 * order, as the CPU target does. */
static ry_status int_reduce(cemit *c, const ry_expr *call, const cval *x, int a0, int a1, cval **out) {
    const char *name = ry_c_op(call)->name;
    int kind = strcmp(name, "sum") == 0 ? 0 : strcmp(name, "max") == 0 ? 2 : strcmp(name, "min") == 0 ? 3 : -1;
    if (kind < 0) return ry_c_fail(c, call->span, "%s of %s has no C kernel in the export yet", name, ry_dtype_name(x->dtype));
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    bool none = a0 == x->ndim;
    const char *O = ry_c_dims_count(c, x, 0, a0), *R = ry_c_dims_count(c, x, a0, none ? a0 : a1 + 1);
    const char *I = ry_c_dims_count(c, x, none ? a0 : a1 + 1, x->ndim), *T = "int64_t";
    const char *init = kind == 0 ? "0" : kind == 2 ? "INT64_MIN" : "INT64_MAX";
    const char *step = kind == 0 ? "_acc += _v" : kind == 2 ? "_acc = _v > _acc ? _v : _acc" : "_acc = _v < _acc ? _v : _acc";
    ry_sb_printf(&c->body, "    for (int64_t o = 0; o < %s; o++)\n        for (int64_t i = 0; i < %s; i++) {\n"
                           "            %s _acc = %s;\n"
                           "            for (int64_t _r = 0; _r < %s; _r++) {\n                const %s _v = %s[(o * %s + _r) * %s + i];\n"
                           "                %s;\n            }\n"
                           "            %s[o * %s + i] = %s;\n        }\n",
                 O, I, T, init, R, T, x->c, R, I, step, (*out)->c, I, ry_c_wrap(c, (*out)->dtype, "_acc"));
    return RY_OK;
}

/* sum/mean/max/min; keepdims is only in the type. */
static ry_status emit_reduce(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    int a0, a1;
    if (!x->tuple && ry_c_is_int(x->dtype)) {
        if (reduced_run(c, call, x, &a0, &a1)) return RY_ERR;
        return int_reduce(c, call, x, a0, a1, out);
    }
    if (ry_c_need_float(c, call, &x, 1) || reduced_run(c, call, x, &a0, &a1)) return RY_ERR;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *names[] = {"sum", "mean", "max", "min"};
    int kind = 0;
    for (int k = 0; k < 4; k++)
        if (strcmp(op->name, names[k]) == 0) kind = k;
    ry_sb_printf(&c->body, "    rt_reduce%s(%s, %d, %s, %s);\n", ry_c_kernel(c, RT_REDUCE, x->dtype), ori(c, x, a0, a1), kind,
                 x->c, (*out)->c);
    return RY_OK;
}

/* argmax/argmin: int32 indices within the reduced run. */
static ry_status emit_argreduce(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    int a0, a1;
    if (ry_c_need_float(c, call, &x, 1) || reduced_run(c, call, x, &a0, &a1)) return RY_ERR;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if ((*out)->dtype != RY_INT32) return ry_c_fail(c, call->span, "%s: a result that is not int32", op->name);
    ry_sb_printf(&c->body, "    rt_argreduce%s(%s, %d, %d, %s, %s);\n", ry_c_kernel(c, RT_ARGREDUCE, x->dtype), ori(c, x, a0, a1), strcmp(op->name, "argmax") == 0,
                 ry_attr_bool(op, &call->call.attrs, "select_last_index"), x->c, (*out)->c);
    return RY_OK;
}

/* cumsum(x, axis, dtype, exclusive): the running sum along the axis (None:
 * x flattened), x viewed as (P, V, Q); a float result accumulates in
 * double, an integer one in int64 wrapping to its dtype, in index order,
 * as the CPU target's scan does (src/backend/cpu/scan.c). */
static ry_status emit_cumsum(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    if (x->tuple || x->dtype == RY_FLOAT16) return ry_c_fail(c, call->span, "cumsum: the export takes a tensor of float32, float64 or integers");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    if (y->dtype == RY_FLOAT16 || y->dtype == RY_BOOL) return ry_c_fail(c, call->span, "cumsum to %s: not exported yet", ry_dtype_name(y->dtype));
    bool flat = ry_attr_is_none(op, &call->call.attrs, "axis"), ints = ry_c_is_int(y->dtype);
    int64_t a = flat ? 0 : ry_attr_int(op, &call->call.attrs, "axis");
    int axis = (int)(a < 0 ? a + x->ndim : a);
    const char *P = flat ? "1" : ry_c_dims_count(c, x, 0, axis), *V = flat ? ry_c_count(c, x->ndim, x->dims) : ry_c_dim(c, &x->dims[axis]);
    const char *Q = flat ? "1" : ry_c_dims_count(c, x, axis + 1, x->ndim);
    const char *load = ry_c_cast(c, x->dtype, ints ? RY_INT64 : RY_FLOAT64, ry_c_fmt(c, "%s[_at]", x->c));
    const char *add = ints ? ry_c_fmt(c, "_acc = (int64_t)((uint64_t)_acc + (uint64_t)%s)", load) : ry_c_fmt(c, "_acc += %s", load);
    const char *store = ry_c_fmt(c, "%s[_at] = %s", y->c, ints ? ry_c_wrap(c, y->dtype, "_acc") : ry_c_fmt(c, "(%s)_acc", ry_c_ctype(y->dtype)));
    bool excl = ry_attr_bool(op, &call->call.attrs, "exclusive");
    ry_sb_printf(&c->body, "    for (int64_t _p = 0; _p < %s; _p++)\n        for (int64_t _q = 0; _q < %s; _q++) {\n"
                           "            %s _acc = 0;\n            for (int64_t _j = 0; _j < %s; _j++) {\n"
                           "                const int64_t _at = (_p * %s + _j) * %s + _q;\n"
                           "                %s;\n                %s;\n            }\n        }\n",
                 P, Q, ints ? "int64_t" : "double", V, V, Q, excl ? store : add, excl ? add : store);
    return RY_OK;
}

/* layer_norm(x, gamma, beta, axis, epsilon, center, scale). */
static ry_status emit_layer_norm(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    if (ry_c_need_float(c, call, (const cval *const *)args, 3)) return RY_ERR;
    int axis = ry_c_attr_axis(call, args[0], "axis");
    if (axis < 0 || axis >= args[0]->ndim) return ry_c_fail(c, call->span, "nn.layer_norm: axis out of range");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *O, *N, *I;
    split_axis(c, args[0], axis, &O, &N, &I);
    ry_sb_printf(&c->body, "    rt_layer_norm%s(%s, %s, %s, %a, %d, %d, %s, %s, %s, %s);\n",
                 ry_c_kernel(c, RT_LAYER_NORM, args[0]->dtype), O, N, I,
                 ry_attr_float(op, &call->call.attrs, "epsilon"), ry_attr_bool(op, &call->call.attrs, "center"),
                 ry_attr_bool(op, &call->call.attrs, "scale"), args[0]->c, args[1]->c, args[2]->c, (*out)->c);
    return RY_OK;
}

/* nn.cross_entropy: -sum(y * log(x)) / n, nn.cross_entropy_with_logits:
 * -sum(y * x) / n, over x and y of one shape (n, ...): the sum in double in
 * index order, as the CPU target's kernel does (src/backend/cpu/softmax.c). */
static ry_status emit_cross_entropy(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0], *y = args[1];
    if (ry_c_need_float(c, call, (const cval *const *)args, 2)) return RY_ERR;
    if (x->ndim < 1 || y->ndim != x->ndim) return ry_c_fail(c, call->span, "%s: operands of rank 0 or of two ranks", ry_c_op(call)->name);
    for (int i = 0; i < x->ndim; i++) ry_c_check_equal(c, call, &x->dims[i], &y->dims[i], "the predictions' and targets' dims");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    bool logits = strcmp(ry_c_op(call)->name, "nn.cross_entropy_with_logits") == 0;
    ry_sb_printf(&c->body,
                 "    {\n        double _s = 0;\n        for (int64_t i = 0; i < %s; i++) _s += (double)%s[i] * %s;\n"
                 "        %s[0] = (%s)(-_s / (double)%s);\n    }\n",
                 ry_c_count(c, x->ndim, x->dims), y->c, logits ? ry_c_fmt(c, "(double)%s[i]", x->c) : ry_c_fmt(c, "log((double)%s[i])", x->c),
                 (*out)->c, ry_c_ctype(x->dtype), ry_c_dim(c, &x->dims[0]));
    return RY_OK;
}

static const ry_c_emitter table[] = {
    {"nn.batch_norm", emit_batch_norm},
    {"nn.dropout", emit_dropout},
    {"nn.global_avg_pool2d", emit_global_avg_pool2d},
    {"nn.global_max_pool2d", emit_global_max_pool2d},
    {"sum", emit_reduce},
    {"mean", emit_reduce},
    {"max", emit_reduce},
    {"min", emit_reduce},
    {"argmax", emit_argreduce},
    {"argmin", emit_argreduce},
    {"nn.layer_norm", emit_layer_norm},
    {"cumsum", emit_cumsum},
    {"nn.cross_entropy", emit_cross_entropy},
    {"nn.cross_entropy_with_logits", emit_cross_entropy},
};

ry_c_emit_fn ry_c_emit_nn(const char *name) {
    return ry_c_emitter_find(table, sizeof table / sizeof table[0], name);
}
