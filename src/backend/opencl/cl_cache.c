/*
 * cl_cache.c (opencl): generated kernels, built once. A program's source
 * is hashed (FNV-1a, 64 bits) with the device's name and driver version;
 * the built program is kept in memory for the process and its binary on
 * disk in RELAYC_CACHE_DIR (default $XDG_CACHE_HOME/relayc, else
 * ~/.cache/relayc), so a second run builds nothing (counted:
 * kernels_built, kernels_loaded). A cache file holds a header (magic, the
 * key, the binary's length and hash) before the binary; one that does not
 * match is ignored and rebuilt over. Files are written to a temporary and
 * renamed, so a crash or a second process never leaves half a file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/kernel_gen.h"
#include "backend/opencl/cl_impl.h"


static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}
#define FNV0 14695981039346656037ull

typedef struct built {
    uint64_t key;
    char *source;
    cl_program prog;
    struct kern {
        char *name;
        cl_kernel k;
        struct kern *next;
    } *kernels;
    struct built *next;
} built;

static built *programs;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

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

static void cache_path(char *buf, size_t n, const char *dir, uint64_t key) {
    snprintf(buf, n, "%s/opencl-%016llx.bin", dir, (unsigned long long)key);
}

/* The program from the disk cache, or NULL. */
static cl_program load(uint64_t key) {
    char dbuf[4096], path[4200];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    if (!dir) return NULL;
    cache_path(path, sizeof path, dir, key);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    file_head h;
    unsigned char *bin = NULL;
    cl_program p = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && fread(&h, sizeof h, 1, f) == 1 &&
        memcmp(h.magic, "RYCLBIN1", 8) == 0 && h.key == key &&
        (int64_t)h.len == (int64_t)st.st_size - (int64_t)sizeof h && h.len > 0 &&
        (bin = malloc(h.len)) && fread(bin, 1, h.len, f) == h.len && fnv(FNV0, bin, h.len) == h.hash) {
        size_t len = h.len;
        const unsigned char *b = bin;
        cl_int rc, brc;
        p = clCreateProgramWithBinary(ry_cl.ctx, 1, &ry_cl.device, &len, &b, &brc, &rc);
        if (rc != CL_SUCCESS || brc != CL_SUCCESS) p = NULL;
        else if (clBuildProgram(p, 1, &ry_cl.device, "", NULL, NULL) != CL_SUCCESS) {
            clReleaseProgram(p);
            p = NULL;
        }
    }
    free(bin);
    fclose(f);
    return p;
}

static void store(uint64_t key, cl_program p) {
    char dbuf[4096], path[4200], tmp[4300];
    const char *dir = cache_dir(dbuf, sizeof dbuf);
    size_t len = 0;
    if (!dir || clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS ||
        len == 0)
        return;
    unsigned char *bin = malloc(len);
    if (!bin) return;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
        make_dirs(dir);
        cache_path(path, sizeof path, dir, key);
        file_head h = {"RYCLBIN1", key, len, fnv(FNV0, bin, len)};
        int fd;
        ry_error e = {0};
        if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, &e) == RY_OK) {
            FILE *f = fdopen(fd, "wb");
            bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(bin, 1, len, f) == len;
            if (f) ok = fclose(f) == 0 && ok;
            else close(fd);
            if (!ok || rename(tmp, path) != 0) unlink(tmp);
        }
    }
    free(bin);
}

static cl_program build(const char *source, uint64_t key, ry_span span, ry_error *err) {
    cl_program p = load(key);
    if (p) {
        __atomic_fetch_add(&ry_cl.count.kernels_loaded, 1, __ATOMIC_RELAXED);
        return p;
    }
    cl_int rc;
    size_t len = strlen(source);
    p = clCreateProgramWithSource(ry_cl.ctx, 1, &source, &len, &rc);
    if (rc != CL_SUCCESS) {
        ry_cl_fail(err, span, "clCreateProgramWithSource", rc);
        return NULL;
    }
    rc = clBuildProgram(p, 1, &ry_cl.device, "-cl-std=CL1.2", NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[2048] = "";
        clGetProgramBuildInfo(p, ry_cl.device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        ry_error_at(err, span, "opencl:%d (%s): a generated kernel does not build: %s (%d)\n%s",
                    ry_cl.index, ry_cl.name, ry_cl_errname(rc), (int)rc, log);
        clReleaseProgram(p);
        return NULL;
    }
    __atomic_fetch_add(&ry_cl.count.kernels_built, 1, __ATOMIC_RELAXED);
    store(key, p);
    return p;
}

cl_kernel ry_cl_kernel(const char *source, const char *name, ry_span span, ry_error *err) {
    uint64_t key = fnv(FNV0, source, strlen(source));
    key = fnv(key, ry_cl.name, strlen(ry_cl.name));
    key = fnv(key, ry_cl.version, strlen(ry_cl.version));
    pthread_mutex_lock(&cache_lock);
    built *b = programs;
    while (b && !(b->key == key && strcmp(b->source, source) == 0)) b = b->next;
    if (!b) {
        cl_program p = build(source, key, span, err);
        if (!p || !(b = calloc(1, sizeof *b)) || !(b->source = strdup(source))) {
            if (p) {
                clReleaseProgram(p);
                ry_error_at(err, span, "out of memory");
            }
            free(b);
            pthread_mutex_unlock(&cache_lock);
            return NULL;
        }
        b->key = key;
        b->prog = p;
        b->next = programs;
        programs = b;
    }
    struct kern *k = b->kernels;
    while (k && strcmp(k->name, name) != 0) k = k->next;
    if (!k) {
        cl_int rc;
        cl_kernel ck = clCreateKernel(b->prog, name, &rc);
        if (rc != CL_SUCCESS || !(k = calloc(1, sizeof *k)) || !(k->name = strdup(name))) {
            if (rc == CL_SUCCESS) clReleaseKernel(ck);
            free(k);
            pthread_mutex_unlock(&cache_lock);
            ry_cl_fail(err, span, "clCreateKernel", rc);
            return NULL;
        }
        k->k = ck;
        k->next = b->kernels;
        b->kernels = k;
    }
    pthread_mutex_unlock(&cache_lock);
    return k->k;
}
