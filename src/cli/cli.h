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
int cmd_checkpoint(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_opt(int argc, char **argv);
int cmd_gradcheck(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* Parses (and, if check, type-checks) FILE; on error prints it located and
 * returns NULL. */
ry_module *cli_load(const char *path, bool check);
/* True if arg is "-h" or "--help". */
bool cli_is_help(const char *arg);
/* For an option that takes a value: "--out DIR" or "--out=DIR". Returns the
 * value and advances *i, or NULL if argv[*i] is not this option. Prints an
 * error and sets *bad when the value is missing. */
const char *cli_option(int argc, char **argv, int *i, const char *name, bool *bad);
/* `--engine vm|interp`: the compiled engine or the reference interpreter;
 * `--target cpu|opencl|cuda`: where the kernels run (target.h). Each
 * returns the exit status (1 after printing an error). cli_engine_check:
 * the interpreter runs on the CPU target only. */
int cli_engine(const char *cmd, const char *v, ry_engine *out);
int cli_target(const char *cmd, const char *v, const ry_target **out);
int cli_engine_check(const char *cmd, ry_engine engine, const ry_target *target);
/* m in the text format; for TVM's parser when tvm is set (ry_print_opts.tvm,
 * after ry_module_localize_for_tvm, which changes m),
 * saying on stderr what had to change. malloc'ed; NULL on out-of-memory. */
char *cli_print(const char *cmd, ry_module *m, bool tvm);
/* Prints "relayc CMD: error: ..." to stderr and returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- inputs and outputs (inputs.c, input_values.c) ---- */
#define CLI_MAX_INPUTS 256
#define CLI_MAX_DIMS 16

typedef struct cli_input {
    const char *name; /* parameter name, without % */
    const char *path; /* PATH.npy, sst:PATH:LINE or relay:TEXT */
    bool used;
} cli_input;

typedef struct cli_inputs {
    cli_input items[CLI_MAX_INPUTS];
    int n;
    /* symbolic dimensions of random inputs: --dim NAME=N, and the model's
     * `// vocab: NAME` (vocab_dim), which sst: inputs fill unless --dim did */
    const char *dim_names[CLI_MAX_DIMS];
    int64_t dim_values[CLI_MAX_DIMS];
    int ndims;
    const char *vocab_dim;
    bool vocab_filled; /* vocab_dim's value is the sst: inputs' (not --dim's) */
    ry_vocab *vocab;   /* the words of the sst: inputs, while they are bound */
    const ry_init_spec *init; /* the model's `// init:` lines for random inputs, or NULL */
} cli_inputs;

/* `--input NAME=PATH` at argv[*i]: 1 if taken, 0 if argv[*i] is another
 * option, negative after printing an error. */
int cli_input_option(int argc, char **argv, int *i, cli_inputs *in, const char *cmd);
/* `--dim NAME=N` at argv[*i], the same way. */
int cli_dim_option(int argc, char **argv, int *i, cli_inputs *in, const char *cmd);
/* args[k] := (unless already set: a checkpoint's) a new value for the k-th parameter of fn (a global of m): its
 * --input (converted to float64 when float64 is set), else seeded random
 * values when rng is given (tensors of known shape, or tuples of them): the
 * initializer in->init gives the parameter, else standard normal; else an error
 * located at the parameter. Inputs naming no parameter are an error.
 * relay: inputs add a global to m and type-check m again. Returns the exit
 * status. */
int cli_bind_params(const char *cmd, const char *entry, cli_inputs *in, ry_module *m, const ry_expr *fn,
                    ry_rng *rng, bool float64, ry_value **args);
/* The value of an `sst:` or `relay:` input x for parameter p of type t
 * (input_values.c): 1 when x is neither (a .npy path), 0 with *out set, -1
 * with err set. */
int cli_input_value(ry_module *m, const ry_var *p, const ry_type *t, const cli_input *x, bool float64,
                    cli_inputs *in, ry_value **out, ry_error *err);
/* ---- checkpoints as inputs (checkpoint_args.c) ---- */
/* Every /params dataset of the checkpoint at path, verified (seal,
 * checksum), into a new set *out. Returns the exit status. */
int cli_checkpoint_read(const char *cmd, const char *path, ry_param_set **out);
/* args[k] := a copy of set's tensor named like @entry's k-th parameter,
 * for each parameter not given in `in`; the dtype and constant dims must
 * match (an error located at the parameter), and every name of set must be
 * a parameter of some global of m. Parameters set lacks stay NULL. Returns
 * the exit status. */
int cli_bind_checkpoint(const char *cmd, const char *entry, const char *path, const ry_param_set *set,
                        const cli_inputs *in, const ry_module *m, ry_value **args);

/* MODEL's base name without its extension, as a C identifier (else
 * "model"): the default name of an export (cmd_export.c). */
void cli_model_name(const char *path, char *buf, size_t n);

/* mkdir DIR unless it exists. */
int cli_make_dir(const char *cmd, const char *dir);
/* DIR/NAME.npy, written atomically; prints its path and shape. */
int cli_write_npy(const char *dir, const char *name, const ry_tensor *t);
/* v flattened depth-first as DIR/PREFIX0.npy, DIR/PREFIX1.npy, ... */
int cli_write_value(const char *cmd, const char *dir, const char *prefix, const ry_value *v);

#endif
