/*
 * target.h (private): what a target answers, as one struct of functions
 * (QBE's Target, ggml's backend interface). The VM asks it for each
 * operator's kernel and that kernel's facts (may the result be written over
 * an argument, does it take row-sparse values), for the buffers of
 * operator results, and the trainer and optimizers ask it for the update,
 * the finiteness scan and the sums over the gradient slab, so that nothing
 * above src/backend/ calls a CPU kernel or assumes host memory by name.
 * Each target fills one of these in its own folder (src/backend/cpu/
 * target.c) and owns its kernel table there; src/op/ keeps only what holds
 * on every target (attributes, type relation, gradient rule, fusion
 * pattern). A new target adds a folder and a line in target.c's list.
 */
#ifndef RELAYC_BACKEND_TARGET_H
#define RELAYC_BACKEND_TARGET_H

#include "relayc/op.h"
#include "relayc/optim.h"
#include "relayc/target.h"

/* ---- kernels and their facts ---- */
enum {
    /* the result may be written over an argument of the same type
     * (out == in): each element is read before any element is written */
    RY_KERNEL_INPLACE = 1 << 0,
    /* ... but only over arguments 2 and later (fused.matmul: its GEMM
     * operands are read after its first result rows are written, its
     * epilogue inputs are not) */
    RY_KERNEL_INPLACE_EPILOGUE = 1 << 1,
    /* has a row-sparse rule in the compiled engine (src/runtime/rows_ops.h):
     * takes and yields RY_VAL_ROWS values where ry_vm_opts.sparse_rows */
    RY_KERNEL_ROWS = 1 << 2,
};

typedef struct ry_kernel {
    const char *op;   /* the operator's registry name */
    ry_kernel_fn fn;
    unsigned flags;   /* RY_KERNEL_* */
} ry_kernel;

/* ---- the optimizer's kernel ----
 * One parameter's run of the slabs (or one run of rows of it): n elements
 * of param, grad and each slot (slot order as the rule names them), in the
 * set's dtype. The gradient may live anywhere (the gradient program's own
 * output) but never overlaps the parameter or a slot, so kernels may take
 * the pointers as restrict. Slots: SGD {momentum_buffer}; Adam/AdamW
 * {exp_avg, exp_avg_sq, max_exp_avg_sq?}; Adagrad {sum}; RMSprop
 * {square_avg, momentum_buffer?, grad_avg?}, absent ones NULL. */
#define RY_OPTIM_MAX_SLOTS 3

typedef struct ry_update_args {
    ry_dtype dtype;
    int64_t n;
    void *param;
    const void *grad;
    void *slot[RY_OPTIM_MAX_SLOTS];
    /* the same run as tensors and element offsets, for device targets
     * (whose tensors' data is a buffer, not an address): param's elements
     * [off, off + n), grad's [goff, goff + n), each slot's [off, off + n) */
    const ry_tensor *tparam, *tgrad, *tslot[RY_OPTIM_MAX_SLOTS];
    int64_t off, goff;
    double lr;
    double scale;            /* every gradient element is multiplied by it as
                                it is read (clip-by-norm's coefficient); 1:
                                the product is exact, so no clipping */
    double weight_decay;     /* 0 when the parameter is exempt */
    int64_t step;            /* this parameter's step count, already advanced */
} ry_update_args;

/* A program's pool of small result buffers (the target's own type). */
typedef struct ry_pool ry_pool;

struct ry_target {
    const char *name;        /* "cpu", "opencl" */
    ry_device_kind device;

    /* ---- the device (NULL on the CPU, whose tensors are host memory) ----
     * open: find and open the device (ry_target_find calls it once;
     * RELAYC_OPENCL_DEVICE or the name's ":N" picks it), false with err set
     * when there is none. dev: the device opened. upload/download: nbytes
     * between host memory and t's elements, blocking (the device's queue
     * is in order: work queued before a download finishes first). copy:
     * device to device. counters: bytes copied each way, driver
     * allocations, kernels built (tests and --profile read them). Driver
     * failures come back as errors naming the call and the device. */
    ry_status (*open)(int index, ry_error *err);
    ry_device (*dev)(void);
    ry_status (*upload)(ry_tensor *t, const void *src, size_t nbytes, ry_error *err);
    ry_status (*download)(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err);
    ry_status (*copy)(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err);
    void (*counters)(ry_device_counters *out);
    int (*devices)(ry_device_info *out, int cap); /* what the driver reports (relayc devices) */
    /* profiling (--profile): the device's time running the kernels queued
     * between prof_begin and prof_end, in ns (prof_end waits for them) */
    void (*prof_begin)(void);
    int64_t (*prof_end)(void);

    /* op's kernel on this target, with its facts; NULL where it has none
     * (the VM reports that at compile time, with the call's location) */
    const ry_kernel *(*kernel)(const ry_op *op);

    /* ---- memory: the target's caching allocator ----
     * allocator: operator results (large buffers kept process-wide for
     * reuse). pool_new: a program's pool of small buffers (size classes,
     * reused across calls; its buffers may be freed on any thread and
     * outlive the program); NULL on out of memory. pool_allocator: the
     * pool's allocator (allocator's for NULL). pool_close: the program is
     * done with it (it goes once its last buffer is back). pool_kept: the
     * buffers waiting in it (tests). capacity: the bytes t's buffer holds
     * when it came from this target's allocator or a pool of it, else 0. */
    ry_allocator *(*allocator)(void);
    ry_pool *(*pool_new)(void);
    ry_allocator *(*pool_allocator)(ry_pool *p);
    void (*pool_close)(ry_pool *p);
    long (*pool_kept)(ry_pool *p);
    size_t (*capacity)(const ry_tensor *t);

    /* ---- training kernels over the parameter, gradient and state slabs ----
     * update: the optimizer's rule (c->kind) over one run (ry_update_args).
     * grad_scan: over t (or its listed rows along axis 0), the first
     * NaN/Inf element's index or -1; with norm, also the run's L2 norm
     * (squares summed in float64 in element order).
     * grad_add: d[lo_d..+n) = (first ? 0 + x : d + x)[lo_x..+n), true when
     * a result is NaN or Inf. grad_clip: t's n elements from lo clamped to
     * [-c, c] (NaN stays NaN). grad_zero: t's n elements from lo set to 0.
     * grad_scale: t's n elements from lo multiplied by c (in t's dtype; a
     * rank's share of a batch weighted by its size before the all-reduce). */
    void (*update)(const ry_optim_config *c, const ry_update_args *a);
    int64_t (*grad_scan)(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm);
    bool (*grad_add)(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n,
                     bool first);
    void (*grad_clip)(ry_tensor *t, int64_t lo, int64_t n, double c);
    void (*grad_zero)(ry_tensor *t, int64_t lo, int64_t n);
    void (*grad_scale)(ry_tensor *t, int64_t lo, int64_t n, double c);
    /* waits for the device's queued work and reports the first failure of
     * a training kernel since the last sync (they return no status); NULL
     * on the CPU, whose kernels cannot fail */
    ry_status (*sync)(ry_error *err);
};

/* A target's kernel table indexed by registry position (ry_op_index), so
 * finding a kernel costs an array read: by_index[0..max) filled from
 * table[0..n). A name the registry does not know is a bug in that table
 * (found by the first lookup of any program, and by test_target): it
 * aborts, naming it. */
void ry_kernel_table_index(const char *target, const ry_kernel *table, int n,
                           const ry_kernel **by_index, int max);

/* The kernel of op on t, or NULL. */
static inline const ry_kernel *ry_target_kernel(const ry_target *t, const ry_op *op) {
    return t->kernel(op);
}

#endif
