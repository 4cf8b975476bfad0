/*
 * test_conv_split.c: the batch split of the convolution kernels
 * (src/backend/cpu/conv.c) gives the same bits at any thread count:
 * conv2d and conv2d_transpose run image by image whichever thread holds
 * the image, and conv2d_backward_weight sums fixed chunks of the batch in
 * a fixed order. Checked bitwise for 1, 2 and 3 threads on LeNet's shapes,
 * uneven chunks, groups and strides, banded forwards and the transposed
 * weight gradient, in float32 and float64; and that calls made inside
 * ry_threads_serial_begin/end agree as well. (test_kernels_conv.c checks
 * the values against naive loops.)
 */
#include "test_util.h"

typedef struct cfg {
    int64_t N, C, H, W, O, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, G;
} cfg;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
    return (in + p0 + p1 - (k - 1) * d - 1) / s + 1;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static ry_tensor *rand_tensor(ry_dtype dt, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dt, 4, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i,
                      ry_dtype_is_float(dt) ? urand() * 2 - 1 : (double)(int)(urand() * 9) - 4);
    return t;
}

/* Runs op on in with c's attributes into a new tensor of oshape. */
static ry_tensor *call(const char *opname, ry_tensor *const *in, ry_dtype dt,
                       const int64_t *oshape, const cfg *c) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    int64_t vals[4][4] = {{c->sh, c->sw}, {c->pt, c->pl, c->pb, c->pr}, {c->dh, c->dw}, {c->G}};
    const char *names[4] = {"strides", "padding", "dilation", "groups"};
    int lens[4] = {2, 4, 2, 1};
    ry_attr attrs[4];
    ry_attr_value items[4][4];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < lens[i]; j++)
            items[i][j] = (ry_attr_value){.kind = RY_AV_INT, .i = vals[i][j]};
        attrs[i] = (ry_attr){.name = names[i]};
        attrs[i].value = i == 3 ? items[i][0]
                                : (ry_attr_value){.kind = RY_AV_LIST, .list = {lens[i], items[i]}};
    }
    ry_attrs at = {4, attrs};
    ry_tensor *out = ry_tensor_new(dt, 4, oshape);
    assert_non_null(out);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx k = {.op = op, .attrs = &at, .err = &err};
    if (cpu_kernel(op)(&k, 2, in, 1, &out)) fail_msg("%s: %s", opname, err.msg);
    return out;
}

typedef struct results {
    ry_tensor *y, *dx, *dw;
} results;

static results run_all(const cfg *c, ry_tensor *x, ry_tensor *w, ry_tensor *g, ry_dtype dt) {
    results r;
    ry_tensor *in[2] = {x, w};
    r.y = call("nn.conv2d", in, dt, g->shape, c);
    ry_tensor *tin[2] = {g, w};
    r.dx = call("nn.conv2d_transpose", tin, dt, x->shape, c);
    ry_tensor *bin[2] = {g, x};
    r.dw = call("nn.conv2d_backward_weight", bin, dt, w->shape, c);
    return r;
}

static void release(results *r) {
    ry_tensor_release(r->y);
    ry_tensor_release(r->dx);
    ry_tensor_release(r->dw);
}

static void assert_same_bits(const ry_tensor *a, const ry_tensor *b, const char *what,
                             int threads) {
    assert_int_equal(a->size, b->size);
    if (memcmp(a->data, b->data, ry_tensor_nbytes(a)) == 0) return;
    for (int64_t i = 0; i < a->size; i++)
        if (ry_tensor_get(a, i) != ry_tensor_get(b, i))
            fail_msg("%s with %d threads: element %lld = %.17g, 1 thread gave %.17g", what,
                     threads, (long long)i, ry_tensor_get(b, i), ry_tensor_get(a, i));
    fail_msg("%s with %d threads: bits differ (NaN payload or sign of zero)", what, threads);
}

static void check_threads(const cfg *c, ry_dtype dt) {
    int64_t OH = out_dim(c->H, c->KH, c->sh, c->pt, c->pb, c->dh);
    int64_t OW = out_dim(c->W, c->KW, c->sw, c->pl, c->pr, c->dw);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C / c->G, c->KH, c->KW};
    int64_t ys[4] = {c->N, c->O, OH, OW};
    ry_tensor *x = rand_tensor(dt, xs), *w = rand_tensor(dt, ws), *g = rand_tensor(dt, ys);
    ry_set_num_threads(1);
    results one = run_all(c, x, w, g, dt);
    for (int threads = 2; threads <= 3; threads++) {
        ry_set_num_threads(threads);
        results many = run_all(c, x, w, g, dt);
        assert_same_bits(one.y, many.y, "conv2d", threads);
        assert_same_bits(one.dx, many.dx, "conv2d_transpose", threads);
        assert_same_bits(one.dw, many.dw, "conv2d_backward_weight", threads);
        release(&many);
        /* a caller that must stay on its thread gets the same bits too */
        ry_threads_serial_begin();
        results serial = run_all(c, x, w, g, dt);
        ry_threads_serial_end();
        assert_same_bits(one.dw, serial.dw, "serial conv2d_backward_weight", threads);
        assert_same_bits(one.y, serial.y, "serial conv2d", threads);
        release(&serial);
    }
    ry_set_num_threads(1);
    release(&one);
    ry_tensor_release(x);
    ry_tensor_release(w);
    ry_tensor_release(g);
}

static const cfg cfgs[] = {
    /* N  C  H   W   O KH KW sh sw pt pl pb pr dh dw G */
    {64, 1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},  /* LeNet conv1 (batch 64) */
    {64, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1}, /* LeNet conv2: transposed dw */
    {13, 6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1}, /* chunks of 1 and 2 images */
    {5, 4, 9, 11, 6, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1, 2},    /* strides, groups: general loops */
    {3, 16, 9, 70, 4, 3, 3, 1, 1, 1, 0, 0, 2, 1, 1, 1},   /* wide rows: one-row bands */
    {2, 3, 10, 9, 3, 3, 3, 1, 1, 2, 1, 0, 3, 2, 2, 3},    /* dilation, depthwise */
    {7, 2, 9, 17, 4, 3, 3, 1, 1, 1, 0, 1, 2, 1, 1, 1},    /* direct forward, tails */
};

static void split_is_bitwise_f32(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) check_threads(&cfgs[i], RY_FLOAT32);
}

static void split_is_bitwise_f64(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) check_threads(&cfgs[i], RY_FLOAT64);
}

/* Integer convolutions wrap; their sums are exact, so any split agrees. */
static void split_is_bitwise_int(void **state) {
    (void)state;
    check_threads(&cfgs[2], RY_INT32);
    check_threads(&cfgs[3], RY_INT64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_is_bitwise_f32),
        cmocka_unit_test(split_is_bitwise_f64),
        cmocka_unit_test(split_is_bitwise_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
