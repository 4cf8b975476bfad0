/*
 * inputs.c: binding a function's parameters to tensors from .npy files
 * (`--input NAME=PATH`), to trees and text-format values (input_values.c),
 * or to seeded random values of their static types (gradcheck, with --dim
 * for symbolic dimensions), and writing results as .npy files. Shared by
 * run, grad and gradcheck.
 */
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

int cli_input_option(int argc, char **argv, int *i, cli_inputs *in, const char *cmd) {
    bool bad = false;
    const char *v = cli_option(argc, argv, i, "--input", &bad);
    if (bad) return -1;
    if (!v) return 0;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) return -cli_fail(cmd, "--input needs NAME=PATH.npy, got '%s'", v);
    if (in->n == CLI_MAX_INPUTS) return -cli_fail(cmd, "more than %d inputs", CLI_MAX_INPUTS);
    cli_input *x = &in->items[in->n];
    x->name = v[0] == '%' ? v + 1 : v;
    x->path = eq + 1;
    *(char *)eq = '\0'; /* the name ends at '=' (argv strings are ours to edit) */
    for (int k = 0; k < in->n; k++)
        if (strcmp(in->items[k].name, x->name) == 0) return -cli_fail(cmd, "--input %s given twice", x->name);
    in->n++;
    return 1;
}

int cli_dim_option(int argc, char **argv, int *i, cli_inputs *in, const char *cmd) {
    bool bad = false;
    const char *v = cli_option(argc, argv, i, "--dim", &bad);
    if (bad) return -1;
    if (!v) return 0;
    const char *eq = strchr(v, '=');
    char *end = NULL;
    long long n = eq ? strtoll(eq + 1, &end, 10) : -1;
    if (!eq || eq == v || !eq[1] || *end || n < 0) return -cli_fail(cmd, "--dim needs NAME=N with N >= 0, got '%s'", v);
    *(char *)eq = '\0'; /* the name ends at '=' (argv strings are ours to edit) */
    for (int k = 0; k < in->ndims; k++)
        if (strcmp(in->dim_names[k], v) == 0) return -cli_fail(cmd, "--dim %s given twice", v);
    if (in->ndims == CLI_MAX_DIMS) return -cli_fail(cmd, "--dim: at most %d symbolic dimensions", CLI_MAX_DIMS);
    in->dim_names[in->ndims] = v;
    in->dim_values[in->ndims++] = n;
    return 1;
}

/* Checks a tensor against the parameter's static type: dtype, rank and
 * constant dimensions (symbolic and Any dimensions are checked by the
 * interpreter when the call binds them). */
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

/* A float tensor converted to float64 (gradcheck runs programs in float64). */
static ry_tensor *to_float64(ry_tensor *t) {
    if (!ry_dtype_is_float(t->dtype) || t->dtype == RY_FLOAT64) return t;
    ry_tensor *d = ry_tensor_new(RY_FLOAT64, t->ndim, t->shape);
    for (int64_t i = 0; d && i < t->size; i++) ry_tensor_set(d, i, ry_tensor_get(t, i));
    ry_tensor_release(t);
    return d;
}

/* The value of dimension d of a random input: a constant, or a symbolic
 * one that --dim (or an sst: input's vocabulary) gave; -1 otherwise. */
static int64_t dim_value(const cli_inputs *in, const ry_dim *d) {
    if (d->kind == RY_DIM_CONST) return d->value;
    for (int k = 0; d->kind == RY_DIM_SYM && k < in->ndims; k++)
        if (strcmp(in->dim_names[k], d->name) == 0) return in->dim_values[k];
    return -1;
}

/* Standard normal values for a float tensor parameter of known shape. */
static ry_tensor *random_input(const cli_inputs *in, const ry_var *p, const ry_type *t, ry_rng *rng,
                               ry_error *err) {
    char buf[512];
    int64_t shape[RY_MAX_RANK];
    bool ok = t && t->kind == RY_TYPE_TENSOR && ry_dtype_is_float(t->tensor.dtype);
    for (int i = 0; ok && i < t->tensor.ndim; i++) ok = (shape[i] = dim_value(in, &t->tensor.dims[i])) >= 0;
    if (!ok) {
        const char *ts = t ? ry_type_str(t, buf, sizeof buf) : "unknown";
        if (!t || t->kind != RY_TYPE_TENSOR)
            ry_error_at(err, p->span, "parameter %%%s has type %s: give it with --input %s=sst:PATH:LINE (a tree) "
                        "or --input '%s=relay:VALUE' (a value in the text format)", p->name, ts, p->name, p->name);
        else if (ry_dtype_is_float(t->tensor.dtype))
            ry_error_at(err, p->span, "parameter %%%s has type %s: give its symbolic dimensions with --dim NAME=N, "
                        "or the tensor with --input %s=PATH.npy", p->name, ts, p->name);
        else
            ry_error_at(err, p->span, "parameter %%%s has type %s: give it with --input %s=PATH.npy", p->name, ts,
                        p->name);
        return NULL;
    }
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    const ry_init *init = in->init && t->tensor.dtype != RY_FLOAT16 ? ry_init_spec_find(in->init, p->name) : NULL;
    if (!x) {
        ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
    } else if (init && ry_init_fill(x, init, rng, err)) {
        char why[RY_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg);
        ry_error_at(err, p->span, "parameter %%%s: %s", p->name, why);
        ry_tensor_release(x);
        x = NULL;
    }
    for (int64_t i = 0; x && !init && i < x->size; i++) ry_tensor_set(x, i, ry_rng_normal(rng));
    return x;
}

/* Random values for a parameter of tensor type or a tuple of them. */
static ry_value *random_value(const cli_inputs *in, const ry_var *p, const ry_type *t, ry_rng *rng,
                              ry_error *err) {
    if (!t || t->kind != RY_TYPE_TUPLE) {
        ry_tensor *x = random_input(in, p, t, rng, err);
        ry_value *v = x ? ry_value_tensor(x) : NULL;
        if (x && !v) ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
        return v;
    }
    int n = t->tuple.n;
    ry_value **f = ry_calloc((size_t)(n ? n : 1), sizeof *f);
    bool ok = f != NULL;
    for (int i = 0; ok && i < n; i++) ok = (f[i] = random_value(in, p, t->tuple.fields[i], rng, err)) != NULL;
    ry_value *v = ok ? ry_value_tuple(n, f) : NULL;
    if (ok && !v) ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
    for (int i = 0; f && !ok && i < n; i++) ry_value_release(f[i]); /* ry_value_tuple releases them itself */
    ry_free(f);
    return v;
}

/* A parameter's --input x: an sst: or relay: value, or a .npy tensor. */
static ry_value *given_input(ry_module *m, cli_inputs *in, const ry_var *p, const ry_type *ty, cli_input *x,
                             bool float64, ry_error *err) {
    ry_value *v = NULL;
    ry_tensor *t = NULL;
    x->used = true;
    int r = cli_input_value(m, p, ty, x, float64, in, &v, err);
    if (r <= 0) return v;
    if (ry_npy_read(x->path, &t, err) == RY_OK && float64 && !(t = to_float64(t)))
        ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
    if (t && check_input(p, ty, t, x->path, err) != RY_OK) {
        ry_tensor_release(t);
        t = NULL;
    }
    if (t && !(v = ry_value_tensor(t))) ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
    return v;
}

static cli_input *input_named(cli_inputs *in, const char *name) {
    cli_input *x = NULL;
    for (int k = 0; k < in->n; k++)
        if (strcmp(in->items[k].name, name) == 0) x = &in->items[k];
    return x;
}

/* Given inputs first, then random ones: an sst: input's vocabulary may size
 * a random parameter (the embedding). */
int cli_bind_params(const char *cmd, const char *entry, cli_inputs *in, ry_module *m, const ry_expr *fn,
                    ry_rng *rng, bool float64, ry_value **args) {
    ry_error err;
    memset(&err, 0, sizeof err);
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (int i = 0; i < fn->func.nparams && rc == 0; i++) {
            const ry_var *p = fn->func.params[i];
            const ry_type *ty = p->type ? p->type : p->annot;
            cli_input *x = input_named(in, p->name);
            if (pass == 0 && x) {
                args[i] = given_input(m, in, p, ty, x, float64, &err);
            } else if (pass == 1 && !x && rng) {
                args[i] = random_value(in, p, ty, rng, &err);
            } else if (pass == 1 && !x) {
                ry_error_at(&err, p->span, "no input for parameter %%%s (give --input %s=PATH.npy)", p->name,
                            p->name);
            } else {
                continue;
            }
            if (!args[i]) {
                ry_error_print(stderr, &err);
                rc = 1;
            }
        }
    ry_vocab_free(in->vocab);
    in->vocab = NULL;
    for (int k = 0; k < in->n && rc == 0; k++)
        if (!in->items[k].used)
            rc = cli_fail(cmd, "@%s has no parameter %%%s (given by --input)", entry, in->items[k].name);
    return rc;
}

int cli_make_dir(const char *cmd, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return cli_fail(cmd, "cannot create %s: %s", dir, strerror(errno));
    return 0;
}

int cli_write_npy(const char *dir, const char *name, const ry_tensor *t) {
    char path[4096], desc[128];
    ry_error err;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (ry_npy_write(path, t, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        return 1;
    }
    printf("%s %s\n", path, ry_tensor_describe(t, desc, sizeof desc));
    return 0;
}

int cli_write_value(const char *cmd, const char *dir, const char *prefix, const ry_value *v) {
    int n = ry_value_count_tensors(v);
    ry_tensor **ts = n >= 0 ? ry_calloc((size_t)(n ? n : 1), sizeof *ts) : NULL;
    if (!ts) return cli_fail(cmd, "out of memory");
    ry_value_flatten(v, ts, n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%d", prefix, i);
        rc = cli_write_npy(dir, name, ts[i]);
    }
    ry_free(ts);
    return rc;
}
