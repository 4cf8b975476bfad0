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
};

typedef struct cemit {
    ry_arena *a;
    ry_error *err;
    bool failed;
    strbuf body;      /* the entry's statements */
    strbuf sizes;     /* its scratch: offsets and sizes */
    strbuf ptrs;      /* its scratch: the buffers' pointers */
    strbuf file;      /* file scope: constants */
    strbuf open;      /* context open, after the weights: transposed weights */
    uint32_t rt;      /* RT_* bits */
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
    int *pack_of;     /* [2 w + t]: weight w's pack as a GEMM's b, read transposed (t = 1) or not; -1: none */
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
    int nsyms;               /* symbolic dims: the C entry's first arguments */
    const char **syms;
    int nwsyms;              /* symbolic dims the weights fix (a vocabulary): constants */
    const char **wsyms;
    int64_t *wsym_values;
    int nouts;               /* results, flattened depth-first */
    const cval **outs;
    bool embed;
    bool blas;               /* GEMMs through CBLAS */
} cmodel;

/* The weights: tensors (borrowed) and names in the table's order, each
 * one's offset in the weights file, the file's size. */
typedef struct ry_c_weights {
    int n;
    const ry_tensor **ts;
    const char **names;
    size_t *offs;
    size_t size;
} ry_c_weights;

/* ---- emit_model.c: NAME.c (man: the weights file's manifest) ---- */
ry_status ry_c_write_model(strbuf *b, cemit *c, const cmodel *md, const ry_c_weights *w, const char *man);

/* ---- emit_files.c: the artifact's files other than NAME.c ---- */
void ry_c_write_header(strbuf *b, const cmodel *md);
void ry_c_write_makefile(strbuf *b, const cmodel *md);
void ry_c_write_readme(strbuf *b, const cmodel *md);
void ry_c_write_example(strbuf *b, const cmodel *md);
/* The C of a dtype code of the generated header ("MLP_FLOAT32"). */
const char *ry_c_dtype_code(const cmodel *md, ry_dtype d);

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
/* A located error "export: ..."; returns RY_ERR. */
ry_status ry_c_fail(cemit *c, ry_span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A name in c's arena: printf into the arena. */
const char *ry_c_fmt(cemit *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The operator a call calls. */
const ry_op *ry_c_op(const ry_expr *call);
/* RY_OK if v is a float32 tensor, else a located error naming the op. */
ry_status ry_c_need_f32(cemit *c, const ry_expr *call, const cval *v);
/* The result of a call of type t: a fresh buffer per tensor of it. */
cval *ry_c_result(cemit *c, const ry_type *t, ry_span span);
/* The product of v's dims [from, to) as a C expression. */
const char *ry_c_dims_count(cemit *c, const cval *v, int from, int to);

/* ---- emit_ops.c ---- */
/* The C for one operator call (call's callee an operator), its arguments
 * already values; *out its result. */
ry_status ry_c_emit_op(cemit *c, const ry_expr *call, cval *const *args, cval **out);

/* ---- emit_nn.c and emit_layout.c: more of the C target's table ---- */
typedef ry_status (*ry_c_emit_fn)(cemit *c, const ry_expr *call, cval *const *args, cval **out);
/* The emitter of operator name in these files, or NULL. */
ry_c_emit_fn ry_c_emit_nn(const char *name);
ry_c_emit_fn ry_c_emit_layout(const char *name);

/* ---- emit_fused.c ---- */
/* A loop nest over the broadcast shape of outs[0] running the fused
 * program p: inputs ins[0..nin) (for a matmul epilogue, ins[0] is the
 * GEMM's result, acc), results outs[0..p->nout). */
struct ry_fz_prog;
ry_status ry_c_emit_fused(cemit *c, const struct ry_fz_prog *p, cval *const *ins, int nin, cval *const *outs,
                          ry_span span);

#endif
