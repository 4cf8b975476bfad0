/*
 * dk_widen.c (device): float16 operands of the kernels that compute in a
 * wider type, as the CPU does (src/backend/cpu/nn.c's ry_cpu_nn_via_f32,
 * gemm.c's float64 for float16 GEMMs): each float16 input cast into a
 * scratch tensor of the wide dtype on the device, the kernel run on
 * those, each float16 result cast back (rounding to nearest even, as the
 * CPU's narrowing). The casts are the generator's (kernel_gen.h).
 */
#include "backend/device/dk_ops.h"

#define MAX_IO 8

static ry_status cast_into(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *dst, ry_tensor *src) {
    ry_fz_prog p;
    ry_dtype dt = src->dtype;
    ry_gen_single(&p, RY_FZ_CAST, 1, &dt, dst->dtype, NULL);
    return ry_dk_run_prog(d, c, &p, 1, &src, 1, &dst);
}

bool ry_dk_any_f16(int n, ry_tensor *const *t) {
    for (int i = 0; i < n; i++)
        if (t[i]->dtype == RY_FLOAT16) return true;
    return false;
}

ry_status ry_dk_via(ry_kernel_fn fn, ry_dtype wide, ry_kernel_ctx *c, int nin, ry_tensor *const *in,
                    int nout, ry_tensor *const *out) {
    if (nin > MAX_IO || nout > MAX_IO)
        return ry_error_at(c->err, c->span, "%s: too many float16 operands", c->op->name);
    DK_DEVICE(nin, in, nout, out);
    ry_tensor *win[MAX_IO] = {0}, *wout[MAX_IO] = {0};
    ry_status st = RY_OK;
    for (int i = 0; i < nin && st == RY_OK; i++) {
        if (in[i]->dtype != RY_FLOAT16) {
            win[i] = ry_tensor_retain(in[i]);
            continue;
        }
        win[i] = ry_dk_scratch(d, c, wide, in[i]->ndim, in[i]->shape);
        st = win[i] ? cast_into(d, c, win[i], in[i]) : RY_ERR;
    }
    for (int i = 0; i < nout && st == RY_OK; i++) {
        wout[i] = out[i]->dtype == RY_FLOAT16 ? ry_dk_scratch(d, c, wide, out[i]->ndim, out[i]->shape)
                                              : ry_tensor_retain(out[i]);
        if (!wout[i]) st = RY_ERR;
    }
    if (st == RY_OK) st = fn(c, nin, win, nout, wout);
    for (int i = 0; i < nout && st == RY_OK; i++)
        if (out[i]->dtype == RY_FLOAT16) st = cast_into(d, c, out[i], wout[i]);
    for (int i = 0; i < MAX_IO; i++) {
        ry_tensor_release(win[i]);
        ry_tensor_release(wout[i]);
    }
    return st;
}

/* float16 GEMMs in float64 where the device has it (the CPU's), else in
 * float32 */
static ry_dtype gemm_wide(ry_kernel_ctx *c, int nin, ry_tensor *const *in) {
    const ry_dk_device *d = nin > 0 ? ry_dk_for(in[0]->device.kind) : NULL;
    return d && d->fp64() ? RY_FLOAT64 : RY_FLOAT32;
}
DK_WIDENING(ry_dk_dense_f16, ry_dk_dense, gemm_wide(c, nin, in))
DK_WIDENING(ry_dk_matmul_f16, ry_dk_matmul, gemm_wide(c, nin, in))
DK_WIDENING(ry_dk_batch_matmul_f16, ry_dk_batch_matmul, gemm_wide(c, nin, in))
