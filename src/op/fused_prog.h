/*
 * fused_prog.h: the small program language of the fused operators
 * (fused.elemwiseN, fused.matmulN; src/op/fused.c), shared by their type
 * relations, the fusion pass that writes the programs (src/pass/fuse.c) and
 * the CPU executor that runs them (src/backend/cpu/fused_exec.c).
 *
 * A program is the `code` attribute of a fused call, one elementwise
 * operator call per instruction, each naming its operands:
 *
 *   code="greater(x0, 0f); zeros_like(x1); where(t0, x1, t1)"
 *
 * xK is argument K of the call, tI the result of instruction I, `acc` the
 * GEMM result of a fused.matmul (whose x0 and x1 are the GEMM's operands
 * and are not elementwise inputs), literals are Relay's (0f, 0.5f, 1f64,
 * True); attributes as Relay writes them (clip(t0, a_min=0f, a_max=6f),
 * cast(x0, dtype=float64)). The last instruction gives the result, unless
 * the program ends with a list of instruction results, `(t5, t0, t3)`: the
 * call then returns that tuple (2 to RY_FZ_MAX_OUT values; the fusion pass
 * writes one when values inside a group are also used after it). Every
 * value has the broadcast shape of the inputs it depends on, so the results
 * have the broadcast shape of all inputs. dtypes follow Relay's rules
 * (operands of one dtype, comparisons give bool); programs compute in
 * float32, float64 and bool only.
 */
#ifndef RELAYC_OP_FUSED_PROG_H
#define RELAYC_OP_FUSED_PROG_H

#include "relayc/op.h"

#define RY_FZ_MAX_IN 8      /* input slots: call arguments (the VM's fast path takes 8) */
#define RY_FZ_MAX_INS 48    /* instructions */
#define RY_FZ_MAX_CONST 32  /* distinct literals */
#define RY_FZ_MAX_OUT 8     /* results of a program ending in a list (the VM's fast path takes 8) */

typedef enum ry_fz_opcode {
    /* binary, operands of one dtype */
    RY_FZ_ADD, RY_FZ_SUB, RY_FZ_MUL, RY_FZ_DIV, RY_FZ_POW, RY_FZ_MAX, RY_FZ_MIN,
    /* comparisons (float or bool operands) and logic (bool): bool results */
    RY_FZ_EQ, RY_FZ_NE, RY_FZ_LT, RY_FZ_LE, RY_FZ_GT, RY_FZ_GE, RY_FZ_AND, RY_FZ_OR,
    /* unary */
    RY_FZ_NEG, RY_FZ_EXP, RY_FZ_LOG, RY_FZ_SQRT, RY_FZ_RSQRT, RY_FZ_TANH, RY_FZ_SIGMOID,
    RY_FZ_ABS, RY_FZ_RELU, RY_FZ_LEAKY, RY_FZ_CLIP, RY_FZ_NOT, RY_FZ_CAST, RY_FZ_COPY,
    RY_FZ_ZEROS, RY_FZ_ONES,
    /* where(cond, x, y) */
    RY_FZ_WHERE,
    RY_FZ_NOPS
} ry_fz_opcode;

/* Values are numbered: input slots [0, nin), literals [nin, nin + nconst),
 * then one per instruction. For fused.matmul, slot 0 is `acc` and slot K-1
 * is argument xK (K >= 2); for fused.elemwise slot K is xK. */
typedef struct ry_fz_ins {
    ry_fz_opcode op;
    ry_dtype dt;   /* the operands' dtype (where: x's and y's) */
    ry_dtype odt;  /* the result's */
    int nargs;
    int a[3];      /* operand value numbers */
    double p[2];   /* clip: a_min, a_max; nn.leaky_relu: alpha */
} ry_fz_ins;

typedef struct ry_fz_prog {
    bool acc;                       /* a fused.matmul epilogue */
    int nin;                        /* input slots */
    ry_dtype in_dt[RY_FZ_MAX_IN];
    int nconst;
    double cval[RY_FZ_MAX_CONST];
    ry_dtype cdt[RY_FZ_MAX_CONST];
    int nins;
    ry_fz_ins ins[RY_FZ_MAX_INS];
    int last_use[RY_FZ_MAX_IN + RY_FZ_MAX_CONST + RY_FZ_MAX_INS]; /* by value: last reader */
    ry_dtype out_dt;                /* the (first) result's */
    int nout;                       /* results: 1, or the list's length */
    int outs[RY_FZ_MAX_OUT];        /* their value numbers (instruction results) */
    ry_dtype out_dts[RY_FZ_MAX_OUT];
} ry_fz_prog;

/* The compiled program of `code` for inputs of dtypes dts[0..nin) (for a
 * matmul epilogue, acc: dts[0] is the GEMM result's). Programs are
 * compiled once and cached (thread-safe); the result lives until the
 * process ends. Errors (syntax, unknown operator, operand or dtype
 * mismatch) are located at span and return NULL. */
const ry_fz_prog *ry_fz_get(const char *code, bool acc, int nin, const ry_dtype *dts,
                            ry_span span, ry_error *err);

/* The opcode of a Relay operator that programs can hold, by its registry
 * name ("add", "nn.relu", ...); -1 if none. */
int ry_fz_opcode_of(const char *op_name);
/* The program name of an opcode (TVM's operator name). */
const char *ry_fz_op_name(ry_fz_opcode op);

#endif
