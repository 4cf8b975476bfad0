/*
 * export_infer.c: inference of a model's @predict exported as standalone C
 * (relayc export) beside the same call on the VM, one thread, in one run:
 *   build/bench/export_infer NAME [--batch B] [--calls N]
 * models/NAME.relay gets seeded random weights (every parameter of
 * @predict with a static shape) and random data; the VM's time per call is
 * the mean of N calls after a warm one, the export's is its example's
 * `-r N` (the same inputs, read from .npy). Prints one JSON line: both
 * times, their ratio, the artifact's code, object and weights bytes and
 * its build time (make, cc -std=c11 -O2). Nothing asserts a time.
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

static double vm_us(const char *path, const ry_param_set *w, ry_value *const *data, int ndata, long calls, ry_error *err) {
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
    ry_value **args = ry_calloc((size_t)n, sizeof *args);
    for (int i = 0, d = 0; i < n; i++) {
        int k = ry_params_find(w, fn->func.params[i]->name);
        args[i] = k >= 0 ? ry_value_tensor(ry_tensor_retain(w->views[k])) : ry_value_retain(data[d++ % ndata]);
    }
    ry_value *out = NULL;
    if (ry_vm_call(prog, "predict", n, args, NULL, &out, err) == RY_OK) {
        ry_value_release(out);
        double t0 = bench_now();
        long c = 0;
        for (; c < calls; c++) {
            if (ry_vm_call(prog, "predict", n, args, NULL, &out, err)) break;
            ry_value_release(out);
        }
        if (c == calls) us = (bench_now() - t0) * 1e6 / (double)calls;
    }
    bench_release_all(args, n);
    ry_free(args);
    ry_vm_free(prog);
    ry_module_free(m);
    return us;
}

int main(int argc, char **argv) {
    const char *name = NULL;
    int64_t batch = 1;
    long calls = 200;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = bench_opt(argc, argv, &i, "--batch"))) batch = atoll(v);
        else if ((v = bench_opt(argc, argv, &i, "--calls"))) calls = atol(v);
        else name = argv[i];
    }
    if (!name || batch < 1 || calls < 1) {
        fprintf(stderr, "usage: export_infer NAME [--batch B] [--calls N]\n");
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
    int rc = ndata < 1 || ndata > 4 || bench_random_data(fn, ndata, batch, 1, 10, &rng, data, &err);
    char cmd[2048], npy[1100];
    double build_s = 0, vm = -1, ex = -1;
    for (int i = 0; rc == 0 && i < ndata; i++) {
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
        for (int i = 0; i < ndata; i++) n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s/in%d.npy", dir, i);
        snprintf(cmd + n, sizeof cmd - n, " %s/out.npy 2>&1", dir);
        FILE *p = popen(cmd, "r");
        char line[256] = "";
        long got = 0;
        if (p && fgets(line, sizeof line, p) && sscanf(line, "%ld calls: %lf", &got, &ex) != 2) ex = -1;
        if (p) pclose(p);
        vm = vm_us(path, w, data, ndata, calls, &err);
    }
    if (rc != 0 || vm < 0 || ex < 0) {
        ry_error_print(stderr, &err);
        rc = 1;
    } else {
        char c_name[300], w_name[300], o_name[300];
        snprintf(c_name, sizeof c_name, "%s.c", name);
        snprintf(w_name, sizeof w_name, "%s.weights", name);
        snprintf(o_name, sizeof o_name, "%s.o", name);
        printf("{\"bench\": \"export_infer\", \"model\": \"%s\", \"batch\": %lld, \"calls\": %ld, \"vm_us\": %.2f, "
               "\"export_us\": %.2f, \"vm_over_export\": %.2f, \"code_bytes\": %ld, \"object_bytes\": %ld, "
               "\"weights_bytes\": %ld, \"build_s\": %.2f}\n",
               name, (long long)batch, calls, vm, ex, vm / ex, file_size(dir, c_name), file_size(dir, o_name),
               file_size(dir, w_name), build_s);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) rc = 1;
    bench_release_all(data, 4);
    ry_params_free(w);
    ry_module_free(m);
    return rc;
}
