/*
 * test_pass_hoist.c: loop-invariant code motion out of recursion
 * (src/pass/hoist.c). An RNN whose step embeds a symbol and projects it
 * gets a lookup in a table computed once before the loop; its results and
 * its gradient (float64, against central finite differences and against
 * the program before the pass; the compiled engine against the
 * interpreter, its row-sparse table gradient densifying once it outgrows
 * the table) are unchanged. Other invariant work moves too. The module is
 * left exactly as it was when a parameter changes between steps, the
 * table would be large, the recursion is mutual or the function escapes.
 */
#include <stdlib.h>

#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/interp.h"
#include "relayc/pass.h"
#include "relayc/vm.h"

#include "ad/helpers.h"

static ry_error err;

static void ok(ry_status s) {
    if (s != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s", err.msg);
    }
}

static int count(const char *s, const char *pat) {
    int n = 0;
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat)) n++;
    return n;
}

/* An Elman RNN over the columns of x (n, t): symbols embedded in 3, state 4. */
#define RNN_HEAD                                                                                   \
    "#[version = \"0.0.5\"]\n"                                                                    \
    "def @cell(%x: Tensor[(n, 3), float64], %h: Tensor[(n, 4), float64],\n"                      \
    "          %w_ih: Tensor[(4, 3), float64], %b: Tensor[(4), float64],\n"                      \
    "          %w_hh: Tensor[(4, 4), float64]) -> Tensor[(n, 4), float64] {\n"                  \
    "  %0 = nn.dense(%x, %w_ih, units=None);\n"                                                  \
    "  %1 = nn.bias_add(%0, %b);\n"                                                              \
    "  %2 = nn.dense(%h, %w_hh, units=None);\n"                                                  \
    "  %3 = add(%1, %2);\n"                                                                      \
    "  tanh(%3)\n"                                                                               \
    "}\n"

#define RNN_RUN(ROWS, EXTRA, NEXT_W)                                                                      \
    "def @run(%i: int32, %t: int32, %x: Tensor[(n, t), int32], %h: Tensor[(n, 4), float64],\n"   \
    "         %emb: Tensor[(" ROWS ", 3), float64], %w_ih: Tensor[(4, 3), float64],\n"           \
    "         %b: Tensor[(4), float64], %w_hh: Tensor[(4, 4), float64]) -> Tensor[(n, 4), float64] {\n" \
    "  if (%i == %t) {\n"                                                                        \
    "    %h\n"                                                                                   \
    "  } else {\n"                                                                               \
    "    %0 = take(%x, %i, axis=1);\n"                                                           \
    "    %1 = take(%emb, %0, axis=0);\n"                                                         \
    "    %2 = @cell(%1, %h, %w_ih, %b, %w_hh);\n"                                                \
    "    %3 = add(%i, 1);\n" EXTRA                                                               \
    "    @run(%3, %t, %x, %2, %emb, " NEXT_W ", %b, %w_hh)\n"                                    \
    "  }\n"                                                                                      \
    "}\n"

#define RNN_MAIN(ROWS)                                                                             \
    "def @main(%x: Tensor[(2, 4), int32], %h0: Tensor[(2, 4), float64],\n"                      \
    "          %emb: Tensor[(" ROWS ", 3), float64], %w_ih: Tensor[(4, 3), float64],\n"          \
    "          %b: Tensor[(4), float64], %w_hh: Tensor[(4, 4), float64]) -> float64 {\n"        \
    "  %0 = @run(0, 4, %x, %h0, %emb, %w_ih, %b, %w_hh);\n"                                      \
    "  %1 = multiply(%0, %0);\n"                                                                 \
    "  sum(%1)\n"                                                                                \
    "}\n"

static const char *rnn_text = RNN_HEAD RNN_RUN("5", "", "%w_ih") RNN_MAIN("5");

static ry_value *ids(int64_t n, int64_t t, int hi) {
    ry_tensor *x = ry_tensor_new(RY_INT32, 2, (int64_t[]){n, t});
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, (double)((i * 3 + 1) % hi));
    return ry_value_tensor(x);
}

/* x (2, 4) over `rows` symbols, h0, emb, w_ih, b, w_hh. */
static void rnn_args(ry_value **a, int64_t rows) {
    a[0] = ids(2, 4, (int)rows);
    a[1] = rv2(2, 4);
    a[2] = rv2(rows, 3);
    a[3] = rv2(4, 3);
    a[4] = rv1(4);
    a[5] = rv2(4, 4);
}

static char *hoisted_text(const char *text) {
    ry_module *m = test_parse(text, true);
    ok(ry_hoist(m, &err));
    char *s = ry_module_print(m);
    ry_module_free(m);
    return s;
}

/* The global's printed definition, up to the next one. */
static char *def_of(const char *all, const char *name) {
    char head[64];
    snprintf(head, sizeof head, "def @%s(", name);
    const char *p = strstr(all, head);
    if (!p) return NULL;
    const char *end = strstr(p + 1, "\ndef ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char *r = malloc(n + 1);
    memcpy(r, p, n);
    r[n] = 0;
    return r;
}

static void compare(const ry_value *a, const ry_value *b, double tol) {
    assert_int_equal(a->kind, b->kind);
    if (a->kind == RY_VAL_TENSOR) {
        test_assert_close(a->tensor, b->tensor, tol, tol);
        return;
    }
    assert_int_equal(a->kind, RY_VAL_TUPLE);
    assert_int_equal(a->tuple.n, b->tuple.n);
    for (int i = 0; i < a->tuple.n; i++) compare(a->tuple.fields[i], b->tuple.fields[i], tol);
}

/* @main_gradient of text by the compiled engine, after the pipeline. */
static ry_value *vm_gradient(const char *text, int nargs, ry_value **args) {
    ry_module *m = test_parse(text, true);
    ok(ry_grad(m, "main", NULL, NULL, NULL, &err));
    ok(ry_optimize(m, 2, &err));
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(m, NULL, &p, &err));
    ry_value *v = NULL;
    ok(ry_vm_call(p, "main_gradient", nargs, args, NULL, &v, &err));
    ry_vm_free(p);
    ry_module_free(m);
    return v;
}

/* @main's gradient after the pass (text hoisted) against finite
 * differences, against the program before it, and by the compiled engine. */
static void same_gradient(const char *hoisted, const char *text, int nargs, ry_value **a) {
    ry_module *g1 = gradcheck_ok(hoisted, "main", nargs, a, 1e-6, 1e-8);
    ry_module *g0 = gradcheck_ok(text, "main", nargs, a, 1e-6, 1e-8);
    ry_value *want = run(g0, "main_gradient", nargs, a), *got = run(g1, "main_gradient", nargs, a);
    compare(got, want, 1e-12);
    ry_value *vm = vm_gradient(hoisted, nargs, a);
    compare(vm, want, 1e-12);
    ry_value_release(vm);
    ry_value_release(want);
    ry_value_release(got);
    ry_module_free(g0);
    ry_module_free(g1);
}

static void test_embedding_projection_becomes_a_table(void **state) {
    (void)state;
    char *h = hoisted_text(rnn_text);
    char *entry = def_of(h, "run"), *loop = def_of(h, "run_loop");
    assert_non_null(entry);
    assert_non_null(loop);
    /* the entry computes dense(emb, w_ih) + b once; the loop looks it up */
    assert_int_equal(count(entry, "nn.dense(%emb, %w_ih"), 1);
    assert_int_equal(count(entry, "nn.bias_add(%table, %b, axis=1)"), 1);
    assert_int_equal(count(entry, "@run_loop("), 1);
    assert_int_equal(count(loop, "take(%table_bias, "), 1);
    assert_int_equal(count(loop, "%w_ih, units"), 0);
    assert_int_equal(count(loop, "@run_loop("), 2); /* its def and its call */
    assert_int_equal(count(loop, "@run("), 0);
    assert_null(def_of(h, "run_loop_loop")); /* the loop has nothing left to move */

    ry_value *a[6];
    rnn_args(a, 5);
    ry_module *m0 = test_parse(rnn_text, true), *m1 = test_parse(h, true);
    ry_value *want = run(m0, "main", 6, a), *got = run(m1, "main", 6, a);
    compare(got, want, 1e-13);
    ry_value_release(want);
    ry_value_release(got);
    ry_module_free(m0);
    ry_module_free(m1);

    same_gradient(h, rnn_text, 6, a);
    release_all(6, a);
    free(entry);
    free(loop);
    ry_free(h);
}

/* sigmoid(%w) and what only it feeds are invariant: computed before the
 * loop, passed as one parameter. */
static const char *invariant_text =
    "#[version = \"0.0.5\"]\n"
    "def @run(%i: int32, %x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
    "  if (%i == 0) {\n"
    "    %x\n"
    "  } else {\n"
    "    %0 = sigmoid(%w);\n"
    "    %1 = multiply(%0, 2f64);\n"
    "    %2 = multiply(%x, %1);\n"
    "    %3 = subtract(%i, 1);\n"
    "    @run(%3, %2, %w)\n"
    "  }\n"
    "}\n"
    "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> float64 {\n"
    "  %0 = @run(5, %x, %w);\n"
    "  sum(%0)\n"
    "}\n";

static void test_invariant_work_moves(void **state) {
    (void)state;
    char *h = hoisted_text(invariant_text);
    char *entry = def_of(h, "run"), *loop = def_of(h, "run_loop");
    assert_non_null(loop);
    assert_int_equal(count(entry, "sigmoid(%w)"), 1);
    assert_int_equal(count(loop, "sigmoid("), 0);
    assert_int_equal(count(loop, "2f64"), 0);
    ry_value *a[2] = {rv1(3), rv1(3)};
    same_gradient(h, invariant_text, 2, a);
    release_all(2, a);
    free(entry);
    free(loop);
    ry_free(h);
}

/* ry_hoist leaves text's module exactly as it printed before. */
static void unchanged(const char *what, const char *text) {
    ry_module *m = test_parse(text, true);
    char *before = ry_module_print(m);
    ok(ry_hoist(m, &err));
    char *after = ry_module_print(m);
    if (strcmp(before, after) != 0) fail_msg("%s: the module changed:\n%s", what, after);
    ry_free(before);
    ry_free(after);
    ry_module_free(m);
}

static void test_left_alone(void **state) {
    (void)state;
    /* w_ih changes from step to step: nothing is invariant but emb */
    unchanged("a parameter that changes", RNN_HEAD RNN_RUN("5", "    %4 = multiply(%w_ih, 0.5f64);\n", "%4") RNN_MAIN("5"));
    /* a 2000-row table would cost more than the steps it saves */
    unchanged("a large table", RNN_HEAD RNN_RUN("2000", "", "%w_ih") RNN_MAIN("2000"));
    /* @b calls @a with arguments @a's own calls do not show */
    unchanged("mutual recursion",
              "#[version = \"0.0.5\"]\n"
              "def @a(%i: int32, %x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
              "  if (%i == 0) { %x } else {\n"
              "    %0 = sigmoid(%w);\n    %1 = multiply(%x, %0);\n    %2 = subtract(%i, 1);\n"
              "    @b(%2, %1, %w)\n  }\n}\n"
              "def @b(%i: int32, %x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
              "  %0 = exp(%w);\n  @a(%i, %x, %0)\n}\n"
              "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
              "  @a(3, %x, %w)\n}\n");
    /* @run called through a ref: a call this pass cannot redirect */
    unchanged("a function used as a value",
              "#[version = \"0.0.5\"]\n"
              "def @run(%i: int32, %x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
              "  if (%i == 0) { %x } else {\n"
              "    %0 = sigmoid(%w);\n    %1 = multiply(%x, %0);\n    %2 = subtract(%i, 1);\n"
              "    %3 = ref(@run);\n    %4 = ref_read(%3);\n    %4(%2, %1, %w)\n  }\n}\n"
              "def @main(%x: Tensor[(3), float64], %w: Tensor[(3), float64]) -> Tensor[(3), float64] {\n"
              "  @run(3, %x, %w)\n}\n");
    /* (?) + (?) may fail at run time (the shapes need not broadcast): moved
     * before the loop it would fail even when the loop runs no step */
    unchanged("an invariant call of unknown shapes",
              "#[version = \"0.0.5\"]\n"
              "def @g(%i: int32, %acc: Tensor[(3), float32], %a: Tensor[(?), float32], %b: Tensor[(?), float32]) -> Tensor[(3), float32] {\n"
              "  if (%i <= 0) { %acc } else {\n"
              "    %0 = add(%a, %b);\n    %1 = subtract(%i, 1);\n"
              "    @g(%1, add(%acc, sum(%0)), %a, %b)\n  }\n}\n"
              "def @main(%x: Tensor[(?), float32], %y: Tensor[(?), float32], %acc: Tensor[(3), float32], %n: int32) {\n"
              "  @g(%n, %acc, %x, %y)\n}\n");
    /* no recursion at all */
    unchanged("no loop", RNN_HEAD
              "def @main(%x: Tensor[(2, 3), float64], %h: Tensor[(2, 4), float64],\n"
              "          %w_ih: Tensor[(4, 3), float64], %b: Tensor[(4), float64],\n"
              "          %w_hh: Tensor[(4, 4), float64]) -> Tensor[(2, 4), float64] {\n"
              "  @cell(%x, %h, %w_ih, %b, %w_hh)\n}\n");
}

/* The char-LSTM of models/: the same loss gradient (float32) before and
 * after the pass, by the interpreter and the compiled engine. */
static ry_value *rand_f32(int ndim, const int64_t *shape, double scale) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, scale * urand());
    return ry_value_tensor(t);
}

static ry_value *charlstm_gradient(bool hoist, bool vm, ry_value **a) {
    ry_module *m = NULL;
    if (ry_module_parse_file("models/charlstm.relay", &m, &err) || ry_module_typecheck(m, &err))
        fail_msg("%s", err.msg);
    if (hoist) {
        ok(ry_hoist(m, &err));
        assert_non_null(ry_module_find_global(m, "run_loss_loop"));
    }
    ok(ry_grad(m, "loss", NULL, NULL, NULL, &err));
    ry_value *v = NULL;
    if (vm) {
        ok(ry_optimize(m, 2, &err));
        ry_vm_program *p = NULL;
        ok(ry_vm_compile(m, NULL, &p, &err));
        ok(ry_vm_call(p, "loss_gradient", 11, a, NULL, &v, &err));
        ry_vm_free(p);
    } else {
        v = run(m, "loss_gradient", 11, a);
    }
    ry_module_free(m);
    return v;
}

static void test_charlstm_same_gradient(void **state) {
    (void)state;
    int64_t n = 2, t = 40; /* 80 looked-up rows: more than the 65 symbols */
    ry_value *a[11] = {
        ids(n, t, 65), ids(n, t, 64),
        rand_f32(2, (int64_t[]){n, 256}, 0.5),     rand_f32(2, (int64_t[]){n, 256}, 0.5),
        rand_f32(2, (int64_t[]){65, 64}, 1),       rand_f32(2, (int64_t[]){1024, 64}, 0.1),
        rand_f32(2, (int64_t[]){1024, 256}, 0.1),  rand_f32(1, (int64_t[]){1024}, 0.1),
        rand_f32(1, (int64_t[]){1024}, 0.1),       rand_f32(2, (int64_t[]){65, 256}, 0.1),
        rand_f32(1, (int64_t[]){65}, 0.1)};
    ry_value *want = charlstm_gradient(false, false, a);
    ry_value *got = charlstm_gradient(true, false, a);
    compare(got, want, 1e-5);
    ry_value_release(got);
    got = charlstm_gradient(true, true, a);
    compare(got, want, 1e-5);
    ry_value_release(got);
    ry_value_release(want);
    release_all(11, a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_projection_becomes_a_table),
        cmocka_unit_test(test_invariant_work_moves),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_charlstm_same_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
