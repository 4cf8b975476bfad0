/*
 * cl_elemwise.c (opencl): every elementwise operator, the fills and the
 * fused elementwise programs, through the one generator (kernel_gen.h) in
 * the OpenCL C dialect. A kernel is specialized on the program, the
 * dtypes, the rank of the collapsed index space and how each input is
 * read (kernel_gen.h), and built once (cl_cache.c).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_gen.h"
#include "backend/opencl/cl_elemwise.h"

static const char *cl_type_or_null(ry_dtype dt) { return ry_cl_type(dt); }

/* float16 without cl_khr_fp16: half pointers through vload_half /
 * vstore_half (OpenCL 1.2 core), the arithmetic in float; vstore_half
 * rounds to nearest even, as the CPU's narrowing does */
static void half_load(ry_sbuf *b, const char *ptr, const char *index) {
    ry_sbuf_add(b, "vload_half(%s, %s)", index, ptr);
}
static void half_store(ry_sbuf *b, const char *ptr, const char *index, const char *value) {
    ry_sbuf_add(b, "vstore_half(%s, %s, %s)", value, index, ptr);
}

const ry_dialect ry_cl_dialect = {
    .name = "opencl",
    /* no contraction into fused multiply-adds: the CPU build has none, so
     * elementwise arithmetic rounds as the CPU rounds it */
    .prelude = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#pragma OPENCL FP_CONTRACT OFF\n",
    .kernel = "__kernel void",
    .global = "__global ",
    .index = "(long)get_global_id(0)",
    .i64 = "long",
    .type = cl_type_or_null,
    .inf = "INFINITY",
    .nan = "NAN",
    .half_storage = "half",
    .half_load = half_load,
    .half_store = half_store,
};

ry_status ry_cl_run_prog(ry_kernel_ctx *c, const ry_fz_prog *p, int nin, ry_tensor *const *in,
                         int nout, ry_tensor *const *out) {
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    int nd[RY_FZ_MAX_IN + 1];
    const int64_t *shapes[RY_FZ_MAX_IN + 1];
    for (int k = 0; k < nin; k++) nd[k] = in[k]->ndim, shapes[k] = in[k]->shape;
    int rank;
    int64_t dims[RY_MAX_RANK], strides[RY_FZ_MAX_IN + 1][RY_MAX_RANK];
    ry_gen_access access[RY_FZ_MAX_IN + 1];
    ry_gen_bcast(nin, nd, shapes, out[0]->ndim, out[0]->shape, &rank, dims, access, strides);
    return ry_cl_launch_prog(c, p, nin, in, nout, out, access, rank, dims, strides);
}

ry_status ry_cl_launch_prog(ry_kernel_ctx *c, const ry_fz_prog *p, int nin, ry_tensor *const *in,
                            int nout, ry_tensor *const *out, const ry_gen_access *access, int rank,
                            const int64_t *dims, const int64_t (*strides)[RY_MAX_RANK]) {
    char *src = ry_gen_elemwise(&ry_cl_dialect, p, access, rank, "k");
    if (!src) {
        for (int k = 0; k < nin; k++)
            if (!ry_cl_type(in[k]->dtype))
                return ry_error_at(c->err, c->span, "%s: %s has no kernel on opencl", c->op->name,
                                   ry_dtype_name(in[k]->dtype));
        return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    }
    cl_kernel k = ry_cl_kernel(src, "k", c->span, c->err);
    free(src);
    if (!k) return RY_ERR;
    cl_arg args[2 + 2 * (RY_FZ_MAX_OUT + RY_FZ_MAX_IN + 1) + RY_MAX_RANK * (RY_FZ_MAX_IN + 2)];
    int n = 0;
    args[n++] = CLA_L(out[0]->size);
    for (int o = 0; o < nout; o++) {
        args[n++] = (cl_arg){CLA_MEM, ry_cl_mem(out[o]), 0, 0};
        args[n++] = CLA_L(ry_cl_off(out[o]));
    }
    for (int i = 0; i < nin; i++) {
        args[n++] = (cl_arg){CLA_MEM, ry_cl_mem(in[i]), 0, 0};
        args[n++] = CLA_L(ry_cl_off(in[i]));
    }
    for (int r = 0; r < rank; r++) args[n++] = CLA_L(dims[r]);
    for (int i = 0; i < nin; i++)
        if (access[i] == RY_GEN_STRIDED)
            for (int r = 0; r < rank; r++) args[n++] = CLA_L(strides[i][r]);
    return ry_cl_run(k, (size_t)out[0]->size, n, args, c->span, c->err);
}

/* An operator of one instruction (add, exp, clip, cast, where, ...). */
ry_status ry_cl_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                         ry_tensor *const *out) {
    int op = ry_fz_opcode_of(c->op->name);
    if (op < 0 || nout != 1 || nin < 1 || nin > 3)
        return ry_error_at(c->err, c->span, "%s: not an elementwise operator", c->op->name);
    double prm[2] = {0, 0};
    if (op == RY_FZ_CLIP) {
        prm[0] = ry_attr_float(c->op, c->attrs, "a_min");
        prm[1] = ry_attr_float(c->op, c->attrs, "a_max");
    } else if (op == RY_FZ_LEAKY) {
        prm[0] = ry_attr_float(c->op, c->attrs, "alpha");
    }
    ry_dtype dts[3];
    for (int i = 0; i < nin; i++) dts[i] = in[i]->dtype;
    ry_fz_prog p;
    ry_gen_single(&p, (ry_fz_opcode)op, nin, dts, out[0]->dtype, prm);
    return ry_cl_run_prog(c, &p, nin, in, nout, out);
}

/* out = the scalar in[src] cast to out's dtype, or 0 / 1 (src < 0: -1, -2). */
static ry_status fill(ry_kernel_ctx *c, ry_tensor *const *in, ry_tensor *out, int src) {
    ry_fz_prog p;
    ry_dtype dt = src >= 0 ? in[src]->dtype : out->dtype;
    if (src >= 0) {
        ry_gen_single(&p, RY_FZ_CAST, 1, &dt, out->dtype, NULL);
        return ry_cl_run_prog(c, &p, 1, &in[src], 1, &out);
    }
    ry_gen_single(&p, src == -1 ? RY_FZ_ZEROS : RY_FZ_ONES, 0, &dt, out->dtype, NULL);
    return ry_cl_run_prog(c, &p, 0, NULL, 1, &out);
}

ry_status ry_cl_zeros(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], -1);
}
ry_status ry_cl_ones(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], -2);
}
ry_status ry_cl_full(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    return fill(c, in, out[0], 0);
}
ry_status ry_cl_full_like(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                          ry_tensor *const *out) {
    return fill(c, in, out[0], 1);
}
/* copy, stop_gradient, broadcast_to(_like): a copy broadcast to the result */
ry_status ry_cl_copy_to(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out) {
    ry_fz_prog p;
    ry_dtype dt = in[0]->dtype;
    ry_gen_single(&p, RY_FZ_COPY, 1, &dt, dt, NULL);
    return ry_cl_run_prog(c, &p, 1, in, 1, out);
}

/* fused.elemwiseN: the call's program (src/op/fused_prog.c, cached) */
ry_status ry_cl_fused_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                               ry_tensor *const *out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    if (nin > RY_FZ_MAX_IN)
        return ry_error_at(c->err, c->span, "%s: too many inputs", c->op->name);
    for (int i = 0; i < nin; i++) dts[i] = in[i]->dtype;
    const ry_fz_prog *p = ry_fz_get(ry_attr_str(c->op, c->attrs, "code"), false, nin, dts, c->span, c->err);
    if (!p) return RY_ERR;
    return ry_cl_run_prog(c, p, nin, in, nout, out);
}
