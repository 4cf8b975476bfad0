/*
 * kernel_cache.c: the on-disk kernel cache of the device targets
 * (kernel_cache.h); what is cached and how it is loaded is the device's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/kernel_cache.h"
#include "relayc/base.h"

uint64_t ry_kcache_hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

uint64_t ry_kcache_hash_str(uint64_t h, const char *s) { return ry_kcache_hash(h, s, strlen(s)); }

static const char *cache_dir(char *buf, size_t n) {
    const char *d = getenv("RELAYC_CACHE_DIR");
    if (d && *d) return d;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x) snprintf(buf, n, "%s/relayc", x);
    else if ((x = getenv("HOME")) && *x) snprintf(buf, n, "%s/.cache/relayc", x);
    else return NULL;
    return buf;
}

/* mkdir -p of dir (best effort: without a cache directory nothing is kept) */
static void make_dirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

typedef struct file_head {
    char magic[8];
    uint64_t key, len, hash;
} file_head;

static const char MAGIC[8] = "RYKERN01";

static bool cache_path(char *buf, size_t n, const char *tag, uint64_t key) {
    char dbuf[4096];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    if (!dir) return false;
    snprintf(buf, n, "%s/%s-%016llx.bin", dir, tag, (unsigned long long)key);
    return true;
}

void *ry_kcache_load(const char *tag, uint64_t key, size_t *len) {
    char path[4200];
    if (!cache_path(path, sizeof path, tag, key)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    file_head h;
    unsigned char *bin = NULL;
    struct stat st;
    bool ok = fstat(fileno(f), &st) == 0 && fread(&h, sizeof h, 1, f) == 1 &&
              memcmp(h.magic, MAGIC, 8) == 0 && h.key == key &&
              (int64_t)h.len == (int64_t)st.st_size - (int64_t)sizeof h && h.len > 0 &&
              (bin = malloc(h.len)) && fread(bin, 1, h.len, f) == h.len &&
              ry_kcache_hash(RY_KCACHE_SEED, bin, h.len) == h.hash;
    fclose(f);
    if (!ok) {
        free(bin);
        return NULL;
    }
    *len = h.len;
    return bin;
}

void ry_kcache_store(const char *tag, uint64_t key, const void *bytes, size_t len) {
    char dbuf[4096], path[4200], tmp[4300];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    if (!dir || len == 0 || !cache_path(path, sizeof path, tag, key)) return;
    make_dirs(dir);
    file_head h = {{0}, key, len, ry_kcache_hash(RY_KCACHE_SEED, bytes, len)};
    memcpy(h.magic, MAGIC, 8);
    int fd;
    ry_error e = {0};
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, &e) != RY_OK) return;
    FILE *f = fdopen(fd, "wb");
    bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(bytes, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    else close(fd);
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}
