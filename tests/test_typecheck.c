/*
 * test_typecheck.c: type inference. Well-typed programs with the inferred
 * types of their globals, vars and instantiations checked exactly (printed
 * with ry_type_str), and ill-typed programs from tests/errors_types/ each
 * giving a located error (line, column and a message substring). Also a
 * module built by hand (no parser) and re-checking a checked module.
 */
#include "test_util.h"

#include <glob.h>
#include <stdlib.h>

/* A probe: "@f" the type of global f; "%x" the type of the first var named
 * x (params, lets, patterns, in module order); "@f[]" or "Cons[]" the type
 * arguments of the first call of f, printed "T1; T2". */
typedef struct probe {
    const char *what;
    const char *type;
} probe;

typedef struct good_case {
    const char *name;
    const char *text;
    probe probes[6];
} good_case;

#define V "#[version = \"0.0.5\"]\n"
#define LIST "type List[A] { Cons(A, List[A]), Nil }\n"

static const good_case goods[] = {
    {"mlp",
     V "def @main(%x: Tensor[(8, 784), float32], %w1: Tensor[(128, 784), float32],\n"
       "          %b1: Tensor[(128), float32], %w2: Tensor[(10, 128), float32],\n"
       "          %b2: Tensor[(10), float32]) {\n"
       "  %0 = nn.dense(%x, %w1, units=128);\n"
       "  %1 = nn.bias_add(%0, %b1);\n"
       "  %2 = nn.relu(%1);\n"
       "  %3 = nn.dense(%2, %w2, units=10);\n"
       "  %4 = nn.bias_add(%3, %b2);\n"
       "  nn.softmax(%4)\n"
       "}\n",
     {{"@main", "fn (Tensor[(8, 784), float32], Tensor[(128, 784), float32], Tensor[(128), float32], "
                "Tensor[(10, 128), float32], Tensor[(10), float32]) -> Tensor[(8, 10), float32]"}}},
    {"cnn",
     V "def @main(%x: Tensor[(2, 1, 28, 28), float32], %w1: Tensor[(8, 1, 3, 3), float32],\n"
       "          %w2: Tensor[(16, 8, 3, 3), float32], %w3: Tensor[(10, 784), float32]) {\n"
       "  %0 = nn.conv2d(%x, %w1, padding=[1, 1], channels=8, kernel_size=[3, 3]);\n"
       "  %1 = nn.relu(%0);\n"
       "  %2 = nn.max_pool2d(%1, pool_size=[2, 2], strides=[2, 2]);\n"
       "  %3 = nn.conv2d(%2, %w2, strides=[2, 2], padding=[1, 1], channels=16, kernel_size=[3, 3]);\n"
       "  %4 = nn.avg_pool2d(%3, pool_size=[1, 1]);\n"
       "  %5 = nn.batch_flatten(%4);\n"
       "  let %g = nn.global_avg_pool2d(%3);\n"
       "  (nn.dense(%5, %w3), %g)\n"
       "}\n",
     {{"%g", "Tensor[(2, 16, 1, 1), float32]"},
      {"@main", "fn (Tensor[(2, 1, 28, 28), float32], Tensor[(8, 1, 3, 3), float32], "
                "Tensor[(16, 8, 3, 3), float32], Tensor[(10, 784), float32]) -> "
                "(Tensor[(2, 10), float32], Tensor[(2, 16, 1, 1), float32])"}}},
    {"lstm_over_list",
     V LIST
       "def @cell(%x: Tensor[(1, 4), float32], %h: Tensor[(1, 8), float32], %c: Tensor[(1, 8), float32],\n"
       "          %wx: Tensor[(32, 4), float32], %wh: Tensor[(32, 8), float32]) {\n"
       "  %0 = add(nn.dense(%x, %wx), nn.dense(%h, %wh));\n"
       "  %1 = split(%0, indices_or_sections=4, axis=1);\n"
       "  %2 = add(multiply(sigmoid(%1.1), %c), multiply(sigmoid(%1.0), tanh(%1.2)));\n"
       "  (multiply(sigmoid(%1.3), tanh(%2)), %2)\n"
       "}\n"
       "def @lstm(%xs: List[Tensor[(1, 4), float32]], %h, %c, %wx: Tensor[(32, 4), float32],\n"
       "          %wh: Tensor[(32, 8), float32]) {\n"
       "  match (%xs) {\n"
       "    Cons(%x, %rest) => {\n"
       "      %0 = @cell(%x, %h, %c, %wx, %wh);\n"
       "      @lstm(%rest, %0.0, %0.1, %wx, %wh)\n"
       "    },\n"
       "    Nil => (%h, %c),\n"
       "  }\n"
       "}\n",
     {{"@lstm", "fn (List[Tensor[(1, 4), float32]], Tensor[(1, 8), float32], Tensor[(1, 8), float32], "
                "Tensor[(32, 4), float32], Tensor[(32, 8), float32]) -> "
                "(Tensor[(1, 8), float32], Tensor[(1, 8), float32])"},
      {"%rest", "List[Tensor[(1, 4), float32]]"},
      {"@cell", "fn (Tensor[(1, 4), float32], Tensor[(1, 8), float32], Tensor[(1, 8), float32], "
                "Tensor[(32, 4), float32], Tensor[(32, 8), float32]) -> "
                "(Tensor[(1, 8), float32], Tensor[(1, 8), float32])"}}},
    {"treelstm_over_tree",
     V "type Tree[A] { Leaf(A), Node(Tree[A], Tree[A]) }\n"
       "def @tree(%t: Tree[Tensor[(1, 4), float32]], %w: Tensor[(16, 4), float32],\n"
       "          %u: Tensor[(16, 4), float32]) {\n"
       "  match (%t) {\n"
       "    Leaf(%x) => {\n"
       "      %0 = split(nn.dense(%x, %w), indices_or_sections=4, axis=1);\n"
       "      %1 = multiply(sigmoid(%0.0), tanh(%0.2));\n"
       "      (multiply(sigmoid(%0.3), tanh(%1)), %1)\n"
       "    },\n"
       "    Node(%l, %r) => {\n"
       "      %2 = @tree(%l, %w, %u);\n"
       "      %3 = @tree(%r, %w, %u);\n"
       "      %4 = split(nn.dense(add(%2.0, %3.0), %u), indices_or_sections=4, axis=1);\n"
       "      %5 = add(multiply(sigmoid(%4.1), %2.1), multiply(sigmoid(%4.2), %3.1));\n"
       "      %6 = add(%5, multiply(sigmoid(%4.0), tanh(%4.3)));\n"
       "      (multiply(sigmoid(%4.3), tanh(%6)), %6)\n"
       "    },\n"
       "  }\n"
       "}\n",
     {{"@tree", "fn (Tree[Tensor[(1, 4), float32]], Tensor[(16, 4), float32], Tensor[(16, 4), float32]) -> "
                "(Tensor[(1, 4), float32], Tensor[(1, 4), float32])"},
      {"%l", "Tree[Tensor[(1, 4), float32]]"}}},
    {"map_foldl",
     V LIST
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
       "def @main(%x: Tensor[(3), float32]) {\n"
       "  %0 = Cons(%x, Cons(%x, Nil));\n"
       "  %1 = @map(fn (%y) { nn.relu(%y) }, %0);\n"
       "  @foldl(fn (%a, %b) { add(%a, %b) }, %x, %1)\n"
       "}\n",
     {{"@map", "fn [A, B](fn (A) -> B, List[A]) -> List[B]"},
      {"@foldl", "fn [A, B](fn (A, B) -> A, A, List[B]) -> A"},
      {"@main", "fn (Tensor[(3), float32]) -> Tensor[(3), float32]"},
      {"@map[]", "Tensor[(3), float32]; Tensor[(3), float32]"},
      {"%y", "Tensor[(3), float32]"},
      {"Cons[]", "Tensor[(3), float32]"}}},
    {"map_changes_type",
     V LIST
       "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
       "  match (%l) { Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)), Nil => Nil }\n"
       "}\n"
       "def @main(%l: List[Tensor[(2, 3), float32]]) {\n"
       "  @map(fn (%x) { sum(%x, axis=[1]) }, %l)\n"
       "}\n",
     {{"@main", "fn (List[Tensor[(2, 3), float32]]) -> List[Tensor[(2), float32]]"},
      {"@map[]", "Tensor[(2, 3), float32]; Tensor[(2), float32]"}}},
    {"closures_higher_order",
     V "def @main(%x: Tensor[(2, 2), float32]) {\n"
       "  let %scale = fn (%y: Tensor[(2, 2), float32]) { multiply(%y, %x) };\n"
       "  let %twice = fn (%f, %z) { %f(%f(%z)) };\n"
       "  %twice(%scale, %x)\n"
       "}\n",
     {{"%twice", "fn (fn (Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32], Tensor[(2, 2), float32]) -> "
                 "Tensor[(2, 2), float32]"},
      {"%f", "fn (Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32]"},
      {"@main", "fn (Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32]"}}},
    {"closure_type_params",
     V "def @main(%x: Tensor[(2), float32], %n: int32) {\n"
       "  let %id = fn [T](%v: T) -> T { %v };\n"
       "  (%id(%x), %id(%n))\n"
       "}\n",
     {{"%id", "fn [T](T) -> T"},
      {"@main", "fn (Tensor[(2), float32], int32) -> (Tensor[(2), float32], int32)"}}},
    {"closure_captures_and_returns",
     V "def @main(%a: Tensor[(4), float32]) {\n"
       "  let %adder = fn (%x) { fn (%y) { add(%x, %y) } };\n"
       "  let %inc = %adder(%a);\n"
       "  %inc(%a)\n"
       "}\n",
     {{"%adder", "fn (Tensor[(4), float32]) -> fn (Tensor[(4), float32]) -> Tensor[(4), float32]"},
      {"%inc", "fn (Tensor[(4), float32]) -> Tensor[(4), float32]"}}},
    {"recursive_let_closure",
     V "def @main(%n: int32) {\n"
       "  let %loop = fn (%i: int32, %acc: float32) -> float32 {\n"
       "    if (less(%i, %n)) { %loop(add(%i, 1), multiply(%acc, 2f)) } else { %acc }\n"
       "  };\n"
       "  %loop(0, 1f)\n"
       "}\n",
     {{"%loop", "fn (int32, float32) -> float32"}, {"@main", "fn (int32) -> float32"}}},
    {"refs",
     V "def @main(%x: Tensor[(3), float32]) {\n"
       "  let %r = ref(%x);\n"
       "  let %u = ref_write(%r, add(ref_read(%r), %x));\n"
       "  ref_read(%r)\n"
       "}\n",
     {{"%r", "ref(Tensor[(3), float32])"}, {"%u", "()"},
      {"@main", "fn (Tensor[(3), float32]) -> Tensor[(3), float32]"}}},
    {"ref_element_from_write",
     V LIST
       "def @main() {\n"
       "  let %r = ref(Nil);\n"
       "  let %u = ref_write(%r, Cons(1f, Nil));\n"
       "  ref_read(%r)\n"
       "}\n",
     {{"%r", "ref(List[float32])"}, {"@main", "fn () -> List[float32]"}}},
    {"symbolic_dims_per_call_site",
     V "def @f(%x: Tensor[(n, 4), float32], %w: Tensor[(2, 4), float32]) -> Tensor[(n, 2), float32] {\n"
       "  nn.dense(%x, %w)\n"
       "}\n"
       "def @main(%a: Tensor[(3, 4), float32], %b: Tensor[(5, 4), float32], %w: Tensor[(2, 4), float32]) {\n"
       "  (@f(%a, %w), @f(%b, %w))\n"
       "}\n",
     {{"@f", "fn (Tensor[(n, 4), float32], Tensor[(2, 4), float32]) -> Tensor[(n, 2), float32]"},
      {"@main", "fn (Tensor[(3, 4), float32], Tensor[(5, 4), float32], Tensor[(2, 4), float32]) -> "
                "(Tensor[(3, 2), float32], Tensor[(5, 2), float32])"}}},
    {"symbolic_dims_inferred_return",
     V "def @f(%x: Tensor[(n, 4), float32], %w: Tensor[(2, 4), float32]) {\n"
       "  nn.relu(nn.dense(%x, %w))\n"
       "}\n"
       "def @g(%y: Tensor[(m, 4), float32], %w: Tensor[(2, 4), float32]) {\n"
       "  @f(%y, %w)\n"
       "}\n"
       "def @main(%a: Tensor[(7, 4), float32], %w: Tensor[(2, 4), float32]) { @g(%a, %w) }\n",
     {{"@f", "fn (Tensor[(n, 4), float32], Tensor[(2, 4), float32]) -> Tensor[(n, 2), float32]"},
      {"@g", "fn (Tensor[(m, 4), float32], Tensor[(2, 4), float32]) -> Tensor[(m, 2), float32]"},
      {"@main", "fn (Tensor[(7, 4), float32], Tensor[(2, 4), float32]) -> Tensor[(7, 2), float32]"}}},
    {"any_dims",
     V "def @main(%x: Tensor[(?, 4), float32], %w: Tensor[(2, 4), float32], %a: Tensor[(3, 4), float32]) {\n"
       "  let %y: Tensor[(?, 2), float32] = nn.dense(%a, %w);\n"
       "  (nn.dense(%x, %w), %y)\n"
       "}\n",
     {{"%y", "Tensor[(?, 2), float32]"},
      {"@main", "fn (Tensor[(?, 4), float32], Tensor[(2, 4), float32], Tensor[(3, 4), float32]) -> "
                "(Tensor[(?, 2), float32], Tensor[(?, 2), float32])"}}},
    {"mutual_recursion_before_definition",
     V "def @main(%x: int32) { @is_even(%x) }\n"
       "def @is_even(%n: int32) -> bool {\n"
       "  if (equal(%n, 0)) { True } else { @is_odd(subtract(%n, 1)) }\n"
       "}\n"
       "def @is_odd(%n) {\n"
       "  if (equal(%n, 0)) { False } else { @is_even(subtract(%n, 1)) }\n"
       "}\n",
     {{"@main", "fn (int32) -> bool"}, {"@is_odd", "fn (int32) -> bool"}}},
    {"tuples_and_projections",
     V "def @main(%p: (Tensor[(2), float32], int32)) {\n"
       "  %0 = (%p.1, %p.0, ());\n"
       "  (%0.1, %0.2, %0)\n"
       "}\n",
     {{"@main", "fn ((Tensor[(2), float32], int32)) -> (Tensor[(2), float32], (), "
                "(int32, Tensor[(2), float32], ()))"}}},
    {"projection_waits_for_caller",
     V "def @fst(%p) { %p.0 }\n"
       "def @main(%a: float32) { @fst((%a, 1)) }\n",
     {{"@fst", "fn ((float32, int32)) -> float32"}, {"@main", "fn (float32) -> float32"}}},
    {"let_annotations_and_constants",
     V "def @main() {\n"
       "  let %z: Tensor[(2, 3), float32] = zeros(shape=[2, 3], dtype=\"float32\");\n"
       "  let %k: (float32, _) = (1f, 2i64);\n"
       "  (%z, %k, True, 3, 1f64)\n"
       "}\n",
     {{"%k", "(float32, int64)"},
      {"@main", "fn () -> (Tensor[(2, 3), float32], (float32, int64), bool, int32, float64)"}}},
    {"if_with_comparison",
     V "def @main(%x: Tensor[(5), float32]) {\n"
       "  if (greater(sum(%x), 0f)) { nn.relu(%x) } else { negative(%x) }\n"
       "}\n",
     {{"@main", "fn (Tensor[(5), float32]) -> Tensor[(5), float32]"}}},
    {"match_tuple_and_wildcard_patterns",
     V "type Maybe[A] { Just(A), Nothing }\n"
       "def @main(%p: (Maybe[int32], float32)) {\n"
       "  match (%p) {\n"
       "    (Just(%v), _) => cast(%v, dtype=\"float32\"),\n"
       "    (Nothing, %f) => %f,\n"
       "  }\n"
       "}\n",
     {{"%v", "int32"}, {"%f", "float32"}, {"@main", "fn ((Maybe[int32], float32)) -> float32"}}},
    {"unannotated_closure_param",
     V "def @main(%x: Tensor[(4), float32]) {\n"
       "  let %f = fn (%y) { add(%y, %y) };\n"
       "  %f(%x)\n"
       "}\n",
     {{"%f", "fn (Tensor[(4), float32]) -> Tensor[(4), float32]"}}},
    {"polymorphic_identity_two_uses",
     V "def @id[A](%x: A) -> A { %x }\n"
       "def @main(%a: float32, %b: (int32, int32)) { (@id(%a), @id(%b)) }\n",
     {{"@id", "fn [A](A) -> A"}, {"@main", "fn (float32, (int32, int32)) -> (float32, (int32, int32))"},
      {"@id[]", "float32"}}},
    {"nested_adts",
     V LIST "type Tree { Leaf, Node(Tree, Tree) }\n"
       "def @main() { (Cons(Cons(1f, Nil), Nil), Node(Leaf, Node(Leaf, Leaf))) }\n",
     {{"@main", "fn () -> (List[List[float32]], Tree)"}}},
    {"global_as_value",
     V LIST
       "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n"
       "  match (%l) { Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)), Nil => Nil }\n"
       "}\n"
       "def @double(%x: Tensor[(2), float32]) { add(%x, %x) }\n"
       "def @main(%l: List[Tensor[(2), float32]]) { @map(@double, %l) }\n",
     {{"@main", "fn (List[Tensor[(2), float32]]) -> List[Tensor[(2), float32]]"}}},
    {"broadcast_with_symbolic",
     V "def @main(%a: Tensor[(3, 1), float32], %b: Tensor[(1, 4), float32], %c: Tensor[(n, 1), float32]) {\n"
       "  (add(%a, %b), multiply(%c, %b))\n"
       "}\n",
     {{"@main", "fn (Tensor[(3, 1), float32], Tensor[(1, 4), float32], Tensor[(n, 1), float32]) -> "
                "(Tensor[(3, 4), float32], Tensor[(n, 4), float32])"}}},
    {"concatenate_tuple_argument",
     V "def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(2, 5), float32]) {\n"
       "  concatenate((%a, %b), axis=1)\n"
       "}\n",
     {{"@main", "fn (Tensor[(2, 3), float32], Tensor[(2, 5), float32]) -> Tensor[(2, 8), float32]"}}},
    {"recursion_with_inferred_return",
     V "def @sum_to(%n: int32, %acc: int32) {\n"
       "  if (equal(%n, 0)) { %acc } else { @sum_to(subtract(%n, 1), add(%acc, %n)) }\n"
       "}\n",
     {{"@sum_to", "fn (int32, int32) -> int32"}}},
    {"higher_order_global_param_inference",
     V "def @apply(%f, %x) { %f(%x) }\n"
       "def @main(%v: Tensor[(2, 2), float32]) { @apply(fn (%t: Tensor[(2, 2), float32]) { tanh(%t) }, %v) }\n",
     {{"@apply", "fn (fn (Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32], Tensor[(2, 2), float32]) -> "
                 "Tensor[(2, 2), float32]"}}},
    {"any_dim_param_accepts_concrete",
     V "def @f(%x: Tensor[(?, 4), float32]) { nn.relu(%x) }\n"
       "def @main(%a: Tensor[(3, 4), float32]) { @f(%a) }\n",
     {{"@f", "fn (Tensor[(?, 4), float32]) -> Tensor[(?, 4), float32]"},
      {"@main", "fn (Tensor[(3, 4), float32]) -> Tensor[(?, 4), float32]"}}},
    {"relation_waits_for_caller",
     V "def @double(%x) { add(%x, %x) }\n"
       "def @main(%a: Tensor[(2, 5), float64]) { nn.softmax(@double(%a)) }\n",
     {{"@double", "fn (Tensor[(2, 5), float64]) -> Tensor[(2, 5), float64]"},
      {"@main", "fn (Tensor[(2, 5), float64]) -> Tensor[(2, 5), float64]"}}},
    {"if_branches_join_to_any",
     V "def @main(%c: bool, %a: Tensor[(2, 3), float32], %b: Tensor[(2, 5), float32]) {\n"
       "  let %r = if (%c) { (%a, %a) } else { (%b, %a) };\n"
       "  %r\n"
       "}\n",
     {{"%r", "(Tensor[(2, ?), float32], Tensor[(2, 3), float32])"}}},
};
#define NGOODS (int)(sizeof goods / sizeof goods[0])

/* ---- finding what a probe names ---- */

static ry_var *find_var_expr(ry_expr *e, const char *name);

static ry_var *find_var_pat(ry_pattern *p, const char *name) {
    if (!p) return NULL;
    switch (p->kind) {
    case RY_PAT_VAR: return strcmp(p->var->name, name) == 0 ? p->var : NULL;
    case RY_PAT_CTOR:
        for (int i = 0; i < p->ctor.n; i++) {
            ry_var *v = find_var_pat(p->ctor.args[i], name);
            if (v) return v;
        }
        return NULL;
    case RY_PAT_TUPLE:
        for (int i = 0; i < p->tuple.n; i++) {
            ry_var *v = find_var_pat(p->tuple.fields[i], name);
            if (v) return v;
        }
        return NULL;
    default: return NULL;
    }
}

static ry_var *find_var_list(ry_expr **es, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        ry_var *v = find_var_expr(es[i], name);
        if (v) return v;
    }
    return NULL;
}

static ry_var *find_var_expr(ry_expr *e, const char *name) {
    if (!e) return NULL;
    ry_var *v = NULL;
    switch (e->kind) {
    case RY_EXPR_CALL:
        if ((v = find_var_expr(e->call.callee, name))) return v;
        return find_var_list(e->call.args, e->call.nargs, name);
    case RY_EXPR_LET:
        if (strcmp(e->let.var->name, name) == 0) return e->let.var;
        if ((v = find_var_expr(e->let.value, name))) return v;
        return find_var_expr(e->let.body, name);
    case RY_EXPR_IF:
        if ((v = find_var_expr(e->if_.cond, name)) || (v = find_var_expr(e->if_.then_, name))) return v;
        return find_var_expr(e->if_.else_, name);
    case RY_EXPR_MATCH:
        if ((v = find_var_expr(e->match.data, name))) return v;
        for (int i = 0; i < e->match.nclauses; i++)
            if ((v = find_var_pat(e->match.clauses[i].pat, name)) ||
                (v = find_var_expr(e->match.clauses[i].body, name)))
                return v;
        return NULL;
    case RY_EXPR_FUNC:
        for (int i = 0; i < e->func.nparams; i++)
            if (strcmp(e->func.params[i]->name, name) == 0) return e->func.params[i];
        return find_var_expr(e->func.body, name);
    case RY_EXPR_TUPLE: return find_var_list(e->tuple.fields, e->tuple.n, name);
    case RY_EXPR_PROJ: return find_var_expr(e->proj.tuple, name);
    case RY_EXPR_REF: return find_var_expr(e->ref.value, name);
    case RY_EXPR_REF_READ: return find_var_expr(e->ref_read.ref, name);
    case RY_EXPR_REF_WRITE:
        if ((v = find_var_expr(e->ref_write.ref, name))) return v;
        return find_var_expr(e->ref_write.value, name);
    default: return NULL;
    }
}

/* The first call (depth first) whose callee is global or constructor name. */
static ry_expr *find_call(ry_expr *e, const char *name);

static ry_expr *find_call_list(ry_expr **es, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        ry_expr *r = find_call(es[i], name);
        if (r) return r;
    }
    return NULL;
}

static ry_expr *find_call(ry_expr *e, const char *name) {
    if (!e) return NULL;
    ry_expr *r;
    switch (e->kind) {
    case RY_EXPR_CALL: {
        ry_expr *f = e->call.callee;
        if ((f->kind == RY_EXPR_GLOBAL && name[0] == '@' && strcmp(f->global.name, name + 1) == 0) ||
            (f->kind == RY_EXPR_CTOR && strcmp(f->ctor.ctor->name, name) == 0))
            return e;
        if ((r = find_call(f, name))) return r;
        return find_call_list(e->call.args, e->call.nargs, name);
    }
    case RY_EXPR_LET:
        if ((r = find_call(e->let.value, name))) return r;
        return find_call(e->let.body, name);
    case RY_EXPR_IF:
        if ((r = find_call(e->if_.cond, name)) || (r = find_call(e->if_.then_, name))) return r;
        return find_call(e->if_.else_, name);
    case RY_EXPR_MATCH:
        if ((r = find_call(e->match.data, name))) return r;
        for (int i = 0; i < e->match.nclauses; i++)
            if ((r = find_call(e->match.clauses[i].body, name))) return r;
        return NULL;
    case RY_EXPR_FUNC: return find_call(e->func.body, name);
    case RY_EXPR_TUPLE: return find_call_list(e->tuple.fields, e->tuple.n, name);
    case RY_EXPR_PROJ: return find_call(e->proj.tuple, name);
    case RY_EXPR_REF: return find_call(e->ref.value, name);
    case RY_EXPR_REF_READ: return find_call(e->ref_read.ref, name);
    case RY_EXPR_REF_WRITE:
        if ((r = find_call(e->ref_write.ref, name))) return r;
        return find_call(e->ref_write.value, name);
    default: return NULL;
    }
}

/* Globals are searched @main first, then the rest in module order. */
static void probe_text(ry_module *m, const char *what, char *out, size_t n) {
    char name[128];
    size_t len = strlen(what);
    bool targs = len > 2 && strcmp(what + len - 2, "[]") == 0;
    snprintf(name, sizeof name, "%.*s", (int)(targs ? len - 2 : len), what);
    out[0] = '\0';
    if (name[0] == '@' && !targs) {
        ry_global *g = ry_module_find_global(m, name + 1);
        if (!g) fail_msg("no global %s", name);
        if (!g->func->type) fail_msg("%s has no type", name);
        ry_type_str(g->func->type, out, n);
        return;
    }
    ry_global *gmain = ry_module_find_global(m, "main");
    for (int i = -1; i < m->nglobals; i++) {
        if (i >= 0 && m->globals[i] == gmain) continue;
        if (i < 0 && !gmain) continue;
        ry_expr *f = i < 0 ? gmain->func : m->globals[i]->func;
        if (targs) {
            ry_expr *call = find_call(f->func.body, name);
            if (!call) continue;
            for (int k = 0; k < call->call.ntype_args; k++) {
                char buf[512];
                size_t used = strlen(out);
                snprintf(out + used, n - used, "%s%s", k ? "; " : "", ry_type_str(call->call.type_args[k], buf, sizeof buf));
            }
            return;
        }
        ry_var *v = find_var_expr(f, name + 1);
        if (v) {
            if (!v->type) fail_msg("%s has no type", name);
            ry_type_str(v->type, out, n);
            return;
        }
    }
    fail_msg("probe %s finds nothing", what);
}

/* ---- every node typed, nothing left unknown ---- */

static bool type_resolved(const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_INCOMPLETE: return false;
    case RY_TYPE_TENSOR:
        for (int i = 0; i < t->tensor.ndim; i++)
            if (t->tensor.dims[i].kind == RY_DIM_SYM && (!t->tensor.dims[i].name || t->tensor.dims[i].name[0] == '?'))
                return false;
        return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!type_resolved(t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            if (!type_resolved(t->func.args[i])) return false;
        return type_resolved(t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!type_resolved(t->call.args[i])) return false;
        return true;
    case RY_TYPE_REF: return type_resolved(t->ref.inner);
    default: return true;
    }
}

static void assert_typed_var(const ry_var *v) {
    char buf[512];
    if (!type_resolved(v->type))
        fail_msg("var %%%s at %d:%d: type %s", v->name, v->span.line, v->span.col,
                 v->type ? ry_type_str(v->type, buf, sizeof buf) : "NULL");
}

static void assert_typed_pat(const ry_pattern *p) {
    if (p->kind == RY_PAT_VAR) assert_typed_var(p->var);
    if (p->kind == RY_PAT_CTOR)
        for (int i = 0; i < p->ctor.n; i++) assert_typed_pat(p->ctor.args[i]);
    if (p->kind == RY_PAT_TUPLE)
        for (int i = 0; i < p->tuple.n; i++) assert_typed_pat(p->tuple.fields[i]);
}

/* Walks e (a DAG: small programs only) checking every node has a type. */
static void assert_typed(const ry_expr *e) {
    char buf[512];
    if (!type_resolved(e->type))
        fail_msg("expression at %d:%d (kind %d): type %s", e->span.line, e->span.col, (int)e->kind,
                 e->type ? ry_type_str(e->type, buf, sizeof buf) : "NULL");
    switch (e->kind) {
    case RY_EXPR_VAR: assert_typed_var(e->var.var); break;
    case RY_EXPR_CALL:
        assert_typed(e->call.callee);
        for (int i = 0; i < e->call.nargs; i++) assert_typed(e->call.args[i]);
        for (int i = 0; i < e->call.ntype_args; i++)
            if (!type_resolved(e->call.type_args[i])) fail_msg("type argument %d unresolved", i);
        break;
    case RY_EXPR_LET:
        assert_typed_var(e->let.var);
        assert_typed(e->let.value);
        assert_typed(e->let.body);
        break;
    case RY_EXPR_IF:
        assert_typed(e->if_.cond);
        assert_typed(e->if_.then_);
        assert_typed(e->if_.else_);
        break;
    case RY_EXPR_MATCH:
        assert_typed(e->match.data);
        for (int i = 0; i < e->match.nclauses; i++) {
            assert_typed_pat(e->match.clauses[i].pat);
            assert_typed(e->match.clauses[i].body);
        }
        break;
    case RY_EXPR_FUNC:
        for (int i = 0; i < e->func.nparams; i++) assert_typed_var(e->func.params[i]);
        assert_typed(e->func.body);
        break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) assert_typed(e->tuple.fields[i]);
        break;
    case RY_EXPR_PROJ: assert_typed(e->proj.tuple); break;
    case RY_EXPR_REF: assert_typed(e->ref.value); break;
    case RY_EXPR_REF_READ: assert_typed(e->ref_read.ref); break;
    case RY_EXPR_REF_WRITE:
        assert_typed(e->ref_write.ref);
        assert_typed(e->ref_write.value);
        break;
    default: break;
    }
}

static void assert_module_typed(const ry_module *m) {
    for (int i = 0; i < m->nglobals; i++) assert_typed(m->globals[i]->func);
}

static void run_good(void **state) {
    const good_case *gc = *state;
    ry_module *m = test_parse(gc->text, true);
    for (int i = 0; i < 6 && gc->probes[i].what; i++) {
        char got[2048];
        probe_text(m, gc->probes[i].what, got, sizeof got);
        if (strcmp(got, gc->probes[i].type) != 0) {
            ry_module_free(m);
            fail_msg("%s: %s\n  got      %s\n  expected %s", gc->name, gc->probes[i].what, got,
                     gc->probes[i].type);
        }
    }
    assert_module_typed(m);
    ry_module_free(m);
}

/* ---- ill-typed programs: tests/errors_types/NAME.relay ---- */

typedef struct bad_case {
    const char *file;
    int line, col;
    const char *msg; /* a substring of the message */
} bad_case;

static const bad_case bads[] = {
    {"global_arg_shape", 5, 6, "argument 1 of @f: expected Tensor[(2, 3), float32], got Tensor[(2, 4), float32]"},
    {"dtype_mismatch", 5, 6, "expected Tensor[(4), float32], got Tensor[(4), float64]"},
    {"global_arity", 5, 3, "@f takes 2 arguments, got 1"},
    {"closure_arg_mismatch", 5, 6, "argument 1 of %f"},
    {"call_non_function", 4, 3, "cannot call %x"},
    {"ctor_arg_mismatch", 5, 12, "argument 2 of Cons: expected List[float32], got List[int32]"},
    {"higher_order_mismatch", 8, 31, "argument 2 of @map: expected List[int32], got List[float32]"},
    {"unbound_tparam_call", 5, 13, "argument 2 of @pair: expected float32, got int32"},
    {"dense_mismatch", 5, 3, "nn.dense"},
    {"relation_after_call", 5, 5, "nn.dense"},
    {"conv_channels", 4, 3, "nn.conv2d"},
    {"broadcast_mismatch", 4, 3, "do not broadcast"},
    {"op_axis_range", 5, 18, "axis"},
    {"relation_stuck", 4, 22, "cannot infer the argument types of nn.relu"},
    {"if_cond_not_bool", 4, 7, "condition of if: expected bool"},
    {"if_branches_differ", 7, 5, "branches of if differ"},
    {"match_clauses_differ", 7, 12, "clause 2 of match: expected float32, got int32"},
    {"pattern_wrong_adt", 8, 5, "constructor Cons belongs to type List"},
    {"tuple_pattern_mismatch", 5, 5, "tuple pattern of 2 fields"},
    {"tuple_index_range", 5, 3, "index .2 out of range"},
    {"projection_stuck", 4, 22, "cannot infer the type of the tuple projected by .1"},
    {"proj_not_tuple", 5, 3, "not a tuple"},
    {"infinite_type", 4, 25, "infinite type in argument 1 of %x"},
    {"infinite_adt", 5, 12, "infinite type in argument 2 of Cons"},
    {"let_annot_mismatch", 4, 37, "value of let %y: expected Tensor[(3, 2), float32], got Tensor[(2, 3), float32]"},
    {"return_annot_mismatch", 5, 3, "result of @main: expected Tensor[(2, 3), float64]"},
    {"symbolic_rigid", 4, 3, "expected Tensor[(n, 4), float32], got Tensor[(m, 4), float32]"},
    {"symbolic_call_conflict", 5, 10, "argument 2 of @g: expected Tensor[(3, 4), float32], got Tensor[(5, 4), float32]"},
    {"type_param_rigid", 4, 3, "result of @f: expected A, got float32"},
    {"ref_read_not_ref", 4, 12, "ref_read expects a reference"},
    {"ref_write_wrong_value", 5, 17, "value written by ref_write: expected float32"},
};
#define NBADS (int)(sizeof bads / sizeof bads[0])

static void run_bad(void **state) {
    const bad_case *bc = *state;
    char path[256];
    snprintf(path, sizeof path, "tests/errors_types/%s.relay", bc->file);
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse_file(path, &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("%s does not parse: %s", path, err.msg);
    }
    ry_status st = ry_module_typecheck(m, &err);
    ry_module_free(m);
    if (st == RY_OK) fail_msg("%s: type checks, but should not", path);
    if (err.line != bc->line || err.col != bc->col || !strstr(err.msg, bc->msg)) {
        ry_error_print(stderr, &err);
        fail_msg("%s: got %d:%d '%s'; expected %d:%d containing '%s'", path, err.line, err.col,
                 err.msg, bc->line, bc->col, bc->msg);
    }
    if (strcmp(err.file, path) != 0) fail_msg("%s: error names file '%s'", path, err.file);
}

/* ---- without the parser ---- */

/* A module built with the constructors of ir.h: @main(%x: (2, 3)) { let %y = (%x, %x); %y.1 } */
static void hand_built(void **state) {
    (void)state;
    ry_module *m = ry_module_new();
    /* (ry_type_tensor is avoided: it memcpy's from NULL dims, see the report) */
    ry_dim dims[2] = {{RY_DIM_CONST, 2, NULL}, {RY_DIM_CONST, 3, NULL}};
    ry_var *x = ry_var_new(m, "x", ry_type_tensor_arena(m->arena, RY_FLOAT32, 2, dims), RY_NO_SPAN);
    ry_var *y = ry_var_new(m, "y", NULL, RY_NO_SPAN);
    ry_expr *fields[2] = {ry_expr_var(m, x, RY_NO_SPAN), ry_expr_var(m, x, RY_NO_SPAN)};
    ry_expr *tup = ry_expr_tuple(m, 2, fields, RY_NO_SPAN);
    ry_expr *body = ry_expr_let(m, y, tup, ry_expr_proj(m, ry_expr_var(m, y, RY_NO_SPAN), 1, RY_NO_SPAN),
                                RY_NO_SPAN);
    ry_expr *fn = ry_expr_new(m, RY_EXPR_FUNC, RY_NO_SPAN);
    fn->func.nparams = 1;
    fn->func.params = RY_NEW_ARRAY(m->arena, ry_var *, 1);
    fn->func.params[0] = x;
    fn->func.body = body;
    ry_module_add_global(m, "main", fn);
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    ry_type *t = ry_type_tensor_arena(m->arena, RY_FLOAT32, 2, dims);
    assert_true(ry_type_equal(fn->type->func.ret, t));
    assert_true(ry_type_equal(y->type, ry_type_tuple_arena(m->arena, 2, (ry_type *[]){t, t})));
    assert_true(ry_type_equal(body->type, t));
    assert_true(ry_type_equal(tup->type->tuple.fields[0], t));
    /* out of range: an error without a location, no crash */
    body->let.body->proj.index = 2;
    assert_int_equal(ry_module_typecheck(m, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "out of range"));
    ry_module_free(m);
}

/* Checking twice gives the same types (passes re-check modules). */
static void recheck(void **state) {
    (void)state;
    ry_module *m = test_parse(goods[4].text, true);
    char a[1024], b[1024];
    ry_global *g = ry_module_find_global(m, "main");
    ry_type_str(g->func->type, a, sizeof a);
    ry_error err;
    assert_int_equal(ry_module_typecheck(m, &err), RY_OK);
    ry_type_str(g->func->type, b, sizeof b);
    assert_string_equal(a, b);
    ry_module_free(m);
}

/* The parser's corpus (the .relay files of tests/corpus, TVM-style) is
 * well-typed: each checks, with every node typed. */
static void corpus(void **state) {
    (void)state;
    glob_t g;
    if (glob("tests/corpus/*.relay", 0, NULL, &g) != 0) fail_msg("no tests/corpus/*.relay");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        ry_module *m = NULL;
        ry_error err;
        memset(&err, 0, sizeof err);
        if (ry_module_parse_file(g.gl_pathv[i], &m, &err) != RY_OK || ry_module_typecheck(m, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            ry_module_free(m);
            globfree(&g);
            fail_msg("%s: %s", g.gl_pathv[i], err.msg);
        }
        assert_module_typed(m);
        ry_module_free(m);
    }
    assert_true(g.gl_pathc >= 10);
    globfree(&g);
}

/* Chains thousands long (graph bindings, lets, nested ifs) check without
 * exhausting the stack. */
static void long_chains(void **state) {
    (void)state;
    enum { N = 4000 };
    size_t cap = (size_t)N * 96 + 256;
    char *text = malloc(cap);
    size_t k = (size_t)snprintf(text, cap, V "def @main(%%x: Tensor[(4), float32], %%c: bool) {\n");
    for (int i = 0; i < N; i++) {
        if (i == 0)
            k += (size_t)snprintf(text + k, cap - k, "  %%0 = add(%%x, %%x);\n");
        else if (i % 3 == 0)
            k += (size_t)snprintf(text + k, cap - k, "  %%%d = if (%%c) { %%%d } else { %%x };\n", i, i - 1);
        else
            k += (size_t)snprintf(text + k, cap - k, "  %%%d = (%%%d, %%x).0;\n", i, i - 1);
    }
    k += (size_t)snprintf(text + k, cap - k, "  let %%y = %%%d;\n", N - 1);
    for (int i = 0; i < N; i++) k += (size_t)snprintf(text + k, cap - k, "  let %%y%d = %%y;\n", i);
    snprintf(text + k, cap - k, "  multiply(%%y%d, %%y)\n}\n", N - 1);
    ry_module *m = test_parse(text, true);
    free(text);
    char buf[256];
    assert_string_equal(ry_type_str(ry_module_find_global(m, "main")->func->type, buf, sizeof buf),
                        "fn (Tensor[(4), float32], bool) -> Tensor[(4), float32]");
    ry_module_free(m);
}

int main(void) {
    int n = NGOODS + NBADS + 4;
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    int k = 0;
    for (int i = 0; i < NGOODS; i++)
        tests[k++] = (struct CMUnitTest){goods[i].name, run_good, NULL, NULL, (void *)&goods[i]};
    for (int i = 0; i < NBADS; i++)
        tests[k++] = (struct CMUnitTest){bads[i].file, run_bad, NULL, NULL, (void *)&bads[i]};
    tests[k++] = (struct CMUnitTest){"hand_built", hand_built, NULL, NULL, NULL};
    tests[k++] = (struct CMUnitTest){"recheck", recheck, NULL, NULL, NULL};
    tests[k++] = (struct CMUnitTest){"corpus", corpus, NULL, NULL, NULL};
    tests[k++] = (struct CMUnitTest){"long_chains", long_chains, NULL, NULL, NULL};
    int rc = _cmocka_run_group_tests("typecheck", tests, (size_t)k, NULL, NULL);
    free(tests);
    return rc;
}
