/*
 * scan.c: the CPU kernel of cumsum, the running sum along one axis (or over
 * the flattened data), inclusive or exclusive. Sequential along the axis by
 * nature: each output is the one before plus one input, in index order, so
 * the result is the same at any thread count. Floats accumulate in double,
 * integers in 64 bits (stored in the result's dtype, wrapping as TVM does).
 */
#include <string.h>

#include "backend/cpu/transform_kernels.h"
#include "op/reduce_attrs.h"

/* integer element i of t, exactly (ry_tensor_get goes through double) */
static int64_t get_int(const ry_tensor *t, int64_t i) {
    switch (t->dtype) {
    case RY_INT64: return ((const int64_t *)t->data)[i];
    case RY_INT32: return ((const int32_t *)t->data)[i];
    default: return (int64_t)ry_tensor_get(t, i); /* 8 and 16 bits, bool: exact in double */
    }
}

/* the sum modulo the dtype's width (ry_tensor_set would saturate) */
static void set_int(ry_tensor *t, int64_t i, int64_t v) {
    switch (t->dtype) {
    case RY_INT64: ((int64_t *)t->data)[i] = v; break;
    case RY_INT32: ((int32_t *)t->data)[i] = (int32_t)(uint32_t)v; break;
    case RY_INT16: ((int16_t *)t->data)[i] = (int16_t)(uint16_t)v; break;
    case RY_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case RY_INT8: ((int8_t *)t->data)[i] = (int8_t)(uint8_t)v; break;
    case RY_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    default: ry_tensor_set(t, i, (double)v); break;
    }
}

/* x as (P, V, Q) around the axis: y[p, j, q] = sum over k <= j (k < j) */
ry_status ry_cpu_cumsum(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout, ry_tensor *const *out) {
    const ry_tensor *x = in[0];
    ry_tensor *y = out[0];
    int64_t P, V, Q;
    ry_cumsum_dims(c->op, c->attrs, x, &P, &V, &Q);
    bool excl = ry_attr_bool(c->op, c->attrs, "exclusive");
    bool ints = !ry_dtype_is_float(y->dtype);
    for (int64_t p = 0; p < P; p++)
        for (int64_t q = 0; q < Q; q++) {
            double acc = 0;
            int64_t iacc = 0;
            for (int64_t j = 0; j < V; j++) {
                int64_t at = (p * V + j) * Q + q;
                if (ints) {
                    int64_t v = ry_dtype_is_float(x->dtype) ? (int64_t)ry_tensor_get(x, at) : get_int(x, at);
                    if (excl) set_int(y, at, iacc);
                    iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
                    if (!excl) set_int(y, at, iacc);
                } else {
                    double v = ry_tensor_get(x, at);
                    if (excl) ry_tensor_set(y, at, acc);
                    acc += v;
                    if (!excl) ry_tensor_set(y, at, acc);
                }
            }
        }
    return RY_OK;
}
