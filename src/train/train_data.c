/*
 * train_data.c: ready-made ry_train_data sources over the loaders of
 * datasets.h: truncated-BPTT windows of a text and the trees of a
 * treebank (tensor rows are in train_loop.c). Each only turns an example
 * index into the values @loss takes; reading the files is datasets/'s.
 */
#include <string.h>

#include "train/train_impl.h"

static ry_status fetch_window(const ry_train_data *d, const int64_t *idx, int64_t k,
                              ry_value **args, ry_error *err) {
    const ry_bptt *b = d->ctx;
    ry_tensor *x, *y;
    if (k != 1) return ry_error_at(err, RY_NO_SPAN, "BPTT windows go one per step");
    if (ry_bptt_window(b, idx[0], &x, &y, err)) return RY_ERR;
    args[0] = ry_value_tensor(x);
    args[1] = ry_value_tensor(y);
    if (!args[0] || !args[1]) {
        ry_value_release(args[0]);
        ry_value_release(args[1]);
        return ry_error_at(err, RY_NO_SPAN, "out of memory");
    }
    return RY_OK;
}

void ry_train_data_bptt(const ry_bptt *b, ry_train_data *out) {
    memset(out, 0, sizeof *out);
    out->n = b->nwindows;
    out->nargs = 2;
    out->fetch = fetch_window;
    out->ctx = (void *)b;
    out->label_arg = 1;
}

static ry_status fetch_tree(const ry_train_data *d, const int64_t *idx, int64_t k,
                            ry_value **args, ry_error *err) {
    const ry_tree_source *s = d->ctx;
    if (k != 1) return ry_error_at(err, RY_NO_SPAN, "trees go one per call");
    return ry_tree_to_value(&s->tb->trees[idx[0]], s->leaf, s->node, &args[0], err);
}

/* Leaf: the constructor of 2 fields; Node: of 3. */
ry_status ry_train_data_trees(ry_trainer *tr, const ry_treebank *tb, ry_tree_source *src,
                              ry_train_data *out, ry_error *err) {
    memset(out, 0, sizeof *out);
    memset(src, 0, sizeof *src);
    const ry_var *v = tr->nloss_data > 0 ? tr->data_vars[0] : NULL;
    const ry_type *t = v ? v->type : NULL;
    if (!t || t->kind != RY_TYPE_CALL || t->call.adt->nctors != 2)
        return ry_error_at(err, v ? v->span : RY_NO_SPAN,
                           "trees need @%s's first data parameter to be a Tree ADT "
                           "(Leaf(int32, int32), Node(Tree, Tree, int32))",
                           tr->loss_name);
    for (int i = 0; i < 2; i++) {
        const ry_ctor *c = t->call.adt->ctors[i];
        if (c->nfields == 2) src->leaf = c;
        if (c->nfields == 3) src->node = c;
    }
    if (!src->leaf || !src->node)
        return ry_error_at(err, v->span, "the ADT %s is not Leaf(int32, int32) | Node(Tree, "
                           "Tree, int32)", t->call.adt->name);
    src->tb = tb;
    out->n = tb->ntrees;
    out->nargs = 1;
    out->fetch = fetch_tree;
    out->ctx = src;
    out->per_example = true;
    out->label_arg = 0;
    return RY_OK;
}
