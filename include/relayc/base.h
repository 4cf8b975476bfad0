/*
 * base.h: what every layer of relayc shares: status codes, source spans,
 * located errors, the allocator hook and the arena.
 *
 * Errors from user input are values: a function that can fail on input
 * returns ry_status and fills the caller's ry_error. Internal invariants use
 * assert. Nothing here knows about tensors, IR or targets.
 */
#ifndef RELAYC_BASE_H
#define RELAYC_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every public header wraps its declarations in RY_BEGIN_API/RY_END_API:
 * C linkage for C++ callers, and default visibility, so that the shared
 * library, built with -fvisibility=hidden, exports exactly the functions
 * declared in include/relayc/ (tests/api/check_exports.sh checks it). */
#if defined(__GNUC__)
#define RY_VISIBLE_BEGIN _Pragma("GCC visibility push(default)")
#define RY_VISIBLE_END _Pragma("GCC visibility pop")
#else
#define RY_VISIBLE_BEGIN
#define RY_VISIBLE_END
#endif
#ifdef __cplusplus
#define RY_BEGIN_API extern "C" { RY_VISIBLE_BEGIN
#define RY_END_API RY_VISIBLE_END }
#else
#define RY_BEGIN_API RY_VISIBLE_BEGIN
#define RY_END_API RY_VISIBLE_END
#endif

/* A function that does not return, in C and in C++. */
#ifdef __cplusplus
#define RY_NORETURN [[noreturn]]
#else
#define RY_NORETURN _Noreturn
#endif

/* The library's version (semantic: the shared library's SONAME carries the
 * major number) and ry_version(), the version of the library linked. */
#define RELAYC_VERSION "0.1.0"

RY_BEGIN_API

const char *ry_version(void);

typedef enum ry_status { RY_OK = 0, RY_ERR = 1 } ry_status;

/* A source file held by a module: its name and its whole text. */
typedef struct ry_source {
    const char *name; /* path as the user gave it, e.g. "model.relay" */
    const char *text; /* NUL-terminated contents */
    size_t len;
} ry_source;

/* A place in a source: 1-based line and column, and the length in bytes of
 * the construct (at least 1 when known). src == NULL means "no location". */
typedef struct ry_span {
    const ry_source *src;
    int line, col, len;
} ry_span;

#define RY_NO_SPAN ((ry_span){0, 0, 0, 0})

#define RY_ERROR_MSG_MAX 1024
#define RY_ERROR_LINE_MAX 256

/* A located error. The source line is copied in, so the error outlives the
 * module it came from. file is "" when there is no location. */
typedef struct ry_error {
    char file[256];
    int line, col, len;
    char msg[RY_ERROR_MSG_MAX];
    char source_line[RY_ERROR_LINE_MAX]; /* "" when unknown */
} ry_error;

/* Fills err (if non-NULL) and returns RY_ERR, so callers can write
 * `return ry_error_at(err, span, "expected %s", what);`. */
ry_status ry_error_at(ry_error *err, ry_span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ry_status ry_error_vat(ry_error *err, ry_span span, const char *fmt, va_list ap);
/* An error with a file name but no line (files, I/O): "PATH: error: ...". */
ry_status ry_error_file(ry_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes err->msg with more context: "while X: <old message>". */
void ry_error_prefix(ry_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "FILE:LINE:COL: error: msg", then the source line and a caret. */
void ry_error_print(FILE *f, const ry_error *err);

/* Creates the temporary for writing path whole: "PATH.tmp.<pid>.XXXXXX"
 * in path's directory, the X's random, made with O_CREAT|O_EXCL (so never
 * through a symbolic link) and mode 0644; tmp (n bytes) gets its name and
 * *fd the open descriptor. The caller writes it, renames it over path, and
 * removes it on failure. */
ry_status ry_tmpfile_create(const char *path, char *tmp, size_t n, int *fd, ry_error *err);

/* ---- memory ---------------------------------------------------------
 * Every allocation in the library goes through these, so tests can make
 * the Nth allocation fail (ry_alloc_fail_after) and check that nothing
 * leaks or crashes (tests/test_oom.c). ry_malloc returns NULL on failure.
 * The IR's memory (arenas, below, and the constants of a module) is
 * counted and failed by the hook only inside the entry points that build
 * IR (parse, type check, grad, optimize, compile, trainer_new), which
 * return "out of memory" as an error when it runs out; elsewhere running
 * out of it ends the process with a message (src/tensor/oom.h). */
void *ry_malloc(size_t n);
void *ry_calloc(size_t count, size_t size);
void *ry_realloc(void *p, size_t n);
void ry_free(void *p);
char *ry_strdup(const char *s);
/* Make allocation number n (counting from the next one, 0-based) and every
 * later one fail; n < 0 turns failure injection off. */
void ry_alloc_fail_after(long n);

/* ---- arena -----------------------------------------------------------
 * For what dies together: IR nodes and types of a module, pass temporaries.
 * Allocation never returns NULL: on out-of-memory it jumps to the entry
 * point that is building IR, which frees what it built (this arena too,
 * if made under it) and returns an error; outside one it reports it on
 * stderr and exits (src/tensor/oom.h). Memory is zeroed. */
typedef struct ry_arena ry_arena;
ry_arena *ry_arena_new(void);
void ry_arena_free(ry_arena *a);
/* Forgets everything allocated so far but keeps one block for reuse. */
void ry_arena_reset(ry_arena *a);
void *ry_arena_alloc(ry_arena *a, size_t n);
char *ry_arena_strdup(ry_arena *a, const char *s);
char *ry_arena_strndup(ry_arena *a, const char *s, size_t n);
/* A map from pointers (IR nodes, vars) to integers, kept in an arena:
 * open addressing, nothing to free. A zeroed struct is an empty map. */
typedef struct ry_ptrmap {
    const void **keys;
    intptr_t *vals;
    int cap, n; /* cap is 0 or a power of two */
} ry_ptrmap;
void ry_ptrmap_put(ry_arena *a, ry_ptrmap *m, const void *key, intptr_t val);
bool ry_ptrmap_get(const ry_ptrmap *m, const void *key, intptr_t *val);

#define RY_NEW(arena, T) ((T *)ry_arena_alloc((arena), sizeof(T)))
#define RY_NEW_ARRAY(arena, T, n) ((T *)ry_arena_alloc((arena), sizeof(T) * (size_t)(n)))

RY_END_API

#endif
