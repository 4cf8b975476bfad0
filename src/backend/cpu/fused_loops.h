/*
 * fused_loops.h: the per-instruction loops of the fused-program executor
 * (fused_exec.c), and their table by opcode and dtype. fused_exec.c
 * includes this file once per SIMD level (simd.h) with FZ_SFX naming the
 * build (base, avx2, avx512) and FZ_ATTR its target attribute, so every
 * loop exists in three builds that compute the same bits.
 *
 * Shape legend: n elements of the tile; o the result, a, b, c the operands
 * (c only for where), prm the instruction's attributes. The expressions are
 * those of the unfused kernels (elemwise_*.c), so results match them.
 */
#define FZ_CAT2(a, b) a##_##b
#define FZ_CAT(a, b) FZ_CAT2(a, b)
#define FZ(name) FZ_CAT(name, FZ_SFX)

#define SIG(NAME)                                                                            \
    FZ_ATTR static void FZ(NAME)(int64_t n, void *restrict o_, const void *restrict a_,      \
                                 const void *restrict b_, const void *restrict c_,           \
                                 const double *prm)
#define UN(NAME, T, TO, E)                                                                   \
    SIG(NAME) {                                                                              \
        TO *o = o_;                                                                          \
        const T *a = a_;                                                                     \
        const T lo = (T)prm[0], hi = (T)prm[1];                                              \
        (void)b_, (void)c_, (void)lo, (void)hi;                                              \
        for (int64_t i = 0; i < n; i++) {                                                    \
            T x = a[i];                                                                      \
            o[i] = (TO)(E);                                                                  \
        }                                                                                    \
    }
#define BI(NAME, T, TO, E)                                                                   \
    SIG(NAME) {                                                                              \
        TO *o = o_;                                                                          \
        const T *a = a_, *b = b_;                                                            \
        (void)c_, (void)prm;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                    \
            T x = a[i], y = b[i];                                                            \
            o[i] = (TO)(E);                                                                  \
        }                                                                                    \
    }
#define BINF(OP, E) BI(OP##_f32, float, float, E) BI(OP##_f64, double, double, E)
#define UNF(OP, E) UN(OP##_f32, float, float, E) UN(OP##_f64, double, double, E)
#define CMP(OP, E)                                                                           \
    BI(OP##_f32, float, uint8_t, E) BI(OP##_f64, double, uint8_t, E)                         \
    BI(OP##_b, uint8_t, uint8_t, E)
#define M(fn, x) _Generic((x), float: fn##f, double: fn)(x)

BINF(add, x + y)
BINF(sub, x - y)
BINF(mul, x * y)
BINF(div, x / y)
BINF(pow, _Generic(x, float: fz_powf, double: fz_pow)(x, y))
BINF(max, x != x ? x : (x > y ? x : y))
BINF(min, x != x ? x : (x < y ? x : y))
CMP(eq, x == y)
CMP(ne, x != y)
CMP(lt, x < y)
CMP(le, x <= y)
CMP(gt, x > y)
CMP(ge, x >= y)
BI(and_b, uint8_t, uint8_t, (x != 0) & (y != 0))
BI(or_b, uint8_t, uint8_t, (x != 0) | (y != 0))
UN(not_b, uint8_t, uint8_t, x == 0)
UNF(neg, -x)
UNF(sqrt, M(sqrt, x))
UNF(rsqrt, 1 / M(sqrt, x))
UNF(abs, M(fabs, x))
UNF(relu, x > 0 ? x : (x != x ? x : 0))
UNF(leaky, x > 0 ? x : x * lo)
UNF(clip, x != x ? x : ((x < hi ? x : hi) > lo ? (x < hi ? x : hi) : lo))
UN(cast_f32_f64, float, double, x)
UN(cast_f64_f32, double, float, x)
UN(cast_b_f32, uint8_t, float, x != 0)
UN(cast_b_f64, uint8_t, double, x != 0)
UN(cast_f32_b, float, uint8_t, x != 0)
UN(cast_f64_b, double, uint8_t, x != 0)

#define WHERE(NAME, T)                                                                       \
    SIG(NAME) {                                                                              \
        (void)prm;                                                                           \
        T *o = o_;                                                                           \
        const uint8_t *k = a_;                                                               \
        const T *x = b_, *y = c_;                                                            \
        for (int64_t i = 0; i < n; i++) o[i] = k[i] ? x[i] : y[i];                           \
    }
WHERE(where1, uint8_t)
WHERE(where4, uint32_t)
WHERE(where8, uint64_t)

/* by opcode, then the operands' dtype: [0] float32, [1] float64, [2] bool.
 * exp, log, tanh and sigmoid are vmath.c's array forms, which dispatch on
 * the level themselves (fz_exp_f32 ... in fused_exec.c). */
static const fz_fn FZ(table)[RY_FZ_NOPS][3] = {
    [RY_FZ_ADD] = {FZ(add_f32), FZ(add_f64)},
    [RY_FZ_SUB] = {FZ(sub_f32), FZ(sub_f64)},
    [RY_FZ_MUL] = {FZ(mul_f32), FZ(mul_f64)},
    [RY_FZ_DIV] = {FZ(div_f32), FZ(div_f64)},
    [RY_FZ_POW] = {FZ(pow_f32), FZ(pow_f64)},
    [RY_FZ_MAX] = {FZ(max_f32), FZ(max_f64)},
    [RY_FZ_MIN] = {FZ(min_f32), FZ(min_f64)},
    [RY_FZ_EQ] = {FZ(eq_f32), FZ(eq_f64), FZ(eq_b)},
    [RY_FZ_NE] = {FZ(ne_f32), FZ(ne_f64), FZ(ne_b)},
    [RY_FZ_LT] = {FZ(lt_f32), FZ(lt_f64), FZ(lt_b)},
    [RY_FZ_LE] = {FZ(le_f32), FZ(le_f64), FZ(le_b)},
    [RY_FZ_GT] = {FZ(gt_f32), FZ(gt_f64), FZ(gt_b)},
    [RY_FZ_GE] = {FZ(ge_f32), FZ(ge_f64), FZ(ge_b)},
    [RY_FZ_AND] = {NULL, NULL, FZ(and_b)},
    [RY_FZ_OR] = {NULL, NULL, FZ(or_b)},
    [RY_FZ_NEG] = {FZ(neg_f32), FZ(neg_f64)},
    [RY_FZ_EXP] = {fz_exp_f32, fz_exp_f64},
    [RY_FZ_LOG] = {fz_log_f32, fz_log_f64},
    [RY_FZ_SQRT] = {FZ(sqrt_f32), FZ(sqrt_f64)},
    [RY_FZ_RSQRT] = {FZ(rsqrt_f32), FZ(rsqrt_f64)},
    [RY_FZ_TANH] = {fz_tanh_f32, fz_tanh_f64},
    [RY_FZ_SIGMOID] = {fz_sigmoid_f32, fz_sigmoid_f64},
    [RY_FZ_ABS] = {FZ(abs_f32), FZ(abs_f64)},
    [RY_FZ_RELU] = {FZ(relu_f32), FZ(relu_f64)},
    [RY_FZ_LEAKY] = {FZ(leaky_f32), FZ(leaky_f64)},
    [RY_FZ_CLIP] = {FZ(clip_f32), FZ(clip_f64)},
    [RY_FZ_NOT] = {NULL, NULL, FZ(not_b)},
};

/* casts by [from][to] dtype index; where by element size */
static const fz_fn FZ(casts)[3][3] = {
    {NULL, FZ(cast_f32_f64), FZ(cast_f32_b)},
    {FZ(cast_f64_f32), NULL, FZ(cast_f64_b)},
    {FZ(cast_b_f32), FZ(cast_b_f64), NULL},
};
static const fz_fn FZ(wheres)[3] = {FZ(where1), FZ(where4), FZ(where8)};

#undef SIG
#undef UN
#undef BI
#undef BINF
#undef UNF
#undef CMP
#undef M
#undef WHERE
#undef FZ
#undef FZ_CAT
#undef FZ_CAT2
