/*
 * cmd_grad.c: `relayc grad FILE [--entry NAME] [--optimize] [--inference]
 * [--wrt NAME,...] [--tvm]`: print the module with the gradient program of @NAME
 * added (TVM's gradient signature: fn(params...) -> (result, (d_param1,
 * ...))), optionally after the optimization pipeline that removes the
 * transform's refs and closures. The options are ry_grad_opts'.
 */
#include <string.h>

#include "cli/cli.h"
#include "relayc/ad.h"
#include "relayc/pass.h"

static const char *help =
    "usage: relayc grad FILE [--entry NAME] [--optimize] [--inference] [--wrt NAME,...] [--tvm]\n"
    "\n"
    "Differentiates global @NAME (default main) of FILE and prints the module\n"
    "with its gradient program @NAME_gradient, which returns\n"
    "(result, (d_param1, d_param2, ...)), every output seeded with ones.\n"
    "\n"
    "  --entry NAME   the global to differentiate (default: main)\n"
    "  --optimize     run the optimization pipeline (partial evaluation, DCE, ...)\n"
    "                 on the result: straight-line code where control flow is static\n"
    "  --inference    the gradient of inference mode (nn.dropout is the identity,\n"
    "                 batch_norm uses its moving statistics); default: training mode\n"
    "  --wrt NAMES    gradients of these parameters only (comma-separated, in any\n"
    "                 order; the tuple keeps the parameters' order)\n"
    "  --tvm          print what TVM 0.19's parser reads back (as relayc fmt --tvm;\n"
    "                 --optimize then leaves out fusion, whose kernels TVM lacks)\n";

/* wrt[i] = parameter i of f is named in the comma-separated list names;
 * every name must be a parameter. */
static int parse_wrt(const char *names, const ry_expr *f, bool *wrt) {
    int n = f->func.nparams;
    for (int i = 0; i < n; i++)
        wrt[i] = false;
    const char *p = names;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && *p == '%') p++, len--;
        int k = -1;
        for (int i = 0; i < n && k < 0; i++)
            if (strlen(f->func.params[i]->name) == len &&
                strncmp(f->func.params[i]->name, p, len) == 0)
                k = i;
        if (k < 0) return cli_fail("grad", "--wrt: no parameter %%%.*s", (int)len, p);
        wrt[k] = true;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

int cmd_grad(int argc, char **argv) {
    const char *path = NULL, *entry = "main", *wrt_names = NULL;
    bool optimize = false, tvm = false;
    ry_grad_opts go = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            entry = v[0] == '@' ? v + 1 : v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--wrt", &bad))) {
            wrt_names = v;
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--optimize") == 0) {
            optimize = true;
        } else if (strcmp(argv[i], "--tvm") == 0) {
            tvm = true;
        } else if (strcmp(argv[i], "--inference") == 0) {
            go.inference = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("grad", "unknown option '%s' (see relayc grad --help)", argv[i]);
        } else if (path) {
            return cli_fail("grad", "one FILE only (got '%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_fail("grad", "missing FILE (see relayc grad --help)");
    ry_module *m = cli_load(path, true);
    if (!m) return 1;
    ry_error err;
    memset(&err, 0, sizeof err);
    int rc = 0;
    ry_global *g = ry_module_find_global(m, entry);
    int np = g ? g->func->func.nparams : 0;
    bool *wrt = wrt_names ? ry_calloc((size_t)np + 1, sizeof *wrt) : NULL;
    go.wrt = wrt;
    go.nwrt = np;
    if (!g) {
        rc = cli_fail("grad", "%s has no global @%s", path, entry);
    } else if (wrt_names && !wrt) {
        rc = cli_fail("grad", "out of memory");
    } else if (wrt && (rc = parse_wrt(wrt_names, g->func, wrt)) != 0) {
    } else if (ry_grad_ex(m, entry, NULL, NULL, &go, NULL, &err) != RY_OK ||
               (optimize && (tvm ? ry_optimize_unfused(m, 2, &err) : ry_optimize(m, 2, &err)) != RY_OK)) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        char *text = cli_print("grad", m, tvm);
        if (!text) {
            rc = cli_fail("grad", "out of memory");
        } else {
            fputs(text, stdout);
            ry_free(text);
        }
    }
    ry_free(wrt);
    ry_module_free(m);
    return rc;
}
