/*
 * cmd_train.c: `relayc train MODEL.relay --data KIND[:PATH] [options]`:
 * trains a model file of models/ (its @loss, @predict and header lines)
 * with the training loop of train.h on Fashion-MNIST / MNIST, a character
 * text, the sentiment treebank or .npy arrays, showing progress, writing
 * checkpoints and a CSV, and printing the held-out loss and accuracy.
 * Everything it does is the library's; this file only reads options and
 * loads the data. Under mpirun each rank runs this command and the fit is
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
#include "relayc/dist.h"
#include "relayc/threads.h"
#include "relayc/train.h"

static const char *help =
    "usage: relayc train MODEL.relay --data KIND[:PATH] [options]\n"
    "\n"
    "Trains MODEL's @loss (its `// data:` parameters fed from the data, the\n"
    "rest trained) and evaluates @predict on held-out data after each epoch.\n"
    "\n"
    "  --data fashion-mnist[:DIR]  IDX files (default " RY_FASHION_MNIST_DIR ");\n"
    "                              test split t10k; also mnist:DIR\n"
    "  --data text:PATH            character text, truncated BPTT (last 10% held out)\n"
    "  --data sst:DIR              DIR/train.txt and DIR/dev.txt (PTB trees)\n"
    "  --data npy:X.npy,Y.npy      arrays (the last --val rows held out)\n"
    "  --epochs N                  default 1\n"
    "  --steps N                   stop after N optimizer steps in all\n"
    "  --batch N                   examples per step (text: streams; default 64,\n"
    "                              text 32, sst 25)\n"
    "  --seq N                     text: window length (default 64)\n"
    "  --drop-last                 whole batches only, in training and evaluation\n"
    "                              (a model with a fixed batch size)\n"
    "  --val N                     npy: rows held out (default 0)\n"
    "  --optimizer NAME            sgd (default), adam, adamw, adagrad, rmsprop\n"
    "  --lr X  --momentum X  --weight-decay X\n"
    "  --clip-norm X               clip gradients to this global norm\n"
    "  --inference-gradients       differentiate in inference mode (dropout as the\n"
    "                              identity, batch norm on moving statistics);\n"
    "                              default: training mode\n"
    "  --seed N                    initialization and shuffling (default 0)\n"
    "  --checkpoint-dir DIR        write DIR/ckpt-<step>.h5 (created if missing)\n"
    "  --checkpoint-every N        steps between checkpoints (default: at the end)\n"
    "  --keep K                    checkpoints kept (default 3)\n"
    "  --resume                    continue from the latest checkpoint in DIR (its\n"
    "                              model, optimizer, batch and data must match)\n"
    "  --resume-anyway             resume even where they differ\n"
    "  --force                     start over in a DIR holding checkpoints: they are\n"
    "                              moved into DIR/old-<time>/\n"
    "  --csv PATH                  metrics, one row per logged step and evaluation\n"
    "  --log-every N               plain log lines every N steps (default 50)\n"
    "  --quiet                     no progress output\n"
    "  --engine vm|interp          the compiled engine (default) or the interpreter\n"
    "  --target NAME               where kernels, parameters and optimizer state live:\n"
    "                              cpu (default; opencl and cuda where built in)\n"
    "  --threads N                 cores for the kernels and for a step's independent\n"
    "                              calls (trees); results do not depend on it\n"
    "                              (default: RELAYC_NUM_THREADS, else 1)\n"
    "  --profile                   time the compiled engine's operator calls and print\n"
    "                              the call sites that took longest on stderr at the\n"
    "                              end (the calling thread's calls: with trees on\n"
    "                              several threads, those it ran)\n"
    "\n"
    "Data parallel, under mpirun (mpirun -np N relayc train ...): each rank takes\n"
    "its share of every global batch of --batch examples, the gradients are\n"
    "all-reduced, rank 0 prints and writes the checkpoints (any N may resume).\n"
    "  --deterministic             sum the shards' gradients in a fixed order: the\n"
    "                              parameters are bit for bit those of one process\n"
    "                              with the same --shards (default: all-reduce,\n"
    "                              equal to rounding)\n"
    "  --shards S                  with --deterministic: shards per global batch\n"
    "                              (default: the ranks; a multiple of them)\n"
    "  --bucket-bytes N            the all-reduce's pieces (default 4 MiB)\n"
    "  --dist-timeout SECONDS      a rank waiting longer than this for the others\n"
    "                              ends the job with a message (default 300)\n";

typedef struct train_args {
    const char *model, *data, *optimizer, *ckpt_dir, *csv;
    double lr, momentum, weight_decay, clip_norm, dist_timeout;
    int64_t epochs, steps, batch, seq, val, ckpt_every, keep, log_every, threads, shards, bucket;
    uint64_t seed;
    bool resume, resume_anyway, force, quiet, drop_last, profile, inference_grads, deterministic;
    ry_engine engine;
    const ry_target *target;
} train_args;

static bool num(const char *v, double *out) {
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    return !errno && *v && !*end && isfinite(*out);
}

static bool whole(const char *v, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    *out = x;
    return !errno && *v && !*end && x >= 0;
}

typedef struct opt_num {
    const char *name;
    double *d;
    int64_t *i;
} opt_num;

static int parse_args(int argc, char **argv, train_args *a) {
    a->lr = a->momentum = a->weight_decay = NAN;
    a->keep = 3;
    opt_num nums[] = {
        {"--lr", &a->lr, NULL},           {"--momentum", &a->momentum, NULL},
        {"--weight-decay", &a->weight_decay, NULL}, {"--clip-norm", &a->clip_norm, NULL},
        {"--epochs", NULL, &a->epochs},    {"--steps", NULL, &a->steps},
        {"--batch", NULL, &a->batch},      {"--seq", NULL, &a->seq},
        {"--val", NULL, &a->val},          {"--checkpoint-every", NULL, &a->ckpt_every},
        {"--keep", NULL, &a->keep},        {"--log-every", NULL, &a->log_every},
        {"--threads", NULL, &a->threads},  {"--shards", NULL, &a->shards},
        {"--bucket-bytes", NULL, &a->bucket}, {"--dist-timeout", &a->dist_timeout, NULL},
    };
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return -1;
        }
        if (strcmp(argv[i], "--resume") == 0) {
            a->resume = true;
            continue;
        }
        if (strcmp(argv[i], "--resume-anyway") == 0) {
            a->resume = a->resume_anyway = true;
            continue;
        }
        if (strcmp(argv[i], "--force") == 0) {
            a->force = true;
            continue;
        }
        if (strcmp(argv[i], "--drop-last") == 0) {
            a->drop_last = true;
            continue;
        }
        if (strcmp(argv[i], "--deterministic") == 0) {
            a->deterministic = true;
            continue;
        }
        if (strcmp(argv[i], "--quiet") == 0) {
            a->quiet = true;
            continue;
        }
        if (strcmp(argv[i], "--profile") == 0) {
            a->profile = true;
            continue;
        }
        if (strcmp(argv[i], "--inference-gradients") == 0) {
            a->inference_grads = true;
            continue;
        }
        if ((v = cli_option(argc, argv, &i, "--data", &bad))) a->data = v;
        else if (!bad && (v = cli_option(argc, argv, &i, "--optimizer", &bad))) a->optimizer = v;
        else if (!bad && (v = cli_option(argc, argv, &i, "--checkpoint-dir", &bad))) a->ckpt_dir = v;
        else if (!bad && (v = cli_option(argc, argv, &i, "--csv", &bad))) a->csv = v;
        else if (!bad && (v = cli_option(argc, argv, &i, "--engine", &bad))) {
            if (cli_engine("train", v, &a->engine)) return 1;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--target", &bad))) {
            if (cli_target("train", v, &a->target)) return 1;
        }
        else if (!bad && (v = cli_option(argc, argv, &i, "--seed", &bad))) {
            int64_t s;
            if (!whole(v, &s)) return cli_fail("train", "--seed needs a non-negative integer, got '%s'", v);
            a->seed = (uint64_t)s;
        } else if (!bad) {
            size_t k = 0;
            for (; k < sizeof nums / sizeof nums[0]; k++)
                if ((v = cli_option(argc, argv, &i, nums[k].name, &bad)) || bad) break;
            if (bad) return 1;
            if (k == sizeof nums / sizeof nums[0]) {
                if (argv[i][0] == '-' && argv[i][1]) return cli_fail("train", "unknown option '%s'", argv[i]);
                if (a->model) return cli_fail("train", "more than one model file ('%s')", argv[i]);
                a->model = argv[i];
            } else if (nums[k].d ? !num(v, nums[k].d) || *nums[k].d < 0 : !whole(v, nums[k].i))
                return cli_fail("train", "%s needs a non-negative number, got '%s'", nums[k].name, v);
        }
    }
    if (bad) return 1;
    if (!a->model) return cli_fail("train", "no model file (relayc train --help)");
    if (!a->data) return cli_fail("train", "no --data (relayc train --help)");
    if (a->resume && !a->ckpt_dir) return cli_fail("train", "--resume needs --checkpoint-dir");
    if (a->resume && a->force) return cli_fail("train", "--force starts over: not with --resume");
    if (a->threads > 64) return cli_fail("train", "--threads %lld: at most 64", (long long)a->threads);
    if (a->shards && !a->deterministic) return cli_fail("train", "--shards needs --deterministic");
    if (a->shards > 4096) return cli_fail("train", "--shards %lld: at most 4096", (long long)a->shards);
    return cli_engine_check("train", a->engine, a->target);
}

static int make_opts(const train_args *a, ry_train_opts *o) {
    *o = ry_train_defaults();
    ry_optim_kind k = RY_OPTIM_SGD;
    if (a->optimizer && !ry_optim_kind_parse(a->optimizer, &k))
        return cli_fail("train", "unknown optimizer '%s' (sgd, adam, adamw, adagrad, rmsprop)",
                        a->optimizer);
    o->optim = ry_optim_defaults(k);
    if (k == RY_OPTIM_SGD) o->optim.lr = 0.01;
    if (!isnan(a->lr)) o->optim.lr = a->lr;
    if (!isnan(a->momentum)) o->optim.momentum = a->momentum;
    if (!isnan(a->weight_decay)) o->optim.weight_decay = a->weight_decay;
    o->clip_norm = a->clip_norm;
    o->seed = a->seed;
    o->engine = a->engine;
    o->target = a->target;
    o->training = !a->inference_grads; /* dropout and batch norm as in training */
    /* kernels and OpenBLAS (threads.h), and the trainer's workers */
    if (a->threads > 0) ry_set_num_threads((int)a->threads);
    o->threads = (int)a->threads;
    return 0;
}

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
    if (ry_text_read(path, &d->text, err)) return RY_ERR;
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

static ry_status load_sst(ry_trainer *tr, const char *dir, data *d, ry_error *err) {
    char p[1024];
    if (!(d->vocab = ry_vocab_new())) return ry_error_at(err, RY_NO_SPAN, "out of memory");
    snprintf(p, sizeof p, "%s/train.txt", dir);
    if (ry_treebank_read(p, d->vocab, true, &d->ttrees, err)) return RY_ERR;
    snprintf(p, sizeof p, "%s/dev.txt", dir);
    if (ry_treebank_read(p, d->vocab, false, &d->etrees, err)) return RY_ERR;
    if (ry_train_data_trees(tr, d->ttrees, &d->tsrc, &d->td, err) ||
        ry_train_data_trees(tr, d->etrees, &d->esrc, &d->ed, err))
        return RY_ERR;
    d->has_eval = true;
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
    ry_status st = ry_data_split_tensors(n, all, a->val, a->seed, d->train, d->eval, err);
    for (int i = 0; i < n; i++) ry_tensor_release(all[i]);
    if (st) return RY_ERR;
    ry_train_data_tensors(n, d->train, n == 2 ? 1 : -1, &d->td);
    ry_train_data_tensors(n, d->eval, n == 2 ? 1 : -1, &d->ed);
    d->has_eval = a->val > 0;
    return RY_OK;
}

static int load_data(ry_trainer *tr, const train_args *a, data *d, ry_error *err) {
    char kind[64];
    const char *colon = strchr(a->data, ':');
    size_t kl = colon ? (size_t)(colon - a->data) : strlen(a->data);
    snprintf(kind, sizeof kind, "%.*s", (int)kl, a->data);
    const char *path = colon ? colon + 1 : NULL;
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
    return 0;
}

static int train_main(int argc, char **argv, train_args *ap);

int cmd_train(int argc, char **argv) {
    train_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_args(argc, argv, &a);
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
    int rc;
    catch_signals(); /* from here on a signal stops the run at the next step */
    ry_train_opts o;
    if (make_opts(&a, &o)) return 1;
    if (a.ckpt_dir && mkdir(a.ckpt_dir, 0755) != 0 && errno != EEXIST)
        return cli_fail("train", "cannot create %s: %s", a.ckpt_dir, strerror(errno));
    ry_trainer *tr = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_trainer_new_file(a.model, &o, &tr, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    data d;
    memset(&d, 0, sizeof d);
    char config[2048];
    config_line(argc, argv, &a, config, sizeof config);
    rc = load_data(tr, &a, &d, &err);
    ry_vm_program *vm = ry_trainer_vm(tr);
    if (rc == 0 && a.profile && !vm) rc = cli_fail("train", "--profile needs the compiled engine (--engine vm)");
    ry_vm_set_profile(vm, a.profile);
    if (rc == 0) rc = fit(tr, &a, &d, config);
    if (rc == 0 && a.profile) ry_vm_print_profile(vm, stderr, 30);
    data_free(&d);
    ry_trainer_free(tr);
    return rc;
}
