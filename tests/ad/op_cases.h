/*
 * op_cases.h: the operator programs of tests/test_ad.c's rule check, one
 * per case: the program, its arguments' shapes and the range of their
 * values. Included by test_ad.c only (data, not an interface).
 */
#ifndef RELAYC_TESTS_AD_OP_CASES_H
#define RELAYC_TESTS_AD_OP_CASES_H

#define PROG(params, body) "#[version = \"0.0.5\"]\ndef @main(" params ") {\n  " body "\n}\n"
#define T(shape) "Tensor[" shape ", float64]"

typedef struct op_case {
    const char *name;
    const char *text;
    int nargs;
    int ndim[4];
    int64_t shape[4][4];
    double lo, hi, rtol;
} op_case;

static const op_case op_cases[] = {
    {"add broadcast", PROG("%a: " T("(2, 3)") ", %b: " T("(3)"), "add(%a, %b)"), 2, {2, 1}, {{2, 3}, {3}}, -1, 1, 0},
    {"subtract broadcast", PROG("%a: " T("(2, 1)") ", %b: " T("(2, 3)"), "subtract(%a, %b)"), 2, {2, 2}, {{2, 1}, {2, 3}}, -1, 1, 0},
    {"multiply", PROG("%a: " T("(2, 3)") ", %b: " T("(1, 3)"), "multiply(%a, %b)"), 2, {2, 2}, {{2, 3}, {1, 3}}, -1, 1, 0},
    {"divide", PROG("%a: " T("(2, 3)") ", %b: " T("(3)"), "divide(%a, %b)"), 2, {2, 1}, {{2, 3}, {3}}, 0.5, 2, 0},
    {"power", PROG("%a: " T("(2, 3)") ", %b: " T("(2, 3)"), "power(%a, %b)"), 2, {2, 2}, {{2, 3}, {2, 3}}, 0.5, 2, 0},
    {"maximum", PROG("%a: " T("(2, 3)") ", %b: " T("(3)"), "maximum(%a, %b)"), 2, {2, 1}, {{2, 3}, {3}}, -1, 1, 0},
    {"minimum", PROG("%a: " T("(2, 3)") ", %b: " T("(2, 3)"), "minimum(%a, %b)"), 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0},
    {"negative exp tanh sigmoid", PROG("%a: " T("(4)"), "sigmoid(tanh(exp(negative(%a))))"), 1, {1}, {{4}}, -1, 1, 0},
    {"log sqrt rsqrt", PROG("%a: " T("(4)"), "(log(%a), sqrt(%a), rsqrt(%a))"), 1, {1}, {{4}}, 0.5, 2, 0},
    {"abs relu leaky_relu", PROG("%a: " T("(6)"), "(abs(%a), nn.relu(%a), nn.leaky_relu(%a, alpha=0.1f))"), 1, {1}, {{6}}, -1, 1, 0},
    {"clip", PROG("%a: " T("(8)"), "multiply(clip(%a, a_min=-0.5f, a_max=0.5f), %a)"), 1, {1}, {{8}}, -1, 1, 0},
    {"where", PROG("%a: " T("(2, 3)") ", %b: " T("(3)"), "where(greater(%a, 0f64), %a, multiply(%b, %b))"), 2, {2, 1}, {{2, 3}, {3}}, -1, 1, 0},
    {"cast copy", PROG("%a: " T("(3)"), "multiply(copy(%a), cast(%a, dtype=\"float64\"))"), 1, {1}, {{3}}, -1, 1, 0},
    {"broadcast_to collapse_sum_like", PROG("%a: " T("(3)") ", %b: " T("(2, 3)"), "multiply(broadcast_to(%a, shape=[2, 3]), collapse_sum_like(multiply(%b, %b), %a))"), 2, {1, 2}, {{3}, {2, 3}}, -1, 1, 0},
    {"dense", PROG("%x: " T("(2, 3)") ", %w: " T("(4, 3)"), "nn.dense(%x, %w)"), 2, {2, 2}, {{2, 3}, {4, 3}}, -1, 1, 0},
    {"dense 3-D", PROG("%x: " T("(2, 2, 3)") ", %w: " T("(4, 3)"), "nn.dense(%x, %w)"), 2, {3, 2}, {{2, 2, 3}, {4, 3}}, -1, 1, 0},
    /* weights whose dims are unknown: rows flattened without knowing the last dim */
    {"dense 4-D, weight (?, ?)", PROG("%x: " T("(2, 2, 1, 3)") ", %w: " T("(?, ?)"), "nn.dense(%x, %w)"), 2, {4, 2}, {{2, 2, 1, 3}, {4, 3}}, -1, 1, 0},
    {"dense 3-D data (n, ?, ?), weight (m, ?)", PROG("%x: " T("(n, ?, ?)") ", %w: " T("(m, ?)"), "nn.dense(%x, %w)"), 2, {3, 2}, {{2, 2, 3}, {4, 3}}, -1, 1, 0},
    {"matmul 3-D, weight (?, ?) transposed", PROG("%a: " T("(2, 2, 3)") ", %b: " T("(?, ?)"), "nn.matmul(%a, %b, transpose_b=True)"), 2, {3, 2}, {{2, 2, 3}, {4, 3}}, -1, 1, 0},
    {"matmul 1-D, weight (?, 4)", PROG("%a: " T("(?)") ", %b: " T("(?, 4)"), "nn.matmul(%a, %b)"), 2, {1, 2}, {{3}, {3, 4}}, -1, 1, 0},
    /* empty operands: gradients of nothing, built without a -1 beside a 0 */
    {"dense 3-D, empty weight (0, 3)", PROG("%x: " T("(2, 2, 3)") ", %w: " T("(0, 3)"), "(nn.dense(%x, %w), tanh(%x))"), 2, {3, 2}, {{2, 2, 3}, {0, 3}}, -1, 1, 0},
    {"matmul 3-D transpose_a, empty weight", PROG("%a: " T("(2, 3, 2)") ", %b: " T("(0, 3)"), "(nn.matmul(%a, %b, transpose_a=True, transpose_b=True), tanh(%a))"), 2, {3, 2}, {{2, 3, 2}, {0, 3}}, -1, 1, 0},
    {"reshape of (0, ?)", PROG("%x: " T("(0, ?)") ", %y: " T("(2)"), "(reshape(%x, newshape=[0, 2], allowzero=True), tanh(%y))"), 2, {2, 1}, {{0, 2}, {2}}, -1, 1, 0},
    {"take from (0, 4) along axis 1", PROG("%x: " T("(0, 4)") ", %i: Tensor[(2), int32], %y: " T("(2)"), "(take(%x, %i, axis=1), tanh(%y))"), 3, {2, -1, 1}, {{0, 4}, {2}, {2}}, -1, 1, 0},
    /* a symbolic K matched to the weight's constant: each gradient typed as its operand */
    {"dense, data (?, n) against weight (3, 2)", PROG("%x: " T("(?, n)") ", %w: " T("(3, 2)"), "nn.dense(%x, %w)"), 2, {2, 2}, {{4, 2}, {3, 2}}, -1, 1, 0},
    {"matmul 3-D data (2, 2, n) against weight (2, 3)", PROG("%a: " T("(2, 2, n)") ", %b: " T("(2, 3)"), "tanh(nn.matmul(%a, %b))"), 2, {3, 2}, {{2, 2, 2}, {2, 3}}, -1, 1, 0},
    {"matmul 2-D data (2, n) against weight (1, 3)", PROG("%a: " T("(2, n)") ", %b: " T("(1, 3)"), "tanh(nn.matmul(%a, %b))"), 2, {2, 2}, {{2, 1}, {1, 3}}, -1, 1, 0},
    {"stack of (?, ?) and (2, 3) fields, and of (?, 0) ones", PROG("%a: " T("(?, ?)") ", %b: " T("(?, 0)") ", %c: " T("(2, 3)"), "(tanh(stack((%a, %a, %c), axis=1)), stack((%b, %b), axis=-1))"), 3, {2, 2, 2}, {{2, 3}, {3, 0}, {2, 3}}, -1, 1, 0},
    {"matmul", PROG("%a: " T("(2, 3)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b)"), 2, {2, 2}, {{2, 3}, {3, 4}}, -1, 1, 0},
    {"matmul A^T B^T", PROG("%a: " T("(3, 2)") ", %b: " T("(4, 3)"), "nn.matmul(%a, %b, transpose_a=True, transpose_b=True)"), 2, {2, 2}, {{3, 2}, {4, 3}}, -1, 1, 0},
    {"matmul A B^T", PROG("%a: " T("(2, 3)") ", %b: " T("(4, 3)"), "nn.matmul(%a, %b, transpose_b=True)"), 2, {2, 2}, {{2, 3}, {4, 3}}, -1, 1, 0},
    {"matmul A^T B", PROG("%a: " T("(3, 2)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b, transpose_a=True)"), 2, {2, 2}, {{3, 2}, {3, 4}}, -1, 1, 0},
    {"matmul 1-D", PROG("%a: " T("(3)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b)"), 2, {1, 2}, {{3}, {3, 4}}, -1, 1, 0},
    {"matmul 1-D B^T", PROG("%a: " T("(3)") ", %b: " T("(4, 3)"), "nn.matmul(%a, %b, transpose_b=True)"), 2, {1, 2}, {{3}, {4, 3}}, -1, 1, 0},
    {"matmul 3-D", PROG("%a: " T("(2, 2, 3)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b)"), 2, {3, 2}, {{2, 2, 3}, {3, 4}}, -1, 1, 0},
    {"matmul 3-D B^T", PROG("%a: " T("(2, 2, 3)") ", %b: " T("(4, 3)"), "nn.matmul(%a, %b, transpose_b=True)"), 2, {3, 2}, {{2, 2, 3}, {4, 3}}, -1, 1, 0},
    {"matmul 3-D A^T", PROG("%a: " T("(2, 3, 2)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b, transpose_a=True)"), 2, {3, 2}, {{2, 3, 2}, {3, 4}}, -1, 1, 0},
    {"matmul 3-D A^T B^T", PROG("%a: " T("(2, 3, 2)") ", %b: " T("(4, 3)"), "nn.matmul(%a, %b, transpose_a=True, transpose_b=True)"), 2, {3, 2}, {{2, 3, 2}, {4, 3}}, -1, 1, 0},
    {"matmul 4-D A^T", PROG("%a: " T("(2, 2, 3, 2)") ", %b: " T("(3, 4)"), "nn.matmul(%a, %b, transpose_a=True)"), 2, {4, 2}, {{2, 2, 3, 2}, {3, 4}}, -1, 1, 0},
    /* 0-sized dims: the gradient's reshape back to (0, 5) needs allowzero */
    {"expand_dims of an empty tensor", PROG("%a: " T("(0, 5)"), "expand_dims(%a, axis=0)"), 1, {2}, {{0, 5}}, -1, 1, 0},
    /* split takes strictly ascending cuts: a part 0 wide gets zeros */
    {"concatenate with empty parts", PROG("%a: " T("(0, 4)") ", %b: " T("(2, 4)"), "(concatenate((%a, %b, %a), axis=0), concatenate((%b, %a, %b), axis=0))"), 2, {2, 2}, {{0, 4}, {2, 4}}, -1, 1, 0},
    /* rules that read the type of a projection of split's tuple */
    {"reshape of a split", PROG("%a: " T("(2, 4)"), "reshape(split(%a, indices_or_sections=2, axis=1).1, newshape=[4])"), 1, {2}, {{2, 4}}, -1, 1, 0},
    {"layer_norm of a split", PROG("%a: " T("(2, 6)") ", %g: " T("(3)") ", %b: " T("(3)"), "nn.layer_norm(split(%a, indices_or_sections=2, axis=1).0, %g, %b)"), 3, {2, 1, 1}, {{2, 6}, {3}, {3}}, -1, 1, 0},
    {"batch_matmul", PROG("%a: " T("(2, 2, 3)") ", %b: " T("(2, 4, 3)"), "nn.batch_matmul(%a, %b, transpose_b=True)"), 2, {3, 3}, {{2, 2, 3}, {2, 4, 3}}, -1, 1, 0},
    {"bias_add axis 1", PROG("%x: " T("(2, 3, 2)") ", %b: " T("(3)"), "multiply(nn.bias_add(%x, %b), %x)"), 2, {3, 1}, {{2, 3, 2}, {3}}, -1, 1, 0},
    {"softmax axis 0", PROG("%x: " T("(3, 2)"), "multiply(nn.softmax(%x, axis=0), %x)"), 1, {2}, {{3, 2}}, -1, 1, 0},
    {"log_softmax", PROG("%x: " T("(2, 4)"), "multiply(nn.log_softmax(%x), %x)"), 1, {2}, {{2, 4}}, -1, 1, 0},
    {"batch_flatten", PROG("%x: " T("(2, 2, 3)"), "multiply(nn.batch_flatten(%x), nn.batch_flatten(tanh(%x)))"), 1, {3}, {{2, 2, 3}}, -1, 1, 0},
    {"sum axes", PROG("%x: " T("(2, 3, 4)"), "(sum(%x, axis=[0, 2]), sum(multiply(%x, %x), axis=[1], keepdims=True), sum(tanh(%x), axis=[1], exclude=True), sum(exp(%x)))"), 1, {3}, {{2, 3, 4}}, -1, 1, 0},
    {"mean", PROG("%x: " T("(2, 3)"), "(mean(multiply(%x, %x), axis=[1]), mean(tanh(%x)))"), 1, {2}, {{2, 3}}, -1, 1, 0},
    {"max min", PROG("%x: " T("(3, 4)"), "(max(%x, axis=[1]), min(multiply(%x, %x)), max(%x, axis=[0], keepdims=True))"), 1, {2}, {{3, 4}}, -1, 1, 0},
    /* two or more dims unknown: the gradient reshapes through reshape_like */
    {"reshape of (?, ?, 3) to (-1, 3)", PROG("%x: " T("(?, ?, 3)") ", %w: " T("(3, 2)"), "%0 = reshape(%x, newshape=[-1, 3]);\n  reshape_like(tanh(nn.matmul(%0, %w)), %x, lhs_end=1, rhs_end=2)"), 2, {3, 2}, {{2, 2, 3}, {3, 2}}, -1, 1, 0},
    {"expand_dims squeeze batch_flatten of (n, m, 2)", PROG("%x: " T("(n, m, 2)"), "%0 = expand_dims(%x, axis=1);\n  %1 = squeeze(tanh(%0), axis=[1]);\n  multiply(nn.batch_flatten(%1), nn.batch_flatten(%x))"), 1, {3}, {{2, 3, 2}}, -1, 1, 0},
    {"reshape_like (shape donor differentiable too)", PROG("%a: " T("(2, 3)") ", %b: " T("(3, 2)"), "multiply(reshape_like(%a, %b), %b)"), 2, {2, 2}, {{2, 3}, {3, 2}}, -1, 1, 0},
    {"reshape expand_dims squeeze", PROG("%x: " T("(2, 3)"), "%0 = reshape(%x, newshape=[3, -1]);\n  %1 = expand_dims(tanh(%0), axis=1);\n  multiply(squeeze(%1, axis=[1]), %0)"), 1, {2}, {{2, 3}}, -1, 1, 0},
    {"transpose", PROG("%x: " T("(2, 3, 4)"), "(multiply(transpose(%x, axes=[1, 2, 0]), transpose(tanh(%x), axes=[1, 2, 0])), transpose(exp(%x)))"), 1, {3}, {{2, 3, 4}}, -1, 1, 0},
    {"concatenate", PROG("%a: " T("(2, 1)") ", %b: " T("(2, 3)"), "%0 = concatenate((%a, %b, %a), axis=1);\n  multiply(%0, %0)"), 2, {2, 2}, {{2, 1}, {2, 3}}, -1, 1, 0},
    {"split", PROG("%x: " T("(2, 5)"), "%0 = split(%x, indices_or_sections=[1, 3], axis=1);\n  (multiply(%0.0, %0.0), tanh(%0.2))"), 1, {2}, {{2, 5}}, -1, 1, 0},
    {"stack", PROG("%a: " T("(2, 3)") ", %b: " T("(2, 3)"), "%0 = stack((%a, %b), axis=1);\n  multiply(%0, %0)"), 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0},
    {"conv2d", PROG("%x: " T("(1, 2, 5, 5)") ", %w: " T("(3, 2, 3, 3)"), "nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 1, 1], channels=3, kernel_size=[3, 3])"), 2, {4, 4}, {{1, 2, 5, 5}, {3, 2, 3, 3}}, -1, 1, 0},
    {"conv2d groups dilation", PROG("%x: " T("(2, 4, 5, 5)") ", %w: " T("(4, 2, 2, 2)"), "nn.conv2d(%x, %w, dilation=[2, 2], groups=2, channels=4, kernel_size=[2, 2])"), 2, {4, 4}, {{2, 4, 5, 5}, {4, 2, 2, 2}}, -1, 1, 0},
    {"max_pool2d avg_pool2d", PROG("%x: " T("(1, 2, 4, 4)"), "(nn.max_pool2d(%x, pool_size=[2, 2], strides=[2, 2]), nn.avg_pool2d(tanh(%x), pool_size=[3, 3], padding=[1, 1]), nn.global_avg_pool2d(multiply(%x, %x)))"), 1, {4}, {{1, 2, 4, 4}}, -1, 1, 0},
    {"fast_softmax cross_entropy", PROG("%x: " T("(2, 3)") ", %t: " T("(2, 3)"), "(nn.cross_entropy(nn.fast_softmax(%x), %t), nn.cross_entropy_with_logits(%x, multiply(%t, %t)))"), 2, {2, 2}, {{2, 3}, {2, 3}}, -1, 1, 0},
    {"layer_norm", PROG("%x: " T("(2, 4)") ", %s: " T("(4)") ", %b: " T("(4)"), "multiply(nn.layer_norm(%x, %s, %b), %x)"), 3, {2, 1, 1}, {{2, 4}, {4}, {4}}, -1, 1, 0},
    {"layer_norm axis 1 of 3", PROG("%x: " T("(2, 3, 2)") ", %s: " T("(3)") ", %b: " T("(3)"), "multiply(nn.layer_norm(%x, %s, %b, axis=1, epsilon=0.01f), %x)"), 3, {3, 1, 1}, {{2, 3, 2}, {3}, {3}}, -1, 1, 0},
    {"prelu", PROG("%x: " T("(2, 3, 2)") ", %a: " T("(3)"), "multiply(nn.prelu(%x, %a), %x)"), 2, {3, 1}, {{2, 3, 2}, {3}}, -1, 1, 0},
    {"instance_norm", PROG("%x: " T("(2, 3, 2, 2)") ", %s: " T("(3)") ", %b: " T("(3)"), "multiply(nn.instance_norm(%x, %s, %b), %x)"), 3, {4, 1, 1}, {{2, 3, 2, 2}, {3}, {3}}, -1, 1, 0},
    /* gamma/alpha `(n)` matched to a channel of 1 (see test_mode_dependent_ops) */
    {"instance_norm gamma (n) on 1 channel", PROG("%x: " T("(2, 1, 3)") ", %s: " T("(n)") ", %b: " T("(1)"), "multiply(nn.instance_norm(%x, %s, %b), %x)"), 3, {3, 1, 1}, {{2, 1, 3}, {1}, {1}}, -1, 1, 0},
    {"layer_norm gamma (n) on 1 channel", PROG("%x: " T("(2, 3, 1)") ", %s: " T("(n)") ", %b: " T("(1)"), "multiply(nn.layer_norm(%x, %s, %b, axis=2), %x)"), 3, {3, 1, 1}, {{2, 3, 1}, {1}, {1}}, -1, 1, 0},
    {"group_norm gamma (n) on 1 channel", PROG("%x: " T("(2, 1, 3)") ", %s: " T("(n)") ", %b: " T("(1)"), "multiply(nn.group_norm(%x, %s, %b, num_groups=1), %x)"), 3, {3, 1, 1}, {{2, 1, 3}, {1}, {1}}, -1, 1, 0},
    {"prelu alpha (n) on 1 channel", PROG("%x: " T("(2, 1, 2)") ", %a: " T("(n)"), "multiply(nn.prelu(%x, %a), %x)"), 2, {3, 1}, {{2, 1, 2}, {1}}, -1, 1, 0},
    /* the other way round: the data's channel `n` matched to a gamma (1) */
    {"instance_norm data (2, n, 3)", PROG("%x: " T("(2, n, 3)") ", %s: " T("(1)") ", %b: " T("(1)"), "multiply(nn.instance_norm(%x, %s, %b), %x)"), 3, {3, 1, 1}, {{2, 1, 3}, {1}, {1}}, -1, 1, 0},
    {"layer_norm data (2, 3, n)", PROG("%x: " T("(2, 3, n)") ", %s: " T("(1)") ", %b: " T("(1)"), "multiply(nn.layer_norm(%x, %s, %b, axis=2), %x)"), 3, {3, 1, 1}, {{2, 3, 1}, {1}, {1}}, -1, 1, 0},
    {"prelu data (2, n, 2)", PROG("%x: " T("(2, n, 2)") ", %a: " T("(1)"), "multiply(nn.prelu(%x, %a), %x)"), 2, {3, 1}, {{2, 1, 2}, {1}}, -1, 1, 0},
    {"bias_add data (2, n)", PROG("%x: " T("(2, n)") ", %b: " T("(1)"), "multiply(nn.bias_add(%x, %b), %x)"), 2, {2, 1}, {{2, 1}, {1}}, -1, 1, 0},
    /* a batch known only at run time */
    {"group_norm data (n, 4, 3)", PROG("%x: " T("(n, 4, 3)") ", %s: " T("(4)") ", %b: " T("(4)"), "multiply(nn.group_norm(%x, %s, %b, num_groups=2), %x)"), 3, {3, 1, 1}, {{2, 4, 3}, {4}, {4}}, -1, 1, 0},
    {"lrn data (n, 5, 2)", PROG("%x: " T("(n, 5, 2)"), "nn.lrn(%x, size=3, axis=1, alpha=0.1f)"), 1, {3}, {{2, 5, 2}}, -1, 1, 0},
    {"pad data (n, 2, 3), padded axes known", PROG("%x: " T("(n, 2, 3)") ", %v: " T("()"), "tanh(nn.pad(%x, %v, pad_width=[[0, 0], [1, 0], [2, 1]]))"), 2, {3, 0}, {{2, 2, 3}, {0}}, -1, 1, 0},
    {"group_norm", PROG("%x: " T("(2, 4, 3)") ", %s: " T("(4)") ", %b: " T("(4)"), "multiply(nn.group_norm(%x, %s, %b, num_groups=2), %x)"), 3, {3, 1, 1}, {{2, 4, 3}, {4}, {4}}, -1, 1, 0},
    {"group_norm axis 2", PROG("%x: " T("(2, 2, 4, 2)") ", %s: " T("(4)") ", %b: " T("(4)"), "multiply(nn.group_norm(%x, %s, %b, num_groups=2, axis=2, scale=False), %x)"), 3, {4, 1, 1}, {{2, 2, 4, 2}, {4}, {4}}, -1, 1, 0},
    {"l2_normalize", PROG("%x: " T("(2, 3)"), "(multiply(nn.l2_normalize(%x, eps=1e-10f, axis=[1]), %x), nn.l2_normalize(%x, eps=100f, axis=[0]))"), 1, {2}, {{2, 3}}, -1, 1, 0},
    {"pad", PROG("%x: " T("(2, 3)") ", %v: " T("()"), "%0 = nn.pad(%x, %v, pad_width=[[1, 0], [2, 1]]);\n  multiply(%0, %0)"), 2, {2, 0}, {{2, 3}, {0}}, -1, 1, 0},
    {"take axis 1 and flat", PROG("%x: " T("(2, 5, 3)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=1);\n  (multiply(%0, %0), take(tanh(%x), %i))"), 2, {3, -1}, {{2, 5, 3}, {4}}, -1, 1, 0},
    /* data of unknown shape: the axis moved first, rows scattered, moved back */
    {"take from (n, 5, 2) along axis 1", PROG("%x: " T("(n, 5, 2)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=1);\n  multiply(%0, tanh(%0))"), 2, {3, -1}, {{2, 5, 2}, {4}}, -1, 1, 0},
    {"take from (n, t, 2), mode fast, and a scalar index", PROG("%x: " T("(n, t, 2)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=1, mode=\"fast\");\n  (tanh(%0), tanh(take(%x, 3, axis=1, mode=\"fast\")))"), 2, {3, -1}, {{2, 5, 2}, {4}}, -1, 1, 0},
    {"take rows of (5, m), wrapped", PROG("%x: " T("(5, m)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=0, mode=\"wrap\");\n  multiply(%0, %0)"), 2, {2, -1}, {{5, 3}, {4}}, -1, 1, 0},
    {"take clipped", PROG("%x: " T("(3, 2)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=0, mode=\"clip\");\n  multiply(%0, %0)"), 2, {2, -1}, {{3, 2}, {4}}, -1, 1, 0},
    {"pad edge reflect, crop", PROG("%x: " T("(3, 4)") ", %v: " T("()"), "%0 = nn.pad(%x, %v, pad_width=[[2, 1], [1, 2]], pad_mode=\"edge\");\n  %1 = nn.pad(%x, %v, pad_width=[[2, 2], [0, 3]], pad_mode=\"reflect\");\n  %2 = nn.pad(%x, %v, pad_width=[[-1, 1], [1, -2]]);\n  (multiply(%0, %0), tanh(%1), multiply(%2, %2))"), 2, {2, 0}, {{3, 4}, {0}}, -1, 1, 0},
    {"mirror_pad", PROG("%x: " T("(1, 3, 4)"), "%0 = nn.mirror_pad(%x, pad_width=[[0, 0], [2, 1], [3, 2]]);\n  %1 = nn.mirror_pad(%x, pad_width=[[0, 0], [1, 2], [1, 0]], mode=\"REFLECT\");\n  (multiply(%0, %0), tanh(%1))"), 1, {3}, {{1, 3, 4}}, -1, 1, 0},
    {"lrn", PROG("%x: " T("(2, 5, 2)"), "multiply(nn.lrn(%x, size=3, bias=1f, alpha=0.5f, beta=0.75f), %x)"), 1, {3}, {{2, 5, 2}}, -1, 1, 0},
    {"lrn axis 2", PROG("%x: " T("(1, 2, 4)"), "nn.lrn(%x, size=5, axis=2, alpha=0.3f)"), 1, {3}, {{1, 2, 4}}, -1, 1, 0},
    {"full full_like", PROG("%x: " T("(2, 3)") ", %v: " T("()"), "(multiply(full(%v, shape=[2, 3], dtype=\"float64\"), %x), multiply(full_like(%x, %v), tanh(%v)))"), 2, {2, 0}, {{2, 3}, {0}}, -1, 1, 0},
    {"take rows", PROG("%x: " T("(5, 3)") ", %i: Tensor[(4), int32]", "%0 = take(%x, %i, axis=0);\n  multiply(%0, %0)"), 2, {2, -1}, {{5, 3}, {4}}, -1, 1, 0},
};

#endif
