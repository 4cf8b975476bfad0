/*
 * emit_ops.c: the C target's kernel table. For each operator it exports,
 * an emitter writes the C of one call (a call of a runtime kernel from
 * rt/, or a loop from emit_fused.c) into the entry's body; an operator
 * without one is an error naming it, located at the call. Shapes are the
 * type checker's (constant or symbolic dims), so no emitter computes a
 * shape: the call's type is the result's.
 */
#include <string.h>

#include "backend/c/emit.h"
#include "op/conv_attrs.h"
#include "op/fused_prog.h"

/* ---- GEMM ---- */

/* A weight b as GEMM operand (K, N), read transposed or not, made once
 * when the context opens into ctx->pack[i] (freed with it): float32
 * packed into the GEMM's panels (rt_pack and RT_PACKED of the runtime the
 * artifact holds, rt/gemm_kernel.c's or gemm_blas.c's), float64
 * transposed. Every GEMM over the same weight, shape and transposition
 * shares the pack, in the entry and in the boxed functions alike (a
 * weight passed down a recursion stays a weight, emit_ctl.c). NULL where
 * there is nothing to make (float64 read as it is) or b is not a weight
 * of constant dims: the caller makes it per call. */
static const char *weight_pack(cemit *c, const cval *b, bool tb) {
    bool f64 = b->dtype == RY_FLOAT64;
    if (b->weight < 0 || (f64 && !tb)) return NULL;
    const ry_dim *k = &b->dims[tb ? 1 : 0], *n = &b->dims[tb ? 0 : 1];
    if (k->kind != RY_DIM_CONST || n->kind != RY_DIM_CONST) return NULL;
    const char *K = ry_c_dim(c, k), *N = ry_c_dim(c, n);
    for (int i = 0; i < c->npack; i++) {
        const struct ry_c_pack *p = &c->packs[i];
        if (p->weight == b->weight && p->trans == tb && p->dtype == b->dtype && !strcmp(p->K, K) && !strcmp(p->N, N))
            return ry_c_fmt(c, "ctx->pack[%d]", i);
    }
    if (c->npack == c->pack_cap) {
        int cap = c->pack_cap ? 2 * c->pack_cap : 8;
        struct ry_c_pack *ps = RY_NEW_ARRAY(c->a, struct ry_c_pack, cap);
        if (c->npack) memcpy(ps, c->packs, sizeof *ps * (size_t)c->npack);
        c->packs = ps, c->pack_cap = cap;
    }
    int i = c->npack++;
    c->packs[i] = (struct ry_c_pack){.weight = b->weight, .trans = tb, .dtype = b->dtype, .K = K, .N = N};
    if (f64) ry_sb_printf(&c->open, "    rt_transpose_f64(%s, %s, ctx->w[%d], ctx->pack[%d]);\n", N, K, b->weight, i);
    else ry_sb_printf(&c->open, "    rt_pack(%s, %s, ctx->w[%d], %d, ctx->pack[%d]);\n", K, N, b->weight, tb, i);
    return ry_c_fmt(c, "ctx->pack[%d]", i);
}

/* dst (M, N) = op(a) op(b) with b 2-D. float32: b is packed into the
 * GEMM's panels (rt/gemm.c), a weight once when the context opens
 * (weight_pack), any other operand into scratch first. float64
 * (rt/gemm_f64.c): b is read row-major as it is, or transposed first
 * (a weight once, the others into scratch). A transposed a is transposed
 * into scratch. */
static ry_status gemm(cemit *c, const ry_expr *call, const cval *a, const cval *b, bool ta, bool tb,
                      const cval *dst) {
    const cval *ab[2] = {a, b};
    if (ry_c_need_float(c, call, ab, 2)) return RY_ERR;
    if (b->ndim != 2 || a->ndim < 1 || (ta && a->ndim != 2))
        return ry_c_fail(c, call->span, "%s: operand ranks %d and %d (the export's GEMM takes a (M, K) by a 2-d b)",
                         ry_c_op(call)->name, a->ndim, b->ndim);
    const char *T = ry_c_ctype(a->dtype), *sfx = ry_c_kernel(c, RT_GEMM | RT_GEMM_KERNEL, a->dtype);
    const char *K = ry_c_dim(c, &a->dims[a->ndim - 1]), *M = ry_c_dims_count(c, a, 0, a->ndim - 1);
    const char *A = a->c, *P, *N = ry_c_dim(c, &b->dims[tb ? 0 : 1]);
    if (ta || (a->dtype == RY_FLOAT64 && tb)) ry_c_kernel(c, RT_TRANSPOSE, a->dtype);
    if (ta) {
        M = ry_c_dim(c, &a->dims[1]), K = ry_c_dim(c, &a->dims[0]);
        A = ry_c_scratch(c, T, ry_c_fmt(c, "(int64_t)%s * %s", M, K));
        ry_sb_printf(&c->body, "    rt_transpose%s(%s, %s, %s, %s);\n", sfx, K, M, a->c, A);
    }
    P = weight_pack(c, b, tb);
    if (!P && a->dtype == RY_FLOAT64) {
        P = b->c;
        if (tb) {
            P = ry_c_scratch(c, T, ry_c_fmt(c, "(int64_t)%s * %s", K, N));
            ry_sb_printf(&c->body, "    rt_transpose_f64(%s, %s, %s, %s);\n", N, K, b->c, P);
        }
    } else if (!P) {
        P = ry_c_scratch(c, "float", ry_c_fmt(c, "RT_PACKED(%s, %s)", K, N));
        ry_sb_printf(&c->body, "    rt_pack(%s, %s, %s, %d, %s);\n", K, N, b->c, tb, P);
    }
    ry_sb_printf(&c->body, "    rt_gemm%s(%s, %s, %s, %s, %s, %s);\n", sfx, M, N, K, A, P, dst->c);
    return RY_OK;
}

/* The batch index s of an operand whose batch dim is d, the result's
 * being b: 0 where d is 1 (a constant, or at run time where only run time
 * knows d; emit_dims.c checked it is 1 or b). */
static const char *batch_index(cemit *c, const ry_dim *d, const ry_dim *b) {
    if (d->kind == RY_DIM_CONST) return d->value == 1 ? "0" : "_s";
    if (b->kind == RY_DIM_SYM && strcmp(d->name, b->name) == 0) return "_s";
    return ry_c_fmt(c, "(%s == 1 ? 0 : _s)", d->name);
}

/* batch_matmul: x (Bx, I, K) [ta: (Bx, K, I)] by y (By, K, J) [tb: (By, J, K)]
 * -> (B, I, J), a batch of 1 broadcast: per batch, y's matrix packed
 * (float32) or transposed when tb (float64), and x's transposed when ta,
 * into scratch, then the GEMM. */
static ry_status emit_batch_matmul(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const cval *x = args[0], *y = args[1];
    bool ta = ry_attr_bool(op, &call->call.attrs, "transpose_a"), tb = ry_attr_bool(op, &call->call.attrs, "transpose_b");
    if (ry_c_need_float(c, call, (const cval *const *)args, 2)) return RY_ERR;
    if (x->ndim != 3 || y->ndim != 3) return ry_c_fail(c, call->span, "nn.batch_matmul: operands that are not 3-d");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *z = *out;
    bool f64 = x->dtype == RY_FLOAT64;
    const char *B = ry_c_dim(c, &z->dims[0]), *I = ry_c_dim(c, &z->dims[1]), *J = ry_c_dim(c, &z->dims[2]);
    const char *K = ry_c_dim(c, &x->dims[ta ? 1 : 2]), *T = ry_c_ctype(x->dtype);
    const char *xs = ry_c_fmt(c, "%s * %s", I, K), *ys = ry_c_fmt(c, "%s * %s", K, J);
    const char *xi = batch_index(c, &x->dims[0], &z->dims[0]), *yi = batch_index(c, &y->dims[0], &z->dims[0]);
    const char *sfx = ry_c_kernel(c, RT_GEMM | RT_GEMM_KERNEL, x->dtype);
    const char *ym = ry_c_fmt(c, "%s + %s * (%s)", y->c, yi, ys), *P = ym, *A = x->c;
    if (!f64) P = ry_c_scratch(c, T, ry_c_fmt(c, "RT_PACKED(%s, %s)", K, J));
    else if (tb) P = ry_c_scratch(c, T, ys);
    if (ta || (f64 && tb)) ry_c_kernel(c, RT_TRANSPOSE, x->dtype);
    if (ta) A = ry_c_scratch(c, T, xs);
    ry_sb_printf(&c->body, "    for (int64_t _s = 0; _s < %s; _s++) {\n", B);
    if (ta) ry_sb_printf(&c->body, "        rt_transpose%s(%s, %s, %s + %s * (%s), %s);\n", sfx, K, I, x->c, xi, xs, A);
    if (!f64) ry_sb_printf(&c->body, "        rt_pack(%s, %s, %s, %d, %s);\n", K, J, ym, tb, P);
    else if (tb) ry_sb_printf(&c->body, "        rt_transpose_f64(%s, %s, %s, %s);\n", J, K, ym, P);
    ry_sb_printf(&c->body, "        rt_gemm%s(%s, %s, %s, %s + %s, %s, %s + _s * %s * %s);\n    }\n", sfx, I, J, K, A,
                 ta ? "0" : ry_c_fmt(c, "%s * (%s)", xi, xs), P, z->c, I, J);
    return RY_OK;
}

static ry_status emit_dense(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    return gemm(c, call, args[0], args[1], false, true, *out);
}

static ry_status emit_matmul(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    bool ta = ry_attr_bool(op, &call->call.attrs, "transpose_a"), tb = ry_attr_bool(op, &call->call.attrs, "transpose_b");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    return gemm(c, call, args[0], args[1], ta, tb, *out);
}

/* ---- fused programs and elementwise operators ---- */

static ry_status run_prog(cemit *c, const ry_expr *call, const char *code, bool acc, cval *const *ins, int nin,
                          const cval *acc_val, cval **out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    cval *vals[RY_FZ_MAX_IN + 1];
    if (nin + (acc ? 1 : 0) > RY_FZ_MAX_IN)
        return ry_c_fail(c, call->span, "%s: more than %d inputs", ry_c_op(call)->name, RY_FZ_MAX_IN);
    int n = 0;
    if (acc) vals[n] = (cval *)acc_val, dts[n++] = acc_val->dtype;
    for (int k = 0; k < nin; k++) {
        if (ins[k]->tuple) return ry_c_fail(c, call->span, "%s: a tuple argument", ry_c_op(call)->name);
        /* float16 is computed in float32 and rounded back, per operator, as
         * the CPU target's elementwise kernels do (emit_fused.c converts) */
        vals[n] = ins[k], dts[n++] = ins[k]->dtype == RY_FLOAT16 ? RY_FLOAT32 : ins[k]->dtype;
    }
    const ry_fz_prog *p = ry_fz_get(code, acc, n, dts, call->span, c->err);
    if (!p) {
        c->failed = true;
        return RY_ERR;
    }
    /* elementwise: the result may take over an input of its type that dies here */
    for (int k = acc ? 1 : 0; !*out && p->nout == 1 && k < n; k++)
        if (ry_c_same_dims(vals[k], call->type) && ry_c_dies_here(c, vals[k])) *out = ry_c_view(c, vals[k], call->type);
    if (!*out && !(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    cval *const *outs = (*out)->tuple ? (*out)->fields : out;
    int nout = (*out)->tuple ? (*out)->n : 1;
    if (nout != p->nout) return ry_c_fail(c, call->span, "%s: %d results, but the program has %d", ry_c_op(call)->name, nout, p->nout);
    return ry_c_emit_fused(c, p, vals, n, outs, call->span);
}

static ry_status emit_fused_elemwise(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const char *code = ry_attr_str(ry_c_op(call), &call->call.attrs, "code");
    for (int k = 0; k < call->call.nargs; k++) /* rounding between its steps is not known (the fuse pass makes none) */
        if (!args[k]->tuple && args[k]->dtype == RY_FLOAT16)
            return ry_c_fail(c, call->span, "a fused program over float16 has no C kernel in the export yet");
    *out = NULL;
    return run_prog(c, call, code, false, args, call->call.nargs, NULL, out);
}

bool ry_c_same_dims(const cval *a, const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TENSOR || t->tensor.ndim != a->ndim || t->tensor.dtype != a->dtype) return false;
    for (int i = 0; i < a->ndim; i++) {
        const ry_dim *x = &a->dims[i], *y = &t->tensor.dims[i];
        if (x->kind != y->kind || (x->kind == RY_DIM_CONST ? x->value != y->value : strcmp(x->name, y->name) != 0))
            return false;
    }
    return true;
}

/* fused.matmulN: the GEMM into the result (or a buffer of its own when the
 * epilogue's result has another shape or dtype), then the epilogue over it. */
static ry_status emit_fused_matmul(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const char *code = ry_attr_str(op, &call->call.attrs, "code");
    bool ta = ry_attr_bool(op, &call->call.attrs, "transpose_a"), tb = ry_attr_bool(op, &call->call.attrs, "transpose_b");
    const cval *a = args[0], *b = args[1];
    if (a->tuple || b->tuple || b->ndim != 2 || a->ndim < 1) return ry_c_fail(c, call->span, "%s: operands that are not a GEMM's", op->name);
    ry_dim dims[RY_MAX_RANK];
    memcpy(dims, a->dims, sizeof *dims * (size_t)a->ndim);
    if (ta && a->ndim >= 2) dims[a->ndim - 2] = a->dims[a->ndim - 1];
    dims[a->ndim - 1] = b->dims[tb ? 0 : 1];
    ry_type *acc_t = ry_type_tensor_arena(c->a, a->dtype, a->ndim, dims);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *acc = !(*out)->tuple && ry_c_same_dims(*out, acc_t) ? *out : ry_c_buffer(c, acc_t, call->span);
    if (!acc || gemm(c, call, a, b, ta, tb, acc)) return RY_ERR;
    return run_prog(c, call, code, true, args + 2, call->call.nargs - 2, acc, out);
}

const struct ry_fz_prog *ry_c_prog1(cemit *c, int opc, int n, cval *const *args, ry_dtype odt) {
    ry_fz_prog *p = RY_NEW(c->a, ry_fz_prog);
    p->nin = n;
    for (int k = 0; k < n; k++) p->in_dt[k] = args[k]->dtype;
    p->nins = 1;
    p->ins[0] = (ry_fz_ins){.op = (ry_fz_opcode)opc, .dt = args[0]->dtype, .odt = odt, .nargs = n, .a = {0, 1, 0}};
    p->nout = 1;
    p->outs[0] = n; /* instruction 0's value */
    p->out_dt = p->out_dts[0] = odt;
    return p;
}

/* cast, between any two dtypes with a C type: one loop of the CPU
 * target's conversion (ry_c_cast). */
static ry_status emit_cast(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (args[0]->tuple || args[0]->boxed) return ry_c_fail(c, call->span, "cast of a value that is not a tensor");
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if ((*out)->tuple) return ry_c_fail(c, call->span, "cast: a tuple result");
    ry_sb_printf(&c->body, "    for (int64_t i = 0; i < %s; i++) %s[i] = %s;\n", ry_c_count(c, (*out)->ndim, (*out)->dims),
                 (*out)->c, ry_c_cast(c, args[0]->dtype, (*out)->dtype, ry_c_fmt(c, "%s[i]", args[0]->c)));
    return RY_OK;
}

/* An elementwise operator on integer tensors (index arithmetic,
 * comparisons), which the fused language does not hold: a program of one
 * instruction made here, its operands of one dtype; arithmetic wraps, as
 * the CPU target's does. */
static ry_status emit_int_elemwise(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    bool ones = strcmp(op->name, "ones_like") == 0;
    if (ones || strcmp(op->name, "zeros_like") == 0) { /* a constant of the argument's shape (a length's count) */
        if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
        if ((*out)->tuple) return ry_c_fail(c, call->span, "%s: a tuple result", op->name);
        ry_sb_printf(&c->body, "    for (int64_t i = 0; i < %s; i++) %s[i] = %d;\n", ry_c_count(c, (*out)->ndim, (*out)->dims),
                     (*out)->c, ones);
        return RY_OK;
    }
    int opc = ry_fz_opcode_of(op->name), n = call->call.nargs;
    bool cmp = opc >= RY_FZ_EQ && opc <= RY_FZ_GE;
    bool ok = n <= 2 && op->nattrs == 0 &&
              (cmp || opc == RY_FZ_ADD || opc == RY_FZ_SUB || opc == RY_FZ_MUL || opc == RY_FZ_MAX || opc == RY_FZ_MIN ||
               opc == RY_FZ_NEG);
    for (int k = 0; ok && k < n; k++) ok = !args[k]->tuple && args[k]->dtype == args[0]->dtype;
    if (!ok) return ry_c_fail(c, call->span, "operator %s on integers has no C kernel in the export yet", op->name);
    const ry_fz_prog *p = ry_c_prog1(c, (ry_fz_opcode)opc, n, args, cmp ? RY_BOOL : args[0]->dtype);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    if ((*out)->tuple) return ry_c_fail(c, call->span, "%s: a tuple result", op->name);
    return ry_c_emit_fused(c, p, args, n, out, call->span);
}

/* An elementwise registry operator as a program of one instruction
 * ("add(x0, x1)", "clip(x0, a_min=-1f64, a_max=1f64)"): its attributes as
 * the fused language spells them. */
static ry_status emit_elemwise(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    const ry_attrs *at = &call->call.attrs;
    for (int k = 0; k < call->call.nargs; k++)
        if (!args[k]->tuple && ry_c_is_int(args[k]->dtype)) return emit_int_elemwise(c, call, args, out);
    char code[256];
    size_t n = (size_t)snprintf(code, sizeof code, "%s(", op->name);
    for (int k = 0; k < call->call.nargs; k++) n += (size_t)snprintf(code + n, sizeof code - n, "%sx%d", k ? ", " : "", k);
    if (strcmp(op->name, "clip") == 0)
        n += (size_t)snprintf(code + n, sizeof code - n, ", a_min=%.17gf64, a_max=%.17gf64", ry_attr_float(op, at, "a_min"),
                              ry_attr_float(op, at, "a_max"));
    else if (strcmp(op->name, "nn.leaky_relu") == 0)
        n += (size_t)snprintf(code + n, sizeof code - n, ", alpha=%.17gf64", ry_attr_float(op, at, "alpha"));
    else if (op->nattrs > 0)
        return ry_c_fail(c, call->span, "operator %s has no C kernel in the export yet (its attributes)", op->name);
    snprintf(code + n, sizeof code - n, ")");
    *out = NULL;
    return run_prog(c, call, code, false, args, call->call.nargs, NULL, out);
}

/* zeros, ones (shape and dtype attributes), full(value) and
 * full_like(data, value): the result filled with the value cast to its
 * dtype as the CPU target casts it (ry_c_cast). */
static ry_status emit_fill(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const char *name = ry_c_op(call)->name;
    const cval *v = strcmp(name, "full") == 0 ? args[0] : strcmp(name, "full_like") == 0 ? args[1] : NULL;
    if (v && (v->tuple || v->boxed || v->ndim != 0)) return ry_c_fail(c, call->span, "%s: the fill value must be a scalar", name);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    if (y->tuple) return ry_c_fail(c, call->span, "%s: a tuple result", name);
    const char *x = v ? ry_c_cast(c, v->dtype, y->dtype, ry_c_fmt(c, "%s[0]", v->c))
                      : ry_c_cast(c, RY_INT32, y->dtype, strcmp(name, "ones") == 0 ? "1" : "0");
    ry_sb_printf(&c->body, "    for (int64_t i = 0; i < %s; i++) %s[i] = %s;\n", ry_c_count(c, y->ndim, y->dims), y->c, x);
    return RY_OK;
}

/* bias_add(x, b, axis): x + b with b read along axis. */
static ry_status emit_bias_add(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0], *bias = args[1];
    int64_t axis = ry_attr_int(ry_c_op(call), &call->call.attrs, "axis");
    if (axis < 0) axis += x->ndim;
    if (x->tuple || bias->tuple || bias->ndim != 1 || axis < 0 || axis >= x->ndim)
        return ry_c_fail(c, call->span, "nn.bias_add: operands the export cannot broadcast");
    ry_dim dims[RY_MAX_RANK];
    dims[0] = bias->dims[0];
    for (int i = 1; i < x->ndim - axis; i++) dims[i] = (ry_dim){.kind = RY_DIM_CONST, .value = 1};
    cval *bv = ry_c_view(c, bias, ry_type_tensor_arena(c->a, bias->dtype, (int)(x->ndim - axis), dims));
    if (!bv) return RY_ERR;
    cval *ins[2] = {(cval *)x, bv};
    *out = NULL;
    return run_prog(c, call, "add(x0, x1)", false, ins, 2, NULL, out);
}

/* ---- layout: the same data under another shape ---- */

static ry_status emit_view(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    if (args[0]->tuple) return ry_c_fail(c, call->span, "%s of a tuple", ry_c_op(call)->name);
    if (!call->type || call->type->kind != RY_TYPE_TENSOR)
        return ry_c_fail(c, call->span, "%s: a result that is not a tensor", ry_c_op(call)->name);
    if (!call->type || call->type->kind != RY_TYPE_TENSOR || !(*out = ry_c_view(c, args[0], call->type))) {
        c->failed = false; /* again, located at the call */
        return ry_c_fail(c, call->span, "%s: a result the export cannot hold (%s)", ry_c_op(call)->name, c->err->msg);
    }
    return RY_OK;
}

/* ---- convolution, pooling, softmax ---- */

static ry_status emit_conv2d(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    ry_conv2d_params p;
    const cval *x = args[0], *w = args[1];
    if (ry_conv2d_params_read(ry_c_op(call), &call->call.attrs, call->span, c->err, &p)) return RY_ERR;
    if (ry_c_layout_is(c, call, "data_layout", "NCHW") || ry_c_layout_is(c, call, "kernel_layout", "OIHW") ||
        ry_c_need_float(c, call, (const cval *const *)args, 2))
        return RY_ERR;
    if (p.has_out_dtype && p.out_dtype != x->dtype)
        return ry_c_fail(c, call->span, "nn.conv2d: out_dtype %s on %s data", ry_dtype_name(p.out_dtype), ry_dtype_name(x->dtype));
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    const char *sfx = ry_c_kernel(c, RT_CONV2D | RT_GEMM_KERNEL, x->dtype);
    const char *work = ry_c_scratch(c, ry_c_ctype(x->dtype), ry_c_fmt(c, "rt_conv_work(%s / %lld, %s / %lld, %s, %s, %s, %s)", ry_c_dim(c, &x->dims[1]),
                                                          (long long)p.groups, ry_c_dim(c, &w->dims[0]), (long long)p.groups, ry_c_dim(c, &w->dims[2]), ry_c_dim(c, &w->dims[3]),
                                                          ry_c_dim(c, &y->dims[2]), ry_c_dim(c, &y->dims[3])));
    ry_sb_printf(&c->body,
                 "    {\n        const rt_conv g = {%s, %s, %s, %s, %s, %s, %s, %s, %s, %lld, %lld, %lld, %lld, %lld, %lld, %lld};\n"
                 "        rt_conv2d%s(&g, %s, %s, %s, %s);\n    }\n",
                 ry_c_dim(c, &x->dims[0]), ry_c_dim(c, &x->dims[1]), ry_c_dim(c, &x->dims[2]), ry_c_dim(c, &x->dims[3]),
                 ry_c_dim(c, &w->dims[0]), ry_c_dim(c, &w->dims[2]), ry_c_dim(c, &w->dims[3]), ry_c_dim(c, &y->dims[2]),
                 ry_c_dim(c, &y->dims[3]), (long long)p.stride[0], (long long)p.stride[1], (long long)p.pad[0],
                 (long long)p.pad[1], (long long)p.dilation[0], (long long)p.dilation[1], (long long)p.groups, sfx, x->c, w->c,
                 y->c, work);
    return RY_OK;
}

static ry_status emit_pool(cemit *c, const ry_expr *call, cval *const *args, cval **out, bool is_max) {
    ry_conv2d_params p;
    const cval *x = args[0];
    if (ry_conv2d_params_read(ry_c_op(call), &call->call.attrs, call->span, c->err, &p)) return RY_ERR;
    if (ry_c_layout_is(c, call, "layout", "NCHW") || ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    const cval *y = *out;
    const char *sfx = ry_c_kernel(c, RT_POOL_GEOM | (is_max ? RT_MAX_POOL2D : RT_AVG_POOL2D), x->dtype);
    ry_sb_printf(&c->body,
                 "    {\n        const rt_pool g = {%s * %s, %s, %s, %s, %s, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                 "%lld, %d};\n        rt_%s_pool2d%s(&g, %s, %s);\n    }\n",
                 ry_c_dim(c, &x->dims[0]), ry_c_dim(c, &x->dims[1]), ry_c_dim(c, &x->dims[2]), ry_c_dim(c, &x->dims[3]),
                 ry_c_dim(c, &y->dims[2]), ry_c_dim(c, &y->dims[3]), (long long)p.pool[0], (long long)p.pool[1],
                 (long long)p.stride[0], (long long)p.stride[1], (long long)p.dilation[0], (long long)p.dilation[1],
                 (long long)p.pad[0], (long long)p.pad[1], (long long)p.pad[2], (long long)p.pad[3],
                 p.count_include_pad ? 1 : 0, is_max ? "max" : "avg", sfx, x->c, y->c);
    return RY_OK;
}

static ry_status emit_max_pool2d(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    return emit_pool(c, call, args, out, true);
}

static ry_status emit_avg_pool2d(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    return emit_pool(c, call, args, out, false);
}

static ry_status emit_softmax(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const cval *x = args[0];
    int64_t axis = ry_attr_int(ry_c_op(call), &call->call.attrs, "axis");
    if (ry_c_need_float(c, call, &x, 1)) return RY_ERR;
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim) return ry_c_fail(c, call->span, "%s: axis out of range", ry_c_op(call)->name);
    if (!(*out = ry_c_result(c, call->type, call->span))) return RY_ERR;
    int a = (int)axis;
    ry_sb_printf(&c->body, "    rt_softmax%s(%s, %s, %s, %d, %s, %s);\n", ry_c_kernel(c, RT_SOFTMAX, x->dtype), ry_c_dims_count(c, x, 0, a), ry_c_dim(c, &x->dims[a]),
                 ry_c_dims_count(c, x, a + 1, x->ndim), strcmp(ry_c_op(call)->name, "nn.log_softmax") == 0, x->c, (*out)->c);
    return RY_OK;
}

/* ---- the table ---- */

static const ry_c_emitter table[] = {
    {"nn.dense", emit_dense},
    {"nn.matmul", emit_matmul},
    {"nn.batch_matmul", emit_batch_matmul},
    {"nn.bias_add", emit_bias_add},
    {"cast", emit_cast},
    {"zeros", emit_fill},
    {"ones", emit_fill},
    {"full", emit_fill},
    {"full_like", emit_fill},
    {"reshape", emit_view},
    {"reshape_like", emit_view},
    {"nn.batch_flatten", emit_view},
    {"expand_dims", emit_view},
    {"squeeze", emit_view},
    {"copy", emit_view}, /* nothing writes a value twice: a copy may share its buffer */
    {"stop_gradient", emit_view}, /* the identity outside differentiation */
    {"nn.conv2d", emit_conv2d},
    {"nn.max_pool2d", emit_max_pool2d},
    {"nn.avg_pool2d", emit_avg_pool2d},
    {"nn.softmax", emit_softmax},
    {"nn.log_softmax", emit_softmax},
    {"nn.fast_softmax", emit_softmax}, /* the CPU target runs softmax's kernel for it */
};

ry_status ry_c_emit_op(cemit *c, const ry_expr *call, cval *const *args, cval **out) {
    const ry_op *op = ry_c_op(call);
    if (strncmp(op->name, "fused.elemwise", 14) == 0) return emit_fused_elemwise(c, call, args, out);
    if (strncmp(op->name, "fused.matmul", 12) == 0) return emit_fused_matmul(c, call, args, out);
    ry_c_emit_fn f = ry_c_emitter_find(table, sizeof table / sizeof table[0], op->name);
    if (!f) f = ry_c_emit_nn(op->name);
    if (!f) f = ry_c_emit_layout(op->name);
    if (!f) f = ry_c_emit_norm(op->name);
    if (!f) f = ry_c_emit_spatial(op->name);
    if (!f) f = ry_c_emit_index(op->name);
    if (!f) f = ry_c_emit_bcast(op->name);
    if (f) return f(c, call, args, out);
    if (ry_fz_opcode_of(op->name) >= 0) return emit_elemwise(c, call, args, out);
    return ry_c_fail(c, call->span, "operator %s has no C kernel in the export yet", op->name);
}
