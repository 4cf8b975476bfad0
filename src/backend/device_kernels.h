/*
 * device_kernels.h: the device-neutral kernel interface. The operators'
 * host code for a device target (src/backend/device/: argument lists,
 * grids, scratch buffers, the float16 widening, the GEMM's bookkeeping,
 * the training kernels) is written once against this struct; a device
 * (src/backend/opencl/, src/backend/cuda/) fills it in with its driver:
 * building generated source into a cached kernel, launching it over n
 * work-items, copies and fills, and its BLAS. The kernels' source comes
 * from the one generator (kernel_gen.h) in the device's dialect.
 *
 * A device registers itself when it is opened (ry_dk_register); a kernel
 * finds its device from the device its tensors are on (every tensor knows
 * its device), so the shared kernel table (dk_table.c) serves every device
 * target and nothing above src/backend/ changes when one is added.
 */
#ifndef RELAYC_BACKEND_DEVICE_KERNELS_H
#define RELAYC_BACKEND_DEVICE_KERNELS_H

#include "backend/device_alloc.h"
#include "backend/kernel_gen.h"
#include "backend/target.h"

/* A built kernel: the device's own object (a cl_kernel, a CUfunction). */
typedef struct ry_dk_kernel ry_dk_kernel;

/* A kernel argument: a buffer (the driver's handle, ry_devbuf_handle), a
 * 64-bit integer, a double or a float, in the kernel's parameter order.
 * A tensor is passed as its buffer and its element offset (RY_KA_T). */
typedef enum { RY_KA_BUF, RY_KA_I64, RY_KA_F64, RY_KA_F32 } ry_karg_kind;
typedef struct ry_karg {
    ry_karg_kind kind;
    void *buf;
    int64_t l;
    double d;
} ry_karg;

/* A GEMM in row-major terms: C[m, n] = op(A) op(B) (+ C where acc), op
 * transposing where ta / tb, each operand at an element offset from its
 * tensor's own, with its leading dimension; all of one float dtype (C's). */
typedef struct ry_dk_gemm {
    bool ta, tb;
    int64_t m, n, k;
    const ry_tensor *a, *b;
    ry_tensor *c;
    int64_t aoff, lda, boff, ldb, coff, ldc;
    bool acc; /* beta 1: a convolution's weight gradient summed over chunks of its batch */
} ry_dk_gemm;

typedef struct ry_dk_device {
    ry_device_kind kind;
    const ry_dialect *dialect;  /* its name ("opencl") is the device's in messages */
    ry_device (*dev)(void);     /* the device opened */
    bool (*fp64)(void);         /* has double arithmetic */
    /* entry `name` of source, built once (kept in memory and on disk);
     * NULL with err set on a build failure (the log in the message) */
    ry_dk_kernel *(*build)(const char *source, const char *name, ry_span span, ry_error *err);
    /* k over `global` work-items (the grid rounded up to the device's
     * group; the kernel checks its index); global 0 launches nothing */
    ry_status (*launch)(ry_dk_kernel *k, size_t global, int nargs, const ry_karg *args, ry_span span,
                        ry_error *err);
    ry_status (*upload)(ry_tensor *t, const void *src, size_t nbytes, ry_error *err);
    ry_status (*download)(void *dst, const ry_tensor *t, size_t nbytes, ry_error *err);
    ry_status (*copy)(ry_tensor *dst, const ry_tensor *src, size_t nbytes, ry_error *err);
    /* nbytes of t's buffer from t's offset + at set to zero */
    ry_status (*zero)(ry_tensor *t, size_t at, size_t nbytes, ry_error *err);
    ry_allocator *(*allocator)(void);
    /* the device's BLAS; float32 and float64 (others: the shared code's
     * error before it gets here) */
    ry_status (*gemm)(ry_kernel_ctx *c, const ry_dk_gemm *g);
    /* waits for everything queued */
    ry_status (*finish)(ry_error *err);
} ry_dk_device;

/* ---- the devices (dk_launch.c) ---- */
void ry_dk_register(const ry_dk_device *d);
const ry_dk_device *ry_dk_for(ry_device_kind kind);  /* NULL: none registered */

/* The device every tensor of in and out is on, or NULL with the error at
 * the call (a host tensor handed to a device kernel, tensors of two
 * devices) naming the argument. */
const ry_dk_device *ry_dk_of(const ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                             ry_tensor *const *out);

/* ---- arguments ---- */
static inline void *ry_dk_buf(const ry_tensor *t) { return ry_devbuf_handle(t); }
static inline int64_t ry_dk_off(const ry_tensor *t) {
    return (int64_t)(t->offset / ry_dtype_size(t->dtype));
}
#define KA_L(v) (ry_karg){RY_KA_I64, NULL, (int64_t)(v), 0}
#define KA_D(v) (ry_karg){RY_KA_F64, NULL, 0, (double)(v)}
#define KA_F(v) (ry_karg){RY_KA_F32, NULL, 0, (double)(v)}
#define KA_B(t) (ry_karg){RY_KA_BUF, ry_dk_buf(t), 0, 0}
#define KA_T(t) KA_B(t), KA_L(ry_dk_off(t))
#define NARGS(a) (int)(sizeof a / sizeof a[0])

/* ---- building and running (dk_launch.c) ---- */

/* Builds src (freed here; NULL: the dtype `what` has no kernel on this
 * device, or out of memory) and runs its kernel "k" over n work-items. */
ry_status ry_dk_gen_run(const ry_dk_device *d, ry_kernel_ctx *c, char *src, ry_dtype what, size_t n,
                        int nargs, const ry_karg *args);
/* The kernel "k" of a source template: the dialect's prelude, then tmpl
 * with each @D (a digit below nsubs) replaced by subs[D]. */
ry_dk_kernel *ry_dk_template(const ry_dk_device *d, const char *tmpl, const char *const *subs,
                             int nsubs, ry_span span, ry_error *err);

/* The device's spelling of a dtype's element; NULL where it has none. */
static inline const char *ry_dk_type(const ry_dk_device *d, ry_dtype dt) { return d->dialect->type(dt); }
/* The accumulator of float sums: double where the device has it (as the
 * CPU's statistics and reductions), else the element type. */
const char *ry_dk_acc_type(const ry_dk_device *d, ry_dtype dt);
/* The type a kernel that only moves elements reads them as: the dtype's,
 * float16 as its 16 bits */
const char *ry_dk_move_type(const ry_dk_device *d, ry_dtype dt);
/* An integer type of es bytes (1, 2, 4, 8): kernels that move bytes */
const char *ry_dk_word(const ry_dk_device *d, size_t es);
/* "%s has no kernel on DEVICE" at the call */
ry_status ry_dk_no_kernel(const ry_dk_device *d, ry_kernel_ctx *c, ry_dtype dt);

/* A device tensor of the device's heap, NULL with err set when it does
 * not fit. */
ry_tensor *ry_dk_scratch(const ry_dk_device *d, ry_kernel_ctx *c, ry_dtype dt, int nd,
                         const int64_t *shape);

/* ---- the shared pieces of a device target ---- */

/* a device target's pool functions (target.h; pool_new and
 * pool_allocator are the target's own: its heap is the pool) and
 * capacity, the heap's buffers' (dk_launch.c) */
void ry_dk_pool_close(ry_pool *p);
long ry_dk_pool_kept(ry_pool *p);
size_t ry_dk_capacity(const ry_tensor *t);

/* The ry_target fields every device target fills the same way: the
 * shared kernel table, pool glue and training kernels (the target's own
 * struct adds its device, copies, memory and sync). */
#define RY_DK_TARGET_SHARED                                                                   \
    .kernel = ry_dk_kernel_of, .pool_close = ry_dk_pool_close, .pool_kept = ry_dk_pool_kept,  \
    .capacity = ry_dk_capacity, .update = ry_dk_update, .grad_scan = ry_dk_grad_scan,        \
    .grad_add = ry_dk_grad_add, .grad_clip = ry_dk_grad_clip, .grad_zero = ry_dk_grad_zero,   \
    .grad_scale = ry_dk_grad_scale

/* op's kernel on every device target (dk_table.c) */
const ry_kernel *ry_dk_kernel_of(const ry_op *op);

/* the training kernels (dk_train.c), target.h's update .. grad_scale; the
 * device is the tensors'. ry_dk_sync(d, err): waits for d and reports
 * the first failure a training kernel kept since the last sync. */
void ry_dk_update(const ry_optim_config *c, const ry_update_args *a);
int64_t ry_dk_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm);
bool ry_dk_grad_add(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n, bool first);
void ry_dk_grad_clip(ry_tensor *t, int64_t lo, int64_t n, double c);
void ry_dk_grad_zero(ry_tensor *t, int64_t lo, int64_t n);
void ry_dk_grad_scale(ry_tensor *t, int64_t lo, int64_t n, double c);
ry_status ry_dk_sync(const ry_dk_device *d, ry_error *err);

#endif
