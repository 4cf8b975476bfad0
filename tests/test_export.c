/*
 * test_export.c: relayc export end to end. Each model (models/mlp.relay,
 * models/lenet.relay, and the programs of tests/export/ for the other
 * emitters) gets a checkpoint of seeded random weights, is exported, its
 * directory built with cc -std=c11 -Wall -Wextra -Werror -pedantic (gcc,
 * and clang where installed for the artifacts that hold every runtime
 * file between them), and its example run on .npy inputs (two batch sizes
 * where the batch is symbolic); the outputs are compared with `relayc run
 * --checkpoint` on the VM. The export sums GEMMs and convolutions in
 * increasing k (OpenBLAS blocks K) and uses libm's exp and tanh (the VM
 * its vector forms), so the comparison is to float32 rounding: rtol 1e-4,
 * atol 1e-5. The programs of tests/run/ are exported without a checkpoint
 * and checked against their committed outputs (those the export does not
 * take yet: refused, located). Errors: an operator without a C kernel
 * (located, named), a wrong dimension at the entry (its error code, also
 * under valgrind), a damaged or another model's weights file (CRC, size),
 * a checkpoint of another model (refused by export and run). --blas
 * builds against OpenBLAS where it is installed; relayc train --export
 * exports what the run's last checkpoint holds. Control flow over data:
 * the Tree-LSTM on PTB strings and the char-LSTM against relayc run, the
 * tree constructors from a C driver (tests/export_c/tree_driver.c), the
 * programs of tests/export/ with ADTs, match, recursion, closures and
 * refs against the VM, malformed trees, too deep a recursion, a wrong
 * batch and a wrong-size weights file as error codes with their
 * messages, a long window in bounded memory, and the generated
 * recursion under valgrind. RY_TEST_FILTER=test_NAME runs one test.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static char tmpdir[256];

static const char *relayc(void) {
    const char *r = getenv("RELAYC");
    return r ? r : "build/relayc";
}

/* Runs cmd through the shell with stdout and stderr in tmpdir/log.txt;
 * returns the exit status. */
static int sh(const char *fmt, ...) {
    char cmd[8192] = "(";
    va_list ap;
    va_start(ap, fmt);
    int n = 1 + vsnprintf(cmd + 1, sizeof cmd - 1, fmt, ap);
    va_end(ap);
    snprintf(cmd + n, sizeof cmd - (size_t)n, ") >%s/log.txt 2>&1", tmpdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void log_text(char *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/log.txt", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
}

static void assert_log_contains(const char *what) {
    char buf[16384];
    log_text(buf, sizeof buf);
    if (!strstr(buf, what)) fail_msg("output lacks '%s':\n%s", what, buf);
}

static void must(int rc, const char *what) {
    if (rc == 0) return;
    char buf[16384];
    log_text(buf, sizeof buf);
    fail_msg("%s: exit %d\n%s", what, rc, buf);
}

/* A checkpoint at path holding seeded normal values (scaled by 0.3; their
 * absolute values plus 0.1 when positive: variances) for every parameter
 * of @entry with a static shape (the weights). */
static void random_checkpoint_ex(const char *model, const char *entry, const char *path, uint64_t seed, bool positive) {
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
    ry_param_set *p = ry_params_new(RY_FLOAT32, n, names, ndims, shapes);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    for (int64_t i = 0; i < p->slab->size; i++) {
        double v = 0.3 * ry_rng_normal(&rng);
        ((float *)p->slab->data)[i] = (float)(positive ? fabs(v) + 0.1 : v);
    }
    ry_checkpoint_meta meta = {0};
    if (ry_checkpoint_save(path, p, NULL, &meta, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("cannot save %s", path);
    }
    ry_params_free(p);
    ry_module_free(m);
}

static void random_checkpoint(const char *model, const char *entry, const char *path, uint64_t seed) {
    random_checkpoint_ex(model, entry, path, seed, false);
}

/* tmpdir/NAME.npy: seeded uniform values in [-1, 1) of the given shape. */
static void random_npy(const char *name, int ndim, const int64_t *shape, uint64_t seed) {
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

static bool have(const char *tool) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

/* Builds DIR with gcc, and also clang where installed when both (the
 * artifacts that hold every runtime file between them), warnings as
 * errors. */
static void build_with(const char *dir, bool both) {
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

static void build(const char *dir) { build_with(dir, false); }

/* outs := " GOT0.npy GOT1.npy ..." (got a path prefix), one for each
 * refdir/out_K.npy there is; returns their count. */
static int output_args(const char *refdir, const char *got, char *outs, size_t n) {
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
static void assert_outputs(const char *got, const char *refdir, int nout) {
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
static void compare_inputs(const char *model, const char *dir, const char *ckpt, const char *const *names, int nin,
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

static void compare(const char *model, const char *dir, const char *ckpt, const char *in, int nout) {
    const char *names[] = {in};
    compare_inputs(model, dir, ckpt, names, 1, nout);
}

/* Exports model's @predict with random weights (embedded or not), builds
 * it, and compares it with the VM at batch 1 and 3; x's shape after the
 * batch is rest[0..nrest). Returns the export's directory (static). */
static const char *export_and_check(const char *model, const char *name, bool embed, int nrest, const int64_t *rest,
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

static void test_mlp(void **s) {
    const char *dir = export_and_check("models/mlp.relay", "mlp", false, 1, (int64_t[]){784}, 1, false);
    /* a wrong dimension: the entry's error code (RT_E_DIM = 4), not a crash */
    random_npy("bad", 2, (int64_t[]){2, 783}, 1);
    assert_int_equal(sh("%s/example %s/bad.npy %s/o.npy", dir, tmpdir, tmpdir), 4);
    assert_log_contains("mlp_predict: input x: dimension 1 is 783, the model needs 784");
    random_npy("bad", 3, (int64_t[]){2, 784, 1}, 1);
    assert_int_equal(sh("%s/example %s/bad.npy %s/o.npy", dir, tmpdir, tmpdir), 4);
    assert_log_contains("input x must have 2 dimensions");
}

static void test_lenet(void **s) {
    const char *dir = export_and_check("models/lenet.relay", "lenet", false, 3, (int64_t[]){1, 28, 28}, 1, true);
    /* the runtime's plain-C kernels (other compilers'): the same answers */
    must(sh("make -s -C %s clean && make -s -C %s CFLAGS='-std=c11 -O2 -Wall -Wextra -Werror -pedantic -DRT_PLAIN_C'", dir,
            dir),
         "make -DRT_PLAIN_C");
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/lenet.h5", tmpdir);
    compare("models/lenet.relay", dir, ckpt, "x", 1);
}

static void test_lenet_embedded(void **s) {
    const char *dir = export_and_check("models/lenet.relay", "lenet_e", true, 3, (int64_t[]){1, 28, 28}, 1, false);
    char path[600];
    snprintf(path, sizeof path, "%s/lenet.weights", dir);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0); /* no weights file */
}

static void test_ops(void **s) {
    export_and_check("tests/export/ops.relay", "ops", false, 3, (int64_t[]){4, 9, 9}, 3, true);
}

/* --blas: the GEMMs through cblas_sgemm (where OpenBLAS's pkg-config
 * file is there; otherwise said and skipped). */
static void test_blas(void **s) {
    if (system("pkg-config --exists openblas") != 0) {
        print_message("test_blas: no openblas.pc here, --blas not built\n");
        skip();
    }
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/blas.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/blas_c", tmpdir);
    random_checkpoint("models/lenet.relay", "predict", ckpt, 5);
    must(sh("%s export models/lenet.relay --checkpoint %s -o %s --blas", relayc(), ckpt, dir), "relayc export --blas");
    build(dir);
    random_npy("x", 4, (int64_t[]){2, 1, 28, 28}, 3);
    compare("models/lenet.relay", dir, ckpt, "x", 1);
}

/* The MLP's @loss (one_hot, log_softmax, the reductions) with its data x
 * and y as inputs. */
static void test_loss(void **s) {
    char ckpt[512], dir[512], path[600];
    snprintf(ckpt, sizeof ckpt, "%s/loss.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/loss_c", tmpdir);
    random_checkpoint("models/mlp.relay", "loss", ckpt, 6);
    must(sh("%s export models/mlp.relay --entry loss --checkpoint %s -o %s", relayc(), ckpt, dir), "export @loss");
    build(dir);
    random_npy("x", 2, (int64_t[]){5, 784}, 8);
    snprintf(path, sizeof path, "%s/y.npy", tmpdir);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, (int64_t[]){5});
    for (int i = 0; i < 5; i++) ((int32_t *)y->data)[i] = (i * 3) % 10;
    ry_error err;
    assert_int_equal(ry_npy_write(path, y, &err), RY_OK);
    ry_tensor_release(y);
    must(sh("%s run models/mlp.relay --entry loss --checkpoint %s --input x=%s/x.npy --input y=%s/y.npy --out %s/lref",
            relayc(), ckpt, tmpdir, tmpdir, tmpdir),
         "relayc run @loss");
    must(sh("%s/example %s/x.npy %s/y.npy %s/lgot.npy", dir, tmpdir, tmpdir, tmpdir), "example @loss");
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/lgot.npy", tmpdir);
    snprintf(b, sizeof b, "%s/lref/out_0.npy", tmpdir);
    ry_tensor *x = test_npy(a), *r = test_npy(b);
    test_assert_close(x, r, 1e-5, 1e-6);
    ry_tensor_release(x);
    ry_tensor_release(r);
}

/* tests/export/heads.relay: a checkpoint of @loss's parameters, one more
 * than @predict takes, exports @predict (and runs it). */
static void test_loss_only_weight(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/heads.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/heads_c", tmpdir);
    random_checkpoint("tests/export/heads.relay", "loss", ckpt, 2);
    must(sh("%s export tests/export/heads.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build(dir);
    random_npy("x", 2, (int64_t[]){4, 3}, 1);
    compare("tests/export/heads.relay", dir, ckpt, "x", 1);
}

/* tests/export/layers.relay: inference-mode batch_norm and dropout,
 * reductions, take (with indices out of range), transpose, concatenate;
 * an int32 input beside the float one. */
static void test_layers(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/layers.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/layers_c", tmpdir);
    random_checkpoint_ex("tests/export/layers.relay", "predict", ckpt, 9, true);
    must(sh("%s export tests/export/layers.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build_with(dir, true);
    random_npy("x", 4, (int64_t[]){3, 3, 8, 8}, 2);
    char path[600];
    snprintf(path, sizeof path, "%s/ids.npy", tmpdir);
    ry_tensor *ids = ry_tensor_new(RY_INT32, 2, (int64_t[]){3, 2});
    for (int i = 0; i < 6; i++) ((int32_t *)ids->data)[i] = i * 3 - 2; /* -2 .. 13: clipped into [0, 7) */
    ry_error err;
    assert_int_equal(ry_npy_write(path, ids, &err), RY_OK);
    ry_tensor_release(ids);
    const char *names[] = {"x", "ids"};
    compare_inputs("tests/export/layers.relay", dir, ckpt, names, 2, 2);
}

/* tests/export/embed.relay: vocab, a symbolic dim of the embedding table,
 * is fixed by the checkpoint (11 rows); argmax gives int32 results. */
static void test_weight_dims(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/embed.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/embed_c", tmpdir);
    const char *names[] = {"emb", "g", "b", "w"};
    int ndims[] = {2, 1, 1, 2};
    const int64_t *shapes[] = {(int64_t[]){11, 8}, (int64_t[]){8}, (int64_t[]){8}, (int64_t[]){3, 8}};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 4, names, ndims, shapes);
    ry_rng rng;
    ry_rng_seed(&rng, 4);
    for (int64_t i = 0; i < p->slab->size; i++) ((float *)p->slab->data)[i] = (float)ry_rng_normal(&rng);
    ry_checkpoint_meta meta = {0};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(ckpt, p, NULL, &meta, &err), RY_OK);
    ry_params_free(p);
    must(sh("%s export tests/export/embed.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export");
    build_with(dir, true);
    char path[600];
    snprintf(path, sizeof path, "%s/ids.npy", tmpdir);
    ry_tensor *ids = ry_tensor_new(RY_INT32, 2, (int64_t[]){5, 4});
    for (int i = 0; i < 20; i++) ((int32_t *)ids->data)[i] = (i * 7) % 11;
    assert_int_equal(ry_npy_write(path, ids, &err), RY_OK);
    ry_tensor_release(ids);
    const char *in[] = {"ids"};
    compare_inputs("tests/export/embed.relay", dir, ckpt, in, 1, 2);
    /* the header has vocab as the checkpoint's constant, n as an argument */
    must(sh("grep -q 'int embed_predict(embed_ctx \\*ctx, int64_t n, const int32_t \\*ids, float \\*out0, int32_t \\*out1)' %s/embed.h", dir),
         "the entry's signature");
}

/* Every program of tests/run/ (the committed inputs and the outputs numpy
 * and torch computed for them, tools/gen_run_tests.py), @main exported
 * without a checkpoint (every parameter an input): those the export takes
 * give the expected outputs (float32 rounding: rtol 1e-4, atol 1e-5), the
 * others are refused with a located error. */
static void test_run_programs(void **s) {
    const char *exported[] = {"higher_order", "lenet", "lstm_list", "mlp", "refs", "treelstm", "tvm_bound_mlp", "tvm_dtypes",
                              "tvm_dtypes16", "symbolic", "tvm_first_order"};
    DIR *d = opendir("tests/run");
    assert_non_null(d);
    int nok = 0, nall = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".relay") != 0) continue;
        char name[256], dir[600], args[8192] = "", outs[4096] = "";
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        snprintf(dir, sizeof dir, "%s/run_%s", tmpdir, name);
        bool want = false;
        for (size_t k = 0; k < sizeof exported / sizeof exported[0]; k++) want |= strcmp(exported[k], name) == 0;
        nall++;
        int rc = sh("%s export tests/run/%s.relay --entry main -o %s", relayc(), name, dir);
        if (strcmp(name, "deep_recursion") == 0) { /* 100000 levels: past the C stack's budget, a located error */
            must(rc, name);
            build(dir);
            assert_int_equal(sh("%s/example tests/run/%s/in_n.npy %s/dr.npy", dir, name, tmpdir), 6);
            assert_log_contains("tests/run/deep_recursion.relay:3:5: @sum_to: the recursion is deeper than 2000 calls");
            nall--;
            continue;
        }
        if (!want) {
            assert_int_equal(rc, 1);
            assert_log_contains(": error: export: ");
            continue;
        }
        must(rc, name);
        build(dir);
        char path[600];
        snprintf(path, sizeof path, "tests/run/%s.relay", name);
        ry_module *m = NULL;
        ry_error err;
        assert_int_equal(ry_module_parse_file(path, &m, &err), RY_OK);
        const ry_expr *fn = ry_module_find_global(m, "main")->func;
        size_t n = 0;
        for (int i = 0; i < fn->func.nparams; i++)
            n += (size_t)snprintf(args + n, sizeof args - n, " tests/run/%s/in_%s.npy", name, fn->func.params[i]->name);
        ry_module_free(m);
        char ref[600], got[600];
        snprintf(ref, sizeof ref, "tests/run/%s", name);
        snprintf(got, sizeof got, "%s/got_", tmpdir);
        int nout = output_args(ref, got, outs, sizeof outs);
        must(sh("%s/example%s%s", dir, args, outs), name);
        assert_outputs(got, ref, nout);
        nok++;
    }
    closedir(d);
    print_message("test_run_programs: %d of the %d programs of tests/run/ exported and match\n", nok, nall);
    assert_int_equal(nok, (int)(sizeof exported / sizeof exported[0]));
}

/* tmpdir/NAME.npy: seeded values of a parameter's type (floats in
 * [-1, 1), integers in [0, 3), bools alternating, flipped by the seed's
 * parity), symbolic and ? dims 3; false if its type is not a tensor. */
static bool random_param(const ry_var *p, const char *name, uint64_t seed) {
    const ry_type *t = p->type;
    if (!t || t->kind != RY_TYPE_TENSOR) return false;
    int64_t shape[RY_MAX_RANK];
    for (int k = 0; k < t->tensor.ndim; k++) {
        shape[k] = t->tensor.dims[k].kind == RY_DIM_CONST ? t->tensor.dims[k].value : 3;
    }
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    for (int64_t i = 0; i < x->size; i++) {
        double u = ry_rng_uniform(&rng);
        ry_tensor_set(x, i, ry_dtype_is_float(x->dtype) ? 2 * u - 1 : x->dtype == RY_BOOL ? (double)((i + seed) % 2)
                                                                                       : (double)(int)(3 * u));
    }
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", tmpdir, name);
    ry_error err;
    assert_int_equal(ry_npy_write(path, x, &err), RY_OK);
    ry_tensor_release(x);
    return true;
}

/* Every program of folder with a @main: exported without a checkpoint
 * where the export takes it (else refused, located), run on seeded inputs
 * and compared with relayc run on the VM; returns how many matched, and
 * in *nall how many have a @main. */
static int nbuilt_only;

static int main_programs(const char *folder, int *nall_out) {
    DIR *d = opendir(folder);
    assert_non_null(d);
    int nok = 0, nall = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".relay") != 0) continue;
        char name[256], path[600], dir[600], ins[8192] = "", args[8192] = "", outs[4096] = "";
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        snprintf(dir, sizeof dir, "%s/cor_%s", tmpdir, name);
        ry_module *m = NULL;
        ry_error err;
        if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err) || !ry_module_find_global(m, "main")) {
            ry_module_free(m);
            continue;
        }
        nall++;
        int rc = sh("%s export %s --entry main -o %s", relayc(), path, dir);
        if (rc != 0) {
            assert_int_equal(rc, 1);
            assert_log_contains(": error: export: ");
            ry_module_free(m);
            continue;
        }
        build(dir);
        const ry_expr *fn = ry_module_find_global(m, "main")->func;
        bool npy = true; /* an ADT argument (a list) has no .npy: built, but not run here */
        for (int i = 0; i < fn->func.nparams; i++) npy &= fn->func.params[i]->type->kind == RY_TYPE_TENSOR;
        if (!npy) {
            nbuilt_only++;
            ry_module_free(m);
            continue;
        }
        for (uint64_t rep = 0; rep < 2; rep++) { /* seeds of both parities: both branches of a flag */
            size_t n = 0, k = 0;
            ins[0] = args[0] = outs[0] = 0;
            for (int i = 0; i < fn->func.nparams; i++) {
                char in[300];
                snprintf(in, sizeof in, "cin_%d", i);
                assert_true(random_param(fn->func.params[i], in, (uint64_t)i + 1 + rep));
                n += (size_t)snprintf(ins + n, sizeof ins - n, " --input %s=%s/%s.npy", fn->func.params[i]->name, tmpdir, in);
                k += (size_t)snprintf(args + k, sizeof args - k, " %s/%s.npy", tmpdir, in);
            }
            char ref[600], got[600];
            snprintf(ref, sizeof ref, "%s/cref", tmpdir);
            snprintf(got, sizeof got, "%s/cgot_", tmpdir);
            must(sh("rm -rf %s && %s run %s%s --out %s", ref, relayc(), path, ins, ref), name);
            int nout = output_args(ref, got, outs, sizeof outs);
            must(sh("%s/example%s%s", dir, args, outs), name);
            assert_outputs(got, ref, nout);
        }
        ry_module_free(m);
        nok++;
    }
    closedir(d);
    *nall_out = nall;
    return nok;
}

/* The generated code of recursion, closures, refs and ADTs under valgrind:
 * no invalid access, nothing leaked, also when a call fails. */
static void test_dyn_valgrind(void **s) {
    if (!have("valgrind")) {
        print_message("test_dyn_valgrind: valgrind is not installed: the artifacts were checked by the other tests only\n");
        return;
    }
    const char *vg = "valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/vg_c", tmpdir);
    /* DWARF 4: Debian 12's valgrind cannot read clang's default DWARF 5
     * (the suite's CC reaches this make through MAKEFLAGS) */
    must(sh("%s export tests/export/tree_growth.relay --entry main -o %s && make -s -C %s CFLAGS='-std=c11 -O0 -gdwarf-4'", relayc(),
            dir, dir),
         "export tree_growth");
    ry_tensor *d = ry_tensor_new(RY_INT32, 0, NULL);
    ((int32_t *)d->data)[0] = 3;
    char path[600];
    snprintf(path, sizeof path, "%s/d.npy", tmpdir);
    ry_error err;
    assert_int_equal(ry_npy_write(path, d, &err), RY_OK);
    random_npy("x", 2, (int64_t[]){1, 3}, 1);
    random_npy("w", 1, (int64_t[]){3}, 2);
    must(sh("%s %s/example %s/x.npy %s/w.npy %s/d.npy %s/o0.npy %s/o1.npy %s/o2.npy", vg, dir, tmpdir, tmpdir, tmpdir, tmpdir,
            tmpdir, tmpdir),
         "tree_growth under valgrind");
    snprintf(path, sizeof path, "%s/o0.npy", tmpdir);
    ry_tensor *rows = test_npy(path);
    snprintf(path, sizeof path, "%s/d.npy", tmpdir);
    assert_int_equal(rows->shape[0], 16); /* 2^(d+1) leaves */
    ry_tensor_release(rows);
    ((int32_t *)d->data)[0] = 2500; /* deeper than the limit: the error code, nothing leaked */
    assert_int_equal(ry_npy_write(path, d, &err), RY_OK);
    ry_tensor_release(d);
    assert_int_equal(sh("%s %s/example %s/x.npy %s/w.npy %s/d.npy %s/o0.npy %s/o1.npy %s/o2.npy", vg, dir, tmpdir, tmpdir, tmpdir,
                        tmpdir, tmpdir, tmpdir),
                     6);
    assert_log_contains("tests/export/tree_growth.relay:");
}

/* tests/export/runtime_bcast.relay: broadcasts between the entry's dims
 * nx, ny, nc, %b's ? (the C entry's b_dim0) and the ? of add(%x, %y),
 * which only run time knows (n, m, p, q here). Each of
 * them 1 where the others are not broadcasts as on the VM (the same
 * bits); a genuine mismatch fails on both, the export with its error code
 * (RT_E_DIM = 4) and the located message of the operator that met it;
 * both kinds under valgrind and under ASan+UBSan. */
static void runtime_bcast_inputs(const int64_t *nmpq, uint64_t seed) {
    int64_t n = nmpq[0], m = nmpq[1], p = nmpq[2], q = nmpq[3];
    random_npy("x", 2, (int64_t[]){n, 4}, seed);
    random_npy("y", 2, (int64_t[]){m, 4}, seed + 1);
    random_npy("w", 2, (int64_t[]){3, 4}, seed + 2);
    random_npy("b", 2, (int64_t[]){p, 1}, seed + 3);
    random_npy("c", 3, (int64_t[]){q, 2, 4}, seed + 4);
    random_npy("d", 3, (int64_t[]){m, 4, 3}, seed + 5);
}

static void test_runtime_broadcast(void **s) {
    const char *model = "tests/export/runtime_bcast.relay", *names[] = {"x", "y", "w", "b", "c", "d"};
    char dir[512], san[512], args[1024];
    snprintf(dir, sizeof dir, "%s/rb_c", tmpdir);
    snprintf(san, sizeof san, "%s/rb_san", tmpdir);
    must(sh("%s export %s --entry main -o %s", relayc(), model, dir), "relayc export runtime_bcast");
    build_with(dir, true);
    size_t n = 0;
    for (int i = 0; i < 6; i++) n += (size_t)snprintf(args + n, sizeof args - n, "%s/%s.npy ", tmpdir, names[i]);
    for (int i = 0; i < 7; i++) n += (size_t)snprintf(args + n, sizeof args - n, " %s/o%d.npy", tmpdir, i);
    /* (n, m, p, q): every one 1 in turn, all 1, none */
    const int64_t ok[][4] = {{1, 3, 1, 3}, {3, 1, 1, 3}, {1, 3, 3, 1}, {1, 1, 1, 1}, {3, 3, 3, 3}, {3, 3, 1, 1}};
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        runtime_bcast_inputs(ok[k], 10 * k);
        compare_inputs(model, dir, NULL, names, 6, 7);
    }
    /* mismatches: the VM refuses them too; the export's code and message, located */
    const struct {
        int64_t nmpq[4];
        const char *msg;
    } bad[] = {{{2, 3, 1, 1}, "runtime_bcast.relay:9:8: add: the operands' dimensions differ at run time (dimension 0)"},
               {{2, 2, 1, 1}, "runtime_bcast.relay:10:8: multiply: the operands' dimensions differ at run time (dimension 0)"},
               {{3, 3, 2, 1}, "runtime_bcast.relay:11:8: subtract: the operands' dimensions differ at run time (dimension 0)"},
               {{3, 1, 3, 1}, "runtime_bcast.relay:12:8: broadcast_to_like: the input: dimension 0 does not broadcast at run time"},
               {{1, 3, 1, 2}, "runtime_bcast.relay:15:8: nn.batch_matmul: the operands' dimensions differ at run time (dimension 0)"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        runtime_bcast_inputs(bad[k].nmpq, 7);
        assert_int_equal(sh("%s run %s --input x=%s/x.npy --input y=%s/y.npy --input w=%s/w.npy --input b=%s/b.npy "
                            "--input c=%s/c.npy --input d=%s/d.npy --out %s/rbref",
                            relayc(), model, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir),
                         1);
        assert_int_equal(sh("%s/example %s", dir, args), 4);
        assert_log_contains(bad[k].msg);
    }
    /* a reshape's -1 over a ? dim: the count over the other dims, or the error where it does not divide */
    char rs[600];
    snprintf(rs, sizeof rs, "%s/reshape.relay", tmpdir);
    write_text_in(tmpdir, "reshape.relay", "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(?, 4), float32]) {\n"
                                "  reshape(%x, newshape=[-1, 3])\n}\n");
    must(sh("%s export %s --entry main -o %s/rs_c && make -s -C %s/rs_c", relayc(), rs, tmpdir, tmpdir), "export reshape");
    snprintf(dir, sizeof dir, "%s/rs_c", tmpdir);
    for (int64_t rows = 3; rows <= 6; rows += 3) {
        random_npy("x", 2, (int64_t[]){rows, 4}, (uint64_t)rows);
        compare_inputs(rs, dir, NULL, names, 1, 1);
    }
    random_npy("x", 2, (int64_t[]){2, 4}, 1);
    assert_int_equal(sh("%s/example %s/x.npy %s/o0.npy", dir, tmpdir, tmpdir), 4);
    assert_log_contains("reshape.relay:3:3: reshape: the input's elements do not fill the result's shape at run time");
    snprintf(dir, sizeof dir, "%s/rb_c", tmpdir);
    /* both kinds without an invalid access or a leak: valgrind, then the sanitizers */
    must(sh("cp -r %s %s && make -s -C %s clean && make -s -C %s CC=gcc CFLAGS='-std=c11 -O1 -g -fsanitize=address,undefined "
            "-fno-sanitize-recover=all' LDFLAGS='-fsanitize=address,undefined'",
            dir, san, san, san),
         "build with ASan+UBSan");
    for (int k = 0; k < 2; k++) {
        runtime_bcast_inputs(k == 0 ? (int64_t[]){1, 3, 1, 1} : (int64_t[]){2, 3, 1, 1}, 5);
        int want = k == 0 ? 0 : 4;
        assert_int_equal(sh("ASAN_OPTIONS=detect_leaks=1 %s/example %s", san, args), want);
        if (have("valgrind")) {
            must(sh("make -s -C %s clean && make -s -C %s CFLAGS='-std=c11 -O0 -gdwarf-4'", dir, dir), "make -O0");
            assert_int_equal(sh("valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect "
                                "%s/example %s",
                                dir, args),
                             want);
        }
    }
}

/* to/NAME.relay for each from/NAME.relay: the program in float64 (its
 * float32 types and literals, "0.5f", made float64's). */
static void float64_copies(const char *from, const char *to) {
    DIR *d = opendir(from);
    assert_non_null(d);
    assert_int_equal(mkdir(to, 0755), 0);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".relay") != 0) continue;
        must(sh("sed 's/float32/float64/g; s/\\([0-9]\\)f\\([^0-9a-z_]\\)/\\1f64\\2/g' %s/%s > %s/%s", from, e->d_name, to,
                e->d_name),
             "a float64 copy");
    }
    closedir(d);
}

static void test_corpus_programs(void **s) {
    int nall, nok = main_programs("tests/corpus", &nall);
    print_message("test_corpus_programs: %d of the %d programs of tests/corpus/ with a @main exported and match "
                  "(%d more with ADT arguments exported and built)\n", nok, nall, nbuilt_only);
    assert_true(nok >= 19);
    nok = main_programs("tests/export", &nall); /* the export's own: every one */
    assert_int_equal(nok, nall);
    assert_true(nall >= 1);
    /* and every one again in float64: each kernel in both float dtypes */
    char f64[600];
    snprintf(f64, sizeof f64, "%s/export_f64", tmpdir);
    float64_copies("tests/export", f64);
    all_float64 = true;
    int nall64, nok64 = main_programs(f64, &nall64);
    all_float64 = false;
    print_message("test_corpus_programs: %d of the %d programs of tests/export/ as float64 exported and match\n", nok64, nall64);
    assert_int_equal(nok64, nall64);
    assert_int_equal(nall64, nall);
}

/* A damaged weights file is refused by its CRC, a truncated or another
 * model's by its size (RT_E_WEIGHTS = 2 from the example). */
static void test_weights_checked(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/w.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/w_c", tmpdir);
    random_checkpoint("models/mlp.relay", "predict", ckpt, 3);
    must(sh("%s export models/mlp.relay --checkpoint %s -o %s --name net", relayc(), ckpt, dir), "export");
    must(sh("make -s -C %s CFLAGS='-std=c11 -O0'", dir), "make");
    random_npy("x", 2, (int64_t[]){2, 784}, 5);
    must(sh("%s/example %s/x.npy %s/o.npy", dir, tmpdir, tmpdir), "example");
    /* the artifact under valgrind: no error, nothing leaked, also on a refused call */
    if (have("valgrind")) {
        const char *vg = "valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect";
        must(sh("%s %s/example %s/x.npy %s/o.npy", vg, dir, tmpdir, tmpdir), "example under valgrind");
        random_npy("bad", 2, (int64_t[]){2, 7}, 1);
        assert_int_equal(sh("%s %s/example %s/bad.npy %s/o.npy", vg, dir, tmpdir, tmpdir), 4);
    }
    must(sh("cp %s/net.weights %s/bad.weights && printf '\\001' | dd of=%s/bad.weights bs=1 seek=4096 conv=notrunc", dir,
            tmpdir, tmpdir),
         "damage");
    assert_int_equal(sh("%s/example -w %s/bad.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 2);
    assert_log_contains("CRC-32 mismatch: the weights file is damaged");
    must(sh("head -c 5000 %s/net.weights > %s/short.weights", dir, tmpdir), "truncate");
    assert_int_equal(sh("%s/example -w %s/short.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 2);
    assert_log_contains("has 5000 bytes, the model needs");
    assert_int_equal(sh("%s/example -w %s/none.weights %s/x.npy %s/o.npy", dir, tmpdir, tmpdir, tmpdir), 1);
    assert_log_contains("cannot open the weights file");
}

static void test_errors(void **s) {
    char ckpt[512], other[512];
    snprintf(ckpt, sizeof ckpt, "%s/e.h5", tmpdir);
    snprintf(other, sizeof other, "%s/other.h5", tmpdir);
    random_checkpoint("models/mlp.relay", "predict", ckpt, 1);
    random_checkpoint("models/lenet.relay", "predict", other, 1);
    /* an operator without a C kernel: located and named */
    assert_int_equal(sh("%s export tests/export/unsupported.relay -o %s/u_c", relayc(), tmpdir), 1);
    assert_log_contains("tests/export/unsupported.relay:6:3: error: export: operator nn.max_pool2d_grad has no C kernel in the export yet");
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/u_c/unsupported.c", tmpdir);
    assert_int_not_equal(stat(path, &st), 0); /* nothing written */
    /* a parameter the export cannot take: a function from outside */
    assert_int_equal(sh("%s export tests/export/fn_param.relay -o %s/t_c", relayc(), tmpdir), 1);
    assert_log_contains("tests/export/fn_param.relay:3:14: error: export: parameter %f has type fn");
    /* a checkpoint of another model */
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s -o %s/x_c", relayc(), other, tmpdir), 1);
    assert_log_contains("the weights hold c1b, which no global of the model takes");
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --out %s", relayc(), other, tmpdir), 1);
    assert_log_contains("holds parameter c1b, which no global of the model takes");
    /* run: a parameter neither given nor in the checkpoint */
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --out %s", relayc(), ckpt, tmpdir), 1);
    assert_log_contains("no input for parameter %x (give --input x=PATH.npy, or --checkpoint)");
    /* the command line */
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s", relayc(), ckpt), 1);
    assert_log_contains("missing -o DIR");
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s -o %s/y_c --name 9x", relayc(), ckpt, tmpdir), 1);
    assert_log_contains("is not a C identifier");
    assert_int_equal(sh("%s export models/mlp.relay --checkpoint %s/none.h5 -o %s/y_c", relayc(), tmpdir, tmpdir), 1);
}

/* relayc run --checkpoint: a checkpoint tensor whose shape differs from
 * the parameter's is a located error. */
static void test_run_checkpoint_shapes(void **s) {
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/s.h5", tmpdir);
    const char *names[] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    int ndims[] = {2, 1, 2, 1, 2, 1};
    const int64_t *shapes[] = {(int64_t[]){256, 784}, (int64_t[]){256}, (int64_t[]){128, 256},
                               (int64_t[]){128},      (int64_t[]){10, 129}, (int64_t[]){10}};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 6, names, ndims, shapes);
    ry_checkpoint_meta meta = {0};
    ry_error err;
    assert_int_equal(ry_checkpoint_save(ckpt, p, NULL, &meta, &err), RY_OK);
    ry_params_free(p);
    random_npy("x", 2, (int64_t[]){1, 784}, 5);
    assert_int_equal(sh("%s run models/mlp.relay --entry predict --checkpoint %s --input x=%s/x.npy --out %s", relayc(),
                        ckpt, tmpdir, tmpdir),
                     1);
    assert_log_contains("models/mlp.relay:11:");
    assert_log_contains("parameter %w3 is Tensor[(10, 128), float32], but");
}

/* relayc train --export: the trained parameters exported at the end give
 * what relayc run gives with the run's last checkpoint. */
static void test_train_export(void **s) {
    random_npy("x", 2, (int64_t[]){32, 784}, 11);
    char path[600];
    snprintf(path, sizeof path, "%s/ty.npy", tmpdir);
    ry_tensor *y = ry_tensor_new(RY_INT32, 1, (int64_t[]){32});
    for (int i = 0; i < 32; i++) ((int32_t *)y->data)[i] = (i * 7) % 10;
    ry_error err;
    assert_int_equal(ry_npy_write(path, y, &err), RY_OK);
    ry_tensor_release(y);
    must(sh("%s train models/mlp.relay --data npy:%s/x.npy,%s/ty.npy --steps 2 --batch 16 --optimizer sgd --lr 0.1 "
            "--quiet --checkpoint-dir %s/tck --export %s/trained_c",
            relayc(), tmpdir, tmpdir, tmpdir, tmpdir),
         "relayc train --export");
    char dir[512], ckpt[512];
    snprintf(dir, sizeof dir, "%s/trained_c", tmpdir);
    snprintf(ckpt, sizeof ckpt, "%s/tck/ckpt-2.h5", tmpdir);
    must(sh("make -s -C %s", dir), "make");
    compare("models/mlp.relay", dir, ckpt, "x", 1);
}

/* tmpdir/NAME: one line of text. */
static void write_text(const char *name, const char *text) { write_text_in(tmpdir, name, text); }

/* Line `line` (from 1) of path into buf; false past the end. */
static bool nth_line(const char *path, int line, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    bool ok = false;
    for (int i = 1; fgets(buf, (int)n, f); i++)
        if (i == line) {
            ok = true;
            break;
        }
    fclose(f);
    return ok;
}

/* The Tree-LSTM's @predict (recursion over the Tree ADT, match, the
 * words' concatenation of run-time length): exported with random
 * weights, built, and its example on PTB strings
 * (NAME_parse_tree) against relayc run on the same tree (sst:FILE:LINE
 * numbers the words as the parser does) for the trees of sst_small and
 * the first real SST dev trees; a malformed string, a tree too deep, and
 * a wrong-size weights file are clear errors. */
static void test_treelstm(void **s) {
    char ckpt[512], dir[512], ref[600], got[600];
    snprintf(ckpt, sizeof ckpt, "%s/tl.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/tl_c", tmpdir);
    snprintf(ref, sizeof ref, "%s/tl_ref", tmpdir);
    snprintf(got, sizeof got, "%s/tl_got.npy", tmpdir);
    random_checkpoint("models/treelstm.relay", "predict", ckpt, 5);
    must(sh("%s export models/treelstm.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export treelstm");
    build_with(dir, true); /* and clang: the values' and the PTB reader's runtime files */
    const char *files[] = {"tests/data/sst_small.txt", "../shared/data/sst/dev.txt"};
    int ntrees = 0, want = 3; /* sst_small's lines 1, 3 and 5 */
    for (int f = 0; f < 2; f++) {
        struct stat st;
        if (f == 1 && stat(files[f], &st) != 0) continue; /* the shared data is not in every checkout */
        if (f == 1) want += 2;
        for (int line = 1; line <= (f == 0 ? 5 : 2); line++) {
            char text[8192];
            if (!nth_line(files[f], line, text, sizeof text)) break;
            if (text[0] != '(') continue;
            write_text("tree.txt", text);
            must(sh("rm -rf %s && %s run models/treelstm.relay --entry predict --checkpoint %s --input tree=sst:%s:%d --out %s",
                    ref, relayc(), ckpt, files[f], line, ref),
                 "relayc run treelstm");
            must(sh("%s/example %s/tree.txt %s", dir, tmpdir, got), "the exported treelstm");
            char want[700];
            snprintf(want, sizeof want, "%s/out_0.npy", ref);
            ry_tensor *x = test_npy(got), *y = test_npy(want);
            test_assert_close(x, y, 1e-4, 1e-5);
            ry_tensor_release(x);
            ry_tensor_release(y);
            ntrees++;
        }
    }
    assert_int_equal(ntrees, want);
    /* malformed strings: the column and what is wrong (RT_E_PARSE = 8) */
    const char *bad[][2] = {{"(3 (2 a) (2 b)", "tree:1: error: '(' not closed"},
                            {"(3 (2 a) (2 b) (2 c))", "tree:16: error: a node with more than two children"},
                            {"(3 (2 a))", "tree:1: error: a node with one child"},
                            {"(x a)", "tree:2: error: expected a label"},
                            {"(2 a))", "tree:6: error: ')' without its '('"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text("bad.txt", bad[i][0]);
        assert_int_equal(sh("%s/example %s/bad.txt %s", dir, tmpdir, got), 8);
        assert_log_contains(bad[i][1]);
    }
    /* a tree deeper than the export's recursion limit: a located error (RT_E_DEPTH = 6), not a crash */
    char deep[40000];
    size_t n = 0;
    for (int i = 0; i < 2500; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "(1 (2 w) ");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "(2 z)");
    for (int i = 0; i < 2500; i++) deep[n++] = ')';
    deep[n] = 0;
    write_text("deep.txt", deep);
    assert_int_equal(sh("%s/example %s/deep.txt %s", dir, tmpdir, got), 6);
    assert_log_contains("models/treelstm.relay:");
    assert_log_contains("the recursion is deeper than 2000 calls (TREELSTM_MAX_DEPTH)");
    /* the header's constructors and parser from a C program, under valgrind where installed */
    must(sh("cc -std=c11 -Wall -Wextra -Werror -pedantic -I%s -o %s/driver tests/export_c/tree_driver.c %s/treelstm.o -lm", dir,
            tmpdir, dir),
         "build the driver");
    must(sh("%s/driver %s/treelstm.weights", tmpdir, dir), "the constructors' driver");
    /* a weights file of the wrong size */
    must(sh("head -c 100000 %s/treelstm.weights > %s/tl_short.weights", dir, tmpdir), "truncate");
    write_text("tree.txt", "(1 (2 a) (0 film))");
    assert_int_equal(sh("%s/example -w %s/tl_short.weights %s/tree.txt %s", dir, tmpdir, tmpdir, got), 2);
    assert_log_contains("has 100000 bytes, the model needs");
}

/* The char-LSTM's @predict (recursion over the time step, if, a
 * concatenation that grows by a step each level, so the scores' time
 * dim is one only run time knows): exported with random weights and
 * compared with relayc run at two batch and window sizes, its scores an
 * array the call fills. A window longer than the recursion limit is a
 * located error. */
static void test_charlstm(void **s) {
    char ckpt[512], dir[512];
    snprintf(ckpt, sizeof ckpt, "%s/cl.h5", tmpdir);
    snprintf(dir, sizeof dir, "%s/cl_c", tmpdir);
    random_checkpoint("models/charlstm.relay", "predict", ckpt, 9);
    must(sh("%s export models/charlstm.relay --checkpoint %s -o %s", relayc(), ckpt, dir), "relayc export charlstm");
    build(dir);
    const int64_t sizes[][2] = {{1, 1}, {3, 7}};
    char path[600];
    snprintf(path, sizeof path, "%s/x.npy", tmpdir);
    ry_error err;
    for (int k = 0; k < 4; k++) { /* then 1900 steps in 150 MB; then 2500, deeper than CHARLSTM_MAX_DEPTH */
        int64_t n = k < 2 ? sizes[k][0] : 1, t = k < 2 ? sizes[k][1] : k == 2 ? 1900 : 2500;
        ry_tensor *x = ry_tensor_new(RY_INT32, 2, (int64_t[]){n, t});
        for (int64_t i = 0; i < x->size; i++) ((int32_t *)x->data)[i] = (int32_t)((i * 17 + k) % 65);
        assert_int_equal(ry_npy_write(path, x, &err), RY_OK);
        ry_tensor_release(x);
        random_npy("h0", 2, (int64_t[]){n, 256}, 3 + (uint64_t)k);
        random_npy("c0", 2, (int64_t[]){n, 256}, 5 + (uint64_t)k);
        const char *names[] = {"x", "h0", "c0"};
        if (k < 2) compare_inputs("models/charlstm.relay", dir, ckpt, names, 3, 3);
        /* each level drops its temporaries and the scores it got when it returns: the window's
         * memory grows with t, not t^2 (which was 500 MB here) */
        if (k == 2)
            must(sh("ulimit -v 150000 && %s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir,
                    tmpdir, tmpdir, tmpdir, tmpdir),
                 "1900 steps in 150 MB");
    }
    assert_int_equal(sh("%s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir, tmpdir,
                        tmpdir, tmpdir, tmpdir),
                     6);
    assert_log_contains("models/charlstm.relay:");
    assert_log_contains(": the recursion is deeper than 2000 calls (CHARLSTM_MAX_DEPTH)");
    /* a state of another batch than the window's: the dimension's error code, not a crash */
    random_npy("h0", 2, (int64_t[]){2, 256}, 3);
    assert_int_equal(sh("%s/example %s/x.npy %s/h0.npy %s/c0.npy %s/o0.npy %s/o1.npy %s/o2.npy", dir, tmpdir, tmpdir, tmpdir,
                        tmpdir, tmpdir, tmpdir),
                     4);
    assert_log_contains("charlstm_predict: input h0: dimension 0 is 2, the model needs 1");
}

static int setup(void **s) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/relayc_export_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),           cmocka_unit_test(test_lenet),
        cmocka_unit_test(test_lenet_embedded), cmocka_unit_test(test_ops), cmocka_unit_test(test_layers), cmocka_unit_test(test_loss),
        cmocka_unit_test(test_loss_only_weight),
        cmocka_unit_test(test_weight_dims),   cmocka_unit_test(test_blas), cmocka_unit_test(test_run_programs),
        cmocka_unit_test(test_corpus_programs),
        cmocka_unit_test(test_weights_checked), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_run_checkpoint_shapes), cmocka_unit_test(test_train_export),
        cmocka_unit_test(test_treelstm),      cmocka_unit_test(test_charlstm), cmocka_unit_test(test_dyn_valgrind),
        cmocka_unit_test(test_runtime_broadcast),
    };
    const char *filter = getenv("RY_TEST_FILTER"); /* e.g. RY_TEST_FILTER=test_treelstm */
    if (filter) cmocka_set_test_filter(filter);
    if (getenv("RY_KEEP_TMP")) return cmocka_run_group_tests(tests, setup, NULL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
