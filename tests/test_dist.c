/*
 * test_dist.c: the data-parallel fit as one process sees it (the suite
 * under mpirun is tests/mpi/test_dist.c): ry_dist_init outside a job is
 * one rank, and a build without MPI refuses a job of several; the
 * deterministic shards of one process weigh their examples as the whole
 * batch does (equal to rounding for equal and unequal shards, per-example
 * sums included) and resume bit for bit; shards without --deterministic
 * are refused.
 */
#include <stdlib.h>
#include <unistd.h>

#include "relayc/dist.h"
#include "relayc/train.h"
#include "test_util.h"

static const char *MLP =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: w1=kaiming_uniform b1=zeros w2=xavier_uniform b2=zeros\n"
    "def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n), int32], %w1: Tensor[(8, 4), "
    "float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), "
    "float32]) -> float32 {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=8), %b1));\n"
    "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2, units=3), %b2), axis=-1);\n"
    "  %2 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype=\"float32\");\n"
    "  negative(mean(sum(multiply(%1, %2), axis=[1])))\n"
    "}\n";

static ry_tensor *arrays[2];
static ry_train_data data;

static int setup(void **state) {
    arrays[0] = test_npy("tests/train/x.npy");
    arrays[1] = test_npy("tests/train/y.npy");
    ry_train_data_tensors(2, arrays, 1, &data);
    return 0;
}

static int teardown(void **state) {
    ry_tensor_release(arrays[0]);
    ry_tensor_release(arrays[1]);
    return 0;
}

static ry_trainer *make(void) {
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    o.clip_norm = 0.5; /* the limit bounds the weighted sum, as in one call */
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("mlp.relay", MLP, strlen(MLP), &o, &tr, &err)) fail_msg("%s", err.msg);
    return tr;
}

static ry_fit_opts fit_opts(int64_t steps, int64_t batch, int shards) {
    ry_fit_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.max_steps = steps;
    fo.batch = batch;
    fo.seed = 3;
    fo.progress = RY_PROGRESS_QUIET;
    fo.deterministic = shards > 0;
    fo.shards = shards;
    return fo;
}

static void fit(ry_trainer *tr, const ry_fit_opts *fo, ry_fit_result *res) {
    ry_error err;
    if (ry_train_fit(tr, &data, NULL, fo, res, &err)) fail_msg("fit: %s", err.msg);
}

static void test_init_outside_a_job(void **state) {
    ry_error err;
    assert_int_equal(ry_dist_init(NULL, NULL, &err), RY_OK);
    assert_int_equal(ry_dist_rank(), 0);
    assert_int_equal(ry_dist_size(), 1);
    if (!ry_dist_available()) {
        /* as mpirun would start it: refused, with the way out */
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        assert_int_equal(ry_dist_init(NULL, NULL, &err), RY_ERR);
        unsetenv("OMPI_COMM_WORLD_SIZE");
        assert_non_null(strstr(err.msg, "built without MPI"));
    }
}

/* shards of a batch against the batch in one call: equal to rounding */
static void shards_vs_one_call(int64_t batch, int shards) {
    ry_trainer *a = make(), *b = make();
    ry_fit_opts fo = fit_opts(10, batch, shards);
    ry_fit_result ra, rb;
    fit(a, &fo, &ra);
    fo = fit_opts(10, batch, 0);
    fit(b, &fo, &rb);
    const ry_tensor *x = ry_trainer_params(a)->slab, *y = ry_trainer_params(b)->slab;
    for (int64_t i = 0; i < x->size; i++)
        assert_true(fabs(ry_tensor_get(x, i) - ry_tensor_get(y, i)) < 1e-5);
    assert_true(fabs(ra.last_loss - rb.last_loss) < 1e-5);
    ry_trainer_free(a);
    ry_trainer_free(b);
}

static void test_equal_shards(void **state) { shards_vs_one_call(12, 4); }
static void test_unequal_shards(void **state) { shards_vs_one_call(10, 3); }
static void test_more_shards_than_examples(void **state) { shards_vs_one_call(3, 5); }

/* 4 steps, a checkpoint, 3 more: the 7-step run's bits */
static void test_resume_bitwise(void **state) {
    char dir[128];
    snprintf(dir, sizeof dir, "build-test-dist-%d", (int)getpid());
    ry_trainer *a = make(), *b = make(), *c = make();
    ry_fit_opts fo = fit_opts(4, 10, 6);
    fo.checkpoint_dir = dir;
    ry_fit_result r;
    fit(a, &fo, &r);
    fo.max_steps = 7;
    fo.resume = true;
    fit(b, &fo, &r);
    assert_int_equal(r.steps, 7);
    fo = fit_opts(7, 10, 6);
    fit(c, &fo, &r);
    const ry_tensor *x = ry_trainer_params(b)->slab, *y = ry_trainer_params(c)->slab;
    assert_memory_equal(x->data, y->data, ry_tensor_nbytes(x));
    ry_trainer_free(a);
    ry_trainer_free(b);
    ry_trainer_free(c);
    char p[256];
    for (int s = 4; s <= 7; s += 3) {
        snprintf(p, sizeof p, "%s/ckpt-%d.h5", dir, s);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/.lock", dir);
    unlink(p);
    assert_int_equal(rmdir(dir), 0);
}

static void test_shards_need_deterministic(void **state) {
    ry_trainer *a = make();
    ry_fit_opts fo = fit_opts(2, 10, 0);
    fo.shards = 2;
    ry_error err;
    assert_int_equal(ry_train_fit(a, &data, NULL, &fo, NULL, &err), RY_ERR);
    assert_non_null(strstr(err.msg, "deterministic"));
    ry_trainer_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_outside_a_job),
        cmocka_unit_test(test_equal_shards),
        cmocka_unit_test(test_unequal_shards),
        cmocka_unit_test(test_more_shards_than_examples),
        cmocka_unit_test(test_resume_bitwise),
        cmocka_unit_test(test_shards_need_deterministic),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
