/*
 * checkpoint_child.c: every libhdf5 read of a checkpoint happens in a
 * forked child, never in this process. libhdf5 1.10 is not hardened
 * against crafted metadata (fuzzing found wild reads in H5HG_read, a 15 KB
 * file in tests/checkpoint/crash_h5hg.h5, and in H5Aread and H5Fopen,
 * endless loops and 16 GiB requests, in files anyone can seal: the seal is
 * a CRC, not a signature), nor against its own allocation failures (it
 * crashes in most of them, tests/test_oom_libc.c). So the child does the
 * whole read, and the parent only ever sees plain data it checks:
 *
 *   - the tensors' bytes, through a shared anonymous mapping the parent
 *     sized from the sets it expects, before forking (so the child cannot
 *     make it any larger);
 *   - everything else (format version, checksum, meta, the listing),
 *     through a pipe, as a length-prefixed message whose length is bounded
 *     by the file's size and whose every field is bounds-checked again;
 *   - an error, as a ry_error.
 *
 * The parent waits with a deadline and kills a child that passes it, so a
 * looping libhdf5 cannot hang relayc; a child that dies (a signal, or an
 * exit from inside libhdf5) is reported naming the signal. In this
 * process libhdf5 is never called for a load, so it leaks nothing here and
 * prints nothing at exit.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/checkpoint_impl.h"
#include "tensor/alloc_failures.h"

static int base_seconds = 30;

void ry_ckpt_set_read_seconds(int seconds) { base_seconds = seconds > 0 ? seconds : 30; }

/* The child's limit: the base, and a second for every 64 MiB of file (a
 * big checkpoint on a slow disk is not a hostile one). */
static int limit_seconds(int64_t file_size) { return base_seconds + (int)(file_size >> 26); }

#if defined(__SANITIZE_ADDRESS__)
#define CHILD_LIMIT_AS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHILD_LIMIT_AS 0
#endif
#endif
#ifndef CHILD_LIMIT_AS
#define CHILD_LIMIT_AS 1
#endif

/* ---- the message --------------------------------------------------------- */

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = ry_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u64(wbuf *b, uint64_t v) { put(b, &v, sizeof v); }

static void put_str(wbuf *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    put_u64(b, n);
    put(b, s ? s : "", n);
}

/* version, checksum, sealed, step, epoch, rng_len, rng words, model_text,
 * config, n, then per entry: path, dtype, ndim, dims. Host byte order: the
 * two ends are one program on one machine. */
static void put_read(wbuf *b, const ry_checkpoint_info *r) {
    put_u64(b, (uint64_t)r->version);
    put_u64(b, r->checksum);
    put_u64(b, r->sealed);
    put_u64(b, (uint64_t)r->meta.step);
    put_u64(b, (uint64_t)r->meta.epoch);
    put_u64(b, (uint64_t)r->meta.rng_len);
    put(b, r->meta.rng, (size_t)r->meta.rng_len * sizeof *r->meta.rng);
    put_str(b, r->meta.model_text);
    put_str(b, r->meta.config);
    put_u64(b, (uint64_t)r->n);
    for (int i = 0; i < r->n; i++) {
        const ry_checkpoint_entry *e = &r->entries[i];
        put_str(b, e->path);
        put_u64(b, (uint64_t)e->dtype);
        put_u64(b, (uint64_t)e->ndim);
        put(b, e->shape, (size_t)e->ndim * sizeof *e->shape);
    }
}

typedef struct rbuf {
    const unsigned char *p;
    size_t n, at;
    bool bad;
} rbuf;

static const void *get(rbuf *b, size_t n) {
    if (b->bad || n > b->n - b->at) {
        b->bad = true;
        return NULL;
    }
    const void *p = b->p + b->at;
    b->at += n;
    return p;
}

static uint64_t get_u64(rbuf *b) {
    uint64_t v = 0;
    const void *p = get(b, sizeof v);
    if (p) memcpy(&v, p, sizeof v);
    return v;
}

/* A new NUL-terminated copy, or NULL (bad message or out of memory). */
static char *get_str(rbuf *b, bool *oom) {
    uint64_t n = get_u64(b);
    const char *s = n <= b->n - b->at ? get(b, (size_t)n) : NULL;
    if (!s) {
        b->bad = true;
        return NULL;
    }
    char *c = ry_malloc((size_t)n + 1);
    if (!c) {
        *oom = true;
        return NULL;
    }
    memcpy(c, s, (size_t)n);
    c[n] = '\0';
    return c;
}

void ry_ckpt_info_clear(ry_checkpoint_info *r) {
    ry_checkpoint_meta_clear(&r->meta);
    for (int i = 0; i < r->n; i++) ry_free(r->entries[i].path);
    ry_free(r->entries);
    r->entries = NULL;
    r->n = 0;
}

/* Parses the child's message into r, trusting none of it. */
static ry_status get_read(rbuf *b, ry_checkpoint_info *r, const char *path, ry_error *err) {
    memset(r, 0, sizeof *r);
    bool oom = false;
    r->version = (int64_t)get_u64(b);
    r->checksum = (uint32_t)get_u64(b);
    r->sealed = get_u64(b) != 0;
    r->meta.step = (int64_t)get_u64(b);
    r->meta.epoch = (int64_t)get_u64(b);
    uint64_t rng_len = get_u64(b);
    if (rng_len > RY_CHECKPOINT_RNG_MAX) b->bad = true;
    const void *rng = b->bad ? NULL : get(b, (size_t)rng_len * sizeof *r->meta.rng);
    if (rng) {
        r->meta.rng_len = (int)rng_len;
        memcpy(r->meta.rng, rng, (size_t)rng_len * sizeof *r->meta.rng);
    }
    if (!b->bad) r->meta.model_text = get_str(b, &oom);
    if (!b->bad && !oom) r->meta.config = get_str(b, &oom);
    uint64_t n = b->bad || oom ? 0 : get_u64(b);
    /* an entry takes at least 24 bytes of message */
    if (n > (b->n - b->at) / 24) b->bad = true;
    if (!b->bad && !oom && n) {
        r->entries = ry_calloc((size_t)n, sizeof *r->entries);
        oom = !r->entries;
    }
    for (uint64_t i = 0; i < n && !b->bad && !oom; i++) {
        ry_checkpoint_entry *e = &r->entries[i];
        e->path = get_str(b, &oom);
        r->n = (int)i + 1;
        uint64_t dtype = get_u64(b), ndim = get_u64(b);
        if ((dtype != RY_FLOAT32 && dtype != RY_FLOAT64) || ndim > RY_MAX_RANK) b->bad = true;
        const void *dims = b->bad ? NULL : get(b, (size_t)ndim * sizeof *e->shape);
        if (!dims) break;
        e->dtype = (ry_dtype)dtype;
        e->ndim = (int)ndim;
        memcpy(e->shape, dims, (size_t)ndim * sizeof *e->shape);
        for (int d = 0; d < e->ndim; d++)
            if (e->shape[d] < 0) b->bad = true;
    }
    if (!b->bad && !oom && b->at != b->n) b->bad = true;
    if (!b->bad && !oom) return RY_OK;
    ry_ckpt_info_clear(r);
    return oom ? ry_error_file(err, path, "cannot load: out of memory")
               : ry_error_file(err, path, "cannot load: the reading child sent a malformed reply");
}

/* ---- the child --------------------------------------------------------------- */

static bool write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

/* Runs job, copies the sets' slabs into map, and says how it went: 'k',
 * the length, the message; or 'e' and the error; or 'm' and the error
 * where one of relayc's own allocations failed on the way (the memory
 * the reader takes is sized from the model and checked against the file
 * first, so that is this machine short of memory, not the file's fault). Ends with _exit: no
 * atexit handlers (libhdf5's may hang, the parent's are not ours to run). */
static void child_main(const char *path, ry_ckpt_job *job, unsigned char *map, int fd) {
    /* the program's own handlers (a test framework's, a host's) must not
     * catch the crash this child is for: it dies of it */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM, SIGPIPE};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    if (CHILD_LIMIT_AS) { /* what the file may make libhdf5 ask for, beyond what we hold */
        struct rlimit rl;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY) {
            rl.rlim_cur = (rlim_t)64 << 30;
            setrlimit(RLIMIT_AS, &rl);
        }
    }
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_checkpoint_info r;
    memset(&r, 0, sizeof r);
    ry_ckpt_quiet q;
    ry_ckpt_quiet_begin(&q);
    long failed = ry_alloc_failures();
    ry_status st = job->run(path, job->ctx, &r, &err);
    wbuf b = {0};
    if (!st) {
        size_t off = 0;
        for (int i = 0; i < job->nsets; i++) {
            size_t bytes = ry_tensor_nbytes(job->sets[i]->slab);
            if (bytes) memcpy(map + off, job->sets[i]->slab->data, bytes);
            off += bytes;
        }
        put_read(&b, &r);
        if (b.oom) st = ry_error_file(&err, path, "cannot load: out of memory");
    }
    uint64_t len = b.n;
    const char *tag = ry_alloc_failures() != failed ? "m" : "e";
    bool ok = st ? write_all(fd, tag, 1) && write_all(fd, &err, sizeof err)
                 : write_all(fd, "k", 1) && write_all(fd, &len, sizeof len) && (!b.n || write_all(fd, b.p, b.n));
    _exit(ok ? 0 : 1);
}

/* ---- the parent ---------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Reads exactly n bytes before the deadline: 0, or -1 at end of file or
 * an error, -2 past the deadline. */
static int read_until(int fd, void *p, size_t n, double deadline) {
    char *c = p;
    while (n > 0) {
        double left = deadline - now_s();
        if (left <= 0) return -2;
        struct pollfd pf = {fd, POLLIN, 0};
        int k = poll(&pf, 1, (int)(left * 1000) + 1);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) continue; /* the loop checks the deadline */
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The reply: 'k' and the message into *msg (new), or the child's error
 * into err. Returns -2 past the deadline, -1 when the child said nothing
 * whole, 0 with a message, 1 with the child's error, 2 with the child's
 * error after its own allocation failed. */
static int read_reply(int fd, double deadline, int64_t file_size, unsigned char **msg, size_t *len,
                      ry_error *child) {
    char tag = 0;
    int rc = read_until(fd, &tag, 1, deadline);
    if (rc) return rc;
    if (tag == 'e' || tag == 'm') {
        rc = read_until(fd, child, sizeof *child, deadline);
        if (rc) return rc;
        child->msg[sizeof child->msg - 1] = '\0';
        child->file[sizeof child->file - 1] = '\0';
        child->source_line[sizeof child->source_line - 1] = '\0';
        return tag == 'm' ? 2 : 1;
    }
    uint64_t n;
    if (tag != 'k' || (rc = read_until(fd, &n, sizeof n, deadline))) return rc ? rc : -1;
    /* all but the fixed fields come from the file: bounded by its size */
    if (n > 8 * (uint64_t)file_size + (1u << 20)) return -1;
    *msg = ry_malloc(n ? (size_t)n : 1);
    if (!*msg) return -3;
    *len = (size_t)n;
    rc = read_until(fd, *msg, (size_t)n, deadline);
    if (rc) {
        ry_free(*msg);
        *msg = NULL;
    }
    return rc;
}

ry_status ry_ckpt_read_isolated(const char *path, ry_ckpt_job *job, ry_checkpoint_info *out,
                                bool *damaged, ry_error *err) {
    memset(out, 0, sizeof *out);
    *damaged = false;
    struct stat sb;
    if (stat(path, &sb) != 0) return ry_error_file(err, path, "cannot open: %s", strerror(errno));
    size_t map_n = 0;
    for (int i = 0; i < job->nsets; i++) map_n += ry_tensor_nbytes(job->sets[i]->slab);
    unsigned char *map = NULL;
    if (map_n) {
        map = mmap(NULL, map_n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED)
            return ry_error_file(err, path, "cannot load: mmap of %zu bytes: %s", map_n, strerror(errno));
    }
    int fds[2];
    if (pipe(fds) != 0) {
        if (map) munmap(map, map_n);
        return ry_error_file(err, path, "cannot load: pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        if (map) munmap(map, map_n);
        return ry_error_file(err, path, "cannot load: fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(path, job, map, fds[1]);
    }
    close(fds[1]);
    int seconds = limit_seconds((int64_t)sb.st_size);
    unsigned char *msg = NULL;
    size_t len = 0;
    ry_error child;
    int rc = read_reply(fds[0], now_s() + seconds, (int64_t)sb.st_size, &msg, &len, &child);
    close(fds[0]);
    /* done with it whatever it is doing: a child that replied is exiting,
     * one that did not is killed, so waiting never hangs */
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    ry_status st = RY_ERR;
    if (rc == 0) {
        rbuf b = {msg, len, 0, false};
        st = get_read(&b, out, path, err);
    } else if (rc == 1) {
        *err = child;
        *damaged = true; /* the file's own fault, as the child found it */
    } else if (rc == 2) { /* this machine's memory, not the file: not damaged */
        ry_error_file(err, path, "cannot load: the reading process ran out of memory");
    } else if (rc == -3) {
        ry_error_file(err, path, "cannot load: out of memory");
    } else if (rc == -2) {
        *damaged = true;
        ry_error_file(err, path, "damaged checkpoint: reading it did not finish in %d s", seconds);
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        /* not ours (we kill only after the reply): the kernel's OOM killer */
        ry_error_file(err, path, "cannot load: the reading child was killed (signal %d, %s; out of memory?)",
                      SIGKILL, strsignal(SIGKILL));
    } else if (WIFSIGNALED(status)) {
        *damaged = true;
        ry_error_file(err, path, "damaged checkpoint: libhdf5 crashed reading it (signal %d, %s)",
                      WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        *damaged = true;
        ry_error_file(err, path, "damaged checkpoint: libhdf5 failed reading it (exit status %d)",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    ry_free(msg);
    if (!st) {
        size_t off = 0;
        for (int i = 0; i < job->nsets; i++) {
            size_t bytes = ry_tensor_nbytes(job->sets[i]->slab);
            if (bytes) memcpy(job->sets[i]->slab->data, map + off, bytes);
            off += bytes;
        }
    }
    if (map) munmap(map, map_n);
    return st;
}
