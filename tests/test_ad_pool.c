/*
 * test_ad_pool.c: the gradient rules of src/op/grad_pool.c through
 * ry_gradcheck in float64. nn.adaptive_avg_pool2d and
 * nn.adaptive_max_pool2d at input and output sizes that divide, that do not
 * (windows of two sizes, overlapping), that upsample (output larger than
 * input) and global (1 x 1), with a symbolic batch; ties in max pooling go
 * to the first cell of each window, like max_pool2d; float32 programs
 * differentiate too. nn.max_pool2d_grad (max pooling's adjoint) with
 * strides, padding, dilation and ceil_mode, and the second derivatives of
 * max_pool2d and of the average pool that go through it. Also: every
 * registered operator has a rule or a no_grad mark, and the error that
 * lists the operators without one (rules hidden for the test).
 */
#include "test_util.h"

#include "op/grad_rules.h"
#include "relayc/ad.h"

/* not every helper is used here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ad/helpers.h"
#pragma GCC diagnostic pop

typedef struct pool_case {
    int64_t n, c, h, w, oh, ow;
} pool_case;

static const pool_case cases[] = {
    {2, 3, 4, 6, 2, 3}, /* divisible */
    {1, 2, 5, 7, 3, 4}, /* not divisible: windows of two sizes, overlapping */
    {2, 1, 3, 2, 5, 4}, /* output larger than input */
    {1, 2, 4, 5, 1, 1}, /* global */
    {1, 1, 7, 3, 7, 3}, /* identity */
};

static void program(char *buf, size_t n, const char *op, const pool_case *k, bool sym) {
    char batch[16];
    snprintf(batch, sizeof batch, "%lld", (long long)k->n);
    snprintf(buf, n,
             "#[version = \"0.0.5\"]\n"
             "def @main(%%x: Tensor[(%s, %lld, %lld, %lld), float64]) {\n"
             "  %%0 = %s(%%x, output_size=[%lld, %lld]);\n"
             "  multiply(%%0, %%0)\n"
             "}\n",
             sym ? "b" : batch, (long long)k->c, (long long)k->h, (long long)k->w, op,
             (long long)k->oh, (long long)k->ow);
}

static void check_op(const char *op) {
    int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < nc; i++)
        for (int sym = 0; sym < 2; sym++) {
            const pool_case *k = &cases[i];
            char text[600];
            program(text, sizeof text, op, k, sym);
            ry_value *x = rand_value(4, (int64_t[]){k->n, k->c, k->h, k->w}, -1, 1);
            char name[120];
            snprintf(name, sizeof name, "%s case %d%s", op, i, sym ? " (symbolic batch)" : "");
            current_case = name;
            ry_module *m = gradcheck_ok(text, "main", 1, &x, 1e-6, 1e-8);
            ry_module_free(m);
            ry_value_release(x);
        }
    current_case = "";
}

static void test_adaptive_avg(void **state) {
    (void)state;
    check_op("nn.adaptive_avg_pool2d");
}

static void test_adaptive_max(void **state) {
    (void)state;
    check_op("nn.adaptive_max_pool2d");
}

/* All-equal data: every window's maximum is tied; its g (ones) goes to the
 * window's first cell only, so dx counts the windows starting at a cell. */
static void test_adaptive_max_ties(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(1, 1, 5, 3), float64]) {\n"
                       "  nn.adaptive_max_pool2d(%x, output_size=[3, 2])\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    const char *gname = NULL;
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, &gname, &err)) fail_msg("%s", err.msg);
    ry_tensor *t = ry_tensor_new(RY_FLOAT64, 4, (int64_t[]){1, 1, 5, 3});
    for (int64_t j = 0; j < t->size; j++)
        ry_tensor_set(t, j, 0.5);
    ry_value *x = ry_value_tensor(t);
    ry_value *out = run(m, gname, 1, &x);
    const ry_tensor *dx = out->tuple.fields[1]->tuple.fields[0]->tensor;
    /* rows 5 -> 3: windows start at 0, 1, 3; cols 3 -> 2: at 0, 1 */
    double sum = 0;
    for (int64_t h = 0; h < 5; h++)
        for (int64_t w = 0; w < 3; w++) {
            double want = (h == 0 || h == 1 || h == 3) && (w == 0 || w == 1) ? 1 : 0;
            double got = ry_tensor_get(dx, h * 3 + w);
            sum += got;
            if (got != want) fail_msg("dx[%lld][%lld] = %g, expected %g", (long long)h,
                                      (long long)w, got, want);
        }
    assert_true(sum == 6);
    ry_value_release(out);
    ry_value_release(x);
    ry_module_free(m);
}

/* float32 programs get a float32 gradient: same values as float64 within
 * float32 precision. */
static void test_adaptive_float32(void **state) {
    (void)state;
    const char *ops[2] = {"nn.adaptive_avg_pool2d", "nn.adaptive_max_pool2d"};
    for (int o = 0; o < 2; o++) {
        char t32[600], t64[600];
        pool_case k = {2, 2, 5, 4, 3, 3};
        program(t64, sizeof t64, ops[o], &k, false);
        snprintf(t32, sizeof t32, "%s", t64);
        for (char *p = strstr(t32, "float64"); p; p = strstr(p, "float64"))
            memcpy(p, "float32", 7);
        ry_module *m32 = test_parse(t32, true), *m64 = test_parse(t64, true);
        const char *g32 = NULL, *g64 = NULL;
        ry_error err;
        if (ry_grad(m32, "main", NULL, NULL, &g32, &err)) fail_msg("%s", err.msg);
        if (ry_grad(m64, "main", NULL, NULL, &g64, &err)) fail_msg("%s", err.msg);
        ry_value *x64 = rand_value(4, (int64_t[]){2, 2, 5, 4}, -1, 1);
        ry_tensor *t = ry_tensor_new(RY_FLOAT32, 4, (int64_t[]){2, 2, 5, 4});
        for (int64_t j = 0; j < t->size; j++)
            ry_tensor_set(t, j, (float)ry_tensor_get(x64->tensor, j));
        ry_value *x32 = ry_value_tensor(t);
        ry_value_release(x64);
        x64 = ry_value_tensor(ry_tensor_new(RY_FLOAT64, 4, (int64_t[]){2, 2, 5, 4}));
        for (int64_t j = 0; j < t->size; j++) /* the same (float32) values */
            ry_tensor_set(x64->tensor, j, ry_tensor_get(t, j));
        ry_value *o32 = run(m32, g32, 1, &x32), *o64 = run(m64, g64, 1, &x64);
        const ry_tensor *d32 = o32->tuple.fields[1]->tuple.fields[0]->tensor;
        assert_int_equal(d32->dtype, RY_FLOAT32);
        test_assert_close(d32, o64->tuple.fields[1]->tuple.fields[0]->tensor, 1e-5, 1e-6);
        ry_value_release(o32);
        ry_value_release(o64);
        ry_value_release(x32);
        ry_value_release(x64);
        ry_module_free(m32);
        ry_module_free(m64);
    }
}

/* The average pool's rule is linear in g: its own gradient (a second
 * derivative through nn.dense, reshape and transpose) agrees too. */
static void test_adaptive_avg_second_order(void **state) {
    (void)state;
    char text[600];
    pool_case k = {1, 2, 5, 3, 2, 2};
    program(text, sizeof text, "nn.adaptive_avg_pool2d", &k, false);
    ry_module *m = test_parse(text, true);
    ry_value *x = rand_value(4, (int64_t[]){1, 2, 5, 3}, -1, 1);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8, .second_order = true};
    ry_gradcheck_report rep;
    ry_error err;
    if (ry_gradcheck(m, "main", 1, &x, &o, &rep, &err)) fail_msg("%s", err.msg);
    assert_true(rep.ok);
    assert_true(rep.second[0].checked);
    ry_value_release(x);
    ry_module_free(m);
}

/* max_pool2d_grad(dy, x) at several attribute settings: its gradient wrt
 * dy gathers the cotangent at each window's argmax; wrt x it is zero
 * (piecewise constant), which finite differences agree with away from ties. */
static void test_max_pool2d_grad_rule(void **state) {
    (void)state;
    static const struct {
        int64_t h, w, oh, ow;
        const char *attrs;
    } cs[] = {
        {4, 6, 2, 3, "pool_size=[2, 2], strides=[2, 2]"},
        {5, 5, 3, 3, "pool_size=[3, 3], strides=[1, 1]"},
        {5, 4, 3, 3, "pool_size=[3, 2], strides=[2, 2], padding=[1, 1]"},
        {6, 6, 2, 5, "pool_size=[2, 3], strides=[3, 1], dilation=[2, 1], padding=[0, 1, 1, 0]"},
        {5, 5, 3, 3, "pool_size=[2, 2], strides=[2, 2], ceil_mode=True"},
        {3, 3, 3, 3, "pool_size=[1, 1], strides=[2, 2], padding=[1, 1]"}, /* empty windows */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char text[700];
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\n"
                 "def @main(%%dy: Tensor[(2, 3, %lld, %lld), float64],\n"
                 "          %%x: Tensor[(2, 3, %lld, %lld), float64]) {\n"
                 "  %%0 = nn.max_pool2d_grad(%%dy, %%x, %s);\n"
                 "  multiply(%%0, tanh(%%0))\n"
                 "}\n",
                 (long long)cs[i].oh, (long long)cs[i].ow, (long long)cs[i].h, (long long)cs[i].w,
                 cs[i].attrs);
        ry_value *a[2] = {rand_value(4, (int64_t[]){2, 3, cs[i].oh, cs[i].ow}, -1, 1),
                          rand_value(4, (int64_t[]){2, 3, cs[i].h, cs[i].w}, -1, 1)};
        char name[100];
        snprintf(name, sizeof name, "max_pool2d_grad case %zu", i);
        current_case = name;
        ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
        ry_module_free(m);
        release_all(2, a);
    }
    current_case = "";
}

/* Second derivatives through max pooling (a Hessian-vector product needs
 * max_pool2d_grad's rule), padded and overlapping windows. */
static void test_max_pool2d_second_order(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(1, 2, 5, 5), float64]) {\n"
                       "  %0 = nn.max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], "
                       "padding=[1, 1]);\n"
                       "  %1 = nn.adaptive_max_pool2d(multiply(%0, %0), output_size=[2, 2]);\n"
                       "  multiply(%1, tanh(%1))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_value *x = rand_value(4, (int64_t[]){1, 2, 5, 5}, -1, 1);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .second_order = true};
    ry_gradcheck_report rep;
    ry_error err;
    if (ry_gradcheck(m, "main", 1, &x, &o, &rep, &err)) fail_msg("%s", err.msg);
    if (!rep.ok)
        fprintf(stderr, "first %.3g, second %.3g\n", rep.params[0].max_abs, rep.second[0].max_abs);
    assert_true(rep.ok);
    assert_true(rep.second[0].checked);
    ry_value_release(x);
    ry_module_free(m);
}

/* ---- rule coverage ---- */

/* Every registered operator has a gradient rule or a no_grad mark. */
static void test_every_op_has_rule(void **state) {
    (void)state;
    for (int i = 0; i < ry_op_count(); i++) {
        const ry_op *op = ry_op_at(i);
        ry_grad_rule r;
        if (!ry_grad_rule_lookup(op, &r)) fail_msg("%s has no gradient rule", op->name);
    }
}

/* Every operator without a rule is named in one error, located at the
 * first. No operator lacks one today, so the test hides two rules (the
 * adaptive pools'); nn.max_pool2d_grad, called twice between them, keeps
 * its rule and is not listed, tanh neither, and nothing is added to m. */
static void test_missing_rules(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(1, 2, 4, 4), float64]) {\n"
                       "  %0 = nn.adaptive_avg_pool2d(%x, output_size=[2, 2]);\n"
                       "  %1 = nn.max_pool2d_grad(%0, %x, pool_size=[2, 2], strides=[2, 2]);\n"
                       "  %2 = nn.adaptive_max_pool2d(%1, output_size=[1, 1]);\n"
                       "  %3 = nn.max_pool2d_grad(%2, %1, pool_size=[4, 4]);\n"
                       "  %4 = nn.adaptive_avg_pool2d(%3, output_size=[1, 1]);\n"
                       "  add(sum(%3), sum(tanh(%4)))\n"
                       "}\n";
    const char *hide[2] = {"nn.adaptive_avg_pool2d", "nn.adaptive_max_pool2d"};
    ry_module *m = test_parse(text, true);
    int nglobals = m->nglobals;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_grad_rules_hide_for_test(2, hide);
    ry_status st = ry_grad(m, "main", NULL, NULL, NULL, &err);
    ry_grad_rules_hide_for_test(0, NULL);
    assert_int_equal(st, RY_ERR);
    assert_non_null(strstr(err.msg, "no gradient rule for operators"));
    for (int i = 0; i < 2; i++) { /* each listed once, though called twice */
        const char *p = strstr(err.msg, hide[i]);
        assert_non_null(p);
        assert_null(strstr(p + 1, hide[i]));
    }
    assert_null(strstr(err.msg, "max_pool2d_grad"));
    assert_null(strstr(err.msg, "tanh"));
    assert_int_equal(err.line, 3);
    assert_int_equal(m->nglobals, nglobals); /* nothing added */
    /* with the rules back, the same program differentiates */
    assert_int_equal(ry_grad(m, "main", NULL, NULL, NULL, &err), RY_OK);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adaptive_avg),
        cmocka_unit_test(test_adaptive_max),
        cmocka_unit_test(test_adaptive_max_ties),
        cmocka_unit_test(test_adaptive_float32),
        cmocka_unit_test(test_adaptive_avg_second_order),
        cmocka_unit_test(test_max_pool2d_grad_rule),
        cmocka_unit_test(test_max_pool2d_second_order),
        cmocka_unit_test(test_every_op_has_rule),
        cmocka_unit_test(test_missing_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
