/*
 * reduce.c: the reduction operator family: sum, mean, max, min, argmax and
 * argmin. Each entry holds TVM's name, its attributes with TVM's C++
 * defaults, its type relation (rule in one line above it); kernels are each
 * target's (the CPU's in src/backend/cpu/reduce.c). Gradient rules: .grad
 * points at src/op/grad_transform.c; argmax and argmin are no_grad.
 */
#include "op/families.h"
#include "op/grad_rules.h"
#include "op/reduce_attrs.h"
#include "op/transform_rel.h"

/* reduce_attrs.h */
bool ry_reduce_mask(const ry_op *op, const ry_attrs *attrs, int ndim, bool mask[RY_MAX_RANK]) {
    int64_t axes[RY_MAX_RANK];
    int n = ry_attr_ints(op, attrs, "axis", axes, RY_MAX_RANK);
    bool exclude = ry_attr_bool(op, attrs, "exclude");
    if (n > RY_MAX_RANK) return false;
    /* None or [] reduces every axis, whatever exclude says (TVM's
     * GetReduceAxes) */
    for (int d = 0; d < RY_MAX_RANK; d++) mask[d] = n <= 0;
    if (n <= 0) return true;
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + ndim : axes[i];
        if (a < 0 || a >= ndim || mask[a]) return false;
        mask[a] = true;
    }
    if (exclude)
        for (int d = 0; d < ndim; d++) mask[d] = !mask[d];
    return true;
}

/* ---- reductions ---- */

/* reduce: (d0, ..., dn-1) -> the dims not reduced (reduced ones kept as 1
 * with keepdims); axis=None or [] reduces every dim; exclude reduces the
 * dims not listed. */
static ry_rel_status reduce_shape(ry_rel_ctx *c, const ry_type *x, ry_dtype out_dtype,
                                  ry_type **out) {
    int n = x->tensor.ndim, na;
    int64_t axes[RY_MAX_RANK];
    if (!read_ints(c, "axis", axes, RY_MAX_RANK, &na)) return RY_REL_FAIL;
    bool seen[RY_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int a;
        if (!norm_axis(c, "axis", axes[i], n, false, &a)) return RY_REL_FAIL;
        if (seen[a]) return fail(c, attr_span(c, "axis"), "%s: axis %d is listed twice", nm(c), a);
        seen[a] = true;
    }
    bool mask[RY_MAX_RANK];
    if (!ry_reduce_mask(c->op, c->attrs, n, mask))
        return fail(c, attr_span(c, "axis"), "%s: invalid axes", nm(c));
    bool keep = ry_attr_bool(c->op, c->attrs, "keepdims");
    ry_dim dims[RY_MAX_RANK];
    int k = 0;
    for (int d = 0; d < n; d++) {
        if (!mask[d])
            dims[k++] = x->tensor.dims[d];
        else if (keep)
            dims[k++] = cdim(1);
    }
    *out = tensor_type(c, out_dtype, k, dims);
    return RY_REL_OK;
}

/* mean: numeric (not bool) -> same dtype */
static ry_rel_status rel_mean(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    if (args[0]->tensor.dtype == RY_BOOL)
        return fail(c, c->span, "%s: dtype bool is not supported (cast to a number first)", nm(c));
    return reduce_shape(c, args[0], args[0]->tensor.dtype, out);
}

/* sum, max, min: any dtype -> same dtype (sum of bool is a logical or, as
 * in TVM's topi::sum) */
static ry_rel_status rel_max(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    return reduce_shape(c, args[0], args[0]->tensor.dtype, out);
}

/* argmax, argmin: any dtype -> int32 */
static ry_rel_status rel_argmax(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    if (!check_nargs(c, nargs)) return RY_REL_FAIL;
    ry_rel_status s = tensor_arg(c, args[0], "data");
    if (s != RY_REL_OK) return s;
    return reduce_shape(c, args[0], RY_INT32, out);
}

/* ---- the table ---- */

/* clang-format off */
#define REDUCE_ATTRS \
    3, {{"axis", RY_ANONE}, {"keepdims", RY_ABOOL(false)}, {"exclude", RY_ABOOL(false)}}
#define ARGREDUCE_ATTRS \
    4, {{"axis", RY_ANONE}, {"keepdims", RY_ABOOL(false)}, \
        {"select_last_index", RY_ABOOL(false)}, {"exclude", RY_ABOOL(false)}}

const ry_op ry_ops_reduce[] = {
    {"sum", 1, RY_PAT_COMM_REDUCE, REDUCE_ATTRS, rel_max,
     "sum: (d...) -> d without the reduced axes; any dtype (bool: or)",
     ry_grad_sum, false, false, false, false, NULL, RY_BATCH_NO},
    {"mean", 1, RY_PAT_COMM_REDUCE, REDUCE_ATTRS, rel_mean,
     "mean: (d...) -> d without the reduced axes; integers divide with truncation",
     ry_grad_mean, false, false, false, false, NULL, RY_BATCH_NO},
    {"max", 1, RY_PAT_COMM_REDUCE, REDUCE_ATTRS, rel_max,
     "max: (d...) -> d without the reduced axes",
     ry_grad_max, false, false, false, false, NULL, RY_BATCH_NO},
    {"min", 1, RY_PAT_COMM_REDUCE, REDUCE_ATTRS, rel_max,
     "min: (d...) -> d without the reduced axes",
     ry_grad_max, false, false, false, false, NULL, RY_BATCH_NO},
    {"argmax", 1, RY_PAT_COMM_REDUCE, ARGREDUCE_ATTRS, rel_argmax,
     "argmax: (d...) -> int32 index within the reduced axes",
     NULL, true, false, false, false, NULL, RY_BATCH_NO},
    {"argmin", 1, RY_PAT_COMM_REDUCE, ARGREDUCE_ATTRS, rel_argmax,
     "argmin: (d...) -> int32 index within the reduced axes",
     NULL, true, false, false, false, NULL, RY_BATCH_NO},
};
/* clang-format on */
const int ry_ops_reduce_count = (int)(sizeof ry_ops_reduce / sizeof ry_ops_reduce[0]);
