/*
 * elemwise_unary.c: CPU kernels of the unary operators: negative, abs,
 * nn.relu and clip (floats and integers), exp, log, sqrt, rsqrt, tanh,
 * sigmoid and nn.leaky_relu (floats), logical_not (bool), cast and copy.
 * exp, log, tanh and sigmoid use vmath.h (vectorized; within 3 ulp).
 * float16 is widened to float32 around the loop (elemwise.c). Integer
 * negative and abs wrap (abs(INT_MIN) = INT_MIN, as numpy); relu and clip
 * propagate NaN. clip is TVM's max(min(x, a_max), a_min) with the bounds
 * cast to the tensor's dtype first.
 */
/* GCC vectorizes loops only from -O3 (or with its cheapest cost model at
 * -O2, which rejects loops of unknown length); these loops are what
 * vectorization is for. Clang vectorizes at -O2 already. no-math-errno
 * lets sqrt vectorize (nothing here reads errno); no-trapping-math
 * lets gcc turn vmath.h's selects into blends; fp-contract=off keeps its
 * scalar forms rounding as vmath.c's array forms do (simd.h); the pragma
 * comes before the includes so vmath.h's inline functions get the same
 * options (gcc inlines only between functions with equal options). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                     "fp-contract=off", "no-math-errno")
#endif

#include <math.h>
#include <string.h>

#include "backend/cpu/elemwise_kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vmath.h"

/* Shape legend: n = elements; p[0] = out, p[1] = x, both walking (s = 1),
 * or x a single element (s[1] = 0). ctx: the op's parameters, already in
 * the loop's element type T (clip: lo, hi; leaky_relu: alpha). */
#define UNARY(NAME, T, TO, EXPR)                                                     \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        TO *o = (TO *)p[0];                                                          \
        const T *a = (const T *)p[1];                                                \
        const T *prm = (const T *)ctx;                                               \
        (void)prm;                                                                   \
        if (s[1] == 0) { /* one input element: compute once, fill */                 \
            T x = a[0];                                                              \
            TO v = (TO)(EXPR);                                                       \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                \
            return;                                                                  \
        }                                                                            \
        for (int64_t i = 0; i < n; i++) { /* contiguous: vectorizes */               \
            T x = a[i];                                                              \
            o[i] = (TO)(EXPR);                                                       \
        }                                                                            \
    }

#define FLOATS(OP, E)                                                                \
    UNARY(OP##_f32, float, float, E)                                                 \
    UNARY(OP##_f64, double, double, E)                                               \
    static const ry_ew_inner OP##_fns[RY_DTYPE_COUNT] = {                            \
        [RY_FLOAT32] = OP##_f32, [RY_FLOAT64] = OP##_f64, [RY_FLOAT16] = OP##_f32};

#define NUMERIC(OP, FE, IE, UE, U16E)                                                \
    UNARY(OP##_f32, float, float, FE)                                                \
    UNARY(OP##_f64, double, double, FE)                                              \
    UNARY(OP##_i8, int8_t, int8_t, IE(int8_t, uint8_t))                              \
    UNARY(OP##_i32, int32_t, int32_t, IE(int32_t, uint32_t))                         \
    UNARY(OP##_i64, int64_t, int64_t, IE(int64_t, uint64_t))                         \
    UNARY(OP##_u8, uint8_t, uint8_t, UE)                                             \
    UNARY(OP##_i16, int16_t, int16_t, IE(int16_t, uint32_t))                         \
    UNARY(OP##_u16, uint16_t, uint16_t, U16E)                                        \
    static const ry_ew_inner OP##_fns[RY_DTYPE_COUNT] = {                            \
        [RY_FLOAT32] = OP##_f32, [RY_FLOAT64] = OP##_f64, [RY_FLOAT16] = OP##_f32,   \
        [RY_INT8] = OP##_i8,     [RY_INT32] = OP##_i32,   [RY_INT64] = OP##_i64,     \
        [RY_UINT8] = OP##_u8,    [RY_INT16] = OP##_i16,   [RY_UINT16] = OP##_u16};

/* the float or double libm function, by x's type */
#define M(fn, x) _Generic((x), float: fn##f, double: fn)(x)

#define INEG(T, UT) (T)(UT)(0u - (UT)x)
#define IABS(T, UT) (x < 0 ? INEG(T, UT) : x)
#define IRELU(T, UT) (x > 0 ? x : 0)
#define ICLIP(T, UT) ((x < prm[1] ? x : prm[1]) > prm[0] ? (x < prm[1] ? x : prm[1]) : prm[0])

NUMERIC(neg, -x, INEG, (uint8_t)(0u - x), (uint16_t)(0u - x))
NUMERIC(abs, M(fabs, x), IABS, x, x)
NUMERIC(relu, x > 0 ? x : (x != x ? x : 0), IRELU, x, x)
NUMERIC(clip, x != x ? x : ICLIP(T, UT), ICLIP, ICLIP(uint8_t, uint8_t), ICLIP(uint16_t, uint16_t))

/* exp, log, tanh, sigmoid: vmath.h's forms (a few ulp; float64 tanh stays
 * libm's). A contiguous run goes to the array form, which runs the widest
 * vectors the CPU has (simd.h); a broadcast scalar is computed once. */
#define VUNARY(NAME, T, ARR, ONE)                                                    \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        T *o = (T *)p[0];                                                            \
        const T *a = (const T *)p[1];                                                \
        if (s[1] == 0) {                                                             \
            T v = ONE(a[0]);                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                \
            return;                                                                  \
        }                                                                            \
        ARR(a, o, n);                                                                \
    }
#define VFLOATS(OP, ONE32, ONE64)                                                    \
    VUNARY(OP##_f32, float, ry_v##OP##_f32, ONE32)                                   \
    VUNARY(OP##_f64, double, ry_v##OP##_f64, ONE64)                                  \
    static const ry_ew_inner OP##_fns[RY_DTYPE_COUNT] = {                            \
        [RY_FLOAT32] = OP##_f32, [RY_FLOAT64] = OP##_f64, [RY_FLOAT16] = OP##_f32};

VFLOATS(exp, ry_exp_f32, ry_exp_f64)
VFLOATS(log, ry_log_f32, ry_log_f64)
VFLOATS(tanh, ry_tanh_f32, tanh)
VFLOATS(sigmoid, ry_sigmoid_f32, ry_sigmoid_f64)
FLOATS(sqrt, M(sqrt, x))
FLOATS(rsqrt, 1 / M(sqrt, x))
FLOATS(leaky, x > 0 ? x : x * prm[0])

UNARY(not_b, uint8_t, uint8_t, x == 0)
static const ry_ew_inner not_fns[RY_DTYPE_COUNT] = {[RY_BOOL] = not_b};

static ry_status check_io(ry_kernel_ctx *c, int nin, int nout) {
    if (nin != 1 || nout != 1)
        return ry_error_at(c->err, c->span, "%s: expected 1 input and 1 output", c->op->name);
    return RY_OK;
}

/* out = fns[dtype](x) with parameters prm (doubles) cast to the loop's
 * type; cost: per element, in adds (parallel.h). */
static ry_status unary(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                       ry_tensor *const *out, const ry_ew_inner *fns, int nprm, const double *prm,
                       int cost) {
    if (check_io(c, nin, nout)) return RY_ERR;
    ry_dtype dt = in[0]->dtype;
    if (out[0]->dtype != dt)
        return ry_error_at(c->err, c->span, "%s: result dtype %s does not match the input's %s",
                           c->op->name, ry_dtype_name(out[0]->dtype), ry_dtype_name(dt));
    if (!fns[dt])
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(dt));
    ry_dtype wdt = dt == RY_FLOAT16 ? RY_FLOAT32 : dt; /* what the loop sees */
    _Alignas(8) char params[2 * sizeof(double)];
    for (int i = 0; i < nprm; i++)
        ry_ew_convert(params + (size_t)i * ry_dtype_size(wdt), wdt, &prm[i], RY_FLOAT64, 1);
    return ry_ew_map_cost(c, out[0], 1, in, true, fns[dt], params, cost);
}

#define KERNEL(NAME, FNS, COST) \
    RY_EW_KERNEL(NAME) { return unary(c, nin, in, nout, out, FNS, 0, NULL, COST); }

KERNEL(negative, neg_fns, 1)
KERNEL(abs, abs_fns, 1)
KERNEL(relu, relu_fns, 1)
KERNEL(exp, exp_fns, RY_PAR_MATH_COST)
KERNEL(log, log_fns, RY_PAR_MATH_COST)
KERNEL(sqrt, sqrt_fns, 2)
KERNEL(rsqrt, rsqrt_fns, 2)
KERNEL(tanh, tanh_fns, RY_PAR_MATH_COST)
KERNEL(sigmoid, sigmoid_fns, RY_PAR_MATH_COST)
KERNEL(logical_not, not_fns, 1)

RY_EW_KERNEL(leaky_relu) {
    double alpha = ry_attr_float(c->op, c->attrs, "alpha");
    return unary(c, nin, in, nout, out, leaky_fns, 1, &alpha, 1);
}

RY_EW_KERNEL(clip) {
    double b[2] = {ry_attr_float(c->op, c->attrs, "a_min"),
                   ry_attr_float(c->op, c->attrs, "a_max")};
    return unary(c, nin, in, nout, out, clip_fns, 2, b, 1);
}

RY_EW_KERNEL(cast) {
    if (check_io(c, nin, nout)) return RY_ERR;
    if (in[0]->size != out[0]->size)
        return ry_error_at(c->err, c->span, "cast: input and output sizes differ");
    ry_ew_convert(out[0]->data, out[0]->dtype, in[0]->data, in[0]->dtype, in[0]->size);
    return RY_OK;
}

RY_EW_KERNEL(copy) {
    if (check_io(c, nin, nout)) return RY_ERR;
    if (ry_tensor_nbytes(in[0]) != ry_tensor_nbytes(out[0]))
        return ry_error_at(c->err, c->span, "copy: input and output sizes differ");
    if (in[0]->size) memcpy(out[0]->data, in[0]->data, ry_tensor_nbytes(in[0]));
    return RY_OK;
}
