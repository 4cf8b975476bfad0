/*
 * test_texts.h: the small programs several suites share: an MLP over
 * (n, 4) inputs with 3 classes, a recursive encoder over the Tree ADT
 * (closures, matches, ADT twins in the gradient), and a program of
 * closures over a list. String literals, so a suite that uses one of
 * them declares nothing it leaves unused.
 */
#ifndef RELAYC_TEST_TEXTS_H
#define RELAYC_TEST_TEXTS_H

#define TEST_MLP_TEXT \
    "#[version = \"0.0.5\"]\n" \
    "// data: x y\n" \
    "// predict-data: x\n" \
    "// init: w1=kaiming_uniform b1=zeros w2=xavier_uniform b2=zeros\n" \
    "def @predict(%x: Tensor[(n, 4), float32], %w1: Tensor[(8, 4), float32], %b1: " \
    "Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), float32]) -> " \
    "Tensor[(n, 3), float32] {\n" \
    "  %0 = nn.dense(%x, %w1, units=8);\n" \
    "  %1 = nn.relu(nn.bias_add(%0, %b1));\n" \
    "  nn.bias_add(nn.dense(%1, %w2, units=3), %b2)\n" \
    "}\n" \
    "def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n), int32], %w1: Tensor[(8, 4), " \
    "float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), " \
    "float32]) -> float32 {\n" \
    "  %0 = @predict(%x, %w1, %b1, %w2, %b2);\n" \
    "  %1 = nn.log_softmax(%0, axis=-1);\n" \
    "  %2 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n" \
    "  negative(mean(sum(multiply(%1, %2), axis=[1])))\n" \
    "}\n"

#define TEST_TREE_TEXT \
    "#[version = \"0.0.5\"]\n" \
    "// data: tree\n" \
    "// init: emb=normal(0.5) w=xavier_uniform b=zeros ws=xavier_uniform bs=zeros\n" \
    "type Tree { Leaf(int32, int32), Node(Tree, Tree, int32), }\n" \
    "def @enc(%t: Tree, %emb: Tensor[(7, 6), float32], %w: Tensor[(6, 12), float32], " \
    "%b: Tensor[(6), float32]) -> Tensor[(1, 6), float32] {\n" \
    "  match (%t) {\n" \
    "    Leaf(%i, _) => expand_dims(take(%emb, %i, axis=0), axis=0),\n" \
    "    Node(%l, %r, _) => {\n" \
    "      %0 = (@enc(%l, %emb, %w, %b), @enc(%r, %emb, %w, %b));\n" \
    "      tanh(nn.bias_add(nn.dense(concatenate(%0, axis=1), %w, units=None), %b))\n" \
    "    },\n" \
    "  }\n" \
    "}\n" \
    "def @label(%t: Tree) -> int32 {\n" \
    "  match (%t) { Leaf(_, %l) => %l, Node(_, _, %l) => %l, }\n" \
    "}\n" \
    "def @loss(%tree: Tree, %emb: Tensor[(7, 6), float32], %w: Tensor[(6, 12), float32], " \
    "%b: Tensor[(6), float32], %ws: Tensor[(2, 6), float32], %bs: Tensor[(2), float32]) -> " \
    "float32 {\n" \
    "  %0 = nn.bias_add(nn.dense(@enc(%tree, %emb, %w, %b), %ws, units=None), %bs);\n" \
    "  negative(sum(take(nn.log_softmax(%0, axis=-1), @label(%tree), axis=1)))\n" \
    "}\n"

/* Closures, recursive lets, a polymorphic map over a list and a branch. */
#define TEST_CLOSURES_TEXT \
    "#[version = \"0.0.5\"]\n" \
    "type List[A] { Cons(A, List[A]), Nil }\n" \
    "def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {\n" \
    "  match (%l) { Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)), Nil => Nil }\n" \
    "}\n" \
    "def @adder(%k: float32) -> fn (float32) -> float32 { fn (%x: float32) { add(%x, %k) } }\n" \
    "def @main(%a: float32, %b: float32) -> (List[float32], float32) {\n" \
    "  let %add = @adder(%b);\n" \
    "  let %twice = fn (%g: fn (float32) -> float32, %x: float32) { %g(%g(%x)) };\n" \
    "  let %l = @map(%add, Cons(%a, Cons(%b, Nil)));\n" \
    "  let %fact = fn (%n: float32) -> float32 {\n" \
    "    if (%n <= 1f) { 1f } else { multiply(%n, %fact(subtract(%n, 1f))) }\n" \
    "  };\n" \
    "  (%l, add(%twice(%add, %a), %fact(5f)))\n" \
    "}\n"

#endif
