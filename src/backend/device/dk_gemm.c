/*
 * dk_gemm.c (device): nn.dense, nn.matmul, nn.batch_matmul and
 * fused.matmulN through the device's BLAS (CLBlast, cuBLAS) on its
 * queue, the same products as the CPU's (src/backend/cpu/gemm.c) in
 * row-major terms. fused.matmul writes the GEMM into a buffer of its own,
 * then runs the epilogue program over it (dk_elemwise.c); the CPU folds a
 * leading add into the GEMM, which sums in another order (within
 * rounding).
 */
#include "backend/device/dk_ops.h"
#include "op/matmul_dims.h"

/* C[m, n] = op(A) op(B), A at element aoff, ... (row-major), through the
 * device's BLAS */
static ry_status gemm(const ry_dk_device *d, ry_kernel_ctx *c, bool ta, bool tb, int64_t m,
                      int64_t n, int64_t k, const ry_tensor *a, int64_t aoff, int64_t lda,
                      const ry_tensor *b, int64_t boff, int64_t ldb, ry_tensor *out, int64_t coff,
                      int64_t ldc) {
    if (m == 0 || n == 0 || k == 0) return RY_OK; /* k == 0: the caller zero-filled */
    if (out->dtype != RY_FLOAT32 && out->dtype != RY_FLOAT64)
        return ry_error_at(c->err, c->span, "%s: %s has no GEMM on %s", c->op->name,
                           ry_dtype_name(out->dtype), d->dialect->name);
    ry_dk_gemm g = {ta, tb, m, n, k, a, b, out, aoff, lda, boff, ldb, coff, ldc, false};
    return d->gemm(c, &g);
}

/* the device of a GEMM's call, its operands of one dtype; NULL with the error */
static const ry_dk_device *check(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                 ry_tensor *const *out) {
    if (nin < 2 || nout != 1) {
        ry_error_at(c->err, c->span, "%s: expected two operands", c->op->name);
        return NULL;
    }
    const ry_dk_device *d = ry_dk_of(c, nin, in, nout, out);
    if (d && (in[0]->dtype != out[0]->dtype || in[1]->dtype != out[0]->dtype)) {
        ry_error_at(c->err, c->span, "%s: operands of %s and %s on %s (one float dtype expected)",
                    c->op->name, ry_dtype_name(in[0]->dtype), ry_dtype_name(in[1]->dtype),
                    d->dialect->name);
        return NULL;
    }
    return d;
}

/* The CPU's matmul_core: a (R..., K) [ta: (R..., K, N)], b (K, M) [tb: (M, K)]. */
static ry_status matmul_core(const ry_dk_device *d, ry_kernel_ctx *c, bool ta, bool tb, ry_tensor *const *in, ry_tensor *out) {
    const ry_tensor *a = in[0], *b = in[1];
    ry_matmul_dims md = ry_matmul_dims_of(a, b, ta, tb);
    int64_t rows = md.rows, M = md.M, K = md.K, batch = md.batch;
    if (K == 0) return ry_dk_zeros(c, 0, NULL, 1, &out);
    for (int64_t s = 0; s < batch; s++)
        if (gemm(d, c, ta, tb, rows, M, K, a, s * rows * K, ta ? rows : K, b, 0, tb ? K : M, out,
                 s * rows * M, M))
            return RY_ERR;
    return RY_OK;
}

DK_KERNEL(ry_dk_dense) {
    const ry_dk_device *d = check(c, nin, in, nout, out);
    if (!d) return RY_ERR;
    return matmul_core(d, c, false, true, in, out[0]);
}

DK_KERNEL(ry_dk_matmul) {
    const ry_dk_device *d = check(c, nin, in, nout, out);
    if (!d) return RY_ERR;
    return matmul_core(d, c, ry_attr_bool(c->op, c->attrs, "transpose_a"),
                       ry_attr_bool(c->op, c->attrs, "transpose_b"), in, out[0]);
}

DK_KERNEL(ry_dk_batch_matmul) {
    const ry_dk_device *d = check(c, nin, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0], *y = in[1];
    ry_tensor *z = out[0];
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    int64_t nb = z->shape[0], ni = z->shape[1], nj = z->shape[2];
    int64_t nk = ta ? x->shape[1] : x->shape[2];
    if (nk == 0) return ry_dk_zeros(c, 0, NULL, 1, out);
    int64_t xs = x->shape[0] == 1 ? 0 : ni * nk, ys = y->shape[0] == 1 ? 0 : nk * nj;
    for (int64_t s = 0; s < nb; s++)
        if (gemm(d, c, ta, tb, ni, nj, nk, x, s * xs, ta ? ni : nk, y, s * ys, tb ? nk : nj, z,
                 s * ni * nj, nj))
            return RY_ERR;
    return RY_OK;
}

/* fused.matmulN: acc = nn.matmul(x0, x1) in a buffer of its own, then the
 * epilogue over (acc, x2, ...). */
DK_KERNEL(ry_dk_fused_matmul) {
    if (nout != 1 || nin < 2 || nin > RY_FZ_MAX_IN + 1)
        return ry_error_at(c->err, c->span, "%s: expected 2 to %d inputs and one result",
                           c->op->name, RY_FZ_MAX_IN + 1);
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *a = in[0], *b = in[1];
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    if (a->ndim < (ta ? 2 : 1) || b->ndim != 2 || a->dtype != b->dtype)
        return ry_error_at(c->err, c->span, "%s: operands do not fit a GEMM", c->op->name);
    int64_t shape[RY_MAX_RANK];
    int nd = a->ndim;
    for (int i = 0; i < nd - 1; i++) shape[i] = a->shape[i];
    if (ta) shape[nd - 2] = a->shape[nd - 1];
    shape[nd - 1] = tb ? b->shape[0] : b->shape[1];
    ry_dtype dts[RY_FZ_MAX_IN];
    ry_tensor *ein[RY_FZ_MAX_IN];
    dts[0] = a->dtype;
    for (int k = 2; k < nin; k++) ein[k - 1] = in[k], dts[k - 1] = in[k]->dtype;
    const ry_fz_prog *p = ry_fz_get(ry_attr_str(c->op, c->attrs, "code"), true, nin - 1, dts, c->span, c->err);
    if (!p) return RY_ERR;
    ry_tensor *acc = ry_dk_scratch(d, c, a->dtype, nd, shape);
    if (!acc) return RY_ERR;
    ry_kernel_ctx mc = *c;
    mc.op = ry_op_find("nn.matmul");
    ry_tensor *ops[2] = {in[0], in[1]};
    ry_status st = matmul_core(d, &mc, ta, tb, ops, acc);
    ein[0] = acc;
    if (st == RY_OK) st = ry_dk_run_prog(d, c, p, nin - 1, ein, 1, out);
    ry_tensor_release(acc);
    return st;
}
