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

static ry_trainer *make(void) {
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    o.threads = 1;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new("mlp.relay", MLP, strlen(MLP), &o, &tr, &err)) fail_msg("trainer: %s", err.msg);
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

static void assert_same_bits(ry_trainer *a, ry_trainer *b) {
    const ry_tensor *x = ry_trainer_params(a)->slab, *y = ry_trainer_params(b)->slab;
    assert_int_equal(x->size, y->size);
    assert_memory_equal(x->data, y->data, ry_tensor_nbytes(x));
}

static void assert_close(ry_trainer *a, ry_trainer *b) {
    const ry_tensor *x = ry_trainer_params(a)->slab, *y = ry_trainer_params(b)->slab;
    assert_int_equal(x->size, y->size);
    for (int64_t i = 0; i < x->size; i++) {
        double u = ry_tensor_get(x, i), v = ry_tensor_get(y, i);
        if (fabs(u - v) > 1e-5 + 1e-4 * fabs(v)) fail_msg("element %lld: %g vs %g", (long long)i, u, v);
    }
}

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
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

/* The all-reduce equals one process taking the batch in one call. */
static void test_allreduce_to_rounding(void **state) {
    ry_trainer *job = make(), *one = make();
    ry_fit_opts fo = fit_opts(8, 12);
    ry_fit_result r1, r2;
    fit(job, &fo, &r1);
    fo.local = true;
    fit(one, &fo, &r2);
    assert_close(job, one);
    assert_true(fabs(r1.last_loss - r2.last_loss) < 1e-5);
    ry_trainer_free(job);
    ry_trainer_free(one);
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
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ry_tensor_release(arrays[0]);
    ry_tensor_release(arrays[1]);
    ry_dist_finalize();
    return failed ? 1 : 0;
}
