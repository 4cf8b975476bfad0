/*
 * train_treelstm.c: the binary Tree-LSTM of Tai et al. (2015)
 * (models/treelstm.relay) on the Stanford Sentiment Treebank: Adagrad 0.05,
 * weight decay 1e-4 on every parameter but the embeddings, 25 trees per
 * update (gradients summed), loss summed over every node; prints the root
 * fine-grained accuracy on dev. Run from the repository root:
 *   train_treelstm [SST_DIR] [EPOCHS] [CHECKPOINT_DIR]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "relayc/relayc.h"
#include "relayc/train.h"

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../shared/data/sst";
    int64_t epochs = argc > 2 ? atoll(argv[2]) : 1;
    const char *ckpt = argc > 3 ? argv[3] : "checkpoints-treelstm";
    char path[1024];
    ry_error err;
    ry_vocab *vocab = ry_vocab_new();
    ry_treebank *train = NULL, *dev = NULL;
    ry_trainer *tr = NULL;
    int rc = 1;

    /* the vocabulary is train's words (the embedding table's 18281 rows) */
    snprintf(path, sizeof path, "%s/train.txt", dir);
    if (!vocab || ry_treebank_read(path, vocab, true, &train, &err)) goto out;
    snprintf(path, sizeof path, "%s/dev.txt", dir);
    if (ry_treebank_read(path, vocab, false, &dev, &err)) goto out;

    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAGRAD);
    o.optim.lr = 0.05;
    o.optim.weight_decay = 1e-4;
    if (ry_trainer_new_file("models/treelstm.relay", &o, &tr, &err) ||
        ry_optim_set_decay(ry_trainer_optim(tr), "emb", false, &err))
        goto out;

    ry_tree_source ts, es;
    ry_train_data td, ed;
    if (ry_train_data_trees(tr, train, &ts, &td, &err) ||
        ry_train_data_trees(tr, dev, &es, &ed, &err))
        goto out;
    if (mkdir(ckpt, 0755) != 0 && errno != EEXIST) {
        perror(ckpt);
        goto out;
    }
    ry_fit_opts fo = {.epochs = epochs, .batch = 25, .seed = 1, .checkpoint_dir = ckpt,
                      .checkpoint_every = 100, .resume = true,
                      .config = "model=treelstm optimizer=adagrad lr=0.05 wd=1e-4 batch=25",
                      .csv_path = "treelstm-metrics.csv", .log_every = 10};
    ry_fit_result res;
    if (ry_train_fit(tr, &td, &ed, &fo, &res, &err)) goto out;
    printf("Tree-LSTM, %lld steps: dev loss %.4f per tree, root accuracy %.2f%%\n",
           (long long)res.steps, res.eval_loss, 100 * res.eval_acc);
    rc = 0;
out:
    if (rc) ry_error_print(stderr, &err);
    ry_trainer_free(tr);
    ry_treebank_free(train);
    ry_treebank_free(dev);
    ry_vocab_free(vocab);
    return rc;
}
