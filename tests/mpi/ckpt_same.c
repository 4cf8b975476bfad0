/*
 * ckpt_same.c: `ckpt_same MODEL A.h5 B.h5 [adam]` exits 0 when the two
 * checkpoints of MODEL hold the same parameters, optimizer state and
 * step counts bit for bit, else prints the first difference and exits 1
 * (tests/mpi/run_cli.sh: a killed and resumed run against an
 * uninterrupted one). The optimizer is SGD with momentum, or Adam.
 */
#include <stdio.h>
#include <string.h>

#include "relayc/relayc.h"

static ry_trainer *load(const char *model, const char *path, bool adam) {
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(adam ? RY_OPTIM_ADAM : RY_OPTIM_SGD);
    o.optim.momentum = adam ? 0 : 0.9;
    ry_trainer *tr = NULL;
    ry_error err;
    if (ry_trainer_new_file(model, &o, &tr, &err) || ry_trainer_load(tr, path, NULL, &err)) {
        ry_error_print(stderr, &err);
        ry_trainer_free(tr);
        return NULL;
    }
    return tr;
}

static bool same(const char *what, const ry_param_set *a, const ry_param_set *b) {
    if (a->slab->size == b->slab->size &&
        memcmp(a->slab->data, b->slab->data, ry_tensor_nbytes(a->slab)) == 0)
        return true;
    fprintf(stderr, "ckpt_same: the %s differ\n", what);
    return false;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ckpt_same MODEL A.h5 B.h5 [adam]\n");
        return 2;
    }
    bool adam = argc > 4 && strcmp(argv[4], "adam") == 0;
    ry_trainer *a = load(argv[1], argv[2], adam), *b = load(argv[1], argv[3], adam);
    bool ok = a && b && same("parameters", ry_trainer_params(a), ry_trainer_params(b)) &&
              same("step counts", ry_optim_steps(ry_trainer_optim(a)),
                   ry_optim_steps(ry_trainer_optim(b)));
    for (int s = 0; ok && s < ry_optim_slot_count(ry_trainer_optim(a)); s++)
        ok = same(ry_optim_slot_name(ry_trainer_optim(a), s), ry_optim_slot(ry_trainer_optim(a), s),
                  ry_optim_slot(ry_trainer_optim(b), s));
    if (ok && ry_trainer_steps(a) != ry_trainer_steps(b)) {
        fprintf(stderr, "ckpt_same: steps %lld vs %lld\n", (long long)ry_trainer_steps(a),
                (long long)ry_trainer_steps(b));
        ok = false;
    }
    ry_trainer_free(a);
    ry_trainer_free(b);
    return ok ? 0 : 1;
}
