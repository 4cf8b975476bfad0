/*
 * input_values.c: `--input` values that are not .npy files, for parameters
 * of ADT, tuple or tensor type (run, grad, gradcheck):
 *
 *   NAME=sst:PATH:LINE   the PTB-format tree that starts on line LINE of
 *                        PATH, as the parameter's tree ADT (ry_tree_to_value).
 *                        Its words are numbered 1, 2, ... in order of first
 *                        appearance over every sst: input (0 is <unk>): the
 *                        vocabulary is the inputs' own, so a model's `//
 *                        vocab: V` dimension gets that small size, not the
 *                        treebank's.
 *   NAME=relay:TEXT      a value in the text format: an expression in the
 *                        module's scope (constructors, operators, globals),
 *                        type-checked against the parameter and evaluated by
 *                        the interpreter.
 *
 * Plain .npy inputs and random ones are inputs.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- sst:PATH:LINE ---- */

/* The constructors of a tree type: node is the one whose first field is the
 * type itself, leaf the other. */
static bool tree_ctors(const ry_type *t, const ry_ctor **leaf, const ry_ctor **node) {
    if (!t || t->kind != RY_TYPE_CALL || !t->call.adt || t->call.adt->nctors != 2) return false;
    const ry_typedef *td = t->call.adt;
    for (int i = 0; i < 2; i++) {
        const ry_ctor *c = td->ctors[i];
        const ry_type *f = c->nfields ? c->fields[0] : NULL;
        bool rec = f && f->kind == RY_TYPE_CALL && f->call.adt == td;
        *(rec ? node : leaf) = c;
    }
    return *leaf && *node && *leaf != *node;
}

/* The tree that starts on `line` of tb, its leaves' words renumbered in
 * vocab (the sst: inputs' own vocabulary) from the treebank's in old. */
static ry_status compact_tree(const ry_treebank *tb, const ry_vocab *old, int32_t line, ry_vocab *vocab,
                              const char *path, ry_tree *out, ry_error *err) {
    const ry_tree *t = NULL;
    for (int32_t i = 0; i < tb->ntrees && !t; i++)
        if (tb->trees[i].line == line) t = &tb->trees[i];
    if (!t)
        return ry_error_file(err, path, "no tree starts on line %d (the file has %d trees, from line %d to %d)",
                             line, tb->ntrees, tb->trees[0].line, tb->trees[tb->ntrees - 1].line);
    ry_tree_node *nodes = ry_calloc((size_t)t->nnodes, sizeof *nodes);
    if (!nodes) return ry_error_file(err, path, "out of memory");
    for (int32_t i = 0; i < t->nnodes; i++) {
        nodes[i] = t->nodes[i];
        if (nodes[i].left >= 0) continue;
        const char *w = ry_vocab_word(old, nodes[i].word);
        if ((nodes[i].word = ry_vocab_add(vocab, w, strlen(w))) < 0) {
            ry_free(nodes);
            return ry_error_file(err, path, "out of memory");
        }
    }
    *out = (ry_tree){t->nnodes, nodes, t->line};
    return RY_OK;
}

/* Gives the `// vocab:` dimension the sst: inputs' vocabulary size so far
 * (each sst: input may add words), unless --dim gave it. */
static void fill_vocab_dim(cli_inputs *in) {
    if (!in->vocab_dim) return;
    int k = 0;
    while (k < in->ndims && strcmp(in->dim_names[k], in->vocab_dim) != 0) k++;
    if (k < in->ndims && !in->vocab_filled) return; /* --dim's */
    if (k == CLI_MAX_DIMS) return;
    in->dim_names[k] = in->vocab_dim;
    in->dim_values[k] = ry_vocab_size(in->vocab);
    in->ndims += k == in->ndims;
    in->vocab_filled = true;
}

static ry_status sst_value(const ry_var *p, const ry_type *t, const char *spec, cli_inputs *in, ry_value **out,
                           ry_error *err) {
    char buf[512];
    const ry_ctor *leaf = NULL, *node = NULL;
    if (!tree_ctors(t, &leaf, &node))
        return ry_error_at(err, p->span, "parameter %%%s has type %s, but sst: gives a tree (a type with "
                           "Leaf(int32[, int32]) and Node(T, T[, int32]))", p->name,
                           t ? ry_type_str(t, buf, sizeof buf) : "unknown");
    const char *colon = strrchr(spec, ':');
    char *end = NULL;
    long line = colon ? (errno = 0, strtol(colon + 1, &end, 10)) : 0;
    if (!colon || colon == spec || !colon[1] || *end || errno || line < 1 || line > INT32_MAX ||
        (size_t)(colon - spec) >= sizeof buf)
        return ry_error_at(err, p->span, "--input %s=sst:%s: expected sst:PATH:LINE (LINE from 1)", p->name, spec);
    snprintf(buf, sizeof buf, "%.*s", (int)(colon - spec), spec);
    if (!in->vocab && !(in->vocab = ry_vocab_new())) return ry_error_at(err, p->span, "out of memory");
    ry_vocab *old = ry_vocab_new();
    ry_treebank *tb = NULL;
    ry_tree tree = {0};
    ry_status st = old ? ry_treebank_read(buf, old, true, &tb, err) : ry_error_at(err, p->span, "out of memory");
    if (st == RY_OK) st = compact_tree(tb, old, (int32_t)line, in->vocab, buf, &tree, err);
    if (st == RY_OK) st = ry_tree_to_value(&tree, leaf, node, out, err);
    if (st == RY_OK) fill_vocab_dim(in);
    ry_free(tree.nodes);
    ry_treebank_free(tb);
    ry_vocab_free(old);
    return st;
}

/* ---- relay:TEXT ---- */

/* A value in the text format: the expression becomes the body of a global
 * @__input_NAME() -> T, type-checked with the module (in float64 when the
 * module is: ry_module_to_float64 again, which rewrites the new global's
 * float32 constants and dtypes too) and run by the interpreter. */
static ry_status text_value(ry_module *m, const ry_var *p, const ry_type *t, const char *text, bool float64,
                            ry_value **out, ry_error *err) {
    char gname[256], src[300];
    snprintf(gname, sizeof gname, "__input_%s", p->name);
    snprintf(src, sizeof src, "--input %s", p->name);
    if (ry_module_find_global(m, gname))
        return ry_error_at(err, p->span, "the module already has a global @%s, which --input %s=relay: needs",
                           gname, p->name);
    ry_expr *body = NULL;
    if (ry_module_parse_expr(m, src, text, strlen(text), &body, err)) return RY_ERR;
    ry_expr *fn = ry_expr_new(m, RY_EXPR_FUNC, body->span);
    fn->func.body = body;
    fn->func.ret_annot = (ry_type *)t;
    ry_module_add_global(m, gname, fn)->span = body->span;
    if (float64 ? ry_module_to_float64(m, err) : ry_module_typecheck(m, err)) return RY_ERR;
    return ry_interp_call(m, gname, 0, NULL, NULL, out, err);
}

int cli_input_value(ry_module *m, const ry_var *p, const ry_type *t, const cli_input *x, bool float64,
                    cli_inputs *in, ry_value **out, ry_error *err) {
    *out = NULL;
    if (strncmp(x->path, "sst:", 4) == 0) return sst_value(p, t, x->path + 4, in, out, err) ? -1 : 0;
    if (strncmp(x->path, "relay:", 6) == 0) return text_value(m, p, t, x->path + 6, float64, out, err) ? -1 : 0;
    return 1;
}
