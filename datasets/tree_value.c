/*
 * tree_value.c: a parsed tree as the IR's Tree ADT value, for models that
 * recurse over trees in the interpreter (the Tree-LSTM). The value is built
 * bottom-up over the post-order nodes, so a deep tree needs no C recursion.
 *
 *   Leaf(word: int32, label: int32)        Node(left: Tree, right: Tree, label: int32)
 *
 * or, for models that take no labels from the tree, Leaf(word: int32) and
 * Node(left: Tree, right: Tree).
 */
#include "relayc/datasets.h"

static bool is_int32_scalar(const ry_type *t) {
    return t && t->kind == RY_TYPE_TENSOR && t->tensor.dtype == RY_INT32 && t->tensor.ndim == 0;
}

/* A field of type `Tree`: the ADT itself, applied to no arguments. */
static bool is_tree(const ry_type *t, const ry_typedef *adt) {
    return t && t->kind == RY_TYPE_CALL && t->call.adt == adt && t->call.nargs == 0;
}

/* The layout is labeled (a label field last in both) when the leaf has two
 * fields, unlabeled when it has one. */
static ry_status check_ctors(const ry_ctor *leaf, const ry_ctor *node, ry_error *err) {
    if (!leaf || !node) return ry_error_at(err, RY_NO_SPAN, "tree value: missing constructor");
    if (leaf->adt != node->adt || !leaf->adt)
        return ry_error_at(err, leaf->span, "tree value: %s and %s belong to different types",
                           leaf->name, node->name);
    if (leaf->adt->ntparams != 0)
        return ry_error_at(err, leaf->span, "tree value: type %s must have no type parameters",
                           leaf->adt->name);
    bool labeled = leaf->nfields == 2;
    bool leaf_ok = (leaf->nfields == 1 || labeled) && is_int32_scalar(leaf->fields[0]) &&
                   (!labeled || is_int32_scalar(leaf->fields[1]));
    if (!leaf_ok)
        return ry_error_at(err, leaf->span, "tree value: leaf constructor %s must be %s(int32, int32) "
                           "(word, label) or %s(int32) (word)", leaf->name, leaf->name, leaf->name);
    bool node_ok = node->nfields == (labeled ? 3 : 2) && is_tree(node->fields[0], node->adt) &&
                   is_tree(node->fields[1], node->adt) && (!labeled || is_int32_scalar(node->fields[2]));
    if (!node_ok && labeled)
        return ry_error_at(err, node->span, "tree value: node constructor %s must be %s(%s, %s, int32) "
                           "(left, right, label)", node->name, node->name, node->adt->name,
                           node->adt->name);
    if (!node_ok)
        return ry_error_at(err, node->span, "tree value: node constructor %s must be %s(%s, %s) "
                           "(left, right), as %s has no label", node->name, node->name,
                           node->adt->name, node->adt->name, leaf->name);
    return RY_OK;
}

static ry_value *int_value(int32_t v) {
    ry_tensor *t = ry_tensor_scalar(RY_INT32, v);
    return t ? ry_value_tensor(t) : NULL;
}

/* Node i's value from its children's, which post-order has already built;
 * labels only where the constructors hold them. */
static ry_value *build(const ry_tree_node *nd, ry_value **vals, const ry_ctor *leaf,
                       const ry_ctor *node) {
    bool labeled = leaf->nfields == 2;
    if (nd->left < 0) {
        ry_value *f[2] = {int_value(nd->word), labeled ? int_value(nd->label) : NULL};
        if (!f[0] || (labeled && !f[1])) {
            ry_value_release(f[0]);
            ry_value_release(f[1]);
            return NULL;
        }
        return ry_value_adt(leaf, leaf->nfields, f);
    }
    ry_value *label = labeled ? int_value(nd->label) : NULL;
    if (labeled && !label) return NULL;
    ry_value *f[3] = {vals[nd->left], vals[nd->right], label};
    vals[nd->left] = vals[nd->right] = NULL; /* the node takes them over */
    return ry_value_adt(node, node->nfields, f);
}

ry_status ry_tree_to_value(const ry_tree *t, const ry_ctor *leaf, const ry_ctor *node,
                           ry_value **out, ry_error *err) {
    *out = NULL;
    if (check_ctors(leaf, node, err) != RY_OK) return RY_ERR;
    if (t->nnodes < 1) return ry_error_at(err, RY_NO_SPAN, "tree value: an empty tree");
    ry_value **vals = ry_calloc((size_t)t->nnodes, sizeof *vals);
    if (!vals) return ry_error_at(err, RY_NO_SPAN, "tree value: out of memory");
    ry_status s = RY_OK;
    for (int32_t i = 0; i < t->nnodes && s == RY_OK; i++) {
        const ry_tree_node *nd = &t->nodes[i];
        /* children come before their parent and are used once */
        bool bad = nd->left >= 0 && (nd->left >= i || nd->right < 0 || nd->right >= i ||
                                     nd->left == nd->right || !vals[nd->left] || !vals[nd->right]);
        if (bad) {
            s = ry_error_at(err, RY_NO_SPAN, "tree value: node %d's children are not in post-order", i);
            break;
        }
        vals[i] = build(nd, vals, leaf, node);
        if (!vals[i]) s = ry_error_at(err, RY_NO_SPAN, "tree value: out of memory");
    }
    if (s == RY_OK) {
        *out = vals[t->nnodes - 1];
        vals[t->nnodes - 1] = NULL;
    }
    for (int32_t i = 0; i < t->nnodes; i++) ry_value_release(vals[i]);
    ry_free(vals);
    return s;
}
