/*
 * pe_impl.h: what partial_eval.c (the evaluator) and pe_spec.c (the
 * specialization of recursive globals to known function arguments) share:
 * partially-static values, the environment, the compile-time store and the
 * evaluator's state. Nobody outside the two files needs it.
 */
#ifndef RELAYC_PE_IMPL_H
#define RELAYC_PE_IMPL_H

#include "pass/pass_impl.h"

#define MAX_INLINE_DEPTH 4000  /* nested inlined calls (each a few C frames) */
#define MAX_RECURSION 1000     /* one function inlined inside itself */
#define FUEL 200000            /* inlined calls per global */

typedef enum { PS_DYN, PS_TUPLE, PS_REF, PS_CLOSURE, PS_ADT, PS_CONST } ps_kind;

typedef struct env env;
typedef struct ps ps;
struct ps {
    ps_kind kind;
    ry_expr *dyn;       /* residual atom computing the value */
    bool zero;          /* a tensor known to be all zeros */
    int n;
    ps **fields;        /* PS_TUPLE, PS_ADT */
    const ry_ctor *ctor;
    int cell;           /* PS_REF */
    const ry_expr *fn;  /* PS_CLOSURE: an RY_EXPR_FUNC */
    env *env;
    int level;          /* PS_CLOSURE: residual-function nesting where made */
    int scope;          /* PS_CLOSURE: serial of the scope where made */
};

struct env {
    int id;
    ps *v;
    env *next;
};

typedef struct store {
    ps **v;   /* cell - base -> content, NULL when unknown */
    int base; /* cells made before (outside a residual function) are unknown */
    int n;
} store;

typedef struct pe {
    ry_module *m;
    ry_arena *a;      /* scratch: ps, env, stores, builders */
    lets *out;        /* current scope */
    store st;
    int ncells;
    const void **stack; /* what is being inlined (a global's function or a
                         * closure value), innermost last */
    int *stack_dyn;   /* dyn_branches when each stack entry was entered */
    bool *stack_cut;  /* a recursive call of the entry was left a call */
    int depth;
    int dyn_branches; /* branches of dynamic ifs/matches being built around us */
    int level;        /* residual function bodies being built around us */
    long fuel;
    bool inline_only; /* ry_inline: calls of known functions, nothing else */
    int *scopes;      /* serials of the let chains being built, outermost first */
    lets **scope_lets; /* and the chains */
    int nscopes, cap_scopes, serial;
    struct spec *specs; /* specializations made so far (see specialize) */
    int nspecs;
    ry_expr **orig;   /* global i's function before the pass (normalized) */
    bool *recursive;  /* global i calls itself (through others too) */
    ry_error *err;
} pe;

/* A global specialized to the functions some of its arguments are known
 * to be: a let-bound recursive function over the remaining arguments. */
typedef struct spec {
    int global;
    int nargs;
    ps **stat;       /* per argument: the known function, or NULL (dynamic) */
    ry_var *var;     /* the residual function */
    int scope;       /* serial of the scope where it is bound: usable while
                      * that scope is open */
    struct spec *next;
} spec;


/* partial_eval.c */
ps *pe_mk(pe *p, ps_kind k, ry_expr *dyn);
env *pe_bind(pe *p, const ry_var *var, ps *v, env *next);
/* Emits `let %x = val;` in the current scope, returns the use of %x. */
ry_expr *pe_emit(pe *p, const char *name, ry_expr *val, ry_type *t);
/* Evaluates e in a scope of its own, closed around its residual value. */
ry_expr *pe_eval_scope(pe *p, const ry_expr *e, env *en);
/* Where scope `serial` is in the stack of open scopes, -1 if closed. */
int pe_scope_index(const pe *p, int serial);
/* Forgets every cell's content (after a residual call). */
void pe_store_forget(pe *p);
/* Whether type t is valid outside the polymorphic function it came from. */
bool pe_portable(const ry_type *t);

/* pe_spec.c: a call of global gi with args, not inlined: a call of its
 * specialization to the known functions among args (made or reused), or
 * NULL when there are none (or the limits are reached). */
ps *pe_specialize(pe *p, const ry_expr *e, int gi, ps **args);

#endif
