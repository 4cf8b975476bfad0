/*
 * export.c: relayc's C export (export.h), the driver. The pipeline on one
 * screen: optimize as relayc run does (hoist, the level-2 pipeline), take
 * the entry's A-normal form, split its parameters into weights (found in
 * the parameter set) and data arguments, emit the body (emit_fn.c), then
 * assemble NAME.c from the runtime's files (rt/, only those the body
 * uses), the context code and the body, and write every file whole.
 * Weights become NAME.weights (layout in rt/weights.c) or C arrays.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "backend/c/emit.h"
#include "backend/c/rt_text.h"
#include "relayc/pass.h"

/* ---- names ---- */

static bool is_keyword(const char *s) {
    static const char *const kw[] = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
                                     "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
                                     "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
                                     "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "ctx",
                                     "need", "sp", "rc", "count", "g", "i", "o", "main", "NULL"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(s, kw[i]) == 0) return true;
    return false;
}

/* The generated code's own locals: b0, k1, a2, t3, i4, out5, o_b6 ... */
static bool is_local(const char *s) {
    size_t pre = strspn(s, "abktio_ut");
    return pre > 0 && pre <= 3 && s[pre] && strspn(s + pre, "0123456789") == strlen(s + pre);
}

static bool is_ident(const char *s) {
    if (!*s || isdigit((unsigned char)*s)) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* A C name for a Relay name: itself where that is a fresh identifier,
 * else prefix + the name with every other character as '_'. */
static const char *c_name(cemit *c, const char *name, const char *prefix) {
    if (is_ident(name) && !is_keyword(name) && !is_local(name) && name[0] != '_') return name;
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", prefix, name);
    for (char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_') *p = '_';
    return ry_arena_strdup(c->a, buf);
}

/* ---- files ---- */

static ry_status write_file(const char *dir, const char *name, const void *data, size_t n, ry_error *err) {
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return ry_error_file(err, dir, "path too long");
    int fd;
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, err)) return RY_ERR;
    const char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w, left -= (size_t)w;
    }
    bool ok = left == 0;
    if (close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) == 0) return RY_OK;
    int e = errno;
    unlink(tmp);
    return ry_error_file(err, path, "cannot write: %s", strerror(e));
}

static ry_status write_sb(const char *dir, const char *name, strbuf *b, ry_error *err) {
    if (b->oom) return ry_error_file(err, dir, "out of memory writing %s", name);
    return write_file(dir, name, b->data ? b->data : "", b->len, err);
}

/* ---- weights ---- */

static void put32(strbuf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    ry_sb_put(b, (const char *)x, 4);
}

static void pad64(strbuf *b) {
    static const char zeros[64];
    if (b->len % 64) ry_sb_put(b, zeros, 64 - b->len % 64);
}

/* The manifest lines "name float32 256,784\n" of the weights in order. */
static void manifest(strbuf *b, int n, const ry_tensor *const *ts, const char *const *names) {
    for (int i = 0; i < n; i++) {
        ry_sb_printf(b, "%s %s ", names[i], ry_dtype_name(ts[i]->dtype));
        for (int k = 0; k < ts[i]->ndim; k++) ry_sb_printf(b, "%s%lld", k ? "," : "", (long long)ts[i]->shape[k]);
        ry_sb_puts(b, "\n");
    }
}

/* The weights file's image (rt/weights.c's layout); offs[i]: weight i's byte offset. */
static void weights_image(strbuf *img, const char *man, int n, const ry_tensor *const *ts, size_t *offs) {
    ry_sb_put(img, "RYCWGT01", 8);
    put32(img, (uint32_t)strlen(man));
    ry_sb_puts(img, man);
    pad64(img);
    for (int i = 0; i < n; i++) {
        offs[i] = img->len;
        ry_sb_put(img, ts[i]->data, ry_tensor_nbytes(ts[i]));
        pad64(img);
    }
    if (!img->oom) put32(img, (uint32_t)crc32(0L, (const unsigned char *)img->data, (uInt)img->len));
}

/* ---- NAME.c ---- */

static void c_string(strbuf *b, const char *s) {
    ry_sb_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '\n') ry_sb_puts(b, "\\n\"\n    \"");
        else if (*s == '"' || *s == '\\') ry_sb_printf(b, "\\%c", *s);
        else ry_sb_printf(b, "%c", *s);
    }
    ry_sb_puts(b, "\"");
}

static const struct {
    uint32_t bit;
    const char *file;
} rt_files[] = {{RT_GEMM, "gemm"},         {RT_CONV2D, "conv2d"}, /* after gemm: it calls rt_gemm */         {RT_POOL_GEOM, "pool_geom"},
                {RT_MAX_POOL2D, "max_pool2d"}, {RT_AVG_POOL2D, "avg_pool2d"}, {RT_SOFTMAX, "softmax"},
                {RT_TRANSPOSE, "transpose"}, {RT_BATCH_NORM, "batch_norm"}, {RT_REDUCE, "reduce"},
                {RT_LAYER_NORM, "layer_norm"}, {RT_ARGREDUCE, "argreduce"}};

typedef struct wdesc {
    int n;
    const ry_tensor **ts;
    const char **names;
    size_t *offs;
    size_t size; /* the file's */
} wdesc;

static void emit_context(strbuf *b, const cemit *c, const cmodel *md, const wdesc *w, const char *man) {
    const char *n = md->name;
    ry_sb_printf(b, "struct %s_ctx {\n    void *blob;\n    const float *w[%d];\n    float *pack[%d];\n"
                    "    rt_scratch scratch;\n    char msg[512];\n};\n\n",
                 n, w->n ? w->n : 1, c->npack ? c->npack : 1);
    if (!md->embed) {
        ry_sb_puts(b, "static const char manifest[] =\n    ");
        c_string(b, man);
        ry_sb_printf(b, ";\nstatic const size_t weights_size = %zu;\nstatic const size_t weight_offset[%d] = {", w->size,
                     w->n ? w->n : 1);
        for (int i = 0; i < w->n; i++) ry_sb_printf(b, "%s%zu", i ? ", " : "", w->offs[i]);
        ry_sb_puts(b, w->n ? "};\n\n" : "0};\n\n");
    }
    ry_sb_printf(b, "static int fail(%s_ctx *ctx, int rc, const char *what) {\n"
                    "    snprintf(ctx->msg, sizeof ctx->msg, \"%%s\", what);\n    return rc;\n}\n\n", n);
    ry_sb_printf(b, "const char *%s_error(const %s_ctx *ctx) { return ctx ? ctx->msg : \"no context\"; }\n\n", n, n);
    ry_sb_printf(b, "void %s_close(%s_ctx *ctx) {\n    if (!ctx) return;\n"
                    "    for (int i = 0; i < %d; i++) free(ctx->pack[i]);\n"
                    "    free(ctx->scratch.p);\n    free(ctx->blob);\n    free(ctx);\n}\n\n",
                 n, n, c->npack);
    ry_sb_printf(b, "int %s_open(%s_ctx **out, const char *weights_path, char *msg, size_t n) {\n"
                    "    char dummy[8];\n    if (!msg) msg = dummy, n = sizeof dummy;\n    msg[0] = 0;\n"
                    "    if (!out) {\n        snprintf(msg, n, \"%s_open: out is NULL\");\n        return RT_E_ARG;\n    }\n"
                    "    *out = NULL;\n    %s_ctx *ctx = calloc(1, sizeof *ctx);\n"
                    "    if (!ctx) {\n        snprintf(msg, n, \"out of memory\");\n        return RT_E_MEMORY;\n    }\n",
                 n, n, n, n);
    if (md->embed) {
        ry_sb_printf(b, "    if (weights_path) {\n        free(ctx);\n"
                        "        snprintf(msg, n, \"%s_open: the weights are built in; weights_path must be NULL\");\n"
                        "        return RT_E_ARG;\n    }\n", n);
        for (int i = 0; i < w->n; i++) ry_sb_printf(b, "    ctx->w[%d] = weight%d;\n", i, i);
    } else {
        ry_sb_printf(b, "    if (!weights_path) {\n        free(ctx);\n        snprintf(msg, n, \"%s_open: weights_path is NULL\");\n"
                        "        return RT_E_ARG;\n    }\n"
                        "    int rc = rt_weights_read(weights_path, manifest, weights_size, &ctx->blob, msg, n);\n"
                        "    if (rc != RT_OK) {\n        free(ctx);\n        return rc;\n    }\n"
                        "    for (int i = 0; i < %d; i++) ctx->w[i] = (const float *)((const char *)ctx->blob + weight_offset[i]);\n",
                     n, w->n);
    }
    for (int i = 0; i < c->npack; i++) ry_sb_printf(b, "    ctx->pack[%d] = NULL;\n", i);
    ry_sb_puts(b, "    int bad = 0;\n");
    /* a packed weight (rt/gemm.c's panels) of a (K, N) GEMM operand */
    for (int i = 0; i < 2 * w->n; i++)
        if (c->pack_of[i] >= 0)
            ry_sb_printf(b, "    bad |= !(ctx->pack[%d] = malloc(sizeof(float) * RT_PACKED(%lld, %lld)));\n", c->pack_of[i],
                         (long long)w->ts[i / 2]->shape[i % 2], (long long)w->ts[i / 2]->shape[1 - i % 2]);
    ry_sb_printf(b, "    if (bad) {\n        %s_close(ctx);\n        snprintf(msg, n, \"out of memory\");\n        return RT_E_MEMORY;\n    }\n", n);
    ry_sb_puts(b, c->open.data ? c->open.data : "");
    ry_sb_puts(b, "    *out = ctx;\n    return RT_OK;\n}\n\n");
}

static bool is_wsym(const cmodel *md, const char *s) {
    for (int i = 0; i < md->nwsyms; i++)
        if (strcmp(md->wsyms[i], s) == 0) return true;
    return false;
}

/* The weights' symbolic dims, as constants of the functions that use them. */
static void wsym_constants(strbuf *b, const cmodel *md) {
    for (int i = 0; i < md->nwsyms; i++)
        ry_sb_printf(b, "    const int64_t %s = %lld;\n    (void)%s;\n", md->wsyms[i], (long long)md->wsym_values[i], md->wsyms[i]);
}

static ry_status emit_entry(strbuf *b, cemit *c, const cmodel *md, const cval *res) {
    const char *n = md->name, *N = md->NAME, *e = md->entry;
    ry_sb_printf(b, "int %s_%s(%s_ctx *ctx", n, e, n);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", int64_t %s", md->syms[i]);
    for (int i = 0; i < md->nargs; i++)
        ry_sb_printf(b, ", const %s *%s", ry_c_ctype(md->args[i]->type->tensor.dtype), md->arg_c[i]);
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, ", %s *out%d", ry_c_ctype(md->outs[i]->dtype), i);
    ry_sb_puts(b, ") {\n    if (!ctx) return RT_E_ARG;\n    ctx->msg[0] = 0;\n");
    wsym_constants(b, md);
    for (int i = 0; i < md->nargs; i++)
        ry_sb_printf(b, "    if (!%s) return fail(ctx, RT_E_ARG, \"%s_%s: input %s is NULL\");\n", md->arg_c[i], n, e, md->arg_c[i]);
    for (int i = 0; i < md->nouts; i++)
        ry_sb_printf(b, "    if (!out%d) return fail(ctx, RT_E_ARG, \"%s_%s: out%d is NULL\");\n", i, n, e, i);
    for (int i = 0; i < md->nsyms; i++)
        ry_sb_printf(b, "    if (%s < 0 || %s > %s_MAX_DIM) {\n"
                        "        snprintf(ctx->msg, sizeof ctx->msg, \"%s_%s: dimension %s = %%lld is outside 0 .. %%lld\", (long long)%s, (long long)%s_MAX_DIM);\n"
                        "        return RT_E_DIM;\n    }\n",
                     md->syms[i], md->syms[i], N, n, e, md->syms[i], md->syms[i], N);
    ry_sb_puts(b, "    size_t need = 0;\n");
    ry_sb_puts(b, c->sizes.data ? c->sizes.data : "");
    ry_sb_puts(b, "    if (rt_reserve(&ctx->scratch, need) != RT_OK) return fail(ctx, RT_E_MEMORY, \"out of memory for the scratch block\");\n");
    ry_sb_puts(b, "    char *sp = ctx->scratch.p;\n    (void)sp;\n");
    ry_sb_puts(b, c->ptrs.data ? c->ptrs.data : "");
    ry_sb_puts(b, c->body.data ? c->body.data : "");
    for (int i = 0; i < md->nouts; i++)
        ry_sb_printf(b, "    memcpy(out%d, %s, sizeof(%s) * (size_t)(%s));\n", i, md->outs[i]->c,
                     ry_c_ctype(md->outs[i]->dtype), ry_c_count(c, md->outs[i]->ndim, md->outs[i]->dims));
    ry_sb_puts(b, "    return RT_OK;\n}\n\n");
    (void)res;
    return RY_OK;
}

/* NAME_ENTRY_run: shapes checked and symbols bound, outputs allocated. */
static void emit_run(strbuf *b, cemit *c, const cmodel *md) {
    const char *n = md->name, *N = md->NAME, *e = md->entry;
    ry_sb_printf(b, "const char *const %s_%s_input_names[%s_%s_NIN + 1] = {", n, e, N, e);
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, "\"%s\", ", md->arg_c[i]);
    ry_sb_puts(b, "NULL};\n\n");
    ry_sb_printf(b, "static int dim_fail(%s_ctx *ctx, const char *what, int k, int64_t got, int64_t want) {\n"
                    "    snprintf(ctx->msg, sizeof ctx->msg, \"%s_%s: input %%s: dimension %%d is %%lld, the model needs %%lld\", what, k, (long long)got, (long long)want);\n"
                    "    return RT_E_DIM;\n}\n\n", n, n, e);
    ry_sb_printf(b, "int %s_%s_run(%s_ctx *ctx, const %s_array *in, %s_array *out) {\n", n, e, n, n, n);
    ry_sb_puts(b, "    if (!ctx) return RT_E_ARG;\n");
    ry_sb_printf(b, "    if (!in || !out) return fail(ctx, RT_E_ARG, \"%s_%s_run: in or out is NULL\");\n", n, e);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, "    int64_t %s = -1;\n", md->syms[i]);
    wsym_constants(b, md);
    for (int i = 0; i < md->nargs; i++) {
        const ry_type *t = md->args[i]->type;
        const char *an = md->arg_c[i];
        ry_sb_printf(b, "    if (in[%d].dtype != %s || !in[%d].data) return fail(ctx, RT_E_ARG, \"%s_%s_run: input %s must be %s data\");\n",
                     i, ry_c_dtype_code(md, t->tensor.dtype), i, n, e, an, ry_dtype_name(t->tensor.dtype));
        ry_sb_printf(b, "    if (in[%d].ndim != %d) return fail(ctx, RT_E_DIM, \"%s_%s_run: input %s must have %d dimensions\");\n",
                     i, t->tensor.ndim, n, e, an, t->tensor.ndim);
        for (int k = 0; k < t->tensor.ndim; k++) {
            const ry_dim *d = &t->tensor.dims[k];
            if (d->kind == RY_DIM_CONST)
                ry_sb_printf(b, "    if (in[%d].shape[%d] != %lld) return dim_fail(ctx, \"%s\", %d, in[%d].shape[%d], %lld);\n", i, k,
                             (long long)d->value, an, k, i, k, (long long)d->value);
            else if (!is_wsym(md, d->name))
                ry_sb_printf(b, "    if (%s < 0) %s = in[%d].shape[%d];\n"
                                "    else if (in[%d].shape[%d] != %s) return dim_fail(ctx, \"%s\", %d, in[%d].shape[%d], %s);\n",
                             d->name, d->name, i, k, i, k, d->name, an, k, i, k, d->name);
            else
                ry_sb_printf(b, "    if (in[%d].shape[%d] != %s) return dim_fail(ctx, \"%s\", %d, in[%d].shape[%d], %s);\n", i,
                             k, d->name, an, k, i, k, d->name);
        }
    }
    for (int i = 0; i < md->nsyms; i++)
        ry_sb_printf(b, "    if (%s < 0 || %s > %s_MAX_DIM) return fail(ctx, RT_E_DIM, \"%s_%s_run: dimension %s out of range\");\n",
                     md->syms[i], md->syms[i], N, n, e, md->syms[i]);
    for (int i = 0; i < md->nouts; i++) {
        const cval *o = md->outs[i];
        ry_sb_printf(b, "    out[%d].dtype = %s;\n    out[%d].ndim = %d;\n", i, ry_c_dtype_code(md, o->dtype), i, o->ndim);
        for (int k = 0; k < o->ndim; k++) ry_sb_printf(b, "    out[%d].shape[%d] = %s;\n", i, k, ry_c_dim(c, &o->dims[k]));
        ry_sb_printf(b, "    out[%d].data = malloc(sizeof(%s) * (size_t)(%s) + 1);\n", i, ry_c_ctype(o->dtype), ry_c_count(c, o->ndim, o->dims));
    }
    ry_sb_puts(b, "    int rc = ");
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, "!out[%d].data || ", i);
    ry_sb_printf(b, "0 ? fail(ctx, RT_E_MEMORY, \"out of memory for the outputs\")\n        : %s_%s(ctx", n, e);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", %s", md->syms[i]);
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, ", in[%d].data", i);
    for (int i = 0; i < md->nouts; i++) ry_sb_printf(b, ", out[%d].data", i);
    ry_sb_puts(b, ");\n    if (rc != RT_OK)\n");
    ry_sb_printf(b, "        for (int i = 0; i < %d; i++) {\n            free(out[i].data);\n            out[i].data = NULL;\n        }\n", md->nouts);
    ry_sb_puts(b, "    return rc;\n}\n");
}

static void emit_weights_arrays(strbuf *b, const wdesc *w) {
    for (int i = 0; i < w->n; i++) {
        const ry_tensor *t = w->ts[i];
        const float *x = t->data;
        ry_sb_printf(b, "/* %s */\nstatic const float weight%d[%lld] = {", w->names[i], i, (long long)(t->size ? t->size : 1));
        for (int64_t k = 0; k < t->size; k++) {
            if (k % 6 == 0) ry_sb_puts(b, "\n    ");
            double v = x[k];
            if (v != v) ry_sb_puts(b, "NAN, ");
            else if (v > 3.5e38 || v < -3.5e38) ry_sb_puts(b, v > 0 ? "INFINITY, " : "-INFINITY, ");
            else ry_sb_printf(b, "%af, ", v);
        }
        ry_sb_puts(b, t->size ? "\n};\n" : "0};\n");
    }
}

static ry_status model_c(strbuf *b, cemit *c, const cmodel *md, const wdesc *w, const char *man, const cval *res) {
    ry_sb_printf(b, "/* %s.c: generated by relayc export from %s, entry @%s. Do not edit. */\n", md->name, md->source,
                 md->entry);
    ry_sb_puts(b, "/* let gcc vectorize the loops at -O2 (clang does), and keep short copies inline rather than calls of memcpy */\n"
                  "#if defined(__GNUC__) && !defined(__clang__)\n"
                  "#pragma GCC optimize(\"tree-vectorize\", \"vect-cost-model=dynamic\", \"no-tree-loop-distribute-patterns\")\n#endif\n\n");
    ry_sb_printf(b, "#include <float.h>\n#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                    "#include \"%s.h\"\n\n", md->name);
    ry_sb_puts(b, ry_c_rt_text("core"));
    if (!md->embed) {
        ry_sb_puts(b, "\n");
        ry_sb_puts(b, ry_c_rt_text("weights"));
    }
    for (size_t i = 0; i < sizeof rt_files / sizeof rt_files[0]; i++)
        if (c->rt & rt_files[i].bit) {
            ry_sb_puts(b, "\n");
            ry_sb_puts(b, ry_c_rt_text(rt_files[i].bit == RT_GEMM && md->blas ? "gemm_blas" : rt_files[i].file));
        }
    ry_sb_puts(b, "\n/* ---- the model ---- */\n\n");
    if (md->embed) emit_weights_arrays(b, w);
    ry_sb_puts(b, c->file.data ? c->file.data : "");
    emit_context(b, c, md, w, man);
    if (emit_entry(b, c, md, res)) return RY_ERR;
    emit_run(b, c, md);
    return RY_OK;
}

/* ---- the driver ---- */

static void flatten(cemit *c, const cval *v, cmodel *md, int cap) {
    if (v->tuple) {
        for (int i = 0; i < v->n; i++) flatten(c, v->fields[i], md, cap);
    } else if (md->nouts < cap) {
        md->outs[md->nouts++] = v;
    }
}

static int count_tensors(const cval *v) {
    if (!v->tuple) return 1;
    int n = 0;
    for (int i = 0; i < v->n; i++) n += count_tensors(v->fields[i]);
    return n;
}

static bool has_sym(const cmodel *md, const char *s) {
    for (int i = 0; i < md->nsyms; i++)
        if (strcmp(md->syms[i], s) == 0) return true;
    return false;
}

/* Every symbolic dim of v is one of the entry's. */
static ry_status check_syms(cemit *c, const cmodel *md, const cval *v, ry_span span) {
    if (v->tuple) {
        for (int i = 0; i < v->n; i++)
            if (check_syms(c, md, v->fields[i], span)) return RY_ERR;
        return RY_OK;
    }
    for (int i = 0; i < v->ndim; i++)
        if (v->dims[i].kind == RY_DIM_SYM && !has_sym(md, v->dims[i].name))
            return ry_c_fail(c, span, "the result's dimension %s is not a dimension of the inputs", v->dims[i].name);
    return RY_OK;
}

/* A weight's symbolic dim d (a vocabulary's size) is the constant v its
 * tensor gives, the same in every weight. */
static ry_status weight_sym(cemit *c, cmodel *md, const ry_var *p, const ry_dim *d, int64_t v) {
    if (d->kind != RY_DIM_SYM) return RY_OK;
    for (int k = 0; k < md->nwsyms; k++)
        if (strcmp(md->wsyms[k], d->name) == 0) {
            if (md->wsym_values[k] == v) return RY_OK;
            return ry_c_fail(c, p->span, "weight %%%s has %s = %lld, another weight %lld", p->name, d->name, (long long)v,
                             (long long)md->wsym_values[k]);
        }
    if (!is_ident(d->name) || is_keyword(d->name) || is_local(d->name))
        return ry_c_fail(c, p->span, "symbolic dimension %s is not a C identifier the export can use", d->name);
    md->wsyms[md->nwsyms] = d->name;
    md->wsym_values[md->nwsyms++] = v;
    return RY_OK;
}

/* Splits fn's parameters: weights (in set) become the context's, the
 * others the entry's arguments, their symbolic dims the entry's first. */
static ry_status classify(cemit *c, const ry_expr *fn, const ry_param_set *set, cmodel *md, wdesc *w, cval **params) {
    int np = fn->func.nparams;
    md->args = RY_NEW_ARRAY(c->a, const ry_var *, np + 1);
    md->arg_c = RY_NEW_ARRAY(c->a, const char *, np + 1);
    md->syms = RY_NEW_ARRAY(c->a, const char *, np * RY_MAX_RANK + 1);
    md->wsyms = RY_NEW_ARRAY(c->a, const char *, np * RY_MAX_RANK + 1);
    md->wsym_values = RY_NEW_ARRAY(c->a, int64_t, np * RY_MAX_RANK + 1);
    c->weight_vars = RY_NEW_ARRAY(c->a, const ry_var *, np + 1);
    c->pack_of = RY_NEW_ARRAY(c->a, int, 2 * np + 1);
    w->ts = RY_NEW_ARRAY(c->a, const ry_tensor *, np + 1);
    w->names = RY_NEW_ARRAY(c->a, const char *, np + 1);
    w->offs = RY_NEW_ARRAY(c->a, size_t, np + 1);
    char buf[256], got[128];
    for (int k = 0; set && k < set->n; k++) {
        bool found = false;
        for (int i = 0; i < np && !found; i++) found = strcmp(fn->func.params[i]->name, set->names[k]) == 0;
        if (!found)
            return ry_c_fail(c, fn->span, "the weights hold %s, which @%s does not take (another model's?)", set->names[k],
                             md->entry);
    }
    for (int i = 0; i < np; i++) {
        const ry_var *p = fn->func.params[i];
        const ry_type *t = p->type;
        if (!t || t->kind != RY_TYPE_TENSOR)
            return ry_c_fail(c, p->span, "parameter %%%s has type %s (the export takes tensor parameters so far)", p->name,
                             t ? ry_type_str(t, buf, sizeof buf) : "unknown");
        int k = set ? ry_params_find(set, p->name) : -1;
        cval *v = RY_NEW(c->a, cval);
        v->dtype = t->tensor.dtype;
        v->ndim = t->tensor.ndim;
        memcpy(v->dims, t->tensor.dims, sizeof *v->dims * (size_t)v->ndim);
        v->weight = -1;
        params[i] = v;
        if (k >= 0) {
            const ry_tensor *x = set->views[k];
            bool ok = x->dtype == t->tensor.dtype && x->ndim == t->tensor.ndim;
            for (int d = 0; ok && d < x->ndim; d++) {
                ok = t->tensor.dims[d].kind != RY_DIM_ANY && (t->tensor.dims[d].kind != RY_DIM_CONST || t->tensor.dims[d].value == x->shape[d]);
                v->dims[d] = (ry_dim){.kind = RY_DIM_CONST, .value = x->shape[d]};
            }
            if (!ok)
                return ry_c_fail(c, p->span, "parameter %%%s is %s, but the weights hold %s", p->name,
                                 ry_type_str(t, buf, sizeof buf), ry_tensor_describe(x, got, sizeof got));
            if (x->dtype != RY_FLOAT32) return ry_c_fail(c, p->span, "weight %%%s: only float32 weights are exported so far", p->name);
            for (int d = 0; d < x->ndim; d++)
                if (weight_sym(c, md, p, &t->tensor.dims[d], x->shape[d])) return RY_ERR;
            c->pack_of[2 * w->n] = c->pack_of[2 * w->n + 1] = -1;
            v->weight = w->n;
            v->c = ry_c_fmt(c, "ctx->w[%d]", w->n);
            c->weight_vars[w->n] = p;
            w->ts[w->n] = x;
            w->names[w->n++] = set->names[k];
            continue;
        }
        if (!ry_c_ctype(t->tensor.dtype)) return ry_c_fail(c, p->span, "parameter %%%s: dtype %s has no C type", p->name, ry_dtype_name(t->tensor.dtype));
        md->args[md->nargs] = p;
        v->c = md->arg_c[md->nargs++] = c_name(c, p->name, "arg_");
        for (int d = 0; d < t->tensor.ndim; d++) {
            const ry_dim *dd = &t->tensor.dims[d];
            if (dd->kind == RY_DIM_ANY)
                return ry_c_fail(c, p->span, "parameter %%%s: a dimension ? (known only at run time) is not exported yet; name it", p->name);
            bool fixed = false;
            for (int k = 0; k < md->nwsyms && dd->kind == RY_DIM_SYM; k++) fixed |= strcmp(md->wsyms[k], dd->name) == 0;
            if (dd->kind == RY_DIM_SYM && !fixed && !has_sym(md, dd->name)) {
                if (!is_ident(dd->name) || is_keyword(dd->name) || is_local(dd->name))
                    return ry_c_fail(c, p->span, "symbolic dimension %s is not a C identifier the export can use", dd->name);
                md->syms[md->nsyms++] = dd->name;
            }
        }
    }
    for (int i = 0; i < md->nargs; i++)
        for (int s = 0; s < md->nsyms; s++)
            if (strcmp(md->arg_c[i], md->syms[s]) == 0)
                return ry_c_fail(c, md->args[i]->span, "parameter %%%s has the name of a symbolic dimension", md->args[i]->name);
    c->nweights = w->n;
    c->syms = RY_NEW_ARRAY(c->a, const char *, md->nsyms + md->nwsyms + 1);
    for (int i = 0; i < md->nsyms; i++) c->syms[c->nsyms++] = md->syms[i];
    for (int i = 0; i < md->nwsyms; i++) c->syms[c->nsyms++] = md->wsyms[i];
    return RY_OK;
}

static const char *upper(cemit *c, const char *s) {
    char *u = ry_arena_strdup(c->a, s);
    for (char *p = u; *p; p++) *p = (char)toupper((unsigned char)*p);
    return u;
}

static ry_status make_dir(const char *dir, ry_error *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return ry_error_file(err, dir, "cannot create: %s", strerror(errno));
    return RY_OK;
}

static ry_status write_all(const char *dir, cemit *c, cmodel *md, wdesc *w, const cval *res, ry_error *err) {
    strbuf man = {0}, img = {0}, code = {0}, hdr = {0}, mk = {0}, rd = {0}, ex = {0};
    manifest(&man, w->n, w->ts, w->names);
    ry_status st = RY_OK;
    if (!md->embed) {
        weights_image(&img, man.data ? man.data : "", w->n, w->ts, w->offs);
        w->size = img.len;
    }
    st = model_c(&code, c, md, w, man.data ? man.data : "", res);
    ry_c_write_header(&hdr, md);
    ry_c_write_makefile(&mk, md);
    ry_c_write_readme(&rd, md);
    ry_c_write_example(&ex, md);
    char name[300];
    if (st == RY_OK) st = make_dir(dir, err);
    if (st == RY_OK && !md->embed) {
        snprintf(name, sizeof name, "%s.weights", md->name);
        st = write_sb(dir, name, &img, err);
    }
    snprintf(name, sizeof name, "%s.c", md->name);
    if (st == RY_OK) st = write_sb(dir, name, &code, err);
    snprintf(name, sizeof name, "%s.h", md->name);
    if (st == RY_OK) st = write_sb(dir, name, &hdr, err);
    if (st == RY_OK) st = write_sb(dir, "Makefile", &mk, err);
    if (st == RY_OK) st = write_sb(dir, "README", &rd, err);
    if (st == RY_OK) st = write_sb(dir, "example.c", &ex, err);
    strbuf *all[] = {&man, &img, &code, &hdr, &mk, &rd, &ex};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ry_free(all[i]->data);
    return st;
}

ry_status ry_export_c(ry_module *m, const char *entry, const ry_param_set *weights, const char *dir,
                      const ry_export_opts *opts, ry_error *err) {
    ry_export_opts o = opts ? *opts : (ry_export_opts){0};
    const char *name = o.name ? o.name : "model";
    if (!is_ident(name) || is_keyword(name)) return ry_error_file(err, dir, "export: the name '%s' is not a C identifier", name);
    if (ry_hoist(m, err) || ry_optimize(m, 2, err)) return RY_ERR;
    ry_global *g = ry_module_find_global(m, entry);
    if (!g) return ry_error_file(err, o.source ? o.source : dir, "export: no global @%s", entry);
    if (!is_ident(entry) || is_keyword(entry))
        return ry_error_at(err, g->span, "export: the entry's name @%s is not a C identifier", entry);
    cemit c = {.a = ry_arena_new(), .err = err};
    cmodel md = {.name = name, .NAME = upper(&c, name), .entry = entry, .source = o.source ? o.source : "a module",
                 .embed = o.embed_weights, .blas = o.blas};
    wdesc w = {0};
    const ry_expr *fn = ry_anf(m, g->func);
    cval **params = RY_NEW_ARRAY(c.a, cval *, fn->func.nparams + 1);
    cval *res = NULL;
    ry_status st = classify(&c, fn, weights, &md, &w, params);
    if (st == RY_OK) st = ry_c_emit_body(&c, fn, params, &res);
    if (st == RY_OK) st = check_syms(&c, &md, res, fn->span);
    if (st == RY_OK) {
        int n = count_tensors(res);
        md.outs = RY_NEW_ARRAY(c.a, const cval *, n + 1);
        flatten(&c, res, &md, n);
        st = write_all(dir, &c, &md, &w, res, err);
    }
    strbuf *bufs[] = {&c.body, &c.sizes, &c.ptrs, &c.file, &c.open};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ry_free(bufs[i]->data);
    ry_arena_free(c.a);
    return st;
}
