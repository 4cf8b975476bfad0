/*
 * vm_defer.c: deferred accumulation (ry_vm_opts.defer_accumulation), the
 * within-instance half of automatic batching. AD accumulates a weight's
 * gradient into its adjoint ref once per use of the weight,
 *
 *   %g = ref_read(%w_adj); %n = fused.matmul3(%a, %c, %g, code="add(x2, acc)",
 *                                              transpose_a=True); ref_write(%w_adj, %n)
 *
 * an outer product (1 x 750)^T (1 x 300) per Tree-LSTM node, each of which
 * reads and writes the whole 900 KB adjoint. Here such a call only keeps
 * its rows a and c (held, so nothing writes over them) and leaves the ref
 * as it was; when the ref is read for anything but the next such
 * accumulation (the end of the backward pass: the gradient returned), or
 * written with another value, or the run ends, the rows kept run as one
 * call of the same kernel over a and c stacked along axis 0 — the GEMM
 * g + A^T C with K = all rows, which sums exactly the products the calls
 * would have added, in one kernel's order. Nothing else changes: a call
 * whose ref or shapes do not fit runs at once.
 */
#include <string.h>

#include "runtime/vm_impl.h"

typedef struct vm_pend {
    ry_value *ref;          /* held */
    const insn *site;       /* the accumulation (its operator and attributes) */
    ry_tensor **a, **c;     /* held rows, in call order */
    int n, cap;
} vm_pend;

static bool has_code(const ry_op *op, const ry_attrs *attrs) {
    const char *code = ry_attr_str(op, attrs, "code");
    return code && (strcmp(code, "add(x2, acc)") == 0 || strcmp(code, "add(acc, x2)") == 0);
}

static bool in_list(int r, int n, const int *list) {
    for (int i = 0; i < n; i++)
        if (list[i] == r) return true;
    return false;
}

/* ref_read(r) -> %g at pc - 1; fused.matmul3(a, c, %g) with transpose_a
 * and the epilogue g + acc at pc, %g dying there; ref_write(r, result)
 * at pc + 1. */
void vm_defer_plan(vm_fn *f) {
    for (int pc = 0; pc < f->ncode; pc++) {
        f->code[pc].defer_ref = -1;
        f->code[pc].lazy_read = false;
    }
    for (int pc = 1; pc + 1 < f->ncode; pc++) {
        insn *I = &f->code[pc], *rd = &f->code[pc - 1], *wr = &f->code[pc + 1];
        if (I->op != I_OP || rd->op != I_REFREAD || wr->op != I_REFWRITE || I->n != 3) continue;
        const vm_opcall *oc = I->opcall;
        const ry_attrs *at = &oc->call->call.attrs;
        if (strcmp(oc->op->name, "fused.matmul3") != 0 || !ry_attr_bool(oc->op, at, "transpose_a") ||
            ry_attr_bool(oc->op, at, "transpose_b") || !has_code(oc->op, at))
            continue;
        int g = I->args[2];
        if (rd->dst != g || I->args[0] == g || I->args[1] == g || !in_list(g, I->nkill, I->kill) ||
            wr->a != rd->a || wr->b != I->dst)
            continue;
        I->defer_ref = rd->a;
        rd->lazy_read = true;
    }
}

static vm_pend *find(vm_machine *mc, const ry_value *ref) {
    for (int i = 0; i < mc->npend; i++)
        if (mc->pend[i].ref == ref) return &mc->pend[i];
    return NULL;
}

static void release_pend(vm_pend *e) {
    for (int i = 0; i < e->n; i++) {
        ry_tensor_release(e->a[i]);
        ry_tensor_release(e->c[i]);
    }
    ry_free(e->a);
    ry_free(e->c);
    ry_value_release(e->ref);
}

/* Removes entry e (released) from the table. */
static void remove_pend(vm_machine *mc, vm_pend *e) {
    release_pend(e);
    *e = mc->pend[--mc->npend];
}

/* The rows of x[0..n) (each (r_i, d)) one after another: (sum r_i, d). */
static ry_tensor *stack_rows(ry_allocator *pool, ry_tensor *const *x, int n) {
    int64_t shape[2] = {0, x[0]->shape[1]};
    for (int i = 0; i < n; i++) shape[0] += x[i]->shape[0];
    ry_tensor *t = ry_tensor_new_on(pool, x[0]->dtype, 2, shape);
    if (!t) return NULL;
    char *at = t->data;
    for (int i = 0; i < n; i++) {
        size_t nb = ry_tensor_nbytes(x[i]);
        memcpy(at, x[i]->data, nb);
        at += nb;
    }
    return t;
}

/* Whether the ref's value v may take the result: only the ref holds it
 * and its tensor owns its buffer (the kernel may write over x2). */
static bool private_value(const ry_value *v) {
    return v->refcount == 1 && v->tensor->refcount == 1 && v->tensor->alloc && !v->tensor->base;
}

ry_status vm_defer_force(vm_machine *mc, ry_value *ref, ry_span span) {
    vm_pend *e = find(mc, ref);
    if (!e) return RY_OK;
    const vm_opcall *oc = e->site->opcall;
    ry_allocator *pool = mc->prog->target->pool_allocator(mc->prog->pool);
    ry_value *g = ref->ref.value; /* a 2-D tensor (vm_defer_take) */
    ry_tensor *in[3] = {stack_rows(pool, e->a, e->n), stack_rows(pool, e->c, e->n), g->tensor};
    ry_status st = RY_OK;
    bool over = private_value(g);
    ry_tensor *res = over ? g->tensor
                          : ry_tensor_new_on(pool, g->tensor->dtype, 2, g->tensor->shape);
    if (!in[0] || !in[1] || !res) st = ry_error_at(mc->err, span, "out of memory in the vm");
    ry_kernel_ctx kc = {.op = oc->op, .attrs = &oc->call->call.attrs, .span = oc->call->span,
                        .err = mc->err, .training = mc->training, .rng = &mc->rng};
    /* g + A^T C: the call's own kernel, its shapes (K, M) x (K, N) x (M, N) -> (M, N) */
    if (st == RY_OK) st = oc->kernel->fn(&kc, 3, in, 1, &res);
    ry_tensor_release(in[0]);
    ry_tensor_release(in[1]);
    if (st == RY_OK && !over) {
        ry_value *v = ry_value_tensor(res);
        res = NULL;
        if (!v) st = ry_error_at(mc->err, span, "out of memory");
        else {
            ry_value_release(ref->ref.value);
            ref->ref.value = v;
        }
    }
    if (!over) ry_tensor_release(res);
    remove_pend(mc, e);
    return st;
}

static bool row_operand(const ry_value *v, const ry_tensor *g) {
    return v->kind == RY_VAL_TENSOR && v->tensor->ndim == 2 && v->tensor->dtype == g->dtype &&
           v->tensor->device.kind == RY_DEVICE_CPU;
}

static ry_status append(vm_machine *mc, vm_pend *e, ry_tensor *a, ry_tensor *c, ry_span span) {
    if (e->n == e->cap) {
        int ncap = e->cap ? e->cap * 2 : 16;
        ry_tensor **na = ry_realloc(e->a, sizeof *na * (size_t)ncap);
        if (na) e->a = na;
        ry_tensor **nc = na ? ry_realloc(e->c, sizeof *nc * (size_t)ncap) : NULL;
        if (nc) e->c = nc;
        if (!na || !nc) return ry_error_at(mc->err, span, "out of memory in the vm");
        e->cap = ncap;
    }
    e->a[e->n] = ry_tensor_retain(a);
    e->c[e->n++] = ry_tensor_retain(c);
    return RY_OK;
}

ry_status vm_defer_take(vm_machine *mc, const insn *I, ry_value **R, ry_value **out, bool *taken) {
    *taken = false;
    ry_value *ref = R[I->defer_ref], *g = R[I->args[2]];
    const ry_value *a = R[I->args[0]], *c = R[I->args[1]];
    vm_pend *e = ref->kind == RY_VAL_REF ? find(mc, ref) : NULL;
    bool fit = ref->kind == RY_VAL_REF && ref->ref.value == g && g->kind == RY_VAL_TENSOR &&
               g->tensor->device.kind == RY_DEVICE_CPU && g->tensor->ndim == 2 &&
               row_operand(a, g->tensor) && row_operand(c, g->tensor) &&
               a->tensor->shape[0] == c->tensor->shape[0] &&
               a->tensor->shape[1] == g->tensor->shape[0] && c->tensor->shape[1] == g->tensor->shape[1];
    if (fit && e && (e->site != I || e->a[0]->shape[1] != a->tensor->shape[1] ||
                     e->c[0]->shape[1] != c->tensor->shape[1]))
        fit = false;
    if (!fit) { /* runs now, on the ref's value with what is pending added */
        if (!e) return RY_OK;
        bool stale = ref->ref.value == g;
        if (vm_defer_force(mc, ref, I->span)) return RY_ERR;
        if (stale) {
            ry_value_release(R[I->args[2]]);
            R[I->args[2]] = ry_value_retain(ref->ref.value);
        }
        return RY_OK;
    }
    if (!e) {
        if (mc->npend == mc->cappend) {
            int ncap = mc->cappend ? mc->cappend * 2 : 8;
            vm_pend *fresh = ry_realloc(mc->pend, sizeof *fresh * (size_t)ncap);
            if (!fresh) return ry_error_at(mc->err, I->span, "out of memory in the vm");
            mc->pend = fresh;
            mc->cappend = ncap;
        }
        e = &mc->pend[mc->npend++];
        *e = (vm_pend){.ref = ry_value_retain(ref), .site = I};
    }
    if (append(mc, e, a->tensor, c->tensor, I->span)) return RY_ERR;
    *out = ry_value_retain(g);
    *taken = true;
    return RY_OK;
}

void vm_defer_overwrite(vm_machine *mc, const ry_value *ref, const ry_value *v) {
    vm_pend *e = find(mc, ref);
    if (e && ref->ref.value != v) remove_pend(mc, e);
}

ry_status vm_defer_flush(vm_machine *mc) {
    while (mc->npend > 0)
        if (vm_defer_force(mc, mc->pend[mc->npend - 1].ref, RY_NO_SPAN)) return RY_ERR;
    return RY_OK;
}

void vm_defer_drop(vm_machine *mc) {
    while (mc->npend > 0) remove_pend(mc, &mc->pend[mc->npend - 1]);
}
