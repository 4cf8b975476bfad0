/*
 * vmath.c: the array forms of vmath.h's transcendentals: plain loops over
 * the inline scalar forms, which gcc vectorizes (the pragma below) into
 * 4/8-wide SSE/AVX code. float64 tanh calls libm: its accuracy matters more
 * than its speed (gradient checks run in float64).
 */
/* before the include: gcc inlines only between functions of equal options */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include "backend/cpu/vmath.h"

#define ARRAY(NAME, T, FN)                                      \
    void NAME(const T *x, T *y, int64_t n) {                    \
        for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]);        \
    }

ARRAY(ry_vexp_f32, float, ry_exp_f32)
ARRAY(ry_vlog_f32, float, ry_log_f32)
ARRAY(ry_vtanh_f32, float, ry_tanh_f32)
ARRAY(ry_vsigmoid_f32, float, ry_sigmoid_f32)
ARRAY(ry_vexp_f64, double, ry_exp_f64)
ARRAY(ry_vlog_f64, double, ry_log_f64)
ARRAY(ry_vtanh_f64, double, tanh)
ARRAY(ry_vsigmoid_f64, double, ry_sigmoid_f64)
