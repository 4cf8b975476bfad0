/*
 * typecheck_ctx.h: private to the type checker (typecheck.c and unify.c).
 * The checker state: the union-find tables of type unknowns (incomplete
 * types) and of dimension unknowns, pointer maps from expressions and vars to
 * their types, and the constraints deferred until more is known. Nothing
 * outside src/ir/typecheck*.c and unify.c includes this.
 */
#ifndef RELAYC_TYPECHECK_CTX_H
#define RELAYC_TYPECHECK_CTX_H

#include "relayc/ir.h"
#include "relayc/op.h"

/* Pointer -> type, open addressing; lives in the checker's scratch arena. */
typedef struct tc_map {
    int cap, n;
    const void **keys;
    ry_type **vals;
} tc_map;

/* A constraint that waits for its inputs: an operator's type relation or a
 * projection out of a value whose tuple type is not known yet. */
typedef enum tc_pend_kind { PEND_REL, PEND_PROJ } tc_pend_kind;

typedef struct tc_pending {
    tc_pend_kind kind;
    ry_expr *e;        /* the call or the projection */
    int nargs;
    ry_type **args;    /* PEND_REL: argument types; PEND_PROJ: args[0] is the tuple */
    ry_type *result;   /* an unknown the solution is unified with */
    bool done;
} tc_pending;

/* A call whose callee was instantiated: its type arguments are written to
 * call.type_args once everything is solved. */
typedef struct tc_inst {
    ry_expr *call;
    int n;
    ry_type **types;
} tc_inst;

typedef struct tc {
    ry_module *m;
    ry_arena *a;   /* scratch: every type built while checking */
    ry_error err;  /* the first error */
    /* type unknowns: ty[i].node is the canonical RY_TYPE_INCOMPLETE with id i;
     * at a root, bound is what it stands for (NULL while unknown) */
    int nty, capty;
    struct tc_tslot { int parent; ry_type *bound, *node; } *ty;
    /* dimension unknowns: RY_DIM_SYM named "?N" with value N */
    int ndim, capdim;
    struct tc_dslot { int parent; bool has; ry_dim val; } *dim;
    tc_map exprs, vars;
    tc_map globals; /* ry_global -> its signature */
    int npend, cappend;
    tc_pending *pend;
    int ninst, capinst;
    tc_inst *inst;
    int depth; /* of infer's recursion (see prewarm in typecheck.c) */
} tc;

/* ---- unify.c ---- */
void tc_map_init(tc *c, tc_map *m);
ry_type *tc_map_get(const tc_map *m, const void *key);
void tc_map_put(tc *c, tc_map *m, const void *key, ry_type *val);

ry_type *tc_fresh(tc *c);
ry_dim tc_fresh_dim(tc *c);
bool tc_is_dim_unknown(const ry_dim *d);
/* Follows bindings of unknowns: the result is not a bound unknown. */
ry_type *tc_resolve(tc *c, ry_type *t);

typedef enum tc_unify_result { UNIFY_OK, UNIFY_MISMATCH, UNIFY_INFINITE } tc_unify_result;
tc_unify_result tc_unify(tc *c, ry_type *a, ry_type *b);
/* Like tc_unify, but different constant dims join to Any (if branches). */
tc_unify_result tc_join(tc *c, ry_type *a, ry_type *b, ry_type **out);

/* A copy of t in arena dst with every bound unknown replaced by what it
 * stands for. final: unbound dimension unknowns become Any and unbound type
 * unknowns their canonical node copy (so the result holds no checker state). */
ry_type *tc_zonk(tc *c, ry_type *t, ry_arena *dst, bool final);
/* Whether t, resolved, still holds an unbound type or dimension unknown. */
bool tc_known(tc *c, ry_type *t);
/* t with type var ids[i] replaced by repl[i]; if syms, each symbolic dim
 * replaced by a fresh dimension unknown per name (shared within the call). */
ry_type *tc_subst(tc *c, ry_type *t, int n, ry_type **ids, ry_type **repl, bool syms);
/* An annotation imported for checking: each written `_` becomes a fresh
 * unknown; ADT arities are checked (RY_ERR with c->err set). */
ry_status tc_import(tc *c, ry_type *t, ry_type **out);
/* The type printed for messages (bound unknowns replaced). */
const char *tc_str(tc *c, ry_type *t, char *buf, size_t n);
/* Grows an arena-held array by doubling. */
void *tc_grow(tc *c, void *items, int n, int *cap, size_t elem);

#endif
