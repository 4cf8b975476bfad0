/*
 * tvm_mono.c: one copy of a polymorphic global taking refs per type it is
 * used at, before tvm_local.c makes such globals local functions. TVM's
 * let is monomorphic, so `let %foldr_grad = fn (...)` can serve one type
 * only, and the gradient of a module using @foldr at two types uses
 * @foldr_grad at two. The instances are read from the type checker's
 * instantiations (a call's type_args, a value's instantiated type),
 * pushed through the copies (a copy of @append_grad at int32 calls
 * @foldr_grad at int32): every copy is a fresh deep copy, named
 * foldr_grad, foldr_grad_1, ... Without types (fmt --tvm does not check)
 * every use is one instance, as before. Type annotations stay as they are:
 * tvm_local.c drops those naming the type parameters.
 */
#include <stdio.h>
#include <string.h>

#include "ir/parse.h"

#define MAX_INSTANCES 32 /* per global: polymorphic recursion stops here */

typedef struct inst {
    int orig;         /* the polymorphic global's index */
    ry_type **targs;  /* its type arguments; NULL: unknown (no types) */
    ry_global *copy;  /* the global printed for it */
    bool built;
} inst;

typedef struct mono {
    ry_module *m;
    ry_arena *a;
    bool *cand;       /* per original global: polymorphic, taking refs */
    ry_expr **orig;   /* per original global: its function, never changed */
    int norig;
    inst *insts;
    int n, cap;
    bool *capped;     /* per original global: it hit MAX_INSTANCES */
} mono;

/* ---- types ---- */

/* t with the n type variables tv replaced by repl (a new type where one
 * is replaced, t itself otherwise). */
static ry_type *subst(mono *s, ry_type *t, int n, ry_type **tv, ry_type **repl);

static ry_type **subst_all(mono *s, ry_type **ts, int k, int n, ry_type **tv, ry_type **repl, bool *changed) {
    ry_type **out = RY_NEW_ARRAY(s->m->arena, ry_type *, k ? k : 1);
    for (int i = 0; i < k; i++) {
        out[i] = subst(s, ts[i], n, tv, repl);
        *changed |= out[i] != ts[i];
    }
    return out;
}

static ry_type *subst(mono *s, ry_type *t, int n, ry_type **tv, ry_type **repl) {
    if (!t || n == 0) return t;
    bool changed = false;
    ry_type c = *t;
    switch (t->kind) {
    case RY_TYPE_VAR:
        for (int i = 0; i < n; i++)
            if (tv[i]->var.id == t->var.id) return repl[i];
        return t;
    case RY_TYPE_TUPLE: c.tuple.fields = subst_all(s, t->tuple.fields, t->tuple.n, n, tv, repl, &changed); break;
    case RY_TYPE_FUNC:
        c.func.args = subst_all(s, t->func.args, t->func.nargs, n, tv, repl, &changed);
        c.func.ret = subst(s, t->func.ret, n, tv, repl);
        changed |= c.func.ret != t->func.ret;
        break;
    case RY_TYPE_CALL: c.call.args = subst_all(s, t->call.args, t->call.nargs, n, tv, repl, &changed); break;
    case RY_TYPE_REF:
        c.ref.inner = subst(s, t->ref.inner, n, tv, repl);
        changed = c.ref.inner != t->ref.inner;
        break;
    default: return t;
    }
    if (!changed) return t;
    ry_type *out = ry_type_new(s->m, t->kind, t->span);
    *out = c;
    return out;
}

/* Binds the type variables tv that generic g mentions to the parts of
 * inst in their place; false where the two differ in shape. */
static bool match(const ry_type *g, ry_type *inst, int n, ry_type **tv, ry_type **out) {
    if (!g || !inst) return false;
    if (g->kind == RY_TYPE_VAR)
        for (int i = 0; i < n; i++)
            if (tv[i]->var.id == g->var.id) {
                if (out[i] && !ry_type_equal(out[i], inst)) return false;
                out[i] = inst;
                return true;
            }
    if (g->kind != inst->kind) return false;
    switch (g->kind) {
    case RY_TYPE_TUPLE:
        if (g->tuple.n != inst->tuple.n) return false;
        for (int i = 0; i < g->tuple.n; i++)
            if (!match(g->tuple.fields[i], inst->tuple.fields[i], n, tv, out)) return false;
        return true;
    case RY_TYPE_FUNC:
        if (g->func.nargs != inst->func.nargs) return false;
        for (int i = 0; i < g->func.nargs; i++)
            if (!match(g->func.args[i], inst->func.args[i], n, tv, out)) return false;
        return match(g->func.ret, inst->func.ret, n, tv, out);
    case RY_TYPE_CALL:
        if (g->call.adt != inst->call.adt || g->call.nargs != inst->call.nargs) return false;
        for (int i = 0; i < g->call.nargs; i++)
            if (!match(g->call.args[i], inst->call.args[i], n, tv, out)) return false;
        return true;
    case RY_TYPE_REF: return match(g->ref.inner, inst->ref.inner, n, tv, out);
    default: return true; /* tensors: symbolic dims are instantiated too, and do not name a copy */
    }
}

/* ---- instances ---- */

/* The copy a use of candidate k stands for, given the instantiation targs
 * it was checked with (NULL: unknown), created (and queued) when new. */
static ry_global *instance(mono *s, int k, ry_type **targs) {
    int nt = s->orig[k]->func.ntparams, seen = 0;
    inst *first = NULL;
    for (int i = 0; i < s->n; i++) {
        inst *in = &s->insts[i];
        if (in->orig != k) continue;
        first = first ? first : in;
        seen++;
        bool same = !in->targs == !targs;
        for (int j = 0; same && targs && j < nt; j++) same = ry_type_equal(in->targs[j], targs[j]);
        if (same) return in->copy;
    }
    if (seen == MAX_INSTANCES) {
        s->capped[k] = true;
        return first->copy;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        inst *fresh = RY_NEW_ARRAY(s->a, inst, cap);
        if (s->n) memcpy(fresh, s->insts, sizeof *fresh * (size_t)s->n);
        s->insts = fresh;
        s->cap = cap;
    }
    ry_global *g = s->m->globals[k];
    if (seen > 0) { /* the first copy keeps the name */
        char name[256];
        for (int j = seen;; j++) {
            snprintf(name, sizeof name, "%s_%d", g->name, j);
            if (!ry_module_find_global(s->m, name)) break;
        }
        g = ry_module_add_global(s->m, name, s->orig[k]);
    }
    s->insts[s->n++] = (inst){k, targs, g, false};
    return g;
}

/* The type arguments of one use, with the enclosing copy's own type
 * parameters (n of them, tv) replaced by its instantiation (repl; NULL:
 * unknown, which leaves unknown whatever mentions them). NULL: unknown. */
static ry_type **use_targs(mono *s, int k, const ry_expr *call, const ry_expr *ref, int n, ry_type **tv,
                           ry_type **repl) {
    const ry_expr *f = s->orig[k];
    int nt = f->func.ntparams;
    ry_type **t = RY_NEW_ARRAY(s->a, ry_type *, nt);
    if (call && call->call.ntype_args == nt) {
        memcpy(t, call->call.type_args, sizeof *t * (size_t)nt);
    } else if (ref && ref->type && ref->type->kind == RY_TYPE_FUNC && !ref->type->func.ntparams && f->type) {
        memset(t, 0, sizeof *t * (size_t)nt);
        if (!match(f->type, ref->type, nt, f->func.tparams, t)) return NULL;
    } else {
        return NULL;
    }
    for (int i = 0; i < nt; i++) {
        if (!t[i]) return NULL;
        if (!repl && n && ry_type_mentions(t[i], tv, n)) return NULL;
        t[i] = subst(s, t[i], repl ? n : 0, tv, repl);
    }
    return t;
}

/* ---- walking and copying ---- */

/* The nodes under root, each once, children before parents, without C
 * recursion (bodies are long chains). */
static ry_expr **postorder(mono *s, ry_expr *root, int *count) {
    ry_ptrmap seen = {0};
    int n = 0, cap = 64, sp = 0, scap = 64;
    ry_expr **out = RY_NEW_ARRAY(s->a, ry_expr *, cap);
    struct frame { ry_expr *e; int next; } *st = RY_NEW_ARRAY(s->a, struct frame, scap);
    st[sp++] = (struct frame){root, 0};
    ry_ptrmap_put(s->a, &seen, root, 1);
    while (sp > 0) {
        struct frame *fr = &st[sp - 1];
        int slot;
        ry_expr *c = (ry_expr *)ry_expr_child(fr->e, fr->next++, &slot);
        intptr_t dummy;
        if (c && !ry_ptrmap_get(&seen, c, &dummy)) {
            ry_ptrmap_put(s->a, &seen, c, 1);
            if (sp == scap) {
                struct frame *fresh = RY_NEW_ARRAY(s->a, struct frame, 2 * scap);
                memcpy(fresh, st, sizeof *st * (size_t)sp);
                st = fresh;
                scap *= 2;
            }
            st[sp++] = (struct frame){c, 0};
        } else if (!c) {
            if (n == cap) {
                ry_expr **fresh = RY_NEW_ARRAY(s->a, ry_expr *, 2 * cap);
                memcpy(fresh, out, sizeof *out * (size_t)n);
                out = fresh;
                cap *= 2;
            }
            out[n++] = st[--sp].e;
        }
    }
    *count = n;
    return out;
}

/* The candidate a global node names, or -1. */
static int cand_of(const mono *s, const ry_expr *e) {
    int k = e && e->kind == RY_EXPR_GLOBAL ? ry_module_global_index(s->m, e->global.name) : -1;
    return k >= 0 && k < s->norig && s->cand[k] ? k : -1;
}

/* Points each use of a candidate in the nodes es (a body's, in place) at
 * its instance: a call's callee becomes a fresh global node (the old one
 * may be shared by calls at other types), a value is renamed. */
static void retarget(mono *s, ry_expr **es, int count, int n, ry_type **tv, ry_type **repl) {
    ry_ptrmap callee = {0};
    for (int i = 0; i < count; i++)
        if (es[i]->kind == RY_EXPR_CALL) ry_ptrmap_put(s->a, &callee, es[i]->call.callee, 1);
    for (int i = 0; i < count; i++) {
        ry_expr *e = es[i];
        intptr_t dummy;
        int k;
        if (e->kind == RY_EXPR_CALL && (k = cand_of(s, e->call.callee)) >= 0) {
            ry_global *g = instance(s, k, use_targs(s, k, e, NULL, n, tv, repl));
            ry_expr *f = ry_expr_new(s->m, RY_EXPR_GLOBAL, e->call.callee->span);
            f->type = e->call.callee->type;
            f->global.name = g->name;
            e->call.callee = f;
        } else if ((k = cand_of(s, e)) >= 0 && !ry_ptrmap_get(&callee, e, &dummy)) {
            e->global.name = instance(s, k, use_targs(s, k, NULL, e, n, tv, repl))->name;
        }
    }
}

static ry_var *copy_var(mono *s, ry_ptrmap *vars, ry_var *v) {
    intptr_t got;
    if (!v) return v;
    if (ry_ptrmap_get(vars, v, &got)) return (ry_var *)got;
    ry_var *c = ry_var_new(s->m, v->name, v->annot, v->span);
    c->type = v->type;
    ry_ptrmap_put(s->a, vars, v, (intptr_t)c);
    return c;
}

static ry_pattern *copy_pattern(mono *s, ry_ptrmap *vars, const ry_pattern *p) {
    ry_pattern *c = RY_NEW(s->m->arena, ry_pattern);
    *c = *p;
    if (p->kind == RY_PAT_VAR) c->var = copy_var(s, vars, p->var);
    int n = p->kind == RY_PAT_CTOR ? p->ctor.n : p->kind == RY_PAT_TUPLE ? p->tuple.n : 0;
    ry_pattern **kids = n ? RY_NEW_ARRAY(s->m->arena, ry_pattern *, n) : NULL;
    for (int i = 0; i < n; i++)
        kids[i] = copy_pattern(s, vars, p->kind == RY_PAT_CTOR ? p->ctor.args[i] : p->tuple.fields[i]);
    if (p->kind == RY_PAT_CTOR) c->ctor.args = kids;
    if (p->kind == RY_PAT_TUPLE) c->tuple.fields = kids;
    return c;
}

static ry_expr *got(const ry_ptrmap *done, const ry_expr *e) {
    intptr_t v;
    return e && ry_ptrmap_get(done, e, &v) ? (ry_expr *)v : (ry_expr *)e;
}

static ry_expr **got_all(mono *s, const ry_ptrmap *done, ry_expr **es, int n) {
    ry_expr **out = RY_NEW_ARRAY(s->m->arena, ry_expr *, n ? n : 1);
    for (int i = 0; i < n; i++) out[i] = got(done, es[i]);
    return out;
}

/* A deep copy of fn: every node and every variable it binds new, sharing
 * kept (each node copied once). */
static ry_expr *copy_func(mono *s, ry_expr *fn) {
    int count;
    ry_expr **es = postorder(s, fn, &count);
    ry_ptrmap done = {0}, vars = {0};
    for (int i = 0; i < count; i++) {
        ry_expr *e = es[i], *c = ry_expr_new(s->m, e->kind, e->span);
        *c = *e;
        switch (e->kind) {
        case RY_EXPR_VAR: c->var.var = copy_var(s, &vars, e->var.var); break;
        case RY_EXPR_CALL:
            c->call.callee = got(&done, e->call.callee);
            c->call.args = got_all(s, &done, e->call.args, e->call.nargs);
            break;
        case RY_EXPR_LET:
            c->let.var = copy_var(s, &vars, e->let.var);
            c->let.value = got(&done, e->let.value);
            c->let.body = got(&done, e->let.body);
            break;
        case RY_EXPR_IF:
            c->if_.cond = got(&done, e->if_.cond);
            c->if_.then_ = got(&done, e->if_.then_);
            c->if_.else_ = got(&done, e->if_.else_);
            break;
        case RY_EXPR_MATCH:
            c->match.data = got(&done, e->match.data);
            c->match.clauses = RY_NEW_ARRAY(s->m->arena, ry_clause, e->match.nclauses ? e->match.nclauses : 1);
            for (int j = 0; j < e->match.nclauses; j++)
                c->match.clauses[j] = (ry_clause){copy_pattern(s, &vars, e->match.clauses[j].pat),
                                                  got(&done, e->match.clauses[j].body)};
            break;
        case RY_EXPR_FUNC:
            c->func.params = RY_NEW_ARRAY(s->m->arena, ry_var *, e->func.nparams ? e->func.nparams : 1);
            for (int j = 0; j < e->func.nparams; j++) c->func.params[j] = copy_var(s, &vars, e->func.params[j]);
            c->func.body = got(&done, e->func.body);
            break;
        case RY_EXPR_TUPLE: c->tuple.fields = got_all(s, &done, e->tuple.fields, e->tuple.n); break;
        case RY_EXPR_PROJ: c->proj.tuple = got(&done, e->proj.tuple); break;
        case RY_EXPR_REF: c->ref.value = got(&done, e->ref.value); break;
        case RY_EXPR_REF_READ: c->ref_read.ref = got(&done, e->ref_read.ref); break;
        case RY_EXPR_REF_WRITE:
            c->ref_write.ref = got(&done, e->ref_write.ref);
            c->ref_write.value = got(&done, e->ref_write.value);
            break;
        default: break; /* leaves: globals, constants, operators, constructors */
        }
        ry_ptrmap_put(s->a, &done, e, (intptr_t)c);
    }
    return got(&done, fn);
}

/* Builds instance i: a copy of its global, whose uses of candidates are
 * pointed at their own instances (which may queue more). */
static void build(mono *s, int i) {
    s->insts[i].built = true;
    ry_expr *f = copy_func(s, s->orig[s->insts[i].orig]);
    s->insts[i].copy->func = f;
    int count;
    ry_expr **es = postorder(s, f, &count);
    ry_type **targs = s->insts[i].targs;
    retarget(s, es, count, f->func.ntparams, f->func.tparams, targs);
}

void ry_tvm_monomorphize(ry_module *m, bool (*takes_refs)(const ry_global *), ry_print_report *rep) {
    int n = m->nglobals, ncand = 0;
    mono s = {.m = m, .a = ry_arena_new(), .norig = n};
    s.cand = RY_NEW_ARRAY(s.a, bool, n);
    s.orig = RY_NEW_ARRAY(s.a, ry_expr *, n);
    s.capped = RY_NEW_ARRAY(s.a, bool, n);
    for (int i = 0; i < n; i++) {
        s.orig[i] = m->globals[i]->func;
        s.cand[i] = s.orig[i]->func.ntparams > 0 && takes_refs(m->globals[i]);
        s.capped[i] = false;
        ncand += s.cand[i];
    }
    if (ncand == 0) {
        ry_arena_free(s.a);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (s.cand[i]) continue;
        int count;
        ry_expr **es = postorder(&s, m->globals[i]->func, &count);
        retarget(&s, es, count, 0, NULL, NULL);
    }
    for (int i = 0; i < s.n; i++) /* s.n grows as copies use more instances */
        if (!s.insts[i].built) build(&s, i);
    if (rep) {
        rep->monomorphized += m->nglobals - n;
        for (int i = 0; i < n; i++) rep->unsupported += s.capped[i];
    }
    ry_arena_free(s.a);
}
