/*
 * emit_spatial.c: the C export's emitters for the NCHW operators beside
 * conv2d and the fixed-window pools (emit_ops.c's): nn.conv2d_transpose
 * (rt/conv2d_transpose.c: a gather loop, equal to the CPU target's GEMM
 * to rounding) and nn.adaptive_avg_pool2d / nn.adaptive_max_pool2d
 * (rt/adaptive_pool2d.c: the CPU target's order, the same bits).
 */
#include <string.h>

#include "backend/c/emit.h"
#include "op/conv_attrs.h"

static ry_status emit_conv2d_transpose(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    ry_conv2d_params p;
    const cval *x = args[0], *w = args[1];
    if (ry_conv2d_params_read(ry_c_op(call), &call->call.attrs, call->span, c->err, &p)) return RY_ERR;
    if (ry_c_layout_is(c, call, "data_layout", "NCHW") || ry_c_layout_is(c, call, "kernel_layout", "IOHW") ||
        ry_c_need_float(c, call, (const cval *const *)args, 2))
        return RY_ERR;
    if (p.has_out_dtype && p.out_dtype != x->dtype)
        return ry_c_fail(c, call->span, "nn.conv2d_transpose: out_dtype %s on %s data", ry_dtype_name(p.out_dtype),
                         ry_dtype_name(x->dtype));
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    ry_sb_printf(&c->body,
                 "    {\n        const rt_convt g = {%s, %s, %s, %s, %s, %s, %s, %s, %s, %lld, %lld, %lld, %lld, %lld, %lld, %lld};\n"
                 "        rt_conv2d_transpose%s(&g, %s, %s, %s);\n    }\n",
                 ry_c_dim(c, &x->dims[0]), ry_c_dim(c, &x->dims[1]), ry_c_dim(c, &x->dims[2]), ry_c_dim(c, &x->dims[3]),
                 ry_c_dim(c, &y->dims[1]), ry_c_dim(c, &w->dims[2]), ry_c_dim(c, &w->dims[3]), ry_c_dim(c, &y->dims[2]),
                 ry_c_dim(c, &y->dims[3]), (long long)p.stride[0], (long long)p.stride[1], (long long)p.pad[0],
                 (long long)p.pad[1], (long long)p.dilation[0], (long long)p.dilation[1], (long long)p.groups,
                 ry_c_kernel(c, RT_CONV2D_T, x->dtype), x->c, w->c, y->c);
    return RY_OK;
}

static ry_status emit_adaptive_pool(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0];
    if (ry_c_layout_is(c, call, "layout", "NCHW") || ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    if (x->ndim != 4) return ry_c_fail(c, call->span, "%s: the export takes NCHW data", ry_c_op(call)->name);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    ry_sb_printf(&c->body, "    rt_adaptive_pool2d%s(%s, %s, %s, %s, %s, %d, %s, %s);\n",
                 ry_c_kernel(c, RT_ADAPTIVE_POOL, x->dtype), ry_c_dims_count(c, x, 0, 2), ry_c_dim(c, &x->dims[2]),
                 ry_c_dim(c, &x->dims[3]), ry_c_dim(c, &y->dims[2]), ry_c_dim(c, &y->dims[3]),
                 strcmp(ry_c_op(call)->name, "nn.adaptive_max_pool2d") == 0, x->c, y->c);
    return RY_OK;
}

static const ry_c_emitter table[] = {
    {"nn.conv2d_transpose", emit_conv2d_transpose},
    {"nn.adaptive_avg_pool2d", emit_adaptive_pool},
    {"nn.adaptive_max_pool2d", emit_adaptive_pool},
};

ry_c_emit_fn ry_c_emit_spatial(const char *name) {
    return ry_c_emitter_find(table, sizeof table / sizeof table[0], name);
}
