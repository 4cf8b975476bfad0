/*
 * test_print.c: the text-format printer. print(parse(x)) is a fixed point on
 * the whole corpus; small programs print exactly in TVM's layout (graph
 * bindings, lets, branches, clauses, ADTs); floats print so they read back
 * to the same value; shared nodes are bound once in the scope that holds
 * all their uses; large constants round-trip through #[metadata]; types
 * show after type checking.
 */
#include <dirent.h>
#include <stdlib.h>

#include "test_util.h"

#define V "#[version = \"0.0.5\"]\n"

static ry_module *parse_text(const char *text) {
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse("t.relay", text, strlen(text), &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("parse failed: %s", err.msg);
    }
    return m;
}

/* Parses text, prints it and checks the output is `want` and reparses to
 * the same print. */
static void check_print(const char *text, const char *want) {
    ry_module *m = parse_text(text);
    char *s = ry_module_print(m);
    assert_non_null(s);
    if (strcmp(s, want) != 0) fail_msg("printed:\n%s\nexpected:\n%s", s, want);
    ry_module *m2 = parse_text(s);
    char *s2 = ry_module_print(m2);
    assert_string_equal(s, s2);
    ry_free(s);
    ry_free(s2);
    ry_module_free(m);
    ry_module_free(m2);
}

/* print(parse(f)) parses to the same print, and both have the same
 * definitions. */
static void check_file_fixpoint(const char *path) {
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file(path, &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s does not parse", path);
    }
    char *s1 = ry_module_print(m);
    assert_non_null(s1);
    ry_module *m2 = NULL;
    if (ry_module_parse(path, s1, strlen(s1), &m2, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("the print of %s does not parse:\n%s", path, s1);
    }
    char *s2 = ry_module_print(m2);
    if (strcmp(s1, s2) != 0) fail_msg("%s: not a fixed point:\n%s\n---\n%s", path, s1, s2);
    assert_int_equal(m->nglobals, m2->nglobals);
    assert_int_equal(m->ntypedefs, m2->ntypedefs);
    ry_free(s1);
    ry_free(s2);
    ry_module_free(m);
    ry_module_free(m2);
}

/* Every .relay under dir (recursively). Files of the error corpora
 * (tests/errors*) may fail to parse, on purpose; every other file must
 * parse, and every file that parses must round-trip. Returns the count. */
static int fixpoint_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".relay") != 0) {
            n += fixpoint_tree(path); /* a folder, or nothing for a plain file */
            continue;
        }
        if (strncmp(path, "./tests/errors", 14) == 0) {
            ry_module *m = NULL;
            ry_error err;
            if (ry_module_parse_file(path, &m, &err) != RY_OK) continue;
            ry_module_free(m);
        }
        check_file_fixpoint(path);
        n++;
    }
    closedir(d);
    return n;
}

static void test_repository_fixpoint(void **state) {
    (void)state;
    int n = 0;
    const char *roots[] = {"./models", "./tests", "./bench"};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) n += fixpoint_tree(roots[i]);
    assert_true(n >= 60); /* corpora, models, programs and the TVM-printed modules */
}

static void test_layout_graph_bindings(void **state) {
    (void)state;
    check_print(V "def @main(%x: Tensor[(1, 10), float32], %w: Tensor[(20, 10), float32]) -> Tensor[(1, 20), float32] {\n"
                  "  nn.relu(nn.dense(%x, %w, units=20))\n}\n",
                V "def @main(%x: Tensor[(1, 10), float32], %w: Tensor[(20, 10), float32]) -> Tensor[(1, 20), float32] {\n"
                  "  %0 = nn.dense(%x, %w, units=20);\n"
                  "  nn.relu(%0)\n}\n");
}

/* TVM's parser keeps one %N table for the whole module: numbers go on
 * across definitions, so a second function's %0 is never taken for the
 * first one's. */
static void test_graph_numbers_span_module(void **state) {
    (void)state;
    check_print(V "def @f(%x: float32) -> float32 {\n  exp(%x) * exp(%x)\n}\n\n"
                  "def @main(%y: float32) -> float32 {\n  log(@f(%y)) + @f(%y)\n}\n",
                V "def @f(%x: float32) -> float32 {\n"
                  "  %0 = exp(%x);\n"
                  "  %1 = exp(%x);\n"
                  "  multiply(%0, %1)\n"
                  "}\n\n"
                  "def @main(%y: float32) -> float32 {\n"
                  "  %2 = @f(%y);\n"
                  "  %3 = log(%2);\n"
                  "  %4 = @f(%y);\n"
                  "  add(%3, %4)\n"
                  "}\n");
}

/* Attributes TVM's C++ classes declare without a default must be spelled
 * for TVM's parser; the printer writes relayc's default (None) for them,
 * after the attributes the call gives. */
static void test_required_attrs_spelled(void **state) {
    (void)state;
    check_print(V "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {\n"
                  "  (nn.dense(%x, %w), nn.matmul(%x, %w, transpose_b=True), transpose(%x),"
                  " nn.dense(%x, %w, units=4))\n}\n",
                V "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {\n"
                  "  %0 = nn.dense(%x, %w, units=None);\n"
                  "  %1 = nn.matmul(%x, %w, transpose_b=True, units=None);\n"
                  "  %2 = transpose(%x, axes=None);\n"
                  "  %3 = nn.dense(%x, %w, units=4);\n"
                  "  (%0, %1, %2, %3)\n"
                  "}\n");
    /* TVM's conv2d_backward_weight: its C++ layout defaults are not the op's */
    check_print(V "def @main(%g: Tensor[(1, 8, 4, 4), float32], %x: Tensor[(1, 1, 6, 6), float32]) {\n"
                  "  nn.conv2d_backward_weight(%g, %x, channels=8, kernel_size=[3, 3])\n}\n",
                V "def @main(%g: Tensor[(1, 8, 4, 4), float32], %x: Tensor[(1, 1, 6, 6), float32]) {\n"
                  "  nn.conv2d_backward_weight(%g, %x, channels=8, kernel_size=[3, 3], "
                  "kernel_layout=\"NCHW\", out_layout=\"OIHW\")\n"
                  "}\n");
}

/* --tvm: what TVM 0.19's parser reads. Symbolic dims become `?`, an
 * annotation holding a ref type is dropped, stop_gradient(e) prints as e;
 * each is counted. The default print keeps all three. */
static void test_print_for_tvm(void **state) {
    (void)state;
    const char *text = V "def @main(%x: Tensor[(n, 4), float32], %r: ref(Tensor[(n, 4), float32])) "
                         "-> Tensor[(n, k), float32] {\n"
                         "  let %s: ref(float32) = ref(1f);\n"
                         "  %0 = stop_gradient(%x);\n"
                         "  %1 = ref_read(%r);\n"
                         "  %2 = add(%0, %1);\n"
                         "  %3 = nn.dense(%2, zeros(shape=[6, 4], dtype=\"float32\"), units=None);\n"
                         "  reshape_like(%3, %3)\n"
                         "}\n";
    ry_module *m = parse_text(text);
    ry_print_report rep = {0};
    ry_print_opts o = {.tvm = true, .report = &rep};
    char *s = ry_module_print_ex(m, &o);
    assert_non_null(s);
    assert_string_equal(s, V "def @main(%x: Tensor[(?, 4), float32], %r) -> Tensor[(?, ?), float32] {\n"
                             "  let %s = ref(1f);\n"
                             "  %0 = ref_read(%r);\n"
                             "  %1 = add(%x, %0);\n"
                             "  %2 = zeros(shape=[6, 4], dtype=\"float32\");\n"
                             "  %3 = nn.dense(%1, %2, units=None);\n"
                             "  reshape_like(%3, %3)\n"
                             "}\n");
    assert_int_equal(rep.sym_dims, 3);
    assert_string_equal(rep.sym_names, "n,k");
    assert_int_equal(rep.ref_annots, 2); /* %r's and %s's */
    assert_int_equal(rep.stop_gradients, 1);
    assert_int_equal(rep.unsupported, 0);
    char *plain = ry_module_print(m);
    assert_non_null(strstr(plain, "%r: ref(Tensor[(n, 4), float32])"));
    assert_non_null(strstr(plain, "stop_gradient(%x)"));
    assert_non_null(strstr(plain, "-> Tensor[(n, k), float32]"));
    ry_free(plain);
    ry_free(s);
    ry_module_free(m);
}

/* What `relayc fmt --tvm` and `grad --tvm` print of m (rewritten for TVM
 * first), the rewrite's and the printer's counts in *rep. */
static char *print_localized(ry_module *m, ry_print_report *rep) {
    ry_module_localize_for_tvm(m, rep);
    return ry_module_print_ex(m, &(ry_print_opts){.tvm = true, .report = rep});
}

/* Printing for TVM, which cannot infer a global's ref-typed parameters:
 * such globals become local functions of their callers, callees first
 * (@acc, which recurses, before @twice, which calls it); one nobody calls
 * is left out; two that call each other stay globals (counted). */
static void test_localize_for_tvm(void **state) {
    (void)state;
    const char *text = V "def @acc(%r: ref(float32), %n: int32) -> () {\n"
                         "  if (greater(%n, 0)) {\n"
                         "    let %u = ref_write(%r, add(ref_read(%r), 1f));\n"
                         "    @acc(%r, subtract(%n, 1))\n"
                         "  } else { () }\n"
                         "}\n"
                         "def @twice(%r: ref(float32)) -> () { @acc(%r, 2) }\n"
                         "def @unused(%r: ref(float32)) -> float32 { ref_read(%r) }\n"
                         "def @main(%x: float32) -> float32 {\n"
                         "  let %r = ref(%x);\n"
                         "  let %u = @twice(%r);\n"
                         "  ref_read(%r)\n"
                         "}\n"
                         "def @ping(%r: ref(float32)) -> () { @pong(%r) }\n"
                         "def @pong(%r: ref(float32)) -> () { @ping(%r) }\n";
    ry_module *m = parse_text(text);
    ry_print_report rep = {0};
    ry_module_localize_for_tvm(m, &rep);
    ry_print_opts o = {.tvm = true, .report = &rep};
    char *s = ry_module_print_ex(m, &o);
    assert_non_null(s);
    assert_string_equal(s, V "def @main(%x: float32) -> float32 {\n"
                             "  let %acc = fn (%r, %n: int32) -> () {\n"
                             "    %0 = greater(%n, 0);\n"
                             "    if (%0) {\n"
                             "      %1 = ref_read(%r);\n"
                             "      %2 = add(%1, 1f);\n"
                             "      let %u = ref_write(%r, %2);\n"
                             "      %3 = subtract(%n, 1);\n"
                             "      %acc(%r, %3)\n"
                             "    } else {\n"
                             "      ()\n"
                             "    }\n"
                             "  };\n"
                             "  let %twice = fn (%r1) -> () {\n"
                             "    %acc(%r1, 2)\n"
                             "  };\n"
                             "  let %r2 = ref(%x);\n"
                             "  let %u1 = %twice(%r2);\n"
                             "  ref_read(%r2)\n"
                             "}\n\n"
                             "def @ping(%r) -> () {\n"
                             "  @pong(%r)\n"
                             "}\n\n"
                             "def @pong(%r) -> () {\n"
                             "  @ping(%r)\n"
                             "}\n");
    assert_int_equal(rep.localized, 2);
    assert_int_equal(rep.dropped_globals, 1);
    assert_int_equal(rep.unsupported, 2);
    ry_free(s);
    ry_module_free(m);
    /* a global whose result holds refs goes local too (TVM leaves the
     * cells' contents of a recursive one's result unsolved) */
    m = parse_text(V "def @cell(%x: float32) -> ref(float32) { ref(%x) }\n"
                     "def @main(%x: float32) -> float32 { ref_read(@cell(%x)) }\n");
    memset(&rep, 0, sizeof rep);
    ry_module_localize_for_tvm(m, &rep);
    s = ry_module_print_ex(m, &(ry_print_opts){.tvm = true});
    assert_string_equal(s, V "def @main(%x: float32) -> float32 {\n"
                             "  let %cell = fn (%x1: float32) {\n"
                             "    ref(%x1)\n"
                             "  };\n"
                             "  %0 = %cell(%x);\n"
                             "  ref_read(%0)\n"
                             "}\n");
    assert_int_equal(rep.localized, 1);
    ry_free(s);
    ry_module_free(m);
    /* the rewrite keeps the program's meaning: it still type-checks here */
    m = parse_text(text);
    ry_module_localize_for_tvm(m, NULL);
    char *plain = ry_module_print(m);
    ry_module_free(m);
    m = parse_text(plain);
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    ry_free(plain);
    ry_module_free(m);
}

/* A polymorphic global taking refs, printed as a local function, loses its
 * type parameters and the annotations naming them (TVM would instantiate
 * them at the call before solving the parameters it must infer). */
static void test_localize_polymorphic_for_tvm(void **state) {
    (void)state;
    ry_module *m = parse_text(V "def @app[A](%r: ref(A), %f: fn (A) -> A) -> () {\n"
                                "  let %v: A = ref_read(%r);\n"
                                "  ref_write(%r, %f(%v))\n"
                                "}\n"
                                "def @main(%x: float32) -> float32 {\n"
                                "  let %r = ref(%x);\n"
                                "  let %u = @app(%r, fn (%y: float32) -> float32 { negative(%y) });\n"
                                "  ref_read(%r)\n"
                                "}\n");
    ry_print_report rep = {0};
    char *s = print_localized(m, &rep);
    assert_string_equal(s, V "def @main(%x: float32) -> float32 {\n"
                             "  let %app = fn (%r, %f) -> () {\n"
                             "    let %v = ref_read(%r);\n"
                             "    %0 = %f(%v);\n"
                             "    ref_write(%r, %0)\n"
                             "  };\n"
                             "  let %r1 = ref(%x);\n"
                             "  %1 = fn (%y: float32) -> float32 {\n"
                             "    negative(%y)\n"
                             "  };\n"
                             "  let %u = %app(%r1, %1);\n"
                             "  ref_read(%r1)\n"
                             "}\n");
    assert_int_equal(rep.localized, 1);
    ry_free(s);
    ry_module_free(m);
}

/* TVM's let is monomorphic: a polymorphic global taking refs used at two
 * types (after type checking) prints once per type: @app for int32 (met
 * first, in @main) and @app_1 for float32, which @twice's copy at float32
 * calls twice (a use at a type seen before shares its copy). */
static void test_monomorphize_for_tvm(void **state) {
    (void)state;
    const char *text = V "def @app[A](%r: ref(A), %f: fn (A) -> A) -> () {\n"
                         "  let %v: A = ref_read(%r);\n"
                         "  ref_write(%r, %f(%v))\n"
                         "}\n"
                         "def @twice[B](%r: ref(B), %f: fn (B) -> B) -> () {\n"
                         "  let %u = @app(%r, %f);\n"
                         "  @app(%r, %f)\n"
                         "}\n"
                         "def @main(%x: float32, %n: int32) -> (float32, int32) {\n"
                         "  let %r = ref(%x);\n"
                         "  let %u = @twice(%r, fn (%y: float32) -> float32 { negative(%y) });\n"
                         "  let %s = ref(%n);\n"
                         "  let %w = @app(%s, fn (%k: int32) -> int32 { add(%k, 1) });\n"
                         "  (ref_read(%r), ref_read(%s))\n"
                         "}\n";
    ry_module *m = parse_text(text);
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    ry_print_report rep = {0};
    char *s = print_localized(m, &rep);
    assert_string_equal(s, V "def @main(%x: float32, %n: int32) -> (float32, int32) {\n"
                             "  let %app = fn (%r, %f) -> () {\n"
                             "    let %v = ref_read(%r);\n"
                             "    %0 = %f(%v);\n"
                             "    ref_write(%r, %0)\n"
                             "  };\n"
                             "  let %app_1 = fn (%r1, %f1) -> () {\n"
                             "    let %v1 = ref_read(%r1);\n"
                             "    %1 = %f1(%v1);\n"
                             "    ref_write(%r1, %1)\n"
                             "  };\n"
                             "  let %twice = fn (%r2, %f2) -> () {\n"
                             "    let %u: () = %app_1(%r2, %f2);\n"
                             "    %app_1(%r2, %f2)\n"
                             "  };\n"
                             "  let %r3 = ref(%x);\n"
                             "  %2 = fn (%y: float32) -> float32 {\n"
                             "    negative(%y)\n"
                             "  };\n"
                             "  let %u1: () = %twice(%r3, %2);\n"
                             "  let %s = ref(%n);\n"
                             "  %3 = fn (%k: int32) -> int32 {\n"
                             "    add(%k, 1)\n"
                             "  };\n"
                             "  let %w: () = %app(%s, %3);\n"
                             "  %4 = ref_read(%r3);\n"
                             "  %5 = ref_read(%s);\n"
                             "  (%4, %5)\n"
                             "}\n");
    assert_int_equal(rep.monomorphized, 1);
    assert_int_equal(rep.localized, 3);
    assert_int_equal(rep.unsupported, 0);
    /* what TVM reads, relayc reads and checks too */
    ry_module *back = parse_text(s);
    assert_int_equal(ry_module_typecheck(back, &err), RY_OK);
    ry_module_free(back);
    ry_free(s);
    ry_module_free(m);
    /* a use as a value (not called) takes its type from the checker's
     * instantiation of it */
    m = parse_text(V "def @app[A](%r: ref(A), %f: fn (A) -> A) -> () { ref_write(%r, %f(ref_read(%r))) }\n"
                     "def @main(%x: float32, %n: int32) -> (float32, int32) {\n"
                     "  let %r = ref(%x);\n"
                     "  let %g = @app;\n"
                     "  let %u = %g(%r, fn (%y: float32) -> float32 { negative(%y) });\n"
                     "  let %s = ref(%n);\n"
                     "  let %w = @app(%s, fn (%k: int32) -> int32 { add(%k, 1) });\n"
                     "  (ref_read(%r), ref_read(%s))\n"
                     "}\n");
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    memset(&rep, 0, sizeof rep);
    s = print_localized(m, &rep);
    assert_int_equal(rep.monomorphized, 1);
    assert_non_null(strstr(s, "  let %g = %app;\n"));
    assert_non_null(strstr(s, "  let %w: () = %app_1(%s, "));
    ry_free(s);
    ry_module_free(m);
    /* polymorphic recursion (@p at A calls itself at (A,)) would need
     * copies without end: they stop at 32, the last calling the first, and
     * the cycle stays globals (counted) */
    m = parse_text(V "def @p[A](%r: ref(A), %n: int32) -> () {\n"
                     "  if (greater(%n, 0)) { @p(ref((ref_read(%r),)), subtract(%n, 1)) } else { () }\n"
                     "}\n"
                     "def @main(%x: float32) -> () { @p(ref(%x), 3) }\n");
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    memset(&rep, 0, sizeof rep);
    ry_module_localize_for_tvm(m, &rep);
    assert_int_equal(rep.monomorphized, 31);
    assert_int_equal(rep.unsupported, 1 + 32); /* the cap, and the 32 globals of the cycle */
    assert_int_equal(m->nglobals, 33);
    assert_non_null(ry_module_find_global(m, "p_31"));
    s = ry_module_print_ex(m, &(ry_print_opts){.tvm = true});
    assert_non_null(strstr(s, "def @p_31[A](%r, %n: int32) -> () {"));
    assert_non_null(strstr(s, "    @p(%159, %160)\n")); /* the 32nd copy calls the first */
    ry_free(s);
    ry_module_free(m);
}

/* An ADT whose fields hold refs (TVM's parser cannot write them) prints
 * generic in them, its self-references and the ADTs naming it given the
 * arguments; an annotation naming it is dropped. */
static void test_generic_ref_adts_for_tvm(void **state) {
    (void)state;
    ry_module *m = parse_text(V "type T { Leaf((float32, ref(float32))), Node(T, T) }\n"
                                "type F { Grove(T, ref(int32)) }\n"
                                "def @main(%x: float32) {\n"
                                "  let %t: T = Leaf((%x, ref(%x)));\n"
                                "  Grove(%t, ref(1))\n"
                                "}\n");
    ry_print_report rep = {0};
    char *s = print_localized(m, &rep);
    assert_string_equal(s, V "type T[R0] {\n"
                             "  Leaf((float32, R0)),\n"
                             "  Node(T[R0], T[R0]),\n"
                             "}\n\n"
                             "type F[R0, R1] {\n"
                             "  Grove(T[R0], R1),\n"
                             "}\n\n"
                             "def @main(%x: float32) {\n"
                             "  %0 = ref(%x);\n"
                             "  %1 = (%x, %0);\n"
                             "  let %t = Leaf(%1);\n"
                             "  %2 = ref(1);\n"
                             "  Grove(%t, %2)\n"
                             "}\n");
    assert_int_equal(rep.generic_adts, 2);
    assert_int_equal(rep.ref_annots, 1);
    assert_int_equal(rep.unsupported, 0);
    ry_free(s);
    ry_module_free(m);
}

/* After type checking, printing for TVM annotates unannotated bindings
 * with the checker's types where TVM can read them (not refs, nor what
 * holds them): TVM's operator relations may otherwise run before an
 * argument's type is known. The default print adds nothing. */
static void test_tvm_annotates_checked_types(void **state) {
    (void)state;
    ry_module *m = parse_text(V "def @main(%x: Tensor[(2, 3), float32]) {\n"
                                "  let %r = ref(%x);\n"
                                "  let %f = fn (%y) { negative(%y) };\n"
                                "  let %v = ref_read(%r);\n"
                                "  %f(%v)\n"
                                "}\n");
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    char *s = ry_module_print_ex(m, &(ry_print_opts){.tvm = true});
    assert_string_equal(s, V "def @main(%x: Tensor[(2, 3), float32]) {\n"
                             "  let %r = ref(%x);\n"
                             "  let %f: fn (Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] = "
                             "fn (%y: Tensor[(2, 3), float32]) {\n"
                             "    negative(%y)\n"
                             "  };\n"
                             "  let %v: Tensor[(2, 3), float32] = ref_read(%r);\n"
                             "  %f(%v)\n"
                             "}\n");
    char *plain = ry_module_print(m);
    assert_null(strstr(plain, "%v:"));
    ry_free(plain);
    ry_free(s);
    ry_module_free(m);
}

static void test_layout_let_if_fn(void **state) {
    (void)state;
    check_print(V "def @f(%a: float32, %c: bool) -> float32 {\n"
                  "  let %g = fn (%y: float32) -> float32 { negative(%y) };\n"
                  "  if (%c) { %g(%a + 1f) } else { let %z = %a; %z }\n}\n",
                V "def @f(%a: float32, %c: bool) -> float32 {\n"
                  "  let %g = fn (%y: float32) -> float32 {\n"
                  "    negative(%y)\n"
                  "  };\n"
                  "  if (%c) {\n"
                  "    %0 = add(%a, 1f);\n"
                  "    %g(%0)\n"
                  "  } else {\n"
                  "    let %z = %a;\n"
                  "    %z\n"
                  "  }\n}\n");
}

static void test_layout_adt_match(void **state) {
    (void)state;
    check_print(V "type List[A] { Cons(A, List[A]), Nil }\n"
                  "def @len[A](%l: List[A]) -> int32 {\n"
                  "  match (%l) { Cons(_, %t) => add(1, @len(%t)), Nil => 0 }\n}\n"
                  "def @h(%p: (int32, List[int32])) -> int32 { match? (%p) { (%x, Cons(%y, Nil)) => %y } }\n",
                V "type List[A] {\n"
                  "  Cons(A, List[A]),\n"
                  "  Nil,\n"
                  "}\n\n"
                  "def @len[A](%l: List[A]) -> int32 {\n"
                  "  match (%l) {\n"
                  "    Cons(_, %t) => {\n"
                  "      %0 = @len(%t);\n"
                  "      add(1, %0)\n"
                  "    },\n"
                  "    Nil => {\n"
                  "      0\n"
                  "    },\n"
                  "  }\n}\n\n"
                  "def @h(%p: (int32, List[int32])) -> int32 {\n"
                  "  match? (%p) {\n"
                  "    (%x, Cons(%y, Nil)) => {\n"
                  "      %y\n"
                  "    },\n"
                  "  }\n}\n");
}

static void test_layout_types_and_tuples(void **state) {
    (void)state;
    check_print(V "type T { Leaf, Node(T, T) }\n"
                  "def @f(%r: ref(float32), %g: fn [A](A, T) -> (A,), %n: Tensor[(n, ?, 3), float16], %u: (), "
                  "%s: Tensor[(5), int64]) -> (bool,) {\n"
                  "  let %t = (%r, ());\n  (True,)\n}\n",
                V "type T {\n  Leaf,\n  Node(T, T),\n}\n\n"
                  "def @f(%r: ref(float32), %g: fn [A](A, T) -> (A,), %n: Tensor[(n, ?, 3), float16], %u: (), "
                  "%s: Tensor[(5), int64]) -> (bool,) {\n"
                  "  %0 = ();\n"
                  "  let %t = (%r, %0);\n"
                  "  (True,)\n}\n");
}

static void test_layout_refs_and_attrs(void **state) {
    (void)state;
    check_print(V "def @f(%x: Tensor[(2, 3), float32]) {\n"
                  "  let %r = ref(%x);\n"
                  "  let %u = ref_write(%r, nn.softmax(ref_read(%r), axis=-1));\n"
                  "  sum(%x, axis=[0, 1], keepdims=False, exclude=True)\n}\n",
                V "def @f(%x: Tensor[(2, 3), float32]) {\n"
                  "  let %r = ref(%x);\n"
                  "  %0 = ref_read(%r);\n"
                  "  %1 = nn.softmax(%0, axis=-1);\n"
                  "  let %u = ref_write(%r, %1);\n"
                  "  sum(%x, axis=[0, 1], keepdims=False, exclude=True)\n}\n");
}

/* A node shared by both branches is bound before the `if`; one used only
 * in a branch stays there; one used in a closure and outside it is bound
 * outside. */
static void test_sharing_scopes(void **state) {
    (void)state;
    check_print(V "def @f(%x: float32, %c: bool) {\n"
                  "  %0 = exp(%x);\n  %1 = log(%x);\n"
                  "  %2 = if (%c) { add(%0, %1) } else { %0 };\n"
                  "  %3 = fn () { multiply(%1, %1) };\n"
                  "  (%2, %3)\n}\n",
                V "def @f(%x: float32, %c: bool) {\n"
                  "  %0 = exp(%x);\n"
                  "  %1 = log(%x);\n"
                  "  %2 = if (%c) {\n"
                  "    add(%0, %1)\n"
                  "  } else {\n"
                  "    %0\n"
                  "  };\n"
                  "  %3 = fn () {\n"
                  "    multiply(%1, %1)\n"
                  "  };\n"
                  "  (%2, %3)\n}\n");
}

/* TVM's own printer can use a %N after the branch that bound it (its table
 * of graph bindings is flat); that loads here and prints with the binding
 * moved to where all its uses can see it. */
static void test_tvm_out_of_scope_binding(void **state) {
    (void)state;
    check_print(V "def @f(%x: float32, %c: bool) {\n  if (%c) {\n    %0 = exp(%x);\n    %0\n  } else {\n"
                  "    negative(%0)\n  }\n}\n",
                V "def @f(%x: float32, %c: bool) {\n  %0 = exp(%x);\n  if (%c) {\n    %0\n  } else {\n"
                  "    negative(%0)\n  }\n}\n");
}

/* Lets that are not at the end of a scope (a let's value, a shared let)
 * print in parentheses, each its own scope. */
static void test_lets_in_value_position(void **state) {
    (void)state;
    check_print(V "def @f(%x: float32) {\n  %0 = (let %y = %x; %y);\n  %1 = add(%0, %0);\n"
                  "  let %z = (let %w = %1; let %q = %w; %q);\n  %z\n}\n",
                V "def @f(%x: float32) {\n"
                  "  let %z = (\n"
                  "    %0 = (\n"
                  "      let %y = %x;\n"
                  "      %y\n"
                  "    );\n"
                  "    let %w = add(%0, %0);\n"
                  "    let %q = %w;\n"
                  "    %q\n"
                  "  );\n"
                  "  %z\n}\n");
}

/* A projection of a literal needs parentheses: `1f.0` would not lex. */
static void test_projection_of_literal(void **state) {
    (void)state;
    check_print(V "def @f() {\n  ((1f).0, ((2f, 3f)).1)\n}\n",
                V "def @f() {\n  %0 = (1f).0;\n  %1 = (2f, 3f);\n  %2 = %1.1;\n  (%0, %2)\n}\n");
}

static void test_floats_round_trip(void **state) {
    (void)state;
    check_print(V "def @f() {\n  (0.1f, 1e-05f, 3.4028235e+38f, 1f, -0.5f, 0.1f64, 0.30000000000000004f64, 1.5f16, "
                  "2i64, -3i8, inff, -inff, 123456789f)\n}\n",
                V "def @f() {\n  (0.1f, 1e-05f, 3.4028235e+38f, 1f, -0.5f, 0.1f64, 0.30000000000000004f64, 1.5f16, "
                  "2i64, -3i8, inff, -inff, 1.2345679e+08f)\n}\n");
    check_print(V "def @f(%x: Tensor[(4), float32]) {\n  nn.leaky_relu(%x, alpha=0.333333343f)\n}\n",
                V "def @f(%x: Tensor[(4), float32]) {\n  nn.leaky_relu(%x, alpha=0.333333343f)\n}\n");
    ry_module *m = parse_text(V "def @f() { (0.1f, 3.4028235e+38f, 0.30000000000000004f64) }\n");
    char *s = ry_module_print(m);
    ry_module *m2 = parse_text(s);
    ry_expr *a = ry_module_find_global(m, "f")->func->func.body, *b = ry_module_find_global(m2, "f")->func->func.body;
    for (int i = 0; i < 3; i++)
        assert_memory_equal(a->tuple.fields[i]->constant.value->data, b->tuple.fields[i]->constant.value->data,
                            ry_dtype_size(a->tuple.fields[i]->constant.value->dtype));
    ry_free(s);
    ry_module_free(m);
    ry_module_free(m2);
}

static void test_strings_escaped(void **state) {
    (void)state;
    check_print(V "def @f(%x: Tensor[(1, 1, 1, 1), float32]) {\n  nn.pad(%x, 0f, pad_width=[[0, 0]], "
                  "pad_mode=\"q\\\"\\\\\\n\\t\")\n}\n",
                V "def @f(%x: Tensor[(1, 1, 1, 1), float32]) {\n  nn.pad(%x, 0f, pad_width=[[0, 0]], "
                  "pad_mode=\"q\\\"\\\\\\n\\t\")\n}\n");
}

/* Names: a name not starting with a letter gets "v" in front, a name used
 * twice in a definition gets a number (TVM's rule). */
static void test_var_names(void **state) {
    (void)state;
    check_print(V "def @f(%x: float32) {\n  let %x = add(%x, 1f);\n  %x; %x\n}\n",
                V "def @f(%x: float32) {\n  let %x1 = add(%x, 1f);\n  let %v = %x1;\n  %x1\n}\n");
    /* names a pass might make */
    ry_module *m = ry_module_new();
    const char *names[4] = {"x.grad", "1st", "x_grad", ""};
    ry_var *ps[4];
    ry_expr *uses[4];
    for (int i = 0; i < 4; i++) {
        ps[i] = ry_var_new(m, names[i], NULL, RY_NO_SPAN);
        uses[i] = ry_expr_var(m, ps[i], RY_NO_SPAN);
    }
    ry_expr *fn = ry_expr_new(m, RY_EXPR_FUNC, RY_NO_SPAN);
    fn->func.nparams = 4;
    fn->func.params = ps;
    fn->func.body = ry_expr_tuple(m, 4, uses, RY_NO_SPAN);
    ry_module_add_global(m, "g", fn);
    char *s = ry_module_print(m);
    assert_string_equal(s, V "def @g(%x_grad, %v1st, %x_grad1, %v) {\n  (%x_grad, %v1st, %x_grad1, %v)\n}\n");
    ry_module *m2 = parse_text(s);
    ry_free(s);
    ry_module_free(m);
    ry_module_free(m2);
}

/* A module built with the C API: a 2x2 constant goes to the metadata, a
 * uint8 scalar too (TVM has no literal for it); both come back equal. */
static void test_metadata_round_trip(void **state) {
    (void)state;
    ry_module *m = ry_module_new();
    int64_t shape[2] = {2, 2};
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, 2, shape);
    for (int i = 0; i < 4; i++) ry_tensor_set(t, i, 0.25 * i - 1);
    ry_tensor *u = ry_tensor_scalar(RY_UINT8, 200);
    ry_expr *c = ry_expr_const(m, t, RY_NO_SPAN);
    ry_expr *cu = ry_expr_const(m, u, RY_NO_SPAN);
    ry_expr *cinf = ry_expr_const(m, ry_tensor_scalar(RY_FLOAT64, -INFINITY), RY_NO_SPAN);
    ry_expr *cnan = ry_expr_const(m, ry_tensor_scalar(RY_FLOAT32, NAN), RY_NO_SPAN);
    ry_expr *fields[5] = {c, cu, c, cinf, cnan};
    ry_expr *fn = ry_expr_new(m, RY_EXPR_FUNC, RY_NO_SPAN);
    fn->func.body = ry_expr_tuple(m, 5, fields, RY_NO_SPAN);
    ry_module_add_global(m, "main", fn);
    char *s = ry_module_print(m);
    assert_non_null(strstr(s, "def @main() {\n  (meta[relay.Constant][0], meta[relay.Constant][1], "
                              "meta[relay.Constant][0], meta[relay.Constant][2], meta[relay.Constant][3])"
                              "\n}\n\n#[metadata]\n{\n"));
    assert_non_null(strstr(s, "\"b64ndarrays\""));
    ry_module *m2 = parse_text(s);
    ry_expr *b = ry_module_find_global(m2, "main")->func->func.body;
    ry_tensor *t2 = b->tuple.fields[0]->constant.value;
    test_assert_close(t2, t, 0, 0);
    assert_int_equal(t2->dtype, RY_FLOAT32);
    ry_tensor *u2 = b->tuple.fields[1]->constant.value;
    assert_int_equal(u2->dtype, RY_UINT8);
    assert_int_equal(u2->ndim, 0);
    assert_true(ry_tensor_get(u2, 0) == 200);
    assert_ptr_equal(b->tuple.fields[0], b->tuple.fields[2]); /* one node per meta index */
    ry_tensor *inf2 = b->tuple.fields[3]->constant.value, *nan2 = b->tuple.fields[4]->constant.value;
    assert_int_equal(inf2->dtype, RY_FLOAT64);
    assert_true(isinf(ry_tensor_get(inf2, 0)) && ry_tensor_get(inf2, 0) < 0);
    assert_int_equal(nan2->dtype, RY_FLOAT32);
    assert_true(isnan(ry_tensor_get(nan2, 0)));
    char *s2 = ry_module_print(m2);
    assert_string_equal(s, s2);
    ry_free(s);
    ry_free(s2);
    ry_module_free(m);
    ry_module_free(m2);
}

static void test_show_types(void **state) {
    (void)state;
    ry_module *m = parse_text(V "def @main(%x: Tensor[(2, 3), float32]) {\n  %0 = exp(%x);\n  (%0, %0.0)\n}\n");
    /* give the nodes types as the type checker would */
    ry_expr *tup = ry_module_find_global(m, "main")->func->func.body;
    ry_expr *ex = tup->tuple.fields[0];
    ry_dim dims[2] = {{RY_DIM_CONST, 2, NULL}, {RY_DIM_CONST, 3, NULL}};
    ex->type = ry_type_tensor_arena(m->arena, RY_FLOAT32, 2, dims);
    ry_type *fs[2] = {ex->type, ex->type};
    tup->type = ry_type_tuple_arena(m->arena, 2, fs);
    ry_print_opts o = {.show_types = true};
    char *s = ry_module_print_ex(m, &o);
    char *plain = ry_module_print(m);
    assert_string_equal(s, V "def @main(%x: Tensor[(2, 3), float32]) {\n"
                             "  %0 = exp(%x) /* ty=Tensor[(2, 3), float32] */;\n"
                             "  %1 = %0.0;\n"
                             "  (%0, %1) /* ty=(Tensor[(2, 3), float32], Tensor[(2, 3), float32]) */\n}\n");
    ry_module *m2 = parse_text(s); /* the comments read back as nothing */
    char *s2 = ry_module_print(m2);
    assert_string_equal(s2, plain);
    ry_free(s);
    ry_free(s2);
    ry_free(plain);
    ry_module_free(m);
    ry_module_free(m2);
}

static void test_type_str_and_expr_print(void **state) {
    (void)state;
    ry_module *m = parse_text(V "type L[A] { C(A, L[A]), N }\n"
                                "def @f(%x: Tensor[(n, 10), float32], %l: L[(int32, bool)]) {\n"
                                "  add(exp(%x), 1f)\n}\n");
    ry_global *g = ry_module_find_global(m, "f");
    char buf[64];
    assert_string_equal(ry_type_str(g->func->func.params[0]->annot, buf, sizeof buf), "Tensor[(n, 10), float32]");
    assert_string_equal(ry_type_str(g->func->func.params[1]->annot, buf, sizeof buf), "L[(int32, bool)]");
    char small[8];
    assert_string_equal(ry_type_str(g->func->func.params[0]->annot, small, sizeof small), "Tensor[");
    char *e = ry_expr_print(g->func->func.body);
    assert_string_equal(e, "%0 = exp(%x);\nadd(%0, 1f)");
    ry_free(e);
    ry_module_free(m);
}

/* Long chains of bindings and lets print without deep recursion, and the
 * shadowing lets get distinct names. */
static void test_long_chains(void **state) {
    (void)state;
    int n = 20000;
    size_t cap = (size_t)n * 96 + 256, k = 0;
    char *text = malloc(cap);
    k += (size_t)snprintf(text + k, cap - k, V "def @main(%%x: float32) -> float32 {\n  %%0 = add(%%x, 1f);\n");
    for (int i = 1; i < n; i++) k += (size_t)snprintf(text + k, cap - k, "  %%%d = add(%%%d, 1f);\n", i, i - 1);
    for (int i = 0; i < n; i++) k += (size_t)snprintf(text + k, cap - k, "  let %%x = add(%%x, %%%d);\n", n - 1);
    snprintf(text + k, cap - k, "  %%x\n}\n");
    ry_module *m = parse_text(text);
    char *s1 = ry_module_print(m);
    assert_non_null(strstr(s1, "  %19999 = add(%19998, 1f);\n  let %x1 = add(%x, %19999);\n"));
    assert_non_null(strstr(s1, "  let %x20000 = add(%x19999, %19999);\n  %x20000\n}\n"));
    ry_module *m2 = parse_text(s1);
    char *s2 = ry_module_print(m2);
    assert_string_equal(s1, s2);
    ry_free(s1);
    ry_free(s2);
    ry_module_free(m);
    ry_module_free(m2);
    free(text);
}

/* Printing under failing allocations returns NULL or the right text. */
static void test_print_alloc_failures(void **state) {
    (void)state;
    ry_module *m = NULL;
    ry_error err;
    assert_int_equal(ry_module_parse_file("tests/corpus/lstm_list.relay", &m, &err), RY_OK);
    char *want = ry_module_print(m);
    int ok = 0;
    for (long n = 0; n < 400 && !ok; n++) {
        ry_alloc_fail_after(n);
        char *s = ry_module_print(m);
        ry_alloc_fail_after(-1);
        if (s) {
            assert_string_equal(s, want);
            ok = 1;
        }
        ry_free(s);
    }
    assert_true(ok);
    ry_free(want);
    ry_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repository_fixpoint),
        cmocka_unit_test(test_layout_graph_bindings),
        cmocka_unit_test(test_graph_numbers_span_module),
        cmocka_unit_test(test_required_attrs_spelled),
        cmocka_unit_test(test_print_for_tvm),
        cmocka_unit_test(test_localize_for_tvm),
        cmocka_unit_test(test_generic_ref_adts_for_tvm),
        cmocka_unit_test(test_localize_polymorphic_for_tvm),
        cmocka_unit_test(test_monomorphize_for_tvm),
        cmocka_unit_test(test_tvm_annotates_checked_types),
        cmocka_unit_test(test_layout_let_if_fn),
        cmocka_unit_test(test_layout_adt_match),
        cmocka_unit_test(test_layout_types_and_tuples),
        cmocka_unit_test(test_layout_refs_and_attrs),
        cmocka_unit_test(test_sharing_scopes),
        cmocka_unit_test(test_tvm_out_of_scope_binding),
        cmocka_unit_test(test_lets_in_value_position),
        cmocka_unit_test(test_projection_of_literal),
        cmocka_unit_test(test_floats_round_trip),
        cmocka_unit_test(test_strings_escaped),
        cmocka_unit_test(test_var_names),
        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_show_types),
        cmocka_unit_test(test_type_str_and_expr_print),
        cmocka_unit_test(test_long_chains),
        cmocka_unit_test(test_print_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
