/*
 * common.c: helpers the subcommands share: loading a module with located
 * errors, and reading options.
 */
#include <stdarg.h>
#include <string.h>

#include "cli/cli.h"

ry_module *cli_load(const char *path, bool check) {
    ry_module *m = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (ry_module_parse_file(path, &m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        return NULL;
    }
    if (check && ry_module_typecheck(m, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        ry_module_free(m);
        return NULL;
    }
    return m;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

const char *cli_option(int argc, char **argv, int *i, const char *name, bool *bad) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "relayc: error: option %s needs a value\n", name);
        *bad = true;
        return NULL;
    }
    return argv[++*i];
}

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "relayc %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

char *cli_print(const char *cmd, ry_module *m, bool tvm) {
    ry_print_report rep = {0};
    ry_print_opts o = {.tvm = tvm, .report = &rep};
    if (tvm) ry_module_localize_for_tvm(m, &rep);
    char *text = ry_module_print_ex(m, &o);
    if (!text || !tvm) return text;
    if (rep.sym_dims)
        fprintf(stderr, "relayc %s: --tvm: %d symbolic dimension%s (%s) printed as ? (TVM has only Any)\n", cmd,
                rep.sym_dims, rep.sym_dims == 1 ? "" : "s", rep.sym_names);
    if (rep.ref_annots)
        fprintf(stderr, "relayc %s: --tvm: %d type annotation%s holding ref types dropped (TVM cannot parse them; "
                "its type checker infers them)\n", cmd, rep.ref_annots, rep.ref_annots == 1 ? "" : "s");
    if (rep.localized)
        fprintf(stderr, "relayc %s: --tvm: %d global%s taking refs printed as local functions of %s callers "
                "(TVM infers their parameters only from calls in the same body)\n", cmd, rep.localized,
                rep.localized == 1 ? "" : "s", rep.localized == 1 ? "its" : "their");
    if (rep.monomorphized)
        fprintf(stderr, "relayc %s: --tvm: %d cop%s of polymorphic globals taking refs, one per further type "
                "they are used at (TVM's local functions are monomorphic)\n", cmd, rep.monomorphized,
                rep.monomorphized == 1 ? "y" : "ies");
    if (rep.generic_adts)
        fprintf(stderr, "relayc %s: --tvm: %d ADT%s whose fields hold refs made generic in them (type "
                "parameters R0, ...: TVM infers them)\n", cmd, rep.generic_adts, rep.generic_adts == 1 ? "" : "s");
    if (rep.dropped_globals)
        fprintf(stderr, "relayc %s: --tvm: %d global%s taking refs that no other global calls left out\n", cmd,
                rep.dropped_globals, rep.dropped_globals == 1 ? "" : "s");
    if (rep.stop_gradients)
        fprintf(stderr, "relayc %s: --tvm: %d stop_gradient call%s printed as %s argument (TVM has no such "
                "operator; values are the same, gradients through it are not)\n", cmd, rep.stop_gradients,
                rep.stop_gradients == 1 ? "" : "s", rep.stop_gradients == 1 ? "its" : "their");
    if (rep.unsupported)
        fprintf(stderr, "relayc %s: --tvm: warning: %d construct%s TVM cannot read kept (fused operators, ref "
                "types in constructor fields, mutually recursive globals taking refs)\n", cmd, rep.unsupported, rep.unsupported == 1 ? "" : "s");
    return text;
}

int cli_engine(const char *cmd, const char *v, ry_engine *out) {
    if (strcmp(v, "vm") == 0) *out = RY_ENGINE_VM;
    else if (strcmp(v, "interp") == 0) *out = RY_ENGINE_INTERP;
    else return cli_fail(cmd, "--engine is vm or interp, not '%s'", v);
    return 0;
}

int cli_target(const char *cmd, const char *v, const ry_target **out) {
    if (strcmp(v, "interp") == 0)
        return cli_fail(cmd, "--target names where kernels run (cpu, opencl, cuda); the "
                             "interpreter is an engine: --engine interp");
    ry_error err;
    if (ry_target_find(v, out, &err)) return cli_fail(cmd, "--target: %s", err.msg);
    return 0;
}

int cli_engine_check(const char *cmd, ry_engine engine, const ry_target *target) {
    if (engine == RY_ENGINE_INTERP && target && target != ry_target_cpu())
        return cli_fail(cmd, "the interpreter runs on the CPU only: --engine interp with "
                             "--target %s",
                        ry_target_name(target));
    return 0;
}
