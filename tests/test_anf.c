/*
 * test_anf.c: A-normal form (ry_anf). The output is checked for its shape
 * (every operand atomic, every shared node bound once) and for its meaning
 * (the interpreter gives the same results before and after), and it prints,
 * re-parses and type-checks.
 */
#include "test_util.h"

#include "relayc/ad.h"

static bool atomic(const ry_expr *e) {
    return e->kind == RY_EXPR_VAR || e->kind == RY_EXPR_GLOBAL || e->kind == RY_EXPR_CONST ||
           e->kind == RY_EXPR_OP || e->kind == RY_EXPR_CTOR;
}

static bool is_anf(const ry_expr *e);

/* A bound value: one step over atoms, or a form with scopes in ANF. */
static bool simple(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_CALL:
        if (!atomic(e->call.callee)) return false;
        for (int i = 0; i < e->call.nargs; i++)
            if (!atomic(e->call.args[i])) return false;
        return true;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++)
            if (!atomic(e->tuple.fields[i])) return false;
        return true;
    case RY_EXPR_PROJ: return atomic(e->proj.tuple);
    case RY_EXPR_REF: return atomic(e->ref.value);
    case RY_EXPR_REF_READ: return atomic(e->ref_read.ref);
    case RY_EXPR_REF_WRITE: return atomic(e->ref_write.ref) && atomic(e->ref_write.value);
    case RY_EXPR_IF: return atomic(e->if_.cond) && is_anf(e->if_.then_) && is_anf(e->if_.else_);
    case RY_EXPR_MATCH:
        if (!atomic(e->match.data)) return false;
        for (int i = 0; i < e->match.nclauses; i++)
            if (!is_anf(e->match.clauses[i].body)) return false;
        return true;
    case RY_EXPR_FUNC: return is_anf(e->func.body);
    default: return atomic(e);
    }
}

/* let x1 = simple; ...; atom */
static bool is_anf(const ry_expr *e) {
    while (e->kind == RY_EXPR_LET) {
        if (!simple(e->let.value)) return false;
        e = e->let.value->kind == RY_EXPR_FUNC && !is_anf(e->let.value->func.body) ? NULL
                                                                                   : e->let.body;
        if (!e) return false;
    }
    return atomic(e);
}

/* Calls of operator `name` in the tree (a shared node counts at each use). */
static int count_op(const ry_expr *e, const char *name) {
    if (!e) return 0;
    int n = 0;
    switch (e->kind) {
    case RY_EXPR_CALL:
        if (e->call.callee->kind == RY_EXPR_OP && strcmp(e->call.callee->op.op->name, name) == 0)
            n++;
        n += count_op(e->call.callee, name);
        for (int i = 0; i < e->call.nargs; i++)
            n += count_op(e->call.args[i], name);
        return n;
    case RY_EXPR_LET: return count_op(e->let.value, name) + count_op(e->let.body, name);
    case RY_EXPR_IF:
        return count_op(e->if_.cond, name) + count_op(e->if_.then_, name) +
               count_op(e->if_.else_, name);
    case RY_EXPR_MATCH:
        n = count_op(e->match.data, name);
        for (int i = 0; i < e->match.nclauses; i++)
            n += count_op(e->match.clauses[i].body, name);
        return n;
    case RY_EXPR_FUNC: return count_op(e->func.body, name);
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++)
            n += count_op(e->tuple.fields[i], name);
        return n;
    case RY_EXPR_PROJ: return count_op(e->proj.tuple, name);
    case RY_EXPR_REF: return count_op(e->ref.value, name);
    case RY_EXPR_REF_READ: return count_op(e->ref_read.ref, name);
    case RY_EXPR_REF_WRITE:
        return count_op(e->ref_write.ref, name) + count_op(e->ref_write.value, name);
    default: return 0;
    }
}

static ry_value *vec(double a, double b, double c) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, (int64_t[]){3});
    ry_tensor_set(t, 0, a);
    ry_tensor_set(t, 1, b);
    ry_tensor_set(t, 2, c);
    return ry_value_tensor(t);
}

static ry_value *run(ry_module *m, int nargs, ry_value **args) {
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "main", nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("run failed: %s", err.msg);
    }
    return out;
}

/* Same tensors, depth first, to the last bit (the same kernels run). */
static void assert_same(const ry_value *a, const ry_value *b) {
    ry_tensor *ta[16], *tb[16];
    int na = ry_value_flatten(a, ta, 16), nb = ry_value_flatten(b, tb, 16);
    assert_int_equal(na, nb);
    assert_true(na > 0 && na <= 16);
    for (int i = 0; i < na; i++)
        test_assert_close(ta[i], tb[i], 0, 0);
}

/* ANF of every global, checked, then run against the original and printed,
 * re-parsed and type-checked. */
static void anf_and_compare(const char *text, int nargs, ry_value **args) {
    ry_module *m = test_parse(text, true);
    ry_value *before = run(m, nargs, args);
    ry_anf_module(m);
    for (int i = 0; i < m->nglobals; i++)
        assert_true(is_anf(m->globals[i]->func->func.body));
    ry_error err;
    if (ry_module_typecheck(m, &err)) fail_msg("ANF output does not type-check: %s", err.msg);
    ry_value *after = run(m, nargs, args);
    assert_same(before, after);
    char *printed = ry_module_print(m);
    ry_module *m2 = test_parse(printed, true);
    ry_value *again = run(m2, nargs, args);
    assert_same(before, again);
    ry_value_release(before);
    ry_value_release(after);
    ry_value_release(again);
    ry_free(printed);
    ry_module_free(m2);
    ry_module_free(m);
}

static const char *dag_text = "#[version = \"0.0.5\"]\n"
                              "def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) {\n"
                              "  %0 = add(%x, %y);\n"
                              "  %1 = multiply(%0, %0);\n"
                              "  %2 = tanh(%1);\n"
                              "  %3 = subtract(%2, %1);\n"
                              "  (%3, %2, add(%0, %3))\n"
                              "}\n";

/* A shared node is bound once: one call per distinct node. */
static void test_anf_dag_sharing(void **state) {
    (void)state;
    ry_module *m = test_parse(dag_text, true);
    const ry_expr *f = ry_module_find_global(m, "main")->func;
    /* the tree walk of the DAG meets the shared add many times */
    assert_true(count_op(f->func.body, "add") > 2);
    ry_expr *n = ry_anf(m, f);
    assert_int_equal(n->kind, RY_EXPR_FUNC);
    assert_true(is_anf(n->func.body));
    assert_int_equal(count_op(n->func.body, "add"), 2);
    assert_int_equal(count_op(n->func.body, "multiply"), 1);
    assert_int_equal(count_op(n->func.body, "tanh"), 1);
    assert_int_equal(count_op(n->func.body, "subtract"), 1);
    /* the output is typed: every let var carries its type */
    for (const ry_expr *e = n->func.body; e->kind == RY_EXPR_LET; e = e->let.body)
        assert_non_null(e->let.var->type);
    /* the input is left as it was */
    assert_true(count_op(f->func.body, "add") > 2);
    ry_module_free(m);

    ry_value *a[2] = {vec(1, -2, 0.5), vec(0.25, 3, -1)};
    anf_and_compare(dag_text, 2, a);
    ry_value_release(a[0]);
    ry_value_release(a[1]);
}

/* Normalizing twice changes nothing more: the same number of bindings. */
static int count_lets(const ry_expr *e) {
    int n = 0;
    for (; e->kind == RY_EXPR_LET; e = e->let.body)
        n++;
    return n;
}

static void test_anf_idempotent(void **state) {
    (void)state;
    ry_module *m = test_parse(dag_text, true);
    const ry_expr *f = ry_module_find_global(m, "main")->func;
    ry_expr *n1 = ry_anf(m, f), *n2 = ry_anf(m, n1);
    assert_int_equal(count_lets(n1->func.body), count_lets(n2->func.body));
    assert_int_equal(count_lets(n1->func.body), 6); /* 5 distinct calls and the tuple */
    ry_module_free(m);
}

/* Scopes: closures capturing a shared node, refs, an ADT, recursion, if. */
static const char *scopes_text = "#[version = \"0.0.5\"]\n"
                                 "type List[A] {\n"
                                 "  Cons(A, List[A]),\n"
                                 "  Nil,\n"
                                 "}\n"
                                 "def @len(%l: List[Tensor[(3), float32]]) -> float32 {\n"
                                 "  match (%l) {\n"
                                 "    Cons(_, %t) => add(1f, @len(%t)),\n"
                                 "    Nil => 0f,\n"
                                 "  }\n"
                                 "}\n"
                                 "def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) {\n"
                                 "  %0 = add(%x, %y);\n"
                                 "  let %f = fn (%z: Tensor[(3), float32]) { multiply(%z, %0) };\n"
                                 "  let %r = ref(%f(%0));\n"
                                 "  let %u = ref_write(%r, add(ref_read(%r), %0));\n"
                                 "  let %l = Cons(%x, Cons(ref_read(%r), Nil));\n"
                                 "  if (greater(sum(%x), 0f)) {\n"
                                 "    (%f(%y), @len(%l))\n"
                                 "  } else {\n"
                                 "    (subtract(%0, %y), negative(@len(%l)))\n"
                                 "  }\n"
                                 "}\n";

static void test_anf_scopes(void **state) {
    (void)state;
    ry_value *a[2] = {vec(1, 2, 0.5), vec(0.25, 3, -1)};
    anf_and_compare(scopes_text, 2, a);
    ry_value *b[2] = {vec(-1, -2, 0.5), vec(0.25, 3, -1)};
    anf_and_compare(scopes_text, 2, b);
    for (int i = 0; i < 2; i++) {
        ry_value_release(a[i]);
        ry_value_release(b[i]);
    }
}

/* A let-bound recursive closure keeps its name, so its self-reference holds. */
static void test_anf_recursive_let(void **state) {
    (void)state;
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(3), float32]) {\n"
        "  let %loop = fn (%i: int32, %acc: Tensor[(3), float32]) -> Tensor[(3), float32] {\n"
        "    if (less(%i, 3)) { %loop(add(%i, 1), multiply(%acc, %x)) } else { %acc }\n"
        "  };\n"
        "  %loop(0, ones_like(%x))\n"
        "}\n";
    ry_value *x = vec(2, -1, 0.5);
    anf_and_compare(text, 1, &x);
    ry_module *m = test_parse(text, true);
    ry_expr *n = ry_anf(m, ry_module_find_global(m, "main")->func);
    assert_int_equal(n->func.body->kind, RY_EXPR_LET);
    assert_string_equal(n->func.body->let.var->name, "loop");
    ry_module_free(m);
    ry_value_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anf_dag_sharing),
        cmocka_unit_test(test_anf_idempotent),
        cmocka_unit_test(test_anf_scopes),
        cmocka_unit_test(test_anf_recursive_let),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
