/*
 * train_charlstm.c: the char-level LSTM (models/charlstm.relay) on a text
 * with truncated BPTT: 32 streams, windows of 64 characters whose state
 * carries from one window to the next, Adam 2e-3, gradients clipped at
 * norm 5, 300 steps; the last 10% of the text is held out. Run from the
 * repository root:
 *   train_charlstm [TEXT] [STEPS] [CHECKPOINT_DIR]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "relayc/relayc.h"
#include "relayc/train.h"

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/data/tinyshakespeare/input.txt";
    int64_t steps = argc > 2 ? atoll(argv[2]) : 300;
    const char *ckpt = argc > 3 ? argv[3] : "checkpoints-charlstm";
    ry_error err;
    ry_text *text = NULL;
    ry_trainer *tr = NULL;
    int rc = 1;

    if (ry_text_read(path, &text, &err)) goto out;
    if (text->nsymbols > 65) { /* the model's embedding has 65 rows */
        ry_error_file(&err, path, "%d distinct bytes, the model takes 65", text->nsymbols);
        goto out;
    }
    int64_t cut = text->n - text->n / 10;
    ry_bptt train, held;
    if (ry_bptt_init(&train, text, 0, cut, 32, 64, false, &err) ||
        ry_bptt_init(&held, text, cut, text->n, 8, 64, false, &err))
        goto out;

    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.optim.lr = 2e-3;
    o.clip_norm = 5;
    if (ry_trainer_new_file("models/charlstm.relay", &o, &tr, &err)) goto out;

    ry_train_data td, ed;
    ry_train_data_bptt(&train, &td); /* windows in order: (x, y), state carried */
    ry_train_data_bptt(&held, &ed);
    if (mkdir(ckpt, 0755) != 0 && errno != EEXIST) {
        perror(ckpt);
        goto out;
    }
    ry_fit_opts fo = {.max_steps = steps, .batch = 1, .no_shuffle = true,
                      .checkpoint_dir = ckpt, .checkpoint_every = 100, .resume = true,
                      .config = "model=charlstm optimizer=adam lr=2e-3 clip=5 batch=32 seq=64",
                      .csv_path = "charlstm-metrics.csv", .log_every = 10};
    ry_fit_result res;
    if (ry_train_fit(tr, &td, NULL, &fo, &res, &err)) goto out;
    double loss, acc;
    if (ry_train_evaluate(tr, &ed, 1, &loss, &acc, &err)) goto out;
    /* the model's loss is the mean NLL per character */
    printf("char-LSTM, %lld steps: training loss %.4f, held-out loss %.4f, next-char accuracy "
           "%.2f%%\n",
           (long long)res.steps, res.last_loss, loss, 100 * acc);
    rc = 0;
out:
    if (rc) ry_error_print(stderr, &err);
    ry_trainer_free(tr);
    ry_text_free(text);
    return rc;
}
