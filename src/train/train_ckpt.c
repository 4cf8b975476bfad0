/*
 * train_ckpt.c: a trainer's checkpoints (checkpoint.h does the HDF5): the
 * parameters, every optimizer slot plus the per-parameter step counts as a
 * slot named "step", the optimizer's step count, and in the RNG words the
 * trainer's RNG and the loader's state, so a resumed run deals the same
 * batches and takes bit-identical steps. Carried RNN state is stored as a
 * slot named "carry" of the state parameters (/optimizer/h0/carry), so a
 * run resumed mid-epoch continues from the same hidden state.
 */
#include <assert.h>
#include <string.h>

#include "train/train_impl.h"

/* rng_state layout: [0..4) trainer RNG, [4..8) loader RNG, [8] loader
 * epoch, [9] loader position. */
enum { RNG_TRAINER = 0, RNG_LOADER = 4, RNG_EPOCH = 8, RNG_POS = 9, RNG_LEN = 10 };

#define MAX_SLOTS 8

/* The slots as whole sets; a sharded optimizer's (train_zero.c) are
 * those gathered for a save, else NULL. */
static int slots_of(ry_trainer *tr, const char **names, ry_param_set **sets) {
    int n = ry_optim_slot_count(tr->optim);
    assert(n + 2 <= MAX_SLOTS); /* room for "step" and "carry" */
    for (int i = 0; i < n; i++) {
        names[i] = ry_optim_slot_name(tr->optim, i);
        sets[i] = ry_optim_slot(tr->optim, i);
        if (!sets[i] && tr->zero_full) sets[i] = tr->zero_full[i];
    }
    names[n] = "step";
    sets[n] = ry_optim_steps(tr->optim);
    return n + 1;
}

/* The carried state as a set named by the state parameters; NULL when
 * there is none (or it is not all float tensors of one dtype). */
static ry_param_set *carry_set(const ry_trainer *tr) {
    const char *names[RY_TRAIN_MAX_DATA];
    int ndims[RY_TRAIN_MAX_DATA];
    const int64_t *shapes[RY_TRAIN_MAX_DATA];
    int k = tr->nstate;
    if (k == 0) return NULL;
    for (int i = 0; i < k; i++) {
        const ry_value *v = tr->state[i];
        if (!v || v->kind != RY_VAL_TENSOR || v->tensor->dtype != tr->state[0]->tensor->dtype)
            return NULL;
        names[i] = tr->data_vars[tr->nloss_data - k + i]->name;
        ndims[i] = v->tensor->ndim;
        shapes[i] = v->tensor->shape;
    }
    ry_param_set *c = ry_params_new(tr->state[0]->tensor->dtype, k, names, ndims, shapes);
    ry_error e;
    for (int i = 0; c && i < k; i++)
        if (ry_tensor_copy_into(c->views[i], tr->state[i]->tensor, &e)) { /* from any device */
            ry_params_free(c);
            return NULL;
        }
    return c;
}

/* The host's copies of a device run's sets, for the file (a device run
 * reads back its parameters and optimizer state only here). */
static ry_status host_copies(int n, ry_param_set **sets, ry_param_set **copies, ry_error *err) {
    for (int i = 0; i < n; i++) {
        if (!(copies[i] = ry_params_to(ry_target_cpu(), sets[i], err))) {
            for (int k = 0; k < i; k++) ry_params_free(copies[k]);
            ry_error_prefix(err, "copying the training state to the host");
            return RY_ERR;
        }
        sets[i] = copies[i];
    }
    return RY_OK;
}

ry_status ry_trainer_save(ry_trainer *tr, const char *dir, int keep, const ry_loader *loader,
                          const char *config, char *path_out, size_t n, ry_error *err) {
    const char *names[MAX_SLOTS];
    ry_param_set *sets[MAX_SLOTS + 1], *copies[MAX_SLOTS + 1] = {0};
    int ns = slots_of(tr, names, sets), nsets = ns + 1;
    for (int i = 0; i < ns; i++)
        if (!sets[i])
            return ry_error_at(err, RY_NO_SPAN,
                               "the optimizer's state is sharded over the ranks of a fit that "
                               "failed (shard_optimizer): it cannot be saved whole");
    sets[ns] = tr->params;
    if (tr->target->dev && host_copies(nsets, sets, copies, err)) return RY_ERR;
    ry_param_set *params = sets[ns];
    ry_param_set *carry = carry_set(tr);
    if (carry) {
        names[ns] = "carry";
        sets[ns++] = carry;
    }
    ry_checkpoint_slots slots = {ns, names, sets};
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
    ry_status st = ry_checkpoint_save_dir(dir, keep > 0 ? keep : 1, params, &slots, &meta,
                                          path_out, n, err);
    ry_params_free(carry);
    for (int i = 0; i < nsets; i++) ry_params_free(copies[i]);
    return st;
}

/* A set shaped like the carried state the file at path holds
 * (/optimizer/<state>/carry), or NULL when it holds none. */
static ry_status carry_of_file(const ry_trainer *tr, const char *path, ry_param_set **out,
                               ry_error *err) {
    *out = NULL;
    if (tr->nstate == 0) return RY_OK;
    ry_checkpoint_info *info;
    if (ry_checkpoint_inspect(path, &info, err)) return RY_ERR;
    const char *names[RY_TRAIN_MAX_DATA];
    int ndims[RY_TRAIN_MAX_DATA], found = 0;
    const int64_t *shapes[RY_TRAIN_MAX_DATA];
    ry_dtype dt = RY_FLOAT32;
    char want[256];
    for (int k = 0; k < tr->nstate; k++) {
        names[k] = tr->data_vars[tr->nloss_data - tr->nstate + k]->name;
        snprintf(want, sizeof want, "/optimizer/%s/carry", names[k]);
        for (int i = 0; i < info->n; i++)
            if (strcmp(info->entries[i].path, want) == 0) {
                ndims[k] = info->entries[i].ndim;
                shapes[k] = info->entries[i].shape;
                dt = info->entries[i].dtype;
                found++;
            }
    }
    ry_status st = RY_OK;
    if (found == tr->nstate) {
        *out = ry_params_new(dt, tr->nstate, names, ndims, shapes);
        if (!*out) st = ry_error_file(err, path, "bad carried state (or out of memory)");
    }
    ry_checkpoint_info_free(info);
    return st;
}

ry_status ry_trainer_load(ry_trainer *tr, const char *path, ry_loader *loader, ry_error *err) {
    /* load into copies first: the loader's and RNG's checks come after the
     * file's, and on any error the trainer must stay as it was */
    const char *names[MAX_SLOTS];
    ry_param_set *live[MAX_SLOTS], *sets[MAX_SLOTS];
    int ns = slots_of(tr, names, live);
    ry_param_set *carry = NULL;
    if (carry_of_file(tr, path, &carry, err)) return RY_ERR;
    ry_param_set *params = ry_params_like(tr->params);
    int made = 0;
    ry_status st = RY_ERR;
    /* a sharded optimizer (no live set) loads a whole set, keeping its slice */
    for (; made < ns; made++)
        if (!(sets[made] = ry_params_like(live[made] ? live[made] : tr->params))) break;
    if (!params || made < ns) {
        ry_error_file(err, path, "out of memory");
        goto done;
    }
    int nall = ns;
    if (carry) {
        names[nall] = "carry";
        sets[nall++] = carry;
    }
    ry_checkpoint_slots slots = {nall, names, sets};
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
    /* commit (onto the device, for a device run: only a driver failure
     * can stop it halfway) */
    bool copied = ry_params_copy(tr->params, params) == RY_OK;
    for (int i = 0; i < ns && copied; i++) {
        if (live[i])
            copied = ry_params_copy(live[i], sets[i]) == RY_OK;
        else if (ry_optim_load_slot(tr->optim, names[i], sets[i], err))
            goto meta_done; /* cannot happen: the layout is the parameters' */
    }
    if (!copied) {
        ry_error_file(err, path, "copying the checkpoint to %s failed", tr->target->name);
        goto meta_done;
    }
    ry_optim_set_step_count(tr->optim, meta.step);
    tr->rng = rng;
    tr->naccum = 0;
    ry_trainer_reset_state(tr);
    for (int k = 0; carry && k < carry->n; k++) {
        ry_tensor *t = ry_tensor_copy(carry->views[k]);
        tr->state[k] = t ? ry_value_tensor(t) : NULL; /* NULL: zeros */
    }
    st = RY_OK;
meta_done:
    ry_checkpoint_meta_clear(&meta);
done:
    ry_params_free(params);
    ry_params_free(carry);
    for (int i = 0; i < made; i++) ry_params_free(sets[i]);
    return st;
}
