/*
 * inputs.c: binding a function's parameters to tensors from .npy files
 * (`--input NAME=PATH`), or to seeded random values of their static types
 * (gradcheck), and writing results as .npy files. Shared by run, grad and
 * gradcheck.
 */
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
    cli_input *x = &in->items[in->n++];
    x->name = v[0] == '%' ? v + 1 : v;
    x->path = eq + 1;
    *(char *)eq = '\0'; /* the name ends at '=' (argv strings are ours to edit) */
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

/* Standard normal values for a parameter whose type has a static shape. */
static ry_tensor *random_input(const ry_var *p, const ry_type *t, ry_rng *rng, ry_error *err) {
    char buf[512];
    int64_t shape[RY_MAX_RANK];
    bool ok = t && t->kind == RY_TYPE_TENSOR && ry_dtype_is_float(t->tensor.dtype);
    for (int i = 0; ok && i < t->tensor.ndim; i++) {
        ok = t->tensor.dims[i].kind == RY_DIM_CONST;
        shape[i] = t->tensor.dims[i].value;
    }
    if (!ok) {
        ry_error_at(err, p->span, "parameter %%%s has type %s: give it with --input %s=PATH.npy", p->name,
                    t ? ry_type_str(t, buf, sizeof buf) : "unknown", p->name);
        return NULL;
    }
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    for (int64_t i = 0; x && i < x->size; i++) ry_tensor_set(x, i, ry_rng_normal(rng));
    if (!x) ry_error_at(err, p->span, "out of memory for parameter %%%s", p->name);
    return x;
}

int cli_bind_params(const char *cmd, const char *entry, cli_inputs *in, const ry_expr *fn, ry_rng *rng,
                    bool float64, ry_value **args) {
    ry_error err;
    memset(&err, 0, sizeof err);
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        const ry_type *ty = p->type ? p->type : p->annot;
        if (args[i]) continue; /* from a checkpoint */
        cli_input *x = NULL;
        for (int k = 0; k < in->n; k++)
            if (strcmp(in->items[k].name, p->name) == 0) x = &in->items[k];
        ry_tensor *t = NULL;
        if (x) {
            x->used = true;
            if (ry_npy_read(x->path, &t, &err) == RY_OK && float64 && !(t = to_float64(t)))
                ry_error_at(&err, p->span, "out of memory for parameter %%%s", p->name);
            if (t && check_input(p, ty, t, x->path, &err) != RY_OK) {
                ry_tensor_release(t);
                t = NULL;
            }
        } else if (rng) {
            t = random_input(p, ty, rng, &err);
        } else {
            ry_error_at(&err, p->span, "no input for parameter %%%s (give --input %s=PATH.npy, or --checkpoint)",
                        p->name, p->name);
        }
        if (!t) {
            ry_error_print(stderr, &err);
            return 1;
        }
        if (!(args[i] = ry_value_tensor(t))) return cli_fail(cmd, "out of memory");
    }
    for (int k = 0; k < in->n; k++)
        if (!in->items[k].used)
            return cli_fail(cmd, "@%s has no parameter %%%s (given by --input)", entry, in->items[k].name);
    return 0;
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
