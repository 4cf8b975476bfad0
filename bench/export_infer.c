/*
 * export_infer.c: inference of a model's @predict exported as standalone C
 * (relayc export) beside the same call on the VM, one thread, in one run:
 *   build/bench/export_infer NAME [--batch B] [--calls N] [--tree FILE:LINE]
 * models/NAME.relay gets seeded random weights (every parameter of
 * @predict with a static shape) and random data, or for a tree model the
 * PTB tree on line LINE of FILE (its words numbered by first appearance,
 * as relayc run's sst: input and the export's NAME_parse_tree number
 * them); the VM's times are those of N calls after a warm one, the
 * export's its example's `-r N` (the same inputs, read from .npy or the
 * tree's text). Prints one JSON line: both medians and means, the ratio
 * of the medians, the artifact's code, object and weights bytes and its
 * build time (make, cc -std=c11 -O2). Nothing asserts a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"

static long file_size(const char *dir, const char *name) {
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The weights: every static-shape float32 parameter, N(0, 0.1). */
static ry_param_set *random_weights(const ry_expr *fn, ry_rng *r) {
    const char *names[64];
    int ndims[64], n = 0;
    const int64_t *shapes[64];
    int64_t dims[64][RY_MAX_RANK];
    for (int i = 0; i < fn->func.nparams && n < 64; i++) {
        const ry_type *t = fn->func.params[i]->type;
        bool fixed = t->kind == RY_TYPE_TENSOR && t->tensor.dtype == RY_FLOAT32;
        for (int k = 0; fixed && k < t->tensor.ndim; k++) {
            fixed = t->tensor.dims[k].kind == RY_DIM_CONST;
            dims[n][k] = t->tensor.dims[k].value;
        }
        if (!fixed) continue;
        names[n] = fn->func.params[i]->name, ndims[n] = t->tensor.ndim, shapes[n] = dims[n];
        n++;
    }
    ry_param_set *p = ry_params_new(RY_FLOAT32, n, names, ndims, shapes);
    for (int64_t i = 0; p && i < p->slab->size; i++) ((float *)p->slab->data)[i] = (float)(0.1 * ry_rng_normal(r));
    return p;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int tree_input(const ry_expr *fn, const char *spec, const char *dir, ry_value **data, ry_error *err);

/* The tensors of a result type, depth-first: the example's output files. */
static int count_outputs(const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TUPLE) return 1;
    int n = 0;
    for (int i = 0; i < t->tuple.n; i++) n += count_outputs(t->tuple.fields[i]);
    return n;
}

/* The VM's mean per call (*median: the median), or -1. A tree is built
 * again from its text in this module: the VM matches its constructors. */
static double vm_us(const char *path, const ry_param_set *w, ry_value *const *data, int ndata, const char *tree,
                    const char *dir, long calls, double *median, ry_error *err) {
    ry_module *m = NULL;
    ry_vm_program *prog = NULL;
    double us = -1;
    if (ry_module_parse_file(path, &m, err) || ry_module_typecheck(m, err) || ry_hoist(m, err) ||
        ry_optimize(m, 2, err) || ry_vm_compile(m, NULL, &prog, err)) {
        ry_module_free(m);
        return -1;
    }
    const ry_expr *fn = ry_module_find_global(m, "predict")->func;
    int n = fn->func.nparams;
    ry_value *own[1] = {NULL};
    if (tree && tree_input(fn, tree, dir, own, err)) {
        ry_vm_free(prog);
        ry_module_free(m);
        return -1;
    }
    if (tree) data = own;
    ry_value **args = ry_calloc((size_t)n, sizeof *args);
    for (int i = 0, d = 0; i < n; i++) {
        int k = ry_params_find(w, fn->func.params[i]->name);
        args[i] = k >= 0 ? ry_value_tensor(ry_tensor_retain(w->views[k])) : ry_value_retain(data[d++ % ndata]);
    }
    ry_value *out = NULL;
    if (ry_vm_call(prog, "predict", n, args, NULL, &out, err) == RY_OK) {
        ry_value_release(out);
        double *t = ry_calloc((size_t)calls, sizeof *t), sum = 0;
        long c = 0;
        for (; t && c < calls; c++) {
            double t0 = bench_now();
            if (ry_vm_call(prog, "predict", n, args, NULL, &out, err)) break;
            t[c] = (bench_now() - t0) * 1e6;
            sum += t[c];
            ry_value_release(out);
        }
        if (t && c == calls) {
            qsort(t, (size_t)calls, sizeof *t, cmp_double);
            us = sum / (double)calls;
            *median = t[calls / 2];
        }
        ry_free(t);
    }
    bench_release_all(args, n);
    ry_free(args);
    if (own[0]) ry_value_release(own[0]);
    ry_vm_free(prog);
    ry_module_free(m);
    return us;
}

/* The PTB tree on line LINE of FILE (spec "FILE:LINE") as the tree ADT
 * of fn's data parameter (data[0]), its words numbered 1, 2, ... by first
 * appearance; its text into dir/in0.txt for the example. */
static int tree_input(const ry_expr *fn, const char *spec, const char *dir, ry_value **data, ry_error *err) {
    const char *colon = strrchr(spec, ':');
    char file[512], text[65536] = "";
    if (!colon || (size_t)(colon - spec) >= sizeof file) return 1;
    snprintf(file, sizeof file, "%.*s", (int)(colon - spec), spec);
    long line = atol(colon + 1);
    FILE *f = fopen(file, "r");
    for (long i = 1; f && fgets(text, sizeof text, f) && i < line; i++) text[0] = 0;
    if (f) fclose(f);
    if (!text[0]) {
        fprintf(stderr, "export_infer: no line %ld in %s\n", line, file);
        return 1;
    }
    const ry_type *t = NULL;
    for (int i = 0; i < fn->func.nparams && !t; i++)
        if (fn->func.params[i]->type->kind == RY_TYPE_CALL) t = fn->func.params[i]->type;
    if (!t || t->call.adt->nctors != 2) return 1;
    const ry_ctor *leaf = t->call.adt->ctors[0], *node = t->call.adt->ctors[1];
    ry_vocab *v = ry_vocab_new();
    ry_treebank *tb = NULL;
    int rc = !v || ry_treebank_parse(file, text, strlen(text), v, true, &tb, err) ||
             ry_tree_to_value(&tb->trees[0], leaf, node, &data[0], err);
    ry_treebank_free(tb);
    ry_vocab_free(v);
    char path[700];
    snprintf(path, sizeof path, "%s/in0.txt", dir);
    FILE *o = rc ? NULL : fopen(path, "w");
    if (!o || fputs(text, o) < 0) rc = 1;
    if (o) fclose(o);
    return rc;
}

int main(int argc, char **argv) {
    const char *name = NULL, *tree = NULL;
    int64_t batch = 1;
    long calls = 200;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoll(v);
        else if ((v = bench_opt(argc, argv, &i, "--calls"))) calls = atol(v);
        else if ((v = bench_opt(argc, argv, &i, "--tree"))) tree = v;
        else name = argv[i];
    }
    if (!name || batch < 1 || calls < 1) {
        fprintf(stderr, "usage: export_infer NAME [--batch B] [--calls N] [--tree FILE:LINE]\n");
        return 2;
    }
    bench_set_threads(1);
    char path[256], dir[] = "/tmp/relayc_export_infer_XXXXXX";
    snprintf(path, sizeof path, "models/%s.relay", name);
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_module *m = NULL;
    ry_rng rng;
    ry_rng_seed(&rng, 1);
    if (!mkdtemp(dir) || ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    const ry_expr *fn = ry_module_find_global(m, "predict")->func;
    ry_param_set *w = random_weights(fn, &rng);
    ry_value *data[4] = {0};
    int ndata = fn->func.nparams - w->n;
    char cmd[2048], npy[1100];
    int rc = ndata < 1 || ndata > 4;
    if (rc == 0 && tree) rc = ndata != 1 || tree_input(fn, tree, dir, data, &err);
    else if (rc == 0) rc = bench_random_data(fn, ndata, batch, 1, 10, &rng, data, &err);
    double build_s = 0, vm = -1, ex = -1, vm_med = -1, ex_med = -1;
    for (int i = 0; rc == 0 && !tree && i < ndata; i++) {
        snprintf(npy, sizeof npy, "%s/in%d.npy", dir, i);
        rc = ry_npy_write(npy, data[i]->tensor, &err) != RY_OK;
    }
    ry_export_opts o = {.name = name, .source = path};
    if (rc == 0) rc = ry_export_c(m, "predict", w, dir, &o, &err) != RY_OK;
    if (rc == 0) {
        snprintf(cmd, sizeof cmd, "make -s -C %s >/dev/null", dir);
        double t0 = bench_now();
        rc = system(cmd) != 0;
        build_s = bench_now() - t0;
    }
    if (rc == 0) {
        size_t n = (size_t)snprintf(cmd, sizeof cmd, "%s/example -r %ld", dir, calls);
        for (int i = 0; i < ndata; i++) n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s/in%d.%s", dir, i, tree ? "txt" : "npy");
        for (int k = 0; k < count_outputs(fn->func.body->type); k++) n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s/out%d.npy", dir, k);
        snprintf(cmd + n, sizeof cmd - n, " 2>&1");
        FILE *p = popen(cmd, "r");
        char line[256] = "";
        long got = 0;
        if (p && fgets(line, sizeof line, p) &&
            sscanf(line, "%ld calls: %lf us per call, median %lf", &got, &ex, &ex_med) != 3)
            ex = -1, fprintf(stderr, "export_infer: the example said: %s", line);
        if (p) pclose(p);
        vm = vm_us(path, w, data, ndata, tree, dir, calls, &vm_med, &err);
    }
    if (rc != 0 || vm < 0 || ex < 0) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        char c_name[300], w_name[300], o_name[300];
        snprintf(c_name, sizeof c_name, "%s.c", name);
        snprintf(w_name, sizeof w_name, "%s.weights", name);
        snprintf(o_name, sizeof o_name, "%s.o", name);
        printf("{\"bench\": \"export_infer\", \"model\": \"%s\", \"input\": \"%s\", \"batch\": %lld, \"calls\": %ld, "
               "\"vm_median_us\": %.2f, \"export_median_us\": %.2f, \"vm_over_export_median\": %.2f, \"vm_mean_us\": %.2f, "
               "\"export_mean_us\": %.2f, \"code_bytes\": %ld, \"object_bytes\": %ld, \"weights_bytes\": %ld, \"build_s\": %.2f}\n",
               name, tree ? tree : "random", (long long)batch, calls, vm_med, ex_med, vm_med / ex_med, vm, ex,
               file_size(dir, c_name), file_size(dir, o_name), file_size(dir, w_name), build_s);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) rc = 1;
    bench_release_all(data, 4);
    ry_params_free(w);
    ry_module_free(m);
    return rc;
}
