/*
 * cl_norm.c (opencl): nn.batch_norm (training and inference),
 * nn.layer_norm, nn.instance_norm, nn.group_norm, nn.l2_normalize and
 * nn.lrn from kernel_gen_norm.c's kernels: a statistics kernel (one
 * work-item per group, into a scratch buffer of the heap), then one
 * work-item per element. Attributes and layouts as the CPU's norm.c
 * reads them; float32 and float64 (float16 widened to float32).
 */
#include <math.h>
#include <stdlib.h>

#include "backend/opencl/cl_nn.h"

/* the statistics' dtype: double where the device has it */
static ry_dtype stat_dtype(void) { return ry_cl.fp64 ? RY_FLOAT64 : RY_FLOAT32; }

static cl_arg stat_arg(double v) { return ry_cl.fp64 ? CLA_D(v) : CLA_F(v); }

static ry_status float_data(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out, int want_in) {
    if (nin != want_in) return ry_error_at(c->err, c->span, "%s: expected %d inputs", c->op->name, want_in);
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    ry_dtype dt = in[0]->dtype;
    if (dt != RY_FLOAT32 && dt != RY_FLOAT64)
        return ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name, ry_dtype_name(dt));
    return RY_OK;
}

static int axis_of(ry_kernel_ctx *c, int nd) {
    int64_t a = ry_attr_int(c->op, c->attrs, "axis");
    return (int)(a < 0 ? a + nd : a);
}

static void split(const ry_tensor *t, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= t->shape[i];
    *n = t->shape[axis];
    for (int i = axis + 1; i < t->ndim; i++) *inner *= t->shape[i];
}

static ry_gen_types types(ry_dtype dt) { return (ry_gen_types){ry_cl_type(dt), ry_cl_type(stat_dtype()), NULL}; }


/* st (2 per group) of x's groups (kernel_gen_nn.h's ry_gen_norm_stats) */
static ry_tensor *stats(ry_kernel_ctx *c, const ry_tensor *x, int64_t groups, int64_t GI,
                        int64_t GS0, int64_t GS1, int64_t M0, int64_t M1, int64_t M2, int64_t MS0,
                        int64_t MS1) {
    ry_tensor *st = ry_cl_scratch(c, stat_dtype(), 1, (int64_t[]){2 * groups});
    if (!st) return NULL;
    ry_gen_types t = types(x->dtype);
    cl_arg a[] = {CLA_L(groups), MEM(st), MEM(x), CLA_L(GI), CLA_L(GS0), CLA_L(GS1),
                  CLA_L(M0), CLA_L(M1), CLA_L(M2), CLA_L(MS0), CLA_L(MS1)};
    if (ry_cl_gen_run(c, ry_gen_norm_stats(&ry_cl_dialect, &t), x->dtype, (size_t)groups, NARGS(a), a)) {
        ry_tensor_release(st);
        return NULL;
    }
    return st;
}

/* in = (x, gamma, beta, moving_mean, moving_var), out = (y, new_mean, new_var) */
static CL_KERNEL(batch_norm_wide) {
    if (float_data(c, nin, in, nout, out, 5)) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t O, C, I;
    split(x, axis_of(c, x->ndim), &O, &C, &I);
    int64_t n = O * I;
    double eps = ry_attr_float(c->op, c->attrs, "epsilon");
    bool center = ry_attr_bool(c->op, c->attrs, "center"), scale = ry_attr_bool(c->op, c->attrs, "scale");
    if (c->training && n < 2 && C > 0)
        return ry_error_at(c->err, c->span,
                           "%s in training mode needs more than one value per channel, got %lld",
                           c->op->name, (long long)n);
    if (C == 0) return RY_OK;
    ry_tensor *st = c->training ? stats(c, x, C, 1, I, 0, O, I, 1, C * I, 1) : NULL;
    if (c->training && !st) return RY_ERR;
    ry_tensor *coef = ry_cl_scratch(c, stat_dtype(), 1, (int64_t[]){2 * C});
    ry_status s = coef ? RY_OK : RY_ERR;
    ry_gen_types t = types(x->dtype);
    if (s == RY_OK) {
        /* without statistics (inference) the kernel reads none: coef stands in */
        const ry_tensor *sv = st ? st : coef;
        cl_arg a[] = {CLA_L(C), MEM(out[1]), MEM(out[2]), MEM(coef), MEM(sv), MEM(in[3]), MEM(in[4]),
                      MEM(in[1]), CLA_L(n), stat_arg(eps), CLA_L(c->training), CLA_L(scale)};
        s = ry_cl_gen_run(c, ry_gen_norm_apply(&ry_cl_dialect, RY_GEN_BN_FINISH, &t), x->dtype,
                          (size_t)C, NARGS(a), a);
    }
    if (s == RY_OK) {
        cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(x), MEM(coef), MEM(in[2]), CLA_L(C), CLA_L(I),
                      CLA_L(center)};
        s = ry_cl_gen_run(c, ry_gen_norm_apply(&ry_cl_dialect, RY_GEN_BN_APPLY, &t), x->dtype,
                          (size_t)x->size, NARGS(a), a);
    }
    ry_tensor_release(st);
    ry_tensor_release(coef);
    return s;
}

/* in = (x, gamma, beta): (O, N, I) around axis, each (o, i) over its N */
static CL_KERNEL(layer_norm_wide) {
    if (float_data(c, nin, in, nout, out, 3)) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t O, N, I;
    split(x, axis_of(c, x->ndim), &O, &N, &I);
    if (x->size == 0) return RY_OK;
    ry_tensor *st = stats(c, x, O * I, I, N * I, 1, N, 1, 1, I, 0);
    if (!st) return RY_ERR;
    ry_gen_types t = types(x->dtype);
    cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(x), MEM(st), MEM(in[1]), MEM(in[2]), CLA_L(N), CLA_L(I),
                  stat_arg(ry_attr_float(c->op, c->attrs, "epsilon")),
                  CLA_L(ry_attr_bool(c->op, c->attrs, "scale")), CLA_L(ry_attr_bool(c->op, c->attrs, "center"))};
    ry_status s = ry_cl_gen_run(c, ry_gen_norm_apply(&ry_cl_dialect, RY_GEN_LN_APPLY, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    ry_tensor_release(st);
    return s;
}

/* (N, A, C, I) around axis, C in G groups of cg channels */
static ry_status group_norm(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out, bool instance) {
    if (float_data(c, nin, in, nout, out, 3)) return RY_ERR;
    const ry_tensor *x = in[0];
    int axis = axis_of(c, x->ndim);
    int64_t N = x->shape[0], A = 1, C = x->shape[axis], I = 1;
    for (int i = 1; i < axis; i++) A *= x->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) I *= x->shape[i];
    int64_t G = instance ? C : ry_attr_int(c->op, c->attrs, "num_groups");
    if (x->size == 0) return RY_OK;
    int64_t cg = C / G;
    ry_tensor *st = stats(c, x, N * G, G, A * C * I, cg * I, A, cg, I, C * I, I);
    if (!st) return RY_ERR;
    ry_gen_types t = types(x->dtype);
    cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(x), MEM(st), MEM(in[1]), MEM(in[2]), CLA_L(A), CLA_L(C),
                  CLA_L(cg), CLA_L(I), stat_arg(ry_attr_float(c->op, c->attrs, "epsilon")),
                  CLA_L(ry_attr_bool(c->op, c->attrs, "scale")), CLA_L(ry_attr_bool(c->op, c->attrs, "center"))};
    ry_status s = ry_cl_gen_run(c, ry_gen_norm_apply(&ry_cl_dialect, RY_GEN_GN_APPLY, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    ry_tensor_release(st);
    return s;
}

static CL_KERNEL(instance_norm_wide) { return group_norm(c, nin, in, nout, out, true); }
static CL_KERNEL(group_norm_wide) { return group_norm(c, nin, in, nout, out, false); }

/* x / sqrt(max(s, eps)), s the sum of squares over the axes: the
 * generator's reduction (kept elements in C order), then the apply */
static CL_KERNEL(l2_normalize_wide) {
    if (float_data(c, nin, in, nout, out, 1)) return RY_ERR;
    const ry_tensor *x = in[0];
    int nd = x->ndim;
    int64_t ax[RY_MAX_RANK];
    int nax = ry_attr_ints(c->op, c->attrs, "axis", ax, RY_MAX_RANK);
    bool red[RY_MAX_RANK] = {0};
    for (int i = 0; i < nax; i++) red[ax[i] < 0 ? ax[i] + nd : ax[i]] = true;
    int64_t kstride[RY_MAX_RANK], kshape[RY_MAX_RANK], nkept = 1;
    int nk = 0;
    for (int a = nd - 1; a >= 0; a--) {
        kstride[a] = red[a] ? 0 : nkept;
        if (!red[a]) nkept *= x->shape[a];
    }
    for (int a = 0; a < nd; a++)
        if (!red[a]) kshape[nk++] = x->shape[a];
    if (x->size == 0) return RY_OK;
    ry_tensor *sum = ry_cl_scratch(c, stat_dtype(), nk, kshape);
    if (!sum) return RY_ERR;
    /* the squares' sums over the normalized axes (in double where the
     * device has it), then the scaling */
    ry_status s = ry_cl_reduce_into(c, RY_GEN_SUMSQ, x, sum, red, false);
    cl_arg a[6 + 4 * RY_MAX_RANK + 2 * RY_MAX_RANK];
    int n = 0;
    if (s == RY_OK) {
        n = 0;
        a[n++] = CLA_L(x->size);
        a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(out[0]), 0, 0};
        a[n++] = CLA_L(ry_cl_off(out[0]));
        a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(x), 0, 0};
        a[n++] = CLA_L(ry_cl_off(x));
        a[n++] = (cl_arg){CLA_MEM, ry_cl_mem(sum), 0, 0};
        a[n++] = CLA_L(ry_cl_off(sum));
        a[n++] = stat_arg(ry_attr_float(c->op, c->attrs, "eps"));
        for (int d = 0; d < nd; d++) a[n++] = CLA_L(x->shape[d]), a[n++] = CLA_L(kstride[d]);
        ry_gen_types t = types(x->dtype);
        s = ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_L2_APPLY, nd, &t), x->dtype,
                          (size_t)x->size, n, a);
    }
    ry_tensor_release(sum);
    return s;
}

static CL_KERNEL(lrn_wide) {
    if (float_data(c, nin, in, nout, out, 1)) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t O, C, I;
    split(x, axis_of(c, x->ndim), &O, &C, &I);
    ry_gen_types t = types(x->dtype);
    cl_arg a[] = {CLA_L(x->size), MEM(out[0]), MEM(x), CLA_L(C), CLA_L(I),
                  CLA_L(ry_attr_int(c->op, c->attrs, "size")), stat_arg(ry_attr_float(c->op, c->attrs, "bias")),
                  stat_arg(ry_attr_float(c->op, c->attrs, "alpha")), stat_arg(ry_attr_float(c->op, c->attrs, "beta"))};
    return ry_cl_gen_run(c, ry_gen_nn(&ry_cl_dialect, RY_GEN_LRN, 0, &t), x->dtype, (size_t)x->size, NARGS(a), a);
}

/* float16: widened to float32 around the kernels above (cl_widen.c) */
CL_WIDENING(ry_cl_batch_norm, batch_norm_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_layer_norm, layer_norm_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_l2_normalize, l2_normalize_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_lrn, lrn_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_instance_norm, instance_norm_wide, RY_FLOAT32)
CL_WIDENING(ry_cl_group_norm, group_norm_wide, RY_FLOAT32)
