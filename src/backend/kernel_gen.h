/*
 * kernel_gen.h: the one kernel generator of the device targets. It turns a
 * fused program (src/op/fused_prog.h: the fusion pass's groups, the GEMM
 * epilogues, and every elementwise operator as a program of one
 * instruction) into the source of a kernel, one work-item per element of
 * the result. A dialect is the table of spellings in which OpenCL C and
 * CUDA C differ (the kernel qualifier, the address space of buffers, the
 * work-item index, types); the generator is the same for both.
 *
 * Broadcasting: the caller collapses the index space (ry_gen_bcast) and
 * says per input whether it is read at the result's own index (DIRECT),
 * at element 0 (SCALAR) or through strides over the collapsed dimensions
 * (STRIDED); the kernel is specialized on those kinds and the rank, and
 * takes the dimensions and strides as arguments, so one build serves
 * every shape of that kind.
 *
 * Parameters, in order: n (elements of the result); per result its buffer
 * and element offset; per input its buffer and element offset; the rank
 * dimensions; per STRIDED input its rank strides. Integers are 64-bit.
 */
#ifndef RELAYC_BACKEND_KERNEL_GEN_H
#define RELAYC_BACKEND_KERNEL_GEN_H

#include "op/fused_prog.h"

struct ry_sbuf; /* below */

typedef struct ry_dialect {
    const char *name;           /* "opencl" */
    const char *prelude;        /* the first lines of every source */
    const char *kernel;         /* "__kernel void" */
    const char *global;         /* buffers' address space: "__global " */
    const char *index;          /* the work-item's flat index, as a 64-bit integer */
    const char *i64;            /* "long" */
    const char *(*type)(ry_dtype dt); /* element types; NULL: not on this device */
    const char *inf;            /* positive infinity: "INFINITY" */
    const char *nan;            /* a quiet NaN: "NAN" */
    /* float16: stored as half_storage ("half"; NULL: no float16), computed
     * in float (type(RY_FLOAT32)), as the CPU widens it; the spelling of
     * a load of element `index` of `ptr` as a float, and of a store */
    const char *half_storage;
    void (*half_load)(struct ry_sbuf *b, const char *ptr, const char *index);
    void (*half_store)(struct ry_sbuf *b, const char *ptr, const char *index, const char *value);
} ry_dialect;

typedef enum { RY_GEN_DIRECT, RY_GEN_SCALAR, RY_GEN_STRIDED } ry_gen_access;

/* A dtype's element type in memory ("half" for float16) and the type it
 * is computed in ("float" for float16); NULL where the dialect has none. */
const char *ry_gen_storage(const ry_dialect *d, ry_dtype dt);
const char *ry_gen_compute(const ry_dialect *d, ry_dtype dt);
/* b += `ptr[index]` read as its compute type, or the store of value
 * there (float16 through the dialect's half_load / half_store). */
void ry_gen_load(struct ry_sbuf *b, const ry_dialect *d, ry_dtype dt, const char *ptr, const char *index);
void ry_gen_store(struct ry_sbuf *b, const ry_dialect *d, ry_dtype dt, const char *ptr, const char *index,
                  const char *value);

/* The collapsed broadcast of nin shapes into the result's (out_nd, out):
 * merges neighbouring dimensions that every input reads the same way.
 * Fills *rank, dims[rank] and, per input, its access and strides[k][rank]
 * (in elements; 0 along broadcast dimensions). */
void ry_gen_bcast(int nin, const int *nd, const int64_t *const *shapes, int out_nd,
                  const int64_t *out, int *rank, int64_t *dims, ry_gen_access *access,
                  int64_t (*strides)[RY_MAX_RANK]);

/* The source of kernel `name` running p over inputs of the given access
 * kinds and rank (a malloc'd string), or NULL on out of memory or a dtype
 * the dialect has no type for. */
char *ry_gen_elemwise(const ry_dialect *d, const ry_fz_prog *p, const ry_gen_access *access,
                      int rank, const char *name);

/* A program of one instruction: op over nargs inputs of dtype dt giving
 * odt (p[0..1] its parameters: clip's bounds, leaky_relu's alpha), for
 * operators called alone (and on any dtype the device has). */
void ry_gen_single(ry_fz_prog *out, ry_fz_opcode op, int nargs, const ry_dtype *dts, ry_dtype odt,
                   const double *p);

/* A growable string (the generators' output). */
typedef struct ry_sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} ry_sbuf;
void ry_sbuf_add(ry_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


/* ---- reductions (kernel_gen_reduce.c) ----
 * One work-item per result element: its kept coordinates (kr collapsed
 * dimensions with their strides in x) give a base, then it folds the m
 * reduced elements (rr collapsed dimensions, strides) in C order. Floats
 * accumulate in double where the device has it (as the CPU does), integers
 * in 64 bits. Parameters: n, o, oo, x, xo, m, kd[kr], ks[kr], rd[rr], rs[rr]. */
typedef enum { RY_GEN_SUM, RY_GEN_MEAN, RY_GEN_MAX, RY_GEN_MIN, RY_GEN_ARGMAX, RY_GEN_ARGMIN,
               RY_GEN_SUMSQ /* the sum of squares (l2_normalize) */ } ry_gen_red;
char *ry_gen_reduce(const ry_dialect *d, ry_gen_red kind, ry_dtype in, ry_dtype out, bool f64acc,
                    int kr, int rr, bool last_index, const char *name);

/* softmax / log_softmax along an axis: one work-item per (outer, inner)
 * position, three passes over the axis (max, sum of exp, write).
 * Parameters: n (= outer * inner), o, oo, x, xo, len, inner. */
char *ry_gen_softmax(const ry_dialect *d, ry_dtype dt, bool log, const char *name);

/* Collapses x's dimensions into the kept and reduced groups of
 * mask (reduced where true): kd/ks the kept extents and strides, rd/rs the
 * reduced ones, *m the reduced count. */
void ry_gen_reduce_dims(int nd, const int64_t *shape, const bool *mask, int *kr, int64_t *kd,
                        int64_t *ks, int *rr, int64_t *rd, int64_t *rs, int64_t *m);

/* ---- what was generated, for checking another dialect ----
 * Every call of a generator above can be reported to an observer as a
 * request; ry_gen_request_source writes the same kernel in any dialect.
 * (The CUDA dialect's test builds every kernel the OpenCL runs of the
 * corpora asked for with NVRTC.) */
typedef enum { RY_GEN_ELEMWISE, RY_GEN_REDUCE, RY_GEN_SOFTMAX } ry_gen_kind;
typedef struct ry_gen_request {
    ry_gen_kind kind;
    ry_fz_prog prog;                       /* elemwise */
    ry_gen_access access[RY_FZ_MAX_IN + 8];
    int rank;
    ry_gen_red red;                        /* reduce */
    ry_dtype in, out;                      /* reduce; softmax: in */
    bool f64acc, last, log;
    int kr, rr;
} ry_gen_request;
void ry_gen_set_observer(void (*fn)(const ry_gen_request *r, void *ctx), void *ctx);
char *ry_gen_request_source(const ry_gen_request *r, const ry_dialect *d, const char *name);
void ry_gen_observe(const ry_gen_request *r); /* the generators' report */

#endif
