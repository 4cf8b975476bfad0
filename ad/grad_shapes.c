/*
 * grad_shapes.c: backpropagators that keep forward values only for their
 * shape. A rule's adjoint often needs no more of a forward value than its
 * shape: sum's is `zeros_like(x) + g`, a broadcast's `collapse_sum_like(g,
 * x)`. When x is an intermediate of the forward pass, the closure that
 * runs the backward pass captures it, so every call keeps its x alive
 * until the backward pass: a Tree-LSTM leaf that multiplies a (k, 150)
 * table by a mask held one (k, 150) product per leaf, memory quadratic in
 * the leaves. Here such a use of x = op(a, b) (an elementwise or
 * broadcasting operator) is rewritten to use a and b instead, when the
 * closure captures them anyway: the shape and
 * dtype are the same, the values never read, and x is no longer held.
 * Runs on the finished twins, before ry_grad's final type check; it only
 * ever drops a capture, never adds one.
 */
#include <string.h>

#include "grad_impl.h"

typedef struct shapes {
    ry_module *m;
    ry_arena *a;
    ry_ptrmap defs;    /* let-bound ry_var -> its value */
    ry_ptrmap seen;    /* visited nodes (the IR is a DAG) */
    ry_ptrmap free;    /* free vars of the closure being rewritten -> 1 */
} shapes;

/* Calls f on every child of e. */
static void each_child(ry_expr *e, void (*f)(shapes *, ry_expr *), shapes *s) {
    switch (e->kind) {
    case RY_EXPR_CALL:
        f(s, e->call.callee);
        for (int i = 0; i < e->call.nargs; i++) f(s, e->call.args[i]);
        break;
    case RY_EXPR_LET: f(s, e->let.value), f(s, e->let.body); break;
    case RY_EXPR_IF: f(s, e->if_.cond), f(s, e->if_.then_), f(s, e->if_.else_); break;
    case RY_EXPR_MATCH:
        f(s, e->match.data);
        for (int i = 0; i < e->match.nclauses; i++) f(s, e->match.clauses[i].body);
        break;
    case RY_EXPR_FUNC: f(s, e->func.body); break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) f(s, e->tuple.fields[i]);
        break;
    case RY_EXPR_PROJ: f(s, e->proj.tuple); break;
    case RY_EXPR_REF: f(s, e->ref.value); break;
    case RY_EXPR_REF_READ: f(s, e->ref_read.ref); break;
    case RY_EXPR_REF_WRITE: f(s, e->ref_write.ref), f(s, e->ref_write.value); break;
    default: break;
    }
}

static bool once(shapes *s, const ry_expr *e) {
    intptr_t v;
    if (ry_ptrmap_get(&s->seen, e, &v)) return false;
    ry_ptrmap_put(s->a, &s->seen, e, 1);
    return true;
}

static void collect_defs(shapes *s, ry_expr *e) {
    if (!e || !once(s, e)) return;
    if (e->kind == RY_EXPR_LET) ry_ptrmap_put(s->a, &s->defs, e->let.var, (intptr_t)e->let.value);
    each_child(e, collect_defs, s);
}

static bool is_op(const ry_expr *e, const char *name) {
    return e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_OP &&
           strcmp(e->call.callee->op.op->name, name) == 0;
}

/* Which argument of call e reads only the shape (and, for the *_like
 * constructors, the dtype) of its value: -1 for none. */
static int shape_arg(const ry_expr *e, bool *needs_dtype) {
    *needs_dtype = true;
    if ((is_op(e, "zeros_like") || is_op(e, "ones_like")) && e->call.nargs == 1) return 0;
    *needs_dtype = false;
    if ((is_op(e, "collapse_sum_like") || is_op(e, "reshape_like") ||
         is_op(e, "broadcast_to_like")) && e->call.nargs == 2)
        return 1;
    return -1;
}

static bool static_shape(const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    for (int i = 0; i < t->tensor.ndim; i++)
        if (t->tensor.dims[i].kind != RY_DIM_CONST) return false;
    return true;
}

static bool held(shapes *s, const ry_var *v) {
    intptr_t x;
    return ry_ptrmap_get(&s->free, v, &x);
}

/* An expression with x's shape (and dtype, when needed) built from the
 * operands of x's definition, all held by the closure anyway; NULL when
 * there is none. */
static ry_expr *stand_in(shapes *s, const ry_var *x, bool needs_dtype) {
    intptr_t d;
    if (!x->type || x->type->kind != RY_TYPE_TENSOR || !ry_ptrmap_get(&s->defs, x, &d)) return NULL;
    const ry_expr *def = (const ry_expr *)d;
    if (def->kind != RY_EXPR_CALL || def->call.callee->kind != RY_EXPR_OP || def->call.nargs < 1)
        return NULL;
    ry_op_pattern p = def->call.callee->op.op->pattern;
    if (p != RY_PAT_ELEMWISE && p != RY_PAT_BROADCAST) return NULL;
    for (int i = 0; i < def->call.nargs; i++) {
        const ry_expr *a = def->call.args[i];
        const ry_type *t = a->kind == RY_EXPR_VAR ? a->var.var->type : NULL;
        if (!t || t->kind != RY_TYPE_TENSOR || !held(s, a->var.var)) return NULL;
        if (t->tensor.dtype != x->type->tensor.dtype) return NULL;
    }
    /* an operand of x's own type (no unknown dims) has x's shape: use it */
    for (int i = 0; i < def->call.nargs; i++) {
        ry_var *v = def->call.args[i]->var.var;
        if (static_shape(v->type) && ry_type_equal(v->type, x->type))
            return ry_gb_ref(s->m, v);
    }
    /* else their sum broadcasts to x's shape (adds of one dtype; values unread) */
    if (!needs_dtype && def->call.nargs == 1) return ry_gb_ref(s->m, def->call.args[0]->var.var);
    if (x->type->tensor.dtype != RY_FLOAT32 && x->type->tensor.dtype != RY_FLOAT64) return NULL;
    ry_expr *r = ry_gb_ref(s->m, def->call.args[0]->var.var);
    for (int i = 1; i < def->call.nargs; i++)
        r = ry_gb_op2(s->m, "add", r, ry_gb_ref(s->m, def->call.args[i]->var.var));
    return r;
}

/* Rewrites the shape-only uses in a closure's body of its captures. */
static void rewrite_uses(shapes *s, ry_expr *e) {
    if (!e || !once(s, e)) return;
    bool needs_dtype;
    int k = e->kind == RY_EXPR_CALL ? shape_arg(e, &needs_dtype) : -1;
    if (k >= 0 && e->call.args[k]->kind == RY_EXPR_VAR) {
        const ry_var *x = e->call.args[k]->var.var;
        intptr_t v;
        ry_expr *r = ry_ptrmap_get(&s->free, x, &v) ? stand_in(s, x, needs_dtype) : NULL;
        if (r) e->call.args[k] = r;
    }
    each_child(e, rewrite_uses, s);
}

static void visit_closures(shapes *s, ry_expr *e);

/* A closure: its free variables, then its body rewritten. */
static void closure(shapes *s, ry_expr *fn) {
    ry_arena *tmp = ry_arena_new();
    if (!tmp) return;
    int n = 0;
    const ry_var **fv = ry_func_free_vars(tmp, tmp, fn, &n);
    memset(&s->free, 0, sizeof s->free);
    for (int i = 0; fv && i < n; i++) ry_ptrmap_put(s->a, &s->free, fv[i], 1);
    ry_ptrmap seen = s->seen;
    memset(&s->seen, 0, sizeof s->seen);
    rewrite_uses(s, fn->func.body);
    s->seen = seen;
    ry_arena_free(tmp);
}

static void visit_closures(shapes *s, ry_expr *e) {
    if (!e || !once(s, e)) return;
    if (e->kind == RY_EXPR_FUNC) closure(s, e);
    each_child(e, visit_closures, s);
}

void gx_shape_uses(ry_module *m, ry_expr *fn) {
    if (!fn || fn->kind != RY_EXPR_FUNC) return;
    ry_arena *a = ry_arena_new();
    if (!a) return;
    shapes s = {.m = m, .a = a};
    collect_defs(&s, fn->func.body);
    memset(&s.seen, 0, sizeof s.seen);
    visit_closures(&s, fn->func.body);
    ry_arena_free(a);
}
