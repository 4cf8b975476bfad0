/*
 * simd.h: one loop built three times, for the baseline x86-64 ISA (SSE2),
 * for AVX2 and for AVX-512, and chosen at run time by what the CPU has.
 * The library is compiled for the baseline (it must run on any x86-64);
 * the hot elementwise loops (vmath.c, fused_exec.c) run 2-4x faster on
 * wider vectors. The builds give the same bits: every operation in those
 * loops is exact per lane (IEEE add, multiply, divide, sqrt, selects and
 * bit tricks), so the vector width cannot change a result, and no build
 * contracts a * b + c into an FMA (C11 mode turns gcc's contraction off;
 * files using RY_SIMD_TARGET turn clang's off with the pragma below).
 * Elsewhere (not x86-64, not gcc/clang) the three builds are the same code.
 */
#ifndef RELAYC_CPU_SIMD_H
#define RELAYC_CPU_SIMD_H

#include <stdint.h>

typedef enum { RY_SIMD_BASE, RY_SIMD_AVX2, RY_SIMD_AVX512 } ry_simd;

/* The widest level the CPU and OS support, or the one RELAYC_SIMD names
 * (base, avx2, avx512: never above what the CPU has). Read once. */
ry_simd ry_simd_level(void);

/* For tests: runs every dispatched loop at `level` from now on (clamped to
 * what the CPU has); -1 goes back to ry_simd_level's choice. Not for use
 * while other threads run kernels. */
void ry_simd_force(int level);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RY_SIMD_X86 1
#define RY_TARGET_AVX2 __attribute__((target("avx2")))
#define RY_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512vl,avx512bw,avx512dq")))
#else
#define RY_SIMD_X86 0
#define RY_TARGET_AVX2
#define RY_TARGET_AVX512
#endif

/* clang contracts a * b + c within an expression by default (gcc in C11
 * mode does not): off, so that the AVX-512 build (which has FMA) rounds as
 * the baseline does. */
#if defined(__clang__)
#define RY_SIMD_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define RY_SIMD_NO_CONTRACT
#endif

/* NAME(y, x, n): y[j] += x[j] for j < n (TY += TX: the same type, or
 * float into double), built at each level and run at ry_simd_level's (the
 * same bits at each: one exact widening and one IEEE add per element).
 * y and x never overlap. The file must let gcc vectorize (the pragma of
 * reduce.c and scatter.c). */
#define RY_SIMD_ACCUMULATE(NAME, TY, TX)                                                       \
    static void NAME##_base(TY *restrict y, const TX *restrict x, int64_t n) {                 \
        for (int64_t j = 0; j < n; j++) y[j] += x[j];                                          \
    }                                                                                          \
    RY_TARGET_AVX2 static void NAME##_avx2(TY *restrict y, const TX *restrict x, int64_t n) {  \
        for (int64_t j = 0; j < n; j++) y[j] += x[j];                                          \
    }                                                                                          \
    RY_TARGET_AVX512 static void NAME##_avx512(TY *restrict y, const TX *restrict x,           \
                                               int64_t n) {                                    \
        for (int64_t j = 0; j < n; j++) y[j] += x[j];                                          \
    }                                                                                          \
    static void NAME(TY *restrict y, const TX *restrict x, int64_t n) {                        \
        switch (ry_simd_level()) {                                                             \
        case RY_SIMD_AVX512: NAME##_avx512(y, x, n); break;                                    \
        case RY_SIMD_AVX2: NAME##_avx2(y, x, n); break;                                        \
        default: NAME##_base(y, x, n); break;                                                  \
        }                                                                                      \
    }

#endif
