/*
 * test_train.c: the training loop. One step against PyTorch's trajectory
 * (tests/train/, from tools/gen_train_tests.py); losses that fall for an
 * MLP, a recursive tree model over the Tree ADT and the char-RNN of
 * models/ with carried state; exact resume (N+M steps = N, save, load, M);
 * NaN/Inf detection keeping the last good checkpoint; checkpoints and the
 * CSV of metrics; errors for malformed models.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/train.h"
#include "test_texts.h"
#include "test_util.h"

static const char *MLP = TEST_MLP_TEXT;

static ry_trainer *make(const char *text, const ry_train_opts *o) {
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("test.relay", text, strlen(text), o, &tr, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("trainer: %s", err.msg);
    }
    return tr;
}

/* A scratch folder named for this process, so concurrent runs (an ASan
 * build beside a plain one) never share one. */
static const char *scratch(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "build-test-train-%s-%d", tag, (int)getpid());
    return buf;
}

static void fresh_dir(const char *dir) {
    rm_dir(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
}

typedef struct mlp_data {
    ry_tensor *arrays[2];
    ry_train_data d;
} mlp_data;

static void mlp_data_load(mlp_data *m) {
    m->arrays[0] = test_npy("tests/train/x.npy");
    m->arrays[1] = test_npy("tests/train/y.npy");
    ry_train_data_tensors(2, m->arrays, 1, &m->d);
}

static void mlp_data_free(mlp_data *m) {
    ry_tensor_release(m->arrays[0]);
    ry_tensor_release(m->arrays[1]);
}

/* ---- one step against PyTorch ---- */

static void test_step_matches_torch(void **state) {
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    ry_trainer *tr = make(MLP, &o);
    ry_param_set *p = ry_trainer_params(tr);
    const char *names[4] = {"w1", "b1", "w2", "b2"};
    char path[128];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "tests/train/%s.npy", names[i]);
        ry_tensor *t = test_npy(path);
        int j = ry_params_find(p, names[i]);
        assert_true(j >= 0);
        memcpy(p->views[j]->data, t->data, ry_tensor_nbytes(t));
        ry_tensor_release(t);
    }
    mlp_data m;
    mlp_data_load(&m);
    ry_tensor *want = test_npy("tests/train/losses.npy");
    ry_error err;
    for (int k = 0; k < 4; k++) {
        int64_t idx[16];
        for (int i = 0; i < 16; i++) idx[i] = 16 * k + i;
        ry_value *args[2];
        assert_int_equal(m.d.fetch(&m.d, idx, 16, args, &err), RY_OK);
        double loss;
        if (ry_trainer_step(tr, 2, args, &loss, &err)) fail_msg("%s", err.msg);
        ry_value_release(args[0]);
        ry_value_release(args[1]);
        assert_true(fabs(loss - ry_tensor_get(want, k)) < 1e-5);
    }
    assert_int_equal(ry_trainer_steps(tr), 4);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "tests/train/after_%s.npy", names[i]);
        ry_tensor *t = test_npy(path);
        test_assert_close(p->views[ry_params_find(p, names[i])], t, 1e-4, 1e-5);
        ry_tensor_release(t);
    }
    ry_tensor_release(want);
    mlp_data_free(&m);
    ry_trainer_free(tr);
}

/* ---- a fit whose loss falls, with evaluation, CSV and checkpoints ---- */

static int count_lines(const char *path, const char *prefix) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, prefix, strlen(prefix)) == 0) n++;
    fclose(f);
    return n;
}

static void test_mlp_fit(void **state) {
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.optim.lr = 0.02;
    o.seed = 3;
    ry_trainer *tr = make(MLP, &o);
    mlp_data m;
    mlp_data_load(&m);
    char dbuf[64];
    const char *dir = scratch(dbuf, sizeof dbuf, "fit");
    fresh_dir(dir);
    char csv[256];
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    ry_fit_opts fo = {.epochs = 8, .batch = 16, .seed = 5, .checkpoint_dir = dir,
                      .checkpoint_every = 10, .keep = 2, .csv_path = csv,
                      .progress = RY_PROGRESS_QUIET, .log_every = 4, .config = "lr=0.02"};
    ry_fit_result res;
    ry_error err;
    if (ry_train_fit(tr, &m.d, &m.d, &fo, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 32);
    assert_int_equal(res.epochs_done, 8);
    assert_true(res.evaluated);
    assert_true(res.last_loss < 0.5 * res.first_loss);
    assert_true(res.eval_acc > 0.9);
    /* CSV: a header, a train row every 4 steps, an eval row per epoch */
    assert_int_equal(count_lines(csv, "kind,step"), 1);
    assert_int_equal(count_lines(csv, "train,"), 8);
    assert_int_equal(count_lines(csv, "eval,"), 8);
    /* checkpoints at 10, 20, 30 and the end (32); two kept */
    char p[256];
    snprintf(p, sizeof p, "%s/ckpt-32.h5", dir);
    assert_string_equal(res.checkpoint, p);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/ckpt-30.h5", dir);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/ckpt-20.h5", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    /* the file holds what the trainer has, and loads into a fresh one */
    ry_checkpoint_info *info;
    if (ry_checkpoint_inspect(res.checkpoint, &info, &err)) fail_msg("%s", err.msg);
    assert_int_equal(info->meta.step, 32);
    assert_int_equal(info->meta.epoch, 8);
    /* the trainer's own configuration, then the caller's */
    const char *cfg = info->meta.config;
    assert_true(strncmp(cfg, "optimizer=adam\noptimizer.lr=", 28) == 0);
    assert_non_null(strstr(cfg, "\nbatch=16\n"));
    assert_string_equal(cfg + strlen(cfg) - 8, "\nlr=0.02");
    assert_string_equal(info->meta.model_text, MLP);
    bool has_avg = false;
    for (int i = 0; i < info->n; i++)
        has_avg |= strcmp(info->entries[i].path, "/optimizer/w1/exp_avg") == 0;
    assert_true(has_avg);
    ry_checkpoint_info_free(info);
    ry_trainer *t2 = make(MLP, &o);
    if (ry_trainer_load(t2, res.checkpoint, NULL, &err)) fail_msg("%s", err.msg);
    ry_param_set *a = ry_trainer_params(tr), *b = ry_trainer_params(t2);
    assert_memory_equal(a->slab->data, b->slab->data, ry_tensor_nbytes(a->slab));
    assert_int_equal(ry_trainer_steps(t2), 32);
    double l1, l2, acc;
    assert_int_equal(ry_train_evaluate(tr, &m.d, 64, &l1, &acc, &err), RY_OK);
    assert_int_equal(ry_train_evaluate(t2, &m.d, 7, &l2, &acc, &err), RY_OK);
    assert_true(fabs(l1 - l2) < 1e-5);
    assert_true(fabs(l1 - res.eval_loss) < 1e-6);
    ry_trainer_free(t2);
    ry_trainer_free(tr);
    mlp_data_free(&m);
    rm_dir(dir);
}

/* ---- exact resume ---- */

static void run_steps(const char *dir, int64_t steps, bool resume, ry_param_set *out) {
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.optim.lr = 0.01;
    o.seed = 11;
    o.schedule.kind = RY_SCHED_COSINE;
    o.schedule.t_max = 12;
    o.clip_norm = 1.0;
    ry_trainer *tr = make(MLP, &o);
    mlp_data m;
    mlp_data_load(&m);
    /* 64 rows in batches of 24: 3 batches an epoch, the last one short */
    ry_fit_opts fo = {.max_steps = steps, .batch = 24, .seed = 9, .checkpoint_dir = dir,
                      .checkpoint_every = 5, .resume = resume, .progress = RY_PROGRESS_QUIET};
    ry_error err;
    if (ry_train_fit(tr, &m.d, NULL, &fo, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ry_trainer_steps(tr), steps);
    ry_params_copy(out, ry_trainer_params(tr));
    ry_trainer_free(tr);
    mlp_data_free(&m);
}

static void test_exact_resume(void **state) {
    char b1[64], b2[64];
    const char *d1 = scratch(b1, sizeof b1, "r1"), *d2 = scratch(b2, sizeof b2, "r2");
    fresh_dir(d1);
    fresh_dir(d2);
    ry_trainer *shape = make(MLP, NULL);
    ry_param_set *once = ry_params_like(ry_trainer_params(shape));
    ry_param_set *twice = ry_params_like(once);
    ry_trainer_free(shape);
    run_steps(d1, 11, false, once);
    run_steps(d2, 4, false, twice);  /* stops mid-epoch 2, saved at the end */
    run_steps(d2, 11, true, twice);  /* resumes at 4 */
    assert_memory_equal(once->slab->data, twice->slab->data, ry_tensor_nbytes(once->slab));
    /* and a resume from a checkpoint written mid-run (step 10) */
    char p[256];
    snprintf(p, sizeof p, "%s/ckpt-11.h5", d2);
    assert_int_equal(unlink(p), 0);
    run_steps(d2, 11, true, twice);
    assert_memory_equal(once->slab->data, twice->slab->data, ry_tensor_nbytes(once->slab));
    ry_params_free(once);
    ry_params_free(twice);
    rm_dir(d1);
    rm_dir(d2);
}

/* ---- a stop request (what relayc train's SIGINT handler makes) ---- */

static int fetches;

/* The rows source, asking the loop to stop during the 3rd step. */
static ry_status fetch_then_stop(const ry_train_data *d, const int64_t *idx, int64_t k,
                                 ry_value **args, ry_error *err) {
    if (++fetches == 3) ry_train_request_stop(99);
    const ry_train_data *rows = d->ctx;
    return rows->fetch(rows, idx, k, args, err);
}

static void test_stop_request(void **state) {
    char dbuf[64];
    const char *dir = scratch(dbuf, sizeof dbuf, "stop");
    fresh_dir(dir);
    ry_trainer *tr = make(MLP, NULL);
    mlp_data m;
    mlp_data_load(&m);
    ry_train_data d = m.d;
    d.fetch = fetch_then_stop;
    d.ctx = &m.d;
    fetches = 0;
    ry_fit_opts fo = {.max_steps = 10, .batch = 8, .checkpoint_dir = dir,
                      .progress = RY_PROGRESS_QUIET};
    ry_fit_result res;
    ry_error err;
    assert_int_equal(ry_train_fit(tr, &d, NULL, &fo, &res, &err), RY_ERR);
    assert_int_equal(res.stop_signal, 99);
    assert_int_equal(res.steps, 3); /* the step under way finished */
    assert_int_equal(ry_train_stop_requested(), 0); /* acted on, cleared */
    char p[256];
    snprintf(p, sizeof p, "%s/ckpt-3.h5", dir);
    assert_non_null(strstr(err.msg, "stopped on request after step 3; checkpoint"));
    assert_non_null(strstr(err.msg, p));
    assert_int_equal(access(p, F_OK), 0);
    /* a request made before the fit stops it before its first step */
    ry_train_request_stop(7);
    fo.resume = true;
    assert_int_equal(ry_train_fit(tr, &m.d, NULL, &fo, &res, &err), RY_ERR);
    assert_int_equal(res.stop_signal, 7);
    assert_int_equal(res.steps, 3);
    /* and the run then continues */
    assert_int_equal(ry_train_fit(tr, &m.d, NULL, &fo, &res, &err), RY_OK);
    assert_int_equal(res.steps, 10);
    assert_int_equal(res.stop_signal, 0);
    ry_trainer_free(tr);
    mlp_data_free(&m);
    rm_dir(dir);
}

/* ---- NaN / Inf ---- */

/* loss = sum(log w) with w from 1: SGD 0.3 takes w to 0.7, 0.271, -0.834
 * in three steps, so the 4th step's loss is NaN. */
static const char *NAN_LOSS =
    "#[version = \"0.0.5\"]\n"
    "// data: x\n"
    "// init: w=ones\n"
    "def @loss(%x: Tensor[(n, 1), float32], %w: Tensor[(2), float32]) -> float32 {\n"
    "  add(sum(log(%w)), multiply(0f, sum(%x)))\n"
    "}\n";

/* d sqrt(b) / db at b = 0 is Inf while the loss is finite. */
static const char *INF_GRAD =
    "#[version = \"0.0.5\"]\n"
    "// data: x\n"
    "// init: a=ones b=zeros\n"
    "def @loss(%x: Tensor[(n, 1), float32], %a: Tensor[(2), float32], %b: Tensor[(3), "
    "float32]) -> float32 {\n"
    "  add(add(sum(%a), sum(sqrt(%b))), multiply(0f, sum(%x)))\n"
    "}\n";

static void test_nan_stops(void **state) {
    char dbuf[64];
    const char *dir = scratch(dbuf, sizeof dbuf, "nan");
    fresh_dir(dir);
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.3;
    ry_trainer *tr = make(NAN_LOSS, &o);
    ry_tensor *x = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){4, 1});
    ry_train_data d;
    ry_train_data_tensors(1, &x, -1, &d);
    ry_fit_opts fo = {.epochs = 10, .batch = 4, .checkpoint_dir = dir, .checkpoint_every = 1,
                      .keep = 10, .progress = RY_PROGRESS_QUIET};
    ry_fit_result res;
    ry_error err;
    assert_int_equal(ry_train_fit(tr, &d, NULL, &fo, &res, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "step 4"));
    assert_non_null(strstr(err.msg, "NaN"));
    assert_int_equal(res.steps, 3);
    /* the last good checkpoint is step 3's, and nothing came after it */
    char path[512];
    bool found;
    assert_int_equal(ry_checkpoint_latest(dir, path, sizeof path, &found, &err), RY_OK);
    assert_true(found);
    assert_non_null(strstr(path, "ckpt-3.h5"));
    ry_param_set *p = ry_params_like(ry_trainer_params(tr));
    assert_int_equal(ry_checkpoint_load(path, p, NULL, NULL, &err), RY_OK);
    double w2 = 0.7 - 0.3 / 0.7;
    assert_true(fabs(ry_tensor_get(p->views[0], 0) - (w2 - 0.3 / w2)) < 1e-5);
    assert_int_equal(ry_params_find_nonfinite(p, NULL), -1);
    ry_params_free(p);
    ry_trainer_free(tr);

    /* an Inf gradient names its parameter and leaves the parameters alone */
    tr = make(INF_GRAD, &o);
    ry_value *arg = ry_value_tensor(ry_tensor_retain(x));
    double loss;
    assert_int_equal(ry_trainer_step(tr, 1, &arg, &loss, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "%b"));
    assert_non_null(strstr(err.msg, "step 1"));
    assert_non_null(strstr(err.msg, "Inf"));
    assert_true(ry_tensor_get(ry_trainer_params(tr)->views[0], 0) == 1.0);
    assert_int_equal(ry_trainer_steps(tr), 0);
    ry_value_release(arg);
    ry_trainer_free(tr);
    ry_tensor_release(x);
    rm_dir(dir);
}

/* ---- control flow: a recursive model over the Tree ADT ---- */

static const char *TREE =
    "#[version = \"0.0.5\"]\n"
    "// data: tree\n"
    "// predict-data: tree\n"
    "// init: emb=normal(0.5) w=xavier_uniform b=zeros ws=xavier_uniform bs=zeros\n"
    "type Tree { Leaf(int32, int32), Node(Tree, Tree, int32), }\n"
    "def @enc(%t: Tree, %emb: Tensor[(7, 6), float32], %w: Tensor[(6, 12), float32], "
    "%b: Tensor[(6), float32]) -> Tensor[(1, 6), float32] {\n"
    "  match (%t) {\n"
    "    Leaf(%i, _) => expand_dims(take(%emb, %i, axis=0), axis=0),\n"
    "    Node(%l, %r, _) => {\n"
    "      %0 = (@enc(%l, %emb, %w, %b), @enc(%r, %emb, %w, %b));\n"
    "      tanh(nn.bias_add(nn.dense(concatenate(%0, axis=1), %w, units=None), %b))\n"
    "    },\n"
    "  }\n"
    "}\n"
    "def @label(%t: Tree) -> int32 {\n"
    "  match (%t) { Leaf(_, %l) => %l, Node(_, _, %l) => %l, }\n"
    "}\n"
    "def @predict(%tree: Tree, %emb: Tensor[(7, 6), float32], %w: Tensor[(6, 12), float32], "
    "%b: Tensor[(6), float32], %ws: Tensor[(2, 6), float32], %bs: Tensor[(2), float32]) -> "
    "Tensor[(1, 2), float32] {\n"
    "  nn.bias_add(nn.dense(@enc(%tree, %emb, %w, %b), %ws, units=None), %bs)\n"
    "}\n"
    "def @loss(%tree: Tree, %emb: Tensor[(7, 6), float32], %w: Tensor[(6, 12), float32], "
    "%b: Tensor[(6), float32], %ws: Tensor[(2, 6), float32], %bs: Tensor[(2), float32]) -> "
    "float32 {\n"
    "  %0 = nn.log_softmax(@predict(%tree, %emb, %w, %b, %ws, %bs), axis=-1);\n"
    "  negative(sum(take(%0, @label(%tree), axis=1)))\n"
    "}\n";

/* Root label 1 iff the sentence holds "good" (a leaf at any depth). */
static const char *TREES = "(1 (0 a) (1 (0 very) (1 good)))\n"
                           "(0 (0 a) (0 (0 very) (0 bad)))\n"
                           "(1 (1 good) (0 film))\n"
                           "(0 (0 bad) (0 film))\n"
                           "(1 (0 (0 not) (0 bad)) (1 good))\n"
                           "(0 (0 film) (0 (0 very) (0 bad)))\n"
                           "(1 (0 very) (1 good))\n"
                           "(0 (0 not) (0 film))\n";

static void test_tree_fit(void **state) {
    ry_error err;
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb;
    if (ry_treebank_parse("trees", TREES, strlen(TREES), v, true, &tb, &err))
        fail_msg("%s", err.msg);
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    o.optim.lr = 0.2;
    o.seed = 2;
    assert_int_equal(ry_vocab_size(v), 7); /* the table's rows in TREE */
    ry_trainer *tr = make(TREE, &o);
    ry_tree_source src;
    ry_train_data d;
    if (ry_train_data_trees(tr, tb, &src, &d, &err)) fail_msg("%s", err.msg);
    assert_ptr_equal(src.leaf, ry_module_find_ctor(ry_trainer_module(tr), "Leaf"));
    assert_ptr_equal(src.node, ry_module_find_ctor(ry_trainer_module(tr), "Node"));
    double l0, acc0;
    if (ry_train_evaluate(tr, &d, 1, &l0, &acc0, &err)) fail_msg("%s", err.msg);
    ry_fit_opts fo = {.epochs = 15, .batch = 4, .seed = 1, .progress = RY_PROGRESS_QUIET};
    ry_fit_result res;
    if (ry_train_fit(tr, &d, &d, &fo, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 30);
    assert_true(res.eval_loss < 0.5 * l0);
    assert_true(res.eval_acc == 1.0);
    ry_trainer_free(tr);
    ry_treebank_free(tb);
    ry_vocab_free(v);
}

/* ---- carried state: the char-RNN of models/ over truncated BPTT ---- */

static void test_rnn_fit(void **state) {
    ry_error err;
    ry_text *t;
    if (ry_text_read("tests/train/text.txt", &t, &err)) fail_msg("%s", err.msg);
    ry_bptt b;
    if (ry_bptt_init(&b, t, 0, t->n, 4, 8, false, &err)) fail_msg("%s", err.msg);
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.optim.lr = 0.005;
    o.clip_norm = 5;
    ry_trainer *tr = NULL;
    if (ry_trainer_new_file("models/charrnn.relay", &o, &tr, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ry_trainer_ndata(tr), 2);
    assert_int_equal(ry_trainer_nstate(tr), 1);
    ry_train_data d;
    ry_train_data_bptt(&b, &d);
    ry_fit_opts fo = {.epochs = 3, .batch = 1, .no_shuffle = true, .progress = RY_PROGRESS_QUIET};
    ry_fit_result res;
    if (ry_train_fit(tr, &d, &d, &fo, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 3 * b.nwindows);
    /* the mean NLL per character falls well below its start */
    assert_true(res.last_loss < 0.6 * res.first_loss);
    assert_true(res.eval_acc > 0.5);
    ry_trainer_free(tr);
    ry_text_free(t);
}

/* the char-RNN over BPTT windows for `steps` steps in all, from dir's
 * latest checkpoint when resume */
static void rnn_steps(const ry_bptt *b, const char *dir, int64_t steps, bool resume,
                      ry_param_set **out) {
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_RMSPROP);
    o.optim.lr = 0.002;
    o.seed = 4;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new_file("models/charrnn.relay", &o, &tr, &err)) fail_msg("%s", err.msg);
    ry_train_data d;
    ry_train_data_bptt(b, &d);
    ry_fit_opts fo = {.max_steps = steps, .batch = 1, .no_shuffle = true, .checkpoint_dir = dir,
                      .resume = resume, .progress = RY_PROGRESS_QUIET};
    if (ry_train_fit(tr, &d, NULL, &fo, NULL, &err)) fail_msg("%s", err.msg);
    *out = ry_params_like(ry_trainer_params(tr));
    ry_params_copy(*out, ry_trainer_params(tr));
    ry_trainer_free(tr);
}

/* Resuming mid-epoch restores the carried hidden state too. */
static void test_rnn_exact_resume(void **state) {
    ry_error err;
    ry_text *t;
    if (ry_text_read("tests/train/text.txt", &t, &err)) fail_msg("%s", err.msg);
    ry_bptt b;
    if (ry_bptt_init(&b, t, 0, t->n, 4, 8, false, &err)) fail_msg("%s", err.msg);
    char b1[64], b2[64];
    const char *d1 = scratch(b1, sizeof b1, "rnn1"), *d2 = scratch(b2, sizeof b2, "rnn2");
    fresh_dir(d1);
    fresh_dir(d2);
    ry_param_set *once, *twice, *tmp;
    rnn_steps(&b, d1, 6, false, &once);
    rnn_steps(&b, d2, 3, false, &tmp);
    ry_params_free(tmp);
    ry_checkpoint_info *info;
    char p[256];
    snprintf(p, sizeof p, "%s/ckpt-3.h5", d2);
    if (ry_checkpoint_inspect(p, &info, &err)) fail_msg("%s", err.msg);
    bool carry = false;
    for (int i = 0; i < info->n; i++)
        carry |= strcmp(info->entries[i].path, "/optimizer/h0/carry") == 0 &&
                 info->entries[i].shape[0] == 4;
    ry_checkpoint_info_free(info);
    assert_true(carry);
    rnn_steps(&b, d2, 6, true, &twice);
    assert_memory_equal(once->slab->data, twice->slab->data, ry_tensor_nbytes(once->slab));
    ry_params_free(once);
    ry_params_free(twice);
    ry_text_free(t);
    rm_dir(d1);
    rm_dir(d2);
}

/* ---- errors ---- */

static void expect_error(const char *text, const ry_train_opts *o, const char *part) {
    ry_trainer *tr = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_trainer_new("bad.relay", text, strlen(text), o, &tr, &err), RY_ERR);
    assert_null(tr);
    if (!strstr(err.msg, part)) fail_msg("'%s' does not mention '%s'", err.msg, part);
}

static void test_errors(void **state) {
    /* a parameter set too large to allocate names the parameter */
    expect_error("#[version = \"0.0.5\"]\n// data: x\n"
                 "def @loss(%x: float32, %small: Tensor[(2), float32], %huge: Tensor[(2147483647, "
                 "2147483647, 2147483647), float32]) -> float32 { add(%x, add(sum(%small), "
                 "sum(%huge))) }\n",
                 NULL, "out of memory for the parameters: %huge alone needs 3.961e+28 bytes");
    /* names the checkpoint layout cannot hold, found before the first step
     * (and located at the parameter) */
    expect_error("#[version = \"0.0.5\"]\n// data: x\n"
                 "def @loss(%x: float32, %a: Tensor[(2), float32], %a/b: Tensor[(2), float32]) -> "
                 "float32 { add(%x, add(sum(%a), sum(%a/b))) }\n",
                 NULL, "%a: 'a' cannot be stored in a checkpoint beside 'a/b'");
    expect_error("#[version = \"0.0.5\"]\ndef @loss(%x: float32) -> float32 { %x }\n", NULL,
                 "data");
    expect_error("#[version = \"0.0.5\"]\n// data: y\n"
                 "def @loss(%x: float32, %w: float32) -> float32 { add(%x, %w) }\n",
                 NULL, "'y'");
    expect_error("#[version = \"0.0.5\"]\n// data: x\n"
                 "def @loss(%x: float32, %w: int32) -> float32 { %x }\n",
                 NULL, "float32/float64");
    expect_error("#[version = \"0.0.5\"]\n// data: x\n"
                 "def @loss(%x: float32, %w: Tensor[(k), float32]) -> float32 { %x }\n",
                 NULL, "dimension k");
    expect_error("#[version = \"0.0.5\"]\n// data: x\n// init: w=banana\n"
                 "def @loss(%x: float32, %w: float32) -> float32 { add(%x, %w) }\n",
                 NULL, "banana");
    expect_error("#[version = \"0.0.5\"]\n// data: x\n"
                 "def @main(%x: float32, %w: float32) -> float32 { add(%x, %w) }\n",
                 NULL, "@loss");
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = -1;
    expect_error(MLP, &o, "learning rate");
    /* data that does not fit the model */
    ry_trainer *tr = make(MLP, NULL);
    ry_tensor *x = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){4, 4});
    ry_train_data d;
    ry_train_data_tensors(1, &x, -1, &d);
    ry_fit_opts fo = {.progress = RY_PROGRESS_QUIET};
    ry_error err;
    assert_int_equal(ry_train_fit(tr, &d, NULL, &fo, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "takes 2"));
    /* no examples at all */
    ry_tensor *e[2] = {ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){0, 4}),
                       ry_tensor_zeros(RY_INT32, 1, (int64_t[]){0})};
    ry_train_data_tensors(2, e, 1, &d);
    fo.max_steps = 5;
    assert_int_equal(ry_train_fit(tr, &d, NULL, &fo, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "no training batches"));
    ry_tensor_release(e[0]);
    ry_tensor_release(e[1]);
    /* resuming from a checkpoint of another model */
    char dbuf[64];
    const char *dir = scratch(dbuf, sizeof dbuf, "err");
    fresh_dir(dir);
    ry_trainer *other = make(INF_GRAD, NULL);
    char path[512];
    assert_int_equal(ry_trainer_save(other, dir, 1, NULL, NULL, path, sizeof path, &err), RY_OK);
    ry_param_set *before = ry_params_like(ry_trainer_params(tr));
    ry_params_copy(before, ry_trainer_params(tr));
    assert_int_equal(ry_trainer_load(tr, path, NULL, &err), RY_ERR);
    assert_memory_equal(before->slab->data, ry_trainer_params(tr)->slab->data,
                        ry_tensor_nbytes(before->slab));
    ry_params_free(before);
    ry_trainer_free(other);
    ry_trainer_free(tr);
    ry_tensor_release(x);
    rm_dir(dir);
}

static void test_accuracy_count(void **state) {
    ry_tensor *s = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){3, 2});
    ry_tensor *l = ry_tensor_zeros(RY_INT32, 1, (int64_t[]){3});
    float sv[6] = {0.1f, 0.9f, 2, 1, -1, -3};
    memcpy(s->data, sv, sizeof sv);
    ry_tensor_set(l, 0, 1);
    ry_tensor_set(l, 1, 1);
    int64_t c, t;
    ry_error err;
    assert_int_equal(ry_accuracy_count(s, l, &c, &t, &err), RY_OK);
    assert_int_equal(c, 2);
    assert_int_equal(t, 3);
    ry_tensor *bad = ry_tensor_zeros(RY_INT32, 1, (int64_t[]){2});
    assert_int_equal(ry_accuracy_count(s, bad, &c, &t, &err), RY_ERR);
    ry_tensor_release(bad);
    ry_tensor_release(s);
    ry_tensor_release(l);
}

/* ---- progress: a bar redrawn with \r on a terminal, log lines elsewhere ---- */

static void test_progress_output(void **state) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ry_progress *p;
    ry_error err;
    assert_int_equal(ry_progress_new(f, RY_PROGRESS_BAR, 4, 2, NULL, &p, &err), RY_OK);
    for (int i = 1; i <= 4; i++) ry_progress_step(p, i, 0, 1.0 / i, 0.1);
    ry_progress_eval(p, 4, 0, 0.5, 0.75);
    ry_progress_free(p);
    fflush(f);
    assert_non_null(strstr(buf, "\r["));
    assert_non_null(strstr(buf, "4/4"));
    assert_non_null(strstr(buf, "it/s"));
    assert_non_null(strstr(buf, "ETA"));
    assert_non_null(strstr(buf, "accuracy 75.00%"));
    fclose(f);
    free(buf);

    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_int_equal(ry_progress_new(f, RY_PROGRESS_LOG, 0, 2, NULL, &p, &err), RY_OK);
    for (int i = 1; i <= 5; i++) ry_progress_step(p, i, 1, 0.25, 0.1);
    ry_progress_note(p, "note %d", 7);
    ry_progress_free(p);
    fflush(f);
    assert_null(strchr(buf, '\r'));
    assert_non_null(strstr(buf, "step 2 epoch 2 loss 0.250000"));
    assert_non_null(strstr(buf, "step 4 epoch 2"));
    assert_null(strstr(buf, "step 3 "));
    assert_non_null(strstr(buf, "note 7\n"));
    fclose(f);
    free(buf);

    assert_int_equal(ry_progress_new(NULL, RY_PROGRESS_QUIET, 0, 0, "no-such-dir/x.csv", &p, &err),
                     RY_ERR);
    assert_non_null(strstr(err.msg, "CSV"));

    /* continuing a CSV: rows after the step are dropped, so is a torn
     * last row; a file that is not such a CSV is refused, untouched */
    char cbuf[64], path[128];
    snprintf(path, sizeof path, "%s.csv", scratch(cbuf, sizeof cbuf, "csv"));
    FILE *c = fopen(path, "w");
    fputs("kind,step,epoch,loss,lr,steps_per_s,elapsed_s,accuracy\n"
          "train,2,0,1,0.1,1,1,\ntrain,4,0,1,0.1,1,1,\ntrain,6,0,1,0.1,1,1,\ntrain,8,0,1", c);
    fclose(c);
    assert_int_equal(ry_progress_new(NULL, RY_PROGRESS_QUIET, 0, 2, NULL, &p, &err), RY_OK);
    assert_int_equal(ry_progress_csv_continue(p, path, 4, &err), RY_OK);
    ry_progress_step(p, 6, 0, 0.5, 0.1);
    ry_progress_free(p);
    char *text = NULL;
    size_t tlen = 0;
    c = fopen(path, "r");
    assert_true(getdelim(&text, &tlen, '\0', c) > 0);
    fclose(c);
    assert_non_null(strstr(text, "\ntrain,4,0,1,0.1,1,1,\ntrain,6,0,0.5,"));
    assert_null(strstr(text, "train,6,0,1,"));
    assert_null(strstr(text, "train,8"));
    free(text);
    c = fopen(path, "w");
    fputs("my,own,data\n1,2,3\n", c);
    fclose(c);
    assert_int_equal(ry_progress_new(NULL, RY_PROGRESS_QUIET, 0, 2, NULL, &p, &err), RY_OK);
    assert_int_equal(ry_progress_csv_continue(p, path, 4, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "header"));
    ry_progress_free(p);
    c = fopen(path, "r");
    char line[64];
    assert_non_null(fgets(line, sizeof line, c));
    assert_string_equal(line, "my,own,data\n");
    fclose(c);
    unlink(path);
}

/* Symbolic dimensions given values become constants in the model before
 * it is differentiated: take's clipping gradient along the table's rows
 * needs their number, and the batch n, not given, stays symbolic. */
static void test_given_dims_become_static(void **state) {
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "// data: x\n"
        "def @loss(%x: Tensor[(n), int32], %e: Tensor[(v, 3), float32]) -> float32 {\n"
        "  mean(take(%e, %x, axis=0))\n"
        "}\n";
    ry_train_opts o = ry_train_defaults();
    ry_trainer *tr = NULL;
    ry_error err;
    assert_int_equal(ry_trainer_new("dims.relay", text, strlen(text), &o, &tr, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "parameter %e has dimension v: give its value"));
    o.nsyms = 1;
    o.sym_names[0] = "v";
    o.sym_values[0] = 10;
    tr = make(text, &o);
    const ry_global *g = ry_module_find_global(ry_trainer_module(tr), "loss");
    const ry_type *x = g->func->func.params[0]->type, *e = g->func->func.params[1]->type;
    assert_int_equal(e->tensor.dims[0].kind, RY_DIM_CONST);
    assert_int_equal(e->tensor.dims[0].value, 10);
    assert_int_equal(x->tensor.dims[0].kind, RY_DIM_SYM);
    int64_t sx[1] = {4};
    ry_tensor *xs = ry_tensor_new(RY_INT32, 1, sx);
    for (int i = 0; i < 4; i++) ((int32_t *)xs->data)[i] = 3 * i - 2; /* -2 and 10 clip */
    ry_value *args[1] = {ry_value_tensor(xs)};
    double loss;
    if (ry_trainer_step(tr, 1, args, &loss, &err)) fail_msg("%s", err.msg);
    ry_value_release(args[0]);
    ry_trainer_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_given_dims_become_static),
        cmocka_unit_test(test_step_matches_torch),
        cmocka_unit_test(test_mlp_fit),
        cmocka_unit_test(test_exact_resume),
        cmocka_unit_test(test_stop_request),
        cmocka_unit_test(test_nan_stops),
        cmocka_unit_test(test_tree_fit),
        cmocka_unit_test(test_rnn_fit),
        cmocka_unit_test(test_rnn_exact_resume),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_accuracy_count),
        cmocka_unit_test(test_progress_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
