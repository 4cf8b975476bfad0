/*
 * conv.c: the convolution and pooling family's registry entries (nn.conv2d,
 * nn.conv2d_transpose, nn.max_pool2d, nn.avg_pool2d, the global and adaptive
 * pools, and the adjoints their gradient rules emit: nn.conv2d_backward_weight,
 * nn.max_pool2d_grad, nn.avg_pool2d_grad), with TVM's names and C++
 * attribute defaults, type relations, gradient rules, and the attribute
 * reader every target's kernels share (conv_attrs.h). Only TVM's
 * default layouts are supported; others are a located error.
 */
#include <string.h>

#include "op/families.h"
#include "op/conv_attrs.h"
#include "op/grad_rules.h"

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
            return ry_error_at(err, sp,
                               "%s: padding must not be negative or exceed int32 (got %lld)",
                               op->name, (long long)pad[i]);
    return RY_OK;
}

static ry_status check_layout(const ry_op *op, const ry_attrs *attrs, const char *name,
                              const char *want, bool empty_ok, ry_span call, ry_error *err) {
    const char *s = ry_attr_str(op, attrs, name);
    if (strcmp(s, want) == 0 || (empty_ok && s[0] == '\0')) return RY_OK;
    /* A hint for the common case: channels-last data from TensorFlow. */
    const char *hint = strcmp(s, "NHWC") == 0
                           ? "; transpose the data with transpose(%x, axes=[0, 3, 1, 2]) first"
                           : "";
    return ry_error_at(err, attr_span(attrs, name, call),
                       "%s: unsupported layout %s=\"%s\" (only \"%s\" is supported)%s",
                       op->name, name, s, want, hint);
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
    p->out_size[0] = p->out_size[1] = 1;
    if (has_attr(op, "output_size") && ry_attr_ints(op, attrs, "output_size", p->out_size, 2) &&
        read_pair(op, attrs, "output_size", 1, call, err, p->out_size))
        return RY_ERR;
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
    /* conv2d_backward_weight's kernel_layout is dy's, its out_layout the weight's (TVM's) */
    bool wgrad = strcmp(op->name, "nn.conv2d_backward_weight") == 0;
    const char *kernel = wgrad ? "NCHW" : has_attr(op, "output_padding") ? "IOHW" : "OIHW";
    if (has_attr(op, "kernel_layout") && check_layout(op, attrs, "kernel_layout", kernel, false, call, err))
        return RY_ERR;
    if (has_attr(op, "layout") && check_layout(op, attrs, "layout", "NCHW", false, call, err))
        return RY_ERR;
    if (has_attr(op, "out_layout") &&
        check_layout(op, attrs, "out_layout", wgrad ? "OIHW" : "NCHW", true, call, err))
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
    if (v->kind != RY_AV_INT || v->i < 0) {
        ry_error_at(c->err, sp, "%s: channels must be a non-negative integer", c->op->name);
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
    int64_t want_c = 0;
    if (is_const(C) && is_const(I) &&
        (!muladd(I->value, p.groups, 0, &want_c) || C->value != want_c)) {
        ry_error_at(c->err, c->span,
                    "%s: data has %lld channels but the weight expects %lld (weight dim 1 = %lld, "
                    "groups = %lld)",
                    c->op->name, (long long)C->value, (long long)want_c, (long long)I->value,
                    (long long)p.groups);
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
    int64_t o;
    ry_dim O = is_const(Og) && muladd(Og->value, p.groups, 0, &o) ? dconst(o) : p.groups == 1 ? *Og : ANY;
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
        int64_t span = 0, ext = 0, len = 0;
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
 *   OH = (H + pad_top + pad_bottom - dilation_h*(PH-1) - 1 [+ stride_h-1 if ceil_mode])
 *        / stride_h + 1, OW alike.
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

/* global_avg_pool2d, global_max_pool2d: (N, C, H, W) -> (N, C, 1, 1);
 * adaptive_avg_pool2d, adaptive_max_pool2d: (N, C, H, W) -> (N, C, OH, OW)
 *   with (OH, OW) = output_size ([] is (1, 1), [n] is (n, n)); window o
 *   covers rows floor(o*H/OH) .. ceil((o+1)*H/OH)-1. H and W at least 1. */
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
    ry_dim dims[4] = {x->tensor.dims[0], x->tensor.dims[1], dconst(p.out_size[0]),
                      dconst(p.out_size[1])};
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, 4, dims);
    return RY_REL_OK;
}

/* Adjoints exist for floats only: integers carry no gradient. */
static ry_rel_status float_only(ry_rel_ctx *c, ry_dtype d) {
    ry_error_at(c->err, c->span, "%s: dtype %s is not supported (adjoints are float-only)",
                c->op->name, ry_dtype_name(d));
    return RY_REL_FAIL;
}

/* ---- the gradient helper ops (what the gradient rules below emit) ----
 * conv2d_backward_weight: (N, O, OH, OW) x (N, C, H, W) -> (O, C/groups, KH, KW),
 *   the weight's adjoint given the output's; kernel_size is required. */
static ry_rel_status conv2d_backward_weight_rel(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                                ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "grad")) != RY_REL_OK) return s;
    if ((s = want_nchw(c, args[1], "data")) != RY_REL_OK) return s;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(c->op, c->attrs, c->span, c->err, &p)) return RY_REL_FAIL;
    const ry_type *g = args[0], *x = args[1];
    ry_dtype od;
    if ((s = conv_dtype(c, x, g, &p, &od)) != RY_REL_OK) return s;
    if (!ry_dtype_is_float(od)) return float_only(c, od);
    if (ry_attr_is_none(c->op, c->attrs, "kernel_size")) {
        ry_error_at(c->err, c->span, "%s: kernel_size is required", c->op->name);
        return RY_REL_FAIL;
    }
    int64_t k[2];
    if (read_pair(c->op, c->attrs, "kernel_size", 1, c->span, c->err, k)) return RY_REL_FAIL;
    const ry_dim *O = &g->tensor.dims[1], *C = &x->tensor.dims[1];
    const ry_dim *gn = &g->tensor.dims[0], *xn = &x->tensor.dims[0];
    if (is_const(gn) && is_const(xn) && gn->value != xn->value) {
        ry_error_at(c->err, c->span, "%s: grad has batch %lld but data has %lld", c->op->name,
                    (long long)gn->value, (long long)xn->value);
        return RY_REL_FAIL;
    }
    if ((s = divisible(c, C, p.groups, "input channels")) != RY_REL_OK) return s;
    if ((s = divisible(c, O, p.groups, "output channels")) != RY_REL_OK) return s;
    if ((s = check_channels(c, O, "grad dim 1")) != RY_REL_OK) return s;
    ry_dim dims[4] = {*O, is_const(C) ? dconst(C->value / p.groups) : p.groups == 1 ? *C : ANY, dconst(k[0]),
                      dconst(k[1])};
    *out = ry_type_tensor_arena(c->arena, od, 4, dims);
    return RY_REL_OK;
}

/* max_pool2d_grad, avg_pool2d_grad: (N, C, OH, OW) x (N, C, H, W) -> (N, C, H, W),
 *   where (N, C, OH, OW) is the forward pool's result type on the data. */
static ry_rel_status pool2d_grad_rel(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                     ry_type **out) {
    ry_rel_status s;
    if ((s = want_nchw(c, args[0], "out_grad")) != RY_REL_OK) return s;
    ry_type *fwd;
    if ((s = pool2d_rel(c, 1, args + 1, &fwd)) != RY_REL_OK) return s;
    const ry_type *g = args[0];
    if (!ry_dtype_is_float(fwd->tensor.dtype)) return float_only(c, fwd->tensor.dtype);
    char sg[128], sf[128];
    bool ok = g->tensor.dtype == fwd->tensor.dtype;
    for (int i = 0; i < 4; i++) {
        const ry_dim *a = &g->tensor.dims[i], *b = &fwd->tensor.dims[i];
        if (is_const(a) && is_const(b) && a->value != b->value) ok = false;
    }
    if (!ok) {
        ry_error_at(c->err, c->span, "%s: out_grad has type %s but the pool's result is %s",
                    c->op->name, ry_type_str(g, sg, sizeof sg), ry_type_str(fwd, sf, sizeof sf));
        return RY_REL_FAIL;
    }
    const ry_type *x = args[1];
    *out = ry_type_tensor_arena(c->arena, x->tensor.dtype, 4, x->tensor.dims);
    return RY_REL_OK;
}

/* ---- gradient rules: each forward op's adjoint, as IR ----
 * y = conv2d(x, w):
 *   dx = conv2d_transpose(dy, w, same strides/padding/dilation/groups,
 *                         output_padding = the rows the forward's floor dropped)
 *   dw = conv2d_backward_weight(dy, x, same strides/padding/dilation/groups)
 * y = conv2d_transpose(x, w):
 *   dx = conv2d(dy, w, same strides/padding/dilation/groups)
 *   dw = conv2d_backward_weight(x, dy, same strides/padding/dilation/groups)
 * y = max_pool2d(x) / avg_pool2d(x): dx = max_pool2d_grad / avg_pool2d_grad(dy, x, same attrs)
 * y = global_avg_pool2d(x) / global_max_pool2d(x):
 *   dx = avg_pool2d_grad / max_pool2d_grad(dy, x, pool_size=[H, W])
 * Integer arguments get no gradient. */

static const ry_op *call_op(ry_grad_ctx *c) { return c->call->call.callee->op.op; }

/* The (N, C, H, W) shape of a 4-d tensor type, -1 for a dim that is not a
 * constant (a batch, channels or a spatial size known at run time only). */
static bool shape_nchw(const ry_type *t, int64_t *s) {
    if (!t || t->kind != RY_TYPE_TENSOR || t->tensor.ndim != 4) return false;
    for (int i = 0; i < 4; i++) {
        const ry_dim *d = &t->tensor.dims[i];
        s[i] = d->kind == RY_DIM_CONST ? d->value : -1;
    }
    return true;
}

/* The primal call's parameters and the shapes of its arguments; the
 * kernel's height and width (the weight's dims 2 and 3) must be known. */
static ry_status grad_setup(ry_grad_ctx *c, ry_expr *const *args, int n, ry_conv2d_params *p,
                            int64_t shapes[2][4]) {
    const ry_op *op = call_op(c);
    if (ry_conv2d_params_read(op, &c->call->call.attrs, c->span, c->err, p)) return RY_ERR;
    if (p->has_out_dtype && p->out_dtype != ry_gb_dtype(args[0]))
        return ry_error_at(c->err, c->span, "gradient of %s with out_dtype=%s is not supported",
                           op->name, ry_dtype_name(p->out_dtype));
    for (int i = 0; i < n; i++)
        if (!shape_nchw(ry_gb_type(args[i]), shapes[i]))
            return ry_error_at(c->err, c->span, "gradient of %s needs 4-d arguments", op->name);
    if (shapes[1][2] < 0 || shapes[1][3] < 0)
        return ry_error_at(c->err, c->span, "gradient of %s needs the kernel's height and width",
                           op->name);
    return RY_OK;
}

/* strides, padding (all four sides), dilation, groups, channels (where
 * known: channels > 0) and kernel_size on a new conv-like call e. */
static void conv_attrs(ry_module *m, ry_expr *e, const ry_conv2d_params *p, int64_t channels,
                       const int64_t *kernel) {
    ry_gb_attr_ints(m, e, "strides", 2, p->stride);
    ry_gb_attr_ints(m, e, "padding", 4, p->pad);
    ry_gb_attr_ints(m, e, "dilation", 2, p->dilation);
    ry_gb_attr_int(m, e, "groups", p->groups);
    if (channels > 0) ry_gb_attr_int(m, e, "channels", channels);
    ry_gb_attr_ints(m, e, "kernel_size", 2, kernel);
}

/* dx of conv2d: output_padding gives back the rows the forward's floor
 * dropped. Where H (W) is known at run time only, the transpose is made
 * with the largest output_padding (stride - 1: at least H rows, the first
 * H the same at any output_padding) and cut to x's H rows. */
static ry_status grad_conv2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    ry_conv2d_params p;
    int64_t s[2][4]; /* x: (N, C, H, W); w: (O, C/groups, KH, KW) */
    grads[0] = grads[1] = NULL;
    if (!ry_dtype_is_float(ry_gb_dtype(args[0]))) return RY_OK;
    if (grad_setup(c, args, 2, &p, s)) return RY_ERR;
    if (s[1][0] < 0) { /* dW's channels: the weight's, else the call's attribute, else
                        * dy's at run time (conv2d_backward_weight without channels) */
        const ry_op *op = call_op(c);
        if (!ry_attr_is_none(op, &c->call->call.attrs, "channels"))
            s[1][0] = ry_attr_int(op, &c->call->call.attrs, "channels");
    }
    int64_t opad[2];
    bool cut[2];
    for (int i = 0; i < 2; i++) {
        cut[i] = s[0][2 + i] < 0 && p.stride[i] > 1;
        opad[i] = s[0][2 + i] < 0
                      ? p.stride[i] - 1
                      : (s[0][2 + i] + p.pad[i] + p.pad[i + 2] - p.dilation[i] * (s[1][2 + i] - 1) - 1) %
                            p.stride[i];
    }
    ry_expr *dx = ry_gb_op2(c->m, "nn.conv2d_transpose", g, args[1]);
    conv_attrs(c->m, dx, &p, s[0][1], s[1] + 2);
    ry_gb_attr_ints(c->m, dx, "output_padding", 2, opad);
    for (int i = 0; i < 2; i++)
        if (cut[i]) dx = ry_gb_crop_like(c->m, dx, args[0], 4, 2 + i);
    ry_expr *dw = ry_gb_op2(c->m, "nn.conv2d_backward_weight", g, args[0]);
    conv_attrs(c->m, dw, &p, s[1][0], s[1] + 2);
    grads[0] = dx;
    grads[1] = dw;
    return RY_OK;
}

static ry_status grad_conv2d_transpose(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                       ry_expr *g, ry_expr **grads) {
    ry_conv2d_params p;
    int64_t s[2][4]; /* x: (N, C, H, W); w: (C, O/groups, KH, KW) */
    grads[0] = grads[1] = NULL;
    if (!ry_dtype_is_float(ry_gb_dtype(args[0]))) return RY_OK;
    if (grad_setup(c, args, 2, &p, s)) return RY_ERR;
    /* conv2d(dy) gives back H rows only when output_padding < stride. */
    for (int i = 0; i < 2; i++)
        if (p.out_pad[i] >= p.stride[i])
            return ry_error_at(c->err, c->span,
                               "gradient of nn.conv2d_transpose needs output_padding < strides");
    ry_expr *dx = ry_gb_op2(c->m, "nn.conv2d", g, args[1]);
    conv_attrs(c->m, dx, &p, s[0][1], s[1] + 2);
    ry_expr *dw = ry_gb_op2(c->m, "nn.conv2d_backward_weight", args[0], g);
    conv_attrs(c->m, dw, &p, s[0][1], s[1] + 2);
    grads[0] = dx;
    grads[1] = dw;
    return RY_OK;
}

/* The pools' adjoint ops take the forward attributes unchanged. */
/* Whether a pool's windows can reach past the data (some padding, or
 * ceil_mode): only then does count_include_pad change an average. The
 * adjoint leaves an inert one out, since TVM 0.19's parser cannot read it
 * on avg_pool2d_grad (it builds MaxPool2DAttrs for that operator). */
static bool pads_matter(const ry_op *op, const ry_attrs *as) {
    int64_t pad[4] = {0, 0, 0, 0};
    int n = ry_attr_ints(op, as, "padding", pad, 4);
    for (int i = 0; i < n && i < 4; i++)
        if (pad[i]) return true;
    return ry_attr_bool(op, as, "ceil_mode");
}

static ry_status grad_pool(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g, ry_expr **grads,
                           const char *adjoint) {
    grads[0] = NULL;
    if (!ry_dtype_is_float(ry_gb_dtype(args[0]))) return RY_OK;
    ry_expr *dx = ry_gb_op2(c->m, adjoint, g, args[0]);
    const ry_attrs *as = &c->call->call.attrs;
    bool inert = !pads_matter(call_op(c), as);
    for (int i = 0; i < as->n; i++)
        if (!(inert && strcmp(as->items[i].name, "count_include_pad") == 0))
            ry_gb_attr_copy(c->m, dx, &as->items[i]);
    grads[0] = dx;
    return RY_OK;
}

static ry_status grad_max_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                 ry_expr **grads) {
    return grad_pool(c, args, g, grads, "nn.max_pool2d_grad");
}

static ry_status grad_avg_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                 ry_expr **grads) {
    return grad_pool(c, args, g, grads, "nn.avg_pool2d_grad");
}

static ry_status grad_global_pool(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g,
                                  ry_expr **grads, const char *adjoint) {
    grads[0] = NULL;
    if (!ry_dtype_is_float(ry_gb_dtype(args[0]))) return RY_OK;
    int64_t s[4];
    if (!shape_nchw(ry_gb_type(args[0]), s))
        return ry_error_at(c->err, c->span, "gradient of %s needs 4-d data", call_op(c)->name);
    if (s[2] < 0 || s[3] < 0) {
        grads[0] = ry_gb_global_pool_grad(c->m, args[0], g, strcmp(adjoint, "nn.max_pool2d_grad") == 0);
        return RY_OK;
    }
    ry_expr *dx = ry_gb_op2(c->m, adjoint, g, args[0]);
    ry_gb_attr_ints(c->m, dx, "pool_size", 2, s + 2);
    grads[0] = dx;
    return RY_OK;
}

static ry_status grad_global_avg_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                        ry_expr *g, ry_expr **grads) {
    return grad_global_pool(c, args, g, grads, "nn.avg_pool2d_grad");
}

static ry_status grad_global_max_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                        ry_expr *g, ry_expr **grads) {
    return grad_global_pool(c, args, g, grads, "nn.max_pool2d_grad");
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
     .doc = "conv2d: (N, C, H, W) x (O, C/groups, KH, KW) -> (N, O, OH, OW)",
     .grad = grad_conv2d},
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
     .doc = "conv2d_transpose: (N, C, H, W) x (C, O/groups, KH, KW) -> (N, O, OH, OW)",
     .grad = grad_conv2d_transpose},
    {.name = "nn.max_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 7,
     .attrs = {{"pool_size", RY_AREQUIRED},
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)}},
     .rel = pool2d_rel,
     .doc = "max_pool2d: (N, C, H, W) -> (N, C, OH, OW), max over each window",
     .grad = grad_max_pool2d},
    {.name = "nn.avg_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 8,
     .attrs = {{"pool_size", RY_AREQUIRED},
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)},
               {"count_include_pad", RY_ABOOL(false)}},
     .rel = pool2d_rel,
     .doc = "avg_pool2d: (N, C, H, W) -> (N, C, OH, OW), mean over each window",
     .grad = grad_avg_pool2d},
    {.name = "nn.global_avg_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 2,
     .attrs = {{"layout", RY_ASTR("NCHW")}, {"out_layout", RY_ASTR("")}},
     .rel = global_pool2d_rel,
     .doc = "global_avg_pool2d: (N, C, H, W) -> (N, C, 1, 1)",
     .grad = grad_global_avg_pool2d},
    {.name = "nn.global_max_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 2,
     .attrs = {{"layout", RY_ASTR("NCHW")}, {"out_layout", RY_ASTR("")}},
     .rel = global_pool2d_rel,
     .doc = "global_max_pool2d: (N, C, H, W) -> (N, C, 1, 1)",
     .grad = grad_global_max_pool2d},
    {.name = "nn.adaptive_avg_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 3,
     .attrs = {{"output_size", RY_AEMPTY}, {"layout", RY_ASTR("NCHW")}, {"out_layout", RY_ASTR("")}},
     .rel = global_pool2d_rel,
     .doc = "adaptive_avg_pool2d: (N, C, H, W) -> (N, C, OH, OW), OH, OW = output_size",
     .grad = ry_grad_adaptive_avg_pool2d}, /* rule in grad_pool.c */
    {.name = "nn.adaptive_max_pool2d",
     .nargs = 1,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 3,
     .attrs = {{"output_size", RY_AEMPTY}, {"layout", RY_ASTR("NCHW")}, {"out_layout", RY_ASTR("")}},
     .rel = global_pool2d_rel,
     .doc = "adaptive_max_pool2d: (N, C, H, W) -> (N, C, OH, OW), OH, OW = output_size",
     .grad = ry_grad_adaptive_max_pool2d},
    {.name = "nn.conv2d_backward_weight",
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
               /* TVM keeps dy's layout in kernel_layout and the weight's in
                * out_layout, and its C++ defaults (OIHW, "") make its parser
                * fail on a layout: always spelled */
               {"kernel_layout", {.kind = RY_AV_STR, .s = "NCHW", .tvm_required = true}},
               {"out_layout", {.kind = RY_AV_STR, .s = "OIHW", .tvm_required = true}},
               {"out_dtype", RY_ASTR("")}},
     .rel = conv2d_backward_weight_rel,
     .doc = "conv2d_backward_weight: (N, O, OH, OW) x (N, C, H, W) -> (O, C/groups, KH, KW)",
     .grad = ry_grad_conv2d_backward_weight},
    {.name = "nn.max_pool2d_grad",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 7,
     .attrs = {{"pool_size", RY_AREQUIRED},
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)}},
     .rel = pool2d_grad_rel,
     .doc = "max_pool2d_grad: (N, C, OH, OW) x (N, C, H, W) -> (N, C, H, W), to each argmax",
     .grad = ry_grad_max_pool2d_grad},
    {.name = "nn.avg_pool2d_grad",
     .nargs = 2,
     .pattern = RY_PAT_OUT_ELEMWISE,
     .nattrs = 8,
     .attrs = {{"pool_size", RY_AREQUIRED},
               {"strides", ONES2},
               {"dilation", ONES2},
               {"padding", ZEROS2},
               {"layout", RY_ASTR("NCHW")},
               {"out_layout", RY_ASTR("")},
               {"ceil_mode", RY_ABOOL(false)},
               {"count_include_pad", RY_ABOOL(false)}},
     .rel = pool2d_grad_rel,
     .doc = "avg_pool2d_grad: (N, C, OH, OW) x (N, C, H, W) -> (N, C, H, W), spread evenly",
     .grad = ry_grad_avg_pool2d_grad},
};
const int ry_ops_conv_count = (int)(sizeof ry_ops_conv / sizeof ry_ops_conv[0]);
