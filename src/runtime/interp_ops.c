/*
 * interp_ops.c: the interpreter's leaf work: running an operator on
 * concrete values (types from the values, result rebuilt from the relation's
 * type), matching patterns, and checking arguments against annotated
 * parameter types where the static type could not (Any, symbolic dims).
 * The machine that sequences all this lives in interp.c.
 */
#include <string.h>

#include "runtime/interp_impl.h"

/* ---- operators ---- */

/* The concrete type of an operator argument: tensors and tuples of them. */
static ry_type *arg_type(machine *mc, const ry_value *v, const ry_expr *call, int i) {
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

static ry_status op_call(machine *mc, const ry_expr *call, int nargs, ry_value *const *args,
                         ry_value **out) {
    const ry_op *op = call->call.callee->op.op;
    ry_arena_reset(mc->scratch);
    if (nargs != op->nargs)
        return ry_error_at(mc->err, call->span, "operator %s takes %d arguments, not %d", op->name,
                           op->nargs, nargs);
    ry_type **types = RY_NEW_ARRAY(mc->scratch, ry_type *, nargs);
    int nin = 0;
    for (int i = 0; i < nargs; i++) {
        if (!(types[i] = arg_type(mc, args[i], call, i))) return RY_ERR;
        int c = ry_value_count_tensors(args[i]);
        if (c < 0) return ry_error_at(mc->err, call->span, "out of memory");
        nin += c;
    }
    ry_tensor **in = RY_NEW_ARRAY(mc->scratch, ry_tensor *, nin);
    for (int i = 0, k = 0; i < nargs; i++) k += ry_value_flatten(args[i], in + k, nin - k);
    ry_kernel_ctx kc = {.span = call->span, .err = mc->err, .training = mc->training,
                        .rng = &mc->rng};
    ry_type *rt = NULL;
    int nout = 0;
    ry_tensor **res = NULL;
    if (ry_op_run(NULL, op, &call->call.attrs, mc->scratch, nargs, types, nin, in, &kc, &rt, &nout, &res))
        return RY_ERR;
    int k = 0;
    *out = ry_value_unflatten(rt, res, &k);
    for (int i = 0; i < nout; i++) ry_tensor_release(res[i]); /* those not taken over */
    ry_free(res);
    if (!*out) return ry_error_at(mc->err, call->span, "out of memory");
    return RY_OK;
}

/* An operator call under a catch: the IR's memory (the types in
 * mc->scratch) runs out before any result exists, so nothing is
 * stranded and running out is an error at the call. */
typedef struct calling {
    machine *mc;
    const ry_expr *call;
    int nargs;
    ry_value *const *args;
    ry_value **out;
    ry_status st;
} calling;

static void call_op(void *c) {
    calling *x = c;
    x->st = op_call(x->mc, x->call, x->nargs, x->args, x->out);
}

ry_status run_op(machine *mc, const ry_expr *call, int nargs, ry_value *const *args,
                 ry_value **out) {
    calling c = {mc, call, nargs, args, out, RY_OK};
    if (ry_oom_catch(call_op, &c))
        return ry_error_at(mc->err, call->span, "%s: out of memory", call->call.callee->op.op->name);
    return c.st;
}

/* ---- patterns ----
 * _ matches anything; %x matches anything and binds it; C(p1..pn) matches a
 * value built by C whose fields match p1..pn; (p1..pn) matches a tuple of n
 * fields. Nesting is as deep as the text, so recursion is bounded. */
bool pat_matches(const ry_pattern *p, const ry_value *v) {
    switch (p->kind) {
    case RY_PAT_WILDCARD:
    case RY_PAT_VAR: return true;
    case RY_PAT_CTOR:
        if (v->kind != RY_VAL_ADT || v->adt.ctor != p->ctor.ctor || v->adt.n != p->ctor.n)
            return false;
        for (int i = 0; i < p->ctor.n; i++)
            if (!pat_matches(p->ctor.args[i], v->adt.fields[i])) return false;
        return true;
    case RY_PAT_TUPLE:
        if (v->kind != RY_VAL_TUPLE || v->tuple.n != p->tuple.n) return false;
        for (int i = 0; i < p->tuple.n; i++)
            if (!pat_matches(p->tuple.fields[i], v->tuple.fields[i])) return false;
        return true;
    }
    return false;
}

void pat_bind(const ry_pattern *p, ry_value *v, act *a) {
    intptr_t slot;
    switch (p->kind) {
    case RY_PAT_WILDCARD: return;
    case RY_PAT_VAR:
        if (ry_ptrmap_get(&a->info->slots, p->var, &slot)) {
            ry_value_release(a->slot[slot]);
            a->slot[slot] = ry_value_retain(v);
        }
        return;
    case RY_PAT_CTOR:
        for (int i = 0; i < p->ctor.n; i++) pat_bind(p->ctor.args[i], v->adt.fields[i], a);
        return;
    case RY_PAT_TUPLE:
        for (int i = 0; i < p->tuple.n; i++) pat_bind(p->tuple.fields[i], v->tuple.fields[i], a);
        return;
    }
}

