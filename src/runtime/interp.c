/*
 * interp.c: the reference interpreter, an explicit machine. State is either
 * "evaluate expression e in activation cur" or "deliver value v to the top
 * frame". Frames (continuations) and operands live in heap arrays, so the
 * program's recursion depth never becomes C stack depth; it is bounded by
 * opts->max_depth frames instead. Calls in tail position reuse the caller's
 * return frame, so tail recursion runs in constant space.
 *
 * Each activation is a flat array of slots laid out by interp_info.c;
 * closures capture only their free variables. Leaf work (operators,
 * patterns, parameter checks) is in interp_ops.c.
 */
#include <string.h>

#include "runtime/interp_impl.h"
#include "tensor/mem_guard.h"

#define DEFAULT_MAX_DEPTH 10000000L

/* ---- stacks ---- */

static ry_status oom(machine *mc, ry_span span) {
    return ry_error_at(mc->err, span, "out of memory in the interpreter");
}

/* span, or when it has no place (a frame the machine made for itself) the
 * nearest frame below with one. */
static ry_span located(const machine *mc, ry_span span) {
    for (long k = mc->nf - 1; !span.line && k >= 0; k--)
        if (mc->fs[k].e) span = mc->fs[k].e->span;
    return span;
}

/* span: where to point if the stack is full (the call being made). */
static ry_status push_frame_at(machine *mc, frame f, ry_span span) {
    if (mc->nf >= mc->max_depth)
        return ry_error_at(mc->err, span,
                           "stack overflow: the program nests deeper than %ld frames "
                           "(raise ry_interp_opts.max_depth)",
                           mc->max_depth);
    if (ry_mem_guard_due(mc->nf) && ry_mem_guard_frame(mc->nf, located(mc, span), mc->err))
        return RY_ERR;
    if (mc->nf == mc->capf) {
        long ncap = mc->capf ? mc->capf * 2 : 256;
        frame *fresh = ry_realloc(mc->fs, sizeof *fresh * (size_t)ncap);
        if (!fresh) return oom(mc, span);
        mc->fs = fresh;
        mc->capf = ncap;
    }
    mc->fs[mc->nf++] = f;
    return RY_OK;
}

static ry_status push_frame(machine *mc, frame f) { return push_frame_at(mc, f, f.e->span); }

/* Takes over v. */
static ry_status push_value(machine *mc, ry_value *v, ry_span span) {
    if (mc->nv == mc->capv) {
        long ncap = mc->capv ? mc->capv * 2 : 256;
        ry_value **fresh = ry_realloc(mc->vs, sizeof *fresh * (size_t)ncap);
        if (!fresh) {
            ry_value_release(v);
            return oom(mc, span);
        }
        mc->vs = fresh;
        mc->capv = ncap;
    }
    mc->vs[mc->nv++] = v;
    return RY_OK;
}

static act *act_new(const fninfo *info) {
    act *a = ry_calloc(1, sizeof *a + sizeof(ry_value *) * (size_t)info->nslots);
    if (a) a->info = info;
    return a;
}

static void act_free(act *a) {
    if (!a) return;
    for (int i = 0; i < a->info->nslots; i++) ry_value_release(a->slot[i]);
    ry_free(a);
}

static int slot_of(const act *a, const void *key) {
    intptr_t s;
    return ry_ptrmap_get(&a->info->slots, key, &s) ? (int)s : -1;
}

/* Stores v (taken over) in a's slot for key. */
static void bind(act *a, const void *key, ry_value *v) {
    int s = slot_of(a, key);
    if (s < 0) {
        ry_value_release(v);
        return;
    }
    ry_value_release(a->slot[s]);
    a->slot[s] = v;
}

/* ---- closures and globals ---- */

/* A closure of fn over the current activation. A free variable equal to
 * self (the variable a `let` is binding this very function to) is captured
 * as NULL and rebound to the closure at each call, so a recursive local
 * function makes no reference cycle. */
static ry_status make_closure(machine *mc, const ry_expr *fn, const ry_var *self, ry_value **out) {
    const fninfo *info = info_get(mc, fn);
    if (!info) return oom(mc, fn->span);
    ry_value *inline_caps[16], **caps = inline_caps;
    if (info->nfree > 16 && !(caps = ry_malloc(sizeof *caps * (size_t)info->nfree)))
        return oom(mc, fn->span);
    for (int i = 0; i < info->nfree; i++) {
        const ry_var *v = info->free[i];
        int s = mc->cur ? slot_of(mc->cur, v) : -1;
        ry_value *x = s >= 0 ? mc->cur->slot[s] : NULL;
        if (!x && v != self) {
            for (int k = 0; k < i; k++) ry_value_release(caps[k]);
            if (caps != inline_caps) ry_free(caps);
            return ry_error_at(mc->err, fn->span, "variable %%%s is used before it is bound",
                               v->name);
        }
        caps[i] = v == self ? NULL : ry_value_retain(x);
    }
    *out = ry_value_closure(fn, info->nfree, info->free, caps);
    if (caps != inline_caps) ry_free(caps);
    return *out ? RY_OK : oom(mc, fn->span);
}

typedef struct entering {
    machine *mc;
    const ry_expr *e;
    ry_value *c;
} entering;

static void enter_global(void *x) {
    entering *g = x;
    ry_ptrmap_put(g->mc->info_arena, &g->mc->globals, g->e, (intptr_t)g->c);
}

static ry_status global_value(machine *mc, const ry_expr *e, ry_value **out) {
    intptr_t got;
    if (!ry_ptrmap_get(&mc->globals, e, &got)) {
        const ry_global *g = ry_module_find_global(mc->m, e->global.name);
        if (!g || !g->func) return ry_error_at(mc->err, e->span, "unknown global @%s", e->global.name);
        ry_value *c = ry_value_closure(g->func, 0, NULL, NULL);
        if (!c) return oom(mc, e->span);
        if (ry_oom_catch(enter_global, &(entering){mc, e, c})) { /* the map is as it was */
            ry_value_release(c);
            return oom(mc, e->span);
        }
        got = (intptr_t)c;
    }
    *out = ry_value_retain((ry_value *)got);
    return RY_OK;
}

/* ---- calls ---- */

/* Applies fn to args (all taken over). A closure call sets *body to the
 * expression to evaluate next in its new activation; anything else
 * (constructors) sets *out. span: the call, for errors. */
static ry_status apply(machine *mc, ry_value *fn, int nargs, ry_value **args, ry_span span,
                       const ry_expr **body, ry_value **out) {
    *body = NULL;
    *out = NULL;
    if (fn->kind != RY_VAL_CLOSURE) {
        ry_error_at(mc->err, span, "cannot call %s", ry_value_kind_name(fn));
        goto done;
    }
    if (fn->closure.ctor) {
        const ry_ctor *c = fn->closure.ctor;
        if (nargs != c->nfields) {
            ry_error_at(mc->err, span, "constructor %s takes %d arguments, not %d", c->name,
                        c->nfields, nargs);
            goto done;
        }
        *out = ry_value_adt(c, nargs, args);
        ry_value_release(fn);
        return *out ? RY_OK : oom(mc, span);
    }
    const ry_expr *f = fn->closure.func;
    if (nargs != f->func.nparams) {
        ry_error_at(mc->err, span, "function takes %d arguments, not %d", f->func.nparams, nargs);
        goto done;
    }
    if (ry_value_check_params(f, args, span, mc->err)) goto done;
    const fninfo *info = info_get(mc, f);
    act *a = info ? act_new(info) : NULL;
    if (!a) {
        oom(mc, span);
        goto done;
    }
    for (int i = 0; i < fn->closure.ncaptured; i++) {
        ry_value *x = fn->closure.captured[i];
        bind(a, fn->closure.captured_vars[i], ry_value_retain(x ? x : fn));
    }
    for (int i = 0; i < nargs; i++) bind(a, f->func.params[i], args[i]);
    ry_value_release(fn);
    /* A call in tail position: the caller's activation is finished, so its
     * return frame serves the callee too. */
    if (mc->nf > 0 && mc->fs[mc->nf - 1].kind == K_RETURN) {
        act_free(mc->cur);
    } else if (push_frame_at(mc, (frame){.kind = K_RETURN, .e = f, .saved = mc->cur}, span)) {
        act_free(a);
        return RY_ERR;
    }
    mc->cur = a;
    *body = f->func.body;
    return RY_OK;
done:
    ry_value_release(fn);
    for (int i = 0; i < nargs; i++) ry_value_release(args[i]);
    return RY_ERR;
}

/* The operands from stack height base up; the stack is NULL until the
 * first push, and NULL + 0 is undefined, so an empty one gives NULL. */
static ry_value **operands(machine *mc, long base) {
    return mc->vs ? mc->vs + base : NULL;
}

/* The call frame on top has all its operands: run the op or apply. */
static ry_status finish_call(machine *mc, const ry_expr **next, ry_value **v) {
    frame f = mc->fs[--mc->nf];
    const ry_expr *e = f.e;
    ry_value **ops = operands(mc, f.base);
    int n = (int)(mc->nv - f.base);
    ry_status st;
    *next = NULL;
    if (e->call.callee->kind == RY_EXPR_OP) {
        st = run_op(mc, e, n, ops, v);
        for (int i = 0; i < n; i++) ry_value_release(ops[i]);
        mc->nv = f.base;
        return st;
    }
    mc->nv = f.base; /* apply takes the operands over */
    return apply(mc, ops[0], n - 1, ops + 1, e->span, next, v);
}

/* ---- evaluation ---- */

/* The rules, in evaluation order (left to right, callee first):
 *   %x -> its slot        @g -> closure, no captures     c -> tensor value
 *   C -> C() if nullary, else a constructor function     fn -> closure
 *   f(a..) -> eval f, a..; apply (an op runs its kernel instead)
 *   let %x = v; b -> eval v, bind %x, eval b (in the same frame: tail)
 *   if (c) {t} else {e} -> eval c (a bool scalar), then t or e (tail)
 *   match (d) {p => b..} -> eval d, first p that matches binds, b (tail)
 *   (a..) -> tuple   t.i -> field i   ref(v) -> new cell
 *   ref_read(r) -> contents   ref_write(r, v) -> store v, ()
 * Starts evaluating e: either produces *v at once (leaves) or pushes a
 * frame and sets *next to the first subexpression. */
static ry_status eval(machine *mc, const ry_expr *e, const ry_expr **next, ry_value **v) {
    *next = NULL;
    *v = NULL;
    switch (e->kind) {
    case RY_EXPR_VAR: {
        int s = slot_of(mc->cur, e->var.var);
        if (s < 0 || !mc->cur->slot[s])
            return ry_error_at(mc->err, e->span, "variable %%%s is not bound here", e->var.var->name);
        *v = ry_value_retain(mc->cur->slot[s]);
        return RY_OK;
    }
    case RY_EXPR_GLOBAL: return global_value(mc, e, v);
    case RY_EXPR_CONST:
        *v = ry_value_tensor(ry_tensor_retain(e->constant.value));
        return *v ? RY_OK : oom(mc, e->span);
    case RY_EXPR_OP:
        return ry_error_at(mc->err, e->span, "operator %s can only be called, not used as a value",
                           e->op.op->name);
    case RY_EXPR_CTOR:
        *v = e->ctor.ctor->nfields == 0 ? ry_value_adt(e->ctor.ctor, 0, NULL)
                                        : ry_value_ctor_fn(e->ctor.ctor);
        return *v ? RY_OK : oom(mc, e->span);
    case RY_EXPR_FUNC: return make_closure(mc, e, NULL, v);
    case RY_EXPR_CALL: {
        bool op = e->call.callee->kind == RY_EXPR_OP;
        if (op && e->call.nargs == 0) {
            frame f = {.kind = K_CALL, .e = e, .base = mc->nv};
            if (push_frame(mc, f)) return RY_ERR;
            return finish_call(mc, next, v);
        }
        frame f = {.kind = K_CALL, .i = 1, .e = e, .base = mc->nv};
        /* Operands: the callee (unless an operator), then the arguments;
         * f.i counts those already started. */
        *next = op ? e->call.args[0] : e->call.callee;
        return push_frame(mc, f);
    }
    case RY_EXPR_LET:
        /* let %f = fn (...) { ... %f ... }: a recursive local function. */
        if (e->let.value->kind == RY_EXPR_FUNC) {
            ry_value *c;
            if (make_closure(mc, e->let.value, e->let.var, &c)) return RY_ERR;
            bind(mc->cur, e->let.var, c);
            *next = e->let.body;
            return RY_OK;
        }
        *next = e->let.value;
        return push_frame(mc, (frame){.kind = K_LET, .e = e});
    case RY_EXPR_IF:
        *next = e->if_.cond;
        return push_frame(mc, (frame){.kind = K_IF, .e = e});
    case RY_EXPR_MATCH:
        *next = e->match.data;
        return push_frame(mc, (frame){.kind = K_MATCH, .e = e});
    case RY_EXPR_TUPLE:
        if (e->tuple.n == 0) {
            *v = ry_value_tuple(0, NULL);
            return *v ? RY_OK : oom(mc, e->span);
        }
        *next = e->tuple.fields[0];
        return push_frame(mc, (frame){.kind = K_TUPLE, .i = 1, .e = e, .base = mc->nv});
    case RY_EXPR_PROJ:
        *next = e->proj.tuple;
        return push_frame(mc, (frame){.kind = K_PROJ, .e = e});
    case RY_EXPR_REF:
        *next = e->ref.value;
        return push_frame(mc, (frame){.kind = K_REF, .e = e});
    case RY_EXPR_REF_READ:
        *next = e->ref_read.ref;
        return push_frame(mc, (frame){.kind = K_REF_READ, .e = e});
    case RY_EXPR_REF_WRITE:
        *next = e->ref_write.ref;
        return push_frame(mc, (frame){.kind = K_REF_WRITE, .e = e, .base = mc->nv});
    }
    return ry_error_at(mc->err, e->span, "cannot evaluate this expression");
}

static ry_status match_error(machine *mc, const ry_expr *e, const ry_value *v) {
    if (v->kind == RY_VAL_ADT)
        return ry_error_at(mc->err, e->span, "match failed: no clause matches %s", v->adt.ctor->name);
    return ry_error_at(mc->err, e->span, "match failed: no clause matches %s", ry_value_kind_name(v));
}

/* Delivers v (taken over) to the top frame. Sets *next to continue with an
 * expression, or leaves *v set to deliver onward. */
static ry_status deliver(machine *mc, const ry_expr **next, ry_value **v) {
    frame *f = &mc->fs[mc->nf - 1];
    const ry_expr *e = f->e;
    ry_value *x = *v;
    *next = NULL;
    switch (f->kind) {
    case K_CALL: {
        *v = NULL;
        if (push_value(mc, x, e->span)) return RY_ERR;
        bool op = e->call.callee->kind == RY_EXPR_OP;
        int total = e->call.nargs + (op ? 0 : 1);
        if (f->i < total) {
            int k = f->i++;
            *next = op ? e->call.args[k] : e->call.args[k - 1];
            return RY_OK;
        }
        return finish_call(mc, next, v);
    }
    case K_LET:
        mc->nf--;
        bind(mc->cur, e->let.var, x);
        *v = NULL;
        *next = e->let.body;
        return RY_OK;
    case K_IF: {
        mc->nf--;
        *v = NULL;
        bool ok = x->kind == RY_VAL_TENSOR && x->tensor->size == 1 && x->tensor->dtype == RY_BOOL;
        bool c = ok && ry_tensor_get(x->tensor, 0) != 0;
        char d[64] = "";
        if (x->kind == RY_VAL_TENSOR) ry_tensor_describe(x->tensor, d, sizeof d);
        ry_value_release(x);
        if (!ok)
            return ry_error_at(mc->err, e->if_.cond->span, "if: condition must be a bool scalar, not %s",
                               d[0] ? d : "a non-tensor value");
        *next = c ? e->if_.then_ : e->if_.else_;
        return RY_OK;
    }
    case K_MATCH:
        mc->nf--;
        *v = NULL;
        for (int i = 0; i < e->match.nclauses; i++)
            if (pat_matches(e->match.clauses[i].pat, x)) {
                pat_bind(e->match.clauses[i].pat, x, mc->cur);
                ry_value_release(x);
                *next = e->match.clauses[i].body;
                return RY_OK;
            }
        match_error(mc, e, x);
        ry_value_release(x);
        return RY_ERR;
    case K_TUPLE:
        *v = NULL;
        if (push_value(mc, x, e->span)) return RY_ERR;
        if (f->i < e->tuple.n) {
            *next = e->tuple.fields[f->i++];
            return RY_OK;
        }
        mc->nf--;
        mc->nv = f->base;
        *v = ry_value_tuple(e->tuple.n, operands(mc, f->base));
        return *v ? RY_OK : oom(mc, e->span);
    case K_PROJ:
        mc->nf--;
        if (x->kind != RY_VAL_TUPLE || e->proj.index < 0 || e->proj.index >= x->tuple.n) {
            *v = NULL;
            if (x->kind == RY_VAL_TUPLE)
                ry_error_at(mc->err, e->span, "tuple index %d out of range for a %d-tuple",
                            e->proj.index, x->tuple.n);
            else
                ry_error_at(mc->err, e->span, "projection .%d of %s, not a tuple", e->proj.index,
                            ry_value_kind_name(x));
            ry_value_release(x);
            return RY_ERR;
        }
        *v = ry_value_retain(x->tuple.fields[e->proj.index]);
        ry_value_release(x);
        return RY_OK;
    case K_REF:
        mc->nf--;
        *v = ry_value_ref(x);
        return *v ? RY_OK : oom(mc, e->span);
    case K_REF_READ:
        mc->nf--;
        *v = NULL;
        if (x->kind != RY_VAL_REF) {
            ry_error_at(mc->err, e->span, "ref_read of %s, not a reference", ry_value_kind_name(x));
            ry_value_release(x);
            return RY_ERR;
        }
        *v = ry_value_retain(x->ref.value);
        ry_value_release(x);
        return RY_OK;
    case K_REF_WRITE:
        *v = NULL;
        if (f->i == 0) {
            if (x->kind != RY_VAL_REF) {
                ry_error_at(mc->err, e->span, "ref_write to %s, not a reference", ry_value_kind_name(x));
                ry_value_release(x);
                return RY_ERR;
            }
            f->i = 1;
            *next = e->ref_write.value;
            return push_value(mc, x, e->span);
        }
        mc->nf--;
        {
            ry_value *r = mc->vs[--mc->nv];
            ry_value_release(r->ref.value);
            r->ref.value = x;
            ry_value_release(r);
        }
        *v = ry_value_tuple(0, NULL);
        return *v ? RY_OK : oom(mc, e->span);
    case K_MEMO:
        mc->nf--;
        ry_value_release(mc->cur->slot[f->slot]); /* empty: a DAG has no cycles */
        mc->cur->slot[f->slot] = ry_value_retain(x);
        return RY_OK;
    case K_RETURN:
        mc->nf--;
        act_free(mc->cur);
        mc->cur = f->saved;
        return RY_OK;
    }
    return RY_ERR;
}

/* Evaluates e, first looking in the memo slot if e is a shared node. */
static ry_status step_eval(machine *mc, const ry_expr *e, const ry_expr **next, ry_value **v) {
    int s = slot_of(mc->cur, e);
    if (s >= 0) {
        if (mc->cur->slot[s]) {
            *next = NULL;
            *v = ry_value_retain(mc->cur->slot[s]);
            return RY_OK;
        }
        if (push_frame(mc, (frame){.kind = K_MEMO, .e = e, .slot = s})) return RY_ERR;
    }
    return eval(mc, e, next, v);
}

/* The machine: alternate evaluating and delivering until the stack empties. */
static ry_status run(machine *mc, const ry_expr *start, ry_value **out) {
    const ry_expr *next = start;
    ry_value *v = NULL;
    for (;;) {
        ry_status st = next ? step_eval(mc, next, &next, &v) : deliver(mc, &next, &v);
        if (st) return RY_ERR;
        if (!next && mc->nf == 0) break;
    }
    *out = v;
    return RY_OK;
}

/* ---- setting up and tearing down ---- */

static ry_status machine_init(machine *mc, ry_module *m, const ry_interp_opts *opts, ry_error *err) {
    memset(mc, 0, sizeof *mc);
    mc->m = m;
    mc->err = err;
    mc->training = opts && opts->training;
    mc->rng = opts ? opts->seed : 0;
    mc->max_depth = opts && opts->max_depth > 0 ? opts->max_depth : DEFAULT_MAX_DEPTH;
    mc->info_arena = ry_oom_arena_new();
    mc->tmp = ry_oom_arena_new();
    mc->scratch = ry_oom_arena_new();
    return mc->info_arena && mc->tmp && mc->scratch ? RY_OK : oom(mc, RY_NO_SPAN);
}

/* Frees everything, including what an error left on the stacks. */
static void machine_free(machine *mc) {
    for (long i = 0; i < mc->nv; i++) ry_value_release(mc->vs[i]);
    for (long i = mc->nf - 1; i >= 0; i--)
        if (mc->fs[i].kind == K_RETURN) {
            act_free(mc->cur);
            mc->cur = mc->fs[i].saved;
        }
    act_free(mc->cur);
    for (int i = 0; i < mc->globals.cap; i++)
        if (mc->globals.keys[i]) ry_value_release((ry_value *)mc->globals.vals[i]);
    ry_free(mc->vs);
    ry_free(mc->fs);
    ry_arena_free(mc->info_arena);
    ry_arena_free(mc->tmp);
    ry_arena_free(mc->scratch);
}

static ry_status start(machine *mc, ry_value *fn, int nargs, ry_value *const *args, ry_span span,
                       ry_value **out) {
    ry_value *inline_args[16], **own = inline_args;
    if (nargs > 16 && !(own = ry_malloc(sizeof *own * (size_t)nargs))) return oom(mc, span);
    for (int i = 0; i < nargs; i++) own[i] = ry_value_retain(args[i]);
    const ry_expr *body = NULL;
    ry_value *v = NULL;
    ry_status st = apply(mc, ry_value_retain(fn), nargs, own, span, &body, &v);
    if (own != inline_args) ry_free(own);
    if (st) return RY_ERR;
    if (!body) {
        *out = v;
        return RY_OK;
    }
    return run(mc, body, out);
}

ry_status ry_interp_apply(ry_module *m, ry_value *fn, int nargs, ry_value *const *args,
                          const ry_interp_opts *opts, ry_value **out, ry_error *err) {
    machine mc;
    *out = NULL;
    if (machine_init(&mc, m, opts, err)) {
        machine_free(&mc);
        return RY_ERR;
    }
    ry_mem_guard outer;
    ry_mem_guard_begin(opts ? opts->max_resident : 0, &outer);
    ry_status st = start(&mc, fn, nargs, args, RY_NO_SPAN, out);
    if (st) ry_mem_guard_explain(err);
    ry_mem_guard_end(&outer);
    machine_free(&mc);
    return st;
}

ry_status ry_interp_call(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                         const ry_interp_opts *opts, ry_value **out, ry_error *err) {
    *out = NULL;
    const ry_global *g = ry_module_find_global(m, entry);
    if (!g || !g->func) return ry_error_at(err, RY_NO_SPAN, "no global function @%s", entry);
    if (g->func->func.nparams != nargs)
        return ry_error_at(err, g->span, "@%s takes %d arguments, not %d", entry,
                           g->func->func.nparams, nargs);
    ry_value *fn = ry_value_closure(g->func, 0, NULL, NULL);
    if (!fn) return ry_error_at(err, g->span, "out of memory");
    ry_status st = ry_interp_apply(m, fn, nargs, args, opts, out, err);
    ry_value_release(fn);
    return st;
}
