/*
 * cl_nn.c (opencl): the small nn kernels and arrays: nn.pad and
 * nn.mirror_pad, nn.prelu, nn.cross_entropy(_with_logits), nn.dropout,
 * one_hot and stack, as the CPU's kernels define them (src/backend/cpu/
 * nn.c, softmax.c, transform.c), from kernel_gen_norm.c's kernels.
 */
#include <math.h>
#include <string.h>

#include "backend/opencl/cl_nn.h"

static ry_status need(ry_kernel_ctx *c, int nin, int want_lo, int want_hi, ry_tensor *const *in,
                      int nout, ry_tensor *const *out) {
    if (nin < want_lo || nin > want_hi)
        return ry_error_at(c->err, c->span, "%s: expected %d inputs", c->op->name, want_lo);
    return ry_cl_check_args(c, nin, in, nout, out);
}

static ry_status float_only(ry_kernel_ctx *c, ry_dtype dt) {
    if (dt == RY_FLOAT32 || dt == RY_FLOAT64) return RY_OK;
    return ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name, ry_dtype_name(dt));
}

static int axis_of(ry_kernel_ctx *c, int nd) {
    int64_t a = ry_attr_int(c->op, c->attrs, "axis");
    return (int)(a < 0 ? a + nd : a);
}

static int64_t prod(const int64_t *s, int lo, int hi) {
    int64_t p = 1;
    for (int i = lo; i < hi; i++) p *= s[i];
    return p;
}

/* nn.pad (x, pad_value) and nn.mirror_pad (x): every dtype */
CL_KERNEL(ry_cl_pad) {
    if (need(c, nin, 1, 2, in, nout, out)) return RY_ERR;
    const ry_tensor *x = in[0], *pv = nin == 2 ? in[1] : in[0];
    ry_tensor *y = out[0];
    int nd = x->ndim;
    if (y->size == 0) return RY_OK;
    const char *mname = ry_attr_str(c->op, c->attrs, nin == 1 ? "mode" : "pad_mode");
    int mode = strcmp(mname, "edge") == 0                                       ? 1
               : strcmp(mname, "reflect") == 0 || strcmp(mname, "REFLECT") == 0 ? 2
               : strcmp(mname, "SYMMETRIC") == 0                                ? 3
                                                                                : 0;
    const ry_attr_value *pw = nd ? ry_attr_get(c->op, c->attrs, "pad_width") : NULL;
    cl_arg a[8 + 3 * RY_MAX_RANK];
    int n = 0;
    a[n++] = CLA_L(y->size);
    a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(y), 0, 0};
    a[n++] = CLA_L(ry_cl_off(y));
    a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(x), 0, 0};
    a[n++] = CLA_L(ry_cl_off(x));
    a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(pv), 0, 0};
    a[n++] = CLA_L(ry_cl_off(pv));
    a[n++] = CLA_L(mode);
    for (int d = 0; d < nd; d++) {
        a[n++] = CLA_L(y->shape[d]);
        a[n++] = CLA_L(x->shape[d]);
        a[n++] = CLA_L(pw->list.items[d].list.items[0].i);
    }
    /* float16 moves its bits: a pad value of another dtype would need a
     * conversion to half */
    if (x->dtype == RY_FLOAT16 && pv->dtype != RY_FLOAT16)
        return ry_error_at(c->err, c->span, "%s: a %s pad value for float16 data has no kernel on opencl",
                           c->op->name, ry_dtype_name(pv->dtype));
    ry_gen_types t = {ry_cl_move_type(x->dtype), ry_cl_move_type(pv->dtype), NULL};
    return ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_PAD, nd, &t), x->dtype, (size_t)y->size, n, a);
}

static CL_KERNEL(prelu_wide) {
    if (need(c, nin, 2, 2, in, nout, out) || float_only(c, in[0]->dtype)) return RY_ERR;
    const ry_tensor *x = in[0];
    int axis = axis_of(c, x->ndim);
    ry_gen_types t = {ry_cl_type(x->dtype), NULL, NULL};
    cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(x), MEM(in[1]), CLA_L(x->shape[axis]),
                  CLA_L(prod(x->shape, axis + 1, x->ndim))};
    return ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_PRELU, 0, &t), x->dtype, (size_t)x->size,
                         NARGS(a), a);
}

static ry_status xent(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out,
                      bool logits) {
    if (need(c, nin, 2, 2, in, nout, out) || float_only(c, in[0]->dtype)) return RY_ERR;
    const ry_tensor *x = in[0];
    ry_gen_types t = {ry_cl_type(x->dtype), ry_cl_acc_type(x->dtype), NULL};
    cl_arg a[] = {CLA_L(1), MEM(out[0]), MEM(x), MEM(in[1]), CLA_L(x->size), CLA_L(x->shape[0])};
    return ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, logits ? RY_GEN_XENT_LOGITS : RY_GEN_XENT, 0, &t),
                         x->dtype, 1, NARGS(a), a);
}

static CL_KERNEL(cross_entropy_wide) { return xent(c, nin, in, nout, out, false); }
static CL_KERNEL(cross_entropy_with_logits_wide) { return xent(c, nin, in, nout, out, true); }

/* nn.dropout -> (out, mask): the CPU's splitmix64 stream (nn.c), draw i
 * = the mix of state + (i + 1) * gamma, computed per element on the
 * device; then the host's state moves past the n draws, as the CPU's
 * does. Kept when u = (draw >> 11) / 2^53 >= rate, that is when
 * draw >> 11 >= ceil(rate * 2^53) (exact in a double). */
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull
static CL_KERNEL(dropout_wide) {
    if (need(c, nin, 1, 1, in, nout, out) || float_only(c, in[0]->dtype)) return RY_ERR;
    if (nout != 2 || out[1]->dtype != in[0]->dtype)
        return ry_error_at(c->err, c->span, "%s: expected (out, mask) of the data's dtype", c->op->name);
    double rate = ry_attr_float(c->op, c->attrs, "rate");
    double scale = rate < 1 ? 1.0 / (1.0 - rate) : 0;
    if (c->training && !c->rng)
        return ry_error_at(c->err, c->span, "%s in training mode needs a random state", c->op->name);
    const ry_tensor *x = in[0];
    double th = ceil(rate * 9007199254740992.0);
    uint64_t threshold = th <= 0 ? 0 : th >= 9007199254740992.0 ? (uint64_t)1 << 53 : (uint64_t)th;
    uint64_t state = c->training ? *c->rng : 0;
    ry_gen_types t = {ry_cl_type(x->dtype), NULL, NULL};
    cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(out[1]), MEM(x), CLA_L((int64_t)state),
                  CLA_L((int64_t)threshold), x->dtype == RY_FLOAT32 ? CLA_F(scale) : CLA_D(scale),
                  CLA_L(c->training)};
    ry_status s = ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_DROPOUT, 0, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    if (s == RY_OK && c->training) *c->rng += (uint64_t)x->size * SPLITMIX_GAMMA;
    return s;
}

/* one_hot(indices, on, off): on where the index along axis lands */
CL_KERNEL(ry_cl_one_hot) {
    if (need(c, nin, 3, 3, in, nout, out)) return RY_ERR;
    ry_tensor *y = out[0];
    if (in[1]->dtype != in[2]->dtype)
        return ry_error_at(c->err, c->span, "%s: on and off values of %s and %s on opencl (one dtype expected)",
                           c->op->name, ry_dtype_name(in[1]->dtype), ry_dtype_name(in[2]->dtype));
    int axis = axis_of(c, y->ndim);
    int64_t depth = y->shape[axis], Q = prod(y->shape, axis + 1, y->ndim);
    if (y->dtype == RY_FLOAT16 && in[1]->dtype != RY_FLOAT16)
        return ry_error_at(c->err, c->span, "%s: %s values for a float16 result have no kernel on opencl",
                           c->op->name, ry_dtype_name(in[1]->dtype));
    ry_gen_types t = {ry_cl_move_type(y->dtype), ry_cl_move_type(in[1]->dtype), ry_cl_type(in[0]->dtype)};
    if (!t.A || !t.X)
        return ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name,
                           ry_dtype_name(t.A ? in[0]->dtype : in[1]->dtype));
    cl_arg a[] = {CLA_L(y->size), MEM(y), MEM(in[0]), MEM(in[1]), MEM(in[2]), CLA_L(depth), CLA_L(Q)};
    return ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_ONE_HOT, 0, &t), y->dtype, (size_t)y->size,
                         NARGS(a), a);
}

/* stack: concatenate of the inputs viewed with an extent of 1 at axis */
#define MAX_STACK 256
CL_KERNEL(ry_cl_stack) {
    if (nin < 1 || nin > MAX_STACK || nout != 1)
        return ry_error_at(c->err, c->span, "%s: expected 1 to %d inputs", c->op->name, MAX_STACK);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    int axis = axis_of(c, out[0]->ndim);
    ry_tensor *views[MAX_STACK];
    ry_status s = RY_OK;
    int made = 0;
    for (; made < nin; made++) {
        int64_t shape[RY_MAX_RANK];
        const ry_tensor *t = in[made];
        for (int d = 0, k = 0; d < out[0]->ndim; d++) shape[d] = d == axis ? 1 : t->shape[k++];
        views[made] = ry_tensor_view(in[made], 0, t->dtype, out[0]->ndim, shape);
        if (!views[made]) {
            s = ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
            break;
        }
    }
    if (s == RY_OK) s = ry_cl_concatenate(c, nin, views, nout, out);
    for (int i = 0; i < made; i++) ry_tensor_release(views[i]);
    return s;
}

/* float16: widened to float32 around the kernels above (cl_widen.c) */
CL_WIDENING(ry_cl_prelu, prelu_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_dropout, dropout_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_cross_entropy, cross_entropy_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_cross_entropy_with_logits, cross_entropy_with_logits_wide, RY_FLOAT32)
