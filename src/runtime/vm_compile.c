/*
 * vm_compile.c: compiles a type-checked module to VM code. Each global is
 * put in A-normal form (ry_anf, new nodes in the module's arena; the
 * globals themselves are left as they were), then every function, globals
 * and nested function expressions alike, becomes a vm_fn: one register per
 * variable and temporary, one instruction per let value. Operators, global
 * callees, constructors and constants are resolved here, once; so are the
 * result types of operator calls whose inputs have static shapes. Register
 * liveness (here) then gives each function its memory plan (vm_plan.c).
 * The machine that runs the code is vm_exec.c.
 */
#include <pthread.h>
#include <string.h>

#include "relayc/pass.h"
#include "runtime/vm_impl.h"
#include "tensor/oom.h"

/* ry_anf allocates the ANF forms in the module's arena: programs compiled
 * from one module in several threads at once (one VM per worker) take
 * turns there. Nothing else of the module is written. */
static pthread_mutex_t anf_lock = PTHREAD_MUTEX_INITIALIZER;

vm_fn *vm_fn_of(const ry_vm_program *prog, const ry_expr *func) {
    intptr_t got;
    return ry_ptrmap_get(&prog->fnmap, func, &got) ? (vm_fn *)got : NULL;
}

/* ---- the compiler's state ---- */

typedef struct cc {
    ry_vm_program *p;
    vm_fn *fn;
    ry_arena *tmp;   /* per function: the variable map, jump lists */
    ry_ptrmap vars;       /* ry_var* -> register */
    ry_error *err;
    bool failed;
} cc;

static void fail(cc *c, ry_span span, const char *what, const char *name) {
    if (c->failed) return;
    c->failed = true;
    ry_error_at(c->err, span, "vm: %s%s", what, name ? name : "");
}

static ry_value *own(ry_vm_program *p, ry_value *v) {
    if (!v) return NULL;
    if (p->nowned == p->capowned) {
        int ncap = p->capowned ? p->capowned * 2 : 64;
        ry_value **fresh = ry_realloc(p->owned, sizeof *fresh * (size_t)ncap);
        if (!fresh) {
            ry_value_release(v);
            return NULL;
        }
        p->owned = fresh;
        p->capowned = ncap;
    }
    p->owned[p->nowned++] = v;
    return v;
}

static int new_reg(cc *c) { return c->fn->nregs++; }

static int emit(cc *c, insn in) {
    vm_fn *f = c->fn;
    if (f->ncode == f->capcode) {
        int ncap = f->capcode ? f->capcode * 2 : 32;
        insn *fresh = ry_realloc(f->code, sizeof *fresh * (size_t)ncap);
        if (!fresh) {
            fail(c, in.span, "out of memory", NULL);
            return -1;
        }
        f->code = fresh;
        f->capcode = ncap;
    }
    f->code[f->ncode] = in;
    c->p->stats.ninsns++;
    return f->ncode++;
}

static insn mk(vm_opcode op, const ry_expr *e, int dst) {
    return (insn){.op = (uint8_t)op, .dst = dst, .a = -1, .b = -1, .slot = -1, .refacc = -1,
                  .e = e, .span = e->span};
}

static void patch(cc *c, int at, int target) {
    if (at >= 0) c->fn->code[at].b = target;
}

/* ---- functions: free variables and registration ---- */

static void find_free(ry_vm_program *p, ry_arena *a, const ry_expr *fn, vm_fn *f) {
    f->free = ry_func_free_vars(a, p->arena, fn, &f->nfree);
}

/* Whether t has a dimension left open: a ? one (any_only), or also a
 * symbolic one. An annotation with one leaves a check for run time
 * (constant dims and dtypes are settled by the type checker). */
static bool open_dims(const ry_type *t, bool any_only) {
    if (!t) return false;
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (open_dims(t->tuple.fields[i], any_only)) return true;
        return false;
    }
    if (t->kind != RY_TYPE_TENSOR) return false;
    for (int d = 0; d < t->tensor.ndim; d++)
        if (any_only ? t->tensor.dims[d].kind == RY_DIM_ANY : t->tensor.dims[d].kind != RY_DIM_CONST)
            return true;
    return false;
}

/* Registers a function expression (compiled later, from the work list). */
static vm_fn *add_fn(ry_vm_program *p, const ry_expr *fn, const char *name) {
    vm_fn *got = vm_fn_of(p, fn);
    if (got) return got;
    if (p->nfns == p->capfns) {
        int ncap = p->capfns ? p->capfns * 2 : 32;
        vm_fn **fresh = RY_NEW_ARRAY(p->arena, vm_fn *, ncap);
        if (p->nfns) memcpy(fresh, p->fns, sizeof *fresh * (size_t)p->nfns);
        p->fns = fresh;
        p->capfns = ncap;
    }
    vm_fn *f = RY_NEW(p->arena, vm_fn);
    f->func = fn;
    f->name = name;
    ry_arena *tmp = ry_arena_new();
    find_free(p, tmp, fn, f);
    ry_arena_free(tmp);
    f->nparams = fn->func.nparams;
    for (int i = 0; i < fn->func.nparams; i++)
        if (open_dims(fn->func.params[i]->annot, false)) f->check = true;
    f->id = p->nfns;
    p->fns[p->nfns++] = f;
    ry_ptrmap_put(p->arena, &p->fnmap, fn, (intptr_t)f);
    return f;
}

/* ---- operator calls ---- */

static void flatten_types(const ry_type *t, const ry_type **out, int *k) {
    if (t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++) flatten_types(t->tuple.fields[i], out, k);
        return;
    }
    if (out) out[*k] = t;
    (*k)++;
}

/* What automatic batching needs of the call (vm_batch.c): the op's
 * ry_op_batch unless transpose_a is set, and its integer axis. */
static void batch_facts(vm_opcall *oc, const ry_expr *e) {
    const ry_op *op = oc->op;
    oc->batch = (uint8_t)op->batch;
    oc->batch_axis = VM_NO_AXIS;
    for (int i = 0; i < op->nattrs; i++) {
        const char *n = op->attrs[i].name;
        const ry_attr_value *v = ry_attr_get(op, &e->call.attrs, n);
        if (strcmp(n, "transpose_a") == 0 && v->kind == RY_AV_BOOL && v->b) oc->batch = RY_BATCH_NO;
        if (strcmp(n, "axis") == 0) {
            if (v->kind == RY_AV_INT) oc->batch_axis = (int)v->i;
            else oc->batch = RY_BATCH_NO;
        }
    }
}

/* Fixes the result type at compile time when every argument's type is a
 * static tensor (the relation then gives a static result). */
static vm_opcall *make_opcall(cc *c, const ry_expr *e) {
    ry_vm_program *p = c->p;
    const ry_op *op = e->call.callee->op.op;
    vm_opcall *oc = RY_NEW(p->arena, vm_opcall);
    oc->call = e;
    oc->op = op;
    oc->kernel = ry_target_kernel(p->target, op);
    if (!oc->kernel) {
        char what[160];
        snprintf(what, sizeof what, "operator %s has no kernel on target ", op->name);
        fail(c, e->span, what, p->target->name);
        return oc;
    }
    oc->rows_rule = (oc->kernel->flags & RY_KERNEL_ROWS) != 0;
    oc->zeros_like = oc->rows_rule && op->zeros && op->nargs == 1;
    batch_facts(oc, e);
    p->stats.nops++;
    if (e->call.nargs != op->nargs) return oc; /* the general path reports it */
    ry_type **in = RY_NEW_ARRAY(p->arena, ry_type *, e->call.nargs ? e->call.nargs : 1);
    const ry_type *flat[VM_MAX_IN];
    int nin = 0;
    for (int i = 0; i < e->call.nargs; i++) {
        const ry_type *t = e->call.args[i]->type;
        if (!t || !vm_type_static(t)) return oc;
        int nf = t->kind == RY_TYPE_TUPLE ? t->tuple.n : 1;
        for (int k = 0; k < nf; k++) {
            const ry_type *x = t->kind == RY_TYPE_TUPLE ? t->tuple.fields[k] : t;
            if (x->kind != RY_TYPE_TENSOR || nin == VM_MAX_IN) return oc;
            flat[nin++] = x;
        }
        in[i] = (ry_type *)t;
    }
    ry_error scratch_err;
    ry_rel_ctx rc = {p->arena, op, &e->call.attrs, e->span, &scratch_err};
    ry_type *out = NULL;
    if (op->rel(&rc, e->call.nargs, in, &out) != RY_REL_OK || !vm_type_static(out)) return oc;
    vm_sig *sg = oc->sig = RY_NEW(p->arena, vm_sig);
    oc->capsig = 1;
    sg->keys = vm_keys_of(p->arena, nin, flat);
    sg->nin = nin;
    sg->out_type = out;
    flatten_types(out, NULL, &sg->nout);
    sg->outs = RY_NEW_ARRAY(p->arena, const ry_type *, sg->nout ? sg->nout : 1);
    int k = 0;
    flatten_types(out, sg->outs, &k);
    oc->nsig = 1;
    p->stats.nops_static++;
    return oc;
}

/* ---- expressions ----
 * cexpr(e, dst, tail): code that leaves e's value in register dst, or, in
 * tail position, returns it (calls there become tail calls). operand(e):
 * the register holding e's value (a variable's own, else a temporary). In
 * ANF every operand is atomic, so this recursion is shallow; let chains
 * are walked by a loop. */
static void cexpr(cc *c, const ry_expr *e, int dst, bool tail);

static int var_reg(cc *c, const ry_var *v, ry_span span) {
    intptr_t r;
    if (ry_ptrmap_get(&c->vars, v, &r)) return (int)r;
    fail(c, span, "variable is not bound here: %", v->name);
    return 0;
}

static int operand(cc *c, const ry_expr *e) {
    if (e->kind == RY_EXPR_VAR) return var_reg(c, e->var.var, e->span);
    int r = new_reg(c);
    cexpr(c, e, r, false);
    return r;
}

static int *operands(cc *c, int n, ry_expr *const *es) {
    int *regs = RY_NEW_ARRAY(c->p->arena, int, n ? n : 1);
    for (int i = 0; i < n; i++) regs[i] = operand(c, es[i]);
    return regs;
}

static void ret(cc *c, const ry_expr *e, int r) {
    insn in = mk(I_RET, e, -1);
    in.a = r;
    emit(c, in);
}

static void loadv(cc *c, const ry_expr *e, int dst, ry_value *v) {
    /* a constant goes to the program's device once, here */
    if (v && c->p->target->dev) {
        ry_value *moved;
        ry_error e2 = {0};
        ry_status st = ry_value_to(c->p->target, v, &moved, &e2);
        ry_value_release(v);
        if (st) {
            fail(c, e->span, e2.msg, NULL);
            return;
        }
        v = moved;
    }
    if (!(v = own(c->p, v))) {
        fail(c, e->span, "out of memory", NULL);
        return;
    }
    insn in = mk(I_LOADV, e, dst);
    in.value = v;
    emit(c, in);
}

/* fn (...) { ... }: a closure over the registers of its free variables;
 * self (the let variable it is bound to) is captured as -1: the machine
 * rebinds it to the closure at each call, so no reference cycle forms. */
static void closure(cc *c, const ry_expr *e, int dst, const ry_var *self) {
    vm_fn *f = add_fn(c->p, e, NULL);
    insn in = mk(I_CLOSURE, e, dst);
    in.fn = f;
    in.n = f->nfree;
    in.args = RY_NEW_ARRAY(c->p->arena, int, f->nfree ? f->nfree : 1);
    for (int i = 0; i < f->nfree; i++)
        in.args[i] = f->free[i] == self ? -1 : var_reg(c, f->free[i], e->span);
    emit(c, in);
}

static vm_fn *global_fn(cc *c, const ry_expr *e) {
    const ry_global *g = ry_module_find_global(c->p->m, e->global.name);
    for (int i = 0; g && i < c->p->nglobals; i++)
        if (c->p->m->globals[i] == g) return c->p->gfns[i];
    fail(c, e->span, "unknown global @", e->global.name);
    return NULL;
}

/* f(a..): an operator runs its kernel; a known global or a constructor is
 * called directly; anything else is a closure value called at run time.
 * A call whose argument types leave open what the callee's parameters fix
 * (a ? where the parameter has a number or a name) checks its arguments
 * when it enters the callee, as the interpreter does (b = 1); for a
 * closure, whose parameters are known only then, any ? argument does. */
static void call(cc *c, const ry_expr *e, int dst, bool tail) {
    const ry_expr *f = e->call.callee;
    insn in = mk(I_CALL, e, dst);
    if (f->kind == RY_EXPR_OP) {
        in.op = I_OP;
        in.opcall = make_opcall(c, e);
    } else if (f->kind == RY_EXPR_CTOR && e->call.nargs == f->ctor.ctor->nfields) {
        in.op = I_CTOR;
        in.ctor = f->ctor.ctor;
    } else if (f->kind == RY_EXPR_GLOBAL && (in.fn = global_fn(c, f)) &&
               in.fn->nparams == e->call.nargs) {
        in.op = tail ? I_TCALLG : I_CALLG;
        in.b = ry_call_checks_shapes(in.fn->func, e);
    } else { /* (a wrong arity, in an unchecked module, fails at run time) */
        in.op = tail ? I_TCALL : I_CALL;
        in.a = operand(c, f);
        in.b = 0;
        for (int i = 0; i < e->call.nargs; i++) in.b |= open_dims(e->call.args[i]->type, true);
    }
    in.n = e->call.nargs;
    in.args = operands(c, e->call.nargs, e->call.args);
    emit(c, in);
    if (tail && in.op != I_TCALL && in.op != I_TCALLG) ret(c, e, dst);
}

/* if (c) {t} else {f}: test, then each branch (both tail when e is). */
static void cif(cc *c, const ry_expr *e, int dst, bool tail) {
    insn test = mk(I_JMPF, e->if_.cond, -1);
    test.a = operand(c, e->if_.cond);
    int at = emit(c, test);
    cexpr(c, e->if_.then_, dst, tail);
    int end = tail ? -1 : emit(c, mk(I_JMP, e, -1));
    patch(c, at, c->fn->ncode);
    cexpr(c, e->if_.else_, dst, tail);
    patch(c, end, c->fn->ncode);
}

/* ---- patterns ----
 * A pattern on register r compiles to tests that jump to the next clause
 * on failure, and field loads: _ -> nothing; %x -> %x names r;
 * C(p..) -> test C, load each field, its pattern; (p..) -> test n-tuple,
 * load each field, its pattern. */
typedef struct jumps {
    int *at;
    int n, cap;
} jumps;

static void add_jump(cc *c, jumps *j, int at) {
    if (j->n == j->cap) {
        int ncap = j->cap ? j->cap * 2 : 8;
        int *fresh = RY_NEW_ARRAY(c->tmp, int, ncap);
        if (j->n) memcpy(fresh, j->at, sizeof *fresh * (size_t)j->n);
        j->at = fresh;
        j->cap = ncap;
    }
    j->at[j->n++] = at;
}

static void cpat(cc *c, const ry_expr *m, const ry_pattern *p, int r, jumps *fails) {
    int n = 0;
    ry_pattern *const *sub = NULL;
    insn test = mk(I_TESTCTOR, m, -1);
    test.span = p->span.src ? p->span : m->span;
    test.a = r;
    switch (p->kind) {
    case RY_PAT_WILDCARD: return;
    case RY_PAT_VAR: ry_ptrmap_put(c->tmp, &c->vars, p->var, r); return;
    case RY_PAT_CTOR:
        test.ctor = p->ctor.ctor;
        test.n = n = p->ctor.n; /* checked too: field loads stay in range */
        sub = p->ctor.args;
        break;
    case RY_PAT_TUPLE:
        test.op = I_TESTTUP;
        test.n = n = p->tuple.n;
        sub = p->tuple.fields;
        break;
    }
    add_jump(c, fails, emit(c, test));
    for (int i = 0; i < n; i++) {
        if (sub[i]->kind == RY_PAT_WILDCARD) continue;
        insn ld = mk(I_FIELD, m, new_reg(c));
        ld.a = r;
        ld.b = i;
        emit(c, ld);
        cpat(c, m, sub[i], ld.dst, fails);
    }
}

/* match (d) { p => b, ... }: clauses in order; none matching is an error
 * located at the match (a complete match never gets there). */
static void cmatch(cc *c, const ry_expr *e, int dst, bool tail) {
    int r = operand(c, e->match.data);
    jumps ends = {0};
    for (int i = 0; i < e->match.nclauses; i++) {
        jumps fails = {0};
        cpat(c, e, e->match.clauses[i].pat, r, &fails);
        cexpr(c, e->match.clauses[i].body, dst, tail);
        if (!tail) add_jump(c, &ends, emit(c, mk(I_JMP, e, -1)));
        for (int k = 0; k < fails.n; k++) patch(c, fails.at[k], c->fn->ncode);
    }
    insn mf = mk(I_MATCHFAIL, e, -1);
    mf.a = r;
    emit(c, mf);
    for (int k = 0; k < ends.n; k++) patch(c, ends.at[k], c->fn->ncode);
}

/* The leaves and the one-instruction forms. */
static void csimple(cc *c, const ry_expr *e, int dst) {
    insn in = mk(I_MOVE, e, dst);
    switch (e->kind) {
    case RY_EXPR_VAR: in.a = var_reg(c, e->var.var, e->span); break;
    case RY_EXPR_GLOBAL: {
        vm_fn *f = global_fn(c, e);
        if (!f) return;
        for (int i = 0; i < c->p->nglobals; i++)
            if (c->p->gfns[i] == f) {
                in.op = I_LOADV;
                in.value = c->p->gvals[i];
            }
        break;
    }
    case RY_EXPR_CONST:
        loadv(c, e, dst, ry_value_tensor(ry_tensor_retain(e->constant.value)));
        return;
    case RY_EXPR_OP: in.op = I_OPVALUE; break; /* an error when reached, as in the interpreter */
    case RY_EXPR_CTOR:
        loadv(c, e, dst, e->ctor.ctor->nfields == 0 ? ry_value_adt(e->ctor.ctor, 0, NULL)
                                                     : ry_value_ctor_fn(e->ctor.ctor));
        return;
    case RY_EXPR_FUNC: closure(c, e, dst, NULL); return;
    case RY_EXPR_TUPLE:
        in.op = I_TUPLE;
        in.n = e->tuple.n;
        in.args = operands(c, e->tuple.n, e->tuple.fields);
        break;
    case RY_EXPR_PROJ:
        in.op = I_PROJ;
        in.a = operand(c, e->proj.tuple);
        in.b = e->proj.index;
        break;
    case RY_EXPR_REF:
        in.op = I_REFNEW;
        in.a = operand(c, e->ref.value);
        break;
    case RY_EXPR_REF_READ:
        in.op = I_REFREAD;
        in.a = operand(c, e->ref_read.ref);
        break;
    case RY_EXPR_REF_WRITE:
        in.op = I_REFWRITE;
        in.a = operand(c, e->ref_write.ref);
        in.b = operand(c, e->ref_write.value);
        break;
    default: fail(c, e->span, "cannot compile this expression", NULL); return;
    }
    emit(c, in);
}

static void cexpr(cc *c, const ry_expr *e, int dst, bool tail) {
    /* let %x = v; body: v into %x's register, then the body (a loop, so a
     * long let chain does not recurse). */
    while (e->kind == RY_EXPR_LET && !c->failed) {
        /* let %x = v; %x (how ANF ends a body): v is in e's position, so a
         * call there stays a tail call */
        const ry_expr *b = e->let.body;
        if (b->kind == RY_EXPR_VAR && b->var.var == e->let.var && e->let.value->kind != RY_EXPR_FUNC) {
            e = e->let.value;
            continue;
        }
        int r = new_reg(c);
        ry_ptrmap_put(c->tmp, &c->vars, e->let.var, r);
        if (e->let.value->kind == RY_EXPR_FUNC) closure(c, e->let.value, r, e->let.var);
        else cexpr(c, e->let.value, r, false);
        e = e->let.body;
    }
    if (c->failed) return;
    switch (e->kind) {
    case RY_EXPR_CALL: call(c, e, dst, tail); return;
    case RY_EXPR_IF: cif(c, e, dst, tail); return;
    case RY_EXPR_MATCH: cmatch(c, e, dst, tail); return;
    case RY_EXPR_VAR:
        if (tail) { /* return the variable's register directly */
            ret(c, e, var_reg(c, e->var.var, e->span));
            return;
        }
        break;
    default: break;
    }
    csimple(c, e, dst);
    if (tail) ret(c, e, dst);
}

/* ---- liveness ----
 * Registers die at their last use, so a value is freed as soon as nothing
 * after it can read it (the interpreter keeps every slot until the call
 * returns). Jumps only go forward and calls return to the next
 * instruction, so one backward pass computes exact live sets:
 *   out(i) = union of in(s) over successors s;  in(i) = uses(i) + (out(i) - def(i)).
 * A register used or defined at i and not in out(i) is released after i.
 * (One live on another branch is kept until the frame ends.) */
static int insn_uses(const insn *I, int *u) {
    int n = 0;
    switch ((vm_opcode)I->op) {
    case I_CALL:
    case I_TCALL:
    case I_CLOSURE:
    case I_OP:
    case I_TUPLE:
    case I_CTOR:
    case I_CALLG:
    case I_TCALLG:
        if (I->op == I_CALL || I->op == I_TCALL) u[n++] = I->a;
        for (int k = 0; k < I->n; k++)
            if (I->args[k] >= 0) u[n++] = I->args[k];
        return n;
    case I_REFWRITE:
    case I_MOVE:
    case I_PROJ:
    case I_JMPF:
    case I_TESTCTOR:
    case I_TESTTUP:
    case I_FIELD:
    case I_MATCHFAIL:
    case I_REFNEW:
    case I_REFREAD:
    case I_RET:
        if (I->op == I_REFWRITE) u[n++] = I->b;
        u[n++] = I->a;
        return n;
    case I_LOADV:
    case I_JMP:
    case I_OPVALUE: return 0;
    }
    return 0;
}

static bool writes_dst(vm_opcode op) {
    switch (op) {
    case I_JMPF:
    case I_JMP:
    case I_TESTCTOR:
    case I_TESTTUP:
    case I_MATCHFAIL:
    case I_OPVALUE:
    case I_RET:
    case I_TCALL:
    case I_TCALLG: return false;
    default: return true;
    }
}

static bool falls_through(vm_opcode op) {
    return op != I_JMP && op != I_RET && op != I_TCALL && op != I_TCALLG && op != I_MATCHFAIL &&
           op != I_OPVALUE;
}

static bool has_target(vm_opcode op) {
    return op == I_JMPF || op == I_JMP || op == I_TESTCTOR || op == I_TESTTUP;
}

/* Registers live after a branch but not into one of its successors die on
 * that edge: released when the branch goes that way (so a value used on
 * one side only does not live on the other side to the frame's end). */
static int *edge_list(ry_vm_program *p, const uint64_t *out, const uint64_t *succ, int words,
                      int *n) {
    int k = 0;
    for (int w = 0; w < words; w++) k += __builtin_popcountll(out[w] & ~succ[w]);
    *n = 0;
    if (!k) return NULL;
    int *l = RY_NEW_ARRAY(p->arena, int, k);
    for (int w = 0; w < words; w++)
        for (uint64_t bits = out[w] & ~succ[w]; bits; bits &= bits - 1)
            l[(*n)++] = w * 64 + __builtin_ctzll(bits);
    return l;
}

static void edge_kills(ry_vm_program *p, insn *I, int i, int n, int words, const uint64_t *in,
                       const uint64_t *out) {
    if (I->b >= 0 && I->b <= n)
        I->kill_jump = edge_list(p, out, in + (size_t)I->b * words, words, &I->nkill_jump);
    if (i + 1 <= n) I->kill_fall = edge_list(p, out, in + (size_t)(i + 1) * words, words, &I->nkill_fall);
}

static void liveness(ry_vm_program *p, vm_fn *f) {
    int n = f->ncode, words = (f->nregs + 63) / 64, maxu = 1;
    for (int i = 0; i < n; i++)
        if (f->code[i].n + 2 > maxu) maxu = f->code[i].n + 2;
    ry_arena *a = ry_arena_new();
    uint64_t *in = RY_NEW_ARRAY(a, uint64_t, (size_t)(n + 1) * (size_t)words);
    uint64_t *out = RY_NEW_ARRAY(a, uint64_t, words ? words : 1);
    int *u = RY_NEW_ARRAY(a, int, maxu), *kill = RY_NEW_ARRAY(a, int, maxu);
    /* Captured variables live to the frame's end: their registers borrow
     * from the closure the frame holds (vm_exec.c), so they never die
     * (and are never taken in place) before it. */
    uint64_t *pin = RY_NEW_ARRAY(a, uint64_t, words ? words : 1);
    for (int r = 0; r < f->nfree; r++) pin[r / 64] |= 1ULL << (r % 64);
    for (int w = 0; w < words; w++) in[(size_t)n * words + w] = pin[w];
    for (int i = n - 1; i >= 0; i--) {
        insn *I = &f->code[i];
        vm_opcode op = (vm_opcode)I->op;
        memcpy(out, pin, sizeof *out * (size_t)words);
        if (falls_through(op) && i + 1 <= n)
            for (int w = 0; w < words; w++) out[w] |= in[(size_t)(i + 1) * words + w];
        if (has_target(op) && I->b >= 0 && I->b <= n)
            for (int w = 0; w < words; w++) out[w] |= in[(size_t)I->b * words + w];
        uint64_t *li = in + (size_t)i * words;
        memcpy(li, out, sizeof *out * (size_t)words);
        bool def = writes_dst(op) && I->dst >= 0;
        if (def) li[I->dst / 64] &= ~(1ULL << (I->dst % 64));
        int nu = insn_uses(I, u), nk = 0;
        for (int k = 0; k < nu; k++) li[u[k] / 64] |= 1ULL << (u[k] % 64);
        if (op == I_RET || op == I_TCALL || op == I_TCALLG) continue; /* the frame goes */
        if (def && op != I_CALL && op != I_CALLG) u[nu++] = I->dst;  /* an unused result */
        for (int k = 0; k < nu; k++) {
            int r = u[k];
            bool dup = false;
            for (int j = 0; j < nk; j++) dup |= kill[j] == r;
            if (!dup && !(out[r / 64] >> (r % 64) & 1)) kill[nk++] = r;
        }
        if (nk) {
            I->kill = RY_NEW_ARRAY(p->arena, int, nk);
            memcpy(I->kill, kill, sizeof *kill * (size_t)nk);
            I->nkill = nk;
        }
        if (op == I_JMPF || op == I_TESTCTOR || op == I_TESTTUP) edge_kills(p, I, i, n, words, in, out);
    }
    vm_plan_fn(p, f, in, words);
    ry_arena_free(a);
}

/* Compiles f's body: captured variables, then parameters, get the first
 * registers. */
static void compile_fn(ry_vm_program *p, vm_fn *f, ry_error *err, bool *failed) {
    cc c = {.p = p, .fn = f, .tmp = ry_arena_new(), .err = err};
    for (int i = 0; i < f->nfree; i++) ry_ptrmap_put(c.tmp, &c.vars, f->free[i], new_reg(&c));
    for (int i = 0; i < f->nparams; i++)
        ry_ptrmap_put(c.tmp, &c.vars, f->func->func.params[i], new_reg(&c));
    int r = new_reg(&c);
    cexpr(&c, f->func->func.body, r, true);
    if (!c.failed) liveness(p, f);
    f->compiled = true;
    ry_arena_free(c.tmp);
    if (c.failed) { /* unreachable now: a later call compiles it afresh */
        *failed = true;
        ry_ptrmap_put(p->arena, &p->fnmap, f->func, 0);
    }
}

/* Compiles a function expression met only at run time: a closure made by
 * an earlier program over the same module, or by the interpreter (whose
 * functions are not in ANF: a node shared in their DAG is then evaluated
 * at each use). */
typedef struct lazy {
    ry_vm_program *p;
    const ry_expr *func;
    ry_error *err;
    vm_fn *f;
    bool failed;
} lazy;

static void compile_lazy(void *c) {
    lazy *l = c;
    ry_vm_program *p = l->p;
    l->f = add_fn(p, l->func, NULL);
    for (int i = 0; i < p->nfns && !l->failed; i++)
        if (!p->fns[i]->compiled) compile_fn(p, p->fns[i], l->err, &l->failed);
}

/* Out of the IR's memory while compiling at run time (a catch: the run
 * fails with an error): the functions added since n0 are given up as a
 * failed compile_fn gives its function up, compiled as far as they got
 * (freed with the program) and out of the map, without allocating (the
 * map's slot for each is cleared in place), so a later call compiles
 * them afresh. */
static void give_up(ry_vm_program *p, int n0) {
    for (int i = n0; i < p->nfns; i++) {
        p->fns[i]->compiled = true;
        for (int k = 0; k < p->fnmap.cap; k++)
            if (p->fnmap.keys[k] == p->fns[i]->func) p->fnmap.vals[k] = 0;
    }
}

vm_fn *vm_fn_lazy(ry_vm_program *p, const ry_expr *func, ry_error *err) {
    vm_fn *f = vm_fn_of(p, func);
    if (f) return f;
    lazy l = {p, func, err, NULL, false};
    int n0 = p->nfns;
    if (ry_oom_catch(compile_lazy, &l)) {
        give_up(p, n0);
        ry_error_at(err, func->span, "out of memory compiling a function at run time");
        l.failed = true;
    }
    p->stats.nfuncs = p->nfns;
    return l.failed ? NULL : l.f;
}

/* ---- the program ---- */

/* A compilation, in the entry's frame for the undo on out-of-memory
 * (oom.h): the program as far as it got, freed whole. */
typedef struct compiling {
    ry_module *m;
    const ry_target *t;
    ry_vm_program *p;
} compiling;

static void unlock_anf(void *mu) { pthread_mutex_unlock(mu); }

static ry_status compile(void *ctx, ry_error *err) {
    compiling *cp = ctx;
    ry_module *m = cp->m;
    const ry_target *t = cp->t;
    ry_vm_program *p = cp->p = ry_calloc(1, sizeof *p);
    if (!p) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    p->m = m;
    p->target = t ? t : ry_target_cpu();
    p->arena = ry_arena_new();
    if (!(p->pool = p->target->pool_new())) {
        ry_vm_free(p);
        cp->p = NULL;
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    int ng = p->nglobals = m->nglobals;
    p->gfns = RY_NEW_ARRAY(p->arena, vm_fn *, ng ? ng : 1);
    p->gvals = RY_NEW_ARRAY(p->arena, ry_value *, ng ? ng : 1);
    for (int i = 0; i < ng; i++) {
        const ry_global *g = m->globals[i];
        if (!g->func || g->func->kind != RY_EXPR_FUNC) {
            ry_vm_free(p);
            cp->p = NULL;
            return ry_error_at(err, g->span, "vm: global @%s is not a function", g->name);
        }
        pthread_mutex_lock(&anf_lock);
        int held = ry_oom_hold(unlock_anf, &anf_lock); /* unlocked if ry_anf runs out */
        const ry_expr *fn = ry_anf(m, g->func);
        ry_oom_unhold(held);
        pthread_mutex_unlock(&anf_lock);
        p->gfns[i] = add_fn(p, fn, g->name);
        /* closures of the original expression (the interpreter's) run here too */
        ry_ptrmap_put(p->arena, &p->fnmap, g->func, (intptr_t)p->gfns[i]);
        if (!(p->gvals[i] = own(p, ry_value_closure(fn, 0, NULL, NULL)))) {
            ry_vm_free(p);
            cp->p = NULL;
            return ry_error_at(err, g->span, "out of memory");
        }
    }
    bool failed = false;
    for (int i = 0; i < p->nfns && !failed; i++)
        if (!p->fns[i]->compiled) compile_fn(p, p->fns[i], err, &failed);
    if (failed) {
        ry_vm_free(p);
        cp->p = NULL;
        return RY_ERR;
    }
    p->stats.nfuncs = p->nfns;
    return RY_OK;
}

static void uncompile(void *ctx) { ry_vm_free(((compiling *)ctx)->p); }

ry_status ry_vm_compile(ry_module *m, const ry_target *t, ry_vm_program **out, ry_error *err) {
    compiling cp = {m, t, NULL};
    *out = NULL;
    if (ry_oom_guard("compilation", compile, uncompile, &cp, err)) return RY_ERR;
    *out = cp.p;
    return RY_OK;
}

void ry_vm_free(ry_vm_program *p) {
    if (!p) return;
    vm_machine_drop(p);
    vm_opcalls_free(p);
    ry_tensor_release(p->zero_base);
    for (int i = 0; i < p->nfns; i++) vm_fn_free_slots(p->fns[i]);
    for (int i = 0; i < p->nowned; i++) ry_value_release(p->owned[i]);
    ry_free(p->owned);
    for (int i = 0; i < p->nfns; i++) ry_free(p->fns[i]->code);
    ry_arena_free(p->arena);
    if (p->pool) p->target->pool_close(p->pool); /* after the slots: what they held waits no more */
    ry_free(p);
}

void ry_vm_get_stats(const ry_vm_program *p, ry_vm_stats *st) { *st = p->stats; }
