/*
 * test_dist.c: data-parallel training, run under mpirun (make test-mpi:
 * 2 and 3 ranks). Every rank runs every test; each compares the job's
 * parameters with a fit it runs alone (ry_fit_opts.local), so that a
 * pass on every rank also means every rank holds the same parameters.
 * With deterministic shards the comparison is bit for bit; without, to
 * rounding. Resuming crosses rank counts both ways; a failure on one rank
 * stops all of them with its message; evaluation is sharded.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/comm.h"
#include "relayc/dist.h"
#include "relayc/train.h"
#include "test_texts.h"
#include "test_util.h"

/* The MLP of tests/test_train.c. */
static const char *MLP = TEST_MLP_TEXT;

#define SHARDS 6 /* divisible by 1, 2 and 3 ranks */

static ry_tensor *arrays[2];
static ry_train_data data;

/* The device the device cases train on (RELAYC_TEST_TARGET, else
 * opencl); NULL where this build or machine has none. */
static const ry_target *dev;

/* The MLP with SGD and momentum, on target t (NULL: the CPU). */
static ry_trainer *make_on(const ry_target *t) {
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    o.threads = 1;
    o.target = t;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("mlp.relay", MLP, strlen(MLP), &o, &tr, &err)) fail_msg("trainer: %s", err.msg);
    return tr;
}

static ry_trainer *make(void) { return make_on(NULL); }

/* text with every `from` replaced by `to` (ry_free). */
static char *substitute(const char *text, const char *from, const char *to) {
    size_t cap = 2 * strlen(text) + 1024, len = 0;
    char *out = ry_malloc(cap);
    assert_non_null(out);
    for (const char *p = text; *p;) {
        if (from && strncmp(p, from, strlen(from)) == 0) {
            len += (size_t)snprintf(out + len, cap - len, "%s", to);
            p += strlen(from);
        } else
            out[len++] = *p++;
    }
    out[len] = 0;
    return out;
}

/* The MLP with 9 hidden units: a slab of 112 floats (48 + 16 + 32 + 16,
 * each view padded to 64 bytes), which 3 ranks slice unevenly (37, 37,
 * 38) and 2 ranks cut inside b1. */
static char *mlp9(void) {
    static const char *from[4] = {"(8, 4)", "(8)", "(3, 8)", "units=8"};
    static const char *to[4] = {"(9, 4)", "(9)", "(3, 9)", "units=9"};
    char *t = substitute(MLP, NULL, NULL);
    for (int i = 0; i < 4; i++) {
        char *u = substitute(t, from[i], to[i]);
        ry_free(t);
        t = u;
    }
    return t;
}

/* The 9-unit MLP with Adam (weight decay, exempting b1) or SGD with
 * momentum and Nesterov; clip_norm > 0: clipped. */
static ry_trainer *make9(bool adam, double clip_norm) {
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(adam ? RY_OPTIM_ADAM : RY_OPTIM_SGD);
    o.optim.lr = adam ? 0.01 : 0.1;
    o.optim.weight_decay = 0.01;
    if (!adam) {
        o.optim.momentum = 0.9;
        o.optim.nesterov = true;
    }
    o.clip_norm = clip_norm;
    o.threads = 1;
    ry_trainer *tr = NULL;
    ry_error err;
    char *text = mlp9();
    if (ry_trainer_new("mlp9.relay", text, strlen(text), &o, &tr, &err))
        fail_msg("trainer: %s", err.msg);
    ry_free(text);
    if (adam && ry_optim_set_decay(ry_trainer_optim(tr), "b1", false, &err)) fail_msg("%s", err.msg);
    return tr;
}

static ry_fit_opts fit_opts(int64_t steps, int64_t batch) {
    ry_fit_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.max_steps = steps;
    fo.batch = batch;
    fo.seed = 7;
    fo.progress = RY_PROGRESS_QUIET;
    return fo;
}

static void fit(ry_trainer *tr, const ry_fit_opts *fo, ry_fit_result *res) {
    ry_error err;
    if (ry_train_fit(tr, &data, NULL, fo, res, &err)) fail_msg("fit: %s", err.msg);
}

static void barrier(void) {
    ry_error err;
    assert_int_equal(ry_comm_barrier("the test's barrier", 0, &err), RY_OK);
}

/* tr's parameter slab in host memory (a new reference; a device's copied) */
static ry_tensor *host_slab(ry_trainer *tr) {
    ry_tensor *h = NULL;
    ry_error err;
    if (ry_tensor_to(ry_target_cpu(), ry_trainer_params(tr)->slab, &h, &err)) fail_msg("%s", err.msg);
    return h;
}

static void assert_same_bits(ry_trainer *a, ry_trainer *b) {
    ry_tensor *x = host_slab(a), *y = host_slab(b);
    assert_int_equal(x->size, y->size);
    assert_memory_equal(x->data, y->data, ry_tensor_nbytes(x));
    ry_tensor_release(x);
    ry_tensor_release(y);
}

static void assert_close(ry_trainer *a, ry_trainer *b) {
    ry_tensor *x = host_slab(a), *y = host_slab(b);
    assert_int_equal(x->size, y->size);
    for (int64_t i = 0; i < x->size; i++) {
        double u = ry_tensor_get(x, i), v = ry_tensor_get(y, i);
        if (fabs(u - v) > 1e-5 + 1e-4 * fabs(v)) fail_msg("element %lld: %g vs %g", (long long)i, u, v);
    }
    ry_tensor_release(x);
    ry_tensor_release(y);
}

/* A directory every rank names alike: rank 0's pid, broadcast. */
static const char *shared_dir(char *buf, size_t n, const char *tag) {
    int pid = (int)getpid();
    ry_error err;
    assert_int_equal(ry_comm_bcast(&pid, sizeof pid, 0, "the test's pid", 0, &err), RY_OK);
    snprintf(buf, n, "build-test-dist-%s-%d", tag, pid);
    return buf;
}

/* ---- the same parameters ---- */

/* batch 12: six equal shards; batch 10: unequal ones, weighted by size;
 * 64 examples: an epoch ends in a partial batch either way. */
static void det_bitwise(int64_t batch) {
    ry_trainer *job = make(), *one = make();
    ry_fit_opts fo = fit_opts(8, batch);
    fo.deterministic = true;
    fo.shards = SHARDS;
    ry_fit_result r1, r2;
    fit(job, &fo, &r1);
    fo.local = true;
    fit(one, &fo, &r2);
    assert_int_equal(r1.steps, 8);
    assert_same_bits(job, one);
    assert_true(r1.last_loss == r2.last_loss);
    ry_trainer_free(job);
    ry_trainer_free(one);
}

static void test_deterministic_equal_shards(void **state) { det_bitwise(12); }
static void test_deterministic_unequal_shards(void **state) { det_bitwise(10); }

/* The all-reduce equals one process taking the batch in one call: in one
 * bucket, in 10-float buckets started as the backward pass finishes
 * their gradients (most of them before it ends), and after it. */
static void test_allreduce_to_rounding(void **state) {
    for (int run = 0; run < 3; run++) {
        ry_trainer *job = make(), *one = make();
        ry_fit_opts fo = fit_opts(8, 12);
        fo.bucket_bytes = run == 1 ? 40 : 0;
        fo.no_overlap = run == 2;
        ry_fit_result r1, r2;
        fit(job, &fo, &r1);
        if (run == 1) assert_true(r1.dist_overlap > 0.5);
        if (run == 2) assert_true(r1.dist_overlap == 0);
        assert_true(r1.dist_bytes == 96 * 4 && r1.dist_step_s > 0);
        fo.local = true;
        fit(one, &fo, &r2);
        assert_close(job, one);
        assert_true(fabs(r1.last_loss - r2.last_loss) < 1e-5);
        ry_trainer_free(job);
        ry_trainer_free(one);
    }
}

/* Small buckets: the slab reduced in many pieces, same bits. */
static void test_buckets(void **state) {
    ry_trainer *job = make(), *one = make();
    ry_fit_opts fo = fit_opts(4, 12);
    fo.deterministic = true;
    fo.shards = SHARDS;
    fo.bucket_bytes = 40; /* 10 floats */
    ry_fit_result r;
    fit(job, &fo, &r);
    fo.local = true;
    fo.bucket_bytes = 0;
    fit(one, &fo, &r);
    assert_same_bits(job, one);
    ry_trainer_free(job);
    ry_trainer_free(one);
}

/* ---- on a device: the slab reduced through host copies ---- */

/* The CPU's part of a device case has run; without a device the rest
 * skips, saying so once. */
static void need_device(void) {
    if (dev) return;
    if (ry_dist_rank() == 0)
        fprintf(stderr, "test_dist: no %s device: its case skips (the CPU's part ran)\n",
                test_device_target());
    skip();
}

/* A device case's CPU part: fo's job and one process alone on the CPU,
 * their parameters bit for bit (bits) or to rounding; kept for the
 * device's comparisons. */
typedef struct cpu_part {
    ry_trainer *job, *one;
    ry_fit_result rj, ro;
} cpu_part;

static cpu_part cpu_runs(ry_fit_opts fo, bool bits) {
    cpu_part c = {.job = make(), .one = make()};
    fit(c.job, &fo, &c.rj);
    fo.local = true;
    fit(c.one, &fo, &c.ro);
    if (bits)
        assert_same_bits(c.job, c.one);
    else
        assert_close(c.job, c.one);
    return c;
}

static void cpu_free(cpu_part *c) {
    ry_trainer_free(c->job);
    ry_trainer_free(c->one);
}

/* The bytes the job copied to and from the device per step (fit of job,
 * steps steps), the target's counters around it. */
static void fit_counted(ry_trainer *job, const ry_fit_opts *fo, ry_fit_result *r, int64_t *down,
                        int64_t *up) {
    ry_device_counters c0, c1;
    ry_target_counters(dev, &c0);
    fit(job, fo, r);
    ry_target_counters(dev, &c1);
    *down = (c1.bytes_to_host - c0.bytes_to_host) / r->steps;
    *up = (c1.bytes_to_device - c0.bytes_to_device) / r->steps;
}

/* Deterministic shards (unequal: batch 10 in 6, scaled on the device):
 * the job on the device gives one device process's bits with the same
 * shards, and the CPU job's parameters to rounding; each step copies this
 * rank's shards' gradients down and the sum up. */
static void test_device_deterministic_bitwise(void **state) {
    ry_fit_opts fo = fit_opts(6, 10);
    fo.deterministic = true;
    fo.shards = SHARDS;
    cpu_part c = cpu_runs(fo, true);
    if (!dev) cpu_free(&c);
    need_device();
    ry_trainer *job = make_on(dev), *one = make_on(dev);
    int64_t down, up, slab = (int64_t)ry_tensor_nbytes(ry_trainer_params(job)->slab);
    ry_fit_result r1, r2;
    fit_counted(job, &fo, &r1, &down, &up);
    fo.local = true;
    fit(one, &fo, &r2);
    assert_same_bits(job, one);
    assert_true(r1.last_loss == r2.last_loss);
    assert_close(job, c.job);
    if (ry_dist_rank() == 0)
        fprintf(stderr, "test_dist: %s, %d ranks, deterministic: %lld bytes down and %lld up per "
                "step (gradient slab %lld)\n", test_device_target(), ry_dist_size(),
                (long long)down, (long long)up, (long long)slab);
    assert_true(down >= slab * (SHARDS / ry_dist_size()) && up >= slab);
    ry_trainer_free(job);
    ry_trainer_free(one);
    cpu_free(&c);
}

/* The all-reduce (MPI_Allreduce of the slab's host copy) against one CPU
 * process taking the batch in one call, as test_allreduce_to_rounding;
 * --shard-optimizer on a device is refused by name. */
static void test_device_allreduce(void **state) {
    ry_fit_opts fo = fit_opts(6, 12);
    cpu_part c = cpu_runs(fo, false);
    if (!dev) cpu_free(&c);
    need_device();
    ry_trainer *job = make_on(dev);
    int64_t down, up, slab = (int64_t)ry_tensor_nbytes(ry_trainer_params(job)->slab);
    ry_fit_result r1;
    fit_counted(job, &fo, &r1, &down, &up);
    assert_close(job, c.one);
    assert_true(fabs(r1.last_loss - c.ro.last_loss) < 1e-5);
    assert_true(r1.dist_overlap == 0); /* the slab reaches the host after the call */
    assert_true(down >= slab && up >= slab);
    ry_trainer_free(job);
    cpu_free(&c);
    job = make_on(dev);
    fo.shard_optimizer = true;
    ry_error err;
    assert_int_equal(ry_train_fit(job, &data, NULL, &fo, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "--shard-optimizer on target"));
    ry_trainer_free(job);
}

/* ---- the sharded optimizer (ZeRO-1) ---- */

/* Every slot of a and b, bit for bit (after a sharded fit the state is
 * whole again). */
static void assert_same_state(ry_trainer *a, ry_trainer *b) {
    ry_optimizer *oa = ry_trainer_optim(a), *ob = ry_trainer_optim(b);
    assert_false(ry_optim_shard_range(oa, NULL, NULL));
    assert_int_equal(ry_optim_slot_count(oa), ry_optim_slot_count(ob));
    assert_true(ry_optim_slot_count(oa) > 0);
    for (int s = 0; s < ry_optim_slot_count(oa); s++) {
        const ry_tensor *x = ry_optim_slot(oa, s)->slab, *y = ry_optim_slot(ob, s)->slab;
        assert_memory_equal(x->data, y->data, ry_tensor_nbytes(x));
    }
    const ry_tensor *x = ry_optim_steps(oa)->slab, *y = ry_optim_steps(ob)->slab;
    assert_memory_equal(x->data, y->data, ry_tensor_nbytes(x));
}

/* Sharded on N ranks vs unsharded on N ranks and in one process, with
 * the same shards: the same parameters and state, bit for bit. */
static void zero_bitwise(bool adam, int64_t batch) {
    ry_trainer *zero = make9(adam, 0), *plain = make9(adam, 0), *one = make9(adam, 0);
    ry_fit_opts fo = fit_opts(7, batch);
    fo.deterministic = true;
    fo.shards = SHARDS;
    fo.bucket_bytes = 44; /* 11 floats: several rounds per slice */
    ry_fit_result r1, r2, r3;
    fo.shard_optimizer = true;
    fit(zero, &fo, &r1);
    fo.shard_optimizer = false;
    fit(plain, &fo, &r2);
    fo.local = true;
    fit(one, &fo, &r3);
    assert_same_bits(zero, plain);
    assert_same_bits(zero, one);
    assert_same_state(zero, one);
    assert_true(r1.last_loss == r3.last_loss);
    ry_trainer_free(zero);
    ry_trainer_free(plain);
    ry_trainer_free(one);
}

static void test_zero_adam_bitwise(void **state) { zero_bitwise(true, 12); }
static void test_zero_sgd_momentum_bitwise(void **state) { zero_bitwise(false, 10); }

/* Without --deterministic (MPI_Reduce_scatter) and with clipping by
 * norm (norms summed from the slices): to rounding. */
static void test_zero_to_rounding(void **state) {
    for (int clip = 0; clip < 2; clip++) {
        ry_trainer *zero = make9(true, clip ? 0.05 : 0), *one = make9(true, clip ? 0.05 : 0);
        ry_fit_opts fo = fit_opts(6, 12);
        fo.deterministic = clip;
        fo.shards = clip ? SHARDS : 0;
        fo.shard_optimizer = true;
        ry_fit_result r;
        fit(zero, &fo, &r);
        fo.local = true;
        fit(one, &fo, &r);
        assert_close(zero, one);
        ry_trainer_free(zero);
        ry_trainer_free(one);
    }
}

/* A sharded job checkpoints at step 3 (the slices gathered onto rank
 * 0); one process resumes it unsharded to 7, and the job resumes it
 * sharded to 7: both the bits of 7 straight steps. */
static void test_zero_checkpoint_resume(void **state) {
    char dir[128];
    shared_dir(dir, sizeof dir, "zero");
    if (ry_dist_rank() == 0) rm_dir(dir);
    barrier();
    ry_trainer *job = make9(true, 0);
    ry_fit_opts fo = fit_opts(3, 10);
    fo.deterministic = true;
    fo.shards = SHARDS;
    fo.checkpoint_dir = dir;
    fo.keep = 10;
    fo.shard_optimizer = true;
    ry_fit_result r;
    fit(job, &fo, &r);
    ry_trainer_free(job);
    ry_trainer *straight = make9(true, 0), *again = make9(true, 0);
    ry_fit_opts so = fo;
    so.checkpoint_dir = NULL;
    so.local = true;
    so.max_steps = 7;
    so.shard_optimizer = false;
    fit(straight, &so, &r);
    if (ry_dist_rank() == 0) {
        ry_trainer *resumed = make9(true, 0);
        ry_fit_opts ro = fo;
        ro.local = true;
        ro.max_steps = 7;
        ro.resume = true;
        ro.shard_optimizer = false;
        fit(resumed, &ro, &r);
        assert_int_equal(r.steps, 7);
        assert_same_bits(resumed, straight);
        assert_same_state(resumed, straight);
        ry_trainer_free(resumed);
        /* back to the 3-step checkpoint for the job */
        char p[256];
        snprintf(p, sizeof p, "%s/ckpt-7.h5", dir);
        unlink(p);
    }
    barrier();
    fo.max_steps = 7;
    fo.resume = true;
    fit(again, &fo, &r);
    assert_int_equal(r.steps, 7);
    assert_same_bits(again, straight);
    assert_same_state(again, straight);
    ry_trainer_free(again);
    ry_trainer_free(straight);
    barrier();
    if (ry_dist_rank() == 0) rm_dir(dir);
}

/* ---- LeNet and the Tree-LSTM of models/ ---- */

/* The file at path with every `from` replaced by `to` (ry_free). */
static char *read_model(const char *path, const char *from, const char *to) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return substitute(buf, from, to);
}

/* The optimizers of these tests: SGD with momentum, Adam, and plain SGD,
 * whose update of a zero gradient row is the identity (so the optimizer
 * updates the touched rows only). */
enum { OPT_MOMENTUM, OPT_ADAM, OPT_SGD };

static ry_trainer *make_text(const char *name, const char *text, int opt) {
    bool adam = opt == OPT_ADAM;
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(adam ? RY_OPTIM_ADAM : RY_OPTIM_SGD);
    o.optim.lr = adam ? 1e-3 : 0.05;
    o.optim.momentum = opt == OPT_MOMENTUM ? 0.9 : 0;
    o.threads = 1;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new(name, text, strlen(text), &o, &tr, &err)) fail_msg("trainer: %s", err.msg);
    return tr;
}

/* A trainer's data: some models' values belong to its own module. */
typedef void (*data_fn)(ry_trainer *tr, void *ctx, ry_train_data *out, ry_tree_source *src);

/* One process, the job, and the job with the optimizer sharded, with the
 * same shards: the same bits. bytes (if not NULL): the bytes per step
 * the job's rank handed to the reduction, unsharded and sharded. */
static void model_bitwise(const char *name, const char *text, int opt, data_fn data_of,
                          void *ctx, int64_t steps, int64_t batch, int64_t bytes[2]) {
    ry_trainer *tr[3];
    ry_train_data d[3];
    ry_tree_source src[3];
    ry_fit_result r[3];
    ry_error err;
    for (int i = 0; i < 3; i++) {
        tr[i] = make_text(name, text, opt);
        data_of(tr[i], ctx, &d[i], &src[i]);
    }
    ry_fit_opts fo = fit_opts(steps, batch);
    fo.deterministic = true;
    fo.shards = SHARDS;
    for (int i = 0; i < 3; i++) {
        fo.shard_optimizer = i == 1;
        fo.local = i == 2;
        if (ry_train_fit(tr[i], &d[i], NULL, &fo, &r[i], &err)) fail_msg("%s", err.msg);
    }
    assert_int_equal(r[0].steps, steps);
    for (int i = 0; i < 2; i++) {
        assert_same_bits(tr[i], tr[2]);
        assert_true(r[i].last_loss == r[2].last_loss);
    }
    if (bytes) bytes[0] = r[0].dist_bytes, bytes[1] = r[1].dist_bytes;
    for (int i = 0; i < 3; i++) ry_trainer_free(tr[i]);
}

static void tensors_of(ry_trainer *tr, void *ctx, ry_train_data *out, ry_tree_source *src) {
    ry_train_data_tensors(2, ctx, 1, out);
}

/* models/lenet.relay on 24 random 28x28 images, 3 steps of 12 (two a
 * shard), SGD with momentum. */
static void test_lenet_bitwise(void **state) {
    ry_rng rng;
    ry_rng_seed(&rng, 3);
    int64_t xs[4] = {24, 1, 28, 28}, ys[1] = {24};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 4, xs), *y = ry_tensor_new(RY_INT32, 1, ys);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, ry_rng_uniform(&rng));
    for (int64_t i = 0; i < y->size; i++) ry_tensor_set(y, i, (double)ry_rng_below(&rng, 10));
    ry_tensor *a[2] = {x, y};
    char *text = read_model("models/lenet.relay", NULL, NULL);
    model_bitwise("lenet.relay", text, OPT_MOMENTUM, tensors_of, a, 3, 12, NULL);
    ry_free(text);
    ry_tensor_release(x);
    ry_tensor_release(y);
}

static void trees_of(ry_trainer *tr, void *ctx, ry_train_data *out, ry_tree_source *src) {
    ry_error err;
    if (ry_train_data_trees(tr, ctx, src, out, &err)) fail_msg("%s", err.msg);
}

/* The 7 small trees of the Tree-LSTM tests and their vocabulary. */
static ry_treebank *small_trees(ry_vocab *v) {
    ry_error err;
    ry_treebank *tb = NULL;
    static const char *trees[] = {"(3 (2 It) (4 (2 's) (3 (2 a) (4 lovely))))",
                                  "(1 (2 (2 a) (3 film)) (0 (1 not) (2 lovely)))", "(4 lovely)",
                                  "(2 (2 not) (1 (2 a) (1 film)))", "(0 (1 not) (0 lovely))",
                                  "(3 (3 film) (2 's))", "(1 (2 It) (1 not))"};
    char text[1024] = "";
    for (size_t i = 0; i < sizeof trees / sizeof *trees; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s\n", trees[i]);
    if (ry_treebank_parse("trees", text, strlen(text), v, true, &tb, &err)) fail_msg("%s", err.msg);
    return tb;
}

/* models/treelstm.relay with an embedding table of `rows` rows (0: the
 * test vocabulary's size); the gates as in the file: 150 memory, 300
 * inputs (ry_free). */
static char *treelstm(const ry_vocab *v, int rows) {
    char shape[32];
    snprintf(shape, sizeof shape, "(%d, 300)", rows > 0 ? rows : (int)ry_vocab_size(v));
    return read_model("models/treelstm.relay", "(18281, 300)", shape);
}

/* The Tree-LSTM with its embedding cut to the test vocabulary, on 7
 * small trees; 2 Adam steps of 6 trees, one a shard (gradients summed
 * per tree). The table has 7 rows: train_rows.c's rule sends the
 * embedding densely in the first step (the shards touch 14 rows) and as
 * rows in the second (4). */
static void test_treelstm_bitwise(void **state) {
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = small_trees(v);
    char *model = treelstm(v, 0);
    model_bitwise("treelstm.relay", model, OPT_ADAM, trees_of, tb, 2, 6, NULL);
    ry_free(model);
    ry_treebank_free(tb);
    ry_vocab_free(v);
}

/* Bytes of every gradient of a Tree-LSTM with `rows` embedding rows. */
static int64_t treelstm_slab_bytes(const ry_vocab *v, int rows) {
    char *model = treelstm(v, rows);
    ry_trainer *tr = make_text("treelstm.relay", model, OPT_ADAM);
    int64_t n = (int64_t)ry_tensor_nbytes(ry_trainer_params(tr)->slab);
    ry_trainer_free(tr);
    ry_free(model);
    return n;
}

/* A 3000-row embedding of which the trees touch at most 8 rows: reduced
 * as rows (gathered, summed in shard order), the same bits as one
 * process, also beside the sharded optimizer's reduce-scatter, with
 * Adam (every row updated) and plain SGD (the touched rows only). The
 * job's rank hands over its shards' slabs less the embedding, and the
 * rows (the dense path: its shards' whole slabs). */
static void test_treelstm_rows_bitwise(void **state) {
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = small_trees(v);
    char *model = treelstm(v, 3000);
    int64_t dense = treelstm_slab_bytes(v, 3000) * (SHARDS / ry_dist_size()), emb = 3000 * 300 * 4;
    for (int opt = OPT_ADAM; opt <= OPT_SGD; opt++) {
        int64_t bytes[2] = {0, 0};
        model_bitwise("treelstm.relay", model, opt, trees_of, tb, 3, 6, bytes);
        assert_true(bytes[0] > 0 && bytes[0] <= dense - (SHARDS / ry_dist_size()) * emb + dense / 100);
        /* sharded: the slab less the embedding reduce-scattered, the rows gathered */
        assert_true(bytes[1] > 0 && bytes[1] <= dense / (SHARDS / ry_dist_size()) - emb + dense / 100);
    }
    ry_free(model);
    ry_treebank_free(tb);
    ry_vocab_free(v);
}

/* Without --deterministic the rows are gathered and summed in rank
 * order, with the optimizer sharded or not: one process to rounding, the
 * embedding not sent densely. */
static void test_treelstm_rows_allreduce(void **state) {
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = small_trees(v);
    char *model = treelstm(v, 3000);
    ry_trainer *tr[3];
    ry_train_data d[3];
    ry_tree_source src[3];
    ry_fit_result r[3];
    ry_error err;
    ry_fit_opts fo = fit_opts(3, 6);
    for (int i = 0; i < 3; i++) { /* the job, one process, the job sharded */
        tr[i] = make_text("treelstm.relay", model, OPT_ADAM);
        trees_of(tr[i], tb, &d[i], &src[i]);
        fo.local = i == 1;
        fo.shard_optimizer = i == 2;
        if (ry_train_fit(tr[i], &d[i], NULL, &fo, &r[i], &err)) fail_msg("%s", err.msg);
    }
    int64_t slab = (int64_t)ry_tensor_nbytes(ry_trainer_params(tr[0])->slab);
    for (int i = 0; i < 3; i += 2) {
        assert_close(tr[i], tr[1]);
        assert_true(fabs(r[i].last_loss - r[1].last_loss) < 1e-5);
        assert_true(r[i].dist_bytes > 0 && r[i].dist_bytes < slab - 3000 * 300 * 4 + slab / 100);
    }
    for (int i = 0; i < 3; i++) ry_trainer_free(tr[i]);
    ry_free(model);
    ry_treebank_free(tb);
    ry_vocab_free(v);
}

/* ---- resume across rank counts ---- */

/* N ranks write 3 steps, one process resumes to 7: the 7-step run's bits. */
static void test_resume_job_then_one(void **state) {
    char dir[128];
    shared_dir(dir, sizeof dir, "n1");
    if (ry_dist_rank() == 0) rm_dir(dir);
    barrier();
    ry_trainer *job = make();
    ry_fit_opts fo = fit_opts(3, 10);
    fo.deterministic = true;
    fo.shards = SHARDS;
    fo.checkpoint_dir = dir;
    ry_fit_result r;
    fit(job, &fo, &r);
    ry_trainer_free(job);
    if (ry_dist_rank() == 0) {
        ry_trainer *resumed = make(), *straight = make();
        fo.local = true;
        fo.max_steps = 7;
        fo.resume = true;
        fit(resumed, &fo, &r);
        assert_int_equal(r.steps, 7);
        fo.checkpoint_dir = NULL;
        fo.resume = false;
        fit(straight, &fo, &r);
        assert_same_bits(resumed, straight);
        ry_trainer_free(resumed);
        ry_trainer_free(straight);
        rm_dir(dir);
    }
    barrier();
}

/* One process writes 3 steps, N ranks resume to 7. */
static void test_resume_one_then_job(void **state) {
    char dir[128];
    shared_dir(dir, sizeof dir, "1n");
    ry_fit_opts fo = fit_opts(3, 10);
    fo.deterministic = true;
    fo.shards = SHARDS;
    fo.checkpoint_dir = dir;
    ry_fit_result r;
    if (ry_dist_rank() == 0) {
        rm_dir(dir);
        ry_trainer *first = make();
        fo.local = true;
        fit(first, &fo, &r);
        ry_trainer_free(first);
        fo.local = false;
    }
    barrier();
    ry_trainer *job = make(), *straight = make();
    fo.max_steps = 7;
    fo.resume = true;
    fit(job, &fo, &r);
    assert_int_equal(r.steps, 7);
    char want[256];
    snprintf(want, sizeof want, "%s/ckpt-7.h5", dir);
    assert_string_equal(r.checkpoint, want); /* rank 0's, told to all */
    fo.local = true;
    fo.checkpoint_dir = NULL;
    fo.resume = false;
    fit(straight, &fo, &r);
    assert_same_bits(job, straight);
    ry_trainer_free(job);
    ry_trainer_free(straight);
    barrier();
    if (ry_dist_rank() == 0) rm_dir(dir);
}

/* ---- evaluation, failures ---- */

static void test_sharded_evaluation(void **state) {
    ry_trainer *job = make(), *one = make();
    ry_fit_opts fo = fit_opts(0, 8);
    fo.epochs = 1;
    ry_fit_result r1, r2;
    ry_error err;
    if (ry_train_fit(job, &data, &data, &fo, &r1, &err)) fail_msg("%s", err.msg);
    fo.local = true;
    if (ry_train_fit(one, &data, &data, &fo, &r2, &err)) fail_msg("%s", err.msg);
    assert_true(r1.evaluated && r2.evaluated);
    assert_true(fabs(r1.eval_loss - r2.eval_loss) < 1e-5);
    assert_true(fabs(r1.eval_acc - r2.eval_acc) < 1e-9 || fabs(r1.eval_acc - r2.eval_acc) < 2.0 / 64);
    ry_trainer_free(job);
    ry_trainer_free(one);
}

/* The last rank's fetch fails at its third batch: every rank stops at
 * that step, with its message. */
static int fetches;
static ry_status failing_fetch(const ry_train_data *d, const int64_t *idx, int64_t k,
                               ry_value **args, ry_error *err) {
    if (ry_dist_rank() == ry_dist_size() - 1 && ++fetches == 3)
        return ry_error_at(err, RY_NO_SPAN, "a test fetch that fails");
    return data.fetch(d, idx, k, args, err);
}

static void test_one_rank_fails(void **state) {
    ry_trainer *job = make();
    ry_train_data bad = data;
    bad.fetch = failing_fetch;
    fetches = 0;
    ry_fit_opts fo = fit_opts(6, 8);
    ry_fit_result r;
    ry_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(ry_train_fit(job, &bad, NULL, &fo, &r, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "a test fetch that fails"));
    if (ry_dist_rank() != ry_dist_size() - 1) assert_non_null(strstr(err.msg, "rank "));
    assert_int_equal(ry_trainer_steps(job), 2);
    ry_trainer_free(job);
}

/* shards that the ranks cannot share evenly: the same error everywhere */
static void test_uneven_shards_refused(void **state) {
    ry_trainer *job = make();
    ry_fit_opts fo = fit_opts(2, 8);
    fo.deterministic = true;
    fo.shards = ry_dist_size() + 1;
    ry_error err;
    assert_int_equal(ry_train_fit(job, &data, NULL, &fo, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "cannot be dealt evenly"));
    ry_trainer_free(job);
}

int main(int argc, char **argv) {
    ry_error err;
    if (ry_dist_init(&argc, &argv, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (ry_dist_size() < 2) {
        fprintf(stderr, "test_dist: run under mpirun with 2 or more ranks (make test-mpi)\n");
        return 1;
    }
    ry_dist_set_timeout(60);
    /* the device's kernels built into one cache every rank shares (rank
     * 0's, removed at the end; PoCL's own cache keeps rebuilds quick) */
    char cache[128];
    shared_dir(cache, sizeof cache, "clcache");
    setenv("RELAYC_CACHE_DIR", cache, 1);
    if (ry_target_find(test_device_target(), &dev, &err)) {
        if (ry_dist_rank() == 0)
            fprintf(stderr, "test_dist: the device cases skip: %s\n", err.msg);
        dev = NULL;
    }
    arrays[0] = test_npy("tests/train/x.npy");
    arrays[1] = test_npy("tests/train/y.npy");
    ry_train_data_tensors(2, arrays, 1, &data);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_equal_shards),
        cmocka_unit_test(test_deterministic_unequal_shards),
        cmocka_unit_test(test_allreduce_to_rounding),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_resume_job_then_one),
        cmocka_unit_test(test_resume_one_then_job),
        cmocka_unit_test(test_sharded_evaluation),
        cmocka_unit_test(test_one_rank_fails),
        cmocka_unit_test(test_uneven_shards_refused),
        cmocka_unit_test(test_zero_adam_bitwise),
        cmocka_unit_test(test_zero_sgd_momentum_bitwise),
        cmocka_unit_test(test_zero_to_rounding),
        cmocka_unit_test(test_zero_checkpoint_resume),
        cmocka_unit_test(test_lenet_bitwise),
        cmocka_unit_test(test_treelstm_bitwise),
        cmocka_unit_test(test_treelstm_rows_bitwise),
        cmocka_unit_test(test_treelstm_rows_allreduce),
        cmocka_unit_test(test_device_deterministic_bitwise),
        cmocka_unit_test(test_device_allreduce),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    barrier();
    if (ry_dist_rank() == 0) rm_dir(cache);
    ry_tensor_release(arrays[0]);
    ry_tensor_release(arrays[1]);
    ry_dist_finalize();
    return failed ? 1 : 0;
}
