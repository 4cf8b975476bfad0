/*
 * emit.h: what the C export's files share (private). export.c drives:
 * optimize, classify parameters, walk the entry (emit_fn.c), write the
 * files (emit_files.c). emit_fn.c turns the entry's ANF into C statements,
 * asking emit_ops.c for each operator call (the C target's kernel table:
 * an emitter per operator, or a located error) and emit_fused.c for the
 * loops of fused programs and elementwise operators.
 *
 * Values are known at export time by their shape, with dims either
 * constants or symbols (the entry's symbolic dims, arguments of the C
 * entry): every tensor's size is a C expression, every buffer is carved
 * from the context's scratch block, and views (reshape, expand_dims) are
 * pointers into their base.
 */
#ifndef RELAYC_BACKEND_C_EMIT_H
#define RELAYC_BACKEND_C_EMIT_H

#include "ir/parse.h" /* strbuf */
#include "relayc/export.h"
#include "relayc/op.h"

/* A value of the program as the C code holds it: a tensor (the C
 * expression of its data pointer, its dtype and dims) or a tuple. */
typedef struct cval cval;
struct cval {
    bool tuple;
    int n;
    cval **fields;
    const char *c;
    ry_dtype dtype;
    int ndim;
    ry_dim dims[RY_MAX_RANK];
    int weight; /* the weight it is (index in the weights table), or -1 */
    bool scratch; /* its data is a scratch buffer of the entry's (or a view of one) */
    bool boxed;   /* an ADT, closure or ref (or a value of a type variable): c is its rt_val * */
    const ry_type *type; /* boxed: its type */
    ry_dim *seen; /* a join's dims (c->dyn): what every branch so far gave, a constant or ? */
};

/* The export runtime's files (rt/NAME.c) an artifact needs, by bit. */
enum {
    RT_GEMM = 1 << 0,
    RT_CONV2D = 1 << 1,
    RT_POOL_GEOM = 1 << 2,
    RT_MAX_POOL2D = 1 << 3,
    RT_AVG_POOL2D = 1 << 4,
    RT_SOFTMAX = 1 << 5,
    RT_TRANSPOSE = 1 << 6,
    RT_BATCH_NORM = 1 << 7,
    RT_REDUCE = 1 << 8,
    RT_LAYER_NORM = 1 << 9,
    RT_ARGREDUCE = 1 << 10,
    RT_PAD = 1 << 11,
    RT_GEMM_KERNEL = 1 << 12,
    RT_GROUP_NORM = 1 << 13,
    RT_LRN = 1 << 14,
    RT_L2_NORMALIZE = 1 << 15,
    RT_HALF_WIDEN = 1 << 16,
    RT_HALF_NARROW = 1 << 19,
    RT_CONV2D_T = 1 << 17,
    RT_ADAPTIVE_POOL = 1 << 18,
};

typedef struct cemit {
    ry_arena *a;
    ry_error *err;
    bool failed;
    strbuf body;      /* the entry's statements */
    strbuf sizes;     /* its scratch: offsets and sizes */
    strbuf ptrs;      /* its scratch: the buffers' pointers */
    strbuf file;      /* file scope: constants */
    strbuf open;      /* context open, after the weights: packed and transposed weights */
    uint32_t rt;      /* RT_* bits: the runtime files, their float32 kernels */
    uint32_t rt64;    /* RT_* bits whose float64 kernels (names ending _f64) the code calls */
    int nbuf, nconst, npack;
    int nweights;
    const ry_var **weight_vars; /* the entry's weights, in table order */
    int nsyms;        /* the symbolic dims the code knows: the entry's, the weights' */
    const char **syms;
    ry_ptrmap last;   /* liveness: let-bound var -> index of the last let reading it */
    ry_ptrmap owner;  /* buffer (its C name's pointer) -> the last let reading any value over it */
    int cur;          /* the let being emitted */
    int nested;       /* inside an if's branches: nothing is computed in place */
    int njoin;        /* an if's results: r<k> */
    struct ry_c_pack { /* ctx->pack[i]: a weight made into a GEMM's b once, when the context opens */
        int weight;    /* its index in the weights table */
        bool trans;    /* read transposed */
        ry_dtype dtype; /* float32: packed into the GEMM's panels (RT_PACKED); float64: transposed */
        const char *K, *N; /* the GEMM's (K, N): constants (a reshaped weight is another pack) */
    } *packs;
    int pack_cap;
    /* control flow over data (emit_ctl.c): the globals the entry calls become
     * C functions over rt_val (rt/value.c), buffers come from the context's
     * arena, and dims known only at run time are C locals (_d<k>) */
    bool dyn;
    bool keep_all;     /* the program has refs: a frame's values may outlive it through one, so none is dropped */
    ry_module *m;
    const char *NAME;  /* the model's macro prefix (NAME_MAX_DEPTH) */
    strbuf funcs;      /* the C functions of globals and closures */
    strbuf protos;     /* their prototypes */
    int ntmp;          /* fresh locals */
    int nfn;           /* functions made */
    int nspec;         /* the globals' specializations made so far: key -> C name */
    const char **spec_key, **spec_name;
    int spec_cap;
    /* in a function being emitted: a parameter's dim symbol -> the local holding it */
    struct ry_c_symmap {
        int n;
        const char *from[64], *to[64];
    } syms_of_params;
    const char *name;  /* the model's C prefix (NAME_ctx) */
    ry_ptrmap bcast_dims; /* the locals emit_dims.c made by broadcasting at run time (its name -> 1): where
                           * one is 1 and the other not, the checker's type names the 1, so a result with
                           * such a dim is filled by the call, not checked against the entry's type */
} cemit;

/* What the files of an artifact are made from (export.c fills it). */
typedef struct cmodel {
    const char *name;        /* C prefix */
    const char *NAME;        /* the same in capitals, for macros */
    const char *entry;       /* the global's name */
    const char *source;      /* for comments */
    int nargs;               /* the C entry's data arguments */
    const ry_var **args;
    const char **arg_c;      /* their C names */
    const ry_type **arg_t;   /* their types as the export takes them: a ? dim named (x_dim1) */
    int nsyms;               /* symbolic dims: the C entry's first arguments */
    const char **syms;
    int nwsyms;              /* symbolic dims the weights fix (a vocabulary): constants */
    const char **wsyms;
    int64_t *wsym_values;
    int nouts;               /* results, flattened depth-first */
    const cval **outs;
    bool embed;
    bool blas;               /* GEMMs through CBLAS */
    bool dyn;                /* control flow over data (emit_ctl.c) */
    bool *out_dyn;           /* [nouts]: a dim only run time knows: the output is a NAME_array the call fills */
    bool *out_value;         /* [nouts]: an ADT value (or a tuple holding one): a NAME_value the call copies out */
    int nvalue_outs;
    int nadts;               /* the ADTs the inputs and results hold: constructors and tags in the header */
    const ry_typedef **adts;
    const ry_typedef *tree;  /* one of them that NAME_parse_tree reads, or NULL */
} cmodel;

/* Whether parameter p of the entry is an ADT value (NAME_value *), not a tensor. */
bool ry_c_is_value_arg(const ry_var *p);
/* Whether constructor k can be built from C: scalar fields and ADTs. */
bool ry_c_ctor_buildable(const ry_ctor *k);

/* The weights: tensors (borrowed) and names in the table's order, each
 * one's offset in the weights file, the file's size. */
typedef struct ry_c_weights {
    int n;
    const ry_tensor **ts;
    const char **names;
    size_t *offs;
    size_t size;
} ry_c_weights;

/* ---- emit_values.c: the ADT values the entry takes and returns ---- */
void ry_c_collect_adts(cemit *c, cmodel *md);
/* Whether a result of type t can be copied out as a NAME_value: tensors,
 * tuples and ADT values all the way down, no closure or ref. */
bool ry_c_value_result_ok(const ry_type *t);
void ry_c_write_value_decls(strbuf *b, const cmodel *md); /* NAME.h */
void ry_c_write_values(strbuf *b, const cmodel *md);      /* NAME.c: after fail() */

/* ---- emit_model.c: NAME.c (man: the weights file's manifest) ---- */
ry_status ry_c_write_model(strbuf *b, cemit *c, const cmodel *md, const ry_c_weights *w, const char *man);

/* ---- emit_files.c: the artifact's files other than NAME.c ---- */
void ry_c_write_header(strbuf *b, const cmodel *md);
void ry_c_write_makefile(strbuf *b, const cmodel *md);
void ry_c_write_readme(strbuf *b, const cmodel *md);
void ry_c_write_example(strbuf *b, const cmodel *md);
/* "int mlp_predict(mlp_ctx *ctx, int64_t n, const float *x, float *out0)" */
void ry_c_entry_signature(strbuf *b, const cmodel *md);
/* The C of a dtype code of the generated header ("MLP_FLOAT32"), and its
 * number (rt_val's dtype, rt/npy.c's index). */
const char *ry_c_dtype_code(const cmodel *md, ry_dtype d);
int ry_c_dtype_index(ry_dtype d);

/* ---- emit_fn.c ---- */
/* Emits the body of fn (the entry's optimized ANF) into c: its result in
 * *out. Located errors for constructs that cannot be exported. */
ry_status ry_c_emit_body(cemit *c, const ry_expr *fn, cval *const *params, cval **out);

/* A new tensor value with a fresh scratch buffer of type t (a tensor type
 * with constant or symbolic dims), or NULL after a located error at span. */
cval *ry_c_buffer(cemit *c, const ry_type *t, ry_span span);
/* Whether v is a scratch buffer (not a weight, input or constant) that
 * nothing reads after the let being emitted: its result may take it over. */
bool ry_c_dies_here(cemit *c, const cval *v);
/* A fresh scratch buffer of count (a C expression) elements of C type
 * ctype; its C name. */
const char *ry_c_scratch(cemit *c, const char *ctype, const char *count);
/* A view of v with the dims of tensor type t (same data). */
cval *ry_c_view(cemit *c, const cval *v, const ry_type *t);
/* The C expression of dim d ("256", "n"). */
const char *ry_c_dim(cemit *c, const ry_dim *d);
/* The element count of v as a C expression ("(int64_t)n * 784"). */
const char *ry_c_count(cemit *c, int ndim, const ry_dim *dims);
/* The C type of a dtype ("float", "double", "uint8_t", "int32_t"), or NULL. */
const char *ry_c_ctype(ry_dtype d);
/* The integer dtypes (bool is not one): int8 to int64, uint8, uint16. */
bool ry_c_is_int(ry_dtype d);
/* x converted to integer dtype d modulo 2^bits, as the CPU target stores
 * integers (a signed one through its unsigned type). */
const char *ry_c_wrap(cemit *c, ry_dtype d, const char *x);
/* The C limits of integer dtype d ("INT8_MIN", "INT8_MAX"; int64's for others). */
void ry_c_int_limits(ry_dtype d, const char **lo, const char **hi);
/* x (of dtype from) converted to dtype to as the CPU target's cast does:
 * integers wrap, floats to integers truncate and saturate (NaN: 0),
 * float16 through float32 (rt/half_widen.c, half_narrow.c: marked as needed). */
const char *ry_c_cast(cemit *c, ry_dtype from, ry_dtype to, const char *x);
/* A located error "export: ..."; returns RY_ERR. */
ry_status ry_c_fail(cemit *c, ry_span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A name in c's arena: printf into the arena. */
const char *ry_c_fmt(cemit *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The operator a call calls. */
const ry_op *ry_c_op(const ry_expr *call);
/* RY_OK if vs[0..n) are tensors of one float dtype, float32 or float64,
 * else a located error naming the op. */
ry_status ry_c_need_float(cemit *c, const ry_expr *call, const cval *const *vs, int n);
/* The call's axis attribute attr as an index into x's dims (negative
 * counts from the end; range not checked). */
int ry_c_attr_axis(const ry_expr *call, const cval *x, const char *attr);
/* RY_OK if the call's layout attribute attr is want or unset, else a
 * located error naming what the export takes. */
ry_status ry_c_layout_is(cemit *c, const ry_expr *call, const char *attr, const char *want);
/* Marks the runtime files of bits as needed in dtype d's copy (float32 or
 * float64); the suffix of that copy's kernel names ("" or "_f64"). */
const char *ry_c_kernel(cemit *c, uint32_t bits, ry_dtype d);
/* The result of a call of type t: a fresh buffer per tensor of it. */
cval *ry_c_result(cemit *c, const ry_type *t, ry_span span);
/* Whether v is a tensor of type t's dtype and dims (the same C expressions). */
bool ry_c_same_dims(const cval *v, const ry_type *t);
/* The product of v's dims [from, to) as a C expression. */
const char *ry_c_dims_count(cemit *c, const cval *v, int from, int to);

/* The environment of the code being emitted: ry_var* -> cval*. */
typedef struct ry_c_env {
    ry_ptrmap vars;
} ry_c_env;

/* The value of expression e (emitting its code), or NULL after a located error. */
cval *ry_c_value(cemit *c, ry_c_env *en, const ry_expr *e);
/* A tuple value of n fields (all NULL until set). */
cval *ry_c_tuple_val(cemit *c, int n);
/* A tensor value of type t over the data expression expr. */
cval *ry_c_tensor_val(cemit *c, const char *expr, const ry_type *t);
/* The pointers (and run-time dims) an if's or a match's branches all set,
 * declared before the branches; assign sets them from one branch's value. */
cval *ry_c_join(cemit *c, const ry_type *t, ry_span span);
void ry_c_assign(cemit *c, cval *join, const cval *v);
/* After every branch: a join's dims that each branch gave as one constant are that constant. */
void ry_c_join_settle(cemit *c, cval *join);
/* Liveness over a function body's let chain (in-place results). */
void ry_c_liveness(cemit *c, const ry_expr *body);
/* A fresh local's name: prefix and a number ("_v12"). */
const char *ry_c_tmp(cemit *c, const char *prefix);
/* "FILE:LINE:COL" of span, for the generated code's messages. */
const char *ry_c_where(cemit *c, ry_span span);

/* ---- emit_ctl.c: control flow over data (c->dyn) ---- */
/* Whether the entry fn needs it: a call of a global, match, constructors,
 * closures, refs, a parameter that is neither a tensor nor a tuple of them. */
bool ry_c_needs_dyn(const ry_expr *fn);
/* Whether any global of m makes or writes a ref. */
bool ry_c_module_has_refs(const ry_module *m);
cval *ry_c_match(cemit *c, ry_c_env *en, const ry_expr *e);
cval *ry_c_call_value(cemit *c, ry_c_env *en, const ry_expr *e); /* a global, closure or constructor call */
cval *ry_c_closure(cemit *c, ry_c_env *en, const ry_expr *fn, const ry_var *self);
cval *ry_c_global_value(cemit *c, const ry_expr *e);
cval *ry_c_ctor_value(cemit *c, ry_c_env *en, const ry_expr *ctor, int nargs, ry_expr *const *args, ry_span span);
cval *ry_c_ref(cemit *c, ry_c_env *en, const ry_expr *e);
/* An rt_val * expression holding v (boxing tensors and tuples into the arena). */
const char *ry_c_box(cemit *c, const cval *v, ry_span span);
/* The value of type t held by the rt_val * expression box. */
cval *ry_c_unbox(cemit *c, const char *box, const ry_type *t, bool params);
/* The statement that fails the call with rc and a message (a C string literal's text). */
const char *ry_c_fail_stmt(cemit *c, const char *rc, const char *msg);

/* ---- emit_dims.c ---- */
/* The type of op call e on arguments args with their dims as the code
 * knows them (C expressions where only run time knows them): the op's type
 * relation, then a concatenation's sum and a broadcast's run-time check
 * for dims it cannot name. NULL after a located error. */
ry_type *ry_c_call_type(cemit *c, const ry_expr *e, cval *const *args);

/* ---- emit_ops.c ---- */
/* The C for one operator call (call's callee an operator), its arguments
 * already values; *out its result. */
ry_status ry_c_emit_op(cemit *c, const ry_expr *call, cval *const *args, cval **out);

/* ---- emit_nn.c, emit_norm.c, emit_spatial.c, emit_layout.c and emit_index.c: more of the C target's table ---- */
typedef ry_status (*ry_c_emit_fn)(cemit *c, const ry_expr *call, cval *const *args, cval **out);
/* A file's table of emitters by operator name, and its lookup (NULL: none). */
typedef struct ry_c_emitter {
    const char *name;
    ry_c_emit_fn fn;
} ry_c_emitter;
ry_c_emit_fn ry_c_emitter_find(const ry_c_emitter *table, size_t n, const char *name);
/* The emitter of operator name in these files, or NULL. */
ry_c_emit_fn ry_c_emit_nn(const char *name);
ry_c_emit_fn ry_c_emit_layout(const char *name);
ry_c_emit_fn ry_c_emit_norm(const char *name);
ry_c_emit_fn ry_c_emit_spatial(const char *name);
ry_c_emit_fn ry_c_emit_index(const char *name); /* emit_index.c: gather_nd, scatter_nd, shape_of */
/* Code that fails call with RT_E_DIM, a located message naming what,
 * unless dims a and b (which the type checker could not compare) are equal
 * at run time; nothing where they are the same C expression. */
void ry_c_check_equal(cemit *c, const ry_expr *call, const ry_dim *a, const ry_dim *b, const char *what);
/* emit_bcast.c: broadcast_to_like and collapse_sum_like. */
ry_c_emit_fn ry_c_emit_bcast(const char *name);
/* A fused program of one instruction opc (a ry_fz_opcode) over args[0..n)
 * of one dtype, its result of dtype odt: an operator the fused language's
 * parser does not take on these dtypes (integers). */
struct ry_fz_prog;
const struct ry_fz_prog *ry_c_prog1(cemit *c, int opc, int n, cval *const *args, ry_dtype odt);

/* ---- emit_fused.c ---- */
/* A loop nest over the broadcast shape of outs[0] running the fused
 * program p: inputs ins[0..nin) (for a matmul epilogue, ins[0] is the
 * GEMM's result, acc), results outs[0..p->nout). */
ry_status ry_c_emit_fused(cemit *c, const struct ry_fz_prog *p, cval *const *ins, int nin, cval *const *outs,
                          ry_span span);

/* Checks at run time that small's dims broadcast to big's (each 1 or
 * big's) where only run time knows them; a failure is RT_E_DIM, the
 * message located at span and naming what. */
void ry_c_check_fits(cemit *c, const cval *small, const cval *big, const char *what, ry_span span);
/* out = x summed over the dims where out (which broadcasts to x) is 1. */
void ry_c_emit_collapse_sum(cemit *c, const cval *x, const cval *out);

#endif
