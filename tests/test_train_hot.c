/*
 * test_train_hot.c: the trainer's hot path (train_grad.c, train_par.c)
 * against the path it replaced. Every optimizer and clipping setting, with
 * one call and several per step, gives the parameters bit for bit as
 * copying the gradients into a set, ry_params_find_nonfinite,
 * ry_clip_grad_value/norm and ry_optim_step do; a NaN/Inf leaves every
 * parameter unchanged; row-sparse embedding gradients equal dense ones
 * (float64) under optimizers that update only the touched rows and under
 * those that densify; threaded calls equal serial ones bit for bit, and a
 * threaded tree fit resumes exactly; steps with the kernels split over 2
 * threads (update, scan, bias sum) equal 1-thread steps bit for bit.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/train.h"
#include "test_texts.h"
#include "test_util.h"

static const char *MLP =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: w1=kaiming_uniform b1=uniform(-0.1,0.1) w2=xavier_uniform b2=zeros\n"
    "def @loss(%x: Tensor[(n, 4), DT], %y: Tensor[(n), int32], %w1: Tensor[(8, 4), DT], "
    "%b1: Tensor[(8), DT], %w2: Tensor[(3, 8), DT], %b2: Tensor[(3), DT]) -> DT {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=8), %b1));\n"
    "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2, units=3), %b2), axis=-1);\n"
    "  %2 = one_hot(%y, 1CST, 0CST, depth=3, axis=-1, dtype=\"DT\");\n"
    "  negative(mean(sum(multiply(%1, %2), axis=[1])))\n"
    "}\n";

/* MLP with DT and the float literal suffix for dtype dt. */
static char *mlp_text(ry_dtype dt) {
    const char *name = dt == RY_FLOAT32 ? "float32" : "float64";
    const char *suffix = dt == RY_FLOAT32 ? "f" : "f64";
    size_t n = strlen(MLP) * 2;
    char *out = malloc(n);
    size_t k = 0;
    for (const char *p = MLP; *p; p++) {
        if (!strncmp(p, "DT", 2)) k += (size_t)snprintf(out + k, n - k, "%s", name), p++;
        else if (!strncmp(p, "CST", 3)) k += (size_t)snprintf(out + k, n - k, "%s", suffix), p += 2;
        else out[k++] = *p;
    }
    out[k] = '\0';
    return out;
}

static ry_trainer *make(const char *text, const ry_train_opts *o) {
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("test.relay", text, strlen(text), o, &tr, &err)) {
        ry_error_print(stderr, &err);
        fail_msg("trainer: %s", err.msg);
    }
    return tr;
}

/* Batch b of the MLP's data: x (rows, 4) normal, y in [0, 3). */
static void mlp_batch(ry_dtype dt, int b, int64_t rows, ry_value **args) {
    ry_rng r;
    ry_rng_seed(&r, 100 + (uint64_t)b);
    int64_t xs[2] = {rows, 4};
    ry_tensor *x = ry_tensor_new(dt, 2, xs), *y = ry_tensor_new(RY_INT32, 1, &rows);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, 2 * ry_rng_normal(&r));
    for (int64_t i = 0; i < rows; i++) ry_tensor_set(y, i, (double)ry_rng_below(&r, 3));
    args[0] = ry_value_tensor(x);
    args[1] = ry_value_tensor(y);
}

static void release2(ry_value **a) {
    ry_value_release(a[0]);
    ry_value_release(a[1]);
}

static void ok(ry_status st, const ry_error *err) {
    if (st) fail_msg("%s", err->msg);
}

/* ---- the hot path against the old one -----------------------------------
 * The reference trainer only computes gradients (SGD with lr 0 leaves its
 * parameters alone); its gradient set is copied, checked, clipped and
 * stepped by a separate optimizer over its parameters, as the old apply
 * did. */
typedef struct config {
    ry_optim_config optim;
    double clip_norm, clip_value;
    bool no_decay_b1; /* weight decay off for b1 */
} config;

static void compare_with_old(ry_dtype dt, const config *c, int calls) {
    char *text = mlp_text(dt);
    ry_train_opts oa = ry_train_defaults();
    oa.optim = c->optim;
    oa.clip_norm = c->clip_norm;
    oa.clip_value = c->clip_value;
    oa.seed = 5;
    ry_train_opts ob = ry_train_defaults();
    ob.optim = ry_optim_defaults(RY_OPTIM_SGD);
    ob.optim.lr = 0;
    ob.seed = 5;
    ry_trainer *a = make(text, &oa), *b = make(text, &ob);
    ry_error err;
    ry_param_set *pb = ry_trainer_params(b);
    ry_optimizer *ref;
    ok(ry_optim_new(&c->optim, pb, &ref, &err), &err);
    if (c->no_decay_b1) {
        ok(ry_optim_set_decay(ry_trainer_optim(a), "b1", false, &err), &err);
        ok(ry_optim_set_decay(ref, "b1", false, &err), &err);
    }
    ry_param_set *g = ry_params_like(pb);
    for (int step = 0; step < 6; step++) {
        for (int k = 0; k < calls; k++) {
            ry_value *args[2];
            mlp_batch(dt, step * calls + k, 5 + k, args);
            double la, lb;
            ok(ry_trainer_accumulate(a, 2, args, &la, &err), &err);
            ok(ry_trainer_accumulate(b, 2, args, &lb, &err), &err);
            assert_memory_equal(&la, &lb, sizeof la);
            release2(args);
        }
        /* the old apply */
        ry_params_copy(g, ry_trainer_grads(b));
        assert_int_equal(ry_params_find_nonfinite(g, NULL), -1);
        if (c->clip_value > 0) ok(ry_clip_grad_value(g, c->clip_value, &err), &err);
        if (c->clip_norm > 0) ok(ry_clip_grad_norm(g, c->clip_norm, 2.0, NULL, &err), &err);
        ok(ry_trainer_apply(b, &err), &err); /* lr 0: b's parameters stay */
        ok(ry_optim_step(ref, pb, g, &err), &err);
        /* the new one */
        ok(ry_trainer_apply(a, &err), &err);
        ry_param_set *pa = ry_trainer_params(a);
        assert_memory_equal(pa->slab->data, pb->slab->data, ry_tensor_nbytes(pa->slab));
        /* the gradients of the step, as the old path left them (clipped) */
        ry_param_set *ga = ry_trainer_grads(a);
        assert_memory_equal(ga->slab->data, g->slab->data, ry_tensor_nbytes(g->slab));
    }
    for (int s = 0; s < ry_optim_slot_count(ref); s++) {
        ry_param_set *x = ry_optim_slot(ref, s);
        ry_param_set *y = ry_optim_slot_find(ry_trainer_optim(a), ry_optim_slot_name(ref, s));
        assert_non_null(y);
        assert_memory_equal(x->slab->data, y->slab->data, ry_tensor_nbytes(x->slab));
    }
    ry_params_free(g);
    ry_optim_free(ref);
    ry_trainer_free(a);
    ry_trainer_free(b);
    free(text);
}

static config configs(int i) {
    config c;
    memset(&c, 0, sizeof c);
    switch (i) {
    case 0: /* MLP's bench configuration */
        c.optim = ry_optim_defaults(RY_OPTIM_SGD);
        c.optim.lr = 0.05;
        c.optim.momentum = 0.9;
        break;
    case 1:
        c.optim = ry_optim_defaults(RY_OPTIM_SGD);
        c.optim.lr = 0.1;
        break;
    case 2:
        c.optim = ry_optim_defaults(RY_OPTIM_SGD);
        c.optim.lr = 0.05;
        c.optim.momentum = 0.8;
        c.optim.nesterov = true;
        c.optim.weight_decay = 0.01;
        c.no_decay_b1 = true;
        c.clip_value = 0.05;
        c.clip_norm = 0.3;
        break;
    case 3: /* char-LSTM's */
        c.optim = ry_optim_defaults(RY_OPTIM_ADAM);
        c.optim.lr = 2e-3;
        c.clip_norm = 0.2;
        break;
    case 4:
        c.optim = ry_optim_defaults(RY_OPTIM_ADAMW);
        c.optim.amsgrad = true;
        break;
    case 5: /* Tree-LSTM's */
        c.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
        c.optim.lr = 0.05;
        c.optim.weight_decay = 1e-4;
        c.optim.lr_decay = 0.01;
        c.no_decay_b1 = true;
        break;
    default:
        c.optim = ry_optim_defaults(RY_OPTIM_RMSPROP);
        c.optim.momentum = 0.5;
        c.optim.centered = true;
        c.optim.weight_decay = 0.02;
        c.clip_norm = 0.5;
        break;
    }
    return c;
}

static void test_matches_old_path(void **state) {
    for (int i = 0; i < 7; i++) {
        config c = configs(i);
        for (int calls = 1; calls <= 3; calls += 2) {
            compare_with_old(RY_FLOAT32, &c, calls);
            compare_with_old(RY_FLOAT64, &c, calls);
        }
    }
}

/* ---- kernel threads: the same bits --------------------------------------
 * A layer wide enough that the optimizer's update, the NaN/Inf scan and
 * the bias gradient's sum over the batch split over the kernel threads:
 * every rule's parameters and slots after three steps are the same bits at
 * 1 and 2 threads. */
static const char *WIDE =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: w1=kaiming_uniform b1=uniform(-0.1,0.1) w2=xavier_uniform b2=zeros\n"
    "def @loss(%x: Tensor[(n, 16), float32], %y: Tensor[(n), int32], "
    "%w1: Tensor[(2560, 16), float32], %b1: Tensor[(2560), float32], "
    "%w2: Tensor[(3, 2560), float32], %b2: Tensor[(3), float32]) -> float32 {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=2560), %b1));\n"
    "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2, units=3), %b2), axis=-1);\n"
    "  %2 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n"
    "  negative(mean(sum(multiply(%1, %2), axis=[1])))\n"
    "}\n";

/* `steps` steps of config c at `threads` kernel threads; the trainer is
 * the caller's, to compare. */
static ry_trainer *wide_steps(const config *c, int threads, int steps) {
    ry_train_opts o = ry_train_defaults();
    o.optim = c->optim;
    o.clip_norm = c->clip_norm;
    o.clip_value = c->clip_value;
    o.seed = 9;
    ry_set_num_threads(threads);
    ry_trainer *tr = make(WIDE, &o);
    ry_error err;
    for (int step = 0; step < steps; step++) {
        ry_rng r;
        ry_rng_seed(&r, 300 + (uint64_t)step);
        int64_t rows = 64, xs[2] = {rows, 16};
        ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, xs), *y = ry_tensor_new(RY_INT32, 1, &rows);
        assert_non_null(x);
        assert_non_null(y);
        for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, ry_rng_normal(&r));
        for (int64_t i = 0; i < rows; i++) ry_tensor_set(y, i, (double)ry_rng_below(&r, 3));
        ry_value *args[2] = {ry_value_tensor(x), ry_value_tensor(y)};
        double loss;
        ok(ry_trainer_accumulate(tr, 2, args, &loss, &err), &err);
        ok(ry_trainer_apply(tr, &err), &err);
        release2(args);
    }
    ry_set_num_threads(1);
    return tr;
}

static void test_kernel_threads_same_bits(void **state) {
    for (int i = 0; i < 7; i++) {
        config c = configs(i);
        ry_trainer *a = wide_steps(&c, 1, 3), *b = wide_steps(&c, 2, 3);
        ry_param_set *pa = ry_trainer_params(a), *pb = ry_trainer_params(b);
        /* bitwise where split GEMMs are (test_gemm_split_exact), else to
         * rounding: everything but the GEMMs splits exactly everywhere */
        double tol = test_gemm_split_exact() ? 0 : 1e-4;
        test_assert_close(pa->slab, pb->slab, tol, tol);
        ry_optimizer *oa = ry_trainer_optim(a), *ob = ry_trainer_optim(b);
        for (int s = 0; s < ry_optim_slot_count(oa); s++) {
            ry_param_set *x = ry_optim_slot(oa, s), *y = ry_optim_slot(ob, s);
            test_assert_close(x->slab, y->slab, tol, tol);
        }
        /* the steps moved b1, whose gradient sum split */
        ry_trainer *z = wide_steps(&c, 1, 0);
        const ry_tensor *b0 = ry_trainer_params(z)->views[1], *b3 = pa->views[1];
        int moved = 0;
        for (int64_t k = 0; k < b0->size; k++) moved += ry_tensor_get(b0, k) != ry_tensor_get(b3, k);
        assert_true(moved > b0->size / 2);
        ry_trainer_free(z);
        ry_trainer_free(a);
        ry_trainer_free(b);
    }
}

/* ---- NaN / Inf: nothing changes ------------------------------------------ */

/* d/dw sum(sqrt(w)) at w = 0 is Inf while the loss is 0: the bad gradient
 * is the second parameter's, after a good one. */
static const char *INF_GRAD =
    "#[version = \"0.0.5\"]\n"
    "// data: x\n"
    "// init: a=ones w=zeros\n"
    "def @loss(%x: Tensor[(3), float32], %a: Tensor[(3), float32], %w: Tensor[(3), float32]) "
    "-> float32 {\n"
    "  add(sum(multiply(%a, %x)), sum(sqrt(%w)))\n"
    "}\n";

static void test_inf_leaves_params(void **state) {
    for (int calls = 1; calls <= 2; calls++) {
        ry_train_opts o = ry_train_defaults();
        o.optim.momentum = 0.9;
        o.clip_norm = calls == 2 ? 1.0 : 0;
        ry_trainer *tr = make(INF_GRAD, &o);
        int64_t three = 3;
        ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, &three);
        for (int i = 0; i < 3; i++) ry_tensor_set(x, i, i + 1);
        ry_value *arg = ry_value_tensor(x);
        ry_param_set *p = ry_trainer_params(tr);
        ry_param_set *before = ry_params_like(p);
        ry_params_copy(before, p);
        ry_error err;
        double l;
        for (int k = 0; k < calls; k++) ok(ry_trainer_accumulate(tr, 1, &arg, &l, &err), &err);
        assert_int_equal(ry_trainer_apply(tr, &err), RY_ERR);
        assert_non_null(strstr(err.msg, "parameter %w is Inf at element 0"));
        assert_memory_equal(before->slab->data, p->slab->data, ry_tensor_nbytes(p->slab));
        assert_int_equal(ry_optim_step_count(ry_trainer_optim(tr)), 0);
        /* the step is dropped; the next one starts afresh and fails alike */
        assert_int_equal(ry_trainer_step(tr, 1, &arg, &l, &err), RY_ERR);
        assert_memory_equal(before->slab->data, p->slab->data, ry_tensor_nbytes(p->slab));
        ry_params_free(before);
        ry_value_release(arg);
        ry_trainer_free(tr);
    }
}

/* d/da sum(a b) = b and d/db = a: the program may hand back the parameter
 * tensors themselves, which the update must not read after writing. */
static const char *CROSS =
    "#[version = \"0.0.5\"]\n"
    "// data: x\n"
    "// init: a=normal(1) b=normal(1)\n"
    "def @loss(%x: Tensor[(3), float32], %a: Tensor[(3), float32], %b: Tensor[(3), float32]) "
    "-> float32 {\n"
    "  add(sum(multiply(%a, %b)), sum(%x))\n"
    "}\n";

static void test_grads_alias_params(void **state) {
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    ry_trainer *tr = make(CROSS, &o);
    int64_t three = 3;
    ry_value *x = ry_value_tensor(ry_tensor_zeros(RY_FLOAT32, 1, &three));
    ry_param_set *p = ry_trainer_params(tr);
    for (int step = 0; step < 3; step++) {
        float a[3], b[3], neg = (float)-0.1;
        memcpy(a, p->views[0]->data, sizeof a);
        memcpy(b, p->views[1]->data, sizeof b);
        ry_error err;
        double l;
        ok(ry_trainer_step(tr, 1, &x, &l, &err), &err);
        for (int i = 0; i < 3; i++) {
            float wa = a[i] + neg * b[i], wb = b[i] + neg * a[i];
            assert_memory_equal(&((float *)p->views[0]->data)[i], &wa, sizeof wa);
            assert_memory_equal(&((float *)p->views[1]->data)[i], &wb, sizeof wb);
        }
    }
    ry_value_release(x);
    ry_trainer_free(tr);
}

/* ---- row-sparse gradients against dense ones ------------------------------ */

static const char *EMB =
    "#[version = \"0.0.5\"]\n"
    "// data: ids y\n"
    "// init: emb=normal(0.5) w=normal(1) b=zeros\n"
    "def @loss(%ids: Tensor[(n), int32], %y: Tensor[(n), float64], %emb: Tensor[(40, 3), "
    "float64], %w: Tensor[(3), float64], %b: Tensor[(1), float64]) -> float64 {\n"
    "  %0 = take(%emb, %ids, axis=0);\n"
    "  %1 = add(sum(multiply(%0, %w), axis=[1]), %b);\n"
    "  %2 = subtract(%1, %y);\n"
    "  mean(multiply(%2, %2))\n"
    "}\n";

/* Call c: 6 ids among the first 20 rows (repeats likely), targets normal. */
static void emb_batch(int c, ry_value **args) {
    ry_rng r;
    ry_rng_seed(&r, 900 + (uint64_t)c);
    int64_t n = 6;
    ry_tensor *ids = ry_tensor_new(RY_INT32, 1, &n), *y = ry_tensor_new(RY_FLOAT64, 1, &n);
    for (int64_t i = 0; i < n; i++) {
        ry_tensor_set(ids, i, (double)ry_rng_below(&r, 20));
        ry_tensor_set(y, i, ry_rng_normal(&r));
    }
    args[0] = ry_value_tensor(ids);
    args[1] = ry_value_tensor(y);
}

static void sparse_vs_dense(const config *c, int calls, bool expect_rows) {
    ry_train_opts o = ry_train_defaults();
    o.optim = c->optim;
    o.clip_norm = c->clip_norm;
    o.clip_value = c->clip_value;
    o.seed = 3;
    ry_trainer *sp = make(EMB, &o);
    o.dense_grads = true;
    ry_trainer *de = make(EMB, &o);
    ry_error err;
    for (int step = 0; step < 5; step++) {
        for (int k = 0; k < calls; k++) {
            ry_value *args[2];
            emb_batch(step * calls + k, args);
            double l1, l2;
            ok(ry_trainer_accumulate(sp, 2, args, &l1, &err), &err);
            ok(ry_trainer_accumulate(de, 2, args, &l2, &err), &err);
            release2(args);
        }
        ok(ry_trainer_apply(sp, &err), &err);
        ok(ry_trainer_apply(de, &err), &err);
        int64_t rows = ry_trainer_grad_rows(sp, 0);
        if (expect_rows) assert_true(rows > 0 && rows <= 20);
        assert_int_equal(ry_trainer_grad_rows(de, 0), -1);
        assert_int_equal(ry_trainer_grad_rows(sp, 1), -1); /* w is dense */
        /* one call: the same bits; several: the slices add in another
         * order than a dense scatter-add, so to rounding */
        ry_param_set *a = ry_trainer_params(sp), *b = ry_trainer_params(de);
        if (calls == 1)
            assert_memory_equal(a->slab->data, b->slab->data, ry_tensor_nbytes(a->slab));
        else
            test_assert_close(a->slab, b->slab, 1e-12, 1e-12);
        test_assert_close(ry_trainer_grads(sp)->slab, ry_trainer_grads(de)->slab, 1e-12, 1e-12);
    }
    /* the rows no call touched kept their initial values in both */
    ry_param_set *a = ry_trainer_params(sp);
    ry_trainer *fresh = make(EMB, &o);
    const ry_tensor *e0 = ry_trainer_params(fresh)->views[0], *e = a->views[0];
    if (ry_optim_zero_grad_is_identity(ry_trainer_optim(sp), 0))
        assert_memory_equal((const double *)e->data + 20 * 3, (const double *)e0->data + 20 * 3,
                            20 * 3 * sizeof(double));
    ry_trainer_free(fresh);
    ry_trainer_free(sp);
    ry_trainer_free(de);
}

static void test_sparse_matches_dense(void **state) {
    /* which of these the engine gives row-sparse: the embedding's, always */
    for (int i = 0; i < 5; i++) {
        config c;
        memset(&c, 0, sizeof c);
        if (i == 0) { /* rows only */
            c.optim = ry_optim_defaults(RY_OPTIM_SGD);
            c.optim.lr = 0.3;
        } else if (i == 1) { /* rows only, clipped by norm and value */
            c.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
            c.optim.lr = 0.2;
            c.clip_norm = 0.4;
            c.clip_value = 0.3;
        } else if (i == 2) { /* densified: momentum decays untouched rows */
            c.optim = ry_optim_defaults(RY_OPTIM_SGD);
            c.optim.lr = 0.1;
            c.optim.momentum = 0.9;
        } else if (i == 3) { /* densified: decay */
            c.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
            c.optim.weight_decay = 0.1;
        } else {
            c.optim = ry_optim_defaults(RY_OPTIM_ADAM);
            c.optim.lr = 0.05;
            c.clip_norm = 0.5;
        }
        for (int calls = 1; calls <= 3; calls += 2) sparse_vs_dense(&c, calls, true);
    }
}

/* ---- threads -------------------------------------------------------------- */

static const char *TREE = TEST_TREE_TEXT;

static const char *TREES = "(1 (0 a) (1 (0 very) (1 good)))\n"
                           "(0 (0 a) (0 (0 very) (0 bad)))\n"
                           "(1 (1 good) (0 film))\n"
                           "(0 (0 bad) (0 film))\n"
                           "(1 (0 (0 not) (0 bad)) (1 good))\n"
                           "(0 (0 film) (0 (0 very) (0 bad)))\n"
                           "(1 (0 very) (1 good))\n"
                           "(0 (0 not) (0 film))\n";

typedef struct trees {
    ry_vocab *v;
    ry_treebank *tb;
} trees;

static void trees_load(trees *t) {
    ry_error err;
    t->v = ry_vocab_new();
    ok(ry_treebank_parse("trees", TREES, strlen(TREES), t->v, true, &t->tb, &err), &err);
}

static void trees_free(trees *t) {
    ry_treebank_free(t->tb);
    ry_vocab_free(t->v);
}

/* 4 steps of 7 trees each through accumulate_n on `threads` workers (0:
 * ry_trainer_accumulate one by one); the parameters and losses. */
static void tree_steps(int threads, ry_param_set *out, double *losses) {
    trees t;
    trees_load(&t);
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    o.optim.lr = 0.2;
    o.seed = 2;
    o.threads = threads > 0 ? threads : 1;
    /* the workers' bit-for-bit contract; batched calls match to rounding
     * (test_autobatch.c) */
    o.no_autobatch = true;
    ry_trainer *tr = make(TREE, &o);
    ry_tree_source src;
    ry_train_data d;
    ry_error err;
    ok(ry_train_data_trees(tr, t.tb, &src, &d, &err), &err);
    for (int step = 0; step < 4; step++) {
        ry_value *v[7];
        for (int j = 0; j < 7; j++) {
            int64_t idx = (step * 7 + j) % t.tb->ntrees;
            ok(d.fetch(&d, &idx, 1, &v[j], &err), &err);
        }
        if (threads > 0)
            ok(ry_trainer_accumulate_n(tr, 7, 1, v, losses + step * 7, &err), &err);
        else
            for (int j = 0; j < 7; j++)
                ok(ry_trainer_accumulate(tr, 1, &v[j], &losses[step * 7 + j], &err), &err);
        for (int j = 0; j < 7; j++) ry_value_release(v[j]);
        ok(ry_trainer_apply(tr, &err), &err);
    }
    ry_params_copy(out, ry_trainer_params(tr));
    ry_trainer_free(tr);
    trees_free(&t);
}

static void test_threads_match_serial(void **state) {
    ry_trainer *shape = make(TREE, NULL);
    ry_param_set *serial = ry_params_like(ry_trainer_params(shape));
    ry_param_set *par = ry_params_like(serial);
    ry_trainer_free(shape);
    double l0[28], l1[28];
    tree_steps(0, serial, l0);
    for (int threads = 1; threads <= 3; threads++) {
        memset(l1, 0, sizeof l1);
        tree_steps(threads, par, l1);
        assert_memory_equal(serial->slab->data, par->slab->data, ry_tensor_nbytes(par->slab));
        assert_memory_equal(l0, l1, sizeof l0);
    }
    ry_params_free(serial);
    ry_params_free(par);
}

/* A failing call (a tensor given for a tree) stops the batch with its
 * error, drops the step and leaks nothing. */
static void test_threads_error(void **state) {
    trees t;
    trees_load(&t);
    ry_train_opts o = ry_train_defaults();
    o.threads = 2;
    ry_trainer *tr = make(TREE, &o);
    ry_tree_source src;
    ry_train_data d;
    ry_error err;
    ok(ry_train_data_trees(tr, t.tb, &src, &d, &err), &err);
    ry_value *v[5];
    for (int j = 0; j < 5; j++) {
        int64_t idx = j;
        ok(d.fetch(&d, &idx, 1, &v[j], &err), &err);
    }
    /* call 3 gets a tensor where a Tree goes */
    ry_value *tree3 = v[3];
    v[3] = ry_value_tensor(ry_tensor_scalar(RY_INT32, 1));
    ry_param_set *p = ry_trainer_params(tr);
    ry_param_set *before = ry_params_like(p);
    ry_params_copy(before, p);
    assert_int_equal(ry_trainer_accumulate_n(tr, 5, 1, v, NULL, &err), RY_ERR);
    assert_int_equal(ry_trainer_apply(tr, &err), RY_ERR); /* the step was dropped */
    assert_memory_equal(before->slab->data, p->slab->data, ry_tensor_nbytes(p->slab));
    /* the trainer still works */
    ry_value_release(v[3]);
    v[3] = tree3;
    ok(ry_trainer_accumulate_n(tr, 5, 1, v, NULL, &err), &err);
    ok(ry_trainer_apply(tr, &err), &err);
    assert_int_equal(ry_trainer_accumulate_n(tr, 0, 1, v, NULL, &err), RY_ERR);
    assert_int_equal(ry_trainer_accumulate_n(tr, 1, 2, v, NULL, &err), RY_ERR);
    for (int j = 0; j < 5; j++) ry_value_release(v[j]);
    ry_params_free(before);
    ry_trainer_free(tr);
    trees_free(&t);
}

/* ---- a threaded tree fit resumes exactly --------------------------------- */

static void tree_fit(const char *dir, int threads, int64_t steps, bool resume, ry_param_set *out) {
    trees t;
    trees_load(&t);
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    o.optim.lr = 0.2;
    o.seed = 4;
    o.threads = threads;
    ry_trainer *tr = make(TREE, &o);
    ry_tree_source src;
    ry_train_data d;
    ry_error err;
    ok(ry_train_data_trees(tr, t.tb, &src, &d, &err), &err);
    ry_fit_opts fo = {.max_steps = steps, .batch = 3, .seed = 8, .checkpoint_dir = dir,
                      .resume = resume, .progress = RY_PROGRESS_QUIET};
    ok(ry_train_fit(tr, &d, NULL, &fo, NULL, &err), &err);
    assert_int_equal(ry_trainer_steps(tr), steps);
    ry_params_copy(out, ry_trainer_params(tr));
    ry_trainer_free(tr);
    trees_free(&t);
}

static void test_threaded_resume(void **state) {
    char d1[64], d2[64];
    snprintf(d1, sizeof d1, "build-test-hot-a-%d", (int)getpid());
    snprintf(d2, sizeof d2, "build-test-hot-b-%d", (int)getpid());
    rm_dir(d1);
    rm_dir(d2);
    ry_trainer *shape = make(TREE, NULL);
    ry_param_set *once = ry_params_like(ry_trainer_params(shape));
    ry_param_set *twice = ry_params_like(once), *serial = ry_params_like(once);
    ry_trainer_free(shape);
    tree_fit(d1, 2, 7, false, once);
    tree_fit(d2, 2, 3, false, twice); /* mid-epoch */
    tree_fit(d2, 2, 7, true, twice);
    assert_memory_equal(once->slab->data, twice->slab->data, ry_tensor_nbytes(once->slab));
    rm_dir(d1);
    tree_fit(d1, 1, 7, false, serial);
    assert_memory_equal(once->slab->data, serial->slab->data, ry_tensor_nbytes(once->slab));
    ry_params_free(once);
    ry_params_free(twice);
    ry_params_free(serial);
    rm_dir(d1);
    rm_dir(d2);
}

/* ---- relayc train --threads, --profile ------------------------------------- */

/* The relayc command: $RELAYC (make test sets it), else the one beside
 * this test's build folder. */
static void relayc_path(char *buf, size_t n) {
    const char *env = getenv("RELAYC");
    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    char self[512];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(k > 0);
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    assert_non_null(slash);
    *slash = '\0'; /* .../tests */
    snprintf(buf, n, "%s/../relayc", self);
    if (access(buf, X_OK) != 0) fail_msg("no relayc at %s: build it (make) or set RELAYC", buf);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    fclose(f);
    return strdup(buf);
}

static void test_cli_threads(void **state) {
    char relayc[600], dir[64], p[256], cmd[2048];
    relayc_path(relayc, sizeof relayc);
    snprintf(dir, sizeof dir, "build-test-hot-cli-%d", (int)getpid());
    rm_dir(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(p, sizeof p, "%s/tree.relay", dir);
    write_file(p, TREE);
    snprintf(p, sizeof p, "%s/train.txt", dir);
    write_file(p, TREES);
    snprintf(p, sizeof p, "%s/dev.txt", dir);
    write_file(p, TREES);
    char *out[2];
    for (int t = 1; t <= 2; t++) {
        snprintf(cmd, sizeof cmd,
                 "%s train %s/tree.relay --data sst:%s --steps 5 --batch 3 --optimizer adagrad "
                 "--lr 0.2 --quiet --threads %d > %s/out%d.txt 2>&1",
                 relayc, dir, dir, t, dir, t);
        assert_int_equal(system(cmd), 0);
        snprintf(p, sizeof p, "%s/out%d.txt", dir, t);
        out[t - 1] = read_all(p);
        assert_non_null(strstr(out[t - 1], "steps 5, final training loss"));
    }
    assert_string_equal(out[0], out[1]); /* the same losses to the last digit */
    free(out[0]);
    free(out[1]);
    /* --profile: the operator call sites after training, on stderr */
    snprintf(cmd, sizeof cmd,
             "%s train %s/tree.relay --data sst:%s --steps 2 --batch 3 --optimizer adagrad --quiet "
             "--profile > %s/out_prof.txt 2>&1",
             relayc, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/out_prof.txt", dir);
    char *prof = read_all(p);
    assert_non_null(strstr(prof, "us/call"));
    assert_non_null(strstr(prof, "tree.relay:"));
    assert_non_null(strstr(prof, "ms in operators"));
    free(prof);
    snprintf(cmd, sizeof cmd,
             "%s train %s/tree.relay --data sst:%s --steps 2 --profile --engine interp > %s/out_prof.txt 2>&1",
             relayc, dir, dir, dir);
    assert_int_not_equal(system(cmd), 0);
    prof = read_all(p);
    assert_non_null(strstr(prof, "--profile needs the compiled engine (--engine vm)"));
    free(prof);
    snprintf(cmd, sizeof cmd, "%s train %s/tree.relay --data sst:%s --threads two > /dev/null 2>&1",
             relayc, dir, dir);
    assert_int_not_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s train %s/tree.relay --data sst:%s --threads 65 > /dev/null 2>&1",
             relayc, dir, dir);
    assert_int_not_equal(system(cmd), 0);
    rm_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_old_path),
        cmocka_unit_test(test_inf_leaves_params),
        cmocka_unit_test(test_grads_alias_params),
        cmocka_unit_test(test_sparse_matches_dense),
        cmocka_unit_test(test_kernel_threads_same_bits),
        cmocka_unit_test(test_threads_match_serial),
        cmocka_unit_test(test_threads_error),
        cmocka_unit_test(test_threaded_resume),
        cmocka_unit_test(test_cli_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
