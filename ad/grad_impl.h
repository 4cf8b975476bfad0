/*
 * grad_impl.h: private to the gradient transform (grad.c, grad_run.c,
 * grad_inline.c, grad_types.c, grad_convert.c, grad_wrap.c, grad_outer.c):
 * its state, the type mapping T -> T', the twins of ADTs and globals, runs
 * of operators, and the block builder that folds bindings into lets.
 */
#ifndef RELAYC_AD_GRAD_IMPL_H
#define RELAYC_AD_GRAD_IMPL_H

#include "ad_impl.h"
#include "op/grad_rules.h"
#include "relayc/ad.h"

#define GX_MAX_MISSING 64

typedef struct gx {
    ry_module *m;
    ry_arena *scratch;
    ry_error *err;
    bool failed;          /* an error other than a missing rule is in err */
    ad_map vars;          /* primal ry_var -> transformed ry_var */
    ad_map globals;       /* ry_global -> twin name (char *) */
    ad_map adts;          /* ry_typedef -> twin (or itself when unchanged) */
    ad_map ctors;         /* ry_ctor -> twin ctor */
    ad_map adt_need;      /* typedef -> (void *)1 when it needs a twin */
    bool adts_decided;    /* adt_need computed (grad_types.c) */
    struct gx_twin {      /* twins of globals, in request order; func is */
        const char *name; /* NULL until built. Added to m at the end. */
        ry_global *g;
        ry_expr *func;
    } * twins;
    int ntwins, captwins;
    ry_typedef **tds; /* twin typedefs, added at the end */
    int ntds, captds;
    const char *missing[GX_MAX_MISSING]; /* operators without a rule */
    int nmissing;
    ry_span missing_span;
    struct gx_conv_entry { /* converter globals of grad_convert.c */
        int kind;          /* a gx_conv */
        ry_type *type;     /* the concrete ADT type it converts */
        const char *name;
    } * convs;
    int nconvs, capconvs;
    ad_map primals;                     /* transformed var -> struct gx_primal: its primal, */
    int *scopes;                        /* bound in scope id; valid while that id is on */
    int nscopes, capscopes, next_scope; /* the stack of open scopes */
    ry_type *bp_type;                   /* ref(fn () -> ()) */
    ry_grad_opts opts;                  /* the caller's (zeroed: ry_grad's defaults) */
    ry_global *inst;                    /* the instance gx_instantiate added, if any */
    bool added;                         /* the results are in m (run() in grad.c) */
    ad_map cands;                       /* primal let var -> struct gx_cand (grad_run.c) */
    struct gx_run *run;                 /* the scope being transformed, NULL outside */
    int next_run;                       /* run ids handed out by the analysis */
    bool per_op;                        /* RELAYC_GRAD_RUNS=0: the former emitter, */
                                        /* one closure per operator, no inlining */
    bool active_on;                     /* the activity analysis ran (grad_active.c) */
    ad_map active_params;               /* ry_global -> bool[]: its active parameters */
    ad_map active;                      /* var of a function being transformed -> */
} gx;                                   /* (void *)1 active, (void *)2 not */

struct gx_primal {
    ry_expr *use;
    int scope;
};

/* ---- grad_types.c ---- */
/* Whether the mapping changes t (it holds a float tensor, a function, or an
 * ADT that needs a twin). */
bool gx_changes(gx *s, const ry_type *t);
/* T -> T': float tensor -> (T, ref(T)); tuple fieldwise; fn(A..) -> R ->
 * fn(A'.., ref(fn () -> ())) -> R'; ADT -> its twin over mapped arguments;
 * ref(T) -> ref(T'); integer tensors and type variables unchanged. */
ry_type *gx_type(gx *s, ry_type *t);
/* The twin of a typedef (itself when no field changes) and of a ctor. */
ry_typedef *gx_adt(gx *s, ry_typedef *td);
ry_ctor *gx_ctor(gx *s, ry_ctor *k);
/* A name not used by any global, typedef or ctor of m nor any twin so far. */
const char *gx_unique(gx *s, const char *base, const char *suffix);
/* The name of global g's twin, queueing it to be built (a twin with func
 * NULL in s->twins). */
const char *gx_twin_name(gx *s, ry_global *g);
bool gx_is_float(const ry_type *t);
/* t as an annotation: NULL when it mentions a ref (TVM cannot parse those). */
ry_type *gx_annot(ry_type *t);
/* t has an Any dim (`?`) somewhere: an annotation inference cannot replace
 * (it would fix the dim at the first use, and a recursion that grows the
 * tensor would no longer type-check), so it is kept even with refs. */
bool gx_has_any(const ry_type *t);

/* ---- blocks: bindings folded into nested lets ---- */
typedef ry_lets gx_block;

/* Binds val to a fresh var named name (typed t, may be NULL); returns a use. */
ry_expr *gx_bind(gx *s, gx_block *b, const char *name, ry_expr *val, ry_type *t);
void gx_push(gx *s, gx_block *b, ry_var *v, ry_expr *val);
/* let-sequence: binds val to a fresh unit var (`let %u = ref_write(..);`). */
void gx_do(gx *s, gx_block *b, ry_expr *val);
ry_expr *gx_fold(gx *s, gx_block *b, ry_expr *tail);
ry_expr *gx_use(gx *s, ry_var *v); /* a var use typed as v */

/* ---- grad.c ---- */
/* The transformed function expression (params mapped, a bp param added). */
ry_expr *gx_func(gx *s, const ry_expr *f);
/* IR helpers shared with grad_wrap.c */
ry_expr *gx_ref_new(gx *s, ry_expr *v);
ry_expr *gx_ref_read(gx *s, ry_expr *r);
ry_expr *gx_ref_write(gx *s, ry_expr *r, ry_expr *v);
ry_expr *gx_proj(gx *s, ry_expr *t, int i);
ry_expr *gx_unit(gx *s);

/* Adds a generated global (not a twin) to be added to m at the end. */
void gx_add_global(gx *s, const char *name, ry_expr *fn);

/* Whether the transformed value of v carries adjoint cells; its primal
 * (v'.0 for a float tensor, fieldwise for tuples); its adjoint read from
 * the cells; cells += d. Shared by grad.c and grad_run.c. */
ry_expr *gx_primal(gx *s, ry_expr *v, const ry_type *t);
ry_expr *gx_adjoint(gx *s, ry_expr *v, const ry_type *t);
void gx_accumulate(gx *s, gx_block *b, ry_expr *v, const ry_type *t, ry_expr *d);
ry_expr *gx_atomize(gx *s, gx_block *b, ry_expr *e, ry_type *t);

/* ---- grad_active.c: values that may depend on a wrt parameter ----
 * gx_active_module: the parameter flags of every global, from entry's wrt
 * (entry NULL: a function expression is differentiated; its wrt is used
 * by gx_active_func). gx_active_func: analyses f (the form the transform
 * walks), the body of global g's twin or (g NULL) the entry expression.
 * gx_active_atom: whether an operator argument may be active (true when
 * nothing was analysed). */
void gx_active_module(gx *s, const ry_global *entry);
void gx_active_func(gx *s, const ry_expr *f, const ry_global *g);
bool gx_active_atom(gx *s, const ry_expr *a);

/* ---- grad_run.c: one backpropagator closure per run of operators ----
 * A run is a maximal sequence of let-bound operator calls (and the
 * projections, tuples, refs, constructors and function values between
 * them) in one scope that nothing touching bp interrupts. */
typedef struct gx_adj gx_adj;
typedef struct gx_pending gx_pending;
typedef struct gx_run {
    ry_var *bp;          /* the scope's backpropagator */
    struct gx_run *outer;
    gx_pending *pend;    /* operators of the open run, in forward order */
    int npend, cappend;
    int serial;          /* bumped by each flush: tells the open run apart */
} gx_run;

/* Enters the scope whose let chain is e (analysing its runs: which values
 * are local to theirs) / leaves it, flushing the open run into b. */
void gx_run_enter(gx *s, gx_run *run, ry_var *bp, const ry_expr *e);
void gx_run_leave(gx *s, gx_run *run, gx_block *b);
/* Whether evaluating e may read or extend bp (calls that are not of
 * operators or constructors, if, match): the open run ends before it. */
bool gx_run_breaks(const ry_expr *e);
/* Emits the open run's one closure into b (nothing when it is empty). */
void gx_run_flush(gx *s, gx_block *b);
/* The in-run adjoint of primal var v when v was bound in the open run. */
gx_adj *gx_run_arg(gx *s, const ry_var *v);
/* A fresh use of the primal value an adjoint belongs to. */
ry_expr *gx_adj_primal(gx *s, const gx_adj *a);
/* Whether let var (bound to an operator call) is local to its run: it then
 * gets no cell. gx_run_result: after `let var = op(..)` emitted its primal
 * y (a var use) and, unless local, its cell pair r (var may be NULL: an
 * operator call in tail position): the adjoint record of the result. */
bool gx_run_is_local(gx *s, const ry_var *var);
/* Whether nothing ever adds to let var's adjoint (every use, closures'
 * included, is an argument of an operator without a backward body): the
 * adjoint stays zero, so its operator's rule is skipped, as for a local
 * value to which nothing was added (0 x inf would make NaN of a zero). */
bool gx_run_never_added(gx *s, const ry_var *var);
gx_adj *gx_run_result(gx *s, const ry_var *var, const ry_type *t, ry_expr *y, ry_expr *r);
/* `let var = t.i` of a value of the open run: binds its primal into b and
 * returns its transformed value when var is local, else NULL (transform
 * it as usual; in-run uses still accumulate at compile time). */
ry_expr *gx_run_proj(gx *s, gx_block *b, const ry_var *var, const ry_expr *e);
/* Defers the backward body of op call e (primal args prim, result out;
 * per argument its in-run adjoint aadj[i] or transformed value targs[i])
 * to the flush of the open run. need: the arguments whose gradients are
 * used (ry_grad_ctx.need); the others are dropped. */
void gx_run_defer(gx *s, const ry_expr *e, ry_grad_fn fn, ry_expr **prim, gx_adj *out,
                  gx_adj **aadj, ry_expr **targs, const bool *need);

/* ---- grad_inline.c ---- */
/* f (a function in A-normal form) with its calls of non-recursive,
 * monomorphic globals replaced by their bodies, fresh variables; the
 * parameters of f stay. */
const ry_expr *gx_inline(gx *s, const ry_expr *f);

/* ---- grad_convert.c ---- */
/* t with the type variables from[i] replaced by to[i] (new nodes in m). */
ry_type *gx_subst(gx *s, ry_type *t, int n, ry_type **from, ry_type **to);
typedef enum gx_conv { GX_IN, GX_GRAD, GX_PRIMAL, GX_SEED } gx_conv;
/* Whether values of t can cross the wrapper: tensors, tuples, concrete
 * ADTs, and types the mapping leaves unchanged (not functions or type
 * variables holding tensors). */
bool gx_convertible(gx *s, const ry_type *t);
/* in: x : T -> T';  grad: x' : T' -> T (adjoints);  primal: x' : T' -> T;
 * seed: x' : T' -> () adding ones to every adjoint cell. */
ry_expr *gx_convert(gx *s, gx_conv kind, ry_expr *x, ry_type *t);

/* ---- grad_outer.c: what the outermost function may be beyond tensors ---- */
/* For a polymorphic global *g: adds the monomorphic instance
 * `@<name>_inst` (see ry_grad_ex) to m, type-checks m, and points *g at
 * it; s->inst records it so that an error removes it again. */
ry_status gx_instantiate(gx *s, ry_global **g);
void gx_remove_instance(gx *s);
/* A first-order function type fn(A..) -> R with convertible A and R. */
bool gx_liftable(gx *s, const ry_type *t);
/* A primal function value f : t lifted to t': called on the primals of its
 * arguments, its result paired with zero cells (no gradient through f). */
ry_expr *gx_lift(gx *s, ry_expr *f, const ry_type *t);

/* ---- grad_wrap.c ---- */
/* fn (params) { ... } with TVM's gradient signature around a call of the
 * transformed function fnp (a global twin or a function expression). */
ry_status gx_wrapper(gx *s, const ry_expr *f, ry_expr *fnp, ry_expr **out);

/* grad_shapes.c: in every closure of fn, a use of a captured forward value
 * for its shape alone is moved to operands the closure captures anyway,
 * so the value is not held until the backward pass. In place. */
void gx_shape_uses(ry_module *m, ry_expr *fn);

#endif
