/*
 * test_kernels_vmath.c: accuracy of the vectorized transcendentals of
 * src/backend/cpu/vmath.h against libm evaluated in float64 (float32) or
 * long double (float64), over dense sweeps of each function's range, every
 * binade, denormals, and the special values (+-0, +-inf, NaN, saturation).
 * Errors are in units of the last place of the correctly rounded result.
 */
#include "test_util.h"

#include <float.h>
#include <stdlib.h>

#include "backend/cpu/vmath.h"

typedef void (*vfn32)(const float *, float *, int64_t);
typedef void (*vfn64)(const double *, double *, int64_t);

/* |y - ref| in ulps of the float nearest to ref (denormal ulp below 2^-126). */
static double ulp_err32(float y, double ref) {
    if (isnan(ref)) return isnan(y) ? 0 : INFINITY;
    float rf = (float)ref;
    if (isinf(rf)) return y == rf ? 0 : INFINITY;
    if (isnan(y) || isinf(y)) return INFINITY;
    float a = fabsf(rf);
    double ulp = (double)nextafterf(a, INFINITY) - (double)a;
    return fabs((double)y - ref) / ulp;
}

static double ulp_err64(double y, long double ref) {
    if (isnan(ref)) return isnan(y) ? 0 : INFINITY;
    double rd = (double)ref;
    if (isinf(rd)) return y == rd ? 0 : INFINITY;
    if (isnan(y) || isinf(y)) return INFINITY;
    double a = fabs(rd);
    long double ulp = (long double)nextafter(a, INFINITY) - a;
    return (double)(fabsl((long double)y - ref) / ulp);
}

static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static long double ref_sigmoidl(long double x) { return 1 / (1 + expl(-x)); }

/* Max ulp error of f over n points evenly spaced in [lo, hi], plus the
 * points' float neighbours, computed in chunks through the array form. */
static double sweep32(vfn32 f, double (*ref)(double), double lo, double hi, int64_t n) {
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * (double)i / (double)(n - 1));
    f(x, y, n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ulp_err32(y[i], ref(x[i]));
        if (e > worst) {
            worst = e;
            if (e > 4) print_message("x = %.9g: got %.9g, want %.9g\n", x[i], y[i], ref(x[i]));
        }
    }
    free(x);
    free(y);
    return worst;
}

/* Over every binade in [2^e0, 2^e1): 4096 mantissas each, both signs when
 * neg. The positive numbers a log sees, or the scales a tanh sees. */
static double binades32(vfn32 f, double (*ref)(double), int e0, int e1, bool neg) {
    int64_t per = 4096, n = (int64_t)(e1 - e0) * per * (neg ? 2 : 1);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    int64_t k = 0;
    for (int e = e0; e < e1; e++)
        for (int64_t j = 0; j < per; j++) {
            float v = ldexpf(1.0f + (float)j / (float)per, e);
            x[k++] = v;
            if (neg) x[k++] = -v;
        }
    f(x, y, n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ulp_err32(y[i], ref(x[i]));
        if (e > worst) {
            worst = e;
            if (e > 4) print_message("x = %.9g: got %.9g, want %.9g\n", x[i], y[i], ref(x[i]));
        }
    }
    free(x);
    free(y);
    return worst;
}

static double sweep64(vfn64 f, long double (*ref)(long double), double lo, double hi, int64_t n) {
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (double)i / (double)(n - 1);
    f(x, y, n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ulp_err64(y[i], ref(x[i]));
        if (e > worst) {
            worst = e;
            if (e > 4) print_message("x = %.17g: got %.17g\n", x[i], y[i]);
        }
    }
    free(x);
    free(y);
    return worst;
}

/* f applied to each of xs must give exactly want (NaN matching NaN; the
 * sign of a zero checked too). */
static void specials32(vfn32 f, const float *xs, const float *want, int n) {
    float y[16];
    f(xs, y, n);
    for (int i = 0; i < n; i++) {
        if (isnan(want[i])) {
            if (!isnan(y[i])) fail_msg("f(%g) = %g, want NaN", xs[i], y[i]);
        } else if (y[i] != want[i] || signbit(y[i]) != signbit(want[i])) {
            fail_msg("f(%.9g) = %.9g, want %.9g", xs[i], y[i], want[i]);
        }
    }
}

static void exp_f32(void **state) {
    (void)state;
    double w = sweep32(ry_vexp_f32, exp, -87.3, 88.72, 2000001);
    print_message("exp f32 normal range: %.3f ulp\n", w);
    assert_true(w <= 2.0);
    w = sweep32(ry_vexp_f32, exp, -1e-3, 1e-3, 200001);
    assert_true(w <= 2.0);
    /* denormal results: within 1 denormal ulp */
    w = sweep32(ry_vexp_f32, exp, -103.9, -87.4, 200001);
    print_message("exp f32 denormal range: %.3f ulp\n", w);
    assert_true(w <= 1.0);
    float xs[] = {0.0f, -0.0f, -INFINITY, INFINITY, NAN, 89.0f, 1000.0f, -1000.0f, -104.0f, 88.72f};
    float want[] = {1, 1, 0, INFINITY, NAN, INFINITY, INFINITY, 0, 0, expf(88.72f)};
    specials32(ry_vexp_f32, xs, want, 10);
}

static void log_f32(void **state) {
    (void)state;
    double w = binades32(ry_vlog_f32, log, -149, 128, false);
    print_message("log f32 all binades: %.3f ulp\n", w);
    assert_true(w <= 2.0);
    w = sweep32(ry_vlog_f32, log, 0.5, 2.0, 2000001);
    print_message("log f32 [0.5, 2]: %.3f ulp\n", w);
    assert_true(w <= 2.0);
    float xs[] = {0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN, 1.0f, FLT_TRUE_MIN, FLT_MAX};
    float want[] = {-INFINITY, -INFINITY, NAN, INFINITY, NAN, NAN, 0.0f,
                    (float)log(FLT_TRUE_MIN), (float)log(FLT_MAX)};
    specials32(ry_vlog_f32, xs, want, 9);
}

static void tanh_f32(void **state) {
    (void)state;
    double w = sweep32(ry_vtanh_f32, tanh, -12, 12, 2000001);
    print_message("tanh f32 [-12, 12]: %.3f ulp\n", w);
    assert_true(w <= 3.0);
    w = binades32(ry_vtanh_f32, tanh, -149, 4, true);
    print_message("tanh f32 small binades: %.3f ulp\n", w);
    assert_true(w <= 3.0);
    float xs[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 10.0f, -10.0f, 1e30f, FLT_TRUE_MIN};
    float want[] = {0.0f, -0.0f, 1, -1, NAN, 1, -1, 1, FLT_TRUE_MIN};
    specials32(ry_vtanh_f32, xs, want, 9);
}

static void sigmoid_f32(void **state) {
    (void)state;
    double w = sweep32(ry_vsigmoid_f32, ref_sigmoid, -87, 30, 2000001);
    print_message("sigmoid f32 [-87, 30]: %.3f ulp\n", w);
    assert_true(w <= 3.0);
    w = sweep32(ry_vsigmoid_f32, ref_sigmoid, -103, -87, 100001);
    print_message("sigmoid f32 denormal range: %.3f ulp\n", w);
    assert_true(w <= 1.0);
    float xs[] = {0.0f, INFINITY, -INFINITY, NAN, 20.0f, 1e30f, -1e30f, -200.0f};
    float want[] = {0.5f, 1, 0, NAN, 1, 1, 0, 0};
    specials32(ry_vsigmoid_f32, xs, want, 8);
}

/* Whether long double is wider than double at run time: under valgrind it
 * is not (x87 arithmetic is emulated in double), and the float64 reference
 * is then itself only good to an ulp or so. */
static bool wide_long_double(void) {
    volatile long double a = 1.0L, b = 1e-18L;
    return a + b != a;
}

static void f64_all(void **state) {
    (void)state;
    double bound = wide_long_double() ? 2.0 : 4.0;
    double w = sweep64(ry_vexp_f64, expl, -708, 709.7, 1000001);
    print_message("exp f64: %.3f ulp\n", w);
    assert_true(w <= bound);
    w = sweep64(ry_vlog_f64, logl, 1e-300, 1e300, 100001);
    assert_true(w <= bound);
    w = sweep64(ry_vlog_f64, logl, 0.25, 4, 1000001);
    print_message("log f64 [0.25, 4]: %.3f ulp\n", w);
    assert_true(w <= bound);
    w = sweep64(ry_vsigmoid_f64, ref_sigmoidl, -700, 40, 1000001);
    print_message("sigmoid f64: %.3f ulp\n", w);
    assert_true(w <= bound);
    w = sweep64(ry_vtanh_f64, tanhl, -20, 20, 100001);
    assert_true(w <= bound);
    double xs[] = {0.0, -INFINITY, INFINITY, NAN, 1000.0, -1000.0, 4.9e-324};
    double y[7];
    ry_vexp_f64(xs, y, 7);
    assert_true(y[0] == 1 && y[1] == 0 && isinf(y[2]) && isnan(y[3]) && isinf(y[4]) && y[5] == 0);
    ry_vlog_f64(xs, y, 7);
    assert_true(isinf(y[0]) && y[0] < 0 && isnan(y[1]) && isinf(y[2]) && isnan(y[3]));
    assert_true(fabs(y[6] - log(4.9e-324)) < 1e-12);
    ry_vsigmoid_f64(xs, y, 7);
    assert_true(y[0] == 0.5 && y[1] == 0 && y[2] == 1 && isnan(y[3]) && y[4] == 1 && y[5] == 0);
}

/* The array forms work in place and on lengths that are not multiples of
 * the vector width (the loop's scalar tail). */
static void in_place_tails(void **state) {
    (void)state;
    for (int n = 0; n < 19; n++) {
        float a[19], b[19];
        for (int i = 0; i < n; i++) a[i] = b[i] = (float)i * 0.37f - 3.0f;
        ry_vtanh_f32(a, a, n);
        ry_vtanh_f32(b, b, n);
        for (int i = 0; i < n; i++) {
            assert_true(a[i] == b[i]);
            assert_true(fabs(a[i] - tanh((double)i * 0.37 - 3.0)) < 1e-6);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exp_f32),     cmocka_unit_test(log_f32), cmocka_unit_test(tanh_f32),
        cmocka_unit_test(sigmoid_f32), cmocka_unit_test(f64_all), cmocka_unit_test(in_place_tails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
