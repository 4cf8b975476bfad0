/*
 * fuzz_checkpoint.c: the checkpoint loader on an arbitrary file: inspected
 * (seal, version, listing, checksum), then loaded into parameter sets of the
 * layout the listing gave, the way a resuming trainer would with a model
 * that matches; and imported (ry_checkpoint_import), the sealed copy then
 * read the same way. The bytes go in as they are, so a mutated sealed seed
 * is refused by its seal, and an unsealed HDF5 file reaches libhdf5
 * through the import. libhdf5 runs in the reading child: its crashes come
 * back here as errors, so what this target checks is relayc's side.
 */
#include "fuzz_util.h"
#include "io/checkpoint_impl.h"

/* Loads path into float32 sets shaped like info's /params entries. */
static void load_like(const char *path, const ry_checkpoint_info *info) {
    enum { MAX = 16 };
    const char *names[MAX];
    int ndims[MAX];
    const int64_t *shapes[MAX];
    int n = 0;
    for (int i = 0; i < info->n && n < MAX; i++) {
        const ry_checkpoint_entry *e = &info->entries[i];
        if (strncmp(e->path, "/params/", 8) != 0 || e->dtype != RY_FLOAT32) continue;
        names[n] = e->path + 8;
        ndims[n] = e->ndim;
        shapes[n] = e->shape;
        n++;
    }
    ry_param_set *p = ry_params_new(RY_FLOAT32, n, names, ndims, shapes);
    if (!p) return;
    ry_checkpoint_meta meta;
    memset(&meta, 0, sizeof meta);
    ry_error err;
    memset(&err, 0, sizeof err);
    fuzz_check_error(ry_checkpoint_load(path, p, NULL, &meta, &err), &err);
    ry_checkpoint_meta_clear(&meta);
    ry_params_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ry_ckpt_set_read_seconds(2); /* a libhdf5 loop costs 2 s, not 30 */
    const char *path = fuzz_file(data, size, ".h5");
    if (!path) return 0;
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_checkpoint_info *info = NULL;
    ry_status st = ry_checkpoint_inspect(path, &info, &err);
    fuzz_check_error(st, &err);
    if (st == RY_OK) load_like(path, info);
    ry_checkpoint_info_free(info);
    /* an unsealed file reaches libhdf5 through an import, whose sealed
     * copy is then read as a checkpoint */
    char copy[300];
    snprintf(copy, sizeof copy, "%s.sealed.h5", path);
    st = ry_checkpoint_import(path, copy, &err);
    fuzz_check_error(st, &err);
    info = NULL;
    if (st == RY_OK) {
        st = ry_checkpoint_inspect(copy, &info, &err);
        fuzz_check_error(st, &err);
        if (st == RY_OK) load_like(copy, info);
        ry_checkpoint_info_free(info);
    }
    unlink(copy);
    unlink(path);
    return 0;
}
