/*
 * cl_launch.c (opencl): what the nn family's launch code shares
 * (cl_nn.h): building and running a generated source, the accumulator
 * and element-moving types, scratch tensors on the device's heap.
 */
#include <stdlib.h>

#include "backend/opencl/cl_nn.h"

ry_status ry_cl_gen_run(ry_kernel_ctx *c, char *src, ry_dtype what, size_t n, int nargs,
                        const cl_arg *args) {
    if (!src) {
        if (!ry_cl_type(what))
            return ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name,
                               ry_dtype_name(what));
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    cl_kernel k = ry_cl_kernel(src, "k", c->span, c->err);
    free(src);
    if (!k) return RY_ERR;
    return ry_cl_run(k, n, nargs, args, c->span, c->err);
}

const char *ry_cl_acc_type(ry_dtype dt) {
    return ry_cl.fp64 ? "double" : ry_cl_type(dt);
}

const char *ry_cl_move_type(ry_dtype dt) { return dt == RY_FLOAT16 ? "ushort" : ry_cl_type(dt); }

ry_tensor *ry_cl_scratch(ry_kernel_ctx *c, ry_dtype dt, int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new_on(&ry_cl.heap.alloc, dt, nd, shape);
    if (!t) ry_error_at(c->err, c->span, "%s: out of memory on opencl:%d", c->op->name, ry_cl.index);
    return t;
}
