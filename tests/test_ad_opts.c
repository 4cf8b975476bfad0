/*
 * test_ad_opts.c: the options of ry_grad_ex. The mode (training or
 * inference) chosen when the gradient is built, checked against finite
 * differences in both modes, on the degenerate inputs (all-zero data) that
 * fooled the old run-time guess, and dropout's mask shared with the forward
 * on the interpreter and the VM; `wrt` (gradients of some parameters only,
 * and the work for the others gone from the optimized MLP gradient); and
 * the errors of bad options.
 */
#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"

#include "ad/helpers.h"

/* Runs @name with interpreter options io; returns the result. */
static ry_value *run_io(ry_module *m, const char *name, int nargs, ry_value **args,
                        const ry_interp_opts *io) {
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, name, nargs, args, io, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("run of @%s failed: %s", name, err.msg);
    }
    return out;
}

/* ry_gradcheck in one mode (it builds the gradient for the mode its runs
 * are made in); every float parameter must be checked and agree. */
static void check_mode(const char *text, int nargs, ry_value **a, bool training) {
    ry_module *m = test_parse(text, true);
    ry_interp_opts io = {.training = training, .seed = 7};
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .interp = &io};
    ry_gradcheck_report rep;
    ry_error err;
    if (ry_gradcheck(m, "main", nargs, a, &o, &rep, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < rep.nparams; i++)
        if (!rep.params[i].ok)
            fprintf(stderr, "training=%d %%%s: abs %.3g rel %.3g\n", training,
                    rep.params[i].name, rep.params[i].max_abs, rep.params[i].max_rel);
    assert_true(rep.ok);
    ry_module_free(m);
}

static ry_value *filled(int ndim, const int64_t *shape, double v) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT64, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, v);
    return ry_value_tensor(t);
}

static const char *bn_text = "#[version = \"0.0.5\"]\n"
                             "def @main(%x: Tensor[(4, 3, 2), float64], %g: Tensor[(3), float64],\n"
                             "          %b: Tensor[(3), float64], %mm: Tensor[(3), float64],\n"
                             "          %mv: Tensor[(3), float64]) {\n"
                             "  %0 = nn.batch_norm(%x, %g, %b, %mm, %mv);\n"
                             "  (multiply(%0.0, %0.0), multiply(%0.1, %0.1), %0.2)\n"
                             "}\n";

/* batch_norm in both modes; with an all-zero input (the batch statistics
 * then are 0 and 0) and moving statistics (0, 0) the primal results of the
 * two modes coincide, which made the old guess take inference's adjoint in
 * training. */
static void test_batch_norm_modes(void **state) {
    (void)state;
    for (int degenerate = 0; degenerate < 2; degenerate++)
        for (int training = 0; training < 2; training++) {
            int64_t s3[] = {3}, sx[] = {4, 3, 2};
            ry_value *a[5] = {degenerate ? filled(3, sx, 0) : rand_value(3, sx, -1, 1), rv1(3),
                              rv1(3), degenerate ? filled(1, s3, 0) : rv1(3),
                              degenerate ? filled(1, s3, 0) : rand_value(1, s3, 0.5, 2)};
            check_mode(bn_text, 5, a, training);
            if (degenerate && training) {
                /* new_var = 0.9 mv + 0.1 var_unbiased(x) is returned as is:
                 * d mv = 0.9 exactly (inference would give 1, the old
                 * guess's answer here) */
                ry_module *m = test_parse(bn_text, true);
                const char *gname = NULL;
                ry_error err;
                if (ry_grad(m, "main", NULL, NULL, &gname, &err)) fail_msg("%s", err.msg);
                ry_interp_opts io = {.training = true, .seed = 1};
                ry_value *out = run_io(m, gname, 5, a, &io);
                const ry_tensor *dmv = out->tuple.fields[1]->tuple.fields[4]->tensor;
                for (int i = 0; i < 3; i++)
                    assert_true(fabs(ry_tensor_get(dmv, i) - 0.9) < 1e-12);
                ry_value_release(out);
                ry_module_free(m);
            }
            release_all(5, a);
        }
}

/* The same inference-mode gradient with ry_grad_ex: d mv = 1 - 0.5 * ... */
static void test_batch_norm_inference_explicit(void **state) {
    (void)state;
    int64_t s3[] = {3}, sx[] = {4, 3, 2};
    ry_value *a[5] = {filled(3, sx, 0), rv1(3), rv1(3), filled(1, s3, 0), filled(1, s3, 1)};
    ry_module *m = test_parse(bn_text, true);
    const char *gname = NULL;
    ry_error err;
    ry_grad_opts go = {.inference = true};
    if (ry_grad_ex(m, "main", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
    ry_value *out = run_io(m, gname, 5, a, NULL);
    /* at inference out = (x - mm) g / sqrt(mv + eps) + b = b (x = mm = 0):
     * d mv = 1 (the passed-through output) - 0.5 sum(2 out g (x - mm) ..) = 1 */
    const ry_tensor *dmv = out->tuple.fields[1]->tuple.fields[4]->tensor;
    const ry_tensor *dx = out->tuple.fields[1]->tuple.fields[0]->tensor;
    const ry_tensor *g = a[1]->tensor, *b = a[2]->tensor;
    double rstd = 1 / sqrt(1 + 1e-5);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ry_tensor_get(dmv, i) - 1) < 1e-12);
    for (int64_t j = 0; j < dx->size; j++) { /* dx = 2 out g rstd, out = b */
        int ch = (int)((j / 2) % 3);
        double want = 2 * ry_tensor_get(b, ch) * ry_tensor_get(g, ch) * rstd;
        assert_true(fabs(ry_tensor_get(dx, j) - want) < 1e-9);
    }
    ry_value_release(out);
    ry_module_free(m);
    release_all(5, a);
}

/* dropout: rate 0 keeps every element (training output = input, mask all
 * ones); with rate 0.5 the training gradient is g * mask * 2 with the
 * forward call's own mask. */
static void test_dropout_modes(void **state) {
    (void)state;
    static const char *fmt = "#[version = \"0.0.5\"]\n"
                             "def @main(%%x: Tensor[(6, 5), float64]) {\n"
                             "  %%0 = nn.dropout(%%x, rate=%s);\n"
                             "  (multiply(%%0.0, %%x), %%0.1)\n"
                             "}\n";
    const char *rates[] = {"0f", "0.5f"};
    for (int r = 0; r < 2; r++)
        for (int training = 0; training < 2; training++) {
            char text[400];
            snprintf(text, sizeof text, fmt, rates[r]);
            ry_value *x = rv2(6, 5);
            check_mode(text, 1, &x, training);
            /* the gradient of sum(out * x): training 2 x mask / (1 - rate),
             * inference 2 x; the mask is the one the same run returned */
            ry_module *m = test_parse(text, true);
            ry_grad_opts go = {.inference = !training};
            const char *gname = NULL;
            ry_error err;
            if (ry_grad_ex(m, "main", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
            ry_interp_opts io = {.training = training, .seed = 3};
            ry_value *out = run_io(m, gname, 1, &x, &io);
            const ry_tensor *mask = out->tuple.fields[0]->tuple.fields[1]->tensor;
            const ry_tensor *dx = out->tuple.fields[1]->tuple.fields[0]->tensor;
            double scale = training ? 1 / (1 - 0.5 * r) : 1;
            int kept = 0;
            for (int64_t j = 0; j < dx->size; j++) {
                double xv = ry_tensor_get(x->tensor, j), mk = ry_tensor_get(mask, j);
                kept += mk != 0;
                double want = mk * (xv * scale + xv * scale);
                assert_true(fabs(ry_tensor_get(dx, j) - want) < 1e-12);
            }
            if (r == 0 || !training) assert_int_equal(kept, (int)dx->size);
            if (r == 1 && training) assert_true(kept > 0 && kept < (int)dx->size);
            ry_value_release(out);
            ry_module_free(m);
            ry_value_release(x);
        }
}

/* An all-zero input: dropout's training output equals its input (0), so
 * the old guess took the inference adjoint dx = g; the training adjoint is
 * g * mask / (1 - rate), here with g = w. */
static void test_dropout_zero_input(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(6, 5), float64], %w: Tensor[(6, 5), float64]) {\n"
                       "  %0 = nn.dropout(%x, rate=0.5f);\n"
                       "  (multiply(%0.0, %w), %0.1)\n"
                       "}\n";
    for (int training = 0; training < 2; training++) {
        ry_value *a[2] = {filled(2, (int64_t[]){6, 5}, 0), rv2(6, 5)};
        check_mode(text, 2, a, training);
        ry_module *m = test_parse(text, true);
        ry_grad_opts go = {.inference = !training};
        const char *gname = NULL;
        ry_error err;
        if (ry_grad_ex(m, "main", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
        ry_interp_opts io = {.training = training, .seed = 11};
        ry_value *out = run_io(m, gname, 2, a, &io);
        const ry_tensor *mask = out->tuple.fields[0]->tuple.fields[1]->tensor;
        const ry_tensor *dx = out->tuple.fields[1]->tuple.fields[0]->tensor;
        int dropped = 0;
        for (int64_t j = 0; j < dx->size; j++) {
            double mk = ry_tensor_get(mask, j), w = ry_tensor_get(a[1]->tensor, j);
            dropped += mk == 0;
            double want = training ? w * mk * 2 : w;
            assert_true(fabs(ry_tensor_get(dx, j) - want) < 1e-15);
        }
        assert_true(training ? dropped > 0 : dropped == 0);
        ry_value_release(out);
        ry_module_free(m);
        release_all(2, a);
    }
}

/* The compiled engine draws the same masks as the interpreter for the same
 * seed, and the training gradient, optimized or not, uses the forward's own
 * mask there too: the whole result agrees with the interpreter's. */
static void test_dropout_gradient_on_vm(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(8, 6), float64], %w: Tensor[(6, 6), float64]) {\n"
                       "  %0 = nn.dropout(tanh(%x), rate=0.4f);\n"
                       "  %1 = nn.dropout(nn.dense(%0.0, %w), rate=0.3f);\n"
                       "  sum(multiply(%1.0, %1.0))\n"
                       "}\n";
    ry_value *a[2] = {rv2(8, 6), rv2(6, 6)};
    check_mode(text, 2, a, true);
    for (int opt = 0; opt < 2; opt++) {
        ry_module *m = test_parse(text, true);
        const char *gname = NULL;
        ry_error err;
        if (ry_grad(m, "main", NULL, NULL, &gname, &err)) fail_msg("%s", err.msg);
        if (opt && ry_optimize(m, 2, &err)) fail_msg("%s", err.msg);
        ry_interp_opts io = {.training = true, .seed = 5};
        ry_value *oi = run_io(m, gname, 2, a, &io), *ov = NULL;
        ry_vm_program *prog = NULL;
        ry_vm_opts vo = {.training = true, .seed = 5};
        if (ry_vm_compile(m, NULL, &prog, &err) || ry_vm_call(prog, gname, 2, a, &vo, &ov, &err))
            fail_msg("%s", err.msg);
        test_assert_close(ov->tuple.fields[0]->tensor, oi->tuple.fields[0]->tensor, 1e-12, 1e-14);
        for (int i = 0; i < 2; i++)
            test_assert_close(ov->tuple.fields[1]->tuple.fields[i]->tensor,
                              oi->tuple.fields[1]->tuple.fields[i]->tensor, 1e-12, 1e-14);
        ry_value_release(oi);
        ry_value_release(ov);
        ry_vm_free(prog);
        ry_module_free(m);
    }
    release_all(2, a);
}

/* ---- wrt ---- */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = ry_calloc((size_t)n + 1, 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static int count_substr(const char *s, const char *pat) {
    int n = 0;
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat))
        n++;
    return n;
}

/* GEMMs in @name's printed body: calls of nn.dense, nn.matmul,
 * nn.batch_matmul, and the fused operators built around one
 * (fused.matmul3, ...: the optimizer fuses epilogues into the GEMM). */
static int count_gemms(ry_module *m, const char *name) {
    ry_global *g = ry_module_find_global(m, name);
    assert_non_null(g);
    char *t = ry_expr_print(g->func);
    assert_non_null(t);
    int n = count_substr(t, "dense") + count_substr(t, "matmul");
    ry_free(t);
    return n;
}

/* The MLP's @loss (x, y, w1, b1, w2, b2, w3, b3) in float64 with batch 4,
 * differentiated wrt everything and wrt the weights and biases only, each
 * optimized: the second has one GEMM fewer (the first layer's input
 * gradient, dx = g w1, is gone) and the same values. */
static ry_module *mlp_grad(const char *text, const bool *wrt, int nwrt, const char **gname) {
    ry_module *m = test_parse(text, true);
    ry_error err;
    if (ry_module_to_float64(m, &err)) fail_msg("%s", err.msg);
    ry_grad_opts go = {.wrt = wrt, .nwrt = nwrt};
    if (ry_grad_ex(m, "loss", NULL, NULL, &go, gname, &err)) fail_msg("%s", err.msg);
    if (ry_optimize(m, 2, &err)) fail_msg("%s", err.msg);
    return m;
}

static void test_wrt_mlp(void **state) {
    (void)state;
    char *text = read_file("models/mlp.relay");
    bool params_only[8] = {false, false, true, true, true, true, true, true};
    const char *gall = NULL, *gw = NULL;
    ry_module *mall = mlp_grad(text, NULL, 0, &gall);
    ry_module *mw = mlp_grad(text, params_only, 8, &gw);
    int nall = count_gemms(mall, gall), nw = count_gemms(mw, gw);
    fprintf(stderr, "MLP gradient GEMMs: all %d, weights only %d\n", nall, nw);
    assert_int_equal(nw, nall - 1);
    assert_int_equal(nall, 3 + 3 + 3); /* forward, weight and input gradients */

    int64_t n = 4, shapes[8][2] = {{n, 784}, {n, 0}, {256, 784}, {256, 0},
                                   {128, 256}, {128, 0}, {10, 128}, {10, 0}};
    ry_value *a[8];
    for (int i = 0; i < 8; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        a[i] = rand_value(nd, shapes[i], -0.1, 0.1);
    }
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, (int64_t[]){n});
    for (int64_t j = 0; j < n; j++)
        ry_tensor_set(y, j, (double)(j * 3 % 10));
    ry_value_release(a[1]);
    a[1] = ry_value_tensor(y);
    ry_value *oall = run(mall, gall, 8, a), *ow = run(mw, gw, 8, a);
    const ry_value *dall = oall->tuple.fields[1], *dw = ow->tuple.fields[1];
    assert_int_equal(dall->tuple.n, 8);
    assert_int_equal(dw->tuple.n, 6);
    /* the same operations on the same values, up to how the optimizer fused
     * them (float64: any difference is rounding) */
    test_assert_close(ow->tuple.fields[0]->tensor, oall->tuple.fields[0]->tensor, 1e-12, 1e-15);
    for (int i = 0; i < 6; i++)
        test_assert_close(dw->tuple.fields[i]->tensor, dall->tuple.fields[i + 2]->tensor, 1e-12,
                          1e-15);
    ry_value_release(oall);
    ry_value_release(ow);
    release_all(8, a);
    ry_module_free(mall);
    ry_module_free(mw);
    ry_free(text);
}

/* wrt picks gradients in parameter order, through tuples and a second
 * derivative too (the gradient of a wrt-gradient) */
static void test_wrt_small(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64], %p: (Tensor[(3), float64], "
                       "Tensor[(3), float64]), %z: Tensor[(3), float64]) {\n"
                       "  multiply(multiply(%x, %p.0), add(%p.1, %z))\n"
                       "}\n";
    ry_value *x = rv1(3), *z = rv1(3), *p0 = rv1(3), *p1 = rv1(3);
    ry_value *pf[2] = {p0, p1};
    ry_value *p = ry_value_tuple(2, pf);
    ry_value *a[3] = {x, p, z};
    ry_module *m = gradcheck_ok(text, "main", 3, a, 1e-6, 1e-8); /* the full gradient is right */
    bool wrt[3] = {false, true, true};
    ry_grad_opts go = {.wrt = wrt, .nwrt = 3};
    const char *gname = NULL, *gall = NULL;
    ry_error err;
    if (ry_grad_ex(m, "main", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
    if (ry_grad(m, "main", NULL, NULL, &gall, &err)) fail_msg("%s", err.msg);
    ry_value *o = run(m, gname, 3, a), *oa = run(m, gall, 3, a);
    const ry_value *d = o->tuple.fields[1], *da = oa->tuple.fields[1];
    assert_int_equal(d->tuple.n, 2);
    for (int k = 0; k < 2; k++)
        test_assert_close(d->tuple.fields[0]->tuple.fields[k]->tensor,
                          da->tuple.fields[1]->tuple.fields[k]->tensor, 0, 0);
    test_assert_close(d->tuple.fields[1]->tensor, da->tuple.fields[2]->tensor, 0, 0);
    for (int i = 0; i < 3; i++) { /* d z = x p0 exactly */
        double want = ry_tensor_get(x->tensor, i) * ry_tensor_get(p0->tensor, i);
        assert_true(fabs(ry_tensor_get(d->tuple.fields[1]->tensor, i) - want) < 1e-15);
    }
    /* differentiated again, wrt x only: the gradient of sum(f) + sum(df/dp, df/dz) */
    bool wrt2[3] = {true, false, false};
    go = (ry_grad_opts){.wrt = wrt2, .nwrt = 3};
    const char *g2 = NULL;
    if (ry_grad_ex(m, gname, NULL, NULL, &go, &g2, &err)) fail_msg("%s", err.msg);
    ry_value *o2 = run(m, g2, 3, a);
    assert_int_equal(o2->tuple.fields[1]->tuple.n, 1);
    /* d/dx [x p0 (p1 + z) + x (p1 + z) + x p0 + x p0] = p0 (p1 + z) + p1 + z + 2 p0 */
    const ry_tensor *dx2 = o2->tuple.fields[1]->tuple.fields[0]->tensor;
    for (int i = 0; i < 3; i++) {
        double q0 = ry_tensor_get(p0->tensor, i), q1 = ry_tensor_get(p1->tensor, i);
        double zz = ry_tensor_get(z->tensor, i);
        assert_true(fabs(ry_tensor_get(dx2, i) - (q0 * (q1 + zz) + q1 + zz + 2 * q0)) < 1e-12);
    }
    assert_true(roundtrip(m) > 0);
    ry_value_release(o);
    ry_value_release(oa);
    ry_value_release(o2);
    ry_value_release(x);
    ry_value_release(z);
    ry_value_release(p);
    ry_module_free(m);
}

/* An RNN over the time axis of float data of unknown length: with the
 * gradient taken wrt the weights only, take's rule for the data (a scatter
 * that clips at the axis's length, read at run time) is never built; wrt
 * everything it is. Both gradients equal the full gradient of the same
 * program over a known length, which finite differences check. */
static const char *rnn_text(char *buf, size_t n, const char *t) {
    snprintf(buf, n,
             "#[version = \"0.0.5\"]\n"
             "def @step(%%x: Tensor[(2, %s), float64], %%i: int32, %%h: Tensor[(2), float64], "
             "%%w: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
             "  if (equal(%%i, 0)) {\n"
             "    %%h\n"
             "  } else {\n"
             "    %%0 = take(%%x, %%i, axis=1);\n"
             "    %%1 = tanh(add(multiply(%%h, %%w), %%0));\n"
             "    @step(%%x, subtract(%%i, 1), %%1, %%w)\n"
             "  }\n"
             "}\n"
             "def @main(%%x: Tensor[(2, %s), float64], %%h: Tensor[(2), float64], "
             "%%w: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
             "  @step(%%x, 3, %%h, %%w)\n"
             "}\n",
             t, t);
    return buf;
}

static void test_wrt_prunes_inactive_rules(void **state) {
    (void)state;
    char text[2048];
    int64_t sx[2] = {2, 5}, sv[1] = {2};
    ry_value *x = ry_value_tensor(ry_tensor_new(RY_FLOAT64, 2, sx));
    ry_value *h = ry_value_tensor(ry_tensor_new(RY_FLOAT64, 1, sv));
    ry_value *w = ry_value_tensor(ry_tensor_new(RY_FLOAT64, 1, sv));
    for (int i = 0; i < 10; i++) ry_tensor_set(x->tensor, i, urand());
    for (int i = 0; i < 2; i++) ry_tensor_set(h->tensor, i, urand()), ry_tensor_set(w->tensor, i, urand());
    ry_value *a[3] = {x, h, w};
    ry_module *fixed = gradcheck_ok(rnn_text(text, sizeof text, "5"), "main", 3, a, 1e-6, 1e-8);
    const char *gfull = NULL;
    ry_error err;
    if (ry_grad(fixed, "main", NULL, NULL, &gfull, &err)) fail_msg("%s", err.msg);

    ry_value *want = run(fixed, gfull, 3, a);
    ry_module *m = test_parse(rnn_text(text, sizeof text, "t"), true);
    const char *g = NULL;
    if (ry_grad(m, "main", NULL, NULL, &g, &err)) fail_msg("%s", err.msg);
    char *printed = ry_module_print(m);
    assert_non_null(printed);
    assert_non_null(strstr(printed, "scatter_nd"));
    ry_free(printed);
    ry_value *full[2] = {run(m, g, 3, a), run_vm(m, g, 3, a)};
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 3; j++)
            test_assert_close(full[k]->tuple.fields[1]->tuple.fields[j]->tensor,
                              want->tuple.fields[1]->tuple.fields[j]->tensor, 1e-12, 1e-14);
        ry_value_release(full[k]);
    }
    ry_module_free(m);
    m = test_parse(rnn_text(text, sizeof text, "t"), true);
    bool wrt[3] = {false, true, true};
    ry_grad_opts go = {.wrt = wrt, .nwrt = 3};
    if (ry_grad_ex(m, "main", NULL, NULL, &go, &g, &err)) fail_msg("%s", err.msg);
    printed = ry_module_print(m);
    assert_null(strstr(printed, "scatter_nd"));
    ry_free(printed);
    ry_value *outs[2] = {run(m, g, 3, a), run_vm(m, g, 3, a)};
    for (int k = 0; k < 2; k++) {
        const ry_value *d = outs[k]->tuple.fields[1];
        assert_int_equal(d->tuple.n, 2);
        for (int j = 0; j < 2; j++)
            test_assert_close(d->tuple.fields[j]->tensor,
                              want->tuple.fields[1]->tuple.fields[j + 1]->tensor, 1e-12, 1e-14);
        ry_value_release(outs[k]);
    }
    ry_value_release(want);
    ry_value_release(x);
    ry_value_release(h);
    ry_value_release(w);
    ry_module_free(m);
    ry_module_free(fixed);
}

static void test_wrt_errors(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64]) { multiply(%x, %x) }\n";
    ry_module *m = test_parse(text, true);
    bool wrt[2] = {true, true};
    ry_grad_opts go = {.wrt = wrt, .nwrt = 2};
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_grad_ex(m, "main", NULL, NULL, &go, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "wrt has 2 flags"));
    assert_null(ry_module_find_global(m, "main_gradient"));
    /* none at all: an empty gradient tuple */
    bool none[1] = {false};
    go = (ry_grad_opts){.wrt = none, .nwrt = 1};
    const char *gname = NULL;
    assert_int_equal(ry_grad_ex(m, "main", NULL, NULL, &go, &gname, &err), RY_OK);
    ry_value *x = rv1(3);
    ry_value *o = run(m, gname, 1, &x);
    assert_int_equal(o->tuple.fields[1]->tuple.n, 0);
    ry_value_release(o);
    ry_value_release(x);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm_modes),
        cmocka_unit_test(test_batch_norm_inference_explicit),
        cmocka_unit_test(test_dropout_modes),
        cmocka_unit_test(test_dropout_zero_input),
        cmocka_unit_test(test_dropout_gradient_on_vm),
        cmocka_unit_test(test_wrt_mlp),
        cmocka_unit_test(test_wrt_prunes_inactive_rules),
        cmocka_unit_test(test_wrt_small),
        cmocka_unit_test(test_wrt_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
