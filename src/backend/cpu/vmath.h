/*
 * vmath.h: vectorizable float32/float64 exp, log, tanh and sigmoid for the
 * CPU kernels (elemwise_unary.c) and the fused kernels.
 *
 * Array forms (vmath.c): y[i] = f(x[i]) for i < n; y may equal x (in place)
 * but must not otherwise overlap it. They run the widest vectors the CPU
 * has (simd.h: SSE2, AVX2 or AVX-512 builds, the same bits). Scalar forms (static inline below) are
 * branch-free (selects, bit tricks, polynomials) so that a loop calling them
 * vectorizes: with gcc at -O2 the calling file needs, BEFORE including
 * this header (gcc inlines only between functions with equal options),
 *   #pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math",
 *                        "fp-contract=off")
 * without no-trapping-math gcc does not turn the selects into blends;
 * fp-contract=off keeps gcc from fusing a * b + c in the AVX-512 builds
 * (simd.h) even outside C11 mode, so every build rounds alike.
 * (clang vectorizes at -O2 already.)
 *
 * Accuracy (tests/test_kernels_vmath.c, against libm in float64 over dense
 * sweeps): float32 within 2 ulp (exp, log) and 3 ulp (tanh, sigmoid) of the
 * correctly rounded result (measured: 1.0, 0.8, 1.5, 2.3); denormal results
 * within 1 denormal ulp. Special values: exp(-inf) = 0, exp(+inf) =
 * +inf, overflow gives +inf; log(0) = -inf, log(x < 0) = NaN, log(+inf) =
 * +inf, denormal inputs handled; tanh and sigmoid saturate exactly to +-1 and
 * 0/1 for large |x|; NaN in gives NaN out everywhere. float64 likewise
 * within 2 ulp (exp, log, sigmoid); float64 tanh calls libm.
 */
#ifndef RELAYC_CPU_VMATH_H
#define RELAYC_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

void ry_vexp_f32(const float *x, float *y, int64_t n);
void ry_vlog_f32(const float *x, float *y, int64_t n);
void ry_vtanh_f32(const float *x, float *y, int64_t n);
void ry_vsigmoid_f32(const float *x, float *y, int64_t n);

void ry_vexp_f64(const double *x, double *y, int64_t n);
void ry_vlog_f64(const double *x, double *y, int64_t n);
void ry_vtanh_f64(const double *x, double *y, int64_t n);
void ry_vsigmoid_f64(const double *x, double *y, int64_t n);

/* ---- scalar forms ---------------------------------------------------------- */

/* clang contracts a * b + c into an FMA where the target has one (the
 * AVX2/AVX-512 builds of simd.h); each form opens with this so every build
 * rounds as the baseline does (gcc in C11 mode never contracts). */
#if defined(__clang__)
#define RY_VM_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define RY_VM_NO_CONTRACT
#endif

static inline uint32_t ry_vm_bits_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float ry_vm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline uint64_t ry_vm_bits_f64(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline double ry_vm_double(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln 2 / 2 (Cody-Waite:
 * ln 2 in two parts so n * ln2_hi is exact). exp(r) by its Taylor series to
 * r^7 (truncation < 1e-8 relative). n is read from the bits of x/ln2 + 1.5 *
 * 2^23 (no float-to-int conversion, so no UB for NaN). 2^n is applied as two
 * factors 2^n1 * 2^n2 so that denormal results and overflow to inf come out
 * of plain multiplications. x is clamped first so n stays within range;
 * NaN passes the clamp (comparisons are false) and poisons the result. */
static inline float ry_exp_f32(float x) {
    RY_VM_NO_CONTRACT
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    const float shift = 12582912.0f; /* 1.5 * 2^23 */
    float t = x * 1.44269504088896341f + shift;
    uint32_t tb = ry_vm_bits_f32(t);
    float nf = t - shift;
    float r = x - nf * 0.693359375f;      /* ln2_hi: 9 significant bits */
    r = r - nf * -2.12194440e-4f;         /* ln2_lo */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r * r + r;
    p = p + 1.0f;
    /* n = tb - bits(shift), in [-151, 129]; m = n + 512 > 0 keeps shifts unsigned */
    uint32_t m = tb - 0x4B400000u + 512u;
    uint32_t n1 = (m >> 1) - 256u;         /* floor(n / 2), as two's complement */
    uint32_t n2 = m - 512u - n1;           /* n - n1 */
    float s1 = ry_vm_float((n1 + 127u) << 23);
    float s2 = ry_vm_float((n2 + 127u) << 23);
    return p * s1 * s2;
}

/* log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)), with log(m) =
 * 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, by its odd series to
 * s^11. Denormal x is first scaled by 2^23. Specials by selects at the end. */
static inline float ry_log_f32(float x) {
    RY_VM_NO_CONTRACT
    int den = x < 1.17549435e-38f;
    float xs = den ? x * 8388608.0f : x;
    uint32_t ix = ry_vm_bits_f32(xs);
    ix += 0x3F800000u - 0x3F3504F3u;           /* move the m = sqrt(1/2) cut to 1 */
    float e = (float)((int32_t)(ix >> 23) - 127) - (den ? 23.0f : 0.0f);
    float m = ry_vm_float((ix & 0x007FFFFFu) + 0x3F3504F3u);
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float q = 2.0f / 11.0f;
    q = q * z + 2.0f / 9.0f;
    q = q * z + 2.0f / 7.0f;
    q = q * z + 2.0f / 5.0f;
    q = q * z + 2.0f / 3.0f;
    /* log(m) = 2s + s z q = f - (f - 2s) + s z q; f - 2s = s f exactly in reals */
    float lm = f - s * (f - z * q);
    float y = e * 0.693359375f + (lm + e * -2.12194440e-4f);
    float special = x == 0.0f ? -INFINITY : (x == INFINITY ? x : NAN);
    return (x > 0.0f && x < INFINITY) ? y : special;
}

/* sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with
 * e = exp(-|x|) <= 1: no overflow, denormal results for x < -87, and exact
 * 1 for x > 17 (1 + e rounds to 1) and 0 for x = -inf. */
static inline float ry_sigmoid_f32(float x) {
    RY_VM_NO_CONTRACT
    float e = ry_exp_f32(-fabsf(x));
    float num = x >= 0.0f ? 1.0f : e;
    float y = num / (1.0f + e);
    return x != x ? x : y;
}

/* tools/gen_vmath_coeffs.py; max error over [0, 0.55] in float32: 0.79 ulp */
#define RY_VM_TANH_C1 -3.333333135e-01f
#define RY_VM_TANH_C2 1.333329529e-01f
#define RY_VM_TANH_C3 -5.395995453e-02f
#define RY_VM_TANH_C4 2.178471349e-02f
#define RY_VM_TANH_C5 -8.419355378e-03f
#define RY_VM_TANH_C6 2.401628066e-03f

/* tanh(|x|) = (1 - e) / (1 + e), e = exp(-2|x|), for |x| >= 0.55 (exactly 1
 * for |x| > 9); below, x + x^3 P(x^2), P fitted by least squares on the
 * relative error (tools/gen_vmath_coeffs.py). The sign is copied back. */
static inline float ry_tanh_f32(float x) {
    RY_VM_NO_CONTRACT
    float a = fabsf(x);
    float e = ry_exp_f32(-2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    float z = x * x;
    float p = RY_VM_TANH_C6;
    p = p * z + RY_VM_TANH_C5;
    p = p * z + RY_VM_TANH_C4;
    p = p * z + RY_VM_TANH_C3;
    p = p * z + RY_VM_TANH_C2;
    p = p * z + RY_VM_TANH_C1;
    float small = a + a * z * p;
    float y = a < 0.55f ? small : big;
    return copysignf(y, x);
}

/* float64: the same schemes with more terms. exp: Taylor to r^13. */
static inline double ry_exp_f64(double x) {
    RY_VM_NO_CONTRACT
    x = x < -746.0 ? -746.0 : x;
    x = x > 710.0 ? 710.0 : x;
    const double shift = 6755399441055744.0; /* 1.5 * 2^52 */
    double t = x * 1.4426950408889634074 + shift;
    uint64_t tb = ry_vm_bits_f64(t);
    double nf = t - shift;
    double r = x - nf * 6.93147180369123816490e-01; /* ln2_hi: low 32 bits zero */
    r = r - nf * 1.90821492927058770002e-10;        /* ln2_lo */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r * r + r;
    p = p + 1.0;
    /* n = tb - bits(shift) in [-1077, 1025]; m = n + 4096 > 0 */
    uint64_t m = tb - 0x4338000000000000u + 4096u;
    uint64_t n1 = (m >> 1) - 2048u;
    uint64_t n2 = m - 4096u - n1;
    double s1 = ry_vm_double(((n1 + 1023u) & 0x7FFu) << 52);
    double s2 = ry_vm_double(((n2 + 1023u) & 0x7FFu) << 52);
    return p * s1 * s2;
}

/* log: as float32, the atanh series to s^23. */
static inline double ry_log_f64(double x) {
    RY_VM_NO_CONTRACT
    int den = x < 2.2250738585072014e-308;
    double xs = den ? x * 18014398509481984.0 : x; /* 2^54 */
    uint64_t ix = ry_vm_bits_f64(xs);
    ix += 0x3FF0000000000000u - 0x3FE6A09E667F3BCDu;
    double e = (double)((int64_t)(ix >> 52) - 1023) - (den ? 54.0 : 0.0);
    double m = ry_vm_double((ix & 0x000FFFFFFFFFFFFFu) + 0x3FE6A09E667F3BCDu);
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double q = 2.0 / 23.0;
    q = q * z + 2.0 / 21.0;
    q = q * z + 2.0 / 19.0;
    q = q * z + 2.0 / 17.0;
    q = q * z + 2.0 / 15.0;
    q = q * z + 2.0 / 13.0;
    q = q * z + 2.0 / 11.0;
    q = q * z + 2.0 / 9.0;
    q = q * z + 2.0 / 7.0;
    q = q * z + 2.0 / 5.0;
    q = q * z + 2.0 / 3.0;
    double lm = f - s * (f - z * q);
    double y = e * 6.93147180369123816490e-01 + (lm + e * 1.90821492927058770002e-10);
    double special = x == 0.0 ? -INFINITY : (x == INFINITY ? x : NAN);
    return (x > 0.0 && x < INFINITY) ? y : special;
}

static inline double ry_sigmoid_f64(double x) {
    RY_VM_NO_CONTRACT
    double e = ry_exp_f64(-fabs(x));
    double num = x >= 0.0 ? 1.0 : e;
    double y = num / (1.0 + e);
    return x != x ? x : y;
}

#endif
