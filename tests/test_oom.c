/*
 * test_oom.c: allocation failure, one site at a time (issue 13, part 4).
 * For each stage a user meets — parsing, type checking, differentiating,
 * verifying, optimizing (and the passes one by one) and compiling,
 * building a trainer, one training step, one checkpoint save, running a
 * program on the VM (one call, a batch, a closure of the interpreter's)
 * and on the interpreter — the Nth allocation through ry_malloc's hook fails, and
 * every later one (ry_alloc_fail_after), for N from 0 up to the number the
 * stage makes (a sample of them in a large stage: sampled()), on the MLP,
 * on a recursive model over an ADT and on the models of models/. The IR's
 * own memory (arena blocks, constants, the constant table) counts too: the
 * entry points that build IR recover from running out of it, and the
 * engines catch it where a run uses it (tensor/oom.h).
 * Each failure must be an error status with a message (never a crash, an
 * abort or an exit; leaks are LeakSanitizer's to find: `make test-oom` runs
 * this under ASan too), and the stage run again without the hook, on a
 * fresh state or on what the failed one left, must then give the reference
 * result: the same printed module, the same loss, a loadable checkpoint.
 * Tens to several hundred allocations per stage, 7,077 in all, 2,252 of
 * them failed; about five seconds (TEST_OOM_ALL=1: all of them).
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/ad.h"
#include "relayc/interp.h"
#include "relayc/pass.h"
#include "relayc/train.h"
#include "relayc/vm.h"
#include "test_texts.h"
#include "test_util.h"

static const char *MLP = TEST_MLP_TEXT;
/* Recursion over an ADT: closures, matches and the ADT twins of AD. */
static const char *TREE = TEST_TREE_TEXT;

static const char *TREES = "(1 (0 a) (1 (0 very) (1 good)))\n"
                           "(0 (0 (0 not) (0 bad)) (0 film))\n";

/* ---- the driver -------------------------------------------------------------
 * A stage runs once unhooked to count its allocations (ry_alloc_count: one
 * thread allocates), then once with the hook armed at each n below that
 * count. fresh() builds what the stage starts from, unhooked; run() is what
 * fails; check() judges a success (the reference result); recover(), after
 * a failure, runs the stage again unhooked on the same state and judges
 * that; drop() frees. A failure must be an error with a message; a success
 * with an allocation failed (a pass that goes without: constant folding
 * leaves the call to run time) must pass degraded(), or check() when the
 * stage has none. Returns the count. */
typedef struct stage {
    const char *name;
    void (*fresh)(void *ctx);
    ry_status (*run)(void *ctx, ry_error *err);
    void (*check)(void *ctx);   /* after a success */
    void (*degraded)(void *ctx); /* after a success with a failed allocation; may be NULL */
    void (*recover)(void *ctx); /* after a failure, on the same state; may be NULL */
    void (*drop)(void *ctx);
} stage;

static long count_allocations(const stage *s, void *ctx) {
    ry_error err;
    s->fresh(ctx);
    long before = ry_alloc_count();
    if (s->run(ctx, &err)) fail_msg("%s: %s", s->name, err.msg);
    long n = ry_alloc_count() - before;
    s->check(ctx);
    s->drop(ctx);
    return n;
}

/* Which allocations to fail: every one in a stage that makes up to
 * 3 * EDGE; in a larger one (the IR's arena blocks and constants count
 * now: optimizing and compiling make hundreds) the first and last EDGE and
 * about EDGE spread evenly between, the same each run, so the suite stays
 * at seconds. TEST_OOM_ALL=1 in the environment fails every one. */
#define EDGE 25
static bool sampled(long n, long count) {
    static int all = -1;
    if (all < 0) all = getenv("TEST_OOM_ALL") != NULL;
    if (all || count <= 3 * EDGE) return true;
    long k = (count - 2 * EDGE) / EDGE + 1;
    return n < EDGE || n >= count - EDGE || (n - EDGE) % k == 0;
}

static long run_stage(const stage *s, void *ctx) {
    long count = count_allocations(s, ctx), errors = 0, tried = 0;
    for (long n = 0; n < count; n++) {
        if (!sampled(n, count)) continue;
        tried++;
        s->fresh(ctx);
        ry_error err;
        memset(&err, 0, sizeof err);
        ry_alloc_fail_after(n);
        ry_status st = s->run(ctx, &err);
        ry_alloc_fail_after(-1);
        if (st == RY_OK) {
            (s->degraded ? s->degraded : s->check)(ctx);
        } else {
            errors++;
            if (!err.msg[0]) fail_msg("%s: allocation %ld failed with no message", s->name, n);
            if (s->recover) s->recover(ctx);
        }
        s->drop(ctx);
    }
    fprintf(stderr, "  %s: %ld allocations, %ld of them failed: %ld errors, %ld done without\n",
            s->name, count, tried, errors, tried - errors);
    return count;
}

static ry_tensor *filled(ry_dtype dt, int ndim, const int64_t *shape, double scale, int mod) {
    ry_tensor *t = ry_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, mod ? (double)(i % mod) : scale * (double)((i * 7) % 11 - 5));
    return t;
}

/* ---- front end: parse, type check, differentiate, optimize, compile ---- */

typedef struct front {
    const char *text;
    ry_module *m;
    char *want; /* the reference print of the stage's result */
} front;

static void front_parse(front *f) {
    ry_error err;
    if (ry_module_parse("oom.relay", f->text, strlen(f->text), &f->m, &err)) fail_msg("%s", err.msg);
}
static void front_check(front *f) {
    ry_error err;
    front_parse(f);
    if (ry_module_typecheck(f->m, &err)) fail_msg("%s", err.msg);
}
static void front_grad(front *f) {
    ry_error err;
    front_check(f);
    if (ry_grad(f->m, "loss", NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
}

static void fresh_none(void *c) { ((front *)c)->m = NULL; }
static void fresh_parsed(void *c) { front_parse(c); }
static void fresh_checked(void *c) { front_check(c); }
static void fresh_grad(void *c) { front_grad(c); }

static ry_status run_parse(void *c, ry_error *err) {
    front *f = c;
    return ry_module_parse("oom.relay", f->text, strlen(f->text), &f->m, err);
}
static ry_status run_check(void *c, ry_error *err) { return ry_module_typecheck(((front *)c)->m, err); }
static ry_status run_grad(void *c, ry_error *err) {
    return ry_grad(((front *)c)->m, "loss", NULL, NULL, NULL, err);
}
static ry_status run_optimize(void *c, ry_error *err) { return ry_optimize(((front *)c)->m, 2, err); }
static ry_status run_verify(void *c, ry_error *err) { return ry_ir_verify(((front *)c)->m, true, err); }
/* The passes called one at a time, outside ry_optimize: each is an entry
 * of its own (ry_hoist with its ry_inline and ry_dce inside). */
static ry_status run_passes(void *c, ry_error *err) {
    ry_module *m = ((front *)c)->m;
    ry_status (*const passes[])(ry_module *, ry_error *) = {
        ry_hoist, ry_partial_eval, ry_dce, ry_fold_constants, ry_simplify, ry_cse, ry_fuse};
    for (int i = 0; i < (int)(sizeof passes / sizeof *passes); i++)
        if (passes[i](m, err)) return RY_ERR;
    return ry_module_typecheck(m, err);
}
static ry_status run_compile(void *c, ry_error *err) {
    front *f = c;
    ry_vm_program *p = NULL;
    ry_status st = ry_optimize(f->m, 2, err);
    if (st == RY_OK) st = ry_vm_compile(f->m, ry_target_cpu(), &p, err);
    if (st == RY_OK) assert_non_null(p);
    ry_vm_free(p);
    return st;
}

static void check_print(void *c) {
    front *f = c;
    char *got = ry_module_print(f->m);
    assert_non_null(got);
    assert_string_equal(got, f->want);
    ry_free(got);
}
static void check_nothing(void *c) { (void)c; }
/* A program optimized less than the reference (a fold left out) is still
 * a well-typed program. */
static void check_verified(void *c) {
    ry_error err;
    if (ry_ir_verify(((front *)c)->m, true, &err)) fail_msg("%s", err.msg);
}
/* After a failure: the stage run again, unhooked, on the module the
 * failed one left. */
static void run_again(void *c, ry_status (*run)(void *, ry_error *), const char *what) {
    ry_error err;
    if (run(c, &err)) fail_msg("%s after a failed one: %s", what, err.msg);
}
/* A type check or gradient again gives the reference print. */
static void recover_check(void *c) {
    run_again(c, run_check, "type check");
    check_print(c);
}
static void recover_grad(void *c) {
    run_again(c, run_grad, "grad");
    check_print(c);
}
/* A failed optimization leaves a part-rewritten module; optimizing it
 * again gives the reference program up to the names of its lets (a let
 * made by an earlier pass keeps its hint), so it is judged well-formed
 * and well-typed. */
static void recover_optimize(void *c) {
    run_again(c, run_optimize, "optimize");
    check_verified(c);
}
/* A failed compilation leaves nothing half-made in the module (the ANF
 * it caches): compiling again succeeds. */
static void recover_compile(void *c) { run_again(c, run_compile, "compiling"); }
static void recover_passes(void *c) {
    run_again(c, run_passes, "the passes");
    check_verified(c);
}
static void drop_front(void *c) {
    front *f = c;
    ry_module_free(f->m);
    f->m = NULL;
}

/* The reference print after the stages up to and including `upto`. */
static char *reference(const char *text, int upto) {
    front f = {.text = text};
    front_parse(&f);
    ry_error err;
    if (upto >= 1 && ry_module_typecheck(f.m, &err)) fail_msg("%s", err.msg);
    if (upto >= 2 && ry_grad(f.m, "loss", NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
    if (upto >= 3 && ry_optimize(f.m, 2, &err)) fail_msg("%s", err.msg);
    char *s = ry_module_print(f.m);
    ry_module_free(f.m);
    return s;
}

static void front_stages(const char *text) {
    front f = {.text = text};
    const stage stages[] = {
        {"parse", fresh_none, run_parse, check_print, NULL, NULL, drop_front},
        {"typecheck", fresh_parsed, run_check, check_print, NULL, recover_check, drop_front},
        {"grad", fresh_checked, run_grad, check_print, NULL, recover_grad, drop_front},
        {"verify", fresh_grad, run_verify, check_print, NULL, NULL, drop_front},
        {"optimize", fresh_grad, run_optimize, check_print, check_verified, recover_optimize, drop_front},
        {"optimize+compile", fresh_grad, run_compile, check_nothing, NULL, recover_compile, drop_front},
        {"passes one by one", fresh_grad, run_passes, check_verified, NULL, recover_passes, drop_front},
    };
    const int upto[] = {0, 1, 2, 2, 3, 3, 3}; /* each one's reference (reference()) */
    for (int i = 0; i < (int)(sizeof stages / sizeof *stages); i++) {
        f.want = reference(text, upto[i]);
        run_stage(&stages[i], &f);
        ry_free(f.want);
    }
}

static void test_front_mlp(void **state) { front_stages(MLP); }
static void test_front_tree(void **state) { front_stages(TREE); }

/* The models of models/, as a user trains them. */
static void front_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof text - 1);
    text[n] = '\0';
    fprintf(stderr, " %s\n", path);
    front_stages(text);
}

static void test_front_models(void **state) {
    front_file("models/lenet.relay");
    front_file("models/charlstm.relay");
    front_file("models/treelstm.relay");
}

/* ---- the trainer: building it, a step, a checkpoint ---- */

typedef struct train {
    const char *text;
    ry_train_opts o;
    ry_trainer *tr;
    int ndata;
    ry_value *fixed[2];    /* the MLP's batch */
    const ry_treebank *tb; /* or the tree model's trees */
    ry_value *data[2];     /* the batch for tr */
    double want_loss;      /* a fresh trainer's first loss */
    double loss;
    char dir[128];
    char saved[512];
} train;

/* The batch for trainer tr: the MLP's tensors, or the second tree built
 * with tr's own constructors (a tree value belongs to its module). */
static void bind_data(const train *t, ry_trainer *tr, ry_value **data) {
    if (!t->tb) {
        for (int i = 0; i < t->ndata; i++) data[i] = ry_value_retain(t->fixed[i]);
        return;
    }
    ry_error err;
    ry_tree_source src;
    ry_train_data d;
    int64_t idx = 1;
    if (ry_train_data_trees(tr, t->tb, &src, &d, &err) || d.fetch(&d, &idx, 1, data, &err))
        fail_msg("%s", err.msg);
}

static void unbind_data(const train *t, ry_value **data) {
    for (int i = 0; i < t->ndata; i++) {
        ry_value_release(data[i]);
        data[i] = NULL;
    }
}

static void make_trainer(train *t) {
    ry_error err;
    if (ry_trainer_new("oom.relay", t->text, strlen(t->text), &t->o, &t->tr, &err))
        fail_msg("%s", err.msg);
    bind_data(t, t->tr, t->data);
}

static void fresh_train_none(void *c) { ((train *)c)->tr = NULL; }
static void fresh_trainer(void *c) { make_trainer(c); }
static void fresh_stepped(void *c) {
    train *t = c;
    ry_error err;
    assert_int_equal(mkdir(t->dir, 0755), 0);
    make_trainer(t);
    if (ry_trainer_step(t->tr, t->ndata, t->data, &t->loss, &err)) fail_msg("%s", err.msg);
}

static ry_status run_new(void *c, ry_error *err) {
    train *t = c;
    return ry_trainer_new("oom.relay", t->text, strlen(t->text), &t->o, &t->tr, err);
}
static ry_status run_step(void *c, ry_error *err) {
    train *t = c;
    t->loss = 0;
    return ry_trainer_step(t->tr, t->ndata, t->data, &t->loss, err);
}
static ry_status run_save(void *c, ry_error *err) {
    train *t = c;
    return ry_trainer_save(t->tr, t->dir, 2, NULL, "oom", t->saved, sizeof t->saved, err);
}

static void check_trainer(void *c) {
    train *t = c;
    assert_non_null(t->tr);
    bind_data(t, t->tr, t->data);
    double loss;
    ry_error err;
    if (ry_trainer_step(t->tr, t->ndata, t->data, &loss, &err)) fail_msg("%s", err.msg);
    assert_true(loss == t->want_loss);
}
static void check_step(void *c) {
    train *t = c;
    assert_true(t->loss == t->want_loss);
}
/* A failed step leaves the trainer as it was: the step again gives a
 * fresh trainer's first loss. */
static void recover_step(void *c) {
    train *t = c;
    ry_error err;
    if (run_step(t, &err)) fail_msg("the step after a failed one: %s", err.msg);
    check_step(t);
}

/* Nothing but finished checkpoints (and the directory's lock) is left in
 * dir: no temporary file survives a failed save. */
static void assert_no_partial_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (n[0] == '.' || (strncmp(n, "ckpt-", 5) == 0 && len > 8 && !strcmp(n + len - 3, ".h5")))
            continue;
        fail_msg("left in %s after a failed save: %s", dir, n);
    }
    closedir(d);
}

static void check_save(void *c) {
    train *t = c;
    assert_no_partial_files(t->dir);
    /* the checkpoint loads back into a fresh trainer, whose next step
     * matches the saved one's */
    ry_trainer *back = NULL;
    ry_error err;
    if (ry_trainer_new("oom.relay", t->text, strlen(t->text), &t->o, &back, &err))
        fail_msg("%s", err.msg);
    if (ry_trainer_load(back, t->saved, NULL, &err)) fail_msg("%s: %s", t->saved, err.msg);
    ry_value *data[2] = {0};
    bind_data(t, back, data);
    double a, b;
    if (ry_trainer_step(back, t->ndata, data, &a, &err)) fail_msg("%s", err.msg);
    if (ry_trainer_step(t->tr, t->ndata, t->data, &b, &err)) fail_msg("%s", err.msg);
    assert_true(a == b);
    unbind_data(t, data);
    ry_trainer_free(back);
}
static void recover_save(void *c) {
    train *t = c;
    ry_error err;
    assert_no_partial_files(t->dir);
    if (run_save(t, &err)) fail_msg("the save after a failed one: %s", err.msg);
    check_save(t);
}
static void drop_train(void *c) {
    train *t = c;
    unbind_data(t, t->data);
    ry_trainer_free(t->tr);
    t->tr = NULL;
    rm_dir(t->dir);
}

static void train_stages(train *t) {
    snprintf(t->dir, sizeof t->dir, "build-test-oom-%d", (int)getpid());
    rm_dir(t->dir);
    make_trainer(t);
    ry_error err;
    if (ry_trainer_step(t->tr, t->ndata, t->data, &t->want_loss, &err)) fail_msg("%s", err.msg);
    drop_train(t);
    const stage stages[] = {
        {"trainer_new", fresh_train_none, run_new, check_trainer, NULL, NULL, drop_train},
        {"first step", fresh_trainer, run_step, check_step, NULL, recover_step, drop_train},
        {"checkpoint save", fresh_stepped, run_save, check_save, NULL, recover_save, drop_train},
    };
    for (int i = 0; i < (int)(sizeof stages / sizeof *stages); i++)
        assert_true(run_stage(&stages[i], t) > 0);
}

static void test_train_mlp(void **state) {
    train t = {.text = MLP, .o = ry_train_defaults(), .ndata = 2};
    t.o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    t.o.threads = 1;
    int64_t xs[2] = {5, 4}, ys[1] = {5};
    ry_tensor *x = filled(RY_FLOAT32, 2, xs, 0.1, 0), *y = filled(RY_INT32, 1, ys, 0, 3);
    t.fixed[0] = ry_value_tensor(x);
    t.fixed[1] = ry_value_tensor(y);
    train_stages(&t);
    ry_value_release(t.fixed[0]); /* the values took over x and y */
    ry_value_release(t.fixed[1]);
}

static void test_train_tree(void **state) {
    train t = {.text = TREE, .o = ry_train_defaults(), .ndata = 1};
    t.o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    t.o.threads = 1;
    ry_error err;
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = NULL;
    if (ry_treebank_parse("trees", TREES, strlen(TREES), v, true, &tb, &err)) fail_msg("%s", err.msg);
    t.tb = tb;
    train_stages(&t);
    ry_treebank_free(tb);
    ry_vocab_free(v);
}

/* ---- running a program: the VM and the interpreter ----
 * A model's gradient (forward and backward pass: the tree model's
 * recursion, matches and backpropagator closures) called once on each
 * engine, and on the VM also as a batch of two (stacked kernels); a
 * program of closures, recursive lets, a polymorphic map over a list and
 * a branch on each engine, and one of its closures made by the
 * interpreter applied on the VM (compiled there at run time). The
 * engines' own memory counts: the interpreter's function analyses and
 * operator types, the VM's machine, the types of its general path and
 * what it compiles at run time live in arenas, which a run catches
 * running out of (tensor/oom.h). A failed run must free all it held, and
 * the same program (the VM's, with the machine, learned types and
 * functions the failure left) or module, run again unhooked, gives the
 * reference result. */

static const char *CLOSURES = TEST_CLOSURES_TEXT;

enum { ENGINE_VM, ENGINE_INTERP, ENGINE_BATCH, ENGINE_APPLY };

typedef struct running {
    const char *text;
    int engine;
    ry_module *m;
    ry_vm_program *p;
    const char *entry; /* the gradient's, or @main */
    ry_value *fn;      /* ENGINE_APPLY: the interpreter's closure */
    int nargs;
    ry_value *args[2 * 6];
    ry_value *out[2];
    double want; /* the sum of every tensor element of the result */
} running;

static double value_sum(const ry_value *v) {
    double s = 0;
    if (v->kind == RY_VAL_TENSOR)
        for (int64_t i = 0; i < v->tensor->size; i++) s += ry_tensor_get(v->tensor, i);
    else if (v->kind == RY_VAL_TUPLE)
        for (int i = 0; i < v->tuple.n; i++) s += value_sum(v->tuple.fields[i]);
    else if (v->kind == RY_VAL_ADT) /* a list, or the tree's gradient (its twin) */
        for (int i = 0; i < v->adt.n; i++) s += value_sum(v->adt.fields[i]);
    else
        fail_msg("a result holds a %s", ry_value_kind_name(v));
    return s;
}

static ry_value *scalar(ry_dtype dt, double x) {
    ry_tensor *t = ry_tensor_scalar(dt, x);
    assert_non_null(t);
    return ry_value_tensor(t);
}

static ry_value *leaf(const ry_module *m, int word, int label) {
    ry_value *f[2] = {scalar(RY_INT32, word), scalar(RY_INT32, label)};
    return ry_value_adt(ry_module_find_ctor(m, "Leaf"), 2, f);
}

static ry_value *node(const ry_module *m, ry_value *l, ry_value *r, int label) {
    ry_value *f[3] = {l, r, scalar(RY_INT32, label)};
    return ry_value_adt(ry_module_find_ctor(m, "Node"), 3, f);
}

/* A tensor input as filled() makes it; ndim -1: the tree. */
typedef struct input {
    ry_dtype dt;
    int ndim;
    int64_t shape[2];
    double scale;
    int mod;
} input;

static const input MLP_INPUTS[6] = {
    {RY_FLOAT32, 2, {5, 4}, 0.1, 0}, {RY_INT32, 1, {5}, 0, 3},      {RY_FLOAT32, 2, {8, 4}, 0.2, 0},
    {RY_FLOAT32, 1, {8}, 0.1, 0},    {RY_FLOAT32, 2, {3, 8}, 0.3, 0}, {RY_FLOAT32, 1, {3}, 0.1, 0},
};
static const input TREE_INPUTS[6] = {
    {RY_INT32, -1, {0}, 0, 0},       {RY_FLOAT32, 2, {7, 6}, 0.3, 0}, {RY_FLOAT32, 2, {6, 12}, 0.1, 0},
    {RY_FLOAT32, 1, {6}, 0.1, 0},    {RY_FLOAT32, 2, {2, 6}, 0.2, 0}, {RY_FLOAT32, 1, {2}, 0.1, 0},
};

/* The program's inputs: the MLP's batch of 5 or a tree of 3 leaves, then
 * the model's parameters; two floats for CLOSURES (one for a closure).
 * Instance j of a batch gets other values. Returns how many. */
static int bind_inputs(running *r, ry_value **a, int j) {
    const ry_module *m = r->m;
    if (r->text == CLOSURES) {
        a[0] = scalar(RY_FLOAT32, 1.5 + j);
        a[1] = scalar(RY_FLOAT32, 2);
        return r->engine == ENGINE_APPLY ? 1 : 2;
    }
    const input *in = r->text == MLP ? MLP_INPUTS : TREE_INPUTS;
    for (int i = 0; i < 6; i++)
        a[i] = in[i].ndim < 0 ? node(m, leaf(m, 1 + j, 0), node(m, leaf(m, 2, 1), leaf(m, 3 + j, 0), 1), j)
                              : ry_value_tensor(filled(in[i].dt, in[i].ndim, in[i].shape,
                                                       in[i].scale + (i ? 0 : j), in[i].mod));
    return 6;
}

static void fresh_program(void *c) {
    running *r = c;
    ry_error err;
    front f = {.text = r->text};
    front_check(&f);
    r->m = f.m;
    r->entry = "main";
    if (r->text != CLOSURES && ry_grad(r->m, "loss", NULL, NULL, &r->entry, &err))
        fail_msg("%s", err.msg);
    if (r->engine != ENGINE_INTERP && ry_vm_compile(r->m, NULL, &r->p, &err)) fail_msg("%s", err.msg);
    r->nargs = bind_inputs(r, r->args, 0);
    bind_inputs(r, r->args + 6, 1);
    if (r->engine == ENGINE_APPLY && ry_interp_call(r->m, "adder", 1, &r->args[1], NULL, &r->fn, &err))
        fail_msg("%s", err.msg);
}

static ry_status run_program(void *c, ry_error *err) {
    running *r = c;
    switch (r->engine) {
    case ENGINE_INTERP: return ry_interp_call(r->m, r->entry, r->nargs, r->args, NULL, &r->out[0], err);
    case ENGINE_VM: return ry_vm_call(r->p, r->entry, r->nargs, r->args, NULL, &r->out[0], err);
    case ENGINE_APPLY: return ry_vm_apply(r->p, r->fn, r->nargs, r->args, NULL, &r->out[0], err);
    }
    return ry_vm_call_batch(r->p, r->entry, 2, r->nargs, r->args, NULL, r->out, err);
}

static double result_sum(const running *r) {
    return value_sum(r->out[0]) + (r->engine == ENGINE_BATCH ? value_sum(r->out[1]) : 0);
}

static void drop_out(running *r) {
    for (int j = 0; j < 2; j++) {
        ry_value_release(r->out[j]);
        r->out[j] = NULL;
    }
}

/* A batch is the one-by-one result to float32 rounding (stacked kernels
 * sum in another order); the rest bitwise. */
static void check_program(void *c) {
    running *r = c;
    double got = result_sum(r);
    if (r->engine == ENGINE_BATCH) assert_true(fabs(got - r->want) <= 1e-4 * (1 + fabs(r->want)));
    else assert_true(got == r->want);
    drop_out(r);
}

static void recover_program(void *c) {
    running *r = c;
    ry_error err;
    assert_null(r->out[0]);
    assert_null(r->out[1]);
    if (run_program(r, &err)) fail_msg("the run after a failed one: %s", err.msg);
    check_program(r);
}

static void drop_program(void *c) {
    running *r = c;
    drop_out(r);
    for (int i = 0; i < 12; i++) {
        ry_value_release(r->args[i]);
        r->args[i] = NULL;
    }
    ry_value_release(r->fn);
    r->fn = NULL;
    ry_vm_free(r->p);
    r->p = NULL;
    ry_module_free(r->m);
    r->m = NULL;
}

static void run_stages(const char *text, int nengines, const int *engines) {
    static const char *names[] = {"vm run", "interpreter run", "vm batch of 2",
                                  "vm apply of the interpreter's closure"};
    for (int i = 0; i < nengines; i++) {
        running r = {.text = text, .engine = engines[i]};
        fresh_program(&r);
        ry_error err;
        if (run_program(&r, &err)) fail_msg("%s", err.msg);
        r.want = result_sum(&r);
        drop_program(&r);
        const stage s = {names[r.engine], fresh_program, run_program, check_program, NULL,
                         recover_program, drop_program};
        assert_true(run_stage(&s, &r) > 0);
    }
}

static void test_run_mlp(void **state) {
    run_stages(MLP, 3, (const int[]){ENGINE_VM, ENGINE_INTERP, ENGINE_BATCH});
}
static void test_run_tree(void **state) {
    run_stages(TREE, 3, (const int[]){ENGINE_VM, ENGINE_INTERP, ENGINE_BATCH});
}
static void test_run_closures(void **state) {
    run_stages(CLOSURES, 3, (const int[]){ENGINE_VM, ENGINE_INTERP, ENGINE_APPLY});
}

int main(void) {
    ry_set_num_threads(1); /* one thread allocates: the counts repeat */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_mlp),
        cmocka_unit_test(test_front_tree),
        cmocka_unit_test(test_front_models),
        cmocka_unit_test(test_train_mlp),
        cmocka_unit_test(test_train_tree),
        cmocka_unit_test(test_run_mlp),
        cmocka_unit_test(test_run_tree),
        cmocka_unit_test(test_run_closures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
