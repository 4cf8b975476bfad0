/*
 * export_util.h: what the relayc export suites share (test_export.c: the
 * models, weights and errors; test_export_programs.c: every program of
 * tests/run/, tests/corpus/ and tests/export/): a scratch folder, running
 * relayc and the artifact through the shell, seeded checkpoints and .npy
 * inputs, building an artifact with gcc (and clang), and comparing its
 * outputs with relayc run's.
 */
#ifndef RELAYC_TESTS_EXPORT_UTIL_H
#define RELAYC_TESTS_EXPORT_UTIL_H

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static char tmpdir[256];

static inline const char *relayc(void) {
    const char *r = getenv("RELAYC");
    return r ? r : "build/relayc";
}

/* Runs cmd through the shell with stdout and stderr in tmpdir/log.txt;
 * returns the exit status. */
static inline int sh(const char *fmt, ...) {
    char cmd[8192] = "(";
    va_list ap;
    va_start(ap, fmt);
    int n = 1 + vsnprintf(cmd + 1, sizeof cmd - 1, fmt, ap);
    va_end(ap);
    snprintf(cmd + n, sizeof cmd - (size_t)n, ") >%s/log.txt 2>&1", tmpdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline void log_text(char *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/log.txt", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
}

static inline void assert_log_contains(const char *what) {
    char buf[16384];
    log_text(buf, sizeof buf);
    if (!strstr(buf, what)) fail_msg("output lacks '%s':\n%s", what, buf);
}

static inline void must(int rc, const char *what) {
    if (rc == 0) return;
    char buf[16384];
    log_text(buf, sizeof buf);
    fail_msg("%s: exit %d\n%s", what, rc, buf);
}

/* A checkpoint at path holding seeded normal values (scaled by 0.3; their
 * absolute values plus 0.1 when positive: variances) for every parameter
 * of @entry with a static shape (the weights). */
static inline void random_checkpoint_ex(const char *model, const char *entry, const char *path, uint64_t seed, bool positive) {
    ry_module *m = NULL;
    ry_error err;
    if (ry_module_parse_file(model, &m, &err) || ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot load %s", model);
    }
    const ry_expr *fn = ry_module_find_global(m, entry)->func;
    const char *names[64];
    int ndims[64], n = 0;
    const int64_t *shapes[64];
    int64_t dims[64][RY_MAX_RANK];
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_type *t = fn->func.params[i]->type;
        bool fixed = t->kind == RY_TYPE_TENSOR;
        for (int k = 0; fixed && k < t->tensor.ndim; k++) {
            fixed = t->tensor.dims[k].kind == RY_DIM_CONST;
            dims[n][k] = t->tensor.dims[k].value;
        }
        if (!fixed) continue;
        names[n] = fn->func.params[i]->name;
        ndims[n] = t->tensor.ndim;
        shapes[n] = dims[n];
        n++;
    }
    /* one slab: float64 for a model with float64 parameters, else float32 */
    ry_dtype dt = RY_FLOAT32;
    for (int i = 0; i < fn->func.nparams; i++)
        if (fn->func.params[i]->type->kind == RY_TYPE_TENSOR && fn->func.params[i]->type->tensor.dtype == RY_FLOAT64) dt = RY_FLOAT64;
    ry_param_set *p = ry_params_new(dt, n, names, ndims, shapes);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    for (int64_t i = 0; i < p->slab->size; i++) {
        double v = 0.3 * ry_rng_normal(&rng);
        ry_tensor_set(p->slab, i, positive ? fabs(v) + 0.1 : v);
    }
    ry_checkpoint_meta meta = {0};
    if (ry_checkpoint_save(path, p, NULL, &meta, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot save %s", path);
    }
    ry_params_free(p);
    ry_module_free(m);
}

static inline void random_checkpoint(const char *model, const char *entry, const char *path, uint64_t seed) {
    random_checkpoint_ex(model, entry, path, seed, false);
}

/* tmpdir/NAME.npy: seeded uniform values in [-1, 1) of the given shape. */
static inline void random_npy(const char *name, int ndim, const int64_t *shape, uint64_t seed) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", tmpdir, name);
    ry_tensor *t = ry_tensor_new(RY_FLOAT32, ndim, shape);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    for (int64_t i = 0; i < t->size; i++) ((float *)t->data)[i] = (float)(2 * ry_rng_uniform(&rng) - 1);
    ry_error err;
    assert_int_equal(ry_npy_write(path, t, &err), RY_OK);
    ry_tensor_release(t);
}

static inline bool have(const char *tool) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

/* Builds DIR with gcc, and also clang where installed when both (the
 * artifacts that hold every runtime file between them), warnings as
 * errors. */
static inline void build_with(const char *dir, bool both) {
    const char *ccs[] = {"gcc", "clang"};
    for (int i = 0; i < (both ? 2 : 1); i++) {
        if (!have(ccs[i])) continue;
        char what[600];
        snprintf(what, sizeof what, "make -C %s with %s", dir, ccs[i]);
        must(sh("make -s -C %s clean && make -s -C %s CC=%s CFLAGS='-std=c11 -O2 -Wall -Wextra -Werror -pedantic'", dir,
                dir, ccs[i]),
             what);
    }
}

static inline void build(const char *dir) { build_with(dir, false); }

/* outs := " GOT0.npy GOT1.npy ..." (got a path prefix), one for each
 * refdir/out_K.npy there is; returns their count. */
static inline int output_args(const char *refdir, const char *got, char *outs, size_t n) {
    int nout = 0;
    outs[0] = 0;
    for (size_t k = 0;; nout++) {
        struct stat st;
        char ref[800];
        snprintf(ref, sizeof ref, "%s/out_%d.npy", refdir, nout);
        if (stat(ref, &st) != 0) break;
        k += (size_t)snprintf(outs + k, n - k, " %s%d.npy", got, nout);
    }
    return nout;
}

/* Programs wholly in float64 (the float64 copies of tests/export/):
 * the same formulas in double, only the GEMMs' order of summation
 * differs, so their float64 results are compared to 1e-9. */
static bool all_float64;

/* Each GOT<k>.npy against refdir/out_<k>.npy (the same dtype), k < nout. */
static inline void assert_outputs(const char *got, const char *refdir, int nout) {
    for (int k = 0; k < nout; k++) {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s%d.npy", got, k);
        snprintf(b, sizeof b, "%s/out_%d.npy", refdir, k);
        ry_tensor *x = test_npy(a), *y = test_npy(b);
        assert_int_equal(x->dtype, y->dtype);
        if (all_float64 && x->dtype == RY_FLOAT64)
            test_assert_close(x, y, 1e-9, 1e-12);
        else
            test_assert_close(x, y, 1e-4, 1e-5);
        ry_tensor_release(x);
        ry_tensor_release(y);
    }
}

/* The example on the inputs tmpdir/NAME.npy (names[0..nin), the entry's
 * data parameters in order) against relayc run --checkpoint (@predict; a
 * NULL ckpt: @main without one), nout results. */
static inline void compare_inputs(const char *model, const char *dir, const char *ckpt, const char *const *names, int nin,
                           int nout) {
    char ins[2048] = "", args[2048] = "", outs[2048], ref[600], got[600];
    size_t n = 0, m = 0;
    for (int i = 0; i < nin; i++) {
        n += (size_t)snprintf(ins + n, sizeof ins - n, " --input %s=%s/%s.npy", names[i], tmpdir, names[i]);
        m += (size_t)snprintf(args + m, sizeof args - m, " %s/%s.npy", tmpdir, names[i]);
    }
    snprintf(ref, sizeof ref, "%s/ref", tmpdir);
    snprintf(got, sizeof got, "%s/got_", tmpdir);
    if (ckpt)
        must(sh("rm -rf %s && %s run %s --entry predict --checkpoint %s%s --out %s", ref, relayc(), model, ckpt, ins, ref),
             "relayc run --checkpoint");
    else
        must(sh("rm -rf %s && %s run %s%s --out %s", ref, relayc(), model, ins, ref), "relayc run");
    assert_int_equal(output_args(ref, got, outs, sizeof outs), nout);
    must(sh("%s/example%s%s", dir, args, outs), "the exported example");
    assert_outputs(got, ref, nout);
}

static inline void compare(const char *model, const char *dir, const char *ckpt, const char *in, int nout) {
    const char *names[] = {in};
    compare_inputs(model, dir, ckpt, names, 1, nout);
}

/* Exports model's @predict with random weights (embedded or not), builds
 * it, and compares it with the VM at batch 1 and 3; x's shape after the
 * batch is rest[0..nrest). Returns the export's directory (static). */
static inline const char *export_and_check(const char *model, const char *name, bool embed, int nrest, const int64_t *rest,
                                    int nout, bool both) {
    static char dir[512];
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/%s.h5", tmpdir, name);
    snprintf(dir, sizeof dir, "%s/%s_c", tmpdir, name);
    random_checkpoint(model, "predict", ckpt, 7);
    must(sh("%s export %s --checkpoint %s -o %s%s", relayc(), model, ckpt, dir, embed ? " --embed-weights" : ""),
         "relayc export");
    build_with(dir, both);
    for (int64_t batch = 1; batch <= 3; batch += 2) {
        int64_t shape[RY_MAX_RANK] = {batch};
        memcpy(shape + 1, rest, sizeof *rest * (size_t)nrest);
        random_npy("x", nrest + 1, shape, (uint64_t)batch);
        compare(model, dir, ckpt, "x", nout);
    }
    return dir;
}

static inline int setup(void **s) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/relayc_export_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static inline int teardown(void **s) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
