/*
 * vm_impl.h: what the VM's files share (private): the instruction set, a
 * compiled function, the program and the machine's state. vm_compile.c
 * turns ANF into instructions; vm_plan.c gives each function its memory
 * plan; vm_exec.c runs them; vm_ops.c does the operator calls (fast and
 * general path, results in planned storage). The program's target
 * (src/backend/target.h) gives the kernels, their facts and the result
 * buffers.
 */
#ifndef RELAYC_VM_IMPL_H
#define RELAYC_VM_IMPL_H

#include "backend/target.h"
#include "relayc/op.h"
#include "relayc/vm.h"
#include "tensor/oom.h"

/* ---- a pointer-keyed map (open addressing, in an arena) ---- */

/* ---- instructions ----
 * Operands are register numbers within the current frame. Jump targets are
 * instruction indices within the function. */
typedef enum vm_opcode {
    I_MOVE,      /* dst = a */
    I_LOADV,     /* dst = value (a constant, global closure, ctor value) */
    I_CLOSURE,   /* dst = closure of fn over args[0..n) (-1: itself) */
    I_OP,        /* dst = op(args[0..n)) */
    I_TUPLE,     /* dst = (args[0..n)) */
    I_PROJ,      /* dst = a.b */
    I_CTOR,      /* dst = ctor(args[0..n)) */
    I_CALL,      /* dst = a(args[0..n)): a closure or constructor value */
    I_TCALL,     /* return a(args[0..n)), reusing this frame */
    I_CALLG,     /* dst = fn(args[0..n)): a global known at compile time */
    I_TCALLG,    /* return fn(args[0..n)) (calls: b = 1 checks the arguments
                    against the callee's annotations on entry) */
    I_JMPF,      /* if a (a bool scalar) is false, go to b */
    I_JMP,       /* go to b */
    I_TESTCTOR,  /* unless a is built by ctor (with n fields), go to b */
    I_TESTTUP,   /* unless a is an n-tuple, go to b */
    I_FIELD,     /* dst = field b of a (ADT value or tuple) */
    I_MATCHFAIL, /* error: no clause matched a */
    I_REFNEW,    /* dst = ref(a) */
    I_REFREAD,   /* dst = ref_read(a) */
    I_REFWRITE,  /* ref_write(a, b); dst = () */
    I_RET,       /* return a */
    I_OPVALUE    /* error: an operator used as a value (unchecked modules) */
} vm_opcode;

typedef struct vm_fn vm_fn;

/* An operator call settled at compile time. When every argument has a
 * static tensor type, or is a tuple of them (keys), and so has every
 * result (out_type), the hot path compares shapes, allocates the outputs
 * and calls the kernel. */
/* An input's dtype and shape laid out for a quick comparison. */
typedef struct vm_key {
    int dtype, ndim;
    int64_t shape[RY_MAX_RANK];
} vm_key;

/* The most input tensors a fast-path call takes (tuple arguments, as
 * concatenate's, count their fields). */
#define VM_MAX_IN 16

typedef struct vm_sig {
    const vm_key *keys;        /* the nin input tensors' (tuple arguments flattened) */
    int nin;
    const ry_type *out_type;   /* tensor or tuple of tensors */
    int nout;                  /* tensors in out_type */
    const ry_type **outs;      /* out_type's tensors, depth first */
    void *mem;                 /* a learned one's block holding all of it (owned) */
} vm_sig;

/* Result types by input shapes: the compile-time one, and those the run
 * time learned for symbolic or Any dims (up to VM_SIGS, then replaced in
 * turn; each learned one owns its memory, so learning never stops and
 * never grows the program: a Tree-LSTM's every sentence length stays). */
#define VM_SIGS 64
#define VM_NO_AXIS (-1000)

typedef struct vm_opcall {
    const ry_expr *call;
    const ry_op *op;
    const ry_kernel *kernel;   /* the target's (never NULL once compiled) */
    int nsig;                  /* 0: every call takes the general path */
    int hit;                   /* the signature the last call matched */
    int relearned;             /* times the run time learned one */
    int capsig;                /* sig's entries (owned array when sig_owned) */
    bool sig_owned;
    bool zeros_like;           /* the op is zeros_like (a known zero, rows_ops.h) */
    bool rows_rule;            /* the op has row-sparse rules (rows_ops.h) */
    vm_sig *sig;
    ry_value *zero;            /* zeros_like: the known zero it gave last (owned) */
    int64_t prof_ns, prof_calls; /* time in the call and calls, while profiling */
    int64_t prof_kernels;      /* ... and the kernels they ran: a batched group of
                                  calls is one (vm_batch.c) */
    uint8_t batch;             /* ry_op_batch, RY_BATCH_NO where the attributes forbid it */
    int batch_axis;            /* the op's integer `axis` attribute; VM_NO_AXIS: none */
    int batch_misses;          /* the agenda's runs of it in a row that stacked nothing */
    int64_t prof_dev_ns;       /* ... and the device's time in its kernels (device targets) */
    ry_value *results;         /* a call with several results: the tuple it gave last,
                                  whose buffers the next call reuses when nothing
                                  else holds them (owned) */
} vm_opcall;

typedef struct insn {
    uint8_t op;         /* vm_opcode */
    int dst, a, b, n;
    int *args;
    int nkill;          /* registers dead after this instruction: released */
    int *kill;          /* (for calls: before entering the callee) */
    int nkill_jump;     /* branches: registers dead on the taken edge only */
    int *kill_jump;
    int nkill_fall;     /* ... and on the fall-through edge only */
    int *kill_fall;
    /* memory plan (vm_plan.c): the storage slot of an I_OP's tensor result
     * or of an I_TUPLE (-1: none); for I_OP, the arguments whose buffer
     * the result may take over (bit k: argument k dies here and has the
     * result's type), and the register of a ref this result is written
     * back into by the next instruction (-1: none), whose old value may
     * then be updated in place (the adjoint accumulation of AD). */
    int slot;
    uint8_t inplace;
    int refacc;
    /* deferred accumulation (vm_defer.c): for an I_OP `ref := ref + a^T c`
     * (a fused.matmul with transpose_a whose epilogue adds the ref's
     * value), the ref's register (-1: not such); for the I_REFREAD just
     * before it, lazy_read: its value goes only into that accumulation */
    int defer_ref;
    bool lazy_read;
    union {
        ry_value *value;         /* I_LOADV (owned by the program) */
        vm_fn *fn;               /* I_CLOSURE, I_CALLG, I_TCALLG */
        vm_opcall *opcall;       /* I_OP */
        const ry_ctor *ctor;     /* I_CTOR, I_TESTCTOR */
    };
    const ry_expr *e;   /* the expression, for messages */
    ry_span span;
} insn;

/* One function: a global or a function expression. Registers 0..nfree-1
 * hold the captured variables (in `free` order), nparams parameters
 * follow, then locals and temporaries. */
struct vm_fn {
    const ry_expr *func;   /* the ANF function expression closures point to */
    const char *name;      /* the global's name, or NULL */
    int id;                /* its index in the program's fns */
    int *stretch;          /* per instruction: the last jump target at or before it
                              (vm_batch.c's agenda; in the program's arena; NULL: not yet) */
    int nfree;
    const ry_var **free;
    int nparams;
    int nregs;
    bool check;            /* annotations with Any/symbolic dims: check at entry */
    bool compiled;
    insn *code;
    int ncode, capcode;
    /* memory plan: nslots storage slots per activation; slot_bytes[s] the
     * size class (0: not known at compile time); the tuple slots, last
     * built first (emptied when an activation starts, see vm_exec.c).
     * Slot sets of finished activations wait in spare[] for the next. */
    int nslots;
    size_t *slot_bytes;
    int ntupslots;
    int *tupslots;
    ry_value ***spare;
    int nspare, capspare;
    /* vm_final.c (planned on the first call with ry_vm_opts.on_final):
     * field final_field[j] of the returned (result, gradients) pair's
     * second tuple is final once instruction final_pc[j] has run (-1: an
     * argument), j in pc order; nfinal 0: not that shape */
    bool final_planned;
    int nfinal;
    int *final_pc, *final_field, *final_reg;
};

struct ry_vm_program {
    ry_module *m;
    ry_arena *arena;       /* functions, code, op types */
    vm_fn **fns;
    int nfns, capfns;
    ry_ptrmap fnmap;            /* function expression (ANF and original) -> vm_fn* */
    int nglobals;          /* m's globals when compiled (m may grow later) */
    vm_fn **gfns;          /* per global of m, in order */
    ry_value **gvals;      /* per global: its closure value */
    ry_value **owned;      /* cached values to release */
    int nowned, capowned;
    ry_vm_stats stats;
    struct vm_machine *idle; /* the machine of the last call, kept for the next */
    const ry_target *target; /* where the kernels run; result buffers come from it */
    ry_tensor *zero_base;  /* known zeros are views of this zero block (rows_ops.h) */
    ry_pool *pool;         /* small result buffers (the target's pool_new) */
    bool profile;          /* time every operator call (vm_profile.c) */
    ry_device_counters prof_from; /* the device's copies when profiling began */
};

/* ---- the machine ---- */
typedef struct vframe {
    vm_fn *fn;
    int pc;
    long base;             /* first register in mc->regs */
    int ret;               /* caller's register for the result; -1: the run's */
    ry_value **S;          /* the activation's storage slots (fn->nslots) */
    ry_value *clos;        /* the closure it was entered through (held), whose
                              captured values its first fn->nfree registers
                              borrow; NULL: none */
} vframe;

typedef struct vm_machine {
    ry_vm_program *prog;
    ry_error *err;
    bool training;
    bool plan;             /* use the memory plan (ry_vm_opts.no_plan unset) */
    bool sparse_rows;      /* ry_vm_opts.sparse_rows: row-sparse values (rows_ops.h) */
    uint64_t rng;
    long max_depth;
    ry_arena *scratch;     /* operator types on the general path */
    vframe *fs;
    long nf, capf;
    ry_value **regs;
    long top, capr;
    ry_value **argbuf;     /* a call's arguments in flight */
    int capargs;
    /* ry_vm_opts.on_final, and the entry's next field to report */
    void (*on_final)(void *ctx, int field, const ry_value *v);
    void *final_ctx;
    int final_next;
    /* automatic batching (vm_batch.c): with batching set, the machine
     * stops before an operator call that may be stacked (parked: its frame's
     * pc is at that I_OP) and the agenda runs it, with others like it */
    bool batching;
    bool parked;
    /* ry_vm_opts.defer_accumulation: the rows of accumulations `ref :=
     * ref + a^T c` wait in pend (one entry per ref) and run as one GEMM
     * when the ref is read otherwise (vm_defer.c) */
    bool defer;
    struct vm_pend *pend;
    int npend, cappend;
} vm_machine;

/* vm_profile.c: runs I (an I_OP) through vm_run_op, timing it. */
ry_status vm_run_op_timed(vm_machine *mc, const insn *I, ry_value **R, ry_value **S,
                          ry_value **out);

/* vm_exec.c, for the batching agenda (vm_batch.c): a machine for one
 * call (get), given back when done (put); start enters fn (taken over)
 * with args (borrowed) and runs until done (*out set) or parked;
 * resume continues a parked machine the same way once deliver has
 * put v (taken over) into the parked call's register. */
vm_machine *vm_machine_get(ry_vm_program *p, const ry_vm_opts *opts, ry_error *err);
void vm_machine_put(ry_vm_program *p, vm_machine *mc);
ry_status vm_machine_start(vm_machine *mc, ry_value *fn, int nargs, ry_value *const *args,
                           ry_value **out);
ry_status vm_machine_resume(vm_machine *mc, ry_value **out);
void vm_machine_deliver(vm_machine *mc, ry_value *v);
/* The closure of global entry (borrowed), which must take nargs. */
ry_status vm_entry(const ry_vm_program *prog, const char *entry, int nargs, ry_value **fn,
                   ry_error *err);
/* vm_batch.c: whether mc parks at I (registers R) */
bool vm_batch_parks(const vm_machine *mc, const insn *I, ry_value *const *R);

/* vm_defer.c: plan marks f's deferrable accumulations (defer_ref,
 * lazy_read); take defers I's call when it may (*taken; *out: the
 * ref's unchanged value); force runs the rows pending on ref (a ref
 * value) into its value; flush forces all; drop releases all unrun
 * (after an error). */
void vm_defer_plan(vm_fn *f);
ry_status vm_defer_take(vm_machine *mc, const insn *I, ry_value **R, ry_value **out, bool *taken);
ry_status vm_defer_force(vm_machine *mc, ry_value *ref, ry_span span);
ry_status vm_defer_flush(vm_machine *mc);
/* ref_write(ref, v): a value other than the ref's own replaces what is pending */
void vm_defer_overwrite(vm_machine *mc, const ry_value *ref, const ry_value *v);
void vm_defer_drop(vm_machine *mc);

/* vm_ops.c */
ry_status vm_run_op(vm_machine *mc, const insn *I, ry_value **R, ry_value **S, ry_value **out);
bool vm_type_static(const ry_type *t);
/* The keys of n static tensor types (in a). */
vm_key *vm_keys_of(ry_arena *a, int n, const ry_type *const *types);
/* Frees what operator calls learned or cached while running (learned
 * signatures, known zeros). */
void vm_opcalls_free(ry_vm_program *p);

/* vm_plan.c: storage slots and in-place decisions for a compiled function
 * (after liveness; live_in: per instruction, the registers live on entry,
 * words 64-bit words each). */
void vm_plan_fn(ry_vm_program *p, vm_fn *f, const uint64_t *live_in, int words);
/* vm_exec.c: frees the machine a program keeps between calls, and the
 * slot sets a function keeps between activations */
void vm_machine_drop(ry_vm_program *prog);
void vm_fn_free_slots(vm_fn *f);

/* vm_final.c: plans f's reports (once), and reports the fields final
 * before instruction pc of the run's first frame (pc = ncode: all). */
void vm_final_plan(ry_vm_program *p, vm_fn *f);
void vm_final_report(vm_machine *mc, const vframe *fr, int pc);

/* vm_compile.c */
vm_fn *vm_fn_of(const ry_vm_program *prog, const ry_expr *func);
/* vm_fn_of, compiling func first if this program has not (errors in err). */
vm_fn *vm_fn_lazy(ry_vm_program *prog, const ry_expr *func, ry_error *err);

#endif
