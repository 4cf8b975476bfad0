/*
 * partial_eval.c: online partial evaluation. Each expression evaluates to
 * a partially-static value (ps): what is known at compile time (a tuple of
 * ps, a ref cell, a closure, a constructor value, a constant) together with
 * an atom of residual code that computes it at run time. Residual code is
 * emitted eagerly, so every ps can be used dynamically at any point; what
 * is known statically short-cuts reads, projections, calls and branches,
 * and ry_dce then drops the residual code no one uses (refs only written
 * included). After Relay's partial evaluator (PStatic / PStore).
 *
 * Store: a compile-time cell per `ref` evaluated; its content is known
 * until something we cannot follow may write it (a residual call, a write
 * through an unknown ref, a dynamic branch), and then is forgotten (reads
 * become residual ref_reads). Inputs are normalized with ry_anf first, so a
 * node shared in the DAG is evaluated once.
 *
 * Recursion unrolls only while its control is static. A recursive call
 * reached through a dynamic `if`/`match` of the activation above it stays
 * a call (of a specialization when it receives known functions: pe_spec.c),
 * and the first call of a recursive global is inlined only tentatively:
 * undone when the recursion inside it had to stay a call. So a loop over
 * time steps against a run-time length or a walk over a received tree
 * costs one pass over its body, which is still evaluated: refs, tuples and
 * the calls of non-recursive globals inside one step are resolved there.
 */
#include <string.h>

#include "relayc/pass.h"
#include "pass/pe_impl.h"

static ps *eval(pe *p, const ry_expr *e, env *en);


/* ---- values ---- */
ps *pe_mk(pe *p, ps_kind k, ry_expr *dyn) {
    ps *v = RY_NEW(p->a, ps);
    v->kind = k;
    v->dyn = dyn;
    return v;
}

env *pe_bind(pe *p, const ry_var *var, ps *v, env *next) {
    env *en = RY_NEW(p->a, env);
    en->id = var->id;
    en->v = v;
    en->next = next;
    return en;
}

static ps *lookup(const env *en, int id) {
    for (; en; en = en->next)
        if (en->id == id) return en->v;
    return NULL;
}

/* Emits `let %x = val;` in the current scope, returns the use of %x. */
ry_expr *pe_emit(pe *p, const char *name, ry_expr *val, ry_type *t) {
    if (pass_is_atom(val)) return val;
    val->type = t;
    ry_var *v = pass_fresh_var(p->m, name, t);
    ry_lets_push(p->a, p->out, v, val);
    return pass_use(p->m, v);
}

/* ---- the store ---- */
static void store_set(pe *p, int cell, ps *v) {
    cell -= p->st.base;
    if (cell < 0) return; /* stays unknown: conservative */
    if (cell >= p->st.n) {
        int n = cell * 2 + 8;
        ps **nv = RY_NEW_ARRAY(p->a, ps *, n);
        if (p->st.n) memcpy(nv, p->st.v, sizeof *nv * (size_t)p->st.n);
        p->st.v = nv;
        p->st.n = n;
    }
    p->st.v[cell] = v;
}

static ps *store_get(const pe *p, int cell) {
    cell -= p->st.base;
    return cell >= 0 && cell < p->st.n ? p->st.v[cell] : NULL;
}

static store store_dup(pe *p, store from) {
    store s = {NULL, from.base, from.n};
    if (s.n) {
        s.v = RY_NEW_ARRAY(p->a, ps *, s.n);
        memcpy(s.v, from.v, sizeof *s.v * (size_t)s.n);
    }
    return s;
}

/* After a dynamic branch: a cell stays known only where every branch left
 * it holding the same value. That value then existed before the branch, so
 * its residual atom is in scope after it. */
static void store_join(store *acc, const store *s) {
    for (int i = 0; i < acc->n; i++)
        if (i >= s->n || acc->v[i] != s->v[i]) acc->v[i] = NULL;
}

void pe_store_forget(pe *p) {
    if (p->st.n) memset(p->st.v, 0, sizeof *p->st.v * (size_t)p->st.n);
}

/* ---- scopes ----
 * Scopes carry serial numbers (a let chain lives on the C stack, so its
 * address is reused) to tell whether one is still open. */
static void scope_push(pe *p, lets *l) {
    if (p->nscopes == p->cap_scopes) {
        int cap = p->cap_scopes ? 2 * p->cap_scopes : 64;
        int *ns = RY_NEW_ARRAY(p->a, int, cap);
        lets **nl = RY_NEW_ARRAY(p->a, lets *, cap);
        if (p->nscopes) {
            memcpy(ns, p->scopes, sizeof *ns * (size_t)p->nscopes);
            memcpy(nl, p->scope_lets, sizeof *nl * (size_t)p->nscopes);
        }
        p->scopes = ns;
        p->scope_lets = nl;
        p->cap_scopes = cap;
    }
    p->scope_lets[p->nscopes] = l;
    p->scopes[p->nscopes++] = ++p->serial;
    p->out = l;
}

int pe_scope_index(const pe *p, int serial) {
    for (int i = p->nscopes - 1; i >= 0; i--)
        if (p->scopes[i] == serial) return i;
    return -1;
}

/* e in a scope of its own (a branch, a function body), closed around the
 * residual atom of its value. */
ry_expr *pe_eval_scope(pe *p, const ry_expr *e, env *en) {
    lets inner = {0};
    lets *saved = p->out;
    scope_push(p, &inner);
    ps *v = eval(p, e, en);
    p->nscopes--;
    p->out = saved;
    ry_expr *body = v->dyn;
    return lets_close(p->m, &inner, body);
}

/* Static control: a known constructor, or an integer/bool scalar constant,
 * somewhere in the (tuple-nested) argument: what lets recursion unroll. */
static bool static_control(const ps *v, int depth) {
    if (depth > 4) return false;
    if (v->kind == PS_ADT) return true;
    if (v->kind == PS_CONST) {
        const ry_tensor *t = v->dyn->constant.value;
        return t->ndim == 0 && !ry_dtype_is_float(t->dtype);
    }
    if (v->kind == PS_TUPLE)
        for (int i = 0; i < v->n; i++)
            if (static_control(v->fields[i], depth + 1)) return true;
    return false;
}

/* Types mentioning type variables or unknowns are not valid outside the
 * polymorphic function they came from: inlined code leaves them out and
 * lets the final type check infer them again. */
bool pe_portable(const ry_type *t) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_TENSOR: return true;
    case RY_TYPE_VAR: case RY_TYPE_INCOMPLETE: return false;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!pe_portable(t->tuple.fields[i])) return false;
        return true;
    case RY_TYPE_FUNC:
        if (t->func.ntparams) return false;
        for (int i = 0; i < t->func.nargs; i++)
            if (!pe_portable(t->func.args[i])) return false;
        return pe_portable(t->func.ret);
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            if (!pe_portable(t->call.args[i])) return false;
        return true;
    case RY_TYPE_REF: return pe_portable(t->ref.inner);
    }
    return false;
}

static void drop_local_type_args(ry_expr *c) {
    for (int i = 0; i < c->call.ntype_args; i++)
        if (!pe_portable(c->call.type_args[i])) {
            c->call.ntype_args = 0;
            c->call.type_args = NULL;
            return;
        }
}

/* ---- functions ----
 * fn (params) { body }: a closure over en; its residual is the body
 * evaluated with unknown parameters and an unknown store (it may run at
 * any later time). self, when set, is the let-bound name of a recursive
 * function: its residual is bound to that var, which the body may call. */
static ps *eval_func(pe *p, const ry_expr *e, env *en, const ry_var *self) {
    ps *clo = pe_mk(p, PS_CLOSURE, NULL);
    clo->fn = e;
    clo->level = p->level;
    clo->scope = p->scopes[p->nscopes - 1];
    ry_var *sv = NULL;
    if (self) {
        sv = pass_fresh_var(p->m, self->name, e->type);
        clo->dyn = pass_use(p->m, sv);
        en = pe_bind(p, self, clo, en);
    }
    clo->env = en;
    ry_expr *f = ry_expr_new(p->m, RY_EXPR_FUNC, e->span);
    *f = *e;
    f->func.params = RY_NEW_ARRAY(p->m->arena, ry_var *, e->func.nparams);
    f->func.ret_annot = NULL;
    env *body_env = en;
    for (int i = 0; i < e->func.nparams; i++) {
        const ry_var *old = e->func.params[i];
        ry_var *nv = pass_fresh_var(p->m, old->name, old->type);
        if (pe_portable(old->type)) nv->annot = old->type;
        f->func.params[i] = nv;
        body_env = pe_bind(p, old, pe_mk(p, PS_DYN, pass_use(p->m, nv)), body_env);
    }
    store saved = p->st;
    p->st = (store){NULL, p->ncells, 0};
    p->level++;
    f->func.body = pe_eval_scope(p, e->func.body, body_env);
    p->level--;
    p->st = saved;
    f->type = e->type;
    if (sv) {
        ry_lets_push(p->a, p->out, sv, f);
    } else {
        clo->dyn = pe_emit(p, "f", f, e->type);
    }
    return clo;
}

/* Applies a known function: inlines its body in the current scope when
 * within the limits (recursion only with static control). Returns NULL
 * when it declines, and the caller emits a residual call. With tentative
 * set (the first call of a recursive global), the inlining is undone when
 * the recursion inside it had to stay a call: the copy of one step would
 * only grow the program. */
static ps *apply(pe *p, const void *who, const ry_expr *fn, env *en, int nargs, ps **args,
                 bool tentative) {
    if (fn->func.nparams != nargs || p->fuel <= 0 || p->depth >= MAX_INLINE_DEPTH) return NULL;
    int rec = 0, last = -1;
    for (int i = 0; i < p->depth; i++)
        if (p->stack[i] == who) rec++, last = i;
    if (rec) {
        /* Unrolling continues only while the test that ends the recursion
         * is decided at compile time: a call reached through a dynamic
         * branch of the activation above it (`if (%i == %t)` with %t known
         * at run time only, `match` on a tree the program receives) stays
         * a call, or the unrolling would run to the limits and only grow
         * the program. */
        bool ok = rec < MAX_RECURSION && !p->inline_only && p->dyn_branches == p->stack_dyn[last];
        bool ctl = false;
        for (int i = 0; i < nargs && ok && !ctl; i++) ctl = static_control(args[i], 0);
        if (!ok || !ctl) {
            p->stack_cut[last] = true;
            return NULL;
        }
    }
    p->fuel--;
    tentative = tentative && !rec; /* deeper steps were entered with static control */
    int mark = p->out->n;
    store saved = tentative ? store_dup(p, p->st) : p->st;
    spec *specs = p->specs;
    for (int i = 0; i < nargs; i++) en = pe_bind(p, fn->func.params[i], args[i], en);
    int frame = p->depth;
    p->stack_dyn[frame] = p->dyn_branches;
    p->stack_cut[frame] = false;
    p->stack[p->depth++] = who;
    ps *r = eval(p, fn->func.body, en);
    p->depth--;
    if (tentative && p->stack_cut[frame]) {
        /* undone: what it emitted here, what it learnt of the store, the
         * specializations it bound here (others stay, unused, for ry_dce) */
        p->out->n = mark;
        p->st = saved;
        p->specs = specs;
        return NULL;
    }
    return r;
}

/* ---- operators ---- */
static bool all_const(ps **args, int n) {
    for (int i = 0; i < n; i++)
        if (args[i]->kind != PS_CONST) return false;
    return true;
}

static bool const_is_zero(const ry_tensor *t) {
    if (t->size > 64) return false;
    for (int64_t i = 0; i < t->size; i++)
        if (ry_tensor_get(t, i) != 0) return false;
    return true;
}

static ps *const_ps(pe *p, ry_tensor *t, ry_span span) {
    ry_expr *c = ry_expr_const(p->m, t, span);
    c->type = ry_type_of_tensor(p->m->arena, t);
    ps *v = pe_mk(p, PS_CONST, c);
    v->zero = const_is_zero(t);
    return v;
}

/* op(c1, ..., cn) with constant tensor arguments and a tensor result:
 * run its kernel on the host target now. NULL when it cannot (the call stays residual;
 * a kernel error then happens at run time, as it would have). */
static ps *fold(pe *p, const ry_expr *e, ps **args) {
    const ry_op *op = e->call.callee->op.op;
    int n = e->call.nargs;
    if (op->random || !pass_foldable_type(e->type)) return NULL;
    ry_type **types = RY_NEW_ARRAY(p->a, ry_type *, n ? n : 1);
    ry_tensor **in = RY_NEW_ARRAY(p->a, ry_tensor *, n ? n : 1);
    for (int i = 0; i < n; i++) {
        in[i] = args[i]->dyn->constant.value;
        types[i] = ry_type_of_tensor(p->a, in[i]);
    }
    ry_error err;
    uint64_t rng = 0;
    ry_kernel_ctx k = {.span = e->span, .err = &err, .rng = &rng};
    ry_type *ot;
    int nout = 0;
    ry_tensor **out = NULL;
    if (ry_op_run(NULL, op, &e->call.attrs, p->a, n, types, n, in, &k, &ot, &nout, &out) != RY_OK)
        return NULL;
    ry_tensor *t = nout == 1 ? out[0] : NULL;
    for (int i = 0; !t && i < nout; i++) ry_tensor_release(out[i]);
    ry_free(out); /* before the node: out of the IR's memory, nothing else is held (oom.h) */
    return t ? const_ps(p, t, e->span) : NULL;
}

/* add(0, b) -> b and add(a, 0) -> a when no broadcasting happens: the
 * adjoint accumulations of the AD output start from zeros_like. */
static ps *simplify(const ry_expr *e, ps **args) {
    const char *name = e->call.callee->op.op->name;
    if (strcmp(name, "add") == 0 && e->call.nargs == 2) {
        for (int i = 0; i < 2; i++) {
            const ry_expr *other = e->call.args[1 - i];
            if (args[i]->zero && other->type && e->type && ry_type_equal(other->type, e->type))
                return args[1 - i];
        }
    }
    return NULL;
}

static ps *eval_op_call(pe *p, const ry_expr *e, ps **args) {
    int n = e->call.nargs;
    if (all_const(args, n) && !p->inline_only) {
        ps *v = fold(p, e, args);
        if (v) return v;
    }
    ps *s = p->inline_only ? NULL : simplify(e, args);
    if (s) return s;
    ry_expr *c = ry_expr_new(p->m, RY_EXPR_CALL, e->span);
    *c = *e;
    c->call.args = RY_NEW_ARRAY(p->m->arena, ry_expr *, n);
    for (int i = 0; i < n; i++) c->call.args[i] = args[i]->dyn;
    drop_local_type_args(c);
    ps *v = pe_mk(p, PS_DYN, pe_emit(p, "v", c, e->type));
    v->zero = e->call.callee->op.op->zeros;
    return v;
}

/* ---- calls ---- */
static ps *residual_call(pe *p, const ry_expr *e, ry_expr *callee, ps **args) {
    int n = e->call.nargs;
    ry_expr *c = ry_expr_new(p->m, RY_EXPR_CALL, e->span);
    *c = *e;
    c->call.callee = callee;
    c->call.args = RY_NEW_ARRAY(p->m->arena, ry_expr *, n ? n : 1);
    for (int i = 0; i < n; i++) c->call.args[i] = args[i]->dyn;
    drop_local_type_args(c);
    pe_store_forget(p); /* the callee may write any cell it can reach */
    return pe_mk(p, PS_DYN, pe_emit(p, "r", c, e->type));
}

static bool any_static_control(ps **args, int n) {
    for (int i = 0; i < n; i++)
        if (static_control(args[i], 0)) return true;
    return false;
}

static int global_index(const ry_module *m, const char *name) {
    for (int i = 0; i < m->nglobals; i++)
        if (strcmp(m->globals[i]->name, name) == 0) return i;
    return -1;
}

static ps *eval_call(pe *p, const ry_expr *e, env *en) {
    int n = e->call.nargs;
    ps **args = RY_NEW_ARRAY(p->a, ps *, n ? n : 1);
    const ry_expr *callee = e->call.callee;
    ps *f = callee->kind == RY_EXPR_OP || callee->kind == RY_EXPR_CTOR ? NULL
                                                                        : eval(p, callee, en);
    for (int i = 0; i < n; i++) args[i] = eval(p, e->call.args[i], en);
    if (callee->kind == RY_EXPR_OP) return eval_op_call(p, e, args);
    if (callee->kind == RY_EXPR_CTOR) {
        ry_expr *c = ry_expr_call(p->m, (ry_expr *)callee, 0, NULL, e->span);
        *c = *e;
        c->call.args = RY_NEW_ARRAY(p->m->arena, ry_expr *, n ? n : 1);
        for (int i = 0; i < n; i++) c->call.args[i] = args[i]->dyn;
        drop_local_type_args(c);
        ps *v = pe_mk(p, PS_ADT, pe_emit(p, "c", c, e->type));
        v->ctor = callee->ctor.ctor;
        v->n = n;
        v->fields = args;
        return v;
    }
    if (f->kind == PS_CLOSURE) {
        ps *r = NULL;
        if (f->fn) {
            /* A closure made outside the residual function being built is
             * called, not inlined: the store is unknown there anyway, and
             * inlining a chain of backpropagators into each of them would
             * make the residual code quadratic. */
            if (f->level == p->level) r = apply(p, f, f->fn, f->env, n, args, false);
        } else if (f->dyn->kind == RY_EXPR_GLOBAL) {
            int gi = global_index(p->m, f->dyn->global.name);
            /* a recursive global is entered only with static control:
             * otherwise its body would be copied here once more (a
             * peeled first step) before the call it ends in anyway */
            bool rec = gi >= 0 && p->recursive[gi];
            bool enter = gi >= 0 && !(rec && !p->inline_only && !any_static_control(args, n)) &&
                         !ry_call_checks_shapes(p->orig[gi], e);
            if (enter) r = apply(p, p->orig[gi], p->orig[gi], NULL, n, args, rec);
            if (gi >= 0 && !r) r = pe_specialize(p, e, gi, args);
        }
        if (r) return r;
    }
    return residual_call(p, e, f->dyn, args);
}

/* ---- match ----
 * Static matching of a pattern against a ps: 1 matches (bindings added to
 * *en), 0 cannot match, -1 unknown until run time. Tuple patterns over a
 * dynamic tuple project it (always matches). */
static int match_pat(pe *p, const ry_pattern *pat, ps *v, env **en) {
    switch (pat->kind) {
    case RY_PAT_WILDCARD: return 1;
    case RY_PAT_VAR: *en = pe_bind(p, pat->var, v, *en); return 1;
    case RY_PAT_CTOR:
        if (v->kind != PS_ADT) return -1;
        if (v->ctor != pat->ctor.ctor) return 0;
        for (int i = 0; i < pat->ctor.n; i++) {
            int r = match_pat(p, pat->ctor.args[i], v->fields[i], en);
            if (r != 1) return r;
        }
        return 1;
    case RY_PAT_TUPLE:
        for (int i = 0; i < pat->tuple.n; i++) {
            ps *fi;
            if (v->kind == PS_TUPLE) {
                fi = v->fields[i];
            } else {
                ry_expr *pr = ry_expr_proj(p->m, v->dyn, i, pat->span);
                ry_type *t = v->dyn->type && v->dyn->type->kind == RY_TYPE_TUPLE
                                 ? v->dyn->type->tuple.fields[i] : NULL;
                fi = pe_mk(p, PS_DYN, pe_emit(p, "p", pr, t));
            }
            int r = match_pat(p, pat->tuple.fields[i], fi, en);
            if (r != 1) return r;
        }
        return 1;
    }
    return -1;
}

/* A copy of pat with fresh vars, each bound dynamically in *en. */
static ry_pattern *fresh_pat(pe *p, const ry_pattern *pat, env **en) {
    ry_pattern *q = RY_NEW(p->m->arena, ry_pattern);
    *q = *pat;
    switch (pat->kind) {
    case RY_PAT_WILDCARD: break;
    case RY_PAT_VAR:
        q->var = pass_fresh_var(p->m, pat->var->name, pat->var->type);
        *en = pe_bind(p, pat->var, pe_mk(p, PS_DYN, pass_use(p->m, q->var)), *en);
        break;
    case RY_PAT_CTOR:
        q->ctor.args = RY_NEW_ARRAY(p->m->arena, ry_pattern *, pat->ctor.n ? pat->ctor.n : 1);
        for (int i = 0; i < pat->ctor.n; i++) q->ctor.args[i] = fresh_pat(p, pat->ctor.args[i], en);
        break;
    case RY_PAT_TUPLE:
        q->tuple.fields = RY_NEW_ARRAY(p->m->arena, ry_pattern *, pat->tuple.n ? pat->tuple.n : 1);
        for (int i = 0; i < pat->tuple.n; i++)
            q->tuple.fields[i] = fresh_pat(p, pat->tuple.fields[i], en);
        break;
    }
    return q;
}

static ps *eval_match(pe *p, const ry_expr *e, env *en) {
    ps *d = eval(p, e->match.data, en);
    for (int i = 0; i < e->match.nclauses && !p->inline_only; i++) {
        env *ce = en;
        int r = match_pat(p, e->match.clauses[i].pat, d, &ce);
        if (r == 1) return eval(p, e->match.clauses[i].body, ce);
        if (r == -1) break;
    }
    /* dynamic: every clause in a scope of its own, from the same store */
    ry_expr *mt = ry_expr_new(p->m, RY_EXPR_MATCH, e->span);
    *mt = *e;
    mt->match.data = d->dyn;
    mt->match.clauses = RY_NEW_ARRAY(p->m->arena, ry_clause, e->match.nclauses);
    store before = store_dup(p, p->st), joined = before;
    p->dyn_branches++;
    for (int i = 0; i < e->match.nclauses; i++) {
        env *ce = en;
        mt->match.clauses[i].pat = fresh_pat(p, e->match.clauses[i].pat, &ce);
        p->st = store_dup(p, before);
        mt->match.clauses[i].body = pe_eval_scope(p, e->match.clauses[i].body, ce);
        if (i == 0) joined = p->st;
        else store_join(&joined, &p->st);
    }
    p->dyn_branches--;
    /* one clause: what it made itself must not outlive its scope */
    if (e->match.nclauses == 1) store_join(&joined, &before);
    p->st = joined;
    return pe_mk(p, PS_DYN, pe_emit(p, "m", mt, e->type));
}

static ps *eval_if(pe *p, const ry_expr *e, env *en) {
    ps *c = eval(p, e->if_.cond, en);
    if (c->kind == PS_CONST && c->dyn->constant.value->size == 1 && !p->inline_only)
        return eval(p, ry_tensor_get(c->dyn->constant.value, 0) != 0 ? e->if_.then_ : e->if_.else_,
                    en);
    ry_expr *r = ry_expr_new(p->m, RY_EXPR_IF, e->span);
    *r = *e;
    r->if_.cond = c->dyn;
    store before = store_dup(p, p->st);
    p->dyn_branches++;
    r->if_.then_ = pe_eval_scope(p, e->if_.then_, en);
    store after_then = p->st;
    p->st = before;
    r->if_.else_ = pe_eval_scope(p, e->if_.else_, en);
    p->dyn_branches--;
    store_join(&p->st, &after_then);
    return pe_mk(p, PS_DYN, pe_emit(p, "i", r, e->type));
}

/* ---- the rest ---- */
static ps *eval_tuple(pe *p, const ry_expr *e, env *en) {
    int n = e->tuple.n;
    ps *v = pe_mk(p, PS_TUPLE, NULL);
    v->n = n;
    v->fields = RY_NEW_ARRAY(p->a, ps *, n ? n : 1);
    ry_expr *t = ry_expr_new(p->m, RY_EXPR_TUPLE, e->span);
    t->tuple.n = n;
    t->tuple.fields = RY_NEW_ARRAY(p->m->arena, ry_expr *, n ? n : 1);
    for (int i = 0; i < n; i++) {
        v->fields[i] = eval(p, e->tuple.fields[i], en);
        t->tuple.fields[i] = v->fields[i]->dyn;
    }
    t->type = e->type;
    v->dyn = pe_emit(p, "t", t, e->type);
    return v;
}

static ps *eval_ref(pe *p, const ry_expr *e, env *en) {
    ps *x = eval(p, e->ref.value, en);
    ry_expr *r = ry_expr_new(p->m, RY_EXPR_REF, e->span);
    r->ref.value = x->dyn;
    ps *v = pe_mk(p, PS_REF, pe_emit(p, "r", r, e->type));
    v->cell = p->ncells++;
    store_set(p, v->cell, x);
    return v;
}

static ps *eval_ref_read(pe *p, const ry_expr *e, env *en) {
    ps *r = eval(p, e->ref_read.ref, en);
    if (r->kind == PS_REF && !p->inline_only) {
        ps *known = store_get(p, r->cell);
        if (known) return known;
    }
    ry_expr *rd = ry_expr_new(p->m, RY_EXPR_REF_READ, e->span);
    rd->ref_read.ref = r->dyn;
    ps *v = pe_mk(p, PS_DYN, pe_emit(p, "g", rd, e->type));
    if (r->kind == PS_REF) store_set(p, r->cell, v); /* later reads share it */
    return v;
}

static ps *eval_ref_write(pe *p, const ry_expr *e, env *en) {
    ps *r = eval(p, e->ref_write.ref, en);
    ps *x = eval(p, e->ref_write.value, en);
    ry_expr *w = ry_expr_new(p->m, RY_EXPR_REF_WRITE, e->span);
    w->ref_write.ref = r->dyn;
    w->ref_write.value = x->dyn;
    pe_emit(p, "u", w, e->type);
    if (r->kind == PS_REF) store_set(p, r->cell, x);
    else pe_store_forget(p); /* it may alias any cell */
    ry_expr *unit = ry_expr_tuple(p->m, 0, NULL, e->span);
    unit->type = e->type;
    ps *v = pe_mk(p, PS_TUPLE, unit);
    return v;
}

/* A copy of a global or constructor atom: the type checker records a type
 * per node, and one node used in two functions (a polymorphic one and the
 * code it was inlined into) would get one type for both. */
static ry_expr *fresh_atom(pe *p, const ry_expr *e) {
    ry_expr *c = ry_expr_new(p->m, e->kind, e->span);
    *c = *e;
    return c;
}

static ps *eval(pe *p, const ry_expr *e, env *en) {
    switch (e->kind) {
    case RY_EXPR_VAR: {
        ps *v = lookup(en, e->var.var->id);
        return v ? v : pe_mk(p, PS_DYN, (ry_expr *)e);
    }
    case RY_EXPR_GLOBAL: return pe_mk(p, PS_CLOSURE, fresh_atom(p, e));
    case RY_EXPR_CONST: {
        ps *v = pe_mk(p, PS_CONST, (ry_expr *)e);
        v->zero = const_is_zero(e->constant.value);
        return v;
    }
    case RY_EXPR_OP: return pe_mk(p, PS_DYN, (ry_expr *)e);
    case RY_EXPR_CTOR: {
        if (e->ctor.ctor->nfields) return pe_mk(p, PS_DYN, fresh_atom(p, e));
        ps *v = pe_mk(p, PS_ADT, fresh_atom(p, e));
        v->ctor = e->ctor.ctor;
        return v;
    }
    case RY_EXPR_CALL: return eval_call(p, e, en);
    case RY_EXPR_LET: /* a loop, not recursion: let chains are long */
        for (; e->kind == RY_EXPR_LET; e = e->let.body) {
            ps *v = e->let.value->kind == RY_EXPR_FUNC
                        ? eval_func(p, e->let.value, en, e->let.var)
                        : eval(p, e->let.value, en);
            en = pe_bind(p, e->let.var, v, en);
        }
        return eval(p, e, en);
    case RY_EXPR_IF: return eval_if(p, e, en);
    case RY_EXPR_MATCH: return eval_match(p, e, en);
    case RY_EXPR_FUNC: return eval_func(p, e, en, NULL);
    case RY_EXPR_TUPLE: return eval_tuple(p, e, en);
    case RY_EXPR_PROJ: {
        ps *t = eval(p, e->proj.tuple, en);
        if (t->kind == PS_TUPLE && e->proj.index < t->n) return t->fields[e->proj.index];
        ry_expr *pr = ry_expr_proj(p->m, t->dyn, e->proj.index, e->span);
        return pe_mk(p, PS_DYN, pe_emit(p, "p", pr, e->type));
    }
    case RY_EXPR_REF: return eval_ref(p, e, en);
    case RY_EXPR_REF_READ: return eval_ref_read(p, e, en);
    case RY_EXPR_REF_WRITE: return eval_ref_write(p, e, en);
    }
    return pe_mk(p, PS_DYN, (ry_expr *)e);
}

/* One global: parameters dynamic (the same vars), body evaluated. */
static ry_expr *eval_global(pe *p, const ry_expr *fn) {
    env *en = NULL;
    for (int i = 0; i < fn->func.nparams; i++)
        en = pe_bind(p, fn->func.params[i],
                     pe_mk(p, PS_DYN, pass_use(p->m, fn->func.params[i])), en);
    p->st = (store){NULL, p->ncells, 0};
    p->depth = 0;
    p->fuel = FUEL;
    p->specs = NULL;
    p->nspecs = 0;
    ry_expr *f = ry_expr_new(p->m, RY_EXPR_FUNC, fn->span);
    *f = *fn;
    p->stack_dyn[p->depth] = p->dyn_branches;
    p->stack[p->depth++] = fn;
    f->func.body = pe_eval_scope(p, fn->func.body, en);
    p->depth--;
    return f;
}

static ry_status run(ry_module *m, bool inline_only, ry_error *err) {
    pe p = {.m = m, .err = err, .inline_only = inline_only};
    p.a = ry_arena_new();
    int n = m->nglobals;
    p.orig = RY_NEW_ARRAY(p.a, ry_expr *, n ? n : 1);
    p.stack = RY_NEW_ARRAY(p.a, const void *, MAX_INLINE_DEPTH + 1);
    p.stack_dyn = RY_NEW_ARRAY(p.a, int, MAX_INLINE_DEPTH + 1);
    p.stack_cut = RY_NEW_ARRAY(p.a, bool, MAX_INLINE_DEPTH + 1);
    p.recursive = RY_NEW_ARRAY(p.a, bool, n ? n : 1);
    for (int i = 0; i < n; i++) {
        p.recursive[i] = ry_global_recursive(m, i);
        ry_expr *f = ry_anf(m, m->globals[i]->func);
        f->type = m->globals[i]->func->type;
        p.orig[i] = f;
    }
    ry_expr **res = RY_NEW_ARRAY(p.a, ry_expr *, n ? n : 1);
    for (int i = 0; i < n; i++) res[i] = eval_global(&p, p.orig[i]);
    for (int i = 0; i < n; i++) {
        /* a global no longer called where its parameter types were
         * inferred keeps them as annotations */
        ry_expr *f = res[i];
        for (int j = 0; j < f->func.nparams; j++)
            if (!f->func.params[j]->annot && f->func.params[j]->type)
                f->func.params[j]->annot = f->func.params[j]->type;
        m->globals[i]->func = f;
    }
    ry_arena_free(p.a);
    return RY_OK;
}

static ry_status evaluate(ry_module *m, ry_error *err) { return run(m, false, err); }

ry_status ry_partial_eval(ry_module *m, ry_error *err) {
    return pass_guarded("partial evaluation", evaluate, m, err);
}

/* Inlining is partial evaluation that knows functions only: calls of
 * globals (not recursive ones) and of closures bound in scope are replaced
 * by their bodies; operators, branches and refs stay as they are. */
static ry_status inline_calls(ry_module *m, ry_error *err) { return run(m, true, err); }

ry_status ry_inline(ry_module *m, ry_error *err) { return pass_guarded("inlining", inline_calls, m, err); }
