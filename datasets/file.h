/*
 * file.h: private to datasets/: reading a whole file into memory and
 * inflating a gzip stream, with errors naming the file and byte offset.
 */
#ifndef RELAYC_DATASETS_FILE_H
#define RELAYC_DATASETS_FILE_H

#include "relayc/base.h"

/* The whole of path in a new buffer (ry_free), NUL-terminated one past len. */
ry_status ry_ds_read_file(const char *path, uint8_t **buf, size_t *len, ry_error *err);
/* Whether buf starts with the gzip magic bytes 1f 8b. */
bool ry_ds_is_gzip(const uint8_t *buf, size_t len);
/* Inflates one or more concatenated gzip members into a new buffer (ry_free),
 * stopping once max bytes are out (SIZE_MAX: no limit), so a small file
 * that inflates to gigabytes costs only what the caller expects (a reader
 * that knows the size asks for one byte more, to see that there is more).
 * Errors name `name` and the offset in the compressed bytes. */
ry_status ry_ds_gunzip(const char *name, const uint8_t *buf, size_t len, size_t max,
                       uint8_t **out, size_t *outlen, ry_error *err);

#endif
