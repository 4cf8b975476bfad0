/*
 * fused.c (cpu): the kernels of fused.elemwiseN and fused.matmulN. They
 * look up the call's compiled program (cached: src/op/fused_prog.c) and run
 * it with the tile executor (fused_exec.c). fused.matmul computes its GEMM
 * into the result's own buffer when it has the result's shape and dtype;
 * an epilogue that starts by adding a tensor to the GEMM's result (a bias,
 * an accumulated gradient) is folded into the GEMM itself: the result is
 * first filled with that tensor and OpenBLAS accumulates into it (beta 1,
 * through ry_cpu_gemm: blas.h).
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/fused_kernels.h"
#include "backend/cpu/nn_kernels.h"
#include "backend/cpu/parallel.h"

/* A per-thread memo in front of the shared cache: a call site's code
 * string is the same pointer call after call, so most lookups cost a
 * pointer compare and no lock. An entry holds a copy of the text, so a
 * string freed with its module and reused for another is not mistaken. */
#define MEMO 32
#define MEMO_TEXT 512

typedef struct memo {
    const char *key;
    char text[MEMO_TEXT];
    bool acc;
    int nin;
    ry_dtype dts[RY_FZ_MAX_IN];
    const ry_fz_prog *prog;
} memo;

static _Thread_local memo memos[MEMO];

static ry_status program(ry_kernel_ctx *c, bool acc, int nin, const ry_dtype *dts,
                         const ry_fz_prog **p) {
    const char *code = ry_attr_str(c->op, c->attrs, "code");
    memo *m = &memos[((uintptr_t)code >> 4) % MEMO];
    if (m->key == code && m->acc == acc && m->nin == nin &&
        memcmp(m->dts, dts, sizeof *dts * (size_t)nin) == 0 && strcmp(m->text, code) == 0) {
        *p = m->prog;
        return RY_OK;
    }
    *p = ry_fz_get(code, acc, nin, dts, c->span, c->err);
    if (!*p) return RY_ERR;
    if (strlen(code) < MEMO_TEXT) {
        m->key = code;
        strcpy(m->text, code);
        m->acc = acc;
        m->nin = nin;
        memcpy(m->dts, dts, sizeof *dts * (size_t)nin);
        m->prog = *p;
    }
    return RY_OK;
}

ry_status ry_cpu_fused_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                ry_tensor *const *out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    const ry_fz_prog *p;
    if (nout < 1 || nout > RY_FZ_MAX_OUT || nin < 1 || nin > RY_FZ_MAX_IN)
        return ry_error_at(c->err, c->span, "%s: expected 1 to %d inputs and 1 to %d results",
                           c->op->name, RY_FZ_MAX_IN, RY_FZ_MAX_OUT);
    for (int k = 0; k < nin; k++) dts[k] = in[k]->dtype;
    if (program(c, false, nin, dts, &p)) return RY_ERR;
    return ry_fz_exec_n(p, nout, out, nin, in, NULL, c);
}

/* The GEMM's result shape (as nn.matmul's relation gives it):
 * a (R..., K) -> (R..., M); with transpose_a a (R..., K, N) -> (R..., N, M). */
static int acc_shape(const ry_tensor *a, const ry_tensor *b, bool ta, bool tb, int64_t *shape) {
    int nd = a->ndim;
    for (int i = 0; i < nd; i++) shape[i] = a->shape[i];
    if (ta && nd >= 2) shape[nd - 2] = a->shape[nd - 1];
    shape[nd - 1] = tb ? b->shape[0] : b->shape[1];
    return nd;
}

static bool same_shape(const ry_tensor *t, int nd, const int64_t *shape) {
    if (t->ndim != nd) return false;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

/* The input slot s when the program starts with add(acc, xs) or
 * add(xs, acc) and reads acc nowhere else; else -1. */
static int leading_add(const ry_fz_prog *p) {
    const ry_fz_ins *i0 = &p->ins[0];
    if (i0->op != RY_FZ_ADD || p->last_use[0] != 0) return -1;
    int other = i0->a[0] == 0 ? i0->a[1] : i0->a[1] == 0 ? i0->a[0] : -1;
    return other >= 1 && other < p->nin ? other : -1;
}

/* out = a b + out for 2-D float operands (out already holds the addend). */
static ry_status gemm_accumulate(ry_kernel_ctx *c, const ry_tensor *a, const ry_tensor *b,
                                 bool ta, bool tb, ry_tensor *out) {
    int64_t M = out->shape[0], N = out->shape[1], K = ta ? a->shape[0] : a->shape[1];
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return ry_error_at(c->err, c->span, "%s: dimension too large for BLAS", c->op->name);
    if (M == 0 || N == 0 || K == 0) return RY_OK;
    if (ry_cpu_blas_ready(c)) return RY_ERR;
    ry_cpu_gemm(out->dtype == RY_FLOAT64, ta, tb, M, N, K, 1.0, a->data, a->shape[1], b->data,
                b->shape[1], 1.0, out->data, N);
    return RY_OK;
}

/* The leading add folded into the GEMM: out = xs (broadcast), then
 * out += a b, then the rest of the program over out. */
static ry_status fold_add(ry_kernel_ctx *c, const ry_fz_prog *p, int s, ry_tensor *const *ein,
                          int nein, ry_tensor *const *in, bool ta, bool tb, ry_tensor *out) {
    const ry_tensor *x = ein[s];
    if (x->dtype == out->dtype && same_shape(x, out->ndim, out->shape)) {
        if (ry_tensor_overlap(x, out)) {
            if (x->data != out->data) memmove(out->data, x->data, ry_tensor_nbytes(out));
        } else {
            ry_parallel_copy(out->data, x->data, ry_tensor_nbytes(out)); /* a large gradient */
        }
    } else {
        const ry_fz_prog *copy = ry_fz_get("copy(x0)", false, 1, &x->dtype, c->span, c->err);
        ry_tensor *xs = (ry_tensor *)x;
        if (!copy || ry_fz_exec(copy, out, 1, &xs, NULL, c)) return RY_ERR;
    }
    if (gemm_accumulate(c, in[0], in[1], ta, tb, out)) return RY_ERR;
    return ry_fz_exec(p, out, nein, ein, out, c);
}

ry_status ry_cpu_fused_matmul(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                              ry_tensor *const *out) {
    ry_dtype dts[RY_FZ_MAX_IN];
    ry_tensor *ein[RY_FZ_MAX_IN];
    const ry_fz_prog *p;
    if (nout != 1 || nin < 2 || nin > RY_FZ_MAX_IN + 1)
        return ry_error_at(c->err, c->span, "%s: expected 2 to %d inputs and one result",
                           c->op->name, RY_FZ_MAX_IN + 1);
    const ry_tensor *a = in[0], *b = in[1];
    bool ta = ry_attr_bool(c->op, c->attrs, "transpose_a");
    bool tb = ry_attr_bool(c->op, c->attrs, "transpose_b");
    if (a->ndim < (ta ? 2 : 1) || b->ndim != 2)
        return ry_error_at(c->err, c->span, "%s: operand ranks do not fit a GEMM", c->op->name);
    int64_t shape[RY_MAX_RANK];
    int nd = acc_shape(a, b, ta, tb, shape);
    ein[0] = NULL;
    dts[0] = a->dtype;
    for (int k = 2; k < nin; k++) ein[k - 1] = in[k], dts[k - 1] = in[k]->dtype;
    if (program(c, true, nin - 1, dts, &p)) return RY_ERR;
    ry_tensor *res = out[0];
    bool fits = res->dtype == a->dtype && same_shape(res, nd, shape) && !ry_tensor_overlap(res, a) &&
                !ry_tensor_overlap(res, b);
    int s = leading_add(p);
    if (fits && s >= 0 && nd == 2 && (a->dtype == RY_FLOAT32 || a->dtype == RY_FLOAT64) &&
        b->dtype == a->dtype) {
        /* the result must not overlap what the rest still reads: the other
         * inputs, and the addend itself when the epilogue reads it again
         * (`add(acc, x2); add(t0, x2)` in place over x2 would read acc + x2) */
        bool clash = false;
        for (int k = 1; k < nin - 1; k++)
            clash |= (k != s || p->last_use[s] != 0) && ry_tensor_overlap(res, ein[k]);
        ein[0] = res; /* acc's slot: read only by the add, which the GEMM does */
        if (!clash) return fold_add(c, p, s, ein, nin - 1, in, ta, tb, res);
    }
    /* the GEMM into the result when nothing the epilogue reads lives there */
    for (int k = 1; k < nin - 1 && fits; k++) fits = !ry_tensor_overlap(res, ein[k]);
    ry_tensor *acc = fits ? res : ry_tensor_new(a->dtype, nd, shape);
    if (!acc) return ry_error_at(c->err, c->span, "%s: out of memory", c->op->name);
    ry_kernel_ctx mc = *c;
    mc.op = ry_op_find("nn.matmul");
    ry_status st = ry_cpu_matmul(&mc, 2, in, 1, &acc);
    ein[0] = acc;
    if (st == RY_OK) st = ry_fz_exec(p, res, nin - 1, ein, NULL, c);
    if (acc != res) ry_tensor_release(acc);
    return st;
}
