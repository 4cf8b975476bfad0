/*
 * value.h: runtime values: tensors, tuples, closures, references, ADT
 * values and row-sparse tensors, all reference counted. Shared by the
 * interpreter and the compiled engine. A value holds the references it
 * was given.
 *
 * Reference counting cannot free a cycle (a ref holding a closure that
 * captures the same ref): programs that tie such knots leak them.
 */
#ifndef RELAYC_VALUE_H
#define RELAYC_VALUE_H

#include "relayc/ir.h"

RY_BEGIN_API

typedef enum ry_value_kind {
    RY_VAL_TENSOR,
    RY_VAL_TUPLE,
    RY_VAL_CLOSURE,
    RY_VAL_REF,
    RY_VAL_ADT,
    /* A row-sparse tensor (see rows below): only the compiled engine makes
     * one, and only when asked (ry_vm_opts.sparse_rows). */
    RY_VAL_ROWS
} ry_value_kind;

typedef struct ry_value ry_value;
struct ry_value {
    int refcount;
    ry_value_kind kind;
    union {
        ry_tensor *tensor;
        struct {
            int n;
            ry_value **fields;
        } tuple;
        struct {
            ry_value *value;
        } ref;
        struct {
            const ry_ctor *ctor;
            int n;
            ry_value **fields;
        } adt;
        struct {
            /* Exactly one of func / ctor is set: a function expression with
             * the values of its free variables, or a constructor used as a
             * function (its fields become its arguments). captured[i] is
             * NULL for a let-bound function's reference to itself
             * (`let %f = fn (...) { ... %f(...) ... }`): the interpreter
             * binds it to the closure at each call, so no cycle forms. */
            const ry_expr *func;   /* RY_EXPR_FUNC */
            const ry_ctor *ctor;
            int ncaptured;
            const ry_var **captured_vars;
            ry_value **captured;
        } closure;
        /* The dense tensor of dtype and shape[0..ndim) that is zero except
         * for n slices along axis 0: slice index[i] holds values[i, ...].
         * Indices lie in [0, shape[0]) and may repeat; repeated slices add,
         * in order i = 0, 1, ... (so densifying matches a dense scatter-add
         * bit for bit). values is (n, shape[1], ..., shape[ndim-1]) of
         * dtype; ndim >= 1. Embedding gradients take this form. */
        struct {
            ry_dtype dtype;
            int ndim;
            int64_t shape[RY_MAX_RANK];
            int64_t n;
            int64_t *index;
            ry_tensor *values;
        } rows;
    };
    /* private: links values whose references are being dropped, so that
     * ry_value_release frees a long list without C recursion. */
    ry_value *dead_next;
};

/* Constructors take over the references they are given (t, fields[i]) and
 * return NULL on out-of-memory, having released them. */
ry_value *ry_value_tensor(ry_tensor *t);
ry_value *ry_value_tuple(int n, ry_value **fields);   /* copies the array */
ry_value *ry_value_adt(const ry_ctor *ctor, int n, ry_value **fields);
ry_value *ry_value_ref(ry_value *v);
ry_value *ry_value_closure(const ry_expr *func, int ncaptured, const ry_var **vars,
                           ry_value **captured);
ry_value *ry_value_ctor_fn(const ry_ctor *ctor);
/* A RY_VAL_ROWS value of dense shape (dtype of values, ndim, shape): copies
 * index[0..n) and takes over values (n, shape[1..]). NULL, values released,
 * on out-of-memory or when the pieces disagree (dtype, ranks, dims, an
 * index outside [0, shape[0])). */
ry_value *ry_value_rows(int ndim, const int64_t *shape, int64_t n, const int64_t *index,
                        ry_tensor *values);
ry_value *ry_value_retain(ry_value *v);
void ry_value_release(ry_value *v);   /* NULL is fine */

/* v with every tensor on target t's device (target.h; the CPU's host
 * memory for ry_target_cpu()): the structure (tuples, ADT cells, refs,
 * closures' captured values) is copied where a tensor in it moves, else
 * *out is v itself, retained. Row-sparse values do not move (an error). */
typedef struct ry_target ry_target;
ry_status ry_value_to(const ry_target *t, ry_value *v, ry_value **out, ry_error *err);

/* A value of type t (a tensor type, or tuples of them) built from the
 * flat tensors res[*k...] taken depth first; each is taken over (its slot
 * set to NULL) and *k advanced. NULL on out-of-memory. The inverse of
 * ry_value_flatten for operator results. */
ry_value *ry_value_unflatten(const ry_type *t, ry_tensor **res, int *k);

/* "a tensor", "a tuple", "a function", ... for messages. */
const char *ry_value_kind_name(const ry_value *v);
/* A short description for messages and debugging: "float32[2, 3]",
 * "rows(4 of float32[10, 3])", "a tuple of 2", ...; truncated to n. */
const char *ry_value_describe(const ry_value *v, char *buf, size_t n);

/* ---- row-sparse values (rows.c) ----
 * ry_rows_densify: the dense tensor a RY_VAL_ROWS value stands for (a new
 * reference; NULL on out-of-memory): zeros, then each slice added in order.
 * ry_rows_add_into: dst += v, slice by slice in order (dst has v's dtype and
 * dense shape; false, dst untouched, when it does not). */
ry_tensor *ry_rows_densify(const ry_value *v);
bool ry_rows_add_into(ry_tensor *dst, const ry_value *v);
/* Turns, in place, every RY_VAL_ROWS in v (v itself, tuple and ADT fields,
 * ref contents; not closure captures) into the RY_VAL_TENSOR it stands
 * for, so every holder of those values sees dense tensors. false on
 * out-of-memory (some may be dense already; v stays valid). */
bool ry_value_densify_rows(ry_value *v);

/* Checks args against fn's annotated parameter types where the static type
 * left something for run time: dtype and rank, constant dims, and symbolic
 * dims that must take one value per call (Any accepts anything). Errors are
 * located at span (or the parameter) and name it. */
ry_status ry_value_check_params(const ry_expr *fn, ry_value *const *args, ry_span span, ry_error *err);

/* Counts the tensors in v, depth first (tuples, ADT fields, ref contents;
 * closures hold none; a RY_VAL_ROWS counts as one and flattens to NULL, as
 * it holds no dense tensor: densify it first). Returns -1 on out-of-memory. */
int ry_value_count_tensors(const ry_value *v);
/* Writes borrowed pointers to v's tensors, depth first, into out[0..max).
 * Returns how many v holds (which may exceed max), -1 on out-of-memory. */
int ry_value_flatten(const ry_value *v, ry_tensor **out, int max);

RY_END_API

#endif
