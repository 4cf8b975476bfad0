/*
 * grad_ratio.c: issue 3's "lean gradient" benchmark. For each model file
 * (default models/mlp.relay and models/lenet.relay) it times, on the
 * interpreter, @loss (forward), the gradient program ry_grad makes, and the
 * same program after ry_optimize(m, 2): medians over repeated runs on random
 * inputs of the data shapes at --batch, parameters initialized as the
 * model's `// init:` line says. The four programs run in interleaved rounds
 * (the machine is shared: load then falls on all alike). It also times the
 * compile (ry_grad, then the pipeline) and checks that both gradient
 * programs agree. One JSON line per model on stdout.
 *   grad_ratio [--threads N] [--seconds S] [--batch B] [MODEL.relay...]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/train.h"

#define MAX_ARGS 64
#define MAX_TENSORS 64

/* What is timed: an entry of a module, run on the shared arguments. */
typedef struct timed {
    ry_module *m;
    const char *entry;
    double ms[1000]; /* one wall time per round */
    double wall, gemm; /* seconds in all, and inside GEMM */
    ry_value *last;    /* the last result */
} timed;

/* Runs the entries in rounds, each once per round, so that the load of the
 * shared machine falls on all of them alike: one warm-up round, then at
 * least 5 rounds and until `seconds` have passed per entry on average (at
 * most 1000 rounds). Returns the number of rounds, or -1 on error. */
static int time_rounds(timed *t, int nt, int nargs, ry_value *const *args, double seconds,
                       ry_error *err) {
    for (int k = 0; k < nt; k++) {
        ry_value *out = NULL;
        if (ry_interp_call(t[k].m, t[k].entry, nargs, args, NULL, &out, err)) return -1;
        ry_value_release(out);
    }
    int n = 0;
    double start = bench_now();
    while (n < 1000 && (n < 5 || bench_now() - start < seconds * nt)) {
        for (int k = 0; k < nt; k++) {
            ry_value *out = NULL;
            double g0 = bench_gemm_seconds(), t0 = bench_now();
            if (ry_interp_call(t[k].m, t[k].entry, nargs, args, NULL, &out, err)) return -1;
            double dt = bench_now() - t0;
            t[k].ms[n] = 1e3 * dt;
            t[k].wall += dt;
            t[k].gemm += bench_gemm_seconds() - g0;
            ry_value_release(t[k].last);
            t[k].last = out;
        }
        n++;
    }
    return n;
}

/* Largest |a - b| over the tensors of two results of the same structure;
 * INFINITY when the structures differ. */
static double max_abs_diff(const ry_value *a, const ry_value *b) {
    ry_tensor *ta[MAX_TENSORS], *tb[MAX_TENSORS];
    int na = ry_value_flatten(a, ta, MAX_TENSORS), nb = ry_value_flatten(b, tb, MAX_TENSORS);
    if (na != nb || na < 0 || na > MAX_TENSORS) return INFINITY;
    double worst = 0;
    for (int i = 0; i < na; i++) {
        if (!ry_tensor_same_shape(ta[i], tb[i])) return INFINITY;
        for (int64_t k = 0; k < ta[i]->size; k++) {
            double d = fabs(ry_tensor_get(ta[i], k) - ry_tensor_get(tb[i], k));
            if (!(d <= worst)) worst = d; /* NaN propagates as the worst */
        }
    }
    return worst;
}

/* The model's short name: the file name without directory and extension. */
static void model_name(const char *path, char *out, size_t n) {
    const char *s = strrchr(path, '/');
    s = s ? s + 1 : path;
    snprintf(out, n, "%s", s);
    char *dot = strrchr(out, '.');
    if (dot) *dot = '\0';
}

static ry_status bench_model(const char *path, int threads, double seconds, int64_t batch,
                             ry_error *err) {
    ry_status st = RY_ERR;
    ry_trainer *tr = NULL;
    ry_module *m = NULL, *mo = NULL; /* gradient as made; gradient optimized */
    char *text = NULL;
    size_t len = 0;
    ry_value *args[MAX_ARGS] = {0};
    static timed t[5];
    bool *wrt = NULL;
    memset(t, 0, sizeof t);
    int nargs = 0;

    /* The trainer parses the model and initializes its parameters from the
     * `// init:` line; the timed compile runs on modules of our own. */
    ry_train_opts o = ry_train_defaults();
    if (ry_trainer_new_file(path, &o, &tr, err)) goto out;
    ry_param_set *ps = ry_trainer_params(tr);
    int ndata = ry_trainer_ndata(tr) + ry_trainer_nstate(tr);

    if (bench_read_file(path, &text, &len, err)) goto out;
    double t_parse = bench_now();
    if (ry_module_parse(path, text, len, &m, err) || ry_module_typecheck(m, err)) goto out;
    t_parse = bench_now() - t_parse;
    if (ry_module_parse(path, text, len, &mo, err) || ry_module_typecheck(mo, err)) goto out;
    ry_global *g = ry_module_find_global(m, "loss");
    if (!g) {
        ry_error_at(err, RY_NO_SPAN, "%s has no @loss", path);
        goto out;
    }
    const ry_expr *fn = g->func;
    if (fn->func.nparams > MAX_ARGS) {
        ry_error_at(err, RY_NO_SPAN, "@loss has too many parameters");
        goto out;
    }
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    /* labels below 10 (the image models' classes) */
    if (bench_random_data(fn, ndata, batch, 64, 10, &rng, args, err)) goto out;
    nargs = ndata;
    for (int i = ndata; i < fn->func.nparams; i++) {
        int k = ry_params_find(ps, fn->func.params[i]->name);
        if (k < 0) {
            ry_error_at(err, RY_NO_SPAN, "parameter %s not in the trainer's set",
                        fn->func.params[i]->name);
            goto out;
        }
        args[nargs] = ry_value_tensor(ry_tensor_retain(ps->views[k]));
        if (!args[nargs]) {
            ry_error_at(err, RY_NO_SPAN, "out of memory");
            goto out;
        }
        nargs++;
    }

    const char *gname = NULL, *goname = NULL;
    if (ry_grad(m, "loss", NULL, NULL, &gname, err)) goto out;
    double t_grad = bench_now();
    if (ry_grad(mo, "loss", NULL, NULL, &goname, err)) goto out;
    t_grad = bench_now() - t_grad;
    /* the trainer's gradient: with respect to the parameters only */
    const char *gpname = NULL;
    if (!(wrt = calloc((size_t)fn->func.nparams, sizeof *wrt))) {
        ry_error_at(err, RY_NO_SPAN, "out of memory");
        goto out;
    }
    for (int i = ndata; i < fn->func.nparams; i++) wrt[i] = true;
    ry_grad_opts go = {.wrt = wrt, .nwrt = fn->func.nparams};
    if (ry_grad_ex(mo, "loss", NULL, "loss_grad_params", &go, &gpname, err)) goto out;
    double t_opt = bench_now();
    if (ry_optimize(mo, 2, err)) goto out;
    t_opt = bench_now() - t_opt;

    /* forward, gradient, forward optimized, gradient optimized, gradient
     * of the parameters only optimized */
    t[0].m = m, t[0].entry = "loss";
    t[1].m = m, t[1].entry = gname;
    t[2].m = mo, t[2].entry = "loss";
    t[3].m = mo, t[3].entry = goname;
    t[4].m = mo, t[4].entry = gpname;
    int rounds = time_rounds(t, 5, nargs, args, seconds, err);
    if (rounds < 0) goto out;
    double med[5], share[5];
    for (int k = 0; k < 5; k++) {
        med[k] = bench_median(t[k].ms, rounds);
        share[k] = t[k].wall > 0 ? t[k].gemm / t[k].wall : 0;
    }

    int counts[RY_EXPR_REF_WRITE + 1] = {0};
    ry_expr_count_kinds(ry_module_find_global(mo, goname)->func, counts);
    int nref = counts[RY_EXPR_REF] + counts[RY_EXPR_REF_READ] + counts[RY_EXPR_REF_WRITE];

    char name[64];
    model_name(path, name, sizeof name);
    printf("{\"bench\": \"grad_ratio\", \"model\": \"%s\", \"engine\": \"interp\", "
           "\"batch\": %lld, \"threads\": %d, \"rounds\": %d, "
           "\"forward_ms\": %.3f, \"grad_ms\": %.3f, \"forward_opt_ms\": %.3f, "
           "\"grad_opt_ms\": %.3f, "
           "\"ratio_unoptimized\": %.3f, \"ratio_optimized\": %.3f, "
           "\"ratio_optimized_vs_plain_forward\": %.3f, \"target_ratio\": 4, "
           "\"grad_params_opt_ms\": %.3f, \"ratio_params_optimized\": %.3f, "
           "\"parse_typecheck_ms\": %.3f, \"grad_compile_ms\": %.3f, \"optimize_ms\": %.3f, "
           "\"compile_ms\": %.3f, \"grad_opt_refs\": %d, \"grad_opt_closures\": %d, "
           "\"gemm_share_forward\": %.3f, \"gemm_share_grad\": %.3f, "
           "\"gemm_share_grad_opt\": %.3f, \"max_abs_diff_opt_vs_plain\": %.3g}\n",
           name, (long long)batch, threads, rounds, med[0], med[1], med[2], med[3],
           med[1] / med[0], med[3] / med[2], med[3] / med[0], med[4], med[4] / med[2],
           1e3 * t_parse, 1e3 * t_grad,
           1e3 * t_opt, 1e3 * (t_grad + t_opt), nref, counts[RY_EXPR_FUNC] - 1, share[0],
           share[1], share[3], max_abs_diff(t[1].last, t[3].last));
    fflush(stdout);
    st = RY_OK;
out:
    for (int k = 0; k < 5; k++) ry_value_release(t[k].last);
    free(wrt);
    bench_release_all(args, MAX_ARGS);
    ry_module_free(m);
    ry_module_free(mo);
    ry_free(text);
    ry_trainer_free(tr);
    return st;
}

int main(int argc, char **argv) {
    int threads = 1;
    double seconds = 2;
    int64_t batch = 64;
    const char *models[16];
    int nmodels = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--threads"))) threads = atoi(v);
        else if ((v = bench_opt(argc, argv, &i, "--seconds"))) seconds = atof(v);
        else if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoll(v);
        else if (argv[i][0] != '-' && nmodels < 16) models[nmodels++] = argv[i];
        else {
            fprintf(stderr,
                    "usage: grad_ratio [--threads N] [--seconds S] [--batch B] [MODEL.relay...]\n");
            return 2;
        }
    }
    if (threads < 1 || batch < 1 || !(seconds >= 0)) {
        fprintf(stderr, "grad_ratio: bad --threads, --batch or --seconds\n");
        return 2;
    }
    if (!nmodels) {
        models[nmodels++] = "models/mlp.relay";
        models[nmodels++] = "models/lenet.relay";
    }
    bench_set_threads(threads);
    int rc = 0;
    for (int i = 0; i < nmodels; i++) {
        ry_error err;
        if (bench_model(models[i], threads, seconds, batch, &err)) {
            ry_error_print(stderr, &err);
            rc = 1;
        }
    }
    return rc;
}
