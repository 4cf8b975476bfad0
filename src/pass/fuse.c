/*
 * fuse.c: operator fusion over A-normal form. In each let chain, groups of
 * elementwise and broadcasting operator calls whose intermediate results
 * are used only inside the group become one call of fused.elemwiseN, whose
 * `code` attribute is the group as a small program (src/op/fused_prog.h);
 * a group fed by an nn.dense or nn.matmul whose result only it uses becomes
 * fused.matmulN, the group being the GEMM's epilogue (so two GEMMs added
 * become one accumulating into the other's result). A group with no GEMM
 * also takes members whose values are used after the group (its root):
 * the call then returns them too, in a tuple, and their vars are bound to
 * its fields (an LSTM cell's gate activations, which its backward pass
 * reads: one kernel instead of seven). Members must have the group
 * result's shape, `?` dimensions included when fuse_shape.c shows them
 * equal. The result is ordinary IR: the engines, the printer and the
 * parser need nothing new.
 * Two exact rewrites open groups first: relu masks read the relu's result,
 * and a bias along a non-last axis broadcasts through expand_dims. Fused
 * calls have no gradient, so fusion runs after differentiation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h" /* ry_expr_child */
#include "op/fused_prog.h"
#include "pass/fuse_shape.h"
#include "pass/pass_impl.h"
#include "relayc/pass.h"

#define MAX_GROUP 24      /* instructions per program */
#define MAX_LITERALS 16
#define CODE_MAX 8192

typedef struct fz {
    ry_module *m;
    ry_arena *a;
    int nids;
    int *uses;   /* var id -> occurrences in the function */
    int *where;  /* var id -> index in the chain being fused, or -1 */
    int *group;  /* chain index -> group number (-1: none) */
    fz_shapes *sh; /* which tensors provably share a shape */
    int nfused;
} fz;

/* ---- use counts ---- */

static void count(fz *f, const ry_expr *e);

static void count_each(fz *f, int n, ry_expr *const *es) {
    for (int i = 0; i < n; i++) count(f, es[i]);
}

static void count(fz *f, const ry_expr *e) {
    for (;;) {
        switch (e->kind) {
        case RY_EXPR_VAR:
            if (e->var.var->id < f->nids) f->uses[e->var.var->id]++;
            return;
        case RY_EXPR_CALL:
            count(f, e->call.callee);
            count_each(f, e->call.nargs, e->call.args);
            return;
        case RY_EXPR_LET:
            count(f, e->let.value);
            fz_shapes_bind(f->sh, e->let.var, e->let.value);
            e = e->let.body;
            continue;
        case RY_EXPR_IF:
            count(f, e->if_.cond);
            count(f, e->if_.then_);
            e = e->if_.else_;
            continue;
        case RY_EXPR_MATCH:
            count(f, e->match.data);
            for (int i = 0; i < e->match.nclauses; i++) count(f, e->match.clauses[i].body);
            return;
        case RY_EXPR_FUNC: e = e->func.body; continue;
        case RY_EXPR_TUPLE: count_each(f, e->tuple.n, e->tuple.fields); return;
        case RY_EXPR_PROJ: e = e->proj.tuple; continue;
        case RY_EXPR_REF: e = e->ref.value; continue;
        case RY_EXPR_REF_READ: e = e->ref_read.ref; continue;
        case RY_EXPR_REF_WRITE:
            count(f, e->ref_write.ref);
            e = e->ref_write.value;
            continue;
        default: return;
        }
    }
}

/* ---- what may join a group ---- */

static bool prog_dtype(ry_dtype d) { return d == RY_FLOAT32 || d == RY_FLOAT64 || d == RY_BOOL; }

static bool prog_tensor(const ry_type *t) {
    return t && t->kind == RY_TYPE_TENSOR && prog_dtype(t->tensor.dtype);
}

/* A literal a program can hold: a scalar constant of a program dtype. */
static bool is_literal(const ry_expr *e) {
    return e->kind == RY_EXPR_CONST && e->constant.value->ndim == 0 &&
           prog_dtype(e->constant.value->dtype);
}

static bool bias_add_last(const ry_expr *e) {
    const ry_op *op = e->call.callee->op.op;
    int64_t axis = ry_attr_int(op, &e->call.attrs, "axis");
    int nd = e->type->tensor.ndim;
    return axis == -1 || axis == nd - 1;
}

/* A call the program language holds: an elementwise or broadcasting
 * operator on atoms, every operand and the result of a program dtype
 * (nn.bias_add along the last axis counts as add). */
static bool fusable(const ry_expr *e) {
    if (e->kind != RY_EXPR_CALL || e->call.callee->kind != RY_EXPR_OP || !prog_tensor(e->type))
        return false;
    const ry_op *op = e->call.callee->op.op;
    if (ry_fz_opcode_of(op->name) < 0 && !(strcmp(op->name, "nn.bias_add") == 0 && bias_add_last(e)))
        return false;
    for (int i = 0; i < e->call.nargs; i++) {
        const ry_expr *x = e->call.args[i];
        if ((x->kind != RY_EXPR_VAR && x->kind != RY_EXPR_CONST) || !prog_tensor(x->type))
            return false;
    }
    if (strcmp(op->name, "clip") == 0 &&
        (ry_attr_is_none(op, &e->call.attrs, "a_min") || ry_attr_is_none(op, &e->call.attrs, "a_max")))
        return false;
    return true;
}

/* nn.dense, or nn.matmul, of two float32 or float64 operands of one dtype
 * and no out_dtype: a GEMM an epilogue can follow. */
static bool gemm_head(const ry_expr *e) {
    if (e->kind != RY_EXPR_CALL || e->call.callee->kind != RY_EXPR_OP || e->call.nargs != 2 ||
        !e->type || e->type->kind != RY_TYPE_TENSOR)
        return false;
    const ry_op *op = e->call.callee->op.op;
    if (strcmp(op->name, "nn.dense") != 0 && strcmp(op->name, "nn.matmul") != 0) return false;
    const char *od = ry_attr_str(op, &e->call.attrs, "out_dtype");
    if (od[0] && strcmp(od, ry_dtype_name(e->type->tensor.dtype)) != 0) return false;
    ry_dtype d = e->type->tensor.dtype;
    for (int i = 0; i < 2; i++) {
        const ry_expr *x = e->call.args[i];
        if (x->kind != RY_EXPR_VAR || !x->type || x->type->kind != RY_TYPE_TENSOR ||
            x->type->tensor.dtype != d)
            return false;
    }
    return d == RY_FLOAT32 || d == RY_FLOAT64;
}

/* ---- forming groups in one chain ---- */

typedef struct chain {
    int n;
    ry_var **vars;
    ry_expr **vals;
} chain;

/* Whether chain entries i and j provably have one shape at run time
 * (fuse_shape.h: `?` dimensions too, when they derive from the same
 * sources). */
static bool same_shape(const fz *f, const chain *c, int i, int j) {
    return fz_shapes_same(f->sh, c->vars[i], c->vals[i]->type, c->vars[j], c->vals[j]->type);
}

typedef struct grp {
    int members[MAX_GROUP]; /* chain indices, the root first */
    int n;
    int head;               /* chain index of the GEMM, or -1 */
    int nextra;             /* members also used after the group: extra results */
    const ry_expr *inputs[RY_FZ_MAX_IN + 2]; /* one past the limit: "too many" */
    int ninputs, nliterals;
} grp;

static bool in_group(const grp *g, int idx) {
    for (int i = 0; i < g->n; i++)
        if (g->members[i] == idx) return true;
    return false;
}

/* Occurrences of var v among the members' operands. */
static int uses_inside(const fz *f, const chain *c, const grp *g, const ry_var *v) {
    int k = 0;
    for (int i = 0; i < g->n; i++) {
        const ry_expr *e = c->vals[g->members[i]];
        for (int j = 0; j < e->call.nargs; j++)
            k += e->call.args[j]->kind == RY_EXPR_VAR && e->call.args[j]->var.var == v;
    }
    (void)f;
    return k;
}

static int cmp_int(const void *x, const void *y) {
    return *(const int *)x - *(const int *)y;
}

/* The operands of the group that come from outside it (vars and non-scalar
 * constants), each once, and how many literals it holds. */
static void collect_inputs(const fz *f, const chain *c, grp *g) {
    int order[MAX_GROUP];
    memcpy(order, g->members, sizeof(int) * (size_t)g->n);
    qsort(order, (size_t)g->n, sizeof(int), cmp_int);
    g->ninputs = 0;
    g->nliterals = 0;
    for (int i = 0; i < g->n; i++) { /* in program order: inputs numbered as first read */
        const ry_expr *e = c->vals[order[i]];
        for (int j = 0; j < e->call.nargs; j++) {
            const ry_expr *x = e->call.args[j];
            if (is_literal(x)) {
                g->nliterals++;
                continue;
            }
            if (x->kind == RY_EXPR_VAR) {
                int id = x->var.var->id;
                int w = id < f->nids ? f->where[id] : -1;
                if (w >= 0 && in_group(g, w)) continue;
            }
            bool seen = false;
            for (int k = 0; k < g->ninputs && !seen; k++)
                seen = g->inputs[k] == x ||
                       (x->kind == RY_EXPR_VAR && g->inputs[k]->kind == RY_EXPR_VAR &&
                        g->inputs[k]->var.var == x->var.var);
            if (!seen && g->ninputs < RY_FZ_MAX_IN + 1) g->inputs[g->ninputs++] = x;
        }
    }
}

static bool is_call_of(const ry_expr *e, const char *name);

/* Whether types a and b can be one at run time: equal dtypes and ranks,
 * compatible dims (ry_dim_compatible); tuples field by field. */
static bool types_agree(const ry_type *a, const ry_type *b) {
    if (!a || !b || a->kind != b->kind) return false;
    if (a->kind == RY_TYPE_TUPLE) {
        if (a->tuple.n != b->tuple.n) return false;
        for (int i = 0; i < a->tuple.n; i++)
            if (!types_agree(a->tuple.fields[i], b->tuple.fields[i])) return false;
        return true;
    }
    if (a->kind != RY_TYPE_TENSOR) return ry_type_equal(a, b);
    if (a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim) return false;
    for (int d = 0; d < a->tensor.ndim; d++)
        if (!ry_dim_compatible(&a->tensor.dims[d], &b->tensor.dims[d])) return false;
    return true;
}

/* Whether the fused call's own relation types it as the values it
 * replaces: a GEMM typed by `units` where its weight has a symbol (dense
 * with units=1 and a weight (n, ?)) would come out (.., n). */
static bool typed_as_before(fz *f, const ry_expr *call) {
    const ry_op *op = call->call.callee->op.op;
    const ry_type *args[RY_FZ_MAX_IN + 2];
    for (int i = 0; i < call->call.nargs; i++)
        if (!(args[i] = call->call.args[i]->type)) return false;
    ry_error err = {0};
    ry_rel_ctx rc = {f->a, op, &call->call.attrs, call->span, &err};
    ry_type *t = NULL;
    return op->rel(&rc, call->call.nargs, (ry_type *const *)args, &t) == RY_REL_OK &&
           types_agree(t, call->type);
}

/* Whether every input broadcasts into the root's type without changing it:
 * the fused call's relation broadcasts its inputs, so an input (n) where
 * the root has (1) (bias_add matched a symbolic channel n to 1, typing its
 * result as the data's (1)) would type the call (n). Each input dim is 1,
 * the root's own (the same constant or symbol), or a ?. */
static bool inputs_fit(const chain *c, const grp *g) {
    const ry_type *rt = c->vals[g->members[0]]->type;
    if (!rt || rt->kind != RY_TYPE_TENSOR) return true;
    for (int k = 0; k < g->ninputs; k++) {
        const ry_type *t = g->inputs[k]->type;
        if (!t || t->kind != RY_TYPE_TENSOR) continue;
        int off = rt->tensor.ndim - t->tensor.ndim;
        if (off < 0) return false;
        for (int d = 0; d < t->tensor.ndim; d++) {
            const ry_dim *x = &t->tensor.dims[d];
            bool one = x->kind == RY_DIM_CONST && x->value == 1;
            if (!one && !ry_dim_compatible(x, &rt->tensor.dims[off + d])) return false;
        }
    }
    return true;
}

/* Whether e reads v anywhere (nested functions too). */
static bool mentions(const ry_expr *e, const ry_var *v) {
    for (;;) {
        if (e->kind == RY_EXPR_VAR) return e->var.var == v;
        if (e->kind == RY_EXPR_LET) { /* chains are long: a loop */
            if (mentions(e->let.value, v)) return true;
            e = e->let.body;
            continue;
        }
        int slot;
        for (int i = 0;; i++) {
            const ry_expr *k = ry_expr_child(e, i, &slot);
            if (!k) return false;
            if (mentions(k, v)) return true;
        }
    }
}

/* Whether chain entry w reads a GEMM's result that nothing else reads:
 * then w roots that GEMM's epilogue (fused.matmul, one result; an addend
 * folded into the GEMM saves a pass) rather than join a group with extra
 * results. */
static bool reads_lone_gemm(const fz *f, const chain *c, int w) {
    const ry_expr *e = c->vals[w];
    for (int k = 0; k < e->call.nargs; k++) {
        const ry_expr *x = e->call.args[k];
        if (x->kind != RY_EXPR_VAR || x->var.var->id >= f->nids) continue;
        int p = f->where[x->var.var->id];
        if (p >= 0 && gemm_head(c->vals[p]) && f->uses[x->var.var->id] == 1) return true;
    }
    return false;
}

/* Whether chain entry w, used outside the group g, may still join it as
 * an extra result: every use outside the group comes after the group's
 * root (where the fused call will stand), and there is room for one more
 * result. */
static bool may_return(const chain *c, const grp *g, int w) {
    /* not for zeros_like/ones_like, which read only the shape: alone they
     * are known zeros to the compiled engine (rows_ops.h), no kernel at all */
    const ry_expr *root = c->vals[g->members[0]];
    if (g->nextra + 1 >= RY_FZ_MAX_OUT || is_call_of(root, "zeros_like") || is_call_of(root, "ones_like"))
        return false;
    if (root->type->tensor.ndim == 0) return false; /* scalars gain nothing */
    for (int j = w + 1; j < g->members[0]; j++)
        if (!in_group(g, j) && mentions(c->vals[j], c->vars[w])) return false;
    return true;
}

/* Grows the group rooted at chain index root: producers in this chain of
 * the root's shape (so nothing is computed more often than before), while
 * the program stays small. A producer used only inside the group is
 * consumed there; with extras, one also used after the root becomes an
 * extra result (the fused call returns a tuple): the cell of an LSTM,
 * whose gate activations its backward pass reads, is one call. */
static void grow(fz *f, const chain *c, grp *g, int gid, bool extras) {
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n && g->n < MAX_GROUP; i++) {
            const ry_expr *e = c->vals[g->members[i]];
            for (int j = 0; j < e->call.nargs; j++) {
                const ry_expr *x = e->call.args[j];
                if (x->kind != RY_EXPR_VAR || x->var.var->id >= f->nids) continue;
                int w = f->where[x->var.var->id];
                if (w < 0 || f->group[w] >= 0 || !fusable(c->vals[w]) ||
                    !same_shape(f, c, w, g->members[0]))
                    continue;
                bool extra = uses_inside(f, c, g, x->var.var) != f->uses[x->var.var->id];
                if ((extra && (!extras || !may_return(c, g, w))) || (extras && reads_lone_gemm(f, c, w)))
                    continue;
                g->members[g->n++] = w;
                f->group[w] = gid;
                g->nextra += extra;
                collect_inputs(f, c, g);
                if (g->ninputs > RY_FZ_MAX_IN || g->nliterals > MAX_LITERALS || !inputs_fit(c, g)) {
                    f->group[w] = -1; /* too big: leave it out */
                    g->n--;
                    g->nextra -= extra;
                    collect_inputs(f, c, g);
                    continue;
                }
                changed = true;
                if (g->n == MAX_GROUP) break;
            }
        }
    }
}

/* A GEMM among the inputs whose result only the group uses, of the root's
 * shape, becomes the group's head; it leaves the inputs for its operands. */
static void find_head(fz *f, const chain *c, grp *g, int gid) {
    g->head = -1;
    for (int k = 0; k < g->ninputs && !g->nextra; k++) { /* an epilogue has one result */
        const ry_expr *x = g->inputs[k];
        if (x->kind != RY_EXPR_VAR || x->var.var->id >= f->nids) continue;
        int w = f->where[x->var.var->id];
        if (w < 0 || f->group[w] >= 0 || !gemm_head(c->vals[w]) ||
            !same_shape(f, c, w, g->members[0]) ||
            uses_inside(f, c, g, x->var.var) != f->uses[x->var.var->id] ||
            g->ninputs - 1 + 2 > RY_FZ_MAX_IN)
            continue;
        g->head = w;
        f->group[w] = gid;
        for (int j = k; j + 1 < g->ninputs; j++) g->inputs[j] = g->inputs[j + 1];
        g->ninputs--; /* the GEMM's operands stand in its place */
        return;
    }
}

/* ---- writing the program ---- */

typedef struct buf {
    char s[CODE_MAX];
    size_t n;
    bool full;
} buf;

__attribute__((format(printf, 2, 3))) static void put(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof b->s - b->n) b->full = true;
    else b->n += (size_t)k;
}

/* The shortest decimal that reads back as the same value. */
static void put_number(buf *b, double v, ry_dtype dt) {
    char s[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        double back = strtod(s, NULL);
        if (dt == RY_FLOAT32 ? (float)back == (float)v : back == v) break;
    }
    put(b, "%s%s", s, dt == RY_FLOAT32 ? "f" : "f64");
}

static void put_literal(buf *b, const ry_tensor *t) {
    if (t->dtype == RY_BOOL) put(b, "%s", ((const uint8_t *)t->data)[0] ? "True" : "False");
    else put_number(b, ry_tensor_get(t, 0), t->dtype);
}

/* An operand: tI for a member, acc for the head, xK for an input. */
static void put_operand(buf *b, const fz *f, const grp *g, const int *order, const ry_expr *x) {
    if (is_literal(x)) {
        put_literal(b, x->constant.value);
        return;
    }
    if (x->kind == RY_EXPR_VAR && x->var.var->id < f->nids) {
        int w = f->where[x->var.var->id];
        if (w >= 0 && w == g->head) {
            put(b, "acc");
            return;
        }
        for (int i = 0; w >= 0 && i < g->n; i++)
            if (order[i] == w) {
                put(b, "t%d", i);
                return;
            }
    }
    int first = g->head >= 0 ? 2 : 0;
    for (int k = 0; k < g->ninputs; k++)
        if (g->inputs[k] == x || (x->kind == RY_EXPR_VAR && g->inputs[k]->kind == RY_EXPR_VAR &&
                                  g->inputs[k]->var.var == x->var.var)) {
            put(b, "x%d", first + k);
            return;
        }
    b->full = true; /* cannot happen: every operand is classified */
}

static void put_ins(buf *b, const fz *f, const grp *g, const int *order, const ry_expr *e) {
    const ry_op *op = e->call.callee->op.op;
    const ry_attrs *at = &e->call.attrs;
    bool bias = strcmp(op->name, "nn.bias_add") == 0;
    put(b, "%s(", bias ? "add" : op->name);
    for (int j = 0; j < e->call.nargs; j++) {
        if (j) put(b, ", ");
        put_operand(b, f, g, order, e->call.args[j]);
    }
    if (strcmp(op->name, "clip") == 0) {
        put(b, ", a_min=");
        put_number(b, ry_attr_float(op, at, "a_min"), RY_FLOAT64);
        put(b, ", a_max=");
        put_number(b, ry_attr_float(op, at, "a_max"), RY_FLOAT64);
    } else if (strcmp(op->name, "nn.leaky_relu") == 0) {
        put(b, ", alpha=");
        put_number(b, ry_attr_float(op, at, "alpha"), RY_FLOAT64);
    } else if (strcmp(op->name, "cast") == 0) {
        put(b, ", dtype=%s", ry_dtype_name(e->type->tensor.dtype));
    }
    put(b, ")");
}

/* The members used after the group (besides the root) into rets, in chain
 * order; their count. */
static int extra_results(const fz *f, const chain *c, const grp *g, const int *order, int *rets) {
    int n = 0;
    for (int i = 0; i < g->n; i++) {
        const ry_var *v = c->vars[order[i]];
        if (order[i] != g->members[0] && uses_inside(f, c, g, v) != f->uses[v->id])
            rets[n++] = order[i];
    }
    return n;
}

/* The fused call of group g (members in chain order), or NULL when the
 * program does not fit; a group with extra results returns a tuple, the
 * root's value first, then theirs (rets, nrets). */
static ry_expr *fused_call(fz *f, const chain *c, grp *g, int *rets, int *nrets) {
    int order[MAX_GROUP];
    memcpy(order, g->members, sizeof(int) * (size_t)g->n);
    qsort(order, (size_t)g->n, sizeof(int), cmp_int);
    buf *b = ry_arena_alloc(f->a, sizeof *b);
    b->n = 0;
    b->full = false;
    for (int i = 0; i < g->n; i++) {
        if (i) put(b, "; ");
        put_ins(b, f, g, order, c->vals[order[i]]);
    }
    /* one result: the last instruction, the root; more: (t_root, t_extra...) */
    *nrets = g->head >= 0 ? 0 : extra_results(f, c, g, order, rets);
    for (int k = -1; *nrets && k < *nrets; k++) {
        int want = k < 0 ? g->members[0] : rets[k];
        for (int i = 0; i < g->n; i++)
            if (order[i] == want) put(b, "%st%d", k < 0 ? "; (" : ", ", i);
    }
    if (*nrets) put(b, ")");
    if (b->full) return NULL;
    int nargs = g->ninputs + (g->head >= 0 ? 2 : 0);
    char name[32];
    snprintf(name, sizeof name, "fused.%s%d", g->head >= 0 ? "matmul" : "elemwise", nargs);
    const ry_op *op = ry_op_find(name);
    if (!op) return NULL;
    ry_expr *args[RY_FZ_MAX_IN + 2];
    int k = 0;
    const ry_expr *head = g->head >= 0 ? c->vals[g->head] : NULL;
    if (head) {
        args[k++] = head->call.args[0];
        args[k++] = head->call.args[1];
    }
    for (int i = 0; i < g->ninputs; i++) args[k++] = (ry_expr *)g->inputs[i];
    const ry_expr *root = c->vals[g->members[0]];
    ry_expr *callee = ry_expr_new(f->m, RY_EXPR_OP, root->span);
    callee->op.op = op;
    ry_expr *call = ry_expr_call(f->m, callee, nargs, args, root->span);
    call->type = root->type;
    if (*nrets) {
        ry_type *ft[RY_FZ_MAX_OUT];
        ft[0] = (ry_type *)root->type;
        for (int k = 0; k < *nrets; k++) ft[k + 1] = (ry_type *)c->vals[rets[k]]->type;
        call->type = ry_type_tuple_arena(f->m->arena, *nrets + 1, ft);
    }
    int nattrs = head ? 3 : 1;
    ry_attr *items = RY_NEW_ARRAY(f->m->arena, ry_attr, nattrs);
    items[0] = (ry_attr){"code", {.kind = RY_AV_STR, .s = ry_arena_strdup(f->m->arena, b->s)},
                         RY_NO_SPAN};
    if (head) {
        const ry_op *hop = head->call.callee->op.op;
        bool dense = strcmp(hop->name, "nn.dense") == 0;
        bool ta = !dense && ry_attr_bool(hop, &head->call.attrs, "transpose_a");
        bool tb = dense || ry_attr_bool(hop, &head->call.attrs, "transpose_b");
        items[1] = (ry_attr){"transpose_a", {.kind = RY_AV_BOOL, .b = ta}, RY_NO_SPAN};
        items[2] = (ry_attr){"transpose_b", {.kind = RY_AV_BOOL, .b = tb}, RY_NO_SPAN};
    }
    call->call.attrs = (ry_attrs){nattrs, items};
    return typed_as_before(f, call) ? call : NULL;
}

/* ---- rewrites that open up groups ---- */

static bool is_call_of(const ry_expr *e, const char *name) {
    return e->kind == RY_EXPR_CALL && e->call.callee->kind == RY_EXPR_OP &&
           strcmp(e->call.callee->op.op->name, name) == 0;
}

static bool is_zero_literal(const ry_expr *e) {
    return is_literal(e) && e->constant.value->dtype != RY_BOOL &&
           ry_tensor_get(e->constant.value, 0) == 0;
}

/* greater(x, 0) where nn.relu(x) is bound earlier in the chain reads the
 * relu's result instead: relu(x) > 0 exactly when x > 0 (NaN: both false).
 * The gradient of relu reads such a mask; x is then often used by the relu
 * alone and can join the relu's group (a GEMM's or convolution's bias). */
static void relu_masks(fz *f, chain *c) {
    for (int i = 0; i < c->n; i++) {
        ry_expr *e = c->vals[i];
        if (!is_call_of(e, "greater") || e->call.args[0]->kind != RY_EXPR_VAR ||
            !is_zero_literal(e->call.args[1]))
            continue;
        const ry_var *x = e->call.args[0]->var.var;
        for (int j = 0; j < i; j++) {
            const ry_expr *r = c->vals[j];
            if (!is_call_of(r, "nn.relu") || r->call.args[0]->kind != RY_EXPR_VAR ||
                r->call.args[0]->var.var != x || !ry_type_equal(r->type, e->call.args[0]->type))
                continue;
            ry_expr *n = ry_expr_new(f->m, e->kind, e->span);
            *n = *e;
            n->call.args = RY_NEW_ARRAY(f->m->arena, ry_expr *, 2);
            n->call.args[0] = pass_use(f->m, c->vars[j]);
            n->call.args[1] = e->call.args[1];
            c->vals[i] = n;
            if (x->id < f->nids) f->uses[x->id]--;
            if (c->vars[j]->id < f->nids) f->uses[c->vars[j]->id]++;
            break;
        }
    }
}

/* The first call after chain index i that reads v, or NULL. */
static const ry_expr *user_in_chain(const chain *c, int i, const ry_var *v) {
    for (int j = i + 1; j < c->n; j++) {
        const ry_expr *u = c->vals[j];
        if (u->kind != RY_EXPR_CALL) continue;
        for (int k = 0; k < u->call.nargs; k++)
            if (u->call.args[k]->kind == RY_EXPR_VAR && u->call.args[k]->var.var == v) return u;
    }
    return NULL;
}

/* nn.bias_add(x, b, axis) along another axis than the last, whose result
 * only a fusable call uses, becomes add(x, expand_dims(b)): b then
 * broadcasts by numpy's rules (a convolution's bias, (C) as (C, 1, 1)),
 * and the add can join that call's group. The same float additions. */
static void bias_axes(fz *f, chain *c) {
    lets out = {0};
    bool changed = false;
    for (int i = 0; i < c->n; i++) {
        ry_expr *e = c->vals[i];
        ry_var *v = c->vars[i];
        const ry_expr *use = NULL;
        if (is_call_of(e, "nn.bias_add") && !fusable(e) && prog_tensor(e->type) &&
            v->id < f->nids && f->uses[v->id] == 1 && e->call.args[1]->kind == RY_EXPR_VAR)
            use = user_in_chain(c, i, v);
        const ry_type *bt = use ? e->call.args[1]->type : NULL;
        if (!use || !fusable(use) || !bt || bt->kind != RY_TYPE_TENSOR || bt->tensor.ndim != 1) {
            ry_lets_push(f->a, &out, v, e);
            continue;
        }
        const ry_op *op = e->call.callee->op.op;
        int nd = e->type->tensor.ndim;
        int64_t axis = ry_attr_int(op, &e->call.attrs, "axis");
        if (axis < 0) axis += nd;
        if (axis < 0 || axis >= nd - 1) {
            ry_lets_push(f->a, &out, v, e);
            continue;
        }
        int k = nd - 1 - (int)axis; /* trailing dims of 1 */
        ry_dim dims[RY_MAX_RANK];
        dims[0] = bt->tensor.dims[0];
        for (int d = 1; d <= k; d++) dims[d] = (ry_dim){RY_DIM_CONST, 1, NULL};
        ry_type *et = ry_type_tensor_arena(f->m->arena, bt->tensor.dtype, k + 1, dims);
        ry_expr *ed = ry_expr_new(f->m, RY_EXPR_OP, e->span);
        ed->op.op = ry_op_find("expand_dims");
        ry_expr *ex = ry_expr_call(f->m, ed, 1, &e->call.args[1], e->span);
        ry_attr *items = RY_NEW_ARRAY(f->m->arena, ry_attr, 2);
        items[0] = (ry_attr){"axis", {.kind = RY_AV_INT, .i = 1}, RY_NO_SPAN};
        items[1] = (ry_attr){"num_newaxis", {.kind = RY_AV_INT, .i = k}, RY_NO_SPAN};
        ex->call.attrs = (ry_attrs){2, items};
        ex->type = et;
        ry_var *bv = pass_fresh_var(f->m, "bias", et);
        ry_expr *ad = ry_expr_new(f->m, RY_EXPR_OP, e->span);
        ad->op.op = ry_op_find("add");
        ry_expr *args[2] = {e->call.args[0], pass_use(f->m, bv)};
        ry_expr *sum = ry_expr_call(f->m, ad, 2, args, e->span);
        sum->type = e->type;
        ry_lets_push(f->a, &out, bv, ex);
        ry_lets_push(f->a, &out, v, sum);
        changed = true;
    }
    if (!changed) return;
    c->n = out.n;
    c->vars = out.vars;
    c->vals = out.vals;
}

/* Fuses the bindings of one chain (their nested scopes already done). */
static void fuse_chain(fz *f, chain *c) {
    relu_masks(f, c);
    bias_axes(f, c);
    f->group = RY_NEW_ARRAY(f->a, int, c->n ? c->n : 1);
    for (int i = 0; i < c->n; i++) {
        f->group[i] = -1;
        if (c->vars[i]->id < f->nids) f->where[c->vars[i]->id] = i;
    }
    ry_expr **repl = RY_NEW_ARRAY(f->a, ry_expr *, c->n ? c->n : 1);
    int **rets = RY_NEW_ARRAY(f->a, int *, c->n ? c->n : 1), *nrets = RY_NEW_ARRAY(f->a, int, c->n ? c->n : 1);
    for (int i = c->n - 1; i >= 0; i--) {
        if (f->group[i] >= 0 || !fusable(c->vals[i])) continue;
        grp *g = ry_arena_alloc(f->a, sizeof *g);
        g->n = 1;
        g->members[0] = i;
        g->head = -1;
        g->nextra = 0;
        f->group[i] = i;
        collect_inputs(f, c, g);
        if (g->ninputs > RY_FZ_MAX_IN || !inputs_fit(c, g)) {
            f->group[i] = -1;
            continue;
        }
        /* a GEMM's epilogue first (it has one result); failing that, values
         * used after the group too join it as extra results */
        grow(f, c, g, i, false);
        find_head(f, c, g, i);
        if (g->head < 0) grow(f, c, g, i, true);
        rets[i] = RY_NEW_ARRAY(f->a, int, RY_FZ_MAX_OUT);
        ry_expr *call = (g->n > 1 || g->head >= 0) ? fused_call(f, c, g, rets[i], &nrets[i]) : NULL;
        if (!call) { /* nothing gained: the members stay as they are */
            for (int k = 0; k < g->n; k++) f->group[g->members[k]] = -1;
            if (g->head >= 0) f->group[g->head] = -1;
            continue;
        }
        repl[i] = call;
        f->nfused++;
    }
    /* keep the roots (now fused calls) and everything outside groups; a
     * call with extra results binds its tuple, then the root's var and
     * theirs to its fields */
    lets out = {0};
    for (int i = 0; i < c->n; i++) {
        if (c->vars[i]->id < f->nids) f->where[c->vars[i]->id] = -1;
        if (f->group[i] >= 0 && !repl[i]) continue;
        if (!repl[i] || !nrets[i]) {
            ry_lets_push(f->a, &out, c->vars[i], repl[i] ? repl[i] : c->vals[i]);
            continue;
        }
        ry_var *tup = pass_fresh_var(f->m, "fz", repl[i]->type);
        ry_lets_push(f->a, &out, tup, repl[i]);
        for (int r = 0; r <= nrets[i]; r++) {
            int at = r == 0 ? i : rets[i][r - 1];
            ry_expr *pr = ry_expr_proj(f->m, pass_use(f->m, tup), r, c->vals[at]->span);
            pr->type = c->vals[at]->type;
            ry_lets_push(f->a, &out, c->vars[at], pr);
        }
    }
    c->n = out.n;
    c->vars = out.vars;
    c->vals = out.vals;
}

/* ---- walking the program ---- */

static ry_expr *walk(fz *f, ry_expr *e);
static ry_expr *walk_scope(void *f, ry_expr *e) { return walk(f, e); }

static ry_expr *rewrite(fz *f, ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_IF: case RY_EXPR_MATCH: case RY_EXPR_FUNC:
        return pass_map_scopes(f->m, e, walk_scope, f);
    default:
        return e; /* in ANF every other node holds atoms only */
    }
}

static ry_expr *walk(fz *f, ry_expr *e) {
    if (e->kind != RY_EXPR_LET) return rewrite(f, e);
    lets l = {0};
    ry_expr *x = e;
    for (; x->kind == RY_EXPR_LET; x = x->let.body) ry_lets_push(f->a, &l, x->let.var, rewrite(f, x->let.value));
    ry_expr *body = rewrite(f, x);
    chain c = {l.n, l.vars, l.vals};
    fuse_chain(f, &c);
    l.n = c.n;
    l.vars = c.vars;
    l.vals = c.vals;
    /* keep the chain even when its last binding is the body (lets_close
     * would fold `let %x = v; %x` into v, which is fine: v is a call) */
    return lets_close(f->m, &l, body);
}

static ry_status fuse_module(ry_module *m, ry_error *err) {
    for (int i = 0; i < m->nglobals; i++) {
        ry_expr *old = m->globals[i]->func;
        ry_expr *fn = ry_anf(m, old);
        fn->type = old->type;
        ry_arena *a = ry_arena_new();
        fz f = {.m = m, .a = a, .nids = m->next_id};
        f.uses = RY_NEW_ARRAY(a, int, f.nids + 1);
        f.where = RY_NEW_ARRAY(a, int, f.nids + 1);
        f.sh = fz_shapes_new(a, f.nids);
        for (int k = 0; k <= f.nids; k++) f.where[k] = -1;
        count(&f, fn);
        m->globals[i]->func = rewrite(&f, fn);
        ry_arena_free(a);
    }
    return RY_OK;
}

ry_status ry_fuse(ry_module *m, ry_error *err) { return pass_guarded("fusion", fuse_module, m, err); }
