/*
 * test_oom_libc.c: libhdf5's own allocation failures (issue 13, part 4).
 * libhdf5 allocates with the C library's malloc, outside ry_malloc's hook,
 * so this suite interposes malloc, calloc and realloc for the whole
 * process and fails the Nth call made from inside libhdf5 (its code's
 * address range, found with dl_iterate_phdr), for every N up to the
 * number a checkpoint save makes. Each attempt runs in a forked child, so
 * that a crash is counted rather than ending the suite: every attempt must
 * end in an error status with a message, or in a success whose checkpoint
 * verifies, and never in a signal. (libhdf5 itself crashes in most of
 * these places; relayc's save runs it in a child of its own,
 * checkpoint_save.c.) A load has every allocation of libhdf5 and of relayc
 * failed the same way, in the child that reads the file
 * (checkpoint_child.c) and in this process: never a crash, and a load
 * that succeeds gives the step after it the reference loss.
 * Interposing malloc is incompatible with the sanitizers (they own
 * malloc) and with valgrind: there that test skips (ASan builds) or the
 * suite is left out (TEST_SKIP of test-valgrind). A second test fills
 * the "disk" (a file-size limit) during a save.
 */
#include <dirent.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "relayc/train.h"
#include "backend/cpu/blas.h"
#include "test_texts.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INTERPOSE 0
#endif
#endif
#ifndef INTERPOSE
#define INTERPOSE 1
#endif

/* fork(), with the child's fatal signals back to their defaults: cmocka's
 * handlers would catch a crash there and go on, and a crash is what the
 * parent counts. */
static pid_t fork_plain(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
        for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    }
    return pid;
}

#if INTERPOSE
/* ---- the interposer ---- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static uintptr_t h5_lo, h5_hi;   /* libhdf5's code */
static uintptr_t own_lo, own_hi; /* this program's, relayc's included (linked statically) */
static bool fail_own;            /* count and fail relayc's calls too */
/* Shared with every process forked below, since relayc saves and loads in
 * a child of its own: [0] counted calls until one fails (-1: none), [1]
 * counted calls so far. */
static atomic_long *shared;
#define countdown shared[0]
#define h5_calls shared[1]

/* The executable segment of libhdf5 and of the program itself. */
static int find_code(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    bool h5 = info->dlpi_name && strstr(info->dlpi_name, "libhdf5");
    bool own = !info->dlpi_name || !info->dlpi_name[0];
    if (!h5 && !(own && !own_hi)) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (h5) {
            h5_lo = lo;
            h5_hi = lo + ph->p_memsz;
        } else {
            own_lo = lo;
            own_hi = lo + ph->p_memsz;
        }
        break;
    }
    return 0;
}

/* Whether this call, made from caller, is to fail. */
static bool fail_now(void *caller) {
    uintptr_t a = (uintptr_t)caller;
    bool counted = (a >= h5_lo && a < h5_hi) || (fail_own && a >= own_lo && a < own_hi);
    if (!shared || !h5_hi || !counted) return false;
    atomic_fetch_add(&h5_calls, 1);
    long c = atomic_load(&countdown);
    if (c < 0) return false;
    if (c == 0) return true;
    atomic_fetch_sub(&countdown, 1);
    return false;
}

/* Exported: the suites build with -fvisibility=hidden, and a hidden
 * definition would not interpose libhdf5's calls. */
#define EXPORTED __attribute__((visibility("default")))

EXPORTED void *malloc(size_t n) {
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}
EXPORTED void *calloc(size_t k, size_t n) {
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_calloc(k, n);
}
EXPORTED void *realloc(void *p, size_t n) {
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

/* ---- the attempts ---- */

typedef struct ctx {
    ry_trainer *tr;
    ry_value *data[2];
    char dir[128];
    char saved[512]; /* the checkpoint the load attempts read */
} ctx;

/* What an attempt sends back: the counted calls it saw, and after a
 * load that succeeded, the loss of the step that followed. */
typedef struct outcome {
    long calls;
    double loss;
} outcome;

/* A save in a fresh directory; 0 for an error with a message or a success
 * whose file verifies, 3 for an error without a message, 4 for a success
 * that does not verify. */
static int try_save(ctx *c, long n, outcome *o) {
    char dir[160], path[512];
    snprintf(dir, sizeof dir, "%s/%ld", c->dir, n);
    if (mkdir(dir, 0755)) return 6;
    ry_error err;
    memset(&err, 0, sizeof err);
    atomic_store(&h5_calls, 0);
    atomic_store(&countdown, n);
    ry_status st = ry_trainer_save(c->tr, dir, 1, NULL, "oom", path, sizeof path, &err);
    atomic_store(&countdown, -1);
    o->calls = atomic_load(&h5_calls);
    if (st != RY_OK) return err.msg[0] ? 0 : 3;
    return ry_checkpoint_verify(path, &err) ? 4 : 0;
}

/* A load of c->saved into the trainer, then a step; 0 for an error with a
 * message (the trainer left as it was: the step's loss is then NaN's
 * opposite, checked by the caller) or a success, 3 for an error without a
 * message, 5 for a step that fails. */
static int try_load(ctx *c, long n, outcome *o) {
    ry_error err;
    memset(&err, 0, sizeof err);
    atomic_store(&h5_calls, 0);
    atomic_store(&countdown, n);
    ry_status st = ry_trainer_load(c->tr, c->saved, NULL, &err);
    atomic_store(&countdown, -1);
    o->calls = atomic_load(&h5_calls);
    if (st != RY_OK) {
        o->loss = -1; /* no step: the caller sees an error */
        return err.msg[0] ? 0 : 3;
    }
    return ry_trainer_step(c->tr, 2, c->data, &o->loss, &err) ? 5 : 0;
}

typedef int (*try_fn)(ctx *c, long n, outcome *o);

/* Runs attempt n in a child, so that a crash is counted; *o gets what it
 * sent. Returns the child's exit status, or 128 + the signal that ended
 * it. */
static int run_child(ctx *c, try_fn fn, long n, outcome *o) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork_plain();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        outcome mine = {-1, 0};
        int rc = fn(c, n, &mine);
        if (write(fds[1], &mine, sizeof mine) != (ssize_t)sizeof mine) _exit(7);
        _exit(rc);
    }
    close(fds[1]);
    o->calls = -1;
    if (read(fds[0], o, sizeof *o) != (ssize_t)sizeof *o) o->calls = -1;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* Fails each counted call of fn once. A load that succeeds despite the
 * failure must give the reference step's loss, bit for bit. */
static void every_failure(ctx *c, try_fn fn, const char *name) {
    outcome ref;
    assert_int_equal(run_child(c, fn, -1, &ref), 0);
    assert_true(ref.calls > 0);
    long errors = 0, crashes = 0, done = 0;
    for (long n = 0; n < ref.calls; n++) {
        outcome o;
        int rc = run_child(c, fn, n, &o);
        if (rc >= 128) {
            crashes++;
            fprintf(stderr, "  %s: allocation %ld of %ld: signal %d\n", name, n, ref.calls, rc - 128);
            continue;
        }
        if (rc) fail_msg("%s: allocation %ld of %ld: exit %d", name, n, ref.calls, rc);
        if (fn == try_load && o.loss != -1) {
            if (o.loss != ref.loss) fail_msg("%s: allocation %ld: loss %.9g, want %.9g", name, n, o.loss, ref.loss);
            done++;
        } else {
            errors++;
        }
    }
    fprintf(stderr, "  %s: %ld allocations, each failed once: %ld errors, %ld done without, %ld crashed\n",
            name, ref.calls, errors, done, crashes);
    assert_int_equal(crashes, 0);
}

static void test_hdf5_failures(void **state) {
    ctx c = {0};
    snprintf(c.dir, sizeof c.dir, "build-test-oom-libc-%d", (int)getpid());
    rm_dir(c.dir);
    assert_int_equal(mkdir(c.dir, 0755), 0);
    /* libhdf5 set up here, so each save's child starts from a library that
     * is (its ~2,700 allocations of setting up are failed the same way,
     * but would make the suite minutes long) */
    assert_true(H5open() >= 0);
    dl_iterate_phdr(find_code, NULL);
    assert_true(h5_hi > h5_lo && own_hi > own_lo);
    void *mem = mmap(NULL, 2 * sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
    assert_true(mem != MAP_FAILED);
    shared = mem;
    atomic_store(&countdown, -1);
    ry_train_opts o = ry_train_defaults();
    o.optim = ry_optim_defaults(RY_OPTIM_ADAM);
    o.threads = 1;
    ry_error err;
    const char *text = TEST_MLP_TEXT;
    if (ry_trainer_new("oom.relay", text, strlen(text), &o, &c.tr, &err)) fail_msg("%s", err.msg);
    int64_t xs[2] = {5, 4}, ys[1] = {5};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, xs), *y = ry_tensor_new(RY_INT32, 1, ys);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, 0.1 * (double)(i % 7));
    for (int64_t i = 0; i < y->size; i++) ry_tensor_set(y, i, (double)(i % 3));
    c.data[0] = ry_value_tensor(x);
    c.data[1] = ry_value_tensor(y);
    double loss;
    if (ry_trainer_step(c.tr, 2, c.data, &loss, &err)) fail_msg("%s", err.msg);
    every_failure(&c, try_save, "checkpoint save (libhdf5's allocations)");
    /* a load, every allocation of libhdf5 and of relayc failed once: in
     * the reading child and in this process; the trainer has stepped past
     * the checkpoint, so a load that did nothing would show in the loss */
    if (ry_trainer_save(c.tr, c.dir, 1, NULL, "oom", c.saved, sizeof c.saved, &err)) fail_msg("%s", err.msg);
    if (ry_trainer_step(c.tr, 2, c.data, &loss, &err)) fail_msg("%s", err.msg);
    fail_own = true;
    every_failure(&c, try_load, "checkpoint load (libhdf5's and relayc's allocations)");
    fail_own = false;
    ry_value_release(c.data[0]);
    ry_value_release(c.data[1]);
    ry_tensor_release(x);
    ry_tensor_release(y);
    ry_trainer_free(c.tr);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", c.dir);
    assert_int_equal(system(cmd), 0);
}
#else
static void test_hdf5_failures(void **state) {
    print_message("skipped: a sanitizer owns malloc in this build\n");
    skip();
}
#endif

/* ---- OpenBLAS's work buffers ----
 * OpenBLAS maps a 128 MiB work buffer for each thread that calls it at
 * once, and when mapping fails it tries again without end
 * (blas_reserve.c): before relayc set the buffers up ahead of its GEMMs,
 * a step whose GEMM needed one hung. Each case runs in a child forked
 * before this process made any GEMM, so its OpenBLAS has no buffer yet;
 * a hang is caught by an alarm. */

/* The address space now used, and 64 MiB more: room for a step's
 * tensors, not for one more OpenBLAS buffer. */
static bool limit_address_space(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    bool ok = f && fscanf(f, "%ld", &pages) == 1;
    if (f) fclose(f);
    struct rlimit rl = {(rlim_t)pages * 4096 + ((rlim_t)64 << 20), RLIM_INFINITY};
    return ok && setrlimit(RLIMIT_AS, &rl) == 0;
}

/* A trainer's first step in a fresh child under that limit, with how:
 * 0, relayc's own check of the address space first (a quick error); 1,
 * without it (ry_cpu_blas_skip_probe), so that OpenBLAS meets the
 * shortage itself and spins (an error at the deadline); 2, the limit set
 * only after a first step, then 20 more steps on two threads, which must
 * need no new buffer. Exit 0 when it went as it should. */
static void blas_case(int how) {
    alarm(60);
    int threads = how == 2 ? 2 : 1;
    ry_set_num_threads(threads);
    ry_train_opts o = ry_train_defaults();
    o.threads = threads;
    ry_trainer *tr = NULL;
    ry_error err;
    const char *text = TEST_MLP_TEXT;
    if (ry_trainer_new("blas.relay", text, strlen(text), &o, &tr, &err)) _exit(2);
    int64_t xs[2] = {5, 4}, ys[1] = {5};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 2, xs), *y = ry_tensor_new(RY_INT32, 1, ys);
    for (int64_t i = 0; i < x->size; i++) ry_tensor_set(x, i, 0.1 * (double)(i % 7));
    for (int64_t i = 0; i < y->size; i++) ry_tensor_set(y, i, (double)(i % 3));
    ry_value *data[2] = {ry_value_tensor(x), ry_value_tensor(y)};
    double loss;
    if (how == 2) {
        if (ry_trainer_step(tr, 2, data, &loss, &err) || !limit_address_space()) _exit(3);
        for (int k = 0; k < 20; k++)
            if (ry_trainer_step(tr, 2, data, &loss, &err)) {
                fprintf(stderr, "  step %d: %s\n", k, err.msg);
                _exit(4);
            }
        _exit(0);
    }
    ry_cpu_blas_skip_probe(how == 1);
    if (!limit_address_space()) _exit(6);
    ry_status st = ry_trainer_step(tr, 2, data, &loss, &err);
    fprintf(stderr, "  %s: %s\n", how ? "OpenBLAS meeting the shortage" : "relayc's check",
            st ? err.msg : "(no error)");
    if (st == RY_OK) _exit(7);
    const char *want = how ? "could not map its work buffers within" : "mmap refused one (Cannot allocate memory)";
    _exit(strstr(err.msg, "OpenBLAS") && strstr(err.msg, want) ? 0 : 8);
}

static void test_openblas_buffers(void **state) {
    if (!INTERPOSE) { /* the same builds: ASan's shadow memory needs the address space */
        print_message("skipped: a sanitizer owns the address space in this build\n");
        skip();
    }
    for (int how = 0; how < 3; how++) {
        pid_t pid = fork_plain();
        assert_true(pid >= 0);
        if (pid == 0) {
            blas_case(how);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
            fail_msg("case %d: signal %d%s", how, WTERMSIG(status),
                     WTERMSIG(status) == SIGALRM ? " (the step hung)" : "");
        if (WEXITSTATUS(status)) fail_msg("case %d: exit %d", how, WEXITSTATUS(status));
    }
}

/* A write libhdf5 cannot finish (a file-size limit standing in for a full
 * disk): the save is an error naming errno's text, and the process then
 * ends normally. Before saves ran in a child, libhdf5 kept the
 * half-written file open and crashed in its exit handler. */
static void test_full_disk(void **state) {
    char dir[128];
    snprintf(dir, sizeof dir, "build-test-oom-disk-%d", (int)getpid());
    pid_t pid = fork_plain();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        ry_train_opts o = ry_train_defaults();
        ry_trainer *tr = NULL;
        ry_error err;
        const char *text = TEST_MLP_TEXT;
        char path[512];
        if (mkdir(dir, 0755) || setrlimit(RLIMIT_FSIZE, &rl) ||
            ry_trainer_new("disk.relay", text, strlen(text), &o, &tr, &err))
            _exit(2);
        if (ry_trainer_save(tr, dir, 1, NULL, "disk", path, sizeof path, &err) == RY_OK) _exit(3);
        if (!strstr(err.msg, "File too large")) _exit(4);
        ry_trainer_free(tr);
        exit(0); /* atexit handlers, libhdf5's among them */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openblas_buffers), /* first: no GEMM has run in this process */
        cmocka_unit_test(test_hdf5_failures),
        cmocka_unit_test(test_full_disk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
