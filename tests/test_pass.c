/*
 * test_pass.c: the optimization passes (src/pass/). Each pass alone on small
 * hand-written programs (before/after through the printer and the
 * interpreter), the verifier on broken IR, and the pipeline on the gradient
 * programs of an MLP, a CNN and an RNN over a list (no ref, closure or
 * match left; same values as the unoptimized program to 1e-12), on a
 * dynamic tree recursion (same values), and on every .relay of tests/corpus
 * and tests/run (still type-checks; same results where inputs exist).
 */
#include <dirent.h>
#include <sys/stat.h>

#include "test_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"

/* ---- helpers ---- */
static void ok(ry_status st, const ry_error *err) {
    if (st != RY_OK) {
        ry_error_print(stderr, err);
        fail_msg("%s", err->msg);
    }
}

static char *print_global(ry_module *m, const char *name) {
    ry_global *g = ry_module_find_global(m, name);
    assert_non_null(g);
    return ry_expr_print(g->func);
}

/* A deterministic float64 tensor for a parameter of tensor type. */
static ry_value *input_for(const ry_type *t, int k) {
    assert_int_equal(t->kind, RY_TYPE_TENSOR);
    int64_t shape[RY_MAX_RANK];
    for (int i = 0; i < t->tensor.ndim; i++) shape[i] = t->tensor.dims[i].value;
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, sin(0.7 * (double)i + 1.3 * k) * 0.9);
    return ry_value_tensor(x);
}

static void assert_same_values(const ry_value *a, const ry_value *b, double tol) {
    ry_tensor *ta[256], *tb[256];
    int na = ry_value_flatten(a, ta, 256), nb = ry_value_flatten(b, tb, 256);
    assert_int_equal(na, nb);
    assert_true(na > 0 && na <= 256);
    for (int i = 0; i < na; i++) test_assert_close(ta[i], tb[i], tol, tol);
}

/* Calls entry of m and of o with the same arguments; the results agree. */
static void assert_same_run(ry_module *m, ry_module *o, const char *entry, int nargs,
                            ry_value **args) {
    ry_error err;
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, entry, nargs, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, entry, nargs, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-12);
    ry_value_release(ra);
    ry_value_release(rb);
}

/* Differentiates @main of text twice, optimizes one copy, checks it
 * (verifier, and with straight: no ref/closure/match/ADT/global call left)
 * and compares both on deterministic inputs. */
static void grad_case(const char *text, bool straight) {
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    const char *gm = NULL, *go = NULL;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    const ry_expr *fn = ry_module_find_global(o, go)->func;
    if (straight) {
        int k[RY_EXPR_REF_WRITE + 1];
        ry_expr_count_kinds(fn, k);
        assert_int_equal(k[RY_EXPR_REF], 0);
        assert_int_equal(k[RY_EXPR_REF_READ], 0);
        assert_int_equal(k[RY_EXPR_REF_WRITE], 0);
        assert_int_equal(k[RY_EXPR_FUNC], 1);
        assert_int_equal(k[RY_EXPR_MATCH], 0);
        assert_int_equal(k[RY_EXPR_CTOR], 0);
        assert_int_equal(k[RY_EXPR_GLOBAL], 0);
        assert_int_equal(k[RY_EXPR_IF], 0);
    }
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    int n = main->func.nparams;
    ry_value *args[16];
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) args[i] = input_for(main->func.params[i]->type, i);
    assert_same_run(m, o, gm, n, args);
    for (int i = 0; i < n; i++) ry_value_release(args[i]);
    ry_module_free(m);
    ry_module_free(o);
}

/* ---- the gradient programs ---- */
static void test_square_is_straight_line(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%d: Tensor[(3), float64]) { %d * %d }\n";
    grad_case(text, true);
    ry_module *o = test_parse(text, true);
    ry_error err;
    const char *go;
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    /* level 2 up to fusion (which would merge the four calls into one) */
    ok(ry_partial_eval(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    ok(ry_fold_constants(o, &err), &err);
    ok(ry_cse(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(o, go)->func, k);
    /* (d * d, (g * d + g * d,)) with g = ones_like(d * d), g * d shared */
    assert_int_equal(k[RY_EXPR_CALL], 4); /* multiply, ones_like, multiply, add */
    char *s = print_global(o, go);
    assert_string_equal(s, "fn (%d: Tensor[(3), float64]) {\n"
                           "  let %v = multiply(%d, %d);\n"
                           "  let %v1 = ones_like(%v);\n"
                           "  let %v2 = multiply(%v1, %d);\n"
                           "  let %v3 = add(%v2, %v2);\n"
                           "  let %t = (%v3,);\n"
                           "  (%v, %t)\n"
                           "}");
    ry_free(s);
    ry_module_free(o);
}

static const char *mlp_text =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(4, 5), float64], %w1: Tensor[(6, 5), float64],\n"
    "          %b1: Tensor[(6), float64], %w2: Tensor[(3, 6), float64],\n"
    "          %b2: Tensor[(3), float64]) {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=6), %b1));\n"
    "  %1 = nn.relu(nn.bias_add(nn.dense(%0, %w2, units=3), %b2));\n"
    "  negative(mean(nn.log_softmax(%1)))\n"
    "}\n";

static const char *cnn_text =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 1, 6, 6), float64], %w: Tensor[(2, 1, 3, 3), float64],\n"
    "          %d: Tensor[(3, 18), float64]) {\n"
    "  %0 = nn.conv2d(%x, %w, padding=[1, 1], channels=2, kernel_size=[3, 3]);\n"
    "  %1 = nn.max_pool2d(nn.relu(%0), pool_size=[2, 2], strides=[2, 2]);\n"
    "  %2 = nn.dense(nn.batch_flatten(%1), %d, units=3);\n"
    "  negative(mean(nn.log_softmax(%2)))\n"
    "}\n";

/* An RNN cell applied over a list built in the program: the recursion's
 * control flow is static, so it unrolls. */
static const char *rnn_text =
    "#[version = \"0.0.5\"]\n"
    "type List[A] {\n"
    "  Cons(A, List[A]),\n"
    "  Nil,\n"
    "}\n"
    "def @rnn(%l: List[Tensor[(1, 3), float64]], %h: Tensor[(1, 4), float64],\n"
    "         %wx: Tensor[(4, 3), float64], %wh: Tensor[(4, 4), float64])\n"
    "    -> Tensor[(1, 4), float64] {\n"
    "  match (%l) {\n"
    "    Cons(%x, %rest) => {\n"
    "      let %h2 = tanh(add(nn.dense(%x, %wx), nn.dense(%h, %wh)));\n"
    "      @rnn(%rest, %h2, %wx, %wh)\n"
    "    },\n"
    "    Nil => %h,\n"
    "  }\n"
    "}\n"
    "def @main(%a: Tensor[(1, 3), float64], %b: Tensor[(1, 3), float64],\n"
    "          %c: Tensor[(1, 3), float64], %wx: Tensor[(4, 3), float64],\n"
    "          %wh: Tensor[(4, 4), float64]) {\n"
    "  let %l = Cons(%a, Cons(%b, Cons(%c, Nil)));\n"
    "  let %h = @rnn(%l, zeros(shape=[1, 4], dtype=\"float64\"), %wx, %wh);\n"
    "  sum(%h * %h)\n"
    "}\n";

static void test_mlp_gradient(void **state) {
    (void)state;
    grad_case(mlp_text, true);
}

static void test_cnn_gradient(void **state) {
    (void)state;
    grad_case(cnn_text, true);
}

static void test_rnn_gradient(void **state) {
    (void)state;
    grad_case(rnn_text, true);
}

/* A closure passed to a higher-order global, and a fixed number of cell
 * applications counted by an integer. */
static void test_higher_order_and_counter(void **state) {
    (void)state;
    grad_case("#[version = \"0.0.5\"]\n"
              "def @twice(%f: fn (Tensor[(2), float64]) -> Tensor[(2), float64],\n"
              "           %x: Tensor[(2), float64]) -> Tensor[(2), float64] { %f(%f(%x)) }\n"
              "def @loop(%i: int32, %h: Tensor[(2), float64], %w: Tensor[(2), float64])\n"
              "    -> Tensor[(2), float64] {\n"
              "  if (%i > 0) { @loop(%i - 1, sigmoid(%h * %w), %w) } else { %h }\n"
              "}\n"
              "def @main(%x: Tensor[(2), float64], %w: Tensor[(2), float64]) {\n"
              "  let %g = fn (%y: Tensor[(2), float64]) { tanh(%y * %w) };\n"
              "  @loop(3, @twice(%g, %x), %w)\n"
              "}\n",
              true);
}

/* The gradient of the gradient program (second order), optimized: still
 * straight-line, same values. */
static void test_second_order(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @main(%x: Tensor[(2, 3), float64], %w: Tensor[(4, 3), float64]) {\n"
                       "  sum(tanh(nn.dense(%x, %w))) * sum(sigmoid(%x * %x))\n"
                       "}\n";
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    const char *g1, *g2, *h1, *h2;
    ok(ry_grad(m, "main", NULL, NULL, &g1, &err), &err);
    ok(ry_grad(m, g1, NULL, NULL, &g2, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &h1, &err), &err);
    ok(ry_grad(o, h1, NULL, NULL, &h2, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(o, h2)->func, k);
    assert_int_equal(k[RY_EXPR_REF], 0);
    assert_int_equal(k[RY_EXPR_FUNC], 1);
    assert_int_equal(k[RY_EXPR_GLOBAL], 0);
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    ry_value *args[2];
    for (int i = 0; i < 2; i++) args[i] = input_for(main->func.params[i]->type, i);
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, g2, 2, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, h2, 2, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-12);
    ry_value_release(ra);
    ry_value_release(rb);
    for (int i = 0; i < 2; i++) ry_value_release(args[i]);
    ry_module_free(m);
    ry_module_free(o);
}

/* Recursion over a tree the program receives: control flow depends on
 * data; the optimized program keeps what it must and agrees. */
static void test_dynamic_tree(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "type Tree {\n"
        "  Leaf(Tensor[(2), float64]),\n"
        "  Node(Tree, Tree),\n"
        "}\n"
        "def @walk(%t: Tree, %w: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
        "  match (%t) {\n"
        "    Leaf(%x) => tanh(%x * %w),\n"
        "    Node(%l, %r) => sigmoid(@walk(%l, %w) + @walk(%r, %w)) * %w,\n"
        "  }\n"
        "}\n"
        "def @main(%t: Tree, %w: Tensor[(2), float64]) { @walk(%t, %w) }\n";
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    const char *gm, *go;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    /* the interpreter matches constructors by identity: one tree per module */
    ry_value *tree[2];
    ry_module *mods[2] = {m, o};
    const ry_type *tt = ry_module_find_global(m, "main")->func->func.params[1]->type;
    for (int k = 0; k < 2; k++) {
        const ry_ctor *leaf = ry_module_find_ctor(mods[k], "Leaf");
        const ry_ctor *node = ry_module_find_ctor(mods[k], "Node");
        ry_value *l[3];
        for (int i = 0; i < 3; i++) {
            ry_value *x = input_for(tt, i + 2);
            l[i] = ry_value_adt(leaf, 1, &x);
        }
        ry_value *inner[2] = {l[1], l[2]};
        ry_value *n1 = ry_value_adt(node, 2, inner);
        ry_value *outer[2] = {l[0], n1};
        tree[k] = ry_value_adt(node, 2, outer);
    }
    ry_value *w = input_for(tt, 7);
    ry_value *ra = NULL, *rb = NULL;
    ry_value *aa[2] = {tree[0], w}, *ab[2] = {tree[1], w};
    ok(ry_interp_call(m, gm, 2, aa, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, go, 2, ab, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-12);
    ry_value_release(ra);
    ry_value_release(rb);
    ry_value_release(tree[0]);
    ry_value_release(tree[1]);
    ry_value_release(w);
    ry_module_free(m);
    ry_module_free(o);
}

/* ---- each pass alone ---- */
static const char *x_header = "#[version = \"0.0.5\"]\n";

static ry_module *parse_main(const char *body) {
    char text[2048];
    snprintf(text, sizeof text, "%sdef @main(%%x: Tensor[(2), float32]) {\n%s\n}\n", x_header,
             body);
    return test_parse(text, true);
}

static void run_pass_case(ry_status (*pass)(ry_module *, ry_error *), const char *body,
                          const char *want_in, const char *want_out) {
    ry_module *m = parse_main(body), *o = parse_main(body);
    ry_error err;
    ok(pass(o, &err), &err);
    ok(ry_ir_verify(o, false, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    char *s = print_global(o, "main");
    if (want_in && !strstr(s, want_in)) fail_msg("expected `%s` in:\n%s", want_in, s);
    if (want_out && strstr(s, want_out)) fail_msg("did not expect `%s` in:\n%s", want_out, s);
    ry_free(s);
    int64_t shape[1] = {2};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, shape);
    ry_tensor_set(x, 0, 1.5);
    ry_tensor_set(x, 1, -0.25);
    ry_value *arg = ry_value_tensor(x);
    assert_same_run(m, o, "main", 1, &arg);
    ry_value_release(arg);
    ry_module_free(m);
    ry_module_free(o);
}

static void test_dce(void **state) {
    (void)state;
    /* an unused pure let, and a ref only written, go */
    run_pass_case(ry_dce,
                  "let %a = add(%x, %x);\n"
                  "let %r = ref(%x);\n"
                  "let %u = ref_write(%r, multiply(%x, %x));\n"
                  "negative(%x)",
                  "negative(%x)", "ref");
    run_pass_case(ry_dce, "let %a = add(%x, %x);\nnegative(%x)", NULL, "add");
    /* a ref that is read stays, with its writes */
    run_pass_case(ry_dce,
                  "let %r = ref(%x);\n"
                  "let %u = ref_write(%r, multiply(%x, %x));\n"
                  "ref_read(%r)",
                  "ref_write", NULL);
    /* a dead dropout stays: in training it draws from the random stream,
     * and removing it would change every later mask */
    run_pass_case(ry_dce, "let %d = nn.dropout(%x, rate=0.5f);\nnegative(%x)", "nn.dropout", NULL);
}

static void test_cse(void **state) {
    (void)state;
    ry_module *o = parse_main("%0 = add(%x, %x);\nlet %a = add(%x, %x);\nmultiply(%a, %0)");
    ry_error err;
    ok(ry_cse(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(o, "main")->func, k);
    assert_int_equal(k[RY_EXPR_CALL], 2); /* one add, one multiply */
    ry_module_free(o);
    run_pass_case(ry_cse, "let %a = add(%x, %x);\nlet %b = add(%x, %x);\nmultiply(%a, %b)",
                  NULL, "%b");
    /* different attributes are different computations */
    run_pass_case(ry_cse,
                  "let %a = sum(%x, axis=[0]);\nlet %b = sum(%x, axis=[0], keepdims=True);\n"
                  "add(%a, %b)",
                  "keepdims", NULL);
}

static void test_fold(void **state) {
    (void)state;
    run_pass_case(ry_fold_constants, "let %c = add(1f, 2f);\nmultiply(%x, %c)", "3f", "add");
    run_pass_case(ry_fold_constants,
                  "let %z = zeros(shape=[2], dtype=\"float32\");\nadd(%x, exp(%z))", NULL, "exp");
}

static void test_inline(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @sq(%a: Tensor[(2), float32]) -> Tensor[(2), float32] { %a * %a }\n"
        "def @fact(%n: int32) -> int32 { if (%n > 1) { %n * @fact(%n - 1) } else { 1 } }\n"
        "def @main(%x: Tensor[(2), float32]) {\n"
        "  let %f = fn (%b: Tensor[(2), float32]) { @sq(%b) + %x };\n"
        "  let %k = @fact(3);\n"
        "  if (True) { %f(@sq(%x)) * cast(%k, dtype=\"float32\") } else { %x }\n"
        "}\n";
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    ok(ry_inline(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    char *s = print_global(o, "main");
    assert_null(strstr(s, "@sq"));            /* inlined, twice */
    assert_non_null(strstr(s, "@fact"));      /* recursive: inlined once, then called */
    assert_non_null(strstr(s, "if (True)"));  /* inlining folds nothing */
    ry_free(s);
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(o, "main")->func, k);
    assert_int_equal(k[RY_EXPR_FUNC], 1);
    int64_t shape[1] = {2};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, shape);
    ry_tensor_set(x, 0, 0.5);
    ry_tensor_set(x, 1, -2);
    ry_value *arg = ry_value_tensor(x);
    assert_same_run(m, o, "main", 1, &arg);
    ry_value_release(arg);
    ry_module_free(m);
    ry_module_free(o);
}

/* A call whose argument leaves a dimension open (?) that the parameter
 * fixes is the only place that dimension is checked: partial evaluation
 * and inlining keep it a call, and the optimized program still rejects a
 * wrong shape as the interpreter does. (So does the gradient's inliner,
 * ad/grad_inline.c.) */
static void test_call_keeps_shape_check(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @layer(%x: Tensor[(n, 4), float32]) -> Tensor[(n, 4), float32] { nn.relu(%x) }\n"
        "def @main(%x: Tensor[(?, ?), float32], %y: Tensor[(3, 4), float32]) {\n"
        "  let %a = @layer(%x);\n"
        "  let %b = @layer(%y);\n"
        "  sum(%a) + sum(%b)\n"
        "}\n";
    ry_error err;
    ry_status (*const inliners[2])(ry_module *, ry_error *) = {ry_partial_eval, ry_inline};
    for (int k = 0; k < 2; k++) {
        ry_module *o = test_parse(text, true);
        ok(inliners[k](o, &err), &err);
        ok(ry_module_typecheck(o, &err), &err);
        char *s = print_global(o, "main");
        assert_non_null(strstr(s, "@layer(%x)")); /* kept: (?, ?) against (n, 4) */
        assert_null(strstr(s, "@layer(%y)"));     /* inlined: (3, 4) is checked already */
        ry_free(s);
        ry_module_free(o);
    }
    ry_module *g = test_parse(text, true);
    ok(ry_optimize(g, 2, &err), &err);
    ry_value *args[2] = {ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){5, 3})),
                         ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){3, 4}))};
    ry_vm_program *p = NULL;
    ok(ry_vm_compile(g, NULL, &p, &err), &err);
    ry_value *out = NULL;
    assert_int_equal(ry_vm_call(p, "main", 2, args, NULL, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "parameter %x"));
    ry_vm_free(p);
    for (int i = 0; i < 2; i++) ry_value_release(args[i]);
    ry_module_free(g);
}

static void test_simplify(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%a: Tensor[(4, 3), float32], %b: Tensor[(2, 4), float32],\n"
        "          %c: Tensor[(3, 5), float32]) {\n"
        "  let %x = nn.dense(%a, transpose(%c, axes=[1, 0]));\n"
        "  let %y = nn.dense(transpose(%x), %b);\n"
        "  let %z = nn.dense(transpose(%a, axes=[1, 0]), transpose(%x, axes=[1, 0]));\n"
        "  let %w = nn.dense(transpose(%c, axes=[0, 1]), %c);\n"
        "  (%y, %z, %w)\n"
        "}\n";
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    ok(ry_simplify(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    char *s = print_global(o, "main");
    assert_non_null(strstr(s, "nn.matmul(%a, %c, units=None)"));
    assert_non_null(strstr(s, "transpose_a=True, transpose_b=True"));
    assert_non_null(strstr(s, "nn.matmul(%a, %x, transpose_a=True, units=None)"));
    /* axes [0, 1] is no transpose of a matrix: that dense stays */
    assert_non_null(strstr(s, "nn.dense("));
    ry_free(s);
    int64_t sa[2] = {4, 3}, sb[2] = {2, 4}, sc[2] = {3, 5};
    const int64_t *shapes[3] = {sa, sb, sc};
    ry_value *args[3];
    for (int i = 0; i < 3; i++) {
        ry_tensor *t = ry_tensor_new(RY_FLOAT32, 2, shapes[i]);
        for (int64_t k = 0; k < t->size; k++) ry_tensor_set(t, k, cos(0.3 * (double)k + i));
        args[i] = ry_value_tensor(t);
    }
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, "main", 3, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, "main", 3, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-5);
    ry_value_release(ra);
    ry_value_release(rb);
    for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    ry_module_free(m);
    ry_module_free(o);
}

static void test_partial_eval(void **state) {
    (void)state;
    /* a let-bound closure called twice is inlined */
    run_pass_case(ry_partial_eval,
                  "let %f = fn (%a: Tensor[(2), float32]) { %a * %a };\n%f(%f(%x))", NULL, NULL);
    ry_module *o = parse_main("let %f = fn (%a: Tensor[(2), float32]) { %a * %a };\n%f(%f(%x))");
    ry_error err;
    ok(ry_partial_eval(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(o, "main")->func, k);
    assert_int_equal(k[RY_EXPR_FUNC], 1);
    assert_int_equal(k[RY_EXPR_CALL], 2);
    ry_module_free(o);
    /* a ref with static identity disappears */
    o = parse_main("let %r = ref(%x);\nlet %u = ref_write(%r, %x * %x);\n"
                   "let %v = ref_read(%r);\n%v + %x");
    ok(ry_partial_eval(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    char *s = print_global(o, "main");
    assert_null(strstr(s, "ref"));
    ry_free(s);
    ry_module_free(o);
    run_pass_case(ry_partial_eval, "let %r = ref(%x);\nlet %u = ref_write(%r, %x * %x);\nref_read(%r)",
                  NULL, "ref_read");
    /* tuples, if on a constant, match on a known constructor */
    run_pass_case(ry_partial_eval, "let %t = (%x, negative(%x));\n%t.1", NULL, ".1");
    run_pass_case(ry_partial_eval, "if (True) { negative(%x) } else { exp(%x) }", NULL, "exp");
    run_pass_case(ry_partial_eval,
                  "let %o = (%x, 1);\nmatch (%o) { (%a, %b) => if (%b > 0) { %a } else { exp(%a) } }",
                  NULL, "exp");
    /* dynamic if: what neither branch writes stays known after it */
    o = parse_main("let %r = ref(%x);\nlet %c = greater(sum(%x), 0f);\n"
                   "let %u = if (%c) { exp(%x) } else { negative(%x) };\nref_read(%r) + %u");
    ok(ry_partial_eval(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    s = print_global(o, "main");
    assert_null(strstr(s, "ref"));
    assert_non_null(strstr(s, "if ("));
    ry_free(s);
    ry_module_free(o);
    /* dynamic if: both branches stay, refs written in them are forgotten */
    run_pass_case(ry_partial_eval,
                  "let %r = ref(%x);\n"
                  "let %c = greater(sum(%x), 0f);\n"
                  "let %u = if (%c) { ref_write(%r, exp(%x)) } else { () };\n"
                  "ref_read(%r)",
                  "ref_read", NULL);
}

static void test_verify(void **state) {
    (void)state;
    ry_module *m = parse_main("negative(%x)");
    ry_error err;
    ok(ry_ir_verify(m, true, &err), &err);
    /* a var used where it is not bound */
    ry_var *stray = ry_var_new(m, "y", NULL, RY_NO_SPAN);
    ry_global *g = ry_module_find_global(m, "main");
    g->func->func.body = ry_expr_var(m, stray, RY_NO_SPAN);
    assert_int_equal(ry_ir_verify(m, false, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of scope"));
    /* an untyped node in a module claimed typed */
    assert_int_equal(ry_ir_verify(m, true, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "untyped"));
    ry_module_free(m);
    /* an operator called with the wrong arity, a span that points nowhere */
    m = parse_main("negative(%x)");
    g = ry_module_find_global(m, "main");
    ry_expr *call = g->func->func.body;
    assert_int_equal(call->kind, RY_EXPR_CALL);
    call->call.nargs = 0;
    assert_int_equal(ry_ir_verify(m, false, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "wrong number of arguments"));
    call->call.nargs = 1;
    ok(ry_ir_verify(m, false, &err), &err);
    call->span.line = 0;
    assert_int_equal(ry_ir_verify(m, false, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "malformed span"));
    ry_module_free(m);
    /* a let's value cannot see its own var, unless it is a function */
    m = parse_main("let %f = fn (%a: Tensor[(2), float32]) { %a };\n%f(%x)");
    ok(ry_ir_verify(m, true, &err), &err);
    ry_expr *let = ry_module_find_global(m, "main")->func->func.body;
    assert_int_equal(let->kind, RY_EXPR_LET);
    let->let.value = ry_expr_var(m, let->let.var, RY_NO_SPAN);
    assert_int_equal(ry_ir_verify(m, false, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of scope"));
    ry_module_free(m);
}

/* ---- the corpora ---- */
static ry_module *load(const char *path) {
    ry_module *m = NULL;
    ry_error err;
    ok(ry_module_parse_file(path, &m, &err), &err);
    ok(ry_module_typecheck(m, &err), &err);
    return m;
}

/* Runs @main of m and o on tests/run/NAME/in_<param>.npy when all exist. */
static bool run_with_inputs(ry_module *m, ry_module *o, const char *dir) {
    ry_global *g = ry_module_find_global(m, "main");
    if (!g) return false;
    int n = g->func->func.nparams;
    ry_value *args[32];
    if (n > 32) return false;
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/in_%s.npy", dir, g->func->func.params[i]->name);
        struct stat sb;
        if (stat(path, &sb) != 0) {
            for (int j = 0; j < i; j++) ry_value_release(args[j]);
            return false;
        }
        args[i] = ry_value_tensor(test_npy(path));
    }
    ry_error err;
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, "main", n, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, "main", n, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-5); /* float32 programs: folding may reassociate nothing, but
                                          kernels on constants run in float32 too */
    ry_value_release(ra);
    ry_value_release(rb);
    for (int i = 0; i < n; i++) ry_value_release(args[i]);
    return true;
}

/* When @main takes tensors only and ry_grad accepts it: its gradient,
 * optimized, gives the same values in float64 as without optimization. */
static void grad_of_file(const char *path, int *ngrad) {
    ry_module *m = load(path), *o = load(path);
    ry_error err;
    const char *gm, *go;
    ry_global *g = ry_module_find_global(m, "main");
    bool tensors = g && g->func->func.nparams <= 16;
    for (int i = 0; tensors && i < g->func->func.nparams; i++) {
        const ry_type *t = g->func->func.params[i]->type;
        tensors = t->kind == RY_TYPE_TENSOR && ry_dtype_is_float(t->tensor.dtype);
        for (int k = 0; tensors && k < t->tensor.ndim; k++)
            tensors = t->tensor.dims[k].kind == RY_DIM_CONST;
    }
    if (tensors && ry_module_to_float64(m, &err) == RY_OK &&
        ry_module_to_float64(o, &err) == RY_OK &&
        ry_grad(m, "main", NULL, NULL, &gm, &err) == RY_OK) {
        ok(ry_hoist(o, &err), &err); /* as ry_trainer does before differentiating */
        ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
        if (ry_optimize(o, 2, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("%s: %s", path, err.msg);
        }
        ok(ry_ir_verify(o, true, &err), &err);
        const ry_expr *main = ry_module_find_global(m, "main")->func;
        int n = main->func.nparams;
        ry_value *args[16];
        for (int i = 0; i < n; i++) args[i] = input_for(main->func.params[i]->type, i);
        ry_value *ra = NULL, *rb = NULL;
        ry_status sa = ry_interp_call(m, gm, n, args, NULL, &ra, &err);
        if (sa == RY_OK) { /* inputs a program rejects at run time are not ours */
            ok(ry_interp_call(o, go, n, args, NULL, &rb, &err), &err);
            assert_same_values(ra, rb, 1e-10);
            (*ngrad)++;
        }
        ry_value_release(ra);
        ry_value_release(rb);
        for (int i = 0; i < n; i++) ry_value_release(args[i]);
    }
    ry_module_free(m);
    ry_module_free(o);
}

static void corpus_dir(const char *dir, int *nfiles, int *nrun, int *ngrad) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".relay") != 0) continue;
        char path[512], sub[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        snprintf(sub, sizeof sub, "%s/%.*s", dir, (int)(len - 6), de->d_name);
        ry_module *m = load(path), *o = load(path);
        ry_error err;
        if (ry_hoist(o, &err) != RY_OK || ry_optimize(o, 2, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("%s: %s", path, err.msg);
        }
        ok(ry_ir_verify(o, true, &err), &err);
        (*nfiles)++;
        if (run_with_inputs(m, o, sub)) (*nrun)++;
        ry_module_free(m);
        ry_module_free(o);
        grad_of_file(path, ngrad);
    }
    closedir(d);
}

/* The AD suite's model programs (tests/ad/programs), in float64: their
 * control flow is static, so each optimized gradient is straight-line. */
static void test_ad_programs(void **state) {
    (void)state;
    DIR *d = opendir("tests/ad/programs");
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".relay") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "tests/ad/programs/%s", de->d_name);
        ry_module *m = load(path), *o = load(path);
        ry_error err;
        ok(ry_module_to_float64(m, &err), &err);
        ok(ry_module_to_float64(o, &err), &err);
        const char *gm, *go;
        ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
        ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
        ok(ry_optimize(o, 2, &err), &err);
        ok(ry_ir_verify(o, true, &err), &err);
        int k[RY_EXPR_REF_WRITE + 1];
        ry_expr_count_kinds(ry_module_find_global(o, go)->func, k);
        if (k[RY_EXPR_REF] || k[RY_EXPR_FUNC] != 1 || k[RY_EXPR_MATCH] || k[RY_EXPR_GLOBAL])
            fail_msg("%s: %d refs, %d functions, %d matches, %d globals left", path,
                     k[RY_EXPR_REF], k[RY_EXPR_FUNC], k[RY_EXPR_MATCH], k[RY_EXPR_GLOBAL]);
        const ry_expr *main = ry_module_find_global(m, "main")->func;
        int np = main->func.nparams;
        ry_value *args[16];
        assert_true(np <= 16);
        for (int i = 0; i < np; i++) args[i] = input_for(main->func.params[i]->type, i);
        ry_value *ra = NULL, *rb = NULL;
        ok(ry_interp_call(m, gm, np, args, NULL, &ra, &err), &err);
        ok(ry_interp_call(o, go, np, args, NULL, &rb, &err), &err);
        assert_same_values(ra, rb, 1e-12);
        ry_value_release(ra);
        ry_value_release(rb);
        for (int i = 0; i < np; i++) ry_value_release(args[i]);
        ry_module_free(m);
        ry_module_free(o);
        n++;
    }
    closedir(d);
    assert_true(n >= 4);
}

/* tests/pass/NAME.relay: a program with its passes and expectations in
 * comments: `// PASSES: partial_eval dce`, `// EXPECT: text` (in the printed
 * @main afterwards), `// EXPECT-NOT: text`. Values must not change. */
static const struct {
    const char *name;
    ry_status (*fn)(ry_module *, ry_error *);
} pass_table[] = {
    {"partial_eval", ry_partial_eval}, {"inline", ry_inline}, {"dce", ry_dce},
    {"fold_constants", ry_fold_constants}, {"cse", ry_cse}, {"simplify", ry_simplify},
    {"hoist", ry_hoist},
};

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void pass_case(const char *path) {
    const char *text = slurp(path);
    ry_module *m = load(path), *o = load(path);
    ry_error err;
    int npasses = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, "// PASSES:", 10) != 0) continue;
        const char *w = l + 10;
        while (*w && *w != '\n') {
            while (*w == ' ') w++;
            size_t n = strcspn(w, " \n");
            if (!n) break;
            bool found = false;
            for (size_t i = 0; i < sizeof pass_table / sizeof pass_table[0]; i++)
                if (strlen(pass_table[i].name) == n && strncmp(pass_table[i].name, w, n) == 0) {
                    ok(pass_table[i].fn(o, &err), &err);
                    ok(ry_ir_verify(o, false, &err), &err);
                    found = true;
                    npasses++;
                }
            if (!found) fail_msg("%s: unknown pass %.*s", path, (int)n, w);
            w += n;
        }
    }
    assert_true(npasses > 0);
    ok(ry_module_typecheck(o, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    char *out = print_global(o, "main");
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        bool want = strncmp(l, "// EXPECT: ", 11) == 0, not = strncmp(l, "// EXPECT-NOT: ", 15) == 0;
        if (!want && !not) continue;
        const char *t = l + (want ? 11 : 15);
        char needle[256];
        size_t n = strcspn(t, "\n");
        snprintf(needle, sizeof needle, "%.*s", (int)n, t);
        if (want && !strstr(out, needle)) fail_msg("%s: `%s` missing from\n%s", path, needle, out);
        if (not && strstr(out, needle)) fail_msg("%s: `%s` found in\n%s", path, needle, out);
    }
    ry_free(out);
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    int np = main->func.nparams;
    ry_value *args[16];
    assert_true(np <= 16);
    for (int i = 0; i < np; i++) args[i] = input_for(main->func.params[i]->type, i);
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, "main", np, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, "main", np, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-6);
    ry_value_release(ra);
    ry_value_release(rb);
    for (int i = 0; i < np; i++) ry_value_release(args[i]);
    ry_module_free(m);
    ry_module_free(o);
}

static void test_pass_cases(void **state) {
    (void)state;
    DIR *d = opendir("tests/pass");
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".relay") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "tests/pass/%s", de->d_name);
        pass_case(path);
        n++;
    }
    closedir(d);
    assert_true(n >= 5);
}

static void test_corpus(void **state) {
    (void)state;
    int nfiles = 0, nrun = 0, ngrad = 0;
    corpus_dir("tests/corpus", &nfiles, &nrun, &ngrad);
    corpus_dir("tests/run", &nfiles, &nrun, &ngrad);
    fprintf(stderr, "corpus: %d files optimized, %d run on inputs, %d gradients compared\n",
            nfiles, nrun, ngrad);
    assert_true(nfiles >= 20);
    assert_true(nrun >= 3);
    assert_true(ngrad >= 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_dce),
        cmocka_unit_test(test_cse),
        cmocka_unit_test(test_fold),
        cmocka_unit_test(test_simplify),
        cmocka_unit_test(test_inline),
        cmocka_unit_test(test_call_keeps_shape_check),
        cmocka_unit_test(test_partial_eval),
        cmocka_unit_test(test_square_is_straight_line),
        cmocka_unit_test(test_mlp_gradient),
        cmocka_unit_test(test_cnn_gradient),
        cmocka_unit_test(test_rnn_gradient),
        cmocka_unit_test(test_higher_order_and_counter),
        cmocka_unit_test(test_second_order),
        cmocka_unit_test(test_dynamic_tree),
        cmocka_unit_test(test_pass_cases),
        cmocka_unit_test(test_ad_programs),
        cmocka_unit_test(test_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
