/*
 * conv.c: registry entries of the convolution and pooling family:
 * nn.conv2d, nn.conv2d_transpose, nn.max_pool2d, nn.avg_pool2d and
 * nn.global_avg_pool2d, with TVM's names, attributes and C++ defaults
 * (Conv2DAttrs, Conv2DTransposeAttrs, MaxPool2DAttrs, AvgPool2DAttrs,
 * GlobalPool2DAttrs), their type relations and the attribute reader the
 * kernels share. Kernels live in src/backend/cpu/{conv,pool}.c. Only TVM's
 * default layouts (NCHW data, OIHW / IOHW weights) are supported; any other
 * layout is a located "unsupported layout" error at type-check time.
 */
#include <string.h>

#include "backend/cpu/conv_kernels.h"

/* ---- attribute reading ---- */

/* Where attribute `name` was written, or the call when it was not. */
static ry_span attr_span(const ry_attrs *attrs, const char *name, ry_span call) {
    if (attrs)
        for (int i = 0; i < attrs->n; i++)
            if (strcmp(attrs->items[i].name, name) == 0) return attrs->items[i].span;
    return call;
}

static bool has_attr(const ry_op *op, const char *name) {
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) return true;
    return false;
}

/* A list attribute of 1 or 2 integers (1 means the same for h and w), each
 * at least lo. */
static ry_status read_pair(const ry_op *op, const ry_attrs *attrs, const char *name, int64_t lo,
                           ry_span call, ry_error *err, int64_t out[2]) {
    ry_span sp = attr_span(attrs, name, call);
    const ry_attr_value *v = ry_attr_get(op, attrs, name);
    if (v->kind != RY_AV_LIST && v->kind != RY_AV_INT)
        return ry_error_at(err, sp, "%s: %s must be a list of integers", op->name, name);
    int64_t x[4];
    int n = ry_attr_ints(op, attrs, name, x, 4);
    if (n != 1 && n != 2)
        return ry_error_at(err, sp, "%s: %s must have 1 or 2 values (height, width), not %d",
                           op->name, name, n);
    out[0] = x[0];
    out[1] = n == 2 ? x[1] : x[0];
    for (int i = 0; i < 2; i++)
        if (out[i] < lo || out[i] > INT32_MAX)
            return ry_error_at(err, sp, "%s: %s[%d] = %lld must be at least %lld and fit int32",
                               op->name, name, i, (long long)out[i], (long long)lo);
    return RY_OK;
}

/* padding: TVM's get_pad_tuple: one value for all sides; two for (top,
 * left) with bottom = top and right = left; four for (top, left, bottom,
 * right). Never negative. */
static ry_status read_padding(const ry_op *op, const ry_attrs *attrs, ry_span call,
                              ry_error *err, int64_t pad[4]) {
    ry_span sp = attr_span(attrs, "padding", call);
    const ry_attr_value *v = ry_attr_get(op, attrs, "padding");
    if (v->kind != RY_AV_LIST && v->kind != RY_AV_INT)
        return ry_error_at(err, sp, "%s: padding must be a list of integers", op->name);
    int64_t x[4];
    int n = ry_attr_ints(op, attrs, "padding", x, 4);
    if (n == 1) {
        pad[0] = pad[1] = pad[2] = pad[3] = x[0];
    } else if (n == 2) {
        pad[0] = pad[2] = x[0];
        pad[1] = pad[3] = x[1];
    } else if (n == 4) {
        memcpy(pad, x, sizeof x);
    } else {
        return ry_error_at(err, sp, "%s: padding must have 1, 2 or 4 values, not %d", op->name, n);
    }
    for (int i = 0; i < 4; i++)
        if (pad[i] < 0 || pad[i] > INT32_MAX)
            return ry_error_at(err, sp, "%s: padding must not be negative or exceed int32 (got %lld)",
                               op->name, (long long)pad[i]);
    return RY_OK;
}

static ry_status check_layout(const ry_op *op, const ry_attrs *attrs, const char *name,
                              const char *want, bool empty_ok, ry_span call, ry_error *err) {
    const char *s = ry_attr_str(op, attrs, name);
    if (strcmp(s, want) == 0 || (empty_ok && s[0] == '\0')) return RY_OK;
    return ry_error_at(err, attr_span(attrs, name, call),
                       "%s: unsupported layout %s=\"%s\" (only \"%s\" is supported)", op->name,
                       name, s, want);
}

ry_status ry_conv2d_params_read(const ry_op *op, const ry_attrs *attrs, ry_span call,
                                ry_error *err, ry_conv2d_params *p) {
    memset(p, 0, sizeof *p);
    p->stride[0] = p->stride[1] = p->dilation[0] = p->dilation[1] = p->groups = 1;
    if (has_attr(op, "strides") && read_pair(op, attrs, "strides", 1, call, err, p->stride))
        return RY_ERR;
    if (has_attr(op, "dilation") && read_pair(op, attrs, "dilation", 1, call, err, p->dilation))
        return RY_ERR;
    if (has_attr(op, "padding") && read_padding(op, attrs, call, err, p->pad)) return RY_ERR;
    if (has_attr(op, "output_padding") &&
        read_pair(op, attrs, "output_padding", 0, call, err, p->out_pad))
        return RY_ERR;
    if (has_attr(op, "pool_size")) {
        if (ry_attr_is_none(op, attrs, "pool_size"))
            return ry_error_at(err, call, "%s: pool_size is required", op->name);
        if (read_pair(op, attrs, "pool_size", 1, call, err, p->pool)) return RY_ERR;
    }
    if (has_attr(op, "groups")) {
        p->groups = ry_attr_int(op, attrs, "groups");
        if (p->groups < 1 || p->groups > INT32_MAX)
            return ry_error_at(err, attr_span(attrs, "groups", call),
                               "%s: groups must be at least 1 and fit int32 (got %lld)", op->name,
                               (long long)p->groups);
    }
    if (has_attr(op, "ceil_mode")) p->ceil_mode = ry_attr_bool(op, attrs, "ceil_mode");
    if (has_attr(op, "count_include_pad"))
        p->count_include_pad = ry_attr_bool(op, attrs, "count_include_pad");
    if (has_attr(op, "out_dtype")) {
        const char *s = ry_attr_str(op, attrs, "out_dtype");
        if (s[0]) {
            if (!ry_dtype_parse(s, strlen(s), &p->out_dtype))
                return ry_error_at(err, attr_span(attrs, "out_dtype", call),
                                   "%s: unknown out_dtype \"%s\"", op->name, s);
            p->has_out_dtype = true;
        }
    }
    /* Layouts: TVM's defaults only. */
    if (has_attr(op, "data_layout") &&
        check_layout(op, attrs, "data_layout", "NCHW", false, call, err))
        return RY_ERR;
    if (has_attr(op, "kernel_layout") &&
        check_layout(op, attrs, "kernel_layout", has_attr(op, "output_padding") ? "IOHW" : "OIHW",
                     false, call, err))
        return RY_ERR;
    if (has_attr(op, "layout") && check_layout(op, attrs, "layout", "NCHW", false, call, err))
        return RY_ERR;
    if (has_attr(op, "out_layout") && check_layout(op, attrs, "out_layout", "NCHW", true, call, err))
        return RY_ERR;
    return RY_OK;
}

/* ---- relation helpers ---- */

static const ry_dim ANY = {RY_DIM_ANY, 0, NULL};

static ry_dim dconst(int64_t v) { return (ry_dim){RY_DIM_CONST, v, NULL}; }
static bool is_const(const ry_dim *d) { return d->kind == RY_DIM_CONST; }

/* A rank-4 tensor argument: DEFER while unknown, FAIL when something else. */
static ry_rel_status want_nchw(ry_rel_ctx *c, const ry_type *t, const char *what) {
    if (t->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    char buf[128];
    if (t->kind != RY_TYPE_TENSOR) {
        ry_error_at(c->err, c->span, "%s: %s must be a tensor, not %s", c->op->name, what,
                    ry_type_str(t, buf, sizeof buf));
        return RY_REL_FAIL;
    }
    if (t->tensor.ndim != 4) {
        ry_error_at(c->err, c->span, "%s: %s must have rank 4 (NCHW), but has type %s",
                    c->op->name, what, ry_type_str(t, buf, sizeof buf));
        return RY_REL_FAIL;
    }
    return RY_REL_OK;
}

/* Convolution and pooling work on numbers: floats (float16 widened to
 * float32) and integers; bool is rejected. */
static bool dtype_ok(ry_dtype d) { return d != RY_BOOL && d < RY_DTYPE_COUNT; }

static ry_rel_status bad_dtype(ry_rel_ctx *c, ry_dtype d) {
    ry_error_at(c->err, c->span, "%s: dtype %s is not supported (use a float or integer type)",
                c->op->name, ry_dtype_name(d));
    return RY_REL_FAIL;
}

/* a*b + c, false on int64 overflow: dims and attributes are user input. */
static bool muladd(int64_t a, int64_t b, int64_t c, int64_t *r) {
    int64_t m;
    return !__builtin_mul_overflow(a, b, &m) && !__builtin_add_overflow(m, c, r);
}

static ry_rel_status too_large(ry_rel_ctx *c, const char *axis) {
    ry_error_at(c->err, c->span, "%s: the output %s is too large", c->op->name, axis);
    return RY_REL_FAIL;
}

/* One output spatial dim from an input length n (padded by pad) swept by a
 * window of extent ext = dilation*(k-1)+1 at stride s; ceil rounds up as
 * TVM does (it pads the tail by s-1). Non-constant inputs give Any. */
static ry_rel_status window_dim(ry_rel_ctx *c, const ry_dim *n, int64_t k, bool k_known,
                                int64_t pad, int64_t dil, int64_t s, bool ceil, const char *axis,
                                ry_dim *out) {
    if (!is_const(n) || !k_known) {
        *out = ANY;
        return RY_REL_OK;
    }
    int64_t ext, padded, len;
    if (!muladd(dil, k - 1, 1, &ext) || __builtin_add_overflow(n->value, pad, &padded) ||
        __builtin_add_overflow(padded - ext, ceil ? s - 1 : 0, &len))
        return too_large(c, axis);
    if (padded < ext) {
        ry_error_at(c->err, c->span,
                    "%s: %s %lld plus padding %lld is smaller than the window extent %lld "
                    "(kernel %lld, dilation %lld)",
                    c->op->name, axis, (long long)n->value, (long long)pad, (long long)ext,
                    (long long)k, (long long)dil);
        return RY_REL_FAIL;
    }
    *out = dconst(len / s + 1);
    return RY_REL_OK;
}

/* channels, when given, is an integer that must match the weight. */
static ry_rel_status check_channels(ry_rel_ctx *c, const ry_dim *have, const char *from) {
    if (ry_attr_is_none(c->op, c->attrs, "channels")) return RY_REL_OK;
    ry_span sp = attr_span(c->attrs, "channels", c->span);
    const ry_attr_value *v = ry_attr_get(c->op, c->attrs, "channels");
    if (v->kind != RY_AV_INT) {
        ry_error_at(c->err, sp, "%s: channels must be an integer", c->op->name);
        return RY_REL_FAIL;
    }
    if (is_const(have) && have->value != v->i) {
        ry_error_at(c->err, sp, "%s: channels=%lld but the weight gives %lld output channels (%s)",
                    c->op->name, (long long)v->i, (long long)have->value, from);
        return RY_REL_FAIL;
    }
    return RY_REL_OK;
}

/* kernel_size, when given, must match the weight's (KH, KW). Sets k[] and
 * known[] from the weight, or from kernel_size where the weight's are not
 * constant. */
static ry_rel_status check_kernel_size(ry_rel_ctx *c, const ry_type *w, int64_t k[2],
                                       bool known[2]) {
    for (int i = 0; i < 2; i++) {
        const ry_dim *d = &w->tensor.dims[2 + i];
        known[i] = is_const(d);
        k[i] = known[i] ? d->value : 0;
        if (known[i] && k[i] < 1) {
            ry_error_at(c->err, c->span, "%s: the weight's kernel must not be empty (%s is 0)",
                        c->op->name, i ? "KW" : "KH");
            return RY_REL_FAIL;
        }
    }
    if (ry_attr_is_none(c->op, c->attrs, "kernel_size")) return RY_REL_OK;
    int64_t ks[2];
    if (read_pair(c->op, c->attrs, "kernel_size", 1, c->span, c->err, ks)) return RY_REL_FAIL;
    for (int i = 0; i < 2; i++) {
        if (known[i] && k[i] != ks[i]) {
            ry_error_at(c->err, attr_span(c->attrs, "kernel_size", c->span),
                        "%s: kernel_size=[%lld, %lld] but the weight's kernel is %lld x %lld",
                        c->op->name, (long long)ks[0], (long long)ks[1],
                        (long long)w->tensor.dims[2].value, (long long)w->tensor.dims[3].value);
            return RY_REL_FAIL;
        }
        k[i] = ks[i];
        known[i] = true;
    }
    return RY_REL_OK;
}

/* Output dtype: out_dtype when given, else the data's. Integer inputs give
 * integer outputs and float inputs float outputs. */
static ry_rel_status conv_dtype(ry_rel_ctx *c, const ry_type *x, const ry_type *w,
                                const ry_conv2d_params *p, ry_dtype *out) {
    ry_dtype d = x->tensor.dtype;
    if (!dtype_ok(d)) return bad_dtype(c, d);
    if (w->tensor.dtype != d) {
        ry_error_at(c->err, c->span, "%s: data is %s but weight is %s (they must match)",
                    c->op->name, ry_dtype_name(d), ry_dtype_name(w->tensor.dtype));
        return RY_REL_FAIL;
    }
    *out = p->has_out_dtype ? p->out_dtype : d;
    if (!dtype_ok(*out) || ry_dtype_is_float(*out) != ry_dtype_is_float(d)) {
        ry_error_at(c->err, attr_span(c->attrs, "out_dtype", c->span),
                    "%s: out_dtype %s does not suit %s inputs", c->op->name,
                    ry_dtype_name(*out), ry_dtype_name(d));
        return RY_REL_FAIL;
    }
    return RY_REL_OK;
}

static ry_rel_status divisible(ry_rel_ctx *c, const ry_dim *d, int64_t g, const char *what) {
    if (is_const(d) && d->value % g != 0) {
        ry_error_at(c->err, attr_span(c->attrs, "groups", c->span),
                    "%s: %s (%lld) is not divisible by groups=%lld", c->op->name, what,
                    (long long)d->value, (long long)g);
        return RY_REL_FAIL;
    }
    return RY_REL_OK;
}

/* ---- nn.conv2d ----
 * conv2d: (N, C, H, W) x (O, C/groups, KH, KW) -> (N, O, OH, OW),
 *   OH = (H + pad_top + pad_bottom - dilation_h*(KH-1) - 1) / stride_h + 1, OW alike. */
static ry_rel_status conv2d_rel(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "data")) != RY_REL_OK) return s;
    if ((s = want_nchw(c, args[1], "weight")) != RY_REL_OK) return s;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_REL_FAIL;
    const ry_type *x = args[0], *w = args[1];
    ry_dtype od;
    if ((s = conv_dtype(c, x, w, &p, &od)) != RY_REL_OK) return s;
    const ry_dim *C = &x->tensor.dims[1], *O = &w->tensor.dims[0], *I = &w->tensor.dims[1];
    if ((s = divisible(c, C, p.groups, "input channels")) != RY_REL_OK) return s;
    if ((s = divisible(c, O, p.groups, "output channels")) != RY_REL_OK) return s;
    if (is_const(C) && is_const(I) && C->value != I->value * p.groups) {
        ry_error_at(c->err, c->span,
                    "%s: data has %lld channels but the weight expects %lld (weight dim 1 = %lld "
                    "x groups %lld)",
                    c->op->name, (long long)C->value, (long long)(I->value * p.groups),
                    (long long)I->value, (long long)p.groups);
        return RY_REL_FAIL;
    }
    if ((s = check_channels(c, O, "weight dim 0")) != RY_REL_OK) return s;
    int64_t k[2];
    bool known[2];
    if ((s = check_kernel_size(c, w, k, known)) != RY_REL_OK) return s;
    ry_dim dims[4] = {x->tensor.dims[0], *O, ANY, ANY};
    if (!is_const(O) && !ry_attr_is_none(c->op, c->attrs, "channels"))
        dims[1] = dconst(ry_attr_int(c->op, c->attrs, "channels"));
    const char *axis[2] = {"height", "width"};
    for (int i = 0; i < 2; i++)
        if ((s = window_dim(c, &x->tensor.dims[2 + i], k[i], known[i], p.pad[i] + p.pad[i + 2],
                            p.dilation[i], p.stride[i], false, axis[i], &dims[2 + i])) != RY_REL_OK)
            return s;
    *out = ry_type_tensor_arena(c->arena, od, 4, dims);
    return RY_REL_OK;
}

/* ---- nn.conv2d_transpose ----
 * conv2d_transpose: (N, C, H, W) x (C, O/groups, KH, KW) -> (N, O, OH, OW),
 *   OH = (H-1)*stride_h - pad_top - pad_bottom + dilation_h*(KH-1) + 1 + output_padding_h. */
static ry_rel_status conv2d_transpose_rel(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                          ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "data")) != RY_REL_OK) return s;
    if ((s = want_nchw(c, args[1], "weight")) != RY_REL_OK) return s;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_REL_FAIL;
    /* As PyTorch: output_padding only disambiguates among the sizes that
     * one stride (or dilation) step covers. */
    for (int i = 0; i < 2; i++)
        if (p.out_pad[i] >= p.stride[i] && p.out_pad[i] >= p.dilation[i]) {
            ry_error_at(c->err, attr_span(c->attrs, "output_padding", c->span),
                        "%s: output_padding[%d] = %lld must be smaller than the stride (%lld) or "
                        "the dilation (%lld)",
                        c->op->name, i, (long long)p.out_pad[i], (long long)p.stride[i],
                        (long long)p.dilation[i]);
            return RY_REL_FAIL;
        }
    const ry_type *x = args[0], *w = args[1];
    ry_dtype od;
    if ((s = conv_dtype(c, x, w, &p, &od)) != RY_REL_OK) return s;
    const ry_dim *C = &x->tensor.dims[1], *I = &w->tensor.dims[0], *Og = &w->tensor.dims[1];
    if ((s = divisible(c, C, p.groups, "input channels")) != RY_REL_OK) return s;
    if (is_const(C) && is_const(I) && C->value != I->value) {
        ry_error_at(c->err, c->span,
                    "%s: data has %lld channels but the weight (layout IOHW) has %lld input "
                    "channels",
                    c->op->name, (long long)C->value, (long long)I->value);
        return RY_REL_FAIL;
    }
    ry_dim O = is_const(Og) ? dconst(Og->value * p.groups) : ANY;
    if ((s = check_channels(c, &O, "weight dim 1 x groups")) != RY_REL_OK) return s;
    if (!is_const(&O) && !ry_attr_is_none(c->op, c->attrs, "channels"))
        O = dconst(ry_attr_int(c->op, c->attrs, "channels"));
    int64_t k[2];
    bool known[2];
    if ((s = check_kernel_size(c, w, k, known)) != RY_REL_OK) return s;
    ry_dim dims[4] = {x->tensor.dims[0], O, ANY, ANY};
    const char *axis[2] = {"height", "width"};
    for (int i = 0; i < 2; i++) {
        const ry_dim *n = &x->tensor.dims[2 + i];
        if (!is_const(n) || !known[i]) continue;
        int64_t span, ext, len;
        if (n->value >= 1 && (!muladd(n->value - 1, p.stride[i], 0, &span) ||
                              !muladd(p.dilation[i], k[i] - 1, 1 + p.out_pad[i], &ext) ||
                              __builtin_add_overflow(span - p.pad[i] - p.pad[i + 2], ext, &len)))
            return too_large(c, axis[i]);
        if (n->value < 1 || len < 1) {
            ry_error_at(c->err, c->span,
                        "%s: output %s would be %lld (input %lld, padding %lld + %lld)",
                        c->op->name, axis[i], (long long)(n->value < 1 ? 0 : len),
                        (long long)n->value, (long long)p.pad[i], (long long)p.pad[i + 2]);
            return RY_REL_FAIL;
        }
        dims[2 + i] = dconst(len);
    }
    *out = ry_type_tensor_arena(c->arena, od, 4, dims);
    return RY_REL_OK;
}

/* ---- pools ----
 * max_pool2d, avg_pool2d: (N, C, H, W) -> (N, C, OH, OW),
 *   OH = (H + pad_top + pad_bottom - dilation_h*(PH-1) - 1 [+ stride_h-1 if ceil_mode]) / stride_h + 1.
 * Unlike PyTorch, TVM keeps a last ceil_mode window that starts in the
 * bottom/right padding; so do we. */
static ry_rel_status pool2d_rel(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "data")) != RY_REL_OK) return s;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_REL_FAIL;
    const ry_type *x = args[0];
    if (!dtype_ok(x->tensor.dtype)) return bad_dtype(c, x->tensor.dtype);
    ry_dim dims[4] = {x->tensor.dims[0], x->tensor.dims[1], ANY, ANY};
    const char *axis[2] = {"height", "width"};
    for (int i = 0; i < 2; i++)
        if ((s = window_dim(c, &x->tensor.dims[2 + i], p.pool[i], true, p.pad[i] + p.pad[i + 2],
                            p.dilation[i], p.stride[i], p.ceil_mode, axis[i], &dims[2 + i])) !=
            RY_REL_OK)
            return s;
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, 4, dims);
    return RY_REL_OK;
}

/* global_avg_pool2d: (N, C, H, W) -> (N, C, 1, 1), H and W at least 1. */
static ry_rel_status global_pool2d_rel(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                       ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "data")) != RY_REL_OK) return s;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_REL_FAIL;
    const ry_type *x = args[0];
    if (!dtype_ok(x->tensor.dtype)) return bad_dtype(c, x->tensor.dtype);
    for (int i = 2; i < 4; i++)
        if (is_const(&x->tensor.dims[i]) && x->tensor.dims[i].value < 1) {
            ry_error_at(c->err, c->span, "%s: cannot average over an empty %s", c->op->name,
                        i == 2 ? "height" : "width");
            return RY_REL_FAIL;
        }
    ry_dim dims[4] = {x->tensor.dims[0], x->tensor.dims[1], dconst(1), dconst(1)};
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, 4, dims);
    return RY_REL_OK;
}

/* ---- the table ---- */

static ry_attr_value ones2[] = {RY_AINT(1), RY_AINT(1)};
static ry_attr_value zeros2[] = {RY_AINT(0), RY_AINT(0)};
#define ONES2 {.kind = RY_AV_LIST, .list = {2, ones2}}
#define ZEROS2 {.kind = RY_AV_LIST, .list = {2, zeros2}}

const ry_op ry_ops_conv[] = {
    {.name = "nn.conv2d",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 10,
     .attrs = {{"strides", ONES2},
               {"padding", ZEROS2},
               {"dilation", ONES2},
               {"groups", RY_AINT(1)},
               {"channels", RY_ANONE},
               {"kernel_size", RY_ANONE},
               {"data_layout", RY_ASTR("NCHW")},
               {"kernel_layout", RY_ASTR("OIHW")},
               {"out_layout", RY_ASTR("")},
               {"out_dtype", RY_ASTR("")}},
     .rel = conv2d_rel,
     .kernels = {[RY_TARGET_CPU] = ry_cpu_conv2d},
     .doc = "conv2d: (N, C, H, W) x (O, C/groups, KH, KW) -> (N, O, OH, OW)"},
    {.name = "nn.conv2d_transpose",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 11,
     .attrs = {{"channels", RY_ANONE},
               {"kernel_size", RY_ANONE},
               {"strides", ONES2},
               {"output_padding", ZEROS2},
               {"padding", ZEROS2},
               {"dilation", ONES2},
               {"groups", RY_AINT(1)},
               {"data_layout", RY_ASTR("NCHW")},
               {"kernel_layout", RY_ASTR("IOHW")},
               {"out_layout", RY_ASTR("")},
               {"out_dtype", RY_ASTR("")}},
     .rel = conv2d_transpose_rel,
     .kernels = {[RY_TARGET_CPU] = ry_cpu_conv2d_transpose},
     .doc = "conv2d_transpose: (N, C, H, W) x (C, O/groups, KH, KW) -> (N, O, OH, OW)"},
    {.name = "nn.max_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 7,
     .attrs = {{"pool_size", RY_ANONE}, /* required: TVM has no default */
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)}},
     .rel = pool2d_rel,
     .kernels = {[RY_TARGET_CPU] = ry_cpu_max_pool2d},
     .doc = "max_pool2d: (N, C, H, W) -> (N, C, OH, OW), max over each window"},
    {.name = "nn.avg_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 8,
     .attrs = {{"pool_size", RY_ANONE}, /* required: TVM has no default */
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)},
               {"count_include_pad", RY_ABOOL(false)}},
     .rel = pool2d_rel,
     .kernels = {[RY_TARGET_CPU] = ry_cpu_avg_pool2d},
     .doc = "avg_pool2d: (N, C, H, W) -> (N, C, OH, OW), mean over each window"},
    {.name = "nn.global_avg_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 2,
     .attrs = {{"layout", RY_ASTR("NCHW")}, {"out_layout", RY_ASTR("")}},
     .rel = global_pool2d_rel,
     .kernels = {[RY_TARGET_CPU] = ry_cpu_global_avg_pool2d},
     .doc = "global_avg_pool2d: (N, C, H, W) -> (N, C, 1, 1)"},
};
const int ry_ops_conv_count = (int)(sizeof ry_ops_conv / sizeof ry_ops_conv[0]);
