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
    "usage: relayc gradcheck FILE [--entry NAME] [--input NAME=PATH.npy]...\n"
    "                       [--eps E] [--rtol R] [--atol A] [--seed N] [--second-order]\n"
    "                       [--train]\n"
    "\n"
    "Converts FILE to float64, then checks the gradient of @NAME (default main)\n"
    "against central finite differences of the sum of its outputs. Parameters\n"
    "without --input get standard normal values (seeded). Prints the largest\n"
    "absolute and relative error per parameter; exits with 1 on a mismatch.\n"
    "\n"
    "  --eps E          finite-difference step, relative (default 1e-6)\n"
    "  --rtol R         relative tolerance (default 1e-5)\n"
    "  --atol A         absolute tolerance (default 1e-7)\n"
    "  --seed N         seed of the random inputs (default 0)\n"
    "  --second-order   also check the gradient program's own gradient\n"
    "  --train          training mode: nn.dropout drops (the same mask in every run),\n"
    "                   batch_norm uses batch statistics; the gradient is built for it\n";

static int number(const char *opt, const char *v, double *out) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !*v || !(d >= 0)) return cli_fail("gradcheck", "%s needs a non-negative number, got '%s'", opt, v);
    *out = d;
    return 0;
}

static void print_rows(const char *title, const ry_gradcheck_param *ps, int n) {
    printf("%-24s %12s %12s  %s\n", title, "max abs err", "max rel err", "");
    for (int i = 0; i < n; i++) {
        if (!ps[i].checked) {
            printf("%%%-23s %12s %12s  %s\n", ps[i].name, "-", "-", "not a float tensor");
            continue;
        }
        printf("%%%-23s %12.3e %12.3e  %s\n", ps[i].name, ps[i].max_abs, ps[i].max_rel, ps[i].ok ? "ok" : "MISMATCH");
    }
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
    ry_rng rng;
    ry_rng_seed(&rng, seed);
    if (rc || !m) {
        rc = 1;
    } else if (!g) {
        rc = cli_fail("gradcheck", "%s has no global @%s", path, entry);
    } else if (!rep || !(args = ry_calloc((size_t)(n ? n : 1), sizeof *args))) {
        rc = cli_fail("gradcheck", "out of memory");
    } else if (ry_module_to_float64(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else if ((rc = cli_bind_params("gradcheck", entry, in, g->func, &rng, true, args)) != 0) {
    } else if (ry_gradcheck(m, entry, n, args, &opts, rep, &err) != RY_OK) {
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
    ry_module_free(m);
    ry_free(in);
    return rc;
}
