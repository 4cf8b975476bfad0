/*
 * test_cli.c: the relayc command end to end: every program in tests/run/
 * is run on its committed inputs and its outputs compared with the values
 * numpy/torch computed (tools/gen_run_tests.py); bad command lines, bad
 * inputs and run-time errors give a located message and exit status 1.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static const char *relayc(void) {
    const char *r = getenv("RELAYC");
    return r ? r : "build/relayc";
}

static char tmpdir[256];

/* Runs `relayc ARGS`, stderr to tmpdir/err; returns the exit status. */
static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >%s/out.txt 2>%s/err.txt", relayc(), args, tmpdir, tmpdir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* tmpdir/NAME (out.txt or err.txt, the last run's) into buf. */
static void read_run(const char *name, char *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static void read_err(char *buf, size_t n) { read_run("err.txt", buf, n); }
static void read_out(char *buf, size_t n) { read_run("out.txt", buf, n); }

static void assert_err_contains(const char *what) {
    char buf[8192];
    read_err(buf, sizeof buf);
    if (!strstr(buf, what)) fail_msg("stderr lacks '%s':\n%s", what, buf);
}

/* Runs tests/run/NAME.relay with every tests/run/NAME/in_*.npy and checks
 * each out_K.npy against the expected one. */
static void check_program_on(const char *name, const char *engine, double rtol, double atol) {
    char args[6000], dir[512];
    snprintf(dir, sizeof dir, "tests/run/%s", name);
    int n = snprintf(args, sizeof args, "run tests/run/%s.relay --engine %s --out %s/%s", name, engine, tmpdir, name);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int nexpected = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "in_", 3) == 0 && len > 7)
            n += snprintf(args + n, sizeof args - (size_t)n, " --input %.*s=%s/%s", (int)(len - 7),
                          e->d_name + 3, dir, e->d_name);
        else if (strncmp(e->d_name, "out_", 4) == 0)
            nexpected++;
    }
    closedir(d);
    int rc = run(args);
    if (rc != 0) {
        char buf[8192];
        read_err(buf, sizeof buf);
        fail_msg("relayc %s: exit %d\n%s", args, rc, buf);
    }
    for (int k = 0; k < nexpected; k++) {
        char want[600], got[600];
        snprintf(want, sizeof want, "%s/out_%d.npy", dir, k);
        snprintf(got, sizeof got, "%s/%s/out_%d.npy", tmpdir, name, k);
        ry_tensor *a = test_npy(got), *b = test_npy(want);
        assert_int_equal(a->dtype, b->dtype);
        test_assert_close(a, b, rtol, atol);
        ry_tensor_release(a);
        ry_tensor_release(b);
    }
    char extra[600];
    snprintf(extra, sizeof extra, "%s/%s/out_%d.npy", tmpdir, name, nexpected);
    assert_int_not_equal(access(extra, F_OK), 0); /* no more outputs than expected */
}

/* Every program on both engines: the compiled one (the default) and the
 * reference interpreter. */
static void check_program(const char *name, double rtol, double atol) {
    check_program_on(name, "vm", rtol, atol);
    check_program_on(name, "interp", rtol, atol);
}

static void test_mlp(void **s) { check_program("mlp", 1e-4, 1e-5); }
static void test_lenet(void **s) { check_program("lenet", 1e-4, 1e-4); }
static void test_lstm_list(void **s) { check_program("lstm_list", 1e-4, 1e-5); }
static void test_treelstm(void **s) { check_program("treelstm", 1e-4, 1e-5); }
static void test_higher_order(void **s) { check_program("higher_order", 1e-5, 1e-6); }
static void test_refs(void **s) { check_program("refs", 1e-12, 0); }
static void test_deep_recursion(void **s) { check_program("deep_recursion", 0, 0); }
static void test_symbolic(void **s) { check_program("symbolic", 1e-5, 1e-6); }

static void test_help(void **s) {
    char out[8192];
    assert_int_equal(run("--version"), 0);
    read_out(out, sizeof out);
    assert_string_equal(out, "relayc " RELAYC_VERSION "\n");
    assert_int_equal(run("help run"), 0);
    read_out(out, sizeof out);
    assert_non_null(strstr(out, "usage: relayc run FILE"));
    assert_int_equal(run("help train"), 0);
    read_out(out, sizeof out);
    assert_non_null(strstr(out, "usage: relayc train MODEL.relay"));
    assert_int_equal(run("help"), 0);
    read_out(out, sizeof out);
    assert_non_null(strstr(out, "compiled engine"));
    assert_null(strstr(out, "with the interpreter"));
    assert_int_equal(run("help frobnicate"), 1);
    assert_err_contains("unknown command 'frobnicate'");
    assert_int_equal(run("--help"), 0);
    assert_int_equal(run("check --help"), 0);
    assert_int_equal(run("fmt --help"), 0);
    assert_int_equal(run("run --help"), 0);
    assert_int_equal(run("grad --help"), 0);
    assert_int_equal(run("gradcheck --help"), 0);
    assert_int_equal(run("opt --help"), 0);
    assert_int_equal(run(""), 1);
    assert_int_equal(run("frobnicate"), 1);
    assert_err_contains("unknown command 'frobnicate'");
}

/* Every option a command's help names is one the command takes: each is
 * given (with a stand-in value) and must not be "unknown". Options named
 * after another command (`as relayc run --plan`) are that command's. */
static void test_help_names_real_options(void **s) {
    static const char *cmds[] = {"check", "fmt", "run", "grad", "gradcheck", "opt", "train", "export", "checkpoint"};
    static char help[65536], err[8192];
    int checked = 0;
    for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
        char args[256];
        snprintf(args, sizeof args, "help %s", cmds[c]);
        assert_int_equal(run(args), 0);
        read_out(help, sizeof help);
        for (const char *p = strstr(help, "--"); p; p = strstr(p + 2, "--")) {
            size_t n = 2;
            while (p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9')) n++;
            const char *back = p - help >= 11 ? p - 11 : help;
            if (n == 2 || !(p[2] >= 'a' && p[2] <= 'z') || (p > help && p[-1] != ' ' && p[-1] != '[' &&
                p[-1] != '`' && p[-1] != '(' && p[-1] != '\n') || memmem(back, (size_t)(p - back), "relayc ", 7))
                continue;
            char opt[64], want[96];
            snprintf(opt, sizeof opt, "%.*s", (int)(n < 60 ? n : 60), p);
            snprintf(args, sizeof args, "%s /nonexistent.relay %s 1", cmds[c], opt);
            run(args);
            read_err(err, sizeof err);
            snprintf(want, sizeof want, "unknown option '%s'", opt);
            if (strstr(err, want)) fail_msg("relayc help %s names %s, which relayc %s refuses", cmds[c], opt, cmds[c]);
            checked++;
        }
    }
    assert_true(checked > 100);
}

static void test_bad_command_lines(void **s) {
    assert_int_equal(run("run"), 1);
    assert_err_contains("missing FILE");
    assert_int_equal(run("run tests/run/mlp.relay --bogus"), 1);
    assert_err_contains("unknown option '--bogus'");
    assert_int_equal(run("run tests/run/mlp.relay --target gpu"), 1);
    assert_err_contains("--target: unknown target 'gpu' (known: cpu, opencl, cuda)");
    assert_int_equal(run("run tests/run/mlp.relay --engine jit"), 1);
    assert_err_contains("--engine is vm or interp, not 'jit'");
#ifndef RY_HAVE_CUDA
    assert_int_equal(run("run tests/run/mlp.relay --target cuda"), 1);
    assert_err_contains("target cuda is not built into this relayc");
#endif
    /* the interpreter is an engine, not a target */
    assert_int_equal(run("run tests/run/mlp.relay --target interp"), 1);
    assert_err_contains("the interpreter is an engine: --engine interp");
    assert_int_equal(run("run tests/run/mlp.relay --level 3"), 1);
    assert_err_contains("--level needs 0, 1 or 2, got '3'");
    assert_int_equal(run("run tests/run/mlp.relay --input"), 1);
    assert_err_contains("needs a value");
    assert_int_equal(run("run tests/run/mlp.relay --input x"), 1);
    assert_err_contains("NAME=PATH.npy");
    assert_int_equal(run("check tests/run/no_such_file.relay"), 1);
    assert_err_contains("tests/run/no_such_file.relay");
    assert_int_equal(run("run tests/run/mlp.relay --entry nothere"), 1);
    assert_err_contains("no global @nothere");
    assert_int_equal(run("run tests/run/deep_recursion.relay --engine interp --profile"), 1);
    assert_err_contains("--profile is the compiled engine's; not with --engine interp");
}

static void test_bad_inputs(void **s) {
    /* a missing input names the parameter at its definition */
    assert_int_equal(run("run tests/run/deep_recursion.relay"), 1);
    assert_err_contains("tests/run/deep_recursion.relay:13:11:");
    assert_err_contains("no input for parameter %n");
    /* wrong shape against a static type */
    assert_int_equal(run("run tests/run/deep_recursion.relay --input n=tests/run_errors/x_5x3.npy"), 1);
    assert_err_contains("input %n from tests/run_errors/x_5x3.npy is float32[5, 3]");
    /* a truncated .npy */
    assert_int_equal(run("run tests/run/deep_recursion.relay --input n=tests/run_errors/truncated.npy"), 1);
    assert_err_contains("tests/run_errors/truncated.npy");
    /* an input the function does not take */
    assert_int_equal(run("run tests/run/deep_recursion.relay --input n=tests/run/deep_recursion/in_n.npy "
                         "--input m=tests/run/deep_recursion/in_n.npy"),
                     1);
    assert_err_contains("no parameter %m");
}

/* --profile: the operator call sites after the run, on stderr. */
static void test_profile(void **s) {
    char args[600];
    snprintf(args, sizeof args,
             "run tests/run/deep_recursion.relay --input n=tests/run/deep_recursion/in_n.npy "
             "--out %s/prof --profile",
             tmpdir);
    assert_int_equal(run(args), 0);
    assert_err_contains("us/call");
    assert_err_contains("tests/run/deep_recursion.relay:");
    assert_err_contains("ms in operators");
}

static void test_runtime_errors(void **s) {
    assert_int_equal(run("run tests/run_errors/match_fail.relay --input x=tests/run_errors/scalar.npy"), 1);
    assert_err_contains("tests/run_errors/match_fail.relay:9:3: error:");
    assert_err_contains("match");
    assert_int_equal(run("run tests/run_errors/any_mismatch.relay --input x=tests/run_errors/x_5x3.npy"), 1);
    assert_err_contains("tests/run_errors/any_mismatch.relay:");
    assert_err_contains("%x");
    /* a call passing a (?, ?) value to a (5, 1) parameter checks it */
    const char *targets[4] = {"--engine interp", "--level 0", "--level 1", "--level 2"};
    for (int i = 0; i < 4; i++) {
        char args[300];
        snprintf(args, sizeof args,
                 "run tests/run_errors/call_any_to_fixed.relay --input x=tests/run_errors/x_5x3.npy %s",
                 targets[i]);
        assert_int_equal(run(args), 1);
        assert_err_contains("tests/run_errors/call_any_to_fixed.relay:10:3: error: argument 1 "
                            "(parameter %s): expected Tensor[(5, 1), float32], got float32[5, 3]");
    }
}

/* Reads FILE (in tmpdir) into buf. */
static void read_tmp(const char *file, char *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static void test_run_grad(void **s) {
    char args[1024];
    snprintf(args, sizeof args,
             "run tests/run_errors/square.relay --grad --input a=tests/run/higher_order/in_a.npy --out %s/sq", tmpdir);
    assert_int_equal(run(args), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/sq/grad_a.npy", tmpdir);
    ry_tensor *g = test_npy(path), *a = test_npy("tests/run/higher_order/in_a.npy");
    for (int64_t i = 0; i < a->size; i++) ry_tensor_set(a, i, 2 * ry_tensor_get(a, i));
    test_assert_close(g, a, 1e-6, 0);
    ry_tensor_release(g);
    ry_tensor_release(a);
}

static void test_grad_and_opt(void **s) {
    char buf[65536];
    /* the optimized gradient of a straight-line program has no ref left */
    assert_int_equal(run("grad tests/run/mlp.relay --optimize"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "def @main_gradient("));
    char *grad = strstr(buf, "def @main_gradient(");
    assert_null(strstr(grad, "ref"));
    assert_null(strstr(grad, "fn ("));
    assert_int_equal(run("grad tests/run/mlp.relay"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "ref_write"));
    assert_int_equal(run("grad tests/run/mlp.relay --entry nothere"), 1);
    assert_err_contains("no global @nothere");
    assert_int_equal(run("opt tests/run/lstm_list.relay --passes=anf,partial-eval,dce,cse,verify"), 0);
    assert_int_equal(run("opt tests/run/lstm_list.relay --passes=anf,bogus"), 1);
    assert_err_contains("unknown pass 'bogus'");
    assert_int_equal(run("opt tests/run/lstm_list.relay --level 3"), 1);
    /* the memory plan, after the module it was made for: the MLP's three
     * layers and softmax share two slots */
    assert_int_equal(run("opt tests/run/mlp.relay --passes=fuse,plan"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    char *plan = strstr(buf, "@main: 5 instructions, 2 slots");
    assert_non_null(plan);
    assert_true(plan > strstr(buf, "def @main("));
    assert_non_null(strstr(plan, "fused.matmul3 -> slot 0"));
}

static void test_gradcheck(void **s) {
    assert_int_equal(run("gradcheck tests/run/treelstm.relay --second-order"), 0);
    char buf[8192];
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "gradcheck @main: ok"));
    assert_non_null(strstr(buf, "%emb"));
    assert_int_equal(run("gradcheck tests/run/lstm_list.relay --seed 3"), 0);
    /* an impossible tolerance fails with status 1 and says which */
    assert_int_equal(run("gradcheck tests/run/lstm_list.relay --rtol 0 --atol 0 --eps 1e-2"), 1);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "MISMATCH"));
    assert_int_equal(run("gradcheck tests/run/lstm_list.relay --eps -1"), 1);
    assert_err_contains("--eps needs a non-negative number");
    /* a match over a bare constructor (@head(Nil) inlined): its result's
     * type comes from nothing in the gradient program but an annotation;
     * the gradient builds, and running it fails where the program does */
    assert_int_equal(run("grad tests/run_errors/match_fail.relay"), 0);
    assert_int_equal(run("gradcheck tests/run_errors/match_fail.relay"), 1);
    assert_err_contains("match_fail.relay:9:3: error: match failed: no clause matches Nil");
}

/* gradcheck with ADT arguments: a list of tensors, a tuple and an option
 * written in the text format; a tree from a treebank line (its words make
 * the `// vocab:` dimension: 5 rows of 3) and the same kind of tree written
 * as text with --dim; bad values are located errors. */
static void test_gradcheck_adt(void **s) {
    char buf[8192];
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_list.relay --input 'xs=relay:Cons(full(0.5f, shape=[1, 3], "
                         "dtype=\"float32\"), Cons(full(-1.5f, shape=[1, 3], dtype=\"float32\"), Nil))' "
                         "--input 'b=relay:Some(full(0.25f, shape=[1, 2], dtype=\"float32\"))'"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "%xs"));
    assert_non_null(strstr(buf, "6  ok")); /* both list elements' 3 values */
    assert_non_null(strstr(buf, "10  ok")); /* the tuple's 6 + 4 */
    assert_non_null(strstr(buf, "gradcheck @main: ok"));
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_list.relay --input xs=relay:Nil --input b=relay:None"), 0);
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --input t=sst:tests/data/sst_small.txt:1"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "15  ok")); /* <unk> and It 's a lovely, 3 each */
    assert_non_null(strstr(buf, "gradcheck @main: ok"));
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --dim v=3 "
                         "--input 't=relay:Node(Leaf(1, 0), Node(Leaf(2, 0), Leaf(1, 0), 0), 0)' --samples 4"), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "4  ok"));
    /* two trees share one vocabulary: It 's a lovely, then a film (one new) */
    char path[600], args[1400];
    snprintf(path, sizeof path, "%s/two_trees.relay", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#[version = \"0.0.5\"]\n// vocab: v\ntype Tree { Leaf(int32, int32), Node(Tree, Tree, int32) }\n"
          "def @h(%t: Tree, %e: Tensor[(v, 2), float32]) -> Tensor[(2), float32] {\n"
          "  match (%t) { Leaf(%w, _) => take(%e, %w, axis=0), Node(%l, %r, _) => tanh(add(@h(%l, %e), @h(%r, %e))) }\n"
          "}\n"
          "def @main(%a: Tree, %b: Tree, %e: Tensor[(v, 2), float32]) { multiply(@h(%a, %e), @h(%b, %e)) }\n", f);
    fclose(f);
    snprintf(args, sizeof args, "gradcheck %s --input a=sst:tests/data/sst_small.txt:1 "
             "--input b=sst:tests/data/sst_small.txt:3", path);
    assert_int_equal(run(args), 0);
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "12  ok")); /* 6 rows of 2 */
    /* the Tree-LSTM's real embedding (18281 x 300): without --samples,
     * 64 elements of each tensor, half of them in the tree's rows */
    assert_int_equal(run("gradcheck models/treelstm.relay --entry loss --input tree=sst:tests/data/sst_small.txt:1"), 0);
    assert_err_contains("%emb has 5484300 elements: checking 64 of each tensor");
    read_tmp("out.txt", buf, sizeof buf);
    assert_non_null(strstr(buf, "gradcheck @loss: ok"));
    assert_non_null(strstr(buf, "64  ok"));
    assert_non_null(strstr(buf, "5  ok")); /* %bs: all of its 5 */
    /* errors */
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay"), 1);
    assert_err_contains("--input t=sst:PATH:LINE");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --input t=sst:tests/data/sst_small.txt:2"), 1);
    assert_err_contains("no tree starts on line 2");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --input t=sst:tests/data/sst_small.txt"), 1);
    assert_err_contains("expected sst:PATH:LINE");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --input 't=relay:Leaf(1, 0)'"), 1);
    assert_err_contains("give its symbolic dimensions with --dim");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --dim v=2 --input 't=relay:Leaf(1, )'"), 1);
    assert_err_contains("--input t:1:");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_list.relay --input 'xs=relay:Cons(1f, Nil)' "
                         "--input b=relay:None"), 1);
    assert_err_contains("--input xs:1:");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_list.relay --input xs=sst:tests/data/sst_small.txt:1"), 1);
    assert_err_contains("but sst: gives a tree");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --input t=sst:a:1 --input t=sst:b:1"), 1);
    assert_err_contains("--input t given twice");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --dim v=x"), 1);
    assert_err_contains("--dim needs NAME=N");
    assert_int_equal(run("gradcheck tests/corpus/gradcheck_tree.relay --samples 0"), 1);
    assert_err_contains("--samples needs a positive integer");
    /* run takes the same values: tanh(3 * 0.5) from one step of zeros, both engines */
    for (int e = 0; e < 2; e++) {
        char args[1024], out[600];
        snprintf(args, sizeof args, "run tests/corpus/gradcheck_list.relay --engine %s --out %s/adt "
                 "--input 'xs=relay:Cons(full(1f, shape=[1, 3], dtype=\"float32\"), Nil)' "
                 "--input 'h0=relay:zeros(shape=[1, 2], dtype=\"float32\")' --input 'wu=relay:(full(0.5f, "
                 "shape=[2, 3], dtype=\"float32\"), full(0.25f, shape=[2, 2], dtype=\"float32\"))' "
                 "--input b=relay:None", e ? "interp" : "vm", tmpdir);
        assert_int_equal(run(args), 0);
        snprintf(out, sizeof out, "%s/adt/out_0.npy", tmpdir);
        ry_tensor *t = test_npy(out);
        assert_int_equal(t->size, 2);
        for (int i = 0; i < 2; i++) assert_float_equal(ry_tensor_get(t, i), 0.9051482536448664, 1e-6);
        ry_tensor_release(t);
    }
}

static int setup(void **s) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/relayc_test_cli_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Links planted at the temporary names relayc used to write through
 * (OUT.tmp for fmt -o, DIR/out_0.npy.tmp for run --out) are not followed:
 * their target keeps its text, the outputs are written. */
static void test_planted_links_not_followed(void **s) {
    char victim[300], link[300], args[1200], buf[64] = "";
    snprintf(victim, sizeof victim, "%s/victim.txt", tmpdir);
    FILE *f = fopen(victim, "w");
    fputs("precious\n", f);
    fclose(f);
    snprintf(link, sizeof link, "%s/fmt_out.relay.tmp", tmpdir);
    assert_int_equal(symlink(victim, link), 0);
    snprintf(args, sizeof args, "fmt tests/run/mlp.relay -o %s/fmt_out.relay", tmpdir);
    assert_int_equal(run(args), 0);
    char outdir[300];
    snprintf(outdir, sizeof outdir, "%s/linked", tmpdir);
    assert_int_equal(mkdir(outdir, 0755), 0);
    snprintf(link, sizeof link, "%s/out_0.npy.tmp", outdir);
    assert_int_equal(symlink(victim, link), 0);
    snprintf(args, sizeof args, "run tests/run/refs.relay --input x=tests/run/refs/in_x.npy --out %s",
             outdir);
    assert_int_equal(run(args), 0);
    f = fopen(victim, "r");
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "precious\n");
    snprintf(args, sizeof args, "%s/fmt_out.relay", tmpdir);
    assert_int_equal(access(args, F_OK), 0);
    snprintf(args, sizeof args, "%s/out_0.npy", outdir);
    assert_int_equal(access(args, F_OK), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),         cmocka_unit_test(test_lenet),
        cmocka_unit_test(test_lstm_list),   cmocka_unit_test(test_treelstm),
        cmocka_unit_test(test_higher_order), cmocka_unit_test(test_refs),
        cmocka_unit_test(test_deep_recursion), cmocka_unit_test(test_symbolic),
        cmocka_unit_test(test_help),        cmocka_unit_test(test_bad_command_lines),
        cmocka_unit_test(test_bad_inputs),  cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_run_grad),    cmocka_unit_test(test_grad_and_opt),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_gradcheck_adt),
        cmocka_unit_test(test_help_names_real_options),
        cmocka_unit_test(test_planted_links_not_followed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
