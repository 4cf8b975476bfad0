/*
 * vm_exec.c: the machine that runs VM code. A frame is a function, a
 * program counter and a window of registers on one heap array; frames live
 * on a heap stack bounded by max_depth, so the program's recursion never
 * becomes C recursion. A call in tail position releases the caller's
 * registers and reuses its frame, so tail recursion runs in constant space.
 * Each instruction writes its result into its destination register; the
 * dispatch loop is the one long function here, on purpose. Each frame also
 * holds its activation's storage slots (the memory plan, vm_plan.c), and a
 * program keeps its machine and slot sets between calls, so a repeated
 * step reuses them instead of allocating.
 */
#include <string.h>

#include "runtime/vm_impl.h"
#include "tensor/mem_guard.h"

#define DEFAULT_MAX_DEPTH 10000000L

static ry_status oom(vm_machine *mc, ry_span span) {
    return ry_error_at(mc->err, span, "out of memory in the vm");
}

/* ---- stacks ---- */

static ry_status grow_regs(vm_machine *mc, long need, ry_span span) {
    if (need <= mc->capr) return RY_OK;
    long ncap = mc->capr ? mc->capr : 1024;
    while (ncap < need) ncap *= 2;
    ry_value **fresh = ry_realloc(mc->regs, sizeof *fresh * (size_t)ncap);
    if (!fresh) return oom(mc, span);
    memset(fresh + mc->capr, 0, sizeof *fresh * (size_t)(ncap - mc->capr));
    mc->regs = fresh;
    mc->capr = ncap;
    return RY_OK;
}

static void release_regs(vm_machine *mc, long from) {
    for (long i = from; i < mc->top; i++) {
        ry_value_release(mc->regs[i]);
        mc->regs[i] = NULL;
    }
    mc->top = from;
}

/* ---- storage slot sets ----
 * An activation of f takes a set of f->nslots slots (vm_plan.c) and gives
 * it back when it returns; the values in it stay for the next activation,
 * so a repeated step finds its buffers where it left them. Frames deeper
 * than SLOT_DEPTH run without slots (their results are fresh buffers, as
 * without a plan), and at most MAX_SPARE sets wait per function: deep
 * recursion then costs no more memory than it did before planning. */
#define SLOT_DEPTH 1024
#define MAX_SPARE 256

static void free_set(int n, ry_value **S) {
    if (!S) return;
    for (int i = 0; i < n; i++) ry_value_release(S[i]);
    ry_free(S);
}

/* A cached tuple that only its slot still holds lets go of its fields, so
 * that the buffers it held are free for this activation's results. */
static void scrub_tuples(const vm_fn *f, ry_value **S) {
    for (int k = 0; k < f->ntupslots; k++) {
        ry_value *t = S[f->tupslots[k]];
        if (!t || t->refcount != 1 || t->kind != RY_VAL_TUPLE) continue;
        for (int i = 0; i < t->tuple.n; i++) {
            ry_value_release(t->tuple.fields[i]);
            t->tuple.fields[i] = NULL;
        }
    }
}

static ry_status take_set(vm_machine *mc, vm_fn *f, ry_value ***S, ry_span span) {
    *S = NULL;
    if (!mc->plan || f->nslots == 0 || mc->nf >= SLOT_DEPTH) return RY_OK;
    if (f->nspare > 0) {
        *S = f->spare[--f->nspare];
        scrub_tuples(f, *S);
        return RY_OK;
    }
    if (!(*S = ry_calloc((size_t)f->nslots, sizeof **S))) return oom(mc, span);
    return RY_OK;
}

static void give_set(vm_fn *f, ry_value **S) {
    if (!S) return;
    if (f->nspare == f->capspare && f->capspare < MAX_SPARE) {
        int ncap = f->capspare ? f->capspare * 2 : 4;
        ry_value ***fresh = ry_realloc(f->spare, sizeof *fresh * (size_t)ncap);
        if (fresh) {
            f->spare = fresh;
            f->capspare = ncap;
        }
    }
    if (f->nspare < f->capspare) f->spare[f->nspare++] = S;
    else free_set(f->nslots, S);
}

void vm_fn_free_slots(vm_fn *f) {
    for (int i = 0; i < f->nspare; i++) free_set(f->nslots, f->spare[i]);
    ry_free(f->spare);
    f->spare = NULL;
    f->nspare = f->capspare = 0;
}

/* A new frame for f above the current one; its registers start empty. */
static ry_status push_frame(vm_machine *mc, vm_fn *f, int ret, ry_span span) {
    if (mc->nf >= mc->max_depth)
        return ry_error_at(mc->err, span,
                           "stack overflow: the program nests deeper than %ld frames "
                           "(raise ry_vm_opts.max_depth)",
                           mc->max_depth);
    if (ry_mem_guard_due(mc->nf) && ry_mem_guard_frame(mc->nf, span, mc->err)) return RY_ERR;
    if (mc->nf == mc->capf) {
        long ncap = mc->capf ? mc->capf * 2 : 256;
        vframe *fresh = ry_realloc(mc->fs, sizeof *fresh * (size_t)ncap);
        if (!fresh) return oom(mc, span);
        mc->fs = fresh;
        mc->capf = ncap;
    }
    if (grow_regs(mc, mc->top + f->nregs, span)) return RY_ERR;
    ry_value **S;
    if (take_set(mc, f, &S, span)) return RY_ERR;
    mc->fs[mc->nf++] = (vframe){.fn = f, .pc = 0, .base = mc->top, .ret = ret, .S = S};
    mc->top += f->nregs;
    return RY_OK;
}

/* Retains n registers into the argument buffer. */
static ry_value **gather(vm_machine *mc, int n, const int *regs, ry_value **R, ry_span span) {
    if (n > mc->capargs || !mc->argbuf) {
        int ncap = n < 16 ? 16 : n * 2;
        ry_value **fresh = ry_realloc(mc->argbuf, sizeof *fresh * (size_t)ncap);
        if (!fresh) {
            oom(mc, span);
            return NULL;
        }
        mc->argbuf = fresh;
        mc->capargs = ncap;
    }
    for (int i = 0; i < n; i++) mc->argbuf[i] = ry_value_retain(R[regs[i]]);
    return mc->argbuf;
}

static void release_all(int n, ry_value **vs) {
    for (int i = 0; i < n; i++) ry_value_release(vs[i]);
}

/* A frame entered through a closure holds it and borrows the captured
 * values in its first nfree registers (a backward closure of AD captures
 * a dozen values: retaining and releasing each per call was a tenth of
 * the VM's time). Those registers never die early (liveness pins them),
 * are never taken over, and leave the frame without a release. */
static void drop_borrowed(vm_machine *mc, vframe *fr) {
    if (!fr->clos) return;
    ry_value **R = mc->regs + fr->base;
    for (int j = 0; j < fr->fn->nfree; j++) R[j] = NULL;
    ry_value_release(fr->clos);
    fr->clos = NULL;
}

/* ---- calls ----
 * enter: f's code starts with args (taken over) in its parameter registers
 * and clos's captured values (clos taken over; NULL for a global) in the
 * first ones; a captured NULL is the closure itself (a let-bound recursive
 * function). In tail position the current frame is reused. */
static ry_status enter(vm_machine *mc, vm_fn *f, ry_value *clos, int nargs, ry_value **args,
                       int ret, bool tail, bool check, ry_span span) {
    if ((check || f->check) && ry_value_check_params(f->func, args, span, mc->err)) goto fail;
    if (tail) {
        vframe *fr = &mc->fs[mc->nf - 1];
        drop_borrowed(mc, fr);
        release_regs(mc, fr->base);
        if (grow_regs(mc, fr->base + f->nregs, span)) goto fail;
        if (fr->fn != f) {
            give_set(fr->fn, fr->S);
            mc->nf--; /* take_set counts frames below this one */
            ry_status st = take_set(mc, f, &fr->S, span);
            mc->nf++;
            if (st) goto fail;
        } else if (fr->S) {
            scrub_tuples(f, fr->S);
        }
        fr->fn = f;
        fr->pc = 0;
        mc->top = fr->base + f->nregs;
    } else if (push_frame(mc, f, ret, span)) {
        goto fail;
    }
    vframe *fr = &mc->fs[mc->nf - 1];
    ry_value **R = mc->regs + fr->base;
    if (clos && f->nfree > 0) {
        int nc = clos->closure.ncaptured;
        for (int i = 0; i < nc; i++) {
            int j = i;
            if (j >= f->nfree || f->free[j] != clos->closure.captured_vars[i])
                for (j = 0; j < f->nfree && f->free[j] != clos->closure.captured_vars[i]; j++) {}
            if (j == f->nfree) continue; /* a variable this function does not use */
            ry_value *x = clos->closure.captured[i];
            R[j] = x ? x : clos; /* borrowed (drop_borrowed) */
        }
        fr->clos = clos;
    } else {
        ry_value_release(clos);
    }
    for (int i = 0; i < nargs; i++) R[f->nfree + i] = args[i];
    return RY_OK;
fail:
    ry_value_release(clos);
    release_all(nargs, args);
    return RY_ERR;
}

/* Applies a closure or constructor value (taken over) to args (taken
 * over). A constructor's value comes back in *v at once. */
static ry_status apply(vm_machine *mc, ry_value *fn, int nargs, ry_value **args, int ret, bool tail,
                       bool check, ry_span span, ry_value **v) {
    *v = NULL;
    if (fn->kind != RY_VAL_CLOSURE) {
        ry_error_at(mc->err, span, "cannot call %s", ry_value_kind_name(fn));
        goto fail;
    }
    if (fn->closure.ctor) {
        const ry_ctor *c = fn->closure.ctor;
        if (nargs != c->nfields) {
            ry_error_at(mc->err, span, "constructor %s takes %d arguments, not %d", c->name,
                        c->nfields, nargs);
            goto fail;
        }
        ry_value_release(fn);
        *v = ry_value_adt(c, nargs, args);
        return *v ? RY_OK : oom(mc, span);
    }
    vm_fn *f = vm_fn_of(mc->prog, fn->closure.func);
    if (!f && !(f = vm_fn_lazy(mc->prog, fn->closure.func, mc->err))) goto fail;
    if (nargs != f->nparams) {
        ry_error_at(mc->err, span, "function takes %d arguments, not %d", f->nparams, nargs);
        goto fail;
    }
    return enter(mc, f, fn, nargs, args, ret, tail, check, span);
fail:
    ry_value_release(fn);
    release_all(nargs, args);
    return RY_ERR;
}

/* Returns v (taken over) from the top frame. Sets *done when that was the
 * run's first frame. */
static void do_return(vm_machine *mc, ry_value *v, ry_value **out, bool *done) {
    vframe fr = mc->fs[--mc->nf];
    drop_borrowed(mc, &fr);
    release_regs(mc, fr.base);
    give_set(fr.fn, fr.S);
    if (mc->nf == 0) {
        *out = v;
        *done = true;
        return;
    }
    ry_value **R = mc->regs + mc->fs[mc->nf - 1].base;
    ry_value_release(R[fr.ret]);
    R[fr.ret] = v;
}

/* ---- checks with the interpreter's messages ---- */

static ry_status cond_value(vm_machine *mc, const insn *I, const ry_value *x, bool *c) {
    bool ok = x->kind == RY_VAL_TENSOR && x->tensor->size == 1 && x->tensor->dtype == RY_BOOL;
    if (ok && x->tensor->device.kind != RY_DEVICE_CPU) {
        /* the one read a device program's control flow makes: one byte */
        uint8_t b = 0;
        const ry_target *t = mc->prog->target;
        ry_error e = {0};
        if (t->download(&b, x->tensor, 1, &e))
            return ry_error_at(mc->err, I->span, "if: reading the condition: %s", e.msg);
        *c = b != 0;
        return RY_OK;
    }
    if (ok) {
        *c = ry_tensor_get(x->tensor, 0) != 0;
        return RY_OK;
    }
    char d[64] = "";
    if (x->kind == RY_VAL_TENSOR) ry_tensor_describe(x->tensor, d, sizeof d);
    return ry_error_at(mc->err, I->span, "if: condition must be a bool scalar, not %s",
                       d[0] ? d : "a non-tensor value");
}

static ry_status match_error(vm_machine *mc, const insn *I, const ry_value *v) {
    if (v->kind == RY_VAL_ADT)
        return ry_error_at(mc->err, I->span, "match failed: no clause matches %s", v->adt.ctor->name);
    return ry_error_at(mc->err, I->span, "match failed: no clause matches %s", ry_value_kind_name(v));
}

static ry_status proj(vm_machine *mc, const insn *I, const ry_value *x, ry_value **v) {
    if (x->kind == RY_VAL_TUPLE && I->b >= 0 && I->b < x->tuple.n) {
        *v = ry_value_retain(x->tuple.fields[I->b]);
        return RY_OK;
    }
    if (x->kind == RY_VAL_TUPLE)
        return ry_error_at(mc->err, I->span, "tuple index %d out of range for a %d-tuple", I->b,
                           x->tuple.n);
    return ry_error_at(mc->err, I->span, "projection .%d of %s, not a tuple", I->b,
                       ry_value_kind_name(x));
}

static ry_status make_closure(vm_machine *mc, const insn *I, ry_value **R, ry_value **v) {
    const vm_fn *f = I->fn;
    ry_value *inline_caps[16], **caps = inline_caps;
    if (f->nfree > 16 && !(caps = ry_malloc(sizeof *caps * (size_t)f->nfree)))
        return oom(mc, I->span);
    for (int i = 0; i < f->nfree; i++)
        caps[i] = I->args[i] < 0 ? NULL : ry_value_retain(R[I->args[i]]);
    *v = ry_value_closure(f->func, f->nfree, f->free, caps);
    if (caps != inline_caps) ry_free(caps);
    return *v ? RY_OK : oom(mc, I->span);
}

static inline void kill_list(int n, const int *regs, ry_value **R) {
    for (int k = 0; k < n; k++) {
        ry_value_release(R[regs[k]]);
        R[regs[k]] = NULL;
    }
}

/* Releases the registers that die at I. */
static inline void kill(const insn *I, ry_value **R) { kill_list(I->nkill, I->kill, R); }

/* A conditional jump: what dies at I, then what dies on the edge taken. */
static inline void branch(vframe *fr, const insn *I, ry_value **R, bool jump) {
    kill(I, R);
    if (jump) {
        fr->pc = I->b;
        kill_list(I->nkill_jump, I->kill_jump, R);
    } else {
        kill_list(I->nkill_fall, I->kill_fall, R);
    }
}

/* (a..) into the tuple cached in I's slot when only the slot holds it
 * (its fields are replaced), else a new tuple that the slot caches. The
 * fields (args) are taken over. */
static ry_status tuple_slot(vm_machine *mc, const insn *I, ry_value **S, ry_value **args,
                            ry_value **v) {
    ry_value *t = S[I->slot];
    if (t && t->refcount == 1 && t->kind == RY_VAL_TUPLE && t->tuple.n == I->n) {
        for (int i = 0; i < I->n; i++) {
            ry_value_release(t->tuple.fields[i]);
            t->tuple.fields[i] = args[i];
        }
        *v = ry_value_retain(t);
        return RY_OK;
    }
    if (!(t = ry_value_tuple(I->n, args))) return oom(mc, I->span);
    ry_value_release(S[I->slot]);
    S[I->slot] = t;
    *v = ry_value_retain(t);
    return RY_OK;
}

/* ---- the dispatch loop ---- */

static ry_status run(vm_machine *mc, ry_value **out) {
    for (;;) {
        vframe *fr = &mc->fs[mc->nf - 1];
        if (mc->on_final && mc->nf == 1) vm_final_report(mc, fr, fr->pc);
        const insn *I = &fr->fn->code[fr->pc++];
        ry_value **R = mc->regs + fr->base;
        ry_value *v = NULL, *x, **args;
        bool c = false, done = false;
        switch ((vm_opcode)I->op) {
        case I_MOVE: v = ry_value_retain(R[I->a]); break;
        case I_LOADV: v = ry_value_retain(I->value); break;
        case I_CLOSURE:
            if (make_closure(mc, I, R, &v)) return RY_ERR;
            break;
        case I_OP:
            if (mc->batching && vm_batch_parks(mc, I, R)) { /* the agenda runs it */
                fr->pc--;
                mc->parked = true;
                return RY_OK;
            }
            if (mc->prog->profile ? vm_run_op_timed(mc, I, R, fr->S, &v)
                                  : vm_run_op(mc, I, R, fr->S, &v))
                return RY_ERR;
            break;
        case I_TUPLE:
            if (!(args = gather(mc, I->n, I->args, R, I->span))) return RY_ERR;
            if (fr->S && I->slot >= 0) {
                if (tuple_slot(mc, I, fr->S, args, &v)) return RY_ERR;
            } else if (!(v = ry_value_tuple(I->n, args))) {
                return oom(mc, I->span);
            }
            break;
        case I_PROJ:
            if (proj(mc, I, R[I->a], &v)) return RY_ERR;
            break;
        case I_CTOR:
            if (!(args = gather(mc, I->n, I->args, R, I->span))) return RY_ERR;
            if (!(v = ry_value_adt(I->ctor, I->n, args))) return oom(mc, I->span);
            break;
        case I_CALL:
        case I_TCALL: {
            bool tail = I->op == I_TCALL;
            x = ry_value_retain(R[I->a]);
            if (!(args = gather(mc, I->n, I->args, R, I->span))) {
                ry_value_release(x);
                return RY_ERR;
            }
            kill(I, R);
            if (apply(mc, x, I->n, args, I->dst, tail, I->b == 1, I->span, &v)) return RY_ERR;
            if (!v) continue;            /* entered a function */
            if (tail) {                  /* a constructor in tail position */
                do_return(mc, v, out, &done);
                if (done) return RY_OK;
                continue;
            }
            break;
        }
        case I_CALLG:
        case I_TCALLG:
            if (!(args = gather(mc, I->n, I->args, R, I->span))) return RY_ERR;
            kill(I, R);
            if (enter(mc, I->fn, NULL, I->n, args, I->dst, I->op == I_TCALLG, I->b == 1, I->span))
                return RY_ERR;
            continue;
        case I_JMPF:
            if (cond_value(mc, I, R[I->a], &c)) return RY_ERR;
            branch(fr, I, R, !c);
            continue;
        case I_JMP: fr->pc = I->b; continue;
        case I_TESTCTOR:
            x = R[I->a];
            branch(fr, I, R, x->kind != RY_VAL_ADT || x->adt.ctor != I->ctor || x->adt.n != I->n);
            continue;
        case I_TESTTUP:
            x = R[I->a];
            branch(fr, I, R, x->kind != RY_VAL_TUPLE || x->tuple.n != I->n);
            continue;
        case I_FIELD:
            x = R[I->a];
            v = ry_value_retain(x->kind == RY_VAL_ADT ? x->adt.fields[I->b] : x->tuple.fields[I->b]);
            break;
        case I_MATCHFAIL: return match_error(mc, I, R[I->a]);
        case I_OPVALUE:
            return ry_error_at(mc->err, I->span,
                               "operator %s can only be called, not used as a value",
                               I->e->op.op->name);
        case I_REFNEW:
            if (!(v = ry_value_ref(ry_value_retain(R[I->a])))) return oom(mc, I->span);
            break;
        case I_REFREAD:
            x = R[I->a];
            if (x->kind != RY_VAL_REF)
                return ry_error_at(mc->err, I->span, "ref_read of %s, not a reference",
                                   ry_value_kind_name(x));
            if (mc->npend && !I->lazy_read && vm_defer_force(mc, x, I->span)) return RY_ERR;
            v = ry_value_retain(x->ref.value);
            break;
        case I_REFWRITE:
            x = R[I->a];
            if (x->kind != RY_VAL_REF)
                return ry_error_at(mc->err, I->span, "ref_write to %s, not a reference",
                                   ry_value_kind_name(x));
            if (mc->npend) vm_defer_overwrite(mc, x, R[I->b]);
            ry_value_release(x->ref.value);
            x->ref.value = ry_value_retain(R[I->b]);
            if (!(v = ry_value_tuple(0, NULL))) return oom(mc, I->span);
            break;
        case I_RET:
            v = R[I->a];
            if (fr->clos && I->a < fr->fn->nfree) v = ry_value_retain(v); /* borrowed */
            else R[I->a] = NULL;
            do_return(mc, v, out, &done);
            if (done) return RY_OK;
            continue;
        }
        ry_value_release(R[I->dst]);
        R[I->dst] = v;
        kill(I, R);
    }
}

/* ---- setting up and tearing down ----
 * A program keeps the machine of its last call (register and frame
 * stacks, argument buffer, scratch arena) for the next one, so a call
 * allocates nothing of its own once the stacks have grown. */

static vm_machine *machine_get(ry_vm_program *p, const ry_vm_opts *opts, ry_error *err) {
    vm_machine *mc = p->idle;
    p->idle = NULL;
    if (!mc) {
        if (!(mc = ry_calloc(1, sizeof *mc))) return NULL;
        if (!(mc->scratch = ry_oom_arena_new())) {
            ry_free(mc);
            return NULL;
        }
    }
    mc->prog = p;
    mc->err = err;
    mc->training = opts && opts->training;
    mc->plan = !(opts && opts->no_plan);
    /* row-sparse values are the CPU engine's (rows_ops.c reads them on the host) */
    mc->sparse_rows = opts && opts->sparse_rows && !p->target->dev;
    mc->rng = opts ? opts->seed : 0;
    mc->max_depth = opts && opts->max_depth > 0 ? opts->max_depth : DEFAULT_MAX_DEPTH;
    mc->on_final = opts ? opts->on_final : NULL;
    mc->final_ctx = opts ? opts->final_ctx : NULL;
    mc->final_next = 0;
    mc->defer = opts && opts->defer_accumulation;
    return mc;
}

static void machine_free(vm_machine *mc) {
    ry_free(mc->regs);
    ry_free(mc->fs);
    ry_free(mc->argbuf);
    ry_free(mc->pend);
    ry_arena_free(mc->scratch);
    ry_free(mc);
}

/* Releases what an error left in the registers and frames, then keeps the
 * machine for the program's next call. */
static void machine_put(ry_vm_program *p, vm_machine *mc) {
    vm_defer_drop(mc);
    for (long k = mc->nf - 1; k >= 0; k--) drop_borrowed(mc, &mc->fs[k]);
    release_regs(mc, 0);
    while (mc->nf > 0) {
        vframe *fr = &mc->fs[--mc->nf];
        give_set(fr->fn, fr->S);
    }
    mc->err = NULL;
    mc->batching = mc->parked = false;
    if (p->idle) machine_free(mc);
    else p->idle = mc;
}

void vm_machine_drop(ry_vm_program *p) {
    if (p->idle) machine_free(p->idle);
    p->idle = NULL;
}

/* A run that is done runs the accumulations still pending (vm_defer.c). */
static ry_status finish(vm_machine *mc, ry_status st, ry_value **out) {
    if (st || mc->parked || mc->npend == 0 || vm_defer_flush(mc) == RY_OK) return st;
    ry_value_release(*out);
    *out = NULL;
    return RY_ERR;
}

/* Retains the caller's arguments and applies fn (taken over) as the run's
 * first frame, checking the arguments against its annotations. */
static ry_status start(vm_machine *mc, ry_value *fn, int nargs, ry_value *const *args,
                       ry_value **out) {
    ry_value *inline_args[16], **own = inline_args;
    if (nargs > 16 && !(own = ry_malloc(sizeof *own * (size_t)nargs))) {
        ry_value_release(fn);
        return oom(mc, RY_NO_SPAN);
    }
    for (int i = 0; i < nargs; i++) own[i] = ry_value_retain(args[i]);
    ry_value *v = NULL;
    ry_status st = apply(mc, fn, nargs, own, -1, false, true, RY_NO_SPAN, &v);
    if (own != inline_args) ry_free(own);
    if (st) return RY_ERR;
    if (v) {
        *out = v;
        return RY_OK;
    }
    return finish(mc, run(mc, out), out);
}

/* ---- the batching agenda's access (vm_batch.c) ---- */

vm_machine *vm_machine_get(ry_vm_program *p, const ry_vm_opts *opts, ry_error *err) {
    return machine_get(p, opts, err);
}

void vm_machine_put(ry_vm_program *p, vm_machine *mc) { machine_put(p, mc); }

ry_status vm_machine_start(vm_machine *mc, ry_value *fn, int nargs, ry_value *const *args,
                           ry_value **out) {
    return start(mc, fn, nargs, args, out);
}

ry_status vm_machine_resume(vm_machine *mc, ry_value **out) {
    mc->parked = false;
    return finish(mc, run(mc, out), out);
}

/* The parked I_OP's result, as the dispatch loop would store it. */
void vm_machine_deliver(vm_machine *mc, ry_value *v) {
    vframe *fr = &mc->fs[mc->nf - 1];
    const insn *I = &fr->fn->code[fr->pc++];
    ry_value **R = mc->regs + fr->base;
    ry_value_release(R[I->dst]);
    R[I->dst] = v;
    kill(I, R);
}

/* On a device target: the arguments not on the device go there (copies
 * released after the call), and the result comes back to the host unless
 * opts->keep_on_device. */
static ry_status apply_on_device(ry_vm_program *prog, ry_value *fn, int nargs, ry_value *const *args,
                                 const ry_vm_opts *opts, ry_value **out, ry_error *err) {
    ry_value *inline_args[16], **moved = inline_args;
    if (nargs > 16 && !(moved = ry_calloc((size_t)nargs, sizeof *moved)))
        return ry_error_at(err, RY_NO_SPAN, "out of memory in the vm");
    ry_status st = RY_OK;
    int n = 0;
    for (; n < nargs && st == RY_OK; n++)
        if ((st = ry_value_to(prog->target, args[n], &moved[n], err))) {
            ry_error_prefix(err, "copying argument %d to %s", n + 1, ry_device_name(ry_target_device(prog->target)));
            break;
        }
    ry_value *res = NULL;
    if (st == RY_OK) {
        vm_machine *mc = machine_get(prog, opts, err);
        if (!mc) st = ry_error_at(err, RY_NO_SPAN, "out of memory in the vm");
        else {
            st = start(mc, ry_value_retain(fn), nargs, moved, &res);
            machine_put(prog, mc);
        }
    }
    for (int i = 0; i < n; i++) ry_value_release(moved[i]);
    if (moved != inline_args) ry_free(moved);
    if (st == RY_OK && !(opts && opts->keep_on_device)) {
        st = ry_value_to(ry_target_cpu(), res, out, err);
        ry_value_release(res);
    } else {
        *out = res;
    }
    return st;
}

ry_status ry_vm_apply(ry_vm_program *prog, ry_value *fn, int nargs, ry_value *const *args,
                      const ry_vm_opts *opts, ry_value **out, ry_error *err) {
    *out = NULL;
    if (prog->target->dev) return apply_on_device(prog, fn, nargs, args, opts, out, err);
    vm_machine *mc = machine_get(prog, opts, err);
    if (!mc) return ry_error_at(err, RY_NO_SPAN, "out of memory in the vm");
    ry_mem_guard outer;
    ry_mem_guard_begin(opts ? opts->max_resident : 0, &outer);
    ry_status st = start(mc, ry_value_retain(fn), nargs, args, out);
    if (st) ry_mem_guard_explain(err);
    ry_mem_guard_end(&outer);
    machine_put(prog, mc);
    return st;
}

ry_status vm_entry(const ry_vm_program *prog, const char *entry, int nargs, ry_value **fn,
                   ry_error *err) {
    const ry_module *m = prog->m;
    for (int i = 0; i < prog->nglobals && i < m->nglobals; i++) {
        if (strcmp(m->globals[i]->name, entry) != 0) continue;
        if (prog->gfns[i]->nparams != nargs)
            return ry_error_at(err, m->globals[i]->span, "@%s takes %d arguments, not %d", entry,
                               prog->gfns[i]->nparams, nargs);
        *fn = prog->gvals[i];
        return RY_OK;
    }
    return ry_error_at(err, RY_NO_SPAN, "no global function @%s", entry);
}

ry_status ry_vm_call(ry_vm_program *prog, const char *entry, int nargs, ry_value *const *args,
                     const ry_vm_opts *opts, ry_value **out, ry_error *err) {
    *out = NULL;
    ry_value *fn;
    if (vm_entry(prog, entry, nargs, &fn, err)) return RY_ERR;
    return ry_vm_apply(prog, fn, nargs, args, opts, out, err);
}
