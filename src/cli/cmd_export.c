/*
 * cmd_export.c: `relayc export MODEL [--checkpoint CKPT] [--entry NAME]
 * -o DIR [--name NAME] [--embed-weights] [--blas]`: the entry compiled ahead of
 * time to standalone C (export.h) with the checkpoint's parameters as its
 * weights. The export itself is src/backend/c/'s.
 */
#include <string.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc export MODEL [--checkpoint CKPT] [--entry NAME] -o DIR [--name NAME]\n"
    "                     [--embed-weights] [--blas]\n"
    "\n"
    "Compiles global @NAME (default predict) of MODEL, optimized as relayc run does,\n"
    "to a directory of standalone C: DIR/NAME.c, DIR/NAME.h, DIR/NAME.weights, a\n"
    "Makefile (cc -std=c11 -O2, libm only), example.c (.npy in, .npy out), README.\n"
    "The entry's parameters held by the checkpoint become the weights (by name); the\n"
    "others, and their symbolic dimensions, are the C entry's arguments (without\n"
    "--checkpoint, every parameter is an argument).\n"
    "\n"
    "  --checkpoint CKPT     the HDF5 checkpoint (relayc train's) holding the weights\n"
    "  --entry NAME          the global to export (default: predict)\n"
    "  -o DIR, --out DIR     the directory to write (created if missing)\n"
    "  --name NAME           the C prefix and file names (default: MODEL's base name)\n"
    "  --embed-weights       the weights as C arrays in NAME.c instead of NAME.weights\n"
    "  --blas                GEMMs (dense, conv2d) through CBLAS's cblas_sgemm, linked\n"
    "                        with -lopenblas, instead of the exported loops\n";

typedef struct export_args {
    const char *path, *entry, *out, *checkpoint, *name;
    bool embed, blas;
} export_args;

static int parse_args(int argc, char **argv, export_args *a) {
    a->entry = "predict";
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool bad = false;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return -1;
        } else if ((v = cli_option(argc, argv, &i, "--entry", &bad))) {
            a->entry = v[0] == '@' ? v + 1 : v;
        } else if (!bad && ((v = cli_option(argc, argv, &i, "--out", &bad)) || (!bad && (v = cli_option(argc, argv, &i, "-o", &bad))))) {
            a->out = v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--checkpoint", &bad))) {
            a->checkpoint = v;
        } else if (!bad && (v = cli_option(argc, argv, &i, "--name", &bad))) {
            a->name = v;
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--embed-weights") == 0) {
            a->embed = true;
        } else if (strcmp(argv[i], "--blas") == 0) {
            a->blas = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("export", "unknown option '%s' (see relayc export --help)", argv[i]);
        } else if (a->path) {
            return cli_fail("export", "one MODEL only (got '%s' and '%s')", a->path, argv[i]);
        } else {
            a->path = argv[i];
        }
    }
    if (!a->path) return cli_fail("export", "missing MODEL (see relayc export --help)");
    if (!a->out) return cli_fail("export", "missing -o DIR");
    return 0;
}

void cli_model_name(const char *path, char *buf, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t k = 0;
    for (; b[k] && b[k] != '.' && k + 1 < n; k++) {
        char ch = b[k];
        buf[k] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ? ch : '_';
    }
    buf[k] = 0;
    if (k == 0 || (buf[0] >= '0' && buf[0] <= '9')) snprintf(buf, n, "model");
}

int cmd_export(int argc, char **argv) {
    export_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc < 0 ? 0 : rc;
    char name[128];
    cli_model_name(a.path, name, sizeof name);
    ry_module *m = cli_load(a.path, true);
    ry_param_set *w = NULL;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (!m || (a.checkpoint && cli_checkpoint_read("export", a.checkpoint, &w) != 0)) {
        rc = 1;
    } else {
        ry_export_opts o = {.name = a.name ? a.name : name, .source = a.path, .embed_weights = a.embed, .blas = a.blas};
        if (ry_export_c(m, a.entry, w, a.out, &o, &err) != RY_OK) {
            ry_error_print(stderr, &err);
            rc = 1;
        } else {
            printf("%s/%s.c, %s.h, %s, Makefile, example.c, README\n", a.out, o.name, o.name,
                   a.embed ? "(weights embedded)" : "weights");
        }
    }
    ry_params_free(w);
    ry_module_free(m);
    return rc;
}
