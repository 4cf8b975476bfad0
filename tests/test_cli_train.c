/*
 * test_cli_train.c: `relayc train` as a user drives it: the gradient mode it
 * trains in, what SIGINT and SIGTERM leave behind, the metrics CSV across
 * --resume, and how it guards a checkpoint directory (a lock, another run's
 * files, a changed configuration). Each test works in its own temporary
 * directory with a tiny model and .npy data written here.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

static const char *relayc(void) {
    const char *r = getenv("RELAYC");
    return r && *r ? r : "build/relayc";
}

static char dir[256]; /* this test's temporary directory */

static int setup(void **s) {
    snprintf(dir, sizeof dir, "/tmp/relayc-cli-train-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs `relayc ARGS` (ARGS may use %s for the temporary directory, up to
 * four times) with stdout and stderr to DIR/out.txt; returns the exit
 * status. */
static int train(const char *args) {
    char a[4096], cmd[8192];
    snprintf(a, sizeof a, args, dir, dir, dir, dir);
    snprintf(cmd, sizeof cmd, "%s train %s >%s/out.txt 2>&1", relayc(), a, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f) fail_msg("cannot open %s", p);
    static char buf[1 << 22];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    fclose(f);
    return buf;
}

static void assert_out_contains(const char *what) {
    const char *out = slurp("out.txt");
    if (!strstr(out, what)) fail_msg("output lacks '%s':\n%s", what, out);
}

static void write_text(const char *name, const char *text) { write_text_in(dir, name, text); }

/* A least-squares model of x (n, 4) -> y (n, 2), its input through
 * dropout or not. */
static const char *model_dropout =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n, 2), float32], %w: Tensor[(2, 4), float32]) -> float32 {\n"
    "  %0 = nn.dropout(%x, rate=0.5f);\n"
    "  %1 = nn.dense(%0.0, %w, units=2);\n"
    "  %2 = subtract(%1, %y);\n"
    "  mean(multiply(%2, %2))\n"
    "}\n";

static const char *model_plain =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n, 2), float32], %w: Tensor[(2, 4), float32]) -> float32 {\n"
    "  %1 = nn.dense(%x, %w, units=2);\n"
    "  %2 = subtract(%1, %y);\n"
    "  mean(multiply(%2, %2))\n"
    "}\n";

/* DIR/x.npy (rows, 4) and DIR/y.npy (rows, 2), deterministic values. */
static void write_data(int64_t rows) {
    int64_t sx[2] = {rows, 4}, sy[2] = {rows, 2};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, sx), *y = ry_tensor_new(RY_FLOAT32, 2, sy);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, (double)((i * 7) % 11) / 5.0 - 1.0);
    for (int64_t i = 0; i < y->size; i++) ry_tensor_set(y, i, (double)((i * 3) % 5) / 2.0 - 1.0);
    char p[512];
    ry_error err;
    snprintf(p, sizeof p, "%s/x.npy", dir);
    assert_int_equal(ry_npy_write(p, x, &err), RY_OK);
    snprintf(p, sizeof p, "%s/y.npy", dir);
    assert_int_equal(ry_npy_write(p, y, &err), RY_OK);
    ry_tensor_release(x);
    ry_tensor_release(y);
}

/* The 8 values of w in the checkpoint DIR/NAME. */
static void load_w(const char *name, float w[8]) {
    const char *names[] = {"w"};
    int ndims[] = {2};
    int64_t shape[] = {2, 4};
    const int64_t *shapes[] = {shape};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 1, names, ndims, shapes);
    assert_non_null(p);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ry_error err;
    if (ry_checkpoint_load(path, p, NULL, NULL, &err)) fail_msg("%s", err.msg);
    memcpy(w, p->views[0]->data, 8 * sizeof *w);
    ry_params_free(p);
}

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* ---- the gradient mode ----------------------------------------------------- */

/* By default relayc train differentiates in training mode: dropout drops.
 * --inference-gradients keeps the old behaviour, where dropout is the
 * identity and the run equals that of the model without it. */
static void test_training_mode_default(void **s) {
    write_data(8);
    write_text("drop.relay", model_dropout);
    write_text("plain.relay", model_plain);
    const char *common = "--data npy:%s/x.npy,%s/y.npy --steps 4 --batch 4 --lr 0.1 --quiet";
    char args[1024];
    snprintf(args, sizeof args, "%%s/drop.relay %s --checkpoint-dir %%s/train", common);
    /* the format's %s are filled in this order: model, x, y, directory */
    assert_int_equal(train(args), 0);
    assert_out_contains("steps 4, final training loss");
    snprintf(args, sizeof args, "%%s/drop.relay %s --checkpoint-dir %%s/infer --inference-gradients",
             common);
    assert_int_equal(train(args), 0);
    snprintf(args, sizeof args, "%%s/plain.relay %s --checkpoint-dir %%s/plain", common);
    assert_int_equal(train(args), 0);
    float wt[8], wi[8], wp[8];
    load_w("train/ckpt-4.h5", wt);
    load_w("infer/ckpt-4.h5", wi);
    load_w("plain/ckpt-4.h5", wp);
    assert_true(max_diff(wi, wp, 8) < 1e-6); /* inference mode: dropout is the identity */
    assert_true(max_diff(wt, wp, 8) > 1e-3); /* training mode: it drops */
}

/* ---- SIGINT and SIGTERM ------------------------------------------------------ */

/* Starts `relayc train ARGS` (as train() fills ARGS) in the background;
 * returns its pid. */
static pid_t start(const char *args) {
    char a[4096], cmd[8192];
    snprintf(a, sizeof a, args, dir, dir, dir, dir);
    snprintf(cmd, sizeof cmd, "exec %s train %s >%s/out.txt 2>&1", relayc(), a, dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The rows of DIR/NAME after its header (0 when it is missing). */
static int csv_rows(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n > 0 ? n - 1 : 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for pid (at most 60 s, then kills it and fails); its wait status. */
static int wait_for(pid_t pid) {
    int st;
    for (int i = 0; i < 6000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    fail_msg("relayc train did not stop within 60 s:\n%s", slurp("out.txt"));
    return -1;
}

/* A long run, stopped once its CSV has rows. */
static const char *long_run =
    "%s/m.relay --data npy:%s/x.npy,%s/y.npy --steps 100000000 --batch 4 --lr 0.01 --quiet "
    "--log-every 100 --csv %s/m.csv --checkpoint-dir %s/ck";

static pid_t start_long_run(void) {
    write_data(8);
    write_text("m.relay", model_plain);
    char args[1024];
    snprintf(args, sizeof args, "%s", long_run);
    /* five %s: start() fills four, so the last one is spelt out */
    char *last = strrchr(args, '%');
    snprintf(last, sizeof args - (size_t)(last - args), "%s/ck", dir);
    pid_t pid = start(args);
    for (int i = 0; i < 6000 && csv_rows("m.csv") < 2; i++) sleep_ms(10);
    return pid;
}

/* The step of the one ckpt-*.h5 in DIR/ck (-1 when there is none). */
static long checkpoint_step(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/ck", dir);
    DIR *d = opendir(p);
    long step = -1;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        long k;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%ld.%7s", &k, tail) == 2 && strcmp(tail, "h5") == 0) {
            assert_int_equal(step, -1); /* one checkpoint */
            step = k;
        }
    }
    closedir(d);
    return step;
}

/* The steps of DIR/m.csv's train rows, in order; checks its one header. */
static int csv_steps(long *steps, int max) {
    const char *text = slurp("m.csv");
    assert_true(strncmp(text, "kind,step,", 10) == 0);
    assert_null(strstr(text + 1, "kind,step,")); /* no second header */
    int n = 0;
    for (const char *l = strstr(text, "\ntrain,"); l && n < max; l = strstr(l + 1, "\ntrain,"))
        steps[n++] = strtol(l + 7, NULL, 10);
    return n;
}

/* SIGINT: the step finishes, a checkpoint is saved, one line says so and
 * the exit status is 130; --resume then continues the run and its CSV. */
static void test_sigint_saves_and_resumes(void **s) {
    pid_t pid = start_long_run();
    assert_true(csv_rows("m.csv") >= 2);
    assert_int_equal(kill(pid, SIGINT), 0);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 130);
    assert_out_contains("relayc train: SIGINT: stopped on request after step");
    assert_out_contains("(continue with --resume)");
    long step = checkpoint_step();
    assert_true(step > 0);
    char want[512];
    snprintf(want, sizeof want, "after step %ld; checkpoint %s/ck/ckpt-%ld.h5", step, dir, step);
    assert_out_contains(want);
    static long before[1 << 16], after[1 << 16];
    int nb = csv_steps(before, 1 << 16);
    assert_true(nb >= 2);
    /* 250 steps more, from the checkpoint */
    char args[1024];
    snprintf(args, sizeof args,
             "%%s/m.relay --data npy:%%s/x.npy,%%s/y.npy --steps %ld --batch 4 --lr 0.01 --quiet "
             "--log-every 100 --csv %%s/m.csv --checkpoint-dir %s/ck --resume",
             step + 250, dir);
    assert_int_equal(train(args), 0);
    char resumed[128];
    snprintf(resumed, sizeof resumed, "steps %ld, final training loss", step + 250);
    assert_out_contains(resumed);
    int na = csv_steps(after, 1 << 16);
    assert_true(na >= nb + 2);
    for (int i = 0; i < nb; i++) assert_int_equal(after[i], before[i]); /* kept */
    /* every 100 steps, then the last step */
    for (int i = 1; i < na - 1; i++) assert_int_equal(after[i], after[i - 1] + 100);
    assert_int_equal(after[na - 1], step + 250);
}

/* SIGTERM does the same with exit status 143. */
static void test_sigterm_saves(void **s) {
    pid_t pid = start_long_run();
    assert_int_equal(kill(pid, SIGTERM), 0);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 143);
    assert_out_contains("relayc train: SIGTERM: stopped on request after step");
    assert_true(checkpoint_step() > 0);
}

/* A second signal before the step is done ends the run at once: both
 * arrive while the process is stopped, so both are delivered before it
 * runs another instruction of the loop. No checkpoint is written. */
static void test_second_signal_aborts(void **s) {
    pid_t pid = start_long_run();
    assert_int_equal(kill(pid, SIGSTOP), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_true(WIFSTOPPED(st));
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(kill(pid, SIGCONT), 0);
    st = wait_for(pid);
    assert_true(WIFEXITED(st));
    assert_true(WEXITSTATUS(st) == 130 || WEXITSTATUS(st) == 143);
    assert_out_contains("relayc train: second signal: stopping at once, no checkpoint");
    assert_null(strstr(slurp("out.txt"), "stopped on request"));
    assert_int_equal(checkpoint_step(), -1);
}

/* ---- one directory, one run ------------------------------------------------ */

static const char *short_run =
    "%s/m.relay --data npy:%s/x.npy,%s/y.npy --steps 3 --batch 4 --quiet --checkpoint-dir %s/ck";

static bool exists(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* A second run on a directory in use fails at once, and leaves the first
 * one's files alone. */
static void test_second_run_locked_out(void **s) {
    pid_t pid = start_long_run();
    assert_int_equal(train(short_run), 1);
    assert_out_contains("another run is using this checkpoint directory");
    assert_out_contains("/ck/.lock");
    assert_int_equal(kill(pid, SIGTERM), 0);
    int st = wait_for(pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 143);
    assert_true(checkpoint_step() > 3); /* the first run's, not swept */
}

/* A new run refuses a directory holding an earlier run's checkpoints;
 * --force moves them into DIR/old-<time>/ and starts over. */
static void test_earlier_run_refused_then_moved(void **s) {
    write_data(8);
    write_text("m.relay", model_plain);
    assert_int_equal(train(short_run), 0);
    assert_true(exists("ck/ckpt-3.h5"));
    assert_int_equal(train(short_run), 1);
    assert_out_contains("holds 1 files of an earlier run (ckpt-3.h5)");
    assert_out_contains("--resume");
    assert_out_contains("--force");
    assert_true(exists("ck/ckpt-3.h5"));
    char args[1024];
    snprintf(args, sizeof args, "%s --force --steps 2", short_run);
    assert_int_equal(train(args), 0);
    assert_true(exists("ck/ckpt-2.h5"));
    assert_false(exists("ck/ckpt-3.h5"));
    char p[512];
    snprintf(p, sizeof p, "%s/ck", dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    char old[300] = "";
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "old-", 4) == 0) snprintf(old, sizeof old, "ck/%s/ckpt-3.h5", e->d_name);
    closedir(d);
    assert_true(old[0] && exists(old)); /* moved, not deleted */
}

/* --resume compares the stored configuration and lists what differs;
 * --resume-anyway goes on regardless. */
static void test_resume_compares_config(void **s) {
    write_data(8);
    write_text("m.relay", model_plain);
    char args[1024];
    snprintf(args, sizeof args, "%s --lr 0.1", short_run);
    assert_int_equal(train(args), 0);
    snprintf(args, sizeof args, "%s --lr 0.2 --batch 2 --steps 5 --resume", short_run);
    assert_int_equal(train(args), 1);
    assert_out_contains("ckpt-3.h5: error: this run differs from the one that wrote the checkpoint: "
                        "optimizer.lr (stored 0.1, now 0.2), batch (stored 4, now 2)");
    assert_out_contains("--resume-anyway");
    write_text("m.relay", model_dropout);
    snprintf(args, sizeof args, "%s --lr 0.1 --steps 5 --resume --optimizer adam", short_run);
    assert_int_equal(train(args), 1);
    assert_out_contains("the model text, optimizer (stored sgd, now adam)");
    write_text("m.relay", model_plain);
    snprintf(args, sizeof args,
             "%s/m.relay --data npy:%s/y.npy,%s/y.npy --steps 5 --batch 4 --quiet --lr 0.1 "
             "--checkpoint-dir %s/ck --resume",
             dir, dir, dir, dir);
    char *arg = strdup(args);
    assert_int_equal(train(arg), 1); /* y for x: the data differs (and does not fit) */
    free(arg);
    assert_out_contains("data (stored npy:");
    snprintf(args, sizeof args, "%s --lr 0.1 --steps 5 --resume", short_run);
    assert_int_equal(train(args), 0); /* the same configuration */
    assert_out_contains("steps 5,");
    snprintf(args, sizeof args, "%s --lr 0.2 --steps 7 --resume-anyway", short_run);
    assert_int_equal(train(args), 0);
    assert_out_contains("steps 7,");
}

/* ---- what the data and the model's header bind ------------------------ */

/* train(args) must exit with want; the output is shown when it does not. */
static void expect(int want, const char *args) {
    int got = train(args);
    if (got != want) fail_msg("relayc train %s: exit %d, not %d:\n%s", args, got, want, slurp("out.txt"));
}

/* A classifier of x (n, 4) into 3 classes, labels %y int32. */
static const char *model_classes =
    "def @predict(%x: Tensor[(n, 4), float32], %w: Tensor[(3, 4), float32]) -> Tensor[(n, 3), float32] {\n"
    "  nn.dense(%x, %w, units=3)\n"
    "}\n"
    "def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n), int32], %w: Tensor[(3, 4), float32]) -> float32 {\n"
    "  %0 = nn.log_softmax(@predict(%x, %w), axis=-1);\n"
    "  %1 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n"
    "  negative(mean(sum(multiply(%0, %1), axis=[1])))\n"
    "}\n";

/* The model text: version, data lines, then header (more lines), body. */
static void write_model(const char *name, const char *header, const char *body) {
    char text[4096];
    snprintf(text, sizeof text, "#[version = \"0.0.5\"]\n// data: x y\n// predict-data: x\n%s%s",
             header, body);
    write_text(name, text);
}

static void write_classes(const char *name, const char *header) {
    write_model(name, header, model_classes);
}

/* DIR/x.npy (rows, 4) and DIR/labels.npy (rows) of dtype dt. */
static void write_labels(int64_t rows, ry_dtype dt, int64_t big) {
    write_data(rows);
    int64_t sy[1] = {rows};
    ry_tensor *y = ry_tensor_new(dt, 1, sy);
    for (int64_t i = 0; i < rows; i++) ry_tensor_set(y, i, (double)(i % 3));
    if (big) ry_tensor_set(y, rows - 1, (double)big);
    char p[512];
    ry_error err;
    snprintf(p, sizeof p, "%s/labels.npy", dir);
    assert_int_equal(ry_npy_write(p, y, &err), RY_OK);
    ry_tensor_release(y);
}

/* int64 labels (numpy's default) train an int32 %y, with a note; a value
 * int32 cannot hold is refused, naming the file and the element. */
static void test_integer_labels_cast(void **s) {
    write_classes("cls.relay", "");
    write_labels(12, RY_INT64, 0);
    expect(0, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --val 4 --steps 3 "
                           "--batch 4 --quiet");
    assert_out_contains("labels.npy holds int64, cast to int32 for %y (every value fits)");
    assert_out_contains("accuracy");
    write_labels(12, RY_INT64, (int64_t)1 << 40);
    expect(1, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --val 4 --steps 3 "
                           "--batch 4 --quiet");
    assert_out_contains("labels.npy: error: element 11 is 1099511627776, which int32 (the model's %y) "
                        "cannot hold");
    /* widening needs no note */
    write_labels(12, RY_UINT8, 0);
    expect(0, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --val 4 --steps 3 "
                           "--batch 4 --quiet");
    const char *out = slurp("out.txt");
    assert_null(strstr(out, "note:"));
}

/* Accuracy is reported for integer labels only, unless the model's
 * `// metrics:` line says otherwise. */
static void test_metrics(void **s) {
    write_data(12);
    write_text("reg.relay", model_plain);
    expect(0, "%s/reg.relay --data npy:%s/x.npy,%s/y.npy --val 4 --steps 3 --batch 4 "
                           "--quiet");
    assert_out_contains("held-out loss");
    assert_null(strstr(slurp("out.txt"), "accuracy")); /* a regression: no 0.00%% */
    /* no label at all (an autoencoder's data: x alone): the loss only */
    write_text("ae.relay", "#[version = \"0.0.5\"]\n// data: x\n"
               "def @loss(%x: Tensor[(n, 4), float32], %w: Tensor[(4, 4), float32]) -> float32 {\n"
               "  %0 = subtract(nn.dense(%x, %w, units=4), %x);\n  mean(multiply(%0, %0))\n}\n");
    expect(0, "%s/ae.relay --data npy:%s/x.npy --val 4 --steps 3 --batch 4 --quiet");
    assert_out_contains("held-out loss");
    assert_null(strstr(slurp("out.txt"), "accuracy"));
    write_classes("cls.relay", "// metrics: loss\n");
    write_labels(12, RY_INT32, 0);
    expect(0, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --val 4 --steps 3 "
                           "--batch 4 --quiet");
    assert_null(strstr(slurp("out.txt"), "accuracy"));
    write_classes("cls.relay", "// metrics: loss, accuracy\n");
    expect(0, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --val 4 --steps 3 "
                           "--batch 4 --quiet");
    assert_out_contains("accuracy");
    write_model("reg.relay", "// metrics: accuracy\n", strstr(model_plain, "def @loss"));
    expect(1, "%s/reg.relay --data npy:%s/x.npy,%s/y.npy --val 4 --steps 3 --batch 4 "
                           "--quiet");
    assert_out_contains("asks for accuracy (`// metrics:`) but --data npy has no integer labels");
    write_classes("cls.relay", "// metrics: loss, f1\n");
    expect(1, "%s/cls.relay --data npy:%s/x.npy,%s/labels.npy --steps 1 --quiet");
    assert_out_contains("`// metrics:` lists loss and accuracy, not 'f1'");
}

/* A bigram table whose rows are the text's symbols. Its take clips its
 * indices: the gradient needs the table's length, which the vocabulary
 * gives (the trainer makes v a constant before differentiating). */
static const char *model_vocab =
    "def @loss(%x: Tensor[(n, t), int32], %y: Tensor[(n, t), int32], %e: Tensor[(v, 2), float32]) -> float32 {\n"
    "  mean(multiply(take(%e, %x, axis=0), take(%e, %y, axis=0)))\n"
    "}\n";

static void test_vocab_and_dims(void **s) {
    write_text("corpus.txt", "abcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabdabcabd\n");
    write_model("bigram.relay", "// vocab: v\n", model_vocab);
    expect(0, "%s/bigram.relay --data text:%s/corpus.txt --batch 2 --seq 4 --steps 2 "
                           "--quiet --checkpoint-dir %s/ck");
    assert_out_contains("steps 2");
    /* the table has the text's 5 symbols (a, b, c, d, newline) as rows */
    const char *names[] = {"e"};
    int ndims[] = {2};
    int64_t shape[] = {5, 2};
    const int64_t *shapes[] = {shape};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 1, names, ndims, shapes);
    char path[512];
    snprintf(path, sizeof path, "%s/ck", dir);
    ry_error err;
    char latest[512];
    bool found = false;
    assert_int_equal(ry_checkpoint_latest(path, latest, sizeof latest, &found, &err), RY_OK);
    assert_true(found);
    if (ry_checkpoint_load(latest, p, NULL, NULL, &err)) fail_msg("%s", err.msg);
    ry_params_free(p);
    /* without the header line, the error says how to give it */
    write_model("bigram.relay", "", model_vocab);
    expect(1, "%s/bigram.relay --data text:%s/corpus.txt --batch 2 --seq 4 --steps 2 "
                           "--quiet");
    assert_out_contains("parameter %e has dimension v: give its value (relayc train --dim v=N");
    expect(0, "%s/bigram.relay --data text:%s/corpus.txt --batch 2 --seq 4 --steps 2 "
                           "--quiet --dim v=5");
    assert_out_contains("steps 2");
}

/* --data sst fills the `// vocab:` dimension with the treebank's
 * vocabulary: tests/data/sst_small.txt has 7 distinct words, so the
 * embedding gets 8 rows with <unk>. */
static void test_vocab_from_sst(void **s) {
    char sst[512], bank[512];
    snprintf(sst, sizeof sst, "%s/sst", dir);
    assert_int_equal(mkdir(sst, 0700), 0);
    FILE *f = fopen("tests/data/sst_small.txt", "r");
    assert_non_null(f);
    size_t n = fread(bank, 1, sizeof bank - 1, f);
    fclose(f);
    bank[n] = '\0';
    write_text_in(sst, "train.txt", bank);
    write_text_in(sst, "dev.txt", bank);
    write_text("tree.relay",
               "#[version = \"0.0.5\"]\n// data: t\n// vocab: v\n// metrics: loss\n"
               "// init: e=uniform(-0.1,0.1)\n"
               "type Tree { Leaf(int32, int32), Node(Tree, Tree, int32) }\n"
               "def @h(%t: Tree, %e: Tensor[(v, 2), float32]) -> Tensor[(2), float32] {\n"
               "  match (%t) { Leaf(%w, _) => take(%e, %w, axis=0), Node(%l, %r, _) => tanh(add(@h(%l, %e), "
               "@h(%r, %e))) }\n"
               "}\n"
               "def @loss(%t: Tree, %e: Tensor[(v, 2), float32]) -> float32 { sum(multiply(@h(%t, %e), "
               "@h(%t, %e))) }\n");
    expect(0, "%s/tree.relay --data sst:%s/sst --batch 1 --steps 2 --quiet --checkpoint-dir %s/ck");
    const char *names[] = {"e"};
    int ndims[] = {2};
    int64_t shape[] = {8, 2};
    const int64_t *shapes[] = {shape};
    ry_param_set *p = ry_params_new(RY_FLOAT32, 1, names, ndims, shapes);
    char path[512], latest[512];
    snprintf(path, sizeof path, "%s/ck", dir);
    ry_error err;
    bool found = false;
    assert_int_equal(ry_checkpoint_latest(path, latest, sizeof latest, &found, &err), RY_OK);
    assert_true(found);
    if (ry_checkpoint_load(latest, p, NULL, NULL, &err)) fail_msg("%s", err.msg);
    ry_params_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_training_mode_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigint_saves_and_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_saves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_signal_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_run_locked_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_earlier_run_refused_then_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_compares_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_labels_cast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vocab_and_dims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vocab_from_sst, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
