/*
 * pass.h: IR -> IR optimization passes over a type-checked module, and the
 * pipeline that runs them in order. Each pass builds new nodes in the
 * module's arena (the old ones stay there until the module is freed) and
 * installs them in the module's globals; types of the nodes it makes are
 * copied from the nodes they replace, and the pipeline type-checks the
 * module again at the end. Passes never name a target and never execute a
 * program, except constant folding, which runs the host target's kernels on
 * constants.
 */
#ifndef RELAYC_PASS_H
#define RELAYC_PASS_H

#include "relayc/ir.h"

RY_BEGIN_API

/* ---- A-normal form ------------------------------------------------------
 * Returns e rewritten so that every non-atomic subexpression (anything but a
 * var, global, constant, operator or constructor) is let-bound once, with
 * atomic operands. A node shared in the DAG (`%0 = e;`) is bound once and
 * its later uses refer to that binding, as long as the binding is in scope
 * (a node first met in one branch of an if is bound again in the other).
 * Branches, clauses and function bodies are normalized as scopes of their
 * own. New nodes carry the types of the nodes they replace, so a typed input
 * gives a typed output. e is not modified. */
ry_expr *ry_anf(ry_module *m, const ry_expr *e);
/* Rewrites every global function of m into A-normal form in place (each
 * global's func is replaced by its normal form). */
void ry_anf_module(ry_module *m);

/* Well-formedness: every var used is bound before use and in scope (a
 * let's value does not see its own var unless it is a function: recursive
 * let), every span points into its source or is RY_NO_SPAN, nodes have a
 * valid shape (operator and constructor arity, projection index within a
 * known tuple type, globals that exist), and, when typed is true, every
 * expression and let-bound var carries a type. Errors are located at the
 * offending node and name it. */
ry_status ry_ir_verify(const ry_module *m, bool typed, ry_error *err);

/* Partial evaluation of every global: evaluates at compile time everything
 * that does not depend on run-time tensor values. Calls of known functions
 * (globals, closures) are inlined; refs whose identity is static are
 * tracked as compile-time cells (their reads resolve); tuples, projections,
 * `if` on constants and `match` on known constructors resolve; operators on
 * constants are folded; recursion unrolls only while an argument carries
 * static control (a known constructor or an integer/bool constant), within
 * a depth and a fuel limit. A recursive call under a dynamic `if`/`match`
 * (a stopping test on data) stays a call, specialized once per set of
 * known function arguments (memoized per global). The residual program
 * still allocates and writes every ref it did: ry_dce removes the ones no
 * one reads. */
ry_status ry_partial_eval(ry_module *m, ry_error *err);

/* Inlining only: calls of non-recursive globals and of known closures
 * (let-bound, or passed to an inlined function) are replaced by their
 * bodies with fresh variables (recursive globals are never inlined);
 * operators, branches and refs are left alone
 * (ry_partial_eval does all of this and more). */
ry_status ry_inline(ry_module *m, ry_error *err);

/* Loop-invariant code motion out of recursion (hoist.c): a recursive
 * global that passes parameters unchanged to every call of itself computes
 * the pure work that depends only on them once, in an entry that calls a
 * new global @NAME_loop taking the results as extra parameters; an
 * embedding lookup feeding nn.dense / nn.bias_add on invariants becomes a
 * lookup in a table of their results (at most 1024 rows). Non-recursive
 * globals are inlined first; the module is unchanged when nothing moves.
 * Meant for programs before differentiation (ry_trainer runs it then). */
ry_status ry_hoist(ry_module *m, ry_error *err);

/* Dead-code elimination: unused lets of pure values are removed, and a ref
 * whose value is never read (only written) is removed with its writes. */
ry_status ry_dce(ry_module *m, ry_error *err);

/* Constant folding: operator calls whose arguments are all constants and
 * whose result is a tensor of at most 65536 elements are evaluated with the
 * CPU kernels (ry_op_run) and replaced by constants. Random operators
 * (nn.dropout) are left alone; a call whose kernel fails stays, to fail at
 * run time. (Branches and projections on known values: ry_partial_eval.) */
ry_status ry_fold_constants(ry_module *m, ry_error *err);

/* Common-subexpression elimination for pure operator calls (same operator,
 * same attributes, same argument atoms) and projections, within the scope
 * where the first is bound. */
ry_status ry_cse(ry_module *m, ry_error *err);

/* Algebraic simplification: rank-2 transposes feeding nn.dense fold into
 * nn.matmul's transpose flags (the GEMM reads the operand in place). */
ry_status ry_simplify(ry_module *m, ry_error *err);

/* Operator fusion (fuse.c), over A-normal form: in each let chain, groups
 * of elementwise and broadcasting calls (float32, float64, bool) whose
 * intermediates are used only inside the group and have the group
 * result's shape become one call of fused.elemwiseN(inputs..., code=
 * "program"); a group fed by nn.dense or nn.matmul whose result only it
 * uses becomes fused.matmulN(a, b, inputs..., code=...), the GEMM's
 * epilogue. Programs: src/op/fused_prog.h. Fused calls have no gradient:
 * differentiate first. */
ry_status ry_fuse(ry_module *m, ry_error *err);

/* The pipeline. level 0: nothing; 1: folding, simplification, CSE, DCE,
 * then fusion (left out when the environment sets RELAYC_FUSE=0, to
 * measure it); 2 (for gradient programs): partial evaluation and DCE
 * first. Ends with a type check of the module. */
ry_status ry_optimize(ry_module *m, int level, ry_error *err);
/* The same pipeline without its last step, fusion: the result has only
 * registered operators (for `relayc grad --optimize --tvm`: TVM has no
 * fused kernels). */
ry_status ry_optimize_unfused(ry_module *m, int level, ry_error *err);

/* Whether global `name` calls, directly or through others, a recursive
 * global (a cycle in the call graph): its control flow then depends on
 * data, and partial evaluation cannot make it straight-line. */
bool ry_global_reaches_recursion(const ry_module *m, const char *name);
/* Whether global i of m (m->globals[i]) calls itself, directly or through
 * other globals. */
bool ry_global_recursive(const ry_module *m, int i);

/* Whether calling fn checks at run time what the call's argument types
 * leave open (a ? dimension where the parameter's type has a number or a
 * name): inlining the call would drop that check, so the inliners (partial
 * evaluation, the gradient's) keep it a call. */
bool ry_call_checks_shapes(const ry_expr *fn, const ry_expr *call);

/* Counts the nodes of each kind in e (a global's function counts itself as
 * one RY_EXPR_FUNC), for tests and reports; counts has RY_EXPR_REF_WRITE + 1
 * entries. A node shared in the DAG counts once per path to it. */
void ry_expr_count_kinds(const ry_expr *e, int *counts);

RY_END_API

#endif
