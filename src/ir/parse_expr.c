/*
 * parse_expr.c: expressions in Relay's text format, as TVM parses them:
 * binding sequences (`let`, `%0 = e;` graph bindings that share one node,
 * `e1; e2`), infix arithmetic and comparisons with C-like precedence, calls
 * with operator attributes, functions, if, match, tuples, projections,
 * references, literals and meta[relay.Constant][N] constants.
 * Types are parse_type.c's; patterns and the module are parse.c's.
 */
#include <string.h>

#include "ir/parse.h"
#include "relayc/op.h"

static ry_expr *parse_binop(parser *p, int minprec);

/* ---- literals ---- */

static ry_expr *scalar_const(parser *p, const token *t, ry_dtype dtype) {
    ry_tensor *x = ry_tensor_new(dtype, 0, NULL);
    if (!x) return ry_p_fail_at(p, t->span, "out of memory");
    if (t->kind == TK_INT && dtype == RY_INT64) *(int64_t *)x->data = t->i;
    else if (t->kind == TK_INT) ry_tensor_set(x, 0, (double)t->i);
    else if (t->kind == TK_FLOAT) ry_tensor_set(x, 0, t->f);
    else ry_tensor_set(x, 0, t->kind == TK_TRUE ? 1 : 0);
    return ry_expr_const(p->m, x, t->span);
}

/* meta_ref -> 'meta' '[' 'relay.Constant' ']' '[' index ']' */
static ry_expr *meta_const(parser *p, const token *t) {
    if (strcmp(t->name, "relay.Constant") != 0)
        return ry_p_fail_at(p, t->span, "unsupported meta reference type '%s' (only relay.Constant)", t->name);
    if (p->nmeta == 0)
        return ry_p_fail_at(p, t->span, "meta[relay.Constant][%lld] used but the file has no #[metadata] section",
                            (long long)t->i);
    if (t->i >= p->nmeta)
        return ry_p_fail_at(p, t->span, "meta[relay.Constant][%lld] is out of range: the metadata holds %d constants",
                            (long long)t->i, p->nmeta);
    ry_expr **node = &p->meta_nodes[t->i];
    if (!*node) *node = ry_expr_const(p->m, ry_tensor_retain(p->meta[t->i]), t->span);
    return *node;
}

/* ---- attributes ----
 * attr  -> ident '=' value
 * value -> int | float | 'True' | 'False' | string | 'None'
 *        | '[' (value (',' value)* ','?)? ']' | '(' value ')' */
static bool attr_value(parser *p, ry_attr_value *v) {
    if (!ry_p_enter(p)) return false;
    const token *t = ry_p_peek(p, 0);
    switch (t->kind) {
    case TK_INT: *v = (ry_attr_value){.kind = RY_AV_INT, .i = t->i}; break;
    case TK_FLOAT: *v = (ry_attr_value){.kind = RY_AV_FLOAT, .f = t->f}; break;
    case TK_TRUE:
    case TK_FALSE: *v = (ry_attr_value){.kind = RY_AV_BOOL, .b = t->kind == TK_TRUE}; break;
    case TK_STRING: *v = (ry_attr_value){.kind = RY_AV_STR, .s = t->str}; break;
    case TK_IDENT:
        if (strcmp(t->name, "None") != 0 && strcmp(t->name, "nullptr") != 0)
            return ry_p_fail(p, "expected an attribute value, found `%s` (strings are quoted)", t->name), false;
        *v = (ry_attr_value){.kind = RY_AV_NONE};
        break;
    case TK_LBRACK: {
        ry_p_next(p);
        ry_attr_value *items = NULL;
        int n = 0, cap = 0;
        while (!ry_p_at(p, TK_RBRACK)) {
            items = ry_p_grow(p, items, n, &cap, sizeof *items);
            if (!attr_value(p, &items[n++])) return false;
            if (!ry_p_accept(p, TK_COMMA)) break;
        }
        if (!ry_p_expect(p, TK_RBRACK, "to close the attribute list")) return false;
        v->kind = RY_AV_LIST;
        v->list.n = n;
        v->list.items = RY_NEW_ARRAY(p->m->arena, ry_attr_value, n);
        if (n) memcpy(v->list.items, items, sizeof items[0] * (size_t)n);
        ry_p_leave(p);
        return true;
    }
    case TK_LPAREN:
        ry_p_next(p);
        if (!attr_value(p, v) || !ry_p_expect(p, TK_RPAREN, "to close the attribute value")) return false;
        ry_p_leave(p);
        return true;
    default:
        return ry_p_fail(p, "expected an attribute value, found %s", ry_tok_name(t->kind)), false;
    }
    ry_p_next(p);
    ry_p_leave(p);
    return true;
}

static bool at_attr(const parser *p) {
    return ry_p_peek(p, 0)->kind == TK_IDENT && ry_p_peek(p, 1)->kind == TK_EQ;
}

/* attrs -> attr (',' attr)* ','?  (up to the closing paren) */
static bool parse_attrs(parser *p, ry_attrs *out) {
    ry_attr *items = NULL;
    int n = 0, cap = 0;
    while (at_attr(p)) {
        const token *name = ry_p_next(p);
        ry_p_next(p); /* = */
        items = ry_p_grow(p, items, n, &cap, sizeof *items);
        for (int i = 0; i < n; i++)
            if (strcmp(items[i].name, name->name) == 0)
                return ry_p_fail_at(p, name->span, "attribute '%s' given twice", name->name), false;
        int start = p->pos - 2;
        items[n].name = name->name;
        if (!attr_value(p, &items[n].value)) return false;
        items[n++].span = ry_p_span_from(p, start);
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    out->n = n;
    out->items = RY_NEW_ARRAY(p->m->arena, ry_attr, n);
    if (n) memcpy(out->items, items, sizeof items[0] * (size_t)n);
    return true;
}

/* ---- functions ----
 * fn_rest -> tparams? '(' (param (',' param)*)? (',' attrs)? ')' ('->' type)? '{' expr '}'
 * param   -> local (':' type)? */
ry_expr *ry_p_func(parser *p, int start) {
    ry_expr *fn = ry_expr_new(p->m, RY_EXPR_FUNC, p->toks[start].span);
    int tmark = p->ntvars, smark = p->nscope;
    if (!ry_p_type_params(p, &fn->func.ntparams, &fn->func.tparams)) return NULL;
    if (!ry_p_expect(p, TK_LPAREN, "to open the parameters")) return NULL;
    ry_var **params = NULL;
    int n = 0, cap = 0;
    while (!ry_p_at(p, TK_RPAREN)) {
        if (at_attr(p)) {
            if (!parse_attrs(p, &fn->func.attrs)) return NULL;
            break;
        }
        const token *t = ry_p_expect(p, TK_LOCAL, "(a parameter)");
        if (!t) return NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(params[i]->name, t->name) == 0)
                return ry_p_fail_at(p, t->span, "parameter %%%s given twice", t->name);
        ry_type *annot = NULL;
        if (ry_p_accept(p, TK_COLON) && !(annot = ry_p_type(p))) return NULL;
        params = ry_p_grow(p, params, n, &cap, sizeof *params);
        params[n++] = ry_p_bind_local(p, t, annot);
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RPAREN, "to close the parameters")) return NULL;
    fn->func.nparams = n;
    fn->func.params = RY_NEW_ARRAY(p->m->arena, ry_var *, n);
    if (n) memcpy(fn->func.params, params, sizeof(ry_var *) * (size_t)n);
    if (ry_p_accept(p, TK_ARROW) && !(fn->func.ret_annot = ry_p_type(p))) return NULL;
    if (!ry_p_expect(p, TK_LBRACE, "to open the function body")) return NULL;
    if (!(fn->func.body = ry_p_expr(p))) return NULL;
    if (!ry_p_expect(p, TK_RBRACE, "to close the function body")) return NULL;
    p->ntvars = tmark;
    ry_p_scope_pop(p, smark);
    fn->span = ry_p_span_from(p, start);
    return fn;
}

/* ---- compound expressions ---- */

/* block -> '{' expr '}' */
static ry_expr *block(parser *p, const char *what) {
    if (!ry_p_expect(p, TK_LBRACE, what)) return NULL;
    ry_expr *e = ry_p_expr(p);
    if (!e || !ry_p_expect(p, TK_RBRACE, "to close the block")) return NULL;
    return e;
}

/* if -> 'if' '(' expr ')' block 'else' block */
static ry_expr *parse_if(parser *p, int start) {
    ry_expr *e = ry_expr_new(p->m, RY_EXPR_IF, p->toks[start].span);
    if (!ry_p_expect(p, TK_LPAREN, "after `if`") || !(e->if_.cond = ry_p_expr(p)) ||
        !ry_p_expect(p, TK_RPAREN, "to close the condition") ||
        !(e->if_.then_ = block(p, "to open the `if` branch")) ||
        !ry_p_expect(p, TK_ELSE, "after the `if` branch (an `if` needs an `else`)") ||
        !(e->if_.else_ = block(p, "to open the `else` branch")))
        return NULL;
    e->span = ry_p_span_from(p, start);
    return e;
}

static ry_expr *parse_atom(parser *p);

/* match  -> ('match' | 'match?') atom ('.' int)* '{' clause (',' clause)* ','? '}'
 * clause -> pattern '=>' expr
 * As in TVM the matched value is an atom: usually `(e)`, also `(%a, %b)`. */
static ry_expr *parse_match(parser *p, int start, bool complete) {
    ry_expr *e = ry_expr_new(p->m, RY_EXPR_MATCH, p->toks[start].span);
    e->match.complete = complete;
    int dstart = p->pos;
    if (!(e->match.data = parse_atom(p))) return NULL;
    while (ry_p_accept(p, TK_DOT)) {
        const token *i = ry_p_expect(p, TK_INT, "(a tuple index) after `.`");
        if (!i) return NULL;
        e->match.data = ry_expr_proj(p->m, e->match.data, (int)i->i, ry_p_span_from(p, dstart));
    }
    if (!ry_p_expect(p, TK_LBRACE, "to open the match clauses")) return NULL;
    ry_clause *items = NULL;
    int n = 0, cap = 0;
    while (!ry_p_at(p, TK_RBRACE)) {
        items = ry_p_grow(p, items, n, &cap, sizeof *items);
        int mark = p->nscope;
        if (!(items[n].pat = ry_p_pattern(p))) return NULL;
        if (!ry_p_expect(p, TK_FATARROW, "after the pattern")) return NULL;
        if (!(items[n++].body = ry_p_expr(p))) return NULL;
        ry_p_scope_pop(p, mark);
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RBRACE, "to close the match")) return NULL;
    if (n == 0) return ry_p_fail_at(p, p->toks[start].span, "a match needs at least one clause");
    e->match.nclauses = n;
    e->match.clauses = RY_NEW_ARRAY(p->m->arena, ry_clause, n);
    memcpy(e->match.clauses, items, sizeof items[0] * (size_t)n);
    e->span = ry_p_span_from(p, start);
    return e;
}

/* paren -> '(' ')' | '(' expr ')' | '(' expr ',' (expr (',' expr)*)? ','? ')' */
static ry_expr *parse_paren(parser *p, int start) {
    ry_expr **items = NULL;
    int n = 0, cap = 0;
    bool comma = false;
    while (!ry_p_at(p, TK_RPAREN)) {
        items = ry_p_grow(p, items, n, &cap, sizeof *items);
        if (!(items[n++] = ry_p_expr(p))) return NULL;
        if (!ry_p_accept(p, TK_COMMA)) break;
        comma = true;
    }
    if (!ry_p_expect(p, TK_RPAREN, n ? "or `,` in the tuple" : "")) return NULL;
    if (n == 1 && !comma) return items[0];
    return ry_expr_tuple(p->m, n, items, ry_p_span_from(p, start));
}

/* ref -> 'ref' '(' expr ')' | 'ref_read' '(' expr ')' | 'ref_write' '(' expr ',' expr ')' */
static ry_expr *parse_ref(parser *p, int start, tok_kind kind) {
    ry_expr *e = ry_expr_new(p->m, kind == TK_REF ? RY_EXPR_REF
                                  : kind == TK_REF_READ ? RY_EXPR_REF_READ : RY_EXPR_REF_WRITE,
                             p->toks[start].span);
    if (!ry_p_expect(p, TK_LPAREN, "to open the arguments")) return NULL;
    ry_expr *a = ry_p_expr(p);
    if (!a) return NULL;
    if (kind == TK_REF_WRITE) {
        if (!ry_p_expect(p, TK_COMMA, "between the reference and the value")) return NULL;
        if (!(e->ref_write.value = ry_p_expr(p))) return NULL;
        e->ref_write.ref = a;
    } else if (kind == TK_REF) {
        e->ref.value = a;
    } else {
        e->ref_read.ref = a;
    }
    if (!ry_p_expect(p, TK_RPAREN, "to close the arguments")) return NULL;
    e->span = ry_p_span_from(p, start);
    return e;
}

/* An identifier in expression position: a constructor or an operator. */
static ry_expr *name_expr(parser *p, const token *t) {
    ry_ctor *c = ry_module_find_ctor(p->m, t->name);
    if (c) {
        ry_expr *e = ry_expr_new(p->m, RY_EXPR_CTOR, t->span);
        e->ctor.ctor = c;
        return e;
    }
    const ry_op *op = ry_op_find(t->name);
    if (!op) return ry_p_fail_at(p, t->span, "unknown operator or constructor '%s'", t->name);
    ry_expr *e = ry_expr_new(p->m, RY_EXPR_OP, t->span);
    e->op.op = op;
    return e;
}

/* atom -> literal | local | graph | global | ident | meta_ref | fn | if | match | ref | paren */
static ry_expr *parse_atom(parser *p) {
    int start = p->pos;
    const token *t = ry_p_next(p);
    switch (t->kind) {
    case TK_INT:
    case TK_FLOAT: return scalar_const(p, t, t->dtype);
    case TK_TRUE:
    case TK_FALSE: return scalar_const(p, t, RY_BOOL);
    case TK_LOCAL: {
        ry_var *v = ry_p_lookup_local(p, t->name);
        if (!v) return ry_p_fail_at(p, t->span, "unbound variable %%%s", t->name);
        return ry_expr_var(p->m, v, t->span);
    }
    case TK_GRAPH: return ry_p_use_graph(p, t);
    case TK_GLOBAL: {
        ry_expr *e = ry_expr_new(p->m, RY_EXPR_GLOBAL, t->span);
        e->global.name = t->name;
        ry_p_note_global(p, t->name, t->span);
        return e;
    }
    case TK_IDENT: return name_expr(p, t);
    case TK_META: return meta_const(p, t);
    case TK_FN: return ry_p_func(p, start);
    case TK_IF: return parse_if(p, start);
    case TK_MATCH:
    case TK_MATCHQ: return parse_match(p, start, t->kind == TK_MATCH);
    case TK_REF:
    case TK_REF_READ:
    case TK_REF_WRITE: return parse_ref(p, start, t->kind);
    case TK_LPAREN: return parse_paren(p, start);
    default: {
        p->pos = start;
        return ry_p_fail(p, "expected an expression, found %s", ry_tok_name(t->kind));
    }
    }
}

/* `attrs_type_key="relay.attrs.X"` names the attribute class where TVM
 * cannot find it from the callee (a closure call, scatter_nd): an
 * operator's class is its own here, so on operator calls it is dropped. */
static void drop_attrs_type_key(ry_attrs *a) {
    int k = 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->items[i].name, "attrs_type_key") != 0) a->items[k++] = a->items[i];
    a->n = k;
}

/* args -> '(' (expr (',' expr)*)? (',' attrs)? ','? ')' */
static ry_expr *parse_call(parser *p, ry_expr *callee, int start) {
    ry_p_next(p); /* ( */
    ry_expr **args = NULL;
    int n = 0, cap = 0;
    ry_attrs attrs = {0, NULL};
    while (!ry_p_at(p, TK_RPAREN)) {
        if (at_attr(p)) { /* TVM keeps attributes on any call, a closure's too */
            if (!parse_attrs(p, &attrs)) return NULL;
            break;
        }
        args = ry_p_grow(p, args, n, &cap, sizeof *args);
        if (!(args[n++] = ry_p_expr(p))) return NULL;
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RPAREN, "or `,` in the arguments")) return NULL;
    ry_span span = ry_p_span_from(p, start);
    if (callee->kind == RY_EXPR_OP) {
        const ry_op *op = callee->op.op;
        drop_attrs_type_key(&attrs);
        if (op->nargs >= 0 && n != op->nargs)
            return ry_p_fail_at(p, span, "operator %s takes %d argument%s, got %d", op->name, op->nargs,
                                op->nargs == 1 ? "" : "s", n);
        if (ry_op_check_attrs(op, &attrs, p->err)) return NULL;
    }
    if (callee->kind == RY_EXPR_CTOR) {
        ry_ctor *c = callee->ctor.ctor;
        if (n != c->nfields)
            return ry_p_fail_at(p, span, "constructor %s takes %d argument%s, got %d", c->name, c->nfields,
                                c->nfields == 1 ? "" : "s", n);
        if (n == 0) return callee; /* `Nil()` is `Nil` */
    }
    ry_expr *e = ry_expr_call(p->m, callee, n, args, span);
    e->call.attrs = attrs;
    return e;
}

/* postfix -> atom ('(' args ')' | '.' int)* */
static ry_expr *parse_postfix(parser *p) {
    int start = p->pos;
    ry_expr *e = parse_atom(p);
    while (e) {
        if (ry_p_at(p, TK_LPAREN)) {
            e = parse_call(p, e, start);
        } else if (ry_p_accept(p, TK_DOT)) {
            const token *i = ry_p_expect(p, TK_INT, "(a tuple index) after `.`");
            if (!i) return NULL;
            if (i->i < 0 || i->suffixed) return ry_p_fail_at(p, i->span, "invalid tuple index");
            e = ry_expr_proj(p->m, e, (int)i->i, ry_p_span_from(p, start));
        } else {
            break;
        }
    }
    return e;
}

/* binop -> postfix (op binop)*, with C's precedence:
 *   * /  >  + -  >  < <= > >=  >  == !=   (all left-associative) */
static const struct {
    tok_kind tok;
    const char *op;
    int prec;
} binops[] = {
    {TK_STAR, "multiply", 4}, {TK_SLASH, "divide", 4},      {TK_PLUS, "add", 3},
    {TK_MINUS, "subtract", 3}, {TK_LT, "less", 2},           {TK_LE, "less_equal", 2},
    {TK_GT, "greater", 2},     {TK_GE, "greater_equal", 2}, {TK_EQEQ, "equal", 1},
    {TK_NE, "not_equal", 1},
};

static ry_expr *parse_binop(parser *p, int minprec) {
    if (!ry_p_enter(p)) return NULL;
    int start = p->pos;
    ry_expr *lhs = parse_postfix(p);
    while (lhs) {
        const token *t = ry_p_peek(p, 0);
        int k = -1;
        for (int i = 0; i < (int)(sizeof binops / sizeof binops[0]); i++)
            if (binops[i].tok == t->kind && binops[i].prec >= minprec) k = i;
        if (k < 0) break;
        ry_p_next(p);
        const ry_op *op = ry_op_find(binops[k].op);
        if (!op) return ry_p_fail_at(p, t->span, "operator %s is not registered", binops[k].op);
        ry_expr *rhs = parse_binop(p, binops[k].prec + 1);
        if (!rhs) return NULL;
        ry_expr *callee = ry_expr_new(p->m, RY_EXPR_OP, t->span);
        callee->op.op = op;
        ry_expr *args[2] = {lhs, rhs};
        lhs = ry_expr_call(p->m, callee, 2, args, ry_p_span_from(p, start));
    }
    if (lhs) ry_p_leave(p);
    return lhs;
}

/* ---- binding sequences ----
 * expr -> (binding ';')* item
 * binding -> 'let' local (':' type)? '=' binop | graph '=' binop
 *          | 'free_var' local (':' type)? | item         (`e1; e2`: e1 then e2)
 * item -> '{' expr '}' | match | binop
 * A let's variable is in scope in its own value when that value is a `fn`
 * (recursive local functions); otherwise `let %y = f(%y);` reads the outer
 * %y (TVM binds first in every case, which makes that a self-reference). A
 * graph binding adds no node: later uses of %N are the bound node itself,
 * anywhere later in the definition (TVM's table is flat, and TVM's printer
 * relies on it: it can use a %N after the branch that bound it). */
typedef struct pending {
    ry_var *var;
    ry_expr *value;
    ry_span span;
} pending;

static pending *push_pending(parser *p, pending *lets, int *n, int *cap, pending item) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        pending *fresh = RY_NEW_ARRAY(p->tmp, pending, *cap);
        if (*n) memcpy(fresh, lets, sizeof *lets * (size_t)*n);
        lets = fresh;
    }
    lets[(*n)++] = item;
    return lets;
}

ry_expr *ry_p_expr(parser *p) {
    if (!ry_p_enter(p)) return NULL;
    int mark = p->nscope, n = 0, cap = 0;
    pending *lets = NULL;
    ry_expr *body = NULL;
    for (;;) {
        int start = p->pos;
        const token *t = ry_p_peek(p, 0);
        if (t->kind == TK_LET || t->kind == TK_FREE_VAR) {
            ry_p_next(p);
            const token *name = ry_p_expect(p, TK_LOCAL, t->kind == TK_LET ? "after `let`" : "after `free_var`");
            if (!name) return NULL;
            ry_type *annot = NULL;
            if (ry_p_accept(p, TK_COLON) && !(annot = ry_p_type(p))) return NULL;
            if (t->kind == TK_FREE_VAR) {
                ry_p_bind_local(p, name, annot);
                if (!ry_p_expect(p, TK_SEMI, "after the free variable")) return NULL;
                continue;
            }
            if (!ry_p_expect(p, TK_EQ, "after the let variable")) return NULL;
            bool recursive = ry_p_at(p, TK_FN);
            ry_var *v = recursive ? ry_p_bind_local(p, name, annot) : NULL;
            ry_expr *value = parse_binop(p, 0);
            if (!value || !ry_p_expect(p, TK_SEMI, "after the let binding")) return NULL;
            if (!recursive) v = ry_p_bind_local(p, name, annot);
            lets = push_pending(p, lets, &n, &cap, (pending){v, value, ry_p_span_from(p, start)});
            continue;
        }
        if (t->kind == TK_GRAPH && ry_p_peek(p, 1)->kind == TK_EQ) {
            ry_p_next(p);
            ry_p_next(p);
            ry_expr *value = parse_binop(p, 0);
            if (!value || !ry_p_expect(p, TK_SEMI, "after the graph binding")) return NULL;
            ry_p_bind_graph(p, t->i, value);
            continue;
        }
        ry_expr *e;
        if (t->kind == TK_LBRACE) e = block(p, "");
        else e = parse_binop(p, 0);
        if (!e) return NULL;
        if (!ry_p_accept(p, TK_SEMI)) {
            body = e;
            break;
        }
        lets = push_pending(p, lets, &n, &cap, (pending){ry_var_new(p->m, "", NULL, e->span), e, e->span});
    }
    ry_p_scope_pop(p, mark);
    for (int i = n - 1; i >= 0; i--) body = ry_expr_let(p->m, lets[i].var, lets[i].value, body, lets[i].span);
    ry_p_leave(p);
    return body;
}
