/*
 * helpers.h: what the AD suites' cases share: random float64 values,
 * running a global (interpreter or VM), the print/re-parse round trip, and
 * gradcheck_ok, which parses, differentiates and checks a program against
 * finite differences. Included after test_util.h and relayc/ad.h.
 */
#ifndef RELAYC_TESTS_AD_HELPERS_H
#define RELAYC_TESTS_AD_HELPERS_H

#include "relayc/vm.h"

static uint64_t rng_state = 0x1234567ull;

static double urand(void) { /* xorshift64*, in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (double)(r >> 11) / (double)(1ull << 52) - 1.0;
}

/* A float64 tensor value of the given shape, uniform in [lo, hi). */
static ry_value *rand_value(int ndim, const int64_t *shape, double lo, double hi) {
    ry_tensor *t = ry_tensor_new(RY_FLOAT64, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, lo + (hi - lo) * (urand() + 1) / 2);
    ry_value *v = ry_value_tensor(t);
    assert_non_null(v);
    return v;
}

static ry_value *rv1(int64_t a) { return rand_value(1, (int64_t[]){a}, -1, 1); }
static ry_value *rv2(int64_t a, int64_t b) { return rand_value(2, (int64_t[]){a, b}, -1, 1); }

static void release_all(int n, ry_value **v) {
    for (int i = 0; i < n; i++)
        ry_value_release(v[i]);
}

/* The module printed, parsed again and type-checked: the gradient program
 * is plain text-format IR. Returns the printed text's length. */
static size_t roundtrip(ry_module *m) {
    char *text = ry_module_print(m);
    assert_non_null(text);
    ry_module *m2 = test_parse(text, true);
    size_t n = strlen(text);
    ry_free(text);
    ry_module_free(m2);
    return n;
}

/* The case of the operator table being checked, for failure messages. */
static const char *current_case = "";

/* Parses, type-checks and grad-checks @entry at args; checks the report and
 * the round trip. Returns the module (the caller frees it). */
static ry_module *gradcheck_ok(const char *text, const char *entry, int nargs, ry_value **args,
                               double rtol, double atol) {
    ry_module *m = test_parse(text, true);
    ry_gradcheck_opts o = {.eps = 1e-6, .rtol = rtol, .atol = atol};
    ry_gradcheck_report rep;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_gradcheck(m, entry, nargs, args, &o, &rep, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        char *t = ry_module_print(m);
        fprintf(stderr, "%s\n", t ? t : "");
        ry_free(t);
        ry_module_free(m);
        fail_msg("gradcheck could not run: %s", err.msg);
    }
    int checked = 0;
    for (int i = 0; i < rep.nparams; i++) {
        const ry_gradcheck_param *p = &rep.params[i];
        if (!p->checked) continue;
        checked++;
        if (!p->ok)
            fprintf(stderr, "param %%%s: max abs %.3g, max rel %.3g\n", p->name, p->max_abs,
                    p->max_rel);
    }
    if (!rep.ok) {
        ry_module_free(m);
        fail_msg("gradient of @%s disagrees with finite differences %s", entry, current_case);
    }
    assert_true(checked > 0);
    assert_true(roundtrip(m) > 0);
    return m;
}

/* Runs @name on args; returns the result (caller releases). */
static ry_value *run(ry_module *m, const char *name, int nargs, ry_value **args) {
    ry_value *out = NULL;
    ry_error err;
    if (ry_interp_call(m, name, nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("run of @%s failed: %s", name, err.msg);
    }
    return out;
}

/* The same on the compiled engine: @name of m compiled and run once. */
static inline ry_value *run_vm(ry_module *m, const char *name, int nargs, ry_value **args) {
    ry_vm_program *p = NULL;
    ry_value *out = NULL;
    ry_error err = {0};
    if (ry_vm_compile(m, NULL, &p, &err) != RY_OK ||
        ry_vm_call(p, name, nargs, args, NULL, &out, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("VM run of @%s failed: %s", name, err.msg);
    }
    ry_vm_free(p);
    return out;
}

#endif
