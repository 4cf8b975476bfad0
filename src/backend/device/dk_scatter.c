/*
 * dk_scatter.c (device): gather_nd and scatter_nd (src/backend/cpu/
 * scatter.c's semantics). scatter_nd runs one work-item per column of a
 * slice, each walking the index tuples in order, so "add" sums in the
 * CPU's order (the embedding gradient: the same bits) and "update" keeps
 * the last write. An index out of range sets a flag on the device; the
 * host reads it after the kernel and then finds, in the downloaded
 * indices, the first bad one for the CPU's message.
 */
#include <string.h>

#include "backend/device/dk_ops.h"
#include "op/scatter_dims.h"

/* the first tuple of ind (M, K) outside dims, as the CPU reports it */
static ry_status bad_index(const ry_dk_device *d, ry_kernel_ctx *c, const ry_tensor *ind, int M, int64_t K,
                           const int64_t *dims) {
    ry_tensor *h = ry_tensor_new(ind->dtype, ind->ndim, ind->shape);
    if (!h) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    if (d->download(h->data, ind, ry_tensor_nbytes(ind), c->err)) {
        ry_tensor_release(h);
        return RY_ERR;
    }
    for (int64_t y = 0; y < K; y++)
        for (int m = 0; m < M; m++) {
            int64_t j = (int64_t)ry_tensor_get(h, (int64_t)m * K + y);
            if (j < 0 || j >= dims[m]) {
                ry_tensor_release(h);
                return ry_error_at(c->err, c->span, "%s: index %lld out of range [0, %lld) in dim %d",
                                   c->op->name, (long long)j, (long long)dims[m], m);
            }
        }
    ry_tensor_release(h);
    return ry_error_at(c->err, c->span, "%s: index out of range", c->op->name);
}

/* The extents of the M indexed axes (a device buffer) and a zeroed flag. */
static ry_status prepare(const ry_dk_device *d, ry_kernel_ctx *c, int M, const int64_t *dims, ry_tensor **dev_dims,
                         ry_tensor **flag) {
    *dev_dims = ry_dk_scratch(d, c, RY_INT64, 1, (int64_t[]){M > 0 ? M : 1});
    *flag = *dev_dims ? ry_dk_scratch(d, c, RY_INT32, 1, (int64_t[]){1}) : NULL;
    int32_t zero = 0;
    if (!*flag || d->upload(*dev_dims, dims, sizeof(int64_t) * (size_t)M, c->err) ||
        d->upload(*flag, &zero, sizeof zero, c->err)) {
        ry_tensor_release(*dev_dims);
        ry_tensor_release(*flag);
        return RY_ERR;
    }
    return RY_OK;
}

/* runs src, then reads the flag (a wait for the queue) */
static ry_status run_checked(const ry_dk_device *d, ry_kernel_ctx *c, char *src, ry_dtype dt, size_t n, int nargs,
                             const ry_karg *a, ry_tensor *flag, const ry_tensor *ind, int M,
                             int64_t K, const int64_t *dims) {
    if (ry_dk_gen_run(d, c, src, dt, n, nargs, a)) return RY_ERR;
    int32_t bad = 0;
    if (d->download(&bad, flag, sizeof bad, c->err)) return RY_ERR;
    return bad ? bad_index(d, c, ind, M, K, dims) : RY_OK;
}

static ry_status index_type(const ry_dk_device *d, ry_kernel_ctx *c, const ry_tensor *ind, ry_gen_types *t) {
    t->X = ry_dtype_is_float(ind->dtype) ? NULL : ry_dk_type(d, ind->dtype);
    if (!t->X)
        return ry_error_at(c->err, c->span, "%s: %s indices have no kernel on %s", c->op->name,
                           ry_dtype_name(ind->dtype), d->dialect->name);
    return RY_OK;
}

/* data (B..., X...), indices (M, B..., Y...): out[b, y, :] = data[b, idx[:, b, y], :] */
DK_KERNEL(ry_dk_gather_nd) {
    if (nin != 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two inputs", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0], *ind = in[1];
    ry_tensor *y = out[0];
    ry_gather_dims gd = {0};
    if (ry_gather_nd_dims(c, x, ind, &gd)) return RY_ERR;
    int b = gd.b, M = gd.M;
    int64_t BY = gd.BY, Bn = gd.Bn, S = gd.S, batch = gd.batch;
    ry_gen_types t = {ry_dk_move_type(d, x->dtype), NULL, NULL};
    if (index_type(d, c, ind, &t)) return RY_ERR;
    if (BY == 0 || S == 0) return RY_OK;
    ry_tensor *dims, *flag;
    if (prepare(d, c, M, x->shape + b, &dims, &flag)) return RY_ERR;
    ry_karg a[] = {KA_L(BY * S), KA_T(y), KA_T(x), KA_T(ind), KA_T(flag), KA_T(dims), KA_L(M), KA_L(BY),
                  KA_L(S), KA_L(BY / Bn), KA_L(batch)};
    ry_status s = run_checked(d, c, ry_gen_nn(d->dialect, RY_GEN_GATHER_ND, 0, &t), x->dtype,
                              (size_t)(BY * S), NARGS(a), a, flag, ind, M, BY, x->shape + b);
    ry_tensor_release(dims);
    ry_tensor_release(flag);
    return s;
}

/* data (X...), indices (M, Y...), updates (Y..., S...): out = data, then
 * for each tuple y in order out[idx[:, y], :] (+)= updates[y, :] */
DK_KERNEL(ry_dk_scatter_nd) {
    if (nin != 3 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected three inputs", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0], *ind = in[1], *up = in[2];
    ry_tensor *y = out[0];
    bool add = strcmp(ry_attr_str(c->op, c->attrs, "mode"), "add") == 0;
    ry_scatter_dims sd;
    if (ry_scatter_nd_dims(c, x, ind, up, &sd)) return RY_ERR;
    int M = sd.M;
    int64_t K = sd.K, S = sd.S;
    /* float16 overwrites move bits. Its adds run on a widened copy
     * (float64 where the device has it, as a float16 GEMM's) and are
     * rounded to half once, at the end: the CPU rounds after each add, so
     * where an index repeats the two may differ in the last place. */
    if (add && x->dtype == RY_FLOAT16)
        return ry_dk_via(ry_dk_scatter_nd, d->fp64() ? RY_FLOAT64 : RY_FLOAT32, c, nin, in, nout, out);
    ry_gen_types t = {ry_dk_move_type(d, x->dtype), NULL, NULL};
    if (index_type(d, c, ind, &t)) return RY_ERR;
    if (y != x && d->copy(y, x, ry_tensor_nbytes(x), c->err)) return RY_ERR;
    if (K == 0 || S == 0) return RY_OK;
    ry_tensor *dims, *flag;
    if (prepare(d, c, M, x->shape, &dims, &flag)) return RY_ERR;
    ry_karg a[] = {KA_L(S), KA_T(y), KA_T(up), KA_T(ind), KA_T(flag), KA_T(dims), KA_L(M), KA_L(K),
                  KA_L(add ? (x->dtype == RY_BOOL ? 2 : 1) : 0)};
    ry_status s = run_checked(d, c, ry_gen_nn(d->dialect, RY_GEN_SCATTER_ND, 0, &t), x->dtype,
                              (size_t)S, NARGS(a), a, flag, ind, M, K, x->shape);
    ry_tensor_release(dims);
    ry_tensor_release(flag);
    return s;
}
