/*
 * grad_elemwise.c: gradient rules of the elementwise and broadcasting
 * operators, as IR. Legend: x, a, b the primal arguments, y the primal
 * result, g the adjoint of y (y's shape). A broadcasting operator's adjoint
 * is summed back to each argument's shape with collapse_sum_like (skipped
 * when the shapes already agree). Comparisons and initializers are marked
 * no_grad in grad_rules.c instead.
 */
#include "op/grad_rules.h"

#define M (c->m)
#define OP1(n, a) ry_gb_op1(M, n, a)
#define OP2(n, a, b) ry_gb_op2(M, n, a, b)
#define RES (c->call->type)
#define UNB(g, like) ry_gb_unbroadcast(M, g, RES, like)
#define K(x, v) ry_gb_scalar(M, ry_gb_dtype(x), v)

/* add: da = g, db = g (each unbroadcast) */
ry_status ry_grad_add(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    grads[0] = UNB(g, args[0]);
    grads[1] = UNB(g, args[1]);
    return RY_OK;
}

/* subtract: da = g, db = -g */
ry_status ry_grad_subtract(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                           ry_expr **grads) {
    grads[0] = UNB(g, args[0]);
    grads[1] = UNB(OP1("negative", g), args[1]);
    return RY_OK;
}

/* multiply: da = g * b, db = g * a */
ry_status ry_grad_multiply(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                           ry_expr **grads) {
    grads[0] = UNB(OP2("multiply", g, args[1]), args[0]);
    grads[1] = UNB(OP2("multiply", g, args[0]), args[1]);
    return RY_OK;
}

/* divide: y = a / b; da = g / b, db = -g * y / b */
ry_status ry_grad_divide(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                         ry_expr **grads) {
    grads[0] = UNB(OP2("divide", g, args[1]), args[0]);
    grads[1] = UNB(OP1("negative", OP2("divide", OP2("multiply", g, y), args[1])), args[1]);
    return RY_OK;
}

/* power: y = a ** b; da = g * b * a ** (b - 1), db = g * y * log(a) */
ry_status ry_grad_power(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *a = args[0], *b = args[1];
    ry_expr *bm1 = OP2("subtract", b, K(b, 1.0));
    grads[0] = UNB(OP2("multiply", g, OP2("multiply", b, OP2("power", a, bm1))), a);
    grads[1] = UNB(OP2("multiply", OP2("multiply", g, y), OP1("log", a)), b);
    return RY_OK;
}

/* maximum: the adjoint goes to a where a >= b, to b elsewhere (ties: a) */
ry_status ry_grad_maximum(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    ry_expr *pick_a = OP2("greater_equal", args[0], args[1]), *zero = OP1("zeros_like", g);
    grads[0] = UNB(ry_gb_op3(M, "where", pick_a, g, zero), args[0]);
    grads[1] = UNB(ry_gb_op3(M, "where", pick_a, zero, g), args[1]);
    return RY_OK;
}

/* minimum: the adjoint goes to a where a <= b, to b elsewhere (ties: a) */
ry_status ry_grad_minimum(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    ry_expr *pick_a = OP2("less_equal", args[0], args[1]), *zero = OP1("zeros_like", g);
    grads[0] = UNB(ry_gb_op3(M, "where", pick_a, g, zero), args[0]);
    grads[1] = UNB(ry_gb_op3(M, "where", pick_a, zero, g), args[1]);
    return RY_OK;
}

/* negative: dx = -g */
ry_status ry_grad_negative(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                           ry_expr **grads) {
    grads[0] = OP1("negative", g);
    return RY_OK;
}

/* exp: dx = g * y */
ry_status ry_grad_exp(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    grads[0] = OP2("multiply", g, y);
    return RY_OK;
}

/* log: dx = g / x */
ry_status ry_grad_log(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    grads[0] = OP2("divide", g, args[0]);
    return RY_OK;
}

/* sqrt: dx = g / (2 y) */
ry_status ry_grad_sqrt(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    grads[0] = OP2("divide", g, OP2("multiply", K(y, 2.0), y));
    return RY_OK;
}

/* rsqrt: y = x ** -1/2; dx = -g * y / (2 x) */
ry_status ry_grad_rsqrt(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *gy = OP2("multiply", g, y);
    grads[0] = OP2("divide", gy, OP2("multiply", K(y, -2.0), args[0]));
    return RY_OK;
}

/* tanh: dx = g * (1 - y * y) */
ry_status ry_grad_tanh(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    grads[0] = OP2("multiply", g, OP2("subtract", K(y, 1.0), OP2("multiply", y, y)));
    return RY_OK;
}

/* sigmoid: dx = g * y * (1 - y) */
ry_status ry_grad_sigmoid(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                          ry_expr **grads) {
    grads[0] = OP2("multiply", OP2("multiply", g, y), OP2("subtract", K(y, 1.0), y));
    return RY_OK;
}

/* abs: dx = g where x >= 0, -g elsewhere */
ry_status ry_grad_abs(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                      ry_expr **grads) {
    ry_expr *x = args[0];
    grads[0] = ry_gb_op3(M, "where", OP2("less", x, K(x, 0.0)), OP1("negative", g), g);
    return RY_OK;
}

/* nn.relu: dx = g where x > 0, 0 elsewhere */
ry_status ry_grad_relu(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    ry_expr *x = args[0];
    grads[0] = ry_gb_op3(M, "where", OP2("greater", x, K(x, 0.0)), g, OP1("zeros_like", g));
    return RY_OK;
}

/* nn.leaky_relu: dx = g where x > 0, alpha * g elsewhere */
ry_status ry_grad_leaky_relu(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                             ry_expr **grads) {
    ry_expr *x = args[0];
    const ry_op *op = c->call->call.callee->op.op;
    double alpha = ry_attr_float(op, &c->call->call.attrs, "alpha");
    grads[0] =
        ry_gb_op3(M, "where", OP2("greater", x, K(x, 0.0)), g, OP2("multiply", g, K(x, alpha)));
    return RY_OK;
}

/* clip: dx = g where a_min <= x <= a_max, 0 elsewhere */
ry_status ry_grad_clip(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    ry_expr *x = args[0];
    const ry_op *op = c->call->call.callee->op.op;
    const ry_attrs *at = &c->call->call.attrs;
    ry_expr *inside = NULL;
    if (!ry_attr_is_none(op, at, "a_min"))
        inside = OP2("greater_equal", x, K(x, ry_attr_float(op, at, "a_min")));
    if (!ry_attr_is_none(op, at, "a_max")) {
        ry_expr *le = OP2("less_equal", x, K(x, ry_attr_float(op, at, "a_max")));
        inside = inside ? OP2("logical_and", inside, le) : le;
    }
    grads[0] = inside ? ry_gb_op3(M, "where", inside, g, OP1("zeros_like", g)) : g;
    return RY_OK;
}

/* where: c has no gradient; da = g where c, db = g elsewhere */
ry_status ry_grad_where(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                        ry_expr **grads) {
    ry_expr *zero = OP1("zeros_like", g);
    grads[0] = NULL;
    grads[1] = UNB(ry_gb_op3(M, "where", args[0], g, zero), args[1]);
    grads[2] = UNB(ry_gb_op3(M, "where", args[0], zero, g), args[2]);
    return RY_OK;
}

/* cast: dx = cast(g, x's dtype); none for integer x */
ry_status ry_grad_cast(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    ry_dtype dt = ry_gb_dtype(args[0]);
    if (!ry_dtype_is_float(dt)) {
        grads[0] = NULL;
        return RY_OK;
    }
    ry_expr *e = OP1("cast", g);
    ry_gb_attr_str(M, e, "dtype", ry_dtype_name(dt));
    grads[0] = e;
    return RY_OK;
}

/* copy: dx = g */
ry_status ry_grad_copy(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    grads[0] = g;
    return RY_OK;
}

/* broadcast_to: dx = g summed back to x's shape */
ry_status ry_grad_broadcast_to(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                               ry_expr **grads) {
    grads[0] = UNB(g, args[0]);
    return RY_OK;
}

/* broadcast_to_like(x, like): dx = g summed back to x's shape; like gives
 * only a shape */
ry_status ry_grad_broadcast_to_like(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                    ry_expr **grads) {
    grads[0] = UNB(g, args[0]);
    grads[1] = NULL;
    return RY_OK;
}

/* collapse_sum_like(x, like): dx = g broadcast back to x's shape (g + 0 * x
 * broadcasts); like gives only a shape */
ry_status ry_grad_collapse_sum_like(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                                    ry_expr **grads) {
    grads[0] = OP2("add", OP1("zeros_like", args[0]), g);
    grads[1] = NULL;
    return RY_OK;
}

/* full(v, shape), full_like(x, v): every element is v, so dv = sum(g); x
 * gives only a shape */
ry_status ry_grad_full(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                       ry_expr **grads) {
    grads[0] = OP1("sum", g);
    return RY_OK;
}

ry_status ry_grad_full_like(ry_grad_ctx *c, ry_expr *const *args, ry_expr *y, ry_expr *g,
                            ry_expr **grads) {
    grads[0] = NULL;
    grads[1] = OP1("sum", g);
    return RY_OK;
}
