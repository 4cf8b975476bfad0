/*
 * test_ad_outer.c: outermost functions beyond tensors (ry_grad_ex, see
 * ad/grad_outer.c): polymorphic globals, differentiated at the instance
 * their call sites use or at the one the caller gives, recursion and ADTs
 * included; function-typed parameters, called on primal values, with
 * gradients that flow around them; and the errors. Values are checked
 * against central finite differences in float64 through the interpreter.
 */
#include "test_util.h"

#include "relayc/ad.h"

#include "ad/helpers.h"

static ry_value *run_ok(ry_module *m, const char *name, int nargs, ry_value **args) {
    return run(m, name, nargs, args);
}

/* A polymorphic if, differentiated where @main instantiates it (tensors):
 * the gradient goes to the branch taken. */
static void test_poly_call_site(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @pick[A](%c: bool, %x: A, %y: A) -> A {\n"
                       "  if (%c) { %x } else { %y }\n"
                       "}\n"
                       "def @main(%x: Tensor[(3), float64], %y: Tensor[(3), float64]) {\n"
                       "  @pick(True, tanh(%x), %y)\n"
                       "}\n";
    for (int c = 0; c < 2; c++) {
        ry_tensor *ct = ry_tensor_new(RY_BOOL, 0, NULL);
        ry_tensor_set(ct, 0, c);
        ry_value *a[3] = {ry_value_tensor(ct), rv1(3), rv1(3)};
        ry_module *m = gradcheck_ok(text, "pick", 3, a, 1e-6, 1e-8);
        assert_non_null(ry_module_find_global(m, "pick_gradient"));
        assert_non_null(ry_module_find_global(m, "pick_inst"));
        ry_value *out = run_ok(m, "pick_gradient", 3, a);
        const ry_value *d = out->tuple.fields[1];
        for (int i = 0; i < 3; i++) {
            assert_true(ry_tensor_get(d->tuple.fields[1]->tensor, i) == (c ? 1 : 0));
            assert_true(ry_tensor_get(d->tuple.fields[2]->tensor, i) == (c ? 0 : 1));
        }
        ry_value_release(out);
        ry_module_free(m);
        release_all(3, a);
    }
}

/* A recursive polymorphic function over a list (its own recursive call is
 * at a type variable), instantiated at a list of tuples of tensors by
 * @main; checked against finite differences, ADT parameter included. */
static void test_poly_recursive_adt(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "type List[A] { Cons(A, List[A]), Nil }\n"
        "def @last[A](%l: List[A], %d: A) -> A {\n"
        "  match (%l) { Cons(%h, %t) => @last(%t, %h), Nil => %d }\n"
        "}\n"
        "def @main(%l: List[(Tensor[(2), float64], Tensor[(2), float64])],\n"
        "          %d: (Tensor[(2), float64], Tensor[(2), float64])) {\n"
        "  let %r = @last(%l, %d);\n"
        "  multiply(%r.0, %r.1)\n"
        "}\n";
    ry_module *m = test_parse(text, true);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    /* [(a0, b0), (a1, b1)] and a default (c, e) */
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int k = 0; k < 2; k++) {
        ry_value *pf[2] = {rv1(2), rv1(2)};
        ry_value *f[2] = {ry_value_tuple(2, pf), l};
        l = ry_value_adt(cons, 2, f);
    }
    ry_value *df[2] = {rv1(2), rv1(2)};
    ry_value *a[2] = {l, ry_value_tuple(2, df)};
    /* @main, then @last itself at the instance @main uses */
    const char *entries[2] = {"main", "last"};
    ry_gradcheck_report rep;
    ry_error err;
    for (int e = 0; e < 2; e++) {
        ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8};
        if (ry_gradcheck(m, entries[e], 2, a, &o, &rep, &err)) fail_msg("%s", err.msg);
        assert_true(rep.ok && rep.params[0].checked && rep.params[1].checked);
    }
    /* the list is not empty: the default gets nothing, the last element
     * (the first Cons cell: the list is built back to front) ones */
    ry_value *out = run_ok(m, rep.grad_name, 2, a);
    const ry_value *dl = out->tuple.fields[1]->tuple.fields[0];
    const ry_value *dd = out->tuple.fields[1]->tuple.fields[1];
    const ry_value *tail = dl->adt.fields[1];
    const ry_value *last = tail->adt.fields[0];
    for (int i = 0; i < 2; i++) {
        assert_true(ry_tensor_get(dd->tuple.fields[0]->tensor, i) == 0);
        assert_true(ry_tensor_get(last->tuple.fields[1]->tensor, i) == 1);
    }
    assert_true(roundtrip(m) > 0);
    ry_value_release(out);
    ry_module_free(m);
    release_all(2, a);
}

/* No call site: the instance comes from ry_grad_opts.type_args. */
static void test_poly_explicit_types(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @fst[A, B](%p: (A, B)) -> A { %p.0 }\n";
    ry_module *m = test_parse(text, true);
    int nglobals = m->nglobals;
    ry_error err;
    memset(&err, 0, sizeof err);
    /* without types: an error naming the option, and the module unchanged */
    assert_int_equal(ry_grad(m, "fst", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "type_args"));
    assert_int_equal(m->nglobals, nglobals);
    ry_type *ts[2] = {ry_type_tensor(m, RY_FLOAT64, 2, (int64_t[]){2, 3}),
                      ry_type_tensor(m, RY_FLOAT64, 1, (int64_t[]){3})};
    ry_grad_opts go = {.ntype_args = 1, .type_args = ts};
    assert_int_equal(ry_grad_ex(m, "fst", NULL, NULL, &go, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "2 type parameters, 1 type argument"));
    assert_int_equal(m->nglobals, nglobals);
    go.ntype_args = 2;
    const char *gname = NULL;
    if (ry_grad_ex(m, "fst", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
    assert_string_equal(gname, "fst_gradient");
    ry_value *pf[2] = {rv2(2, 3), rv1(3)};
    ry_value *p = ry_value_tuple(2, pf);
    ry_value *out = run_ok(m, gname, 1, &p);
    const ry_value *dp = out->tuple.fields[1]->tuple.fields[0];
    for (int i = 0; i < 6; i++)
        assert_true(ry_tensor_get(dp->tuple.fields[0]->tensor, i) == 1);
    for (int i = 0; i < 3; i++)
        assert_true(ry_tensor_get(dp->tuple.fields[1]->tensor, i) == 0);
    assert_true(roundtrip(m) > 0);
    ry_value_release(out);
    ry_value_release(p);
    ry_module_free(m);
}

/* Two call sites at different types: which one is meant must be said. */
static void test_poly_ambiguous(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @id[A](%x: A) -> A { %x }\n"
                       "def @main(%x: Tensor[(3), float64], %y: Tensor[(2), float64]) {\n"
                       "  (@id(%x), @id(%y))\n"
                       "}\n";
    ry_module *m = test_parse(text, true);
    int nglobals = m->nglobals;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_grad(m, "id", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "different types"));
    assert_int_equal(m->nglobals, nglobals);
    ry_type *t = ry_type_tensor(m, RY_FLOAT64, 1, (int64_t[]){2});
    ry_grad_opts go = {.ntype_args = 1, .type_args = &t};
    const char *gname = NULL;
    if (ry_grad_ex(m, "id", NULL, NULL, &go, &gname, &err)) fail_msg("%s", err.msg);
    ry_value *y = rv1(2);
    ry_value *out = run_ok(m, gname, 1, &y);
    for (int i = 0; i < 2; i++)
        assert_true(ry_tensor_get(out->tuple.fields[1]->tuple.fields[0]->tensor, i) == 1);
    ry_value_release(out);
    ry_value_release(y);
    /* a type variable is not an instance */
    ry_type *tv = ry_type_new(m, RY_TYPE_VAR, RY_NO_SPAN);
    tv->var.name = "B";
    tv->var.id = 100000;
    go.type_args = &tv;
    assert_int_equal(ry_grad_ex(m, "id", NULL, NULL, &go, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "not concrete"));
    ry_module_free(m);
}

/* ---- function parameters ---- */

static const char *apply_text =
    "#[version = \"0.0.5\"]\n"
    "def @apply(%f: fn (Tensor[(3), float64]) -> (Tensor[(3), float64], Tensor[(3), float64]),\n"
    "           %x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
    "  let %r = %f(%w);\n"
    "  add(multiply(%r.0, %x), multiply(tanh(%x), %r.1))\n"
    "}\n"
    "def @mk(%v: Tensor[(3), float64]) {\n"
    "  fn (%y: Tensor[(3), float64]) { (multiply(%y, %v), exp(%v)) }\n"
    "}\n";

/* The function argument is taken as it is; x's gradient (which does not go
 * through f) agrees with finite differences, w's (only through f) is zero
 * by design, and f's slot is (). */
static void test_function_param(void **state) {
    (void)state;
    ry_module *m = test_parse(apply_text, true);
    ry_value *v = rv1(3);
    ry_value *f = run_ok(m, "mk", 1, &v);
    ry_value *a[3] = {f, rv1(3), rv1(3)};
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8};
    ry_gradcheck_report rep;
    ry_error err;
    if (ry_gradcheck(m, "apply", 3, a, &o, &rep, &err)) fail_msg("%s", err.msg);
    assert_false(rep.params[0].checked);
    assert_true(rep.params[1].checked && rep.params[1].ok);
    assert_true(rep.params[2].checked && !rep.params[2].ok); /* no gradient through f */
    ry_value *out = run_ok(m, rep.grad_name, 3, a);
    const ry_value *d = out->tuple.fields[1];
    assert_int_equal(d->tuple.n, 3);
    assert_int_equal(d->tuple.fields[0]->kind, RY_VAL_TUPLE);
    assert_int_equal(d->tuple.fields[0]->tuple.n, 0);
    for (int i = 0; i < 3; i++) {
        double x = ry_tensor_get(a[1]->tensor, i), w = ry_tensor_get(a[2]->tensor, i);
        double vv = ry_tensor_get(v->tensor, i), th = tanh(x);
        double want = w * vv + (1 - th * th) * exp(vv);
        assert_true(fabs(ry_tensor_get(d->tuple.fields[1]->tensor, i) - want) < 1e-12);
        assert_true(ry_tensor_get(d->tuple.fields[2]->tensor, i) == 0);
    }
    assert_true(roundtrip(m) > 0);
    ry_value_release(out);
    /* with wrt: only x */
    bool wrt[3] = {false, true, false};
    ry_grad_opts go = {.wrt = wrt, .nwrt = 3};
    const char *g2 = NULL;
    if (ry_grad_ex(m, "apply", NULL, NULL, &go, &g2, &err)) fail_msg("%s", err.msg);
    out = run_ok(m, g2, 3, a);
    assert_int_equal(out->tuple.fields[1]->tuple.n, 1);
    ry_value_release(out);
    ry_module_free(m);
    ry_value_release(v);
    release_all(3, a);
}

/* A function built inside the differentiated code is differentiated,
 * captures included: the same computation with f made inside agrees with
 * finite differences for every parameter. */
static void test_function_built_inside(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @apply(%f: fn (Tensor[(3), float64]) -> (Tensor[(3), float64], Tensor[(3), "
        "float64]),\n"
        "           %x: Tensor[(3), float64], %w: Tensor[(3), float64]) {\n"
        "  let %r = %f(%w);\n"
        "  add(multiply(%r.0, %x), multiply(tanh(%x), %r.1))\n"
        "}\n"
        "def @main(%v: Tensor[(3), float64], %x: Tensor[(3), float64], %w: Tensor[(3), "
        "float64]) {\n"
        "  @apply(fn (%y: Tensor[(3), float64]) { (multiply(%y, %v), exp(%v)) }, %x, %w)\n"
        "}\n";
    ry_value *a[3] = {rv1(3), rv1(3), rv1(3)};
    ry_module *m = gradcheck_ok(text, "main", 3, a, 1e-6, 1e-8);
    ry_module_free(m);
    release_all(3, a);
}

/* Functions that take or return functions are not lifted: one clear error. */
static void test_function_param_errors(void **state) {
    (void)state;
    const char *text = "#[version = \"0.0.5\"]\n"
                       "def @h(%f: fn (fn (float64) -> float64) -> float64, %x: float64) {\n"
                       "  multiply(%x, %x)\n"
                       "}\n"
                       "def @k[A](%x: A) -> fn (A) -> A { fn (%y: A) { %y } }\n"
                       "def @main(%x: float64) { @k(%x) }\n";
    ry_module *m = test_parse(text, true);
    int nglobals = m->nglobals;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_grad(m, "h", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "parameter %f"));
    /* an instance whose result is a function: rejected, the instance removed */
    assert_int_equal(ry_grad(m, "k", NULL, NULL, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "the result"));
    assert_int_equal(m->nglobals, nglobals);
    assert_null(ry_module_find_global(m, "k_inst"));
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poly_call_site),
        cmocka_unit_test(test_poly_recursive_adt),
        cmocka_unit_test(test_poly_explicit_types),
        cmocka_unit_test(test_poly_ambiguous),
        cmocka_unit_test(test_function_param),
        cmocka_unit_test(test_function_built_inside),
        cmocka_unit_test(test_function_param_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
