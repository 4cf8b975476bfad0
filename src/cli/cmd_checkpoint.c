/*
 * cmd_checkpoint.c: `relayc checkpoint import IN OUT` takes in a
 * checkpoint another tool wrote (relayc's layout, no seal: relayc refuses
 * such a file as a checkpoint), checked whole, and writes it sealed;
 * `relayc checkpoint inspect FILE` verifies one and lists what it holds.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc checkpoint import IN.h5 OUT.h5\n"
    "       relayc checkpoint inspect FILE.h5\n"
    "\n"
    "import: reads IN.h5, an HDF5 checkpoint in relayc's layout that another\n"
    "tool wrote (h5py: see include/relayc/checkpoint.h), checks its format,\n"
    "version, checksum and every dataset, and writes it to OUT.h5 sealed, as\n"
    "relayc's own checkpoints are: relayc takes only sealed files.\n"
    "inspect: verifies FILE.h5 whole and prints its attributes and datasets.\n"
    "Both read the file with libhdf5 in a child process, with a time limit.\n";

int cmd_checkpoint(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        }
    const char *sub = argc > 1 ? argv[1] : "";
    ry_error err;
    memset(&err, 0, sizeof err);
    if (strcmp(sub, "import") == 0) {
        if (argc != 4) return cli_fail("checkpoint", "usage: relayc checkpoint import IN.h5 OUT.h5");
        if (ry_checkpoint_import(argv[2], argv[3], &err)) {
            ry_error_print(stderr, &err);
            return 1;
        }
        printf("%s: sealed copy of %s\n", argv[3], argv[2]);
        return 0;
    }
    if (strcmp(sub, "inspect") == 0) {
        if (argc != 3) return cli_fail("checkpoint", "usage: relayc checkpoint inspect FILE.h5");
        ry_checkpoint_info *info = NULL;
        if (ry_checkpoint_inspect(argv[2], &info, &err)) {
            ry_error_print(stderr, &err);
            return 1;
        }
        ry_checkpoint_info_print(stdout, info);
        ry_checkpoint_info_free(info);
        return 0;
    }
    return cli_fail("checkpoint", "expected 'import' or 'inspect', not '%s' (see relayc checkpoint --help)", sub);
}
