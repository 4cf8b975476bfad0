/*
 * ptb.c (export runtime): a tree in the Penn Treebank's bracket format,
 * "(3 (2 It) (4 (2 works) (2 .)))", as the model's tree ADT (a leaf
 * (word, label) and a binary node (left, right, label), the labels left
 * out where the constructors have none). Written into the artifacts of
 * entries that take such a tree. Iterative, so a deep tree cannot
 * exhaust the C stack while it is read; every error names the column.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A word's id: >= 0, or negative to refuse it. */
typedef int32_t (*rt_word_fn)(void *user, const char *word, size_t len);

typedef struct rt_ptb_shape {
    int leaf_tag, leaf_n; /* leaf_n: 1 (word) or 2 (word, label) */
    int node_tag, node_n; /* node_n: 2 (left, right) or 3 (left, right, label) */
} rt_ptb_shape;

typedef struct rt_ptb_frame {
    int64_t col;
    int32_t label;
    int nkids;
    rt_val *kid[2];
    const char *word;
    size_t wlen;
} rt_ptb_frame;

/* Words numbered 1, 2, ... in order of first appearance (0 is <unk>). */
typedef struct rt_ptb_words {
    const char **w;
    size_t *len;
    int32_t n;
} rt_ptb_words;

static int32_t rt_ptb_first_seen(rt_ptb_words *ws, const char *w, size_t len) {
    for (int32_t i = 0; i < ws->n; i++)
        if (ws->len[i] == len && memcmp(ws->w[i], w, len) == 0) return i + 1;
    ws->w[ws->n] = w;
    ws->len[ws->n] = len;
    return ++ws->n;
}

static rt_val *rt_ptb_scalar(rt_arena *a, int32_t x) {
    int32_t *d = rt_alloc(a, sizeof *d);
    rt_val *v = d ? rt_tensor(a, d, 0, sizeof *d, 2 /* INT32 */) : NULL;
    if (v) *d = x;
    return v;
}

static int rt_ptb_fail(char *msg, size_t n, int64_t col, const char *what) {
    snprintf(msg, n, "tree:%lld: error: %s", (long long)col, what);
    return RT_E_PARSE;
}

static int rt_ptb_parse(rt_arena *a, const rt_ptb_shape *sh, const char *text, rt_word_fn word_id, void *user,
                        rt_val **out, char *msg, size_t msgn) {
    *out = NULL;
    size_t len = strlen(text), open = 0;
    for (size_t i = 0; i < len; i++) open += text[i] == '(';
    rt_ptb_frame *st = malloc(sizeof *st * (open + 1));
    rt_ptb_words ws = {malloc(sizeof(char *) * (open + 1)), malloc(sizeof(size_t) * (open + 1)), 0};
    int rc = RT_OK;
    if (!st || !ws.w || !ws.len) rc = RT_E_MEMORY, snprintf(msg, msgn, "out of memory");
    size_t depth = 0, i = 0;
    rt_val *root = NULL;
    while (rc == RT_OK && i < len) {
        char ch = text[i];
        int64_t col = (int64_t)i + 1;
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            i++;
        } else if (ch == '(') {
            if (root) {
                rc = rt_ptb_fail(msg, msgn, col, "text after the tree");
                break;
            }
            if (depth > 0 && (st[depth - 1].word || st[depth - 1].nkids == 2)) {
                rc = rt_ptb_fail(msg, msgn, col, "a node with more than two children (the tree is binary)");
                break;
            }
            i++;
            while (i < len && (text[i] == ' ' || text[i] == '\t')) i++;
            char *end = NULL;
            long label = i < len ? strtol(text + i, &end, 10) : -1;
            if (!end || end == text + i || label < 0 || label > INT32_MAX) {
                rc = rt_ptb_fail(msg, msgn, (int64_t)i + 1, "expected a label (an integer >= 0) after '('");
                break;
            }
            i = (size_t)(end - text);
            st[depth++] = (rt_ptb_frame){col, (int32_t)label, 0, {NULL, NULL}, NULL, 0};
        } else if (ch == ')') {
            if (depth == 0) {
                rc = rt_ptb_fail(msg, msgn, col, "')' without its '('");
                break;
            }
            rt_ptb_frame *f = &st[--depth];
            i++;
            rt_val *v = NULL;
            if (f->word) {
                int32_t id = word_id ? word_id(user, f->word, f->wlen) : rt_ptb_first_seen(&ws, f->word, f->wlen);
                if (id < 0) {
                    rc = rt_ptb_fail(msg, msgn, f->col, "the word has no id (the word function refused it)");
                    break;
                }
                v = rt_new(a, RT_V_ADT, sh->leaf_n);
                if (v) {
                    v->tag = sh->leaf_tag;
                    v->f[0] = rt_ptb_scalar(a, id);
                    if (sh->leaf_n == 2) v->f[1] = rt_ptb_scalar(a, f->label);
                }
                if (v && (!v->f[0] || (sh->leaf_n == 2 && !v->f[1]))) v = NULL;
            } else if (f->nkids == 2) {
                v = rt_new(a, RT_V_ADT, sh->node_n);
                if (v) {
                    v->tag = sh->node_tag;
                    v->f[0] = f->kid[0];
                    v->f[1] = f->kid[1];
                    if (sh->node_n == 3 && !(v->f[2] = rt_ptb_scalar(a, f->label))) v = NULL;
                }
            } else {
                rc = rt_ptb_fail(msg, msgn, f->col, f->nkids ? "a node with one child (the tree is binary)" : "an empty node: '(' label ')'");
                break;
            }
            if (!v) {
                rc = RT_E_MEMORY, snprintf(msg, msgn, "out of memory");
                break;
            }
            if (depth == 0) root = v;
            else st[depth - 1].kid[st[depth - 1].nkids++] = v;
        } else {
            size_t j = i;
            while (j < len && !strchr(" \t\r\n()", text[j])) j++;
            if (depth == 0 || root) {
                rc = rt_ptb_fail(msg, msgn, col, depth == 0 ? "a word outside the brackets" : "text after the tree");
                break;
            }
            rt_ptb_frame *f = &st[depth - 1];
            if (f->word || f->nkids) {
                rc = rt_ptb_fail(msg, msgn, col, "a leaf has one word and no children");
                break;
            }
            f->word = text + i;
            f->wlen = j - i;
            i = j;
        }
    }
    if (rc == RT_OK && depth > 0) rc = rt_ptb_fail(msg, msgn, st[depth - 1].col, "'(' not closed");
    if (rc == RT_OK && !root) rc = rt_ptb_fail(msg, msgn, 1, "no tree");
    free(st);
    free(ws.w);
    free(ws.len);
    if (rc == RT_OK) *out = root;
    return rc;
}
