/*
 * module.c: modules and the constructors of IR nodes. Every node lives in
 * the module's arena; constants are tensors the module holds a reference to.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "relayc/ir.h"
#include "tensor/alloc_exempt.h"
#include "tensor/oom.h"

ry_module *ry_module_new(void) {
    ry_arena *a = ry_arena_new(); /* first: out of it, nothing is left to free */
    ry_module *m = ry_calloc(1, sizeof *m);
    if (!m) {
        ry_arena_free(a);
        return NULL;
    }
    m->arena = a;
    return m;
}

void ry_module_free(ry_module *m) {
    if (!m) return;
    for (int i = 0; i < m->nconsts; i++) ry_tensor_release(m->consts[i]);
    ry_free(m->consts);
    ry_arena_free(m->arena);
    ry_free(m);
}

/* Grows an arena-held pointer array by doubling (old blocks stay in the
 * arena until the module dies; arrays are small). */
static void **grow(ry_module *m, void **items, int n, int *cap) {
    if (n < *cap) return items;
    int ncap = *cap ? *cap * 2 : 8;
    void **fresh = ry_arena_alloc(m->arena, sizeof(void *) * (size_t)ncap);
    if (n) memcpy(fresh, items, sizeof(void *) * (size_t)n);
    *cap = ncap;
    return fresh;
}

ry_global *ry_module_find_global(const ry_module *m, const char *name) {
    for (int i = 0; i < m->nglobals; i++)
        if (strcmp(m->globals[i]->name, name) == 0) return m->globals[i];
    return NULL;
}

bool ry_module_has_param(const ry_module *m, const char *name) {
    for (int i = 0; i < m->nglobals; i++)
        for (int k = 0; k < m->globals[i]->func->func.nparams; k++)
            if (strcmp(m->globals[i]->func->func.params[k]->name, name) == 0) return true;
    return false;
}

ry_typedef *ry_module_find_typedef(const ry_module *m, const char *name) {
    for (int i = 0; i < m->ntypedefs; i++)
        if (strcmp(m->typedefs[i]->name, name) == 0) return m->typedefs[i];
    return NULL;
}

ry_ctor *ry_module_find_ctor(const ry_module *m, const char *name) {
    for (int i = 0; i < m->ntypedefs; i++)
        for (int j = 0; j < m->typedefs[i]->nctors; j++)
            if (strcmp(m->typedefs[i]->ctors[j]->name, name) == 0) return m->typedefs[i]->ctors[j];
    return NULL;
}

int ry_module_global_index(const ry_module *m, const char *name) {
    for (int i = 0; i < m->nglobals; i++)
        if (strcmp(m->globals[i]->name, name) == 0) return i;
    return -1;
}

ry_global *ry_module_add_global(ry_module *m, const char *name, ry_expr *fn) {
    ry_global *g = ry_module_find_global(m, name);
    if (g) {
        g->func = fn;
        return g;
    }
    g = RY_NEW(m->arena, ry_global);
    g->name = ry_arena_strdup(m->arena, name);
    g->func = fn;
    g->span = fn ? fn->span : RY_NO_SPAN;
    m->globals = (ry_global **)grow(m, (void **)m->globals, m->nglobals, &m->cap_globals);
    m->globals[m->nglobals++] = g;
    return g;
}

void ry_module_add_typedef(ry_module *m, ry_typedef *td) {
    m->typedefs = (ry_typedef **)grow(m, (void **)m->typedefs, m->ntypedefs, &m->cap_typedefs);
    m->typedefs[m->ntypedefs++] = td;
}

static void release_tensor(void *t) { ry_tensor_release(t); }

void ry_module_keep_const(ry_module *m, ry_tensor *t) {
    if (m->nconsts == m->cap_consts) {
        int ncap = m->cap_consts ? m->cap_consts * 2 : 16;
        int held = ry_oom_hold(release_tensor, t); /* t is ours even if the table cannot grow */
        m->consts = ry_ir_realloc(m->consts, sizeof *m->consts * (size_t)ncap);
        ry_oom_unhold(held);
        m->cap_consts = ncap;
    }
    m->consts[m->nconsts++] = t;
}

/* ---- node constructors ---- */

ry_var *ry_var_new(ry_module *m, const char *name, ry_type *annot, ry_span span) {
    ry_var *v = RY_NEW(m->arena, ry_var);
    v->name = ry_arena_strdup(m->arena, name);
    v->id = m->next_id++;
    v->annot = annot;
    v->span = span;
    return v;
}

ry_expr *ry_expr_new(ry_module *m, ry_expr_kind kind, ry_span span) {
    ry_expr *e = RY_NEW(m->arena, ry_expr);
    e->kind = kind;
    e->span = span;
    return e;
}

ry_expr *ry_expr_var(ry_module *m, ry_var *v, ry_span span) {
    ry_expr *e = ry_expr_new(m, RY_EXPR_VAR, span);
    e->var.var = v;
    return e;
}

ry_expr *ry_expr_const(ry_module *m, ry_tensor *t, ry_span span) {
    ry_module_keep_const(m, t); /* first: the module owns t before a node can fail */
    ry_expr *e = ry_expr_new(m, RY_EXPR_CONST, span);
    e->constant.value = t;
    return e;
}

ry_expr *ry_expr_call(ry_module *m, ry_expr *callee, int nargs, ry_expr **args, ry_span span) {
    ry_expr *e = ry_expr_new(m, RY_EXPR_CALL, span);
    e->call.callee = callee;
    e->call.nargs = nargs;
    e->call.args = RY_NEW_ARRAY(m->arena, ry_expr *, nargs);
    if (nargs) memcpy(e->call.args, args, sizeof(ry_expr *) * (size_t)nargs);
    return e;
}

ry_expr *ry_expr_let(ry_module *m, ry_var *v, ry_expr *value, ry_expr *body, ry_span span) {
    ry_expr *e = ry_expr_new(m, RY_EXPR_LET, span);
    e->let.var = v;
    e->let.value = value;
    e->let.body = body;
    return e;
}

ry_expr *ry_expr_tuple(ry_module *m, int n, ry_expr **fields, ry_span span) {
    ry_expr *e = ry_expr_new(m, RY_EXPR_TUPLE, span);
    e->tuple.n = n;
    e->tuple.fields = RY_NEW_ARRAY(m->arena, ry_expr *, n);
    if (n) memcpy(e->tuple.fields, fields, sizeof(ry_expr *) * (size_t)n);
    return e;
}

ry_expr *ry_expr_proj(ry_module *m, ry_expr *tuple, int index, ry_span span) {
    ry_expr *e = ry_expr_new(m, RY_EXPR_PROJ, span);
    e->proj.tuple = tuple;
    e->proj.index = index;
    return e;
}

ry_type *ry_type_new(ry_module *m, ry_type_kind kind, ry_span span) {
    ry_type *t = RY_NEW(m->arena, ry_type);
    t->kind = kind;
    t->span = span;
    return t;
}

ry_type *ry_type_tensor_arena(ry_arena *a, ry_dtype dtype, int ndim, const ry_dim *dims) {
    ry_type *t = RY_NEW(a, ry_type);
    t->kind = RY_TYPE_TENSOR;
    t->tensor.dtype = dtype;
    t->tensor.ndim = ndim;
    t->tensor.dims = RY_NEW_ARRAY(a, ry_dim, ndim);
    if (ndim && dims) memcpy(t->tensor.dims, dims, sizeof(ry_dim) * (size_t)ndim);
    return t;
}

ry_type *ry_type_tensor(ry_module *m, ry_dtype dtype, int ndim, const int64_t *shape) {
    ry_type *t = ry_type_tensor_arena(m->arena, dtype, ndim, NULL);
    t->tensor.dims = RY_NEW_ARRAY(m->arena, ry_dim, ndim);
    for (int i = 0; i < ndim; i++) t->tensor.dims[i] = (ry_dim){RY_DIM_CONST, shape[i], NULL};
    return t;
}

ry_type *ry_type_tuple_arena(ry_arena *a, int n, ry_type **fields) {
    ry_type *t = RY_NEW(a, ry_type);
    t->kind = RY_TYPE_TUPLE;
    t->tuple.n = n;
    t->tuple.fields = RY_NEW_ARRAY(a, ry_type *, n);
    if (n) memcpy(t->tuple.fields, fields, sizeof(ry_type *) * (size_t)n);
    return t;
}

static bool dim_equal(const ry_dim *a, const ry_dim *b) {
    if (a->kind != b->kind) return false;
    if (a->kind == RY_DIM_CONST) return a->value == b->value;
    if (a->kind == RY_DIM_SYM) return strcmp(a->name, b->name) == 0;
    return true;
}

static bool types_equal(const ry_type *const *a, const ry_type *const *b, int n) {
    for (int i = 0; i < n; i++)
        if (!ry_type_equal(a[i], b[i])) return false;
    return true;
}

bool ry_dim_compatible(const ry_dim *a, const ry_dim *b) {
    return a->kind == RY_DIM_ANY || b->kind == RY_DIM_ANY || dim_equal(a, b);
}

bool ry_type_equal(const ry_type *a, const ry_type *b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind) return false;
    switch (a->kind) {
    case RY_TYPE_TENSOR:
        if (a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim) return false;
        for (int i = 0; i < a->tensor.ndim; i++)
            if (!dim_equal(&a->tensor.dims[i], &b->tensor.dims[i])) return false;
        return true;
    case RY_TYPE_TUPLE:
        return a->tuple.n == b->tuple.n &&
               types_equal((const ry_type *const *)a->tuple.fields,
                           (const ry_type *const *)b->tuple.fields, a->tuple.n);
    case RY_TYPE_FUNC:
        return a->func.nargs == b->func.nargs && a->func.ntparams == b->func.ntparams &&
               types_equal((const ry_type *const *)a->func.args,
                           (const ry_type *const *)b->func.args, a->func.nargs) &&
               ry_type_equal(a->func.ret, b->func.ret);
    case RY_TYPE_VAR:
        return a->var.id == b->var.id;
    case RY_TYPE_CALL:
        return a->call.adt == b->call.adt && a->call.nargs == b->call.nargs &&
               types_equal((const ry_type *const *)a->call.args,
                           (const ry_type *const *)b->call.args, a->call.nargs);
    case RY_TYPE_REF:
        return ry_type_equal(a->ref.inner, b->ref.inner);
    case RY_TYPE_INCOMPLETE:
        return a->incomplete.id == b->incomplete.id;
    }
    return false;
}

void ry_lets_push(ry_arena *scratch, ry_lets *l, ry_var *v, ry_expr *val) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        ry_var **vars = RY_NEW_ARRAY(scratch, ry_var *, cap);
        ry_expr **vals = RY_NEW_ARRAY(scratch, ry_expr *, cap);
        if (l->n) {
            memcpy(vars, l->vars, sizeof *vars * (size_t)l->n);
            memcpy(vals, l->vals, sizeof *vals * (size_t)l->n);
        }
        l->vars = vars;
        l->vals = vals;
        l->cap = cap;
    }
    l->vars[l->n] = v;
    l->vals[l->n++] = val;
}
