/*
 * dk_table.c (device): the kernel table of every device target: each
 * kernel here is generated (dk_elemwise.c, dk_reduce.c and the nn family)
 * or the device's BLAS (dk_gemm.c), written once against
 * device_kernels.h. An operator the table lacks is a compile-time error
 * naming it (vm_compile.c), never a fallback to the CPU. Elementwise
 * kernels may write over a same-shape argument: each work-item reads its
 * own element before writing it.
 */
#include <pthread.h>

#include "backend/device/dk_ops.h"

#define EW(name) {name, ry_dk_elemwise, RY_KERNEL_INPLACE}
static const ry_kernel table[] = {
    EW("add"), EW("subtract"), EW("multiply"), EW("divide"), EW("power"), EW("maximum"),
    EW("minimum"), {"equal", ry_dk_elemwise, 0}, {"not_equal", ry_dk_elemwise, 0},
    {"less", ry_dk_elemwise, 0}, {"less_equal", ry_dk_elemwise, 0}, {"greater", ry_dk_elemwise, 0},
    {"greater_equal", ry_dk_elemwise, 0}, {"logical_and", ry_dk_elemwise, 0},
    {"logical_or", ry_dk_elemwise, 0}, EW("negative"), EW("exp"), EW("log"), EW("sqrt"),
    EW("rsqrt"), EW("tanh"), EW("sigmoid"), EW("abs"), EW("nn.relu"), EW("nn.leaky_relu"),
    EW("clip"), {"logical_not", ry_dk_elemwise, 0}, EW("where"), {"cast", ry_dk_elemwise, 0},
    {"zeros", ry_dk_zeros, 0}, {"ones", ry_dk_ones, 0}, {"full", ry_dk_full, 0},
    {"zeros_like", ry_dk_zeros, RY_KERNEL_INPLACE}, {"ones_like", ry_dk_ones, RY_KERNEL_INPLACE},
    {"full_like", ry_dk_full_like, 0}, {"broadcast_to", ry_dk_copy_to, 0},
    {"broadcast_to_like", ry_dk_copy_to, 0}, {"collapse_sum_like", ry_dk_collapse_sum_like, 0},
    {"copy", ry_dk_copy_to, 0}, {"stop_gradient", ry_dk_copy_to, 0},
    {"nn.dense", ry_dk_dense_f16, 0}, {"nn.matmul", ry_dk_matmul_f16, 0},
    {"nn.batch_matmul", ry_dk_batch_matmul_f16, 0}, {"nn.softmax", ry_dk_softmax, 0},
    {"nn.log_softmax", ry_dk_log_softmax, 0}, {"nn.fast_softmax", ry_dk_softmax, 0},
    {"nn.batch_flatten", ry_dk_reshape, 0}, {"sum", ry_dk_reduce, 0}, {"mean", ry_dk_reduce, 0},
    {"max", ry_dk_reduce, 0}, {"min", ry_dk_reduce, 0}, {"argmax", ry_dk_reduce, 0},
    {"argmin", ry_dk_reduce, 0}, {"reshape", ry_dk_reshape, 0}, {"reshape_like", ry_dk_reshape, 0},
    {"expand_dims", ry_dk_reshape, 0}, {"squeeze", ry_dk_reshape, 0},
    {"transpose", ry_dk_transpose, 0}, {"cumsum", ry_dk_cumsum, 0}, {"shape_of", ry_dk_shape_of, 0}, {"take", ry_dk_take, 0}, {"split", ry_dk_split, 0},
    {"concatenate", ry_dk_concatenate, 0}, {"nn.bias_add", ry_dk_bias_add, 0},
    /* the nn family (dk_conv.c, dk_norm.c, dk_nn.c, dk_scatter.c) */
    {"nn.conv2d", ry_dk_conv2d, 0}, {"nn.conv2d_transpose", ry_dk_conv2d_transpose, 0},
    {"nn.conv2d_backward_weight", ry_dk_conv2d_backward_weight, 0},
    {"nn.max_pool2d", ry_dk_max_pool2d, 0}, {"nn.avg_pool2d", ry_dk_avg_pool2d, 0},
    {"nn.max_pool2d_grad", ry_dk_max_pool2d_grad, 0}, {"nn.avg_pool2d_grad", ry_dk_avg_pool2d_grad, 0},
    {"nn.global_avg_pool2d", ry_dk_adaptive_avg_pool2d, 0},
    {"nn.global_max_pool2d", ry_dk_adaptive_max_pool2d, 0},
    {"nn.adaptive_avg_pool2d", ry_dk_adaptive_avg_pool2d, 0},
    {"nn.adaptive_max_pool2d", ry_dk_adaptive_max_pool2d, 0},
    {"nn.batch_norm", ry_dk_batch_norm, 0}, {"nn.layer_norm", ry_dk_layer_norm, 0},
    {"nn.instance_norm", ry_dk_instance_norm, 0}, {"nn.group_norm", ry_dk_group_norm, 0},
    {"nn.l2_normalize", ry_dk_l2_normalize, 0}, {"nn.lrn", ry_dk_lrn, 0},
    {"nn.pad", ry_dk_pad, 0}, {"nn.mirror_pad", ry_dk_pad, 0}, {"nn.prelu", ry_dk_prelu, 0},
    {"nn.cross_entropy", ry_dk_cross_entropy, 0},
    {"nn.cross_entropy_with_logits", ry_dk_cross_entropy_with_logits, 0},
    {"nn.dropout", ry_dk_dropout, 0}, {"one_hot", ry_dk_one_hot, 0}, {"stack", ry_dk_stack, 0},
    {"gather_nd", ry_dk_gather_nd, 0}, {"scatter_nd", ry_dk_scatter_nd, 0},
    {"fused.elemwise1", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise2", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise3", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise4", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise5", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise6", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise7", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise8", ry_dk_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.matmul2", ry_dk_fused_matmul, 0}, {"fused.matmul3", ry_dk_fused_matmul, 0},
    {"fused.matmul4", ry_dk_fused_matmul, 0}, {"fused.matmul5", ry_dk_fused_matmul, 0},
    {"fused.matmul6", ry_dk_fused_matmul, 0}, {"fused.matmul7", ry_dk_fused_matmul, 0},
    {"fused.matmul8", ry_dk_fused_matmul, 0},
};
#define NTABLE (int)(sizeof table / sizeof table[0])

#define MAX_OPS 512
static const ry_kernel *by_index[MAX_OPS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) { ry_kernel_table_index("device", table, NTABLE, by_index, MAX_OPS); }

const ry_kernel *ry_dk_kernel_of(const ry_op *op) {
    pthread_once(&once, build);
    int i = ry_op_index(op);
    return i >= 0 && i < MAX_OPS ? by_index[i] : NULL;
}
