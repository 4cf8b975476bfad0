/*
 * promote.c: rewrites a module's float16 and float32 to float64, so that
 * gradient checking by finite differences has the precision it needs on
 * programs written (or printed by TVM) in float32. Every tensor type
 * (annotations, inferred types, ADT fields, type arguments), every float
 * constant and every `dtype` / `out_dtype` attribute naming a float is
 * rewritten in place; the module is then type-checked again. Integer and
 * boolean tensors are left alone.
 */
#include <stdlib.h>
#include <string.h>

#include "ad_impl.h"
#include "relayc/ad.h"
#include "tensor/alloc_exempt.h"
#include "tensor/oom.h"

typedef struct promo {
    ry_module *m;
    ad_map seen; /* types and expressions already rewritten (a DAG) */
} promo;

static bool low_float(ry_dtype d) { return d == RY_FLOAT32 || d == RY_FLOAT16; }

static void type(promo *p, ry_type *t) {
    if (!t || ad_map_get(&p->seen, t)) return;
    ad_map_put(&p->seen, t, t);
    switch (t->kind) {
    case RY_TYPE_TENSOR:
        if (low_float(t->tensor.dtype)) t->tensor.dtype = RY_FLOAT64;
        return;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            type(p, t->tuple.fields[i]);
        return;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++)
            type(p, t->func.args[i]);
        type(p, t->func.ret);
        return;
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++)
            type(p, t->call.args[i]);
        return;
    case RY_TYPE_REF: type(p, t->ref.inner); return;
    default: return;
    }
}

static void var(promo *p, ry_var *v) {
    type(p, v->annot);
    type(p, v->type);
}

static void attrs(promo *p, ry_attrs *as) {
    for (int i = 0; i < as->n; i++) {
        ry_attr *a = &as->items[i];
        if (a->value.kind != RY_AV_STR) continue;
        if (strcmp(a->name, "dtype") && strcmp(a->name, "out_dtype")) continue;
        ry_dtype d;
        if (ry_dtype_parse(a->value.s, strlen(a->value.s), &d) && low_float(d))
            a->value.s = ry_dtype_name(RY_FLOAT64);
    }
}

static void pattern(promo *p, ry_pattern *pat) {
    switch (pat->kind) {
    case RY_PAT_VAR: var(p, pat->var); return;
    case RY_PAT_CTOR:
        for (int i = 0; i < pat->ctor.n; i++)
            pattern(p, pat->ctor.args[i]);
        return;
    case RY_PAT_TUPLE:
        for (int i = 0; i < pat->tuple.n; i++)
            pattern(p, pat->tuple.fields[i]);
        return;
    default: return;
    }
}

/* A float constant becomes a float64 copy the module keeps. */
static void constant(promo *p, ry_expr *e) {
    ry_tensor *t = e->constant.value;
    if (!low_float(t->dtype)) return;
    ry_tensor *d = ry_ir_tensor_new(RY_FLOAT64, t->ndim, t->shape);
    for (int64_t i = 0; i < t->size; i++)
        ((double *)d->data)[i] = ry_tensor_get(t, i);
    ry_module_keep_const(p->m, d);
    e->constant.value = d;
}

static void expr(promo *p, ry_expr *e) {
    if (!e || ad_map_get(&p->seen, e)) return;
    ad_map_put(&p->seen, e, e);
    type(p, e->type);
    switch (e->kind) {
    case RY_EXPR_VAR: var(p, e->var.var); return;
    case RY_EXPR_CONST: constant(p, e); return;
    case RY_EXPR_CALL:
        expr(p, e->call.callee);
        for (int i = 0; i < e->call.nargs; i++)
            expr(p, e->call.args[i]);
        for (int i = 0; i < e->call.ntype_args; i++)
            type(p, e->call.type_args[i]);
        attrs(p, &e->call.attrs);
        return;
    case RY_EXPR_LET:
        for (; e->kind == RY_EXPR_LET; e = e->let.body) { /* a loop: long chains */
            var(p, e->let.var);
            expr(p, e->let.value);
            type(p, e->type);
        }
        expr(p, e);
        return;
    case RY_EXPR_IF:
        expr(p, e->if_.cond);
        expr(p, e->if_.then_);
        expr(p, e->if_.else_);
        return;
    case RY_EXPR_MATCH:
        expr(p, e->match.data);
        for (int i = 0; i < e->match.nclauses; i++) {
            pattern(p, e->match.clauses[i].pat);
            expr(p, e->match.clauses[i].body);
        }
        return;
    case RY_EXPR_FUNC:
        for (int i = 0; i < e->func.nparams; i++)
            var(p, e->func.params[i]);
        type(p, e->func.ret_annot);
        expr(p, e->func.body);
        return;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++)
            expr(p, e->tuple.fields[i]);
        return;
    case RY_EXPR_PROJ: expr(p, e->proj.tuple); return;
    case RY_EXPR_REF: expr(p, e->ref.value); return;
    case RY_EXPR_REF_READ: expr(p, e->ref_read.ref); return;
    case RY_EXPR_REF_WRITE:
        expr(p, e->ref_write.ref);
        expr(p, e->ref_write.value);
        return;
    default: return;
    }
}

/* Under a recovery point (tensor/oom.h): out of the IR's memory, the map's
 * arena is freed with it and m is left part-promoted (to be freed). */
static ry_status promote(void *ctx, ry_error *err) {
    ry_module *m = ctx;
    promo p = {.m = m};
    ry_arena *a = ry_arena_new();
    ad_map_init(&p.seen, a);
    for (int i = 0; i < m->ntypedefs; i++)
        for (int k = 0; k < m->typedefs[i]->nctors; k++)
            for (int j = 0; j < m->typedefs[i]->ctors[k]->nfields; j++)
                type(&p, m->typedefs[i]->ctors[k]->fields[j]);
    for (int i = 0; i < m->nglobals; i++)
        expr(&p, m->globals[i]->func);
    ry_arena_free(a);
    return ry_module_typecheck(m, err);
}

ry_status ry_module_to_float64(ry_module *m, ry_error *err) {
    return ry_oom_guard("float64 promotion", promote, NULL, m, err);
}
