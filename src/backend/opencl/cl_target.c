/*
 * cl_target.c (opencl): the OpenCL target as a value: its kernel table
 * (every kernel here is generated, cl_elemwise.c and cl_reduce.c, or a
 * CLBlast GEMM, cl_gemm.c), its memory (the device's caching allocator,
 * device_alloc.h) and its copies. An operator the table lacks is a
 * compile-time error naming it (vm_compile.c), never a fallback to the
 * CPU. Elementwise kernels may write over a same-shape argument: each
 * work-item reads its own element before writing it.
 */
#include <pthread.h>

#include "backend/opencl/cl_elemwise.h"
#include "backend/opencl/cl_nn.h"

#define EW(name) {name, ry_cl_elemwise, RY_KERNEL_INPLACE}
static const ry_kernel table[] = {
    EW("add"), EW("subtract"), EW("multiply"), EW("divide"), EW("power"), EW("maximum"),
    EW("minimum"), {"equal", ry_cl_elemwise, 0}, {"not_equal", ry_cl_elemwise, 0},
    {"less", ry_cl_elemwise, 0}, {"less_equal", ry_cl_elemwise, 0}, {"greater", ry_cl_elemwise, 0},
    {"greater_equal", ry_cl_elemwise, 0}, {"logical_and", ry_cl_elemwise, 0},
    {"logical_or", ry_cl_elemwise, 0}, EW("negative"), EW("exp"), EW("log"), EW("sqrt"),
    EW("rsqrt"), EW("tanh"), EW("sigmoid"), EW("abs"), EW("nn.relu"), EW("nn.leaky_relu"),
    EW("clip"), {"logical_not", ry_cl_elemwise, 0}, EW("where"), {"cast", ry_cl_elemwise, 0},
    {"zeros", ry_cl_zeros, 0}, {"ones", ry_cl_ones, 0}, {"full", ry_cl_full, 0},
    {"zeros_like", ry_cl_zeros, RY_KERNEL_INPLACE}, {"ones_like", ry_cl_ones, RY_KERNEL_INPLACE},
    {"full_like", ry_cl_full_like, 0}, {"broadcast_to", ry_cl_copy_to, 0},
    {"broadcast_to_like", ry_cl_copy_to, 0}, {"collapse_sum_like", ry_cl_collapse_sum_like, 0},
    {"copy", ry_cl_copy_to, 0}, {"stop_gradient", ry_cl_copy_to, 0},
    {"nn.dense", ry_cl_dense_f16, 0}, {"nn.matmul", ry_cl_matmul_f16, 0},
    {"nn.batch_matmul", ry_cl_batch_matmul_f16, 0}, {"nn.softmax", ry_cl_softmax, 0},
    {"nn.log_softmax", ry_cl_log_softmax, 0}, {"nn.fast_softmax", ry_cl_softmax, 0},
    {"nn.batch_flatten", ry_cl_reshape, 0}, {"sum", ry_cl_reduce, 0}, {"mean", ry_cl_reduce, 0},
    {"max", ry_cl_reduce, 0}, {"min", ry_cl_reduce, 0}, {"argmax", ry_cl_reduce, 0},
    {"argmin", ry_cl_reduce, 0}, {"reshape", ry_cl_reshape, 0}, {"reshape_like", ry_cl_reshape, 0},
    {"expand_dims", ry_cl_reshape, 0}, {"squeeze", ry_cl_reshape, 0},
    {"transpose", ry_cl_transpose, 0}, {"cumsum", ry_cl_cumsum, 0}, {"shape_of", ry_cl_shape_of, 0}, {"take", ry_cl_take, 0}, {"split", ry_cl_split, 0},
    {"concatenate", ry_cl_concatenate, 0}, {"nn.bias_add", ry_cl_bias_add, 0},
    /* the nn family (cl_conv.c, cl_norm.c, cl_nn.c, cl_scatter.c) */
    {"nn.conv2d", ry_cl_conv2d, 0}, {"nn.conv2d_transpose", ry_cl_conv2d_transpose, 0},
    {"nn.conv2d_backward_weight", ry_cl_conv2d_backward_weight, 0},
    {"nn.max_pool2d", ry_cl_max_pool2d, 0}, {"nn.avg_pool2d", ry_cl_avg_pool2d, 0},
    {"nn.max_pool2d_grad", ry_cl_max_pool2d_grad, 0}, {"nn.avg_pool2d_grad", ry_cl_avg_pool2d_grad, 0},
    {"nn.global_avg_pool2d", ry_cl_adaptive_avg_pool2d, 0},
    {"nn.global_max_pool2d", ry_cl_adaptive_max_pool2d, 0},
    {"nn.adaptive_avg_pool2d", ry_cl_adaptive_avg_pool2d, 0},
    {"nn.adaptive_max_pool2d", ry_cl_adaptive_max_pool2d, 0},
    {"nn.batch_norm", ry_cl_batch_norm, 0}, {"nn.layer_norm", ry_cl_layer_norm, 0},
    {"nn.instance_norm", ry_cl_instance_norm, 0}, {"nn.group_norm", ry_cl_group_norm, 0},
    {"nn.l2_normalize", ry_cl_l2_normalize, 0}, {"nn.lrn", ry_cl_lrn, 0},
    {"nn.pad", ry_cl_pad, 0}, {"nn.mirror_pad", ry_cl_pad, 0}, {"nn.prelu", ry_cl_prelu, 0},
    {"nn.cross_entropy", ry_cl_cross_entropy, 0},
    {"nn.cross_entropy_with_logits", ry_cl_cross_entropy_with_logits, 0},
    {"nn.dropout", ry_cl_dropout, 0}, {"one_hot", ry_cl_one_hot, 0}, {"stack", ry_cl_stack, 0},
    {"gather_nd", ry_cl_gather_nd, 0}, {"scatter_nd", ry_cl_scatter_nd, 0},
    {"fused.elemwise1", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise2", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise3", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise4", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise5", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise6", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise7", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.elemwise8", ry_cl_fused_elemwise, RY_KERNEL_INPLACE},
    {"fused.matmul2", ry_cl_fused_matmul, 0}, {"fused.matmul3", ry_cl_fused_matmul, 0},
    {"fused.matmul4", ry_cl_fused_matmul, 0}, {"fused.matmul5", ry_cl_fused_matmul, 0},
    {"fused.matmul6", ry_cl_fused_matmul, 0}, {"fused.matmul7", ry_cl_fused_matmul, 0},
    {"fused.matmul8", ry_cl_fused_matmul, 0},
};
#define NTABLE (int)(sizeof table / sizeof table[0])

#define MAX_OPS 512
static const ry_kernel *by_index[MAX_OPS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) { ry_kernel_table_index("OpenCL", table, NTABLE, by_index, MAX_OPS); }

const ry_kernel *ry_cl_kernel_of(const ry_op *op) {
    pthread_once(&once, build);
    int i = ry_op_index(op);
    return i >= 0 && i < MAX_OPS ? by_index[i] : NULL;
}

/* ---- memory: one caching allocator per device, shared by programs ---- */

static ry_allocator *allocator(void) { return &ry_cl.heap.alloc; }
static ry_pool *pool_new(void) { return (ry_pool *)&ry_cl.heap; }
static ry_allocator *pool_allocator(ry_pool *p) { return &ry_cl.heap.alloc; }
static void pool_close(ry_pool *p) {}
static long pool_kept(ry_pool *p) { return 0; }
static size_t capacity(const ry_tensor *t) {
    return t->alloc == &ry_cl.heap.alloc ? ry_devbuf_bytes(t) : 0;
}
static ry_device dev(void) { return (ry_device){RY_DEVICE_OPENCL, ry_cl.index}; }

const ry_target ry_opencl_target = {
    .name = "opencl",
    .device = RY_DEVICE_OPENCL,
    .open = ry_cl_open,
    .dev = dev,
    .upload = ry_cl_upload,
    .download = ry_cl_download,
    .copy = ry_cl_copy,
    .counters = ry_cl_counters,
    .devices = ry_cl_devices,
    .prof_begin = ry_cl_prof_begin,
    .prof_end = ry_cl_prof_end,
    .kernel = ry_cl_kernel_of,
    .allocator = allocator,
    .pool_new = pool_new,
    .pool_allocator = pool_allocator,
    .pool_close = pool_close,
    .pool_kept = pool_kept,
    .capacity = capacity,
    .update = ry_cl_update,
    .grad_scan = ry_cl_grad_scan,
    .grad_add = ry_cl_grad_add,
    .grad_clip = ry_cl_grad_clip,
    .grad_zero = ry_cl_grad_zero,
    .grad_scale = ry_cl_grad_scale,
    .sync = ry_cl_sync,
};
