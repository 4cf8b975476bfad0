/*
 * op.h: the operator registry. Each operator is one entry: TVM's name, its
 * attributes with TVM's C++ defaults, its type relation, its gradient rule,
 * its fusion pattern and the facts that hold on every target (random,
 * movable out of a loop). Adding an operator means adding one entry (in the
 * family file under src/op/), its kernel on each target that has it (the
 * target's table in src/backend/<target>/kernels.c) and its tests.
 *
 * Kernels receive their outputs already allocated: the runtime computes the
 * result's shape by running the type relation on the concrete input types, so
 * shape logic lives in one place.
 */
#ifndef RELAYC_OP_H
#define RELAYC_OP_H

#include "relayc/ir.h"
#include "relayc/target.h"

RY_BEGIN_API

/* How an operator may be fused (TVM's OpPatternKind). */
typedef enum ry_op_pattern {
    RY_PAT_ELEMWISE = 0,       /* out[i] = f(in[i]) */
    RY_PAT_BROADCAST = 1,      /* elementwise with broadcasting */
    RY_PAT_INJECTIVE = 2,      /* each output element from one input element */
    RY_PAT_COMM_REDUCE = 3,    /* reductions */
    RY_PAT_OUT_ELEMWISE = 4,   /* dense, conv2d: fusable epilogue */
    RY_PAT_OPAQUE = 8
} ry_op_pattern;

/* Whether the calls of one call site in independent instances may run as
 * one kernel over their arguments stacked along axis 0 (the VM's automatic
 * batching, ry_vm_call_batch): row r of the result then depends only on
 * row r of the stacked arguments and on the shared ones. An operator with
 * an integer `axis` attribute is stacked only where that axis is not 0,
 * one with `transpose_a` only where it is false. */
typedef enum ry_op_batch {
    RY_BATCH_NO = 0,  /* never stacked */
    RY_BATCH_MAP,     /* elementwise with broadcasting: an argument of the result's rank is
                       * stacked, one of lower rank (a bias) is shared */
    RY_BATCH_GEMM     /* argument 0 (rows, k) stacked, argument 1 (the weight) shared, the
                       * others as RY_BATCH_MAP against the product (an epilogue) */
} ry_op_batch;

/* ---- type relations ---------------------------------------------------
 * Called by the type checker (and at run time on concrete types) with the
 * argument types resolved as far as known. A relation returns RY_REL_DEFER
 * when an argument it needs is still RY_TYPE_INCOMPLETE (the checker retries
 * after more unification: the fixpoint), RY_REL_FAIL after setting c->err at
 * c->span, or RY_REL_OK with *out set (allocated in c->arena).
 * Dimensions may be RY_DIM_SYM or RY_DIM_ANY: a relation propagates them
 * (broadcast 1 with n gives n; Any with anything gives Any). */
typedef enum ry_rel_status { RY_REL_OK, RY_REL_DEFER, RY_REL_FAIL } ry_rel_status;

typedef struct ry_rel_ctx {
    ry_arena *arena;
    const ry_op *op;
    const ry_attrs *attrs;
    ry_span span;   /* the call, for errors */
    ry_error *err;
} ry_rel_ctx;

typedef ry_rel_status (*ry_type_rel_fn)(ry_rel_ctx *c, int nargs, ry_type *const *args,
                                        ry_type **out);

/* ---- kernels -----------------------------------------------------------
 * in: the argument tensors flattened depth-first (concatenate's tuple
 * argument gives one tensor per field). out: the result tensors flattened
 * depth-first, allocated with the shapes and dtypes the type relation gave.
 * A kernel sets c->err (at c->span) and returns RY_ERR for what only run time
 * can tell (an index out of range in take with mode="fast", say). */
typedef struct ry_kernel_ctx {
    const ry_op *op;
    const ry_attrs *attrs;
    ry_span span;
    ry_error *err;
    bool training;       /* nn.dropout drops, batch_norm uses batch stats */
    uint64_t *rng;       /* seeded random state (splitmix64/xoshiro), for dropout */
} ry_kernel_ctx;

typedef ry_status (*ry_kernel_fn)(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                  ry_tensor *const *out);

typedef struct ry_attr_def {
    const char *name;
    ry_attr_value def; /* TVM's C++ default; RY_AV_NONE for None */
} ry_attr_def;

#define RY_MAX_ATTRS 16

/* ---- gradient rules ------------------------------------------------------
 * A rule builds IR (in c->m) for the adjoints of the arguments of one call:
 * args are the primal arguments and y the primal result (all atomic
 * expressions: vars or constants, typed), g the result's adjoint (same type
 * as y; a tuple for tuple results). It writes one expression per argument
 * into grads[i], or NULL where an argument has no gradient (integer data).
 * Broadcasting rules reduce with collapse_sum_like. */
typedef struct ry_grad_ctx {
    ry_module *m;
    const ry_expr *call; /* the typed primal call: its attrs and types */
    ry_span span;
    ry_error *err;
    bool inference; /* the gradient is for inference mode (ry_grad_opts): dropout is the
                     * identity, batch_norm normalizes with its moving statistics */
    /* need[i]: argument i's gradient is used (its value may depend on a
     * parameter the gradient is taken with respect to); NULL: all are. A
     * rule may leave grads[i] NULL where need[i] is false, and must not
     * fail for want of something only that gradient needs. */
    const bool *need;
} ry_grad_ctx;

typedef ry_status (*ry_grad_fn)(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                ry_expr **grads);

struct ry_op {
    const char *name;   /* "nn.conv2d" */
    int nargs;          /* fixed arity */
    ry_op_pattern pattern;
    int nattrs;
    ry_attr_def attrs[RY_MAX_ATTRS];
    ry_type_rel_fn rel;
    const char *doc;    /* one line: the rule, e.g. "dense: (n, k) x (m, k) -> (n, m)" */
    ry_grad_fn grad;    /* NULL: no rule (an error where a gradient is asked) */
    bool no_grad;       /* not differentiable (comparisons, argmax): zero adjoints */
    bool random;        /* draws from the random state (nn.dropout): never folded,
                         * removed when dead or moved */
    bool zeros;         /* its result is all zeros (zeros, zeros_like): a known zero to
                         * partial evaluation and to the engine's row-sparse values */
    bool movable;       /* pure, deterministic and total on arguments of its checked
                         * types: may run once before a loop instead of at each step
                         * (ry_hoist) */
    const char *tvm_attrs_key; /* the attribute class TVM's parser cannot find from the
                                * operator (scatter_nd, cumsum): printed for TVM as
                                * attrs_type_key="..."; NULL for the others */
    ry_op_batch batch;  /* how independent instances' calls stack (RY_BATCH_NO: not) */
};

/* Attribute-value shorthands for registry entries. */
#define RY_AINT(v) {.kind = RY_AV_INT, .i = (v)}
#define RY_AFLOAT(v) {.kind = RY_AV_FLOAT, .f = (v)}
#define RY_ABOOL(v) {.kind = RY_AV_BOOL, .b = (v)}
#define RY_ASTR(v) {.kind = RY_AV_STR, .s = (v)}
#define RY_ANONE {.kind = RY_AV_NONE}
#define RY_AEMPTY {.kind = RY_AV_LIST, .list = {0, NULL}}
/* None, or [], where TVM's attribute has no default (see tvm_required). */
#define RY_AREQUIRED {.kind = RY_AV_NONE, .tvm_required = true}
#define RY_AREQUIRED_EMPTY {.kind = RY_AV_LIST, .tvm_required = true, .list = {0, NULL}}

/* ---- the registry ---------------------------------------------------------- */
const ry_op *ry_op_find(const char *name);   /* NULL if unknown */
int ry_op_count(void);
const ry_op *ry_op_at(int i);

/* op's position in the registry (0 .. ry_op_count() - 1: ry_op_at's), or
 * -1 for an op that is not a registry entry. Constant time: targets index
 * their kernel tables by it. */
int ry_op_index(const ry_op *op);

/* Checks that every attribute in attrs is declared by op and has a usable
 * kind; errors point at the attribute. */
ry_status ry_op_check_attrs(const ry_op *op, const ry_attrs *attrs, ry_error *err);

/* Attribute access with the op's defaults. name must be declared by op. */
const ry_attr_value *ry_attr_get(const ry_op *op, const ry_attrs *attrs, const char *name);
bool ry_attr_is_none(const ry_op *op, const ry_attrs *attrs, const char *name);
int64_t ry_attr_int(const ry_op *op, const ry_attrs *attrs, const char *name);
double ry_attr_float(const ry_op *op, const ry_attrs *attrs, const char *name);
bool ry_attr_bool(const ry_op *op, const ry_attrs *attrs, const char *name);
const char *ry_attr_str(const ry_op *op, const ry_attrs *attrs, const char *name);
/* A list of integers (a single integer reads as a list of one). Returns the
 * count (at most max written into out), or -1 for None. */
int ry_attr_ints(const ry_op *op, const ry_attrs *attrs, const char *name, int64_t *out,
                 int max);

/* Runs op's kernel on target t (NULL: the CPU) on concrete host tensors
 * (constant folding, the interpreter). arg_types: one per argument,
 * tensor types with constant dims (or tuples of them); in: the tensors,
 * flattened depth-first. Computes the result type with the relation,
 * allocates the results and runs the kernel. On success *out_type is the
 * result type (in scratch) and (*out)[0..*nout) are new tensors the caller
 * owns, in an array allocated with ry_malloc. */
ry_status ry_op_run(const ry_target *t, const ry_op *op, const ry_attrs *attrs, ry_arena *scratch,
                    int nargs, ry_type *const *arg_types, int nin, ry_tensor *const *in,
                    ry_kernel_ctx *kctx, ry_type **out_type, int *nout, ry_tensor ***out);
/* ry_op_run with the results from allocator results (NULL: as ry_op_run;
 * the VM's batched calls take its pool's). */
ry_status ry_op_run_in(const ry_target *t, const ry_op *op, const ry_attrs *attrs, ry_arena *scratch,
                       int nargs, ry_type *const *arg_types, int nin, ry_tensor *const *in,
                       ry_kernel_ctx *kctx, ry_allocator *results, ry_type **out_type, int *nout,
                       ry_tensor ***out);

/* Helpers for relations: a tensor type from a tensor, and broadcasting. */
ry_type *ry_type_of_tensor(ry_arena *a, const ry_tensor *t);
ry_rel_status ry_rel_broadcast(ry_rel_ctx *c, const ry_type *a, const ry_type *b,
                               ry_dtype out_dtype, ry_type **out);

RY_END_API

#endif
