/*
 * test_kernels_conv.c: the fast paths of the convolution and pooling
 * kernels (src/backend/cpu/conv.c, conv_im2col.c, pool.c) against naive
 * loops written here from the definitions: conv2d, conv2d_transpose and
 * conv2d_backward_weight over strides, padding (symmetric, one-sided, wider
 * than the kernel), dilation and groups, on the stride-1 padded-copy path
 * and the general loops, the direct forward of few-tap convolutions
 * (conv_direct.c, where the CPU has AVX2), with row bands, the weight
 * gradient in both GEMM forms and batches cut into uneven chunks
 * (test_conv_split.c checks the split's bits); max_pool2d and its gradient
 * on the 2x2 stride-2 path (SSE and scalar tails, NaNs, ties, -0, odd
 * sizes) and the general path. float32 and float64.
 */
#include "test_util.h"

#include <stdlib.h>

/* ---- calling a kernel directly ---- */

typedef struct attr_spec {
    const char *name;
    int n;
    int64_t v[4];
} attr_spec;

static ry_tensor *call(const char *opname, int nin, ry_tensor *const *in, ry_dtype dt, int rank,
                       const int64_t *oshape, const attr_spec *as, int na) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    ry_attr attrs[6];
    ry_attr_value items[6][4];
    for (int i = 0; i < na; i++) {
        for (int j = 0; j < as[i].n; j++) items[i][j] = (ry_attr_value){.kind = RY_AV_INT, .i = as[i].v[j]};
        attrs[i] = (ry_attr){.name = as[i].name};
        attrs[i].value = as[i].n == 1 && strcmp(as[i].name, "groups") == 0
                             ? items[i][0]
                             : (ry_attr_value){.kind = RY_AV_LIST, .list = {as[i].n, items[i]}};
    }
    ry_attrs at = {na, attrs};
    ry_tensor *out = ry_tensor_new(dt, rank, oshape);
    assert_non_null(out);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx c = {.op = op, .attrs = &at, .err = &err};
    if (cpu_kernel(op)(&c, nin, in, 1, &out)) fail_msg("%s: %s", opname, err.msg);
    return out;
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static ry_tensor *rand_tensor(ry_dtype dt, int rank, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dt, rank, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, urand() * 2 - 1);
    return t;
}

static double at4(const ry_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return ry_tensor_get(t, ((a * t->shape[1] + b) * t->shape[2] + c) * t->shape[3] + d);
}

/* ---- convolutions ---- */

typedef struct conv_cfg {
    int64_t N, C, H, W, O, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, G;
} conv_cfg;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
    return (in + p0 + p1 - (k - 1) * d - 1) / s + 1;
}

static attr_spec conv_attrs[4];
static int conv_nattrs(const conv_cfg *c) {
    conv_attrs[0] = (attr_spec){"strides", 2, {c->sh, c->sw}};
    conv_attrs[1] = (attr_spec){"padding", 4, {c->pt, c->pl, c->pb, c->pr}};
    conv_attrs[2] = (attr_spec){"dilation", 2, {c->dh, c->dw}};
    conv_attrs[3] = (attr_spec){"groups", 1, {c->G}};
    return 4;
}

/* y[n][o][oh][ow] = sum over c in o's group, kh, kw of x[n][c][ih][iw] * w[o][c'][kh][kw] */
static void check_conv(const conv_cfg *c, ry_dtype dt, double tol) {
    int64_t OH = out_dim(c->H, c->KH, c->sh, c->pt, c->pb, c->dh);
    int64_t OW = out_dim(c->W, c->KW, c->sw, c->pl, c->pr, c->dw);
    int64_t Cg = c->C / c->G, Og = c->O / c->G;
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, Cg, c->KH, c->KW};
    int64_t ys[4] = {c->N, c->O, OH, OW};
    ry_tensor *x = rand_tensor(dt, 4, xs), *w = rand_tensor(dt, 4, ws), *g = rand_tensor(dt, 4, ys);
    int na = conv_nattrs(c);
    ry_tensor *in[2] = {x, w};
    ry_tensor *y = call("nn.conv2d", 2, in, dt, 4, ys, conv_attrs, na);
    /* data gradient: conv2d_transpose(g, w) with the same attributes */
    ry_tensor *tin[2] = {g, w};
    ry_tensor *dx = call("nn.conv2d_transpose", 2, tin, dt, 4, xs, conv_attrs, na);
    ry_tensor *bin[2] = {g, x};
    ry_tensor *dw = call("nn.conv2d_backward_weight", 2, bin, dt, 4, ws, conv_attrs, na);
    double *rdx = calloc((size_t)x->size, sizeof *rdx), *rdw = calloc((size_t)w->size, sizeof *rdw);
    assert_non_null(rdx);
    assert_non_null(rdw);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = 0, gv = at4(g, n, o, oh, ow);
                    int64_t gi = o / Og;
                    for (int64_t cc = 0; cc < Cg; cc++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ih = oh * c->sh - c->pt + kh * c->dh;
                                int64_t iw = ow * c->sw - c->pl + kw * c->dw;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                int64_t ch = gi * Cg + cc;
                                int64_t xi = ((n * c->C + ch) * c->H + ih) * c->W + iw;
                                int64_t wi = ((o * Cg + cc) * c->KH + kh) * c->KW + kw;
                                s += ry_tensor_get(x, xi) * ry_tensor_get(w, wi);
                                rdx[xi] += gv * ry_tensor_get(w, wi);
                                rdw[wi] += gv * ry_tensor_get(x, xi);
                            }
                    double got = at4(y, n, o, oh, ow);
                    if (fabs(got - s) > tol * (1 + fabs(s)))
                        fail_msg("conv2d y[%lld][%lld][%lld][%lld] = %.9g, want %.9g", (long long)n,
                                 (long long)o, (long long)oh, (long long)ow, got, s);
                }
    for (int64_t i = 0; i < x->size; i++)
        if (fabs(ry_tensor_get(dx, i) - rdx[i]) > tol * (1 + fabs(rdx[i])))
            fail_msg("conv2d_transpose element %lld = %.9g, want %.9g", (long long)i,
                     ry_tensor_get(dx, i), rdx[i]);
    for (int64_t i = 0; i < w->size; i++)
        if (fabs(ry_tensor_get(dw, i) - rdw[i]) > tol * (1 + fabs(rdw[i])))
            fail_msg("conv2d_backward_weight element %lld = %.9g, want %.9g", (long long)i,
                     ry_tensor_get(dw, i), rdw[i]);
    free(rdx);
    free(rdw);
    ry_tensor *all[] = {x, w, g, y, dx, dw};
    for (int i = 0; i < 6; i++) ry_tensor_release(all[i]);
}

static void conv_against_naive(void **state) {
    (void)state;
    const conv_cfg cfgs[] = {
        /* N  C  H   W  O KH KW sh sw pt pl pb pr dh dw G */
        {3, 2, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  /* same padding */
        {2, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1}, /* LeNet conv1 */
        {5, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1}, /* LeNet conv2 */
        {2, 4, 9, 11, 6, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1, 2}, /* strides, uneven padding, groups */
        {2, 3, 10, 9, 3, 3, 3, 1, 2, 2, 1, 0, 3, 2, 2, 3}, /* dilation, depthwise */
        {1, 2, 4, 4, 2, 5, 5, 1, 1, 3, 3, 3, 3, 1, 1, 1},  /* kernel larger than the image */
        {2, 2, 5, 5, 3, 1, 1, 3, 3, 0, 0, 0, 0, 1, 1, 1},  /* 1x1, stride 3: skipped pixels */
        {2, 3, 8, 9, 5, 3, 4, 1, 1, 0, 2, 1, 0, 1, 1, 1},  /* stride 1, one-sided padding */
        {2, 2, 6, 5, 3, 2, 3, 1, 1, 0, 0, 2, 3, 1, 1, 1},  /* stride 1, padding at the tail only */
        {13, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1}, /* transposed dw, uneven chunks */
        {3, 12, 10, 10, 32, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 2}, /* transposed dw per group */
        {2, 16, 6, 70, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, /* one-row bands */
        {2, 4, 3, 40, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},  /* 1x1: direct, 2 column blocks */
        {3, 2, 9, 17, 4, 3, 3, 1, 1, 1, 0, 1, 2, 1, 1, 1},  /* direct: 1-lane tail, 3+1 chans */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        check_conv(&cfgs[i], RY_FLOAT32, 1e-4);
        check_conv(&cfgs[i], RY_FLOAT64, 1e-12);
    }
}

/* Larger images: several row bands per image, more images than weight
 * gradient chunks (9 > 8), and a 40 x 40 image whose column matrix is
 * large. */
static void conv_many_blocks(void **state) {
    (void)state;
    conv_cfg c = {9, 4, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    check_conv(&c, RY_FLOAT32, 1e-4);
    check_conv(&c, RY_FLOAT64, 1e-12);
    conv_cfg big = {2, 6, 40, 40, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    check_conv(&big, RY_FLOAT32, 1e-4);
    /* many output channels: conv2d's band GEMMs are 128 wide, and the
     * weight gradient (128 x 72) is too big for the transposed form */
    conv_cfg wide = {5, 8, 12, 12, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    check_conv(&wide, RY_FLOAT32, 1e-4);
    check_conv(&wide, RY_FLOAT64, 1e-12);
}

/* ---- max pooling ---- */

typedef struct pool_cfg {
    int64_t N, C, H, W, PH, PW, sh, sw, pt, pl, pb, pr;
} pool_cfg;

/* x's values: random, with ties, -0 and NaNs sprinkled in when asked */
static ry_tensor *pool_input(ry_dtype dt, const int64_t *shape, bool specials) {
    ry_tensor *x = ry_tensor_new(dt, 4, shape);
    assert_non_null(x);
    for (int64_t i = 0; i < x->size; i++) {
        double r = urand(), v = (double)(int)(urand() * 7) - 3; /* small integers: many ties */
        if (specials && r < 0.05) v = NAN;
        else if (specials && r < 0.10) v = -0.0;
        ry_tensor_set(x, i, v);
    }
    return x;
}

static void check_pool(const pool_cfg *c, ry_dtype dt, bool specials) {
    int64_t OH = out_dim(c->H, c->PH, c->sh, c->pt, c->pb, 1);
    int64_t OW = out_dim(c->W, c->PW, c->sw, c->pl, c->pr, 1);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ys[4] = {c->N, c->C, OH, OW};
    ry_tensor *x = pool_input(dt, xs, specials), *dy = rand_tensor(dt, 4, ys);
    attr_spec as[3] = {{"pool_size", 2, {c->PH, c->PW}},
                       {"strides", 2, {c->sh, c->sw}},
                       {"padding", 4, {c->pt, c->pl, c->pb, c->pr}}};
    ry_tensor *y = call("nn.max_pool2d", 1, &x, dt, 4, ys, as, 3);
    ry_tensor *gin[2] = {dy, x};
    ry_tensor *dx = call("nn.max_pool2d_grad", 2, gin, dt, 4, xs, as, 3);
    /* rabs: the sum of |terms| of each rdx, the scale of float32's rounding */
    double *rdx = calloc((size_t)x->size, sizeof *rdx);
    double *rabs = calloc((size_t)x->size, sizeof *rabs);
    assert_non_null(rdx);
    assert_non_null(rabs);
    for (int64_t p = 0; p < c->N * c->C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                /* the max (a NaN wins) and the first tap holding it (the first NaN) */
                int64_t arg = -1;
                for (int64_t kh = 0; kh < c->PH; kh++)
                    for (int64_t kw = 0; kw < c->PW; kw++) {
                        int64_t ih = oh * c->sh - c->pt + kh, iw = ow * c->sw - c->pl + kw;
                        if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                        int64_t i = (p * c->H + ih) * c->W + iw;
                        double v = ry_tensor_get(x, i), b = arg < 0 ? 0 : ry_tensor_get(x, arg);
                        if (arg < 0 || (!isnan(b) && (v > b || isnan(v)))) arg = i;
                    }
                double got = ry_tensor_get(y, (p * OH + oh) * OW + ow);
                double want = arg < 0 ? -INFINITY : ry_tensor_get(x, arg);
                if (arg < 0) {
                    assert_true(got < -1e30);
                } else if (isnan(want)) {
                    if (!isnan(got)) fail_msg("max_pool2d: got %g, want NaN", got);
                } else if (got != want) {
                    fail_msg("max_pool2d plane %lld (%lld, %lld): got %g, want %g", (long long)p,
                             (long long)oh, (long long)ow, got, want);
                }
                if (arg >= 0) {
                    double d = ry_tensor_get(dy, (p * OH + oh) * OW + ow);
                    rdx[arg] += d;
                    rabs[arg] += fabs(d);
                }
            }
    /* overlapping windows add in float32 there, in double here: relative to
     * the terms' magnitudes, since terms of both signs may cancel */
    double tol = dt == RY_FLOAT32 ? 1e-6 : 0;
    for (int64_t i = 0; i < x->size; i++) {
        double got = ry_tensor_get(dx, i);
        if (fabs(got - rdx[i]) > tol * rabs[i] || (rdx[i] == 0 && signbit(got)))
            fail_msg("max_pool2d_grad element %lld: got %.9g, want %.9g", (long long)i, got,
                     rdx[i]);
    }
    free(rdx);
    free(rabs);
    ry_tensor *all[] = {x, dy, y, dx};
    for (int i = 0; i < 4; i++) ry_tensor_release(all[i]);
}

static void max_pool_against_naive(void **state) {
    (void)state;
    const pool_cfg cfgs[] = {
        /* N C  H   W PH PW sh sw pt pl pb pr */
        {2, 3, 28, 28, 2, 2, 2, 2, 0, 0, 0, 0}, /* LeNet pool1: SSE, 14 = 3*4 + 2 tail */
        {3, 2, 10, 10, 2, 2, 2, 2, 0, 0, 0, 0}, /* LeNet pool2: 5 = 4 + 1 */
        {2, 2, 9, 7, 2, 2, 2, 2, 0, 0, 0, 0},   /* odd sizes: last row/column untouched */
        {1, 2, 16, 18, 2, 2, 2, 2, 0, 0, 0, 0}, /* 9 windows a row */
        {2, 2, 7, 8, 3, 2, 2, 1, 1, 0, 1, 1},   /* general path: padding, overlap */
        {1, 1, 6, 6, 2, 2, 2, 2, 1, 1, 1, 1},   /* 2x2 windows with padding: general */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (int sp = 0; sp < 2; sp++) {
            check_pool(&cfgs[i], RY_FLOAT32, sp);
            check_pool(&cfgs[i], RY_FLOAT64, sp);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_against_naive),
        cmocka_unit_test(conv_many_blocks),
        cmocka_unit_test(max_pool_against_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
