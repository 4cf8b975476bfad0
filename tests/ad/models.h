/*
 * models.h: the model programs tests/test_ad.c differentiates (an MLP, a
 * recursion over a list, a TreeLSTM, refs, an LSTM over a list), shared by
 * its finite-difference, PyTorch (tools/gen_ad_tests.py) and second-order
 * checks. Included by test_ad.c only.
 */
#ifndef RELAYC_TESTS_AD_MODELS_H
#define RELAYC_TESTS_AD_MODELS_H

/* A two-layer perceptron with a log-softmax loss: dense, bias_add, tanh,
 * log_softmax, mean, negative; `%0 = ...` graph bindings share nodes. */
static const char *mlp_text =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(4, 5), float64], %w1: Tensor[(6, 5), float64],\n"
    "          %b1: Tensor[(6), float64], %w2: Tensor[(3, 6), float64],\n"
    "          %b2: Tensor[(3), float64]) {\n"
    "  %0 = nn.dense(%x, %w1, units=6);\n"
    "  %1 = nn.bias_add(%0, %b1);\n"
    "  %2 = tanh(%1);\n"
    "  %3 = nn.dense(%2, %w2, units=3);\n"
    "  %4 = nn.bias_add(%3, %b2);\n"
    "  %5 = nn.log_softmax(%4);\n"
    "  negative(mean(%5))\n"
    "}\n";

/* Recursion over a List through a global: a weighted running sum
 * h = tanh(h * w + x) over the elements. */
static const char *list_text =
    "#[version = \"0.0.5\"]\n"
    "type List[A] {\n"
    "  Cons(A, List[A]),\n"
    "  Nil,\n"
    "}\n"
    "def @fold(%l: List[Tensor[(2), float64]], %h: Tensor[(2), float64],\n"
    "          %w: Tensor[(2), float64]) -> Tensor[(2), float64] {\n"
    "  match (%l) {\n"
    "    Cons(%x, %rest) => @fold(%rest, tanh(add(multiply(%h, %w), %x)), %w),\n"
    "    Nil => %h,\n"
    "  }\n"
    "}\n"
    "def @main(%a: Tensor[(2), float64], %b: Tensor[(2), float64],\n"
    "          %c: Tensor[(2), float64], %w: Tensor[(2), float64]) {\n"
    "  let %l = Cons(%a, Cons(%b, Cons(%c, Nil)));\n"
    "  @fold(%l, zeros_like(%a), %w)\n"
    "}\n";

/* A small TreeLSTM (Tai et al.'s child-sum form, two children): leaves
 * hold embeddings, an ADT with tensor fields gets a twin typedef. */
static const char *treelstm_text =
    "#[version = \"0.0.5\"]\n"
    "type Tree {\n"
    "  Leaf(Tensor[(1, 3), float64]),\n"
    "  Node(Tree, Tree),\n"
    "}\n"
    "def @cell(%x: Tensor[(1, 3), float64], %h: Tensor[(1, 4), float64],\n"
    "          %c: Tensor[(1, 4), float64], %wi: Tensor[(16, 3), float64],\n"
    "          %ui: Tensor[(16, 4), float64]) -> (Tensor[(1, 4), float64], Tensor[(1, 4), "
    "float64]) {\n"
    "  %0 = add(nn.dense(%x, %wi), nn.dense(%h, %ui));\n"
    "  %1 = split(%0, indices_or_sections=4, axis=1);\n"
    "  %2 = sigmoid(%1.0);\n"
    "  %3 = sigmoid(%1.1);\n"
    "  %4 = tanh(%1.2);\n"
    "  %5 = sigmoid(%1.3);\n"
    "  %6 = add(multiply(%3, %c), multiply(%2, %4));\n"
    "  (multiply(%5, tanh(%6)), %6)\n"
    "}\n"
    "def @tree(%t: Tree, %wi: Tensor[(16, 3), float64], %ui: Tensor[(16, 4), float64])\n"
    "    -> (Tensor[(1, 4), float64], Tensor[(1, 4), float64]) {\n"
    "  match (%t) {\n"
    "    Leaf(%x) => {\n"
    "      let %z = zeros(shape=[1, 4], dtype=\"float64\");\n"
    "      @cell(%x, %z, %z, %wi, %ui)\n"
    "    },\n"
    "    Node(%l, %r) => {\n"
    "      let %a = @tree(%l, %wi, %ui);\n"
    "      let %b = @tree(%r, %wi, %ui);\n"
    "      let %x0 = zeros(shape=[1, 3], dtype=\"float64\");\n"
    "      @cell(%x0, add(%a.0, %b.0), add(%a.1, %b.1), %wi, %ui)\n"
    "    },\n"
    "  }\n"
    "}\n"
    "def @main(%e1: Tensor[(1, 3), float64], %e2: Tensor[(1, 3), float64],\n"
    "          %e3: Tensor[(1, 3), float64], %wi: Tensor[(16, 3), float64],\n"
    "          %ui: Tensor[(16, 4), float64]) {\n"
    "  let %t = Node(Leaf(%e1), Node(Leaf(%e2), Leaf(%e3)));\n"
    "  %0 = @tree(%t, %wi, %ui);\n"
    "  sum(%0.0)\n"
    "}\n";

/* refs: a value accumulated in a ref by a closure, read back */
static const char *refs_text =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 2), float64], %y: Tensor[(2, 2), float64]) {\n"
    "  let %r = ref(%x);\n"
    "  let %step = fn (%v: Tensor[(2, 2), float64]) {\n"
    "    ref_write(%r, multiply(ref_read(%r), %v))\n"
    "  };\n"
    "  let %u1 = %step(%y);\n"
    "  let %u2 = %step(tanh(%y));\n"
    "  let %u3 = ref_write(%r, add(ref_read(%r), %x));\n"
    "  ref_read(%r)\n"
    "}\n";

/* An LSTM run over a list of inputs by recursion (no unrolling). */
static const char *lstm_text =
    "#[version = \"0.0.5\"]\n"
    "type List[A] {\n"
    "  Cons(A, List[A]),\n"
    "  Nil,\n"
    "}\n"
    "def @cell(%x: Tensor[(1, 3), float64], %h: Tensor[(1, 4), float64],\n"
    "          %c: Tensor[(1, 4), float64], %wi: Tensor[(16, 3), float64],\n"
    "          %ui: Tensor[(16, 4), float64]) {\n"
    "  %0 = add(nn.dense(%x, %wi), nn.dense(%h, %ui));\n"
    "  %1 = split(%0, indices_or_sections=4, axis=1);\n"
    "  %2 = add(multiply(sigmoid(%1.1), %c), multiply(sigmoid(%1.0), tanh(%1.2)));\n"
    "  (multiply(sigmoid(%1.3), tanh(%2)), %2)\n"
    "}\n"
    "def @run(%xs: List[Tensor[(1, 3), float64]], %h: Tensor[(1, 4), float64],\n"
    "         %c: Tensor[(1, 4), float64], %wi: Tensor[(16, 3), float64],\n"
    "         %ui: Tensor[(16, 4), float64]) -> (Tensor[(1, 4), float64], Tensor[(1, 4), float64]) {\n"
    "  match (%xs) {\n"
    "    Cons(%x, %rest) => {\n"
    "      let %s = @cell(%x, %h, %c, %wi, %ui);\n"
    "      @run(%rest, %s.0, %s.1, %wi, %ui)\n"
    "    },\n"
    "    Nil => (%h, %c),\n"
    "  }\n"
    "}\n"
    "def @main(%x1: Tensor[(1, 3), float64], %x2: Tensor[(1, 3), float64],\n"
    "          %x3: Tensor[(1, 3), float64], %x4: Tensor[(1, 3), float64],\n"
    "          %wi: Tensor[(16, 3), float64], %ui: Tensor[(16, 4), float64]) {\n"
    "  let %z = zeros(shape=[1, 4], dtype=\"float64\");\n"
    "  let %xs = Cons(%x1, Cons(%x2, Cons(%x3, Cons(%x4, Nil))));\n"
    "  let %out = @run(%xs, %z, %z, %wi, %ui);\n"
    "  add(sum(%out.0), sum(%out.1))\n"
    "}\n";

#endif
