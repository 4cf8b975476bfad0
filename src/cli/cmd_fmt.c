/*
 * cmd_fmt.c: `relayc fmt FILE [-o OUT] [--check] [--tvm]`: print a module in
 * the canonical text format (TVM's). The output parses back to the same
 * module and formatting it again changes nothing. With --tvm it is what
 * TVM 0.19's parser reads (relayc's extensions replaced or dropped, each
 * kind of change said on stderr); that output need not be a fixed point.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const char *help =
    "usage: relayc fmt FILE [-o OUT] [--check] [--tvm]\n"
    "\n"
    "Parses FILE and prints it in the canonical text format to standard output.\n"
    "\n"
    "  -o OUT    write to OUT instead (atomically: a temporary file, then rename)\n"
    "  --check   print nothing; exit 1 if FILE is not already formatted\n"
    "  --tvm     print what TVM 0.19's parser reads back: symbolic dims as ?,\n"
    "            no annotation holding a ref type, stop_gradient(e) as e; what\n"
    "            was changed is said on standard error\n";

static int write_atomic(const char *path, const char *text) {
    char tmp[4096];
    int fd;
    ry_error err;
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    FILE *f = fdopen(fd, "wb");
    size_t n = strlen(text);
    bool ok = f && fwrite(text, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f) ok = (fclose(f) == 0) && ok;
    else close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return cli_fail("fmt", "cannot write %s", path);
    }
    return 0;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = ry_malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = ry_realloc(buf, cap *= 2);
            if (!bigger) ry_free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

int cmd_fmt(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    bool check = false, bad = false, tvm = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if ((v = cli_option(argc, argv, &i, "-o", &bad))) {
            out = v;
        } else if (bad) {
            return 1;
        } else if (strcmp(argv[i], "--check") == 0) {
            check = true;
        } else if (strcmp(argv[i], "--tvm") == 0) {
            tvm = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_fail("fmt", "unknown option '%s' (see relayc fmt --help)", argv[i]);
        } else if (path) {
            return cli_fail("fmt", "one FILE only (got '%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) return cli_fail("fmt", "missing FILE (see relayc fmt --help)");
    ry_module *m = cli_load(path, false);
    if (!m) return 1;
    char *text = cli_print("fmt", m, tvm);
    ry_module_free(m);
    if (!text) return cli_fail("fmt", "out of memory");
    int rc = 0;
    if (check) {
        char *orig = read_all(path);
        if (!orig || strcmp(orig, text) != 0) {
            fprintf(stderr, "%s: not formatted (run relayc fmt)\n", path);
            rc = 1;
        }
        ry_free(orig);
    } else if (out) {
        rc = write_atomic(out, text);
    } else {
        fputs(text, stdout);
    }
    ry_free(text);
    return rc;
}
