/*
 * tvm_adt.c: ADTs whose constructor fields hold refs, for TVM's parser,
 * which cannot write a ref type. The gradient twin of a tree of tensors,
 * `type Tree_grad { Leaf_grad((Tensor[(16), float32], ref(Tensor[(16),
 * float32]))), Node_grad(Tree_grad, Tree_grad) }`, prints generic in its
 * refs instead: `type Tree_grad[R0] { Leaf_grad((Tensor[...], R0)),
 * Node_grad(Tree_grad[R0], Tree_grad[R0]) }`. TVM infers R0 at each
 * constructor call and match; every annotation naming the ADT then holds a
 * ref and is dropped by the printer (ry_type_has_ref reads a call missing
 * its arguments as one). Only ADTs without type parameters of their own
 * are rewritten (the AD makes no others); the rest are counted.
 */
#include <string.h>

#include "ir/parse.h"

/* Per rewritten typedef: the ref types its fields held, in order. */
typedef struct adt_refs {
    ry_typedef *td;
    int n;
    ry_type **refs;
} adt_refs;

typedef struct rw {
    ry_module *m;
    adt_refs *done;
    int ndone;
    ry_type **refs; /* the one being rewritten */
    int nrefs, cap;
    ry_type **vars;
    ry_typedef *cur;
} rw;

static const adt_refs *done_of(const rw *r, const ry_typedef *td) {
    for (int i = 0; i < r->ndone; i++)
        if (r->done[i].td == td) return &r->done[i];
    return NULL;
}

static void add_ref(rw *r, ry_type *t) {
    for (int i = 0; i < r->nrefs; i++)
        if (ry_type_equal(r->refs[i], t)) return;
    if (r->nrefs == r->cap) {
        int cap = r->cap ? r->cap * 2 : 4;
        ry_type **fresh = RY_NEW_ARRAY(r->m->arena, ry_type *, cap);
        if (r->nrefs) memcpy(fresh, r->refs, sizeof *fresh * (size_t)r->nrefs);
        r->refs = fresh;
        r->cap = cap;
    }
    r->refs[r->nrefs++] = t;
}

/* The ref types in t, outermost first; through a call of an ADT rewritten
 * before, the refs it stands for. */
static void collect(rw *r, ry_type *t) {
    if (!t) return;
    switch (t->kind) {
    case RY_TYPE_REF: add_ref(r, t); return;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++) collect(r, t->tuple.fields[i]);
        return;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++) collect(r, t->func.args[i]);
        collect(r, t->func.ret);
        return;
    case RY_TYPE_CALL: {
        const adt_refs *d = t->call.nargs == 0 ? done_of(r, t->call.adt) : NULL;
        for (int i = 0; d && i < d->n; i++) add_ref(r, d->refs[i]);
        for (int i = 0; i < t->call.nargs; i++) collect(r, t->call.args[i]);
        return;
    }
    default: return;
    }
}

static ry_type *abstract(rw *r, ry_type *t);

static ry_type **abstract_all(rw *r, ry_type **ts, int n) {
    ry_type **out = RY_NEW_ARRAY(r->m->arena, ry_type *, n ? n : 1);
    for (int i = 0; i < n; i++) out[i] = abstract(r, ts[i]);
    return out;
}

/* t with each collected ref replaced by its type variable, and calls of
 * rewritten ADTs (this one included) given their arguments. */
static ry_type *abstract(rw *r, ry_type *t) {
    if (!t) return t;
    for (int i = 0; t->kind == RY_TYPE_REF && i < r->nrefs; i++)
        if (ry_type_equal(r->refs[i], t)) return r->vars[i];
    ry_type *c = ry_type_new(r->m, t->kind, t->span);
    *c = *t;
    switch (t->kind) {
    case RY_TYPE_TUPLE: c->tuple.fields = abstract_all(r, t->tuple.fields, t->tuple.n); break;
    case RY_TYPE_FUNC:
        c->func.args = abstract_all(r, t->func.args, t->func.nargs);
        c->func.ret = abstract(r, t->func.ret);
        break;
    case RY_TYPE_CALL:
        if (t->call.nargs == 0 && t->call.adt == r->cur) {
            c->call.nargs = r->nrefs;
            c->call.args = r->vars;
        } else if (t->call.nargs == 0 && done_of(r, t->call.adt)) {
            const adt_refs *d = done_of(r, t->call.adt);
            c->call.nargs = d->n;
            c->call.args = abstract_all(r, d->refs, d->n);
        } else {
            c->call.args = abstract_all(r, t->call.args, t->call.nargs);
        }
        break;
    default: break;
    }
    return c;
}

static void rewrite(rw *r, ry_typedef *td) {
    r->nrefs = 0;
    r->refs = NULL;
    r->cap = 0;
    r->cur = td;
    for (int c = 0; c < td->nctors; c++)
        for (int k = 0; k < td->ctors[c]->nfields; k++) collect(r, td->ctors[c]->fields[k]);
    r->vars = RY_NEW_ARRAY(r->m->arena, ry_type *, r->nrefs);
    for (int i = 0; i < r->nrefs; i++) {
        char name[16];
        snprintf(name, sizeof name, "R%d", i);
        r->vars[i] = ry_type_new(r->m, RY_TYPE_VAR, td->span);
        r->vars[i]->var.name = ry_arena_strdup(r->m->arena, name);
        r->vars[i]->var.id = r->m->next_id++;
    }
    for (int c = 0; c < td->nctors; c++) {
        ry_ctor *ct = td->ctors[c];
        ct->fields = abstract_all(r, ct->fields, ct->nfields);
    }
    td->ntparams = r->nrefs;
    td->tparams = r->vars;
    r->done[r->ndone++] = (adt_refs){td, r->nrefs, r->refs};
}

void ry_tvm_generalize_ref_adts(ry_module *m, ry_print_report *rep) {
    rw r = {.m = m};
    r.done = RY_NEW_ARRAY(m->arena, adt_refs, m->ntypedefs ? m->ntypedefs : 1);
    for (int i = 0; i < m->ntypedefs; i++) {
        ry_typedef *td = m->typedefs[i];
        bool refs = false;
        for (int c = 0; c < td->nctors && !refs; c++)
            for (int k = 0; k < td->ctors[c]->nfields && !refs; k++)
                refs = ry_type_has_ref(td->ctors[c]->fields[k]);
        if (!refs) continue;
        if (td->ntparams) {
            if (rep) rep->unsupported++;
            continue;
        }
        rewrite(&r, td);
        if (rep) rep->generic_adts++;
    }
}
