/*
 * vm_ops.c: the VM's operator calls. The fast path runs when the input
 * shapes match a signature fixed at compile time or learned at run time
 * (compare shapes, find the result's storage, call the kernel); the result
 * goes over a dying argument (in place) or into the instruction's storage
 * slot as the memory plan says (vm_plan.c), where reference counts show
 * that nothing else holds that buffer. Otherwise the general path: types
 * from the values, the type relation at run time (ry_op_run), a signature
 * learned for next time. Every call's arguments pass vm_run_op, where the
 * row-sparse rules (rows_ops.h) see them first.
 */
#include <string.h>

#include "runtime/rows_ops.h"
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

/* ---- results in planned storage (vm_plan.c) ---- */

static bool is_float(ry_dtype d) { return d == RY_FLOAT32 || d == RY_FLOAT64; }

/* Gives t (which nobody else sees) the shape of type rt, within its
 * buffer's capacity. */
static void retype(ry_tensor *t, const ry_type *rt) {
    t->dtype = rt->tensor.dtype;
    t->ndim = rt->tensor.ndim;
    int64_t size = 1;
    for (int d = 0; d < RY_MAX_RANK; d++) {
        t->shape[d] = d < t->ndim ? rt->tensor.dims[d].value : 0;
        if (d < t->ndim) size *= t->shape[d];
    }
    t->size = size;
}

static size_t type_bytes(const ry_type *rt) {
    size_t n = ry_dtype_size(rt->tensor.dtype);
    for (int d = 0; d < rt->tensor.ndim; d++) n *= (size_t)rt->tensor.dims[d].value;
    return n;
}

/* The value v (of a register that dies at this instruction) may take the
 * result when nothing but the references this instruction accounts for
 * holds it: the register, the result's slot, and the ref the next
 * instruction writes the result into (AD's accumulation: the ref's old
 * value is replaced by the new one at once). Its tensor must own its
 * buffer (not a view, not viewed: refcount 1) and have the result's
 * dtype and shape. */
static bool can_take(const insn *I, ry_value **R, ry_value **S, const ry_value *v,
                     const ry_type *rt) {
    if (v->kind != RY_VAL_TENSOR) return false;
    const ry_tensor *t = v->tensor;
    if (t->refcount != 1 || !t->alloc || t->base || t->dtype != rt->tensor.dtype ||
        t->ndim != rt->tensor.ndim)
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != rt->tensor.dims[d].value) return false;
    int expect = 1;
    if (S && I->slot >= 0 && S[I->slot] == v) expect++;
    if (I->refacc >= 0) {
        const ry_value *r = R[I->refacc];
        if (r && r->kind == RY_VAL_REF && r->ref.value == v) expect++;
    }
    return v->refcount == expect;
}

/* The result of I (one tensor of static type rt) in storage that nothing
 * else holds: a dying argument's (in place), else the value in I's slot
 * when only the slot holds it, else a new value that the slot keeps.
 * *v: a new reference; *res: its tensor, for the kernel. */
static ry_status planned_result(vm_machine *mc, const insn *I, ry_value **R, ry_value **S,
                                const ry_type *rt, ry_value **v, ry_tensor **res) {
    if (I->inplace && is_float(rt->tensor.dtype))
        for (int k = 0; k < I->n && k < 8; k++) {
            ry_value *x = R[I->args[k]];
            if (!(I->inplace >> k & 1) || !can_take(I, R, S, x, rt)) continue;
            *v = ry_value_retain(x);
            *res = x->tensor;
            mc->prog->stats.ran_inplace++;
            return RY_OK;
        }
    size_t need = type_bytes(rt);
    ry_value *old = S[I->slot];
    if (old && old->refcount == 1 && old->kind == RY_VAL_TENSOR && old->tensor->refcount == 1 &&
        vm_alloc_capacity(old->tensor) >= need) {
        retype(old->tensor, rt);
        *v = ry_value_retain(old);
        *res = old->tensor;
        mc->prog->stats.ran_reused++;
        return RY_OK;
    }
    /* a new buffer of the slot's size class, at least (so the slot's other
     * results fit it next time); the old value, if something still holds
     * it, lives on there */
    size_t cap = need, cls = mc->fs[mc->nf - 1].fn->slot_bytes[I->slot];
    if (cls > cap) cap = cls;
    int64_t bytes = (int64_t)(cap ? cap : 1);
    ry_tensor *t = ry_tensor_new_on(vm_cpu_allocator(), RY_UINT8, 1, &bytes);
    ry_value *nv = t ? ry_value_tensor(t) : NULL;
    if (!nv)
        return ry_error_at(mc->err, I->span, "%s: out of memory for the result",
                           I->opcall->op->name);
    mc->prog->stats.ran_fresh++;
    retype(t, rt);
    ry_value_release(old);
    S[I->slot] = nv;
    *v = ry_value_retain(nv);
    *res = t;
    return RY_OK;
}

/* ---- the fast path ----
 * Inputs: tensors of exactly the compile-time types (else the general path
 * decides, with the relation's own messages). */
static bool sig_matches(const vm_sig *sg, int nargs, ry_value *const *args) {
    for (int i = 0; i < nargs; i++)
        if (!same_type(args[i]->tensor, sg->in_types[i])) return false;
    return true;
}

/* The signature of oc for these arguments (the last one matched first). */
static const vm_sig *find_sig(vm_opcall *oc, int nargs, ry_value *const *args) {
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != RY_VAL_TENSOR) return NULL;
    if (sig_matches(&oc->sig[oc->hit], nargs, args)) return &oc->sig[oc->hit];
    for (int k = 0; k < oc->nsig; k++)
        if (k != oc->hit && sig_matches(&oc->sig[k], nargs, args)) {
            oc->hit = k;
            return &oc->sig[k];
        }
    return NULL;
}

static ry_status fast_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **S, int nargs,
                         ry_value *const *args, ry_value **out, bool *taken) {
    vm_opcall *oc = I->opcall;
    ry_tensor *inline_in[8], **in = inline_in;
    ry_tensor *inline_res[8], **res = inline_res;
    *taken = false;
    if (nargs > 8) return RY_OK;
    const vm_sig *sg = find_sig(oc, nargs, args);
    if (!sg || sg->nout > 8) return RY_OK;
    for (int i = 0; i < nargs; i++) in[i] = args[i]->tensor;
    *taken = true;
    const ry_expr *call = oc->call;
    ry_kernel_ctx kc = {.op = oc->op, .attrs = &call->call.attrs, .span = call->span,
                        .err = mc->err, .training = mc->training, .rng = &mc->rng};
    if (S && I->slot >= 0 && sg->nout == 1 && sg->out_type->kind == RY_TYPE_TENSOR) {
        if (planned_result(mc, I, R, S, sg->out_type, out, &res[0])) return RY_ERR;
        ry_status st = oc->kernel(&kc, nargs, in, 1, res);
        if (st) {
            ry_value_release(*out);
            *out = NULL;
        }
        return st;
    }
    for (int i = 0; i < sg->nout; i++) {
        const ry_type *t = sg->outs[i];
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++) shape[d] = t->tensor.dims[d].value;
        res[i] = ry_tensor_new_on(vm_cpu_allocator(), t->tensor.dtype, t->tensor.ndim, shape);
        if (!res[i]) {
            for (int k = 0; k < i; k++) ry_tensor_release(res[k]);
            return ry_error_at(mc->err, call->span, "%s: out of memory for the result",
                               oc->op->name);
        }
    }
    ry_status st = oc->kernel(&kc, nargs, in, sg->nout, res);
    if (st == RY_OK) {
        int k = 0;
        *out = ry_value_unflatten(sg->out_type, res, &k);
        if (!*out) st = ry_error_at(mc->err, call->span, "out of memory");
    }
    for (int i = 0; i < sg->nout; i++) ry_tensor_release(res[i]); /* those not taken over */
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
 * types seen become one of the fast path's signatures (VM_SIGS of them,
 * replaced in turn), so a call whose shapes are symbolic but repeat (a
 * batch size step after step, a Tree-LSTM's few sentence lengths) runs
 * the relation once per shape. A call whose shapes keep changing stops
 * learning after MAX_RELEARN (what it learned stays in the program's
 * arena). */
#define MAX_RELEARN 256

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
    int at = oc->nsig < VM_SIGS ? oc->nsig++ : oc->relearned % VM_SIGS;
    oc->sig[at] = (vm_sig){.in_types = in, .out_type = out, .nout = nout, .outs = outs};
    oc->hit = at;
    oc->relearned++;
}

ry_status vm_run_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **S, ry_value **out) {
    const vm_opcall *oc = I->opcall;
    ry_value *inline_args[8], **args = inline_args;
    if (I->n > 8 && !(args = ry_malloc(sizeof *args * (size_t)I->n)))
        return ry_error_at(mc->err, I->span, "out of memory");
    for (int i = 0; i < I->n; i++) args[i] = R[I->args[i]];
    ry_status st = RY_OK;
    /* row-sparse values: kept sparse by their own rules, else densified */
    if (ry_rows_op(mc->sparse_rows, oc->op, oc->call, I->n, args, I->args, I->nkill, I->kill, out,
                   &st, mc->err)) {
        if (args != inline_args) ry_free(args);
        return st;
    }
    bool taken = false;
    const ry_type *rt = NULL;
    if (oc->nsig) st = fast_op(mc, I, R, S, I->n, args, out, &taken);
    if (!taken) st = general_op(mc, oc, I->n, args, out, &rt);
    if (!taken && st == RY_OK) learn(mc, I->opcall, I->n, args, rt);
    if (args != inline_args) ry_free(args);
    return st;
}

