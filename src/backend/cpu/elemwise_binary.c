/*
 * elemwise_binary.c: CPU kernels of the broadcasting binary operators:
 * arithmetic (add ... minimum), comparisons (bool result) and logical
 * and/or. Shapes are the broadcast iterator's business (elemwise.c); here
 * are only the inner loops, one per dtype, and their dispatch.
 */

/* Integer semantics, as TVM's: + - * wrap modulo 2^bits; divide truncates
 * toward zero (TVM's div on integers is truncdiv) and division by zero is a
 * run-time error; INT_MIN / -1 wraps to INT_MIN. power on integers is exact
 * repeated squaring, wrapping; a negative exponent gives trunc(1 / x^-y)
 * (1 for x = 1, +-1 for x = -1, 0 otherwise; 0 to a negative power is an
 * error). maximum and minimum propagate NaN, as numpy's do. */
#include <math.h>

#include "backend/cpu/elemwise_kernels.h"

/* GCC vectorizes loops only from -O3 (or with its cheapest cost model at
 * -O2, which rejects loops of unknown length); these loops are what
 * vectorization is for. Clang vectorizes at -O2 already. no-trapping-math
 * lets the NaN-propagating maximum/minimum selects become blends. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

/* Shape legend: n = elements in the inner loop; p[0] = out, p[1] = x,
 * p[2] = y; s[1], s[2] = 1 (walks) or 0 (broadcast). Each case is a plain
 * loop the compiler can vectorize. */
#define BINARY(NAME, T, TO, EXPR)                                                    \
    static void NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                   \
        TO *o = (TO *)p[0];                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                          \
        if (s[1] && s[2]) {                                                          \
            for (int64_t i = 0; i < n; i++) {                                        \
                T x = a[i], y = b[i];                                                \
                o[i] = (TO)(EXPR);                                                   \
            }                                                                        \
        } else if (s[1]) {                                                           \
            const T y = b[0];                                                        \
            for (int64_t i = 0; i < n; i++) {                                        \
                T x = a[i];                                                          \
                o[i] = (TO)(EXPR);                                                   \
            }                                                                        \
        } else if (s[2]) {                                                           \
            const T x = a[0];                                                        \
            for (int64_t i = 0; i < n; i++) {                                        \
                T y = b[i];                                                          \
                o[i] = (TO)(EXPR);                                                   \
            }                                                                        \
        } else {                                                                     \
            const T x = a[0], y = b[0];                                              \
            for (int64_t i = 0; i < n; i++) o[i] = (TO)(EXPR);                       \
        }                                                                            \
    }

/* One op over the numeric dtypes: FE is the float expression, IE(T, UT) the
 * integer one (UT: the unsigned type of the same width, for wrapping; 32
 * bits for int16, whose products would overflow int after promotion), UE
 * the one for uint8 and U16E for uint16 where they differ. */
#define NUMERIC(OP, FE, IE, UE, U16E)                                                \
    BINARY(OP##_f32, float, float, FE)                                               \
    BINARY(OP##_f64, double, double, FE)                                             \
    BINARY(OP##_i8, int8_t, int8_t, IE(int8_t, uint8_t))                             \
    BINARY(OP##_i32, int32_t, int32_t, IE(int32_t, uint32_t))                        \
    BINARY(OP##_i64, int64_t, int64_t, IE(int64_t, uint64_t))                        \
    BINARY(OP##_u8, uint8_t, uint8_t, UE)                                            \
    BINARY(OP##_i16, int16_t, int16_t, IE(int16_t, uint32_t))                        \
    BINARY(OP##_u16, uint16_t, uint16_t, U16E)                                       \
    static const ry_ew_inner OP##_fns[RY_DTYPE_COUNT] = {                            \
        [RY_FLOAT32] = OP##_f32, [RY_FLOAT64] = OP##_f64, [RY_FLOAT16] = OP##_f32,   \
        [RY_INT8] = OP##_i8,     [RY_INT32] = OP##_i32,   [RY_INT64] = OP##_i64,     \
        [RY_UINT8] = OP##_u8,    [RY_INT16] = OP##_i16,   [RY_UINT16] = OP##_u16};

#define IADD(T, UT) (T)(UT)((UT)x + (UT)y)
#define ISUB(T, UT) (T)(UT)((UT)x - (UT)y)
#define IMUL(T, UT) (T)(UT)((UT)x * (UT)y)
/* ctx points at an int set to 1 on division by zero */
#define IDIV(T, UT) (y == 0 ? (*(int *)ctx = 1, (T)0) : y == -1 ? (T)(UT)(0u - (UT)x) : (T)(x / y))
#define UDIV (y == 0 ? (*(int *)ctx = 1, 0) : x / y)
#define IPOW(T, UT) (T)(UT)ipow(x, y, (int *)ctx)
#define IMAX(T, UT) (x > y ? x : y)
#define IMIN(T, UT) (x < y ? x : y)

/* x^y for integers, wrapping modulo 2^64 (callers truncate further). */
static uint64_t ipow(int64_t x, int64_t y, int *bad) {
    if (y < 0) {
        if (x == 1) return 1;
        if (x == -1) return (y & 1) ? UINT64_MAX : 1; /* UINT64_MAX wraps to -1 */
        if (x == 0) *bad = 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)x;
    for (; y; y >>= 1, b *= b)
        if (y & 1) r *= b;
    return r;
}

static float powf_(float x, float y) { return powf(x, y); }
static double pow_(double x, double y) { return pow(x, y); }
#define FPOW _Generic(x, float: powf_, double: pow_)(x, y)

NUMERIC(add, x + y, IADD, x + y, x + y)
NUMERIC(sub, x - y, ISUB, x - y, x - y)
NUMERIC(mul, x * y, IMUL, x * y, (uint16_t)((uint32_t)x * y))
NUMERIC(div, x / y, IDIV, UDIV, UDIV)
NUMERIC(pow, FPOW, IPOW, IPOW(uint8_t, uint8_t), IPOW(uint16_t, uint16_t))
NUMERIC(max, x != x ? x : (x > y ? x : y), IMAX, x > y ? x : y, x > y ? x : y)
NUMERIC(min, x != x ? x : (x < y ? x : y), IMIN, x < y ? x : y, x < y ? x : y)

/* Comparisons: every dtype (bool as its byte 0/1), result bool. */
#define COMPARE(OP, E)                                                               \
    BINARY(OP##_f32, float, uint8_t, E)                                              \
    BINARY(OP##_f64, double, uint8_t, E)                                             \
    BINARY(OP##_i8, int8_t, uint8_t, E)                                              \
    BINARY(OP##_i32, int32_t, uint8_t, E)                                            \
    BINARY(OP##_i64, int64_t, uint8_t, E)                                            \
    BINARY(OP##_u8, uint8_t, uint8_t, E)                                             \
    BINARY(OP##_i16, int16_t, uint8_t, E)                                            \
    BINARY(OP##_u16, uint16_t, uint8_t, E)                                           \
    static const ry_ew_inner OP##_fns[RY_DTYPE_COUNT] = {                            \
        [RY_FLOAT32] = OP##_f32, [RY_FLOAT64] = OP##_f64, [RY_FLOAT16] = OP##_f32,   \
        [RY_INT8] = OP##_i8,     [RY_INT32] = OP##_i32,   [RY_INT64] = OP##_i64,     \
        [RY_UINT8] = OP##_u8,    [RY_BOOL] = OP##_u8,     [RY_INT16] = OP##_i16,     \
        [RY_UINT16] = OP##_u16};

COMPARE(eq, x == y)
COMPARE(ne, x != y)
COMPARE(lt, x < y)
COMPARE(le, x <= y)
COMPARE(gt, x > y)
COMPARE(ge, x >= y)

BINARY(and_b, uint8_t, uint8_t, (x != 0) & (y != 0))
BINARY(or_b, uint8_t, uint8_t, (x != 0) | (y != 0))
static const ry_ew_inner and_fns[RY_DTYPE_COUNT] = {[RY_BOOL] = and_b};
static const ry_ew_inner or_fns[RY_DTYPE_COUNT] = {[RY_BOOL] = or_b};

/* out = fns[dtype](x, y); bad_msg is the error when the loop flags one. */
static ry_status binary(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                        ry_tensor *const *out, const ry_ew_inner *fns, bool to_bool,
                        const char *bad_msg) {
    if (nin != 2 || nout != 1)
        return ry_error_at(c->err, c->span, "%s: expected 2 inputs and 1 output", c->op->name);
    ry_dtype dt = in[0]->dtype;
    if (in[1]->dtype != dt)
        return ry_error_at(c->err, c->span, "%s: dtypes %s and %s differ", c->op->name,
                           ry_dtype_name(dt), ry_dtype_name(in[1]->dtype));
    if (out[0]->dtype != (to_bool ? RY_BOOL : dt))
        return ry_error_at(c->err, c->span, "%s: result dtype %s does not match the inputs",
                           c->op->name, ry_dtype_name(out[0]->dtype));
    if (!fns[dt])
        return ry_error_at(c->err, c->span, "%s: dtype %s not supported", c->op->name,
                           ry_dtype_name(dt));
    int bad = 0;
    if (ry_ew_map(c, out[0], 2, in, true, fns[dt], &bad)) return RY_ERR;
    if (bad) return ry_error_at(c->err, c->span, "%s: %s", c->op->name, bad_msg);
    return RY_OK;
}

#define KERNEL(NAME, FNS, BOOL, MSG) \
    RY_EW_KERNEL(NAME) { return binary(c, nin, in, nout, out, FNS, BOOL, MSG); }

KERNEL(add, add_fns, false, "")
KERNEL(subtract, sub_fns, false, "")
KERNEL(multiply, mul_fns, false, "")
KERNEL(divide, div_fns, false, "integer division by zero")
KERNEL(power, pow_fns, false, "integer 0 raised to a negative power")
KERNEL(maximum, max_fns, false, "")
KERNEL(minimum, min_fns, false, "")
KERNEL(equal, eq_fns, true, "")
KERNEL(not_equal, ne_fns, true, "")
KERNEL(less, lt_fns, true, "")
KERNEL(less_equal, le_fns, true, "")
KERNEL(greater, gt_fns, true, "")
KERNEL(greater_equal, ge_fns, true, "")
KERNEL(logical_and, and_fns, true, "")
KERNEL(logical_or, or_fns, true, "")
