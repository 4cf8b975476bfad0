/*
 * grad_pool.c: the gradient rules of the pooling operators that TVM has no
 * rule for: nn.adaptive_avg_pool2d, nn.adaptive_max_pool2d, and
 * nn.max_pool2d_grad (max_pool2d's adjoint, differentiated again for second
 * derivatives), written as IR over operators that already have kernels:
 * constant 0/1 or 1/count matrices applied with nn.dense, take, and
 * nn.max_pool2d_grad. Layout NCHW (the only one these operators accept);
 * the batch may be symbolic. Where C, H or W are known at run time only,
 * the average pool builds its matrices then (avg_unknown), the max pool to
 * 1 x 1 is the global one (other adaptive max pools need them known), and
 * max_pool2d_grad's gather computes its indices then.
 *
 * Shape legend: x (N, C, H, W), y and g (N, C, OH, OW). In the adaptive
 * pools output row o pools input rows [h0(o), h1(o)), h0 = floor(o H / OH),
 * h1 = ceil((o + 1) H / OH) (columns alike), so windows may overlap and
 * differ in size by one when OH does not divide H: the CPU kernel's windows.
 */
#include <stdlib.h>
#include <string.h>

#include "op/conv_attrs.h" /* the pools' attribute reader */
#include "op/grad_rules.h"
#include "tensor/alloc_exempt.h"

#define M_ (c->m)

static int64_t win_start(int64_t o, int64_t n, int64_t on) { return o * n / on; }
static int64_t win_end(int64_t o, int64_t n, int64_t on) { return ((o + 1) * n + on - 1) / on; }

/* A constant (rows, cols) matrix of dtype dt from a row-major double array. */
static ry_expr *matrix(ry_grad_ctx *c, ry_dtype dt, int64_t rows, int64_t cols, const double *v) {
    int64_t shape[2] = {rows, cols};
    ry_tensor *t = ry_ir_tensor_new(dt, 2, shape);
    for (int64_t i = 0; i < rows * cols; i++)
        ry_tensor_set(t, i, v[i]);
    ry_expr *e = ry_expr_const(M_, t, RY_NO_SPAN);
    e->type = ry_type_tensor(M_, dt, 2, shape);
    return e;
}

static ry_expr *reshaped(ry_grad_ctx *c, ry_expr *x, int n, const int64_t *shape) {
    ry_expr *r = ry_gb_op1(M_, "reshape", x);
    ry_gb_attr_ints(M_, r, "newshape", n, shape);
    return r;
}

static ry_expr *transposed(ry_grad_ctx *c, ry_expr *x, int n, const int64_t *axes) {
    ry_expr *t = ry_gb_op1(M_, "transpose", x);
    ry_gb_attr_ints(M_, t, "axes", n, axes);
    return t;
}

/* dx = L^T t R per (n, c) plane: t (N, C, A, B), L (A, H), R (B, W) given
 * transposed as lt (H, A) and rt (W, B), so that nn.dense (a b^T) applies
 * them:
 *   u = dense(t as (N C A, B), rt)                      (N C A, W)
 *   v = dense(u as (N C, A, W) -> (N C, W, A) as (N C W, A), lt)  (N C W, H)
 *   dx = v as (N, C, W, H) -> (N, C, H, W) */
static ry_expr *sandwich(ry_grad_ctx *c, ry_expr *t, ry_expr *lt, ry_expr *rt, int64_t C,
                         int64_t A, int64_t B, int64_t H, int64_t W) {
    const int64_t s1[2] = {-1, B}, s2[3] = {-1, A, W}, p2[3] = {0, 2, 1}, s3[2] = {-1, A};
    const int64_t s4[4] = {-1, C, W, H}, p4[4] = {0, 1, 3, 2};
    ry_expr *u = ry_gb_op2(M_, "nn.dense", reshaped(c, t, 2, s1), rt);
    ry_expr *ut = reshaped(c, transposed(c, reshaped(c, u, 3, s2), 3, p2), 2, s3);
    ry_expr *v = ry_gb_op2(M_, "nn.dense", ut, lt);
    return transposed(c, reshaped(c, v, 4, s4), 4, p4);
}

/* Reads x's (C, H, W) and y's (OH, OW); false (error set) when unknown. */
static bool geometry(ry_grad_ctx *c, ry_expr *x, ry_expr *y, int64_t *C, int64_t *H, int64_t *W,
                     int64_t *OH, int64_t *OW) {
    const ry_type *xt = ry_gb_type(x), *yt = ry_gb_type(y);
    const char *name = c->call->call.callee->op.op->name;
    bool ok = xt && yt && xt->kind == RY_TYPE_TENSOR && yt->kind == RY_TYPE_TENSOR &&
              xt->tensor.ndim == 4 && yt->tensor.ndim == 4;
    for (int i = 1; ok && i < 4; i++)
        ok = xt->tensor.dims[i].kind == RY_DIM_CONST && yt->tensor.dims[i].kind == RY_DIM_CONST;
    if (!ok) {
        ry_error_at(c->err, c->span, "gradient of %s needs 4-d data with known C, H and W", name);
        return false;
    }
    *C = xt->tensor.dims[1].value;
    *H = xt->tensor.dims[2].value;
    *W = xt->tensor.dims[3].value;
    *OH = yt->tensor.dims[2].value;
    *OW = yt->tensor.dims[3].value;
    if (*H < 1 || *W < 1 || *OH < 1 || *OW < 1 || *C < 1) {
        ry_error_at(c->err, c->span, "gradient of %s: empty data or output", name);
        return false;
    }
    return true;
}

/* The averaging matrix of one axis, transposed: at[i][o] = 1 / |window o|
 * for i in window o, as (n, on). */
static ry_expr *avg_matrix_t(ry_grad_ctx *c, ry_dtype dt, int64_t n, int64_t on) {
    double *v = RY_NEW_ARRAY(M_->arena, double, n * on);
    memset(v, 0, sizeof *v * (size_t)(n * on));
    for (int64_t o = 0; o < on; o++) {
        int64_t a = win_start(o, n, on), b = win_end(o, n, on);
        for (int64_t i = a; i < b; i++)
            v[i * on + o] = 1.0 / (double)(b - a);
    }
    return matrix(c, dt, n, on, v);
}

/* adaptive_avg_pool2d is y = A_H x A_W^T per plane, with A[o][i] =
 * 1 / |window o| for i in window o (the count of a 2-d window is the
 * product of its row and column counts), so
 *   dx = A_H^T g A_W: each input cell gets g / count from every window
 *   that contains it. */
/* The transposed averaging matrix of axis a of x (n = its length at run
 * time, on outputs), (n, on):
 *   at[i][o] = (h0(o) <= i < h1(o)) / (h1(o) - h0(o)),
 *   h0 = o n / on, h1 = ((o + 1) n + on - 1) / on   (integers, as win_*) */
static ry_expr *avg_matrix_t_unknown(ry_grad_ctx *c, ry_expr *x, int a, ry_dtype dt, int64_t on) {
    int64_t *ov = RY_NEW_ARRAY(M_->arena, int64_t, on);
    for (int64_t o = 0; o < on; o++) ov[o] = o;
    ry_expr *o = ry_gb_index_const(M_, (int)on, ov), *n = ry_gb_length(M_, x, a, RY_INT32);
    ry_expr *onc = ry_gb_scalar(M_, RY_INT32, (double)on), *one = ry_gb_scalar(M_, RY_INT32, 1);
    ry_expr *h0 = ry_gb_op2(M_, "divide", ry_gb_op2(M_, "multiply", o, n), onc);
    ry_expr *h1 = ry_gb_op2(M_, "multiply", ry_gb_op2(M_, "add", o, one), n);
    h1 = ry_gb_op2(M_, "divide", ry_gb_op2(M_, "add", h1, ry_gb_scalar(M_, RY_INT32, (double)(on - 1))), onc);
    ry_expr *i = ry_gb_op1(M_, "expand_dims", ry_gb_iota(M_, x, 4, a));
    ry_gb_attr_int(M_, i, "axis", 1);
    ry_expr *hit = ry_gb_op2(M_, "logical_and", ry_gb_op2(M_, "greater_equal", i, h0), ry_gb_op2(M_, "less", i, h1));
    ry_expr *hf = ry_gb_op1(M_, "cast", hit), *cnt = ry_gb_op1(M_, "cast", ry_gb_op2(M_, "subtract", h1, h0));
    ry_gb_attr_str(M_, hf, "dtype", ry_dtype_name(dt));
    ry_gb_attr_str(M_, cnt, "dtype", ry_dtype_name(dt));
    return ry_gb_op2(M_, "divide", hf, cnt);
}

/* dx = A_H^T g A_W with the matrices of run time, applied along the last
 * axis by nn.dense (which takes any leading dims), so no reshape needs C,
 * H or W:  u = dense(g, A_W^T) (N, C, OH, W); v = dense(u^T, A_H^T)
 * (N, C, W, H); dx = v^T over the last two axes */
static ry_expr *avg_unknown(ry_grad_ctx *c, ry_expr *x, ry_expr *g, ry_dtype dt, int64_t OH, int64_t OW) {
    const int64_t swap[4] = {0, 1, 3, 2};
    ry_expr *u = ry_gb_op2(M_, "nn.dense", g, avg_matrix_t_unknown(c, x, 3, dt, OW));
    ry_expr *v = ry_gb_op2(M_, "nn.dense", transposed(c, u, 4, swap), avg_matrix_t_unknown(c, x, 2, dt, OH));
    return transposed(c, v, 4, swap);
}

/* The output's (OH, OW) where known, and whether x is 4-d: the rules that
 * need nothing else of x. */
static bool output_only(ry_expr *x, ry_expr *y, int64_t *OH, int64_t *OW) {
    const ry_type *xt = ry_gb_type(x), *yt = ry_gb_type(y);
    if (!xt || !yt || xt->kind != RY_TYPE_TENSOR || yt->kind != RY_TYPE_TENSOR || xt->tensor.ndim != 4 ||
        yt->tensor.ndim != 4 || yt->tensor.dims[2].kind != RY_DIM_CONST || yt->tensor.dims[3].kind != RY_DIM_CONST)
        return false;
    *OH = yt->tensor.dims[2].value;
    *OW = yt->tensor.dims[3].value;
    for (int i = 1; i < 4; i++)
        if (xt->tensor.dims[i].kind != RY_DIM_CONST) return *OH >= 1 && *OW >= 1;
    return false; /* all known: the static rules */
}

ry_status ry_grad_adaptive_avg_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                      ry_expr *g, ry_expr **grads) {
    grads[0] = NULL;
    ry_dtype dt = ry_gb_dtype(args[0]);
    if (!ry_dtype_is_float(dt)) return RY_OK;
    int64_t C, H, W, OH, OW;
    if (output_only(args[0], y, &OH, &OW)) {
        grads[0] = avg_unknown(c, args[0], g, dt, OH, OW);
        return RY_OK;
    }
    if (!geometry(c, args[0], y, &C, &H, &W, &OH, &OW)) return RY_ERR;
    grads[0] =
        sandwich(c, g, avg_matrix_t(c, dt, H, OH), avg_matrix_t(c, dt, W, OW), C, OH, OW, H, W);
    return RY_OK;
}

/* One axis of the max rule: window o is laid out as K = max |window|
 * consecutive rows o K .. o K + K - 1 of the gathered data: its own rows
 * in order, then copies of its first row to fill it up (a copy never wins
 * the max over the original, which comes first). idx (o K + k) is the
 * source row; sel (n, on K) is the 0/1 matrix, transposed, that adds the
 * gathered rows' adjoints back to their sources, copies left out. */
static int64_t max_window(int64_t n, int64_t on) {
    int64_t k = 1;
    for (int64_t o = 0; o < on; o++)
        if (win_end(o, n, on) - win_start(o, n, on) > k) k = win_end(o, n, on) - win_start(o, n, on);
    return k;
}

static void gather_axis(ry_grad_ctx *c, ry_dtype dt, int64_t n, int64_t on, int64_t k,
                        ry_expr **idx, ry_expr **sel) {
    int64_t *ix = RY_NEW_ARRAY(M_->arena, int64_t, on * k);
    double *s = RY_NEW_ARRAY(M_->arena, double, n * on * k);
    memset(s, 0, sizeof *s * (size_t)(n * on * k));
    for (int64_t o = 0; o < on; o++) {
        int64_t a = win_start(o, n, on), b = win_end(o, n, on);
        for (int64_t j = 0; j < k; j++) {
            int64_t r = o * k + j;
            ix[r] = a + j < b ? a + j : a;
            if (a + j < b) s[(a + j) * on * k + r] = 1;
        }
    }
    *idx = ry_gb_index_const(M_, (int)(on * k), ix);
    *sel = matrix(c, dt, n, on * k, s);
}

/* adaptive_max_pool2d: with every window gathered into a K_H x K_W block,
 *   xg = take(take(x, idx_H, axis=2), idx_W, axis=3)    (N, C, OH K_H, OW K_W)
 * y is max_pool2d(xg, pool_size = strides = (K_H, K_W)), whose adjoint
 * routes each g to its window's first maximum, like max_pool2d's rule:
 *   dxg = max_pool2d_grad(g, xg, same attrs)
 *   dx  = S_H^T dxg S_W   (the gathered adjoints added back to their rows
 *                          and columns; a cell in two windows gets both) */
ry_status ry_grad_adaptive_max_pool2d(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y,
                                      ry_expr *g, ry_expr **grads) {
    grads[0] = NULL;
    ry_dtype dt = ry_gb_dtype(args[0]);
    if (!ry_dtype_is_float(dt)) return RY_OK;
    int64_t C, H, W, OH, OW;
    if (output_only(args[0], y, &OH, &OW) && OH == 1 && OW == 1) {
        grads[0] = ry_gb_global_pool_grad(M_, args[0], g, true);
        return RY_OK;
    }
    if (!geometry(c, args[0], y, &C, &H, &W, &OH, &OW)) return RY_ERR;
    int64_t KH = max_window(H, OH), KW = max_window(W, OW);
    ry_expr *ih, *sh, *iw, *sw;
    gather_axis(c, dt, H, OH, KH, &ih, &sh);
    gather_axis(c, dt, W, OW, KW, &iw, &sw);
    ry_expr *t1 = ry_gb_op2(M_, "take", args[0], ih);
    ry_gb_attr_int(M_, t1, "axis", 2);
    ry_expr *xg = ry_gb_op2(M_, "take", t1, iw);
    ry_gb_attr_int(M_, xg, "axis", 3);
    ry_expr *dxg = ry_gb_op2(M_, "nn.max_pool2d_grad", g, xg);
    const int64_t pool[2] = {KH, KW};
    ry_gb_attr_ints(M_, dxg, "pool_size", 2, pool);
    ry_gb_attr_ints(M_, dxg, "strides", 2, pool);
    grads[0] = sandwich(c, dxg, sh, sw, C, OH * KH, OW * KW, H, W);
    return RY_OK;
}

/* ---- max_pool2d_grad(dy, x): linear in dy, piecewise constant in x ----
 * dx[argmax of window w] += dy[w] (the first maximum of the window's taps
 * inside the data, in row-major order), so for a cotangent h of dx:
 *   d dy[w] = h[argmax of window w],  d x = 0.
 * Each window is gathered into a K_H x K_W block, its taps in order; a tap
 * in the padding gathers a copy of the window's first tap in the data
 * along that axis, which can win a tie only where that tap itself would:
 *   xg = take(take(x, idx_H, axis=2), idx_W, axis=3), hg alike from h
 *   first = max_pool2d_grad(ones_like(dy), xg, pool = strides = K)   0/1
 *   d dy = sum over each block of hg * first
 * A window with no tap in the data (ceil_mode) gets nothing, as in the
 * kernel: its block is masked. */
static void window_axis(int64_t n, int64_t on, int64_t k, int64_t s, int64_t d, int64_t pad,
                        int64_t *idx, bool *empty) {
    for (int64_t o = 0; o < on; o++) {
        int64_t first = -1;
        for (int64_t j = 0; j < k && first < 0; j++) {
            int64_t i = o * s - pad + j * d;
            if (i >= 0 && i < n) first = i;
        }
        empty[o] = first < 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t i = o * s - pad + j * d;
            idx[o * k + j] = i >= 0 && i < n ? i : first < 0 ? 0 : first;
        }
    }
}

static ry_expr *gather2(ry_grad_ctx *c, ry_expr *x, ry_expr *ih, ry_expr *iw) {
    ry_expr *t1 = ry_gb_op2(M_, "take", x, ih);
    ry_gb_attr_int(M_, t1, "axis", 2);
    ry_expr *t2 = ry_gb_op2(M_, "take", t1, iw);
    ry_gb_attr_int(M_, t2, "axis", 3);
    return t2;
}

/* window_axis at run time, for axis a of x (n taps) and of dy (on
 * windows): the taps i = o s - pad + j d (on, k), those in [0, n) kept,
 * the others the window's first in the data (its smallest kept tap; 0 for
 * a window with none, which *keep (on, 0/1 of dtype dt) masks out). */
static ry_expr *window_axis_unknown(ry_grad_ctx *c, ry_expr *x, ry_expr *dy, int a, int64_t k, int64_t s,
                                    int64_t d, int64_t pad, ry_dtype dt, ry_expr **keep) {
    ry_module *m = M_;
    int64_t *jv = RY_NEW_ARRAY(m->arena, int64_t, k);
    for (int64_t j = 0; j < k; j++) jv[j] = j * d - pad;
    ry_expr *o = ry_gb_op1(m, "expand_dims", ry_gb_iota(m, dy, 4, a));
    ry_gb_attr_int(m, o, "axis", 1);
    ry_expr *i = ry_gb_op2(m, "add", ry_gb_op2(m, "multiply", o, ry_gb_scalar(m, RY_INT32, (double)s)),
                           ry_gb_index_const(m, (int)k, jv));
    ry_expr *n = ry_gb_length(m, x, a, RY_INT32), *zero = ry_gb_scalar(m, RY_INT32, 0);
    ry_expr *in = ry_gb_op2(m, "logical_and", ry_gb_op2(m, "greater_equal", i, zero), ry_gb_op2(m, "less", i, n));
    ry_expr *first = ry_gb_op1(m, "min", ry_gb_op3(m, "where", in, i, n)); /* n: no tap */
    const int64_t last = 1;
    ry_gb_attr_ints(m, first, "axis", 1, &last);
    ry_gb_attr_bool(m, first, "keepdims", true);
    ry_expr *empty = ry_gb_op2(m, "greater_equal", first, n);
    ry_expr *fill = ry_gb_op3(m, "where", empty, zero, first);
    ry_expr *kp = ry_gb_op1(m, "cast", ry_gb_op1(m, "logical_not", empty)); /* (on, 1) */
    ry_gb_attr_str(m, kp, "dtype", ry_dtype_name(dt));
    *keep = kp;
    return reshaped(c, ry_gb_op3(m, "where", in, i, fill), 1, (const int64_t[]){-1});
}

/* ry_grad_max_pool2d_grad where C, H, W or the output's size are known at
 * run time only: the same gather, its indices computed then, and the
 * blocks split off by reshape's -4. */
static ry_expr *max_pool2d_grad_unknown(ry_grad_ctx *c, ry_expr *const *args, ry_expr *g,
                                        const ry_conv2d_params *p, ry_dtype dt) {
    int64_t KH = p->pool[0], KW = p->pool[1];
    ry_expr *kh, *kw;
    ry_expr *ih = window_axis_unknown(c, args[1], args[0], 2, KH, p->stride[0], p->dilation[0], p->pad[0], dt, &kh);
    ry_expr *iw = window_axis_unknown(c, args[1], args[0], 3, KW, p->stride[1], p->dilation[1], p->pad[1], dt, &kw);
    const int64_t pool[2] = {KH, KW};
    ry_expr *first = ry_gb_op2(M_, "nn.max_pool2d_grad", ry_gb_op1(M_, "ones_like", args[0]),
                               gather2(c, args[1], ih, iw));
    ry_gb_attr_ints(M_, first, "pool_size", 2, pool);
    ry_gb_attr_ints(M_, first, "strides", 2, pool);
    ry_expr *picked = ry_gb_op2(M_, "multiply", gather2(c, g, ih, iw), first);
    const int64_t blocks[8] = {0, 0, -4, -1, KH, -4, -1, KW}, axes[2] = {3, 5};
    ry_expr *dd = ry_gb_op1(M_, "sum", reshaped(c, picked, 8, blocks));
    ry_gb_attr_ints(M_, dd, "axis", 2, axes);
    /* the windows with a tap in the data: keep_H (OH, 1) times keep_W as (1, OW) */
    const int64_t t2[2] = {1, 0};
    return ry_gb_op2(M_, "multiply", dd, ry_gb_op2(M_, "multiply", kh, transposed(c, kw, 2, t2)));
}

ry_status ry_grad_max_pool2d_grad(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                  ry_expr **grads) {
    grads[0] = grads[1] = NULL;
    ry_dtype dt = ry_gb_dtype(args[1]);
    if (!ry_dtype_is_float(dt)) return RY_OK;
    const ry_op *op = c->call->call.callee->op.op;
    ry_conv2d_params p;
    if (ry_conv2d_params_read(op, &c->call->call.attrs, c->span, c->err, &p)) return RY_ERR;
    int64_t C, H, W, OH, OW;
    const ry_type *xt = ry_gb_type(args[1]), *gt = ry_gb_type(args[0]);
    bool four = xt && gt && xt->kind == RY_TYPE_TENSOR && gt->kind == RY_TYPE_TENSOR && xt->tensor.ndim == 4 &&
                gt->tensor.ndim == 4;
    bool known = four;
    for (int i = 1; known && i < 4; i++)
        known = xt->tensor.dims[i].kind == RY_DIM_CONST && gt->tensor.dims[i].kind == RY_DIM_CONST;
    if (four && !known) {
        grads[0] = max_pool2d_grad_unknown(c, args, g, &p, dt);
        return RY_OK;
    }
    if (!geometry(c, args[1], args[0], &C, &H, &W, &OH, &OW)) return RY_ERR;
    int64_t KH = p.pool[0], KW = p.pool[1];
    int64_t *rh = RY_NEW_ARRAY(M_->arena, int64_t, OH * KH);
    int64_t *rw = RY_NEW_ARRAY(M_->arena, int64_t, OW * KW);
    bool *eh = RY_NEW_ARRAY(M_->arena, bool, OH), *ew = RY_NEW_ARRAY(M_->arena, bool, OW);
    window_axis(H, OH, KH, p.stride[0], p.dilation[0], p.pad[0], rh, eh);
    window_axis(W, OW, KW, p.stride[1], p.dilation[1], p.pad[1], rw, ew);
    ry_expr *ih = ry_gb_index_const(M_, (int)(OH * KH), rh);
    ry_expr *iw = ry_gb_index_const(M_, (int)(OW * KW), rw);
    const int64_t pool[2] = {KH, KW};
    ry_expr *first = ry_gb_op2(M_, "nn.max_pool2d_grad", ry_gb_op1(M_, "ones_like", args[0]),
                               gather2(c, args[1], ih, iw));
    ry_gb_attr_ints(M_, first, "pool_size", 2, pool);
    ry_gb_attr_ints(M_, first, "strides", 2, pool);
    ry_expr *picked = ry_gb_op2(M_, "multiply", gather2(c, g, ih, iw), first);
    const int64_t blocks[6] = {-1, C, OH, KH, OW, KW}, axes[2] = {3, 5};
    ry_expr *dd = ry_gb_op1(M_, "sum", reshaped(c, picked, 6, blocks));
    ry_gb_attr_ints(M_, dd, "axis", 2, axes);
    bool any_empty = false;
    for (int64_t o = 0; o < OH; o++) any_empty |= eh[o];
    for (int64_t o = 0; o < OW; o++) any_empty |= ew[o];
    if (any_empty) {
        double *v = RY_NEW_ARRAY(M_->arena, double, OH * OW);
        for (int64_t a = 0; a < OH; a++)
            for (int64_t b = 0; b < OW; b++) v[a * OW + b] = eh[a] || ew[b] ? 0 : 1;
        dd = ry_gb_op2(M_, "multiply", dd, matrix(c, dt, OH, OW, v));
    }
    grads[0] = dd;
    return RY_OK;
}
