/*
 * fuse_shape.c: provable shape equality of a function's tensors, unknown
 * (`?`) dimensions included (fuse_shape.h). Each `?` dimension of a bound
 * tensor is described by the set of source dimensions it is the broadcast
 * of: a source is a dimension nothing here can see through (a parameter,
 * a call's result, a projection of a value made elsewhere). Two `?`
 * dimensions with the same set are equal whenever the program runs, since
 * a broadcast is a function of its operands' sizes; constant and symbolic
 * dimensions compare as the types write them.
 */
#include <stdlib.h>
#include <string.h>

#include "op/fused_prog.h"
#include "pass/fuse_shape.h"
#include "relayc/op.h"

#define MAX_ATOMS 8 /* sources per dimension; more: treated as unknown */

typedef struct dset {
    int n; /* -1: unknown, equal to nothing */
    int64_t atom[MAX_ATOMS];
} dset;

typedef struct org {
    int ndim;
    dset d[RY_MAX_RANK];
} org;

struct fz_shapes {
    ry_arena *a;
    int nids;
    org **org;            /* var id -> its dimensions' sources (tensors only) */
    const ry_expr **val;  /* var id -> the value it is bound to */
    bool off;             /* RELAYC_FUSE_SHAPES=0: no `?` dimension is shown equal */
};

fz_shapes *fz_shapes_new(ry_arena *a, int nids) {
    fz_shapes *s = RY_NEW(a, fz_shapes);
    s->a = a;
    s->nids = nids;
    s->org = RY_NEW_ARRAY(a, org *, nids + 1);
    s->val = RY_NEW_ARRAY(a, const ry_expr *, nids + 1);
    /* the A/B switch for measurements and tests: the former rule, under
     * which `?` dimensions never matched */
    const char *env = getenv("RELAYC_FUSE_SHAPES");
    s->off = env && strcmp(env, "0") == 0;
    return s;
}

static bool is_tensor(const ry_type *t) { return t && t->kind == RY_TYPE_TENSOR; }

/* A source dimension: dim d of field `field` of the value keyed by id
 * (tag 0: a var itself, tag 1: a projection of it). */
static int64_t atom(int id, int field, int d, int tag) {
    return (((int64_t)id * 256 + field) * RY_MAX_RANK + d) * 4 + tag;
}

/* Dimensions of tensor type t, each `?` one its own source. */
static org *fresh(fz_shapes *s, const ry_type *t, int id, int field, int tag) {
    org *o = RY_NEW(s->a, org);
    o->ndim = t->tensor.ndim;
    for (int d = 0; d < o->ndim; d++) {
        o->d[d].n = 0;
        if (t->tensor.dims[d].kind != RY_DIM_ANY) continue;
        if (field >= 256 || id < 0) o->d[d].n = -1;
        else o->d[d] = (dset){1, {atom(id, field, d, tag)}};
    }
    return o;
}

static org *origin(fz_shapes *s, const ry_var *v);

static bool var_atom(const ry_expr *e) { return e && e->kind == RY_EXPR_VAR; }

/* The projection x.i (x a var): the field's own dims when x is a tuple
 * bound here, else sources of their own. */
static org *proj_origin(fz_shapes *s, const ry_var *x, int i, const ry_type *t) {
    const ry_expr *tv = x->id < s->nids ? s->val[x->id] : NULL;
    if (tv && tv->kind == RY_EXPR_TUPLE && i < tv->tuple.n && var_atom(tv->tuple.fields[i]) &&
        is_tensor(tv->tuple.fields[i]->type))
        return origin(s, tv->tuple.fields[i]->var.var);
    return fresh(s, t, x->id, i, 1);
}

/* Unions src into dst (broadcasting adds the sources of every operand). */
static void merge(dset *dst, const dset *src) {
    if (dst->n < 0) return;
    if (src->n < 0) {
        dst->n = -1;
        return;
    }
    for (int k = 0; k < src->n; k++) {
        bool seen = false;
        for (int j = 0; j < dst->n && !seen; j++) seen = dst->atom[j] == src->atom[k];
        if (seen) continue;
        if (dst->n == MAX_ATOMS) {
            dst->n = -1;
            return;
        }
        dst->atom[dst->n++] = src->atom[k];
    }
}

/* The result of a broadcasting call: each `?` dimension of the result is
 * the broadcast of the operands' dimensions aligned with it from the right
 * (a 1 or a missing dimension adds nothing). */
static org *broadcast(fz_shapes *s, const ry_expr *call, const ry_type *rt) {
    org *o = RY_NEW(s->a, org);
    o->ndim = rt->tensor.ndim;
    for (int d = 0; d < o->ndim; d++) o->d[d].n = 0;
    for (int k = 0; k < call->call.nargs; k++) {
        const ry_expr *x = call->call.args[k];
        if (!is_tensor(x->type)) return NULL;
        int xn = x->type->tensor.ndim, shift = o->ndim - xn;
        if (shift < 0) return NULL;
        const org *xo = var_atom(x) ? origin(s, x->var.var) : NULL;
        for (int j = 0; j < xn; j++) {
            int d = j + shift;
            if (rt->tensor.dims[d].kind != RY_DIM_ANY) continue;
            const ry_dim *xd = &x->type->tensor.dims[j];
            if (xd->kind == RY_DIM_CONST && xd->value == 1) continue;
            if (xd->kind != RY_DIM_ANY || !xo) o->d[d].n = -1;
            else merge(&o->d[d], &xo->d[j]);
        }
    }
    return o;
}

/* The result's dimension d copies dimension j of var x's. */
static void copy_dim(fz_shapes *s, org *o, int d, const ry_expr *x, int j) {
    const org *xo = var_atom(x) && is_tensor(x->type) ? origin(s, x->var.var) : NULL;
    if (xo && j >= 0 && j < xo->ndim) o->d[d] = xo->d[j];
    else o->d[d].n = -1;
}

static org *blank(fz_shapes *s, const ry_type *t) {
    org *o = RY_NEW(s->a, org);
    o->ndim = t->tensor.ndim;
    for (int d = 0; d < o->ndim; d++) o->d[d].n = t->tensor.dims[d].kind == RY_DIM_ANY ? -1 : 0;
    return o;
}

/* Operators whose result's dimensions come from their operands' in a way
 * written out here; NULL for the others (their results are sources). */
static org *call_origin(fz_shapes *s, const ry_expr *e) {
    const ry_type *rt = e->type;
    if (e->call.callee->kind != RY_EXPR_OP || !is_tensor(rt)) return NULL;
    const ry_op *op = e->call.callee->op.op;
    const ry_attrs *at = &e->call.attrs;
    const char *nm = op->name;
    int n = e->call.nargs, nd = rt->tensor.ndim;
    ry_expr *const *x = e->call.args;
    if (ry_fz_opcode_of(nm) >= 0 || (strcmp(nm, "nn.bias_add") == 0 && n == 2)) {
        if (strcmp(nm, "nn.bias_add") == 0 || strcmp(nm, "zeros_like") == 0 ||
            strcmp(nm, "ones_like") == 0) {
            org *o = blank(s, rt);
            for (int d = 0; d < nd; d++) copy_dim(s, o, d, x[0], d);
            return o;
        }
        return broadcast(s, e, rt);
    }
    if (strcmp(nm, "nn.dense") == 0 && n == 2) { /* (..., k) x (u, k) -> (..., u) */
        org *o = blank(s, rt);
        for (int d = 0; d + 1 < nd; d++) copy_dim(s, o, d, x[0], d);
        copy_dim(s, o, nd - 1, x[1], 0);
        return o;
    }
    if (strcmp(nm, "nn.matmul") == 0 && n == 2 && nd == 2) {
        bool ta = ry_attr_bool(op, at, "transpose_a"), tb = ry_attr_bool(op, at, "transpose_b");
        org *o = blank(s, rt);
        copy_dim(s, o, 0, x[0], ta ? 1 : 0);
        copy_dim(s, o, 1, x[1], tb ? 0 : 1);
        return o;
    }
    if (strcmp(nm, "expand_dims") == 0 && n == 1 && is_tensor(x[0]->type)) {
        int xn = x[0]->type->tensor.ndim;
        int64_t axis = ry_attr_int(op, at, "axis"), k = ry_attr_int(op, at, "num_newaxis");
        if (axis < 0) axis += xn + 1;
        if (axis < 0 || axis > xn || k < 0 || xn + k != nd) return NULL;
        org *o = blank(s, rt);
        for (int d = 0; d < nd; d++)
            if (d < axis) copy_dim(s, o, d, x[0], d);
            else if (d >= axis + k) copy_dim(s, o, d, x[0], (int)(d - k));
            else o->d[d].n = 0;
        return o;
    }
    if (strcmp(nm, "take") == 0 && n == 2 && is_tensor(x[0]->type) && is_tensor(x[1]->type) &&
        !ry_attr_is_none(op, at, "axis")) { /* data[:axis] + indices + data[axis+1:] */
        int xn = x[0]->type->tensor.ndim, in = x[1]->type->tensor.ndim;
        int64_t axis = ry_attr_int(op, at, "axis");
        if (axis < 0) axis += xn;
        if (axis < 0 || axis >= xn || xn - 1 + in != nd) return NULL;
        org *o = blank(s, rt);
        for (int d = 0; d < nd; d++)
            if (d < axis) copy_dim(s, o, d, x[0], d);
            else if (d < axis + in) copy_dim(s, o, d, x[1], (int)(d - axis));
            else copy_dim(s, o, d, x[0], (int)(d - in + 1));
        return o;
    }
    return NULL;
}

/* The contents of the cell r. A cell made here holds what it was made
 * with; the second field of a pair (T, ref(T)) holds a T of the first
 * field's shape: the AD transform pairs every value with its adjoint's
 * cell so. (Only the cost of a fusion rests on this: the fused kernels
 * broadcast at run time, so their results are right either way.) */
static org *read_origin(fz_shapes *s, const ry_var *r, const ry_type *t) {
    const ry_expr *rv = r->id < s->nids ? s->val[r->id] : NULL;
    if (rv && rv->kind == RY_EXPR_REF && var_atom(rv->ref.value) && is_tensor(rv->ref.value->type) &&
        ry_type_equal(rv->ref.value->type, t))
        return origin(s, rv->ref.value->var.var);
    if (rv && rv->kind == RY_EXPR_PROJ && rv->proj.index == 1 && var_atom(rv->proj.tuple)) {
        const ry_type *pt = rv->proj.tuple->type;
        if (pt && pt->kind == RY_TYPE_TUPLE && pt->tuple.n == 2 && is_tensor(pt->tuple.fields[0]) &&
            pt->tuple.fields[1]->kind == RY_TYPE_REF &&
            ry_type_equal(pt->tuple.fields[1]->ref.inner, pt->tuple.fields[0]) &&
            ry_type_equal(pt->tuple.fields[0], t))
            return proj_origin(s, rv->proj.tuple->var.var, 0, t);
    }
    return NULL;
}

static org *value_origin(fz_shapes *s, const ry_var *v, const ry_expr *e) {
    const ry_type *t = is_tensor(e->type) ? e->type : v->type;
    if (!is_tensor(t)) return NULL;
    org *o = NULL;
    switch (e->kind) {
    case RY_EXPR_VAR: o = is_tensor(e->type) ? origin(s, e->var.var) : NULL; break;
    case RY_EXPR_CALL: o = call_origin(s, e); break;
    case RY_EXPR_PROJ:
        if (var_atom(e->proj.tuple)) o = proj_origin(s, e->proj.tuple->var.var, e->proj.index, t);
        break;
    case RY_EXPR_REF_READ:
        if (var_atom(e->ref_read.ref)) o = read_origin(s, e->ref_read.ref->var.var, t);
        break;
    default: break;
    }
    if (o && o->ndim != t->tensor.ndim) o = NULL;
    return o ? o : fresh(s, t, v->id, 0, 0);
}

static org *origin(fz_shapes *s, const ry_var *v) {
    if (v->id >= 0 && v->id < s->nids && s->org[v->id]) return s->org[v->id];
    if (!is_tensor(v->type)) return NULL;
    if (v->id >= 0 && v->id < s->nids) {
        s->org[v->id] = fresh(s, v->type, v->id, 0, 0);
        return s->org[v->id];
    }
    return fresh(s, v->type, -1, 0, 0); /* made after the analysis: unknown */
}

void fz_shapes_bind(fz_shapes *s, const ry_var *v, const ry_expr *value) {
    if (v->id < 0 || v->id >= s->nids) return;
    s->val[v->id] = value;
    if (is_tensor(v->type) || is_tensor(value->type)) s->org[v->id] = value_origin(s, v, value);
}

static bool same_set(const dset *a, const dset *b) {
    if (a->n < 0 || b->n < 0 || a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        bool found = false;
        for (int j = 0; j < b->n && !found; j++) found = a->atom[i] == b->atom[j];
        if (!found) return false;
    }
    return true;
}

bool fz_shapes_same(fz_shapes *s, const ry_var *a, const ry_type *ta, const ry_var *b,
                    const ry_type *tb) {
    if (!is_tensor(ta) || !is_tensor(tb) || ta->tensor.ndim != tb->tensor.ndim) return false;
    const org *oa = NULL, *ob = NULL;
    for (int d = 0; d < ta->tensor.ndim; d++) {
        const ry_dim *x = &ta->tensor.dims[d], *y = &tb->tensor.dims[d];
        if (x->kind != y->kind) return false;
        if (x->kind == RY_DIM_CONST && x->value != y->value) return false;
        if (x->kind == RY_DIM_SYM && strcmp(x->name, y->name) != 0) return false;
        if (x->kind != RY_DIM_ANY) continue;
        if (s->off) return false;
        if (!oa) oa = origin(s, a), ob = origin(s, b);
        if (!oa || !ob || !same_set(&oa->d[d], &ob->d[d])) return false;
    }
    return true;
}
