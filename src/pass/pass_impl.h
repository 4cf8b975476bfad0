/*
 * pass_impl.h: what the passes of src/pass/ share and nobody else needs:
 * a builder of let chains (residual code is emitted binding by binding,
 * then closed into nested lets), and small predicates over IR nodes.
 */
#ifndef RELAYC_PASS_IMPL_H
#define RELAYC_PASS_IMPL_H

#include "relayc/op.h"
#include "relayc/pass.h"

/* pass(m, err) under a recovery point (tensor/oom.h), for a pass called
 * on its own: out of the IR's memory, its scratch arenas are freed, m is
 * left part-rewritten (to be run again or freed) and the error is
 * "NAME: out of memory"; under another point (ry_optimize's) the jump
 * goes on to it. */
ry_status pass_guarded(const char *name, ry_status (*pass)(ry_module *m, ry_error *err),
                       ry_module *m, ry_error *err);

/* A scope under construction: bindings in order (ry_lets_push), closed by
 * a body. */
typedef ry_lets lets;
/* Closes the scope: nested lets around body, typed with body's type. */
ry_expr *lets_close(ry_module *m, const lets *l, ry_expr *body);

/* A fresh var named like old (or "x"), typed t, not annotated. */
ry_var *pass_fresh_var(ry_module *m, const char *name, ry_type *t);
/* A typed use of v. */
ry_expr *pass_use(ry_module *m, ry_var *v);

/* For a node with nested scopes (if, match, fn): a copy whose then/else
 * branches, clause bodies or function body are fn(ctx, scope), the rest
 * (condition, scrutinee, patterns, parameters) shared; NULL for any other
 * node. The passes' walks over A-normal form recurse through it. */
typedef ry_expr *(*pass_scope_fn)(void *ctx, ry_expr *scope);
ry_expr *pass_map_scopes(ry_module *m, const ry_expr *e, pass_scope_fn fn, void *ctx);

/* Atoms are what may be shared freely: vars, globals, constants, operators,
 * constructors and the empty tuple. */
bool pass_is_atom(const ry_expr *e);
/* True when evaluating e has no effect besides allocation and cannot fail
 * or loop: no calls of functions, no ref_write, no match? that may fail. */
bool pass_is_pure(const ry_expr *e);
/* A result constant folding may make: a tensor of constant shape, small
 * enough to hold in the module (RY_FOLD_MAX elements). */
#define RY_FOLD_MAX 65536
bool pass_foldable_type(const ry_type *t);
/* Same names, in the same order, with equal values. */
bool pass_same_attrs(const ry_attrs *x, const ry_attrs *y);
/* Whether global `from` is global number target or calls it, directly or
 * through others. */
bool pass_global_reaches(const ry_module *m, const char *from, int target);

#endif
