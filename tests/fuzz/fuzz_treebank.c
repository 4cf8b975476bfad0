/*
 * fuzz_treebank.c: the PTB treebank reader, growing the vocabulary and not,
 * and every tree it accepts turned into an ADT value (bottom-up, no
 * recursion: a deep tree must not overflow the stack).
 */
#include "fuzz_util.h"

static const char tree_module[] =
    "#[version = \"0.0.5\"]\n"
    "type Tree { Leaf(Tensor[(), int32], Tensor[(), int32]), "
    "Node(Tree, Tree, Tensor[(), int32]) }\n"
    "def @main(%t: Tree) { %t }\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ry_module *m;
    ry_error err;
    memset(&err, 0, sizeof err);
    if (!m && ry_module_parse("tree.relay", tree_module, sizeof tree_module - 1, &m, &err) != RY_OK) {
        fprintf(stderr, "fuzz: %s\n", err.msg);
        abort();
    }
    ry_vocab *v = ry_vocab_new();
    if (!v) return 0;
    for (int grow = 0; grow < 2; grow++) {
        ry_treebank *tb = NULL;
        memset(&err, 0, sizeof err);
        ry_status st = ry_treebank_parse("fuzz.txt", (const char *)data, size, v, grow, &tb, &err);
        fuzz_check_error(st, &err);
        for (int32_t i = 0; st == RY_OK && i < tb->ntrees && i < 8; i++) {
            ry_value *val = NULL;
            memset(&err, 0, sizeof err);
            ry_status vs = ry_tree_to_value(&tb->trees[i], ry_module_find_ctor(m, "Leaf"),
                                            ry_module_find_ctor(m, "Node"), &val, &err);
            fuzz_check_error(vs, &err);
            ry_value_release(val);
        }
        ry_treebank_free(tb);
    }
    ry_vocab_free(v);
    return 0;
}
