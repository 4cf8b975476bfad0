/*
 * test_ad_dynamic.c: gradients over extents the types do not know
 * (symbolic and Any dims), against central finite differences in float64,
 * and the gradient program run on both engines (the compiled engine's
 * values equal the interpreter's): take along an axis of unknown length in
 * clip and wrap mode (indices out of range on both sides, repeated) and
 * with axis=None over data of unknown shape; concatenate along an axis of
 * unknown length, symbolic and in a recursion that grows a tensor; conv2d,
 * conv2d_transpose, the global pools and the adaptive average pool (and
 * the adaptive max pool to 1 x 1) over unknown batch, channels, height and
 * width (strides whose floor drops rows, windows that overlap), to second
 * order, and with the weight's output channels unknown too;
 * cumsum, which these rules use, on its own.
 */
#include "test_util.h"

#include "relayc/ad.h"

/* not every helper is used here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ad/helpers.h"
#pragma GCC diagnostic pop

static ry_value *int_vector(int n, const int32_t *v) {
    ry_tensor *t = ry_tensor_new(RY_INT32, 1, (int64_t[]){n});
    assert_non_null(t);
    for (int i = 0; i < n; i++) ry_tensor_set(t, i, v[i]);
    return ry_value_tensor(t);
}

/* Every tensor of a and b, flattened, equal to rounding. */
static void assert_same_values(const ry_value *a, const ry_value *b) {
    int n = ry_value_count_tensors(a);
    assert_int_equal(ry_value_count_tensors(b), n);
    ry_tensor **ta = ry_calloc((size_t)n, sizeof *ta), **tb = ry_calloc((size_t)n, sizeof *tb);
    assert_non_null(ta);
    assert_non_null(tb);
    ry_value_flatten(a, ta, n);
    ry_value_flatten(b, tb, n);
    for (int i = 0; i < n; i++) test_assert_close(ta[i], tb[i], 1e-12, 1e-12);
    ry_free(ta);
    ry_free(tb);
}

/* gradcheck (first and, with second, second order) on the interpreter,
 * then the gradient program on the compiled engine against the
 * interpreter's run of it. */
static void check(const char *text, int nargs, ry_value **args, bool second, double rtol) {
    ry_module *m = gradcheck_ok(text, "main", nargs, args, rtol, 1e-8);
    ry_value *want = run(m, "main_gradient", nargs, args), *got = run_vm(m, "main_gradient", nargs, args);
    assert_same_values(got, want);
    ry_value_release(want);
    ry_value_release(got);
    ry_module_free(m);
    if (!second) return;
    m = test_parse(text, true);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = rtol, .atol = 1e-7, .second_order = true};
    ry_gradcheck_report rep;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_gradcheck(m, "main", nargs, args, &o, &rep, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < rep.nparams; i++)
        if (rep.second[i].checked && !rep.second[i].ok)
            fail_msg("second order of %%%s: max abs %.3g", rep.second[i].name, rep.second[i].max_abs);
    assert_true(rep.ok);
    ry_module_free(m);
}

/* take along an axis of symbolic length n: the clip bound and the wrap
 * modulus are read at run time (shape_of). */
static void test_take_unknown_axis(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(n, 3), float64], %i: Tensor[(6), int32]) {\n"
                       "  %0 = take(%x, %i, axis=0);\n"
                       "  %1 = take(%x, %i, axis=0, mode=\"wrap\");\n"
                       "  (multiply(%0, %0), multiply(%1, %1))\n"
                       "}\n";
    const int32_t idx[6] = {0, 5, -2, 7, 1, -9};
    for (int64_t n = 1; n <= 4; n += 3) {
        ry_value *a[2] = {rv2(n, 3), int_vector(6, idx)};
        check(text, 2, a, true, 1e-6);
        release_all(2, a);
    }
}

/* axis=None over (n, m): the data flattened to a length known at run time. */
static void test_take_axis_none_unknown_shape(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(n, m), float64], %i: Tensor[(5), int32]) {\n"
                       "  %0 = take(%x, %i);\n"
                       "  %1 = take(%x, %i, mode=\"wrap\");\n"
                       "  %2 = take(%x, %i, mode=\"fast\");\n"
                       "  (multiply(%0, %0), multiply(%1, %1), %2)\n"
                       "}\n";
    const int32_t clipped[5] = {0, 11, -3, 20, 4}, in_range[5] = {0, 11, 3, 4, 4};
    ry_value *a[2] = {rv2(3, 4), int_vector(5, in_range)};
    check(text, 2, a, false, 1e-6);
    ry_value_release(a[1]);
    /* out-of-range indices would fail the fast take: clip and wrap only */
    const char *text2 = "#[version = \"0.0.5\"]\n"
                        "def @main(%x: Tensor[(?, ?), float64], %i: Tensor[(5), int32]) {\n"
                        "  %0 = take(%x, %i);\n"
                        "  %1 = take(%x, %i, mode=\"wrap\");\n"
                        "  (multiply(%0, %0), multiply(%1, %1))\n"
                        "}\n";
    a[1] = int_vector(5, clipped);
    check(text2, 2, a, true, 1e-6);
    release_all(2, a);
}

/* concatenate along axes of symbolic widths, a field repeated. */
static void test_concatenate_symbolic(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%a: Tensor[(2, n), float64], %b: Tensor[(2, m), float64], %c: Tensor[(2, 2), float64]) {\n"
                       "  %0 = (%a, %c, %b, %a);\n"
                       "  %1 = concatenate(%0, axis=-1);\n"
                       "  multiply(%1, tanh(%1))\n"
                       "}\n";
    ry_value *a[3] = {rv2(2, 3), rv2(2, 1), rv2(2, 2)};
    check(text, 3, a, true, 1e-6);
    release_all(3, a);
    /* printed for TVM, cumsum names its attribute class (TVM's parser
     * cannot find it from the operator), and the text reads back here */
    ry_module *m = test_parse(text, true);
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
    char *t = ry_module_print_ex(m, &(ry_print_opts){.tvm = true});
    assert_non_null(strstr(t, "shape_of("));
    assert_non_null(strstr(t, "exclusive=True, attrs_type_key=\"relay.attrs.ScanopAttrs\")"));
    ry_module_free(test_parse(t, true));
    ry_free(t);
    ry_module_free(m);
}

/* A recursion that grows a tensor: acc (1, ?) gains tanh(x * sum(acc))
 * (1, 2) at each of k steps. */
static void test_concatenate_growing(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @grow(%acc: Tensor[(1, ?), float64], %x: Tensor[(1, 2), float64], %k: int32) -> Tensor[(1, ?), float64] {\n"
        "  if (%k == 0) {\n"
        "    %acc\n"
        "  } else {\n"
        "    %0 = tanh(multiply(%x, sum(%acc)));\n"
        "    %1 = (%acc, %0);\n"
        "    @grow(concatenate(%1, axis=1), %x, subtract(%k, 1))\n"
        "  }\n"
        "}\n"
        "def @main(%a: Tensor[(1, 1), float64], %x: Tensor[(1, 2), float64]) {\n"
        "  %0 = @grow(%a, %x, 3);\n"
        "  multiply(%0, %0)\n"
        "}\n";
    ry_value *a[2] = {rand_value(2, (int64_t[]){1, 1}, 0.2, 0.6), rand_value(2, (int64_t[]){1, 2}, -0.5, 0.5)};
    check(text, 2, a, false, 1e-6);
    release_all(2, a);
}

/* Convolutions and global pools with every dim of the data unknown: a
 * stride-2 conv2d whose floor drops a row or column at some sizes, a
 * dilated one with uneven padding, a transpose of it, and the global
 * average and max pools. */
static void test_conv_unknown_sizes(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(n, c, h, w), float64], %k: Tensor[(2, c, 3, 3), float64], %kt: Tensor[(2, 3, 2, 2), float64]) {\n"
        "  %0 = nn.conv2d(%x, %k, strides=[2, 2], padding=[1, 1, 1, 1]);\n"
        "  %1 = nn.conv2d(%x, %k, padding=[1, 0, 1, 2], dilation=[1, 2]);\n"
        "  %2 = nn.conv2d_transpose(%1, %kt, strides=[2, 1], padding=[0, 1, 0, 1]);\n"
        "  %3 = nn.global_avg_pool2d(%x);\n"
        "  %4 = nn.global_max_pool2d(%2);\n"
        "  (multiply(%0, %0), multiply(%2, %2), multiply(%3, %3), multiply(%4, %4))\n"
        "}\n";
    const int64_t sizes[2][4] = {{2, 2, 5, 6}, {1, 3, 4, 7}};
    for (int s = 0; s < 2; s++) {
        const int64_t *d = sizes[s];
        ry_value *a[3] = {rand_value(4, d, -1, 1), rand_value(4, (int64_t[]){2, d[1], 3, 3}, -1, 1),
                          rand_value(4, (int64_t[]){2, 3, 2, 2}, -1, 1)};
        check(text, 3, a, s == 1, 1e-4); /* sums of squares of ~1e2: the differences' noise */
        release_all(3, a);
    }
}

/* A weight whose output channels the types do not know, and no channels
 * attribute: the weight gradient (conv2d_backward_weight without channels)
 * takes them from dy when it runs; grouped too. */
static void test_conv_unknown_out_channels(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(?, ?, ?, ?), float64], %k: Tensor[(?, ?, 3, 3), float64], %g: Tensor[(?, ?, 2, 2), float64]) {\n"
        "  %0 = nn.conv2d(%x, %k, strides=[2, 2], padding=[1, 1], kernel_size=[3, 3]);\n"
        "  %1 = nn.conv2d(%0, %g, groups=2, kernel_size=[2, 2]);\n"
        "  multiply(%1, %1)\n"
        "}\n";
    const int64_t sizes[2][2] = {{2, 4}, {3, 6}}; /* (data channels, first output channels) */
    for (int s = 0; s < 2; s++) {
        int64_t c = sizes[s][0], o = sizes[s][1];
        ry_value *a[3] = {rand_value(4, (int64_t[]){2, c, 5, 6}, -1, 1),
                          rand_value(4, (int64_t[]){o, c, 3, 3}, -1, 1),
                          rand_value(4, (int64_t[]){4, o / 2, 2, 2}, -1, 1)};
        check(text, 3, a, s == 1, 1e-4);
        release_all(3, a);
    }
}

/* Pools over unknown sizes: the adaptive average pool's windows (of two
 * sizes, overlapping where the output does not divide the input) are
 * computed when the gradient runs; the adaptive max pool to 1 x 1 is the
 * global one; max_pool2d and avg_pool2d (ceil_mode, padding counted) take
 * their adjoint operators' shapes from the data. */
static void test_adaptive_pools_unknown_sizes(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(n, c, h, w), float64]) {\n"
        "  %0 = nn.adaptive_avg_pool2d(%x, output_size=[2, 3]);\n"
        "  %1 = nn.adaptive_avg_pool2d(%x, output_size=[3, 1]);\n"
        "  %2 = nn.adaptive_max_pool2d(%x, output_size=[1, 1]);\n"
        "  %3 = nn.max_pool2d(%x, pool_size=[3, 2], strides=[2, 2], padding=[1, 0, 1, 0], ceil_mode=True);\n"
        "  %4 = nn.avg_pool2d(%x, pool_size=[3, 3], strides=[2, 1], padding=[1, 1], count_include_pad=True);\n"
        "  (multiply(%0, %0), multiply(%1, %1), multiply(%2, %2), multiply(%3, %3), multiply(%4, %4))\n"
        "}\n";
    const int64_t sizes[3][4] = {{2, 2, 5, 7}, {1, 3, 4, 6}, {1, 1, 2, 2}};
    for (int s = 0; s < 3; s++) {
        ry_value *x = rand_value(4, sizes[s], -1, 1);
        check(text, 1, &x, s < 2, 1e-5); /* second order too: max_pool2d_grad's rule */
        ry_value_release(x);
    }
}

/* cumsum along an axis and over the flattened data, inclusive and
 * exclusive; its values on known input. */
static void test_cumsum(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(n, 3), float64]) {\n"
                       "  %0 = cumsum(%x, axis=1);\n"
                       "  %1 = cumsum(%x, exclusive=True);\n"
                       "  %2 = cumsum(%x, axis=-2, dtype=\"float64\", exclusive=True);\n"
                       "  (multiply(%0, %0), multiply(%1, %1), multiply(%2, %2))\n"
                       "}\n";
    ry_value *x = rv2(2, 3);
    check(text, 1, &x, true, 1e-5);
    ry_module *m = test_parse(text, true);
    ry_value *out = run(m, "main", 1, &x);
    const ry_tensor *t = x->tensor, *y0 = out->tuple.fields[0]->tensor, *y1 = out->tuple.fields[1]->tensor;
    double run0 = 0, run1 = 0;
    for (int64_t i = 0; i < 6; i++) {
        run0 = i % 3 == 0 ? ry_tensor_get(t, i) : run0 + ry_tensor_get(t, i);
        assert_float_equal(ry_tensor_get(y0, i), run0 * run0, 1e-12);
        assert_float_equal(ry_tensor_get(y1, i), run1 * run1, 1e-12);
        run1 += ry_tensor_get(t, i);
    }
    ry_value_release(out);
    ry_module_free(m);
    ry_value_release(x);
    /* to a narrower integer dtype the running sum wraps, as TVM's int8 adds do */
    m = test_parse("#[version = \"0.0.5\"]\n"
                   "def @main(%i: Tensor[(4), int32]) { cumsum(%i, dtype=\"int8\") }\n", true);
    ry_tensor *it = ry_tensor_new(RY_INT32, 1, (int64_t[]){4});
    for (int k = 0; k < 4; k++) ((int32_t *)it->data)[k] = 100;
    x = ry_value_tensor(it); /* takes over it */
    out = run(m, "main", 1, &x);
    const int8_t want[4] = {100, -56, 44, -112}; /* 100, 200, 300, 400 modulo 256 */
    for (int k = 0; k < 4; k++) assert_int_equal(((const int8_t *)out->tensor->data)[k], want[k]);
    ry_value_release(out);
    ry_module_free(m);
    ry_value_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_unknown_axis),
        cmocka_unit_test(test_take_axis_none_unknown_shape),
        cmocka_unit_test(test_concatenate_symbolic),
        cmocka_unit_test(test_concatenate_growing),
        cmocka_unit_test(test_conv_unknown_sizes),
        cmocka_unit_test(test_conv_unknown_out_channels),
        cmocka_unit_test(test_adaptive_pools_unknown_sizes),
        cmocka_unit_test(test_cumsum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
