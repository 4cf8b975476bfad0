/*
 * walk.c: the children of an expression, one at a time and in the order the
 * text prints them, for the traversals of print.c (placing and binding
 * shared nodes) and parse.c (checking a graph binding used out of its
 * scope). Kept apart so neither depends on the other.
 */
#include "ir/parse.h"

/* The i-th child of e in print order, with the slot of the scope it is
 * printed in (-1: e's own scope; k >= 0: e's k-th inner scope); NULL past
 * the last. */
const ry_expr *ry_expr_child(const ry_expr *e, int i, int *slot) {
    *slot = -1;
    switch (e->kind) {
    case RY_EXPR_CALL:
        if (i < e->call.nargs) return e->call.args[i];
        return i == e->call.nargs ? e->call.callee : NULL;
    case RY_EXPR_LET:
        *slot = 0;
        return i == 0 ? e->let.value : i == 1 ? e->let.body : NULL;
    case RY_EXPR_IF:
        if (i == 0) return e->if_.cond;
        *slot = i - 1;
        return i == 1 ? e->if_.then_ : i == 2 ? e->if_.else_ : NULL;
    case RY_EXPR_MATCH:
        if (i == 0) return e->match.data;
        *slot = i - 1;
        return i <= e->match.nclauses ? e->match.clauses[i - 1].body : NULL;
    case RY_EXPR_FUNC:
        *slot = 0;
        return i == 0 ? e->func.body : NULL;
    case RY_EXPR_TUPLE: return i < e->tuple.n ? e->tuple.fields[i] : NULL;
    case RY_EXPR_PROJ: return i == 0 ? e->proj.tuple : NULL;
    case RY_EXPR_REF: return i == 0 ? e->ref.value : NULL;
    case RY_EXPR_REF_READ: return i == 0 ? e->ref_read.ref : NULL;
    case RY_EXPR_REF_WRITE: return i == 0 ? e->ref_write.ref : i == 1 ? e->ref_write.value : NULL;
    default: return NULL;
    }
}

