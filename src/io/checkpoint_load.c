/*
 * checkpoint_load.c: reading checkpoints back, trusting nothing. The seal is
 * checked before libhdf5 opens the file; then the format version, the list
 * of datasets (names, dtypes, shapes) against what the caller expects, and
 * the checksum over every byte. All of that runs in a forked child
 * (checkpoint_child.c), never in this process: data is read into fresh
 * sets there, comes back through a shared mapping and is copied to the
 * caller's only once everything has passed, so a failed load, or a file
 * that crashes or hangs libhdf5, changes nothing. Also: inspecting and
 * verifying a file. Writing is in checkpoint_save.c.
 */
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint_impl.h"

/* An open checkpoint: what ck_open learned about it. */
typedef struct ckfile {
    const char *path;
    hid_t f;
    bool sealed;
    int64_t size; /* of the file, in bytes */
    int64_t version;
    int n;
    ry_checkpoint_entry *e; /* sorted by path */
    ry_checkpoint_meta meta; /* strings owned */
    uint32_t stored_crc;
} ckfile;

void ry_checkpoint_meta_clear(ry_checkpoint_meta *meta) {
    if (!meta) return;
    ry_free((char *)meta->model_text);
    ry_free((char *)meta->config);
    meta->model_text = meta->config = NULL;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const ry_checkpoint_entry *)a)->path, ((const ry_checkpoint_entry *)b)->path);
}

static void free_entries(ry_checkpoint_entry *e, int n) {
    for (int i = 0; i < n; i++) ry_free(e[i].path);
    ry_free(e);
}

static void ck_close(ckfile *c) {
    if (c->f >= 0) H5Fclose(c->f);
    c->f = -1;
    free_entries(c->e, c->n);
    c->e = NULL;
    c->n = 0;
    ry_checkpoint_meta_clear(&c->meta);
}

/* ---- listing the datasets ------------------------------------------------ */

/* Describes dataset d at path: float32/float64, rank <= RY_MAX_RANK, and
 * no more data than the file's size (a crafted 145 KB file declaring
 * float32[1000000, 1000] is refused here, before its 4 GB are read; a
 * foreign file whose datasets are compressed below their size is too:
 * relayc's are stored whole). */
static ry_status describe(hid_t d, const char *file, int64_t file_size, const char *path,
                          ry_checkpoint_entry *e, ry_error *err) {
    hid_t t = H5Dget_type(d), space = H5Dget_space(d);
    ry_status st = RY_OK;
    if (t < 0 || space < 0) st = ry_ckpt_h5_error(err, file, "cannot read dataset %s", path);
    size_t size = t < 0 ? 0 : H5Tget_size(t);
    if (!st && (H5Tget_class(t) != H5T_FLOAT || (size != 4 && size != 8)))
        st = ry_error_file(err, file, "dataset %s is not float32 or float64", path);
    int rank = st ? -1 : H5Sget_simple_extent_ndims(space);
    H5S_class_t cls = st ? H5S_NO_CLASS : H5Sget_simple_extent_type(space);
    if (!st && (rank < 0 || rank > RY_MAX_RANK || cls == H5S_NULL))
        st = ry_error_file(err, file, "dataset %s has an unsupported shape (rank %d)", path, rank);
    if (!st) {
        hsize_t dims[RY_MAX_RANK] = {0};
        H5Sget_simple_extent_dims(space, dims, NULL);
        e->dtype = size == 8 ? RY_FLOAT64 : RY_FLOAT32;
        e->ndim = rank;
        for (int i = 0; i < rank; i++) {
            if (dims[i] > (hsize_t)INT64_MAX / 16) st = ry_error_file(err, file, "dataset %s is too large", path);
            e->shape[i] = (int64_t)dims[i];
        }
        /* every dim below 2^59 and at most 8 of them: the product's bound
         * is checked step by step */
        uint64_t bytes = size;
        for (int i = 0; i < rank && !st; i++) {
            if (dims[i] && bytes > (uint64_t)file_size / dims[i]) bytes = UINT64_MAX;
            else bytes *= dims[i];
        }
        if (!st && bytes > (uint64_t)file_size)
            st = ry_error_file(err, file, "damaged checkpoint: dataset %s declares more data than the "
                                          "file's %lld bytes hold", path, (long long)file_size);
    }
    if (t >= 0) H5Tclose(t);
    if (space >= 0) H5Sclose(space);
    return st;
}

/* Name of link i of group g (ry_malloc'd), or NULL. */
static char *link_name(hid_t g, hsize_t i) {
    ssize_t len = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
    if (len < 0) return NULL;
    char *s = ry_malloc((size_t)len + 1);
    if (s && H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, s, (size_t)len + 1,
                                H5P_DEFAULT) < 0) {
        ry_free(s);
        s = NULL;
    }
    return s;
}

typedef struct lister {
    ckfile *c;
    int cap;
    ry_error *err;
} lister;

static ry_status push(lister *l, char *path, const ry_checkpoint_entry *proto) {
    ckfile *c = l->c;
    if (c->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        ry_checkpoint_entry *e = ry_realloc(c->e, (size_t)cap * sizeof *e);
        if (!e) {
            ry_free(path);
            return ry_error_file(l->err, c->path, "out of memory listing datasets");
        }
        c->e = e;
        l->cap = cap;
    }
    c->e[c->n] = *proto;
    c->e[c->n++].path = path;
    return RY_OK;
}

/* Lists the hard links of group gpath: groups are descended into,
 * datasets are pushed once `need` more levels of groups have been passed
 * (/optimizer/<param>/<slot> needs one: a parameter, which may itself be
 * nested, then its slot). Soft or external links, datasets too high up
 * and nesting deeper than any name of ours are errors. */
static ry_status list_group(lister *l, const char *gpath, int need, int depth) {
    ckfile *c = l->c;
    if (depth > 64) return ry_error_file(l->err, c->path, "group %s is nested too deeply", gpath);
    hid_t g = H5Gopen2(c->f, gpath, H5P_DEFAULT);
    if (g < 0) return ry_ckpt_h5_error(l->err, c->path, "cannot open group %s", gpath);
    H5G_info_t gi;
    ry_status st = H5Gget_info(g, &gi) < 0 ? ry_ckpt_h5_error(l->err, c->path, "cannot list %s", gpath) : RY_OK;
    for (hsize_t i = 0; !st && i < gi.nlinks; i++) {
        char *name = link_name(g, i);
        if (!name) {
            st = ry_ckpt_h5_error(l->err, c->path, "cannot list %s", gpath);
            break;
        }
        size_t n = strlen(gpath) + strlen(name) + 2;
        char *path = ry_malloc(n);
        if (!path) {
            ry_free(name);
            st = ry_error_file(l->err, c->path, "out of memory listing datasets");
            break;
        }
        snprintf(path, n, "%s/%s", gpath, name);
        ry_free(name);
        H5L_info_t li;
        hid_t o = -1;
        if (H5Lget_info(c->f, path, &li, H5P_DEFAULT) < 0 || li.type != H5L_TYPE_HARD ||
            (o = H5Oopen(c->f, path, H5P_DEFAULT)) < 0) {
            H5Eclear2(H5E_DEFAULT);
            st = ry_error_file(l->err, c->path, "%s is not a dataset or group of this file", path);
            ry_free(path);
            break;
        }
        H5I_type_t kind = H5Iget_type(o);
        ry_checkpoint_entry e = {0};
        if (kind == H5I_DATASET && need == 0) {
            st = describe(o, c->path, c->size, path, &e, l->err);
            if (!st) {
                st = push(l, path, &e);
                path = NULL;
            }
        } else if (kind == H5I_GROUP) {
            st = list_group(l, path, need > 0 ? need - 1 : 0, depth + 1);
        } else {
            st = ry_error_file(l->err, c->path, "%s should be a group", path);
        }
        H5Oclose(o);
        ry_free(path);
    }
    H5Gclose(g);
    return st;
}

static ry_status list_all(ckfile *c, ry_error *err) {
    lister l = {c, 0, err};
    if (H5Lexists(c->f, "/params", H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ry_error_file(err, c->path, "group /params is missing");
    }
    if (list_group(&l, "/params", 0, 0)) return RY_ERR;
    /* a file written by another tool may have no optimizer state */
    if (H5Lexists(c->f, "/optimizer", H5P_DEFAULT) > 0 && list_group(&l, "/optimizer", 1, 0))
        return RY_ERR;
    H5Eclear2(H5E_DEFAULT);
    if (c->n) qsort(c->e, (size_t)c->n, sizeof *c->e, entry_cmp);
    return RY_OK;
}

/* ---- opening and reading --------------------------------------------------- */

static ry_status read_meta(ckfile *c, hid_t root, ry_error *err) {
    char *format = NULL, *text = NULL, *config = NULL;
    ry_checkpoint_meta *m = &c->meta;
    if (ry_ckpt_attr_read_str(root, c->path, "format", &format, err)) return RY_ERR;
    bool ours = strcmp(format, CKPT_FORMAT) == 0;
    ry_free(format);
    if (!ours) return ry_error_file(err, c->path, "attribute 'format' is not \"%s\"", CKPT_FORMAT);
    if (ry_ckpt_attr_read_i64(root, c->path, "format_version", &c->version, err)) return RY_ERR;
    if (c->version != RY_CHECKPOINT_VERSION)
        return ry_error_file(err, c->path, "format version %lld; this relayc reads version %d",
                             (long long)c->version, RY_CHECKPOINT_VERSION);
    if (ry_ckpt_attr_read_i64(root, c->path, "step", &m->step, err) ||
        ry_ckpt_attr_read_i64(root, c->path, "epoch", &m->epoch, err) ||
        ry_ckpt_attr_read_u64s(root, c->path, "rng_state", m->rng, RY_CHECKPOINT_RNG_MAX,
                               &m->rng_len, err) ||
        ry_ckpt_attr_read_u32(root, c->path, "checksum", &c->stored_crc, err) ||
        ry_ckpt_attr_read_str(root, c->path, "model_text", &text, err))
        return RY_ERR;
    m->model_text = text;
    if (ry_ckpt_attr_read_str(root, c->path, "config", &config, err)) return RY_ERR;
    m->config = config;
    return RY_OK;
}

/* Seal, open, attributes, listing; in the reading child only
 * (checkpoint_child.c). A file without relayc's seal is read only for an
 * import (any). On failure c is closed. */
static ry_status ck_open(ckfile *c, const char *path, bool any, ry_error *err) {
    memset(c, 0, sizeof *c);
    c->path = path;
    c->f = -1;
    if (ry_ckpt_seal_check(path, &c->sealed, &c->size, err)) return RY_ERR;
    if (!c->sealed && !any)
        return ry_error_file(err, path, "not sealed by relayc (another tool wrote it): `relayc "
                                        "checkpoint import %s NEW.h5` checks it and writes a sealed copy",
                             path);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0)
        c->f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (c->f < 0) return ry_ckpt_h5_error(err, path, "cannot open as HDF5");
    hid_t root = H5Gopen2(c->f, "/", H5P_DEFAULT);
    ry_status st = root < 0 ? ry_ckpt_h5_error(err, path, "cannot open group /") : read_meta(c, root, err);
    if (root >= 0) H5Gclose(root);
    if (!st) st = list_all(c, err);
    if (st) ck_close(c);
    return st;
}

/* What c learned, moved into info (c keeps the file, loses the rest). */
static void ck_move_info(ckfile *c, ry_checkpoint_info *info, bool entries) {
    info->version = c->version;
    info->checksum = c->stored_crc;
    info->sealed = c->sealed;
    info->meta = c->meta;
    c->meta.model_text = c->meta.config = NULL;
    if (entries) {
        info->n = c->n;
        info->entries = c->e;
        c->e = NULL;
        c->n = 0;
    }
}

static size_t entry_bytes(const ry_checkpoint_entry *e) {
    size_t n = ry_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] && n > SIZE_MAX / (size_t)e->shape[d]) return SIZE_MAX;
        n *= (size_t)e->shape[d];
    }
    return n;
}

/* A dataset's own "crc32" (files from other tools may lack it) names the
 * dataset that damage hit. */
static ry_status check_data_crc(const ckfile *c, hid_t d, const char *path, uint32_t got,
                                ry_error *err) {
    if (H5Aexists(d, "crc32") <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return RY_OK;
    }
    uint32_t want;
    if (ry_ckpt_attr_read_u32(d, c->path, "crc32", &want, err)) return RY_ERR;
    if (got != want)
        return ry_error_file(err, c->path, "damaged checkpoint: dataset %s has CRC-32 0x%08x, 0x%08x recorded",
                             path, got, want);
    return RY_OK;
}

/* Reads every dataset, into dest[i] when given and a scratch buffer
 * otherwise, and checks the checksum over everything. */
static ry_status ck_read_all(ckfile *c, void *const *dest, ry_error *err) {
    size_t scratch_n = 0;
    for (int i = 0; i < c->n; i++)
        if (!dest || !dest[i]) {
            size_t b = entry_bytes(&c->e[i]);
            if (b == SIZE_MAX) return ry_error_file(err, c->path, "dataset %s is too large", c->e[i].path);
            if (b > scratch_n) scratch_n = b;
        }
    void *scratch = scratch_n ? ry_malloc(scratch_n) : NULL;
    if (scratch_n && !scratch) return ry_error_file(err, c->path, "out of memory reading datasets");
    uint32_t crc = ry_ckpt_crc_u64(0, RY_CHECKPOINT_VERSION);
    ry_status st = RY_OK;
    for (int i = 0; i < c->n && !st; i++) {
        ry_checkpoint_entry *e = &c->e[i];
        void *buf = dest && dest[i] ? dest[i] : scratch;
        size_t esize = ry_dtype_size(e->dtype), bytes = entry_bytes(e);
        hid_t d = H5Dopen2(c->f, e->path, H5P_DEFAULT);
        if (d < 0 || (bytes && H5Dread(d, e->dtype == RY_FLOAT64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT,
                                       H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0))
            st = ry_ckpt_h5_error(err, c->path, "cannot read dataset %s", e->path);
        uint32_t data_crc = st ? 0 : ry_ckpt_crc_elems(0, buf, bytes / esize, esize);
        if (!st) st = check_data_crc(c, d, e->path, data_crc, err);
        if (d >= 0) H5Dclose(d);
        crc = ry_ckpt_crc_entry(crc, e->path, e->dtype, e->ndim, e->shape);
        crc = ry_ckpt_crc_combine(crc, data_crc, bytes);
    }
    ry_free(scratch);
    if (st) return RY_ERR;
    crc = ry_ckpt_crc_meta(crc, &c->meta);
    if (crc != c->stored_crc)
        return ry_error_file(err, c->path,
                             "damaged checkpoint: checksum 0x%08x of its contents, 0x%08x recorded",
                             crc, c->stored_crc);
    return RY_OK;
}

static int find_entry(const ckfile *c, const char *path) {
    ry_checkpoint_entry key = {.path = (char *)path};
    const ry_checkpoint_entry *e = c->n ? bsearch(&key, c->e, (size_t)c->n, sizeof key, entry_cmp) : NULL;
    return e ? (int)(e - c->e) : -1;
}

static const char *describe_shape(ry_dtype dt, int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "%s[", ry_dtype_name(dt));
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Points dest at the fresh set's views for every name in set, checking
 * each dataset exists with the same dtype and shape. */
static ry_status match_set(const ckfile *c, ry_param_set *set, const char *slot, void **dest,
                           ry_error *err) {
    for (int i = 0; i < set->n; i++) {
        const ry_tensor *v = set->views[i];
        char path[1024], want[160], got[160];
        int len = slot ? snprintf(path, sizeof path, "/optimizer/%s/%s", set->names[i], slot)
                       : snprintf(path, sizeof path, "/params/%s", set->names[i]);
        if (len >= (int)sizeof path)
            return ry_error_file(err, c->path, "parameter name '%.64s...' is too long", set->names[i]);
        int k = find_entry(c, path);
        if (k < 0) return ry_error_file(err, c->path, "dataset %s is missing", path);
        const ry_checkpoint_entry *e = &c->e[k];
        bool same = e->dtype == v->dtype && e->ndim == v->ndim;
        for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == v->shape[d];
        if (!same)
            return ry_error_file(err, c->path, "dataset %s is %s, expected %s", path,
                                 describe_shape(e->dtype, e->ndim, e->shape, got, sizeof got),
                                 describe_shape(v->dtype, v->ndim, v->shape, want, sizeof want));
        dest[k] = v->data;
    }
    return RY_OK;
}

/* ---- the public entry points ----------------------------------------------- */

typedef struct fresh {
    ry_param_set *params;
    ry_param_set **slots;
    int nslots;
} fresh;

static void fresh_free(fresh *fr) {
    ry_params_free(fr->params);
    for (int i = 0; i < fr->nslots; i++) ry_params_free(fr->slots[i]);
    ry_free(fr->slots);
}

static ry_status fresh_new(fresh *fr, const ry_param_set *params, const ry_checkpoint_slots *slots) {
    memset(fr, 0, sizeof *fr);
    int n = slots ? slots->n : 0;
    fr->slots = ry_calloc((size_t)(n ? n : 1), sizeof *fr->slots);
    fr->params = ry_params_like(params);
    if (!fr->slots || !fr->params) return RY_ERR;
    for (; fr->nslots < n; fr->nslots++)
        if (!(fr->slots[fr->nslots] = ry_params_like(slots->sets[fr->nslots]))) return RY_ERR;
    return RY_OK;
}

/* Matches the file against what the caller expects and reads it. */
static ry_status load_into(ckfile *c, fresh *fr, const ry_checkpoint_slots *slots, ry_error *err) {
    void **dest = ry_calloc((size_t)(c->n ? c->n : 1), sizeof *dest);
    if (!dest) return ry_error_file(err, c->path, "out of memory");
    ry_status st = match_set(c, fr->params, NULL, dest, err);
    for (int s = 0; s < fr->nslots && !st; s++) st = match_set(c, fr->slots[s], slots->names[s], dest, err);
    /* whatever the caller did not ask for must be optimizer state it skips */
    for (int i = 0; i < c->n && !st; i++)
        if (!dest[i] && (fr->nslots > 0 || strncmp(c->e[i].path, "/params/", 8) == 0))
            st = ry_error_file(err, c->path, "dataset %s is not part of the expected model%s",
                               c->e[i].path, fr->nslots ? " or optimizer" : "");
    if (!st) st = ck_read_all(c, dest, err);
    ry_free(dest);
    return st;
}

/* ---- the jobs the reading child runs ---------------------------------------- */

typedef struct load_job {
    fresh *fr;
    const ry_checkpoint_slots *slots;
    bool any; /* unsealed files too (an import) */
} load_job;

static ry_status run_load(const char *path, void *ctx, ry_checkpoint_info *out, ry_error *err) {
    load_job *j = ctx;
    ckfile c;
    ry_status st = ck_open(&c, path, j->any, err);
    if (!st) {
        st = load_into(&c, j->fr, j->slots, err);
        if (!st) ck_move_info(&c, out, false);
        ck_close(&c);
    }
    return st;
}

static ry_status run_inspect(const char *path, void *ctx, ry_checkpoint_info *out, ry_error *err) {
    ckfile c;
    ry_status st = ck_open(&c, path, *(const bool *)ctx, err);
    if (!st) {
        st = ck_read_all(&c, NULL, err);
        if (!st) ck_move_info(&c, out, true);
        ck_close(&c);
    }
    return st;
}

/* ---- the public entry points (no libhdf5 in this process) ----------------------- */

static ry_status load(const char *path, ry_param_set *params, const ry_checkpoint_slots *slots,
                      ry_checkpoint_meta *meta, bool any, ry_error *err) {
    if (!path) return ry_error_file(err, path, "no path");
    if (!params) return ry_error_file(err, path, "cannot load: no parameter set given");
    for (int s = 0; slots && s < slots->n; s++)
        if (!slots->sets[s] || !ry_ckpt_name_ok(slots->names[s], false))
            return ry_error_file(err, path, "cannot load: bad optimizer slot %d", s);
    fresh fr;
    ry_param_set **sets = NULL;
    if (fresh_new(&fr, params, slots) ||
        !(sets = ry_calloc((size_t)fr.nslots + 1, sizeof *sets))) {
        fresh_free(&fr);
        return ry_error_file(err, path, "cannot load: out of memory");
    }
    sets[0] = fr.params;
    for (int s = 0; s < fr.nslots; s++) sets[s + 1] = fr.slots[s];
    load_job lj = {&fr, slots, any};
    ry_ckpt_job job = {run_load, &lj, fr.nslots + 1, sets};
    ry_checkpoint_info info;
    bool damaged;
    ry_status st = ry_ckpt_read_isolated(path, &job, &info, &damaged, err);
    if (!st) {
        ry_params_copy(params, fr.params);
        for (int s = 0; s < fr.nslots; s++) ry_params_copy(slots->sets[s], fr.slots[s]);
        if (meta) {
            *meta = info.meta; /* the strings move to the caller */
            info.meta.model_text = info.meta.config = NULL;
        }
        ry_ckpt_info_clear(&info);
    }
    ry_free(sets);
    fresh_free(&fr);
    return st;
}

ry_status ry_checkpoint_load(const char *path, ry_param_set *params,
                             const ry_checkpoint_slots *slots, ry_checkpoint_meta *meta,
                             ry_error *err) {
    return load(path, params, slots, meta, false, err);
}

ry_status ry_ckpt_load_any(const char *path, ry_param_set *params, const ry_checkpoint_slots *slots,
                           ry_checkpoint_meta *meta, ry_error *err) {
    return load(path, params, slots, meta, true, err);
}

static ry_status inspect(const char *path, ry_checkpoint_info **out, bool *damaged, bool any,
                         ry_error *err) {
    *damaged = false;
    if (!path) return ry_error_file(err, path, "no path");
    ry_checkpoint_info *info = ry_calloc(1, sizeof *info);
    if (!info) return ry_error_file(err, path, "out of memory");
    ry_ckpt_job job = {run_inspect, &any, 0, NULL};
    if (ry_ckpt_read_isolated(path, &job, info, damaged, err)) {
        ry_free(info);
        return RY_ERR;
    }
    *out = info;
    return RY_OK;
}

ry_status ry_checkpoint_inspect(const char *path, ry_checkpoint_info **out, ry_error *err) {
    bool damaged;
    return inspect(path, out, &damaged, false, err);
}

ry_status ry_ckpt_inspect_any(const char *path, ry_checkpoint_info **out, ry_error *err) {
    bool damaged;
    return inspect(path, out, &damaged, true, err);
}

void ry_checkpoint_info_free(ry_checkpoint_info *info) {
    if (!info) return;
    ry_ckpt_info_clear(info);
    ry_free(info);
}

ry_status ry_ckpt_verify(const char *path, bool *damaged, ry_error *err) {
    ry_checkpoint_info *info = NULL;
    if (inspect(path, &info, damaged, false, err)) return RY_ERR;
    ry_checkpoint_info_free(info);
    return RY_OK;
}

ry_status ry_checkpoint_verify(const char *path, ry_error *err) {
    bool damaged;
    return ry_ckpt_verify(path, &damaged, err);
}

void ry_checkpoint_info_print(FILE *f, const ry_checkpoint_info *info) {
    const ry_checkpoint_meta *m = &info->meta;
    fprintf(f, "format_version %lld%s\nstep %lld\nepoch %lld\nchecksum 0x%08x\nrng_state [",
            (long long)info->version, info->sealed ? " (sealed)" : "", (long long)m->step,
            (long long)m->epoch, info->checksum);
    for (int i = 0; i < m->rng_len; i++)
        fprintf(f, i ? ", %llu" : "%llu", (unsigned long long)m->rng[i]);
    fprintf(f, "]\nmodel_text %zu bytes\nconfig %zu bytes\n", strlen(m->model_text),
            strlen(m->config));
    for (int i = 0; i < info->n; i++) {
        char buf[160];
        const ry_checkpoint_entry *e = &info->entries[i];
        fprintf(f, "%s %s\n", e->path, describe_shape(e->dtype, e->ndim, e->shape, buf, sizeof buf));
    }
}
