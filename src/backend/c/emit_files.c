/*
 * emit_files.c: the artifact's files around the model's code: NAME.h (the
 * documented API), the Makefile, a README and example.c, which reads the
 * entry's inputs from .npy files, calls it through the array API and
 * writes each result as a .npy file (its reader and writer are
 * rt/npy.c). The model's own code is export.c's.
 */
#include <string.h>

#include "backend/c/emit.h"
#include "backend/c/rt_text.h"

/* The header's dtype codes (rt/npy.c's indices too); appended to, never reordered. */
static const char *dtypes[] = {"FLOAT32", "FLOAT64", "INT32", "INT64", "BOOL", "VALUE",
                               "INT8", "UINT8", "INT16", "UINT16", "FLOAT16"};
#define NDTYPES (int)(sizeof dtypes / sizeof dtypes[0])

int ry_c_dtype_index(ry_dtype d) {
    switch (d) {
    case RY_FLOAT32: return 0;
    case RY_FLOAT64: return 1;
    case RY_INT32: return 2;
    case RY_INT64: return 3;
    case RY_INT8: return 6;
    case RY_UINT8: return 7;
    case RY_INT16: return 8;
    case RY_UINT16: return 9;
    case RY_FLOAT16: return 10;
    default: return 4;
    }
}

const char *ry_c_dtype_code(const cmodel *md, ry_dtype d) {
    static char buf[4][160];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s_%s", md->NAME, dtypes[ry_c_dtype_index(d)]);
    return b;
}

static void dims_text(strbuf *b, int ndim, const ry_dim *dims) {
    ry_sb_puts(b, "[");
    for (int i = 0; i < ndim; i++) {
        if (dims[i].kind == RY_DIM_SYM) ry_sb_printf(b, "%s%s", i ? "][" : "", dims[i].name);
        else ry_sb_printf(b, "%s%lld", i ? "][" : "", (long long)dims[i].value);
    }
    ry_sb_puts(b, "]");
}

void ry_c_entry_signature(strbuf *b, const cmodel *md) {
    ry_sb_printf(b, "int %s_%s(%s_ctx *ctx", md->name, md->entry, md->name);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", int64_t %s", md->syms[i]);
    for (int i = 0; i < md->nargs; i++) {
        if (ry_c_is_value_arg(md->args[i])) ry_sb_printf(b, ", const %s_value *%s", md->name, md->arg_c[i]);
        else ry_sb_printf(b, ", const %s *%s", ry_c_ctype(md->arg_t[i]->tensor.dtype), md->arg_c[i]);
    }
    for (int i = 0; i < md->nouts; i++) {
        if (md->out_value && md->out_value[i]) ry_sb_printf(b, ", %s_value **out%d", md->name, i);
        else if (md->out_dyn && md->out_dyn[i]) ry_sb_printf(b, ", %s_array *out%d", md->name, i);
        else ry_sb_printf(b, ", %s *out%d", ry_c_ctype(md->outs[i]->dtype), i);
    }
    ry_sb_puts(b, ")");
}

void ry_c_write_header(strbuf *b, const cmodel *md) {
    const char *n = md->name, *N = md->NAME, *e = md->entry;
    ry_sb_printf(b, "/*\n * %s.h: the model %s, entry @%s, exported by relayc as standalone C.\n", n, md->source, e);
    ry_sb_printf(b, " *\n * Open a context (%s_open), call %s_%s with plain C arrays (row-major,\n"
                    " * the symbolic dimensions first), read the outputs, close (%s_close).\n"
                    " * One context per thread: calls on one context must not overlap; separate\n"
                    " * contexts share nothing. Every function returns %s_OK or an error code,\n"
                    " * and %s_error(ctx) says what went wrong.\n */\n",
                 n, n, e, n, N, n);
    ry_sb_printf(b, "#ifndef %s_H\n#define %s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n", N, N);
    ry_sb_printf(b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    ry_sb_printf(b, "enum {\n    %s_OK = 0,\n    %s_ERR_IO = 1,      /* the weights file cannot be read */\n"
                    "    %s_ERR_WEIGHTS = 2, /* the weights file is another model's or damaged (size, CRC) */\n"
                    "    %s_ERR_MEMORY = 3,\n    %s_ERR_DIM = 4,     /* a dimension is out of range or does not match */\n"
                    "    %s_ERR_ARG = 5,     /* a NULL pointer, a wrong dtype or rank, an index out of range */\n"
                    "    %s_ERR_DEPTH = 6,   /* the recursion is deeper than %s_MAX_DEPTH calls */\n"
                    "    %s_ERR_MATCH = 7,   /* no clause of a match matches the value */\n"
                    "    %s_ERR_PARSE = 8    /* a malformed tree string */\n};\n\n",
                 N, N, N, N, N, N, N, N, N, N);
    ry_sb_printf(b, "/* dtypes of %s_array */\nenum { ", n);
    for (int i = 0; i < NDTYPES; i++) ry_sb_printf(b, "%s_%s = %d%s", N, dtypes[i], i, i < NDTYPES - 1 ? ", " : " };\n\n");
    ry_sb_printf(b, "/* The largest value a symbolic dimension may take. */\n#define %s_MAX_DIM ((int64_t)1 << 30)\n\n", N);
    if (md->dyn)
        ry_sb_printf(b, "/* The deepest recursion a call may reach (a tree's depth, a sequence's\n"
                        " * length) before it fails with %s_ERR_DEPTH; each level takes a C\n"
                        " * stack frame of a few hundred bytes. Define it when compiling %s.c. */\n"
                        "#ifndef %s_MAX_DEPTH\n#define %s_MAX_DEPTH 2000\n#endif\n\n", N, n, N, N);
    ry_sb_printf(b, "typedef struct %s_ctx %s_ctx;\n\n", n, n);
    ry_sb_printf(b, "/* A tensor with its dtype and shape (the _run form's; an output whose\n"
                    " * dims only run time knows). An ADT input of _run: dtype %s_VALUE,\n"
                    " * data its %s_value. */\n"
                    "typedef struct %s_array {\n    int dtype;\n    int ndim;\n    int64_t shape[8];\n    void *data;\n} %s_array;\n\n",
                 N, n, n, n);
    if (md->embed)
        ry_sb_printf(b, "/* Opens a context over the weights built into %s.c (weights_path must be\n"
                        " * NULL). On failure *out is NULL and msg (n bytes) says why. */\n", n);
    else
        ry_sb_printf(b, "/* Opens a context: reads the weights file (%s.weights as exported), checking\n"
                        " * its size, parameter list and CRC-32. On failure *out is NULL and msg\n"
                        " * (n bytes, may be NULL) says why. */\n", n);
    ry_sb_printf(b, "int %s_open(%s_ctx **out, const char *weights_path, char *msg, size_t n);\n", n, n);
    ry_sb_printf(b, "void %s_close(%s_ctx *ctx); /* NULL is fine */\n", n, n);
    ry_sb_printf(b, "/* The last error's message (\"\" after a success). */\nconst char *%s_error(const %s_ctx *ctx);\n\n", n, n);
    ry_c_write_value_decls(b, md);
    ry_sb_printf(b, "/* @%s:\n", e);
    for (int i = 0; i < md->nargs; i++) {
        const ry_type *t = md->arg_t[i];
        if (ry_c_is_value_arg(md->args[i])) {
            ry_sb_printf(b, " *   %s: a %s value (input)\n", md->arg_c[i], t->call.adt->name);
            continue;
        }
        ry_sb_printf(b, " *   %s: %s", md->arg_c[i], ry_c_ctype(t->tensor.dtype));
        dims_text(b, t->tensor.ndim, t->tensor.dims);
        ry_sb_puts(b, " (input)\n");
    }
    for (int i = 0; i < md->nouts; i++) {
        if (md->out_value[i]) {
            char ty[256];
            ry_sb_printf(b, " *   out%d: a value of type %s (output: *out%d a %s_value copied out into the\n"
                            " *         context's values, walked with %s_value_kind and the others)\n",
                         i, ry_type_str(md->outs[i]->type, ty, sizeof ty), i, n, n);
            continue;
        }
        ry_sb_printf(b, " *   out%d: %s", i, ry_c_ctype(md->outs[i]->dtype));
        if (md->out_dyn && md->out_dyn[i]) {
            ry_sb_printf(b, " of rank %d, a dim known only when it runs (output: an array the call fills,\n"
                            " *         its data a new buffer to free())\n", md->outs[i]->ndim);
            continue;
        }
        dims_text(b, md->outs[i]->ndim, md->outs[i]->dims);
        ry_sb_puts(b, " (output, written)\n");
    }
    ry_sb_printf(b, " * Symbolic dimensions are 0 .. %s_MAX_DIM (else %s_ERR_DIM); the arrays\n"
                    " * must have the sizes they imply. */\n", N, N);
    ry_c_entry_signature(b, md);
    ry_sb_puts(b, ";\n\n");
    ry_sb_printf(b, "#define %s_%s_NIN %d\n#define %s_%s_NOUT %d\n", N, e, md->nargs, N, e, md->nouts);
    ry_sb_printf(b, "extern const char *const %s_%s_input_names[%s_%s_NIN + 1];\n", n, e, N, e);
    ry_sb_printf(b, "/* in[%s_%s_NIN] are checked against the entry's types (dtype, rank,\n"
                    " * constant dims; symbolic dims bound by the first input that has them and\n"
                    " * checked in the others: %s_ERR_DIM on a mismatch); out[%s_%s_NOUT] get\n"
                    " * their dtype, shape and a new buffer (release with free()); a value\n"
                    " * result gets dtype %s_VALUE and its %s_value as data (not to free: the\n"
                    " * context's values hold it). */\n",
                 N, e, N, N, e, N, n);
    ry_sb_printf(b, "int %s_%s_run(%s_ctx *ctx, const %s_array *in, %s_array *out);\n\n", n, e, n, n, n);
    ry_sb_printf(b, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
}

void ry_c_write_makefile(strbuf *b, const cmodel *md) {
    const char *n = md->name;
    ry_sb_printf(b, "# Builds the exported model %s (relayc export): a C11 compiler and libm.\n", n);
    ry_sb_puts(b, "CC ?= cc\nCFLAGS ?= -std=c11 -O2\n");
    if (md->blas)
        ry_sb_puts(b, "# --blas: CBLAS for the GEMMs (OpenBLAS's, found by pkg-config, else -lcblas)\n"
                      "BLAS_CFLAGS ?= $(shell pkg-config --cflags openblas 2>/dev/null)\n"
                      "BLAS_LIBS ?= $(shell pkg-config --libs openblas 2>/dev/null || echo -lcblas)\n"
                      "override CFLAGS += $(BLAS_CFLAGS)\nLDLIBS = $(BLAS_LIBS) -lm\n\n");
    else
        ry_sb_puts(b, "LDLIBS = -lm\n\n");
    ry_sb_printf(b, "all: example lib%s.a\n\n", n);
    ry_sb_printf(b, "%s.o: %s.c %s.h\n\t$(CC) $(CFLAGS) -c %s.c -o $@\n\n", n, n, n, n);
    ry_sb_printf(b, "lib%s.a: %s.o\n\tar rcs $@ %s.o\n\n", n, n, n);
    ry_sb_printf(b, "example: example.c %s.o %s.h\n\t$(CC) $(CFLAGS) -o $@ example.c %s.o $(LDLIBS)\n\n", n, n, n);
    ry_sb_printf(b, "clean:\n\trm -f example %s.o lib%s.a\n\n.PHONY: all clean\n", n, n);
}

void ry_c_write_readme(strbuf *b, const cmodel *md) {
    const char *n = md->name;
    ry_sb_printf(b, "%s: the model %s (entry @%s), exported by `relayc export`.\n\n", n, md->source, md->entry);
    ry_sb_printf(b, "    make                  # example and lib%s.a: cc -std=c11 -O2, libm%s\n", n,
                 md->blas ? " and CBLAS (--blas)" : " only");
    ry_sb_puts(b, "    ./example");
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, " %s.%s", md->arg_c[i], ry_c_is_value_arg(md->args[i]) ? "txt" : "npy");
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, md->out_value[i] ? " out%d.npy..." : " out%d.npy", i);
    ry_sb_puts(b, "\n\n");
    if (md->nvalue_outs)
        ry_sb_puts(b, "A value result (a list, a tree, a tuple) is written as its tensors, one\n"
                      "file each, depth-first (tuple fields and constructor fields in order):\n"
                      "as many paths as it holds, as `relayc run` writes it.\n\n");
    if (md->tree)
        ry_sb_printf(b, "A %s argument is a text file holding the tree in PTB brackets, e.g.\n"
                        "(3 (2 It) (4 (2 works) (2 .))); words are numbered by first appearance.\n\n", md->tree->name);
    ry_sb_printf(b, "From C: #include \"%s.h\" (the API is documented there) and link %s.o or\n"
                    "lib%s.a with -lm. ", n, n, n);
    if (md->embed) ry_sb_printf(b, "The weights are built into %s.c.\n", n);
    else ry_sb_printf(b, "The weights are in %s.weights (little-endian; checked by size\nand CRC-32 when a context opens); example reads them beside itself.\n", n);
}

void ry_c_write_example(strbuf *b, const cmodel *md) {
    const char *n = md->name, *N = md->NAME, *e = md->entry;
    ry_sb_printf(b, "/*\n * example.c: runs %s's @%s on .npy files:\n *   example [-w WEIGHTS]", n, e);
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, " %s.npy", md->arg_c[i]);
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, md->out_value[i] ? " OUT%d.npy..." : " OUT%d.npy", i);
    ry_sb_printf(b, "\n * (the weights default to %s.weights beside this program; -r times REPEAT\n"
                    " * more calls and prints the time per call on stderr). Exit status:\n"
                    " * 0, or the model's error code, or 10 for a bad command line or .npy file.\n */\n", n);
    ry_sb_printf(b, "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n#include \"%s.h\"\n\n", n);
    ry_sb_puts(b, ry_c_rt_text("npy"));
    if (md->tree)
        ry_sb_puts(b, "\n/* The whole file as a string, or NULL with msg set. */\n"
                      "static char *read_text(const char *path, char *msg, size_t n) {\n"
                      "    FILE *f = fopen(path, \"rb\");\n    char *s = NULL;\n    size_t len = 0, cap = 0;\n"
                      "    if (!f) {\n        snprintf(msg, n, \"%s: cannot open\", path);\n        return NULL;\n    }\n"
                      "    for (int ch; (ch = fgetc(f)) != EOF;) {\n"
                      "        if (len + 2 > cap) {\n            char *t = realloc(s, cap = cap ? 2 * cap : 256);\n"
                      "            if (!t) {\n                free(s);\n                fclose(f);\n                snprintf(msg, n, \"out of memory\");\n                return NULL;\n            }\n"
                      "            s = t;\n        }\n        s[len++] = (char)ch;\n    }\n"
                      "    fclose(f);\n    if (!s && !(s = malloc(1))) return NULL;\n    s[len] = 0;\n    return s;\n}\n");
    ry_sb_puts(b, "\n");
    if (md->nvalue_outs)
        ry_sb_printf(b, "/* A value result's tensors, depth-first (as relayc run writes them): each\n"
                        " * to paths[*k], *k counting; only counted when paths is NULL. */\n"
                        "static int value_leaves(const %s_value *v, char **paths, int *k, char *msg, size_t n) {\n"
                        "    %s_array t;\n"
                        "    if (%s_value_tensor(v, &t) == %s_OK) {\n"
                        "        npy_array x = {t.dtype, t.ndim, {0}, t.data};\n"
                        "        memcpy(x.shape, t.shape, sizeof x.shape);\n"
                        "        if (paths && npy_write(paths[*k], &x, msg, n) != 0) return 10;\n"
                        "        ++*k;\n        return 0;\n    }\n"
                        "    for (int i = 0; i < %s_value_nfields(v); i++)\n"
                        "        if (value_leaves(%s_value_field(v, i), paths, k, msg, n) != 0) return 10;\n"
                        "    return 0;\n}\n\n",
                     n, n, n, N, n, n);
    ry_sb_puts(b, "static int cmp_double(const void *x, const void *y) {\n"
                  "    double a = *(const double *)x, b = *(const double *)y;\n    return (a > b) - (a < b);\n}\n\n");
    ry_sb_printf(b, "int main(int argc, char **argv) {\n    char wpath[4096], msg[512];\n    int a = 1;\n");
    if (md->embed) {
        ry_sb_puts(b, "    const char *weights = NULL;\n    (void)wpath;\n");
    } else {
        ry_sb_printf(b, "    const char *slash = strrchr(argv[0], '/');\n"
                        "    snprintf(wpath, sizeof wpath, \"%%.*s%s.weights\", slash ? (int)(slash - argv[0] + 1) : 0, argv[0]);\n"
                        "    const char *weights = wpath;\n", n);
    }
    /* a value result takes as many paths as it holds tensors: counted after the call */
    char plus_nout[200] = "";
    if (!md->nvalue_outs) snprintf(plus_nout, sizeof plus_nout, " + %s_%s_NOUT", N, e);
    ry_sb_printf(b, "    long repeat = 0;\n"
                    "    for (; a + 1 < argc && (strcmp(argv[a], \"-w\") == 0 || strcmp(argv[a], \"-r\") == 0); a += 2) {\n"
                    "        if (argv[a][1] == 'w') weights = argv[a + 1];\n"
                    "        else repeat = strtol(argv[a + 1], NULL, 10);\n    }\n"
                    "    if (argc - a %s %s_%s_NIN%s || repeat < 0) {\n"
                    "        fprintf(stderr, \"usage: %%s [-w WEIGHTS] [-r REPEAT]",
                 md->nvalue_outs ? "<" : "!=", N, e, plus_nout);
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, " %s.%s", md->arg_c[i], ry_c_is_value_arg(md->args[i]) ? "txt" : "npy");
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, md->out_value[i] ? " OUT%d.npy..." : " OUT%d.npy", i);
    ry_sb_printf(b, "\\n\", argv[0]);\n        return 10;\n    }\n");
    ry_sb_printf(b, "    %s_array in[%s_%s_NIN + 1], out[%s_%s_NOUT + 1];\n", n, N, e, N, e);
    ry_sb_printf(b, "    memset(in, 0, sizeof in);\n    memset(out, 0, sizeof out);\n    int rc = 0;\n");
    /* an ADT input is a text file: the tree in PTB's brackets, parsed in the context */
    ry_sb_puts(b, "    static const int is_value[] = {");
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, "%d, ", ry_c_is_value_arg(md->args[i]));
    ry_sb_puts(b, "0};\n");
    ry_sb_printf(b, "    %s_ctx *ctx = NULL;\n", n);
    char open_ctx[512];
    snprintf(open_ctx, sizeof open_ctx, "    if (rc == 0 && (rc = %s_open(&ctx, weights, msg, sizeof msg)) != %s_OK) fprintf(stderr, \"%%s\\n\", msg);\n", n, N);
    if (md->nadts) ry_sb_puts(b, open_ctx);
    ry_sb_printf(b, "    for (int i = 0; i < %s_%s_NIN && rc == 0; i++) {\n", N, e);
    if (md->tree)
        ry_sb_printf(b, "        if (is_value[i]) {\n"
                        "            char *text = read_text(argv[a + i], msg, sizeof msg);\n"
                        "            %s_value *v = NULL;\n"
                        "            if (!text) {\n                fprintf(stderr, \"%%s\\n\", msg);\n                rc = 10;\n                break;\n            }\n"
                        "            rc = %s_parse_tree(ctx, text, NULL, NULL, &v);\n            free(text);\n"
                        "            if (rc != %s_OK) {\n                fprintf(stderr, \"%%s: %%s\\n\", argv[a + i], %s_error(ctx));\n                break;\n            }\n"
                        "            in[i].dtype = %s_VALUE;\n            in[i].data = v;\n            continue;\n        }\n",
                     n, n, N, n, N);
    else if (md->nadts)
        ry_sb_printf(b, "        if (is_value[i]) {\n            fprintf(stderr, \"%%s: this example reads no values of that type\\n\", argv[a + i]);\n"
                        "            rc = 10;\n            break;\n        }\n");
    ry_sb_printf(b, "        npy_array t;\n"
                    "        if (npy_read(argv[a + i], &t, msg, sizeof msg) != 0) {\n"
                    "            fprintf(stderr, \"%%s\\n\", msg);\n            rc = 10;\n            break;\n        }\n"
                    "        in[i].dtype = t.dtype; /* npy.c's indices are the header's codes */\n        in[i].ndim = t.ndim;\n"
                    "        memcpy(in[i].shape, t.shape, sizeof t.shape);\n        in[i].data = t.data;\n    }\n");
    if (!md->nadts) ry_sb_puts(b, open_ctx);
    ry_sb_printf(b, "    if (rc == 0 && (rc = %s_%s_run(ctx, in, out)) != %s_OK) fprintf(stderr, \"%%s\\n\", %s_error(ctx));\n",
                 n, e, N, n);
    /* -r N: N more calls timed one by one (the first, which sizes the scratch, is not): mean and median */
    ry_sb_printf(b, "    if (rc == 0 && repeat > 0) {\n"
                    "        double *us = malloc(sizeof *us * (size_t)repeat), sum = 0;\n"
                    "        if (!us) rc = %s_ERR_MEMORY;\n"
                    "        for (long r = 0; r < repeat && rc == 0; r++) {\n"
                    "            struct timespec t0, t1;\n"
                    "            for (int i = 0; i < %s_%s_NOUT; i++)\n"
                    "                if (out[i].dtype != %s_VALUE) free(out[i].data);\n"
                    "            timespec_get(&t0, TIME_UTC);\n"
                    "            rc = %s_%s_run(ctx, in, out);\n"
                    "            timespec_get(&t1, TIME_UTC);\n"
                    "            us[r] = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;\n"
                    "            sum += us[r];\n        }\n"
                    "        if (rc == 0) {\n"
                    "            qsort(us, (size_t)repeat, sizeof *us, cmp_double);\n"
                    "            fprintf(stderr, \"%%ld calls: %%.2f us per call, median %%.2f us\\n\", repeat, sum / (double)repeat, us[repeat / 2]);\n"
                    "        }\n        free(us);\n    }\n",
                 N, N, e, N, n, e);
    /* the results' tensors, a value's depth-first, one path each */
    ry_sb_printf(b, "    char **paths = argv + a + %s_%s_NIN;\n    int npaths = argc - a - %s_%s_NIN, k = 0;\n", N, e, N, e);
    if (md->nvalue_outs)
        ry_sb_printf(b, "    if (rc == 0) {\n        int total = 0;\n"
                        "        for (int i = 0; i < %s_%s_NOUT; i++)\n"
                        "            if (out[i].dtype == %s_VALUE) value_leaves(out[i].data, NULL, &total, msg, sizeof msg);\n"
                        "            else total++;\n"
                        "        if (total != npaths) {\n"
                        "            fprintf(stderr, \"the results hold %%d tensors: give as many output paths, not %%d\\n\", total, npaths);\n"
                        "            rc = 10;\n        }\n    }\n",
                     N, e, N);
    ry_sb_printf(b, "    for (int i = 0; i < %s_%s_NOUT && rc == 0; i++) {\n", N, e);
    if (md->nvalue_outs)
        ry_sb_printf(b, "        if (out[i].dtype == %s_VALUE) {\n"
                        "            if ((rc = value_leaves(out[i].data, paths, &k, msg, sizeof msg)) != 0) fprintf(stderr, \"%%s\\n\", msg);\n"
                        "            continue;\n        }\n",
                     N);
    ry_sb_printf(b, "        npy_array t = {out[i].dtype, out[i].ndim, {0}, out[i].data};\n"
                    "        memcpy(t.shape, out[i].shape, sizeof t.shape);\n"
                    "        if (npy_write(paths[k++], &t, msg, sizeof msg) != 0) {\n"
                    "            fprintf(stderr, \"%%s\\n\", msg);\n            rc = 10;\n        }\n    }\n"
                    "    (void)npaths;\n");
    ry_sb_printf(b, "    for (int i = 0; i < %s_%s_NIN; i++)\n        if (!is_value[i]) free(in[i].data);\n"
                    "    for (int i = 0; i < %s_%s_NOUT; i++)\n        if (out[i].dtype != %s_VALUE) free(out[i].data);\n"
                    "    %s_close(ctx);\n    return rc;\n}\n",
                 N, e, N, e, N, n);
}
