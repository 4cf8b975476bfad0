/*
 * grad_rules.h: gradient rules of the operators (IR-building functions of
 * type ry_grad_fn, see op.h; each registry entry points at its own with
 * .grad) and the small IR builder they share with the AD transform (ad/).
 * The rules live in grad_elemwise.c, grad_nn.c, grad_norm.c, grad_pool.c and
 * grad_transform.c;
 * grad_rules.c holds the builder and the lookup.
 */
#ifndef RELAYC_OP_GRAD_RULES_H
#define RELAYC_OP_GRAD_RULES_H

#include "relayc/op.h"

/* An operator's rule, from its registry entry. */
typedef struct ry_grad_rule {
    ry_grad_fn fn; /* NULL with no_grad true: not differentiable */
    bool no_grad;
} ry_grad_rule;

/* Returns false when op has neither a rule nor a no_grad mark. */
bool ry_grad_rule_lookup(const ry_op *op, ry_grad_rule *out);
/* For tests of the missing-rule error (every registered operator has a
 * rule or a no_grad mark today): until the next call, ry_grad_rule_lookup
 * treats the n operators named (borrowed strings) as having neither. n = 0
 * restores the registry's view. Process-wide and not thread-safe. */
void ry_grad_rules_hide_for_test(int n, const char *const *names);
/* The rule function alone (NULL if none), as the lead's brief names it. */
const ry_grad_fn *ry_grad_rule_find(const char *op_name);

/* ---- IR builder (nodes in m's arena, untyped unless said) ---- */
ry_expr *ry_gb_op(ry_module *m, const char *op_name, int n, ry_expr *const *args);
ry_expr *ry_gb_op1(ry_module *m, const char *op_name, ry_expr *a);
ry_expr *ry_gb_op2(ry_module *m, const char *op_name, ry_expr *a, ry_expr *b);
ry_expr *ry_gb_op3(ry_module *m, const char *op_name, ry_expr *a, ry_expr *b, ry_expr *c);
/* Appends an attribute to a call. */
void ry_gb_attr_int(ry_module *m, ry_expr *call, const char *name, int64_t v);
void ry_gb_attr_ints(ry_module *m, ry_expr *call, const char *name, int n, const int64_t *v);
void ry_gb_attr_float(ry_module *m, ry_expr *call, const char *name, double v);
void ry_gb_attr_bool(ry_module *m, ry_expr *call, const char *name, bool v);
void ry_gb_attr_str(ry_module *m, ry_expr *call, const char *name, const char *v);
void ry_gb_attr_copy(ry_module *m, ry_expr *call, const ry_attr *a);
/* A scalar constant of dtype holding v. */
ry_expr *ry_gb_scalar(ry_module *m, ry_dtype dtype, double v);
/* collapse_sum_like(g, like), or g when g's result type (res) already equals
 * like's type (both known, and no ? dim that may be 1 in one and not the
 * other when the program runs). */
ry_expr *ry_gb_unbroadcast(ry_module *m, ry_expr *g, const ry_type *res, ry_expr *like);
/* A fresh var (name made by the printer unique) with its type set. */
ry_var *ry_gb_var(ry_module *m, const char *name, ry_type *type);
ry_expr *ry_gb_ref(ry_module *m, ry_var *v); /* a use of v, typed as v */

/* g (P, N, Q) scatter-added along its middle axis into (P, V, Q) at rows
 * idx (an int tensor of N indices; those outside [0, V) add nothing). */
ry_expr *ry_gb_scatter(ry_module *m, ry_expr *g, ry_expr *idx, int64_t p, int64_t v, int64_t q,
                       ry_dtype dt);
/* A constant int32 vector. */
ry_expr *ry_gb_index_const(ry_module *m, int n, const int64_t *idx);

/* ---- extents known at run time only (grad_rules.c) ----
 * The length of x along axis, a scalar of integer dtype dt:
 *   take(shape_of(x, dtype=dt), axis) */
ry_expr *ry_gb_length(ry_module *m, ry_expr *x, int64_t axis, ry_dtype dt);
/* 0, 1, ..., L - 1 (int32), L the length of x (rank nd) along axis: an
 * exclusive cumsum of ones shaped like that axis (x summed over the others,
 * so no extent needs to be known, nor non-zero) */
ry_expr *ry_gb_iota(ry_module *m, ry_expr *x, int nd, int64_t axis);
/* x (rank nd) cut to the first L entries along axis, L the length of like
 * along it: take(x, iota of like, axis, mode="fast") */
ry_expr *ry_gb_crop_like(ry_module *m, ry_expr *x, ry_expr *like, int nd, int64_t axis);
/* The adjoint of a global pool of x (N, C, H, W) for g (N, C, 1, 1), H and
 * W known at run time only: average (max false) or maximum (the first). */
ry_expr *ry_gb_global_pool_grad(ry_module *m, ry_expr *x, ry_expr *g, bool max);

/* ---- helpers for rules ---- */
/* The type of a rule input (an atom the transform typed). */
const ry_type *ry_gb_type(const ry_expr *e);
/* dtype of a tensor-typed expression (RY_FLOAT32 when unknown). */
ry_dtype ry_gb_dtype(const ry_expr *e);
/* Concrete shape of a tensor type; false when a dim is not a constant. */
bool ry_gb_shape(const ry_type *t, int *ndim, int64_t *shape);
/* reshape(g, newshape = shape of t), one dim that is not a constant
 * written -1; errors when two or more are not. */
ry_status ry_gb_reshape_to(ry_grad_ctx *c, ry_expr *g, const ry_type *t, ry_expr **out);
/* g reshaped to the shape of x: as ry_gb_reshape_to when x's type allows,
 * else reshape_like(g, x) (two or more symbolic or Any dims, or one beside
 * a 0). */
ry_status ry_gb_reshape_like(ry_grad_ctx *c, ry_expr *g, ry_expr *x, ry_expr **out);

/* ---- the rules ---- */
/* grad_elemwise.c */
ry_status ry_grad_add(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_subtract(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_multiply(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_divide(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_power(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_maximum(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_minimum(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_negative(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_exp(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_log(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_sqrt(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_rsqrt(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_tanh(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_sigmoid(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_abs(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_relu(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_leaky_relu(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_clip(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_where(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_cast(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_copy(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_broadcast_to(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_broadcast_to_like(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_collapse_sum_like(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                    ry_expr **);
ry_status ry_grad_full(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_full_like(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
/* grad_nn.c */
ry_status ry_grad_dense(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_matmul(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_batch_matmul(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_softmax(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_log_softmax(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_batch_flatten(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_cross_entropy(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_cross_entropy_with_logits(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                            ry_expr **);
ry_status ry_grad_pad(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_conv2d_backward_weight(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                         ry_expr **);
ry_status ry_grad_avg_pool2d_grad(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                  ry_expr **);
ry_status ry_grad_mirror_pad(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_dropout(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
/* grad_norm.c */
ry_status ry_grad_bias_add(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_layer_norm(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_prelu(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_instance_norm(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_group_norm(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_l2_normalize(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_lrn(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_batch_norm(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
/* grad_pool.c */
ry_status ry_grad_adaptive_avg_pool2d(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                      ry_expr **);
ry_status ry_grad_adaptive_max_pool2d(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                      ry_expr **);
ry_status ry_grad_max_pool2d_grad(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *,
                                  ry_expr **);
/* grad_transform.c */
ry_status ry_grad_sum(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_mean(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_max(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_reshape(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_reshape_like(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_transpose(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_concatenate(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_split(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_stack(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_take(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);
ry_status ry_grad_cumsum(ry_grad_ctx *, ry_expr *const *, ry_expr *, ry_expr *, ry_expr **);

#endif
