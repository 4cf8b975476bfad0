/*
 * main.c: the relayc command: dispatches to a subcommand. Each stage of the
 * pipeline can be run on its own from here (check, fmt, run); the library
 * never depends on this folder.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"check", cmd_check, "parse and type-check a module; print each global's type"},
    {"fmt", cmd_fmt, "print a module in the canonical text format"},
    {"run", cmd_run, "run a function on .npy inputs with the compiled engine (--grad: and its gradient)"},
    {"grad", cmd_grad, "print the gradient program of a function"},
    {"gradcheck", cmd_gradcheck, "check a gradient against finite differences in float64"},
    {"opt", cmd_opt, "run optimization passes and print the result"},
    {"train", cmd_train, "train a model on a dataset, with checkpoints"},
    {"devices", cmd_devices, "list the devices kernels can run on (--target opencl:N)"},
    {"export", cmd_export, "compile a trained model to standalone C (a directory cc builds)"},
    {"checkpoint", cmd_checkpoint, "import a checkpoint another tool wrote (sealing it), or inspect one"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: relayc COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`relayc help COMMAND` (or `relayc COMMAND --help`) describes each;\n"
               "`relayc --version` prints the version.\n");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

static int unknown(const char *name) {
    fprintf(stderr, "relayc: error: unknown command '%s'\n", name);
    usage(stderr);
    return 1;
}

/* relayc help [COMMAND]: the command's own --help. */
static int help(int argc, char **argv) {
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const command *c = find(argv[2]);
    if (!c) return unknown(argv[2]);
    char *args[] = {argv[2], "--help", NULL};
    return c->run(2, args);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) return help(argc, argv);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        /* the library's version: the one this binary runs with */
        printf("relayc %s\n", ry_version());
        return 0;
    }
    const command *c = find(argv[1]);
    return c ? c->run(argc - 1, argv + 1) : unknown(argv[1]);
}
