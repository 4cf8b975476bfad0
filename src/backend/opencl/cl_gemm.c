/*
 * cl_gemm.c (opencl): nn.dense, nn.matmul, nn.batch_matmul and
 * fused.matmulN through CLBlast's GEMM on the device's queue, the same
 * products as the CPU's (src/backend/cpu/gemm.c) in row-major terms.
 * fused.matmul writes the GEMM into a buffer of its own, then runs the
 * epilogue program over it (cl_elemwise.c); the CPU folds a leading add
 * into the GEMM, which sums in another order (within rounding).
 */
#include "backend/opencl/cl_elemwise.h"
#include "op/matmul_dims.h"
/* after cl_impl.h, which picks the OpenCL version */
#include <clblast_c.h>

static ry_status fail_blas(ry_kernel_ctx *c, CLBlastStatusCode st) {
    return ry_error_at(c->err, c->span, "opencl:%d (%s): %s: CLBlast GEMM failed (status %d)",
                       ry_cl.index, ry_cl.name, c->op->name, (int)st);
}

/* C[rows, M] = op(A) op(B), A at element aoff, ... (row-major) */
static ry_status gemm(ry_kernel_ctx *c, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const ry_tensor *a, int64_t aoff, int64_t lda, const ry_tensor *b, int64_t boff,
                      int64_t ldb, ry_tensor *out, int64_t coff, int64_t ldc) {
    if (m == 0 || n == 0) return RY_OK;
    CLBlastTranspose TA = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose TB = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t ao = (size_t)(ry_cl_off(a) + aoff), bo = (size_t)(ry_cl_off(b) + boff),
           co = (size_t)(ry_cl_off(out) + coff);
    cl_command_queue q = ry_cl.queue;
    CLBlastStatusCode st;
    if (k == 0) return RY_OK; /* the caller zero-filled */
    pthread_mutex_lock(&ry_cl.lock);
    cl_event *ev = ry_cl_event_slot();
    pthread_mutex_unlock(&ry_cl.lock);
    if (out->dtype == RY_FLOAT32)
        st = CLBlastSgemm(CLBlastLayoutRowMajor, TA, TB, (size_t)m, (size_t)n, (size_t)k, 1.0f,
                          ry_cl_mem(a), ao, (size_t)lda, ry_cl_mem(b), bo, (size_t)ldb, 0.0f,
                          ry_cl_mem(out), co, (size_t)ldc, &q, ev);
    else if (out->dtype == RY_FLOAT64)
        st = CLBlastDgemm(CLBlastLayoutRowMajor, TA, TB, (size_t)m, (size_t)n, (size_t)k, 1.0,
                          ry_cl_mem(a), ao, (size_t)lda, ry_cl_mem(b), bo, (size_t)ldb, 0.0,
                          ry_cl_mem(out), co, (size_t)ldc, &q, ev);
    else
        return ry_error_at(c->err, c->span, "%s: %s has no GEMM on opencl", c->op->name,
                           ry_dtype_name(out->dtype));
    if (st != CLBlastSuccess) return fail_blas(c, st);
    pthread_mutex_lock(&ry_cl.lock);
    ry_cl.count.launches++;
    pthread_mutex_unlock(&ry_cl.lock);
    return RY_OK;
}

static ry_status check(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    if (nin < 2 || nout != 1) return ry_error_at(c->err, c->span, "%s: expected two operands", c->op->name);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    if (in[0]->dtype != out[0]->dtype || in[1]->dtype != out[0]->dtype)
        return ry_error_at(c->err, c->span, "%s: operands of %s and %s on opencl (one float dtype expected)",
                           c->op->name, ry_dtype_name(in[0]->dtype), ry_dtype_name(in[1]->dtype));
    return RY_OK;
}

/* The CPU's matmul_core: a (R..., K) [ta: (R..., K, N)], b (K, M) [tb: (M, K)]. */
static ry_status matmul_core(ry_kernel_ctx *c, bool ta, bool tb, ry_tensor *const *in, ry_tensor *out) {
    const ry_tensor *a = in[0], *b = in[1];
    ry_matmul_dims md = ry_matmul_dims_of(a, b, ta, tb);
    int64_t rows = md.rows, M = md.M, K = md.K, batch = md.batch;
    if (K == 0) return ry_cl_zeros(c, 0, NULL, 1, &out);
    for (int64_t s = 0; s < batch; s++)
        if (gemm(c, ta, tb, rows, M, K, a, s * rows * K, ta ? rows : K, b, 0, tb ? K : M, out,
                 s * rows * M, M))
            return RY_ERR;
    return RY_OK;
}

CL_KERNEL(ry_cl_dense) {
    if (check(c, nin, in, nout, out)) return RY_ERR;
    return matmul_core(c, false, true, in, out[0]);
}

CL_KERNEL(ry_cl_matmul) {
    if (check(c, nin, in, nout, out)) return RY_ERR;
    return matmul_core(c, ry_attr_bool(c->op, c->attrs, "transpose_a"),
                       ry_attr_bool(c->op, c->attrs, "transpose_b"), in, out[0]);
}

CL_KERNEL(ry_cl_batch_matmul) {
    if (check(c, nin, in, nout, out)) return RY_ERR;
    const ry_tensor *x = in[0], *y = in[1];
    ry_tensor *z = out[0];
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    int64_t nb = z->shape[0], ni = z->shape[1], nj = z->shape[2];
    int64_t nk = ta ? x->shape[1] : x->shape[2];
    if (nk == 0) return ry_cl_zeros(c, 0, NULL, 1, out);
    int64_t xs = x->shape[0] == 1 ? 0 : ni * nk, ys = y->shape[0] == 1 ? 0 : nk * nj;
    for (int64_t s = 0; s < nb; s++)
        if (gemm(c, ta, tb, ni, nj, nk, x, s * xs, ta ? ni : nk, y, s * ys, tb ? nk : nj, z,
                 s * ni * nj, nj))
            return RY_ERR;
    return RY_OK;
}

/* fused.matmulN: acc = nn.matmul(x0, x1) in a buffer of its own, then the
 * epilogue over (acc, x2, ...). */
CL_KERNEL(ry_cl_fused_matmul) {
    if (nout != 1 || nin < 2 || nin > RY_FZ_MAX_IN + 1)
        return ry_error_at(c->err, c->span, "%s: expected 2 to %d inputs and one result",
                           c->op->name, RY_FZ_MAX_IN + 1);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
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
    ry_tensor *acc = ry_tensor_new_on(&ry_cl.heap.alloc, a->dtype, nd, shape);
    if (!acc) return ry_error_at(c->err, c->span, "%s: out of memory on opencl:%d", c->op->name, ry_cl.index);
    ry_kernel_ctx mc = *c;
    mc.op = ry_op_find("nn.matmul");
    ry_tensor *ops[2] = {in[0], in[1]};
    ry_status st = matmul_core(&mc, ta, tb, ops, acc);
    ein[0] = acc;
    if (st == RY_OK) st = ry_cl_run_prog(c, p, nin - 1, ein, 1, out);
    ry_tensor_release(acc);
    return st;
}
