/*
 * parse.c: Relay's text format (TVM 0.0.5) into a module: the entry points,
 * token helpers, scopes, the version header, ADT definitions, `def`s and
 * match patterns. Types are parse_type.c's, expressions parse_expr.c's.
 *
 * Globals may be used before their definition (uses are checked at the
 * end); ADTs too: a first pass declares every `type` and its parameters, a
 * second reads the constructors, a third the `def`s.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "tensor/oom.h"

/* ---- tokens ---- */

const token *ry_p_peek(const parser *p, int k) {
    int i = p->pos + k;
    return &p->toks[i < p->ntoks ? i : p->ntoks - 1];
}

const token *ry_p_next(parser *p) {
    const token *t = ry_p_peek(p, 0);
    if (p->pos < p->ntoks - 1) p->pos++;
    return t;
}

bool ry_p_at(const parser *p, tok_kind k) { return ry_p_peek(p, 0)->kind == k; }

bool ry_p_accept(parser *p, tok_kind k) {
    if (!ry_p_at(p, k)) return false;
    ry_p_next(p);
    return true;
}

static void describe(const token *t, char *buf, size_t n) {
    switch (t->kind) {
    case TK_IDENT: snprintf(buf, n, "`%s`", t->name); break;
    case TK_LOCAL: snprintf(buf, n, "`%%%s`", t->name); break;
    case TK_GLOBAL: snprintf(buf, n, "`@%s`", t->name); break;
    case TK_GRAPH: snprintf(buf, n, "`%%%lld`", (long long)t->i); break;
    case TK_INT:
    case TK_FLOAT: snprintf(buf, n, "the number `%.*s`", t->span.len, t->span.src->text + t->off); break;
    default: snprintf(buf, n, "%s", ry_tok_name(t->kind));
    }
}

const token *ry_p_expect(parser *p, tok_kind k, const char *context) {
    if (ry_p_at(p, k)) return ry_p_next(p);
    char found[160];
    describe(ry_p_peek(p, 0), found, sizeof found);
    return ry_p_fail(p, "expected %s%s%s, found %s", ry_tok_name(k), *context ? " " : "", context, found);
}

ry_span ry_p_span_from(const parser *p, int start) {
    const token *a = &p->toks[start];
    int last = p->pos > start ? p->pos - 1 : start;
    const token *b = &p->toks[last];
    ry_span s = a->span;
    if (b->span.line == a->span.line && b->off + (size_t)b->span.len > a->off)
        s.len = (int)(b->off + (size_t)b->span.len - a->off);
    return s;
}

void *ry_p_fail_at(parser *p, ry_span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(p->err, span, fmt, ap);
    va_end(ap);
    return NULL;
}

void *ry_p_fail(parser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ry_error_vat(p->err, ry_p_peek(p, 0)->span, fmt, ap);
    va_end(ap);
    return NULL;
}

bool ry_p_enter(parser *p) {
    if (++p->depth > PARSE_MAX_DEPTH) {
        ry_p_fail(p, "expression nested too deeply (more than %d levels)", PARSE_MAX_DEPTH);
        return false;
    }
    return true;
}

void ry_p_leave(parser *p) { p->depth--; }

/* ---- scopes: a stack of local names; a construct remembers the depth and
 * cuts back to it when its scope ends. Graph bindings live per definition. */

void *ry_p_grow(parser *p, void *items, int n, int *cap, size_t size) {
    if (n < *cap) return items;
    int ncap = *cap ? *cap * 2 : 32;
    void *fresh = ry_arena_alloc(p->tmp, size * (size_t)ncap);
    if (n) memcpy(fresh, items, size * (size_t)n);
    *cap = ncap;
    return fresh;
}

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static scope_slot *find_slot(const scope_slot *slots, int cap, const char *name) {
    size_t mask = (size_t)cap - 1, h = name_hash(name) & mask;
    while (slots[h].name && strcmp(slots[h].name, name) != 0) h = (h + 1) & mask;
    return (scope_slot *)&slots[h];
}

/* The slot of name, added (with top -1) if new; doubles the table when half full. */
static scope_slot *slot_for(parser *p, const char *name) {
    if ((p->nslots + 1) * 2 > p->cap_slots) {
        int cap = p->cap_slots ? p->cap_slots * 2 : 64;
        scope_slot *fresh = RY_NEW_ARRAY(p->tmp, scope_slot, cap);
        for (int i = 0; i < p->cap_slots; i++)
            if (p->slots[i].name) *find_slot(fresh, cap, p->slots[i].name) = p->slots[i];
        p->slots = fresh;
        p->cap_slots = cap;
    }
    scope_slot *s = find_slot(p->slots, p->cap_slots, name);
    if (!s->name) {
        s->name = name;
        s->top = -1;
        p->nslots++;
    }
    return s;
}

ry_var *ry_p_bind_local(parser *p, const token *t, ry_type *annot) {
    ry_var *v = ry_var_new(p->m, t->name, annot, t->span);
    p->scope = ry_p_grow(p, p->scope, p->nscope, &p->cap_scope, sizeof *p->scope);
    scope_slot *s = slot_for(p, v->name);
    p->scope[p->nscope] = (scope_entry){v->name, v, s->top};
    s->top = p->nscope++;
    return v;
}

void ry_p_scope_pop(parser *p, int mark) {
    for (; p->nscope > mark; p->nscope--) {
        const scope_entry *e = &p->scope[p->nscope - 1];
        find_slot(p->slots, p->cap_slots, e->name)->top = e->shadowed;
    }
}

void ry_p_bind_graph(parser *p, int64_t n, ry_expr *e) {
    p->graph = ry_p_grow(p, p->graph, p->ngraph, &p->cap_graph, sizeof *p->graph);
    ry_var *top = p->nscope ? p->scope[p->nscope - 1].var : NULL;
    p->graph[p->ngraph++] = (graph_entry){n, e, p->nscope, top};
}

ry_var *ry_p_lookup_local(const parser *p, const char *name) {
    if (!p->cap_slots) return NULL;
    const scope_slot *s = find_slot(p->slots, p->cap_slots, name);
    return s->name && s->top >= 0 ? p->scope[s->top].var : NULL;
}

/* A pointer set in the parser's scratch arena, for the scope check below. */
typedef struct ptrset {
    const void **keys;
    size_t cap, n;
} ptrset;

static size_t set_slot(const ptrset *s, const void *k) {
    size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ULL & (s->cap - 1);
    while (s->keys[h] && s->keys[h] != k) h = (h + 1) & (s->cap - 1);
    return h;
}

static bool set_has(const ptrset *s, const void *k) { return s->keys[set_slot(s, k)] != NULL; }

/* Adds k; false if it was there. Doubles when half full. */
static bool set_add(parser *p, ptrset *s, const void *k) {
    if ((s->n + 1) * 2 > s->cap) {
        ptrset big = {RY_NEW_ARRAY(p->tmp, const void *, s->cap * 2), s->cap * 2, 0};
        for (size_t i = 0; i < s->cap; i++)
            if (s->keys[i]) set_add(p, &big, s->keys[i]);
        *s = big;
    }
    size_t h = set_slot(s, k);
    if (s->keys[h]) return false;
    s->keys[h] = k;
    s->n++;
    return true;
}

static void pattern_binders(parser *p, ptrset *s, const ry_pattern *pat) {
    if (pat->kind == RY_PAT_VAR) set_add(p, s, pat->var);
    int n = pat->kind == RY_PAT_CTOR ? pat->ctor.n : pat->kind == RY_PAT_TUPLE ? pat->tuple.n : 0;
    for (int i = 0; i < n; i++)
        pattern_binders(p, s, pat->kind == RY_PAT_CTOR ? pat->ctor.args[i] : pat->tuple.fields[i]);
}

/* The first variable e uses that is neither bound inside e nor in scope
 * now, or NULL. One walk over e's DAG collects its nodes and binders. */
static const ry_var *escaped_var(parser *p, const ry_expr *e) {
    ptrset seen = {RY_NEW_ARRAY(p->tmp, const void *, 64), 64, 0};
    ptrset bound = {RY_NEW_ARRAY(p->tmp, const void *, 64), 64, 0};
    const ry_expr **nodes = RY_NEW_ARRAY(p->tmp, const ry_expr *, 64);
    size_t n = 0, cap = 64, next = 0;
    nodes[n++] = e;
    set_add(p, &seen, e);
    while (next < n) { /* breadth first: nodes[] is the queue and the result */
        const ry_expr *x = nodes[next++];
        if (x->kind == RY_EXPR_LET) set_add(p, &bound, x->let.var);
        if (x->kind == RY_EXPR_FUNC)
            for (int i = 0; i < x->func.nparams; i++) set_add(p, &bound, x->func.params[i]);
        if (x->kind == RY_EXPR_MATCH)
            for (int i = 0; i < x->match.nclauses; i++) pattern_binders(p, &bound, x->match.clauses[i].pat);
        int slot;
        const ry_expr *c;
        for (int i = 0; (c = ry_expr_child(x, i, &slot)); i++) {
            if (!set_add(p, &seen, c)) continue;
            if (n == cap) {
                const ry_expr **fresh = RY_NEW_ARRAY(p->tmp, const ry_expr *, cap * 2);
                memcpy(fresh, nodes, sizeof *nodes * n);
                nodes = fresh;
                cap *= 2;
            }
            nodes[n++] = c;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (nodes[i]->kind != RY_EXPR_VAR || set_has(&bound, nodes[i]->var.var)) continue;
        bool in_scope = false;
        for (int k = p->nscope - 1; k >= 0 && !in_scope; k--) in_scope = p->scope[k].var == nodes[i]->var.var;
        if (!in_scope) return nodes[i]->var.var;
    }
    return NULL;
}

ry_expr *ry_p_use_graph(parser *p, const token *t) {
    const graph_entry *g = NULL;
    for (int i = p->ngraph - 1; i >= 0 && !g; i--)
        if (p->graph[i].n == t->i) g = &p->graph[i];
    if (!g) return ry_p_fail_at(p, t->span, "unbound graph binding %%%lld", (long long)t->i);
    /* still inside every scope it was bound in: nothing it uses is gone */
    if (p->nscope >= g->depth && (g->depth == 0 || p->scope[g->depth - 1].var == g->top)) return g->expr;
    const ry_var *v = escaped_var(p, g->expr);
    if (v)
        return ry_p_fail_at(p, t->span, "%%%lld uses %%%s, which is not in scope here", (long long)t->i,
                            v->name);
    return g->expr;
}

void ry_p_bind_tvar(parser *p, const char *name, ry_type *tv) {
    p->tvars = ry_p_grow(p, p->tvars, p->ntvars, &p->cap_tvars, sizeof *p->tvars);
    p->tvars[p->ntvars++] = (tvar_entry){name, tv};
}

ry_type *ry_p_lookup_tvar(const parser *p, const char *name) {
    for (int i = p->ntvars - 1; i >= 0; i--)
        if (strcmp(p->tvars[i].name, name) == 0) return p->tvars[i].tv;
    return NULL;
}

void ry_p_note_global(parser *p, const char *name, ry_span span) {
    p->grefs = ry_p_grow(p, p->grefs, p->ngrefs, &p->cap_grefs, sizeof *p->grefs);
    p->grefs[p->ngrefs++] = (global_ref){name, span};
}

/* tparams -> '[' ident (',' ident)* ','? ']' */
bool ry_p_type_params(parser *p, int *n, ry_type ***out) {
    *n = 0;
    *out = NULL;
    if (!ry_p_accept(p, TK_LBRACK)) return true;
    ry_type **tps = NULL;
    int cap = 0;
    while (!ry_p_at(p, TK_RBRACK)) {
        const token *t = ry_p_expect(p, TK_IDENT, "(a type parameter)");
        if (!t) return false;
        tps = ry_p_grow(p, tps, *n, &cap, sizeof *tps);
        for (int i = 0; i < *n; i++)
            if (strcmp(tps[i]->var.name, t->name) == 0)
                return ry_p_fail_at(p, t->span, "type parameter '%s' given twice", t->name), false;
        ry_type *tv = ry_type_new(p->m, RY_TYPE_VAR, t->span);
        tv->var.name = t->name;
        tv->var.id = p->m->next_id++;
        tps[(*n)++] = tv;
        ry_p_bind_tvar(p, t->name, tv);
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RBRACK, "to close the type parameters")) return false;
    if (*n == 0) return ry_p_fail(p, "empty type parameter list"), false;
    *out = RY_NEW_ARRAY(p->m->arena, ry_type *, *n);
    memcpy(*out, tps, sizeof(ry_type *) * (size_t)*n);
    return true;
}

/* ---- patterns ----
 * pattern -> '_' | local (':' type)? | ctor ('(' pattern (',' pattern)* ')')?
 *          | '(' (pattern (',' pattern)*)? ')' */
static bool pattern_list(parser *p, int *n, ry_pattern ***out, const char *what) {
    ry_pattern **items = NULL;
    int cap = 0;
    *n = 0;
    if (!ry_p_expect(p, TK_LPAREN, what)) return false;
    while (!ry_p_at(p, TK_RPAREN)) {
        ry_pattern *sub = ry_p_pattern(p);
        if (!sub) return false;
        items = ry_p_grow(p, items, *n, &cap, sizeof *items);
        items[(*n)++] = sub;
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RPAREN, "to close the pattern")) return false;
    *out = RY_NEW_ARRAY(p->m->arena, ry_pattern *, *n);
    if (*n) memcpy(*out, items, sizeof(ry_pattern *) * (size_t)*n);
    return true;
}

ry_pattern *ry_p_pattern(parser *p) {
    if (!ry_p_enter(p)) return NULL;
    int start = p->pos;
    const token *t = ry_p_peek(p, 0);
    ry_pattern *pat = RY_NEW(p->m->arena, ry_pattern);
    pat->span = t->span;
    switch (t->kind) {
    case TK_UNDERSCORE:
        ry_p_next(p);
        pat->kind = RY_PAT_WILDCARD;
        break;
    case TK_LOCAL: {
        ry_p_next(p);
        ry_type *annot = NULL;
        if (ry_p_accept(p, TK_COLON) && !(annot = ry_p_type(p))) return NULL;
        pat->kind = RY_PAT_VAR;
        pat->var = ry_p_bind_local(p, t, annot);
        break;
    }
    case TK_IDENT: {
        ry_p_next(p);
        ry_ctor *c = ry_module_find_ctor(p->m, t->name);
        if (!c) return ry_p_fail_at(p, t->span, "unknown constructor '%s' in pattern", t->name);
        pat->kind = RY_PAT_CTOR;
        pat->ctor.ctor = c;
        if (ry_p_at(p, TK_LPAREN) &&
            !pattern_list(p, &pat->ctor.n, &pat->ctor.args, "after the constructor"))
            return NULL;
        if (pat->ctor.n != c->nfields)
            return ry_p_fail_at(p, ry_p_span_from(p, start),
                                "constructor %s takes %d field%s, but the pattern has %d", c->name,
                                c->nfields, c->nfields == 1 ? "" : "s", pat->ctor.n);
        break;
    }
    case TK_LPAREN:
        pat->kind = RY_PAT_TUPLE;
        if (!pattern_list(p, &pat->tuple.n, &pat->tuple.fields, "")) return NULL;
        break;
    default: {
        char found[160];
        describe(t, found, sizeof found);
        return ry_p_fail(p, "expected a pattern (`_`, `%%x`, a constructor or a tuple), found %s", found);
    }
    }
    pat->span = ry_p_span_from(p, start);
    ry_p_leave(p);
    return pat;
}

/* ---- ADT definitions ----
 * typedef -> 'extern'? 'type' ident tparams? ('{' (ctor (',' ctor)* ','?)? '}')?
 * ctor    -> ident ('(' type (',' type)* ')')?
 * Without braces (and always after `extern`) the type has no constructors. */

static bool reserved_type_name(const char *s) {
    ry_dtype d;
    return strcmp(s, "Tensor") == 0 || ry_dtype_parse(s, strlen(s), &d);
}

/* Pass 1: the header, so that types can name each other in any order. */
static ry_typedef *typedef_header(parser *p) {
    ry_p_next(p); /* type */
    const token *name = ry_p_expect(p, TK_IDENT, "after `type`");
    if (!name) return NULL;
    if (reserved_type_name(name->name))
        return ry_p_fail_at(p, name->span, "'%s' is a built-in type and cannot be redefined", name->name);
    if (ry_module_find_typedef(p->m, name->name))
        return ry_p_fail_at(p, name->span, "type '%s' is defined twice", name->name);
    ry_typedef *td = RY_NEW(p->m->arena, ry_typedef);
    td->name = name->name;
    td->span = name->span;
    int mark = p->ntvars;
    bool ok = ry_p_type_params(p, &td->ntparams, &td->tparams);
    p->ntvars = mark;
    if (!ok) return NULL;
    ry_module_add_typedef(p->m, td);
    return td;
}

/* Pass 2: the constructors; p->pos is after the type parameters. */
static bool typedef_body(parser *p, ry_typedef *td, bool is_extern) {
    if (!ry_p_at(p, TK_LBRACE)) return true;
    if (is_extern) return ry_p_fail(p, "an extern type cannot have constructors"), false;
    int mark = p->ntvars;
    for (int i = 0; i < td->ntparams; i++) ry_p_bind_tvar(p, td->tparams[i]->var.name, td->tparams[i]);
    ry_p_next(p); /* { */
    ry_ctor **ctors = NULL;
    int n = 0, cap = 0;
    while (!ry_p_at(p, TK_RBRACE)) {
        const token *name = ry_p_expect(p, TK_IDENT, "(a constructor name)");
        if (!name) return false;
        if (ry_module_find_ctor(p->m, name->name))
            return ry_p_fail_at(p, name->span, "constructor '%s' is defined twice", name->name), false;
        for (int i = 0; i < n; i++)
            if (strcmp(ctors[i]->name, name->name) == 0)
                return ry_p_fail_at(p, name->span, "constructor '%s' is defined twice", name->name), false;
        ry_ctor *c = RY_NEW(p->m->arena, ry_ctor);
        c->name = name->name;
        c->tag = n;
        c->adt = td;
        c->span = name->span;
        if (ry_p_accept(p, TK_LPAREN)) {
            ry_type **fields = NULL;
            int fcap = 0;
            while (!ry_p_at(p, TK_RPAREN)) {
                ry_type *f = ry_p_type(p);
                if (!f) return false;
                fields = ry_p_grow(p, fields, c->nfields, &fcap, sizeof *fields);
                fields[c->nfields++] = f;
                if (!ry_p_accept(p, TK_COMMA)) break;
            }
            if (!ry_p_expect(p, TK_RPAREN, "to close the constructor's fields")) return false;
            c->fields = RY_NEW_ARRAY(p->m->arena, ry_type *, c->nfields);
            if (c->nfields) memcpy(c->fields, fields, sizeof(ry_type *) * (size_t)c->nfields);
        }
        ctors = ry_p_grow(p, ctors, n, &cap, sizeof *ctors);
        ctors[n++] = c;
        if (!ry_p_accept(p, TK_COMMA)) break;
    }
    if (!ry_p_expect(p, TK_RBRACE, "to close the type definition")) return false;
    td->nctors = n;
    td->ctors = RY_NEW_ARRAY(p->m->arena, ry_ctor *, n);
    if (n) memcpy(td->ctors, ctors, sizeof(ry_ctor *) * (size_t)n);
    p->ntvars = mark;
    return true;
}

/* ---- definitions ----
 * def -> 'def' global tparams? '(' params ')' ('->' type)? '{' expr '}' */
static bool parse_def(parser *p) {
    int start = p->pos;
    ry_p_next(p); /* def */
    p->ngraph = 0;
    const token *name = ry_p_expect(p, TK_GLOBAL, "after `def`");
    if (!name) return false;
    if (ry_module_find_global(p->m, name->name))
        return ry_p_fail_at(p, name->span, "global @%s is defined twice", name->name), false;
    ry_expr *fn = ry_p_func(p, start);
    if (!fn) return false;
    ry_global *g = ry_module_add_global(p->m, name->name, fn);
    g->span = name->span;
    return true;
}

/* module -> version (typedef | def)* metadata? */
static bool parse_module(parser *p, const lexed *lx) {
    const token *v = ry_p_peek(p, 0);
    if (v->kind != TK_VERSION) {
        ry_span at = v->kind == TK_EOF ? (ry_span){p->src, 1, 1, 1} : v->span;
        return ry_p_fail_at(p, at, "expected `#[version = \"0.0.5\"]` at the start of the file"), false;
    }
    if (strcmp(v->str, "0.0.5") != 0) {
        ry_span at = {p->src, v->span.line, v->span.col + (int)v->i, (int)v->str_len + 2};
        return ry_p_fail_at(p, at, "unsupported text format version \"%s\" (expected \"0.0.5\")", v->str), false;
    }
    ry_p_next(p);
    int body = p->pos;
    if (lx->meta_text &&
        ry_metadata_parse(lx->meta_text, lx->meta_len, lx->meta_span, &p->meta, &p->nmeta, p->err))
        return false;
    if (p->nmeta) p->meta_nodes = RY_NEW_ARRAY(p->tmp, ry_expr *, p->nmeta);
    /* pass 1: type headers; pass 2: constructors */
    int ntd = 0, *td_pos = RY_NEW_ARRAY(p->tmp, int, p->ntoks), *td_end = RY_NEW_ARRAY(p->tmp, int, p->ntoks);
    bool *td_extern = RY_NEW_ARRAY(p->tmp, bool, p->ntoks);
    for (int i = body; i < p->ntoks; i++) {
        if (p->toks[i].kind != TK_TYPE) continue;
        p->pos = i;
        if (!typedef_header(p)) return false;
        td_extern[ntd] = i > body && p->toks[i - 1].kind == TK_EXTERN;
        td_pos[ntd++] = p->pos;
    }
    for (int i = 0; i < ntd; i++) {
        p->pos = td_pos[i];
        if (!typedef_body(p, p->m->typedefs[i], td_extern[i])) return false;
        td_end[i] = p->pos;
    }
    /* pass 3: definitions, in order */
    p->pos = body;
    int k = 0;
    for (;;) {
        const token *t = ry_p_peek(p, 0);
        if (t->kind == TK_EOF) break;
        if (t->kind == TK_EXTERN && ry_p_peek(p, 1)->kind == TK_TYPE) {
            ry_p_next(p);
            continue;
        }
        if (t->kind == TK_TYPE) {
            p->pos = td_end[k++];
            continue;
        }
        if (t->kind == TK_DEF) {
            if (!parse_def(p)) return false;
            continue;
        }
        if (t->kind == TK_VERSION) return ry_p_fail(p, "the version attribute must come first, once"), false;
        char found[160];
        describe(t, found, sizeof found);
        return ry_p_fail(p, "expected `def` or `type` at the top level, found %s", found), false;
    }
    for (int i = 0; i < p->ngrefs; i++)
        if (!ry_module_find_global(p->m, p->grefs[i].name))
            return ry_p_fail_at(p, p->grefs[i].span, "unknown global @%s", p->grefs[i].name), false;
    return true;
}

ry_status ry_p_open(parser *p, ry_module *m, const char *name, const char *text, size_t len, lexed *lx,
                    ry_error *err) {
    ry_source *src = RY_NEW(m->arena, ry_source);
    src->name = ry_arena_strdup(m->arena, name);
    src->text = ry_arena_strndup(m->arena, text ? text : "", text ? len : 0);
    src->len = text ? len : 0;
    if (ry_lex(src, m->arena, lx, err)) return RY_ERR;
    *p = (parser){.m = m, .src = src, .toks = lx->toks, .ntoks = lx->n, .err = err, .tmp = ry_arena_new()};
    if (p->tmp) return RY_OK;
    ry_lex_free(lx);
    return ry_error_file(err, name, "out of memory");
}

void ry_p_close(parser *p, lexed *lx) {
    for (int i = 0; i < p->nmeta; i++) ry_tensor_release(p->meta[i]);
    ry_free(p->meta);
    ry_arena_free(p->tmp);
    ry_lex_free(lx);
}

/* What a parse has built, for its undo on out-of-memory (oom.h). */
typedef struct parsing {
    const char *name, *text;
    size_t len;
    ry_module *m;
    lexed lx;
    parser p;
} parsing;

static ry_status parse(void *ctx, ry_error *err) {
    parsing *s = ctx;
    s->m = ry_module_new();
    if (!s->m) return ry_error_file(err, s->name, "out of memory");
    if (ry_p_open(&s->p, s->m, s->name, s->text, s->len, &s->lx, err)) {
        ry_module_free(s->m);
        s->m = NULL;
        return RY_ERR;
    }
    s->m->source = (ry_source *)s->p.src; /* the module's own, made by ry_p_open */
    bool ok = parse_module(&s->p, &s->lx);
    ry_p_close(&s->p, &s->lx);
    if (!ok) {
        ry_module_free(s->m);
        s->m = NULL;
        return RY_ERR;
    }
    return RY_OK;
}

void ry_p_abandon(parser *p, lexed *lx) {
    if (p->tmp) ry_p_close(p, lx);
    else ry_lex_free(lx);
}

static void unparse(void *ctx) {
    parsing *s = ctx;
    ry_p_abandon(&s->p, &s->lx);
    ry_module_free(s->m);
}

ry_status ry_module_parse(const char *name, const char *text, size_t len, ry_module **out,
                          ry_error *err) {
    *out = NULL;
    parsing s;
    memset(&s, 0, sizeof s);
    s.name = name ? name : "<input>";
    s.text = text;
    s.len = len;
    if (ry_oom_guard(s.name, parse, unparse, &s, err)) return RY_ERR;
    *out = s.m;
    return RY_OK;
}

ry_status ry_module_parse_file(const char *path, ry_module **out, ry_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ry_error_file(err, path, "cannot open the file");
    size_t cap = 1 << 16, n = 0;
    char *buf = ry_malloc(cap);
    if (!buf) {
        fclose(f);
        return ry_error_file(err, path, "out of memory");
    }
    for (;;) {
        if (n == cap) {
            char *fresh = ry_realloc(buf, cap * 2);
            if (!fresh) {
                ry_free(buf);
                fclose(f);
                return ry_error_file(err, path, "out of memory");
            }
            buf = fresh;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        ry_free(buf);
        return ry_error_file(err, path, "cannot read the file");
    }
    ry_status st = ry_module_parse(path, buf, n, out, err);
    ry_free(buf);
    return st;
}
