/*
 * test_parse.c: the text-format parser. Every corpus file parses; spans
 * point where the text is; literals, attributes, the DAG of graph bindings,
 * scopes, ADTs and metadata constants come out as written; malformed input
 * of every kind gives the expected located error and never crashes
 * (truncated files, failing allocations, deep nesting included).
 */
#include <dirent.h>
#include <stdlib.h>

#include "ir/parse.h" /* strbuf, to build big texts */
#include "test_util.h"

#define V "#[version = \"0.0.5\"]\n"

static ry_module *parse_ok(const char *text) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse("t.relay", text, strlen(text), &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("parse failed: %s", err.msg);
    }
    return m;
}

static ry_expr *body_of(ry_module *m, const char *name) {
    ry_global *g = ry_module_find_global(m, name);
    assert_non_null(g);
    assert_int_equal(g->func->kind, RY_EXPR_FUNC);
    return g->func->func.body;
}

/* Collects the .relay files of tests/corpus, sorted, into names. */
static int corpus_files(char names[][256], int max) {
    DIR *d = opendir("tests/corpus");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".relay") == 0)
            snprintf(names[n++], 256, "tests/corpus/%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

static void test_corpus_parses(void **state) {
    (void)state;
    char names[64][256];
    int n = corpus_files(names, 64);
    assert_true(n >= 15);
    for (int i = 0; i < n; i++) {
        ry_module *m = NULL;
        ry_error err;
        if (ry_module_parse_file(names[i], &m, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            fail_msg("%s does not parse", names[i]);
        }
        assert_true(m->nglobals >= 1);
        assert_string_equal(m->source->name, names[i]);
        ry_module_free(m);
    }
}

static void test_mlp_structure(void **state) {
    (void)state;
    ry_module *m = NULL;
    ry_error err;
    assert_int_equal(ry_module_parse_file("tests/corpus/mlp.relay", &m, &err), RY_OK);
    ry_global *g = ry_module_find_global(m, "main");
    assert_int_equal(g->func->func.nparams, 5);
    ry_var *x = g->func->func.params[0];
    assert_string_equal(x->name, "x");
    assert_int_equal(x->annot->kind, RY_TYPE_TENSOR);
    assert_int_equal(x->annot->tensor.ndim, 2);
    assert_int_equal(x->annot->tensor.dims[1].value, 784);
    ry_type *b1 = g->func->func.params[2]->annot;
    assert_int_equal(b1->tensor.ndim, 1);
    assert_int_equal(b1->tensor.dims[0].value, 128);
    ry_expr *e = g->func->func.body; /* nn.log_softmax(%4, axis=-1) */
    assert_int_equal(e->kind, RY_EXPR_CALL);
    assert_string_equal(e->call.callee->op.op->name, "nn.log_softmax");
    assert_int_equal(e->call.attrs.n, 1);
    assert_string_equal(e->call.attrs.items[0].name, "axis");
    assert_int_equal(e->call.attrs.items[0].value.i, -1);
    ry_expr *bias = e->call.args[0];
    assert_string_equal(bias->call.callee->op.op->name, "nn.bias_add");
    ry_expr *relu = bias->call.args[0]->call.args[0];
    assert_string_equal(relu->call.callee->op.op->name, "nn.relu");
    /* the param use is a var node pointing at the param */
    ry_expr *dense1 = relu->call.args[0]->call.args[0];
    assert_int_equal(dense1->call.args[0]->kind, RY_EXPR_VAR);
    assert_ptr_equal(dense1->call.args[0]->var.var, x);
    ry_module_free(m);
}

static void test_spans(void **state) {
    (void)state;
    const char *text = V "def @f(%x: float32,\n       %y: float32) -> float32 {\n"
                         "  %0 = add(%x, %y);\n  multiply(%0, 2f)\n}\n";
    ry_module *m = parse_ok(text);
    ry_global *g = ry_module_find_global(m, "f");
    assert_int_equal(g->span.line, 2);
    assert_int_equal(g->span.col, 5);
    assert_int_equal(g->span.len, 2);
    ry_var *y = g->func->func.params[1];
    assert_int_equal(y->span.line, 3);
    assert_int_equal(y->span.col, 8);
    assert_int_equal(y->annot->span.line, 3);
    assert_int_equal(y->annot->span.col, 12);
    ry_expr *mul = g->func->func.body;
    assert_int_equal(mul->span.line, 5);
    assert_int_equal(mul->span.col, 3);
    assert_int_equal(mul->span.len, (int)strlen("multiply(%0, 2f)"));
    ry_expr *two = mul->call.args[1];
    assert_int_equal(two->span.line, 5);
    assert_int_equal(two->span.col, 16);
    assert_int_equal(two->span.len, 2);
    ry_expr *add = mul->call.args[0];
    assert_int_equal(add->span.line, 4);
    assert_int_equal(add->span.col, 8);
    assert_int_equal(add->call.args[1]->span.col, 16); /* the use of %y */
    assert_ptr_equal(add->call.args[1]->var.var, y);
    assert_ptr_equal(add->span.src, m->source);
    assert_int_equal(m->source->len, strlen(text));
    ry_module_free(m);
}

static void test_graph_bindings_share(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f(%x: float32) {\n  %0 = exp(%x);\n  %1 = (%0, %0);\n"
                              "  if (True) { add(%0, %1.0) } else { %0 }\n}\n");
    ry_expr *ife = body_of(m, "f");
    assert_int_equal(ife->kind, RY_EXPR_IF);
    ry_expr *exp0 = ife->if_.else_;
    assert_int_equal(exp0->kind, RY_EXPR_CALL);
    ry_expr *add = ife->if_.then_;
    assert_ptr_equal(add->call.args[0], exp0);
    ry_expr *tup = add->call.args[1]->proj.tuple;
    assert_int_equal(add->call.args[1]->proj.index, 0);
    assert_ptr_equal(tup->tuple.fields[0], exp0);
    assert_ptr_equal(tup->tuple.fields[1], exp0);
    ry_module_free(m);
}

static void test_lets_and_scopes(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f(%x: float32) {\n  let %y: float32 = %x;\n  let %y = add(%y, 1f);\n"
                              "  let %g = fn (%n: int32) -> int32 { %g(%n) };\n  %x; %y\n}\n");
    ry_expr *l1 = body_of(m, "f");
    assert_int_equal(l1->kind, RY_EXPR_LET);
    ry_var *y1 = l1->let.var;
    assert_non_null(y1->annot);
    ry_expr *l2 = l1->let.body;
    ry_var *y2 = l2->let.var;
    assert_ptr_not_equal(y1, y2);
    /* `let %y = add(%y, 1f)` reads the outer %y */
    assert_ptr_equal(l2->let.value->call.args[0]->var.var, y1);
    /* a let-bound fn sees itself */
    ry_expr *l3 = l2->let.body;
    ry_expr *inner = l3->let.value->func.body;
    assert_ptr_equal(inner->call.callee->var.var, l3->let.var);
    /* `%x; %y` is a let of a fresh variable */
    ry_expr *seq = l3->let.body;
    assert_int_equal(seq->kind, RY_EXPR_LET);
    assert_string_equal(seq->let.var->name, "");
    assert_ptr_equal(seq->let.body->var.var, y2);
    ry_module_free(m);
}

static void test_literals(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f() {\n  (1, -2i64, 3i8, 0.5f, 1e-05f64, 1.5f16, True, False, "
                              "-9007199254740993i64, 3000000000, -inff, 2f32, 7i32)\n}\n");
    ry_expr *t = body_of(m, "f");
    assert_int_equal(t->tuple.n, 13);
    struct {
        ry_dtype dt;
        double v;
    } want[] = {{RY_INT32, 1},   {RY_INT64, -2},   {RY_INT8, 3},    {RY_FLOAT32, 0.5},
                {RY_FLOAT64, 1e-05}, {RY_FLOAT16, 1.5}, {RY_BOOL, 1}, {RY_BOOL, 0}};
    for (int i = 0; i < 8; i++) {
        ry_tensor *c = t->tuple.fields[i]->constant.value;
        assert_int_equal(c->ndim, 0);
        assert_int_equal(c->dtype, want[i].dt);
        assert_true(ry_tensor_get(c, 0) == want[i].v);
    }
    ry_tensor *big = t->tuple.fields[8]->constant.value;
    assert_true(*(int64_t *)big->data == -9007199254740993LL);
    ry_tensor *wide = t->tuple.fields[9]->constant.value; /* too big for int32: int64 (TVM) */
    assert_int_equal(wide->dtype, RY_INT64);
    assert_true(*(int64_t *)wide->data == 3000000000LL);
    assert_true(isinf(ry_tensor_get(t->tuple.fields[10]->constant.value, 0)));
    assert_true(ry_tensor_get(t->tuple.fields[10]->constant.value, 0) < 0);
    assert_int_equal(t->tuple.fields[11]->constant.value->dtype, RY_FLOAT32);
    assert_int_equal(t->tuple.fields[12]->constant.value->dtype, RY_INT32);
    ry_module_free(m);
}

static void test_attributes(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f(%x: Tensor[(1, 4, 4, 4), float32]) {\n"
                              "  %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, -1], [2, 2]], "
                              "pad_mode=\"a\\\"b\\\\c\\n\");\n"
                              "  %1 = nn.dropout(%0, rate=2.5e-1f);\n"
                              "  %2 = sum(%1, axis=None, keepdims=True, exclude=False);\n"
                              "  %3 = nn.dense(%x, %x, units=2i64);\n"
                              "  (%2, %3)\n}\n");
    ry_expr *t = body_of(m, "f");
    ry_expr *sum = t->tuple.fields[0];
    ry_expr *drop = sum->call.args[0];
    ry_expr *pad = drop->call.args[0];
    const ry_attr *pw = &pad->call.attrs.items[0];
    assert_string_equal(pw->name, "pad_width");
    assert_int_equal(pw->value.kind, RY_AV_LIST);
    assert_int_equal(pw->value.list.n, 4);
    assert_int_equal(pw->value.list.items[2].kind, RY_AV_LIST);
    assert_int_equal(pw->value.list.items[2].list.items[1].i, -1);
    assert_int_equal(pw->value.list.items[3].list.items[0].i, 2);
    assert_int_equal(pw->span.line, 3);
    assert_int_equal(pw->span.col, 23);
    assert_string_equal(pad->call.attrs.items[1].value.s, "a\"b\\c\n");
    assert_int_equal(drop->call.attrs.items[0].value.kind, RY_AV_FLOAT);
    assert_true(drop->call.attrs.items[0].value.f == 0.25);
    assert_int_equal(sum->call.attrs.items[0].value.kind, RY_AV_NONE);
    assert_int_equal(sum->call.attrs.items[1].value.kind, RY_AV_BOOL);
    assert_true(sum->call.attrs.items[1].value.b);
    assert_false(sum->call.attrs.items[2].value.b);
    assert_int_equal(t->tuple.fields[1]->call.attrs.items[0].value.i, 2);
    ry_module_free(m);
}

static void test_adts_and_patterns(void **state) {
    (void)state;
    /* types and globals used before their definition */
    ry_module *m = parse_ok(V "def @len[A](%l: List[A]) -> int32 {\n  match (%l) {\n"
                              "    Cons(_, %t) => add(1, @len(%t)),\n    Nil => 0,\n  }\n}\n"
                              "def @pair(%p: (Tree, int32)) -> Tree {\n  match? (%p) { (%t, _) => %t }\n}\n"
                              "type List[A] { Cons(A, List[A]), Nil }\ntype Tree { Leaf, Node(Tree, Tree) }\n");
    assert_int_equal(m->ntypedefs, 2);
    ry_typedef *list = ry_module_find_typedef(m, "List");
    assert_int_equal(list->ntparams, 1);
    assert_int_equal(list->nctors, 2);
    ry_ctor *cons = ry_module_find_ctor(m, "Cons");
    assert_int_equal(cons->tag, 0);
    assert_int_equal(cons->nfields, 2);
    assert_int_equal(cons->fields[0]->kind, RY_TYPE_VAR);
    assert_int_equal(cons->fields[0]->var.id, list->tparams[0]->var.id);
    assert_int_equal(cons->fields[1]->kind, RY_TYPE_CALL);
    assert_ptr_equal(cons->fields[1]->call.adt, list);
    ry_expr *mt = body_of(m, "len");
    assert_true(mt->match.complete);
    assert_int_equal(mt->match.nclauses, 2);
    ry_pattern *p0 = mt->match.clauses[0].pat;
    assert_int_equal(p0->kind, RY_PAT_CTOR);
    assert_ptr_equal(p0->ctor.ctor, cons);
    assert_int_equal(p0->ctor.args[0]->kind, RY_PAT_WILDCARD);
    assert_int_equal(p0->ctor.args[1]->kind, RY_PAT_VAR);
    ry_expr *rec = mt->match.clauses[0].body->call.args[1];
    assert_int_equal(rec->call.callee->kind, RY_EXPR_GLOBAL);
    assert_ptr_equal(rec->call.args[0]->var.var, p0->ctor.args[1]->var);
    ry_pattern *p1 = mt->match.clauses[1].pat;
    assert_int_equal(p1->ctor.n, 0);
    ry_expr *pm = body_of(m, "pair");
    assert_false(pm->match.complete);
    assert_int_equal(pm->match.clauses[0].pat->kind, RY_PAT_TUPLE);
    ry_type *tree = ry_module_find_global(m, "pair")->func->func.ret_annot;
    assert_int_equal(tree->kind, RY_TYPE_CALL);
    assert_int_equal(tree->call.nargs, 0);
    assert_string_equal(tree->call.adt->name, "Tree");
    ry_module_free(m);
}

/* `type Name` without braces and `extern type Name` have no constructors. */
static void test_opaque_types(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "type Opaque[A]\nextern type Handle\ndef @f(%h: Handle, %o: Opaque[int32]) { %h }\n"
                              "type Pair { MkPair(Handle, Handle) }\n");
    assert_int_equal(m->ntypedefs, 3);
    assert_int_equal(ry_module_find_typedef(m, "Opaque")->nctors, 0);
    assert_int_equal(ry_module_find_typedef(m, "Opaque")->ntparams, 1);
    assert_int_equal(ry_module_find_typedef(m, "Handle")->nctors, 0);
    assert_int_equal(ry_module_find_ctor(m, "MkPair")->nfields, 2);
    assert_non_null(ry_module_find_global(m, "f"));
    ry_module_free(m);
}

static void test_nullary_ctor_and_types(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "type L { N, C(int32, L) }\n"
                              "def @f(%r: ref(float32), %g: fn [A](A) -> A, %n: Tensor[(n, ?, 3), float32], "
                              "%u: (), %one: (int32,), %h: _) {\n  (N, N(), C(1, N), ref(1), ref_read(%r), ref_write(%r, 2f))\n}\n");
    ry_global *g = ry_module_find_global(m, "f");
    ry_var **ps = g->func->func.params;
    assert_int_equal(ps[0]->annot->kind, RY_TYPE_REF);
    assert_int_equal(ps[1]->annot->kind, RY_TYPE_FUNC);
    assert_int_equal(ps[1]->annot->func.ntparams, 1);
    assert_int_equal(ps[1]->annot->func.ret->var.id, ps[1]->annot->func.tparams[0]->var.id);
    ry_type *n = ps[2]->annot;
    assert_int_equal(n->tensor.dims[0].kind, RY_DIM_SYM);
    assert_string_equal(n->tensor.dims[0].name, "n");
    assert_int_equal(n->tensor.dims[1].kind, RY_DIM_ANY);
    assert_int_equal(ps[3]->annot->tuple.n, 0);
    assert_int_equal(ps[4]->annot->tuple.n, 1);
    assert_int_equal(ps[5]->annot->kind, RY_TYPE_INCOMPLETE);
    ry_expr *t = g->func->func.body;
    assert_int_equal(t->tuple.fields[0]->kind, RY_EXPR_CTOR);
    assert_int_equal(t->tuple.fields[1]->kind, RY_EXPR_CTOR);
    assert_int_equal(t->tuple.fields[2]->kind, RY_EXPR_CALL);
    assert_int_equal(t->tuple.fields[3]->kind, RY_EXPR_REF);
    assert_int_equal(t->tuple.fields[4]->kind, RY_EXPR_REF_READ);
    assert_int_equal(t->tuple.fields[5]->kind, RY_EXPR_REF_WRITE);
    ry_module_free(m);
}

/* The matched value is an atom, as in TVM: `(e)`, `%x`, `(%a, %b)`, `%t.0`. */
static void test_match_scrutinee(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "type O { S(int32), N }\n"
                              "def @f(%a: O, %b: O, %t: (O, int32)) {\n"
                              "  (match %a { _ => 0 }, match (%a, %b) { (S(%x), _) => %x, _ => 1 }, "
                              "match? %t.0 { S(%y) => %y })\n}\n");
    ry_expr *t = body_of(m, "f");
    assert_int_equal(t->tuple.fields[0]->match.data->kind, RY_EXPR_VAR);
    assert_int_equal(t->tuple.fields[1]->match.data->kind, RY_EXPR_TUPLE);
    assert_int_equal(t->tuple.fields[1]->match.nclauses, 2);
    assert_int_equal(t->tuple.fields[2]->match.data->kind, RY_EXPR_PROJ);
    assert_false(t->tuple.fields[2]->match.complete);
    ry_module_free(m);
}

static void test_nested_projection(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f(%t: ((float32, int32), bool)) {\n  (%t.0.1, (%t, 1).1)\n}\n");
    ry_expr *t = body_of(m, "f");
    ry_expr *p01 = t->tuple.fields[0];
    assert_int_equal(p01->kind, RY_EXPR_PROJ);
    assert_int_equal(p01->proj.index, 1);
    assert_int_equal(p01->proj.tuple->proj.index, 0);
    assert_int_equal(p01->proj.tuple->proj.tuple->kind, RY_EXPR_VAR);
    assert_int_equal(t->tuple.fields[1]->proj.tuple->kind, RY_EXPR_TUPLE);
    ry_module_free(m);
}

static void test_infix_precedence(void **state) {
    (void)state;
    ry_module *m = parse_ok(V "def @f(%a: float32, %b: float32) {\n  %a + %b * 2f - %a / %b == %a < %b\n}\n");
    ry_expr *e = body_of(m, "f"); /* equal(subtract(add(a, mul(b, 2)), div(a, b)), less(a, b)) */
    assert_string_equal(e->call.callee->op.op->name, "equal");
    ry_expr *sub = e->call.args[0];
    assert_string_equal(sub->call.callee->op.op->name, "subtract");
    assert_string_equal(sub->call.args[0]->call.callee->op.op->name, "add");
    assert_string_equal(sub->call.args[0]->call.args[1]->call.callee->op.op->name, "multiply");
    assert_string_equal(sub->call.args[1]->call.callee->op.op->name, "divide");
    assert_string_equal(e->call.args[1]->call.callee->op.op->name, "less");
    ry_module_free(m);
}

static void test_metadata_constants(void **state) {
    (void)state;
    ry_module *m = NULL;
    ry_error err;
    assert_int_equal(ry_module_parse_file("tests/corpus/metadata.relay", &m, &err), RY_OK);
    ry_expr *t = body_of(m, "main");
    ry_expr *bias = t->tuple.fields[0];
    ry_tensor *w = bias->call.args[0]->call.args[1]->constant.value;
    assert_int_equal(w->dtype, RY_FLOAT32);
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[0], 2);
    assert_int_equal(w->shape[1], 3);
    for (int i = 0; i < 6; i++) assert_true(ry_tensor_get(w, i) == (i - 2.5) / 4);
    ry_tensor *b = bias->call.args[1]->constant.value;
    assert_true(ry_tensor_get(b, 0) == 0.5 && ry_tensor_get(b, 1) == -1.0);
    ry_tensor *mask = t->tuple.fields[1]->constant.value;
    assert_int_equal(mask->dtype, RY_BOOL);
    assert_true(ry_tensor_get(mask, 0) == 1 && ry_tensor_get(mask, 1) == 0 && ry_tensor_get(mask, 2) == 1);
    ry_tensor *ids = t->tuple.fields[2]->constant.value;
    assert_int_equal(ids->dtype, RY_INT64);
    assert_true(((int64_t *)ids->data)[3] == -4);
    ry_module_free(m);
}

/* ---- malformed input ---- */

typedef struct bad_case {
    const char *text;
    int line, col;
    const char *msg;
} bad_case;

static const bad_case bad[] = {
    {"", 1, 1, "expected `#[version = \"0.0.5\"]`"},
    {"def @f() { 1 }", 1, 1, "expected `#[version"},
    {"#[version = \"0.0.4\"]\n", 1, 13, "unsupported text format version \"0.0.4\""},
    {"// nothing but a comment\n", 1, 1, "expected `#[version"},
    {V "def @f(%x: Tensor[(1, 1, 1, 1, 1, 1, 1, 1, 1), float32]) { %x }\n", 2, 12,
     "a tensor type has at most 8 dimensions"},
    {V "def @f() {\n  1\n", 4, 1, "expected `}` to close the function body, found the end of the file"},
    {"#[version = 0.0.5]\n", 1, 1, "malformed version attribute"},
    {V "#[foo]\n", 2, 1, "unsupported attribute #[foo]"},
    {V V, 2, 1, "the version attribute must come first"},
    {V "def @f() {\n  1.5\n}\n", 3, 3, "a float literal needs a suffix"},
    {V "def @f() { 1abc }\n", 2, 12, "invalid numeric literal"},
    {V "def @f() { 1i7 }\n", 2, 12, "unsupported width 7"},
    {V "def @f() { 3000000000i32 }\n", 2, 12, "out of range for int32"},
    {V "def @f() { 200i8 }\n", 2, 12, "out of range for int8"},
    {V "def @f(%x: float32) {\n  foo(%x)\n}\n", 3, 3, "unknown operator or constructor 'foo'"},
    {V "def @f(%x: float32) {\n  add(%x, %y)\n}\n", 3, 11, "unbound variable %y"},
    {V "def @f(%x: float32) {\n  %0 = add(%x, %x);\n  add(%0, %3)\n}\n", 4, 11, "unbound graph binding %3"},
    {V "def @f() {\n  @g(1)\n}\n", 3, 3, "unknown global @g"},
    {V "def @f() { 1 }\ndef @f() { 2 }\n", 3, 5, "global @f is defined twice"},
    {V "def @f() {\n  %0 = 1;\n  %0\n}\ndef @g() {\n  %0\n}\n", 7, 3, "unbound graph binding %0"},
    {V "def @f(%x: float32) {\n  %1 = fn (%y: float32) { %0 = log(%y); %0 };\n  %0\n}\n", 4, 3,
     "%0 uses %y, which is not in scope here"},
    {V "def @f(%x: Foo) { %x }\n", 2, 12, "unknown type 'Foo'"},
    {V "def @f(%x: Tensor[(1), float31]) { %x }\n", 2, 24, "unknown dtype 'float31'"},
    {V "def @f(%x: Tensor[(-1), float32]) { %x }\n", 2, 20, "a dimension cannot be negative"},
    {V "type L[A] { C(A, L[A]), N }\ndef @f(%l: L[int32]) {\n  match (%l) { C(%x) => 1, N => 0 }\n}\n", 4,
     16, "constructor C takes 2 fields, but the pattern has 1"},
    {V "type L { N }\ndef @f(%l: L) { match (%l) { M => 0 } }\n", 3, 30, "unknown constructor 'M' in pattern"},
    {V "type L { N, N }\n", 2, 13, "constructor 'N' is defined twice"},
    {V "type L { N }\ntype L { M }\n", 3, 6, "type 'L' is defined twice"},
    {V "type float32 { N }\n", 2, 6, "'float32' is a built-in type"},
    {V "type L[A] { C(A) }\ndef @f(%l: L[int32, int32]) { %l }\n", 3, 12, "type L takes 1 type argument, not 2"},
    {V "def @f() { 1 } /* open\n /* nested */ still open\n", 2, 16, "unterminated block comment"},
    {V "def @f() {\n  nn.dense(1, 2, units=\"abc)\n}\n", 3, 24, "unterminated string"},
    {V "def @f() { $ }\n", 2, 12, "unexpected character '$'"},
    {V "def @f(%c: bool) {\n  if (%c) { 1 }\n}\n", 4, 1, "an `if` needs an `else`"},
    {V "def @f(%x: float32) {\n  add(%x, %x\n}\n", 4, 1, "expected `)` or `,` in the arguments"},
    {V "def @f(%x: Tensor[(1, 2), float32]) {\n  nn.dense(%x, %x, foo=1)\n}\n", 3, 20,
     "operator nn.dense has no attribute 'foo'"},
    {V "def @f(%x: Tensor[(1, 2), float32]) {\n  nn.dense(%x, %x, units=1, units=2)\n}\n", 3, 29,
     "attribute 'units' given twice"},
    {V "def @f(%x: float32) {\n  add(%x)\n}\n", 3, 3, "operator add takes 2 arguments, got 1"},
    {V "type L { C(int32, L), N }\ndef @f() {\n  C(1)\n}\n", 4, 3, "constructor C takes 2 arguments, got 1"},
    {V "def @f() {\n  meta[relay.Constant][0]\n}\n", 3, 3, "the file has no #[metadata] section"},
    {V "def @f() {\n  meta[relay.Constant][1]\n}\n#[metadata]\n{\"root\": 1, \"nodes\": [{}, "
       "{\"type_key\": \"Map\", \"keys\": [\"relay.Constant\"], \"data\": [2]}, {\"type_key\": \"Array\", "
       "\"data\": [3]}, {\"type_key\": \"relay.Constant\", \"attrs\": {\"data\": \"0\"}}], \"b64ndarrays\": "
       "[\"P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAAIgAQACAAAAAAAAAAgAAAAAAAAAAACAPwAAAEA=\"]}\n",
     3, 3, "out of range: the metadata holds 1 constants"},
    {V "def @f() { 1 }\n#[metadata]\n{\"root\": 1,\n \"nodes\": [}\n", 5, 12, "malformed metadata: expected a JSON value"},
    {V "def @f(%x: float32, %x: float32) { %x }\n", 2, 21, "parameter %x given twice"},
    {V "let %x = 1;\n", 2, 1, "expected `def` or `type` at the top level"},
    {V "def @f(%t: (int32, int32)) { %t.x }\n", 2, 33, "expected an integer (a tuple index) after `.`"},
    {V "def @f() { 1 }\n\x01", 3, 1, "unexpected byte 0x01"},
    {V "def @f(%x: int32) { match (%x) { } }\n", 2, 21, "a match needs at least one clause"},
    {V "def @f[]() { 1 }\n", 2, 9, "empty type parameter list"},
    {V "def @f() { nn.pad(1, 2, pad_mode=\"\\q\") }\n", 2, 35, "unknown escape sequence '\\q'"},
    {V "def @f() { % }\n", 2, 12, "expected a name after `%`"},
    {V "def @f() { meta[relay.Constant] }\n", 2, 12, "malformed meta reference"},
    {V "def @f() -> { 1 }\n", 2, 13, "expected a type, found `{`"},
    {V "def @f() { nn.dense(1, 2, units=int32) }\n", 2, 33, "expected an attribute value, found `int32`"},
    {V "def @f() {\n  let %x = 1\n  %x\n}\n", 4, 3, "expected `;` after the let binding"},
    {V "def @f() {\n  1;\n}\n", 4, 1, "expected an expression, found `}`"},
    {V "def f() { 1 }\n", 2, 5, "expected a global after `def`"},
    {V "extern type H { A }\n", 2, 15, "an extern type cannot have constructors"},
    {V "def @f() { (1f, 1e39f) }\n", 2, 17, "float literal out of range for float32"},
    {V "def @f() { 1e400f64 }\n", 2, 12, "float literal out of range for float64"},
    {V "def @f() { 70000f16 }\n", 2, 12, "float literal out of range for float16"},
};

/* Big lists have no fixed limit (DenseNet and Inception take about 600
 * parameters): 700 parameters, a 1500-field tuple, 300 constructors with
 * 300 clauses matching them, 300 type parameters; each parses, type-checks
 * and prints back to the same text. */
/* TVM prints attributes on a call of a closure (`%f(%x,
 * attrs_type_key="...", ...)`): they parse, mean nothing to the type or
 * the value, and print back as written. */
static void test_closure_call_attrs(void **state) {
    (void)state;
    const char *text = V "def @main(%x: float32) -> float32 {\n"
                         "  let %f = fn (%y: float32) -> float32 {\n"
                         "    negative(%y)\n"
                         "  };\n"
                         "  %f(%x, attrs_type_key=\"relay.attrs.FooAttrs\", units=3)\n"
                         "}\n";
    ry_module *m = parse_ok(text);
    const ry_expr *call = body_of(m, "main")->let.body;
    assert_int_equal(call->kind, RY_EXPR_CALL);
    assert_int_equal(call->call.nargs, 1);
    assert_int_equal(call->call.attrs.n, 2);
    assert_string_equal(call->call.attrs.items[0].name, "attrs_type_key");
    assert_int_equal(call->call.attrs.items[1].value.i, 3);
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    char *s = ry_module_print(m);
    assert_string_equal(s, text);
    ry_free(s);
    ry_value *x = ry_value_tensor(ry_tensor_scalar(RY_FLOAT32, 2.5));
    ry_value *out = NULL;
    assert_int_equal(ry_interp_call(m, "main", 1, &x, NULL, &out, &err), RY_OK);
    assert_true(ry_tensor_get(out->tensor, 0) == -2.5);
    ry_value_release(out);
    ry_value_release(x);
    ry_module_free(m);
}

static void test_no_fixed_limits(void **state) {
    (void)state;
    strbuf b = {0};
    ry_sb_puts(&b, V "type Big[");
    for (int i = 0; i < 300; i++) ry_sb_printf(&b, "%sA%d", i ? ", " : "", i);
    ry_sb_puts(&b, "] {\n");
    for (int i = 0; i < 300; i++) ry_sb_printf(&b, "  C%d(A%d),\n", i, i);
    ry_sb_puts(&b, "}\n\ndef @many(");
    for (int i = 0; i < 700; i++) ry_sb_printf(&b, "%s%%p%d: float32", i ? ", " : "", i);
    ry_sb_puts(&b, ") {\n  (");
    for (int i = 0; i < 1500; i++) ry_sb_printf(&b, "%s%%p%d", i ? ", " : "", i % 700);
    ry_sb_puts(&b, ")\n}\n\ndef @pick(%b: Big[");
    for (int i = 0; i < 300; i++) ry_sb_printf(&b, "%sint32", i ? ", " : "");
    ry_sb_puts(&b, "]) -> int32 {\n  match (%b) {\n");
    for (int i = 0; i < 300; i++) ry_sb_printf(&b, "    C%d(%%x) => add(%%x, %d),\n", i, i);
    ry_sb_puts(&b, "  }\n}\n");
    assert_false(b.oom);
    ry_module *m = parse_ok(b.data);
    ry_error err;
    if (ry_module_typecheck(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("type check failed");
    }
    const ry_expr *many = ry_module_find_global(m, "many")->func;
    assert_int_equal(many->func.nparams, 700);
    assert_int_equal(many->func.body->tuple.n, 1500);
    assert_int_equal(many->func.body->tuple.fields[1499]->var.var, many->func.params[1499 % 700]);
    assert_int_equal(ry_module_find_typedef(m, "Big")->nctors, 300);
    assert_int_equal(body_of(m, "pick")->match.nclauses, 300);
    char *s1 = ry_module_print(m);
    ry_module *m2 = parse_ok(s1);
    char *s2 = ry_module_print(m2);
    assert_string_equal(s1, s2);
    ry_free(s1);
    ry_free(s2);
    ry_free(b.data);
    ry_module_free(m2);
    ry_module_free(m);
}

static void test_malformed(void **state) {
    (void)state;
    int n = (int)(sizeof bad / sizeof bad[0]);
    assert_true(n >= 30);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        ry_module *m = (ry_module *)1;
        ry_error err;
        memset(&err, 0, sizeof err);
        ry_status st = ry_module_parse("bad.relay", bad[i].text, strlen(bad[i].text), &m, &err);
        if (st != RY_ERR || m != NULL) fail_msg("case %d parsed: %s", i, bad[i].text);
        if (err.line != bad[i].line || err.col != bad[i].col || !strstr(err.msg, bad[i].msg)) {
            ry_error_print(stderr, &err);
            print_error("case %d: got %d:%d '%s', expected %d:%d '%s'\n", i, err.line, err.col, err.msg,
                        bad[i].line, bad[i].col, bad[i].msg);
            failed++;
        }
        assert_string_equal(err.file, "bad.relay");
    }
    assert_int_equal(failed, 0);
}

static void test_too_deep(void **state) {
    (void)state;
    size_t depth = 100000;
    char *text = malloc(depth * 2 + 64);
    strcpy(text, V "def @f() { ");
    size_t k = strlen(text);
    for (size_t i = 0; i < depth; i++) text[k++] = '(';
    text[k++] = '1';
    for (size_t i = 0; i < depth; i++) text[k++] = ')';
    strcpy(text + k, " }\n");
    ry_module *m = NULL;
    ry_error err;
    assert_int_equal(ry_module_parse("deep.relay", text, strlen(text), &m, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "nested too deeply"));
    assert_int_equal(err.line, 2);
    free(text);
}

/* Every prefix of a real program: an error or a module, never a crash. */
static void test_truncated_files(void **state) {
    (void)state;
    const char *files[] = {"tests/corpus/match_patterns.relay", "tests/corpus/attrs.relay",
                           "tests/corpus/metadata.relay", "tests/corpus/comments.relay"};
    for (int f = 0; f < 4; f++) {
        FILE *fp = fopen(files[f], "rb");
        assert_non_null(fp);
        char buf[16384];
        size_t n = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        int ok = 0;
        for (size_t len = 0; len <= n; len++) {
            char *copy = malloc(len + 1); /* exactly len bytes: ASan sees any overread */
            memcpy(copy, buf, len);
            ry_module *m = NULL;
            ry_error err;
            if (ry_module_parse("cut.relay", copy, len, &m, &err) == RY_OK) {
                ok++;
                ry_module_free(m);
            } else {
                assert_null(m);
                assert_true(err.line >= 1);
            }
            free(copy);
        }
        assert_true(ok >= 1); /* at least the whole file */
    }
}

/* Random byte edits of real programs (fixed seed): an error or a module;
 * a module that parses also prints, and its print parses to the same print. */
static void test_mutations(void **state) {
    (void)state;
    const char *files[] = {"tests/corpus/map_foldl.relay", "tests/corpus/dag.relay",
                           "tests/corpus/metadata.relay", "tests/corpus/let_seq.relay"};
    const char alphabet[] = "%@(){}[],;:.=-+*/<>?\"_ 0123456789aefiTFxyz\n#&";
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    int parsed = 0;
    for (int f = 0; f < 4; f++) {
        FILE *fp = fopen(files[f], "rb");
        assert_non_null(fp);
        char orig[16384];
        size_t n = fread(orig, 1, sizeof orig, fp);
        fclose(fp);
        for (int it = 0; it < 1500; it++) {
            char *text = malloc(n);
            memcpy(text, orig, n);
            int edits = 1 + it % 3;
            for (int k = 0; k < edits; k++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                size_t at = (size_t)(seed >> 33) % n;
                text[at] = alphabet[(seed >> 17) % (sizeof alphabet - 1)];
            }
            ry_module *m = NULL;
            ry_error err;
            if (ry_module_parse("mut.relay", text, n, &m, &err) == RY_OK) {
                parsed++;
                char *s1 = ry_module_print(m);
                ry_module *m2 = NULL;
                if (ry_module_parse("again.relay", s1, strlen(s1), &m2, &err) != RY_OK) {
                    ry_error_print(stderr, &err);
                    fail_msg("the print of an edited %s does not parse:\n%s", files[f], s1);
                }
                char *s2 = ry_module_print(m2);
                assert_string_equal(s1, s2);
                ry_free(s1);
                ry_free(s2);
                ry_module_free(m2);
                ry_module_free(m);
            } else {
                assert_true(err.line >= 1 && err.col >= 1);
            }
            free(text);
        }
    }
    assert_true(parsed > 100);
}

/* Failing the Nth allocation: an error or a module, no leak, no crash.
 * (No literals: module.c's constant list exits on out-of-memory.) */
static void test_alloc_failures(void **state) {
    (void)state;
    const char *text = V "type L[A] { C(A, L[A]), N }\ndef @f(%x: float32) {\n  %0 = (%x, %x);\n"
                         "  let %y = C(%x, N);\n  %0\n}\n";
    int ok = 0;
    for (long n = 0; n < 200 && !ok; n++) {
        ry_module *m = NULL;
        ry_error err;
        ry_alloc_fail_after(n);
        ry_status st = ry_module_parse("oom.relay", text, strlen(text), &m, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            ok = 1;
            ry_module_free(m);
        } else {
            assert_null(m);
        }
    }
    assert_true(ok);
}

static void test_parse_file_errors(void **state) {
    (void)state;
    ry_module *m = (ry_module *)1;
    ry_error err;
    assert_int_equal(ry_module_parse_file("tests/corpus/no_such_file.relay", &m, &err), RY_ERR);
    assert_null(m);
    assert_string_equal(err.file, "tests/corpus/no_such_file.relay");
    assert_non_null(strstr(err.msg, "cannot open"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_parses),
        cmocka_unit_test(test_mlp_structure),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_graph_bindings_share),
        cmocka_unit_test(test_lets_and_scopes),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_adts_and_patterns),
        cmocka_unit_test(test_opaque_types),
        cmocka_unit_test(test_nullary_ctor_and_types),
        cmocka_unit_test(test_match_scrutinee),
        cmocka_unit_test(test_nested_projection),
        cmocka_unit_test(test_infix_precedence),
        cmocka_unit_test(test_metadata_constants),
        cmocka_unit_test(test_no_fixed_limits),
        cmocka_unit_test(test_closure_call_attrs),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_truncated_files),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_parse_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
