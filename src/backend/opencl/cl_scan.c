/*
 * cl_scan.c (opencl): cumsum (one work-item per row along the axis,
 * adding in the CPU's order: in double for floats where the device has it,
 * in 64-bit integers that wrap otherwise) and shape_of (the shape is
 * known on the host: it is copied in).
 */
#include <stdlib.h>

#include "backend/opencl/cl_elemwise.h"
#include "op/reduce_attrs.h"

extern const ry_dialect ry_cl_dialect;

/* @0 kernel, @1 global, @2 index, @3 i64, @4 result type, @5 input type,
 * @6 accumulator, @7 1 for integer accumulation */
static const char *cumsum_src =
    "@0 k(@3 n, @1@4 *y, @3 yo, @1const @5 *x, @3 xo, @3 V, @3 Q, @3 excl) {\n"
    "    @3 i = @2; if (i >= n) return;\n"
    "    @3 p = i / Q, q = i % Q;\n"
    "    @6 acc = 0;\n"
    "    for (@3 j = 0; j < V; j++) {\n"
    "        @3 at = (p * V + j) * Q + q;\n"
    "        @6 v = (@6)x[xo + at];\n"
    "        if (excl) y[yo + at] = (@4)acc;\n"
    "        if (@7) acc = (@6)((unsigned @3)acc + (unsigned @3)v); else acc = acc + v;\n"
    "        if (!excl) y[yo + at] = (@4)acc;\n"
    "    }\n"
    "}\n";

CL_KERNEL(ry_cl_cumsum) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "cumsum: expected one input");
    if (ry_cl_check_args(c, nin, in, nout, out)) return RY_ERR;
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    int64_t P, V, Q;
    ry_cumsum_dims(c->op, c->attrs, x, &P, &V, &Q);
    const char *to = ry_cl_type(y->dtype), *ti = ry_cl_type(x->dtype);
    if (!to || !ti)
        return ry_error_at(c->err, c->span, "cumsum: %s has no kernel on opencl",
                           ry_dtype_name(to ? x->dtype : y->dtype));
    bool ints = !ry_dtype_is_float(y->dtype);
    const char *acc = ints ? "long" : ry_cl.fp64 ? "double" : "float";
    const ry_dialect *d = &ry_cl_dialect;
    const char *sub[8] = {d->kernel, d->global, d->index, d->i64, to, ti, acc, ints ? "1" : "0"};
    cl_kernel k = ry_cl_template(cumsum_src, sub, 8, c->span, c->err);
    if (!k) return RY_ERR;
    cl_arg a[] = {CLA_L(P * Q), CLA_T(y), CLA_T(x), CLA_L(V), CLA_L(Q ? Q : 1),
                  CLA_L(ry_attr_bool(c->op, c->attrs, "exclusive"))};
    return ry_cl_run(k, (size_t)(P * Q), 8, a, c->span, c->err);
}

CL_KERNEL(ry_cl_shape_of) {
    if (nin != 1 || nout != 1 || out[0]->size != in[0]->ndim)
        return ry_error_at(c->err, c->span, "shape_of: expected one input");
    if (ry_cl_check_args(c, 0, in, nout, out)) return RY_ERR;
    ry_tensor *h = ry_tensor_new(out[0]->dtype, out[0]->ndim, out[0]->shape);
    if (!h) return ry_error_at(c->err, c->span, "shape_of: out of memory");
    for (int i = 0; i < in[0]->ndim; i++) ry_tensor_set(h, i, (double)in[0]->shape[i]);
    ry_status st = ry_cl_upload(out[0], h->data, ry_tensor_nbytes(h), c->err);
    ry_tensor_release(h);
    return st;
}
