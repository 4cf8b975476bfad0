/*
 * test_ad_block.c: one backpropagator closure per run of operators
 * (ad/grad_run.c) and the inlining and scheduling that make a recursive
 * step one run (ad/grad_inline.c). The shape of the gradient program is
 * checked by counting closures, cells and zeros_like in it; its values
 * against central finite differences in float64 (mixed programs: calls
 * between runs, if and match in the middle, values used across runs, in
 * the tail and twice in one operator, tuples, refs, captured values,
 * operators without gradient or with integer results, inlined globals,
 * second order), and against the former emitter (RELAYC_GRAD_RUNS=0, one
 * closure per operator) on the char-LSTM and the Tree-LSTM of models/.
 */
#include <stdlib.h>

#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/datasets.h"
#include "relayc/interp.h"
#include "relayc/pass.h"

#include "ad/helpers.h"

static void per_op(bool on) {
    if (on)
        setenv("RELAYC_GRAD_RUNS", "0", 1);
    else
        unsetenv("RELAYC_GRAD_RUNS");
}

static int count(const char *s, const char *pat) {
    int n = 0;
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat))
        n++;
    return n;
}

/* The printed definition of global `name` (caller frees). */
static char *global_text(ry_module *m, const char *name) {
    char *all = ry_module_print(m);
    assert_non_null(all);
    char head[128];
    snprintf(head, sizeof head, "def @%s(", name);
    char *p = strstr(all, head);
    assert_non_null(p);
    char *end = strstr(p + 1, "\ndef ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char *r = malloc(n + 1);
    assert_non_null(r);
    memcpy(r, p, n);
    r[n] = 0;
    ry_free(all);
    return r;
}

/* Parses text, differentiates @main; returns the module. */
static ry_module *grad_of(const char *text) {
    ry_module *m = test_parse(text, true);
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, NULL, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("ry_grad: %s", err.msg);
    }
    return m;
}

/* ---- shape of the gradient program ---- */

/* Eight operators in a row, one value used twice by one of them. */
static const char *line_text = "#[version = \"0.0.5\"]\n"
                               "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
                               "  %0 = add(%x, %w);\n"
                               "  %1 = sigmoid(%0);\n"
                               "  %2 = multiply(%1, %x);\n"
                               "  %3 = tanh(%2);\n"
                               "  %4 = exp(%3);\n"
                               "  %5 = subtract(%4, %w);\n"
                               "  %6 = multiply(%5, %5);\n"
                               "  negative(%6)\n"
                               "}\n";

static void test_straight_line_one_closure(void **state) {
    (void)state;
    ry_module *m = grad_of(line_text);
    char *t = global_text(m, "main_grad");
    /* one closure; the only cell is the result's, which the caller seeds */
    assert_int_equal(count(t, "fn ("), 1);
    assert_int_equal(count(t, "zeros_like("), 1);
    assert_int_equal(count(t, "ref("), 1);
    free(t);
    ry_module_free(m);

    per_op(true); /* the former emitter: a closure and a cell per operator */
    m = grad_of(line_text);
    per_op(false);
    t = global_text(m, "main_grad");
    assert_int_equal(count(t, "fn ("), 8);
    assert_int_equal(count(t, "zeros_like("), 8);
    free(t);
    ry_module_free(m);
}

/* Both emitters give the same gradient (to rounding: the in-run sums add
 * in another order), and it passes the finite-difference check. */
static void same_as_per_op(const char *text, int nargs, ry_value **args) {
    ry_module *m = gradcheck_ok(text, "main", nargs, args, 1e-6, 1e-8);
    per_op(true);
    ry_module *m0 = gradcheck_ok(text, "main", nargs, args, 1e-6, 1e-8);
    per_op(false);
    ry_value *a = run(m, "main_gradient", nargs, args);
    ry_value *b = run(m0, "main_gradient", nargs, args);
    ry_value *ga = a->tuple.fields[1], *gb = b->tuple.fields[1];
    assert_int_equal(ga->tuple.n, gb->tuple.n);
    for (int i = 0; i < ga->tuple.n; i++) {
        if (ga->tuple.fields[i]->kind != RY_VAL_TENSOR) continue;
        test_assert_close(ga->tuple.fields[i]->tensor, gb->tuple.fields[i]->tensor, 1e-12, 1e-12);
    }
    ry_value_release(a);
    ry_value_release(b);
    ry_module_free(m);
    ry_module_free(m0);
}

static void test_straight_line_values(void **state) {
    (void)state;
    ry_value *a[2] = {rv1(3), rv1(3)};
    same_as_per_op(line_text, 2, a);
    release_all(2, a);
}

/* ---- mixed programs ---- */

/* A closure called between runs; a value of the first run used by the
 * second, inside the closure's argument and in the tail. */
static void test_calls_between_runs(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
                       "  let %f = fn (%z: Tensor[(3), float64]) { multiply(%z, sigmoid(%z)) };\n"
                       "  %0 = add(%x, %w);\n"
                       "  %1 = tanh(%0);\n"
                       "  %2 = %f(%1);\n"
                       "  %3 = multiply(%2, %0);\n"
                       "  %4 = %f(%3);\n"
                       "  (add(%4, %1), %0)\n"
                       "}\n";
    ry_value *a[2] = {rv1(3), rv1(3)};
    same_as_per_op(text, 2, a);
    ry_module *m = grad_of(text);
    char *t = global_text(m, "main_grad");
    /* runs: [add tanh] call [multiply] call [add]; plus the closure's own */
    assert_int_equal(count(t, "ref_write(%bp"), 4);
    free(t);
    ry_module_free(m);
    release_all(2, a);
}

/* if and match between runs; values from before used in the branches. */
static void test_branches_between_runs(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "type Box { Full(Tensor[(3), float64]), Empty }\n"
                       "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
                       "  %0 = multiply(%x, %w);\n"
                       "  %1 = tanh(%0);\n"
                       "  %2 = if (greater(sum(%x), 0f64)) { exp(multiply(%1, %w)) } "
                       "else { sigmoid(%1) };\n"
                       "  %3 = add(%2, %0);\n"
                       "  %4 = if (greater(sum(%w), 0f64)) { Full(%3) } else { Empty };\n"
                       "  %5 = match (%4) { Full(%v) => multiply(%v, %1), Empty => %1 };\n"
                       "  multiply(%5, %3)\n"
                       "}\n";
    for (int k = 0; k < 2; k++) { /* both signs: both branches */
        ry_value *a[2] = {rand_value(1, (int64_t[]){3}, k ? 0.1 : -1, k ? 1 : -0.1),
                          rand_value(1, (int64_t[]){3}, k ? -1 : 0.1, k ? -0.1 : 1)};
        same_as_per_op(text, 2, a);
        release_all(2, a);
    }
}

/* A tuple result of an operator, projected in its run and returned whole;
 * an integer result (argmax); an operator without gradient (ones_like);
 * refs and a closure capturing a value of the run. */
static void test_tuples_ints_refs(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(4), float64], %w: Tensor[(2), float64]) {\n"
        "  %0 = split(%x, indices_or_sections=2);\n"
        "  %1 = multiply(%0.0, %0.1);\n"
        "  %2 = split(tanh(%x), indices_or_sections=2);\n"
        "  %3 = add(multiply(%2.0, %w), %2.1);\n"
        "  %4 = argmax(%3, axis=[0]);\n"
        "  %5 = take(%3, %4);\n"
        "  %6 = add(ones_like(%1), %1);\n"
        "  let %r = ref(%1);\n"
        "  let %u = ref_write(%r, multiply(%3, %6));\n"
        "  let %g = fn (%z: Tensor[(2), float64]) { add(%z, %3) };\n"
        "  %7 = %g(ref_read(%r));\n"
        "  (multiply(%7, %5), %2, sum(%1))\n"
        "}\n";
    ry_value *a[2] = {rv1(4), rv1(2)};
    same_as_per_op(text, 2, a);
    release_all(2, a);
}

/* Values whose adjoint nothing adds to (every use a comparison: one in a
 * closure, one after a call, where they are not local to their run; or
 * only dead code after a call uses them) skip their rule as local ones
 * do: exp(100) is inf in float32, and pushing a zero adjoint through exp's
 * rule would make x's gradient 0 x inf = NaN. Both emitters, the
 * interpreter and the VM. */
static void test_never_added_adjoint(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2), float32], %w: Tensor[(2), float32]) {\n"
                       "  let %t = exp(%x);\n"
                       "  let %s = exp(%x);\n"
                       "  let %f = fn (%z: Tensor[(2), float32]) -> Tensor[(2), bool] {\n"
                       "    greater(%t, %z)\n"
                       "  };\n"
                       "  let %u = exp(%w);\n"
                       "  let %k = %f(%x);\n"
                       "  %0 = less(%u, %x);\n"
                       "  let %d = multiply(%s, cast(%k, dtype=\"float32\"));\n"
                       "  let %e = tanh(%d);\n"
                       "  (%k, %0, sum(multiply(%w, %w)))\n"
                       "}\n";
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){2});
    ry_tensor *w = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){2});
    assert_non_null(x);
    assert_non_null(w);
    ry_tensor_set(x, 0, 100), ry_tensor_set(x, 1, 1);
    ry_tensor_set(w, 0, 100), ry_tensor_set(w, 1, 2);
    ry_value *args[2] = {ry_value_tensor(x), ry_value_tensor(w)};
    for (int emitter = 0; emitter < 2; emitter++) {
        per_op(emitter == 1);
        ry_module *m = grad_of(text);
        per_op(false);
        for (int engine = 0; engine < 2; engine++) {
            ry_value *out = engine ? run_vm(m, "main_gradient", 2, args)
                                   : run(m, "main_gradient", 2, args);
            const ry_value *g = out->tuple.fields[1];
            const ry_tensor *gx = g->tuple.fields[0]->tensor, *gw = g->tuple.fields[1]->tensor;
            for (int i = 0; i < 2; i++) {
                if (ry_tensor_get(gx, i) != 0) /* NaN before */
                    fail_msg("emitter %d, engine %d: d/dx%d = %g", emitter, engine, i,
                             ry_tensor_get(gx, i));
                assert_true(ry_tensor_get(gw, i) == 2 * ry_tensor_get(w, i));
            }
            ry_value_release(out);
        }
        ry_module_free(m);
    }
    release_all(2, args);
}

/* An if whose branches give different shapes (typed (2, ?)): each branch
 * hands its adjoint to its own cell through a function of the joined type
 * (ad/grad.c, xif_widened). Either branch, against finite differences and
 * the former emitter, and on the VM. */
static void test_if_branches_differ_in_shape(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%c: bool, %a: Tensor[(2, 1), float64], %b: Tensor[(2, 3), float64]) {\n"
                       "  %0 = if (%c) { tanh(%a) } else { multiply(%b, %b) };\n"
                       "  %1 = (%0, %a);\n"
                       "  %2 = if (%c) { %1 } else { (%b, %a) };\n"
                       "  add(sum(multiply(%2.0, %2.0)), sum(%2.1))\n"
                       "}\n";
    for (int branch = 0; branch < 2; branch++) {
        ry_tensor *c = ry_tensor_new(RY_BOOL, 0, NULL);
        assert_non_null(c);
        ry_tensor_set(c, 0, branch);
        ry_value *a[3] = {ry_value_tensor(c), rv2(2, 1), rv2(2, 3)};
        same_as_per_op(text, 3, a);
        ry_module *m = grad_of(text);
        ry_value *want = run(m, "main_gradient", 3, a), *got = run_vm(m, "main_gradient", 3, a);
        for (int i = 1; i < 3; i++)
            test_assert_close(got->tuple.fields[1]->tuple.fields[i]->tensor,
                              want->tuple.fields[1]->tuple.fields[i]->tensor, 1e-12, 1e-12);
        ry_value_release(want);
        ry_value_release(got);
        ry_module_free(m);
        release_all(3, a);
    }
}

/* Globals inlined into their caller (one of them twice, one with its own
 * name for the symbolic batch dimension), a recursive one left a call. */
static void test_inlined_globals(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @lin(%a: Tensor[(m, 3), float64], %w: Tensor[(2, 3), float64]) {\n"
        "  %0 = nn.dense(%a, %w);\n"
        "  (tanh(%0), %0)\n"
        "}\n"
        "def @loop(%i: int32, %h: Tensor[(n, 3), float64], %u: Tensor[(2, 3), float64]) "
        "-> Tensor[(n, 3), float64] {\n"
        "  if (less(%i, 2)) {\n"
        "    %0 = @lin(%h, %u);\n"
        "    %1 = concatenate((%0.0, %0.1), axis=1);\n"
        "    @loop(add(%i, 1), sigmoid(split(%1, indices_or_sections=[3], axis=1).0), %u)\n"
        "  } else { %h }\n"
        "}\n"
        "def @main(%x: Tensor[(n, 3), float64], %w: Tensor[(2, 3), float64]) {\n"
        "  %0 = @lin(%x, %w);\n"
        "  %1 = @lin(multiply(%x, %x), %w);\n"
        "  %2 = @loop(0, %x, %w);\n"
        "  (multiply(%0.0, %1.1), %2)\n"
        "}\n";
    for (int64_t n = 1; n <= 2; n++) {
        ry_value *a[2] = {rand_value(2, (int64_t[]){n, 3}, -1, 1), rv2(2, 3)};
        same_as_per_op(text, 2, a);
        release_all(2, a);
    }
    ry_module *m = grad_of(text);
    assert_null(ry_module_find_global(m, "lin_grad"));   /* inlined */
    assert_non_null(ry_module_find_global(m, "loop_grad")); /* recursive */
    char *t = global_text(m, "main_grad");
    assert_int_equal(count(t, "@loop_grad("), 1);
    free(t);
    ry_module_free(m);
}

/* Second order through runs, a call and a branch. */
static void test_second_order(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
                       "  let %f = fn (%z: Tensor[(3), float64]) { multiply(%z, %w) };\n"
                       "  %0 = tanh(multiply(%x, %w));\n"
                       "  %1 = multiply(%0, %0);\n"
                       "  %2 = %f(%1);\n"
                       "  %3 = if (greater(sum(%2), 0f64)) { sigmoid(%2) } else { exp(%2) };\n"
                       "  add(multiply(%3, %0), %1)\n"
                       "}\n";
    ry_value *a[2] = {rv1(3), rv1(3)};
    ry_module *m = test_parse(text, true);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7, .second_order = true};
    ry_gradcheck_report rep;
    ry_error err;
    if (ry_gradcheck(m, "main", 2, a, &o, &rep, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("gradcheck could not run: %s", err.msg);
    }
    assert_true(rep.ok);
    ry_module_free(m);
    release_all(2, a);
}

/* ---- the models: the same gradients as the former emitter ---- */

/* @loss_gradient of models/NAME.relay on args, by the interpreter, either
 * emitter; optimized when opt. A tree, when given, becomes args[0] (built
 * with this module's constructors). The module goes to *mod: the result's
 * ADT values point into it. */
static ry_value *model_grad(const char *name, bool old, bool opt, const ry_tree *tree, int nargs,
                            ry_value **args, ry_module **mod) {
    char path[128];
    snprintf(path, sizeof path, "models/%s.relay", name);
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("%s", path);
    }
    per_op(old);
    ry_status st = ry_grad(m, "loss", NULL, NULL, NULL, &err);
    per_op(false);
    if (st || (opt && ry_optimize(m, 2, &err))) {
        ry_error_print(stderr, &err);
        fail_msg("%s: %s", name, err.msg);
    }
    if (tree)
        assert_int_equal(ry_tree_to_value(tree, ry_module_find_ctor(m, "Leaf"),
                                          ry_module_find_ctor(m, "Node"), &args[0], &err),
                         RY_OK);
    ry_value *out = run(m, "loss_gradient", nargs, args);
    if (tree) {
        ry_value_release(args[0]);
        args[0] = NULL;
    }
    *mod = m;
    return out;
}

static void compare_grads(const ry_value *a, const ry_value *b, double tol) {
    assert_int_equal(a->kind, b->kind);
    if (a->kind == RY_VAL_TENSOR) {
        test_assert_close(a->tensor, b->tensor, tol, tol);
        return;
    }
    if (a->kind == RY_VAL_ADT) { /* the tree's gradient: its integer fields */
        assert_string_equal(a->adt.ctor->name, b->adt.ctor->name);
        for (int i = 0; i < a->adt.n; i++)
            compare_grads(a->adt.fields[i], b->adt.fields[i], tol);
        return;
    }
    assert_int_equal(a->kind, RY_VAL_TUPLE);
    assert_int_equal(a->tuple.n, b->tuple.n);
    for (int i = 0; i < a->tuple.n; i++)
        compare_grads(a->tuple.fields[i], b->tuple.fields[i], tol);
}

static ry_value *rand_f32(int ndim, const int64_t *shape, double scale) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, scale * urand());
    return ry_value_tensor(t);
}

static ry_value *rand_ids(int ndim, const int64_t *shape, int hi) {
    ry_tensor *t = ry_tensor_new(RY_INT32, ndim, shape);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, (int)((urand() + 1) / 2 * hi) % hi);
    return ry_value_tensor(t);
}

static void test_charlstm_same_gradient(void **state) {
    (void)state;
    int64_t n = 2, t = 3;
    ry_value *a[11] = {
        rand_ids(2, (int64_t[]){n, t}, 65),       rand_ids(2, (int64_t[]){n, t}, 65),
        rand_f32(2, (int64_t[]){n, 256}, 0.5),     rand_f32(2, (int64_t[]){n, 256}, 0.5),
        rand_f32(2, (int64_t[]){65, 64}, 1),       rand_f32(2, (int64_t[]){1024, 64}, 0.1),
        rand_f32(2, (int64_t[]){1024, 256}, 0.1),  rand_f32(1, (int64_t[]){1024}, 0.1),
        rand_f32(1, (int64_t[]){1024}, 0.1),       rand_f32(2, (int64_t[]){65, 256}, 0.1),
        rand_f32(1, (int64_t[]){65}, 0.1)};
    ry_module *m[3];
    ry_value *old = model_grad("charlstm", true, false, NULL, 11, a, &m[0]);
    ry_value *now = model_grad("charlstm", false, false, NULL, 11, a, &m[1]);
    ry_value *opt = model_grad("charlstm", false, true, NULL, 11, a, &m[2]);
    compare_grads(old, now, 1e-5);
    compare_grads(old, opt, 1e-5);
    ry_value_release(old);
    ry_value_release(now);
    ry_value_release(opt);
    for (int i = 0; i < 3; i++)
        ry_module_free(m[i]);
    release_all(11, a);
}

static void test_treelstm_same_gradient(void **state) {
    (void)state;
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *tb = NULL;
    ry_error err;
    assert_int_equal(ry_treebank_read("tests/models/treelstm_trees.txt", vocab, true, &tb, &err),
                     RY_OK);
    ry_value *a[10] = {NULL,
                       rand_f32(2, (int64_t[]){18281, 300}, 0.05),
                       rand_f32(2, (int64_t[]){150, 300}, 0.1),
                       rand_f32(1, (int64_t[]){150}, 0.1),
                       rand_f32(2, (int64_t[]){150, 300}, 0.1),
                       rand_f32(1, (int64_t[]){150}, 0.1),
                       rand_f32(2, (int64_t[]){750, 300}, 0.1),
                       rand_f32(1, (int64_t[]){750}, 0.1),
                       rand_f32(2, (int64_t[]){5, 150}, 0.1),
                       rand_f32(1, (int64_t[]){5}, 0.1)};
    const ry_tree *tree = &tb->trees[tb->ntrees - 1];
    ry_module *m[2];
    ry_value *old = model_grad("treelstm", true, false, tree, 10, a, &m[0]);
    ry_value *now = model_grad("treelstm", false, true, tree, 10, a, &m[1]);
    compare_grads(old, now, 1e-5);
    ry_value_release(old);
    ry_value_release(now);
    ry_module_free(m[0]);
    ry_module_free(m[1]);
    release_all(10, a);
    ry_treebank_free(tb);
    ry_vocab_free(vocab);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straight_line_one_closure),
        cmocka_unit_test(test_straight_line_values),
        cmocka_unit_test(test_calls_between_runs),
        cmocka_unit_test(test_branches_between_runs),
        cmocka_unit_test(test_tuples_ints_refs),
        cmocka_unit_test(test_never_added_adjoint),
        cmocka_unit_test(test_if_branches_differ_in_shape),
        cmocka_unit_test(test_inlined_globals),
        cmocka_unit_test(test_second_order),
        cmocka_unit_test(test_charlstm_same_gradient),
        cmocka_unit_test(test_treelstm_same_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
