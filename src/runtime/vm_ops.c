/*
 * vm_ops.c: the VM's leaf work. Operator calls take the fast path when the
 * compiler fixed their result type (compare the input shapes, allocate the
 * outputs, call the kernel) and otherwise the general one (types from the
 * values, the type relation at run time: ry_op_run). Also the run-time
 * checks of annotated parameters that static types cannot settle (Any,
 * symbolic dims), with the interpreter's rules and messages.
 */
#include <string.h>

#include "runtime/vm_impl.h"

/* A tensor type, or tuple of them, with every dimension constant. */
bool vm_type_static(const ry_type *t) {
    if (!t) return false;
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (!vm_type_static(t->tuple.fields[i])) return false;
        return true;
    }
    if (t->kind != RY_TYPE_TENSOR) return false;
    for (int d = 0; d < t->tensor.ndim; d++)
        if (t->tensor.dims[d].kind != RY_DIM_CONST) return false;
    return true;
}

/* ---- results ---- */


static bool same_type(const ry_tensor *x, const ry_type *t) {
    if (x->dtype != t->tensor.dtype || x->ndim != t->tensor.ndim) return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != t->tensor.dims[d].value) return false;
    return true;
}

/* ---- the fast path ----
 * Inputs: tensors of exactly the compile-time types (else the general path
 * decides, with the relation's own messages). */
static ry_status fast_op(vm_machine *mc, const vm_opcall *oc, int nargs, ry_value *const *args,
                         ry_value **out, bool *taken) {
    ry_tensor *inline_in[8], **in = inline_in;
    ry_tensor *inline_res[8], **res = inline_res;
    *taken = false;
    if (nargs > 8 || oc->nout > 8) return RY_OK;
    for (int i = 0; i < nargs; i++) {
        if (args[i]->kind != RY_VAL_TENSOR || !same_type(args[i]->tensor, oc->in_types[i]))
            return RY_OK;
        in[i] = args[i]->tensor;
    }
    *taken = true;
    const ry_expr *call = oc->call;
    ry_kernel_ctx kc = {.op = oc->op, .attrs = &call->call.attrs, .span = call->span,
                        .err = mc->err, .training = mc->training, .rng = &mc->rng};
    for (int i = 0; i < oc->nout; i++) {
        const ry_type *t = oc->outs[i];
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++) shape[d] = t->tensor.dims[d].value;
        res[i] = ry_tensor_new_on(vm_cpu_allocator(), t->tensor.dtype, t->tensor.ndim, shape);
        if (!res[i]) {
            for (int k = 0; k < i; k++) ry_tensor_release(res[k]);
            return ry_error_at(mc->err, call->span, "%s: out of memory for the result",
                               oc->op->name);
        }
    }
    ry_status st = oc->kernel(&kc, nargs, in, oc->nout, res);
    if (st == RY_OK) {
        int k = 0;
        *out = ry_value_unflatten(oc->out_type, res, &k);
        if (!*out) st = ry_error_at(mc->err, call->span, "out of memory");
    }
    for (int i = 0; i < oc->nout; i++) ry_tensor_release(res[i]); /* those not taken over */
    return st;
}

/* ---- the general path ---- */

static ry_type *arg_type(vm_machine *mc, const ry_value *v, const ry_expr *call, int i) {
    if (v->kind == RY_VAL_TENSOR) return ry_type_of_tensor(mc->scratch, v->tensor);
    if (v->kind == RY_VAL_TUPLE) {
        ry_type **fields = RY_NEW_ARRAY(mc->scratch, ry_type *, v->tuple.n);
        for (int k = 0; k < v->tuple.n; k++)
            if (!(fields[k] = arg_type(mc, v->tuple.fields[k], call, i))) return NULL;
        return ry_type_tuple_arena(mc->scratch, v->tuple.n, fields);
    }
    ry_error_at(mc->err, call->call.args[i]->span, "operator %s: argument %d is %s, not a tensor",
                call->call.callee->op.op->name, i + 1, ry_value_kind_name(v));
    return NULL;
}

/* *rtype: the result type (in mc->scratch, until the next call). */
static ry_status general_op(vm_machine *mc, const vm_opcall *oc, int nargs, ry_value *const *args,
                            ry_value **out, const ry_type **rtype) {
    const ry_expr *call = oc->call;
    ry_arena_reset(mc->scratch);
    ry_type **types = RY_NEW_ARRAY(mc->scratch, ry_type *, nargs ? nargs : 1);
    int nin = 0;
    for (int i = 0; i < nargs; i++) {
        if (!(types[i] = arg_type(mc, args[i], call, i))) return RY_ERR;
        int c = ry_value_count_tensors(args[i]);
        if (c < 0) return ry_error_at(mc->err, call->span, "out of memory");
        nin += c;
    }
    ry_tensor **in = RY_NEW_ARRAY(mc->scratch, ry_tensor *, nin ? nin : 1);
    for (int i = 0, k = 0; i < nargs; i++) k += ry_value_flatten(args[i], in + k, nin - k);
    ry_kernel_ctx kc = {.span = call->span, .err = mc->err, .training = mc->training,
                        .rng = &mc->rng};
    ry_type *rt = NULL;
    int nout = 0;
    ry_tensor **res = NULL;
    if (ry_op_run(oc->op, &call->call.attrs, mc->scratch, nargs, types, nin, in, &kc, &rt, &nout,
                  &res))
        return RY_ERR;
    int k = 0;
    *out = ry_value_unflatten(rt, res, &k);
    *rtype = rt;
    for (int i = 0; i < nout; i++) ry_tensor_release(res[i]);
    ry_free(res);
    if (!*out) return ry_error_at(mc->err, call->span, "out of memory");
    return RY_OK;
}

/* After a general call with tensor arguments and a static result: the
 * types seen become the fast path's, so a call whose shapes are symbolic
 * but repeat (a batch size, step after step) runs the relation once. A
 * call whose shapes keep changing stops learning after a few. */
#define MAX_RELEARN 4

static ry_type *copy_type(ry_arena *a, const ry_type *t) {
    if (t->kind != RY_TYPE_TUPLE) return ry_type_tensor_arena(a, t->tensor.dtype, t->tensor.ndim, t->tensor.dims);
    ry_type **fields = RY_NEW_ARRAY(a, ry_type *, t->tuple.n ? t->tuple.n : 1);
    for (int i = 0; i < t->tuple.n; i++) fields[i] = copy_type(a, t->tuple.fields[i]);
    return ry_type_tuple_arena(a, t->tuple.n, fields);
}

static void flatten(const ry_type *t, const ry_type **out, int *k) {
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++) flatten(t->tuple.fields[i], out, k);
        return;
    }
    if (out) out[*k] = t;
    (*k)++;
}

static void learn(vm_machine *mc, vm_opcall *oc, int nargs, ry_value *const *args,
                  const ry_type *rt) {
    if (oc->relearned >= MAX_RELEARN || !oc->kernel || nargs > 8 || !vm_type_static(rt)) return;
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != RY_VAL_TENSOR) return;
    int nout = 0;
    flatten(rt, NULL, &nout);
    if (nout > 8) return;
    ry_arena *a = mc->prog->arena;
    const ry_type **in = RY_NEW_ARRAY(a, const ry_type *, nargs ? nargs : 1);
    for (int i = 0; i < nargs; i++) in[i] = ry_type_of_tensor(a, args[i]->tensor);
    const ry_type *out = copy_type(a, rt);
    const ry_type **outs = RY_NEW_ARRAY(a, const ry_type *, nout ? nout : 1);
    int k = 0;
    flatten(out, outs, &k);
    oc->in_types = in;
    oc->out_type = out;
    oc->outs = outs;
    oc->nout = nout;
    oc->fast = true;
    oc->relearned++;
}

ry_status vm_run_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **out) {
    const vm_opcall *oc = I->opcall;
    ry_value *inline_args[8], **args = inline_args;
    if (I->n > 8 && !(args = ry_malloc(sizeof *args * (size_t)I->n)))
        return ry_error_at(mc->err, I->span, "out of memory");
    for (int i = 0; i < I->n; i++) args[i] = R[I->args[i]];
    ry_status st = RY_OK;
    bool taken = false;
    const ry_type *rt = NULL;
    if (oc->fast) st = fast_op(mc, oc, I->n, args, out, &taken);
    if (!taken) st = general_op(mc, oc, I->n, args, out, &rt);
    if (!taken && st == RY_OK) learn(mc, I->opcall, I->n, args, rt);
    if (args != inline_args) ry_free(args);
    return st;
}

