/*
 * emit_values.c: the ADT values an exported entry takes, as the header
 * offers them: NAME_value, one constructor function per constructor whose
 * fields C can give (scalars and other values), NAME_values_clear, and
 * for a tree type (a leaf of a word [and a label], a binary node [and a
 * label]) NAME_parse_tree over the PTB bracket format (rt/ptb.c). Values
 * live in the context's second arena until NAME_values_clear.
 */
#include <string.h>

#include "backend/c/emit.h"

bool ry_c_is_value_arg(const ry_var *p) { return p->type && p->type->kind == RY_TYPE_CALL && p->type->call.adt; }

static bool scalar_field(const ry_type *t) {
    return t && t->kind == RY_TYPE_TENSOR && t->tensor.ndim == 0 && ry_c_ctype(t->tensor.dtype);
}

static bool adt_field(const ry_type *t) { return t && t->kind == RY_TYPE_CALL && t->call.adt; }

bool ry_c_ctor_buildable(const ry_ctor *k) {
    for (int i = 0; i < k->nfields; i++)
        if (!scalar_field(k->fields[i]) && !adt_field(k->fields[i])) return false;
    return true;
}

/* "mlp_value *mlp_Leaf(mlp_ctx *ctx, int32_t f0, int32_t f1)" */
static void ctor_signature(strbuf *b, const cmodel *md, const ry_ctor *k) {
    ry_sb_printf(b, "%s_value *%s_%s(%s_ctx *ctx", md->name, md->name, k->name, md->name);
    for (int i = 0; i < k->nfields; i++) {
        if (scalar_field(k->fields[i])) ry_sb_printf(b, ", %s f%d", ry_c_ctype(k->fields[i]->tensor.dtype), i);
        else ry_sb_printf(b, ", const %s_value *f%d", md->name, i);
    }
    ry_sb_puts(b, ")");
}

/* The constructors' roles when td is a tree: Leaf(int32[, int32]) and Node(T, T[, int32]). */
static bool tree_shape(const ry_typedef *td, int *leaf, int *node) {
    if (td->nctors != 2) return false;
    *leaf = *node = -1;
    for (int i = 0; i < 2; i++) {
        const ry_ctor *k = td->ctors[i];
        bool rec = k->nfields >= 2 && adt_field(k->fields[0]) && k->fields[0]->call.adt == td && adt_field(k->fields[1]) &&
                   k->fields[1]->call.adt == td;
        bool ints = true;
        for (int f = rec ? 2 : 0; f < k->nfields; f++)
            ints &= scalar_field(k->fields[f]) && k->fields[f]->tensor.dtype == RY_INT32;
        if (rec && ints && (k->nfields == 2 || k->nfields == 3)) *node = i;
        else if (!rec && ints && (k->nfields == 1 || k->nfields == 2)) *leaf = i;
    }
    return *leaf >= 0 && *node >= 0 && *leaf != *node &&
           (td->ctors[*leaf]->nfields == 2) == (td->ctors[*node]->nfields == 3);
}

/* The ADTs of the entry's value arguments, and the tree among them. */
void ry_c_collect_adts(cemit *c, cmodel *md) {
    md->adts = RY_NEW_ARRAY(c->a, const ry_typedef *, md->nargs + 1);
    for (int i = 0; i < md->nargs; i++) {
        if (!ry_c_is_value_arg(md->args[i])) continue;
        const ry_typedef *td = md->args[i]->type->call.adt;
        bool seen = false;
        for (int k = 0; k < md->nadts; k++) seen |= md->adts[k] == td;
        if (!seen) md->adts[md->nadts++] = td;
        int l, n;
        if (!md->tree && tree_shape(td, &l, &n)) md->tree = td;
    }
}

void ry_c_write_value_decls(strbuf *b, const cmodel *md) {
    const char *n = md->name;
    if (!md->nadts) return;
    ry_sb_printf(b, "/* An ADT value the entry takes, built by the constructors below in the\n"
                    " * context (its second arena: the values stay until %s_values_clear or\n"
                    " * %s_close). NULL on failure (%s_error says why: out of memory, a NULL\n"
                    " * field). Pass only values of the same context. */\n"
                    "typedef struct %s_value %s_value;\n",
                 n, n, n, n, n);
    for (int t = 0; t < md->nadts; t++)
        for (int i = 0; i < md->adts[t]->nctors; i++) {
            const ry_ctor *k = md->adts[t]->ctors[i];
            if (!ry_c_ctor_buildable(k)) {
                ry_sb_printf(b, "/* %s (of %s) has a field C cannot give yet: no constructor */\n", k->name, md->adts[t]->name);
                continue;
            }
            ctor_signature(b, md, k);
            ry_sb_printf(b, "; /* %s */\n", md->adts[t]->name);
        }
    ry_sb_printf(b, "void %s_values_clear(%s_ctx *ctx);\n", n, n);
    if (md->tree) {
        ry_sb_printf(b, "\n/* A word's id in the model's vocabulary (>= 0), or negative to refuse it. */\n"
                        "typedef int32_t (*%s_word_fn)(void *user, const char *word, size_t len);\n"
                        "/* The tree in PTB's bracket format, \"(3 (2 It) (4 (2 works) (2 .)))\", as a %s\n"
                        " * (labels 0, 1, ...; binary nodes). word_id maps each word (NULL: words\n"
                        " * numbered 1, 2, ... by first appearance in this tree, as `relayc run\n"
                        " * --input t=sst:FILE:LINE` numbers one tree). %s_ERR_PARSE with the column\n"
                        " * in %s_error(ctx) for a malformed string. */\n"
                        "int %s_parse_tree(%s_ctx *ctx, const char *text, %s_word_fn word_id, void *user, %s_value **out);\n",
                     n, md->tree->name, md->NAME, n, n, n, n, n);
    }
    ry_sb_puts(b, "\n");
}

void ry_c_write_values(strbuf *b, const cmodel *md) {
    const char *n = md->name;
    if (!md->nadts) return;
    ry_sb_printf(b, "struct %s_value {\n    rt_val v;\n};\n\n", n);
    for (int t = 0; t < md->nadts; t++)
        for (int i = 0; i < md->adts[t]->nctors; i++) {
            const ry_ctor *k = md->adts[t]->ctors[i];
            if (!ry_c_ctor_buildable(k)) continue;
            ctor_signature(b, md, k);
            ry_sb_printf(b, " {\n    if (!ctx) return NULL;\n    rt_val *v = rt_new(&ctx->values, RT_V_ADT, %d);\n"
                            "    if (!v) {\n        fail(ctx, RT_E_MEMORY, \"out of memory\");\n        return NULL;\n    }\n"
                            "    v->tag = %d;\n",
                         k->nfields, k->tag);
            for (int f = 0; f < k->nfields; f++) {
                if (scalar_field(k->fields[f])) {
                    const char *ct = ry_c_ctype(k->fields[f]->tensor.dtype);
                    ry_sb_printf(b, "    %s *d%d = rt_alloc(&ctx->values, sizeof *d%d);\n"
                                    "    if (!d%d || !(v->f[%d] = rt_tensor(&ctx->values, d%d, 0, sizeof *d%d))) {\n"
                                    "        fail(ctx, RT_E_MEMORY, \"out of memory\");\n        return NULL;\n    }\n"
                                    "    *d%d = f%d;\n",
                                 ct, f, f, f, f, f, f, f, f);
                } else {
                    ry_sb_printf(b, "    if (!f%d || f%d->v.kind != RT_V_ADT) {\n"
                                    "        fail(ctx, RT_E_ARG, \"%s_%s: field %d is not a value\");\n        return NULL;\n    }\n"
                                    "    v->f[%d] = (rt_val *)&f%d->v;\n",
                                 f, f, n, k->name, f, f, f);
                }
            }
            ry_sb_printf(b, "    return (%s_value *)v;\n}\n\n", n);
        }
    ry_sb_printf(b, "void %s_values_clear(%s_ctx *ctx) {\n    if (ctx) rt_arena_reset(&ctx->values);\n}\n\n", n, n);
    if (md->tree) {
        int l, k;
        tree_shape(md->tree, &l, &k);
        ry_sb_printf(b, "int %s_parse_tree(%s_ctx *ctx, const char *text, %s_word_fn word_id, void *user, %s_value **out) {\n"
                        "    if (!ctx) return RT_E_ARG;\n"
                        "    if (!text || !out) return fail(ctx, RT_E_ARG, \"%s_parse_tree: text or out is NULL\");\n"
                        "    static const rt_ptb_shape shape = {%d, %d, %d, %d};\n    rt_val *v = NULL;\n"
                        "    int rc = rt_ptb_parse(&ctx->values, &shape, text, word_id, user, &v, ctx->msg, sizeof ctx->msg);\n"
                        "    *out = (%s_value *)v;\n    return rc;\n}\n\n",
                     n, n, n, n, n, md->tree->ctors[l]->tag, md->tree->ctors[l]->nfields, md->tree->ctors[k]->tag,
                     md->tree->ctors[k]->nfields, n);
    }
}
