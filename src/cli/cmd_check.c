/*
 * cmd_check.c: `relayc check FILE [--types]`: parse and type-check a
 * module, then print each global with its inferred type (or, with --types,
 * the whole module with every binding's type, as TVM prints it).
 */
#include <string.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc check FILE [--types]\n"
    "\n"
    "Parses FILE (Relay text format 0.0.5) and infers the type of every\n"
    "expression. Prints each global function with its type, one per line.\n"
    "\n"
    "  --types   print the whole module, each binding annotated with its type\n"
    "\n"
    "Errors are printed as FILE:LINE:COL: error: MESSAGE; the exit status is 1.\n";

int cmd_check(int argc, char **argv) {
    const char *path = NULL;
    bool types = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--types") == 0) {
            types = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("check", "unknown option '%s' (see relayc check --help)", argv[i]);
        } else if (path) {
            return cli_fail("check", "one FILE only (got '%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_fail("check", "missing FILE (see relayc check --help)");
    ry_module *m = cli_load(path, true);
    if (!m) return 1;
    if (types) {
        ry_print_opts opts = {.show_types = true};
        char *text = ry_module_print_ex(m, &opts);
        if (!text) {
            ry_module_free(m);
            return cli_fail("check", "out of memory");
        }
        fputs(text, stdout);
        ry_free(text);
    } else {
        for (int i = 0; i < m->nglobals; i++) {
            char buf[4096];
            const ry_global *g = m->globals[i];
            printf("@%s: %s\n", g->name, ry_type_str(g->func->type, buf, sizeof buf));
        }
    }
    ry_module_free(m);
    return 0;
}
