/*
 * vm_ops.c: the VM's operator calls. The fast path runs when the input
 * shapes match a signature fixed at compile time or learned at run time
 * (compare shapes, find the result's storage, call the kernel); the result
 * goes over a dying argument (in place) or into the instruction's storage
 * slot as the memory plan says (vm_plan.c), where reference counts show
 * that nothing else holds that buffer. Otherwise the general path: types
 * from the values, the type relation at run time (ry_op_run), a signature
 * learned for next time (its own block each, VM_SIGS per call). Tuple
 * arguments (concatenate's) flatten into the fast path's inputs. Every
 * call's arguments pass vm_run_op, where the row-sparse rules (rows_ops.h)
 * see them first; zeros_like there is a known zero each call site keeps.
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

/* Whether v is a tensor owning its buffer (not a view, not viewed) of
 * static type rt's dtype and shape. */
static bool owns_buffer_of(const ry_value *v, const ry_type *rt) {
    if (v->kind != RY_VAL_TENSOR) return false;
    const ry_tensor *t = v->tensor;
    if (t->refcount != 1 || !t->alloc || t->base || t->dtype != rt->tensor.dtype ||
        t->ndim != rt->tensor.ndim)
        return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != rt->tensor.dims[d].value) return false;
    return true;
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
    if (!owns_buffer_of(v, rt)) return false;
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
    /* a slot's buffer holds at least its size class (made below), so the
     * buffer's header (another cache line) is read only past that */
    size_t need = type_bytes(rt), cls = mc->fs[mc->nf - 1].fn->slot_bytes[I->slot];
    ry_value *old = S[I->slot];
    if (old && old->refcount == 1 && old->kind == RY_VAL_TENSOR && old->tensor->refcount == 1 &&
        (need <= cls || mc->prog->target->capacity(old->tensor) >= need)) {
        retype(old->tensor, rt);
        *v = ry_value_retain(old);
        *res = old->tensor;
        mc->prog->stats.ran_reused++;
        return RY_OK;
    }
    /* a new buffer of the slot's size class, at least (so the slot's other
     * results fit it next time); the old value, if something still holds
     * it, lives on there */
    size_t cap = need;
    if (cls > cap) cap = cls;
    int64_t bytes = (int64_t)(cap ? cap : 1);
    ry_tensor *t = ry_tensor_new_on(mc->prog->target->pool_allocator(mc->prog->pool), RY_UINT8, 1, &bytes);
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
 * decides, with the relation's own messages), compared as keys: each
 * input's dtype, rank and dims side by side in one array. */
static void key_of(vm_key *k, ry_dtype dt, int ndim, const int64_t *shape, const ry_dim *dims) {
    memset(k, 0, sizeof *k);
    k->dtype = (int)dt;
    k->ndim = ndim;
    for (int d = 0; d < ndim; d++) k->shape[d] = dims ? dims[d].value : shape[d];
}

vm_key *vm_keys_of(ry_arena *a, int n, const ry_type *const *types) {
    vm_key *k = RY_NEW_ARRAY(a, vm_key, n ? n : 1);
    for (int i = 0; i < n; i++)
        key_of(&k[i], types[i]->tensor.dtype, types[i]->tensor.ndim, NULL, types[i]->tensor.dims);
    return k;
}

/* The input tensors of args (tensors, or tuples of tensors: their
 * fields) into in[0..VM_MAX_IN); -1 when args are not all such. */
static int flat_inputs(int nargs, ry_value *const *args, ry_tensor **in) {
    int n = 0;
    for (int i = 0; i < nargs; i++) {
        const ry_value *v = args[i];
        if (v->kind == RY_VAL_TENSOR) {
            if (n == VM_MAX_IN) return -1;
            in[n++] = v->tensor;
        } else if (v->kind == RY_VAL_TUPLE) {
            for (int k = 0; k < v->tuple.n; k++) {
                const ry_value *f = v->tuple.fields[k];
                if (f->kind != RY_VAL_TENSOR || n == VM_MAX_IN) return -1;
                in[n++] = f->tensor;
            }
        } else {
            return -1;
        }
    }
    return n;
}

static bool sig_matches(const vm_sig *sg, int nin, ry_tensor *const *in) {
    if (sg->nin != nin) return false;
    for (int i = 0; i < nin; i++) {
        const ry_tensor *x = in[i];
        const vm_key *k = &sg->keys[i];
        if ((int)x->dtype != k->dtype || x->ndim != k->ndim) return false;
        for (int d = 0; d < k->ndim; d++)
            if (x->shape[d] != k->shape[d]) return false;
    }
    return true;
}

/* The signature of oc for these inputs (the last one matched first). */
static const vm_sig *find_sig(vm_opcall *oc, int nin, ry_tensor *const *in) {
    if (sig_matches(&oc->sig[oc->hit], nin, in)) return &oc->sig[oc->hit];
    for (int k = 0; k < oc->nsig; k++)
        if (k != oc->hit && sig_matches(&oc->sig[k], nin, in)) {
            oc->hit = k;
            return &oc->sig[k];
        }
    return NULL;
}

/* Whether the tuple of tensors t (a call's last results) may take the new
 * results of signature sg: nothing but the call holds it or its fields,
 * whose tensors own their buffers and have the results' dtypes and shapes. */
static bool reusable_results(const ry_value *t, const vm_sig *sg) {
    if (t->refcount != 1 || t->kind != RY_VAL_TUPLE || t->tuple.n != sg->nout) return false;
    for (int i = 0; i < sg->nout; i++)
        if (t->tuple.fields[i]->refcount != 1 || !owns_buffer_of(t->tuple.fields[i], sg->outs[i]))
            return false;
    return true;
}

static ry_status fast_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **S, int nargs,
                         ry_value *const *args, ry_value **out, bool *taken) {
    vm_opcall *oc = I->opcall;
    ry_tensor *in[VM_MAX_IN];
    ry_tensor *inline_res[8], **res = inline_res;
    *taken = false;
    int nin = flat_inputs(nargs, args, in);
    if (nin < 0) return RY_OK;
    const vm_sig *sg = find_sig(oc, nin, in);
    if (!sg || sg->nout > 8) return RY_OK;
    *taken = true;
    const ry_expr *call = oc->call;
    ry_kernel_ctx kc = {.op = oc->op, .attrs = &call->call.attrs, .span = call->span,
                        .err = mc->err, .training = mc->training, .rng = &mc->rng};
    if (S && I->slot >= 0 && sg->nout == 1 && sg->out_type->kind == RY_TYPE_TENSOR) {
        if (planned_result(mc, I, R, S, sg->out_type, out, &res[0])) return RY_ERR;
        ry_status st = oc->kernel->fn(&kc, nin, in, 1, res);
        if (st) {
            ry_value_release(*out);
            *out = NULL;
        }
        return st;
    }
    /* several results (a fused call's list): the tuple of the last call
     * again when only the call holds it (a warm step allocates nothing) */
    ry_value *last = oc->results;
    if (mc->plan && last && reusable_results(last, sg)) {
        for (int i = 0; i < sg->nout; i++) res[i] = last->tuple.fields[i]->tensor;
        ry_status st = oc->kernel->fn(&kc, nin, in, sg->nout, res);
        if (st == RY_OK) *out = ry_value_retain(last);
        return st;
    }
    /* without a plan, every result in a fresh buffer (ry_vm_opts.no_plan) */
    const ry_target *tg = mc->prog->target;
    ry_allocator *alloc = mc->plan ? tg->pool_allocator(mc->prog->pool) : tg->allocator();
    for (int i = 0; i < sg->nout; i++) {
        const ry_type *t = sg->outs[i];
        int64_t shape[RY_MAX_RANK];
        for (int d = 0; d < t->tensor.ndim; d++) shape[d] = t->tensor.dims[d].value;
        res[i] = ry_tensor_new_on(alloc, t->tensor.dtype, t->tensor.ndim, shape);
        if (!res[i]) {
            for (int k = 0; k < i; k++) ry_tensor_release(res[k]);
            return ry_error_at(mc->err, call->span, "%s: out of memory for the result",
                               oc->op->name);
        }
    }
    ry_status st = oc->kernel->fn(&kc, nin, in, sg->nout, res);
    if (st == RY_OK) {
        int k = 0;
        *out = ry_value_unflatten(sg->out_type, res, &k);
        if (!*out) st = ry_error_at(mc->err, call->span, "out of memory");
    }
    for (int i = 0; i < sg->nout; i++) ry_tensor_release(res[i]); /* those not taken over */
    if (st == RY_OK && mc->plan && sg->nout > 1 && sg->out_type->kind == RY_TYPE_TUPLE &&
        sg->out_type->tuple.n == sg->nout) {
        ry_value_release(oc->results);
        oc->results = ry_value_retain(*out);
    }
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
    if (ry_op_run(mc->prog->target, oc->op, &call->call.attrs, mc->scratch, nargs, types, nin, in, &kc, &rt, &nout,
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

/* The general path under a catch: the IR's memory (the argument and
 * result types in mc->scratch) runs out before any result exists, so
 * running out is an error at the call and nothing is stranded. */
typedef struct general {
    vm_machine *mc;
    const vm_opcall *oc;
    int nargs;
    ry_value *const *args;
    ry_value **out;
    const ry_type **rtype;
    ry_status st;
} general;

static void run_general(void *g) {
    general *x = g;
    x->st = general_op(x->mc, x->oc, x->nargs, x->args, x->out, x->rtype);
}

static ry_status caught_general_op(vm_machine *mc, const vm_opcall *oc, int nargs,
                                   ry_value *const *args, ry_value **out, const ry_type **rtype) {
    general g = {mc, oc, nargs, args, out, rtype, RY_OK};
    if (ry_oom_catch(run_general, &g))
        return ry_error_at(mc->err, oc->call->span, "%s: out of memory", oc->op->name);
    return g.st;
}

/* After a general call with tensor arguments and a static result: the
 * types seen become one of the fast path's signatures, so a call whose
 * shapes are symbolic but repeat (a batch size step after step, a
 * Tree-LSTM's sentence lengths) runs the relation once per shape. Each
 * learned signature lives in one block of its own; past VM_SIGS of them
 * the oldest learned one gives its place (and block) to the new one, so
 * the program stays the same size however many shapes it sees. */

/* Bump allocation over one block; with base NULL it only counts. */
typedef struct bump {
    char *base;
    size_t used;
} bump;

static void *take(bump *b, size_t n) {
    void *p = b->base ? b->base + b->used : NULL;
    b->used += (n + 15) & ~(size_t)15;
    return p;
}

static ry_type *bump_tensor(bump *b, ry_dtype dt, int ndim, const int64_t *shape,
                            const ry_dim *dims) {
    ry_type *o = take(b, sizeof *o);
    ry_dim *d = take(b, sizeof *d * (size_t)(ndim ? ndim : 1));
    if (!o) return NULL;
    memset(o, 0, sizeof *o);
    o->kind = RY_TYPE_TENSOR;
    o->tensor.dtype = dt;
    o->tensor.ndim = ndim;
    o->tensor.dims = d;
    for (int k = 0; k < ndim; k++) d[k] = dims ? dims[k] : (ry_dim){RY_DIM_CONST, shape[k], NULL};
    return o;
}

/* A copy of t (static tensors and tuples of them). */
static ry_type *bump_type(bump *b, const ry_type *t) {
    if (t->kind != RY_TYPE_TUPLE)
        return bump_tensor(b, t->tensor.dtype, t->tensor.ndim, NULL, t->tensor.dims);
    ry_type *o = take(b, sizeof *o);
    ry_type **f = take(b, sizeof *f * (size_t)(t->tuple.n ? t->tuple.n : 1));
    for (int i = 0; i < t->tuple.n; i++) {
        ry_type *x = bump_type(b, t->tuple.fields[i]);
        if (f) f[i] = x;
    }
    if (!o) return NULL;
    memset(o, 0, sizeof *o);
    o->kind = RY_TYPE_TUPLE;
    o->tuple.n = t->tuple.n;
    o->tuple.fields = f;
    return o;
}

static void flatten(const ry_type *t, const ry_type **out, int *k) {
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++) flatten(t->tuple.fields[i], out, k);
        return;
    }
    if (out) out[*k] = t;
    (*k)++;
}

/* The signature in[0..nin) -> rt laid out in b (counted when b->base is NULL). */
static vm_sig build_sig(bump *b, int nin, ry_tensor *const *in, const ry_type *rt, int nout) {
    vm_sig sg = {0};
    vm_key *keys = take(b, sizeof *keys * (size_t)(nin ? nin : 1));
    for (int i = 0; keys && i < nin; i++) key_of(&keys[i], in[i]->dtype, in[i]->ndim, in[i]->shape, NULL);
    ry_type *out = bump_type(b, rt);
    const ry_type **outs = take(b, sizeof *outs * (size_t)(nout ? nout : 1));
    if (!b->base) return sg;
    int k = 0;
    flatten(out, outs, &k);
    return (vm_sig){.keys = keys, .nin = nin, .out_type = out, .nout = nout, .outs = outs,
                    .mem = b->base};
}

/* Room for one more signature: the array grows to VM_SIGS. */
static bool sig_room(vm_opcall *oc) {
    if (oc->nsig < oc->capsig || oc->capsig >= VM_SIGS) return true;
    int ncap = oc->capsig < 4 ? 4 : oc->capsig * 2;
    if (ncap > VM_SIGS) ncap = VM_SIGS;
    vm_sig *fresh = ry_malloc(sizeof *fresh * (size_t)ncap);
    if (!fresh) return false;
    if (oc->nsig) memcpy(fresh, oc->sig, sizeof *fresh * (size_t)oc->nsig);
    if (oc->sig_owned) ry_free(oc->sig);
    oc->sig = fresh;
    oc->sig_owned = true;
    oc->capsig = ncap;
    return true;
}

static void learn(vm_opcall *oc, int nargs, ry_value *const *args, const ry_type *rt) {
    ry_tensor *in[VM_MAX_IN];
    int nin = flat_inputs(nargs, args, in);
    if (!oc->kernel || nin < 0 || !vm_type_static(rt)) return;
    int nout = 0;
    flatten(rt, NULL, &nout);
    if (nout > 8 || !sig_room(oc)) return;
    bump b = {NULL, 0};
    build_sig(&b, nin, in, rt, nout);
    if (!(b.base = ry_malloc(b.used))) return;
    b.used = 0;
    vm_sig sg = build_sig(&b, nin, in, rt, nout);
    int at = oc->nsig;
    if (at < oc->capsig) {
        oc->nsig++;
    } else { /* full: the next learned one in turn (the compile-time one stays) */
        at = oc->relearned % oc->capsig;
        if (!oc->sig[at].mem) at = (at + 1) % oc->capsig;
        ry_free(oc->sig[at].mem);
    }
    oc->sig[at] = sg;
    oc->hit = at;
    oc->relearned++;
}

void vm_opcalls_free(ry_vm_program *p) {
    for (int f = 0; f < p->nfns; f++)
        for (int i = 0; i < p->fns[f]->ncode; i++) {
            const insn *I = &p->fns[f]->code[i];
            if (I->op != I_OP) continue;
            vm_opcall *oc = I->opcall;
            for (int k = 0; k < oc->nsig; k++) ry_free(oc->sig[k].mem);
            if (oc->sig_owned) ry_free(oc->sig);
            oc->sig = NULL;
            oc->nsig = oc->capsig = 0;
            oc->sig_owned = false;
            ry_value_release(oc->zero);
            oc->zero = NULL;
            ry_value_release(oc->results);
            oc->results = NULL;
        }
}

/* zeros_like with row-sparse values on: a known zero (rows_ops.h) that
 * the call keeps and hands out again while the shape repeats (a known
 * zero is never written, so its holders may share it). false: not a
 * float tensor of rank >= 1; the general rules apply. */
static bool known_zero(vm_machine *mc, const insn *I, const ry_value *x, ry_value **out,
                       ry_status *st) {
    vm_opcall *oc = I->opcall;
    ry_dtype dt;
    int nd;
    const int64_t *shape;
    if (x->kind == RY_VAL_TENSOR) dt = x->tensor->dtype, nd = x->tensor->ndim, shape = x->tensor->shape;
    else if (x->kind == RY_VAL_ROWS) dt = x->rows.dtype, nd = x->rows.ndim, shape = x->rows.shape;
    else return false;
    if (nd < 1 || !is_float(dt)) return false;
    const ry_tensor *z = oc->zero ? oc->zero->tensor : NULL;
    if (!z || z->dtype != dt || z->ndim != nd ||
        memcmp(z->shape, shape, sizeof *shape * (size_t)nd) != 0) {
        ry_value *fresh = ry_rows_zero_view(&mc->prog->zero_base, dt, nd, shape);
        if (!fresh) {
            *st = ry_error_at(mc->err, I->span, "zeros_like: out of memory");
            return true;
        }
        ry_value_release(oc->zero);
        oc->zero = fresh;
    }
    *out = ry_value_retain(oc->zero);
    *st = RY_OK;
    return true;
}

ry_status vm_run_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **S, ry_value **out) {
    const vm_opcall *oc = I->opcall;
    if (mc->defer && I->defer_ref >= 0) { /* a weight gradient's rows, kept (vm_defer.c) */
        bool taken = false;
        if (vm_defer_take(mc, I, R, out, &taken)) return RY_ERR;
        if (taken) return RY_OK;
    }
    ry_value *inline_args[8], **args = inline_args;
    if (I->n > 8 && !(args = ry_malloc(sizeof *args * (size_t)I->n)))
        return ry_error_at(mc->err, I->span, "out of memory");
    bool rows = mc->sparse_rows && oc->rows_rule;
    for (int i = 0; i < I->n; i++) {
        args[i] = R[I->args[i]];
        rows |= args[i]->kind == RY_VAL_ROWS || args[i]->kind == RY_VAL_TUPLE;
    }
    ry_status st = RY_OK;
    if (oc->zeros_like && mc->sparse_rows && I->n == 1 && known_zero(mc, I, args[0], out, &st))
        return st;
    /* row-sparse values: kept sparse by their own rules, else densified
     * (only an operator with rules, or row-sparse arguments, need look) */
    const ry_value *acc = NULL; /* the ref the result goes into next, if it holds an argument */
    if (rows && I->refacc >= 0 && R[I->refacc] && R[I->refacc]->kind == RY_VAL_REF)
        acc = R[I->refacc]->ref.value;
    if (rows && ry_rows_op(mc->sparse_rows, oc->op, oc->call, I->n, args, I->args, I->nkill,
                           I->kill, acc, out, &st, mc->err, mc->scratch)) {
        if (args != inline_args) ry_free(args);
        return st;
    }
    bool taken = false;
    const ry_type *rt = NULL;
    if (oc->nsig) st = fast_op(mc, I, R, S, I->n, args, out, &taken);
    if (!taken) {
        mc->prog->stats.ran_general++;
        st = caught_general_op(mc, oc, I->n, args, out, &rt);
    }
    if (!taken && st == RY_OK) learn(I->opcall, I->n, args, rt);
    if (args != inline_args) ry_free(args);
    return st;
}

