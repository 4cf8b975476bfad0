/*
 * vm_steps.c: runs a model's gradient program on the VM a fixed number of
 * times (no optimizer, no data loading), to compare the engine with and
 * without its memory plan by instruction counts (valgrind --tool=callgrind)
 * or wall time. Fixed random inputs; Tree-LSTM trees of 2..36 leaves.
 *   cc -O2 -g -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags hdf5 openblas) \
 *      -o build/bench/vm_steps bench/vm_steps.c build/librelayc.a \
 *      $(pkg-config --libs hdf5 openblas) -lz -lm -pthread
 *   build/bench/vm_steps mlp|lenet|charlstm|treelstm STEPS [--no-plan]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relayc/ad.h"
#include "relayc/pass.h"
#include "relayc/relayc.h"

static uint64_t seed = 88172645463325252ULL;
static uint64_t next(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static const ry_ctor *ctor(ry_module *m, const char *name) {
    for (int i = 0; i < m->ntypedefs; i++)
        for (int k = 0; k < m->typedefs[i]->nctors; k++)
            if (strcmp(m->typedefs[i]->ctors[k]->name, name) == 0) return m->typedefs[i]->ctors[k];
    return NULL;
}

static ry_value *i32(int v) { return ry_value_tensor(ry_tensor_scalar(RY_INT32, v)); }

/* Leaf(label, word) | Node(left, right, label) over k leaves */
static ry_value *tree(ry_module *m, int k) {
    if (k == 1) return ry_value_adt(ctor(m, "Leaf"), 2, (ry_value *[]){i32((int)(next() % 5)), i32((int)(next() % 18281))});
    int left = 1 + (int)(next() % (uint64_t)(k - 1));
    ry_value *l = tree(m, left), *r = tree(m, k - left);
    return ry_value_adt(ctor(m, "Node"), 3, (ry_value *[]){l, r, i32((int)(next() % 5))});
}

static ry_value *tensor_arg(const ry_type *t, const char *model) {
    int64_t shape[RY_MAX_RANK];
    for (int d = 0; d < t->tensor.ndim; d++) {
        const ry_dim *dim = &t->tensor.dims[d];
        shape[d] = dim->kind == RY_DIM_CONST ? dim->value
                   : strcmp(model, "charlstm") == 0 ? (strcmp(dim->name, "n") == 0 ? 32 : 64)
                                                    : 64;
    }
    ry_tensor *x = ry_tensor_new(t->tensor.dtype, t->tensor.ndim, shape);
    for (int64_t i = 0; i < x->size; i++)
        ry_tensor_set(x, i, ry_dtype_is_float(x->dtype) ? ((double)(next() % 2001) - 1000) * 1e-4
                                                        : (double)(next() % 10));
    return ry_value_tensor(x);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: vm_steps MODEL STEPS [--no-plan]\n");
        return 2;
    }
    const char *model = argv[1];
    int steps = atoi(argv[2]);
    ry_vm_opts vo = {.training = true};
#ifndef VM_STEPS_OLD /* (built against a VM without the plan: --no-plan is its only mode) */
    vo.no_plan = argc > 3 && strcmp(argv[3], "--no-plan") == 0;
#endif
    char path[256];
    snprintf(path, sizeof path, "models/%s.relay", model);
    ry_module *m = NULL;
    ry_error err;
    const char *g = NULL;
    bool rec = strcmp(model, "treelstm") == 0 || strcmp(model, "charlstm") == 0;
    if (ry_module_parse_file(path, &m, &err) || ry_module_typecheck(m, &err) ||
        ry_grad(m, "loss", NULL, NULL, &g, &err) || ry_optimize(m, rec ? 1 : 2, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    const ry_global *gl = ry_module_find_global(m, g);
    int n = gl->func->func.nparams;
    ry_value *args[32];
    for (int i = 0; i < n; i++) {
        const ry_type *t = gl->func->func.params[i]->annot;
        args[i] = t->kind == RY_TYPE_TENSOR ? tensor_arg(t, model) : NULL;
    }
    ry_vm_program *p = NULL;
    if (ry_vm_compile(m, NULL, &p, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    double total = 0;
    for (int s = 0; s < steps; s++) {
        if (!args[0] || args[0]->kind == RY_VAL_ADT) {
            ry_value_release(args[0]);
            args[0] = tree(m, 2 + (int)(next() % 35));
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ry_value *v = NULL;
        if (ry_vm_call(p, g, n, args, &vo, &v, &err)) {
            ry_error_print(stderr, &err);
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        total += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        ry_value_release(v);
    }
#ifndef VM_STEPS_OLD
    ry_vm_stats st;
    ry_vm_get_stats(p, &st);
    printf("{\"model\": \"%s\", \"plan\": %s, \"steps\": %d, \"ms_per_step\": %.3f, "
           "\"slots\": %d, \"inplace\": %ld, \"reused\": %ld, \"fresh\": %ld}\n",
           model, vo.no_plan ? "false" : "true", steps, 1e3 * total / steps, st.nslots,
           st.ran_inplace, st.ran_reused, st.ran_fresh);
#else
    printf("{\"model\": \"%s\", \"plan\": false, \"steps\": %d, \"ms_per_step\": %.3f}\n",
           model, steps, 1e3 * total / steps);
#endif
    for (int i = 0; i < n; i++) ry_value_release(args[i]);
    ry_vm_free(p);
    ry_module_free(m);
    return 0;
}
