/*
 * dk_norm.c (device): nn.batch_norm (training and inference),
 * nn.layer_norm, nn.instance_norm, nn.group_norm, nn.l2_normalize and
 * nn.lrn from kernel_gen_norm.c's kernels: a statistics kernel (one
 * work-item per group, into a scratch buffer of the heap), then one
 * work-item per element. Attributes and layouts as the CPU's norm.c
 * reads them; float32 and float64 (float16 widened to float32).
 */
#include <math.h>
#include <stdlib.h>

#include "backend/device/dk_ops.h"

/* the statistics' dtype: double where the device has it */
static ry_dtype stat_dtype(const ry_dk_device *d) { return d->fp64() ? RY_FLOAT64 : RY_FLOAT32; }

static ry_karg stat_arg(const ry_dk_device *d, double v) { return d->fp64() ? KA_D(v) : KA_F(v); }

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

static ry_gen_types types(const ry_dk_device *d, ry_dtype dt) { return (ry_gen_types){ry_dk_type(d, dt), ry_dk_type(d, stat_dtype(d)), NULL}; }


/* st (2 per group) of x's groups (kernel_gen_nn.h's ry_gen_norm_stats) */
static ry_tensor *stats(const ry_dk_device *d, ry_kernel_ctx *c, const ry_tensor *x, int64_t groups, int64_t GI,
                        int64_t GS0, int64_t GS1, int64_t M0, int64_t M1, int64_t M2, int64_t MS0,
                        int64_t MS1) {
    ry_tensor *st = ry_dk_scratch(d, c, stat_dtype(d), 1, (int64_t[]){2 * groups});
    if (!st) return NULL;
    ry_gen_types t = types(d, x->dtype);
    ry_karg a[] = {KA_L(groups), KA_T(st), KA_T(x), KA_L(GI), KA_L(GS0), KA_L(GS1),
                  KA_L(M0), KA_L(M1), KA_L(M2), KA_L(MS0), KA_L(MS1)};
    if (ry_dk_gen_run(d, c, ry_gen_norm_stats(d->dialect, &t), x->dtype, (size_t)groups, NARGS(a), a)) {
        ry_tensor_release(st);
        return NULL;
    }
    return st;
}

/* in = (x, gamma, beta, moving_mean, moving_var), out = (y, new_mean, new_var) */
static DK_KERNEL(batch_norm_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 5, in, nout, out);
    if (!d) return RY_ERR;
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
    ry_tensor *st = c->training ? stats(d, c, x, C, 1, I, 0, O, I, 1, C * I, 1) : NULL;
    if (c->training && !st) return RY_ERR;
    ry_tensor *coef = ry_dk_scratch(d, c, stat_dtype(d), 1, (int64_t[]){2 * C});
    ry_status s = coef ? RY_OK : RY_ERR;
    ry_gen_types t = types(d, x->dtype);
    if (s == RY_OK) {
        /* without statistics (inference) the kernel reads none: coef stands in */
        const ry_tensor *sv = st ? st : coef;
        ry_karg a[] = {KA_L(C), KA_T(out[1]), KA_T(out[2]), KA_T(coef), KA_T(sv), KA_T(in[3]), KA_T(in[4]),
                      KA_T(in[1]), KA_L(n), stat_arg(d, eps), KA_L(c->training), KA_L(scale)};
        s = ry_dk_gen_run(d, c, ry_gen_norm_apply(d->dialect, RY_GEN_BN_FINISH, &t), x->dtype,
                          (size_t)C, NARGS(a), a);
    }
    if (s == RY_OK) {
        ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(x), KA_T(coef), KA_T(in[2]), KA_L(C), KA_L(I),
                      KA_L(center)};
        s = ry_dk_gen_run(d, c, ry_gen_norm_apply(d->dialect, RY_GEN_BN_APPLY, &t), x->dtype,
                          (size_t)x->size, NARGS(a), a);
    }
    ry_tensor_release(st);
    ry_tensor_release(coef);
    return s;
}

/* in = (x, gamma, beta): (O, N, I) around axis, each (o, i) over its N */
static DK_KERNEL(layer_norm_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 3, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t O, N, I;
    split(x, axis_of(c, x->ndim), &O, &N, &I);
    if (x->size == 0) return RY_OK;
    ry_tensor *st = stats(d, c, x, O * I, I, N * I, 1, N, 1, 1, I, 0);
    if (!st) return RY_ERR;
    ry_gen_types t = types(d, x->dtype);
    ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(x), KA_T(st), KA_T(in[1]), KA_T(in[2]), KA_L(N), KA_L(I),
                  stat_arg(d, ry_attr_float(c->op, c->attrs, "epsilon")),
                  KA_L(ry_attr_bool(c->op, c->attrs, "scale")), KA_L(ry_attr_bool(c->op, c->attrs, "center"))};
    ry_status s = ry_dk_gen_run(d, c, ry_gen_norm_apply(d->dialect, RY_GEN_LN_APPLY, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    ry_tensor_release(st);
    return s;
}

/* (N, A, C, I) around axis, C in G groups of cg channels */
static ry_status group_norm(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                            ry_tensor *const *out, bool instance) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 3, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0];
    int axis = axis_of(c, x->ndim);
    int64_t N = x->shape[0], A = 1, C = x->shape[axis], I = 1;
    for (int i = 1; i < axis; i++) A *= x->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) I *= x->shape[i];
    int64_t G = instance ? C : ry_attr_int(c->op, c->attrs, "num_groups");
    if (x->size == 0) return RY_OK;
    int64_t cg = C / G;
    ry_tensor *st = stats(d, c, x, N * G, G, A * C * I, cg * I, A, cg, I, C * I, I);
    if (!st) return RY_ERR;
    ry_gen_types t = types(d, x->dtype);
    ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(x), KA_T(st), KA_T(in[1]), KA_T(in[2]), KA_L(A), KA_L(C),
                  KA_L(cg), KA_L(I), stat_arg(d, ry_attr_float(c->op, c->attrs, "epsilon")),
                  KA_L(ry_attr_bool(c->op, c->attrs, "scale")), KA_L(ry_attr_bool(c->op, c->attrs, "center"))};
    ry_status s = ry_dk_gen_run(d, c, ry_gen_norm_apply(d->dialect, RY_GEN_GN_APPLY, &t), x->dtype,
                                (size_t)x->size, NARGS(a), a);
    ry_tensor_release(st);
    return s;
}

static DK_KERNEL(instance_norm_wide) { return group_norm(c, nin, in, nout, out, true); }
static DK_KERNEL(group_norm_wide) { return group_norm(c, nin, in, nout, out, false); }

/* x / sqrt(max(s, eps)), s the sum of squares over the axes: the
 * generator's reduction (kept elements in C order), then the apply */
static DK_KERNEL(l2_normalize_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 1, in, nout, out);
    if (!d) return RY_ERR;
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
    ry_tensor *sum = ry_dk_scratch(d, c, stat_dtype(d), nk, kshape);
    if (!sum) return RY_ERR;
    /* the squares' sums over the normalized axes (in double where the
     * device has it), then the scaling */
    ry_status s = ry_dk_reduce_into(d, c, RY_GEN_SUMSQ, x, sum, red, false);
    ry_karg a[6 + 4 * RY_MAX_RANK + 2 * RY_MAX_RANK];
    int n = 0;
    if (s == RY_OK) {
        n = 0;
        a[n++] = KA_L(x->size);
        a[n++] = KA_B(out[0]);
        a[n++] = KA_L(ry_dk_off(out[0]));
        a[n++] = KA_B(x);
        a[n++] = KA_L(ry_dk_off(x));
        a[n++] = KA_B(sum);
        a[n++] = KA_L(ry_dk_off(sum));
        a[n++] = stat_arg(d, ry_attr_float(c->op, c->attrs, "eps"));
        for (int k = 0; k < nd; k++) a[n++] = KA_L(x->shape[k]), a[n++] = KA_L(kstride[k]);
        ry_gen_types t = types(d, x->dtype);
        s = ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_L2_APPLY, nd, &t), x->dtype,
                          (size_t)x->size, n, a);
    }
    ry_tensor_release(sum);
    return s;
}

static DK_KERNEL(lrn_wide) {
    const ry_dk_device *d = ry_dk_of_float(c, nin, 1, in, nout, out);
    if (!d) return RY_ERR;
    const ry_tensor *x = in[0];
    int64_t O, C, I;
    split(x, axis_of(c, x->ndim), &O, &C, &I);
    ry_gen_types t = types(d, x->dtype);
    ry_karg a[] = {KA_L(x->size), KA_T(out[0]), KA_T(x), KA_L(C), KA_L(I),
                  KA_L(ry_attr_int(c->op, c->attrs, "size")), stat_arg(d, ry_attr_float(c->op, c->attrs, "bias")),
                  stat_arg(d, ry_attr_float(c->op, c->attrs, "alpha")), stat_arg(d, ry_attr_float(c->op, c->attrs, "beta"))};
    return ry_dk_gen_run(d, c, ry_gen_nn(d->dialect, RY_GEN_LRN, 0, &t), x->dtype, (size_t)x->size, NARGS(a), a);
}

/* float16: widened to float32 around the kernels above (dk_widen.c) */
DK_WIDENING(ry_dk_batch_norm, batch_norm_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_layer_norm, layer_norm_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_l2_normalize, l2_normalize_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_lrn, lrn_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_instance_norm, instance_norm_wide, RY_FLOAT32)
DK_WIDENING(ry_dk_group_norm, group_norm_wide, RY_FLOAT32)
