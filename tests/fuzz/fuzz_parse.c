/*
 * fuzz_parse.c: the text format's parser and the type checker on arbitrary
 * bytes. A module that parses is printed, parsed again and type-checked;
 * the printed text of a module that parsed must parse too (the printer and
 * parser agree on everything the parser accepts).
 */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ry_error err;
    memset(&err, 0, sizeof err);
    ry_module *m = NULL;
    ry_status st = ry_module_parse("fuzz.relay", (const char *)data, size, &m, &err);
    fuzz_check_error(st, &err);
    if (st != RY_OK) return 0;
    char *text = ry_module_print(m);
    if (text) {
        ry_module *again = NULL;
        memset(&err, 0, sizeof err);
        if (ry_module_parse("printed.relay", text, strlen(text), &again, &err) != RY_OK) {
            fprintf(stderr, "fuzz: the printed module does not parse: %s:%d:%d: %s\n%s\n",
                    err.file, err.line, err.col, err.msg, text);
            abort();
        }
        ry_module_free(again);
        ry_free(text);
    }
    memset(&err, 0, sizeof err);
    fuzz_check_error(ry_module_typecheck(m, &err), &err);
    ry_module_free(m);
    return 0;
}
