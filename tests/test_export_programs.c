/*
 * test_export_programs.c: relayc export on every program of tests/run/
 * (against their committed outputs; deep_recursion stops with its located
 * depth error), tests/corpus/ and tests/export/ with a @main (seeded
 * inputs against relayc run, and tests/export/ again in float64), the
 * generated recursion under valgrind, and dims that are 1 only at run
 * time broadcasting as on the VM (mismatches as NAME_ERR_DIM, located),
 * gather_nd's and scatter_nd's indices out of range (NAME_ERR_ARG), and
 * tuple parameters, one argument per tensor.
 * The comparisons are test_export.c's (export_util.h).
 * RY_TEST_FILTER=test_NAME runs one test.
 */
#include "export_util.h"

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
    assert_true(nok >= 20);
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

/* tmpdir/NAME.npy: the int32 values v[0..n) as a (rows, n / rows) tensor. */
static void int_npy(const char *name, int64_t rows, int n, const int32_t *v) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", tmpdir, name);
    ry_tensor *t = ry_tensor_new(RY_INT32, 2, (int64_t[]){rows, n / rows});
    memcpy(t->data, v, sizeof *v * (size_t)n);
    ry_error err;
    assert_int_equal(ry_npy_write(path, t, &err), RY_OK);
    ry_tensor_release(t);
}

/* gather_nd's and scatter_nd's indices out of range, past the end and
 * negative: the VM refuses them, and so does the export (RT_E_ARG, a
 * located message) without reading or writing outside a buffer
 * (ASan+UBSan); in range, both agree. */
static void test_index_out_of_range(void **s) {
    char model[600], dir[600], san[600], args[600];
    snprintf(model, sizeof model, "%s/ix.relay", tmpdir);
    snprintf(dir, sizeof dir, "%s/ix_c", tmpdir);
    snprintf(san, sizeof san, "%s/ix_san", tmpdir);
    write_text_in(tmpdir, "ix.relay", "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(n, 4), float32], %i: Tensor[(2, 2), int32],\n"
                                      "          %k: Tensor[(1, 3), int32], %u: Tensor[(3, 4), float32]) {\n"
                                      "  (gather_nd(%x, %i),\n   scatter_nd(%x, %k, %u, mode=\"add\"))\n}\n");
    must(sh("%s export %s --entry main -o %s && make -s -C %s && cp -r %s %s && make -s -C %s clean && "
            "make -s -C %s CC=gcc CFLAGS='-std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all' "
            "LDFLAGS='-fsanitize=address,undefined'",
            relayc(), model, dir, dir, dir, san, san, san),
         "export, build and build with the sanitizers");
    const char *names[] = {"x", "i", "k", "u"};
    snprintf(args, sizeof args, " %s/x.npy %s/i.npy %s/k.npy %s/u.npy %s/o0.npy %s/o1.npy", tmpdir, tmpdir, tmpdir, tmpdir, tmpdir,
             tmpdir);
    const struct {
        int32_t i[4], k[3];
        const char *msg; /* NULL: in range */
    } cases[] = {{{0, 2, 3, 1}, {2, 0, 2}, NULL},
                 {{0, 3, 3, 1}, {2, 0, 2}, "ix.relay:4:4: gather_nd: an index is out of range"},
                 {{0, 2, 4, 1}, {2, 0, 2}, "ix.relay:4:4: gather_nd: an index is out of range"},
                 {{0, 2, 3, 1}, {2, -1, 2}, "ix.relay:5:4: scatter_nd: an index is out of range"},
                 {{0, 2, 3, 1}, {2, 0, 3}, "ix.relay:5:4: scatter_nd: an index is out of range"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        random_npy("x", 2, (int64_t[]){3, 4}, c + 1);
        random_npy("u", 2, (int64_t[]){3, 4}, c + 2);
        int_npy("i", 2, 4, cases[c].i);
        int_npy("k", 1, 3, cases[c].k);
        if (!cases[c].msg) {
            compare_inputs(model, dir, NULL, names, 4, 2);
            continue;
        }
        assert_int_equal(sh("%s run %s --input x=%s/x.npy --input i=%s/i.npy --input k=%s/k.npy --input u=%s/u.npy --out %s/ixref",
                            relayc(), model, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir),
                         1);
        assert_int_equal(sh("%s/example%s", dir, args), 5);
        assert_log_contains(cases[c].msg);
        assert_int_equal(sh("ASAN_OPTIONS=detect_leaks=1 %s/example%s", san, args), 5);
    }
}

/* tests/export/tuple_params.relay: @layers's tuple parameter exported as
 * one argument per tensor, in order, against @main on the VM, which takes
 * the same tensors one by one; and that C entry's signature. */
static void test_tuple_params(void **s) {
    const char *model = "tests/export/tuple_params.relay", *names[] = {"x", "w0", "b", "w1"};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tp_c", tmpdir);
    must(sh("%s export %s --entry layers -o %s && make -s -C %s", relayc(), model, dir, dir), "export @layers");
    must(sh("grep -q 'int tuple_params_layers(tuple_params_ctx \\*ctx, int64_t n, const float \\*x, const float \\*w_0, "
            "const float \\*w_1_0, const float \\*w_1_1, float \\*out0, float \\*out1)' %s/tuple_params.h",
            dir),
         "the entry's signature");
    const int64_t shapes[][2] = {{3, 4}, {3, 4}, {3, 1}, {2, 3}};
    for (int64_t rows = 1; rows <= 5; rows += 4) {
        for (int k = 0; k < 4; k++)
            random_npy(names[k], k == 2 ? 1 : 2, k == 0 ? (int64_t[]){rows, 4} : shapes[k], (uint64_t)(rows * 4 + k));
        compare_inputs(model, dir, NULL, names, 4, 2);
    }
}

/* Results that are values (tests/export/value_results.relay: a list, a
 * tree, a tensor): the header's accessors from a C program
 * (tests/export_c/value_driver.c), under valgrind where installed; the
 * example's files against relayc run are test_corpus_programs'. A
 * closure result is refused, located. */
static void test_value_results(void **s) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/vr_c", tmpdir);
    must(sh("%s export tests/export/value_results.relay --entry main -o %s", relayc(), dir), "export @main");
    build(dir); /* its own flags: the sanitizers' CFLAGS of make test-asan would need their runtime in the driver */
    must(sh("grep -q 'int value_results_main(value_results_ctx \\*ctx, const int32_t \\*k, const float \\*x, const float \\*y, "
            "value_results_value \\*\\*out0, value_results_value \\*\\*out1, float \\*out2)' %s/value_results.h",
            dir),
         "the entry's signature");
    must(sh("cc -std=c11 -Wall -Wextra -Werror -pedantic -I%s -o %s/vdriver tests/export_c/value_driver.c %s/value_results.o -lm",
            dir, tmpdir, dir),
         "build the driver");
    must(sh("%s %s/vdriver %s/value_results.weights",
            have("valgrind") ? "valgrind -q --leak-check=full --errors-for-leak-kinds=all --error-exitcode=9" : "", tmpdir, dir),
         "the accessors' driver");
    char path[600];
    snprintf(path, sizeof path, "%s/closure.relay", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#[version = \"0.0.5\"]\n"
          "def @main(%x: Tensor[(2), float32]) -> fn (Tensor[(2), float32]) -> Tensor[(2), float32] {\n"
          "  fn (%y: Tensor[(2), float32]) -> Tensor[(2), float32] { add(%x, %y) }\n"
          "}\n",
          f);
    fclose(f);
    assert_int_equal(sh("%s export %s --entry main -o %s/closure_c", relayc(), path, tmpdir), 1);
    assert_log_contains("closure.relay:2:");
    assert_log_contains("not closures or refs");
    /* and one held in a field of mutually recursive types: found, not walked forever */
    snprintf(path, sizeof path, "%s/forest.relay", tmpdir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("#[version = \"0.0.5\"]\n"
          "type Tree { Node(Forest), }\n"
          "type Forest { Grove(Tree, Forest), Empty(fn (Tensor[(2), float32]) -> Tensor[(2), float32]), }\n"
          "def @main(%x: Tensor[(2), float32]) -> Tree {\n"
          "  Node(Empty(fn (%y: Tensor[(2), float32]) -> Tensor[(2), float32] { add(%x, %y) }))\n"
          "}\n",
          f);
    fclose(f);
    assert_int_equal(sh("%s export %s --entry main -o %s/forest_c", relayc(), path, tmpdir), 1);
    assert_log_contains("forest.relay:4:");
    assert_log_contains("not closures or refs");
}

/* tests/export/adt_frames.relay at k = 1900: each level's temporaries
 * (256 KB and more) made after the call it conses onto are dropped when
 * it returns, the list moved down, so the example runs in 100 MB where
 * keeping every frame takes 500 MB; its last element against the VM. */
static void test_adt_frames(void **s) {
    char dir[600], path[600];
    snprintf(dir, sizeof dir, "%s/af_c", tmpdir);
    must(sh("%s export tests/export/adt_frames.relay --entry main -o %s", relayc(), dir), "export @main");
    build(dir); /* without ASan's shadow memory, which ulimit -v would refuse */
    ry_tensor *k = ry_tensor_new(RY_INT32, 0, NULL);
    *(int32_t *)k->data = 1900;
    snprintf(path, sizeof path, "%s/afk.npy", tmpdir);
    ry_error err;
    assert_int_equal(ry_npy_write(path, k, &err), RY_OK);
    ry_tensor_release(k);
    random_npy("afx", 2, (int64_t[]){256, 256}, 7);
    must(sh("ulimit -v 100000 && %s/example %s/afk.npy %s/afx.npy $(seq -f '%s/af_%%g.npy' 0 1899)", dir, tmpdir, tmpdir, tmpdir),
         "1900 levels in 100 MB");
    must(sh("rm -rf %s/afref && %s run tests/export/adt_frames.relay --input k=%s/afk.npy --input x=%s/afx.npy --out %s/afref",
            tmpdir, relayc(), tmpdir, tmpdir, tmpdir),
         "relayc run");
    char got[600], ref[600];
    snprintf(got, sizeof got, "%s/af_1899.npy", tmpdir);
    snprintf(ref, sizeof ref, "%s/afref/out_1899.npy", tmpdir);
    ry_tensor *a = NULL, *b = NULL;
    assert_int_equal(ry_npy_read(got, &a, &err), RY_OK);
    assert_int_equal(ry_npy_read(ref, &b, &err), RY_OK);
    assert_int_equal(a->size, 256);
    assert_int_equal(b->size, 256);
    for (int64_t i = 0; i < a->size; i++) assert_true(fabs(ry_tensor_get(a, i) - ry_tensor_get(b, i)) < 1e-3);
    ry_tensor_release(a);
    ry_tensor_release(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_programs),   cmocka_unit_test(test_corpus_programs),
        cmocka_unit_test(test_dyn_valgrind),   cmocka_unit_test(test_runtime_broadcast),
        cmocka_unit_test(test_index_out_of_range), cmocka_unit_test(test_tuple_params),
        cmocka_unit_test(test_value_results),      cmocka_unit_test(test_adt_frames),
    };
    const char *filter = getenv("RY_TEST_FILTER");
    if (filter) cmocka_set_test_filter(filter);
    if (getenv("RY_KEEP_TMP")) return cmocka_run_group_tests(tests, setup, NULL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
