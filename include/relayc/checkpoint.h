/*
 * checkpoint.h: HDF5 checkpoints that never lose work. A checkpoint holds a
 * parameter set, optimizer slots, the step and epoch, RNG state, the model's
 * text and the training configuration, is written atomically, is sealed and
 * checksummed, and is checked name by name, shape by shape on load.
 * Training loops and the optimizers' own layouts are left to train/ and
 * optim/: this file only moves ry_param_sets to and from disk.
 *
 * Layout of a file (format_version 1), readable with h5py by name:
 *   /params/<param>            one dataset per parameter, float32 or float64
 *   /optimizer/<param>/<slot>  one dataset per optimizer slot of a parameter
 *                              (parameter name first, then slot: "m", "v")
 *   attributes on /:
 *     format             "relayc-checkpoint"           (string)
 *     format_version     1                             (int64)
 *     step, epoch        training position             (int64)
 *     rng_state          the RNG's words               (uint64[rng_len])
 *     model_text         the model's .relay text       (string, any length:
 *                        the file uses the HDF5 1.8 format, whose dense
 *                        attribute storage has no 64 KiB limit)
 *     config             training configuration, free form (key=value lines)
 *     checksum           CRC-32 of the contents        (uint32, see below)
 * Strings are fixed-length, UTF-8, NUL-padded (h5py reads them as bytes).
 *
 * checksum: zlib's CRC-32 (initial value 0) over, in this order,
 *   u64 format_version;
 *   for every dataset, sorted by its full path with strcmp:
 *     the path and its NUL ("/params/w1\0"), the dtype name and its NUL
 *     ("float32\0"), u64 ndim, u64 each dimension, the data (C order);
 *   i64 step, i64 epoch, u64 rng_len, each rng word,
 *   u64 len(model_text), its bytes, u64 len(config), its bytes;
 * all integers and elements little-endian. Each dataset also carries its
 * own "crc32" attribute, the CRC-32 of its data alone, so that damage is
 * pinned to a dataset (optional on load). tools/check_checkpoint.py
 * recomputes both with h5py.
 *
 * The seal: the first 512 bytes of the file are an HDF5 user block that
 * relayc fills after HDF5 has closed the file: "RELAYC-CKPT-SEAL", then u64
 * file length and u32 CRC-32 of every byte after the block. Loading checks
 * the seal before libhdf5 parses anything, so truncated or damaged files are
 * rejected without trusting HDF5's handling of corrupt metadata. Only
 * sealed files are taken as checkpoints: one another tool wrote (h5py,
 * tools/check_checkpoint.py's layout) is refused until
 * ry_checkpoint_import (`relayc checkpoint import`) has checked it,
 * `checksum` included, and written it again, sealed. Every read runs
 * libhdf5 in a forked child (io/checkpoint_child.c), never in the caller's
 * process.
 *
 * Errors are values: every function fills err with "PATH: error: ..."
 * naming the file and, where there is one, the offending dataset. libhdf5's
 * own error printing is silenced while these functions run and its innermost
 * message is folded into ours.
 */
#ifndef RELAYC_CHECKPOINT_H
#define RELAYC_CHECKPOINT_H

#include "relayc/params.h"

RY_BEGIN_API

#define RY_CHECKPOINT_VERSION 1
#define RY_CHECKPOINT_RNG_MAX 64 /* most uint64 words of RNG state */

/* Everything a checkpoint holds besides tensors. On save the strings are
 * borrowed (NULL means ""). On load they are filled with new strings the
 * caller owns and frees with ry_checkpoint_meta_clear. */
typedef struct ry_checkpoint_meta {
    int64_t step;
    int64_t epoch;
    int rng_len;                          /* 0..RY_CHECKPOINT_RNG_MAX */
    uint64_t rng[RY_CHECKPOINT_RNG_MAX];
    const char *model_text;
    const char *config;
} ry_checkpoint_meta;

/* Frees the strings load put in meta and sets them to NULL. */
void ry_checkpoint_meta_clear(ry_checkpoint_meta *meta);

/* Optimizer state: slot names[i] of every parameter lives in sets[i] (e.g.
 * names {"m", "v"} for Adam), usually with the same layout as the
 * parameters. Borrowed by every function here. n == 0 means none. */
typedef struct ry_checkpoint_slots {
    int n;
    const char *const *names;
    ry_param_set *const *sets;
} ry_checkpoint_slots;

/* Writes params, slots (NULL for none) and meta to path atomically: to
 * PATH.tmp.<pid>.XXXXXX (made exclusively, with random X's, so never through
 * a planted link), flushed, sealed, fsynced, renamed over PATH, then the
 * directory fsynced. On any failure the temporary is removed and a previous
 * file at PATH is untouched. A parameter name may contain '/' (Relay
 * identifiers can): "conv1/w" is stored as /params/conv1/w in nested groups,
 * so "a" and "a/b" cannot both be saved. Components may not be empty, "." or
 * "..", and slot names have no '/'. A slot set's dtype and shapes are its
 * own. Borrows everything. */
ry_status ry_checkpoint_save(const char *path, const ry_param_set *params,
                             const ry_checkpoint_slots *slots, const ry_checkpoint_meta *meta,
                             ry_error *err);

/* Reads path into the caller's sets, which say what is expected: the file's
 * /params must hold exactly params' names with the same shapes and dtype,
 * and, when slots is non-NULL with n > 0, /optimizer exactly the slots'
 * entries. The seal, format version and checksum are verified. meta may be
 * NULL; if not, it is filled (free its strings with ry_checkpoint_meta_clear).
 * On failure nothing the caller passed is modified. */
ry_status ry_checkpoint_load(const char *path, ry_param_set *params,
                             const ry_checkpoint_slots *slots, ry_checkpoint_meta *meta,
                             ry_error *err);

/* Whether names (a model's parameters and carried state) can all be stored
 * in one checkpoint: each a path of non-empty components other than "." and
 * "..", none twice, and none the group of another ("a" beside "a/b"). On
 * error *bad is the index of the first offending name; a trainer checks
 * this before its first step, so a run never learns it at its first save. */
ry_status ry_checkpoint_check_names(int n, const char *const *names, int *bad, ry_error *err);

/* ---- inspection --------------------------------------------------------- */

typedef struct ry_checkpoint_entry {
    char *path;              /* "/params/w1", "/optimizer/w1/m" */
    ry_dtype dtype;          /* float32 or float64 */
    int ndim;
    int64_t shape[RY_MAX_RANK];
} ry_checkpoint_entry;

typedef struct ry_checkpoint_info {
    int64_t version;
    uint32_t checksum;
    bool sealed;                  /* the file carries relayc's seal */
    ry_checkpoint_meta meta;      /* strings owned by the info */
    int n;
    ry_checkpoint_entry *entries; /* sorted by path */
} ry_checkpoint_info;

/* Lists what path holds after verifying it completely (seal, version,
 * checksum). *out is new; free it with ry_checkpoint_info_free. */
ry_status ry_checkpoint_inspect(const char *path, ry_checkpoint_info **out, ry_error *err);
void ry_checkpoint_info_free(ry_checkpoint_info *info); /* NULL is fine */
/* One line per attribute and per dataset ("/params/w1 float32[3, 4]"). */
void ry_checkpoint_info_print(FILE *f, const ry_checkpoint_info *info);
/* ry_checkpoint_inspect without the listing: RY_OK iff path is intact. */
ry_status ry_checkpoint_verify(const char *path, ry_error *err);

/* Reads in, a checkpoint in this layout that may lack the seal (another
 * tool wrote it), verifies it as a load does (format, version, checksum
 * and each dataset's crc32), and writes it to out with
 * ry_checkpoint_save, sealed. Every /params dataset must share one dtype,
 * as must each optimizer slot's. */
ry_status ry_checkpoint_import(const char *in, const char *out, ry_error *err);

/* ---- a directory of checkpoints ------------------------------------------
 * Files are named ckpt-<step>.h5 (step in decimal, no padding). */

/* Saves DIR/ckpt-<meta->step>.h5 atomically, then removes the oldest
 * ckpt-*.h5 (by step) so that at most keep remain (keep >= 1), and stale
 * temporaries (ckpt-*.h5.tmp.<pid>.*) of processes that no longer run. If
 * path_out is non-NULL the new file's path is written there; a path that
 * does not fit in n bytes is an error (before anything is written).
 * Borrows everything. */
ry_status ry_checkpoint_save_dir(const char *dir, int keep, const ry_param_set *params,
                                 const ry_checkpoint_slots *slots, const ry_checkpoint_meta *meta,
                                 char *path_out, size_t n, ry_error *err);

/* Finds the ckpt-*.h5 in dir with the highest step that verifies, skipping
 * damaged ones with a warning on stderr and renaming each to
 * ckpt-*.h5.corrupt (kept for a post-mortem, no longer counted or warned
 * about). *found is false (and RY_OK is
 * returned) when there is none; path gets the file's path (an error if it
 * does not fit in n bytes). A directory that cannot be read is an error. */
ry_status ry_checkpoint_latest(const char *dir, char *path, size_t n, bool *found,
                               ry_error *err);

RY_END_API

#endif
