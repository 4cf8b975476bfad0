/*
 * fused.c: registry entries of the fused operators that the fusion pass
 * (src/pass/fuse.c) writes: fused.elemwiseN(x0, ..., code="...") runs a
 * program of elementwise operators over N inputs (N = 1..8), and
 * fused.matmulN(a, b, x2, ..., transpose_a=, transpose_b=, code="...")
 * runs nn.matmul's GEMM and the program as its epilogue (`acc`). The
 * arity is in the name because the registry's operators have fixed arity.
 * A fused.elemwise program that ends in a list of results returns a tuple.
 * Programs are described in fused_prog.h; the CPU's kernels are in
 * src/backend/cpu/fused*.c. Fused operators have no gradient: fusion runs
 * after differentiation.
 */
#include <string.h>

#include "op/families.h"
#include "op/fused_prog.h"

/* The broadcast of every argument's shape, with dtype dt. */
static ry_rel_status broadcast_all(ry_rel_ctx *c, const ry_type *first, int n,
                                   ry_type *const *rest, ry_dtype dt, ry_type **out) {
    ry_type *t = ry_type_tensor_arena(c->arena, dt, first->tensor.ndim, first->tensor.dims);
    for (int i = 0; i < n; i++) {
        ry_rel_status s = ry_rel_broadcast(c, t, rest[i], dt, &t);
        if (s != RY_REL_OK) return s;
    }
    *out = t;
    return RY_REL_OK;
}

/* The dtypes of args[0..n), DEFER while one is unknown. */
static ry_rel_status arg_dtypes(ry_rel_ctx *c, int n, ry_type *const *args, int first,
                                ry_dtype *dts) {
    for (int i = 0; i < n; i++)
        if (args[i]->kind == RY_TYPE_INCOMPLETE) return RY_REL_DEFER;
    for (int i = 0; i < n; i++) {
        if (args[i]->kind != RY_TYPE_TENSOR) {
            char s[128];
            ry_error_at(c->err, c->span, "%s: argument %d must be a tensor, not %s", c->op->name,
                        first + i + 1, ry_type_str(args[i], s, sizeof s));
            return RY_REL_FAIL;
        }
        dts[i] = args[i]->tensor.dtype;
    }
    return RY_REL_OK;
}

static ry_rel_status arity(ry_rel_ctx *c, int nargs) {
    if (nargs == c->op->nargs) return RY_REL_OK;
    ry_error_at(c->err, c->span, "%s takes %d arguments, got %d", c->op->name, c->op->nargs, nargs);
    return RY_REL_FAIL;
}

/* fused.elemwiseN: (s1, d1) x ... x (sN, dN) -> (broadcast(s1..sN), the program's dtype) */
static ry_rel_status rel_elemwise(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    ry_rel_status s = arity(c, nargs);
    if (s == RY_REL_OK) s = arg_dtypes(c, nargs, args, 0, dts);
    if (s != RY_REL_OK) return s;
    const char *code = ry_attr_str(c->op, c->attrs, "code");
    const ry_fz_prog *p = ry_fz_get(code, false, nargs, dts, c->span, c->err);
    if (!p) return RY_REL_FAIL;
    if ((s = broadcast_all(c, args[0], nargs - 1, args + 1, p->out_dt, out)) != RY_REL_OK ||
        p->nout == 1)
        return s;
    ry_type *f[RY_FZ_MAX_OUT]; /* a list of results: a tuple of that shape */
    for (int k = 0; k < p->nout; k++)
        f[k] = ry_type_tensor_arena(c->arena, p->out_dts[k], (*out)->tensor.ndim, (*out)->tensor.dims);
    *out = ry_type_tuple_arena(c->arena, p->nout, f);
    return RY_REL_OK;
}

/* fused.matmulN: a x b x (s2, d2) x ... -> (broadcast(matmul(a, b), s2, ...), the program's dtype) */
static ry_rel_status rel_matmul(ry_rel_ctx *c, int nargs, ry_type *const *args, ry_type **out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    ry_rel_status s = arity(c, nargs);
    if (s != RY_REL_OK) return s;
    const ry_op *mm = ry_op_find("nn.matmul");
    ry_rel_ctx mc = *c;
    mc.op = mm;
    ry_type *acc = NULL;
    if ((s = mm->rel(&mc, 2, args, &acc)) != RY_REL_OK) return s;
    dts[0] = acc->tensor.dtype;
    if ((s = arg_dtypes(c, nargs - 2, args + 2, 2, dts + 1)) != RY_REL_OK) return s;
    const char *code = ry_attr_str(c->op, c->attrs, "code");
    const ry_fz_prog *p = ry_fz_get(code, true, nargs - 1, dts, c->span, c->err);
    if (!p) return RY_REL_FAIL;
    if (p->nout > 1) {
        ry_error_at(c->err, c->span, "%s: an epilogue has one result", c->op->name);
        return RY_REL_FAIL;
    }
    return broadcast_all(c, acc, nargs - 2, args + 2, p->out_dt, out);
}

static ry_status no_gradient(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    (void)args, (void)y, (void)g, (void)grads;
    const ry_op *op = c->call->call.callee->op.op;
    return ry_error_at(c->err, c->span,
                       "%s has no gradient: fusion runs after differentiation (differentiate "
                       "the unfused program; ry_optimize fuses last)",
                       op->name);
}

#define EW(N)                                                                              \
    {.name = "fused.elemwise" #N, .nargs = N, .pattern = RY_PAT_OPAQUE, .nattrs = 1,        \
     .attrs = {{"code", RY_ASTR("")}}, .rel = rel_elemwise,                                \
     .doc = "fused.elemwise" #N ": (s1, d1) x ... -> (broadcast, program dtype): code",    \
     .batch = RY_BATCH_MAP, .grad = no_gradient}
#define MM(N)                                                                              \
    {.name = "fused.matmul" #N, .nargs = N, .pattern = RY_PAT_OPAQUE, .nattrs = 3,          \
     .attrs = {{"code", RY_ASTR("")}, {"transpose_a", RY_ABOOL(false)},                    \
               {"transpose_b", RY_ABOOL(false)}},                                          \
     .rel = rel_matmul,                                                                 \
     .doc = "fused.matmul" #N ": a x b x ... -> epilogue(matmul(a, b), ...): code",        \
     .batch = RY_BATCH_GEMM, .grad = no_gradient}

const ry_op ry_ops_fused[] = {
    EW(1), EW(2), EW(3), EW(4), EW(5), EW(6), EW(7), EW(8),
    MM(2), MM(3), MM(4), MM(5), MM(6), MM(7), MM(8),
};
const int ry_ops_fused_count = (int)(sizeof ry_ops_fused / sizeof ry_ops_fused[0]);
