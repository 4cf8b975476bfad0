/*
 * cmd_train.c: `relayc train MODEL.relay --data KIND[:PATH] [options]`:
 * trains a model file of models/ (its @loss, @predict and header lines)
 * with the training loop of train.h on Fashion-MNIST / MNIST, a character
 * text, the sentiment treebank or .npy arrays, showing progress, writing
 * checkpoints and a CSV, and printing the held-out loss and accuracy.
 * Everything it does is the library's; this file loads the data (the
 * options are train_args.c's) and binds what the data knows to the model:
 * a vocabulary size to the dimension its `// vocab:` line names, integer
 * labels of any width to the model's dtype, and which metrics to report
 * (`// metrics:`). Under mpirun each rank runs this command and the fit is
 * data parallel (dist.h); rank 0 alone prints.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/train_args.h"
#include "relayc/dist.h"

/* ---- data ---- */

typedef struct data {
    ry_tensor *train[2], *eval[2];
    ry_text *text;
    ry_bptt tb, eb;
    ry_vocab *vocab;
    ry_treebank *ttrees, *etrees;
    ry_tree_source tsrc, esrc;
    ry_train_data td, ed;
    bool has_eval;
} data;

static void data_free(data *d) {
    for (int i = 0; i < 2; i++) {
        ry_tensor_release(d->train[i]);
        ry_tensor_release(d->eval[i]);
    }
    ry_text_free(d->text);
    ry_treebank_free(d->ttrees);
    ry_treebank_free(d->etrees);
    ry_vocab_free(d->vocab);
}

/* fashion-mnist[:DIR], mnist:DIR: flattened when the model's x has rank 2. */
static ry_status load_mnist(ry_trainer *tr, const char *dir, data *d, ry_error *err) {
    const ry_global *g = ry_module_find_global(ry_trainer_module(tr), "loss");
    const ry_type *t = g && g->func->func.nparams > 0 ? g->func->func.params[0]->type : NULL;
    ry_mnist_opts mo = {.flatten = t && t->kind == RY_TYPE_TENSOR && t->tensor.ndim == 2,
                        .mean = RY_FASHION_MNIST_MEAN, .std = RY_FASHION_MNIST_STD};
    if (ry_mnist_load(dir, "train", &mo, &d->train[0], &d->train[1], err) ||
        ry_mnist_load(dir, "t10k", &mo, &d->eval[0], &d->eval[1], err))
        return RY_ERR;
    ry_train_data_tensors(2, d->train, 1, &d->td);
    ry_train_data_tensors(2, d->eval, 1, &d->ed);
    d->has_eval = true;
    return RY_OK;
}

static ry_status load_text(const char *path, const train_args *a, data *d, ry_error *err) {
    if (!d->text && ry_text_read(path, &d->text, err)) return RY_ERR;
    int64_t n = d->text->n, cut = n - n / 10;
    int64_t b = a->batch ? a->batch : 32, s = a->seq ? a->seq : 64;
    if (ry_bptt_init(&d->tb, d->text, 0, cut, b, s, false, err)) return RY_ERR;
    ry_train_data_bptt(&d->tb, &d->td);
    /* the held-out tail, as fewer streams when it is short */
    int64_t eb = b;
    while (eb > 1 && (n - cut - 1) / eb < s) eb /= 2;
    if (ry_bptt_init(&d->eb, d->text, cut, n, eb, s, false, err) == RY_OK) {
        ry_train_data_bptt(&d->eb, &d->ed);
        d->has_eval = true;
    }
    return RY_OK;
}

/* The treebanks, read before the trainer is made: their vocabulary may size
 * the embedding (`// vocab:`). */
static ry_status read_sst(const char *dir, data *d, ry_error *err) {
    char p[1024];
    if (!(d->vocab = ry_vocab_new())) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    snprintf(p, sizeof p, "%s/train.txt", dir);
    if (ry_treebank_read(p, d->vocab, true, &d->ttrees, err)) return RY_ERR;
    snprintf(p, sizeof p, "%s/dev.txt", dir);
    return ry_treebank_read(p, d->vocab, false, &d->etrees, err);
}

static ry_status load_sst(ry_trainer *tr, const char *dir, data *d, ry_error *err) {
    if (!d->ttrees && read_sst(dir, d, err)) return RY_ERR;
    if (ry_train_data_trees(tr, d->ttrees, &d->tsrc, &d->td, err) ||
        ry_train_data_trees(tr, d->etrees, &d->esrc, &d->ed, err))
        return RY_ERR;
    d->has_eval = true;
    return RY_OK;
}

/* The dtype of @loss's DATA parameter i, or -1 when it is not a tensor. */
static int data_dtype(ry_trainer *tr, int i) {
    const ry_global *g = ry_module_find_global(ry_trainer_module(tr), "loss");
    if (!g || i >= g->func->func.nparams) return -1;
    const ry_type *t = g->func->func.params[i]->type;
    return t && t->kind == RY_TYPE_TENSOR ? (int)t->tensor.dtype : -1;
}

/* Integer data of another width than the model's parameter (numpy's and
 * PyTorch's int64 labels for an int32 %y) is cast, each value checked to
 * fit; narrowing is noted on stderr. */
static ry_status cast_ints(ry_trainer *tr, int i, const char *path, ry_tensor **t, ry_error *err) {
    int want = data_dtype(tr, i);
    ry_dtype have = (*t)->dtype;
    if (want < 0 || (ry_dtype)want == have || !ry_dtype_is_int(have) || !ry_dtype_is_int((ry_dtype)want))
        return RY_OK;
    ry_dtype to = (ry_dtype)want;
    ry_tensor *c = ry_tensor_new(to, (*t)->ndim, (*t)->shape);
    if (!c) return ry_error_file(err, path, "out of memory casting to %s", ry_dtype_name(to));
    double lo = to == RY_INT8 ? -128.0 : to == RY_INT16 ? -32768.0 : to == RY_UINT8 || to == RY_UINT16 ? 0.0
              : to == RY_INT32 ? -2147483648.0 : -9.3e18;
    double hi = to == RY_INT8 ? 127.0 : to == RY_UINT8 ? 255.0 : to == RY_INT16 ? 32767.0 : to == RY_UINT16 ? 65535.0
              : to == RY_INT32 ? 2147483647.0 : 9.3e18;
    for (int64_t k = 0; k < c->size; k++) {
        double v = ry_tensor_get(*t, k);
        if (v < lo || v > hi) {
            ry_tensor_release(c);
            return ry_error_file(err, path, "element %lld is %.0f, which %s (the model's %%%s) "
                                 "cannot hold", (long long)k, v, ry_dtype_name(to),
                                 ry_trainer_data_name(tr, i));
        }
        ry_tensor_set(c, k, v);
    }
    if (ry_dtype_size(to) < ry_dtype_size(have))
        fprintf(stderr, "relayc train: note: %s holds %s, cast to %s for %%%s (every value fits)\n",
                path, ry_dtype_name(have), ry_dtype_name(to), ry_trainer_data_name(tr, i));
    ry_tensor_release(*t);
    *t = c;
    return RY_OK;
}

static ry_status load_npy(ry_trainer *tr, char *paths, const train_args *a, data *d,
                          ry_error *err) {
    const char *p[2] = {paths, NULL};
    char *comma = strchr(paths, ',');
    int n = 1;
    if (comma) {
        *comma = '\0';
        p[1] = comma + 1;
        n = 2;
    }
    ry_tensor *all[2] = {NULL, NULL};
    if (ry_npy_data_read(n, p, all, err)) return RY_ERR;
    ry_status st = RY_OK;
    for (int i = 0; i < n && st == RY_OK; i++) st = cast_ints(tr, i, p[i], &all[i], err);
    if (st == RY_OK) st = ry_data_split_tensors(n, all, a->val, a->seed, d->train, d->eval, err);
    for (int i = 0; i < n; i++) ry_tensor_release(all[i]);
    if (st) return RY_ERR;
    /* accuracy needs class labels: integers */
    int label = n == 2 && ry_dtype_is_int(d->train[1]->dtype) ? 1 : -1;
    ry_train_data_tensors(n, d->train, label, &d->td);
    ry_train_data_tensors(n, d->eval, label, &d->ed);
    d->has_eval = a->val > 0;
    return RY_OK;
}

/* --data KIND[:PATH] split; path NULL without a colon. */
static const char *data_kind(const char *spec, char *kind, size_t n) {
    const char *colon = strchr(spec, ':');
    size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
    snprintf(kind, n, "%.*s", (int)kl, spec);
    return colon ? colon + 1 : NULL;
}

/* The model's header lines (init.h: `// vocab:`, `// metrics:` among
 * them), read before the trainer is made: a vocabulary may size it. */
static int read_spec(const char *path, ry_init_spec **spec) {
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail("train", "cannot open %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            char *grown = realloc(text, cap = cap ? 2 * cap : 1 << 16);
            if (!grown) {
                free(text);
                fclose(f);
                return cli_fail("train", "out of memory reading %s", path);
            }
            text = grown;
        }
        len += got = fread(text + len, 1, cap - len, f);
    } while (got > 0);
    fclose(f);
    ry_error err;
    int rc = 0;
    if (ry_init_spec_parse(path, text, len, spec, &err)) {
        ry_error_print(stderr, &err);
        rc = 1;
    }
    free(text);
    return rc;
}

/* Data whose vocabulary sizes the model is read before the trainer is
 * made, and its size given to the `// vocab:` dimension (unless --dim
 * gave it). */
static int read_vocab(train_args *a, const ry_init_spec *h, data *d) {
    char kind[64];
    const char *path = data_kind(a->data, kind, sizeof kind);
    bool sst = strcmp(kind, "sst") == 0, text = strcmp(kind, "text") == 0;
    if (!h->vocab[0] || !path || !(sst || text)) return 0;
    for (int i = 0; i < a->nsyms; i++)
        if (strcmp(a->sym_names[i], h->vocab) == 0) return 0; /* --dim wins */
    ry_error err;
    if (sst ? read_sst(path, d, &err) : ry_text_read(path, &d->text, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    int64_t n = sst ? ry_vocab_size(d->vocab) : d->text->nsymbols;
    if (!train_args_set_dim(a, h->vocab, n))
        return cli_fail("train", "too many symbolic dimensions for `// vocab: %s`", h->vocab);
    return 0;
}

static int load_data(ry_trainer *tr, const train_args *a, const ry_init_spec *h, data *d,
                     ry_error *err) {
    char kind[64];
    const char *path = data_kind(a->data, kind, sizeof kind);
    ry_status st;
    if (strcmp(kind, "fashion-mnist") == 0 || strcmp(kind, "mnist") == 0) {
        if (!path && strcmp(kind, "mnist") == 0) return cli_fail("train", "mnist needs a directory: --data mnist:DIR");
        st = load_mnist(tr, path, d, err);
    } else if (!path || !*path) {
        return cli_fail("train", "--data %s needs a path: --data %s:PATH", kind, kind);
    } else if (strcmp(kind, "text") == 0) {
        st = load_text(path, a, d, err);
    } else if (strcmp(kind, "sst") == 0) {
        st = load_sst(tr, path, d, err);
    } else if (strcmp(kind, "npy") == 0) {
        char buf[2048];
        snprintf(buf, sizeof buf, "%s", path);
        st = load_npy(tr, buf, a, d, err);
    } else {
        return cli_fail("train", "unknown data kind '%s' (fashion-mnist, mnist, text, sst, npy)", kind);
    }
    if (st) {
        ry_error_print(stderr, err);
        return 1;
    }
    d->td.drop_last = d->ed.drop_last = a->drop_last;
    if (h->has_metrics && !h->accuracy) d->td.label_arg = d->ed.label_arg = -1;
    if (h->has_metrics && h->accuracy && d->ed.label_arg < 0)
        return cli_fail("train", "%s asks for accuracy (`// metrics:`) but --data %s has no "
                        "integer labels", a->model, kind);
    if (d->td.nargs != ry_trainer_ndata(tr))
        return cli_fail("train", "--data %s gives %d values per example but %s's @loss takes %d "
                        "(its `// data:` line)",
                        kind, d->td.nargs, a->model, ry_trainer_ndata(tr));
    return 0;
}

/* ---- SIGINT and SIGTERM ----
 * The first asks the trainer to stop after its current step (it saves a
 * checkpoint and fit reports it); a second one ends the process at once. */
static atomic_int nsignals;

static void on_signal(int sig) {
    if (atomic_fetch_add(&nsignals, 1) > 0) {
        static const char msg[] = "relayc train: second signal: stopping at once, no checkpoint\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    ry_train_request_stop(sig);
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* What checkpoints store beside the trainer's own configuration: the data
 * (compared on --resume) and the command line (kept for the reader). */
static void config_line(int argc, char **argv, const train_args *a, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "data=%s\nseq=%lld\nval=%lld\ndrop_last=%d\n"
                                          "command=relayc train", a->data, (long long)a->seq,
                                  (long long)a->val, a->drop_last);
    for (int i = 1; i < argc && len < n; i++) len += (size_t)snprintf(buf + len, n - len, " %s", argv[i]);
}

static int fit(ry_trainer *tr, const train_args *a, data *d, const char *config) {
    bool seq = d->td.fetch != NULL && d->text != NULL;
    ry_fit_opts fo = {
        .epochs = a->epochs ? a->epochs : (a->steps ? 0 : 1),
        .max_steps = a->steps,
        .batch = seq ? 1 : (a->batch ? a->batch : (d->ttrees ? 25 : 64)),
        .no_shuffle = seq,
        .seed = a->seed,
        .checkpoint_dir = a->ckpt_dir,
        .checkpoint_every = a->ckpt_every,
        .keep = (int)a->keep,
        .resume = a->resume,
        .resume_anyway = a->resume_anyway,
        .force = a->force,
        .config = config,
        .csv_path = a->csv,
        .progress = a->quiet ? RY_PROGRESS_QUIET : RY_PROGRESS_AUTO,
        .log_every = a->log_every,
        .deterministic = a->deterministic,
        .shards = (int)a->shards,
        .bucket_bytes = a->bucket,
        .shard_optimizer = a->shard_optimizer,
        .no_overlap = a->no_overlap,
    };
    bool root = ry_dist_rank() == 0;
    ry_fit_result res;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_train_fit(tr, &d->td, d->has_eval ? &d->ed : NULL, &fo, &res, &err)) {
        if (!res.stop_signal) {
            ry_error_print(stderr, &err);
            return 1;
        }
        fprintf(stderr, "relayc train: %s: %s%s\n",
                res.stop_signal == SIGINT ? "SIGINT" : res.stop_signal == SIGTERM ? "SIGTERM" : "signal",
                err.msg, res.checkpoint[0] ? " (continue with --resume)" : "");
        return 128 + res.stop_signal;
    }
    if (!root) return 0; /* rank 0 reports */
    if (d->has_eval && (!res.evaluated || res.eval_step != res.steps) &&
        ry_train_evaluate(tr, &d->ed, fo.batch, &res.eval_loss, &res.eval_acc, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    printf("steps %lld, final training loss %.6f\n", (long long)res.steps, res.last_loss);
    if (d->has_eval) {
        printf("held-out loss %.6f", res.eval_loss);
        if (!isnan(res.eval_acc)) printf(", accuracy %.2f%%", 100 * res.eval_acc);
        printf("\n");
    }
    if (res.checkpoint[0]) printf("checkpoint %s\n", res.checkpoint);
    if (ry_dist_size() > 1 && res.dist_step_s > 0)
        printf("data parallel: %d ranks, %lld gradient bytes reduced per step; rank 0 spent "
               "%.1f%% of its steps waiting on the reduction, %.1f%% in the exchange of losses; "
               "%.0f%% of the all-reduce's buckets started during the backward pass\n",
               ry_dist_size(), (long long)res.dist_bytes, 100 * res.dist_reduce_s / res.dist_step_s,
               100 * res.dist_sync_s / res.dist_step_s, 100 * res.dist_overlap);
    return 0;
}

static int train_main(int argc, char **argv, train_args *ap);

int cmd_train(int argc, char **argv) {
    train_args a;
    memset(&a, 0, sizeof a);
    int rc = train_args_parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_dist_init(NULL, NULL, &err)) {
        fprintf(stderr, "relayc train: %s\n", err.msg);
        return 1;
    }
    ry_dist_set_timeout(a.dist_timeout);
    rc = train_main(argc, argv, &a);
    /* a rank that failed alone would wait for the others in MPI_Finalize:
     * end the job instead (the error is printed) */
    if (rc != 0 && ry_dist_size() > 1) ry_dist_abort(rc);
    ry_dist_finalize();
    return rc;
}

static int train_main(int argc, char **argv, train_args *ap) {
    train_args a = *ap;
    catch_signals(); /* from here on a signal stops the run at the next step */
    ry_init_spec *h = NULL;
    ry_trainer *tr = NULL;
    data d;
    memset(&d, 0, sizeof d);
    ry_train_opts o;
    ry_error err;
    memset(&err, 0, sizeof err);
    int rc = read_spec(a.model, &h) || read_vocab(&a, h, &d) || train_args_opts(&a, &o);
    if (rc == 0 && a.ckpt_dir && mkdir(a.ckpt_dir, 0755) != 0 && errno != EEXIST)
        rc = cli_fail("train", "cannot create %s: %s", a.ckpt_dir, strerror(errno));
    if (rc == 0 && ry_trainer_new_file(a.model, &o, &tr, &err)) {
        ry_error_print(stderr, &err);
        rc = 1;
    }
    char config[2048];
    config_line(argc, argv, &a, config, sizeof config);
    if (rc == 0) rc = load_data(tr, &a, h, &d, &err);
    ry_vm_program *vm = tr ? ry_trainer_vm(tr) : NULL;
    if (rc == 0 && a.profile && !vm) rc = cli_fail("train", "--profile needs the compiled engine (--engine vm)");
    if (vm) ry_vm_set_profile(vm, a.profile);
    if (rc == 0) rc = fit(tr, &a, &d, config);
    if (rc == 0 && a.profile) ry_vm_print_profile(vm, stderr, 30);
    data_free(&d);
    ry_trainer_free(tr);
    ry_init_spec_free(h);
    return rc;
}
