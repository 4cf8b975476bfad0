/*
 * checkpoint_seal.c: the seal in a checkpoint's 512-byte HDF5 user block.
 * libhdf5 is not hardened against arbitrary corrupt metadata, so before it
 * parses a file we check, with plain reads, that the file has the length
 * and CRC-32 it was sealed with. HDF5 ignores the user block, and h5py finds
 * the superblock after it, so sealed files stay ordinary HDF5 files.
 *
 * Block layout (little-endian): [0,16) "RELAYC-CKPT-SEAL", [16,24) u64 seal
 * version 1, [24,32) u64 file length, [32,36) u32 CRC-32 of bytes
 * [512, length), [36,40) u32 CRC-32 of bytes [0, 36); the rest zero.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint_impl.h"

static const char seal_magic[16] = {'R', 'E', 'L', 'A', 'Y', 'C', '-', 'C',
                                    'K', 'P', 'T', '-', 'S', 'E', 'A', 'L'};
static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* pread exactly n bytes at off, retrying short reads and EINTR. */
static bool read_at(int fd, void *buf, size_t n, off_t off) {
    unsigned char *b = buf;
    while (n > 0) {
        ssize_t r = pread(fd, b, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        b += r;
        n -= (size_t)r;
        off += r;
    }
    return true;
}

/* CRC-32 of bytes [from, to) of fd. */
static bool crc_range(int fd, off_t from, off_t to, uint32_t *crc) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = ry_malloc(CHUNK);
    if (!buf) return false;
    uint32_t c = 0;
    bool ok = true;
    for (off_t off = from; ok && off < to;) {
        size_t n = (size_t)(to - off < CHUNK ? to - off : CHUNK);
        ok = read_at(fd, buf, n, off);
        if (ok) c = ry_ckpt_crc(c, buf, n);
        off += (off_t)n;
    }
    ry_free(buf);
    *crc = c;
    return ok;
}

ry_status ry_ckpt_seal_write(int fd, const char *path, ry_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < CKPT_USERBLOCK)
        return ry_error_file(err, path, "cannot seal: file is shorter than its user block");
    uint32_t body;
    if (!crc_range(fd, CKPT_USERBLOCK, st.st_size, &body))
        return ry_error_file(err, path, "cannot seal: reading back failed: %s", strerror(errno));
    unsigned char block[CKPT_USERBLOCK] = {0};
    memcpy(block, seal_magic, sizeof seal_magic);
    put_le(block + 16, 1, 8);
    put_le(block + 24, (uint64_t)st.st_size, 8);
    put_le(block + 32, body, 4);
    put_le(block + 36, ry_ckpt_crc(0, block, 36), 4);
    for (size_t done = 0; done < sizeof block;) {
        ssize_t w = pwrite(fd, block + done, sizeof block - done, (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ry_error_file(err, path, "cannot seal: %s", strerror(errno));
        done += (size_t)w;
    }
    return RY_OK;
}

/* The checks on an open file; fd is closed by the caller. */
static ry_status check_fd(int fd, const char *path, bool *sealed, int64_t *size, ry_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0) return ry_error_file(err, path, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode)) return ry_error_file(err, path, "not a regular file");
    *size = (int64_t)st.st_size;
    unsigned char block[CKPT_USERBLOCK];
    size_t have = st.st_size < CKPT_USERBLOCK ? (size_t)st.st_size : CKPT_USERBLOCK;
    if (!read_at(fd, block, have, 0)) return ry_error_file(err, path, "cannot read: %s", strerror(errno));
    if (have < 40 || memcmp(block, seal_magic, sizeof seal_magic) != 0) {
        *sealed = false;
        if (have >= 8 && memcmp(block, hdf5_signature, 8) == 0) return RY_OK;
        if (have == CKPT_USERBLOCK && st.st_size >= CKPT_USERBLOCK + 8) {
            unsigned char sig[8];
            if (read_at(fd, sig, 8, CKPT_USERBLOCK) && memcmp(sig, hdf5_signature, 8) == 0)
                return ry_error_file(err, path, "damaged checkpoint: its seal (bytes 0-511) is corrupt");
        }
        return ry_error_file(err, path, "not an HDF5 file");
    }
    *sealed = true;
    if (get_le(block + 36, 4) != ry_ckpt_crc(0, block, 36) || get_le(block + 16, 8) != 1)
        return ry_error_file(err, path, "damaged checkpoint: its seal (bytes 0-39) is corrupt");
    uint64_t length = get_le(block + 24, 8);
    if ((uint64_t)st.st_size != length)
        return ry_error_file(err, path, "%s checkpoint: the file has %lld bytes, it was sealed with %llu",
                             (uint64_t)st.st_size < length ? "truncated" : "damaged",
                             (long long)st.st_size, (unsigned long long)length);
    uint32_t body;
    if (!crc_range(fd, CKPT_USERBLOCK, st.st_size, &body))
        return ry_error_file(err, path, "cannot read: %s", strerror(errno));
    if (body != (uint32_t)get_le(block + 32, 4))
        return ry_error_file(err, path,
                             "damaged checkpoint: the CRC-32 of its bytes does not match its seal");
    return RY_OK;
}

ry_status ry_ckpt_seal_check(const char *path, bool *sealed, int64_t *size, ry_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ry_error_file(err, path, "cannot open: %s", strerror(errno));
    ry_status st = check_fd(fd, path, sealed, size, err);
    close(fd);
    return st;
}
