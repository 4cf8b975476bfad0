/*
 * ad.h: program transforms for automatic differentiation: A-normal form,
 * the higher-order reverse-mode gradient transform (ry_grad, Relay's design
 * after Wang et al.: values paired with adjoint refs, a backpropagator built
 * as a chain of closures) and gradient checking by finite differences.
 *
 * Every transform is IR -> IR inside one module: new nodes live in the
 * module's arena. The gradient program is ordinary IR: it type-checks,
 * prints, re-parses, runs in the interpreter and can be differentiated again.
 */
#ifndef RELAYC_AD_H
#define RELAYC_AD_H

#include "relayc/interp.h"
#include "relayc/target.h"
#include "relayc/ir.h"
#include "relayc/pass.h" /* ry_anf, which the transform normalizes with */

RY_BEGIN_API

/* ---- the gradient transform -----------------------------------------------
 * ry_grad differentiates a function of the module m (type-checked first if
 * it was not: its type errors come back as ry_grad's) for training mode,
 * with respect to every parameter (ry_grad_ex with no options), given
 * either as the name of a global (fn_name) or as an RY_EXPR_FUNC expression
 * of m (fn, when fn_name is NULL). It adds to m:
 *   - a global `out_name` (NULL: "<name>_gradient", or "gradient" for an
 *     expression; made unique) with TVM's `gradient` signature
 *     fn(params...) -> (result, (d_param1, d_param2, ...)),
 *     seeding every tensor field of the result with ones_like;
 *   - for each global it calls (and the function itself), a transformed twin
 *     `@<name>_grad` (made once, mutual recursion included);
 *   - for each ADT whose fields hold tensors or functions, a twin typedef
 *     `<Name>_grad` whose constructors are `<Ctor>_grad`;
 *   - for an ADT parameter or result, converter globals `@in_<Name>`,
 *     `@grad_<Name>`, `@primal_<Name>`, `@seed_<Name>` (one per concrete
 *     type) that pair, unpair and seed its tensors.
 * Then it type-checks the whole module again. Parameters and the result may
 * be tensors, tuples and ADTs of them, and values the transform leaves
 * unchanged (integer tensors: their gradient is zeros); for function
 * parameters and polymorphic functions see ry_grad_ex. Where
 * operators lack a gradient rule, one error lists all of them, located at
 * the first. Annotations that mention ref types are left to inference in
 * monomorphic twins (TVM prints but cannot parse ref types). On success
 * *out_name_used (if non-NULL) points to the new global's name (in m's
 * arena). On error m may hold unused nodes in its arena but its globals and
 * typedefs are unchanged, except when the final type check fails (a bug
 * here: the message says so). */
ry_status ry_grad(ry_module *m, const char *fn_name, const ry_expr *fn, const char *out_name,
                  const char **out_name_used, ry_error *err);

/* How ry_grad_ex differentiates. A zeroed struct (or NULL) is ry_grad's
 * behaviour: training mode, every parameter. */
typedef struct ry_grad_opts {
    /* The mode the gradient program will run in, fixed when it is built
     * (run it with ry_interp_opts.training / ry_vm_opts.training equal to
     * !inference). Training (false): nn.dropout's adjoint is g * mask /
     * (1 - rate) with the mask the forward call returned, nn.batch_norm's
     * that of batch statistics and the moving-average update. Inference:
     * dropout is the identity and batch_norm normalizes with its moving
     * statistics, which pass through unchanged. */
    bool inference;
    /* NULL: the gradient of every parameter. Otherwise nwrt (= the number
     * of parameters) flags: the result tuple holds the gradients of the
     * parameters whose flag is true, in parameter order, and no other
     * adjoint is read, so the optimizer removes their computation. */
    const bool *wrt;
    int nwrt;
    /* A polymorphic function (fn [A, ..]) is differentiated at one
     * instantiation: these types (one per type parameter, concrete), or,
     * when ntype_args is 0, the one every typed call of it in the module
     * uses. See ry_grad_ex. */
    int ntype_args;
    ry_type *const *type_args;
} ry_grad_opts;

/* ry_grad with options (opts may be NULL: ry_grad's defaults).
 *   - Polymorphic functions: the gradient is that of the instance at
 *     opts->type_args (or the call sites' one): a monomorphic global
 *     `@<name>_inst` calling @<name> at those types is added and
 *     differentiated (the twin of @<name> itself stays generic). Tensors in
 *     type-variable positions then get their gradients like any other.
 *   - Function-typed parameters (first order: tensors, tuples and ADTs in,
 *     the same out) are taken as they are and called on primal values:
 *     their results carry no gradient back into their arguments (a function
 *     that comes from outside cannot be differentiated; build it inside the
 *     differentiated function for that), and their slot in the gradient
 *     tuple is `()`. */
ry_status ry_grad_ex(ry_module *m, const char *fn_name, const ry_expr *fn, const char *out_name,
                     const ry_grad_opts *opts, const char **out_name_used, ry_error *err);

/* ---- gradient checking ----------------------------------------------------
 * Central finite differences of sum(f(x)) (every tensor of the result,
 * flattened) against the gradient ry_grad computes, for every element of
 * every float tensor in the arguments (tensors, tuples and ADT values), with
 * the step h = eps * max(1, |x|). Arguments should be float64 for
 * meaningful tolerances (see ry_module_to_float64). ADT arguments are
 * values built with ry_value_adt (or parsed: ry_module_parse_expr, then
 * evaluated as a global), e.g. a list of tensors or a tree from
 * ry_tree_to_value; each float tensor leaf is perturbed in turn, and the
 * report has one row per parameter (its leaves' largest errors). */
typedef struct ry_gradcheck_opts {
    double eps;                   /* step; 0: 1e-6 */
    double rtol;                  /* 0: 1e-5 */
    double atol;                  /* 0: 1e-7 */
    bool second_order;            /* also check the gradient program's own gradient */
    const ry_interp_opts *interp; /* how every run is made; NULL: inference. The
                                   * gradient is built for that mode (ry_grad_opts) */
    /* 0: check every element. K > 0: at most K elements of each tensor, half
     * of them drawn among those whose gradient is nonzero (an embedding's
     * rows that the input reads), the rest among all, seeded by sample_seed */
    int64_t max_elements;
    uint64_t sample_seed;
    /* NULL: the gradient program runs in the interpreter. A target: it is
     * compiled and run by the compiled engine there (target.h: the OpenCL
     * device's kernels, say), against the same finite differences, which
     * always come from the interpreter on the CPU, the reference */
    const ry_target *target;
} ry_gradcheck_opts;

#define RY_GRADCHECK_MAX_PARAMS 32

typedef struct ry_gradcheck_param {
    char name[64];  /* the parameter's name */
    bool checked;   /* the argument holds float tensors */
    int64_t nchecked; /* elements compared (all of them unless max_elements) */
    double max_abs; /* max |ad - fd| over its elements */
    double max_rel; /* max |ad - fd| / max(|ad|, |fd|, 1e-12) */
    bool ok;        /* every element within atol + rtol * |fd| */
} ry_gradcheck_param;

typedef struct ry_gradcheck_report {
    int nparams;
    ry_gradcheck_param params[RY_GRADCHECK_MAX_PARAMS];
    bool ok;               /* every checked parameter ok (second order included) */
    const char *grad_name; /* the gradient global ry_grad added */
    /* with second_order: the gradient of sum(gradient program's outputs),
     * i.e. of sum(f) + sum(f'), against finite differences of that sum */
    ry_gradcheck_param second[RY_GRADCHECK_MAX_PARAMS];
    const char *grad2_name;
} ry_gradcheck_report;

/* Checks global `entry` of the type-checked module m at args (borrowed
 * tensor values). Adds the gradient program to m (see ry_grad). Returns
 * RY_ERR only when the check could not run (transform or run-time error);
 * a gradient that disagrees gives RY_OK with rep->ok false. opts may be NULL. */
ry_status ry_gradcheck(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                       const ry_gradcheck_opts *opts, ry_gradcheck_report *rep, ry_error *err);

/* Rewrites every float16/float32 in m (tensor types, float constants,
 * dtype and out_dtype attributes) to float64, then type-checks m again:
 * finite differences need float64 to check float32 programs tightly. */
ry_status ry_module_to_float64(ry_module *m, ry_error *err);

RY_END_API

#endif
