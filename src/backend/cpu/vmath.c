/*
 * vmath.c: the array forms of vmath.h's transcendentals: plain loops over
 * the inline scalar forms, which the compiler vectorizes (the pragma
 * below), each built for SSE2, AVX2 and AVX-512 and picked at run time
 * (simd.h; the same bits at every level). Also ry_simd_level. float64 tanh
 * calls libm: its accuracy matters more than its speed (gradient checks
 * run in float64).
 */
/* before the include: gcc inlines only between functions of equal options */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                     "fp-contract=off")
#endif

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/simd.h"
#include "backend/cpu/vmath.h"

RY_SIMD_NO_CONTRACT

/* ---- the level ---- */

static ry_simd cpu_level(void) {
#if RY_SIMD_X86
    __builtin_cpu_init();
    /* libgcc's and compiler-rt's checks include the OS's xgetbv state */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
        return RY_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2")) return RY_SIMD_AVX2;
#endif
    return RY_SIMD_BASE;
}

static atomic_int level_now = -1; /* what the loops use; -1: not chosen yet */

static int choose(void) {
    int hw = (int)cpu_level(), want = hw;
    const char *env = getenv("RELAYC_SIMD");
    if (env && strcmp(env, "base") == 0) want = RY_SIMD_BASE;
    else if (env && strcmp(env, "avx2") == 0) want = RY_SIMD_AVX2;
    return want < hw ? want : hw;
}

ry_simd ry_simd_level(void) {
    int l = atomic_load_explicit(&level_now, memory_order_relaxed);
    if (l < 0) atomic_store_explicit(&level_now, l = choose(), memory_order_relaxed);
    return (ry_simd)l;
}

void ry_simd_force(int level) {
    int hw = (int)cpu_level();
    atomic_store(&level_now, level < 0 ? choose() : level < hw ? level : hw);
}

/* ---- the array forms ---- */

#define ARRAY(NAME, T, FN)                                                                   \
    static void NAME##_base(const T *x, T *y, int64_t n) {                                   \
        for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]);                                     \
    }                                                                                        \
    RY_TARGET_AVX2 static void NAME##_avx2(const T *x, T *y, int64_t n) {                    \
        for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]);                                     \
    }                                                                                        \
    RY_TARGET_AVX512 static void NAME##_avx512(const T *x, T *y, int64_t n) {                \
        for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]);                                     \
    }                                                                                        \
    void NAME(const T *x, T *y, int64_t n) {                                                 \
        switch (ry_simd_level()) {                                                           \
        case RY_SIMD_AVX512: NAME##_avx512(x, y, n); break;                                  \
        case RY_SIMD_AVX2: NAME##_avx2(x, y, n); break;                                      \
        default: NAME##_base(x, y, n); break;                                                \
        }                                                                                    \
    }

ARRAY(ry_vexp_f32, float, ry_exp_f32)
ARRAY(ry_vlog_f32, float, ry_log_f32)
ARRAY(ry_vtanh_f32, float, ry_tanh_f32)
ARRAY(ry_vsigmoid_f32, float, ry_sigmoid_f32)
ARRAY(ry_vexp_f64, double, ry_exp_f64)
ARRAY(ry_vlog_f64, double, ry_log_f64)
ARRAY(ry_vsigmoid_f64, double, ry_sigmoid_f64)

/* libm's tanh: one build */
void ry_vtanh_f64(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tanh(x[i]);
}
