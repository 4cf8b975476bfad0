/*
 * emit_norm.c: the C export's emitters for the normalizations beside
 * layer and batch norm (emit_nn.c's): nn.group_norm, nn.instance_norm,
 * nn.lrn, nn.l2_normalize, and nn.prelu. Each computes what the CPU
 * target's kernel computes in the same order (src/backend/cpu/norm.c,
 * nn.c), so float32 and float64 results are the VM's bits. Kernels:
 * rt/group_norm.c, rt/lrn.c, rt/l2_normalize.c; prelu inline.
 */
#include <string.h>

#include "backend/c/emit.h"

/* group_norm / instance_norm(x, gamma, beta): x viewed as (N, A, C, I). */
static ry_status emit_group_norm(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    if (ry_c_need_float(c, call, (const cval *const *)args, 3)) return RY_ERR;
    int axis = ry_c_attr_axis(call, x, "axis");
    if (x->ndim < 2 || axis < 1 || axis >= x->ndim) return ry_c_fail(c, call->span, "%s: axis out of range", op->name);
    bool instance = strcmp(op->name, "nn.instance_norm") == 0;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *C = ry_c_dim(c, &x->dims[axis]);
    const char *G = instance ? C : ry_c_fmt(c, "%lld", (long long)ry_attr_int(op, &call->call.attrs, "num_groups"));
    ry_sb_printf(&c->body, "    rt_group_norm%s(%s, %s, %s, %s, %s, %a, %d, %d, %s, %s, %s, %s);\n",
                 ry_c_kernel(c, RT_GROUP_NORM, x->dtype), ry_c_dim(c, &x->dims[0]), ry_c_dims_count(c, x, 1, axis), C,
                 ry_c_dims_count(c, x, axis + 1, x->ndim), G, ry_attr_float(op, &call->call.attrs, "epsilon"),
                 ry_attr_bool(op, &call->call.attrs, "center"), ry_attr_bool(op, &call->call.attrs, "scale"), x->c,
                 args[1]->c, args[2]->c, (*out)->c);
    return RY_OK;
}

/* lrn(x): x viewed as (O, C, I) around the axis. */
static ry_status emit_lrn(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    if (ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    int axis = ry_c_attr_axis(call, x, "axis");
    if (axis < 0 || axis >= x->ndim) return ry_c_fail(c, call->span, "nn.lrn: axis out of range");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const ry_attrs *at = &call->call.attrs;
    ry_sb_printf(&c->body, "    rt_lrn%s(%s, %s, %s, %lld, %a, %a, %a, %s, %s);\n", ry_c_kernel(c, RT_LRN, x->dtype),
                 ry_c_dims_count(c, x, 0, axis), ry_c_dim(c, &x->dims[axis]), ry_c_dims_count(c, x, axis + 1, x->ndim),
                 (long long)ry_attr_int(op, at, "size"), ry_attr_float(op, at, "bias"), ry_attr_float(op, at, "alpha"),
                 ry_attr_float(op, at, "beta"), x->c, (*out)->c);
    return RY_OK;
}

/* l2_normalize(x, eps, axis): the shape as a compound literal and the
 * reduced axes as a bit mask. */
static ry_status emit_l2_normalize(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    if (ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    int64_t axes[RY_MAX_RANK];
    int na = ry_attr_ints(op, &call->call.attrs, "axis", axes, RY_MAX_RANK);
    unsigned red = 0;
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->ndim : axes[k];
        if (a < 0 || a >= x->ndim) return ry_c_fail(c, call->span, "nn.l2_normalize: axis out of range");
        red |= 1u << a;
    }
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *shape = x->ndim ? "" : "0";
    for (int i = 0; i < x->ndim; i++) shape = ry_c_fmt(c, "%s%s(int64_t)(%s)", shape, i ? ", " : "", ry_c_dim(c, &x->dims[i]));
    ry_sb_printf(&c->body, "    rt_l2_normalize%s(%d, (const int64_t[]){%s}, %uu, %a, %s, %s);\n",
                 ry_c_kernel(c, RT_L2_NORMALIZE, x->dtype), x->ndim, shape, red,
                 ry_attr_float(op, &call->call.attrs, "eps"), x->c, (*out)->c);
    return RY_OK;
}

/* prelu(x, alpha): x < 0 ? alpha[ch] * x : x, x viewed as (O, C, I). */
static ry_status emit_prelu(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0];
    if (ry_c_need_float(c, call, (const cval *const *)args, 2)) return RY_ERR;
    int axis = ry_c_attr_axis(call, x, "axis");
    if (axis < 0 || axis >= x->ndim) return ry_c_fail(c, call->span, "nn.prelu: axis out of range");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *T = ry_c_ctype(x->dtype), *C = ry_c_dim(c, &x->dims[axis]);
    ry_sb_printf(&c->body,
                 "    for (int64_t o = 0; o < %s; o++)\n        for (int64_t _ch = 0; _ch < %s; _ch++) {\n"
                 "            const %s *_xs = %s + (o * %s + _ch) * %s, _al = %s[_ch];\n"
                 "            %s *_ys = %s + (o * %s + _ch) * %s;\n"
                 "            for (int64_t i = 0; i < %s; i++) _ys[i] = _xs[i] < 0 ? _al * _xs[i] : _xs[i];\n        }\n",
                 ry_c_dims_count(c, x, 0, axis), C, T, x->c, C, ry_c_dims_count(c, x, axis + 1, x->ndim), args[1]->c, T,
                 (*out)->c, C, ry_c_dims_count(c, x, axis + 1, x->ndim), ry_c_dims_count(c, x, axis + 1, x->ndim));
    return RY_OK;
}

static const ry_c_emitter table[] = {
    {"nn.group_norm", emit_group_norm}, {"nn.instance_norm", emit_group_norm}, {"nn.lrn", emit_lrn},
    {"nn.l2_normalize", emit_l2_normalize}, {"nn.prelu", emit_prelu},
};

ry_c_emit_fn ry_c_emit_norm(const char *name) {
    return ry_c_emitter_find(table, sizeof table / sizeof table[0], name);
}
