/*
 * test_value.c: runtime values: reference counting of tensors, tuples,
 * ADT values, refs and closures; freeing a million-element List without
 * C recursion; depth-first flattening; constructors under out-of-memory.
 */
#include "test_util.h"

/* type List { Cons(Tensor, List), Nil }, built by hand (no parser needed). */
static ry_typedef list_td;
static ry_ctor cons_ctor = {.name = "Cons", .tag = 0, .nfields = 2, .adt = &list_td};
static ry_ctor nil_ctor = {.name = "Nil", .tag = 1, .nfields = 0, .adt = &list_td};

static ry_value *scalar(double x) { return ry_value_tensor(ry_tensor_scalar(RY_FLOAT32, x)); }

static ry_value *cons(ry_value *h, ry_value *t) {
    ry_value *f[2] = {h, t};
    return ry_value_adt(&cons_ctor, 2, f);
}

static void tensor_value_shares_the_tensor(void **state) {
    (void)state;
    ry_tensor *t = ry_tensor_scalar(RY_FLOAT32, 3);
    ry_tensor_retain(t);
    ry_value *v = ry_value_tensor(t);
    assert_int_equal(t->refcount, 2);
    assert_ptr_equal(ry_value_retain(v), v);
    assert_int_equal(v->refcount, 2);
    ry_value_release(v);
    assert_int_equal(t->refcount, 2);
    ry_value_release(v);
    assert_int_equal(t->refcount, 1);
    assert_true(ry_tensor_get(t, 0) == 3);
    ry_tensor_release(t);
    ry_value_release(NULL);
}

static void tuple_copies_array_and_takes_fields(void **state) {
    (void)state;
    ry_value *a = scalar(1), *b = scalar(2);
    ry_value *fields[2] = {a, ry_value_retain(b)};
    ry_value *t = ry_value_tuple(2, fields);
    fields[0] = fields[1] = NULL; /* the tuple copied the array */
    assert_int_equal(t->kind, RY_VAL_TUPLE);
    assert_int_equal(t->tuple.n, 2);
    assert_ptr_equal(t->tuple.fields[0], a);
    assert_ptr_equal(t->tuple.fields[1], b);
    assert_int_equal(b->refcount, 2);
    ry_value_release(t);
    assert_int_equal(b->refcount, 1);
    ry_value_release(b);
    ry_value *unit = ry_value_tuple(0, NULL);
    assert_int_equal(unit->tuple.n, 0);
    ry_value_release(unit);
}

static void ref_and_adt_hold_their_contents(void **state) {
    (void)state;
    ry_value *x = scalar(7);
    ry_value *r = ry_value_ref(ry_value_retain(x));
    assert_int_equal(r->kind, RY_VAL_REF);
    assert_ptr_equal(r->ref.value, x);
    ry_value *l = cons(r, ry_value_adt(&nil_ctor, 0, NULL));
    assert_ptr_equal(l->adt.ctor, &cons_ctor);
    assert_int_equal(l->adt.fields[1]->adt.n, 0);
    assert_int_equal(x->refcount, 2);
    ry_value_release(l);
    assert_int_equal(x->refcount, 1);
    ry_value_release(x);
}

static void closure_captures_and_ctor_fn(void **state) {
    (void)state;
    ry_var a = {.name = "a", .id = 1}, b = {.name = "b", .id = 2};
    ry_expr fn = {.kind = RY_EXPR_FUNC};
    const ry_var *vars[2] = {&a, &b};
    ry_value *x = scalar(1), *y = scalar(2);
    ry_value *caps[2] = {ry_value_retain(x), NULL}; /* NULL: a recursive self-reference */
    ry_value *c = ry_value_closure(&fn, 2, vars, caps);
    assert_ptr_equal(c->closure.func, &fn);
    assert_null(c->closure.ctor);
    assert_int_equal(c->closure.ncaptured, 2);
    assert_ptr_equal(c->closure.captured_vars[1], &b);
    assert_ptr_equal(c->closure.captured[0], x);
    assert_int_equal(x->refcount, 2);
    ry_value_release(c);
    assert_int_equal(x->refcount, 1);
    ry_value_release(x);
    ry_value_release(y);
    ry_value *k = ry_value_ctor_fn(&cons_ctor);
    assert_int_equal(k->kind, RY_VAL_CLOSURE);
    assert_ptr_equal(k->closure.ctor, &cons_ctor);
    assert_null(k->closure.func);
    assert_int_equal(ry_value_count_tensors(k), 0);
    ry_value_release(k);
}

/* A million-element List (and a million-deep chain of refs and 1-tuples)
 * must be freed without growing the C stack. */
static void million_element_list_frees(void **state) {
    (void)state;
    ry_value *l = ry_value_adt(&nil_ctor, 0, NULL);
    for (int i = 0; i < 1000000; i++) l = cons(scalar(i), l);
    assert_int_equal(ry_value_count_tensors(l), 1000000);
    ry_tensor *first[3];
    assert_int_equal(ry_value_flatten(l, first, 3), 1000000);
    assert_true(ry_tensor_get(first[0], 0) == 999999);
    assert_true(ry_tensor_get(first[2], 0) == 999997);
    ry_value_release(l);

    ry_value *deep = scalar(5);
    for (int i = 0; i < 1000000; i++) {
        deep = (i % 2) ? ry_value_ref(deep) : ry_value_tuple(1, &deep);
    }
    assert_int_equal(ry_value_count_tensors(deep), 1);
    ry_value_release(deep);
}

/* Flattening is depth first, left to right, through tuples, ADT fields and
 * refs; closures hold no tensors. */
static void flatten_depth_first(void **state) {
    (void)state;
    ry_value *inner[2] = {scalar(1), ry_value_ref(scalar(2))};
    ry_value *t = ry_value_tuple(2, inner);
    ry_value *l = cons(scalar(3), cons(scalar(4), ry_value_adt(&nil_ctor, 0, NULL)));
    ry_value *outer[4] = {t, ry_value_ctor_fn(&nil_ctor), l, scalar(5)};
    ry_value *v = ry_value_tuple(4, outer);
    ry_tensor *out[8];
    assert_int_equal(ry_value_count_tensors(v), 5);
    assert_int_equal(ry_value_flatten(v, out, 8), 5);
    for (int i = 0; i < 5; i++) assert_true(ry_tensor_get(out[i], 0) == i + 1);
    ry_value_release(v);
}

/* Under out-of-memory constructors return NULL and release what they were
 * given, so nothing leaks (ASan checks). */
static void constructors_release_on_oom(void **state) {
    (void)state;
    ry_tensor *t = ry_tensor_scalar(RY_FLOAT32, 1);
    ry_tensor_retain(t);
    ry_alloc_fail_after(0);
    assert_null(ry_value_tensor(t));
    ry_alloc_fail_after(-1);
    assert_int_equal(t->refcount, 1);

    for (int k = 0; k < 3; k++) {
        ry_value *x = ry_value_tensor(ry_tensor_retain(t));
        ry_value *f[2] = {x, ry_value_retain(x)};
        ry_alloc_fail_after(k == 2 ? 1 : k); /* the value, then its field array */
        ry_value *v = k == 2 ? ry_value_adt(&cons_ctor, 2, f) : ry_value_tuple(2, f);
        ry_alloc_fail_after(-1);
        assert_null(v);
        assert_int_equal(t->refcount, 1);
    }
    for (int k = 0; k < 3; k++) {
        ry_var a = {.name = "a"};
        const ry_var *vars[1] = {&a};
        ry_value *caps[1] = {ry_value_tensor(ry_tensor_retain(t))};
        ry_expr fn = {.kind = RY_EXPR_FUNC};
        ry_alloc_fail_after(k); /* the value, the captures, the names */
        ry_value *c = ry_value_closure(&fn, 1, vars, caps);
        ry_alloc_fail_after(-1);
        assert_null(c);
        ry_value *r = NULL;
        ry_alloc_fail_after(0);
        r = ry_value_ref(ry_value_tensor(ry_tensor_retain(t)));
        ry_alloc_fail_after(-1);
        assert_null(r);
        assert_int_equal(t->refcount, 1);
    }
    ry_tensor_release(t);
}

int main(void) {
    list_td = (ry_typedef){.name = "List", .nctors = 0};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_value_shares_the_tensor),
        cmocka_unit_test(tuple_copies_array_and_takes_fields),
        cmocka_unit_test(ref_and_adt_hold_their_contents),
        cmocka_unit_test(closure_captures_and_ctor_fn),
        cmocka_unit_test(million_element_list_frees),
        cmocka_unit_test(flatten_depth_first),
        cmocka_unit_test(constructors_release_on_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
