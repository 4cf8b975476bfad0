/*
 * interp_impl.h: what the interpreter's files share (private): a pointer-
 * keyed hash map, the per-function analysis (free variables, environment
 * slots, shared nodes) and the machine's state (frame stack, operand stack,
 * activations). interp.c runs the machine; interp_info.c analyses functions;
 * interp_ops.c runs operators, matches patterns and checks arguments.
 */
#ifndef RELAYC_INTERP_IMPL_H
#define RELAYC_INTERP_IMPL_H

#include "relayc/interp.h"
#include "relayc/op.h"
#include "tensor/oom.h"


/* ---- per-function analysis, computed once per function expression ----
 * Slots 0..nfree-1 hold the captured free variables (in `free` order), the
 * parameters follow, then let- and pattern-bound variables, then one memo
 * slot per shared node (a node with several parents in the DAG). */
typedef struct fninfo {
    const ry_expr *fn;
    int nfree;
    const ry_var **free;
    int nslots;
    ry_ptrmap slots; /* ry_var* or shared ry_expr* -> slot index */
} fninfo;

/* ---- the machine ---- */

/* One function invocation's environment. */
typedef struct act {
    const fninfo *info;
    ry_value *slot[];
} act;

typedef enum frame_kind {
    K_CALL,      /* evaluating callee then args onto the operand stack */
    K_LET,       /* value done: bind and continue with the body */
    K_IF,        /* condition done */
    K_MATCH,     /* scrutinee done */
    K_TUPLE,     /* fields onto the operand stack */
    K_PROJ,      /* tuple done */
    K_REF,       /* initial value done */
    K_REF_READ,  /* ref done */
    K_REF_WRITE, /* i == 0: ref done; i == 1: value done */
    K_MEMO,      /* a shared node done: remember it in slot */
    K_RETURN     /* a function body done: restore the caller's activation */
} frame_kind;

typedef struct frame {
    frame_kind kind;
    int i;             /* next operand to evaluate (K_CALL, K_TUPLE, K_REF_WRITE) */
    const ry_expr *e;  /* the expression this frame belongs to */
    union {
        long base;     /* operand stack height when the frame was pushed */
        int slot;      /* K_MEMO */
        act *saved;    /* K_RETURN: the caller's activation */
    };
} frame;

typedef struct machine {
    ry_module *m;
    ry_error *err;
    bool training;
    uint64_t rng;
    long max_depth;
    ry_arena *info_arena;  /* fninfos and machine maps */
    ry_arena *tmp;         /* analysis temporaries, reset per function */
    ry_arena *scratch;     /* operator types, reset per operator call */
    ry_ptrmap infos;          /* RY_EXPR_FUNC -> fninfo* */
    ry_ptrmap globals;        /* RY_EXPR_GLOBAL node -> ry_value* closure (owned) */
    frame *fs;
    long nf, capf;
    ry_value **vs;
    long nv, capv;
    act *cur;
} machine;

/* interp_info.c: NULL when out of memory */
const fninfo *info_get(machine *mc, const ry_expr *fn);

/* interp_ops.c */
ry_status run_op(machine *mc, const ry_expr *call, int nargs, ry_value *const *args,
                 ry_value **out);
bool pat_matches(const ry_pattern *p, const ry_value *v);
/* Binds p's variables to parts of v in a (slots looked up in a's info). */
void pat_bind(const ry_pattern *p, ry_value *v, act *a);
/* Checks args against fn's annotated parameter types; errors at span. */

#endif
