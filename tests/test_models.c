/*
 * test_models.c: the models of models/ (every .relay file there). Each parses and type-checks;
 * its header lines follow the convention the training loop relies on (data
 * parameters first, the same parameters in @loss and @predict, an
 * initializer for every parameter); its @loss and @predict, run by the
 * interpreter on small inputs, match PyTorch (fixtures from
 * tools/gen_model_tests.py, parameters the hash below); and ry_grad turns
 * its @loss into a gradient program that type-checks and runs.
 */
#include "test_util.h"

#include "relayc/ad.h"
#include "relayc/datasets.h"
#include "relayc/init.h"

/* The parameters, as tools/gen_model_tests.py makes them: element k of the
 * parameter at position salt is
 *   ((k * 2654435761 + salt * 40503 + 12345) mod 2^32 / 2^32 * 2 - 1) * scale
 * with scale = 1/sqrt(prod(shape[1:])) for rank >= 2, else 0.1. */
static ry_tensor *model_param(const ry_type *ty, int salt) {
    assert_int_equal(ty->kind, RY_TYPE_TENSOR);
    int64_t shape[RY_MAX_RANK];
    int64_t fan = 1;
    for (int i = 0; i < ty->tensor.ndim; i++) {
        assert_int_equal(ty->tensor.dims[i].kind, RY_DIM_CONST);
        shape[i] = ty->tensor.dims[i].value;
        if (i >= 1) fan *= shape[i];
    }
    ry_tensor *t = ry_tensor_new(ty->tensor.dtype, ty->tensor.ndim, shape);
    assert_non_null(t);
    double scale = ty->tensor.ndim >= 2 ? 1.0 / sqrt((double)fan) : 0.1;
    uint64_t add = (uint64_t)salt * 40503u + 12345u;
    for (int64_t k = 0; k < t->size; k++) {
        uint64_t h = ((uint64_t)k * 2654435761u + add) & 0xffffffffu;
        ry_tensor_set(t, k, ((double)h / 4294967296.0 * 2.0 - 1.0) * scale);
    }
    return t;
}

static ry_module *load_model(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "models/%s.relay", name);
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file(path, &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("cannot parse %s", path);
    }
    if (ry_module_typecheck(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        fail_msg("%s does not type-check", path);
    }
    return m;
}

static ry_init_spec *load_spec(const ry_module *m) {
    ry_init_spec *s = NULL;
    ry_error err;
    assert_non_null(m->source);
    if (ry_init_spec_parse(m->source->name, m->source->text, m->source->len, &s, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("bad header lines");
    }
    return s;
}

static const ry_expr *entry(const ry_module *m, const char *name) {
    ry_global *g = ry_module_find_global(m, name);
    if (!g) fail_msg("no @%s", name);
    return g->func;
}

/* ---- the convention ---------------------------------------------------------
 * @loss(DATA..., PARAMS...) and @predict(PDATA..., PARAMS...): the data
 * names as the header lines list them, in order; then the same parameters
 * with the same types in both, each with an initializer that fills it. */
static void check_convention(const char *name) {
    ry_module *m = load_model(name);
    ry_init_spec *s = load_spec(m);
    assert_true(s->has_data);
    assert_true(s->has_predict_data);
    const ry_expr *lf = entry(m, "loss"), *pf = entry(m, "predict");
    assert_true(lf->func.nparams > s->ndata);
    for (int i = 0; i < s->ndata; i++)
        assert_string_equal(lf->func.params[i]->name, s->data[i]);
    for (int i = 0; i < s->npredict_data; i++)
        assert_string_equal(pf->func.params[i]->name, s->predict_data[i]);
    int np = lf->func.nparams - s->ndata;
    assert_int_equal(pf->func.nparams - s->npredict_data, np);
    assert_int_equal(s->nparams, np);
    ry_rng rng;
    ry_rng_seed(&rng, 7);
    for (int i = 0; i < np; i++) {
        const ry_var *lv = lf->func.params[s->ndata + i];
        const ry_var *pv = pf->func.params[s->npredict_data + i];
        assert_string_equal(lv->name, pv->name);
        assert_true(ry_type_equal(lv->type, pv->type));
        const ry_init *init = ry_init_spec_find(s, lv->name);
        if (!init) fail_msg("%s: no initializer for %%%s", name, lv->name);
        /* the initializer fills the parameter's real shape */
        ry_tensor *t = model_param(lv->type, i);
        ry_error err;
        assert_int_equal(ry_init_fill(t, init, &rng, &err), RY_OK);
        for (int64_t k = 0; k < t->size; k += 97) assert_true(isfinite(ry_tensor_get(t, k)));
        ry_tensor_release(t);
    }
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* ---- forward against PyTorch ------------------------------------------------ */

/* Arguments of @fname: data from tests/models/NAME/<param>.npy (or `tree`
 * when non-NULL for a Tree parameter), parameters from model_param. */
static int make_args(const char *name, const ry_init_spec *s, const ry_expr *fn, bool predict,
                     ry_value *tree, ry_value **args) {
    int ndata = predict ? s->npredict_data : s->ndata;
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *v = fn->func.params[i];
        if (i < ndata && v->type->kind == RY_TYPE_CALL) {
            assert_non_null(tree);
            args[i] = ry_value_retain(tree);
        } else if (i < ndata) {
            char path[256];
            snprintf(path, sizeof path, "tests/models/%s/%s.npy", name, v->name);
            args[i] = ry_value_tensor(test_npy(path));
        } else {
            args[i] = ry_value_tensor(model_param(v->type, i - ndata));
        }
        assert_non_null(args[i]);
    }
    return fn->func.nparams;
}

/* Runs @entry and compares every tensor of its result, depth first, with
 * tests/models/NAME/<entry>_<k + j>.npy, j counting the result's tensors. */
static void run_and_compare(ry_module *m, const char *name, const ry_init_spec *s,
                            const char *ename, ry_value *tree, int k) {
    const ry_expr *fn = entry(m, ename);
    ry_value *args[64];
    assert_true(fn->func.nparams <= 64);
    int nargs = make_args(name, s, fn, strcmp(ename, "predict") == 0, tree, args);
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, ename, nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s @%s failed", name, ename);
    }
    ry_tensor *ts[8];
    int nt = ry_value_flatten(out, ts, 8);
    assert_true(nt >= 1 && nt <= 8);
    for (int j = 0; j < nt; j++) {
        char path[256];
        snprintf(path, sizeof path, "tests/models/%s/%s_%d.npy", name, ename, k + j);
        ry_tensor *want = test_npy(path);
        test_assert_close(ts[j], want, 2e-4, 2e-5);
        ry_tensor_release(want);
    }
    ry_value_release(out);
    for (int i = 0; i < nargs; i++) ry_value_release(args[i]);
}

static void check_forward(const char *name) {
    ry_module *m = load_model(name);
    ry_init_spec *s = load_spec(m);
    run_and_compare(m, name, s, "loss", NULL, 0);
    run_and_compare(m, name, s, "predict", NULL, 0);
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* Row 0 of every data tensor, as a batch of one (the last partial batch of
 * an epoch): @predict then gives row 0 of each of its results. With cols > 0,
 * also only the first cols columns (time steps) of the 2-d int32 inputs: the
 * char models' scores for those steps are the first cols of the full run's. */
static ry_tensor *first_rows(ry_tensor *t, int64_t k) {
    ry_tensor *out = NULL;
    ry_error err;
    assert_int_equal(ry_data_take_rows(t, (int64_t[]){0, 1, 2, 3}, k, &out, &err), RY_OK);
    return out;
}

static ry_tensor *first_cols(ry_tensor *t, int64_t cols) {
    assert_int_equal(t->ndim, 2);
    ry_tensor *out = ry_tensor_new(t->dtype, 2, (int64_t[]){t->shape[0], cols});
    assert_non_null(out);
    for (int64_t r = 0; r < t->shape[0]; r++)
        for (int64_t c = 0; c < cols; c++)
            ry_tensor_set(out, r * cols + c, ry_tensor_get(t, r * t->shape[1] + c));
    return out;
}

static void check_partial(const char *name, int64_t cols) {
    ry_module *m = load_model(name);
    ry_init_spec *s = load_spec(m);
    const ry_expr *fn = entry(m, "predict");
    ry_value *args[64];
    int nargs = make_args(name, s, fn, true, NULL, args);
    for (int i = 0; i < s->npredict_data; i++) {
        ry_tensor *t = first_rows(args[i]->tensor, 1);
        if (cols && t->dtype == RY_INT32) {
            ry_tensor *c = first_cols(t, cols);
            ry_tensor_release(t);
            t = c;
        }
        ry_value_release(args[i]);
        args[i] = ry_value_tensor(t);
    }
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "predict", nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s @predict on one row failed", name);
    }
    ry_tensor *ts[8];
    int nt = ry_value_flatten(out, ts, 8);
    /* with fewer steps only the scores (result 0) are comparable */
    for (int j = 0; j < (cols ? 1 : nt); j++) {
        char path[256];
        snprintf(path, sizeof path, "tests/models/%s/predict_%d.npy", name, j);
        ry_tensor *full = test_npy(path), *want = first_rows(full, 1);
        if (cols) {
            /* (1, t, 65) -> (1, cols, 65): the first cols * 65 elements */
            ry_tensor *w = ry_tensor_new(want->dtype, 3, (int64_t[]){1, cols, want->shape[2]});
            assert_non_null(w);
            for (int64_t k = 0; k < w->size; k++) ry_tensor_set(w, k, ry_tensor_get(want, k));
            ry_tensor_release(want);
            want = w;
        }
        test_assert_close(ts[j], want, 2e-4, 2e-5);
        ry_tensor_release(want);
        ry_tensor_release(full);
    }
    ry_value_release(out);
    for (int i = 0; i < nargs; i++) ry_value_release(args[i]);
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* The trees of tests/models/treelstm_trees.txt through the loader, as the
 * training loop will build them. */
static void check_forward_treelstm(void) {
    ry_module *m = load_model("treelstm");
    ry_init_spec *s = load_spec(m);
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *tb = NULL;
    ry_error err;
    if (ry_treebank_read("tests/models/treelstm_trees.txt", vocab, true, &tb, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot read the trees");
    }
    assert_int_equal(tb->ntrees, 4);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    assert_non_null(leaf);
    assert_non_null(node);
    for (int k = 0; k < tb->ntrees; k++) {
        ry_value *tree = NULL;
        assert_int_equal(ry_tree_to_value(&tb->trees[k], leaf, node, &tree, &err), RY_OK);
        run_and_compare(m, "treelstm", s, "loss", tree, k);
        run_and_compare(m, "treelstm", s, "predict", tree, k);
        ry_value_release(tree);
    }
    ry_treebank_free(tb);
    ry_vocab_free(vocab);
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* ---- the gradient program ----------------------------------------------------
 * ry_grad(@loss) adds a global that type-checks (ry_grad re-checks the
 * module); its result is (loss's result, (d_param...)) with one gradient
 * per parameter of @loss, each of its parameter's type. Run on the forward
 * test's inputs, its loss is the forward's and each parameter's gradient
 * matches PyTorch's autograd: every stride-th element (gsub) and the sum and
 * sum of squares of all of it (gsum). */
static const char *make_grad(ry_module *m, const char *name) {
    ry_error err;
    const char *gname = NULL;
    if (ry_grad(m, "loss", NULL, NULL, &gname, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        fail_msg("%s: ry_grad(@loss) failed: %s", name, err.msg);
    }
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    const ry_expr *lf = entry(m, "loss"), *gf = entry(m, gname);
    assert_int_equal(gf->func.nparams, lf->func.nparams);
    const ry_type *rt = gf->func.body->type;
    assert_non_null(rt);
    assert_int_equal(rt->kind, RY_TYPE_TUPLE);
    assert_int_equal(rt->tuple.n, 2);
    assert_true(ry_type_equal(rt->tuple.fields[0], lf->func.body->type));
    const ry_type *gt = rt->tuple.fields[1];
    assert_int_equal(gt->kind, RY_TYPE_TUPLE);
    assert_int_equal(gt->tuple.n, lf->func.nparams);
    for (int i = 0; i < lf->func.nparams; i++)
        if (lf->func.params[i]->type->kind == RY_TYPE_TENSOR &&
            ry_dtype_is_float(lf->func.params[i]->type->tensor.dtype))
            assert_true(ry_type_equal(gt->tuple.fields[i], lf->func.params[i]->type));
    return gname;
}

static void compare_grad(const char *name, const char *suffix, int j, const ry_tensor *g) {
    char path[256];
    snprintf(path, sizeof path, "tests/models/%s/gsub%s_%d.npy", name, suffix, j);
    ry_tensor *sub = test_npy(path);
    int64_t stride = g->size / 40 > 1 ? g->size / 40 : 1;
    assert_int_equal(sub->size, (g->size + stride - 1) / stride);
    ry_tensor *got = ry_tensor_new(RY_FLOAT64, 1, &sub->size);
    assert_non_null(got);
    double sum = 0, sumsq = 0;
    for (int64_t k = 0; k < g->size; k++) {
        double v = ry_tensor_get(g, k);
        sum += v, sumsq += v * v;
        if (k % stride == 0) ry_tensor_set(got, k / stride, v);
    }
    test_assert_close(got, sub, 1e-3, 1e-6);
    ry_tensor_release(got);
    ry_tensor_release(sub);
    snprintf(path, sizeof path, "tests/models/%s/gsum%s_%d.npy", name, suffix, j);
    ry_tensor *want = test_npy(path), *have = ry_tensor_new(RY_FLOAT64, 1, (int64_t[]){2});
    assert_non_null(have);
    ry_tensor_set(have, 0, sum);
    ry_tensor_set(have, 1, sumsq);
    test_assert_close(have, want, 1e-3, 1e-6);
    ry_tensor_release(have);
    ry_tensor_release(want);
}

/* Runs the gradient global on @loss's arguments for fixture k (suffix "" or
 * the tree's number) and compares the loss and every parameter's gradient. */
static void run_grad(ry_module *m, const char *name, const ry_init_spec *s, const char *gname,
                     ry_value *tree, int k, const char *suffix) {
    const ry_expr *fn = entry(m, "loss");
    ry_value *args[64];
    assert_true(fn->func.nparams <= 64);
    int nargs = make_args(name, s, fn, false, tree, args);
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, gname, nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s @%s failed", name, gname);
    }
    assert_int_equal(out->kind, RY_VAL_TUPLE);
    assert_int_equal(out->tuple.n, 2);
    ry_tensor *loss[8];
    assert_true(ry_value_flatten(out->tuple.fields[0], loss, 8) >= 1);
    char path[256];
    snprintf(path, sizeof path, "tests/models/%s/loss_%d.npy", name, k);
    ry_tensor *want = test_npy(path);
    test_assert_close(loss[0], want, 2e-4, 2e-5);
    ry_tensor_release(want);
    const ry_value *grads = out->tuple.fields[1];
    assert_int_equal(grads->kind, RY_VAL_TUPLE);
    assert_int_equal(grads->tuple.n, nargs);
    for (int j = 0; j < nargs - s->ndata; j++) {
        const ry_value *g = grads->tuple.fields[s->ndata + j];
        assert_int_equal(g->kind, RY_VAL_TENSOR);
        compare_grad(name, suffix, j, g->tensor);
    }
    ry_value_release(out);
    for (int i = 0; i < nargs; i++) ry_value_release(args[i]);
}

static void check_grad(const char *name) {
    ry_module *m = load_model(name);
    const char *gname = make_grad(m, name);
    ry_init_spec *s = load_spec(m);
    run_grad(m, name, s, gname, NULL, 0, "");
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* The Tree-LSTM's gradient on every tree of the fixture file. */
static void check_grad_treelstm(void) {
    ry_module *m = load_model("treelstm");
    const char *gname = make_grad(m, "treelstm");
    ry_init_spec *s = load_spec(m);
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *tb = NULL;
    ry_error err;
    assert_int_equal(ry_treebank_read("tests/models/treelstm_trees.txt", vocab, true, &tb, &err),
                     RY_OK);
    const ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    for (int k = 0; k < tb->ntrees; k++) {
        ry_value *tree = NULL;
        assert_int_equal(ry_tree_to_value(&tb->trees[k], leaf, node, &tree, &err), RY_OK);
        char suffix[16];
        snprintf(suffix, sizeof suffix, "%d", k);
        run_grad(m, "treelstm", s, gname, tree, k, suffix);
        ry_value_release(tree);
    }
    ry_treebank_free(tb);
    ry_vocab_free(vocab);
    ry_init_spec_free(s);
    ry_module_free(m);
}

/* ---- printing ------------------------------------------------------------------
 * A model printed in the text format parses and type-checks again, with
 * the same signature for each entry. */
static void check_roundtrip(const char *name) {
    ry_module *m = load_model(name);
    char *text = ry_module_print(m);
    assert_non_null(text);
    ry_module *m2 = test_parse(text, true);
    const char *entries[] = {"loss", "predict"};
    for (int k = 0; k < 2; k++) {
        const ry_expr *a = entry(m, entries[k]), *b = entry(m2, entries[k]);
        assert_int_equal(a->func.nparams, b->func.nparams);
        /* as text: an ADT type names a typedef of its own module */
        char ta[256], tb[256];
        for (int i = 0; i < a->func.nparams; i++) {
            assert_string_equal(a->func.params[i]->name, b->func.params[i]->name);
            assert_string_equal(ry_type_str(a->func.params[i]->type, ta, sizeof ta),
                                ry_type_str(b->func.params[i]->type, tb, sizeof tb));
        }
        assert_string_equal(ry_type_str(a->func.body->type, ta, sizeof ta),
                            ry_type_str(b->func.body->type, tb, sizeof tb));
    }
    ry_module_free(m2);
    ry_free(text);
    ry_module_free(m);
}

/* ---- stop_gradient ----------------------------------------------------------------
 * f(x) = sum(x * x + stop_gradient(x * x)): the value counts both terms, the
 * gradient only the first (2x, not 4x). */
static void test_stop_gradient(void **state) {
    ry_module *m = test_parse("#[version = \"0.0.5\"]\n"
                              "def @f(%x: Tensor[(3), float32]) -> float32 {\n"
                              "  %0 = multiply(%x, %x);\n"
                              "  %1 = stop_gradient(%0);\n"
                              "  sum(add(%0, %1))\n"
                              "}\n",
                              true);
    ry_error err;
    const char *gname = NULL;
    assert_int_equal(ry_grad(m, "f", NULL, NULL, &gname, &err), RY_OK);
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) ry_tensor_set(x, i, i - 0.5);
    ry_value *arg = ry_value_tensor(x), *out = NULL;
    assert_int_equal(ry_interp_call(m, gname, 1, &arg, NULL, &out, &err), RY_OK);
    ry_tensor *v = out->tuple.fields[0]->tensor, *g = out->tuple.fields[1]->tuple.fields[0]->tensor;
    assert_true(fabs(ry_tensor_get(v, 0) - 2 * (0.25 + 0.25 + 2.25)) < 1e-6);
    for (int i = 0; i < 3; i++) assert_true(fabs(ry_tensor_get(g, i) - 2 * (i - 0.5)) < 1e-6);
    ry_value_release(out);
    ry_value_release(arg);
    ry_module_free(m);
}

#define MODEL_TESTS(NAME)                                                        \
    static void test_##NAME##_convention(void **state) { check_convention(#NAME); } \
    static void test_##NAME##_roundtrip(void **state) { check_roundtrip(#NAME); }

MODEL_TESTS(mlp)
MODEL_TESTS(lenet)
MODEL_TESTS(charlstm)
MODEL_TESTS(chargru)
MODEL_TESTS(charrnn)
MODEL_TESTS(treelstm)

static void test_mlp_grad(void **state) { check_grad("mlp"); }
static void test_lenet_grad(void **state) { check_grad("lenet"); }
static void test_charlstm_grad(void **state) { check_grad("charlstm"); }
static void test_chargru_grad(void **state) { check_grad("chargru"); }
static void test_charrnn_grad(void **state) { check_grad("charrnn"); }
static void test_treelstm_grad(void **state) { check_grad_treelstm(); }

static void test_partial_batch(void **state) {
    const char *names[] = {"mlp", "lenet", "charlstm", "chargru", "charrnn"};
    for (int k = 0; k < 5; k++) check_partial(names[k], 0);
}
static void test_shorter_window(void **state) {
    const char *names[] = {"charlstm", "chargru", "charrnn"};
    for (int k = 0; k < 3; k++) check_partial(names[k], 3);
}
static void test_mlp_forward(void **state) { check_forward("mlp"); }
static void test_lenet_forward(void **state) { check_forward("lenet"); }
static void test_charlstm_forward(void **state) { check_forward("charlstm"); }
static void test_chargru_forward(void **state) { check_forward("chargru"); }
static void test_charrnn_forward(void **state) { check_forward("charrnn"); }
static void test_treelstm_forward(void **state) { check_forward_treelstm(); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_gradient),
        cmocka_unit_test(test_partial_batch),       cmocka_unit_test(test_shorter_window),
        cmocka_unit_test(test_mlp_roundtrip),       cmocka_unit_test(test_lenet_roundtrip),
        cmocka_unit_test(test_charlstm_roundtrip),  cmocka_unit_test(test_chargru_roundtrip),
        cmocka_unit_test(test_charrnn_roundtrip),   cmocka_unit_test(test_treelstm_roundtrip),
        cmocka_unit_test(test_mlp_convention),      cmocka_unit_test(test_mlp_forward),
        cmocka_unit_test(test_mlp_grad),            cmocka_unit_test(test_lenet_convention),
        cmocka_unit_test(test_lenet_forward),       cmocka_unit_test(test_lenet_grad),
        cmocka_unit_test(test_charlstm_convention), cmocka_unit_test(test_charlstm_forward),
        cmocka_unit_test(test_charlstm_grad),       cmocka_unit_test(test_chargru_convention),
        cmocka_unit_test(test_chargru_forward),     cmocka_unit_test(test_chargru_grad),
        cmocka_unit_test(test_charrnn_convention),  cmocka_unit_test(test_charrnn_forward),
        cmocka_unit_test(test_charrnn_grad),        cmocka_unit_test(test_treelstm_convention),
        cmocka_unit_test(test_treelstm_forward),    cmocka_unit_test(test_treelstm_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
