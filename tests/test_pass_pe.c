/*
 * test_pass_pe.c: partial evaluation where control flow depends on data.
 * Recursion whose stopping test is dynamic (a counter against a run-time
 * length, a walk over a received tree or list) stays recursion: the pass
 * terminates, the program stays about the size it was (node counts), and
 * values do not change. Calls with known function arguments are
 * specialized once per signature and reused. Every model of models/ and
 * every program of the corpora optimizes at level 2 without growing.
 */
#include <dirent.h>
#include <stdlib.h>

#include "test_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"

static void ok(ry_status st, const ry_error *err) {
    if (st != RY_OK) {
        ry_error_print(stderr, err);
        fail_msg("%s", err->msg);
    }
}

/* Nodes of every global of m, all kinds together. */
static long module_nodes(const ry_module *m) {
    long n = 0;
    int k[RY_EXPR_REF_WRITE + 1];
    for (int g = 0; g < m->nglobals; g++) {
        ry_expr_count_kinds(m->globals[g]->func, k);
        for (int i = 0; i <= RY_EXPR_REF_WRITE; i++) n += k[i];
    }
    return n;
}

/* Nodes of the module parsed from text (or the file at path), its entry
 * differentiated when entry is set, optimized at level 1 (no partial
 * evaluation): the size partial evaluation is compared with. */
static long level1_nodes(const char *text, const char *path, const char *entry) {
    ry_module *m = NULL;
    ry_error err;
    if (path) ok(ry_module_parse_file(path, &m, &err), &err);
    else m = test_parse(text, false);
    ok(ry_module_typecheck(m, &err), &err);
    const char *g;
    if (entry) ok(ry_grad(m, entry, NULL, NULL, &g, &err), &err);
    ok(ry_optimize(m, 1, &err), &err);
    long n = module_nodes(m);
    ry_module_free(m);
    return n;
}

/* Where control is dynamic, level 2 grows the program only by inlining
 * (unrolled to its limits, the counter recursion below was hundreds of
 * thousands of nodes, charlstm's gradient 2.5 million). */
static void assert_small(const char *what, long level2, long level1) {
    if (level2 > 2 * level1 + 100)
        fail_msg("%s: %ld nodes at level 2, %ld at level 1", what, level2, level1);
}

static int kind_in(const ry_module *m, const char *global, ry_expr_kind kind) {
    int k[RY_EXPR_REF_WRITE + 1];
    ry_expr_count_kinds(ry_module_find_global(m, global)->func, k);
    return k[kind];
}

/* A deterministic tensor of type t: symbolic dims n -> 2, t -> 3, Any -> 2;
 * integers in [0, 5), floats in (-0.9, 0.9). */
static ry_value *input_for(const ry_type *t, int k) {
    assert_int_equal(t->kind, RY_TYPE_TENSOR);
    int64_t shape[RY_MAX_RANK];
    for (int i = 0; i < t->tensor.ndim; i++) {
        const ry_dim *d = &t->tensor.dims[i];
        bool t_dim = d->kind == RY_DIM_SYM && d->name[0] == 't';
        shape[i] = d->kind == RY_DIM_CONST ? d->value : t_dim ? 3 : 2;
    }
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    bool fl = ry_dtype_is_float(t->tensor.dtype);
    for (int64_t i = 0; i < x->size; i++)
        ry_tensor_set(x, i, fl ? sin(0.7 * (double)i + 1.3 * k) * 0.9 : (double)((i + k) % 5));
    return ry_value_tensor(x);
}

static ry_value *scalar_i32(int v) {
    ry_tensor *x = ry_tensor_new(RY_INT32, 0, NULL);
    ry_tensor_set(x, 0, v);
    return ry_value_tensor(x);
}

static void assert_same_values(const ry_value *a, const ry_value *b, double tol) {
    ry_tensor *ta[256], *tb[256];
    int na = ry_value_flatten(a, ta, 256), nb = ry_value_flatten(b, tb, 256);
    assert_int_equal(na, nb);
    assert_true(na > 0 && na <= 256);
    for (int i = 0; i < na; i++) test_assert_close(ta[i], tb[i], tol, tol);
}

/* entry of m and of o on the same arguments agree. */
static void assert_same_call(ry_module *m, ry_module *o, const char *entry, int n, ry_value **args,
                             double tol) {
    ry_error err;
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, entry, n, args, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, entry, n, args, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, tol);
    ry_value_release(ra);
    ry_value_release(rb);
}

/* ---- a counter against a run-time length (the shape of the char RNNs) ---- */
static const char *counter_text =
    "#[version = \"0.0.5\"]\n"
    "def @run(%i: int32, %t: int32, %h: Tensor[(1, 3), float64], %w: Tensor[(3, 3), float64])\n"
    "    -> Tensor[(1, 3), float64] {\n"
    "  if (%i == %t) { %h } else {\n"
    "    let %h2 = tanh(nn.dense(%h, %w));\n"
    "    @run(%i + 1, %t, %h2, %w)\n"
    "  }\n"
    "}\n"
    "def @main(%t: int32, %h: Tensor[(1, 3), float64], %w: Tensor[(3, 3), float64]) {\n"
    "  let %o = @run(0, %t, %h, %w);\n"
    "  sum(%o * %o)\n"
    "}\n";

static void test_counter_dynamic_stop(void **state) {
    (void)state;
    ry_module *m = test_parse(counter_text, true), *o = test_parse(counter_text, true);
    ry_error err;
    const char *gm, *go;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    assert_small("counter", module_nodes(o), level1_nodes(counter_text, NULL, "main"));
    /* the recursion stays: the gradient calls @run_grad */
    assert_true(kind_in(o, go, RY_EXPR_GLOBAL) >= 1);
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    for (int t = 0; t <= 5; t += 5) {
        ry_value *args[3] = {scalar_i32(t), input_for(main->func.params[1]->type, 1),
                             input_for(main->func.params[2]->type, 2)};
        assert_same_call(m, o, gm, 3, args, 1e-12);
        for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    }
    ry_module_free(m);
    ry_module_free(o);
}

/* With the length known the same recursion unrolls to straight-line code. */
static void test_counter_static_unrolls(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @run(%i: int32, %t: int32, %h: Tensor[(1, 3), float64], %w: Tensor[(3, 3), float64])\n"
        "    -> Tensor[(1, 3), float64] {\n"
        "  if (%i == %t) { %h } else { @run(%i + 1, %t, tanh(nn.dense(%h, %w)), %w) }\n"
        "}\n"
        "def @main(%h: Tensor[(1, 3), float64], %w: Tensor[(3, 3), float64]) {\n"
        "  sum(@run(0, 4, %h, %w))\n"
        "}\n";
    ry_module *m = test_parse(text, true), *o = test_parse(text, true);
    ry_error err;
    const char *gm, *go;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    assert_int_equal(kind_in(o, go, RY_EXPR_GLOBAL), 0);
    assert_int_equal(kind_in(o, go, RY_EXPR_REF), 0);
    assert_int_equal(kind_in(o, go, RY_EXPR_IF), 0);
    assert_int_equal(kind_in(o, go, RY_EXPR_FUNC), 1);
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    ry_value *args[2] = {input_for(main->func.params[0]->type, 1),
                         input_for(main->func.params[1]->type, 2)};
    assert_same_call(m, o, gm, 2, args, 1e-12);
    for (int i = 0; i < 2; i++) ry_value_release(args[i]);
    ry_module_free(m);
    ry_module_free(o);
}

/* ---- a walk over a tree the program receives ---- */
static const char *tree_text =
    "#[version = \"0.0.5\"]\n"
    "type Tree {\n"
    "  Leaf(Tensor[(1, 3), float64]),\n"
    "  Node(Tree, Tree),\n"
    "}\n"
    "def @enc(%t: Tree, %u: Tensor[(3, 6), float64]) -> Tensor[(1, 3), float64] {\n"
    "  match (%t) {\n"
    "    Leaf(%x) => tanh(%x),\n"
    "    Node(%l, %r) => {\n"
    "      let %c = concatenate((@enc(%l, %u), @enc(%r, %u)), axis=1);\n"
    "      sigmoid(nn.dense(%c, %u))\n"
    "    },\n"
    "  }\n"
    "}\n"
    "def @main(%t: Tree, %u: Tensor[(3, 6), float64]) { sum(@enc(%t, %u)) }\n";

/* Node(Leaf(a), Node(Leaf(b), Leaf(c))) with m's constructors. */
static ry_value *small_tree(ry_module *m) {
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    int64_t shape[2] = {1, 3};
    ry_value *l[3];
    for (int i = 0; i < 3; i++) {
        ry_tensor *x = ry_tensor_new(RY_FLOAT64, 2, shape);
        for (int j = 0; j < 3; j++) ry_tensor_set(x, j, 0.3 * (i + 1) - 0.2 * j);
        ry_value *xv = ry_value_tensor(x);
        l[i] = ry_value_adt(leaf, 1, &xv);
    }
    ry_value *inner[2] = {l[1], l[2]};
    ry_value *outer[2] = {l[0], ry_value_adt(node, 2, inner)};
    return ry_value_adt(node, 2, outer);
}

static void test_tree_dynamic(void **state) {
    (void)state;
    ry_module *m = test_parse(tree_text, true), *o = test_parse(tree_text, true);
    ry_error err;
    const char *gm, *go;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    assert_small("tree", module_nodes(o), level1_nodes(tree_text, NULL, "main"));
    /* the interpreter matches constructors by identity: one tree per module */
    const ry_expr *main = ry_module_find_global(m, "main")->func;
    ry_value *u = input_for(main->func.params[1]->type, 3);
    ry_value *ta = small_tree(m), *tb = small_tree(o);
    ry_value *aa[2] = {ta, u}, *ab[2] = {tb, u};
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, gm, 2, aa, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, go, 2, ab, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-12);
    ry_value_release(ra);
    ry_value_release(rb);
    ry_value_release(ta);
    ry_value_release(tb);
    ry_value_release(u);
    ry_module_free(m);
    ry_module_free(o);
}

/* ---- specialization to known function arguments, memoized ---- */
static const char *map_text =
    "#[version = \"0.0.5\"]\n"
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
    "def @total(%l: List[Tensor[(2), float64]]) -> Tensor[(2), float64] {\n"
    "  match (%l) {\n"
    "    Cons(%h, %t) => add(%h, @total(%t)),\n"
    "    Nil => zeros(shape=[2], dtype=\"float64\"),\n"
    "  }\n"
    "}\n"
    "def @main(%l: List[Tensor[(2), float64]], %w: Tensor[(2), float64]) {\n"
    "  let %g = fn (%x: Tensor[(2), float64]) { tanh(%x * %w) };\n"
    "  let %a = @map(%g, %l);\n"
    "  @total(@map(%g, %a))\n"
    "}\n";

static ry_value *small_list(ry_module *m, int n) {
    const ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    int64_t shape[1] = {2};
    for (int i = 0; i < n; i++) {
        ry_tensor *x = ry_tensor_new(RY_FLOAT64, 1, shape);
        ry_tensor_set(x, 0, 0.25 * i - 0.4);
        ry_tensor_set(x, 1, 0.5 - 0.1 * i);
        ry_value *f[2] = {ry_value_tensor(x), l};
        l = ry_value_adt(cons, 2, f);
    }
    return l;
}

static void test_specialize_memo(void **state) {
    (void)state;
    ry_module *m = test_parse(map_text, true), *o = test_parse(map_text, true);
    ry_error err;
    ok(ry_partial_eval(o, &err), &err);
    ok(ry_dce(o, &err), &err);
    ok(ry_module_typecheck(o, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    /* @main: itself and one specialization of @map to %g, shared by both
     * calls (and by its own recursive call); %g is inlined in it and
     * @map is no longer called; @total (no function argument) still is */
    assert_int_equal(kind_in(o, "main", RY_EXPR_FUNC), 2);
    char *s = ry_expr_print(ry_module_find_global(o, "main")->func);
    assert_null(strstr(s, "@map"));
    assert_non_null(strstr(s, "@total"));
    assert_non_null(strstr(s, "%map_spec("));
    assert_non_null(strstr(s, "tanh("));
    ry_free(s);
    for (int n = 0; n <= 3; n += 3) {
        ry_value *la = small_list(m, n), *lb = small_list(o, n);
        int64_t shape[1] = {2};
        ry_tensor *w = ry_tensor_new(RY_FLOAT64, 1, shape);
        ry_tensor_set(w, 0, 0.7);
        ry_tensor_set(w, 1, -1.1);
        ry_value *wv = ry_value_tensor(w);
        ry_value *aa[2] = {la, wv}, *ab[2] = {lb, wv};
        ry_value *ra = NULL, *rb = NULL;
        ok(ry_interp_call(m, "main", 2, aa, NULL, &ra, &err), &err);
        ok(ry_interp_call(o, "main", 2, ab, NULL, &rb, &err), &err);
        assert_same_values(ra, rb, 1e-12);
        ry_value_release(ra);
        ry_value_release(rb);
        ry_value_release(la);
        ry_value_release(lb);
        ry_value_release(wv);
    }
    ry_module_free(m);
    ry_module_free(o);
}

/* The gradient of the same program: specialized, smaller, same values. */
static void test_specialize_gradient(void **state) {
    (void)state;
    ry_module *m = test_parse(map_text, true), *o = test_parse(map_text, true);
    ry_error err;
    const char *gm, *go;
    ok(ry_grad(m, "main", NULL, NULL, &gm, &err), &err);
    ok(ry_grad(o, "main", NULL, NULL, &go, &err), &err);
    ok(ry_optimize(o, 2, &err), &err);
    ok(ry_ir_verify(o, true, &err), &err);
    assert_small("map", module_nodes(o), level1_nodes(map_text, NULL, "main"));
    ry_value *la = small_list(m, 3), *lb = small_list(o, 3);
    int64_t shape[1] = {2};
    ry_tensor *w = ry_tensor_new(RY_FLOAT64, 1, shape);
    ry_tensor_set(w, 0, 0.3);
    ry_tensor_set(w, 1, 0.9);
    ry_value *wv = ry_value_tensor(w);
    ry_value *aa[2] = {la, wv}, *ab[2] = {lb, wv};
    ry_value *ra = NULL, *rb = NULL;
    ok(ry_interp_call(m, gm, 2, aa, NULL, &ra, &err), &err);
    ok(ry_interp_call(o, go, 2, ab, NULL, &rb, &err), &err);
    assert_same_values(ra, rb, 1e-12);
    ry_value_release(ra);
    ry_value_release(rb);
    ry_value_release(la);
    ry_value_release(lb);
    ry_value_release(wv);
    ry_module_free(m);
    ry_module_free(o);
}

/* ---- every model: the gradient of @loss at level 2 ---- */

/* A parse tree of the Tree-LSTM over m's constructors: ((w1 w2) (w3 (w4 w5))),
 * Leaf(word, label), Node(left, right, label). */
static ry_value *sst_tree(ry_module *m, int k) {
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    ry_value *l[5];
    for (int i = 0; i < 5; i++) {
        ry_value *f[2] = {scalar_i32((7 * i + 3 * k) % 50), scalar_i32(i % 5)};
        l[i] = ry_value_adt(leaf, 2, f);
    }
    ry_value *a[3] = {l[0], l[1], scalar_i32(1)};
    ry_value *b[3] = {l[3], l[4], scalar_i32(2)};
    ry_value *b2[3] = {l[2], ry_value_adt(node, 3, b), scalar_i32(3)};
    ry_value *r[3] = {ry_value_adt(node, 3, a), ry_value_adt(node, 3, b2), scalar_i32(4)};
    return ry_value_adt(node, 3, r);
}

/* @loss's arguments for m: tensors, and a tree for the Tree-LSTM. */
static bool model_args(ry_module *m, const ry_expr *fn, ry_value **args) {
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_type *t = fn->func.params[i]->type;
        bool tree = t->kind == RY_TYPE_CALL && !strcmp(t->call.adt->name, "Tree");
        if (t->kind != RY_TYPE_TENSOR && !tree) return false;
    }
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_type *t = fn->func.params[i]->type;
        args[i] = t->kind == RY_TYPE_TENSOR ? input_for(t, i) : sst_tree(m, i);
    }
    return true;
}

static void test_models(void **state) {
    (void)state;
    DIR *d = opendir("models");
    assert_non_null(d);
    struct dirent *de;
    int n = 0, nrun = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".relay") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "models/%s", de->d_name);
        ry_module *m = NULL, *o = NULL;
        ry_error err;
        ok(ry_module_parse_file(path, &m, &err), &err);
        ok(ry_module_typecheck(m, &err), &err);
        ok(ry_module_parse_file(path, &o, &err), &err);
        ok(ry_module_typecheck(o, &err), &err);
        const char *gm, *go;
        ok(ry_grad(m, "loss", NULL, NULL, &gm, &err), &err);
        ok(ry_grad(o, "loss", NULL, NULL, &go, &err), &err);
        ok(ry_optimize(o, 2, &err), &err);
        ok(ry_ir_verify(o, true, &err), &err);
        assert_small(path, module_nodes(o), level1_nodes(NULL, path, "loss"));
        /* straight-line models keep no closure; recursive ones keep few */
        bool rec = ry_global_reaches_recursion(m, "loss");
        if (!rec) assert_int_equal(kind_in(o, go, RY_EXPR_FUNC), 1);
        /* the interpreter matches constructors by identity: arguments per module */
        const ry_expr *loss = ry_module_find_global(m, "loss")->func;
        int np = loss->func.nparams;
        ry_value *am[16], *ao[16];
        if (rec && np <= 16 && model_args(m, loss, am)) {
            assert_true(model_args(o, loss, ao));
            ry_value *ra = NULL, *rb = NULL;
            ok(ry_interp_call(m, gm, np, am, NULL, &ra, &err), &err);
            ok(ry_interp_call(o, go, np, ao, NULL, &rb, &err), &err);
            assert_same_values(ra, rb, 1e-4);
            ry_value_release(ra);
            ry_value_release(rb);
            for (int i = 0; i < np; i++) {
                ry_value_release(am[i]);
                ry_value_release(ao[i]);
            }
            nrun++;
        }
        ry_module_free(m);
        ry_module_free(o);
        n++;
    }
    closedir(d);
    assert_true(n >= 6);
    assert_true(nrun >= 4); /* charrnn, chargru, charlstm, treelstm */
}

/* ---- every program of the corpora: level 2 without growth ---- */
static void corpus_dir(const char *dir, int *nfiles) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".relay") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        ry_module *o = NULL;
        ry_error err;
        ok(ry_module_parse_file(path, &o, &err), &err);
        ok(ry_module_typecheck(o, &err), &err);
        const char *go, *entry = "main";
        bool has_main = ry_module_find_global(o, "main") != NULL;
        if (!has_main || ry_grad(o, "main", NULL, NULL, &go, &err) != RY_OK) {
            /* not differentiable (integer results, ...): the program alone */
            ry_module_free(o);
            ok(ry_module_parse_file(path, &o, &err), &err);
            ok(ry_module_typecheck(o, &err), &err);
            entry = NULL;
        }
        if (ry_optimize(o, 2, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("%s: %s", path, err.msg);
        }
        ok(ry_ir_verify(o, true, &err), &err);
        long l2 = module_nodes(o), l1 = level1_nodes(NULL, path, entry);
        if (getenv("PE_SIZES")) fprintf(stderr, "%-40s level 1 %6ld  level 2 %6ld\n", path, l1, l2);
        /* recursion over a tree or list built in the program unrolls */
        if (l2 > 5 * l1 + 200) fail_msg("%s: %ld nodes at level 2, %ld at level 1", path, l2, l1);
        ry_module_free(o);
        (*nfiles)++;
    }
    closedir(d);
}

static void test_corpus_sizes(void **state) {
    (void)state;
    int n = 0;
    corpus_dir("tests/corpus", &n);
    corpus_dir("tests/run", &n);
    assert_true(n >= 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_dynamic_stop),
        cmocka_unit_test(test_counter_static_unrolls),
        cmocka_unit_test(test_tree_dynamic),
        cmocka_unit_test(test_specialize_memo),
        cmocka_unit_test(test_specialize_gradient),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_corpus_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
