/*
 * test_vm.c: the compiled engine (include/relayc/vm.h) against the
 * reference interpreter. Every program under tests/run/ (with its inputs
 * and expected outputs) and every corpus program whose @main takes static
 * tensors (random inputs) gives bitwise the results ry_interp_call gives;
 * so do the gradient programs ry_grad makes of mlp, treelstm and lstm_list,
 * before and after ry_optimize. Closures, refs, ADTs, deep recursion and
 * located run-time errors are checked on small programs. The last case
 * times a training step of models/mlp.relay and models/treelstm.relay on
 * both engines (printed, never asserted).
 */
#include <dirent.h>
#include <stdlib.h>
#include <time.h>

#include "test_programs.h"
#include "test_texts.h"
#include "test_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"
#include "runtime/vm_impl.h"

/* ---- comparing the two engines ---- */

/* Bitwise equality of values: same structure, tensors with the same
 * dtype, shape and bytes; closures by their function and arity. */
static void assert_same(const ry_value *a, const ry_value *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->kind, b->kind);
    switch (a->kind) {
    case RY_VAL_TENSOR: {
        char sa[64], sb[64];
        if (a->tensor->dtype != b->tensor->dtype || !ry_tensor_same_shape(a->tensor, b->tensor))
            fail_msg("vm gives %s, interpreter %s", ry_tensor_describe(a->tensor, sa, sizeof sa),
                     ry_tensor_describe(b->tensor, sb, sizeof sb));
        for (int64_t i = 0; i < a->tensor->size; i++) {
            size_t w = ry_dtype_size(a->tensor->dtype);
            if (memcmp((char *)a->tensor->data + i * w, (char *)b->tensor->data + i * w, w) != 0)
                fail_msg("element %lld: vm %.9g, interpreter %.9g", (long long)i,
                         ry_tensor_get(a->tensor, i), ry_tensor_get(b->tensor, i));
        }
        return;
    }
    case RY_VAL_TUPLE:
        assert_int_equal(a->tuple.n, b->tuple.n);
        for (int i = 0; i < a->tuple.n; i++) assert_same(a->tuple.fields[i], b->tuple.fields[i]);
        return;
    case RY_VAL_ADT:
        assert_string_equal(a->adt.ctor->name, b->adt.ctor->name);
        assert_int_equal(a->adt.n, b->adt.n);
        for (int i = 0; i < a->adt.n; i++) assert_same(a->adt.fields[i], b->adt.fields[i]);
        return;
    case RY_VAL_REF: assert_same(a->ref.value, b->ref.value); return;
    case RY_VAL_CLOSURE: assert_true((a->closure.ctor != NULL) == (b->closure.ctor != NULL)); return;
    case RY_VAL_ROWS: fail_msg("a row-sparse value without sparse_rows"); return;
    }
}

static ry_vm_program *compile_ok(ry_module *m) {
    ry_vm_program *p = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_vm_compile(m, NULL, &p, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("vm compile failed: %s", err.msg);
    }
    return p;
}

/* Runs entry on both engines; both must succeed with the same value. Returns
 * the VM's (a new reference). */
static ry_value *both_ok_p(ry_module *m, ry_vm_program *p, const char *entry, int nargs,
                           ry_value **args) {
    ry_value *iv = NULL, *vv = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_interp_call(m, entry, nargs, args, NULL, &iv, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("interpreter: %s", err.msg);
    }
    if (ry_vm_call(p, entry, nargs, args, NULL, &vv, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("vm: %s", err.msg);
    }
    assert_same(vv, iv);
    ry_value_release(iv);
    return vv;
}

static ry_value *both_ok(ry_module *m, const char *entry, int nargs, ry_value **args) {
    ry_vm_program *p = compile_ok(m);
    ry_value *v = both_ok_p(m, p, entry, nargs, args);
    ry_vm_free(p);
    return v;
}

/* Both engines fail, with the same message at the same place. */
static ry_error both_err(ry_module *m, const char *entry, int nargs, ry_value **args,
                         const ry_vm_opts *vo, const ry_interp_opts *io) {
    ry_value *iv = NULL, *vv = NULL;
    ry_error ie, ve;
    memset(&ie, 0, sizeof ie);
    memset(&ve, 0, sizeof ve);
    ry_vm_program *p = compile_ok(m);
    assert_int_equal(ry_interp_call(m, entry, nargs, args, io, &iv, &ie), RY_ERR);
    assert_int_equal(ry_vm_call(p, entry, nargs, args, vo, &vv, &ve), RY_ERR);
    assert_null(iv);
    assert_null(vv);
    assert_int_equal(ve.line, ie.line);
    if (strstr(ie.msg, "stack overflow")) {
        /* each names its own options; the interpreter's extra frames
         * (per subexpression) may overflow at another column */
        assert_non_null(strstr(ve.msg, "stack overflow"));
    } else {
        assert_string_equal(ve.msg, ie.msg);
        assert_int_equal(ve.col, ie.col);
    }
    ry_vm_free(p);
    return ve;
}

static ry_module *load(const char *path) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        fail_msg("cannot load %s: %s", path, err.msg);
    }
    return m;
}

/* ---- tests/run: committed inputs and expected outputs ---- */

/* Binds @main's parameters to DIR/in_<name>.npy; returns the count. */
static int bind_inputs(ry_module *m, const char *dir, ry_value **args, int max) {
    const ry_global *g = ry_module_find_global(m, "main");
    assert_non_null(g);
    int n = g->func->func.nparams;
    assert_true(n <= max);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/in_%s.npy", dir, g->func->func.params[i]->name);
        args[i] = ry_value_tensor(test_npy(path));
    }
    return n;
}

static void expect_outputs(const ry_value *v, const char *dir) {
    ry_tensor *ts[64];
    int n = ry_value_flatten(v, ts, 64);
    assert_true(n > 0 && n <= 64);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/out_%d.npy", dir, i);
        ry_tensor *want = test_npy(path);
        test_assert_close(ts[i], want, 1e-5, 1e-6);
        ry_tensor_release(want);
    }
}

static void run_programs_match(void **state) {
    (void)state;
    char names[64][128];
    int n = test_relay_files("tests/run", names, 64);
    assert_true(n >= 8);
    for (int k = 0; k < n; k++) {
        char path[512], dir[512];
        snprintf(path, sizeof path, "tests/run/%s.relay", names[k]);
        snprintf(dir, sizeof dir, "tests/run/%s", names[k]);
        ry_module *m = load(path);
        ry_value *args[32];
        int na = bind_inputs(m, dir, args, 32);
        ry_value *v = both_ok(m, "main", na, args);
        expect_outputs(v, dir);
        ry_value_release(v);
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
    }
}

/* ---- the corpus, with random inputs ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;


static void corpus_programs_match(void **state) {
    (void)state;
    char names[64][128];
    int n = test_relay_files("tests/corpus", names, 64), ran = 0, grads = 0;
    for (int k = 0; k < n; k++) {
        char path[512];
        snprintf(path, sizeof path, "tests/corpus/%s.relay", names[k]);
        ry_module *m = load(path);
        ry_value *args[32];
        int na = test_main_args(m, &rng_state, args, 32);
        bool ok = na >= 0;
        if (!ok) na = 0;
        if (ok) {
            ry_value *iv = NULL;
            ry_error ie;
            if (ry_interp_call(m, "main", na, args, NULL, &iv, &ie) == RY_OK) {
                ry_value_release(iv);
                ry_value_release(both_ok(m, "main", na, args));
                /* and its gradient program, where the transform applies */
                const char *gname = NULL;
                if (ry_grad(m, "main", NULL, NULL, &gname, &ie) == RY_OK) {
                    ry_value_release(both_ok(m, gname, na, args));
                    grads++;
                    if (ry_optimize(m, 2, &ie) != RY_OK) fail_msg("optimize %s: %s", path, ie.msg);
                    ry_value_release(both_ok(m, gname, na, args));
                }
            } else {
                both_err(m, "main", na, args, NULL, NULL);
            }
            ran++;
        }
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
    }
    print_message("corpus: %d of %d programs have a @main we can feed, and match; "
                  "so do %d gradient programs, before and after ry_optimize\n", ran, n, grads);
    assert_true(ran >= 20);
    assert_true(grads >= 10);
}

/* ---- gradient programs ---- */

static void grad_programs_match(void **state) {
    (void)state;
    const char *names[] = {"mlp", "treelstm", "lstm_list"};
    for (int k = 0; k < 3; k++) {
        char path[512], dir[512];
        snprintf(path, sizeof path, "tests/run/%s.relay", names[k]);
        snprintf(dir, sizeof dir, "tests/run/%s", names[k]);
        ry_module *m = load(path);
        ry_value *args[32];
        int na = bind_inputs(m, dir, args, 32);
        const char *gname = NULL;
        ry_error err;
        memset(&err, 0, sizeof err);
        ry_vm_program *p0 = compile_ok(m);
        if (ry_grad(m, "main", NULL, NULL, &gname, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("grad of %s: %s", names[k], err.msg);
        }
        /* a program compiled before the module grew knows only the old
         * globals, and still runs them */
        ry_value *old = NULL;
        assert_int_equal(ry_vm_call(p0, gname, na, args, NULL, &old, &err), RY_ERR);
        assert_non_null(strstr(err.msg, "no global function"));
        ry_value_release(both_ok_p(m, p0, "main", na, args));
        ry_vm_free(p0);
        ry_value *before = both_ok(m, gname, na, args);
        if (ry_optimize(m, 2, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("optimize %s: %s", names[k], err.msg);
        }
        ry_vm_program *p = compile_ok(m);
        ry_value *after = both_ok_p(m, p, gname, na, args);
        /* the compiled program is reused across calls (a training step each) */
        ry_value *again = both_ok_p(m, p, gname, na, args);
        assert_same(again, after);
        /* optimization keeps the values (not necessarily the bits) */
        ry_tensor *tb[64], *ta[64];
        int nb = ry_value_flatten(before, tb, 64), nta = ry_value_flatten(after, ta, 64);
        assert_int_equal(nb, nta);
        for (int i = 0; i < nb; i++) test_assert_close(ta[i], tb[i], 1e-5, 1e-6);
        ry_value_release(before);
        ry_value_release(after);
        ry_value_release(again);
        ry_vm_free(p);
        for (int i = 0; i < na; i++) ry_value_release(args[i]);
        ry_module_free(m);
    }
}

/* ---- the language, on small programs ---- */

#define LIST_TYPE "type List[A] { Cons(A, List[A]), Nil }\n"

static ry_value *f32(double x) { return ry_value_tensor(ry_tensor_scalar(RY_FLOAT32, x)); }
static ry_value *i64(double x) { return ry_value_tensor(ry_tensor_scalar(RY_INT64, x)); }

static double num(const ry_value *v) {
    assert_int_equal(v->kind, RY_VAL_TENSOR);
    assert_int_equal(v->tensor->size, 1);
    return ry_tensor_get(v->tensor, 0);
}

static int line_of(const char *src, const char *needle) {
    const char *at = strstr(src, needle);
    assert_non_null(at);
    int line = 1;
    for (const char *s = src; s < at; s++) line += *s == '\n';
    return line;
}

static const char *closures_src = TEST_CLOSURES_TEXT;

static void closures_and_recursive_lets(void **state) {
    (void)state;
    ry_module *m = test_parse(closures_src, true);
    ry_value *args[2] = {f32(1.5), f32(2)};
    ry_value *v = both_ok(m, "main", 2, args);
    assert_int_equal(v->tuple.fields[0]->kind, RY_VAL_ADT);
    assert_true(num(v->tuple.fields[0]->adt.fields[0]) == 3.5);
    assert_true(num(v->tuple.fields[1]) == 1.5 + 4 + 120);
    ry_value_release(v);
    /* a closure the VM returns runs in the interpreter and in the VM */
    ry_value *k = f32(10);
    ry_value *clo = both_ok(m, "adder", 1, &k);
    assert_int_equal(clo->kind, RY_VAL_CLOSURE);
    ry_vm_program *p = compile_ok(m);
    ry_value *r1 = NULL, *r2 = NULL;
    ry_error err;
    assert_int_equal(ry_interp_apply(m, clo, 1, &args[0], NULL, &r1, &err), RY_OK);
    assert_int_equal(ry_vm_apply(p, clo, 1, &args[0], NULL, &r2, &err), RY_OK);
    assert_true(num(r1) == 11.5);
    assert_same(r2, r1);
    ry_value_release(r1);
    ry_value_release(r2);
    ry_value_release(clo);
    ry_value_release(k);
    ry_vm_free(p);
    for (int i = 0; i < 2; i++) ry_value_release(args[i]);
    ry_module_free(m);
}

static const char *refs_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: float32) -> (float32, float32) {\n"
    "  let %r = ref(%x);\n"
    "  let %inc = fn (%d: float32) { ref_write(%r, add(ref_read(%r), %d)) };\n"
    "  let %u = %inc(1f);\n"
    "  let %v = %inc(%x);\n"
    "  let %c = ref(%inc);\n"
    "  let %w = ref_read(%c)(2f);\n"
    "  (ref_read(%r), %x)\n"
    "}\n";

static void refs_are_cells(void **state) {
    (void)state;
    ry_module *m = test_parse(refs_src, true);
    ry_value *x = f32(3);
    ry_value *v = both_ok(m, "main", 1, &x);
    assert_true(num(v->tuple.fields[0]) == 3 + 1 + 3 + 2);
    assert_true(num(v->tuple.fields[1]) == 3);
    ry_value_release(v);
    ry_value_release(x);
    ry_module_free(m);
}

static const char *adt_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "type Tree { Leaf(float32), Node(Tree, Tree) }\n"
    "def @sum(%t: Tree) -> float32 {\n"
    "  match (%t) {\n"
    "    Node(Leaf(%a), Leaf(%b)) => add(%a, %b),\n"
    "    Node(%l, %r) => add(@sum(%l), @sum(%r)),\n"
    "    Leaf(%x) => %x,\n"
    "  }\n"
    "}\n"
    "def @pairs(%l: List[(float32, float32)]) -> float32 {\n"
    "  match (%l) {\n"
    "    Cons((%a, _), Cons((_, %d), _)) => subtract(%a, %d),\n"
    "    Cons((%a, %b), Nil) => multiply(%a, %b),\n"
    "    _ => 0f,\n"
    "  }\n"
    "}\n"
    "def @main(%x: float32) -> (float32, float32, float32, float32) {\n"
    "  let %t = Node(Node(Leaf(%x), Leaf(2f)), Node(Leaf(3f), Node(Leaf(4f), Leaf(5f))));\n"
    "  let %p = Cons((%x, 7f), Nil);\n"
    "  let %q = Cons((%x, 7f), Cons((8f, 9f), Nil));\n"
    "  (@sum(%t), @pairs(%p), @pairs(%q), @pairs(Nil))\n"
    "}\n";

static void adts_and_nested_patterns(void **state) {
    (void)state;
    ry_module *m = test_parse(adt_src, true);
    ry_value *x = f32(1);
    ry_value *v = both_ok(m, "main", 1, &x);
    assert_true(num(v->tuple.fields[0]) == 15);
    assert_true(num(v->tuple.fields[1]) == 7);
    assert_true(num(v->tuple.fields[2]) == 1 - 9);
    assert_true(num(v->tuple.fields[3]) == 0);
    ry_value_release(v);
    ry_value_release(x);
    ry_module_free(m);
}

static const char *match_fail_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @head(%l: List[float32]) -> float32 {\n"
    "  match? (%l) { Cons(%h, _) => %h }\n"
    "}\n"
    "def @main(%x: float32) -> float32 { add(@head(Cons(%x, Nil)), @head(Nil)) }\n";

static void failed_match_is_located(void **state) {
    (void)state;
    ry_module *m = test_parse(match_fail_src, true);
    ry_value *x = f32(1);
    ry_error err = both_err(m, "main", 1, &x, NULL, NULL);
    assert_non_null(strstr(err.msg, "match failed: no clause matches Nil"));
    assert_int_equal(err.line, line_of(match_fail_src, "match?"));
    ry_value_release(x);
    ry_module_free(m);
}

static const char *rec_src =
    "#[version = \"0.0.5\"]\n" LIST_TYPE
    "def @sumto(%n: int64) -> int64 {\n"
    "  if (%n == 0i64) { 0i64 } else { add(%n, @sumto(subtract(%n, 1i64))) }\n"
    "}\n"
    "def @loop(%n: int64, %acc: int64) -> int64 {\n"
    "  if (%n == 0i64) { %acc } else { @loop(subtract(%n, 1i64), add(%acc, %n)) }\n"
    "}\n"
    "def @build(%n: int64) -> List[int64] {\n"
    "  if (%n == 0i64) { Nil } else { Cons(%n, @build(subtract(%n, 1i64))) }\n"
    "}\n"
    "def @len(%l: List[int64]) -> int64 {\n"
    "  match (%l) { Cons(_, %t) => add(@len(%t), 1i64), Nil => 0i64 }\n"
    "}\n"
    "def @main(%n: int64) -> (int64, int64, int64) {\n"
    "  (@sumto(%n), @loop(%n, 0i64), @len(@build(%n)))\n"
    "}\n";

static void deep_recursion(void **state) {
    (void)state;
    ry_module *m = test_parse(rec_src, true);
    ry_vm_program *p = compile_ok(m);
    long depths[2] = {100000, 1000000};
    for (int i = 0; i < 2; i++) {
        ry_value *n = i64((double)depths[i]), *v = NULL;
        ry_error err;
        assert_int_equal(ry_vm_call(p, "main", 1, &n, NULL, &v, &err), RY_OK);
        int64_t want = depths[i] * (depths[i] + 1) / 2;
        assert_true(((int64_t *)v->tuple.fields[0]->tensor->data)[0] == want);
        assert_true(((int64_t *)v->tuple.fields[1]->tensor->data)[0] == want);
        assert_true(((int64_t *)v->tuple.fields[2]->tensor->data)[0] == depths[i]);
        ry_value_release(v);
        ry_value_release(n);
    }
    /* the interpreter agrees at 100,000 */
    ry_value *n = i64(100000);
    ry_value_release(both_ok_p(m, p, "main", 1, &n));
    ry_value_release(n);
    /* bounded: a clear error at the recursive call; tail calls run in
     * constant frames */
    n = i64(5000);
    ry_vm_opts vo = {.max_depth = 2000};
    ry_interp_opts io = {.max_depth = 2000};
    ry_error err = both_err(m, "sumto", 1, &n, &vo, &io);
    assert_non_null(strstr(err.msg, "stack overflow"));
    assert_int_equal(err.line, line_of(rec_src, "@sumto(subtract"));
    assert_int_equal(err.col, (int)(strstr(rec_src, "@sumto(subtract") -
                                    strstr(rec_src, "  if (%n == 0i64) { 0i64 } else { add(%n, @sumto")) + 1);
    ry_value *two[2] = {n, i64(0)}, *v = NULL;
    assert_int_equal(ry_vm_call(p, "loop", 2, two, &vo, &v, &err), RY_OK);
    assert_true(num(v) == 5000.0 * 5001 / 2);
    ry_value_release(v);
    ry_value_release(two[1]);
    ry_value_release(n);
    ry_vm_free(p);
    ry_module_free(m);
}

static const char *shape_src =
    "#[version = \"0.0.5\"]\n"
    "def @f(%x: Tensor[(?, 3), float32], %y: Tensor[(2, 3), float32]) { add(%x, %y) }\n"
    "def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(2, 3), float32]) {\n"
    "  %0 = @f(%x, %y);\n"
    "  nn.relu(%0)\n"
    "}\n"
    "def @g(%a: Tensor[(n, 3), float32], %b: Tensor[(n, 3), float32]) { add(%a, %b) }\n"
    "def @h(%a: Tensor[(?, 3), float32]) { @g(%a, %a) }\n"
    "def @k(%a: Tensor[(?, 3), float32], %b: Tensor[(?, 3), float32]) { @g(%a, %b) }\n";

static ry_value *zeros2(int64_t a, int64_t b) {
    int64_t s[2] = {a, b};
    return ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 2, s));
}

static void shape_errors_are_located(void **state) {
    (void)state;
    ry_module *m = test_parse(shape_src, true);
    ry_value *ok = zeros2(2, 3), *bad = zeros2(4, 3), *y = zeros2(2, 3);
    ry_value *a1[2] = {ok, y}, *a2[2] = {bad, y};
    ry_value_release(both_ok(m, "main", 2, a1));
    /* a kernel's own error (add cannot broadcast 4 with 2) at the add */
    ry_error err = both_err(m, "main", 2, a2, NULL, NULL);
    assert_int_equal(err.line, 2);
    /* the entry's parameter check */
    ry_value *a3[2] = {y, bad};
    err = both_err(m, "main", 2, a3, NULL, NULL);
    assert_non_null(strstr(err.msg, "%y"));
    assert_non_null(strstr(err.msg, "float32[4, 3]"));
    /* a symbolic dim inside the program: checked at the call */
    ry_value_release(both_ok(m, "h", 1, &bad));
    ry_value *a4[2] = {ok, bad};
    err = both_err(m, "k", 2, a4, NULL, NULL);
    assert_non_null(strstr(err.msg, "n is 2 from parameter %a but 4"));
    assert_int_equal(err.line, 9);
    ry_value_release(ok);
    ry_value_release(bad);
    ry_value_release(y);
    ry_module_free(m);
}

/* Errors an operator reports on the fast path (compile-time shapes):
 * integer division by zero in a kernel, located at the call. */
static const char *div_src =
    "#[version = \"0.0.5\"]\n"
    "def @ratio(%x: int32, %y: int32) -> int32 {\n"
    "  let %f = fn (%d: int32) -> int32 { divide(%x, %d) };\n"
    "  add(%f(%y), 1)\n"
    "}\n";

static ry_value *i32(double x) { return ry_value_tensor(ry_tensor_scalar(RY_INT32, x)); }

static void kernel_errors_are_located(void **state) {
    (void)state;
    ry_module *m = test_parse(div_src, true);
    ry_vm_program *p = compile_ok(m);
    ry_vm_stats st;
    ry_vm_get_stats(p, &st);
    assert_int_equal(st.nops_static, 2);
    ry_vm_free(p);
    ry_value *xy[2] = {i32(7), i32(2)};
    ry_value *r = both_ok(m, "ratio", 2, xy);
    assert_true(num(r) == 4);
    ry_value_release(r);
    ry_value_release(xy[1]);
    xy[1] = i32(0);
    ry_error err = both_err(m, "ratio", 2, xy, NULL, NULL);
    assert_int_equal(err.line, line_of(div_src, "divide("));
    assert_non_null(strstr(err.msg, "divide"));
    ry_value_release(xy[0]);
    ry_value_release(xy[1]);
    ry_module_free(m);
}

/* nn.dropout: the same seed gives the same masks on both engines (the
 * random state advances in the same order). */
static const char *dropout_src =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(256), float32]) -> (Tensor[(256), float32], Tensor[(256), float32]) {\n"
    "  %0 = nn.dropout(%x, rate=0.5f);\n"
    "  %1 = nn.dropout(%x, rate=0.5f);\n"
    "  (%0.0, %1.0)\n"
    "}\n";

static void dropout_matches_with_seed(void **state) {
    (void)state;
    ry_module *m = test_parse(dropout_src, true);
    int64_t n = 256;
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 1, &n);
    for (int i = 0; i < n; i++) ry_tensor_set(t, i, i + 1);
    ry_value *x = ry_value_tensor(t), *iv = NULL, *vv = NULL;
    ry_vm_program *p = compile_ok(m);
    ry_error err;
    ry_interp_opts io = {.training = true, .seed = 7};
    ry_vm_opts vo = {.training = true, .seed = 7};
    assert_int_equal(ry_interp_call(m, "main", 1, &x, &io, &iv, &err), RY_OK);
    assert_int_equal(ry_vm_call(p, "main", 1, &x, &vo, &vv, &err), RY_OK);
    assert_same(vv, iv);
    int dropped = 0;
    for (int i = 0; i < n; i++) dropped += ry_tensor_get(vv->tuple.fields[0]->tensor, i) == 0;
    assert_true(dropped > 64 && dropped < 192);
    ry_value_release(iv);
    ry_value_release(vv);
    ry_value_release(x);
    ry_vm_free(p);
    ry_module_free(m);
}

/* Programs the type checker would reject still compile and fail at run
 * time, located, with the interpreter's messages: never a crash. */
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
    const char *entries[] = {"call_tensor", "proj", "proj_range", "if_float", "read", "write",
                             "op_adt", "arity", "ctor_arity", "op_value"};
    ry_value *x = f32(1);
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const ry_global *g = ry_module_find_global(m, entries[i]);
        ry_error err = both_err(m, entries[i], g->func->func.nparams, &x, NULL, NULL);
        char def[64];
        snprintf(def, sizeof def, "def @%s(", entries[i]);
        assert_int_equal(err.line, line_of(unchecked_src, def));
        assert_true(err.col > 1);
    }
    ry_value_release(x);
    ry_module_free(m);
}

/* The result allocator keeps large buffers for the next request of the
 * same size, 64-byte aligned; tensors made with it free into it. */
static void result_buffers_are_reused(void **state) {
    (void)state;
    ry_allocator *a = ry_target_cpu()->allocator();
    int64_t big[2] = {512, 512}, small[1] = {16};
    ry_tensor *t = ry_tensor_new_on(a, RY_FLOAT32, 2, big);
    assert_non_null(t);
    assert_true(((uintptr_t)t->data & 63) == 0);
    void *data = t->data;
    ry_tensor_release(t);
    t = ry_tensor_new_on(a, RY_FLOAT32, 2, big);
    assert_ptr_equal(t->data, data);
    ry_tensor *u = ry_tensor_new_on(a, RY_FLOAT32, 2, big); /* the pool is empty now */
    assert_ptr_not_equal(u->data, data);
    ry_tensor *v = ry_tensor_new_on(a, RY_FLOAT32, 1, small);
    assert_true(((uintptr_t)v->data & 63) == 0);
    ry_tensor_release(t);
    ry_tensor_release(u);
    ry_tensor_release(v);
}

/* Operators with static shapes take the compile-time path. */
static void static_shapes_fixed_at_compile_time(void **state) {
    (void)state;
    ry_module *m = load("tests/run/mlp.relay");
    ry_vm_program *p = compile_ok(m);
    ry_vm_stats st;
    ry_vm_get_stats(p, &st);
    assert_int_equal(st.nops, 9);
    assert_int_equal(st.nops_static, 9);
    assert_true(st.ninsns >= 10);
    ry_vm_free(p);
    ry_module_free(m);
    m = test_parse(shape_src, true);
    p = compile_ok(m);
    ry_vm_get_stats(p, &st);
    /* add(?, 2) is (2, 3) statically, so only main's relu is fixed */
    assert_int_equal(st.nops, 3);
    assert_int_equal(st.nops_static, 1);
    ry_vm_free(p);
    ry_module_free(m);
}

/* The profile's text (ry_vm_print_profile), malloc'ed. */
static char *profile_text(const ry_vm_program *p) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ry_vm_print_profile(p, f, 0);
    fclose(f);
    return text;
}

static void run_sum_to(ry_vm_program *p, int times) {
    ry_value *n = i32(5), *out = NULL;
    ry_error err = {0};
    for (int k = 0; k < times; k++) {
        assert_int_equal(ry_vm_call(p, "main", 1, &n, NULL, &out, &err), RY_OK);
        ry_value_release(out);
    }
    ry_value_release(n);
}

/* The profile counts each operator call site's calls (sum_to(5): six
 * comparisons, five casts, subtractions and additions), locates them in
 * the source, starts from zero when turned on again, and counts nothing
 * while off. */
static void profile_counts_calls(void **state) {
    (void)state;
    ry_module *m = load("tests/run/deep_recursion.relay");
    ry_vm_program *p = compile_ok(m);
    char *text = profile_text(p);
    assert_non_null(strstr(text, "no operator calls timed"));
    free(text);
    ry_vm_set_profile(p, true);
    run_sum_to(p, 1);
    text = profile_text(p);
    assert_non_null(strstr(text, "4 call sites (4 shown), 21 calls"));
    assert_non_null(strstr(text, "         6 "));
    assert_non_null(strstr(text, "tests/run/deep_recursion.relay:"));
    assert_non_null(strstr(text, "subtract(%n, 1)"));
    free(text);
    ry_vm_set_profile(p, true);
    run_sum_to(p, 2);
    ry_vm_set_profile(p, false);
    run_sum_to(p, 1);
    text = profile_text(p);
    assert_non_null(strstr(text, "4 call sites (4 shown), 42 calls"));
    assert_non_null(strstr(text, "        12 "));
    free(text);
    ry_vm_free(p);
    ry_module_free(m);
}

/* Every allocation the run makes fails in turn: each failure is an error
 * (never a crash), and ASan/valgrind see nothing leak. */
static void out_of_memory_anywhere(void **state) {
    (void)state;
    const char *srcs[3] = {closures_src, adt_src, refs_src};
    for (int k = 0; k < 3; k++) {
        ry_module *m = test_parse(srcs[k], true);
        ry_vm_program *p = compile_ok(m);
        ry_value *args[2] = {f32(1.5), f32(2)};
        ry_value *want = both_ok_p(m, p, "main", k == 0 ? 2 : 1, args);
        /* a fresh program each time (its first call sets up the machine and
         * the slots), then the warm one (later calls reuse them; a failed
         * call leaves it fit for the next) */
        for (int warm = 0; warm < 2; warm++) {
            int failures = 0;
            for (long n = 0;; n++) {
                ry_value *out = NULL;
                ry_error err;
                ry_vm_program *q = warm ? p : compile_ok(m);
                ry_alloc_fail_after(n);
                ry_status st = ry_vm_call(q, "main", k == 0 ? 2 : 1, args, NULL, &out, &err);
                ry_alloc_fail_after(-1);
                if (!warm) ry_vm_free(q);
                if (st == RY_OK) {
                    assert_same(out, want);
                    ry_value_release(out);
                    break;
                }
                assert_null(out);
                failures++;
            }
            if (!warm) assert_true(failures > 10);
        }
        ry_value_release(want);
        for (int i = 0; i < 2; i++) ry_value_release(args[i]);
        ry_vm_free(p);
        ry_module_free(m);
    }
}

/* ---- gradients reported as they are finished (ry_vm_opts.on_final) ---- */

typedef struct finals {
    int n, field[16];
    ry_tensor *copy[16];
} finals;

static void record_final(void *ctx, int field, const ry_value *v) {
    finals *f = ctx;
    assert_true(f->n < 16);
    assert_int_equal(v->kind, RY_VAL_TENSOR);
    f->field[f->n] = field;
    f->copy[f->n++] = ry_tensor_copy(v->tensor);
}

static ry_value *rand_arg(ry_rng *r, int64_t a, int64_t b) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){a, b});
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, ry_rng_uniform(r) - 0.5);
    return ry_value_tensor(t);
}

/* A two-layer network's optimized gradient program reports every
 * gradient once, the second layer's before the first's (the backward
 * order), each with the bits the returned tuple holds; the entry without
 * that shape (main) and a branching one report nothing. */
static void gradients_reported_when_final(void **state) {
    ry_module *m = test_parse(
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(4, 3), float32], %w1: Tensor[(5, 3), float32], "
        "%w2: Tensor[(2, 5), float32]) -> float32 {\n"
        "  sum(nn.dense(nn.relu(nn.dense(%x, %w1)), %w2))\n"
        "}\n"
        "def @branchy(%x: Tensor[(4, 3), float32], %c: bool) -> (float32, (Tensor[(4, 3), float32],)) {\n"
        "  if (%c) { (sum(%x), (%x,)) } else { (sum(%x), (%x,)) }\n"
        "}\n",
        true);
    const char *gname = NULL;
    ry_error err;
    if (ry_grad(m, "main", NULL, NULL, &gname, &err) || ry_optimize(m, 2, &err))
        fail_msg("%s", err.msg);
    ry_vm_program *p = compile_ok(m);
    ry_rng r;
    ry_rng_seed(&r, 4);
    ry_value *args[3] = {rand_arg(&r, 4, 3), rand_arg(&r, 5, 3), rand_arg(&r, 2, 5)};
    for (int round = 0; round < 2; round++) { /* a program's second call alike */
        finals f = {0};
        ry_vm_opts o = {.on_final = record_final, .final_ctx = &f};
        ry_value *out = NULL;
        if (ry_vm_call(p, gname, 3, args, &o, &out, &err)) fail_msg("%s", err.msg);
        const ry_value *g = out->tuple.fields[1];
        assert_int_equal(f.n, g->tuple.n);
        int at_w1 = -1, at_w2 = -1;
        for (int j = 0; j < f.n; j++) {
            const ry_tensor *want = g->tuple.fields[f.field[j]]->tensor;
            assert_memory_equal(f.copy[j]->data, want->data, ry_tensor_nbytes(want));
            if (f.field[j] == 1) at_w1 = j;
            if (f.field[j] == 2) at_w2 = j;
            for (int k = 0; k < j; k++) assert_int_not_equal(f.field[k], f.field[j]);
            ry_tensor_release(f.copy[j]);
        }
        assert_true(at_w2 >= 0 && at_w1 > at_w2);
        ry_value_release(out);
    }
    finals f = {0};
    ry_vm_opts o = {.on_final = record_final, .final_ctx = &f};
    ry_value *out = NULL;
    if (ry_vm_call(p, "main", 3, args, &o, &out, &err)) fail_msg("%s", err.msg);
    ry_value_release(out);
    ry_value *bargs[2] = {ry_value_retain(args[0]),
                          ry_value_tensor(ry_tensor_scalar(RY_BOOL, 1))};
    if (ry_vm_call(p, "branchy", 2, bargs, &o, &out, &err)) fail_msg("%s", err.msg);
    assert_int_equal(f.n, 0);
    ry_value_release(out);
    for (int i = 0; i < 2; i++) ry_value_release(bargs[i]);
    for (int i = 0; i < 3; i++) ry_value_release(args[i]);
    ry_vm_free(p);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_programs_match),
        cmocka_unit_test(corpus_programs_match),
        cmocka_unit_test(grad_programs_match),
        cmocka_unit_test(closures_and_recursive_lets),
        cmocka_unit_test(refs_are_cells),
        cmocka_unit_test(adts_and_nested_patterns),
        cmocka_unit_test(failed_match_is_located),
        cmocka_unit_test(deep_recursion),
        cmocka_unit_test(shape_errors_are_located),
        cmocka_unit_test(static_shapes_fixed_at_compile_time),
        cmocka_unit_test(kernel_errors_are_located),
        cmocka_unit_test(dropout_matches_with_seed),
        cmocka_unit_test(kind_errors_unchecked),
        cmocka_unit_test(result_buffers_are_reused),
        cmocka_unit_test(out_of_memory_anywhere),
        cmocka_unit_test(profile_counts_calls),
        cmocka_unit_test(gradients_reported_when_final),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
