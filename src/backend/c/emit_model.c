/*
 * emit_model.c: NAME.c of an export around the entry's body (emit_fn.c's):
 * the runtime's files the body uses (rt/, copied in), the weights as C
 * arrays when embedded, the context (open: read and check the weights file,
 * pack the weights GEMMs read; close; the last error), the C entry (its
 * arguments checked, the scratch block carved, the body, the results
 * copied out) and its shaped-array form NAME_ENTRY_run (dtypes, ranks and
 * dims checked, symbols bound, outputs allocated).
 */
#include <math.h>
#include <string.h>

#include "backend/c/emit.h"
#include "backend/c/rt_text.h"

static void c_string(strbuf *b, const char *s) {
    ry_sb_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '\n') ry_sb_puts(b, "\\n\"\n    \"");
        else if (*s == '"' || *s == '\\') ry_sb_printf(b, "\\%c", *s);
        else ry_sb_printf(b, "%c", *s);
    }
    ry_sb_puts(b, "\"");
}

/* The runtime's files by RT_* bit: a shared file (types, geometry) once
 * when either dtype's code uses it, first, then the GEMM's files, then the
 * kernels, one copy per float dtype used (float32: c->rt, float64:
 * c->rt64) in the order below (a convolution calls the GEMM's kernel,
 * written before them). */
static const struct {
    uint32_t bit;
    const char *shared, *typed;
} rt_files[] = {{RT_CONV2D, "conv_geom", "conv2d"}, {RT_POOL_GEOM, "pool_geom", NULL},
                {RT_MAX_POOL2D, NULL, "max_pool2d"}, {RT_AVG_POOL2D, "pool_divisor", "avg_pool2d"},
                {RT_SOFTMAX, NULL, "softmax"}, {RT_TRANSPOSE, NULL, "transpose"}, {RT_BATCH_NORM, NULL, "batch_norm"},
                {RT_REDUCE, NULL, "reduce"}, {RT_LAYER_NORM, NULL, "layer_norm"}, {RT_ARGREDUCE, NULL, "argreduce"},
                {RT_PAD, "pad", NULL}, {RT_GROUP_NORM, NULL, "group_norm"}, {RT_LRN, NULL, "lrn"},
                {RT_L2_NORMALIZE, NULL, "l2_normalize"}, {RT_HALF_WIDEN, "half_widen", NULL}, {RT_HALF_NARROW, "half_narrow", NULL},
                {RT_CONV2D_T, "convt_geom", "conv2d_transpose"}, {RT_ADAPTIVE_POOL, NULL, "adaptive_pool2d"}};

/* The typed files' names for a dtype: RT_T the element type, RT_(f) a
 * kernel's name in this copy, RT_EXP its exp, RT_LOWEST its lowest finite
 * value. */
static const char *dtype_macros[2] = {
    "#define RT_T float\n#define RT_(f) f\n#define RT_EXP expf\n#define RT_LOWEST (-FLT_MAX)\n",
    "#define RT_T double\n#define RT_(f) f##_f64\n#define RT_EXP exp\n#define RT_LOWEST (-DBL_MAX)\n"};

static void write_runtime(strbuf *b, const cemit *c, const cmodel *md) {
    /* the shared files first (conv_direct.c reads conv_geom.c's rt_conv) */
    for (size_t i = 0; i < sizeof rt_files / sizeof rt_files[0]; i++)
        if ((c->rt | c->rt64) & rt_files[i].bit && rt_files[i].shared) {
            ry_sb_puts(b, "\n");
            ry_sb_puts(b, ry_c_rt_text(rt_files[i].shared));
        }
    /* then the GEMM's files: --blas replaces the float32 ones by cblas_sgemm */
    const char *gemm[5] = {c->rt & RT_GEMM_KERNEL ? "gemm_kernel" : NULL, c->rt & RT_GEMM ? "gemm" : NULL,
                           c->rt & RT_CONV2D ? "gemm_rows" : NULL, c->rt & RT_CONV2D ? "conv_direct" : NULL,
                           c->rt64 & (RT_GEMM | RT_GEMM_KERNEL) ? "gemm_f64" : NULL};
    if (md->blas && (gemm[0] || gemm[1])) gemm[0] = "gemm_blas", gemm[1] = gemm[2] = gemm[3] = NULL;
    for (int i = 0; i < 5; i++)
        if (gemm[i]) {
            ry_sb_puts(b, "\n");
            ry_sb_puts(b, ry_c_rt_text(gemm[i]));
        }
    for (int d = 0; d < 2; d++) {
        uint32_t bits = d ? c->rt64 : c->rt;
        bool any = false;
        for (size_t i = 0; i < sizeof rt_files / sizeof rt_files[0]; i++) any |= (bits & rt_files[i].bit) && rt_files[i].typed;
        if (!any) continue;
        ry_sb_printf(b, "\n/* ---- the %s kernels ---- */\n%s", d ? "float64" : "float32", dtype_macros[d]);
        for (size_t i = 0; i < sizeof rt_files / sizeof rt_files[0]; i++)
            if (bits & rt_files[i].bit && rt_files[i].typed) {
                ry_sb_puts(b, "\n");
                ry_sb_puts(b, ry_c_rt_text(rt_files[i].typed));
            }
        ry_sb_puts(b, "#undef RT_T\n#undef RT_\n#undef RT_EXP\n#undef RT_LOWEST\n");
    }
}


static void emit_context(strbuf *b, const cemit *c, const cmodel *md, const ry_c_weights *w, const char *man) {
    const char *n = md->name;
    ry_sb_printf(b, "struct %s_ctx {\n    void *blob;\n    const void *w[%d]; /* float or double, as the weight's dtype */\n"
                    "    void *pack[%d];    /* weights made GEMM operands when the context opens: float or double */\n"
                    "    rt_scratch scratch;\n    char msg[512];\n",
                 n, w->n ? w->n : 1, c->npack ? c->npack : 1);
    if (md->dyn) ry_sb_puts(b, "    rt_arena arena;  /* a call's values and buffers, reset when it starts */\n"
                               "    rt_arena values; /* the caller's ADT values */\n    int depth;\n"
                               "    rt_scratch keep; /* a function's result while its frame is dropped */\n");
    ry_sb_puts(b, "};\n\n");
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
                    "%s    free(ctx->scratch.p);\n    free(ctx->blob);\n    free(ctx);\n}\n\n",
                 n, n, c->npack, md->dyn ? "    rt_arena_free(&ctx->arena);\n    rt_arena_free(&ctx->values);\n    free(ctx->keep.p);\n" : "");
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
                        "    for (int i = 0; i < %d; i++) ctx->w[i] = (const char *)ctx->blob + weight_offset[i];\n",
                     n, w->n);
    }
    for (int i = 0; i < c->npack; i++) ry_sb_printf(b, "    ctx->pack[%d] = NULL;\n", i);
    ry_sb_puts(b, "    int bad = 0;\n");
    /* a weight as a (K, N) GEMM operand: float32 packed (rt/gemm.c's panels), float64 transposed */
    for (int i = 0; i < c->npack; i++) {
        const struct ry_c_pack *p = &c->packs[i];
        if (p->dtype == RY_FLOAT64)
            ry_sb_printf(b, "    bad |= !(ctx->pack[%d] = malloc(sizeof(double) * (size_t)%s * %s));\n", i, p->K, p->N);
        else ry_sb_printf(b, "    bad |= !(ctx->pack[%d] = malloc(sizeof(float) * RT_PACKED(%s, %s)));\n", i, p->K, p->N);
    }
    ry_sb_printf(b, "    if (bad) {\n        %s_close(ctx);\n        snprintf(msg, n, \"out of memory\");\n        return RT_E_MEMORY;\n    }\n", n);
    ry_sb_puts(b, c->open.data ? c->open.data : "");
    if (md->nsyms == 0)
        ry_sb_printf(b, "    size_t o[%d];\n    if (rt_reserve(&ctx->scratch, scratch_layout(o)) != RT_OK) {\n        %s_close(ctx);\n"
                        "        snprintf(msg, n, \"out of memory for the scratch block\");\n        return RT_E_MEMORY;\n    }\n",
                     c->nbuf + 1, md->name);
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

/* scratch_layout(o, dims...): each scratch buffer's offset into o, the
 * block's size as the return value (a static-shape entry's block is
 * reserved when the context opens, so no call allocates). */
static void emit_layout(strbuf *b, const cemit *c, const cmodel *md) {
    ry_sb_puts(b, "static size_t scratch_layout(size_t *o");
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", int64_t %s", md->syms[i]);
    ry_sb_puts(b, ") {\n    size_t need = 0;\n    (void)o;\n");
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, "    (void)%s;\n", md->syms[i]);
    wsym_constants(b, md);
    ry_sb_puts(b, c->sizes.data ? c->sizes.data : "");
    ry_sb_puts(b, "    return need;\n}\n\n");
}

static ry_status emit_entry(strbuf *b, cemit *c, const cmodel *md) {
    const char *n = md->name, *N = md->NAME, *e = md->entry;
    ry_c_entry_signature(b, md);
    ry_sb_puts(b, " {\n    if (!ctx) return RT_E_ARG;\n    ctx->msg[0] = 0;\n");
    if (md->dyn) /* (void): the runtime's frame functions, which a program with refs does not call, and
                  * its boxing, which one without values that cross a call does not (run-time dims only) */
        ry_sb_puts(b, "    rt_arena_reset(&ctx->arena);\n    ctx->depth = 0;\n    int rc = RT_OK;\n    (void)rc;\n"
                      "    (void)rt_keep;\n    (void)rt_arena_mark;\n    (void)rt_tensor;\n    (void)rt_copy_out;\n");
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
    ry_sb_printf(b, "    size_t o[%d];\n    size_t need = scratch_layout(o", c->nbuf + 1);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", %s", md->syms[i]);
    ry_sb_puts(b, ");\n");
    ry_sb_puts(b, "    if (rt_reserve(&ctx->scratch, need) != RT_OK) return fail(ctx, RT_E_MEMORY, \"out of memory for the scratch block\");\n");
    ry_sb_puts(b, "    char *sp = ctx->scratch.p;\n    (void)sp;\n");
    ry_sb_puts(b, c->ptrs.data ? c->ptrs.data : "");
    ry_sb_puts(b, c->body.data ? c->body.data : "");
    /* value results first: their copies fail before an output is allocated */
    for (int i = 0; i < md->nouts; i++)
        if (md->out_value[i])
            ry_sb_printf(b, "    if (!(*out%d = (%s_value *)rt_copy_out(&ctx->values, %s)))\n"
                            "        return fail(ctx, RT_E_MEMORY, \"out of memory for the outputs\");\n",
                         i, n, md->outs[i]->c);
    for (int i = 0; i < md->nouts; i++) {
        const cval *o = md->outs[i];
        if (md->out_value[i]) continue;
        const char *count = ry_c_count(c, o->ndim, o->dims), *ct = ry_c_ctype(o->dtype);
        if (!md->out_dyn[i]) {
            ry_sb_printf(b, "    memcpy(out%d, %s, sizeof(%s) * (size_t)(%s));\n", i, o->c, ct, count);
            continue;
        }
        /* its shape is known now: a new buffer of it */
        ry_sb_printf(b, "    out%d->dtype = %s;\n    out%d->ndim = %d;\n", i, ry_c_dtype_code(md, o->dtype), i, o->ndim);
        for (int k = 0; k < o->ndim; k++) ry_sb_printf(b, "    out%d->shape[%d] = %s;\n", i, k, ry_c_dim(c, &o->dims[k]));
        ry_sb_printf(b, "    out%d->data = malloc(sizeof(%s) * (size_t)(%s) + 1);\n    if (!out%d->data) {\n", i, ct, count, i);
        for (int k = 0; k < i; k++) /* the outputs filled before it: released, so a failure leaves none */
            if (md->out_dyn[k]) ry_sb_printf(b, "        free(out%d->data);\n        out%d->data = NULL;\n", k, k);
        ry_sb_printf(b, "        return fail(ctx, RT_E_MEMORY, \"out of memory for the outputs\");\n    }\n"
                        "    memcpy(out%d->data, %s, sizeof(%s) * (size_t)(%s));\n",
                     i, o->c, ct, count);
    }
    ry_sb_puts(b, "    return RT_OK;\n}\n\n");
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
    ry_sb_puts(b, "    (void)dim_fail; /* unused where every input is a scalar */\n    if (!ctx) return RT_E_ARG;\n");
    ry_sb_printf(b, "    if (!in || !out) return fail(ctx, RT_E_ARG, \"%s_%s_run: in or out is NULL\");\n", n, e);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, "    int64_t %s = -1;\n", md->syms[i]);
    wsym_constants(b, md);
    for (int i = 0; i < md->nargs; i++) {
        const ry_type *t = md->arg_t[i];
        const char *an = md->arg_c[i];
        if (ry_c_is_value_arg(md->args[i])) {
            ry_sb_printf(b, "    if (in[%d].dtype != %s_VALUE || !in[%d].data) return fail(ctx, RT_E_ARG, \"%s_%s_run: input %s must be a %s value\");\n",
                         i, N, i, n, e, an, t->call.adt->name);
            continue;
        }
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
        if (md->out_value[i]) {
            ry_sb_printf(b, "    out[%d].dtype = %s_VALUE;\n    out[%d].ndim = 0;\n    out[%d].data = NULL;\n", i, N, i, i);
            continue;
        }
        if (md->out_dyn[i]) { /* the entry fills it */
            ry_sb_printf(b, "    out[%d].data = NULL;\n", i);
            continue;
        }
        ry_sb_printf(b, "    out[%d].dtype = %s;\n    out[%d].ndim = %d;\n", i, ry_c_dtype_code(md, o->dtype), i, o->ndim);
        for (int k = 0; k < o->ndim; k++) ry_sb_printf(b, "    out[%d].shape[%d] = %s;\n", i, k, ry_c_dim(c, &o->dims[k]));
        ry_sb_printf(b, "    out[%d].data = malloc(sizeof(%s) * (size_t)(%s) + 1);\n", i, ry_c_ctype(o->dtype), ry_c_count(c, o->ndim, o->dims));
    }
    for (int i = 0; i < md->nouts; i++)
        if (md->out_value[i]) ry_sb_printf(b, "    %s_value *value%d = NULL;\n", n, i);
    ry_sb_puts(b, "    int rc = ");
    for (int i = 0; i < md->nouts; i++)
        if (!md->out_dyn[i] && !md->out_value[i]) ry_sb_printf(b, "!out[%d].data || ", i);
    ry_sb_printf(b, "0 ? fail(ctx, RT_E_MEMORY, \"out of memory for the outputs\")\n        : %s_%s(ctx", n, e);
    for (int i = 0; i < md->nsyms; i++) ry_sb_printf(b, ", %s", md->syms[i]);
    for (int i = 0; i < md->nargs; i++) ry_sb_printf(b, ", in[%d].data", i);
    for (int i = 0; i < md->nouts; i++)
        ry_sb_printf(b, md->out_value[i] ? ", &value%d" : md->out_dyn[i] ? ", &out[%d]" : ", out[%d].data", i);
    ry_sb_puts(b, ");\n    if (rc != RT_OK)\n");
    ry_sb_printf(b, "        for (int i = 0; i < %d; i++) {\n            if (out[i].dtype != %s_VALUE) free(out[i].data);\n"
                    "            out[i].data = NULL;\n        }\n", md->nouts, N);
    for (int i = 0; i < md->nouts; i++)
        if (md->out_value[i]) ry_sb_printf(b, "    out[%d].data = value%d;\n", i, i);
    ry_sb_puts(b, "    return rc;\n}\n");
}

static void emit_weights_arrays(strbuf *b, const ry_c_weights *w) {
    for (int i = 0; i < w->n; i++) {
        const ry_tensor *t = w->ts[i];
        bool f64 = t->dtype == RY_FLOAT64; /* else float32 (export.c takes no other) */
        ry_sb_printf(b, "/* %s */\nstatic const %s weight%d[%lld] = {", w->names[i], f64 ? "double" : "float", i,
                     (long long)(t->size ? t->size : 1));
        for (int64_t k = 0; k < t->size; k++) {
            if (k % 6 == 0) ry_sb_puts(b, "\n    ");
            double v = f64 ? ((const double *)t->data)[k] : ((const float *)t->data)[k];
            if (v != v) ry_sb_puts(b, "NAN, ");
            else if (isinf(v)) ry_sb_puts(b, v > 0 ? "INFINITY, " : "-INFINITY, ");
            else ry_sb_printf(b, f64 ? "%a, " : "%af, ", v);
        }
        ry_sb_puts(b, t->size ? "\n};\n" : "0};\n");
    }
}

ry_status ry_c_write_model(strbuf *b, cemit *c, const cmodel *md, const ry_c_weights *w, const char *man) {
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
    if (md->dyn) {
        ry_sb_puts(b, "\n");
        ry_sb_puts(b, ry_c_rt_text("value"));
    }
    if (md->tree) {
        ry_sb_puts(b, "\n");
        ry_sb_puts(b, ry_c_rt_text("ptb"));
    }
    write_runtime(b, c, md);
    ry_sb_puts(b, "\n/* ---- the model ---- */\n\n");
    if (md->embed) emit_weights_arrays(b, w);
    ry_sb_puts(b, c->file.data ? c->file.data : "");
    emit_layout(b, c, md);
    emit_context(b, c, md, w, man);
    ry_c_write_values(b, md);
    if (c->protos.data) {
        ry_sb_puts(b, "/* the globals and closures the entry reaches (emit_ctl.c) */\n");
        ry_sb_puts(b, c->protos.data);
        ry_sb_puts(b, "\n");
        ry_sb_puts(b, c->funcs.data ? c->funcs.data : "");
    }
    if (emit_entry(b, c, md)) return RY_ERR;
    emit_run(b, c, md);
    return RY_OK;
}

