/*
 * train_lenet.c: LeNet-5 (models/lenet.relay) on Fashion-MNIST with the
 * training loop of train.h: SGD 0.05 with momentum 0.9, batches of 64, a
 * progress bar, a checkpoint every 200 steps (resumed if present) and a
 * CSV of metrics; prints the test accuracy. Run from the repository root:
 *   train_lenet [IDX_DIR] [EPOCHS] [CHECKPOINT_DIR]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "relayc/relayc.h"
#include "relayc/train.h"

int main(int argc, char **argv) {
    const char *dir = argc > 1 && argv[1][0] ? argv[1] : NULL; /* NULL: Debian's package */
    int64_t epochs = argc > 2 ? atoll(argv[2]) : 1;
    const char *ckpt = argc > 3 ? argv[3] : "checkpoints-lenet";
    ry_error err;
    ry_tensor *train[2] = {NULL, NULL}, *test[2] = {NULL, NULL};
    ry_trainer *tr = NULL;
    int rc = 1;

    /* images (N, 1, 28, 28) normalized as torchvision's Normalize would */
    ry_mnist_opts mo = {.mean = RY_FASHION_MNIST_MEAN, .std = RY_FASHION_MNIST_STD};
    if (ry_mnist_load(dir, "train", &mo, &train[0], &train[1], &err) ||
        ry_mnist_load(dir, "t10k", &mo, &test[0], &test[1], &err))
        goto out;

    ry_train_opts o = ry_train_defaults();
    o.optim.lr = 0.05;
    o.optim.momentum = 0.9;
    if (ry_trainer_new_file("models/lenet.relay", &o, &tr, &err)) goto out;

    ry_train_data td, ed;
    ry_train_data_tensors(2, train, 1, &td); /* (x, y); y holds the labels */
    ry_train_data_tensors(2, test, 1, &ed);
    if (mkdir(ckpt, 0755) != 0 && errno != EEXIST) {
        perror(ckpt);
        goto out;
    }
    ry_fit_opts fo = {.epochs = epochs, .batch = 64, .seed = 1, .checkpoint_dir = ckpt,
                      .checkpoint_every = 200, .keep = 3, .resume = true,
                      .config = "model=lenet optimizer=sgd lr=0.05 momentum=0.9 batch=64",
                      .csv_path = "lenet-metrics.csv"};
    ry_fit_result res;
    if (ry_train_fit(tr, &td, &ed, &fo, &res, &err)) goto out;
    printf("LeNet-5, %lld steps: test loss %.4f, test accuracy %.2f%%\n", (long long)res.steps,
           res.eval_loss, 100 * res.eval_acc);
    rc = 0;
out:
    if (rc) ry_error_print(stderr, &err);
    ry_trainer_free(tr);
    for (int i = 0; i < 2; i++) {
        ry_tensor_release(train[i]);
        ry_tensor_release(test[i]);
    }
    return rc;
}
