/*
 * train_args.c: `relayc train`'s options. Three tables say what each flag
 * is (a switch, a number with its range, a count, a string), so parsing
 * is one loop; the schedule and --dim have parsers of their own. Counts
 * are whole numbers >= 1 (0 is refused, never read as "the default");
 * hyperparameters not given keep the optimizer's PyTorch defaults, and
 * their ranges are the library's (ry_optim_config_check,
 * ry_schedule_check), reported when the trainer is made.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_args.h"
#include "relayc/threads.h"

const char *const train_help =
    "usage: relayc train MODEL.relay --data KIND[:PATH] [options]\n"
    "\n"
    "Trains MODEL's @loss (its `// data:` parameters fed from the data, the\n"
    "rest trained) and evaluates @predict on held-out data after each epoch.\n"
    "\n"
    "data:\n"
    "  --data fashion-mnist[:DIR]  IDX files (default " RY_FASHION_MNIST_DIR ");\n"
    "                              test split t10k; also mnist:DIR\n"
    "  --data text:PATH            character text, truncated BPTT (last 10% held out)\n"
    "  --data sst:DIR              DIR/train.txt and DIR/dev.txt (PTB trees)\n"
    "  --data npy:X.npy,Y.npy      arrays (the last --val rows held out); integer\n"
    "                              labels of any width are cast to the model's\n"
    "  --dim NAME=N                the value of a symbolic dimension of a parameter\n"
    "                              (repeatable); a model line `// vocab: NAME` has\n"
    "                              sst and text data fill NAME with their vocabulary\n"
    "  --epochs N                  passes over the data (default 1)\n"
    "  --steps N                   stop after N optimizer steps in all\n"
    "  --batch N                   examples per step (text: streams; default 64,\n"
    "                              text 32, sst 25)\n"
    "  --seq N                     text: window length (default 64)\n"
    "  --drop-last                 whole batches only, in training and evaluation\n"
    "                              (a model with a fixed batch size)\n"
    "  --val N                     npy: rows held out (default 0)\n"
    "\n"
    "optimizer (PyTorch's defaults for what is not given):\n"
    "  --optimizer NAME            sgd (default, lr 0.01), adam, adamw, adagrad, rmsprop\n"
    "  --lr X  --weight-decay X\n"
    "  --momentum X  --dampening X  --nesterov        sgd (momentum: also rmsprop)\n"
    "  --beta1 X  --beta2 X  --amsgrad                adam, adamw\n"
    "  --eps X                                        adam, adamw, adagrad, rmsprop\n"
    "  --lr-decay X  --initial-accumulator X          adagrad\n"
    "  --alpha X  --centered                          rmsprop\n"
    "  --schedule KIND[:ARGS]      the learning rate per step (torch.optim.lr_scheduler):\n"
    "                              constant, step:SIZE[:GAMMA], multistep:M1,M2,..[:GAMMA],\n"
    "                              exponential:GAMMA, cosine:T_MAX[:ETA_MIN],\n"
    "                              linear:START:END:TOTAL (GAMMA default 0.1)\n"
    "  --warmup N[:FACTOR]         a linear warm-up over N steps from lr * FACTOR\n"
    "                              (default 1/3) before the schedule\n"
    "  --clip-norm X               clip gradients to this global L2 norm\n"
    "  --clip-value X              clamp every gradient element to [-X, X]\n"
    "  --inference-gradients       differentiate in inference mode (dropout as the\n"
    "                              identity, batch norm on moving statistics);\n"
    "                              default: training mode\n"
    "  --seed N                    initialization and shuffling (default 0)\n"
    "  --no-autobatch              run the trees (examples) of a batch one at a time;\n"
    "                              default: together, their matching operator calls as\n"
    "                              one kernel (same results to float32 rounding)\n"
    "\n"
    "checkpoints and output:\n"
    "  --checkpoint-dir DIR        write DIR/ckpt-<step>.h5 (created if missing)\n"
    "  --export DIR                at the end, export @predict with the trained\n"
    "                              parameters as standalone C (relayc export)\n"
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
    "  (a model line `// metrics: loss` reports the loss only; by default accuracy\n"
    "  is reported where the labels are integers and @predict exists)\n"
    "\n"
    "execution:\n"
    "  --engine vm|interp          the compiled engine (default) or the interpreter\n"
    "  --target NAME               where kernels, parameters and optimizer state live:\n"
    "                              cpu (default; opencl and cuda where built in)\n"
    "  --max-memory MIB            stop with a located error when this process holds\n"
    "                              more (a tree or sequence too deep); default: when\n"
    "                              the machine has less than 5% of its memory left\n"
    "  --threads N                 cores for the kernels and for a step's independent\n"
    "                              calls (trees); results do not depend on it\n"
    "                              (default: RELAYC_NUM_THREADS, else 1)\n"
    "  --profile                   time the compiled engine's operator calls and print\n"
    "                              the call sites that took longest on stderr at the\n"
    "                              end (the calling thread's calls: with trees on\n"
    "                              several threads, those it ran)\n"
    "\n"
    "data parallel, under mpirun (mpirun -np N relayc train ...): each rank takes\n"
    "its share of every global batch of --batch examples, the gradients are\n"
    "all-reduced, rank 0 prints and writes the checkpoints (any N may resume).\n"
    "  --deterministic             sum the shards' gradients in a fixed order: the\n"
    "                              parameters are bit for bit those of one process\n"
    "                              with the same --shards (default: all-reduce,\n"
    "                              equal to rounding)\n"
    "  --shards S                  with --deterministic: shards per global batch\n"
    "                              (default: the ranks; a multiple of them)\n"
    "  --bucket-bytes N            the all-reduce's pieces (default 4 MiB); each\n"
    "                              starts as the backward pass finishes its\n"
    "                              gradients (--no-overlap: after it)\n"
    "  --shard-optimizer           each rank keeps the optimizer state of its slice\n"
    "                              of the parameters only (ZeRO-1): the same\n"
    "                              parameters, 1/N of the state's memory\n"
    "  --dist-timeout SECONDS      a rank waiting longer than this for the others\n"
    "                              ends the job with a message (default 300)\n";

/* ---- the tables ---- */

typedef struct flag_opt {
    const char *name;
    size_t off; /* of a bool in train_args */
} flag_opt;

#define AT(field) offsetof(train_args, field)

static const flag_opt flags[] = {
    {"--resume", AT(resume)},           {"--resume-anyway", AT(resume_anyway)},
    {"--force", AT(force)},             {"--drop-last", AT(drop_last)},
    {"--quiet", AT(quiet)},             {"--profile", AT(profile)},
    {"--inference-gradients", AT(inference_grads)},
    {"--no-autobatch", AT(no_autobatch)},
    {"--nesterov", AT(nesterov)},       {"--amsgrad", AT(amsgrad)},
    {"--centered", AT(centered)},       {"--deterministic", AT(deterministic)},
    {"--shard-optimizer", AT(shard_optimizer)}, {"--no-overlap", AT(no_overlap)},
};

/* a double; positive: must be > 0, else >= 0 */
typedef struct real_opt {
    const char *name;
    size_t off;
    bool positive;
} real_opt;

static const real_opt reals[] = {
    {"--lr", AT(lr), false},          {"--momentum", AT(momentum), false},
    {"--weight-decay", AT(weight_decay), false}, {"--dampening", AT(dampening), false},
    {"--beta1", AT(beta1), false},    {"--beta2", AT(beta2), false},
    {"--eps", AT(eps), true},         {"--alpha", AT(alpha), false},
    {"--lr-decay", AT(lr_decay), false}, {"--initial-accumulator", AT(initial_accumulator), false},
    {"--clip-norm", AT(clip_norm), true}, {"--clip-value", AT(clip_value), true},
    {"--dist-timeout", AT(dist_timeout), true},
};

/* an int64; min: the smallest value taken */
typedef struct count_opt {
    const char *name;
    size_t off;
    int64_t min;
} count_opt;

static const count_opt counts[] = {
    {"--epochs", AT(epochs), 1},       {"--steps", AT(steps), 1},
    {"--batch", AT(batch), 1},         {"--seq", AT(seq), 1},
    {"--val", AT(val), 0},             {"--checkpoint-every", AT(ckpt_every), 1},
    {"--keep", AT(keep), 1},           {"--log-every", AT(log_every), 1},
    {"--threads", AT(threads), 1},     {"--shards", AT(shards), 1},
    {"--bucket-bytes", AT(bucket), 1}, {"--max-memory", AT(max_memory_mib), 1},
};

#define N(t) (sizeof(t) / sizeof((t)[0]))

static bool real(const char *v, double *out) {
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
    return !errno && *v && !*end;
}

/* ---- the schedule ----
 * schedule -> 'constant' | 'step:' N [':' X] | 'multistep:' N (',' N)* [':' X]
 *           | 'exponential:' X | 'cosine:' N [':' X] | 'linear:' X ':' X ':' N */

/* The ':'-separated fields of v after its kind, at most max. */
static int fields(const char *v, char out[][64], int max) {
    int n = 0;
    const char *p = strchr(v, ':');
    while (p && n < max) {
        const char *q = strchr(p + 1, ':');
        size_t len = q ? (size_t)(q - p - 1) : strlen(p + 1);
        snprintf(out[n++], 64, "%.*s", (int)len, p + 1);
        p = q;
    }
    return p ? max + 1 : n;
}

static int bad_schedule(const char *v) {
    return cli_fail("train", "--schedule '%s': expected constant, step:SIZE[:GAMMA], "
                             "multistep:M1,M2,..[:GAMMA], exponential:GAMMA, "
                             "cosine:T_MAX[:ETA_MIN] or linear:START:END:TOTAL", v);
}

static int parse_milestones(const char *v, const char *list, ry_schedule *s) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (s->n_milestones == RY_SCHED_MAX_MILESTONES)
            return cli_fail("train", "--schedule: at most %d milestones", RY_SCHED_MAX_MILESTONES);
        if (!whole(tok, &s->milestones[s->n_milestones++])) return bad_schedule(v);
    }
    return s->n_milestones ? 0 : bad_schedule(v);
}

static int parse_schedule(const char *v, ry_schedule *s) {
    char f[3][64];
    int n = fields(v, f, 3);
    size_t kl = strcspn(v, ":");
    int64_t w = s->warmup_steps;
    double wf = s->warmup_start_factor;
    memset(s, 0, sizeof *s);
    s->warmup_steps = w;
    s->warmup_start_factor = wf;
    s->gamma = 0.1;
    bool ok;
    if (!strncmp(v, "constant", kl) && kl == 8) {
        ok = n == 0;
    } else if (!strncmp(v, "step", kl) && kl == 4) {
        s->kind = RY_SCHED_STEP;
        ok = (n == 1 || n == 2) && whole(f[0], &s->step_size) && (n == 1 || real(f[1], &s->gamma));
    } else if (!strncmp(v, "multistep", kl) && kl == 9) {
        s->kind = RY_SCHED_MULTISTEP;
        if ((n != 1 && n != 2) || parse_milestones(v, f[0], s)) return 1;
        ok = n == 1 || real(f[1], &s->gamma);
    } else if (!strncmp(v, "exponential", kl) && kl == 11) {
        s->kind = RY_SCHED_EXPONENTIAL;
        ok = n == 1 && real(f[0], &s->gamma);
    } else if (!strncmp(v, "cosine", kl) && kl == 6) {
        s->kind = RY_SCHED_COSINE;
        ok = (n == 1 || n == 2) && whole(f[0], &s->t_max) && (n == 1 || real(f[1], &s->eta_min));
    } else if (!strncmp(v, "linear", kl) && kl == 6) {
        s->kind = RY_SCHED_LINEAR;
        ok = n == 3 && real(f[0], &s->start_factor) && real(f[1], &s->end_factor) &&
             whole(f[2], &s->total_iters);
    } else {
        ok = false;
    }
    return ok ? 0 : bad_schedule(v);
}

static int parse_warmup(const char *v, ry_schedule *s) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *colon = strchr(buf, ':');
    if (colon) *colon = '\0';
    s->warmup_start_factor = 1.0 / 3; /* torch's LinearLR default */
    if (!whole(buf, &s->warmup_steps) || s->warmup_steps < 1 ||
        (colon && !real(colon + 1, &s->warmup_start_factor)))
        return cli_fail("train", "--warmup needs STEPS[:FACTOR] with STEPS >= 1, got '%s'", v);
    return 0;
}

/* ---- --dim ---- */

bool train_args_set_dim(train_args *a, const char *name, int64_t value) {
    for (int i = 0; i < a->nsyms; i++)
        if (strcmp(a->sym_names[i], name) == 0) {
            a->sym_values[i] = value;
            return true;
        }
    if (a->nsyms == RY_TRAIN_MAX_SYMS) return false;
    a->sym_names[a->nsyms] = name;
    a->sym_values[a->nsyms++] = value;
    return true;
}

static int parse_dim(const char *v, train_args *a) {
    const char *eq = strchr(v, '=');
    int64_t n;
    if (!eq || eq == v || !whole(eq + 1, &n) || n < 0)
        return cli_fail("train", "--dim needs NAME=N with N >= 0, got '%s'", v);
    if (a->nsyms == RY_TRAIN_MAX_SYMS)
        return cli_fail("train", "--dim: at most %d symbolic dimensions", RY_TRAIN_MAX_SYMS);
    char *name = a->dim_names[a->nsyms];
    snprintf(name, sizeof a->dim_names[0], "%.*s", (int)(eq - v), v);
    for (int i = 0; i < a->nsyms; i++)
        if (strcmp(a->sym_names[i], name) == 0) return cli_fail("train", "--dim %s given twice", name);
    train_args_set_dim(a, name, n);
    return 0;
}

/* ---- the loop ---- */

/* A flag of a table: 1 taken, 0 not this table's, -1 error printed. */
static int table_option(int argc, char **argv, int *i, train_args *a, bool *bad) {
    char *base = (char *)a;
    for (size_t k = 0; k < N(flags); k++)
        if (strcmp(argv[*i], flags[k].name) == 0) {
            *(bool *)(base + flags[k].off) = true;
            return 1;
        }
    const char *v;
    for (size_t k = 0; k < N(reals); k++)
        if ((v = cli_option(argc, argv, i, reals[k].name, bad)) || *bad) {
            double *x = (double *)(base + reals[k].off);
            if (*bad) return -1;
            if (!real(v, x) || *x < 0 || (reals[k].positive && *x == 0)) {
                cli_fail("train", "%s needs a number %s 0, got '%s'", reals[k].name,
                         reals[k].positive ? ">" : ">=", v);
                return -1;
            }
            return 1;
        }
    for (size_t k = 0; k < N(counts); k++)
        if ((v = cli_option(argc, argv, i, counts[k].name, bad)) || *bad) {
            int64_t *x = (int64_t *)(base + counts[k].off);
            if (*bad) return -1;
            if (!whole(v, x) || *x < counts[k].min) {
                cli_fail("train", "%s needs a whole number >= %lld, got '%s'", counts[k].name,
                         (long long)counts[k].min, v);
                return -1;
            }
            return 1;
        }
    return 0;
}

static int named_option(int argc, char **argv, int *i, train_args *a, bool *bad) {
    const char *v;
    if ((v = cli_option(argc, argv, i, "--data", bad))) a->data = v;
    else if (!*bad && (v = cli_option(argc, argv, i, "--optimizer", bad))) a->optimizer = v;
    else if (!*bad && (v = cli_option(argc, argv, i, "--checkpoint-dir", bad))) a->ckpt_dir = v;
    else if (!*bad && (v = cli_option(argc, argv, i, "--csv", bad))) a->csv = v;
    else if (!*bad && (v = cli_option(argc, argv, i, "--export", bad))) a->export_dir = v;
    else if (!*bad && (v = cli_option(argc, argv, i, "--engine", bad))) {
        if (cli_engine("train", v, &a->engine)) return -1;
    } else if (!*bad && (v = cli_option(argc, argv, i, "--target", bad))) {
        if (cli_target("train", v, &a->target)) return -1;
    } else if (!*bad && (v = cli_option(argc, argv, i, "--schedule", bad))) {
        if (parse_schedule(v, &a->schedule)) return -1;
    } else if (!*bad && (v = cli_option(argc, argv, i, "--warmup", bad))) {
        if (parse_warmup(v, &a->schedule)) return -1;
    } else if (!*bad && (v = cli_option(argc, argv, i, "--dim", bad))) {
        if (parse_dim(v, a)) return -1;
    } else if (!*bad && (v = cli_option(argc, argv, i, "--seed", bad))) {
        int64_t s;
        if (!whole(v, &s) || s < 0) {
            cli_fail("train", "--seed needs a non-negative integer, got '%s'", v);
            return -1;
        }
        a->seed = (uint64_t)s;
    } else {
        return *bad ? -1 : 0;
    }
    return 1;
}

int train_args_parse(int argc, char **argv, train_args *a) {
    a->lr = a->momentum = a->weight_decay = a->dampening = a->beta1 = a->beta2 = a->eps = NAN;
    a->alpha = a->lr_decay = a->initial_accumulator = NAN;
    a->keep = 3;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(train_help, stdout);
            return -1;
        }
        bool bad = false;
        int r = table_option(argc, argv, &i, a, &bad);
        if (r == 0) r = named_option(argc, argv, &i, a, &bad);
        if (r < 0) return 1;
        if (r > 0) continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_fail("train", "unknown option '%s' (relayc help train)", argv[i]);
        if (a->model) return cli_fail("train", "more than one model file ('%s')", argv[i]);
        a->model = argv[i];
    }
    if (a->resume_anyway) a->resume = true;
    if (!a->model) return cli_fail("train", "no model file (relayc help train)");
    if (!a->data) return cli_fail("train", "no --data (relayc help train)");
    if (a->resume && !a->ckpt_dir) return cli_fail("train", "--resume needs --checkpoint-dir");
    if (a->resume && a->force) return cli_fail("train", "--force starts over: not with --resume");
    if (a->threads > 64) return cli_fail("train", "--threads %lld: at most 64", (long long)a->threads);
    if (a->max_memory_mib > ((int64_t)1 << 40))
        return cli_fail("train", "--max-memory %lld: at most 2^40 MiB", (long long)a->max_memory_mib);
    if (a->shards && !a->deterministic) return cli_fail("train", "--shards needs --deterministic");
    if (a->shards > 4096) return cli_fail("train", "--shards %lld: at most 4096", (long long)a->shards);
    return cli_engine_check("train", a->engine, a->target);
}

/* ---- to the C API ---- */

static void set(double *field, double v) {
    if (!isnan(v)) *field = v;
}

int train_args_opts(const train_args *a, ry_train_opts *o) {
    *o = ry_train_defaults();
    ry_optim_kind k = RY_OPTIM_SGD;
    if (a->optimizer && !ry_optim_kind_parse(a->optimizer, &k))
        return cli_fail("train", "unknown optimizer '%s' (sgd, adam, adamw, adagrad, rmsprop)",
                        a->optimizer);
    o->optim = ry_optim_defaults(k);
    if (k == RY_OPTIM_SGD) o->optim.lr = 0.01;
    set(&o->optim.lr, a->lr);
    set(&o->optim.momentum, a->momentum);
    set(&o->optim.weight_decay, a->weight_decay);
    set(&o->optim.dampening, a->dampening);
    set(&o->optim.beta1, a->beta1);
    set(&o->optim.beta2, a->beta2);
    set(&o->optim.eps, a->eps);
    set(&o->optim.alpha, a->alpha);
    set(&o->optim.lr_decay, a->lr_decay);
    set(&o->optim.initial_accumulator_value, a->initial_accumulator);
    o->optim.nesterov |= a->nesterov;
    o->optim.amsgrad |= a->amsgrad;
    o->optim.centered |= a->centered;
    o->schedule = a->schedule;
    o->clip_norm = a->clip_norm;
    o->clip_value = a->clip_value;
    o->seed = a->seed;
    o->nsyms = a->nsyms;
    for (int i = 0; i < a->nsyms; i++) {
        o->sym_names[i] = a->sym_names[i];
        o->sym_values[i] = a->sym_values[i];
    }
    o->engine = a->engine;
    o->target = a->target;
    o->training = !a->inference_grads; /* dropout and batch norm as in training */
    o->no_autobatch = a->no_autobatch;
    /* kernels and OpenBLAS (threads.h), and the trainer's workers */
    if (a->threads > 0) ry_set_num_threads((int)a->threads);
    o->threads = (int)a->threads;
    o->max_resident = (size_t)a->max_memory_mib << 20;
    return 0;
}
