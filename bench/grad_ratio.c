/*
 * grad_ratio.c: issue 3's "lean gradient" benchmark. For each model file
 * (default models/mlp.relay and models/lenet.relay) it times, on the
 * interpreter, @loss (forward), the gradient program ry_grad makes, and the
 * same program after ry_optimize(m, 2): medians over repeated runs on random
 * inputs of the data shapes at --batch, parameters initialized as the
 * model's `// init:` line says. It also times the compile (ry_grad, then
 * the pipeline) and checks that both gradient programs agree. One JSON line
 * per model on stdout.
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

typedef struct timing {
    double median_ms; /* median of the runs' wall times */
    int runs;
    double gemm_share; /* GEMM seconds / wall seconds over all runs */
} timing;

/* Runs entry on args repeatedly: at least 5 runs and until `seconds` have
 * passed (at most 1000), after one warm-up run. *last (if non-NULL) keeps
 * the last result. */
static ry_status time_entry(ry_module *m, const char *entry, int nargs, ry_value *const *args,
                            double seconds, timing *t, ry_value **last, ry_error *err) {
    enum { MAX_RUNS = 1000 };
    static double ms[MAX_RUNS];
    ry_value *out = NULL;
    if (ry_interp_call(m, entry, nargs, args, NULL, &out, err)) return RY_ERR;
    ry_value_release(out);
    int n = 0;
    double start = bench_now(), g0 = bench_gemm_seconds();
    while (n < MAX_RUNS && (n < 5 || bench_now() - start < seconds)) {
        double t0 = bench_now();
        if (ry_interp_call(m, entry, nargs, args, NULL, &out, err)) return RY_ERR;
        ms[n++] = 1e3 * (bench_now() - t0);
        if (last && n > 1) ry_value_release(*last);
        if (last) *last = out;
        else ry_value_release(out);
        out = NULL;
    }
    double wall = bench_now() - start;
    t->gemm_share = wall > 0 ? (bench_gemm_seconds() - g0) / wall : 0;
    t->runs = n;
    t->median_ms = bench_median(ms, n);
    return RY_OK;
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
    ry_module *m = NULL;
    char *text = NULL;
    size_t len = 0;
    ry_value *args[MAX_ARGS] = {0};
    ry_value *out_plain = NULL, *out_opt = NULL;
    int nargs = 0;

    /* The trainer parses the model and initializes its parameters from the
     * `// init:` line; the timed compile runs on a module of our own. */
    ry_train_opts o = ry_train_defaults();
    if (ry_trainer_new_file(path, &o, &tr, err)) goto out;
    ry_param_set *ps = ry_trainer_params(tr);
    int ndata = ry_trainer_ndata(tr) + ry_trainer_nstate(tr);

    if (bench_read_file(path, &text, &len, err)) goto out;
    double t_parse = bench_now();
    if (ry_module_parse(path, text, len, &m, err) || ry_module_typecheck(m, err)) goto out;
    t_parse = bench_now() - t_parse;
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

    const char *gname = NULL;
    double t_grad = bench_now();
    if (ry_grad(m, "loss", NULL, NULL, &gname, err)) goto out;
    t_grad = bench_now() - t_grad;
    timing fwd, grad, fwd_opt, grad_opt;
    if (time_entry(m, "loss", nargs, args, seconds, &fwd, NULL, err) ||
        time_entry(m, gname, nargs, args, seconds, &grad, &out_plain, err))
        goto out;
    double t_opt = bench_now();
    if (ry_optimize(m, 2, err)) goto out;
    t_opt = bench_now() - t_opt;
    if (time_entry(m, "loss", nargs, args, seconds, &fwd_opt, NULL, err) ||
        time_entry(m, gname, nargs, args, seconds, &grad_opt, &out_opt, err))
        goto out;

    int counts[RY_EXPR_REF_WRITE + 1] = {0};
    ry_expr_count_kinds(ry_module_find_global(m, gname)->func, counts);
    int nref = counts[RY_EXPR_REF] + counts[RY_EXPR_REF_READ] + counts[RY_EXPR_REF_WRITE];

    char name[64];
    model_name(path, name, sizeof name);
    printf("{\"bench\": \"grad_ratio\", \"model\": \"%s\", \"engine\": \"interp\", "
           "\"batch\": %lld, \"threads\": %d, "
           "\"forward_ms\": %.3f, \"grad_ms\": %.3f, \"forward_opt_ms\": %.3f, "
           "\"grad_opt_ms\": %.3f, \"runs\": [%d, %d, %d, %d], "
           "\"ratio_unoptimized\": %.3f, \"ratio_optimized\": %.3f, "
           "\"ratio_optimized_vs_plain_forward\": %.3f, \"target_ratio\": 4, "
           "\"parse_typecheck_ms\": %.3f, \"grad_compile_ms\": %.3f, \"optimize_ms\": %.3f, "
           "\"compile_ms\": %.3f, \"grad_opt_refs\": %d, \"grad_opt_closures\": %d, "
           "\"gemm_share_forward\": %.3f, \"gemm_share_grad_opt\": %.3f, "
           "\"max_abs_diff_opt_vs_plain\": %.3g}\n",
           name, (long long)batch, threads, fwd.median_ms, grad.median_ms, fwd_opt.median_ms,
           grad_opt.median_ms, fwd.runs, grad.runs, fwd_opt.runs, grad_opt.runs,
           grad.median_ms / fwd.median_ms, grad_opt.median_ms / fwd_opt.median_ms,
           grad_opt.median_ms / fwd.median_ms, 1e3 * t_parse, 1e3 * t_grad, 1e3 * t_opt,
           1e3 * (t_grad + t_opt), nref, counts[RY_EXPR_FUNC] - 1, fwd.gemm_share,
           grad_opt.gemm_share, max_abs_diff(out_plain, out_opt));
    fflush(stdout);
    st = RY_OK;
out:
    ry_value_release(out_plain);
    ry_value_release(out_opt);
    bench_release_all(args, MAX_ARGS);
    ry_module_free(m);
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
