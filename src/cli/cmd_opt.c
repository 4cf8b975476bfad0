/*
 * cmd_opt.c: `relayc opt FILE [--passes=P,Q,...] [--level N]`: run
 * optimization passes over a type-checked module and print the result, so
 * a reader can watch each pass on its own.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"

static const char *help =
    "usage: relayc opt FILE [--passes=P,Q,...] [--level N]\n"
    "\n"
    "Type-checks FILE, runs the passes and prints the module.\n"
    "\n"
    "  --passes=LIST   passes to run in this order, comma-separated:\n"
    "                  anf, inline, hoist, partial-eval, dce, fold, cse, simplify, fuse,\n"
    "                  verify; and plan: after the module, the memory plan the compiled\n"
    "                  engine makes for it (per function its slots, which values share\n"
    "                  them, which updates run in place; as relayc run --plan)\n"
    "  --level N       the whole pipeline at level N (0 none, 1 folding/CSE/DCE/fusion,\n"
    "                  2 partial evaluation first; default 2) when --passes is absent\n";

static ry_status anf_pass(ry_module *m, ry_error *err) {
    ry_anf_module(m);
    return ry_module_typecheck(m, err);
}

static ry_status verify_pass(ry_module *m, ry_error *err) { return ry_ir_verify(m, true, err); }

typedef struct pass {
    const char *name;
    ry_status (*run)(ry_module *m, ry_error *err);
} pass;

static const pass passes[] = {
    {"anf", anf_pass},      {"inline", ry_inline}, {"hoist", ry_hoist},
    {"partial-eval", ry_partial_eval},
    {"dce", ry_dce},        {"fold", ry_fold_constants}, {"cse", ry_cse},
    {"simplify", ry_simplify}, {"fuse", ry_fuse}, {"verify", verify_pass},
};
#define NPASSES (int)(sizeof passes / sizeof passes[0])

/* Runs each pass named in list (comma-separated), then type-checks;
 * `plan` sets *plan (printed after the module). */
static int run_list(ry_module *m, const char *list, bool *plan) {
    ry_error err;
    memset(&err, 0, sizeof err);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 4 && strncmp(p, "plan", 4) == 0) {
            *plan = true;
            p += n + (p[n] == ',');
            continue;
        }
        int k = 0;
        while (k < NPASSES && !(strlen(passes[k].name) == n && strncmp(passes[k].name, p, n) == 0)) k++;
        if (k == NPASSES) return cli_fail("opt", "unknown pass '%.*s' (see relayc opt --help)", (int)n, p);
        if (passes[k].run(m, &err) != RY_OK || ry_module_typecheck(m, &err) != RY_OK) {
            ry_error_prefix(&err, "after pass %s", passes[k].name);
            ry_error_print(stderr, &err);
            return 1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

int cmd_opt(int argc, char **argv) {
    const char *path = NULL, *list = NULL;
    int level = 2;
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if ((v = cli_option(argc, argv, &i, "--passes", &bad))) {
            list = v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--level", &bad))) {
            char *end;
            long l = strtol(v, &end, 10);
            if (*end || !*v || l < 0 || l > 2) return cli_fail("opt", "--level needs 0, 1 or 2, got '%s'", v);
            level = (int)l;
        } else if (bad) {
            return 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("opt", "unknown option '%s' (see relayc opt --help)", argv[i]);
        } else if (path) {
            return cli_fail("opt", "one FILE only (got '%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_fail("opt", "missing FILE (see relayc opt --help)");
    ry_module *m = cli_load(path, true);
    if (!m) return 1;
    int rc;
    bool plan = false;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (list) {
        rc = run_list(m, list, &plan);
    } else {
        rc = ry_optimize(m, level, &err) != RY_OK;
        if (rc) ry_error_print(stderr, &err);
    }
    if (rc == 0) {
        char *text = ry_module_print(m);
        if (!text) {
            rc = cli_fail("opt", "out of memory");
        } else {
            fputs(text, stdout);
            ry_free(text);
        }
    }
    if (rc == 0 && plan) {
        ry_vm_program *prog = NULL;
        if (ry_vm_compile(m, NULL, &prog, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            rc = 1;
        } else {
            fputs("\n", stdout);
            ry_vm_print_plan(prog, stdout);
        }
        ry_vm_free(prog);
    }
    ry_module_free(m);
    return rc;
}
