/*
 * parse_type.c: types in Relay's text format: tensor types (with constant,
 * symbolic and `?` dimensions), bare dtypes as scalar tensors, tuples,
 * function types, type variables, ADT applications and `ref(T)` (which TVM
 * prints but cannot parse back; relayc can). Names resolve against the type
 * variables in scope and the module's ADTs, which parse.c declared first.
 */
#include <string.h>

#include "ir/parse.h"

/* dim -> integer | ident | '?' */
static bool parse_dim(parser *p, ry_dim *d) {
    const token *t = ry_p_peek(p, 0);
    if (t->kind == TK_INT) {
        if (t->i < 0) return ry_p_fail(p, "a dimension cannot be negative"), false;
        *d = (ry_dim){RY_DIM_CONST, t->i, NULL};
    } else if (t->kind == TK_IDENT) {
        *d = (ry_dim){RY_DIM_SYM, 0, t->name};
    } else if (t->kind == TK_QUESTION) {
        *d = (ry_dim){RY_DIM_ANY, 0, NULL};
    } else {
        return ry_p_fail(p, "expected a dimension (an integer, a name or `?`)"), false;
    }
    ry_p_next(p);
    return true;
}

/* tensor -> 'Tensor' '[' '(' (dim (',' dim)* ','?)? ')' ',' dtype ']'
 * TVM writes a 1-D shape as `(10)`, without the comma. */
static ry_type *parse_tensor(parser *p, int start) {
    if (!ry_p_expect(p, TK_LBRACK, "after `Tensor`") || !ry_p_expect(p, TK_LPAREN, "to open the shape"))
        return NULL;
    ry_dim dims[RY_MAX_RANK];
    int n = 0;
    while (!ry_p_at(p, TK_RPAREN)) {
        if (n == RY_MAX_RANK)
            return ry_p_fail_at(p, ry_p_span_from(p, start), "a tensor type has at most %d dimensions", RY_MAX_RANK);
        if (!parse_dim(p, &dims[n++])) return NULL;
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RPAREN, "to close the shape") || !ry_p_expect(p, TK_COMMA, "after the shape"))
        return NULL;
    const token *dt = ry_p_expect(p, TK_IDENT, "(the dtype)");
    if (!dt) return NULL;
    ry_dtype dtype;
    if (!ry_dtype_parse(dt->name, strlen(dt->name), &dtype))
        return ry_p_fail_at(p, dt->span, "unknown dtype '%s'", dt->name);
    if (!ry_p_expect(p, TK_RBRACK, "to close the tensor type")) return NULL;
    ry_type *t = ry_type_tensor_arena(p->m->arena, dtype, n, dims);
    t->span = ry_p_span_from(p, start);
    return t;
}

/* Parses '(' (type (',' type)* ','?)? ')' into a fresh array. As in TVM,
 * `(T)` is a tuple of one, like `(T,)`. */
static bool type_list(parser *p, int *n, ry_type ***out, const char *what) {
    ry_type **items = NULL;
    int cap = 0;
    *n = 0;
    if (!ry_p_expect(p, TK_LPAREN, what)) return false;
    while (!ry_p_at(p, TK_RPAREN)) {
        ry_type *t = ry_p_type(p);
        if (!t) return false;
        items = ry_p_grow(p, items, *n, &cap, sizeof *items);
        items[(*n)++] = t;
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RPAREN, "to close the list of types")) return false;
    *out = RY_NEW_ARRAY(p->m->arena, ry_type *, *n);
    if (*n) memcpy(*out, items, sizeof(ry_type *) * (size_t)*n);
    return true;
}

/* functype -> 'fn' tparams? '(' (type (',' type)*)? ')' '->' type */
static ry_type *parse_functype(parser *p, int start) {
    ry_type *t = ry_type_new(p->m, RY_TYPE_FUNC, ry_p_peek(p, -1)->span);
    int mark = p->ntvars;
    if (!ry_p_type_params(p, &t->func.ntparams, &t->func.tparams)) return NULL;
    if (!type_list(p, &t->func.nargs, &t->func.args, "for the argument types")) return NULL;
    if (!ry_p_expect(p, TK_ARROW, "after a function type's arguments")) return NULL;
    if (!(t->func.ret = ry_p_type(p))) return NULL;
    p->ntvars = mark;
    t->span = ry_p_span_from(p, start);
    return t;
}

/* named -> dtype | 'Tensor' ... | typevar | adt ('[' type (',' type)* ']')? */
static ry_type *parse_named(parser *p, int start) {
    const token *name = ry_p_next(p);
    ry_dtype dtype;
    if (strcmp(name->name, "Tensor") == 0) return parse_tensor(p, start);
    if (ry_dtype_parse(name->name, strlen(name->name), &dtype)) {
        ry_type *t = ry_type_tensor_arena(p->m->arena, dtype, 0, NULL);
        t->span = name->span;
        return t;
    }
    ry_type *tv = ry_p_lookup_tvar(p, name->name);
    if (tv) { /* a use: the same variable (same id), with the use's span */
        if (ry_p_at(p, TK_LBRACK)) return ry_p_fail(p, "type variable %s takes no arguments", name->name);
        ry_type *use = ry_type_new(p->m, RY_TYPE_VAR, name->span);
        use->var = tv->var;
        return use;
    }
    ry_typedef *td = ry_module_find_typedef(p->m, name->name);
    if (!td) return ry_p_fail_at(p, name->span, "unknown type '%s'", name->name);
    ry_type *t = ry_type_new(p->m, RY_TYPE_CALL, name->span);
    t->call.adt = td;
    if (ry_p_accept(p, TK_LBRACK)) {
        ry_type **args = NULL;
        int cap = 0;
        while (!ry_p_at(p, TK_RBRACK)) {
            args = ry_p_grow(p, args, t->call.nargs, &cap, sizeof *args);
            if (!(args[t->call.nargs++] = ry_p_type(p))) return NULL;
            if (!ry_p_accept(p, TK_COMMA)) break;
        }
        if (!ry_p_expect(p, TK_RBRACK, "to close the type arguments")) return NULL;
        t->call.args = RY_NEW_ARRAY(p->m->arena, ry_type *, t->call.nargs);
        if (t->call.nargs) memcpy(t->call.args, args, sizeof(ry_type *) * (size_t)t->call.nargs);
    }
    t->span = ry_p_span_from(p, start);
    if (t->call.nargs != td->ntparams)
        return ry_p_fail_at(p, t->span, "type %s takes %d type argument%s, not %d", td->name,
                            td->ntparams, td->ntparams == 1 ? "" : "s", t->call.nargs);
    return t;
}

/* type -> named | '(' types ')' | functype | 'ref' '(' type ')' | '_' */
ry_type *ry_p_type(parser *p) {
    if (!ry_p_enter(p)) return NULL;
    int start = p->pos;
    const token *t = ry_p_peek(p, 0);
    ry_type *ty = NULL;
    switch (t->kind) {
    case TK_IDENT: ty = parse_named(p, start); break;
    case TK_LPAREN: {
        ty = ry_type_new(p->m, RY_TYPE_TUPLE, t->span);
        if (!type_list(p, &ty->tuple.n, &ty->tuple.fields, "")) return NULL;
        ty->span = ry_p_span_from(p, start);
        break;
    }
    case TK_FN:
        ry_p_next(p);
        ty = parse_functype(p, start);
        break;
    case TK_REF:
        ry_p_next(p);
        ty = ry_type_new(p->m, RY_TYPE_REF, t->span);
        if (!ry_p_expect(p, TK_LPAREN, "after `ref`") || !(ty->ref.inner = ry_p_type(p)) ||
            !ry_p_expect(p, TK_RPAREN, "to close `ref(`"))
            return NULL;
        ty->span = ry_p_span_from(p, start);
        break;
    case TK_UNDERSCORE:
        ry_p_next(p);
        ty = ry_type_new(p->m, RY_TYPE_INCOMPLETE, t->span);
        ty->incomplete.id = p->m->next_id++;
        break;
    default: {
        ry_p_fail(p, "expected a type, found %s", ry_tok_name(t->kind));
        return NULL;
    }
    }
    if (ty) ry_p_leave(p);
    return ty;
}
