/*
 * cmd_run.c: `relayc run FILE [--entry NAME] [--input NAME=PATH.npy]...
 * [--out DIR] [--grad] [--engine vm|interp] [--target cpu]`: run a
 * function with the compiled engine (or the reference interpreter) on a
 * target and write its result,
 * flattened depth-first, as DIR/out_0.npy, ...; with
 * --grad, differentiate it first (seeding the result with ones, as TVM's
 * gradient pass does) and also write DIR/grad_<param>.npy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/vm.h"

static const char *help =
    "usage: relayc run FILE [--entry NAME] [--input NAME=PATH.npy]... [--out DIR]\n"
    "                 [--grad] [--engine vm|interp] [--target T] [--level N] [--train]\n"
    "                 [--seed N]\n"
    "                 [--plan] [--profile]\n"
    "\n"
    "Runs global @NAME (default main) of FILE with the compiled engine.\n"
    "Each parameter %NAME is read from the .npy file given by --input, or is a\n"
    "tree or a value written in the text format (see below).\n"
    "The result is flattened depth-first (tuple fields, ADT fields) and written\n"
    "as DIR/out_0.npy, DIR/out_1.npy, ... (DIR defaults to the current folder).\n"
    "\n"
    "  --entry NAME          the global to run (default: main)\n"
    "  --input NAME=PATH     bind parameter %NAME to the tensor in PATH (.npy); or\n"
    "                        NAME=sst:PATH:LINE, the PTB tree on line LINE of PATH as\n"
    "                        the parameter's Leaf/Node type (words numbered 1, 2, ...\n"
    "                        in order of appearance); or NAME=relay:VALUE, a value in\n"
    "                        the text format (an expression: constructors, operators\n"
    "                        and globals of FILE), e.g. 'xs=relay:Cons(ones(shape=[3],\n"
    "                        dtype=\"float32\"), Nil)'\n"
    "  --out DIR             where to write the outputs (created if missing)\n"
    "  --grad                differentiate @NAME (every output seeded with ones) and\n"
    "                        also write DIR/grad_<param>.npy for each tensor parameter\n"
    "  --engine vm|interp    the compiled engine (default) or the reference interpreter\n"
    "  --target NAME         where the compiled engine's kernels run: cpu (default),\n"
    "                        opencl or opencl:N (a device of `relayc devices`; cuda\n"
    "                        where built in); tensors stay on the device between\n"
    "                        kernels, inputs are copied in once, results back once\n"
    "  --level N             the compiled engine's optimization: 0 none, 1 folding, CSE,\n"
    "                        DCE and fusion, 2 (default) also loop-invariant code motion\n"
    "                        and partial evaluation first\n"
    "  --train               training mode: nn.dropout drops, batch_norm uses batch statistics\n"
    "  --seed N              seed of the random state (dropout), default 0\n"
    "  --plan                print the compiled engine's memory plan (per function its\n"
    "                        storage slots, per operator call its slot and whether it\n"
    "                        may write over a dying argument) on stdout first\n"
    "  --profile             time the compiled engine's operator calls and print the\n"
    "                        call sites that took longest on stderr after the run\n";

typedef struct run_args {
    const char *path, *entry, *out;
    cli_inputs inputs;
    ry_interp_opts opts;
    bool grad, plan, profile;
    ry_engine engine;
    const ry_target *target;
    int level;
} run_args;

static int parse_args(int argc, char **argv, run_args *a) {
    a->entry = "main";
    a->out = ".";
    a->level = 2;
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        int taken;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return -1;
        } else if ((taken = cli_input_option(argc, argv, &i, &a->inputs, "run")) != 0) {
            if (taken < 0) return 1;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            a->entry = v[0] == '@' ? v + 1 : v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--out", &bad))) {
            a->out = v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--engine", &bad))) {
            if (cli_engine("run", v, &a->engine)) return 1;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--target", &bad))) {
            if (cli_target("run", v, &a->target)) return 1;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--level", &bad))) {
            if (strlen(v) != 1 || v[0] < '0' || v[0] > '2')
                return cli_fail("run", "--level needs 0, 1 or 2, got '%s'", v);
            a->level = v[0] - '0';
        } else if (!bad && (v = cli_option(argc, argv, &i, "--seed", &bad))) {
            char *end;
            errno = 0;
            a->opts.seed = strtoull(v, &end, 10);
            if (errno || *end || !*v || *v == '-')
                return cli_fail("run", "--seed needs a non-negative integer, got '%s'", v);
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--train") == 0) {
            a->opts.training = true;
        } else if (strcmp(argv[i], "--grad") == 0) {
            a->grad = true;
        } else if (strcmp(argv[i], "--plan") == 0) {
            a->plan = true;
        } else if (strcmp(argv[i], "--profile") == 0) {
            a->profile = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("run", "unknown option '%s' (see relayc run --help)", argv[i]);
        } else if (a->path) {
            return cli_fail("run", "one FILE only (got '%s' and '%s')", a->path, argv[i]);
        } else {
            a->path = argv[i];
        }
    }
    if (!a->path) return cli_fail("run", "missing FILE (see relayc run --help)");
    if (cli_engine_check("run", a->engine, a->target)) return 1;
    if (a->engine == RY_ENGINE_INTERP && (a->plan || a->profile))
        return cli_fail("run", "%s is the compiled engine's; not with --engine interp",
                        a->plan ? "--plan" : "--profile");
    return 0;
}

/* With --grad the result is (value, (d_param1, ...)): the value goes to
 * out_K, each tensor parameter's adjoint to grad_<name>. */
static int write_results(const run_args *a, const ry_expr *fn, const ry_value *result) {
    if (cli_make_dir("run", a->out)) return 1;
    if (!a->grad) return cli_write_value("run", a->out, "out_", result);
    if (cli_write_value("run", a->out, "out_", result->tuple.fields[0])) return 1;
    const ry_value *grads = result->tuple.fields[1];
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_value *g = grads->tuple.fields[i];
        if (g->kind != RY_VAL_TENSOR) continue;
        char name[300];
        snprintf(name, sizeof name, "grad_%s", fn->func.params[i]->name);
        if (cli_write_npy(a->out, name, g->tensor)) return 1;
    }
    return 0;
}

/* Runs entry on the compiled engine, or the interpreter with --engine interp. */
static ry_status call(const run_args *a, ry_module *m, const char *entry, int n, ry_value **args,
                      ry_value **out, ry_error *err) {
    if (a->engine == RY_ENGINE_INTERP) return ry_interp_call(m, entry, n, args, &a->opts, out, err);
    ry_vm_program *prog = NULL;
    ry_vm_opts vo = {.training = a->opts.training, .seed = a->opts.seed, .max_depth = a->opts.max_depth};
    ry_status st = ry_optimize(m, a->level, err);
    if (st == RY_OK) st = ry_vm_compile(m, a->target, &prog, err);
    if (st == RY_OK && a->plan) ry_vm_print_plan(prog, stdout);
    if (st == RY_OK) ry_vm_set_profile(prog, a->profile);
    if (st == RY_OK) st = ry_vm_call(prog, entry, n, args, &vo, out, err);
    if (st == RY_OK && a->profile) ry_vm_print_profile(prog, stderr, 30);
    ry_vm_free(prog);
    return st;
}

int cmd_run(int argc, char **argv) {
    run_args *a = ry_calloc(1, sizeof *a);
    if (!a) return cli_fail("run", "out of memory");
    int rc = parse_args(argc, argv, a);
    if (rc != 0) {
        ry_free(a);
        return rc < 0 ? 0 : rc;
    }
    ry_module *m = cli_load(a->path, true);
    ry_global *g = m ? ry_module_find_global(m, a->entry) : NULL;
    ry_value **args = NULL, *result = NULL;
    int n = g ? g->func->func.nparams : 0;
    ry_error err;
    memset(&err, 0, sizeof err);
    const char *target = a->entry;
    if (!m) {
        rc = 1;
    } else if (!g) {
        rc = cli_fail("run", "%s has no global @%s", a->path, a->entry);
    } else if (!(args = ry_calloc((size_t)(n ? n : 1), sizeof *args))) {
        rc = cli_fail("run", "out of memory");
    } else if ((rc = cli_bind_params("run", a->entry, &a->inputs, m, g->func, NULL, false, args)) != 0) {
    } else if (a->engine == RY_ENGINE_VM && a->level >= 2 && ry_hoist(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else if (a->grad && ry_grad_ex(m, a->entry, NULL, NULL,
                                     &(ry_grad_opts){.inference = !a->opts.training}, &target,
                                     &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else if (call(a, m, target, n, args, &result, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        rc = write_results(a, g->func, result);
    }
    ry_value_release(result);
    for (int i = 0; args && i < n; i++) ry_value_release(args[i]);
    ry_free(args);
    ry_module_free(m);
    ry_free(a);
    return rc;
}
