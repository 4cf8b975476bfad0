/*
 * cmd_gradcheck.c: `relayc gradcheck FILE ...`: compare the AD gradient of
 * a function with central finite differences in float64 and print, per
 * parameter, the largest absolute and relative error. Exit status 1 when a
 * gradient disagrees.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "relayc/ad.h"

static const char *help =
    "usage: relayc gradcheck FILE [--entry NAME] [--input NAME=VALUE]... [--dim NAME=N]...\n"
    "                       [--eps E] [--rtol R] [--atol A] [--seed N] [--samples K]\n"
    "                       [--second-order] [--train] [--target T]\n"
    "\n"
    "Converts FILE to float64, then checks the gradient of @NAME (default main)\n"
    "against central finite differences of the sum of its outputs, at every\n"
    "element of every float tensor of the arguments (inside tuples, lists, trees\n"
    "and other ADT values too). Float tensor parameters without --input get\n"
    "seeded random values: from their initializer where FILE has `// init:`\n"
    "lines, else standard normal. Prints the largest absolute and relative\n"
    "error per parameter; exits with 1 on a mismatch.\n"
    "\n"
    "  --input NAME=PATH.npy       a tensor\n"
    "  --input NAME=sst:PATH:LINE  the PTB tree that starts on line LINE of PATH, as\n"
    "                              the parameter's tree type (Leaf(int32[, int32]),\n"
    "                              Node(T, T[, int32])); its words are numbered 1, 2,\n"
    "                              ... in order of appearance (0 is <unk>), and the\n"
    "                              model's `// vocab: V` dimension gets the size of\n"
    "                              that vocabulary (<unk> included)\n"
    "  --input NAME=relay:VALUE    a value in the text format: an expression over the\n"
    "                              constructors, operators and globals of FILE, e.g.\n"
    "                              'xs=relay:Cons(ones(shape=[2], dtype=\"float32\"), Nil)'\n"
    "                              or 't=relay:Node(Leaf(1), Leaf(2))'\n"
    "  --dim NAME=N                a symbolic dimension of the random parameters\n"
    "  --samples K                 check at most K elements of each tensor: half of\n"
    "                              them among those of nonzero gradient, the rest at\n"
    "                              random (seeded); default every element, or 64\n"
    "                              when a tensor has more than 65536 (an embedding)\n"
    "  --eps E                     finite-difference step, relative (default 1e-6)\n"
    "  --rtol R                    relative tolerance (default 1e-5)\n"
    "  --atol A                    absolute tolerance (default 1e-7)\n"
    "  --seed N                    seed of the random inputs and samples (default 0)\n"
    "  --second-order              also check the gradient program's own gradient\n"
    "  --train                     training mode: nn.dropout drops (the same mask in\n"
    "                              every run), batch_norm uses batch statistics; the\n"
    "                              gradient is built for it\n"
    "  --target T                  run the gradient program with the compiled engine on\n"
    "                              target T (cpu, opencl, opencl:N) instead of the\n"
    "                              interpreter; the finite differences stay the\n"
    "                              interpreter's on the CPU\n";

static int number(const char *opt, const char *v, double *out) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !*v || !(d >= 0)) return cli_fail("gradcheck", "%s needs a non-negative number, got '%s'", opt, v);
    *out = d;
    return 0;
}

/* Finite differences cost two runs of the model per element: an
 * embedding of a real vocabulary (the Tree-LSTM's 18281 x 300) would take
 * hours. Without --samples, a model with a tensor this large is checked
 * on a sample of each tensor, half of it where the gradient is nonzero
 * (the rows the input's words touch), and stderr says so. */
enum { AUTO_SAMPLE_ABOVE = 1 << 16, AUTO_SAMPLES = 64 };

static void auto_samples(int n, ry_value *const *args, const ry_expr *f, ry_gradcheck_opts *o) {
    if (o->max_elements) return;
    int big = -1;
    for (int i = 0; i < n; i++)
        if (args[i]->kind == RY_VAL_TENSOR && ry_dtype_is_float(args[i]->tensor->dtype) &&
            args[i]->tensor->size > AUTO_SAMPLE_ABOVE && (big < 0 || args[i]->tensor->size > args[big]->tensor->size))
            big = i;
    if (big < 0) return;
    o->max_elements = AUTO_SAMPLES;
    fprintf(stderr,
            "gradcheck: %%%s has %lld elements: checking %d of each tensor, half where the gradient is "
            "nonzero (--samples K to choose)\n",
            f->func.params[big]->name, (long long)args[big]->tensor->size, AUTO_SAMPLES);
}

static void print_rows(const char *title, const ry_gradcheck_param *ps, int n) {
    printf("%-24s %12s %12s %9s  %s\n", title, "max abs err", "max rel err", "elements", "");
    for (int i = 0; i < n; i++) {
        if (!ps[i].checked) {
            printf("%%%-23s %12s %12s %9s  %s\n", ps[i].name, "-", "-", "-", "not a float tensor");
            continue;
        }
        printf("%%%-23s %12.3e %12.3e %9lld  %s\n", ps[i].name, ps[i].max_abs, ps[i].max_rel,
               (long long)ps[i].nchecked, ps[i].ok ? "ok" : "MISMATCH");
    }
}

/* The model's `// vocab: NAME` line, which sst: inputs fill, and its `//
 * init:` lines, which random parameters are drawn from. */
static int vocab_dim(const char *path, const ry_module *m, cli_inputs *in, ry_init_spec **spec) {
    ry_error err;
    if (ry_init_spec_parse(path, m->source->text, m->source->len, spec, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    if ((*spec)->vocab[0]) in->vocab_dim = (*spec)->vocab;
    in->init = *spec;
    return 0;
}

int cmd_gradcheck(int argc, char **argv) {
    const char *path = NULL, *entry = "main";
    cli_inputs *in = ry_calloc(1, sizeof *in);
    ry_gradcheck_opts opts = {0};
    ry_interp_opts io = {.seed = 1}; /* every run draws the same dropout masks */
    uint64_t seed = 0;
    if (!in) return cli_fail("gradcheck", "out of memory");
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *v;
        bool bad = false;
        int taken;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            ry_free(in);
            return 0;
        } else if ((taken = cli_input_option(argc, argv, &i, in, "gradcheck")) != 0) {
            rc = taken < 0;
        } else if ((taken = cli_dim_option(argc, argv, &i, in, "gradcheck")) != 0) {
            rc = taken < 0;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            entry = v[0] == '@' ? v + 1 : v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--eps", &bad))) {
            rc = number("--eps", v, &opts.eps);
        } else if (!bad && (v = cli_option(argc, argv, &i, "--rtol", &bad))) {
            rc = number("--rtol", v, &opts.rtol);
        } else if (!bad && (v = cli_option(argc, argv, &i, "--atol", &bad))) {
            rc = number("--atol", v, &opts.atol);
        } else if (!bad && (v = cli_option(argc, argv, &i, "--seed", &bad))) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 10);
            if (errno || *end || !*v || *v == '-') rc = cli_fail("gradcheck", "--seed needs a non-negative integer, got '%s'", v);
        } else if (!bad && (v = cli_option(argc, argv, &i, "--samples", &bad))) {
            char *end;
            errno = 0;
            long long k = strtoll(v, &end, 10);
            if (errno || *end || !*v || k < 1) rc = cli_fail("gradcheck", "--samples needs a positive integer, got '%s'", v);
            opts.max_elements = k;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--target", &bad))) {
            if (cli_target("gradcheck", v, &opts.target)) rc = 1;
        } else if (bad) {
            rc = 1;
        } else if (strcmp(argv[i], "--second-order") == 0) {
            opts.second_order = true;
        } else if (strcmp(argv[i], "--train") == 0) {
            io.training = true;
            opts.interp = &io;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_fail("gradcheck", "unknown option '%s' (see relayc gradcheck --help)", argv[i]);
        } else if (path) {
            rc = cli_fail("gradcheck", "one FILE only (got '%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (rc == 0 && !path) rc = cli_fail("gradcheck", "missing FILE (see relayc gradcheck --help)");
    ry_module *m = rc == 0 ? cli_load(path, true) : NULL;
    ry_global *g = m ? ry_module_find_global(m, entry) : NULL;
    ry_value **args = NULL;
    int n = g ? g->func->func.nparams : 0;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_gradcheck_report *rep = ry_calloc(1, sizeof *rep);
    ry_init_spec *spec = NULL;
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    opts.sample_seed = seed;
    if (rc || !m) {
        rc = 1;
    } else if (!g) {
        rc = cli_fail("gradcheck", "%s has no global @%s", path, entry);
    } else if (!rep || !(args = ry_calloc((size_t)(n ? n : 1), sizeof *args))) {
        rc = cli_fail("gradcheck", "out of memory");
    } else if (ry_module_to_float64(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else if ((rc = vocab_dim(path, m, in, &spec)) != 0) {
    } else if ((rc = cli_bind_params("gradcheck", entry, in, m, g->func, &rng, true, args)) != 0) {
    } else if ((auto_samples(n, args, g->func, &opts), ry_gradcheck(m, entry, n, args, &opts, rep, &err)) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        print_rows("parameter", rep->params, rep->nparams);
        if (opts.second_order) print_rows("second order", rep->second, rep->nparams);
        printf("gradcheck @%s: %s\n", entry, rep->ok ? "ok" : "FAILED");
        rc = rep->ok ? 0 : 1;
    }
    for (int i = 0; args && i < n; i++) ry_value_release(args[i]);
    ry_free(args);
    ry_free(rep);
    ry_init_spec_free(spec);
    ry_module_free(m);
    ry_free(in);
    return rc;
}
