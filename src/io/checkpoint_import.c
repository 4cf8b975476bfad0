/*
 * checkpoint_import.c: a checkpoint another tool wrote, taken in. Only
 * sealed files are checkpoints (checkpoint.h); an import reads a file of
 * the same layout without the seal (h5py's, say), in the reading child as
 * every read is, checks it as a load would (format, version, checksum),
 * and writes it again through ry_checkpoint_save, which seals it. The
 * sets are shaped from the file's own listing: /params/<p> into one set,
 * /optimizer/<p>/<slot> into one set per slot.
 */
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint_impl.h"

/* One set being gathered from the listing: its entries' names, ranks and
 * shapes (borrowed from the listing). */
typedef struct gather {
    char *slot; /* NULL: /params */
    ry_dtype dtype;
    int n, cap;
    char **names;
    int *ndims;
    const int64_t **shapes;
} gather;

static void gather_free(gather *g) {
    for (int i = 0; i < g->n; i++) ry_free(g->names[i]);
    ry_free(g->names);
    ry_free(g->ndims);
    ry_free(g->shapes);
    ry_free(g->slot);
}

static bool gather_push(gather *g, const char *name, size_t len, const ry_checkpoint_entry *e) {
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        char **names = ry_realloc(g->names, (size_t)cap * sizeof *names);
        if (names) g->names = names;
        int *ndims = names ? ry_realloc(g->ndims, (size_t)cap * sizeof *ndims) : NULL;
        if (ndims) g->ndims = ndims;
        const int64_t **shapes = ndims ? ry_realloc(g->shapes, (size_t)cap * sizeof *shapes) : NULL;
        if (!shapes) return false;
        g->shapes = shapes;
        g->cap = cap;
    }
    char *copy = ry_malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, name, len);
    copy[len] = '\0';
    g->names[g->n] = copy;
    g->ndims[g->n] = e->ndim;
    g->shapes[g->n] = e->shape;
    g->n++;
    return true;
}

/* The set for slot (NULL: /params) among gs[0..*n), added when new. */
static gather *gather_for(gather **gs, int *n, int *cap, const char *slot, size_t len) {
    for (int i = 0; i < *n; i++) {
        const char *s = (*gs)[i].slot;
        if ((!s && !slot) || (s && slot && strlen(s) == len && strncmp(s, slot, len) == 0))
            return &(*gs)[i];
    }
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        gather *g = ry_realloc(*gs, (size_t)c * sizeof *g);
        if (!g) return NULL;
        *gs = g;
        *cap = c;
    }
    gather *g = &(*gs)[*n];
    memset(g, 0, sizeof *g);
    if (slot) {
        g->slot = ry_malloc(len + 1);
        if (!g->slot) return NULL;
        memcpy(g->slot, slot, len);
        g->slot[len] = '\0';
    }
    (*n)++;
    return g;
}

/* Sorts the listing into sets: gs[0] is /params. */
static ry_status gather_all(const char *in, const ry_checkpoint_info *info, gather **out, int *count,
                            ry_error *err) {
    gather *gs = NULL;
    int n = 0, cap = 0;
    ry_status st = gather_for(&gs, &n, &cap, NULL, 0) ? RY_OK : RY_ERR;
    for (int i = 0; i < info->n && !st; i++) {
        const ry_checkpoint_entry *e = &info->entries[i];
        const char *name, *slot = NULL;
        size_t len, slot_len = 0;
        if (strncmp(e->path, "/params/", 8) == 0) {
            name = e->path + 8;
            len = strlen(name);
        } else { /* /optimizer/<param>/<slot>: the listing has no other */
            name = e->path + 11;
            const char *last = strrchr(name, '/');
            len = (size_t)(last - name);
            slot = last + 1;
            slot_len = strlen(slot);
        }
        gather *g = gather_for(&gs, &n, &cap, slot, slot_len);
        if (!g) {
            st = RY_ERR;
            break;
        }
        if (g->n && g->dtype != e->dtype) {
            *count = n;
            *out = gs;
            return ry_error_file(err, in, "cannot import: %s mixes float32 and float64 datasets",
                                 slot ? "an optimizer slot" : "/params");
        }
        g->dtype = e->dtype;
        if (!gather_push(g, name, len, e)) st = RY_ERR;
    }
    *out = gs;
    *count = n;
    return st ? ry_error_file(err, in, "cannot import: out of memory") : RY_OK;
}

ry_status ry_checkpoint_import(const char *in, const char *out, ry_error *err) {
    if (!in || !out) return ry_error_file(err, in, "cannot import: no path");
    ry_checkpoint_info *info = NULL;
    if (ry_ckpt_inspect_any(in, &info, err)) return RY_ERR;
    gather *gs = NULL;
    int ng = 0;
    ry_status st = gather_all(in, info, &gs, &ng, err);
    ry_param_set **sets = st ? NULL : ry_calloc((size_t)ng, sizeof *sets);
    const char **slot_names = st ? NULL : ry_calloc((size_t)ng, sizeof *slot_names);
    if (!st && (!sets || !slot_names)) st = ry_error_file(err, in, "cannot import: out of memory");
    for (int i = 0; i < ng && !st; i++) {
        sets[i] = ry_params_new(gs[i].dtype, gs[i].n, (const char *const *)gs[i].names, gs[i].ndims,
                                gs[i].shapes);
        if (!sets[i]) st = ry_error_file(err, in, "cannot import: out of memory");
        slot_names[i] = gs[i].slot;
    }
    ry_checkpoint_meta meta;
    memset(&meta, 0, sizeof meta);
    if (!st) {
        ry_checkpoint_slots slots = {ng - 1, slot_names + 1, sets + 1};
        st = ry_ckpt_load_any(in, sets[0], &slots, &meta, err);
        if (!st) st = ry_checkpoint_save(out, sets[0], &slots, &meta, err);
        ry_checkpoint_meta_clear(&meta);
    }
    for (int i = 0; sets && i < ng; i++) ry_params_free(sets[i]);
    ry_free(sets);
    ry_free(slot_names);
    for (int i = 0; i < ng; i++) gather_free(&gs[i]);
    ry_free(gs);
    ry_checkpoint_info_free(info);
    return st;
}
