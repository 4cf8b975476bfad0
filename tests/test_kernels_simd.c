/*
 * test_kernels_simd.c: the elementwise loops built for several SIMD levels
 * (src/backend/cpu/simd.h: SSE2, AVX2, AVX-512, chosen at run time) give
 * the same bits at every level the CPU has: vmath's array forms over
 * sweeps with special values, the fused-program executor over programs
 * using every opcode family, and the unfused transcendental kernels. On a
 * CPU (or under valgrind) without AVX2/AVX-512 only the levels present are
 * compared, which the test says.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/simd.h"
#include "backend/cpu/vmath.h"
#include "relayc/relayc.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* The levels this CPU runs (base always). */
static int top_level(void) {
    ry_simd_force(RY_SIMD_AVX512);
    int top = (int)ry_simd_level();
    ry_simd_force(-1);
    return top;
}

/* n float32 inputs: special values, denormals, and random bit patterns
 * plus values spread over [-120, 120] (every branch of the forms). */
static float *inputs_f32(int n) {
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f,
                                    1e-39f, 1.17549435e-38f, 88.7f, 89.5f, -87.3f, -104.5f,
                                    0.55f, -0.55f, 9.01f, 17.5f, 0.5f, 1.0f, 1e30f};
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(x);
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < n; i++) {
        if (i < ns) x[i] = special[i];
        else if (i % 3 == 0) {
            uint32_t u = (uint32_t)next();
            memcpy(&x[i], &u, sizeof u);
        } else x[i] = (float)((double)(next() >> 11) / 9007199254740992.0 * 240.0 - 120.0);
    }
    return x;
}

static double *inputs_f64(int n) {
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 5e-324, 2.3e-308,
                                     709.5, 710.5, -745.5, -746.5, 0.5, 1.0, 1e300};
    double *x = malloc(sizeof(double) * (size_t)n);
    assert_non_null(x);
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < n; i++) {
        if (i < ns) x[i] = special[i];
        else if (i % 3 == 0) {
            uint64_t u = next();
            memcpy(&x[i], &u, sizeof u);
        } else x[i] = (double)(next() >> 11) / 9007199254740992.0 * 1600.0 - 800.0;
    }
    return x;
}

typedef void (*vf32)(const float *, float *, int64_t);
typedef void (*vf64)(const double *, double *, int64_t);

static void vmath_levels_agree(void **state) {
    (void)state;
    enum { N = 40000 };
    int top = top_level();
    if (top == RY_SIMD_BASE) print_message("only the baseline level on this CPU\n");
    const vf32 f32[] = {ry_vexp_f32, ry_vlog_f32, ry_vtanh_f32, ry_vsigmoid_f32};
    const vf64 f64[] = {ry_vexp_f64, ry_vlog_f64, ry_vtanh_f64, ry_vsigmoid_f64};
    float *x = inputs_f32(N), *want = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
    double *xd = inputs_f64(N), *wantd = malloc(sizeof(double) * N),
           *gotd = malloc(sizeof(double) * N);
    assert_true(want && got && wantd && gotd);
    for (int f = 0; f < 4; f++) {
        ry_simd_force(RY_SIMD_BASE);
        f32[f](x, want, N);
        f64[f](xd, wantd, N);
        /* the baseline is the scalar form itself (vmath.h) */
        for (int i = 0; i < N; i += 97) {
            float s = f == 0   ? ry_exp_f32(x[i])
                      : f == 1 ? ry_log_f32(x[i])
                      : f == 2 ? ry_tanh_f32(x[i])
                               : ry_sigmoid_f32(x[i]);
            assert_memory_equal(&s, &want[i], sizeof s);
        }
        for (int level = RY_SIMD_AVX2; level <= top; level++) {
            ry_simd_force(level);
            /* odd lengths and offsets: the vector loops' tails */
            for (int len = N; len > N - 40; len -= 13) {
                memset(got, 0, sizeof(float) * N);
                f32[f](x + 3, got + 3, len - 3);
                assert_memory_equal(got + 3, want + 3, sizeof(float) * (size_t)(len - 3));
            }
            f64[f](xd, gotd, N);
            assert_memory_equal(gotd, wantd, sizeof(double) * N);
            /* in place */
            memcpy(got, x, sizeof(float) * N);
            f32[f](got, got, N);
            assert_memory_equal(got, want, sizeof(float) * N);
        }
    }
    ry_simd_force(-1);
    free(x);
    free(want);
    free(got);
    free(xd);
    free(wantd);
    free(gotd);
}

/* ---- kernels through the registry ---- */

static ry_tensor *random_tensor(ry_dtype dt, int nd, const int64_t *shape) {
    ry_tensor *t = ry_tensor_new(dt, nd, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++) {
        double r = (double)(next() >> 11) / 9007199254740992.0 * 6 - 3;
        if (next() % 16 == 0) r = 0; /* exact zeros for comparisons and relu */
        ry_tensor_set(t, i, r);
    }
    return t;
}

static ry_tensor *run(const char *opname, const char *code, int nin, ry_tensor *const *in,
                      ry_dtype odt, int nd, const int64_t *shape) {
    const ry_op *op = ry_op_find(opname);
    assert_non_null(op);
    ry_attr a = {.name = "code", .value = RY_ASTR(code)};
    ry_attrs attrs = {code ? 1 : 0, &a};
    ry_tensor *out = ry_tensor_new(odt, nd, shape);
    assert_non_null(out);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_kernel_ctx c = {.op = op, .attrs = &attrs, .err = &err};
    if (cpu_kernel(op)(&c, nin, in, 1, &out)) fail_msg("%s: %s", opname, err.msg);
    return out;
}

/* in with every "DT" replaced by suffix (the literals' dtype) */
static void expand(char *out, size_t n, const char *in, const char *suffix) {
    size_t k = 0, ls = strlen(suffix);
    while (*in && k + ls + 1 < n) {
        if (in[0] == 'D' && in[1] == 'T') {
            memcpy(out + k, suffix, ls);
            k += ls;
            in += 2;
        } else {
            out[k++] = *in++;
        }
    }
    out[k] = 0;
}

/* Each program at each level, bitwise against the baseline; the shapes
 * take every input path (same shape, row and column broadcasts, scalars,
 * the general odometer) and lengths off the vector width. */
static void fused_levels_agree(void **state) {
    (void)state;
    static const char *const progs[] = {
        "add(x0, x1); subtract(t0, x2); multiply(t1, x0); divide(t2, x1)",
        "maximum(x0, x1); minimum(t0, x2); nn.relu(t1); negative(t2); abs(t3)",
        "clip(x0, a_min=-0.5f, a_max=0.75f); nn.leaky_relu(x1, alpha=0.125f); add(t0, t1)",
        "greater(x0, x1); less_equal(x1, x2); logical_and(t0, t1); logical_not(t2); "
        "where(t3, x0, x2)",
        "equal(x0, 0DT); not_equal(x1, x2); logical_or(t0, t1); cast(t2, dtype=float32); "
        "multiply(t3, x2)",
        "sigmoid(x0); tanh(x1); multiply(t0, t1); exp(x2); add(t2, t3)",
        "abs(x0); add(t0, 0.5DT); log(t1); sqrt(t1); rsqrt(t1); add(t2, t3); add(t5, t4); "
        "power(t1, x1); add(t6, t7)",
        "cast(x0, dtype=float64); cast(t0, dtype=float32); less(t1, x1); "
        "greater_equal(t1, x2); logical_and(t2, t3); where(t4, x1, x2)",
    };
    static const int64_t shapes[][3][3] = {
        {{37, 53}, {37, 53}, {37, 53}},
        {{37, 53}, {53}, {37, 1}},
        {{3, 70, 33}, {1, 70, 1}, {33}},
        {{1001}, {1}, {1001}},
    };
    static const int nds[][3] = {{2, 2, 2}, {2, 1, 2}, {3, 3, 1}, {1, 1, 1}};
    int top = top_level();
    for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int d = 0; d < 2; d++) {
                ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
                if (dt == RY_FLOAT64 && strstr(progs[p], "dtype")) continue; /* float32 casts */
                char code[512];
                expand(code, sizeof code, progs[p], dt == RY_FLOAT64 ? "f64" : "f");
                ry_tensor *in[3];
                int64_t out_shape[3] = {1, 1, 1};
                int ond = 0;
                for (int k = 0; k < 3; k++) {
                    in[k] = random_tensor(dt, nds[s][k], shapes[s][k]);
                    if (nds[s][k] > ond) ond = nds[s][k];
                }
                for (int k = 0; k < 3; k++)
                    for (int j = 0; j < nds[s][k]; j++) {
                        int64_t v = shapes[s][k][j];
                        int at = ond - nds[s][k] + j;
                        if (v > out_shape[at]) out_shape[at] = v;
                    }
                ry_simd_force(RY_SIMD_BASE);
                ry_tensor *want = run("fused.elemwise3", code, 3, in, dt, ond, out_shape);
                for (int level = RY_SIMD_AVX2; level <= top; level++) {
                    ry_simd_force(level);
                    ry_tensor *got = run("fused.elemwise3", code, 3, in, dt, ond, out_shape);
                    if (memcmp(got->data, want->data, ry_tensor_nbytes(want)) != 0)
                        fail_msg("level %d: %s (%s, shape %zu)", level, code,
                                 ry_dtype_name(dt), s);
                    ry_tensor_release(got);
                }
                ry_tensor_release(want);
                for (int k = 0; k < 3; k++) ry_tensor_release(in[k]);
            }
    ry_simd_force(-1);
}

/* The unfused kernels that use vmath's array forms, including a
 * broadcast scalar (computed once) and float64. */
static void unary_kernels_agree(void **state) {
    (void)state;
    static const char *const ops[] = {"exp", "log", "tanh", "sigmoid"};
    int64_t shape[2] = {31, 257};
    int top = top_level();
    for (int d = 0; d < 2; d++) {
        ry_dtype dt = d ? RY_FLOAT64 : RY_FLOAT32;
        ry_tensor *x = random_tensor(dt, 2, shape);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            ry_simd_force(RY_SIMD_BASE);
            ry_tensor *want = run(ops[o], NULL, 1, &x, dt, 2, shape);
            /* against the scalar forms, element by element */
            for (int64_t i = 0; i < x->size; i += 11) {
                double v = ry_tensor_get(x, i), w = ry_tensor_get(want, i), e;
                if (dt == RY_FLOAT32) {
                    float f = (float)v;
                    e = o == 0 ? ry_exp_f32(f) : o == 1 ? ry_log_f32(f)
                        : o == 2 ? ry_tanh_f32(f) : ry_sigmoid_f32(f);
                } else {
                    e = o == 0 ? ry_exp_f64(v) : o == 1 ? ry_log_f64(v)
                        : o == 2 ? tanh(v) : ry_sigmoid_f64(v);
                }
                assert_true(w == e || (isnan(w) && isnan(e)));
            }
            for (int level = RY_SIMD_AVX2; level <= top; level++) {
                ry_simd_force(level);
                ry_tensor *got = run(ops[o], NULL, 1, &x, dt, 2, shape);
                assert_memory_equal(got->data, want->data, ry_tensor_nbytes(want));
                ry_tensor_release(got);
            }
            ry_tensor_release(want);
        }
        ry_tensor_release(x);
    }
    ry_simd_force(-1);
}

/* RELAYC_SIMD can only lower the level; an unknown value keeps the CPU's. */
static void level_knob(void **state) {
    (void)state;
    int top = top_level();
    ry_simd_force(RY_SIMD_BASE);
    assert_int_equal(ry_simd_level(), RY_SIMD_BASE);
    ry_simd_force(99);
    assert_int_equal(ry_simd_level(), top);
    ry_simd_force(-1);
    assert_true((int)ry_simd_level() <= top);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vmath_levels_agree),
        cmocka_unit_test(fused_levels_agree),
        cmocka_unit_test(unary_kernels_agree),
        cmocka_unit_test(level_knob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
