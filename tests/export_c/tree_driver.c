/*
 * tree_driver.c: the exported Tree-LSTM's header API from a C program
 * (tests/test_export.c builds it against the artifact): a tree built with
 * the constructors gives the bits the same tree parsed from PTB text
 * gives, with a caller's word function; a NULL field, a NULL tree and a
 * refused word are errors with their codes. Exit 0 when all hold.
 */
#include <stdio.h>
#include <string.h>

#include "treelstm.h"

/* "a" -> 1, "film" -> 2; other words refused */
static int32_t word_id(void *user, const char *w, size_t len) {
    (void)user;
    if (len == 1 && w[0] == 'a') return 1;
    if (len == 4 && memcmp(w, "film", 4) == 0) return 2;
    return -1;
}

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "tree_driver:%d: %s\n", __LINE__, #cond); \
            return 1;                                                 \
        }                                                             \
    } while (0)

int main(int argc, char **argv) {
    char msg[512];
    treelstm_ctx *ctx = NULL;
    CHECK(argc == 2);
    CHECK(treelstm_open(&ctx, argv[1], msg, sizeof msg) == TREELSTM_OK);
    treelstm_value *t = treelstm_Node(ctx, treelstm_Leaf(ctx, 1, 2), treelstm_Leaf(ctx, 2, 0), 1);
    CHECK(t != NULL);
    float a[5], b[5];
    CHECK(treelstm_predict(ctx, t, a) == TREELSTM_OK);
    treelstm_value *p = NULL;
    CHECK(treelstm_parse_tree(ctx, "(1 (2 a) (0 film))", word_id, NULL, &p) == TREELSTM_OK);
    CHECK(treelstm_predict(ctx, p, b) == TREELSTM_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(a[0] == a[0] && (a[0] != b[1] || a[1] == b[1])); /* numbers, not NaN */
    CHECK(treelstm_parse_tree(ctx, "(1 (2 a) (0 cat))", word_id, NULL, &p) == TREELSTM_ERR_PARSE);
    CHECK(strstr(treelstm_error(ctx), "the word has no id") != NULL);
    CHECK(treelstm_Node(ctx, NULL, t, 0) == NULL);
    CHECK(strstr(treelstm_error(ctx), "field 0 is not a value") != NULL);
    CHECK(treelstm_predict(ctx, NULL, a) == TREELSTM_ERR_ARG);
    treelstm_values_clear(ctx);
    t = treelstm_Leaf(ctx, 1, 0); /* after a clear, the arena is reused */
    CHECK(t && treelstm_predict(ctx, t, a) == TREELSTM_OK);
    treelstm_close(ctx);
    return 0;
}
