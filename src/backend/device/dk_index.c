/*
 * dk_index.c (device): operators that pick elements by position: take
 * (clip, wrap and fast modes; "fast" takes indices as they are, and one
 * out of range sets a flag that the host reads after the kernel, then
 * reports the first bad index as the CPU does), split and concatenate
 * (block copies between a tensor and a slice of another along an axis), nn.bias_add (the
 * generator's add with the bias read along its axis). Sources are spelled
 * through the dialect (kernel_gen.h), so another device reuses them.
 */
#include <stdlib.h>
#include <string.h>

#include "tensor/dims.h"
#include "backend/device/dk_ops.h"


/* these kernels only move bytes: elements as integers of their width */
static ry_dk_kernel *build(const ry_dk_device *d, ry_kernel_ctx *c, const char *fmt, size_t es,
                           const char *idx_t) {
    const ry_dialect *dl = d->dialect;
    /* @0..@5: kernel qualifier, global, index, i64, element, index type */
    const char *sub[6] = {dl->kernel, dl->global, dl->index, dl->i64, ry_dk_word(d, es),
                          idx_t ? idx_t : ry_dk_type(d, RY_INT32)};
    return ry_dk_template(d, fmt, sub, 6, c->span, c->err);
}

/* ---- take: out[b, o, k, i] = x[b, o, index(ind[b, k]), i] ---- */
static const char *take_src =
    "@0 k(@3 n, @1@4 *o, @3 oo, @1const @4 *x, @3 xo, @1const @5 *ind, @3 io,\n"
    "     @3 O, @3 N, @3 K, @3 I, @3 mode, @1int *bad, @3 bo) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @3 q = i % I, r = i / I, k = r % K; r /= K; @3 oi = r % O, b = r / O;\n"
    "    @3 j = (@3)ind[io + b * K + k];\n"
    "    if (mode == 1) j = ((j % N) + N) % N;\n"
    "    else if (mode == 0) j = j < 0 ? 0 : j >= N ? N - 1 : j;\n"
    "    else if (j < 0 || j >= N) { bad[bo] = 1; return; }\n"
    "    o[oo + i] = x[xo + ((b * O + oi) * N + j) * I + q];\n"
    "}\n";

/* the first index of ind outside [0, N), in the CPU's words */
static ry_status take_bad_index(const ry_dk_device *d, ry_kernel_ctx *c, const ry_tensor *ind, int64_t N) {
    ry_tensor *h = ry_tensor_new(ind->dtype, ind->ndim, ind->shape);
    if (!h) return ry_error_at(c->err, c->span, "take: out of memory");
    ry_status s = d->download(h->data, ind, ry_tensor_nbytes(ind), c->err);
    for (int64_t i = 0; !s && i < ind->size; i++) {
        int64_t j = (int64_t)ry_tensor_get(h, i);
        if (j < 0 || j >= N)
            s = ry_error_at(c->err, c->span, "take: index %lld out of range [0, %lld) with mode=\"fast\"",
                            (long long)j, (long long)N);
    }
    ry_tensor_release(h);
    return s;
}

DK_KERNEL(ry_dk_take) {
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "take: expected two inputs");
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0], *ind = in[1];
    /* indices of any integer dtype (uint16 ones in TVM's int16 tests) */
    const char *idx_t = ry_dtype_is_float(ind->dtype) || ind->dtype == RY_BOOL ? NULL : ry_dk_type(d, ind->dtype);
    if (!idx_t)
        return ry_error_at(c->err, c->span, "take: %s indices have no kernel on %s", ry_dtype_name(ind->dtype),
                           d->dialect->name);
    const char *ms = ry_attr_str(c->op, c->attrs, "mode");
    int64_t B = 1, O = 1, N = x->size, I = 1, K = ind->size;
    if (!ry_attr_is_none(c->op, c->attrs, "axis")) {
        int64_t axis = ry_attr_int(c->op, c->attrs, "axis");
        if (axis < 0) axis += x->ndim;
        int64_t bd = ry_attr_int(c->op, c->attrs, "batch_dims");
        int bdim = (int)(bd < 0 ? bd + ind->ndim : bd);
        B = ry_dims_prod(x->shape, 0, bdim);
        O = ry_dims_prod(x->shape, bdim, (int)axis);
        N = x->shape[axis];
        I = ry_dims_prod(x->shape, (int)axis + 1, x->ndim);
        K = ry_dims_prod(ind->shape, bdim, ind->ndim);
    }
    if (out[0]->size == 0) return RY_OK;
    if (N == 0) return ry_error_at(c->err, c->span, "take: cannot take from an axis of extent 0");
    (void)B;
    size_t es = ry_dtype_size(x->dtype);
    ry_dk_kernel *k = build(d, c, take_src, es, idx_t);
    if (!k) return RY_ERR;
    int mode = strcmp(ms, "wrap") == 0 ? 1 : strcmp(ms, "fast") == 0 ? 2 : 0;
    ry_tensor *flag = ry_dk_scratch(d, c, RY_INT32, 1, (int64_t[]){1});
    if (!flag) return RY_ERR;
    int32_t bad = 0;
    ry_karg a[] = {KA_L(out[0]->size), KA_T(out[0]), KA_T(x), KA_T(ind), KA_L(O), KA_L(N),
                  KA_L(K), KA_L(I), KA_L(mode), KA_T(flag)};
    /* element offsets of the byte-moving types: the tensors' own dtypes
     * have the same widths, so ry_dk_off holds. Only fast mode can fail,
     * so only it zeroes the flag and waits to read it. */
    ry_status s = mode == 2 ? d->upload(flag, &bad, sizeof bad, c->err) : RY_OK;
    if (!s) s = d->launch(k, (size_t)out[0]->size, NARGS(a), a, c->span, c->err);
    if (!s && mode == 2) s = d->download(&bad, flag, sizeof bad, c->err);
    ry_tensor_release(flag);
    if (!s && bad) s = take_bad_index(d, c, ind, N);
    return s;
}

/* ---- a block of rows between a tensor and a slice of a wider one ----
 * rows R of w elements; the wide side has rows of W, the block at column
 * off. to_wide: x (R, w) into o's slice (concatenate); else o (R, w) from
 * x's slice (split). */
static const char *slice_src =
    "@0 k(@3 n, @1@4 *o, @3 oo, @1const @4 *x, @3 xo, @3 w, @3 W, @3 off, @3 to_wide) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @3 r = i / w, c = i % w;\n"
    "    if (to_wide) o[oo + r * W + off + c] = x[xo + i];\n"
    "    else o[oo + i] = x[xo + r * W + off + c];\n"
    "}\n";

static ry_status slice_copy(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *o, const ry_tensor *x, int64_t rows,
                            int64_t w, int64_t W, int64_t off, bool to_wide) {
    if (rows * w == 0) return RY_OK;
    ry_dk_kernel *k = build(d, c, slice_src, ry_dtype_size(x->dtype), NULL);
    if (!k) return RY_ERR;
    ry_karg a[] = {KA_L(rows * w), KA_T(o), KA_T(x), KA_L(w), KA_L(W), KA_L(off), KA_L(to_wide)};
    return d->launch(k, (size_t)(rows * w), 9, a, c->span, c->err);
}

static int norm_axis(int64_t a, int nd) { return (int)(a < 0 ? a + nd : a); }

DK_KERNEL(ry_dk_split) {
    if (nin != 1 || nout < 1) return ry_error_at(c->err, c->span, "split: expected one input");
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0];
    int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), x->ndim);
    int64_t rows = ry_dims_prod(x->shape, 0, axis), inner = ry_dims_prod(x->shape, axis + 1, x->ndim);
    int64_t W = x->shape[axis] * inner, off = 0;
    for (int k = 0; k < nout; k++) {
        int64_t w = out[k]->shape[axis] * inner;
        if (slice_copy(d, c, out[k], x, rows, w, W, off, false)) return RY_ERR;
        off += w;
    }
    return RY_OK;
}

DK_KERNEL(ry_dk_concatenate) {
    if (nin < 1 || nout != 1) return ry_error_at(c->err, c->span, "concatenate: expected inputs");
    DK_DEVICE(nin, in, nout, out);
    ry_tensor *y = out[0];
    int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), y->ndim);
    int64_t rows = ry_dims_prod(y->shape, 0, axis), inner = ry_dims_prod(y->shape, axis + 1, y->ndim);
    int64_t W = y->shape[axis] * inner, off = 0;
    for (int k = 0; k < nin; k++) {
        int64_t w = in[k]->shape[axis] * inner;
        if (slice_copy(d, c, y, in[k], rows, w, W, off, true)) return RY_ERR;
        off += w;
    }
    return RY_OK;
}

/* ---- nn.bias_add: x + b along axis, as the generator's add over
 * (outer, C, inner) with b read at stride 1 along C only ---- */
DK_KERNEL(ry_dk_bias_add) {
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "nn.bias_add: expected two inputs");
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0];
    int axis = norm_axis(ry_attr_int(c->op, c->attrs, "axis"), x->ndim);
    if (axis < 0 || axis >= x->ndim) return ry_error_at(c->err, c->span, "nn.bias_add: axis out of range");
    int64_t dims[3] = {ry_dims_prod(x->shape, 0, axis), x->shape[axis], ry_dims_prod(x->shape, axis + 1, x->ndim)};
    int64_t strides[2][RY_MAX_RANK] = {{0}, {0, 1, 0}};
    ry_gen_access acc[2] = {RY_GEN_DIRECT, RY_GEN_STRIDED};
    ry_dtype dts[2] = {x->dtype, in[1]->dtype};
    ry_fz_prog p;
    ry_gen_single(&p, RY_FZ_ADD, 2, dts, x->dtype, NULL);
    return ry_dk_launch_prog(d, c, &p, 2, in, 1, out, acc, 3, dims, (const int64_t (*)[RY_MAX_RANK])strides);
}
