/*
 * checkpoint_args.c: `--checkpoint CKPT` for run and export: the
 * parameters of a checkpoint (every /params dataset, verified whole by
 * ry_checkpoint_load) bound by name to an entry's parameters. Parameters
 * given with --input win; the rest must be in the checkpoint with the
 * parameter's dtype and shape, and every checkpoint parameter must be a
 * parameter of some global of the model (@predict may leave out what only
 * @loss takes; a checkpoint of another model is refused). Reading .npy inputs is inputs.c's.
 */
#include <string.h>

#include "cli/cli.h"

int cli_checkpoint_read(const char *cmd, const char *path, ry_param_set **out) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_checkpoint_info *info = NULL;
    *out = NULL;
    if (ry_checkpoint_inspect(path, &info, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        return 1;
    }
    int n = 0, rc = 0;
    const char **names = ry_calloc((size_t)info->n + 1, sizeof *names);
    int *ndims = ry_calloc((size_t)info->n + 1, sizeof *ndims);
    const int64_t **shapes = ry_calloc((size_t)info->n + 1, sizeof *shapes);
    ry_dtype dt = RY_FLOAT32;
    if (!names || !ndims || !shapes) rc = cli_fail(cmd, "out of memory");
    for (int i = 0; rc == 0 && i < info->n; i++) {
        const ry_checkpoint_entry *e = &info->entries[i];
        if (strncmp(e->path, "/params/", 8) != 0) continue;
        if (n > 0 && e->dtype != dt)
            rc = cli_fail(cmd, "%s: parameters of more than one dtype (%s is %s, %s is %s)", path, names[0],
                          ry_dtype_name(dt), e->path + 8, ry_dtype_name(e->dtype));
        dt = e->dtype;
        names[n] = e->path + 8;
        ndims[n] = e->ndim;
        shapes[n] = e->shape;
        n++;
    }
    ry_param_set *set = NULL;
    if (rc == 0 && n == 0) rc = cli_fail(cmd, "%s holds no parameters", path);
    if (rc == 0 && !(set = ry_params_new(dt, n, names, ndims, shapes))) rc = cli_fail(cmd, "out of memory");
    if (rc == 0 && ry_checkpoint_load(path, set, NULL, NULL, &err) != RY_OK) {
        ry_error_print(stderr, &err);
        rc = 1;
    }
    if (rc != 0) ry_params_free(set);
    else *out = set;
    ry_free(names);
    ry_free(ndims);
    ry_free(shapes);
    ry_checkpoint_info_free(info);
    return rc;
}

static bool given(const cli_inputs *in, const char *name) {
    for (int k = 0; in && k < in->n; k++)
        if (strcmp(in->items[k].name, name) == 0) return true;
    return false;
}

/* The checkpoint's tensor against the parameter's static type. */
static int check_param(const char *path, const ry_var *p, const ry_tensor *t) {
    const ry_type *ty = p->type ? p->type : p->annot;
    char want[512], got[128];
    bool ok = ty && ty->kind == RY_TYPE_TENSOR && ty->tensor.dtype == t->dtype && ty->tensor.ndim == t->ndim;
    for (int i = 0; ok && i < t->ndim; i++)
        if (ty->tensor.dims[i].kind == RY_DIM_CONST && ty->tensor.dims[i].value != t->shape[i]) ok = false;
    if (ok) return 0;
    ry_error err;
    ry_error_at(&err, p->span, "parameter %%%s is %s, but %s holds %s", p->name,
                ty ? ry_type_str(ty, want, sizeof want) : "untyped", path, ry_tensor_describe(t, got, sizeof got));
    ry_error_print(stderr, &err);
    return 1;
}

int cli_bind_checkpoint(const char *cmd, const char *entry, const char *path, const ry_param_set *set,
                        const cli_inputs *in, const ry_module *m, ry_value **args) {
    const ry_expr *fn = ry_module_find_global(m, entry)->func;
    for (int k = 0; k < set->n; k++)
        if (!ry_module_has_param(m, set->names[k]))
            return cli_fail(cmd, "%s holds parameter %s, which no global of the model takes: a checkpoint of another model?",
                            path, set->names[k]);
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        int k = ry_params_find(set, p->name);
        if (k < 0 || given(in, p->name)) continue;
        if (check_param(path, p, set->views[k])) return 1;
        ry_tensor *t = ry_tensor_copy(set->views[k]);
        if (!t || !(args[i] = ry_value_tensor(t))) {
            ry_tensor_release(t);
            return cli_fail(cmd, "out of memory");
        }
    }
    return 0;
}
