/*
 * emit_layout.c: the C export's emitters for operators that move data:
 * concatenate, stack, split, take (gathers, with TVM's clip and wrap
 * modes), one_hot, transpose and nn.pad (constant, edge, reflect). Each is a copy loop written inline, over the shapes the type
 * checker gave; results are the input's elements, so the VM's bits.
 */
#include <string.h>

#include "backend/c/emit.h"

static int norm_axis(int64_t a, int ndim) { return (int)(a < 0 ? a + ndim : a); }

static const char *ctype_of(const cval *v) { return ry_c_ctype(v->dtype); }

/* concatenate((x0, x1, ...), axis): per outer index, each field's run of
 * dims[axis] * inner elements in turn. */
static ry_status emit_concatenate(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *t = args[0];
    if (!t->tuple || t->n < 1) return ry_c_fail(c, call->span, "concatenate of a value that is not a tuple");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    int axis = norm_axis(ry_attr_int(ry_c_op(call), &call->call.attrs, "axis"), y->ndim);
    if (axis < 0 || axis >= y->ndim) return ry_c_fail(c, call->span, "concatenate: axis out of range");
    const char *outer = ry_c_dims_count(c, y, 0, axis), *inner = ry_c_dims_count(c, y, axis + 1, y->ndim);
    ry_sb_printf(&c->body, "    for (int64_t o = 0, _off = 0; o < %s; o++) {\n", outer);
    for (int f = 0; f < t->n; f++) {
        const cval *x = t->fields[f];
        if (x->tuple || x->dtype != y->dtype || x->ndim != y->ndim)
            return ry_c_fail(c, call->span, "concatenate: field %d is not a tensor like the result", f);
        const char *run = ry_c_fmt(c, "%s * %s", ry_c_dim(c, &x->dims[axis]), inner);
        ry_sb_printf(&c->body, "        memcpy(%s + _off, %s + o * %s, sizeof(%s) * (size_t)(%s));\n        _off += %s;\n",
                     y->c, x->c, run, ctype_of(y), run, run);
    }
    ry_sb_puts(&c->body, "    }\n");
    return RY_OK;
}

/* split(x, indices_or_sections, axis): each result's run of x per outer index. */
static ry_status emit_split(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0];
    if (x->tuple) return ry_c_fail(c, call->span, "split of a tuple");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *t = *out;
    if (!t->tuple) return ry_c_fail(c, call->span, "split: a result that is not a tuple");
    int axis = norm_axis(ry_attr_int(ry_c_op(call), &call->call.attrs, "axis"), x->ndim);
    if (axis < 0 || axis >= x->ndim) return ry_c_fail(c, call->span, "split: axis out of range");
    const char *outer = ry_c_dims_count(c, x, 0, axis), *inner = ry_c_dims_count(c, x, axis + 1, x->ndim);
    const char *whole = ry_c_fmt(c, "%s * %s", ry_c_dim(c, &x->dims[axis]), inner);
    ry_sb_printf(&c->body, "    for (int64_t o = 0, _off = 0; o < %s; o++) {\n", outer);
    for (int f = 0; f < t->n; f++) {
        const cval *y = t->fields[f];
        const char *run = ry_c_fmt(c, "%s * %s", ry_c_dim(c, &y->dims[axis]), inner);
        ry_sb_printf(&c->body, "        memcpy(%s + o * %s, %s + o * %s + _off, sizeof(%s) * (size_t)(%s));\n        _off += %s;\n",
                     y->c, run, x->c, whole, ctype_of(y), run, run);
    }
    ry_sb_puts(&c->body, "        _off = 0;\n    }\n");
    return RY_OK;
}

/* take(data, indices, axis, mode): out[o, j, i] = data[o, index(j), i];
 * mode clip clamps an index into [0, D), wrap takes it modulo D ("fast"
 * clamps too: the export never reads outside data). axis None: data flat. */
static ry_status emit_take(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *d = args[0], *ix = args[1];
    if (d->tuple || ix->tuple || !ry_c_is_int(ix->dtype))
        return ry_c_fail(c, call->span, "take: the export takes integer indices");
    if (ry_attr_int(op, &call->call.attrs, "batch_dims") != 0) return ry_c_fail(c, call->span, "take with batch_dims: not exported yet");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    bool flat = ry_attr_is_none(op, &call->call.attrs, "axis");
    int axis = flat ? 0 : norm_axis(ry_attr_int(op, &call->call.attrs, "axis"), d->ndim);
    if (axis < 0 || axis >= (d->ndim ? d->ndim : 1)) return ry_c_fail(c, call->span, "take: axis out of range");
    const char *outer = flat ? "1" : ry_c_dims_count(c, d, 0, axis), *D = flat ? ry_c_count(c, d->ndim, d->dims) : ry_c_dim(c, &d->dims[axis]);
    const char *inner = flat ? "1" : ry_c_dims_count(c, d, axis + 1, d->ndim), *J = ry_c_count(c, ix->ndim, ix->dims);
    bool wrap = strcmp(ry_attr_str(op, &call->call.attrs, "mode"), "wrap") == 0;
    ry_sb_printf(&c->body,
                 "    for (int64_t o = 0; o < %s; o++)\n        for (int64_t _j = 0; _j < %s; _j++) {\n"
                 "            int64_t _k = (int64_t)%s[_j], _D = %s;\n",
                 outer, J, ix->c, D);
    if (wrap) ry_sb_puts(&c->body, "            _k = ((_k %% _D) + _D) %% _D;\n");
    else ry_sb_puts(&c->body, "            _k = _k < 0 ? 0 : _k >= _D ? _D - 1 : _k;\n");
    ry_sb_printf(&c->body, "            memcpy(%s + (o * %s + _j) * %s, %s + (o * _D + _k) * %s, sizeof(%s) * (size_t)(%s));\n        }\n",
                 (*out)->c, J, inner, d->c, inner, ctype_of(d), inner);
    return RY_OK;
}

/* transpose(x, axes): a loop nest over the result, reading x at the
 * permuted index (axes None: reversed). */
static ry_status emit_transpose(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0];
    if (x->tuple) return ry_c_fail(c, call->span, "transpose of a tuple");
    int64_t axes[RY_MAX_RANK];
    int na = ry_attr_ints(op, &call->call.attrs, "axes", axes, RY_MAX_RANK);
    if (na < 0 || na == 0)
        for (int i = 0; i < x->ndim; i++) axes[i] = x->ndim - 1 - i;
    else if (na != x->ndim)
        return ry_c_fail(c, call->span, "transpose: %d axes for %d dimensions", na, x->ndim);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    strbuf *b = &c->body;
    ry_sb_puts(b, "    {\n");
    for (int j = 0; j < y->ndim; j++)
        ry_sb_printf(b, "        for (int64_t i%d = 0; i%d < %s; i%d++)\n", j, j, ry_c_dim(c, &y->dims[j]), j);
    ry_sb_printf(b, "        %s[", y->c);
    for (int j = 0; j < y->ndim; j++) {
        ry_sb_printf(b, "%si%d", j ? " + " : "", j);
        for (int k = j + 1; k < y->ndim; k++) ry_sb_printf(b, " * %s", ry_c_dim(c, &y->dims[k]));
    }
    ry_sb_printf(b, "%s] = %s[", y->ndim ? "" : "0", x->c);
    for (int j = 0; j < y->ndim; j++) {
        int a = norm_axis(axes[j], x->ndim);
        ry_sb_printf(b, "%si%d", j ? " + " : "", j);
        for (int k = a + 1; k < x->ndim; k++) ry_sb_printf(b, " * %s", ry_c_dim(c, &x->dims[k]));
    }
    ry_sb_printf(b, "%s];\n    }\n", y->ndim ? "" : "0");
    return RY_OK;
}

/* stack((x0, x1, ...), axis): out[o, f, i] = x_f[o, i] around the new axis. */
static ry_status emit_stack(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *t = args[0];
    if (!t->tuple || t->n < 1 || t->fields[0]->tuple) return ry_c_fail(c, call->span, "stack of a value that is not a tuple of tensors");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out, *x0 = t->fields[0];
    int axis = norm_axis(ry_attr_int(ry_c_op(call), &call->call.attrs, "axis"), y->ndim);
    if (axis < 0 || axis >= y->ndim) return ry_c_fail(c, call->span, "stack: axis out of range");
    const char *outer = ry_c_dims_count(c, x0, 0, axis), *inner = ry_c_dims_count(c, x0, axis, x0->ndim);
    ry_sb_printf(&c->body, "    for (int64_t o = 0; o < %s; o++) {\n", outer);
    for (int f = 0; f < t->n; f++)
        ry_sb_printf(&c->body, "        memcpy(%s + (o * %d + %d) * %s, %s + o * %s, sizeof(%s) * (size_t)(%s));\n", y->c,
                     t->n, f, inner, t->fields[f]->c, inner, ctype_of(y), inner);
    ry_sb_puts(&c->body, "    }\n");
    return RY_OK;
}

/* nn.pad(x, value, pad_width, pad_mode): a loop nest over the result, each
 * axis's source index from rt/pad.c. */
static ry_status emit_pad(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    bool mirror = strcmp(op->name, "nn.mirror_pad") == 0; /* no pad value: REFLECT or SYMMETRIC */
    const cval *x = args[0], *v = mirror ? NULL : args[1];
    if (x->tuple || (v && (v->tuple || v->ndim != 0 || v->dtype != x->dtype)))
        return ry_c_fail(c, call->span, "nn.pad: a pad value that is not a scalar of the data's dtype");
    const char *mode = ry_attr_str(op, &call->call.attrs, mirror ? "mode" : "pad_mode");
    int m = strcmp(mode, "constant") == 0 ? 0 : strcmp(mode, "edge") == 0 ? 1
          : strcmp(mode, "reflect") == 0 || strcmp(mode, "REFLECT") == 0 ? 2 : strcmp(mode, "SYMMETRIC") == 0 ? 3 : -1;
    if (m < 0 || (mirror && m < 2)) return ry_c_fail(c, call->span, "%s: mode \"%s\" is not exported yet", op->name, mode);
    const ry_attr_value *pw = ry_attr_get(op, &call->call.attrs, "pad_width");
    if (!pw || pw->kind != RY_AV_LIST || pw->list.n != x->ndim || x->ndim == 0)
        return ry_c_fail(c, call->span, "nn.pad: pad_width does not give every axis");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    c->rt |= RT_PAD;
    strbuf *b = &c->body;
    ry_sb_puts(b, "    {\n");
    for (int j = 0; j < y->ndim; j++) {
        const ry_attr_value *w = &pw->list.items[j];
        long long before = w->kind == RY_AV_LIST && w->list.n > 0 ? (long long)w->list.items[0].i : 0;
        ry_sb_printf(b, "        for (int64_t i%d = 0; i%d < %s; i%d++) {\n", j, j, ry_c_dim(c, &y->dims[j]), j);
        ry_sb_printf(b, "        const int64_t _s%d = rt_pad_src(i%d, %lld, %s, %d);\n", j, j, before, ry_c_dim(c, &x->dims[j]), m);
    }
    ry_sb_printf(b, "        %s[", y->c);
    for (int j = 0; j < y->ndim; j++) {
        ry_sb_printf(b, "%si%d", j ? " + " : "", j);
        for (int k = j + 1; k < y->ndim; k++) ry_sb_printf(b, " * %s", ry_c_dim(c, &y->dims[k]));
    }
    ry_sb_puts(b, "] = ");
    if (v) { /* only constant mode gives -1 */
        for (int j = 0; j < y->ndim; j++) ry_sb_printf(b, "%s_s%d < 0", j ? " || " : "", j);
        ry_sb_printf(b, " ? %s[0] : ", v->c);
    }
    ry_sb_printf(b, "%s[", x->c);
    for (int j = 0; j < x->ndim; j++) {
        ry_sb_printf(b, "%s_s%d", j ? " + " : "", j);
        for (int k = j + 1; k < x->ndim; k++) ry_sb_printf(b, " * %s", ry_c_dim(c, &x->dims[k]));
    }
    ry_sb_puts(b, "];\n");
    for (int j = 0; j < y->ndim; j++) ry_sb_puts(b, "        }\n");
    ry_sb_puts(b, "    }\n");
    return RY_OK;
}

/* one_hot(indices, on, off, depth, axis): out[o, d, i] = indices[o, i] == d
 * ? on : off, the new axis of depth values at axis (-1: last). */
static ry_status emit_one_hot(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *ix = args[0], *on = args[1], *off = args[2];
    if (ix->tuple || !ry_c_is_int(ix->dtype) || on->tuple || off->tuple || on->ndim || off->ndim)
        return ry_c_fail(c, call->span, "one_hot: integer indices and scalar on and off values");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    if (on->dtype != y->dtype || off->dtype != y->dtype)
        return ry_c_fail(c, call->span, "one_hot: on and off values of another dtype than the result");
    int axis = norm_axis(ry_attr_int(op, &call->call.attrs, "axis"), y->ndim);
    if (axis < 0 || axis >= y->ndim) return ry_c_fail(c, call->span, "one_hot: axis out of range");
    const char *outer = ry_c_dims_count(c, ix, 0, axis), *inner = ry_c_dims_count(c, ix, axis, ix->ndim);
    const char *depth = ry_c_dim(c, &y->dims[axis]);
    ry_sb_printf(&c->body,
                 "    for (int64_t o = 0; o < %s; o++)\n        for (int64_t _d = 0; _d < %s; _d++)\n"
                 "            for (int64_t i = 0; i < %s; i++)\n"
                 "                %s[(o * %s + _d) * %s + i] = (int64_t)%s[o * %s + i] == _d ? %s[0] : %s[0];\n",
                 outer, depth, inner, y->c, depth, inner, ix->c, inner, on->c, off->c);
    return RY_OK;
}

static const ry_c_emitter table[] = {
    {"one_hot", emit_one_hot},
    {"stack", emit_stack},
    {"nn.pad", emit_pad},
    {"nn.mirror_pad", emit_pad},
    {"concatenate", emit_concatenate},
    {"split", emit_split},
    {"take", emit_take},
    {"transpose", emit_transpose},
};

ry_c_emit_fn ry_c_emit_layout(const char *name) {
    return ry_c_emitter_find(table, sizeof table / sizeof table[0], name);
}
