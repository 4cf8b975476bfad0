/*
 * dk_scan.c (device): cumsum (one work-item per row along the axis,
 * adding in the CPU's order: in double for floats where the device has it,
 * in 64-bit integers that wrap otherwise) and shape_of (the shape is
 * known on the host: it is copied in).
 */
#include <stdlib.h>

#include "backend/device/dk_ops.h"
#include "op/reduce_attrs.h"


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

DK_KERNEL(ry_dk_cumsum) {
    if (nin != 1 || nout != 1) return ry_error_at(c->err, c->span, "cumsum: expected one input");
    DK_DEVICE(nin, in, nout, out);
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    int64_t P, V, Q;
    ry_cumsum_dims(c->op, c->attrs, x, &P, &V, &Q);
    const char *to = ry_dk_type(d, y->dtype), *ti = ry_dk_type(d, x->dtype);
    if (!to || !ti) return ry_dk_no_kernel(d, c, to ? x->dtype : y->dtype);
    bool ints = !ry_dtype_is_float(y->dtype);
    const ry_dialect *dl = d->dialect;
    const char *acc = ints ? dl->i64 : ry_dk_acc_type(d, RY_FLOAT32);
    const char *sub[8] = {dl->kernel, dl->global, dl->index, dl->i64, to, ti, acc, ints ? "1" : "0"};
    ry_dk_kernel *k = ry_dk_template(d, cumsum_src, sub, 8, c->span, c->err);
    if (!k) return RY_ERR;
    ry_karg a[] = {KA_L(P * Q), KA_T(y), KA_T(x), KA_L(V), KA_L(Q ? Q : 1),
                  KA_L(ry_attr_bool(c->op, c->attrs, "exclusive"))};
    return d->launch(k, (size_t)(P * Q), 8, a, c->span, c->err);
}

DK_KERNEL(ry_dk_shape_of) {
    if (nin != 1 || nout != 1 || out[0]->size != in[0]->ndim)
        return ry_error_at(c->err, c->span, "shape_of: expected one input");
    DK_DEVICE(0, in, nout, out);
    ry_tensor *h = ry_tensor_new(out[0]->dtype, out[0]->ndim, out[0]->shape);
    if (!h) return ry_error_at(c->err, c->span, "shape_of: out of memory");
    for (int i = 0; i < in[0]->ndim; i++) ry_tensor_set(h, i, (double)in[0]->shape[i]);
    ry_status st = d->upload(out[0], h->data, ry_tensor_nbytes(h), c->err);
    ry_tensor_release(h);
    return st;
}
