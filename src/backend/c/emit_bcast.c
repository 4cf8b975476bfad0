/*
 * emit_bcast.c: a broadcast and its adjoint, the two operators reverse
 * mode puts between values of different shapes. broadcast_to_like(x,
 * like) is a copy whose input broadcasts (emit_fused.c's loops read x
 * with stride 0 along its 1s); collapse_sum_like(x, like) sums x over the
 * dims where like is 1 or missing (emit_fused.c's accumulating loop).
 * like gives only its shape and is not read. Dims that only run time
 * knows are checked there to broadcast (NAME_ERR_DIM, located), as the
 * CPU target's kernels check them.
 */
#include <string.h>

#include "backend/c/emit.h"
#include "op/fused_prog.h"

static ry_status tensors(cemit *c, const ry_expr *call, cval *const *args) {
    for (int k = 0; k < call->call.nargs; k++)
        if (args[k]->tuple || args[k]->boxed)
            return ry_c_fail(c, call->span, "%s: an argument that is not a tensor", ry_c_op(call)->name);
    if (!ry_c_ctype(args[0]->dtype))
        return ry_c_fail(c, call->span, "%s: dtype %s has no C type", ry_c_op(call)->name, ry_dtype_name(args[0]->dtype));
    return RY_OK;
}

/* broadcast_to_like: (s1, d) x (s2, e) -> (s2, d): out[i] = x[broadcast index];
 * x of the result's shape already is the result (a view). broadcast_to,
 * its shape an attribute, is the same copy to its result's type. */
static ry_status emit_broadcast_to_like(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (tensors(c, call, args)) return RY_ERR;
    if (ry_c_same_dims(args[0], call->type)) return (*out = ry_c_view(c, args[0], call->type)) ? RY_OK : RY_ERR;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if ((*out)->tuple) return ry_c_fail(c, call->span, "%s: a tuple result", ry_c_op(call)->name);
    ry_c_check_fits(c, args[0], *out, ry_c_fmt(c, "%s: the input", ry_c_op(call)->name), call->span);
    return ry_c_emit_fused(c, ry_c_prog1(c, RY_FZ_COPY, 1, args, args[0]->dtype), args, 1, out, call->span);
}

/* collapse_sum_like: (s1, d) x (s2, d) -> (s2, d), s2 broadcasts to s1:
 * out[j] = the sum of x[i] over the i that broadcast from j. */
static ry_status emit_collapse_sum_like(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (tensors(c, call, args)) return RY_ERR;
    if (ry_c_same_dims(args[0], call->type)) /* nothing to sum: x itself */
        return (*out = ry_c_view(c, args[0], call->type)) ? RY_OK : RY_ERR;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if ((*out)->tuple || (*out)->dtype != args[0]->dtype)
        return ry_c_fail(c, call->span, "collapse_sum_like: %s data summed into a %s result (the export sums within one dtype)",
                         ry_dtype_name(args[0]->dtype), (*out)->tuple ? "tuple" : ry_dtype_name((*out)->dtype));
    if (args[0]->dtype == RY_FLOAT16 || args[0]->dtype == RY_BOOL)
        return ry_c_fail(c, call->span, "collapse_sum_like on %s has no C kernel in the export yet", ry_dtype_name(args[0]->dtype));
    if ((*out)->ndim > args[0]->ndim)
        return ry_c_fail(c, call->span, "collapse_sum_like: a result of higher rank than the input");
    ry_c_check_fits(c, *out, args[0], "collapse_sum_like: the result", call->span);
    ry_c_emit_collapse_sum(c, args[0], *out);
    return RY_OK;
}

ry_c_emit_fn ry_c_emit_bcast(const char *name) {
    if (strcmp(name, "broadcast_to_like") == 0 || strcmp(name, "broadcast_to") == 0) return emit_broadcast_to_like;
    if (strcmp(name, "collapse_sum_like") == 0) return emit_collapse_sum_like;
    return NULL;
}
