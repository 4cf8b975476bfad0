/*
 * checkpoint_impl.h: what the checkpoint files share privately: the CRC-32
 * stream that defines the contents checksum, the seal in the HDF5 user
 * block, silencing libhdf5 and turning its error stack into our messages,
 * and typed attribute I/O. Not part of the public API (tests include it to
 * reach the seal).
 */
#ifndef RELAYC_CHECKPOINT_IMPL_H
#define RELAYC_CHECKPOINT_IMPL_H

#include <hdf5.h>

#include "relayc/checkpoint.h"

#define CKPT_FORMAT "relayc-checkpoint"
#define CKPT_USERBLOCK 512 /* bytes before the HDF5 superblock */

/* ---- CRC-32 (zlib's) over the canonical little-endian stream ---------- */
uint32_t ry_ckpt_crc(uint32_t crc, const void *p, size_t n);
uint32_t ry_ckpt_crc_u64(uint32_t crc, uint64_t v);
/* Elements of esize bytes, hashed as little-endian whatever the host. */
uint32_t ry_ckpt_crc_elems(uint32_t crc, const void *p, size_t count, size_t esize);
uint32_t ry_ckpt_crc_string(uint32_t crc, const char *s); /* u64 length, bytes */
/* The CRC of A followed by B, from crc(A), crc(B) and B's length. */
uint32_t ry_ckpt_crc_combine(uint32_t a, uint32_t b, uint64_t len_b);
/* The stream CRC of a dataset's data alone (elements little-endian), kept
 * as its "crc32" attribute so damage can be pinned to one dataset. */
uint32_t ry_ckpt_crc_data(const ry_tensor *t);
/* The dataset header part of the stream: path\0 dtype\0 ndim dims. */
uint32_t ry_ckpt_crc_entry(uint32_t crc, const char *path, ry_dtype dtype, int ndim,
                           const int64_t *shape);
/* The trailing part: step, epoch, rng, model text, config. */
uint32_t ry_ckpt_crc_meta(uint32_t crc, const ry_checkpoint_meta *meta);

/* ---- the seal ----------------------------------------------------------- */
/* Fills the user block of the closed file open as fd (read-write) with the
 * seal over everything after it. */
ry_status ry_ckpt_seal_write(int fd, const char *path, ry_error *err);
/* Checks path before HDF5 sees it: a regular file with a valid seal, or no
 * seal and the HDF5 signature at offset 0 (*sealed says which; *size gets
 * its length). Not-HDF5, truncated and damaged files are errors. */
ry_status ry_ckpt_seal_check(const char *path, bool *sealed, int64_t *size, ry_error *err);

/* ---- libhdf5 without its printing ---------------------------------------- */
typedef struct ry_ckpt_quiet {
    H5E_auto2_t func;
    void *data;
} ry_ckpt_quiet;
void ry_ckpt_quiet_begin(ry_ckpt_quiet *q); /* silence HDF5's stack printing */
void ry_ckpt_quiet_end(ry_ckpt_quiet *q);   /* restore what it was */
/* err := "PATH: error: <fmt>: <innermost HDF5 message>"; clears the stack. */
ry_status ry_ckpt_h5_error(ry_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* HDF5's innermost message made one line: a failed system call ("file
 * write failed: time = ...\n, ..., errno = 28, error message = 'No space
 * left on device', ...") becomes "file write failed: No space left on
 * device (errno 28)"; other newlines become spaces. In place (msg holds
 * at least 256 bytes). */
void ry_ckpt_h5_tidy(char *msg);

/* ---- attributes on an object ------------------------------------------- */
ry_status ry_ckpt_attr_write_i64(hid_t obj, const char *name, int64_t v);
ry_status ry_ckpt_attr_write_u32(hid_t obj, const char *name, uint32_t v);
ry_status ry_ckpt_attr_write_u64s(hid_t obj, const char *name, const uint64_t *v, int n);
ry_status ry_ckpt_attr_write_str(hid_t obj, const char *name, const char *s);
/* Readers fill err naming path and the attribute. */
ry_status ry_ckpt_attr_read_i64(hid_t obj, const char *path, const char *name, int64_t *v,
                                ry_error *err);
ry_status ry_ckpt_attr_read_u32(hid_t obj, const char *path, const char *name, uint32_t *v,
                                ry_error *err);
/* At most max words; *n gets how many. */
ry_status ry_ckpt_attr_read_u64s(hid_t obj, const char *path, const char *name, uint64_t *v,
                                 int max, int *n, ry_error *err);
/* *s is new (ry_malloc), NUL-terminated. */
ry_status ry_ckpt_attr_read_str(hid_t obj, const char *path, const char *name, char **s,
                                ry_error *err);

/* Whether name can be a path below /params or /optimizer: non-empty
 * components separated by '/' (only when slashes is true), none "." or "..". */
bool ry_ckpt_name_ok(const char *name, bool slashes);

/* ---- reading in a forked child (checkpoint_child.c) ---------------------
 * A job is the libhdf5 part of a read, run only in a forked child: run
 * fills *out (what ry_checkpoint_inspect returns; strings and entries
 * ry_malloc'd) and the slabs of sets (host sets), whose bytes come back
 * through a shared mapping. */
typedef struct ry_ckpt_job {
    ry_status (*run)(const char *path, void *ctx, ry_checkpoint_info *out, ry_error *err);
    void *ctx;
    int nsets;
    ry_param_set *const *sets;
} ry_ckpt_job;

/* Runs job in a forked child under a time limit and brings back *out and
 * the sets' data (filled only on success). *damaged says whether a failure
 * is the file's (what the child found, a crash, a timeout) rather than
 * this process's (no memory, fork or pipe failing): only a damaged file is
 * put aside by ry_checkpoint_latest. */
ry_status ry_ckpt_read_isolated(const char *path, ry_ckpt_job *job, ry_checkpoint_info *out,
                                bool *damaged, ry_error *err);
/* Frees what a read put in info (not info itself). */
void ry_ckpt_info_clear(ry_checkpoint_info *info);
/* The time the child gets: this many seconds (default 30), plus one per 64
 * MiB of file. The fuzzer shortens it, so an input that makes libhdf5 loop
 * costs seconds, not half a minute. */
void ry_ckpt_set_read_seconds(int seconds);
/* ry_checkpoint_inspect and ry_checkpoint_load for a file another tool
 * wrote, without relayc's seal (its checksum still checked): what
 * ry_checkpoint_import reads; the public ones refuse such a file. */
ry_status ry_ckpt_inspect_any(const char *path, ry_checkpoint_info **out, ry_error *err);
ry_status ry_ckpt_load_any(const char *path, ry_param_set *params, const ry_checkpoint_slots *slots,
                           ry_checkpoint_meta *meta, ry_error *err);
/* ry_checkpoint_verify, with *damaged as above. */
ry_status ry_ckpt_verify(const char *path, bool *damaged, ry_error *err);

#endif
