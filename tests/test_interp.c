/*
 * test_interp.c: the reference interpreter on whole programs: control flow,
 * sharing, closures and higher-order functions, ADTs and patterns, refs,
 * deep recursion (on a heap stack), tuples, model forwards checked against
 * PyTorch (fixtures from tools/gen_interp_tests.py), and located run-time
 * errors that free everything.
 */
#include "test_util.h"

/* ---- helpers for programs written in the text format ---- */

static ry_value *f32(double x) { return ry_value_tensor(ry_tensor_scalar(RY_FLOAT32, x)); }

static ry_value *npy_value(const char *path) { return ry_value_tensor(test_npy(path)); }

/* Calls entry with borrowed args; fails the test on a run-time error. */
static ry_value *call_ok(ry_module *m, const char *entry, int nargs, ry_value **args) {
    ry_value *out = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_interp_call(m, entry, nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("run-time error: %s", err.msg);
    }
    assert_non_null(out);
    return out;
}

/* Expects a run-time error; returns it. */
static ry_error call_err(ry_module *m, const char *entry, int nargs, ry_value **args) {
    ry_value *out = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_interp_call(m, entry, nargs, args, NULL, &out, &err), RY_ERR);
    assert_null(out);
    return err;
}

static double num(const ry_value *v) {
    assert_int_equal(v->kind, RY_VAL_TENSOR);
    assert_int_equal(v->tensor->size, 1);
    return ry_tensor_get(v->tensor, 0);
}

static const ry_value *field(const ry_value *v, int i) {
    assert_int_equal(v->kind, RY_VAL_TUPLE);
    assert_true(i < v->tuple.n);
    return v->tuple.fields[i];
}

/* Reads a List of scalars into out; returns its length. */
static int list_nums(const ry_value *l, double *out, int max) {
    int n = 0;
    for (; l->kind == RY_VAL_ADT && l->adt.n == 2; l = l->adt.fields[1]) {
        assert_true(n < max);
        out[n++] = num(l->adt.fields[0]);
    }
    assert_int_equal(l->kind, RY_VAL_ADT);
    assert_string_equal(l->adt.ctor->name, "Nil");
    return n;
}

/* The 1-based line of src holding needle. */
static int line_of(const char *src, const char *needle) {
    const char *at = strstr(src, needle);
    assert_non_null(at);
    int line = 1;
    for (const char *p = src; p < at; p++) line += *p == '\n';
    return line;
}

#define LIST_TYPE "type List[A] { Cons(A, List[A]), Nil }\n"

/* ---- control flow ---- */

static const char *if_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: float32) -> float32 {\n"
    "  if (%x > 0f) { %x * 2f } else { negative(%x) - 1f }\n"
    "}\n"
    "def @sign(%x: int32) -> int32 {\n"
    "  if (less(%x, 0)) { -1 } else { if (equal(%x, 0)) { 0 } else { 1 } }\n"
    "}\n";

static void if_else_branches(void **state) {
    (void)state;
    ry_module *m = test_parse(if_src, true);
    double ins[3] = {3, -2, 0}, want[3] = {6, 1, -1};
    for (int i = 0; i < 3; i++) {
        ry_value *x = f32(ins[i]);
        ry_value *r = call_ok(m, "main", 1, &x);
        assert_true(num(r) == want[i]);
        ry_value_release(r);
        ry_value_release(x);
    }
    int sins[3] = {-5, 0, 9}, swant[3] = {-1, 0, 1};
    for (int i = 0; i < 3; i++) {
        ry_value *x = ry_value_tensor(ry_tensor_scalar(RY_INT32, sins[i]));
        ry_value *r = call_ok(m, "sign", 1, &x);
        assert_int_equal(r->tensor->dtype, RY_INT32);
        assert_true(num(r) == swant[i]);
        ry_value_release(r);
        ry_value_release(x);
    }
    ry_module_free(m);
}

/* ---- sharing: %0 used twice is evaluated once ---- */

static const char *share_src =
    "#[version = \"0.0.5\"]\n"
    "def @main() -> (float32, float32) {\n"
    "  let %r = ref(0f);\n"
    "  let %tick = fn () -> float32 {\n"
    "    let %u = ref_write(%r, add(ref_read(%r), 1f));\n"
    "    ref_read(%r)\n"
    "  };\n"
    "  %0 = %tick();\n"
    "  %1 = multiply(%0, 10f);\n"
    "  %2 = add(%1, %0);\n"
    "  (add(%2, %1), ref_read(%r))\n"
    "}\n"
    "def @per_call() -> (float32, float32, float32) {\n"
    "  let %r = ref(0f);\n"
    "  let %double_tick = fn () -> float32 {\n"
    "    %0 = ref_write(%r, add(ref_read(%r), 1f));\n"
    "    %1 = (%0, ref_read(%r));\n"
    "    add(%1.1, %1.1)\n"
    "  };\n"
    "  (%double_tick(), %double_tick(), ref_read(%r))\n"
    "}\n";

static void shared_node_evaluated_once(void **state) {
    (void)state;
    ry_module *m = test_parse(share_src, true);
    ry_value *r = call_ok(m, "main", 0, NULL);
    /* %0 = 1 (one tick), %1 = 10, %2 = 11: 21; the counter ticked once. */
    assert_true(num(field(r, 0)) == 21);
    assert_true(num(field(r, 1)) == 1);
    ry_value_release(r);
    /* A shared node inside a function is evaluated once per call. */
    r = call_ok(m, "per_call", 0, NULL);
    assert_true(num(field(r, 0)) == 2);
    assert_true(num(field(r, 1)) == 4);
    assert_true(num(field(r, 2)) == 2);
    ry_value_release(r);
    ry_module_free(m);
}

/* ---- closures and higher-order functions ---- */

static const char *hof_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
    "  match (%l) {\n"
    "    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),\n"
    "    Nil => Nil,\n"
    "  }\n"
    "}\n"
    "def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A {\n"
    "  match (%l) {\n"
    "    Cons(%h, %t) => @foldl(%f, %f(%acc, %h), %t),\n"
    "    Nil => %acc,\n"
    "  }\n"
    "}\n"
    "def @compose[A, B, C](%f: fn (B) -> C, %g: fn (A) -> B) -> fn (A) -> C {\n"
    "  fn (%x: A) -> C { %f(%g(%x)) }\n"
    "}\n"
    "def @adder(%n: float32) -> fn (float32) -> float32 {\n"
    "  fn (%x: float32) -> float32 { add(%x, %n) }\n"
    "}\n"
    "def @affine(%a: float32, %b: float32, %x: float32) -> float32 { %a * %x + %b }\n"
    "def @main(%l: List[float32]) -> (List[float32], float32, float32) {\n"
    "  let %k = 3f;\n"
    "  let %times_k = fn (%x: float32) -> float32 { multiply(%x, %k) };\n"
    "  let %f = @compose(@adder(10f), %times_k);\n"
    "  let %m = @map(%f, %l);\n"
    "  let %sum = @foldl(fn (%a: float32, %b: float32) -> float32 { add(%a, %b) }, 0f, %m);\n"
    "  let %half_line = fn (%x: float32) -> float32 { @affine(0.5f, %k, %x) };\n"
    "  (%m, %sum, %half_line(4f))\n"
    "}\n";

static void closures_and_higher_order(void **state) {
    (void)state;
    ry_module *m = test_parse(hof_src, true);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int i = 3; i >= 1; i--) l = ry_value_adt(cons, 2, (ry_value *[]){f32(i), l});
    ry_value *r = call_ok(m, "main", 1, &l);
    double got[8];
    assert_int_equal(list_nums(field(r, 0), got, 8), 3);
    for (int i = 0; i < 3; i++) assert_true(got[i] == 3 * (i + 1) + 10);
    assert_true(num(field(r, 1)) == 13 + 16 + 19);
    assert_true(num(field(r, 2)) == 5); /* 0.5 * 4 + 3 */
    ry_value_release(r);
    ry_value_release(l);
    ry_module_free(m);
}

/* A closure returned to C and applied there with ry_interp_apply. */
static void closure_returned_and_applied(void **state) {
    (void)state;
    ry_module *m = test_parse(hof_src, true);
    ry_value *n = f32(7), *x = f32(5), *out = NULL;
    ry_value *add7 = call_ok(m, "adder", 1, &n);
    assert_int_equal(add7->kind, RY_VAL_CLOSURE);
    assert_int_equal(add7->closure.ncaptured, 1); /* only its free variable %n */
    assert_string_equal(add7->closure.captured_vars[0]->name, "n");
    ry_error err;
    assert_int_equal(ry_interp_apply(m, add7, 1, &x, NULL, &out, &err), RY_OK);
    assert_true(num(out) == 12);
    ry_value_release(out);
    /* Wrong arity is an error, not a crash. */
    assert_int_equal(ry_interp_apply(m, add7, 0, NULL, NULL, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "argument"));
    assert_int_equal(ry_interp_call(m, "adder", 0, NULL, NULL, &out, &err), RY_ERR);
    assert_string_equal(err.msg, "@adder takes 1 arguments, not 0");
    assert_int_equal(ry_interp_call(m, "nope", 0, NULL, NULL, &out, &err), RY_ERR);
    assert_string_equal(err.msg, "no global function @nope");
    /* A constructor used as a function value, applied from C. */
    ry_value *some = ry_value_ctor_fn(ry_module_find_ctor(m, "Cons"));
    ry_value *nil = ry_value_adt(ry_module_find_ctor(m, "Nil"), 0, NULL);
    ry_value *cargs[2] = {x, nil};
    assert_int_equal(ry_interp_apply(m, some, 2, cargs, NULL, &out, &err), RY_OK);
    assert_string_equal(out->adt.ctor->name, "Cons");
    assert_ptr_equal(out->adt.fields[0], x);
    assert_ptr_equal(out->adt.fields[1], nil);
    ry_value_release(out);
    assert_int_equal(ry_interp_apply(m, some, 1, cargs, NULL, &out, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "constructor Cons takes 2 arguments"));
    assert_int_equal(ry_interp_apply(m, x, 1, cargs, NULL, &out, &err), RY_ERR);
    assert_string_equal(err.msg, "cannot call a tensor");
    ry_value_release(some);
    ry_value_release(nil);
    ry_value_release(add7);
    ry_value_release(n);
    ry_value_release(x);
    ry_module_free(m);
}

/* ---- ADTs and patterns ---- */

static const char *adt_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "type Option[A] { Some(A), None }\n"
    "type Tree { Leaf(float32), Node(Tree, Tree) }\n"
    "def @sum(%t: Tree) -> float32 {\n"
    "  match (%t) {\n"
    "    Leaf(%x) => %x,\n"
    "    Node(Leaf(%a), Leaf(%b)) => %a * %b,\n"
    "    Node(%l, %r) => add(@sum(%l), @sum(%r)),\n"
    "  }\n"
    "}\n"
    "def @second(%l: List[float32]) -> Option[float32] {\n"
    "  match (%l) {\n"
    "    Cons(_, Cons(%x, _)) => Some(%x),\n"
    "    _ => None,\n"
    "  }\n"
    "}\n"
    "def @or_else(%p: (Option[float32], float32)) -> float32 {\n"
    "  match (%p) {\n"
    "    (Some(%x), _) => %x,\n"
    "    (None, %d) => %d,\n"
    "  }\n"
    "}\n"
    "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
    "  match (%l) {\n"
    "    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),\n"
    "    Nil => Nil,\n"
    "  }\n"
    "}\n"
    "def @main() -> (float32, float32, float32, List[Option[float32]]) {\n"
    "  let %t = Node(Node(Leaf(2f), Leaf(3f)), Node(Leaf(4f), Node(Leaf(5f), Leaf(6f))));\n"
    "  let %l = Cons(1f, Cons(2f, Cons(3f, Nil)));\n"
    "  let %short = Cons(1f, Nil);\n"
    "  (@sum(%t), @or_else((@second(%l), 0f)), @or_else((@second(%short), -7f)),\n"
    "   @map(Some, %l))\n"
    "}\n"
    "def @head(%l: List[float32]) -> float32 {\n"
    "  match? (%l) {\n"
    "    Cons(%h, _) => %h,\n"
    "  }\n"
    "}\n";

static void adts_and_nested_patterns(void **state) {
    (void)state;
    ry_module *m = test_parse(adt_src, true);
    ry_value *r = call_ok(m, "main", 0, NULL);
    assert_true(num(field(r, 0)) == 6 + 4 + 30); /* Node(Leaf, Leaf) multiplies */
    assert_true(num(field(r, 1)) == 2);
    assert_true(num(field(r, 2)) == -7);
    /* A constructor passed as a function value. */
    const ry_value *l = field(r, 3);
    for (int i = 1; i <= 3; i++, l = l->adt.fields[1]) {
        assert_string_equal(l->adt.ctor->name, "Cons");
        const ry_value *some = l->adt.fields[0];
        assert_string_equal(some->adt.ctor->name, "Some");
        assert_true(num(some->adt.fields[0]) == i);
    }
    assert_string_equal(l->adt.ctor->name, "Nil");
    ry_value_release(r);
    ry_module_free(m);
}

/* match? that finds no clause is a located run-time error. */
static void failed_match_is_located(void **state) {
    (void)state;
    ry_module *m = test_parse(adt_src, true);
    ry_value *nil = ry_value_adt(ry_module_find_ctor(m, "Nil"), 0, NULL);
    ry_error err = call_err(m, "head", 1, &nil);
    assert_string_equal(err.msg, "match failed: no clause matches Nil");
    assert_string_equal(err.file, "test.relay");
    assert_int_equal(err.line, line_of(adt_src, "match?"));
    assert_int_equal(err.col, 3);
    assert_non_null(strstr(err.source_line, "match?"));
    ry_value_release(nil);
    ry_module_free(m);
}

/* ---- references ---- */

static const char *ref_src =
    "#[version = \"0.0.5\"]\n"
    "def @counter() -> (float32, float32, ()) {\n"
    "  let %c = ref(0f);\n"
    "  let %bump = fn (%by: float32) -> () { ref_write(%c, add(ref_read(%c), %by)) };\n"
    "  let %a = %bump(1f);\n"
    "  let %b = %bump(2f);\n"
    "  let %snap = ref_read(%c);\n"
    "  let %d = %bump(4f);\n"
    "  (%snap, ref_read(%c), %d)\n"
    "}\n"
    "def @alias() -> float32 {\n"
    "  let %r = ref(1f);\n"
    "  let %s = %r;\n"
    "  let %u = ref_write(%s, 5f);\n"
    "  ref_read(%r)\n"
    "}\n";

static void refs_are_mutable_cells(void **state) {
    (void)state;
    ry_module *m = test_parse(ref_src, true);
    ry_value *r = call_ok(m, "counter", 0, NULL);
    assert_true(num(field(r, 0)) == 3);
    assert_true(num(field(r, 1)) == 7);
    assert_int_equal(field(r, 2)->kind, RY_VAL_TUPLE); /* ref_write returns () */
    assert_int_equal(field(r, 2)->tuple.n, 0);
    ry_value_release(r);
    r = call_ok(m, "alias", 0, NULL);
    assert_true(num(r) == 5);
    ry_value_release(r);
    ry_module_free(m);
}

/* ---- recursion ---- */

static const char *rec_src =
    "#[version = \"0.0.5\"]\n"
    "def @fact(%n: int32) -> int32 {\n"
    "  if (equal(%n, 0)) { 1 } else { multiply(%n, @fact(subtract(%n, 1))) }\n"
    "}\n"
    "def @even(%n: int32) -> bool {\n"
    "  if (%n == 0) { True } else { @odd(%n - 1) }\n"
    "}\n"
    "def @odd(%n: int32) -> bool {\n"
    "  if (%n == 0) { False } else { @even(%n - 1) }\n"
    "}\n"
    "def @sumto(%n: int64) -> int64 {\n"
    "  if (equal(%n, 0i64)) { 0i64 } else { add(%n, @sumto(subtract(%n, 1i64))) }\n"
    "}\n"
    "def @count_local(%n: int32) -> int32 {\n"
    "  let %go = fn (%i: int32, %acc: int32) -> int32 {\n"
    "    if (%i == 0) { %acc } else { %go(%i - 1, %acc + 2) }\n"
    "  };\n"
    "  %go(%n, 0)\n"
    "}\n";

static ry_value *i32(int x) { return ry_value_tensor(ry_tensor_scalar(RY_INT32, x)); }

static void factorial_and_mutual_recursion(void **state) {
    (void)state;
    ry_module *m = test_parse(rec_src, true);
    ry_value *n = i32(10);
    ry_value *r = call_ok(m, "fact", 1, &n);
    assert_int_equal(r->tensor->dtype, RY_INT32);
    assert_true(num(r) == 3628800);
    ry_value_release(r);
    ry_value_release(n);
    int ks[3] = {0, 7, 10000};
    for (int i = 0; i < 3; i++) {
        n = i32(ks[i]);
        r = call_ok(m, "even", 1, &n);
        assert_int_equal(r->tensor->dtype, RY_BOOL);
        assert_true(num(r) == (ks[i] % 2 == 0));
        ry_value_release(r);
        /* A recursive local function (let-bound fn calling itself). */
        r = call_ok(m, "count_local", 1, &n);
        assert_true(num(r) == 2 * ks[i]);
        ry_value_release(r);
        ry_value_release(n);
    }
    /* Calls in tail position reuse the caller's frame: 100,001 mutually
     * recursive steps run within 50 frames. */
    ry_interp_opts small = {.max_depth = 50};
    ry_error err;
    n = i32(100001);
    r = NULL;
    assert_int_equal(ry_interp_call(m, "even", 1, &n, &small, &r, &err), RY_OK);
    assert_true(num(r) == 0);
    ry_value_release(r);
    assert_int_equal(ry_interp_call(m, "count_local", 1, &n, &small, &r, &err), RY_OK);
    assert_true(num(r) == 200002);
    ry_value_release(r);
    ry_value_release(n);
    ry_module_free(m);
}

/* 100,000 and 1,000,000 nested non-tail calls in the program (the first
 * only under RY_TEST_LIGHT): the C stack does not grow; a low max_depth
 * is a clear, located error. */
static void deep_non_tail_recursion(void **state) {
    (void)state;
    ry_module *m = test_parse(rec_src, true);
    long depths[2] = {100000, 1000000};
    for (int i = 0; i < (test_light() ? 1 : 2); i++) {
        ry_value *n = ry_value_tensor(ry_tensor_scalar(RY_INT64, (double)depths[i]));
        ry_value *r = call_ok(m, "sumto", 1, &n);
        assert_int_equal(r->tensor->dtype, RY_INT64);
        assert_true(((int64_t *)r->tensor->data)[0] == depths[i] * (depths[i] + 1) / 2);
        ry_value_release(r);
        ry_value_release(n);
    }
    ry_value *n = ry_value_tensor(ry_tensor_scalar(RY_INT64, 5000)), *out = NULL;
    ry_interp_opts opts = {.max_depth = 2000};
    ry_error err;
    assert_int_equal(ry_interp_call(m, "sumto", 1, &n, &opts, &out, &err), RY_ERR);
    assert_null(out);
    assert_non_null(strstr(err.msg, "stack overflow"));
    assert_int_equal(err.line, line_of(rec_src, "@sumto(subtract"));
    ry_value_release(n);
    ry_module_free(m);
}

/* A List copied by non-tail recursion, 100,000 and 1,000,000 elements
 * (the first only under RY_TEST_LIGHT): each element waits on the heap
 * stack for the rest. */
static const char *copy_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @copy[A](%l: List[A]) -> List[A] {\n"
    "  match (%l) { Cons(%h, %t) => Cons(%h, @copy(%t)), Nil => Nil }\n"
    "}\n";

static void deep_list_copy(void **state) {
    (void)state;
    ry_module *m = test_parse(copy_src, true);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    for (int k = 0; k < (test_light() ? 1 : 2); k++) {
        int n = k ? 1000000 : 100000;
        ry_value *in = ry_value_adt(nil, 0, NULL);
        for (int i = n - 1; i >= 0; i--) in = ry_value_adt(cons, 2, (ry_value *[]){f32(i), in});
        ry_value *out = call_ok(m, "copy", 1, &in);
        assert_ptr_not_equal(out, in);
        int len = 0;
        for (const ry_value *p = out; p->adt.ctor == cons; p = p->adt.fields[1], len++)
            if (len % 9973 == 0) assert_true(num(p->adt.fields[0]) == len);
        assert_int_equal(len, n);
        ry_value_release(out);
        ry_value_release(in);
    }
    ry_module_free(m);
}

/* ---- tuples ---- */

static const char *tuple_src =
    "#[version = \"0.0.5\"]\n"
    "def @swap[A, B](%p: (A, B)) -> (B, A) { (%p.1, %p.0) }\n"
    "def @main(%x: float32) -> ((float32, (float32, float32)), float32, ()) {\n"
    "  let %t = (%x, (add(%x, 1f), 2f));\n"
    "  let %s = @swap(%t.1);\n"
    "  let %u = match (%t) { (%p, (_, %q)) => multiply(%p, %q) };\n"
    "  ((%s.0, @swap(%s)), %u, ())\n"
    "}\n";

static void tuples_and_projections(void **state) {
    (void)state;
    ry_module *m = test_parse(tuple_src, true);
    ry_value *x = f32(4);
    ry_value *r = call_ok(m, "main", 1, &x);
    const ry_value *a = field(r, 0);
    assert_true(num(field(a, 0)) == 2);
    assert_true(num(field(field(a, 1), 0)) == 5);
    assert_true(num(field(field(a, 1), 1)) == 2);
    assert_true(num(field(r, 1)) == 8);
    assert_int_equal(field(r, 2)->tuple.n, 0);
    ry_tensor *flat[8];
    assert_int_equal(ry_value_flatten(r, flat, 8), 4);
    ry_value_release(r);
    ry_value_release(x);
    ry_module_free(m);
}

/* ---- models, checked against PyTorch (tools/gen_interp_tests.py) ---- */

static const char *mlp_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 4), float32], %w1: Tensor[(8, 4), float32],\n"
    "          %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32],\n"
    "          %b2: Tensor[(3), float32]) -> Tensor[(2, 3), float32] {\n"
    "  %0 = nn.dense(%x, %w1, units=8);\n"
    "  %1 = nn.bias_add(%0, %b1);\n"
    "  %2 = nn.relu(%1);\n"
    "  %3 = nn.dense(%2, %w2, units=3);\n"
    "  %4 = nn.bias_add(%3, %b2);\n"
    "  nn.softmax(%4)\n"
    "}\n";

static void mlp_forward_matches_torch(void **state) {
    (void)state;
    ry_module *m = test_parse(mlp_src, true);
    const char *names[5] = {"x", "w1", "b1", "w2", "b2"};
    ry_value *args[5];
    char path[128];
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "tests/interp/mlp/%s.npy", names[i]);
        args[i] = npy_value(path);
    }
    ry_value *r = call_ok(m, "main", 5, args);
    ry_tensor *want = test_npy("tests/interp/mlp/out.npy");
    test_assert_close(r->tensor, want, 1e-5, 1e-6);
    ry_tensor_release(want);
    ry_value_release(r);
    for (int i = 0; i < 5; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

#define T14 "Tensor[(1, 4), float32]"
#define T13 "Tensor[(1, 3), float32]"
#define STATE "(" T13 ", " T13 ")"

/* An LSTM folded over a List of inputs; the cell's gates come from one
 * split, so an operator's tuple result becomes a tuple value. */
static const char *lstm_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @foldl[A, B](%f: fn (A, B) -> A, %acc: A, %l: List[B]) -> A {\n"
    "  match (%l) {\n"
    "    Cons(%h, %t) => @foldl(%f, %f(%acc, %h), %t),\n"
    "    Nil => %acc,\n"
    "  }\n"
    "}\n"
    "def @cell(%s: " STATE ", %x: " T14 ", %w: Tensor[(12, 4), float32],\n"
    "          %u: Tensor[(12, 3), float32], %b: Tensor[(1, 12), float32]) -> " STATE " {\n"
    "  %0 = add(add(nn.dense(%x, %w), nn.dense(%s.0, %u)), %b);\n"
    "  %1 = split(%0, indices_or_sections=4, axis=1);\n"
    "  %2 = add(multiply(sigmoid(%1.1), %s.1), multiply(sigmoid(%1.0), tanh(%1.2)));\n"
    "  (multiply(sigmoid(%1.3), tanh(%2)), %2)\n"
    "}\n"
    "def @main(%xs: List[" T14 "], %s0: " STATE ", %w: Tensor[(12, 4), float32],\n"
    "          %u: Tensor[(12, 3), float32], %b: Tensor[(1, 12), float32]) -> " STATE " {\n"
    "  @foldl(fn (%s: " STATE ", %x: " T14 ") -> " STATE " { @cell(%s, %x, %w, %u, %b) },\n"
    "         %s0, %xs)\n"
    "}\n";

/* Element i of a (N, 1, 4) array as its own (1, 4) tensor. */
static ry_value *row(const ry_tensor *all, int i) {
    int64_t shape[2] = {1, all->shape[2]};
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 2, shape);
    memcpy(t->data, (const float *)all->data + i * shape[1], sizeof(float) * (size_t)shape[1]);
    return ry_value_tensor(t);
}

static void lstm_over_list_matches_torch(void **state) {
    (void)state;
    ry_module *m = test_parse(lstm_src, true);
    ry_tensor *xs = test_npy("tests/interp/lstm/xs.npy");
    ry_value *l = ry_value_adt(ry_module_find_ctor(m, "Nil"), 0, NULL);
    for (int i = (int)xs->shape[0] - 1; i >= 0; i--)
        l = ry_value_adt(ry_module_find_ctor(m, "Cons"), 2, (ry_value *[]){row(xs, i), l});
    int64_t shape[2] = {1, 3};
    ry_value *zero = ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 2, shape));
    ry_value *s0 = ry_value_tuple(2, (ry_value *[]){zero, ry_value_retain(zero)});
    ry_value *args[5] = {l, s0, npy_value("tests/interp/lstm/w.npy"),
                         npy_value("tests/interp/lstm/u.npy"), npy_value("tests/interp/lstm/b.npy")};
    ry_value *r = call_ok(m, "main", 5, args);
    ry_tensor *h = test_npy("tests/interp/lstm/h.npy"), *c = test_npy("tests/interp/lstm/c.npy");
    test_assert_close(field(r, 0)->tensor, h, 1e-5, 1e-6);
    test_assert_close(field(r, 1)->tensor, c, 1e-5, 1e-6);
    ry_tensor_release(h);
    ry_tensor_release(c);
    ry_tensor_release(xs);
    ry_value_release(r);
    for (int i = 0; i < 5; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

/* A binary TreeLSTM over ((x0, x1), (x2, (x3, x4))). */
static const char *treelstm_src =
    "#[version = \"0.0.5\"]\n"
    "type Tree { Leaf(" T14 "), Node(Tree, Tree) }\n"
    "def @leaf(%x: " T14 ", %wl: Tensor[(9, 4), float32], %bl: Tensor[(1, 9), float32]) -> " STATE " {\n"
    "  let %g = split(add(nn.dense(%x, %wl), %bl), indices_or_sections=3, axis=1);\n"
    "  let %c = multiply(sigmoid(%g.0), tanh(%g.2));\n"
    "  (multiply(sigmoid(%g.1), tanh(%c)), %c)\n"
    "}\n"
    "def @node(%l: " STATE ", %r: " STATE ", %un: Tensor[(15, 6), float32],\n"
    "          %bn: Tensor[(1, 15), float32]) -> " STATE " {\n"
    "  let %h = concatenate((%l.0, %r.0), axis=1);\n"
    "  let %g = split(add(nn.dense(%h, %un), %bn), indices_or_sections=5, axis=1);\n"
    "  let %c = add(add(multiply(sigmoid(%g.0), tanh(%g.4)), multiply(sigmoid(%g.1), %l.1)),\n"
    "               multiply(sigmoid(%g.2), %r.1));\n"
    "  (multiply(sigmoid(%g.3), tanh(%c)), %c)\n"
    "}\n"
    "def @tree(%t: Tree, %wl: Tensor[(9, 4), float32], %bl: Tensor[(1, 9), float32],\n"
    "          %un: Tensor[(15, 6), float32], %bn: Tensor[(1, 15), float32]) -> " STATE " {\n"
    "  match (%t) {\n"
    "    Leaf(%x) => @leaf(%x, %wl, %bl),\n"
    "    Node(%a, %b) => @node(@tree(%a, %wl, %bl, %un, %bn), @tree(%b, %wl, %bl, %un, %bn),\n"
    "                          %un, %bn),\n"
    "  }\n"
    "}\n";

static void treelstm_matches_torch(void **state) {
    (void)state;
    ry_module *m = test_parse(treelstm_src, true);
    ry_ctor *leaf = ry_module_find_ctor(m, "Leaf"), *node = ry_module_find_ctor(m, "Node");
    ry_tensor *xs = test_npy("tests/interp/treelstm/leaves.npy");
    ry_value *lv[5];
    for (int i = 0; i < 5; i++) lv[i] = ry_value_adt(leaf, 1, (ry_value *[]){row(xs, i)});
    ry_value *n01 = ry_value_adt(node, 2, (ry_value *[]){lv[0], lv[1]});
    ry_value *n34 = ry_value_adt(node, 2, (ry_value *[]){lv[3], lv[4]});
    ry_value *n234 = ry_value_adt(node, 2, (ry_value *[]){lv[2], n34});
    ry_value *t = ry_value_adt(node, 2, (ry_value *[]){n01, n234});
    ry_value *args[5] = {t, npy_value("tests/interp/treelstm/wl.npy"),
                         npy_value("tests/interp/treelstm/bl.npy"),
                         npy_value("tests/interp/treelstm/un.npy"),
                         npy_value("tests/interp/treelstm/bn.npy")};
    ry_value *r = call_ok(m, "tree", 5, args);
    ry_tensor *h = test_npy("tests/interp/treelstm/h.npy"), *c = test_npy("tests/interp/treelstm/c.npy");
    test_assert_close(field(r, 0)->tensor, h, 1e-5, 1e-6);
    test_assert_close(field(r, 1)->tensor, c, 1e-5, 1e-6);
    ry_tensor_release(h);
    ry_tensor_release(c);
    ry_tensor_release(xs);
    ry_value_release(r);
    for (int i = 0; i < 5; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

/* ---- run-time errors: located, and nothing leaks ---- */

static const char *shape_src =
    "#[version = \"0.0.5\"]\n"
    "def @f(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] { %x }\n"
    "def @main(%y: Tensor[(?, 3), float32]) -> Tensor[(2, 3), float32] {\n"
    "  @f(%y)\n"
    "}\n"
    "def @g(%a: Tensor[(n, 3), float32], %b: Tensor[(n, 3), float32]) -> Tensor[(n, 3), float32] {\n"
    "  add(%a, %b)\n"
    "}\n";

static ry_value *zeros2(int64_t r, int64_t c) {
    int64_t shape[2] = {r, c};
    return ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 2, shape));
}

static void any_shape_mismatch_is_located(void **state) {
    (void)state;
    ry_module *m = test_parse(shape_src, true);
    ry_value *ok = zeros2(2, 3), *bad = zeros2(4, 3);
    ry_value *r = call_ok(m, "main", 1, &ok);
    assert_int_equal(r->tensor->shape[0], 2);
    ry_value_release(r);
    ry_error err = call_err(m, "main", 1, &bad);
    assert_non_null(strstr(err.msg, "%x"));
    assert_non_null(strstr(err.msg, "float32[4, 3]"));
    assert_int_equal(err.line, 4);
    assert_int_equal(err.col, 3);
    /* Symbolic dimensions bind once per call. */
    ry_value *two[2] = {ok, ry_value_retain(ok)};
    r = call_ok(m, "g", 2, two);
    assert_int_equal(r->tensor->shape[0], 2);
    ry_value_release(r);
    ry_value_release(two[1]);
    ry_value *mixed[2] = {ok, bad};
    err = call_err(m, "g", 2, mixed);
    assert_non_null(strstr(err.msg, "%b"));
    assert_non_null(strstr(err.msg, "n is 2 from parameter %a but 4"));
    assert_int_equal(err.line, 6); /* the entry's parameter */
    ry_value_release(ok);
    ry_value_release(bad);
    ry_module_free(m);
}

/* An error deep inside recursion, with closures, refs and partial results
 * live on the heap stacks, frees them all (ASan and valgrind check). */
static const char *deep_err_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @last_but(%l: List[float32], %r: ref(float32)) -> float32 {\n"
    "  let %k = fn (%x: float32) -> float32 { add(%x, ref_read(%r)) };\n"
    "  match? (%l) {\n"
    "    Cons(%h, Cons(%i, %t)) => add(%k(%h), @last_but(Cons(%i, %t), %r)),\n"
    "  }\n"
    "}\n"
    "def @main(%l: List[float32]) -> float32 { @last_but(%l, ref(1f)) }\n";

static void error_deep_in_recursion_frees_everything(void **state) {
    (void)state;
    ry_module *m = test_parse(deep_err_src, true);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int i = 0; i < 3000; i++) l = ry_value_adt(cons, 2, (ry_value *[]){f32(i), l});
    ry_error err = call_err(m, "main", 1, &l);
    assert_string_equal(err.msg, "match failed: no clause matches Cons");
    assert_int_equal(err.line, line_of(deep_err_src, "match?"));
    ry_value_release(l);
    ry_module_free(m);
}

/* Every allocation failing in turn: the call either succeeds with the
 * right value or fails cleanly; never a crash or a leak. */
static void out_of_memory_anywhere(void **state) {
    (void)state;
    ry_module *m = test_parse(hof_src, true);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons"), *nil = ry_module_find_ctor(m, "Nil");
    ry_value *l = ry_value_adt(nil, 0, NULL);
    for (int i = 3; i >= 1; i--) l = ry_value_adt(cons, 2, (ry_value *[]){f32(i), l});
    int failures = 0;
    for (long k = 0;; k++) {
        ry_value *out = NULL;
        ry_error err;
        ry_alloc_fail_after(k);
        ry_status st = ry_interp_call(m, "main", 1, &l, NULL, &out, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            assert_true(num(field(out, 1)) == 48);
            ry_value_release(out);
            break;
        }
        assert_null(out);
        failures++;
    }
    assert_true(failures > 20);
    ry_value_release(l);
    ry_module_free(m);
}

/* Operator errors at run time: a relation that fails on the concrete
 * shapes (an Any dimension), and a kernel error (integer division by
 * zero), both located at the call. */
static const char *op_err_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%a: Tensor[(?, 3), float32], %b: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {\n"
    "  add(%a, %b)\n"
    "}\n"
    "def @ratio(%x: int32, %y: int32) -> int32 {\n"
    "  let %f = fn (%d: int32) -> int32 { divide(%x, %d) };\n"
    "  add(%f(%y), 1)\n"
    "}\n";

static void operator_errors_are_located(void **state) {
    (void)state;
    ry_module *m = test_parse(op_err_src, true);
    ry_value *ab[2] = {zeros2(4, 3), zeros2(2, 3)};
    ry_error err = call_err(m, "main", 2, ab);
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 3);
    assert_non_null(strstr(err.msg, "add"));
    ry_value_release(ab[0]);
    ry_value_release(ab[1]);
    ry_value *xy[2] = {i32(7), i32(2)};
    ry_value *r = call_ok(m, "ratio", 2, xy);
    assert_true(num(r) == 4);
    ry_value_release(r);
    ry_value_release(xy[1]);
    xy[1] = i32(0);
    err = call_err(m, "ratio", 2, xy);
    assert_int_equal(err.line, line_of(op_err_src, "divide("));
    assert_int_equal(err.col, (int)(strstr(op_err_src, "divide(") - strstr(op_err_src, "  let %f")) + 1);
    assert_non_null(strstr(err.msg, "divide"));
    ry_value_release(xy[0]);
    ry_value_release(xy[1]);
    ry_module_free(m);
}

/* nn.dropout sees opts->training and a random state seeded by opts->seed:
 * identity at inference, the same mask for the same seed, and a state
 * that advances between calls within one run. */
static const char *dropout_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(256), float32]) -> (Tensor[(256), float32], Tensor[(256), float32]) {\n"
    "  %0 = nn.dropout(%x, rate=0.5f);\n"
    "  %1 = nn.dropout(%x, rate=0.5f);\n"
    "  (%0.0, %1.0)\n"
    "}\n";

static ry_value *run_opts(ry_module *m, ry_value *x, const ry_interp_opts *o) {
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, "main", 1, &x, o, &out, &err)) fail_msg("%s", err.msg);
    return out;
}

static void dropout_follows_training_and_seed(void **state) {
    (void)state;
    ry_module *m = test_parse(dropout_src, true);
    int64_t n = 256;
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, &n);
    for (int i = 0; i < n; i++) ry_tensor_set(t, i, i + 1);
    ry_value *x = ry_value_tensor(t);
    ry_interp_opts infer = {.training = false, .seed = 7};
    ry_interp_opts train7 = {.training = true, .seed = 7}, train8 = {.training = true, .seed = 8};
    ry_value *a = run_opts(m, x, &infer), *b = run_opts(m, x, &train7), *c = run_opts(m, x, &train7),
             *d = run_opts(m, x, &train8);
    test_assert_close(field(a, 0)->tensor, t, 0, 0);
    test_assert_close(field(b, 0)->tensor, field(c, 0)->tensor, 0, 0);
    test_assert_close(field(b, 1)->tensor, field(c, 1)->tensor, 0, 0);
    int kept = 0, diff_calls = 0, diff_seeds = 0;
    for (int i = 0; i < n; i++) {
        double y = ry_tensor_get(field(b, 0)->tensor, i);
        assert_true(y == 0 || y == 2 * (i + 1));
        kept += y != 0;
        diff_calls += y != ry_tensor_get(field(b, 1)->tensor, i);
        diff_seeds += y != ry_tensor_get(field(d, 0)->tensor, i);
    }
    assert_true(kept > 64 && kept < 192);
    assert_true(diff_calls > 0);
    assert_true(diff_seeds > 0);
    ry_value_release(a);
    ry_value_release(b);
    ry_value_release(c);
    ry_value_release(d);
    ry_value_release(x);
    ry_module_free(m);
}

/* Programs the type checker would reject, run unchecked: every kind
 * error is a located run-time error, never a crash. */
static const char *unchecked_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @call_tensor(%x: float32) { %x(1f) }\n"
    "def @proj(%x: float32) { %x.0 }\n"
    "def @proj_range() { (1f, 2f).2 }\n"
    "def @if_float(%x: float32) { if (%x) { 1f } else { 2f } }\n"
    "def @read(%x: float32) { ref_read(%x) }\n"
    "def @write(%x: float32) { ref_write(%x, 1f) }\n"
    "def @op_adt() { add(Nil, 1f) }\n"
    "def @arity() { let %f = fn (%a: float32) { %a }; %f(1f, 2f) }\n"
    "def @ctor_arity() { let %c = Cons; %c(1f) }\n"
    "def @op_value() { let %f = add; %f(1f, 2f) }\n";

static void kind_errors_unchecked(void **state) {
    (void)state;
    ry_module *m = test_parse(unchecked_src, false);
    struct {
        const char *entry, *msg;
    } cases[] = {
        {"call_tensor", "cannot call a tensor"},
        {"proj", "projection .0 of a tensor, not a tuple"},
        {"proj_range", "tuple index 2 out of range for a 2-tuple"},
        {"if_float", "if: condition must be a bool scalar, not float32[]"},
        {"read", "ref_read of a tensor, not a reference"},
        {"write", "ref_write to a tensor, not a reference"},
        {"op_adt", "operator add: argument 1 is a constructor value, not a tensor"},
        {"arity", "function takes 1 arguments, not 2"},
        {"ctor_arity", "constructor Cons takes 2 arguments, not 1"},
        {"op_value", "operator add can only be called, not used as a value"},
    };
    ry_value *x = f32(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ry_global *g = ry_module_find_global(m, cases[i].entry);
        int nargs = g->func->func.nparams;
        ry_error err = call_err(m, cases[i].entry, nargs, &x);
        assert_string_equal(err.msg, cases[i].msg);
        char def[64];
        snprintf(def, sizeof def, "def @%s(", cases[i].entry);
        assert_int_equal(err.line, line_of(unchecked_src, def));
        assert_true(err.col > 1);
    }
    ry_value_release(x);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(if_else_branches),
        cmocka_unit_test(shared_node_evaluated_once),
        cmocka_unit_test(closures_and_higher_order),
        cmocka_unit_test(closure_returned_and_applied),
        cmocka_unit_test(adts_and_nested_patterns),
        cmocka_unit_test(failed_match_is_located),
        cmocka_unit_test(refs_are_mutable_cells),
        cmocka_unit_test(factorial_and_mutual_recursion),
        cmocka_unit_test(deep_non_tail_recursion),
        cmocka_unit_test(deep_list_copy),
        cmocka_unit_test(tuples_and_projections),
        cmocka_unit_test(mlp_forward_matches_torch),
        cmocka_unit_test(lstm_over_list_matches_torch),
        cmocka_unit_test(treelstm_matches_torch),
        cmocka_unit_test(any_shape_mismatch_is_located),
        cmocka_unit_test(error_deep_in_recursion_frees_everything),
        cmocka_unit_test(out_of_memory_anywhere),
        cmocka_unit_test(operator_errors_are_located),
        cmocka_unit_test(dropout_follows_training_and_seed),
        cmocka_unit_test(kind_errors_unchecked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
