/*
 * verify.c: ry_ir_verify, the well-formedness check run between passes in
 * debug builds and by the tests. It checks scoping (every var use is bound
 * by an enclosing let, function parameter or pattern; a let's value sees
 * its own var only when it is a function: a recursive let), spans (located
 * in their source, or none), the shape of nodes (operator and constructor
 * arity, projections within known tuple types), and with `typed`, that
 * every expression and binding has a type.
 */
#include <string.h>

#include "pass/pass_impl.h"
#include "tensor/oom.h"

typedef struct scope {
    int id;
    struct scope *next;
} scope;

typedef struct vf {
    const ry_module *m;
    ry_arena *a;
    bool typed;
    ry_error *err;
    const char *global;
} vf;

static bool in_scope(const scope *s, int id) {
    for (; s; s = s->next)
        if (s->id == id) return true;
    return false;
}

static scope *push(vf *v, const ry_var *var, scope *s) {
    scope *n = RY_NEW(v->a, scope);
    n->id = var->id;
    n->next = s;
    return n;
}

static ry_status fail(vf *v, const ry_expr *e, const char *what) {
    char *txt = ry_expr_print(e);
    ry_status st = ry_error_at(v->err, e->span, "@%s: %s in `%.80s`", v->global, what,
                               txt ? txt : "?");
    ry_free(txt);
    return st;
}

static ry_status check(vf *v, const ry_expr *e, scope *s);

static ry_status check_pat(vf *v, const ry_pattern *p, scope **s) {
    switch (p->kind) {
    case RY_PAT_WILDCARD: return RY_OK;
    case RY_PAT_VAR: *s = push(v, p->var, *s); return RY_OK;
    case RY_PAT_CTOR:
        if (p->ctor.n != p->ctor.ctor->nfields)
            return ry_error_at(v->err, p->span, "@%s: pattern %s takes %d fields, has %d",
                               v->global, p->ctor.ctor->name, p->ctor.ctor->nfields, p->ctor.n);
        for (int i = 0; i < p->ctor.n; i++)
            if (check_pat(v, p->ctor.args[i], s)) return RY_ERR;
        return RY_OK;
    case RY_PAT_TUPLE:
        for (int i = 0; i < p->tuple.n; i++)
            if (check_pat(v, p->tuple.fields[i], s)) return RY_ERR;
        return RY_OK;
    }
    return RY_OK;
}

static ry_status check(vf *v, const ry_expr *e, scope *s) {
    /* a span either points into its source (1-based) or is RY_NO_SPAN */
    if (e->span.src && (e->span.line < 1 || e->span.col < 1 || e->span.len < 0))
        return fail(v, e, "malformed span");
    if (v->typed && !e->type && e->kind != RY_EXPR_OP && e->kind != RY_EXPR_CTOR &&
        e->kind != RY_EXPR_GLOBAL)
        return fail(v, e, "untyped expression");
    switch (e->kind) {
    case RY_EXPR_VAR:
        if (!in_scope(s, e->var.var->id)) return fail(v, e, "variable used out of scope");
        return RY_OK;
    case RY_EXPR_GLOBAL:
        if (!ry_module_find_global(v->m, e->global.name)) return fail(v, e, "unknown global");
        return RY_OK;
    case RY_EXPR_CONST:
        return e->constant.value ? RY_OK : fail(v, e, "constant without a value");
    case RY_EXPR_OP: case RY_EXPR_CTOR: return RY_OK;
    case RY_EXPR_CALL:
        if (e->call.callee->kind == RY_EXPR_OP && e->call.nargs != e->call.callee->op.op->nargs)
            return fail(v, e, "operator called with the wrong number of arguments");
        if (e->call.callee->kind == RY_EXPR_CTOR &&
            e->call.nargs != e->call.callee->ctor.ctor->nfields)
            return fail(v, e, "constructor called with the wrong number of arguments");
        if (check(v, e->call.callee, s)) return RY_ERR;
        for (int i = 0; i < e->call.nargs; i++)
            if (check(v, e->call.args[i], s)) return RY_ERR;
        return RY_OK;
    case RY_EXPR_LET:
        for (; e->kind == RY_EXPR_LET; e = e->let.body) {
            if (v->typed && !e->let.var->type) return fail(v, e, "untyped let variable");
            scope *inner = s;
            if (e->let.value->kind == RY_EXPR_FUNC) inner = push(v, e->let.var, s);
            if (check(v, e->let.value, inner)) return RY_ERR;
            s = push(v, e->let.var, s);
        }
        return check(v, e, s);
    case RY_EXPR_IF:
        if (check(v, e->if_.cond, s) || check(v, e->if_.then_, s) || check(v, e->if_.else_, s))
            return RY_ERR;
        return RY_OK;
    case RY_EXPR_MATCH:
        if (check(v, e->match.data, s)) return RY_ERR;
        for (int i = 0; i < e->match.nclauses; i++) {
            scope *cs = s;
            if (check_pat(v, e->match.clauses[i].pat, &cs) ||
                check(v, e->match.clauses[i].body, cs))
                return RY_ERR;
        }
        return RY_OK;
    case RY_EXPR_FUNC:
        for (int i = 0; i < e->func.nparams; i++) s = push(v, e->func.params[i], s);
        return check(v, e->func.body, s);
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++)
            if (check(v, e->tuple.fields[i], s)) return RY_ERR;
        return RY_OK;
    case RY_EXPR_PROJ: {
        const ry_type *t = e->proj.tuple->type;
        if (e->proj.index < 0 || (t && t->kind == RY_TYPE_TUPLE && e->proj.index >= t->tuple.n))
            return fail(v, e, "projection out of range");
        return check(v, e->proj.tuple, s);
    }
    case RY_EXPR_REF: return check(v, e->ref.value, s);
    case RY_EXPR_REF_READ: return check(v, e->ref_read.ref, s);
    case RY_EXPR_REF_WRITE:
        if (check(v, e->ref_write.ref, s)) return RY_ERR;
        return check(v, e->ref_write.value, s);
    }
    return RY_OK;
}

static ry_status verify(void *ctx, ry_error *err) {
    vf v = *(const vf *)ctx;
    v.a = ry_arena_new();
    const ry_module *m = v.m;
    ry_status st = RY_OK;
    for (int i = 0; i < m->nglobals && st == RY_OK; i++) {
        v.global = m->globals[i]->name;
        const ry_expr *f = m->globals[i]->func;
        if (!f || f->kind != RY_EXPR_FUNC) {
            st = ry_error_at(err, m->globals[i]->span, "@%s is not a function", v.global);
            break;
        }
        st = check(&v, f, NULL);
    }
    ry_arena_free(v.a);
    return st;
}

/* Out of memory, the scratch arena goes with the recovery point (oom.h). */
ry_status ry_ir_verify(const ry_module *m, bool typed, ry_error *err) {
    vf v = {.m = m, .typed = typed, .err = err};
    return ry_oom_guard("verification", verify, NULL, &v, err);
}
