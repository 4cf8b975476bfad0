/*
 * test_opencl_train.c: training on the OpenCL target against the CPU.
 * The same model, data and options trained on both targets give the same
 * parameters to rounding for every optimizer (SGD with momentum, Nesterov
 * and weight decay; Adam; AdamW with AMSGrad; Adagrad; RMSprop centered
 * with momentum) and with clipping by norm and by value; the parameters
 * and the optimizer's state never cross in a step (the copies per step
 * are the batch in and the loss and gradient scans out, counted) and a
 * warm step takes no buffer from the driver; a checkpoint written by a
 * device run loads into a CPU run with the same parameters bit for bit,
 * and the other way round. Without an OpenCL device every test skips with
 * a message.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/train.h"
#include "test_texts.h"
#include "test_util.h"

static const ry_target *cl;

static int setup(void **s) {
    ry_error err = {0};
    if (ry_target_find(test_device_target(), &cl, &err) != RY_OK) {
        fprintf(stderr, "test_opencl_train: skipping every test: %s\n", err.msg);
        cl = NULL;
    }
    return 0;
}

#define NEED_DEVICE()                                                                         \
    do {                                                                                      \
        if (!cl) skip();                                                                      \
    } while (0)

/* tests/test_train.c's MLP with the labels given one-hot */
static const char *MLP =
    "#[version = \"0.0.5\"]\n"
    "// data: x y\n"
    "// init: w1=kaiming_uniform b1=zeros w2=xavier_uniform b2=zeros\n"
    "def @loss(%x: Tensor[(16, 4), float32], %y: Tensor[(16, 3), float32], %w1: Tensor[(8, 4), "
    "float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), "
    "float32]) -> float32 {\n"
    "  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=8), %b1));\n"
    "  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2, units=3), %b2), axis=-1);\n"
    "  negative(mean(sum(multiply(%1, %y), axis=[1])))\n"
    "}\n";

static ry_trainer *make(const ry_train_opts *o) {
    ry_trainer *tr = NULL;
    ry_error err = {0};
    if (ry_trainer_new("mlp.relay", MLP, strlen(MLP), o, &tr, &err)) fail_msg("trainer: %s", err.msg);
    return tr;
}

/* batch k of 16 rows from tests/train/x.npy and y.npy (labels one-hot) */
static void batch(int k, ry_value **args) {
    ry_error err = {0};
    ry_tensor *x, *y;
    assert_int_equal(ry_npy_read("tests/train/x.npy", &x, &err), RY_OK);
    assert_int_equal(ry_npy_read("tests/train/y.npy", &y, &err), RY_OK);
    ry_tensor *bx = ry_tensor_new(RY_FLOAT32, 2, (int64_t[]){16, 4});
    ry_tensor *by = ry_tensor_zeros(RY_FLOAT32, 2, (int64_t[]){16, 3});
    int64_t rows = x->shape[0];
    for (int i = 0; i < 16; i++) {
        int64_t r = (16 * k + i) % rows;
        for (int j = 0; j < 4; j++) ry_tensor_set(bx, i * 4 + j, ry_tensor_get(x, r * 4 + j));
        ry_tensor_set(by, i * 3 + (int64_t)ry_tensor_get(y, r), 1);
    }
    args[0] = ry_value_tensor(bx);
    args[1] = ry_value_tensor(by);
    ry_tensor_release(x);
    ry_tensor_release(y);
}

static void steps(ry_trainer *tr, int from, int n) {
    ry_error err = {0};
    for (int k = from; k < from + n; k++) {
        ry_value *args[2];
        batch(k, args);
        double loss;
        if (ry_trainer_step(tr, 2, args, &loss, &err)) fail_msg("step %d: %s", k, err.msg);
        assert_true(isfinite(loss));
        ry_value_release(args[0]);
        ry_value_release(args[1]);
    }
}

/* the trainer's parameters on the host */
static ry_param_set *host_params(ry_trainer *tr) {
    ry_error err = {0};
    ry_param_set *p = ry_params_to(ry_target_cpu(), ry_trainer_params(tr), &err);
    if (!p) fail_msg("%s", err.msg);
    return p;
}

static void assert_sets_close(const ry_param_set *a, const ry_param_set *b, double rtol) {
    assert_true(ry_params_same_layout(a, b));
    for (int i = 0; i < a->n; i++) {
        double big = 1;
        for (int64_t k = 0; k < b->views[i]->size; k++) big = fmax(big, fabs(ry_tensor_get(b->views[i], k)));
        test_assert_close(a->views[i], b->views[i], rtol, rtol * big);
    }
}

/* n steps with o on the CPU and on the device: the same parameters */
static void same_training(ry_train_opts o, int n) {
    ry_trainer *tc = make(&o);
    o.target = cl;
    ry_trainer *td = make(&o);
    steps(tc, 0, n);
    steps(td, 0, n);
    ry_param_set *pd = host_params(td);
    assert_sets_close(pd, ry_trainer_params(tc), 1e-5);
    ry_params_free(pd);
    ry_trainer_free(tc);
    ry_trainer_free(td);
}

static void test_sgd(void **s) {
    NEED_DEVICE();
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    same_training(o, 12);
    o.optim.nesterov = true;
    o.optim.weight_decay = 1e-2;
    same_training(o, 12);
    o.optim.momentum = 0;
    o.optim.nesterov = false;
    same_training(o, 6);
}

static void test_adam_adamw(void **s) {
    NEED_DEVICE();
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.optim.lr = 1e-2;
    same_training(o, 12);
    o.optim = ry_optim_defaults(RY_OPTIM_ADAMW);
    o.optim.amsgrad = true;
    same_training(o, 12);
}

static void test_adagrad_rmsprop(void **s) {
    NEED_DEVICE();
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    o.optim.initial_accumulator_value = 0.1;
    o.optim.lr_decay = 0.01;
    same_training(o, 12);
    o.optim = ry_optim_defaults(RY_OPTIM_RMSPROP);
    o.optim.centered = true;
    o.optim.momentum = 0.5;
    o.optim.weight_decay = 1e-3;
    same_training(o, 12);
}

static void test_clipping(void **s) {
    NEED_DEVICE();
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.5;
    o.clip_norm = 0.05;
    same_training(o, 8);
    o.clip_norm = 0;
    o.clip_value = 0.01;
    same_training(o, 8);
}

static void test_parameters_stay_on_the_device(void **s) {
    NEED_DEVICE();
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    o.target = cl;
    ry_trainer *td = make(&o);
    assert_int_equal(ry_trainer_params(td)->slab->device.kind, ry_target_device(cl).kind);
    steps(td, 0, 3); /* warm */
    ry_device_counters c0, c1;
    ry_target_counters(cl, &c0);
    steps(td, 3, 5);
    ry_target_counters(cl, &c1);
    int64_t in = (c1.bytes_to_device - c0.bytes_to_device) / 5;
    int64_t out = (c1.bytes_to_host - c0.bytes_to_host) / 5;
    fprintf(stderr, "%s training step: %lld bytes to the device, %lld back (parameters: %zu bytes)\n",
            test_device_target(), (long long)in, (long long)out, ry_tensor_nbytes(ry_trainer_params(td)->slab));
    assert_int_equal(in, (16 * 4 + 16 * 3) * 4);  /* the batch, nothing else */
    assert_true(out < 16 * 4 + 4 * 16 * 4 + 64);    /* the loss, the scans' partial sums */
    assert_int_equal(c1.driver_allocs, c0.driver_allocs);
    ry_trainer_free(td);
}

static void test_checkpoints_cross_targets(void **s) {
    NEED_DEVICE();
    char dir[64], path[512];
    snprintf(dir, sizeof dir, "build-test-cltrain-%d", (int)getpid());
    rm_dir(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    ry_error err = {0};
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.target = cl;
    ry_trainer *td = make(&o);
    steps(td, 0, 4);
    if (ry_trainer_save(td, dir, 2, NULL, NULL, path, sizeof path, &err)) fail_msg("save: %s", err.msg);
    /* the device run's checkpoint on the CPU: the same bits */
    o.target = NULL;
    ry_trainer *tc = make(&o);
    if (ry_trainer_load(tc, path, NULL, &err)) fail_msg("load: %s", err.msg);
    ry_param_set *pd = host_params(td);
    assert_sets_close(ry_trainer_params(tc), pd, 0);
    /* both go on the same way (the optimizer's state came along) */
    steps(tc, 4, 4);
    steps(td, 4, 4);
    ry_params_free(pd);
    pd = host_params(td);
    assert_sets_close(pd, ry_trainer_params(tc), 1e-5);
    /* and the CPU run's checkpoint on the device */
    if (ry_trainer_save(tc, dir, 2, NULL, NULL, path, sizeof path, &err)) fail_msg("save: %s", err.msg);
    o.target = cl;
    ry_trainer *t2 = make(&o);
    if (ry_trainer_load(t2, path, NULL, &err)) fail_msg("load on opencl: %s", err.msg);
    ry_param_set *p2 = host_params(t2);
    assert_sets_close(p2, ry_trainer_params(tc), 0);
    ry_params_free(p2);
    ry_params_free(pd);
    ry_trainer_free(t2);
    ry_trainer_free(tc);
    ry_trainer_free(td);
    rm_dir(dir);
}

/* ---- deterministic shards (train_dist.c) on the device ---- */

static ry_fit_opts det_opts(int shards) {
    ry_fit_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.max_steps = 8;
    fo.batch = 10; /* unequal shards of 3 or 4: weighed on the device before the sum */
    fo.seed = 3;
    fo.progress = RY_PROGRESS_QUIET;
    fo.deterministic = true;
    fo.shards = shards;
    return fo;
}

static ry_trainer *det_fit(const ry_target *t, int shards, ry_fit_result *res) {
    ry_tensor *arrays[2] = {test_npy("tests/train/x.npy"), test_npy("tests/train/y.npy")};
    ry_train_data data;
    ry_train_data_tensors(2, arrays, 1, &data);
    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.1;
    o.optim.momentum = 0.9;
    o.clip_norm = 0.5;
    o.target = t;
    ry_trainer *tr = NULL;
    ry_error err = {0};
    if (ry_trainer_new("mlp.relay", TEST_MLP_TEXT, strlen(TEST_MLP_TEXT), &o, &tr, &err))
        fail_msg("trainer: %s", err.msg);
    ry_fit_opts fo = det_opts(shards);
    if (ry_train_fit(tr, &data, NULL, &fo, res, &err)) fail_msg("fit: %s", err.msg);
    ry_tensor_release(arrays[0]);
    ry_tensor_release(arrays[1]);
    return tr;
}

/* The device's deterministic run: the CPU's with the same shards to
 * rounding, its own bits again, and its shards summed on the device (the
 * gradient slab never crosses: far fewer bytes back per step than the
 * slab holds). */
static void test_deterministic_shards(void **s) {
    NEED_DEVICE();
    ry_fit_result rc, rd, r2;
    ry_trainer *tc = det_fit(ry_target_cpu(), 3, &rc);
    ry_device_counters c0, c1;
    ry_target_counters(cl, &c0);
    ry_trainer *td = det_fit(cl, 3, &rd);
    ry_target_counters(cl, &c1);
    ry_trainer *t2 = det_fit(cl, 3, &r2);
    assert_int_equal(rd.steps, 8);
    ry_param_set *pd = host_params(td), *p2 = host_params(t2);
    assert_sets_close(pd, ry_trainer_params(tc), 1e-5);
    assert_true(fabs(rd.last_loss - rc.last_loss) < 1e-5);
    assert_memory_equal(pd->slab->data, p2->slab->data, ry_tensor_nbytes(pd->slab));
    int64_t slab = (int64_t)ry_tensor_nbytes(ry_trainer_params(td)->slab);
    int64_t back = (c1.bytes_to_host - c0.bytes_to_host) / 8;
    fprintf(stderr, "%s deterministic step, 3 shards: %lld bytes back (gradient slab: %lld)\n",
            test_device_target(), (long long)back, (long long)slab);
    assert_true(back < slab);
    ry_params_free(pd);
    ry_params_free(p2);
    ry_trainer_free(tc);
    ry_trainer_free(td);
    ry_trainer_free(t2);
}

/* A device out-of-memory in a step (RELAYC_DEVICE_MEMORY_LIMIT, read when
 * the device opens: so in a fresh process, this program run again with
 * --oom-child DIR; forking a process that has a device open is not safe)
 * is an error naming the call, and the checkpoint saved before it loads
 * whole afterwards. */
static int oom_child(const char *dir) {
    /* room for the parameters, gradients and momentum, not for a step */
    setenv("RELAYC_DEVICE_MEMORY_LIMIT", "3072", 1);
    ry_error err = {0};
    const ry_target *t;
    ry_train_opts o = ry_train_defaults();
    o.optim.momentum = 0.9;
    ry_trainer *tr = NULL;
    char path[512];
    if (ry_target_find(test_device_target(), &t, &err)) return 10;
    o.target = t;
    if (ry_trainer_new("mlp.relay", MLP, strlen(MLP), &o, &tr, &err)) {
        fprintf(stderr, "oom child: %s\n", err.msg);
        return 11;
    }
    if (ry_trainer_save(tr, dir, 2, NULL, NULL, path, sizeof path, &err)) return 12;
    ry_value *args[2];
    batch(0, args);
    double loss;
    ry_status st = ry_trainer_step(tr, 2, args, &loss, &err);
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_trainer_free(tr);
    if (st == RY_OK) return 13;
    fprintf(stderr, "device out of memory in a step: %s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    /* located at the call that did not fit */
    return strstr(err.msg, "out of memory") && err.line > 0 ? 0 : 14;
}

static const char *self_path;

static void test_device_out_of_memory_in_a_step(void **s) {
    NEED_DEVICE();
    char dir[64], path[512] = "", cmd[1024];
    snprintf(dir, sizeof dir, "build-test-cloom-%d", (int)getpid());
    rm_dir(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(cmd, sizeof cmd, "%s --oom-child %s", self_path, dir);
    assert_int_equal(system(cmd), 0);
    /* the checkpoint is whole */
    ry_train_opts o = ry_train_defaults();
    o.optim.momentum = 0.9;
    ry_trainer *tc = make(&o);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "ckpt-", 5) == 0) snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(d);
    ry_error err = {0};
    if (ry_trainer_load(tc, path, NULL, &err)) fail_msg("load %s: %s", path, err.msg);
    ry_trainer_free(tc);
    rm_dir(dir);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--oom-child") == 0) return oom_child(argv[2]);
    self_path = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adam_adamw),
        cmocka_unit_test(test_adagrad_rmsprop),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_parameters_stay_on_the_device),
        cmocka_unit_test(test_checkpoints_cross_targets),
        cmocka_unit_test(test_deterministic_shards),
        cmocka_unit_test(test_device_out_of_memory_in_a_step),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
