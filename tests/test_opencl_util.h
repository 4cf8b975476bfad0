/*
 * test_opencl_util.h: what the device suites share (test_opencl,
 * test_opencl_ops; on OpenCL in `make test`, on CUDA with
 * RELAYC_TEST_TARGET=cuda, tests/gpu/run.sh): the device opened once per suite (every test skips
 * with a message without one), random values, and a program run on the
 * CPU and on OpenCL from the same optimized module with every result
 * compared (float32 rtol 1e-5 plus 1e-5 of the largest element, float64
 * 1e-12).
 */
#ifndef RELAYC_TEST_OPENCL_UTIL_H
#define RELAYC_TEST_OPENCL_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_programs.h"

static const ry_target *cl;
static char cache_dir[] = "/tmp/relayc-clcache-XXXXXX";

static inline int setup(void **s) {
    /* a small cap, so that a device out-of-memory can be provoked */
    setenv("RELAYC_DEVICE_MEMORY_LIMIT", "256M", 1);
    if (mkdtemp(cache_dir)) setenv("RELAYC_CACHE_DIR", cache_dir, 1);
    ry_error err = {0};
    if (ry_target_find(test_device_target(), &cl, &err) != RY_OK) {
        fprintf(stderr, "%s: skipping every test: %s\n", program_invocation_short_name, err.msg);
        cl = NULL;
    }
    return 0;
}

static inline int teardown(void **s) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#define NEED_DEVICE()                                                                         \
    do {                                                                                      \
        if (!cl) skip();                                                                      \
    } while (0)

static uint64_t rng_state = 88172645463325252ull;
static inline double uniform(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

/* ---- programs: the CPU's results ---- */

static inline ry_value *random_value(const ry_type *t) {
    if (t->kind == RY_TYPE_TUPLE) {
        ry_value *f[16];
        for (int i = 0; i < t->tuple.n; i++) f[i] = random_value(t->tuple.fields[i]);
        return ry_value_tuple(t->tuple.n, f);
    }
    int64_t shape[RY_MAX_RANK];
    for (int d = 0; d < t->tensor.ndim; d++) shape[d] = t->tensor.dims[d].value;
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    for (int64_t i = 0; i < x->size; i++)
        ry_tensor_set(x, i, t->tensor.dtype == RY_BOOL ? uniform() > 0 : uniform() * 2);
    return ry_value_tensor(x);
}

/* f64tol: float64's tolerance (1e-12; a float64 result cast from float32
 * arithmetic is only as close as float32's) */
static inline void values_close_to(const ry_value *a, const ry_value *b, double f64tol) {
    assert_int_equal(a->kind, b->kind);
    if (a->kind == RY_VAL_TENSOR) {
        assert_int_equal(a->tensor->device.kind, RY_DEVICE_CPU);
        bool f64 = a->tensor->dtype == RY_FLOAT64;
        /* CLBlast's GEMMs sum their K products in another order than
         * OpenBLAS's: differences of a few ulp of the largest terms, so
         * beside the relative tolerance an absolute one of that scale */
        double big = 1;
        for (int64_t i = 0; i < b->tensor->size; i++) {
            double v = fabs(ry_tensor_get(b->tensor, i));
            if (v > big && isfinite(v)) big = v;
        }
        /* float16: rounding a float32 that differs in its last bit (the
         * device's exp against glibc's) may move a half by one ulp */
        double tol = f64 ? f64tol : a->tensor->dtype == RY_FLOAT16 ? 1e-3 : 1e-5;
        test_assert_close(a->tensor, b->tensor, tol, tol * big);
    } else if (a->kind == RY_VAL_TUPLE || a->kind == RY_VAL_ADT) {
        int n = a->kind == RY_VAL_TUPLE ? a->tuple.n : a->adt.n;
        for (int i = 0; i < n; i++)
            values_close_to(a->kind == RY_VAL_TUPLE ? a->tuple.fields[i] : a->adt.fields[i],
                            b->kind == RY_VAL_TUPLE ? b->tuple.fields[i] : b->adt.fields[i], f64tol);
    }
}

static inline void assert_values_close(const ry_value *a, const ry_value *b) {
    values_close_to(a, b, 1e-12);
}

/* text's @main on random inputs (its parameter types), optimized at level
 * 2 (fusion), on both targets; with grad, @main's gradient program too */
static inline void same_as_cpu_opts(const char *text, bool grad, const ry_vm_opts *opts) {
    ry_module *m = test_parse(text, true);
    ry_error err = {0};
    const char *entry = "main";
    if (grad) {
        if (ry_grad(m, "main", NULL, NULL, &entry, &err)) fail_msg("grad: %s", err.msg);
    }
    if (ry_optimize(m, 2, &err)) fail_msg("optimize: %s", err.msg);
    const ry_global *g = ry_module_find_global(m, entry);
    assert_non_null(g);
    int n = g->func->func.nparams;
    ry_value *args[16];
    for (int i = 0; i < n; i++) args[i] = random_value(g->func->func.params[i]->type);
    ry_vm_program *pc, *pd;
    if (ry_vm_compile(m, NULL, &pc, &err)) fail_msg("cpu compile: %s", err.msg);
    if (ry_vm_compile(m, cl, &pd, &err)) fail_msg("opencl compile: %d:%d: %s", err.line, err.col, err.msg);
    ry_value *rc, *rd;
    if (ry_vm_call(pc, entry, n, args, opts, &rc, &err)) fail_msg("cpu run: %s", err.msg);
    if (ry_vm_call(pd, entry, n, args, opts, &rd, &err)) fail_msg("opencl run: %d:%d: %s", err.line, err.col, err.msg);
    assert_values_close(rd, rc);
    /* a warm call (the third: the second finds the storage slots the
     * first made) allocates nothing from the driver */
    ry_device_counters c0, c1;
    ry_value_release(rd);
    if (ry_vm_call(pd, entry, n, args, opts, &rd, &err)) fail_msg("opencl run 2: %s", err.msg);
    ry_value_release(rd);
    ry_target_counters(cl, &c0);
    if (ry_vm_call(pd, entry, n, args, opts, &rd, &err)) fail_msg("opencl run 3: %s", err.msg);
    ry_target_counters(cl, &c1);
    assert_int_equal(c1.driver_allocs, c0.driver_allocs);
    assert_values_close(rd, rc);
    for (int i = 0; i < n; i++) ry_value_release(args[i]);
    ry_value_release(rc);
    ry_value_release(rd);
    ry_vm_free(pc);
    ry_vm_free(pd);
    ry_module_free(m);
}

static inline void same_as_cpu(const char *text, bool grad) { same_as_cpu_opts(text, grad, NULL); }

#endif
