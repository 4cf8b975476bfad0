/*
 * kernels.c (cpu): the CPU target's kernel table: for each operator of the
 * registry, its kernel and the kernel's facts (target.h): INPLACE where it
 * computes out[i] from in[i] (and broadcast operands) elementwise, or only
 * writes out, so that writing the result over a same-shape argument reads
 * each element before writing it (GEMMs, reductions, softmax and layout
 * changes read elements after writing others and are not); ROWS where the
 * compiled engine has a row-sparse rule for the operator
 * (src/runtime/rows_ops.h). The table is indexed by registry position once
 * (ry_op_index), so finding a kernel costs an array read.
 */
#include <pthread.h>

#include "backend/cpu/conv_kernels.h"
#include "backend/cpu/cpu_target.h"
#include "backend/cpu/elemwise_kernels.h"
#include "backend/cpu/fused_kernels.h"
#include "backend/cpu/nn_kernels.h"
#include "backend/cpu/scatter_kernels.h"
#include "backend/cpu/transform_kernels.h"

static const ry_kernel table[] = {
    {"add", ry_cpu_add, RY_KERNEL_INPLACE | RY_KERNEL_ROWS},
    {"subtract", ry_cpu_subtract, RY_KERNEL_INPLACE},
    {"multiply", ry_cpu_multiply, RY_KERNEL_INPLACE},
    {"divide", ry_cpu_divide, RY_KERNEL_INPLACE},
    {"power", ry_cpu_power, RY_KERNEL_INPLACE},
    {"maximum", ry_cpu_maximum, RY_KERNEL_INPLACE},
    {"minimum", ry_cpu_minimum, RY_KERNEL_INPLACE},
    {"equal", ry_cpu_equal, 0},
    {"not_equal", ry_cpu_not_equal, 0},
    {"less", ry_cpu_less, 0},
    {"less_equal", ry_cpu_less_equal, 0},
    {"greater", ry_cpu_greater, 0},
    {"greater_equal", ry_cpu_greater_equal, 0},
    {"logical_and", ry_cpu_logical_and, 0},
    {"logical_or", ry_cpu_logical_or, 0},
    {"negative", ry_cpu_negative, RY_KERNEL_INPLACE},
    {"exp", ry_cpu_exp, RY_KERNEL_INPLACE},
    {"log", ry_cpu_log, RY_KERNEL_INPLACE},
    {"sqrt", ry_cpu_sqrt, RY_KERNEL_INPLACE},
    {"rsqrt", ry_cpu_rsqrt, RY_KERNEL_INPLACE},
    {"tanh", ry_cpu_tanh, RY_KERNEL_INPLACE},
    {"sigmoid", ry_cpu_sigmoid, RY_KERNEL_INPLACE},
    {"abs", ry_cpu_abs, RY_KERNEL_INPLACE},
    {"nn.relu", ry_cpu_relu, RY_KERNEL_INPLACE},
    {"nn.leaky_relu", ry_cpu_leaky_relu, RY_KERNEL_INPLACE},
    {"clip", ry_cpu_clip, RY_KERNEL_INPLACE},
    {"logical_not", ry_cpu_logical_not, 0},
    {"where", ry_cpu_where, RY_KERNEL_INPLACE},
    {"cast", ry_cpu_cast, 0},
    {"zeros", ry_cpu_zeros, 0},
    {"ones", ry_cpu_ones, 0},
    {"full", ry_cpu_full, 0},
    {"zeros_like", ry_cpu_zeros_like, RY_KERNEL_INPLACE | RY_KERNEL_ROWS},
    {"ones_like", ry_cpu_ones_like, RY_KERNEL_INPLACE},
    {"full_like", ry_cpu_full_like, 0},
    {"broadcast_to", ry_cpu_broadcast_to, 0},
    {"broadcast_to_like", ry_cpu_broadcast_to_like, 0},
    {"collapse_sum_like", ry_cpu_collapse_sum_like, 0},
    {"copy", ry_cpu_copy, 0},
    {"stop_gradient", ry_cpu_copy, 0},
    {"nn.dense", ry_cpu_dense, 0},
    {"nn.matmul", ry_cpu_matmul, 0},
    {"nn.batch_matmul", ry_cpu_batch_matmul, 0},
    {"nn.bias_add", ry_cpu_bias_add, 0},
    {"nn.softmax", ry_cpu_softmax, 0},
    {"nn.log_softmax", ry_cpu_log_softmax, 0},
    {"nn.batch_flatten", ry_cpu_batch_flatten, 0},
    {"nn.pad", ry_cpu_pad, 0},
    {"nn.mirror_pad", ry_cpu_pad, 0},
    {"nn.batch_norm", ry_cpu_batch_norm, 0},
    {"nn.layer_norm", ry_cpu_layer_norm, 0},
    {"nn.dropout", ry_cpu_dropout, 0},
    {"nn.fast_softmax", ry_cpu_softmax, 0},
    {"nn.prelu", ry_cpu_prelu, 0},
    {"nn.instance_norm", ry_cpu_instance_norm, 0},
    {"nn.group_norm", ry_cpu_group_norm, 0},
    {"nn.lrn", ry_cpu_lrn, 0},
    {"nn.l2_normalize", ry_cpu_l2_normalize, 0},
    {"nn.cross_entropy", ry_cpu_cross_entropy, 0},
    {"nn.cross_entropy_with_logits", ry_cpu_cross_entropy_with_logits, 0},
    {"nn.conv2d", ry_cpu_conv2d, 0},
    {"nn.conv2d_transpose", ry_cpu_conv2d_transpose, 0},
    {"nn.max_pool2d", ry_cpu_max_pool2d, 0},
    {"nn.avg_pool2d", ry_cpu_avg_pool2d, 0},
    {"nn.global_avg_pool2d", ry_cpu_global_avg_pool2d, 0},
    {"nn.global_max_pool2d", ry_cpu_adaptive_max_pool2d, 0},
    {"nn.adaptive_avg_pool2d", ry_cpu_adaptive_avg_pool2d, 0},
    {"nn.adaptive_max_pool2d", ry_cpu_adaptive_max_pool2d, 0},
    {"nn.conv2d_backward_weight", ry_cpu_conv2d_backward_weight, 0},
    {"nn.max_pool2d_grad", ry_cpu_max_pool2d_grad, 0},
    {"nn.avg_pool2d_grad", ry_cpu_avg_pool2d_grad, 0},
    {"sum", ry_cpu_reduce_sum, 0},
    {"mean", ry_cpu_reduce_mean, 0},
    {"max", ry_cpu_reduce_max, 0},
    {"min", ry_cpu_reduce_min, 0},
    {"argmax", ry_cpu_reduce_argmax, 0},
    {"argmin", ry_cpu_reduce_argmin, 0},
    {"reshape", ry_cpu_reshape, RY_KERNEL_ROWS},
    {"reshape_like", ry_cpu_reshape, 0},
    {"transpose", ry_cpu_transpose, 0},
    {"concatenate", ry_cpu_concatenate, 0},
    {"split", ry_cpu_split, 0},
    {"take", ry_cpu_take, 0},
    {"expand_dims", ry_cpu_reshape, 0},
    {"squeeze", ry_cpu_reshape, 0},
    {"stack", ry_cpu_stack, 0},
    {"shape_of", ry_cpu_shape_of, 0},
    {"cumsum", ry_cpu_cumsum, 0},
    {"one_hot", ry_cpu_one_hot, 0},
    {"scatter_nd", ry_cpu_scatter_nd, RY_KERNEL_ROWS},
    {"gather_nd", ry_cpu_gather_nd, 0},
    {"fused.elemwise1", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise2", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise3", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise4", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise5", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise6", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise7", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise8", ry_cpu_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.matmul2", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul3", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul4", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul5", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul6", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul7", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
    {"fused.matmul8", ry_cpu_fused_matmul, RY_KERNEL_INPLACE_EPILOGUE},
};
#define NTABLE (int)(sizeof table / sizeof table[0])

/* registry position -> table entry (NULL: no CPU kernel) */
#define MAX_OPS 512
static const ry_kernel *by_index[MAX_OPS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) { ry_kernel_table_index("CPU", table, NTABLE, by_index, MAX_OPS); }

const ry_kernel *ry_cpu_kernel(const ry_op *op) {
    pthread_once(&once, build);
    int i = ry_op_index(op);
    return i >= 0 ? by_index[i] : NULL;
}
