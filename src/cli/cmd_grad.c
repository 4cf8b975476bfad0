/*
 * cmd_grad.c: `relayc grad FILE [--entry NAME] [--optimize]`: print the
 * module with the gradient program of @NAME added (TVM's gradient
 * signature: fn(params...) -> (result, (d_param1, ...))), optionally after
 * the optimization pipeline that removes the transform's refs and closures.
 */
#include <string.h>

#include "cli/cli.h"
#include "relayc/ad.h"
#include "relayc/pass.h"

static const char *help =
    "usage: relayc grad FILE [--entry NAME] [--optimize]\n"
    "\n"
    "Differentiates global @NAME (default main) of FILE and prints the module\n"
    "with its gradient program @NAME_gradient, which returns\n"
    "(result, (d_param1, d_param2, ...)), every output seeded with ones.\n"
    "\n"
    "  --entry NAME   the global to differentiate (default: main)\n"
    "  --optimize     run the optimization pipeline (partial evaluation, DCE, ...)\n"
    "                 on the result: straight-line code where control flow is static\n";

int cmd_grad(int argc, char **argv) {
    const char *path = NULL, *entry = "main";
    bool optimize = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            entry = v[0] == '@' ? v + 1 : v;
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--optimize") == 0) {
            optimize = true;
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
    if (!ry_module_find_global(m, entry)) {
        rc = cli_fail("grad", "%s has no global @%s", path, entry);
    } else if (ry_grad(m, entry, NULL, NULL, NULL, &err) != RY_OK ||
               (optimize && ry_optimize(m, 2, &err) != RY_OK)) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        char *text = ry_module_print(m);
        if (!text) {
            rc = cli_fail("grad", "out of memory");
        } else {
            fputs(text, stdout);
            ry_free(text);
        }
    }
    ry_module_free(m);
    return rc;
}
