/*
 * cmd_run.c: `relayc run FILE [--entry NAME] [--input NAME=PATH.npy]...
 * [--out DIR]`: run a function with the reference interpreter and write its
 * result, flattened depth-first, as DIR/out_0.npy, DIR/out_1.npy, ...
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc run FILE [--entry NAME] [--input NAME=PATH.npy]... [--out DIR]\n"
    "                 [--train] [--seed N]\n"
    "\n"
    "Runs global @NAME (default main) of FILE with the reference interpreter.\n"
    "Each tensor parameter %NAME is read from the .npy file given by --input.\n"
    "The result is flattened depth-first (tuple fields, ADT fields) and written\n"
    "as DIR/out_0.npy, DIR/out_1.npy, ... (DIR defaults to the current folder).\n"
    "\n"
    "  --entry NAME          the global to run (default: main)\n"
    "  --input NAME=PATH     bind parameter %NAME to the tensor in PATH (.npy)\n"
    "  --out DIR             where to write the outputs (created if missing)\n"
    "  --train               training mode: nn.dropout drops, batch_norm uses batch statistics\n"
    "  --seed N              seed of the random state (dropout), default 0\n";

#define MAX_INPUTS 256

typedef struct input {
    const char *name;
    const char *path;
    bool used;
} input;

typedef struct run_args {
    const char *path, *entry, *out;
    input inputs[MAX_INPUTS];
    int ninputs;
    ry_interp_opts opts;
} run_args;

static int parse_args(int argc, char **argv, run_args *a) {
    a->entry = "main";
    a->out = ".";
    bool bad = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return -1;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            a->entry = v[0] == '@' ? v + 1 : v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--out", &bad))) {
            a->out = v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--seed", &bad))) {
            char *end;
            errno = 0;
            a->opts.seed = strtoull(v, &end, 10);
            if (errno || *end || !*v) return cli_fail("run", "--seed needs a non-negative integer, got '%s'", v);
        } else if (!bad && (v = cli_option(argc, argv, &i, "--input", &bad))) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return cli_fail("run", "--input needs NAME=PATH.npy, got '%s'", v);
            if (a->ninputs == MAX_INPUTS) return cli_fail("run", "more than %d inputs", MAX_INPUTS);
            input *in = &a->inputs[a->ninputs++];
            in->name = v[0] == '%' ? v + 1 : v;
            in->path = eq + 1;
            /* the name ends at '=': keep a NUL-terminated copy in argv's storage */
            ((char *)eq)[0] = '\0';
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--train") == 0) {
            a->opts.training = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("run", "unknown option '%s' (see relayc run --help)", argv[i]);
        } else if (a->path) {
            return cli_fail("run", "one FILE only (got '%s' and '%s')", a->path, argv[i]);
        } else {
            a->path = argv[i];
        }
    }
    if (!a->path) return cli_fail("run", "missing FILE (see relayc run --help)");
    return 0;
}

/* Checks a tensor read from a file against the parameter's static type:
 * dtype, rank and constant dimensions (symbolic and Any dimensions are
 * checked by the interpreter when the call binds them). */
static ry_status check_input(const ry_var *p, const ry_type *t, const ry_tensor *x, const char *path,
                             ry_error *err) {
    char want[512], got[128];
    ry_tensor_describe(x, got, sizeof got);
    if (!t || t->kind != RY_TYPE_TENSOR)
        return ry_error_at(err, p->span, "parameter %%%s has type %s, which cannot be read from a .npy file",
                           p->name, t ? ry_type_str(t, want, sizeof want) : "unknown");
    bool ok = t->tensor.dtype == x->dtype && t->tensor.ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        if (t->tensor.dims[i].kind == RY_DIM_CONST && t->tensor.dims[i].value != x->shape[i]) ok = false;
    if (ok) return RY_OK;
    return ry_error_at(err, p->span, "input %%%s from %s is %s, but the parameter is %s", p->name, path, got,
                       ry_type_str(t, want, sizeof want));
}

/* Reads every parameter's input; on success args[0..n) are new values. */
static int bind_inputs(run_args *a, const ry_expr *fn, ry_value **args) {
    ry_error err;
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        input *in = NULL;
        for (int k = 0; k < a->ninputs; k++)
            if (strcmp(a->inputs[k].name, p->name) == 0) in = &a->inputs[k];
        if (!in) {
            ry_error_at(&err, p->span, "no input for parameter %%%s (give --input %s=PATH.npy)", p->name, p->name);
            ry_error_print(stderr, &err);
            return 1;
        }
        in->used = true;
        ry_tensor *t = NULL;
        const ry_type *ty = p->type ? p->type : p->annot;
        if (ry_npy_read(in->path, &t, &err) != RY_OK || check_input(p, ty, t, in->path, &err) != RY_OK) {
            ry_tensor_release(t);
            ry_error_print(stderr, &err);
            return 1;
        }
        if (!(args[i] = ry_value_tensor(t))) return cli_fail("run", "out of memory");
    }
    for (int k = 0; k < a->ninputs; k++)
        if (!a->inputs[k].used)
            return cli_fail("run", "@%s has no parameter %%%s (given by --input)", a->entry, a->inputs[k].name);
    return 0;
}

static int write_outputs(const char *dir, const ry_value *v) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return cli_fail("run", "cannot create %s: %s", dir, strerror(errno));
    int n = ry_value_count_tensors(v);
    ry_tensor **ts = ry_calloc((size_t)(n ? n : 1), sizeof *ts);
    if (!ts) return cli_fail("run", "out of memory");
    ry_value_flatten(v, ts, n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[4096], desc[128];
        ry_error err;
        snprintf(path, sizeof path, "%s/out_%d.npy", dir, i);
        if (ry_npy_write(path, ts[i], &err) != RY_OK) {
            ry_error_print(stderr, &err);
            rc = 1;
        } else {
            printf("%s %s\n", path, ry_tensor_describe(ts[i], desc, sizeof desc));
        }
    }
    ry_free(ts);
    return rc;
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
    if (!m) {
        ry_free(a);
        return 1;
    }
    ry_global *g = ry_module_find_global(m, a->entry);
    ry_value **args = NULL;
    ry_value *result = NULL;
    if (!g) {
        rc = cli_fail("run", "%s has no global @%s", a->path, a->entry);
        goto done;
    }
    int n = g->func->func.nparams;
    args = ry_calloc((size_t)(n ? n : 1), sizeof *args);
    if (!args) {
        rc = cli_fail("run", "out of memory");
        goto done;
    }
    rc = bind_inputs(a, g->func, args);
    if (rc) goto done;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_interp_call(m, a->entry, n, args, &a->opts, &result, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
        goto done;
    }
    rc = write_outputs(a->out, result);
done:
    ry_value_release(result);
    for (int i = 0; args && i < g->func->func.nparams; i++) ry_value_release(args[i]);
    ry_free(args);
    ry_module_free(m);
    ry_free(a);
    return rc;
}
