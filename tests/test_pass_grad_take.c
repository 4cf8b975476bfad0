/*
 * test_pass_grad_take.c: the gradient rule of take with one scalar index
 * along the last axis (src/op/grad_transform.c: one where instead of
 * zeros + scatter_nd + reshapes, the per-node loss of the recursive
 * models): against central finite differences in float64 for every index
 * mode, ranks 1 to 3, an int64 index and an index out of range, and the
 * IR it builds.
 */
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "test_util.h"

static ry_error err;

static ry_value *data(int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT64, nd, shape);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, 0.25 * (double)(i % 7) - 0.6);
    return ry_value_tensor(t);
}

/* Gradient-checks sum(exp(take(%x, %i, axis, mode)) * 2) at index i. */
static void check(const char *xtype, const char *itype, int nd, const int64_t *shape, int axis,
                  const char *mode, double i) {
    char text[1024];
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\n"
             "def @main(%%x: Tensor[%s, float64], %%i: %s) {\n"
             "  %%0 = take(%%x, %%i, axis=%d, mode=\"%s\");\n  %%1 = exp(%%0);\n"
             "  multiply(%%1, 2f64)\n}\n",
             xtype, itype, axis, mode);
    ry_module *m = test_parse(text, true);
    ry_value *a[2] = {data(nd, shape),
                      ry_value_tensor(ry_tensor_scalar(itype[3] == '6' ? RY_INT64 : RY_INT32, i))};
    ry_gradcheck_opts o = {0};
    ry_gradcheck_report rep;
    if (ry_gradcheck(m, "main", 2, a, &o, &rep, &err)) fail_msg("%s", err.msg);
    if (!rep.ok) fail_msg("%s, %s, %s, index %g: gradient off by %g", xtype, itype, mode, i,
                          rep.params[0].max_abs);
    assert_true(rep.params[0].checked);
    ry_value_release(a[0]);
    ry_value_release(a[1]);
    ry_module_free(m);
}

static void matches_finite_differences(void **state) {
    (void)state;
    const int64_t s1[1] = {5}, s2[2] = {3, 5}, s3[3] = {2, 3, 4};
    check("(5)", "int32", 1, s1, 0, "clip", 3);
    check("(3, 5)", "int32", 2, s2, 1, "clip", 4);
    check("(3, 5)", "int32", 2, s2, -1, "fast", 0);
    check("(3, 5)", "int64", 2, s2, 1, "clip", 2);
    check("(3, 5)", "int32", 2, s2, 1, "clip", 9);   /* clipped to 4 */
    check("(3, 5)", "int32", 2, s2, 1, "clip", -2);  /* clipped to 0 */
    check("(2, 3, 4)", "int32", 3, s3, 2, "clip", 1);
    check("(3, 5)", "int32", 2, s2, 1, "wrap", 7);   /* wrap: the scatter rule */
    check("(3, 5)", "int32", 2, s2, 0, "clip", 1);   /* another axis: the scatter rule */
}

static void builds_one_where(void **state) {
    (void)state;
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(1, 5), float32], %i: int32) {\n"
                              "  %0 = nn.log_softmax(%x);\n  %1 = take(%0, %i, axis=1);\n"
                              "  negative(%1)\n}\n",
                              true);
    const char *gname = NULL;
    if (ry_grad(m, "main", NULL, NULL, &gname, &err)) fail_msg("%s", err.msg);
    if (ry_optimize(m, 2, &err)) fail_msg("%s", err.msg);
    char *s = ry_module_print(m);
    assert_null(strstr(s, "scatter_nd"));
    assert_non_null(strstr(s, "where("));
    ry_free(s);
    /* and the gradient program runs: d(-log_softmax(x)[i])/dx = softmax(x) - onehot(i) */
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, (const int64_t[]){1, 5});
    for (int k = 0; k < 5; k++) ry_tensor_set(x, k, 0.5 * k - 1);
    ry_value *a[2] = {ry_value_tensor(x), ry_value_tensor(ry_tensor_scalar(RY_INT32, 3))};
    ry_vm_program *p = NULL;
    if (ry_vm_compile(m, NULL, &p, &err)) fail_msg("%s", err.msg);
    ry_value *r = NULL;
    if (ry_vm_call(p, gname, 2, a, NULL, &r, &err)) fail_msg("%s", err.msg);
    ry_tensor *ts[4];
    assert_int_equal(ry_value_flatten(r, ts, 4), 3); /* result, dx, di */
    double z = 0;
    for (int k = 0; k < 5; k++) z += exp(0.5 * k - 1);
    for (int k = 0; k < 5; k++)
        assert_true(fabs(ry_tensor_get(ts[1], k) - (exp(0.5 * k - 1) / z - (k == 3))) < 1e-6);
    ry_value_release(r);
    ry_vm_free(p);
    ry_value_release(a[0]);
    ry_value_release(a[1]);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_finite_differences),
        cmocka_unit_test(builds_one_where),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
