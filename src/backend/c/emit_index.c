/*
 * emit_index.c: the C export's emitters for the n-d indexing operators,
 * gather_nd and scatter_nd (TVM's, as src/op/scatter.c types them and
 * src/backend/cpu/scatter.c runs them), and shape_of. Indices (M, Y...)
 * pick whole slices of S elements through the first M dims of data (after
 * gather_nd's batch dims); an index out of range fails the call with
 * RT_E_ARG and a located message where the VM fails with its error, and
 * dims only run time knows are checked there. scatter_nd's "add" adds in
 * index order in the data's own type, as the CPU target does (integers of
 * 32 and 64 bits wrap, narrower ones saturate), so the results are its bits.
 */
#include <string.h>

#include "backend/c/emit.h"

void ry_c_check_equal(cemit *c, const ry_expr *call, const ry_dim *a, const ry_dim *b, const char *what) {
    const char *x = ry_c_dim(c, a), *y = ry_c_dim(c, b);
    if (strcmp(x, y) == 0) return;
    const char *msg = ry_c_fmt(c, "%s: %s: %s differ at run time", ry_c_where(c, call->span), ry_c_op(call)->name, what);
    ry_sb_printf(&c->body, "    if ((int64_t)%s != (int64_t)%s) %s\n", x, y, ry_c_fail_stmt(c, "RT_E_DIM", msg));
}

/* Declares _off, the slice (in units of S) that index tuple _j (of K)
 * addresses in dims[0..M), each index read as int64; out of range fails. */
static void slice_offset(cemit *c, const ry_expr *call, const cval *ix, const char *K, const ry_dim *dims, int M) {
    const char *msg = ry_c_fmt(c, "%s: %s: an index is out of range", ry_c_where(c, call->span), ry_c_op(call)->name);
    ry_sb_puts(&c->body, "        int64_t _off = 0;\n");
    for (int m = 0; m < M; m++) {
        const char *D = ry_c_dim(c, &dims[m]);
        ry_sb_printf(&c->body,
                     "        {\n            const int64_t _i = (int64_t)%s[(int64_t)%d * %s + _j];\n"
                     "            if (_i < 0 || _i >= %s) %s\n            _off = _off * %s + _i;\n        }\n",
                     ix->c, m, K, D, ry_c_fail_stmt(c, "RT_E_ARG", msg), D);
    }
}

/* Data (B..., X...), indices (M, B..., Y...) with b = batch_dims: out[b,
 * y, :] = data[b, idx[:, b, y], :], slices of S = prod(X[M:]) elements. */
static ry_status emit_gather_nd(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *d = args[0], *ix = args[1];
    if (d->tuple || ix->tuple || !ry_c_is_int(ix->dtype) || !ry_c_ctype(d->dtype))
        return ry_c_fail(c, call->span, "gather_nd: the export takes a tensor and integer indices");
    int b = (int)ry_attr_int(ry_c_op(call), &call->call.attrs, "batch_dims");
    if (ix->ndim < 1 || ix->dims[0].kind != RY_DIM_CONST || b < 0 || b + 1 > ix->ndim)
        return ry_c_fail(c, call->span, "gather_nd: indices whose first dim is not a constant");
    int M = (int)ix->dims[0].value;
    if (M < 1 || b + M > d->ndim) return ry_c_fail(c, call->span, "gather_nd: indices that do not fit the data");
    for (int i = 0; i < b; i++) ry_c_check_equal(c, call, &d->dims[i], &ix->dims[1 + i], "the batch dims of data and indices");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *BY = ry_c_dims_count(c, ix, 1, ix->ndim), *Yn = ry_c_dims_count(c, ix, 1 + b, ix->ndim);
    const char *S = ry_c_dims_count(c, d, b + M, d->ndim), *batch = ry_c_dims_count(c, d, b, d->ndim);
    ry_sb_printf(&c->body, "    for (int64_t _j = 0; _j < %s; _j++) {\n", BY);
    slice_offset(c, call, ix, BY, d->dims + b, M);
    ry_sb_printf(&c->body, "        memcpy(%s + _j * %s, %s + (_j / (%s)) * %s + _off * %s, sizeof(%s) * (size_t)(%s));\n    }\n",
                 (*out)->c, S, d->c, Yn, batch, S, ry_c_ctype(d->dtype), S);
    return RY_OK;
}

/* The statement adding slice element u into y in dtype dt as the CPU's
 * scatter add does; NULL where the export has none (float16). */
static const char *add_into(cemit *c, ry_dtype dt, const char *y, const char *u) {
    switch (dt) {
    case RY_FLOAT32:
    case RY_FLOAT64: return ry_c_fmt(c, "%s += %s;", y, u);
    case RY_INT32:
    case RY_INT64: return ry_c_fmt(c, "%s = %s;", y, ry_c_wrap(c, dt, ry_c_fmt(c, "(uint64_t)%s + (uint64_t)%s", y, u)));
    case RY_BOOL: return ry_c_fmt(c, "%s = %s || %s;", y, y, u);
    case RY_INT8:
    case RY_INT16:
    case RY_UINT8:
    case RY_UINT16: { /* saturating, as ry_tensor_set stores the CPU's sum */
        const char *lo, *hi;
        ry_c_int_limits(dt, &lo, &hi);
        return ry_c_fmt(c, "{ const int64_t _s = (int64_t)%s + %s; %s = (%s)(_s < %s ? %s : _s > %s ? %s : _s); }", y, u, y,
                        ry_c_ctype(dt), lo, lo, hi, hi);
    }
    default: return NULL;
    }
}

/* Data (X...), indices (M, Y...), updates (Y..., X[M:]...): out = data,
 * then for each of the K = prod(Y) index tuples in order, out[idx[:, y],
 * :] = (or +=) updates[y, :]. */
static ry_status emit_scatter_nd(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *d = args[0], *ix = args[1], *up = args[2];
    if (d->tuple || ix->tuple || up->tuple || !ry_c_is_int(ix->dtype) || !ry_c_ctype(d->dtype) || up->dtype != d->dtype)
        return ry_c_fail(c, call->span, "scatter_nd: the export takes tensors of one dtype and integer indices");
    if (ix->ndim < 1 || ix->dims[0].kind != RY_DIM_CONST)
        return ry_c_fail(c, call->span, "scatter_nd: indices whose first dim is not a constant");
    int M = (int)ix->dims[0].value, k = ix->ndim - 1;
    if (M < 1 || M > d->ndim || up->ndim != k + d->ndim - M)
        return ry_c_fail(c, call->span, "scatter_nd: updates that do not fit the data and indices");
    bool add = strcmp(ry_attr_str(ry_c_op(call), &call->call.attrs, "mode"), "add") == 0;
    const char *step = add ? add_into(c, d->dtype, "_y[_e]", "_u[_e]") : "_y[_e] = _u[_e];";
    if (!step) return ry_c_fail(c, call->span, "scatter_nd with mode \"add\" on %s has no C kernel in the export yet", ry_dtype_name(d->dtype));
    for (int i = 0; i < up->ndim; i++)
        ry_c_check_equal(c, call, &up->dims[i], i < k ? &ix->dims[1 + i] : &d->dims[M + i - k], "the updates' dims and the data's or indices'");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const char *T = ry_c_ctype(d->dtype), *K = ry_c_dims_count(c, ix, 1, ix->ndim), *S = ry_c_dims_count(c, d, M, d->ndim);
    const char *all = ry_c_count(c, d->ndim, d->dims);
    ry_sb_printf(&c->body, "    if (%s != %s) memcpy(%s, %s, sizeof(%s) * (size_t)(%s));\n", (*out)->c, d->c, (*out)->c, d->c, T, all);
    ry_sb_printf(&c->body, "    for (int64_t _j = 0; _j < %s; _j++) {\n", K);
    slice_offset(c, call, ix, K, d->dims, M);
    ry_sb_printf(&c->body,
                 "        %s *_y = %s + _off * %s;\n        const %s *_u = %s + _j * %s;\n"
                 "        for (int64_t _e = 0; _e < %s; _e++) %s\n    }\n",
                 T, (*out)->c, S, T, up->c, S, S, step);
    return RY_OK;
}

/* shape_of(x, dtype): x's dims (constants, or the entry's symbols) as numbers. */
static ry_status emit_shape_of(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0];
    if (x->tuple) return ry_c_fail(c, call->span, "shape_of of a tuple");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if (!ry_c_is_int((*out)->dtype)) return ry_c_fail(c, call->span, "shape_of to %s: not exported yet", ry_dtype_name((*out)->dtype));
    for (int i = 0; i < x->ndim; i++)
        ry_sb_printf(&c->body, "    %s[%d] = %s;\n", (*out)->c, i, ry_c_wrap(c, (*out)->dtype, ry_c_dim(c, &x->dims[i])));
    return RY_OK;
}

static const ry_c_emitter table[] = {
    {"gather_nd", emit_gather_nd},
    {"scatter_nd", emit_scatter_nd},
    {"shape_of", emit_shape_of},
};

ry_c_emit_fn ry_c_emit_index(const char *name) {
    return ry_c_emitter_find(table, sizeof table / sizeof table[0], name);
}
