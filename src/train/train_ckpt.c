/*
 * train_ckpt.c: a trainer's checkpoints (checkpoint.h does the HDF5): the
 * parameters, every optimizer slot plus the per-parameter step counts as a
 * slot named "step", the optimizer's step count, and in the RNG words the
 * trainer's RNG and the loader's state, so a resumed run deals the same
 * batches and takes bit-identical steps. Carried RNN state is not stored:
 * a resumed run starts it from zeros.
 */
#include <assert.h>
#include <string.h>

#include "train/train_impl.h"

/* rng_state layout: [0..4) trainer RNG, [4..8) loader RNG, [8] loader
 * epoch, [9] loader position. */
enum { RNG_TRAINER = 0, RNG_LOADER = 4, RNG_EPOCH = 8, RNG_POS = 9, RNG_LEN = 10 };

#define MAX_SLOTS 8

static int slots_of(ry_trainer *tr, const char **names, ry_param_set **sets) {
    int n = ry_optim_slot_count(tr->optim);
    assert(n < MAX_SLOTS);
    for (int i = 0; i < n; i++) {
        names[i] = ry_optim_slot_name(tr->optim, i);
        sets[i] = ry_optim_slot(tr->optim, i);
    }
    names[n] = "step";
    sets[n] = ry_optim_steps(tr->optim);
    return n + 1;
}

ry_status ry_trainer_save(ry_trainer *tr, const char *dir, int keep, const ry_loader *loader,
                          const char *config, char *path_out, size_t n, ry_error *err) {
    const char *names[MAX_SLOTS];
    ry_param_set *sets[MAX_SLOTS];
    ry_checkpoint_slots slots = {slots_of(tr, names, sets), names, sets};
    ry_checkpoint_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = ry_optim_step_count(tr->optim);
    meta.model_text = tr->text;
    meta.config = config;
    ry_rng_get_state(&tr->rng, &meta.rng[RNG_TRAINER]);
    meta.rng_len = 4;
    if (loader) {
        ry_loader_state ls;
        ry_loader_get_state(loader, &ls);
        memcpy(&meta.rng[RNG_LOADER], ls.rng, sizeof ls.rng);
        meta.rng[RNG_EPOCH] = (uint64_t)ls.epoch;
        meta.rng[RNG_POS] = (uint64_t)ls.pos;
        meta.rng_len = RNG_LEN;
        meta.epoch = ls.epoch;
    }
    return ry_checkpoint_save_dir(dir, keep > 0 ? keep : 1, tr->params, &slots, &meta, path_out,
                                  n, err);
}

ry_status ry_trainer_load(ry_trainer *tr, const char *path, ry_loader *loader, ry_error *err) {
    /* load into copies first: the loader's and RNG's checks come after the
     * file's, and on any error the trainer must stay as it was */
    const char *names[MAX_SLOTS];
    ry_param_set *live[MAX_SLOTS], *sets[MAX_SLOTS];
    int ns = slots_of(tr, names, live);
    ry_param_set *params = ry_params_like(tr->params);
    int made = 0;
    ry_status st = RY_ERR;
    for (; made < ns; made++)
        if (!(sets[made] = ry_params_like(live[made]))) break;
    if (!params || made < ns) {
        ry_error_file(err, path, "out of memory");
        goto done;
    }
    ry_checkpoint_slots slots = {ns, names, sets};
    ry_checkpoint_meta meta;
    memset(&meta, 0, sizeof meta);
    if (ry_checkpoint_load(path, params, &slots, &meta, err)) goto done;
    ry_rng rng = tr->rng;
    ry_loader_state ls;
    if (meta.rng_len < 4 || meta.step < 0 || (loader && meta.rng_len < RNG_LEN)) {
        ry_error_file(err, path, "the checkpoint holds no %s state",
                      meta.rng_len < 4 ? "trainer" : "data loader");
        goto meta_done;
    }
    if (ry_rng_set_state(&rng, &meta.rng[RNG_TRAINER], err)) goto meta_done;
    if (loader) {
        ry_loader_state old;
        ry_loader_get_state(loader, &old);
        memcpy(ls.rng, &meta.rng[RNG_LOADER], sizeof ls.rng);
        ls.epoch = (int64_t)meta.rng[RNG_EPOCH];
        ls.pos = (int64_t)meta.rng[RNG_POS];
        if (ry_loader_set_state(loader, &ls, err)) {
            ry_error_prefix(err, "%s", path);
            goto meta_done;
        }
    }
    /* commit */
    ry_params_copy(tr->params, params);
    for (int i = 0; i < ns; i++) ry_params_copy(live[i], sets[i]);
    ry_optim_set_step_count(tr->optim, meta.step);
    tr->rng = rng;
    tr->naccum = 0;
    ry_trainer_reset_state(tr);
    st = RY_OK;
meta_done:
    ry_checkpoint_meta_clear(&meta);
done:
    ry_params_free(params);
    for (int i = 0; i < made; i++) ry_params_free(sets[i]);
    return st;
}
