/*
 * cli.h: what the relayc subcommands share: reading a module from a file
 * (parse and type-check, errors printed located), and small argument
 * helpers. Each subcommand lives in its own cmd_*.c file.
 */
#ifndef RELAYC_CLI_H
#define RELAYC_CLI_H

#include "relayc/relayc.h"

/* Every subcommand: argv[0] is the subcommand's name; returns the exit
 * status (0 ok, 1 error). */
int cmd_check(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* Parses (and, if check, type-checks) FILE; on error prints it located and
 * returns NULL. */
ry_module *cli_load(const char *path, bool check);
/* True if arg is "-h" or "--help". */
bool cli_is_help(const char *arg);
/* For an option that takes a value: "--out DIR" or "--out=DIR". Returns the
 * value and advances *i, or NULL if argv[*i] is not this option. Prints an
 * error and sets *bad when the value is missing. */
const char *cli_option(int argc, char **argv, int *i, const char *name, bool *bad);
/* Prints "relayc CMD: error: ..." to stderr and returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
