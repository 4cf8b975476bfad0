/*
 * ir.h: the Relay IR: types, expressions, patterns, attributes and modules.
 *
 * Nodes are plain structs allocated in the arena of the module that made
 * them and freed with it. Expressions form a DAG: a `%0 = e;` binding in the
 * text makes every use of %0 point to the same node. Variables are described
 * once (ry_var) and referenced by RY_EXPR_VAR nodes, each use with its own
 * span. The IR knows no target and does not execute itself.
 */
#ifndef RELAYC_IR_H
#define RELAYC_IR_H

#include "relayc/base.h"
#include "relayc/tensor.h"

RY_BEGIN_API

typedef struct ry_type ry_type;
typedef struct ry_expr ry_expr;
typedef struct ry_pattern ry_pattern;
typedef struct ry_module ry_module;
typedef struct ry_typedef ry_typedef;
typedef struct ry_ctor ry_ctor;
typedef struct ry_global ry_global;
typedef struct ry_op ry_op;

/* ---- attributes --------------------------------------------------------
 * Operator attributes as written: `padding=[1, 1]`, `axis=None`,
 * `layout="NCHW"`, `rate=0.5f`, `keepdims=True`. Ops read them with the
 * ry_attr_* helpers of op.h, which fall back to the op's defaults. */
typedef enum ry_attr_kind {
    RY_AV_NONE,  /* None */
    RY_AV_INT,   /* 3, -1, 2i64 */
    RY_AV_FLOAT, /* 0.5f, 1e-05f */
    RY_AV_BOOL,  /* True, False */
    RY_AV_STR,   /* "NCHW", "" */
    RY_AV_LIST   /* [1, 1], [] */
} ry_attr_kind;

typedef struct ry_attr_value ry_attr_value;
struct ry_attr_value {
    ry_attr_kind kind;
    /* Only in an operator's registry defaults: TVM's C++ field has no
     * default, so TVM's parser rejects a call that omits it and the printer
     * always spells it (`units=None`). */
    bool tvm_required;
    union {
        int64_t i;
        double f;
        bool b;
        const char *s;
        struct {
            int n;
            ry_attr_value *items;
        } list;
    };
};

typedef struct ry_attr {
    const char *name;
    ry_attr_value value;
    ry_span span;
} ry_attr;

typedef struct ry_attrs {
    int n;
    ry_attr *items;
} ry_attrs;

/* ---- types -------------------------------------------------------------- */
typedef enum ry_dim_kind {
    RY_DIM_CONST, /* 128 */
    RY_DIM_SYM,   /* n: a symbolic dimension, equal only to itself */
    RY_DIM_ANY    /* ?: unknown until run time */
} ry_dim_kind;

typedef struct ry_dim {
    ry_dim_kind kind;
    int64_t value;    /* RY_DIM_CONST */
    const char *name; /* RY_DIM_SYM */
} ry_dim;

typedef enum ry_type_kind {
    RY_TYPE_TENSOR,     /* Tensor[(2, n), float32]; float32 is Tensor[(), float32] */
    RY_TYPE_TUPLE,      /* (T1, T2), () */
    RY_TYPE_FUNC,       /* fn [A](T1, T2) -> R */
    RY_TYPE_VAR,        /* A: a type parameter */
    RY_TYPE_CALL,       /* List[A]: an ADT applied to arguments (none: `Tree`) */
    RY_TYPE_REF,        /* ref(T) */
    RY_TYPE_INCOMPLETE  /* _: to be inferred */
} ry_type_kind;

struct ry_type {
    ry_type_kind kind;
    ry_span span;
    union {
        struct {
            ry_dtype dtype;
            int ndim;
            ry_dim *dims;
        } tensor;
        struct {
            int n;
            ry_type **fields;
        } tuple;
        struct {
            int ntparams;
            ry_type **tparams; /* each RY_TYPE_VAR */
            int nargs;
            ry_type **args;
            ry_type *ret;
        } func;
        struct {
            const char *name;
            int id; /* unique within the module; type vars compare by id */
        } var;
        struct {
            ry_typedef *adt;
            int nargs;
            ry_type **args;
        } call;
        struct {
            ry_type *inner;
        } ref;
        struct {
            int id; /* the type checker's unknown number */
        } incomplete;
    };
};

/* ---- ADTs ---------------------------------------------------------------
 * type List[A] { Cons(A, List[A]), Nil } */
struct ry_ctor {
    const char *name;
    int tag;                 /* index within its typedef */
    int nfields;
    ry_type **fields;        /* may mention the typedef's type params */
    ry_typedef *adt;
    ry_span span;
};

struct ry_typedef {
    const char *name;
    int ntparams;
    ry_type **tparams;       /* each RY_TYPE_VAR */
    int nctors;
    ry_ctor **ctors;
    ry_span span;
};

/* ---- expressions ---------------------------------------------------------- */
typedef struct ry_var {
    const char *name;     /* without the %: "x", "0" is never a var name */
    int id;               /* unique within the module */
    ry_type *annot;       /* declared type or NULL */
    ry_type *type;        /* inferred by the type checker, else NULL */
    ry_span span;         /* where it is bound */
} ry_var;

typedef enum ry_expr_kind {
    RY_EXPR_VAR,       /* %x */
    RY_EXPR_GLOBAL,    /* @f */
    RY_EXPR_CONST,     /* 1f, 2i64, True, meta[relay.Constant][0] */
    RY_EXPR_OP,        /* nn.dense (as a callee) */
    RY_EXPR_CTOR,      /* Cons, Nil (as a callee, or a value when nullary) */
    RY_EXPR_CALL,      /* f(a, b, attr=v) */
    RY_EXPR_LET,       /* let %x = v; body */
    RY_EXPR_IF,        /* if (c) { t } else { f } */
    RY_EXPR_MATCH,     /* match (d) { p => e, ... }; match? (d) {...} */
    RY_EXPR_FUNC,      /* fn [A](%x: T) -> R { body } */
    RY_EXPR_TUPLE,     /* (a, b), (a,), () */
    RY_EXPR_PROJ,      /* t.0 */
    RY_EXPR_REF,       /* ref(v) */
    RY_EXPR_REF_READ,  /* ref_read(r) */
    RY_EXPR_REF_WRITE  /* ref_write(r, v) */
} ry_expr_kind;

typedef struct ry_clause {
    ry_pattern *pat;
    ry_expr *body;
} ry_clause;

struct ry_expr {
    ry_expr_kind kind;
    ry_span span;
    ry_type *type; /* set by the type checker (fully resolved), else NULL */
    union {
        struct {
            ry_var *var;
        } var;
        struct {
            const char *name; /* without the @ */
        } global;
        struct {
            ry_tensor *value; /* owned by the module (released with it) */
        } constant;
        struct {
            const ry_op *op;
        } op;
        struct {
            ry_ctor *ctor;
        } ctor;
        struct {
            ry_expr *callee;
            int nargs;
            ry_expr **args;
            ry_attrs attrs;
            int ntype_args;
            ry_type **type_args; /* explicit or inferred instantiation */
        } call;
        struct {
            ry_var *var;
            ry_expr *value;
            ry_expr *body;
        } let;
        struct {
            ry_expr *cond;
            ry_expr *then_;
            ry_expr *else_;
        } if_;
        struct {
            ry_expr *data;
            int nclauses;
            ry_clause *clauses;
            bool complete; /* false for match? */
        } match;
        struct {
            int nparams;
            ry_var **params;
            ry_type *ret_annot; /* NULL if not written */
            int ntparams;
            ry_type **tparams;  /* each RY_TYPE_VAR */
            ry_attrs attrs;     /* e.g. Primitive=1 on fused functions */
            ry_expr *body;
        } func;
        struct {
            int n;
            ry_expr **fields;
        } tuple;
        struct {
            ry_expr *tuple;
            int index;
        } proj;
        struct {
            ry_expr *value;
        } ref;
        struct {
            ry_expr *ref;
        } ref_read;
        struct {
            ry_expr *ref;
            ry_expr *value;
        } ref_write;
    };
};

typedef enum ry_pattern_kind {
    RY_PAT_WILDCARD, /* _ */
    RY_PAT_VAR,      /* %x */
    RY_PAT_CTOR,     /* Cons(%h, %t), Nil */
    RY_PAT_TUPLE     /* (%a, _) */
} ry_pattern_kind;

struct ry_pattern {
    ry_pattern_kind kind;
    ry_span span;
    union {
        ry_var *var;
        struct {
            ry_ctor *ctor;
            int n;
            ry_pattern **args;
        } ctor;
        struct {
            int n;
            ry_pattern **fields;
        } tuple;
    };
};

/* ---- modules -------------------------------------------------------------- */
struct ry_global {
    const char *name; /* without the @ */
    ry_expr *func;    /* an RY_EXPR_FUNC */
    ry_span span;
};

struct ry_module {
    ry_arena *arena;
    ry_source *source;       /* the text it was parsed from, or NULL */
    int nglobals;
    ry_global **globals;     /* in definition order */
    int ntypedefs;
    ry_typedef **typedefs;   /* in definition order */
    int next_id;             /* for fresh ry_var and type var ids */
    /* private: growth capacities and constants to release */
    int cap_globals, cap_typedefs;
    int nconsts, cap_consts;
    ry_tensor **consts;
};

/* New empty module. The Prelude-free module holds no typedefs. */
ry_module *ry_module_new(void);
/* Frees every node, string and type in the arena and releases constants. */
void ry_module_free(ry_module *m);

/* Parses Relay text (version 0.0.5). name is used in error locations. On
 * success *out owns a new module; on error *out is NULL and err is set. */
ry_status ry_module_parse(const char *name, const char *text, size_t len,
                          ry_module **out, ry_error *err);
ry_status ry_module_parse_file(const char *path, ry_module **out, ry_error *err);
/* Parses text as one expression in m's scope: its types, constructors and
 * globals (no locals), e.g. `Cons(ones(shape=[3], dtype="float32"), Nil)`.
 * name is used in error locations. *out lives in m's arena; it is not
 * type-checked (wrap it in a function and add it as a global for that). */
ry_status ry_module_parse_expr(ry_module *m, const char *name, const char *text, size_t len,
                               ry_expr **out, ry_error *err);

/* Prints the module in the text format, `#[version = "0.0.5"]` first.
 * Constants too large to print inline go into a metadata section. Returns
 * a malloc'ed string (free with ry_free), NULL on out-of-memory. */
char *ry_module_print(const ry_module *m);
/* show_types: after type checking, annotate each binding as TVM does, with
 * a block comment `ty=Tensor[(1, 10), float32]` after the bound expression
 * (comments the parser skips). */
typedef struct ry_print_report ry_print_report;
typedef struct ry_print_opts {
    bool show_types;
    /* tvm: print only what TVM 0.19's parser reads back: symbolic dims as
     * `?`, no annotation holding a ref type (TVM prints `ref(T)` but cannot
     * parse it), stop_gradient(e) as e (TVM has no such operator). What was
     * changed is counted in *report when report is not NULL. */
    bool tvm;
    ry_print_report *report;
} ry_print_opts;

/* What printing for TVM changed or could not express. */
struct ry_print_report {
    int sym_dims;         /* symbolic dims printed as `?` */
    char sym_names[128];  /* their names, comma-separated (truncated) */
    int ref_annots;       /* annotations dropped because they hold a ref type */
    int stop_gradients;   /* stop_gradient calls printed as their argument */
    int unsupported;      /* kept although TVM cannot read them: relayc's fused
                           * operators, ref types in constructor fields,
                           * mutually recursive globals taking refs */
    int localized;        /* globals printed as local functions (below) */
    int dropped_globals;  /* such globals no other global calls: not printed */
    int generic_adts;     /* ADTs whose fields hold refs, made generic in them */
    int monomorphized;    /* further copies of polymorphic globals taking refs,
                           * one per other type they are used at */
};
char *ry_module_print_ex(const ry_module *m, const ry_print_opts *opts);
/* Before printing for TVM: TVM type-checks one global at a time and cannot
 * write a ref type, so it cannot infer the parameters of a global that takes
 * refs (the gradient twins @f_grad). Each such global becomes a local
 * function `let %f_grad = fn (...) {...};` at the top of every other global
 * that reaches it (callees first), where TVM infers its parameters from the
 * calls, and leaves the module; mutually recursive ones stay (counted in
 * unsupported). A polymorphic one is copied once per type it is used at
 * (after type checking: TVM's let is monomorphic), @f_grad, @f_grad_1, ... First, an ADT whose constructor fields hold refs (the
 * gradient twin of a tree) becomes generic in those refs (`type
 * Tree_grad[R0] {...}`), which TVM infers where it is built and matched.
 * Mutates m in place: print it, then free it. Counts go to rep when not
 * NULL. */
void ry_module_localize_for_tvm(ry_module *m, ry_print_report *rep);
/* Prints one expression (for messages and tests); malloc'ed. */
char *ry_expr_print(const ry_expr *e);
/* Prints a type into buf, truncating; returns buf. */
const char *ry_type_str(const ry_type *t, char *buf, size_t n);

ry_global *ry_module_find_global(const ry_module *m, const char *name);
/* Whether some global of m has a parameter called name (a checkpoint's
 * parameter belongs to the model: relayc run and export check this). */
bool ry_module_has_param(const ry_module *m, const char *name);
ry_typedef *ry_module_find_typedef(const ry_module *m, const char *name);
ry_ctor *ry_module_find_ctor(const ry_module *m, const char *name);
/* Adds or replaces a global function; fn must be an RY_EXPR_FUNC. */
ry_global *ry_module_add_global(ry_module *m, const char *name, ry_expr *fn);
void ry_module_add_typedef(ry_module *m, ry_typedef *td);
/* The module takes one reference to t (released in ry_module_free). */
void ry_module_keep_const(ry_module *m, ry_tensor *t);

/* Type inference over the whole module (see typecheck.c): fills every
 * expression's `type` and every var's `type`, instantiating polymorphic
 * globals and solving operator type relations. Errors name the expression and
 * the expected and actual types. Out of memory is an error too ("type
 * check: error: out of memory"); the module may then hold part of the new
 * types and is to be checked again or freed. The same holds for ry_grad,
 * ry_optimize and ry_vm_compile on the module they are given; a failed
 * ry_module_parse leaves nothing behind. */
ry_status ry_module_typecheck(ry_module *m, ry_error *err);

/* ---- constructors for IR nodes (in m's arena) ----------------------------- */
ry_var *ry_var_new(ry_module *m, const char *name, ry_type *annot, ry_span span);
ry_expr *ry_expr_new(ry_module *m, ry_expr_kind kind, ry_span span);
ry_expr *ry_expr_var(ry_module *m, ry_var *v, ry_span span);
ry_expr *ry_expr_const(ry_module *m, ry_tensor *t, ry_span span); /* takes t */
ry_expr *ry_expr_call(ry_module *m, ry_expr *callee, int nargs, ry_expr **args,
                      ry_span span); /* copies args */
ry_expr *ry_expr_let(ry_module *m, ry_var *v, ry_expr *value, ry_expr *body,
                     ry_span span);
ry_expr *ry_expr_tuple(ry_module *m, int n, ry_expr **fields, ry_span span);
ry_expr *ry_expr_proj(ry_module *m, ry_expr *tuple, int index, ry_span span);
ry_type *ry_type_new(ry_module *m, ry_type_kind kind, ry_span span);
ry_type *ry_type_tensor(ry_module *m, ry_dtype dtype, int ndim, const int64_t *shape);
ry_type *ry_type_tensor_arena(ry_arena *a, ry_dtype dtype, int ndim, const ry_dim *dims);
ry_type *ry_type_tuple_arena(ry_arena *a, int n, ry_type **fields);
bool ry_type_equal(const ry_type *a, const ry_type *b); /* structural */
/* Whether dims a and b can be one at run time as far as the types tell:
 * equal constants, the same symbol, or a ? on either side (a symbol and a
 * constant the checker matched are not: their types still differ). */
bool ry_dim_compatible(const ry_dim *a, const ry_dim *b);

/* The free variables of the function expression fn: used inside it
 * (nested functions included) and bound nowhere inside it, each once. The
 * array (at least one slot) is allocated in out, temporaries in scratch;
 * *n gets the count. */
const ry_var **ry_func_free_vars(ry_arena *scratch, ry_arena *out, const ry_expr *fn, int *n);

/* A let chain under construction: transforms and passes emit code binding
 * by binding, then close the chain into nested lets. The arrays grow in
 * scratch (an arena). */
typedef struct ry_lets {
    ry_var **vars;
    ry_expr **vals;
    int n, cap;
} ry_lets;
void ry_lets_push(ry_arena *scratch, ry_lets *l, ry_var *v, ry_expr *val);

RY_END_API

#endif
