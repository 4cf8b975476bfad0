/*
 * emit_values.c: the ADT values an exported entry takes and returns, as
 * the header offers them: NAME_value, one constructor function per
 * constructor whose fields C can give (scalars and other values), the
 * accessors that walk a result (kind, tag, fields, tensors), NAME_values_clear, and
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

/* The typedefs whose constructors' fields are being walked, innermost
 * first: a type met again (a list's tail, mutually recursive types) has
 * its fields checked by the walk already under way. */
typedef struct walking {
    const ry_typedef *td;
    const struct walking *outer;
} walking;

/* Whether t (an ADT's field: type parameters stand for what the call's
 * arguments give, which are checked themselves) holds no closure or ref. */
static bool value_type_ok(const ry_type *t, const walking *on) {
    if (!t) return false;
    switch (t->kind) {
    case RY_TYPE_TENSOR:
    case RY_TYPE_VAR: return true;
    case RY_TYPE_TUPLE:
        for (int i = 0; i < t->tuple.n; i++)
            if (!value_type_ok(t->tuple.fields[i], on)) return false;
        return true;
    case RY_TYPE_CALL: {
        const ry_typedef *td = t->call.adt;
        if (!td) return false;
        for (int i = 0; i < t->call.nargs; i++)
            if (!value_type_ok(t->call.args[i], on)) return false;
        for (const walking *w = on; w; w = w->outer)
            if (w->td == td) return true;
        const walking here = {td, on};
        for (int k = 0; k < td->nctors; k++)
            for (int f = 0; f < td->ctors[k]->nfields; f++)
                if (!value_type_ok(td->ctors[k]->fields[f], &here)) return false;
        return true;
    }
    default: return false;
    }
}

bool ry_c_value_result_ok(const ry_type *t) { return value_type_ok(t, NULL); }

static void add_adt(cmodel *md, const ry_typedef *td, int cap) {
    for (int k = 0; k < md->nadts; k++)
        if (md->adts[k] == td) return;
    if (md->nadts < cap) md->adts[md->nadts++] = td;
}

/* The ADTs a result type t holds, all the way down (their tags go in
 * the header). */
static void result_adts(cmodel *md, const ry_type *t, int cap) {
    if (!t) return;
    if (t->kind == RY_TYPE_TUPLE)
        for (int i = 0; i < t->tuple.n; i++) result_adts(md, t->tuple.fields[i], cap);
    if (t->kind != RY_TYPE_CALL || !t->call.adt) return;
    int before = md->nadts;
    add_adt(md, t->call.adt, cap);
    for (int i = 0; i < t->call.nargs; i++) result_adts(md, t->call.args[i], cap);
    if (md->nadts == before) return; /* seen: its fields were walked */
    for (int k = 0; k < t->call.adt->nctors; k++)
        for (int f = 0; f < t->call.adt->ctors[k]->nfields; f++) result_adts(md, t->call.adt->ctors[k]->fields[f], cap);
}

/* The ADTs of the entry's value arguments, the tree among them, and
 * those of its value results. */
void ry_c_collect_adts(cemit *c, cmodel *md) {
    enum { CAP = 64 };
    md->adts = RY_NEW_ARRAY(c->a, const ry_typedef *, CAP);
    for (int i = 0; i < md->nargs; i++) {
        if (!ry_c_is_value_arg(md->args[i])) continue;
        const ry_typedef *td = md->args[i]->type->call.adt;
        add_adt(md, td, CAP);
        int l, n;
        if (!md->tree && tree_shape(td, &l, &n)) md->tree = td;
    }
    for (int i = 0; i < md->nouts; i++)
        if (md->out_value[i]) result_adts(md, md->outs[i]->type, CAP);
}

void ry_c_write_value_decls(strbuf *b, const cmodel *md) {
    const char *n = md->name;
    if (!md->nadts && !md->nvalue_outs) return;
    ry_sb_printf(b, "/* An ADT value the entry takes, built by the constructors below in the\n"
                    " * context, or one it returns, copied out there (its second arena: the\n"
                    " * values stay until %s_values_clear or %s_close). A constructor gives\n"
                    " * NULL on failure (%s_error says why: out of memory, a NULL field).\n"
                    " * Pass only values of the same context. */\n"
                    "typedef struct %s_value %s_value;\n",
                 n, n, n, n, n);
    ry_sb_printf(b, "/* A value's parts: what it is (a result's tuples and ADT values hold\n"
                    " * tensors, the fields of a constructor are its fields in order), an ADT\n"
                    " * value's constructor (%s_TAG_*), a field (NULL when i is out of range)\n"
                    " * and a tensor's dtype, shape and data (borrowed: the value owns them;\n"
                    " * %s_ERR_ARG when v is not a tensor). */\n"
                    "enum { %s_KIND_TENSOR = 0, %s_KIND_TUPLE = 1, %s_KIND_ADT = 2 };\n",
                 md->NAME, md->NAME, md->NAME, md->NAME, md->NAME);
    for (int t = 0; t < md->nadts; t++)
        for (int i = 0; i < md->adts[t]->nctors; i++)
            ry_sb_printf(b, "%s    %s_TAG_%s = %d", t || i ? ",\n" : "enum {\n", md->NAME, md->adts[t]->ctors[i]->name,
                         md->adts[t]->ctors[i]->tag);
    if (md->nadts) ry_sb_puts(b, "\n};\n");
    ry_sb_printf(b, "int %s_value_kind(const %s_value *v);\nint %s_value_tag(const %s_value *v);\n"
                    "int %s_value_nfields(const %s_value *v);\nconst %s_value *%s_value_field(const %s_value *v, int i);\n"
                    "int %s_value_tensor(const %s_value *v, %s_array *out);\n",
                 n, n, n, n, n, n, n, n, n, n, n, n);
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
    if (!md->nadts && !md->nvalue_outs) return;
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
                                    "    if (!d%d || !(v->f[%d] = rt_tensor(&ctx->values, d%d, 0, sizeof *d%d, %d))) {\n"
                                    "        fail(ctx, RT_E_MEMORY, \"out of memory\");\n        return NULL;\n    }\n"
                                    "    *d%d = f%d;\n",
                                 ct, f, f, f, f, f, f, ry_c_dtype_index(k->fields[f]->tensor.dtype), f, f);
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
    /* the accessors: rt_val's kinds are the header's (RT_V_TENSOR 0, RT_V_TUPLE 1, RT_V_ADT 2) */
    ry_sb_printf(b, "int %s_value_kind(const %s_value *v) { return v ? v->v.kind : -1; }\n"
                    "int %s_value_tag(const %s_value *v) { return v && v->v.kind == RT_V_ADT ? v->v.tag : -1; }\n"
                    "int %s_value_nfields(const %s_value *v) { return v && v->v.kind != RT_V_TENSOR ? v->v.n : 0; }\n\n"
                    "const %s_value *%s_value_field(const %s_value *v, int i) {\n"
                    "    return v && v->v.kind != RT_V_TENSOR && i >= 0 && i < v->v.n ? (const %s_value *)v->v.f[i] : NULL;\n}\n\n"
                    "int %s_value_tensor(const %s_value *v, %s_array *out) {\n"
                    "    if (!v || !out || v->v.kind != RT_V_TENSOR) return RT_E_ARG;\n"
                    "    out->dtype = v->v.dtype;\n    out->ndim = v->v.n;\n"
                    "    memcpy(out->shape, v->v.shape, sizeof out->shape);\n    out->data = v->v.data;\n    return RT_OK;\n}\n\n",
                 n, n, n, n, n, n, n, n, n, n, n, n, n);
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
