/*
 * fuzz_grad.c: the AD transform on parsed modules. A module that parses
 * and type-checks has its @main differentiated; a gradient that ry_grad
 * returns must type-check again (ry_grad checks it itself and says "a bug
 * in ry_grad" when it does not: that message is a crash here).
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_module *m = NULL;
    if (ry_module_parse("fuzz.relay", (const char *)data, size, &m, &err) != RY_OK) return 0;
    if (ry_module_typecheck(m, &err) != RY_OK || !ry_module_find_global(m, "main")) {
        ry_module_free(m);
        return 0;
    }
    memset(&err, 0, sizeof err);
    const char *name = NULL;
    ry_status st = ry_grad(m, "main", NULL, NULL, &name, &err);
    fuzz_check_error(st, &err);
    if (st != RY_OK && strstr(err.msg, "a bug in ry_grad")) {
        fprintf(stderr, "fuzz: %s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        abort();
    }
    if (st == RY_OK) {
        memset(&err, 0, sizeof err);
        if (ry_module_typecheck(m, &err) != RY_OK) {
            fprintf(stderr, "fuzz: @%s does not type-check: %s\n", name, err.msg);
            abort();
        }
    }
    ry_module_free(m);
    return 0;
}
