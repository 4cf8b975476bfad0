/*
 * vm.h: the compiled execution engine, a register virtual machine for the
 * whole language (control flow, recursion, closures, ADTs, refs).
 *
 * Why a register VM over A-normal form. ANF (ry_anf) names every
 * intermediate result, so each let-bound variable becomes one register of a
 * fixed-size frame and each let value becomes one instruction whose operands
 * are registers: no expression tree is walked at run time, no variable is
 * looked up in a hash map, no continuation frame is pushed per
 * subexpression (the interpreter's costs). Everything that does not depend
 * on run-time values is settled once, at ry_vm_compile: the operator, its
 * kernel function pointer and attributes, the result type of every operator
 * call whose inputs have static shapes (the hot path then only allocates
 * the outputs and calls the kernel; a cheap shape comparison guards it, and
 * calls with Any or symbolic dims run the type relation at run time, as
 * ry_op_run does), the global a call goes to, the registers a closure
 * captures, and the tests a nested pattern makes. Compared with generating
 * C per module, a VM costs nothing to compile (training compiles each
 * model once, in well under a second) and keeps the whole language,
 * including first-class closures and recursion, in one small machine; the
 * per-instruction overhead is a switch, small next to a kernel.
 *
 * A register dies at its last use (liveness over the forward-only control
 * flow, computed at compile time, including the edges of branches), so
 * intermediate tensors are released as early as the program allows.
 *
 * Memory plan. At compile time each function's operator results get
 * storage slots: values whose live intervals do not overlap share a slot
 * (best fit by size class, 64-byte aligned), and a result may be written
 * over an argument that dies at the call when the operator's kernel allows
 * out == in (elementwise operators) and the types agree. An activation
 * takes a set of slots that outlives it (kept by the program for the next
 * activation), so a training step that repeats its shapes finds its
 * buffers, tensors and values where the last step left them and allocates
 * nothing (a static-shape gradient step: zero allocations by the VM). Run
 * time decides by reference counts whether a buffer is really free: a
 * value still held (by a tuple, a ref, a closure, the caller) is never
 * overwritten; the slot takes a new buffer and the old one lives on with
 * its holders (a Tree-LSTM's forward values, held by the backward pass's
 * closures, are such: they cost a fresh buffer each). In place applies to a value that only
 * the dying register (and its slot, or the ref the result is written back
 * into: AD's adjoint accumulation) holds, whose tensor owns its buffer.
 * Operator calls whose shapes are symbolic or Any learn their result type
 * per input shapes (a few per call) and then take the fast path.
 *
 * Threads. A program is used by one thread at a time; separate programs
 * compiled from one module may run in separate threads at once (one per
 * worker): they share only the module, which ry_vm_compile extends with
 * ANF forms under a process-wide lock and which running never writes, and
 * the allocator of large result buffers, which is locked. Values given to
 * calls in different threads must be distinct objects (value reference
 * counts are not atomic; tensors' are, so the tensors may be shared).
 *
 * Reuse across calls. Besides its storage slots, a program keeps a pool
 * of small result buffers (size-class free lists: the buffers a
 * recursion's closures hold come back for the next step; locked, as its
 * buffers may be freed on any thread and outlive it), a known zero per
 * zeros_like call site (with sparse_rows), and for calls whose shapes
 * depend on the data the result types learned per input shape (64 per
 * call, the oldest learned giving way); value and tensor headers come
 * from per-thread block caches. A warm step of a static-shape program, or
 * of a recursion over inputs of sizes seen before, allocates nothing of
 * the VM's own. Everything is freed by ry_vm_free (a pool once its last
 * buffer is back).
 *
 * Frames and registers live on heap stacks, so deep recursion in the
 * program (100,000 calls and more) never grows the C stack; depth is bounded
 * by opts->max_depth frames with a located error. Calls in tail position
 * reuse the caller's frame. Values are those of value.h (reference counted),
 * so results, and closures, are interchangeable with the interpreter's:
 * a closure the VM makes points at the (ANF) function expression in the
 * module with its captured variables, as the interpreter's do.
 */
#ifndef RELAYC_VM_H
#define RELAYC_VM_H

#include <stdio.h>

#include "relayc/target.h"
#include "relayc/value.h"

RY_BEGIN_API

typedef struct ry_vm_program ry_vm_program;

typedef struct ry_vm_opts {
    bool training;        /* nn.dropout active, batch_norm in training mode */
    uint64_t seed;        /* for dropout's random state (as ry_interp_opts) */
    long max_depth;       /* frame stack limit; 0: default (10M) */
    /* Deep recursion (a 100,000-level tree, a very long sequence) stops
     * with a located error before memory runs out: once the frame stack
     * is 256 deep, every 256th call checks that this process's resident
     * memory is at most max_resident bytes, or with 0 that the machine
     * (and its cgroup) keeps a twentieth of its memory, at least 256 MiB,
     * free. */
    size_t max_resident;
    /* Results may hold RY_VAL_ROWS values (value.h) where a row-sparse
     * gradient (take's along axis 0: a scatter_nd into zeros_like) reaches
     * the result unconsumed. false: the engine makes none, and results
     * are dense (a row-sparse argument is densified where an operator
     * reads it). */
    bool sparse_rows;
    /* Memory planning and in-place updates off: every operator result in
     * a fresh buffer (results are bitwise the same; for tests). */
    bool no_plan;
    /* On a device target: the result stays on the device (a trainer's
     * gradients). false: it is copied to the host before ry_vm_call
     * returns. Arguments on the host are copied to the device either way
     * (once per call; those already there are not copied). */
    bool keep_on_device;
    /* When the entry runs straight through (no branch or tail call in its
     * own body) and returns (result, (g0, g1, ...)) built there, as a
     * gradient program does: on_final(final_ctx, k, gk) as soon as gk is
     * computed, while the rest of the program runs (a data-parallel
     * trainer starts reducing gradients that are ready). gk is borrowed
     * and will not change; each field is reported once, in the order the
     * program finishes them, on the calling thread, and none after an
     * error. Entries of any other shape report nothing. NULL: none. */
    void (*on_final)(void *ctx, int field, const ry_value *v);
    void *final_ctx;
    /* Weight gradients as one GEMM: an accumulation `ref := ref + a^T c`
     * (AD's weight gradient of a GEMV, one row of a and of c per call)
     * does not run at once; its rows wait, and when the ref is read for
     * anything but the next such accumulation, they run as one GEMM
     * (K = all rows) into it. A Tree-LSTM's 750 x 300 outer product per
     * node becomes one product per tree. The same values to float32
     * rounding (the rows are summed in one kernel, not one by one). */
    bool defer_accumulation;
} ry_vm_opts;

/* Compiles every global function of the type-checked module m for target t
 * (NULL: the CPU; target.h): its kernels are t's, and an operator t has no
 * kernel for is an error here, located at the call. On a device target,
 * the program's constants are copied to the device here, once; tensors
 * stay on the device from kernel to kernel, and the host reads one only
 * where it must: an `if` condition (one element), the result (see
 * ry_vm_opts.keep_on_device). Control flow, closures, ADT cells and refs
 * stay host objects that hold device tensors. The program
 * keeps pointers into m (its nodes, constants and the ANF forms it adds to
 * m's arena): free it before m, and recompile after changing m. Several
 * threads may compile programs from one m at once (nothing else may change
 * m meanwhile). On error *out is NULL and err is set (located). */
ry_status ry_vm_compile(ry_module *m, const ry_target *t, ry_vm_program **out, ry_error *err);

/* Calls global `entry` with args (borrowed). Arguments are checked against
 * the entry's annotated parameter types as the interpreter checks them. On
 * success *out is a new reference. Run-time errors (a failed match?, a
 * shape that disagrees with an Any or symbolic signature, a kernel error,
 * running out of memory, the engine's own included, a frame stack deeper
 * than opts->max_depth) come back located at the expression that failed,
 * with everything the run held freed; the program stays usable. opts may be
 * NULL. The program may be called any number of times, but not from two
 * threads at once (compile one program per thread). */
ry_status ry_vm_call(ry_vm_program *prog, const char *entry, int nargs, ry_value *const *args,
                     const ry_vm_opts *opts, ry_value **out, ry_error *err);

/* Applies a closure value (one made by this program, a global of its
 * module, or a constructor) to args (borrowed). */
ry_status ry_vm_apply(ry_vm_program *prog, ry_value *fn, int nargs, ry_value *const *args,
                      const ry_vm_opts *opts, ry_value **out, ry_error *err);

/* Automatic batching: count calls of global `entry`, call j with
 * args[j * nargs .. (j + 1) * nargs) (borrowed), run together; outs[j]
 * (count entries) gets call j's result (a new reference), as ry_vm_call
 * would give it, to float32 rounding (stacked kernels sum in another
 * order). Each call runs as a machine of its own until it reaches an
 * operator call that may be stacked (ry_op.batch: elementwise maps,
 * dense/matmul against a weight every call shares, fused kernels of
 * them) and waits there; when all wait or are done, the call site where
 * most wait runs as one kernel over their arguments stacked along axis 0
 * (B GEMVs against one weight become one GEMM) and those calls go on.
 * A gradient program batches its backward pass the same way (the
 * backpropagators' calls line up); row-sparse values are never stacked.
 * Call j's dropout seed is opts->seed + j. count 0 does nothing; count 1,
 * a device target, or opts->on_final run the calls one after another.
 * An error in any call fails the batch (every outs[j] NULL), its message
 * naming the call ("instance J of the batch"). */
ry_status ry_vm_call_batch(ry_vm_program *prog, const char *entry, int count, int nargs,
                           ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                           ry_error *err);
/* ry_vm_call_batch of a closure value (as ry_vm_apply). */
ry_status ry_vm_apply_batch(ry_vm_program *prog, ry_value *fn, int count, int nargs,
                            ry_value *const *args, const ry_vm_opts *opts, ry_value **outs,
                            ry_error *err);

/* Frees the program (not the module). NULL is fine. */
void ry_vm_free(ry_vm_program *prog);

/* Statistics for tests and reports. */
typedef struct ry_vm_stats {
    int nfuncs;       /* compiled functions (globals and nested fns) */
    int ninsns;       /* instructions in all of them */
    int nops;         /* operator-call instructions */
    int nops_static;  /* of those, with the result type fixed at compile time */
    int nslots;       /* storage slots of the memory plan, all functions */
    int nplanned;     /* operator calls whose result has a slot */
    int ninplace;     /* of those, that may write over a dying argument */
    /* counted while running, over all calls: results written over a dying
     * argument, into a slot's kept buffer, and into a new buffer that the
     * slot then keeps */
    long ran_inplace, ran_reused, ran_fresh;
    /* operator calls that took the general path (types found at run time:
     * a shape not seen before, or arguments of no tensor type) */
    long ran_general;
} ry_vm_stats;
void ry_vm_get_stats(const ry_vm_program *prog, ry_vm_stats *st);

/* Profiling: with it on, every operator call is timed (two clock reads per
 * call, ~50 ns) and its call site accumulates time and calls; turning it
 * on clears the counts. ry_vm_print_profile writes the `top` call sites
 * that took the most time (0: all that ran) to out: share of all operator
 * time, total ms, calls, us per call, the source location and the call as
 * the optimized program writes it (fused kernels show their code), then
 * the totals. The time of an operator includes finding its result's
 * storage; the rest of the engine's time (calls, closures, matching) is
 * what the caller measures minus the total. */
void ry_vm_set_profile(ry_vm_program *prog, bool on);
void ry_vm_print_profile(const ry_vm_program *prog, FILE *out, int top);

/* Prints the memory plan: per function its slots (size classes) and per
 * planned operator call its slot and in-place candidates. */
void ry_vm_print_plan(const ry_vm_program *prog, FILE *f);

RY_END_API

#endif
