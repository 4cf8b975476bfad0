/*
 * parse.h (private): the parser's state and helpers shared by parse.c
 * (modules, definitions, ADTs, patterns), parse_type.c (types) and
 * parse_expr.c (expressions, attributes), the metadata section (metadata.c)
 * that the parser reads and the printer writes, the walk over an
 * expression's children (walk.c), and the printer's leaves (print_leaf.c)
 * that print.c shares.
 */
#ifndef RELAYC_IR_PARSE_H
#define RELAYC_IR_PARSE_H

#include "ir/lexer.h"
#include "relayc/ir.h"

/* One local in scope (%x). */
typedef struct scope_entry {
    const char *name;
    ry_var *var;
    int shadowed; /* the entry this one hides (same name), or -1 */
} scope_entry;

/* Innermost binding of each name seen so far: open addressing on the name,
 * value an index into the scope stack or -1, so lookups stay O(1) in long
 * let chains. */
typedef struct scope_slot {
    const char *name;
    int top;
} scope_slot;

/* A graph binding (%0 = e;): visible to the end of its definition. depth
 * and top record the locals in scope when it was bound. */
typedef struct graph_entry {
    int64_t n;
    ry_expr *expr;
    int depth;
    ry_var *top;
} graph_entry;

typedef struct tvar_entry {
    const char *name;
    ry_type *tv;
} tvar_entry;

/* A use of a global, checked once every definition is known. */
typedef struct global_ref {
    const char *name;
    ry_span span;
} global_ref;

typedef struct parser {
    ry_module *m;
    const ry_source *src;
    token *toks;
    int ntoks, pos;
    ry_error *err;
    ry_arena *tmp; /* parser temporaries, freed when parsing ends */
    scope_entry *scope;
    int nscope, cap_scope;
    scope_slot *slots;  /* power-of-two table, at most half full */
    int nslots, cap_slots;
    graph_entry *graph; /* emptied at each `def` */
    int ngraph, cap_graph;
    tvar_entry *tvars;
    int ntvars, cap_tvars;
    global_ref *grefs;
    int ngrefs, cap_grefs;
    ry_tensor **meta;       /* constants of the metadata section (parser's references) */
    ry_expr **meta_nodes;   /* one node per constant, made at first use */
    int nmeta;
    int depth;              /* nesting, bounded so hostile input cannot overflow the stack */
} parser;

#define PARSE_MAX_DEPTH 400

/* items (n of them, `size` bytes each) with room for one more, in the
 * parser's temporary arena: the lists of the text have no fixed limit. */
void *ry_p_grow(parser *p, void *items, int n, int *cap, size_t size);

/* ---- opening and closing (parse.c) ----
 * A source named name holding text, in m's arena, lexed into *lx, and a
 * parser over it (its temporaries in an arena of their own); RY_ERR with
 * err set when the text does not lex. ry_p_close frees what ry_p_open made
 * but the source, which is m's. */
ry_status ry_p_open(parser *p, ry_module *m, const char *name, const char *text, size_t len, lexed *lx,
                    ry_error *err);
void ry_p_close(parser *p, lexed *lx);
/* After an out-of-memory jump (oom.h) from anywhere between ry_p_open and
 * ry_p_close: frees what the open made so far; p and lx zeroed beforehand. */
void ry_p_abandon(parser *p, lexed *lx);

/* ---- tokens (parse.c) ---- */
const token *ry_p_peek(const parser *p, int k); /* k-th token ahead, EOF past the end */
const token *ry_p_next(parser *p);
bool ry_p_at(const parser *p, tok_kind k);
bool ry_p_accept(parser *p, tok_kind k);
/* Consumes a token of kind k or fails with "expected X ... found Y" at it. */
const token *ry_p_expect(parser *p, tok_kind k, const char *context);
/* The span from token `start` to the last consumed token (one line at most). */
ry_span ry_p_span_from(const parser *p, int start);
/* Fails (returns NULL) with a located error at the next token. */
void *ry_p_fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *ry_p_fail_at(parser *p, ry_span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool ry_p_enter(parser *p); /* depth guard: false (error set) if nested too deep */
void ry_p_leave(parser *p);

/* ---- scopes (parse.c) ---- */
ry_var *ry_p_bind_local(parser *p, const token *t, ry_type *annot);
void ry_p_bind_graph(parser *p, int64_t n, ry_expr *e);
ry_var *ry_p_lookup_local(const parser *p, const char *name);
/* Leaves the scopes opened since nscope was mark. */
void ry_p_scope_pop(parser *p, int mark);
/* The node bound to %N (token t); errors if unbound, or if it uses a
 * variable that is out of scope where t stands. */
ry_expr *ry_p_use_graph(parser *p, const token *t);
void ry_p_bind_tvar(parser *p, const char *name, ry_type *tv);
ry_type *ry_p_lookup_tvar(const parser *p, const char *name);
void ry_p_note_global(parser *p, const char *name, ry_span span);
/* tparams -> '[' ident (',' ident)* ']' ; binds them and returns the count */
bool ry_p_type_params(parser *p, int *n, ry_type ***out);

/* ---- types (parse_type.c) ---- */
ry_type *ry_p_type(parser *p);

/* ---- expressions (parse_expr.c) ---- */
ry_expr *ry_p_expr(parser *p);
ry_pattern *ry_p_pattern(parser *p);
/* fn_rest -> tparams? '(' params ')' ('->' type)? '{' expr '}' (after `fn` or `def @f`) */
ry_expr *ry_p_func(parser *p, int start);

/* ---- metadata (metadata.c) ----
 * Reads TVM's metadata JSON: the relay.Constant array, each decoded from
 * b64ndarrays. *out is a ry_malloc'ed array of new tensors (the caller
 * releases them and frees the array). */
ry_status ry_metadata_parse(const char *text, size_t len, ry_span at, ry_tensor ***out, int *n,
                            ry_error *err);
/* Writes the JSON for constants ts[0..n) (relay.Constant in that order) and
 * appends it to the growable buffer *buf (ry_malloc'ed). Returns false on
 * out-of-memory. */
typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool oom;
} strbuf;
void ry_sb_put(strbuf *b, const char *s, size_t n);
void ry_sb_puts(strbuf *b, const char *s);
void ry_sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ry_metadata_print(strbuf *b, ry_tensor *const *ts, int n);

/* ---- walking the IR (walk.c) ----
 * The i-th child of e in print order and the scope it sits in (*slot -1:
 * e's own; k >= 0: e's k-th inner scope: body, branch, clause); NULL after
 * the last child. */
const ry_expr *ry_expr_child(const ry_expr *e, int i, int *slot);

/* ---- the printer's leaves (print_leaf.c) ---- */
void ry_print_type(strbuf *b, const ry_type *t);
void ry_print_types(strbuf *b, ry_type *const *ts, int n); /* joined by ", " */
/* The same for TVM's parser (tvm not NULL): symbolic dims as `?`, counted in tvm. */
void ry_print_type_tvm(strbuf *b, const ry_type *t, ry_print_report *tvm);
void ry_print_types_tvm(strbuf *b, ry_type *const *ts, int n, ry_print_report *tvm);
bool ry_type_has_ref(const ry_type *t); /* a ref type anywhere inside t (ADTs' fields too) */
bool ry_type_tvm_writable(const ry_type *t); /* no ref, nothing left to infer */
/* tvm_adt.c: ADTs whose fields hold refs made generic in them (for TVM). */
void ry_tvm_generalize_ref_adts(ry_module *m, ry_print_report *rep);
/* tvm_mono.c: each polymorphic global takes_refs holds copied once per
 * type it is used at (TVM's local functions are monomorphic). */
void ry_tvm_monomorphize(ry_module *m, bool (*takes_refs)(const ry_global *), ry_print_report *rep);
/* tvm_local.c: whether t mentions one of the n type variables tv. */
bool ry_type_mentions(const ry_type *t, ry_type *const *tv, int n);
/* module.c: the index of global @name in m->globals, or -1. */
int ry_module_global_index(const ry_module *m, const char *name);
void ry_print_attr_value(strbuf *b, const ry_attr_value *v);
/* `, name=value` for each attribute (no leading comma before the first when first) */
void ry_print_attrs(strbuf *b, const ry_attrs *a, bool first);
/* A scalar TVM writes inline (1f, 2i64, -3i8, True); false for the others,
 * which go to the metadata. */
bool ry_print_scalar(strbuf *b, const ry_tensor *t);

#endif
