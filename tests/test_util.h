/*
 * test_util.h: what the cmocka suites share: parsing a module from text
 * with a readable failure, loading .npy files, and comparing tensors.
 * Tests run from the repository root (paths like "tests/ops/...").
 */
#ifndef RELAYC_TEST_UTIL_H
#define RELAYC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "backend/target.h"
#include "relayc/relayc.h"

/* Parses text (and type-checks it when check is true); fails the test with
 * the located error message otherwise. */
static inline ry_module *test_parse(const char *text, bool check) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse("test.relay", text, strlen(text), &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("parse failed: %s", err.msg);
    }
    if (check && ry_module_typecheck(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        fail_msg("typecheck failed: %s", err.msg);
    }
    return m;
}

static inline ry_tensor *test_npy(const char *path) {
    ry_tensor *t = NULL;
    ry_error err;
    if (ry_npy_read(path, &t, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        fail_msg("cannot read %s", path);
    }
    return t;
}

/* |a - b| <= atol + rtol * |b| elementwise, same dtype-independent shape. */
static inline void test_assert_close(const ry_tensor *a, const ry_tensor *b, double rtol, double atol) {
    char sa[64], sb[64];
    if (!ry_tensor_same_shape(a, b))
        fail_msg("shape %s != expected %s", ry_tensor_describe(a, sa, sizeof sa),
                 ry_tensor_describe(b, sb, sizeof sb));
    for (int64_t i = 0; i < a->size; i++) {
        double x = ry_tensor_get(a, i), y = ry_tensor_get(b, i);
        if ((isnan(x) && isnan(y)) || x == y) continue; /* x == y: equal infinities */
        if (!(fabs(x - y) <= atol + rtol * fabs(y)))
            fail_msg("element %lld: got %.9g, expected %.9g", (long long)i, x, y);
    }
}

/* Whether OpenBLAS runs its AVX-512 sgemm kernels here (SkylakeX,
 * Cooperlake): with them a GEMM that relayc splits into row or column
 * blocks gives the same bits as one call. Other kernels (older CPUs, the
 * CPU valgrind emulates) round edge tiles differently, so a split GEMM is
 * then checked to rounding instead of bitwise. */
char *openblas_get_corename(void); /* OpenBLAS's; cblas.h would define I */
static inline bool test_gemm_split_exact(void) {
    const char *c = openblas_get_corename();
    return c && (strcmp(c, "SkylakeX") == 0 || strcmp(c, "Cooperlake") == 0);
}

/* RY_TEST_LIGHT (make test-valgrind sets it): a suite runs the smaller
 * of its sizes only where the larger (a million-deep recursion) checks
 * nothing more about memory than the smaller does, and valgrind would
 * take minutes on it; the other runs take every size. */
static inline bool test_light(void) { return getenv("RY_TEST_LIGHT") != NULL; }

/* Removes the flat directory dir and the files in it (a test's scratch
 * checkpoint folder); a missing one is fine. */
static inline void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* dir/name := text (a test's input file). */
static inline void write_text_in(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* op's kernel on the CPU target (src/backend/target.h), or NULL. */
static inline ry_kernel_fn cpu_kernel(const ry_op *op) {
    const ry_kernel *k = ry_target_kernel(ry_target_cpu(), op);
    return k ? k->fn : NULL;
}

/* The device target the device suites (test_opencl*, test_cuda) run on:
 * RELAYC_TEST_TARGET (tests/gpu/run.sh sets cuda), default opencl. */
static inline const char *test_device_target(void) {
    const char *t = getenv("RELAYC_TEST_TARGET");
    return t && *t ? t : "opencl";
}

#endif
