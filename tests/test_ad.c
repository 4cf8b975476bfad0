/*
 * test_ad.c: the gradient transform (ry_grad), gradient checking
 * (ry_gradcheck) and float64 promotion. Each program is differentiated, its
 * gradient compared in float64 with central finite differences through the
 * interpreter (some also with PyTorch: tests/ad/<model>/), and the gradient
 * program printed, re-parsed and type-checked again. Covered: every
 * gradient rule (tests/ad/op_cases.h), an MLP, if, recursion over a list, a
 * TreeLSTM, an LSTM, closures and higher-order functions, refs, constants,
 * tuples, ADT parameters and results, shared subexpressions, mutual
 * recursion, symbolic dims, second derivatives and a Hessian-vector
 * product, TVM-style float32 programs (tests/ad/programs/), and the errors.
 */
#include "test_util.h"

#include "op/grad_rules.h"
#include "relayc/ad.h"

#include "ad/helpers.h"
#include "ad/models.h"

/* ---- straight-line programs ---- */

static void test_square(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64]) {\n"
                       "  multiply(%x, %x)\n"
                       "}\n";
    ry_value *x = rv1(3);
    ry_module *m = gradcheck_ok(text, "main", 1, &x, 1e-6, 1e-8);
    /* the gradient of sum(x * x) is 2x exactly */
    ry_value *out = run(m, "main_gradient", 1, &x);
    const ry_tensor *g = out->tuple.fields[1]->tuple.fields[0]->tensor;
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ry_tensor_get(g, i) - 2 * ry_tensor_get(x->tensor, i)) < 1e-12);
    const ry_tensor *y = out->tuple.fields[0]->tensor;
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ry_tensor_get(y, i) - pow(ry_tensor_get(x->tensor, i), 2)) < 1e-12);
    ry_value_release(out);
    ry_value_release(x);
    ry_module_free(m);
}

/* broadcast_to_like (in TVM's first-order gradient programs): x broadcast
 * to like's shape, in x's dtype; dx sums g back, like gets no gradient. The
 * forward values on both engines, the gradient against finite differences. */
static void test_broadcast_to_like(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3, 1), float64], %like: Tensor[(2, 3, 4), float64]) {\n"
                       "  %0 = broadcast_to_like(%x, %like);\n"
                       "  multiply(%0, %like)\n"
                       "}\n";
    ry_value *a[2] = {rv2(3, 1), rand_value(3, (int64_t[]){2, 3, 4}, -1, 1)};
    ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
    ry_value *outs[2] = {run(m, "main", 2, a), run_vm(m, "main", 2, a)};
    for (int e = 0; e < 2; e++) {
        const ry_tensor *y = outs[e]->tensor;
        assert_int_equal(y->ndim, 3);
        for (int i = 0; i < 24; i++) {
            double want = ry_tensor_get(a[0]->tensor, (i / 4) % 3) * ry_tensor_get(a[1]->tensor, i);
            assert_true(fabs(ry_tensor_get(y, i) - want) < 1e-15);
        }
        ry_value_release(outs[e]);
    }
    /* dx[i] = sum over the broadcast positions of like */
    ry_value *g = run(m, "main_gradient", 2, a);
    const ry_tensor *dx = g->tuple.fields[1]->tuple.fields[0]->tensor;
    for (int i = 0; i < 3; i++) {
        double want = 0;
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 4; k++) want += ry_tensor_get(a[1]->tensor, b * 12 + i * 4 + k);
        assert_true(fabs(ry_tensor_get(dx, i) - want) < 1e-12);
    }
    ry_value_release(g);
    ry_value_release(a[0]);
    ry_value_release(a[1]);
    ry_module_free(m);
}

static void test_mlp(void **state) {
    (void)state;
    ry_value *a[5] = {rv2(4, 5), rv2(6, 5), rv1(6), rv2(3, 6), rv1(3)};
    ry_module *m = gradcheck_ok(mlp_text, "main", 5, a, 1e-5, 1e-8);
    ry_module_free(m);
    release_all(5, a);
}

/* relu, sigmoid, softmax, broadcasting arithmetic, sum with axes */
static void test_mlp_ops(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(4, 5), float64], %w: Tensor[(3, 5), float64],\n"
                       "          %s: Tensor[(3), float64], %t: Tensor[(4, 1), float64]) {\n"
                       "  %0 = take(%w, 1, axis=1);\n"
                       "  %1 = nn.relu(add(%0, %s));\n"
                       "  %2 = sigmoid(multiply(%1, %t));\n"
                       "  %3 = nn.softmax(subtract(%2, divide(%s, add(%t, 3f64))));\n"
                       "  %4 = exp(sqrt(add(%3, 1f64)));\n"
                       "  (sum(%4, axis=[1]), sum(log(add(%4, %4)), axis=[0], keepdims=True))\n"
                       "}\n";
    ry_value *a[4] = {rv2(4, 5), rv2(3, 5), rv1(3), rv2(4, 1)};
    ry_module *m = gradcheck_ok(text, "main", 4, a, 1e-5, 1e-8);
    ry_module_free(m);
    release_all(4, a);
}

/* ---- every gradient rule, through ry_gradcheck ----
 * One program per case; arguments are float64 in [lo, hi) (positive where
 * the operator needs it), or int32 indices (ndim < 0 marks them: 4 indices
 * into 5 rows, repeated). */
#include "ad/op_cases.h"

static void test_op_gradients(void **state) {
    (void)state;
    int n = (int)(sizeof op_cases / sizeof op_cases[0]);
    for (int k = 0; k < n; k++) {
        const op_case *c = &op_cases[k];
        ry_value *a[4] = {0};
        for (int i = 0; i < c->nargs; i++) {
            if (c->ndim[i] < 0) { /* indices 0, 4, 2, 4 */
                ry_tensor *t = ry_tensor_new(RY_INT32, 1, c->shape[i]);
                for (int64_t j = 0; j < t->size; j++)
                    ry_tensor_set(t, j, (double)((j * 2) % 5 + (j % 2) * 2));
                a[i] = ry_value_tensor(t);
            } else {
                a[i] = rand_value(c->ndim[i], c->shape[i], c->lo, c->hi);
            }
        }
        current_case = c->name;
        ry_module *m = gradcheck_ok(c->text, "main", c->nargs, a, c->rtol ? c->rtol : 1e-5,
                                    c->rtol ? c->rtol : 1e-7);
        ry_module_free(m);
        release_all(c->nargs, a);
    }
    current_case = "";
}

/* dropout and batch_norm: ry_gradcheck builds the gradient for the mode
 * its runs are made in (ry_grad_opts.inference); checked at inference and
 * in training (same seed for every run, so the same dropout masks). The
 * degenerate inputs are in test_ad_opts.c. gamma_type "(n)" on a channel
 * of 1: a symbolic length the type checker matched to a constant (the
 * rule reshapes gamma to the data's channel count, else the gradient
 * program mixes 1 and n and does not type-check); data_ch "c" the same
 * the other way round. A batch "n" is counted when the gradient runs. */
static void check_batch_norm_modes(const char *batch, int64_t ch, const char *gamma_type,
                                   const char *data_ch) {
    char text[1024], chs[32];
    snprintf(chs, sizeof chs, "%lld", (long long)ch);
    snprintf(text, sizeof text,
             "#[version = \"0.0.5\"]\n"
             "def @main(%%x: Tensor[(%s, %s, 2), float64], %%g: Tensor[%s, float64],\n"
             "          %%b: Tensor[(%lld), float64], %%mm: Tensor[(%lld), float64],\n"
             "          %%mv: Tensor[(%lld), float64]) {\n"
             "  %%0 = nn.batch_norm(%%x, %%g, %%b, %%mm, %%mv);\n"
             "  %%1 = nn.dropout(tanh(%%0.0), rate=0.25f);\n"
             "  (multiply(%%1.0, %%x), %%0.1, multiply(%%0.2, %%0.2))\n"
             "}\n",
             batch, data_ch ? data_ch : chs, gamma_type, (long long)ch, (long long)ch,
             (long long)ch);
    for (int mode = 0; mode < 2; mode++) {
        ry_value *a[5] = {rand_value(3, (int64_t[]){4, ch, 2}, -1, 1), rv1(ch), rv1(ch), rv1(ch),
                          rand_value(1, (int64_t[]){ch}, 0.5, 2)};
        ry_module *m = test_parse(text, true);
        ry_interp_opts io = {.training = mode == 1, .seed = 42};
        ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .interp = &io};
        ry_gradcheck_report rep;
        ry_error err;
        if (ry_gradcheck(m, "main", 5, a, &o, &rep, &err)) fail_msg("%s", err.msg);
        for (int i = 0; i < 5; i++) {
            if (!rep.params[i].ok)
                fprintf(stderr, "mode %d %%%s: abs %.3g rel %.3g\n", mode, rep.params[i].name,
                        rep.params[i].max_abs, rep.params[i].max_rel);
            assert_true(rep.params[i].checked);
        }
        assert_true(rep.ok);
        ry_module_free(m);
        release_all(5, a);
    }
}

static void test_mode_dependent_ops(void **state) {
    (void)state;
    check_batch_norm_modes("4", 3, "(3)", NULL);
    check_batch_norm_modes("4", 1, "(n)", NULL);
    check_batch_norm_modes("n", 3, "(3)", NULL); /* a batch known at run time: n counted then */
    check_batch_norm_modes("4", 1, "(1)", "c");  /* the data's channel c matched to 1 */
}

/* ---- control flow, recursion, ADTs ---- */

/* if on a tensor condition: each branch differentiates its own code */
static void test_if(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64], %y: Tensor[(3), float64]) {\n"
                       "  let %s = sum(%x);\n"
                       "  if (greater(%s, 0f64)) {\n"
                       "    multiply(%x, tanh(%y))\n"
                       "  } else {\n"
                       "    let %z = subtract(%y, %x);\n"
                       "    multiply(%z, %z)\n"
                       "  }\n"
                       "}\n";
    for (int k = 0; k < 2; k++) { /* both signs of sum(x): both branches */
        ry_value *a[2] = {rand_value(1, (int64_t[]){3}, k ? 0.1 : -1, k ? 1 : -0.1), rv1(3)};
        ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
        ry_module_free(m);
        release_all(2, a);
    }
}

static void test_list_recursion(void **state) {
    (void)state;
    ry_value *a[4] = {rv1(2), rv1(2), rv1(2), rv1(2)};
    ry_module *m = gradcheck_ok(list_text, "main", 4, a, 1e-6, 1e-8);
    /* the polymorphic List needs no twin: List[(T, ref T)] is enough */
    assert_null(ry_module_find_typedef(m, "List_grad"));
    assert_non_null(ry_module_find_global(m, "fold_grad"));
    ry_module_free(m);
    release_all(4, a);
}

static void test_treelstm(void **state) {
    (void)state;
    ry_value *a[5] = {rv2(1, 3), rv2(1, 3), rv2(1, 3), rv2(16, 3), rv2(16, 4)};
    ry_module *m = gradcheck_ok(treelstm_text, "main", 5, a, 1e-5, 1e-8);
    ry_typedef *tw = ry_module_find_typedef(m, "Tree_grad");
    assert_non_null(tw);
    assert_non_null(ry_module_find_ctor(m, "Leaf_grad"));
    /* Leaf_grad's field is the pair (Tensor, ref(Tensor)) */
    assert_int_equal(tw->ctors[0]->fields[0]->kind, RY_TYPE_TUPLE);
    ry_module_free(m);
    release_all(5, a);
}

/* ---- closures, higher-order functions, refs ---- */

/* map with a closure that captures a weight; the adjoint reaches the
 * weight through the closure's capture. */
static void test_closure_map(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "type List[A] {\n"
                       "  Cons(A, List[A]),\n"
                       "  Nil,\n"
                       "}\n"
                       "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
                       "  match (%l) {\n"
                       "    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),\n"
                       "    Nil => Nil,\n"
                       "  }\n"
                       "}\n"
                       "def @total(%l: List[Tensor[(3), float64]]) -> Tensor[(3), float64] {\n"
                       "  match (%l) {\n"
                       "    Cons(%h, %t) => add(%h, @total(%t)),\n"
                       "    Nil => zeros(shape=[3], dtype=\"float64\"),\n"
                       "  }\n"
                       "}\n"
                       "def @main(%a: Tensor[(3), float64], %b: Tensor[(3), float64], %w: "
                       "Tensor[(3), float64]) {\n"
                       "  let %f = fn (%v: Tensor[(3), float64]) { multiply(%v, exp(%w)) };\n"
                       "  let %g = fn (%u) { %f(%f(%u)) };\n"
                       "  @total(@map(%g, Cons(%a, Cons(%b, Nil))))\n"
                       "}\n";
    ry_value *a[3] = {rv1(3), rv1(3), rv1(3)};
    ry_module *m = gradcheck_ok(text, "main", 3, a, 1e-6, 1e-8);
    ry_module_free(m);
    release_all(3, a);
}

/* More higher-order forms: a global returning a closure (currying), a
 * constructor passed as a function to a polymorphic map, and a let-bound
 * recursive closure (a loop over an int counter, an RNN of fixed length). */
static void test_higher_order(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "type List[A] {\n"
        "  Cons(A, List[A]),\n"
        "  Nil,\n"
        "}\n"
        "type Box[A] {\n"
        "  Box(A),\n"
        "}\n"
        "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
        "  match (%l) {\n"
        "    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),\n"
        "    Nil => Nil,\n"
        "  }\n"
        "}\n"
        "def @scale(%w: Tensor[(2), float64]) -> fn (Tensor[(2), float64]) -> Tensor[(2), float64] "
        "{\n"
        "  fn (%x: Tensor[(2), float64]) { multiply(%x, %w) }\n"
        "}\n"
        "def @unbox_sum(%l: List[Box[Tensor[(2), float64]]]) -> Tensor[(2), float64] {\n"
        "  match (%l) {\n"
        "    Cons(Box(%v), %t) => add(%v, @unbox_sum(%t)),\n"
        "    Nil => zeros(shape=[2], dtype=\"float64\"),\n"
        "  }\n"
        "}\n"
        "def @main(%a: Tensor[(2), float64], %b: Tensor[(2), float64], %w: Tensor[(2), float64],\n"
        "          %u: Tensor[(2), float64]) {\n"
        "  let %boxed = @map(Box, Cons(%a, Cons(@scale(%w)(%b), Nil)));\n"
        "  let %loop = fn (%i: int32, %h: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
        "    if (less(%i, 3)) { %loop(add(%i, 1), tanh(add(multiply(%h, %u), %a))) } else { %h }\n"
        "  };\n"
        "  multiply(@unbox_sum(%boxed), %loop(0, %b))\n"
        "}\n";
    ry_value *a[4] = {rv1(2), rv1(2), rv1(2), rv1(2)};
    ry_module *m = gradcheck_ok(text, "main", 4, a, 1e-6, 1e-8);
    ry_module_free(m);
    release_all(4, a);
}

/* refs: refs_text (models.h) through finite differences */
static void test_refs(void **state) {
    (void)state;
    ry_value *a[2] = {rv2(2, 2), rv2(2, 2)};
    ry_module *m = gradcheck_ok(refs_text, "main", 2, a, 1e-6, 1e-8);
    ry_module_free(m);
    release_all(2, a);
}

/* Constants as values (not only operator arguments): in a ref, in a
 * tuple result (seeded too, with no parameter to reach), as a let value. */
static void test_constants(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2), float64]) {\n"
                       "  let %c = 2f64;\n"
                       "  let %r = ref(%c);\n"
                       "  let %u = ref_write(%r, multiply(ref_read(%r), sum(%x)));\n"
                       "  (ref_read(%r), %c, 7i64)\n"
                       "}\n";
    ry_value *x = rv1(2);
    ry_module *m = gradcheck_ok(text, "main", 1, &x, 1e-6, 1e-8);
    ry_value *out = run(m, "main_gradient", 1, &x);
    /* d/dx 2 sum(x) = 2 */
    const ry_tensor *g = out->tuple.fields[1]->tuple.fields[0]->tensor;
    assert_true(ry_tensor_get(g, 0) == 2 && ry_tensor_get(g, 1) == 2);
    assert_true(ry_tensor_get(out->tuple.fields[0]->tuple.fields[2]->tensor, 0) == 7);
    ry_value_release(out);
    ry_value_release(x);
    ry_module_free(m);
}

/* ---- against PyTorch (fixtures from tools/gen_ad_tests.py) ---- */

/* Runs @main_gradient on tests/ad/<dir>/in_<p>.npy and compares every
 * gradient with grad_<p>.npy. */
static void golden(const char *dir, const char *text, int n, const char *const *names) {
    ry_module *m = test_parse(text, true);
    const char *gname;
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, &gname, &err)) fail_msg("%s", err.msg);
    ry_value *a[8];
    char path[256];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "tests/ad/%s/in_%s.npy", dir, names[i]);
        a[i] = ry_value_tensor(test_npy(path));
    }
    ry_value *out = run(m, gname, n, a);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "tests/ad/%s/grad_%s.npy", dir, names[i]);
        ry_tensor *want = test_npy(path);
        test_assert_close(out->tuple.fields[1]->tuple.fields[i]->tensor, want, 1e-9, 1e-12);
        ry_tensor_release(want);
    }
    ry_value_release(out);
    release_all(n, a);
    ry_module_free(m);
}

static void test_pytorch_mlp(void **state) {
    (void)state;
    const char *names[] = {"x", "w1", "b1", "w2", "b2"};
    golden("mlp", mlp_text, 5, names);
}

static void test_pytorch_treelstm(void **state) {
    (void)state;
    const char *names[] = {"e1", "e2", "e3", "wi", "ui"};
    golden("treelstm", treelstm_text, 5, names);
}

static void test_pytorch_lstm(void **state) {
    (void)state;
    const char *names[] = {"x1", "x2", "x3", "x4", "wi", "ui"};
    golden("lstm", lstm_text, 6, names);
    ry_value *a[6] = {rv2(1, 3), rv2(1, 3), rv2(1, 3), rv2(1, 3), rv2(16, 3), rv2(16, 4)};
    ry_module *m = gradcheck_ok(lstm_text, "main", 6, a, 1e-5, 1e-8);
    ry_module_free(m);
    release_all(6, a);
}

/* ---- more of the language ---- */

/* tuple parameters and a tuple result: every field is seeded */
static void test_tuples(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%p: (Tensor[(2), float64], Tensor[(2), float64]), %n: Tensor[(2), int32],\n"
        "          %z: Tensor[(2), float64]) {\n"
        "  let %s = multiply(%p.0, %p.1);\n"
        "  (%s, (exp(%p.0), %s), add(%z, cast(%n, dtype=\"float64\")))\n"
        "}\n";
    ry_value *f[2] = {rv1(2), rv1(2)};
    ry_value *p = ry_value_tuple(2, f);
    ry_tensor *n = ry_tensor_new(RY_INT32, 1, (int64_t[]){2});
    ry_tensor_set(n, 0, 3);
    ry_tensor_set(n, 1, -2);
    ry_value *a[3] = {p, ry_value_tensor(n), rv1(2)};
    ry_module *m = test_parse(text, true);
    const char *name = NULL;
    ry_error err;
    if (ry_grad(m, "main", NULL, "dmain", &name, &err)) fail_msg("%s", err.msg);
    assert_string_equal(name, "dmain");
    ry_value *out = run(m, "dmain", 3, a);
    const ry_value *g = out->tuple.fields[1];
    const ry_tensor *x0 = f[0]->tensor, *x1 = f[1]->tensor;
    /* d/dp0 of sum(p0*p1) + sum(exp p0) + sum(p0*p1) = 2 p1 + exp p0 */
    const ry_tensor *g0 = g->tuple.fields[0]->tuple.fields[0]->tensor;
    const ry_tensor *g1 = g->tuple.fields[0]->tuple.fields[1]->tensor;
    for (int i = 0; i < 2; i++) {
        assert_true(fabs(ry_tensor_get(g0, i) -
                         (2 * ry_tensor_get(x1, i) + exp(ry_tensor_get(x0, i)))) < 1e-12);
        assert_true(fabs(ry_tensor_get(g1, i) - 2 * ry_tensor_get(x0, i)) < 1e-12);
    }
    /* the integer parameter's gradient is zeros of its type; z's is ones */
    const ry_tensor *gn = g->tuple.fields[1]->tensor, *gz = g->tuple.fields[2]->tensor;
    assert_int_equal(gn->dtype, RY_INT32);
    assert_true(ry_tensor_get(gn, 0) == 0 && ry_tensor_get(gn, 1) == 0);
    assert_true(ry_tensor_get(gz, 0) == 1 && ry_tensor_get(gz, 1) == 1);
    assert_true(roundtrip(m) > 0);
    /* gradcheck perturbs the tuple's tensors and skips the integer one */
    ry_gradcheck_report rep;
    ry_gradcheck_opts o = {.rtol = 1e-6, .atol = 1e-8};
    if (ry_gradcheck(m, "main", 3, a, &o, &rep, &err)) fail_msg("%s", err.msg);
    assert_true(rep.params[0].checked && !rep.params[1].checked && rep.params[2].checked);
    assert_true(rep.ok);
    ry_value_release(out);
    ry_module_free(m);
    release_all(3, a);
}

/* Mutual recursion between globals: each gets one twin. */
static void test_mutual_recursion(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @even(%n: int32, %x: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
        "  if (equal(%n, 0)) { %x } else { @odd(subtract(%n, 1), multiply(%x, %x)) }\n"
        "}\n"
        "def @odd(%n: int32, %x: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
        "  if (equal(%n, 0)) { negative(%x) } else { @even(subtract(%n, 1), sigmoid(%x)) }\n"
        "}\n"
        "def @main(%x: Tensor[(2), float64]) {\n"
        "  add(@even(3, %x), @odd(2, %x))\n"
        "}\n";
    ry_value *x = rv1(2);
    ry_module *m = gradcheck_ok(text, "main", 1, &x, 1e-6, 1e-8);
    assert_non_null(ry_module_find_global(m, "even_grad"));
    assert_non_null(ry_module_find_global(m, "odd_grad"));
    assert_null(ry_module_find_global(m, "even_grad1"));
    ry_module_free(m);
    ry_value_release(x);
}

/* A node shared in the DAG is differentiated once: its adjoint collects
 * from every use. */
static void test_shared_dag(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64]) {\n"
                       "  %0 = tanh(%x);\n"
                       "  %1 = multiply(%0, %0);\n"
                       "  %2 = add(%1, %0);\n"
                       "  multiply(%2, %1)\n"
                       "}\n";
    ry_value *x = rv1(3);
    ry_module *m = gradcheck_ok(text, "main", 1, &x, 1e-6, 1e-8);
    ry_module_free(m);
    ry_value_release(x);
}

/* A function expression (not a global) differentiated directly. */
static void test_function_expression(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2), float64]) {\n"
                       "  multiply(%x, exp(%x))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    const char *name;
    ry_error err;
    if (ry_grad(m, NULL, ry_module_find_global(m, "main")->func, NULL, &name, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(name, "gradient");
    ry_value *x = rv1(2);
    ry_value *out = run(m, "gradient", 1, &x);
    const ry_tensor *g = out->tuple.fields[1]->tuple.fields[0]->tensor;
    for (int i = 0; i < 2; i++) {
        double v = ry_tensor_get(x->tensor, i);
        assert_true(fabs(ry_tensor_get(g, i) - (1 + v) * exp(v)) < 1e-12);
    }
    ry_value_release(out);
    ry_value_release(x);
    ry_module_free(m);
}

/* ---- second derivatives ---- */

/* The gradient program differentiated again: the gradient of
 * sum(f(x)) + sum(f'(x)), checked against finite differences of the
 * gradient program itself. */
static void second_order(const char *text, int nargs, ry_value **a) {
    ry_module *m = test_parse(text, true);
    ry_error err;
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .second_order = true};
    ry_gradcheck_report rep;
    if (ry_gradcheck(m, "main", nargs, a, &o, &rep, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("%s", err.msg);
    }
    int checked = 0;
    for (int i = 0; i < rep.nparams; i++) {
        const ry_gradcheck_param *p1 = &rep.params[i], *p2 = &rep.second[i];
        checked += p1->checked && p2->checked;
        if (!p1->ok || !p2->ok)
            fprintf(stderr, "%%%s: abs %.3g rel %.3g; second order: abs %.3g rel %.3g\n", p1->name,
                    p1->max_abs, p1->max_rel, p2->max_abs, p2->max_rel);
    }
    assert_true(checked > 0);
    assert_string_equal(rep.grad2_name, "main_gradient_gradient");
    assert_true(rep.ok);
    assert_true(roundtrip(m) > 0);
    ry_module_free(m);
}

static void test_second_derivative(void **state) {
    (void)state;
    /* f = x^3: f' = 3x^2, and the second gradient is 3x^2 + 6x exactly */
    const char *cube = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64]) {\n"
                       "  multiply(multiply(%x, %x), %x)\n"
                       "}\n";
    ry_value *x = rv1(3);
    second_order(cube, 1, &x);
    ry_module *m = test_parse(cube, true);
    const char *g1, *g2;
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, &g1, &err) || ry_grad(m, g1, NULL, NULL, &g2, &err))
        fail_msg("%s", err.msg);
    ry_value *out = run(m, g2, 1, &x);
    const ry_tensor *h = out->tuple.fields[1]->tuple.fields[0]->tensor;
    for (int i = 0; i < 3; i++) {
        double v = ry_tensor_get(x->tensor, i);
        assert_true(fabs(ry_tensor_get(h, i) - (3 * v * v + 6 * v)) < 1e-10);
    }
    ry_value_release(out);
    ry_module_free(m);
    ry_value_release(x);
}

static void test_second_derivative_mlp_if(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2, 3), float64], %w: Tensor[(4, 3), float64]) {\n"
                       "  %0 = tanh(nn.dense(%x, %w));\n"
                       "  if (greater(sum(%0), 0f64)) { sigmoid(%0) } else { multiply(%0, %0) }\n"
                       "}\n";
    ry_value *a[2] = {rv2(2, 3), rv2(4, 3)};
    second_order(text, 2, a);
    release_all(2, a);
    ry_value *b[5] = {rv2(4, 5), rv2(6, 5), rv1(6), rv2(3, 6), rv1(3)};
    second_order(mlp_text, 5, b);
    release_all(5, b);
}

/* Second derivatives through recursion over an ADT, through closures and
 * refs, and through a TreeLSTM. */
static void test_second_derivative_dynamic(void **state) {
    (void)state;
    ry_value *a[4] = {rv1(2), rv1(2), rv1(2), rv1(2)};
    second_order(list_text, 4, a);
    release_all(4, a);
    ry_value *b[2] = {rv2(2, 2), rv2(2, 2)};
    second_order(refs_text, 2, b);
    release_all(2, b);
    ry_value *c[5] = {rv2(1, 3), rv2(1, 3), rv2(1, 3), rv2(16, 3), rv2(16, 4)};
    second_order(treelstm_text, 5, c);
    release_all(5, c);
    /* convolution and average pooling: the second derivative goes through
     * their adjoint operators (conv2d_backward_weight, avg_pool2d_grad) */
    const char *conv =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(1, 2, 5, 5), float64], %w: Tensor[(2, 1, 3, 3), float64]) {\n"
        "  %0 = nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 0, 1], groups=2,\n"
        "                 channels=2, kernel_size=[3, 3]);\n"
        "  %1 = nn.avg_pool2d(multiply(%0, tanh(%0)), pool_size=[2, 2], padding=[1, 1]);\n"
        "  (%1, nn.global_avg_pool2d(multiply(%1, %1)))\n"
        "}\n";
    ry_value *d[2] = {rand_value(4, (int64_t[]){1, 2, 5, 5}, -1, 1),
                      rand_value(4, (int64_t[]){2, 1, 3, 3}, -1, 1)};
    second_order(conv, 2, d);
    release_all(2, d);
}

/* avg_pool2d's adjoint carries count_include_pad only where windows reach
 * past the data (TVM 0.19's parser cannot read it on avg_pool2d_grad):
 * without padding it is left out, with padding kept; both gradients agree
 * with finite differences. */
static void test_avg_pool_grad_count_include_pad(void **state) {
    (void)state;
    static const char *pads[2] = {"[0, 0]", "[1, 1]"};
    for (int k = 0; k < 2; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "#[version = \"0.0.5\"]\n"
                 "def @main(%%x: Tensor[(1, 2, 4, 4), float64]) {\n"
                 "  %%0 = nn.avg_pool2d(%%x, pool_size=[2, 2], strides=[2, 2], padding=%s, count_include_pad=True);\n"
                 "  multiply(%%0, %%0)\n"
                 "}\n",
                 pads[k]);
        ry_module *m = test_parse(text, true);
        ry_error err;
        if (ry_grad(m, "main", NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
        char *printed = ry_module_print(m);
        const char *adj = strstr(printed, "nn.avg_pool2d_grad(");
        assert_non_null(adj);
        const char *end = strchr(adj, ';');
        bool has = strstr(adj, "count_include_pad=True") && strstr(adj, "count_include_pad=True") < end;
        assert_int_equal(has, k == 1);
        ry_free(printed);
        ry_module_free(m);
        ry_value *a[1] = {rand_value(4, (int64_t[]){1, 2, 4, 4}, -1, 1)};
        ry_module_free(gradcheck_ok(text, "main", 1, a, 1e-6, 1e-8));
        release_all(1, a);
    }
}

/* gradcheck reports a disagreement as a value: abs at 0 has the one-sided
 * derivative 1 from the rule but central differences of 0 there. */
static void test_gradcheck_detects_mismatch(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64], %y: Tensor[(3), float64]) {\n"
                       "  add(abs(%x), multiply(%y, %y))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_value *a[2] = {rv1(3), rv1(3)};
    ry_tensor_set(a[0]->tensor, 1, 0.0);
    ry_gradcheck_report rep;
    ry_error err;
    assert_int_equal(ry_gradcheck(m, "main", 2, a, NULL, &rep, &err), RY_OK);
    assert_false(rep.ok);
    assert_false(rep.params[0].ok);
    assert_true(fabs(rep.params[0].max_abs - 1.0) < 1e-9);
    assert_true(rep.params[1].ok && rep.params[1].checked);
    assert_string_equal(rep.params[1].name, "y");
    assert_true(rep.params[1].max_abs < 1e-7);
    release_all(2, a);
    ry_module_free(m);
}

/* A Hessian-vector product: the gradient program is printed, a function
 * gv(x, v) = <grad f(x), v> is written against it in the text format, and
 * gv's gradient with respect to x is H v, checked against finite
 * differences of gv (and its gradient with respect to v is grad f). */
static void test_hessian_vector_product(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @f(%x: Tensor[(3), float64]) {\n"
                       "  sum(multiply(tanh(%x), multiply(%x, %x)))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err;
    if (ry_grad(m, "f", NULL, "df", NULL, &err)) fail_msg("%s", err.msg);
    char *printed = ry_module_print(m);
    const char *gv = "def @gv(%x: Tensor[(3), float64], %v: Tensor[(3), float64]) {\n"
                     "  %0 = @df(%x);\n"
                     "  sum(multiply(%0.1.0, %v))\n"
                     "}\n";
    size_t n = strlen(printed) + strlen(gv) + 2;
    char *full = ry_malloc(n);
    snprintf(full, n, "%s\n%s", printed, gv);
    ry_free(printed);
    ry_module_free(m);
    ry_value *a[2] = {rv1(3), rv1(3)};
    m = gradcheck_ok(full, "gv", 2, a, 1e-6, 1e-8);
    ry_free(full);
    ry_module_free(m);
    release_all(2, a);
}

/* A float32 program (as TVM prints them) promoted to float64 for checking:
 * types, literals, metadata-free constants and dtype attributes change. */
static void test_promote_float64(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32], %n: int32) "
        "-> Tensor[(2, 4), float32] {\n"
        "  %0 = nn.dense(%x, %w, units=4) /* ty=Tensor[(2, 4), float32] */;\n"
        "  %1 = multiply(%0, 0.5f);\n"
        "  %2 = add(%1, cast(%n, dtype=\"float32\"));\n"
        "  add(tanh(%2), zeros(shape=[2, 4], dtype=\"float32\"))\n"
        "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err;
    if (ry_module_to_float64(m, &err)) fail_msg("%s", err.msg);
    const ry_expr *f = ry_module_find_global(m, "main")->func;
    assert_int_equal(f->func.params[0]->annot->tensor.dtype, RY_FLOAT64);
    assert_int_equal(f->func.params[2]->annot->tensor.dtype, RY_INT32);
    assert_int_equal(f->type->func.ret->tensor.dtype, RY_FLOAT64);
    char *printed = ry_module_print(m);
    assert_null(strstr(printed, "float32"));
    assert_non_null(strstr(printed, "0.5f64"));
    ry_module_free(m);
    ry_tensor *nt = ry_tensor_scalar(RY_INT32, 2);
    ry_value *a[3] = {rv2(2, 3), rv2(4, 3), ry_value_tensor(nt)};
    m = gradcheck_ok(printed, "main", 3, a, 1e-6, 1e-8);
    ry_free(printed);
    ry_module_free(m);
    release_all(3, a);
}

/* The programs in tests/ad/programs/ (float32, as TVM prints them):
 * promoted to float64, differentiated and checked at random inputs. */
static ry_value *rand_of_type(const ry_type *t) {
    int64_t shape[RY_MAX_RANK];
    assert_int_equal(t->kind, RY_TYPE_TENSOR);
    for (int i = 0; i < t->tensor.ndim; i++)
        shape[i] = t->tensor.dims[i].value;
    return rand_value(t->tensor.ndim, shape, -1, 1);
}

static void test_program_corpus(void **state) {
    (void)state;
    const char *files[] = {"attention", "gru_loop", "cnn_xent", "closures_in_adt"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "tests/ad/programs/%s.relay", files[k]);
        ry_module *m = NULL;
        ry_error err;
        if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err) ||
            ry_module_to_float64(m, &err)) {
            ry_error_print(stderr, &err);
            fail_msg("%s: %s", path, err.msg);
        }
        char *text = ry_module_print(m);
        const ry_expr *f = ry_module_find_global(m, "main")->func;
        int n = f->func.nparams;
        ry_value *a[8];
        assert_true(n <= 8);
        for (int i = 0; i < n; i++)
            a[i] = rand_of_type(f->func.params[i]->type);
        ry_module_free(m);
        current_case = files[k];
        m = gradcheck_ok(text, "main", n, a, 1e-5, 1e-7);
        current_case = "";
        ry_module_free(m);
        ry_free(text);
        release_all(n, a);
    }
}

/* Symbolic dimensions: reshape back with -1 for the one unknown dim, and
 * mean's count taken at run time. Checked at two batch sizes. */
static void test_symbolic_dims(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(n, 2, 3), float64], %w: Tensor[(4, 6), float64]) {\n"
                       "  %0 = nn.batch_flatten(%x);\n"
                       "  %1 = nn.dense(%0, %w);\n"
                       "  (mean(tanh(%1)), mean(multiply(%1, %1), axis=[0]))\n"
                       "}\n";
    for (int64_t n = 1; n <= 3; n += 2) {
        ry_value *a[2] = {rand_value(3, (int64_t[]){n, 2, 3}, -1, 1), rv2(4, 6)};
        ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
        ry_module_free(m);
        release_all(2, a);
    }
}

/* ADTs that mention each other: B holds only an A, but A holds a tensor,
 * so both get twins (a least fixpoint over the typedefs). */
static void test_mutual_adts(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "type B {\n"
                       "  MkB(A),\n"
                       "  NoB,\n"
                       "}\n"
                       "type A {\n"
                       "  MkA(B, Tensor[(2), float64]),\n"
                       "}\n"
                       "def @total(%a: A) -> Tensor[(2), float64] {\n"
                       "  match (%a) {\n"
                       "    MkA(MkB(%inner), %t) => add(%t, @total(%inner)),\n"
                       "    MkA(NoB, %t) => %t,\n"
                       "  }\n"
                       "}\n"
                       "def @main(%x: Tensor[(2), float64], %y: Tensor[(2), float64]) {\n"
                       "  let %a = MkA(MkB(MkA(NoB, tanh(%x))), multiply(%x, %y));\n"
                       "  @total(%a)\n"
                       "}\n";
    ry_value *a[2] = {rv1(2), rv1(2)};
    ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
    assert_non_null(ry_module_find_typedef(m, "A_grad"));
    assert_non_null(ry_module_find_typedef(m, "B_grad"));
    ry_module_free(m);
    release_all(2, a);
}

/* ---- errors ---- */

/* Two calls whose rules fail: the first (in program order) is reported. */
/* ? dims that match in the types but not in the values: p (1, 1) times
 * x (1, 3), both typed (?, ?), broadcasts, so p's adjoint must be summed
 * back to p's shape (it was left (1, 3): a gradient of the wrong shape),
 * on the interpreter and the compiled engine. */
static void test_any_dims_broadcast(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%p: Tensor[(?, ?), float64], %x: Tensor[(?, ?), float64]) {\n"
                       "  multiply(%p, %x)\n"
                       "}\n";
    ry_value *a[2] = {rand_value(2, (int64_t[]){1, 1}, -1, 1),
                      rand_value(2, (int64_t[]){1, 3}, -1, 1)};
    ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-9);
    double sum_x = 0;
    for (int64_t i = 0; i < 3; i++) sum_x += ry_tensor_get(a[1]->tensor, i);
    for (int engine = 0; engine < 2; engine++) {
        ry_value *out = engine ? run_vm(m, "main_gradient", 2, a) : run(m, "main_gradient", 2, a);
        const ry_tensor *gp = out->tuple.fields[1]->tuple.fields[0]->tensor;
        assert_int_equal(gp->ndim, 2);
        assert_int_equal(gp->shape[0], 1);
        assert_int_equal(gp->shape[1], 1);
        assert_true(fabs(ry_tensor_get(gp, 0) - sum_x) < 1e-12);
        ry_value_release(out);
    }
    ry_module_free(m);
    release_all(2, a);
}

static void test_first_rule_error(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(1, 2, ?, 4), float64], %w: Tensor[(1, 2, 3, ?), float64]) {\n"
                       "  %0 = nn.adaptive_max_pool2d(%w, output_size=[2, 2]);\n"
                       "  %1 = nn.adaptive_max_pool2d(%x, output_size=[2, 1]);\n"
                       "  (sum(%0), sum(%1))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err;
    assert_int_equal(ry_grad(m, "main", NULL, NULL, NULL, &err), RY_ERR);
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "adaptive_max_pool2d"));
    ry_module_free(m);
}

static void test_rejected_inputs(void **state) {
    (void)state;
    ry_error err;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @apply(%f: fn (fn (float32) -> float32) -> Tensor[(2), float32],\n"
                       "           %x: Tensor[(2), float32]) {\n"
                       "  add(%f(fn (%y: float32) { %y }), %x)\n"
                       "}\n"
                       "def @id[A](%x: A) -> A {\n"
                       "  %x\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    int nglobals = m->nglobals;
    /* a higher-order function parameter cannot cross the wrapper (first-
     * order ones do: tests/test_ad_outer.c); the error names it */
    assert_int_equal(ry_grad(m, "apply", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "%f"));
    assert_int_equal(err.line, 2);
    assert_int_equal(ry_grad(m, "id", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "polymorphic"));
    assert_int_equal(ry_grad(m, "nope", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "@nope"));
    /* an explicit name never replaces an existing global */
    ry_module *m3 = test_parse(list_text, true);
    assert_int_equal(ry_grad(m3, "main", NULL, "fold", NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "@fold is taken"));
    assert_int_equal(m3->nglobals, 2);
    ry_module_free(m3);
    assert_int_equal(m->nglobals, nglobals);
    ry_module_free(m);
    /* a module not type-checked yet is checked first; its errors come back */
    m = test_parse(list_text, false);
    assert_int_equal(ry_grad(m, "main", NULL, NULL, NULL, &err), RY_OK);
    assert_non_null(ry_module_find_global(m, "main_gradient"));
    ry_module_free(m);
    m = test_parse("#[version = \"0.0.5\"]\n"
                   "def @main(%x: Tensor[(2), float32]) {\n"
                   "  add(%x, 1)\n"
                   "}\n",
                   false);
    assert_int_equal(ry_grad(m, "main", NULL, NULL, NULL, &err), RY_ERR);
    assert_int_equal(err.line, 3);
    ry_module_free(m);
}

/* An ADT parameter: @fold differentiated directly takes a List and gives
 * back a List of adjoints; they agree with @main's gradient, which builds
 * the same list from tensors. */
static void test_adt_parameter(void **state) {
    (void)state;
    ry_module *m = test_parse(list_text, true);
    const char *gf, *gm;
    ry_error err;
    if (ry_grad(m, "fold", NULL, NULL, &gf, &err) || ry_grad(m, "main", NULL, NULL, &gm, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(gf, "fold_gradient");
    ry_value *a[4] = {rv1(2), rv1(2), rv1(2), rv1(2)};
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int i = 2; i >= 0; i--) {
        ry_value *f[2] = {ry_value_retain(a[i]), l};
        l = ry_value_adt(cons, 2, f);
    }
    ry_value *h = ry_value_tensor(ry_tensor_zeros(RY_FLOAT64, 1, (int64_t[]){2}));
    ry_value *fa[3] = {l, h, a[3]};
    ry_value *of = run(m, gf, 3, fa), *om = run(m, gm, 4, a);
    test_assert_close(of->tuple.fields[0]->tensor, om->tuple.fields[0]->tensor, 0, 0);
    const ry_value *gl = of->tuple.fields[1]->tuple.fields[0];
    const ry_value *gmain = om->tuple.fields[1];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gl->kind, RY_VAL_ADT);
        assert_ptr_equal(gl->adt.ctor, cons);
        test_assert_close(gl->adt.fields[0]->tensor, gmain->tuple.fields[i]->tensor, 1e-12, 1e-14);
        gl = gl->adt.fields[1];
    }
    assert_ptr_equal(gl->adt.ctor, nil);
    test_assert_close(of->tuple.fields[1]->tuple.fields[2]->tensor, gmain->tuple.fields[3]->tensor,
                      1e-12, 1e-14);
    assert_true(roundtrip(m) > 0);
    /* gradcheck perturbs the tensors inside the list too */
    ry_gradcheck_report rep;
    ry_gradcheck_opts o = {.rtol = 1e-6, .atol = 1e-8};
    if (ry_gradcheck(m, "fold", 3, fa, &o, &rep, &err)) fail_msg("%s", err.msg);
    assert_true(rep.params[0].checked && rep.params[1].checked && rep.params[2].checked);
    assert_true(rep.ok);
    ry_value_release(of);
    ry_value_release(om);
    release_all(2, fa); /* fa[2] is a[3] */
    release_all(4, a);
    ry_module_free(m);
}

/* The C route to ADT arguments written as text: ry_module_parse_expr, the
 * expression wrapped in a nullary global and evaluated; gradcheck then
 * perturbs every leaf. With max_elements, each tensor is sampled: an
 * embedding of 50 rows read at two of them gets its 8 checks at those rows'
 * elements (nonzero gradient) and at random ones. */
static void test_adt_arguments_from_text(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "type List[A] { Cons(A, List[A]), Nil }\n"
                       "def @sum(%l: List[Tensor[(2), float64]], %e: Tensor[(50, 2), float64]) -> Tensor[(2), float64] {\n"
                       "  match (%l) {\n"
                       "    Cons(%x, %r) => add(multiply(%x, take(%e, 7, axis=0)), @sum(%r, %e)),\n"
                       "    Nil => take(%e, 31, axis=0),\n"
                       "  }\n"
                       "}\n"
                       "def @main(%l: List[Tensor[(2), float64]], %e: Tensor[(50, 2), float64]) {\n"
                       "  %0 = @sum(%l, %e);\n"
                       "  multiply(%0, %0)\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_expr *e = NULL;
    const char *v = "Cons(full(0.5f64, shape=[2], dtype=\"float64\"), Cons(ones(shape=[2], dtype=\"float64\"), Nil))";
    if (ry_module_parse_expr(m, "list", v, strlen(v), &e, &err)) fail_msg("%s", err.msg);
    ry_expr *fn = ry_expr_new(m, RY_EXPR_FUNC, e->span);
    fn->func.body = e;
    ry_module_add_global(m, "list_value", fn);
    if (ry_module_typecheck(m, &err)) fail_msg("%s", err.msg);
    ry_value *a[2] = {run(m, "list_value", 0, NULL), rv2(50, 2)};
    assert_int_equal(ry_value_count_tensors(a[0]), 2);
    ry_gradcheck_report rep;
    ry_gradcheck_opts o = {.rtol = 1e-6, .atol = 1e-8, .max_elements = 8, .sample_seed = 3};
    if (ry_gradcheck(m, "main", 2, a, &o, &rep, &err)) fail_msg("%s", err.msg);
    assert_true(rep.ok);
    assert_int_equal(rep.params[0].nchecked, 4);
    assert_int_equal(rep.params[1].nchecked, 8);
    release_all(2, a);
    /* errors are located in the value's own text */
    const char *bad[3][2] = {{"Cons(1f, ", "list:1:10"}, {"Nil Nil", "end of the value"}, {"@nowhere()", "unknown global"}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ry_module_parse_expr(m, "list", bad[i][0], strlen(bad[i][0]), &e, &err), RY_ERR);
        char where[600];
        snprintf(where, sizeof where, "%s:%d:%d: %s", err.file, err.line, err.col, err.msg);
        if (!strstr(where, bad[i][1])) fail_msg("'%s' lacks '%s'", where, bad[i][1]);
    }
    ry_module_free(m);
}

/* An ADT result: every tensor in the returned tree is seeded, and the
 * primal tree comes back as the original type. */
static void test_adt_result(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "type Tree {\n"
                       "  Leaf(Tensor[(2), float64]),\n"
                       "  Node(Tree, Tensor[(2), float64], Tree),\n"
                       "}\n"
                       "def @main(%x: Tensor[(2), float64], %y: Tensor[(2), float64]) -> Tree {\n"
                       "  Node(Leaf(multiply(%x, %y)), tanh(%x), Leaf(exp(%y)))\n"
                       "}\n";
    ry_value *a[2] = {rv1(2), rv1(2)};
    ry_module *m = gradcheck_ok(text, "main", 2, a, 1e-6, 1e-8);
    ry_value *out = run(m, "main_gradient", 2, a);
    const ry_value *tree = out->tuple.fields[0];
    assert_int_equal(tree->kind, RY_VAL_ADT);
    assert_string_equal(tree->adt.ctor->name, "Node");
    assert_string_equal(tree->adt.fields[0]->adt.ctor->name, "Leaf");
    ry_value_release(out);
    release_all(2, a);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_square),
        cmocka_unit_test(test_broadcast_to_like),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_mlp_ops),
        cmocka_unit_test(test_op_gradients),
        cmocka_unit_test(test_mode_dependent_ops),
        cmocka_unit_test(test_if),
        cmocka_unit_test(test_list_recursion),
        cmocka_unit_test(test_treelstm),
        cmocka_unit_test(test_closure_map),
        cmocka_unit_test(test_higher_order),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_constants),
        cmocka_unit_test(test_pytorch_mlp),
        cmocka_unit_test(test_pytorch_treelstm),
        cmocka_unit_test(test_pytorch_lstm),
        cmocka_unit_test(test_tuples),
        cmocka_unit_test(test_mutual_recursion),
        cmocka_unit_test(test_shared_dag),
        cmocka_unit_test(test_function_expression),
        cmocka_unit_test(test_second_derivative),
        cmocka_unit_test(test_second_derivative_mlp_if),
        cmocka_unit_test(test_second_derivative_dynamic),
        cmocka_unit_test(test_hessian_vector_product),
        cmocka_unit_test(test_avg_pool_grad_count_include_pad),
        cmocka_unit_test(test_promote_float64),
        cmocka_unit_test(test_program_corpus),
        cmocka_unit_test(test_symbolic_dims),
        cmocka_unit_test(test_mutual_adts),
        cmocka_unit_test(test_gradcheck_detects_mismatch),
        cmocka_unit_test(test_any_dims_broadcast),
        cmocka_unit_test(test_first_rule_error),
        cmocka_unit_test(test_rejected_inputs),
        cmocka_unit_test(test_adt_parameter),
        cmocka_unit_test(test_adt_arguments_from_text),
        cmocka_unit_test(test_adt_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
