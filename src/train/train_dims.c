/*
 * train_dims.c: the symbolic dimensions a trainer is given values for
 * (ry_train_opts.sym_names, `relayc train --dim v=65`) become constants in
 * every type annotation of the model before it is type-checked. The program
 * the trainer differentiates and compiles then has static shapes wherever
 * the user fixed them: the compiled engine takes its fast path, and the
 * gradient rules that need a length (take's clip and wrap, convolution
 * channels) have it. Dimensions not named stay symbolic (a batch n).
 */
#include <string.h>

#include "ir/parse.h" /* ry_expr_child */
#include "train/train_impl.h"

typedef struct binder {
    const ry_train_opts *o;
    ry_arena *a;
    ry_ptrmap seen; /* expressions visited (a graph binding is shared) */
} binder;

static void bind_type(const binder *b, ry_type *t) {
    if (!t) return;
    switch (t->kind) {
    case RY_TYPE_TENSOR:
        for (int d = 0; d < t->tensor.ndim; d++) {
            ry_dim *dim = &t->tensor.dims[d];
            if (dim->kind != RY_DIM_SYM || !dim->name) continue;
            for (int i = 0; i < b->o->nsyms; i++)
                if (b->o->sym_names[i] && strcmp(b->o->sym_names[i], dim->name) == 0) {
                    dim->kind = RY_DIM_CONST;
                    dim->value = b->o->sym_values[i];
                    dim->name = NULL;
                    break;
                }
        }
        return;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++) bind_type(b, t->tuple.fields[i]);
        return;
    case RY_TYPE_FUNC:
        for (int i = 0; i < t->func.nargs; i++) bind_type(b, t->func.args[i]);
        bind_type(b, t->func.ret);
        return;
    case RY_TYPE_CALL:
        for (int i = 0; i < t->call.nargs; i++) bind_type(b, t->call.args[i]);
        return;
    case RY_TYPE_REF: bind_type(b, t->ref.inner); return;
    default: return;
    }
}

/* The annotations e itself carries (not its children's). */
static void bind_own(const binder *b, ry_expr *e) {
    if (e->kind == RY_EXPR_LET) bind_type(b, e->let.var->annot);
    if (e->kind == RY_EXPR_CALL)
        for (int i = 0; i < e->call.ntype_args; i++) bind_type(b, e->call.type_args[i]);
    if (e->kind == RY_EXPR_FUNC) {
        for (int i = 0; i < e->func.nparams; i++) bind_type(b, e->func.params[i]->annot);
        bind_type(b, e->func.ret_annot);
    }
}

/* Every node once (a graph binding is shared), children by ry_expr_child;
 * a let chain is walked as a loop, so a long body never deepens the C
 * stack. */
static void bind_expr(binder *b, ry_expr *e) {
    while (e) {
        intptr_t v;
        if (ry_ptrmap_get(&b->seen, e, &v)) return;
        ry_ptrmap_put(b->a, &b->seen, e, 1);
        bind_own(b, e);
        if (e->kind == RY_EXPR_LET) {
            bind_expr(b, e->let.value);
            e = e->let.body;
            continue;
        }
        int slot;
        const ry_expr *k;
        for (int i = 0; (k = ry_expr_child(e, i, &slot)); i++) bind_expr(b, (ry_expr *)k);
        return;
    }
}

void train_bind_dims(ry_module *m, const ry_train_opts *o) {
    if (o->nsyms == 0) return;
    binder b = {.o = o, .a = ry_arena_new()};
    for (int i = 0; i < m->nglobals; i++)
        if (m->globals[i]->func) bind_expr(&b, m->globals[i]->func);
    ry_arena_free(b.a);
}
