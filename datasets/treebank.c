/*
 * treebank.c: the PTB bracketed format of the Stanford Sentiment Treebank,
 * parsed without recursion (an explicit stack of open nodes) into binary
 * trees whose nodes are in post-order. Every error gives the line and column
 * of the offending byte. Turning a tree into an IR value is tree_value.c's.
 */
#include <string.h>

#include "file.h"
#include "relayc/datasets.h"

/* An open node: its label, children so far and where its '(' was. */
typedef struct frame {
    int32_t label;
    int nkids;
    int32_t kids[2];
    int line, col;
} frame;

typedef struct parser {
    ry_source src;
    const char *p, *end;
    int line;
    const char *line_start;
    ry_vocab *vocab;
    bool grow;
    ry_error *err;
    /* output, grown as trees close */
    ry_tree_node *nodes;
    int64_t nnodes, cap_nodes;
    ry_tree *trees;
    int64_t *tree_start; /* offset of each tree's first node in nodes */
    int32_t ntrees, cap_trees;
    frame *stack;
    int depth, cap_stack;
    int64_t cur_start; /* first node of the tree being parsed */
} parser;

static int col_of(const parser *ps, const char *at) { return (int)(at - ps->line_start) + 1; }

static ry_status fail_at(parser *ps, const char *at, int len, const char *fmt, const char *arg) {
    ry_span sp = {&ps->src, ps->line, col_of(ps, at), len > 0 ? len : 1};
    return ry_error_at(ps->err, sp, fmt, arg);
}

static void skip_space(parser *ps) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->line_start = ps->p + 1;
        } else if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') {
            return;
        }
        ps->p++;
    }
}

static bool is_delim(char c) {
    return c == '(' || c == ')' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
}

/* A run of bytes up to whitespace or a parenthesis. */
static size_t token(const parser *ps) {
    const char *q = ps->p;
    while (q < ps->end && !is_delim(*q)) q++;
    return (size_t)(q - ps->p);
}

static ry_status oom(parser *ps) {
    return ry_error_file(ps->err, ps->src.name, "out of memory parsing the treebank at line %d", ps->line);
}

/* a grown to twice *cap elements (256 at first); NULL, with a and *cap
 * untouched, on out-of-memory. */
static void *grow_array(void *a, int64_t *cap, size_t elem) {
    int64_t ncap = *cap ? *cap * 2 : 256;
    void *p = ry_realloc(a, (size_t)ncap * elem);
    if (p) *cap = ncap;
    return p;
}

/* label -> a decimal integer 0..RY_TREEBANK_LABELS-1 */
static ry_status parse_label(parser *ps, int32_t *label) {
    skip_space(ps);
    size_t n = token(ps);
    if (n == 0)
        return fail_at(ps, ps->p, 1, "expected a label (0..4) after '('%s", "");
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < 31 ? n : 31), ps->p);
    if (n > 1 || buf[0] < '0' || buf[0] >= '0' + RY_TREEBANK_LABELS)
        return fail_at(ps, ps->p, (int)n, "bad label '%s': expected an integer 0..4", buf);
    *label = buf[0] - '0';
    ps->p += n;
    return RY_OK;
}

static ry_status push_node(parser *ps, ry_tree_node nd) {
    if (ps->nnodes - ps->cur_start >= INT32_MAX)
        return ry_error_file(ps->err, ps->src.name, "tree at line %d has too many nodes", ps->line);
    if (ps->nnodes == ps->cap_nodes) {
        ry_tree_node *p = grow_array(ps->nodes, &ps->cap_nodes, sizeof nd);
        if (!p) return oom(ps);
        ps->nodes = p;
    }
    ps->nodes[ps->nnodes++] = nd;
    return RY_OK;
}

/* A node closed: hand its index to its parent (open_node has checked
 * that the parent has room). */
static void closed(parser *ps) {
    if (ps->depth == 0) return;
    frame *f = &ps->stack[ps->depth - 1];
    f->kids[f->nkids++] = (int32_t)(ps->nnodes - 1 - ps->cur_start);
}

/* leaf -> label word ')' ; the '(' (at line, col) and the label are read */
static ry_status finish_leaf(parser *ps, int32_t label, int line, int col) {
    size_t n = token(ps);
    int32_t id = ps->grow ? ry_vocab_add(ps->vocab, ps->p, n) : ry_vocab_find(ps->vocab, ps->p, n);
    if (id < 0) return oom(ps);
    ps->p += n;
    skip_space(ps);
    if (ps->p == ps->end) {
        ry_span sp = {&ps->src, line, col, 1};
        return ry_error_at(ps->err, sp, "unbalanced parentheses: this '(' is never closed (the file ends first)");
    }
    if (*ps->p != ')')
        return fail_at(ps, ps->p, 1, "a leaf holds one word: expected ')' here%s", "");
    ps->p++;
    if (push_node(ps, (ry_tree_node){label, id, -1, -1}) != RY_OK) return RY_ERR;
    closed(ps);
    return RY_OK;
}

/* '(' label: completes a leaf, or opens an internal node on the stack. */
static ry_status open_node(parser *ps) {
    const char *paren = ps->p;
    int line = ps->line, col = col_of(ps, paren);
    if (ps->depth > 0 && ps->stack[ps->depth - 1].nkids == 2)
        return fail_at(ps, paren, 1, "a third child: the treebank's trees are binary%s", "");
    ps->p++;
    int32_t label = 0;
    if (parse_label(ps, &label) != RY_OK) return RY_ERR;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == ')')
        return fail_at(ps, ps->p, 1, "a node with a label but no word or children%s", "");
    if (ps->p < ps->end && *ps->p != '(') return finish_leaf(ps, label, line, col);
    if (ps->depth == ps->cap_stack) {
        int64_t cap = ps->cap_stack;
        frame *p = cap < INT32_MAX / 2 ? grow_array(ps->stack, &cap, sizeof(frame)) : NULL;
        if (!p) return oom(ps);
        ps->stack = p;
        ps->cap_stack = (int)cap;
    }
    ps->stack[ps->depth++] = (frame){label, 0, {-1, -1}, line, col};
    return RY_OK;
}

/* ')' closing an internal node: it needs exactly two children. */
static ry_status close_node(parser *ps) {
    const char *at = ps->p;
    if (ps->depth == 0) return fail_at(ps, at, 1, "unbalanced parentheses: ')' without a matching '('%s", "");
    frame f = ps->stack[ps->depth - 1];
    if (f.nkids != 2) {
        char what[32];
        snprintf(what, sizeof what, "%d", f.nkids);
        return fail_at(ps, at, 1, "a node with %s child: the treebank's trees are binary", what);
    }
    ps->p++;
    ps->depth--;
    if (push_node(ps, (ry_tree_node){f.label, -1, f.kids[0], f.kids[1]}) != RY_OK) return RY_ERR;
    closed(ps);
    return RY_OK;
}

static ry_status end_tree(parser *ps, int line) {
    if (ps->ntrees == INT32_MAX) return oom(ps);
    if (ps->ntrees == ps->cap_trees) {
        int64_t cap = ps->cap_trees, cap2 = cap;
        ry_tree *t = grow_array(ps->trees, &cap, sizeof(ry_tree));
        if (!t) return oom(ps);
        ps->trees = t;
        int64_t *st = grow_array(ps->tree_start, &cap2, sizeof(int64_t));
        if (!st) return oom(ps); /* trees has grown; cap_trees still fits both */
        ps->tree_start = st;
        ps->cap_trees = (int32_t)(cap < INT32_MAX ? cap : INT32_MAX);
    }
    ps->trees[ps->ntrees] = (ry_tree){(int32_t)(ps->nnodes - ps->cur_start), NULL, line};
    ps->tree_start[ps->ntrees++] = ps->cur_start;
    return RY_OK;
}

/* tree -> '(' label ( word | tree tree ) ')'   (ps->p is at the '(') */
static ry_status parse_tree(parser *ps) {
    int line = ps->line;
    ps->cur_start = ps->nnodes;
    do {
        skip_space(ps);
        if (ps->p == ps->end) { /* only with a node open: the first byte was '(' */
            frame *f = &ps->stack[ps->depth - 1];
            ry_span sp = {&ps->src, f->line, f->col, 1};
            return ry_error_at(ps->err, sp, "unbalanced parentheses: this '(' is never closed (the file ends first)");
        }
        if (*ps->p == '(') {
            if (open_node(ps) != RY_OK) return RY_ERR;
        } else if (*ps->p == ')') {
            if (close_node(ps) != RY_OK) return RY_ERR;
        } else {
            size_t n = token(ps);
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(n < 63 ? n : 63), ps->p);
            return fail_at(ps, ps->p, (int)n, "expected '(' or ')' but found '%s'", buf);
        }
    } while (ps->depth > 0);
    return end_tree(ps, line);
}

static void free_parts(parser *ps) {
    ry_free(ps->nodes);
    ry_free(ps->trees);
    ry_free(ps->tree_start);
    ry_free(ps->stack);
}

ry_status ry_treebank_parse(const char *name, const char *text, size_t len, ry_vocab *vocab,
                            bool grow_vocab, ry_treebank **out, ry_error *err) {
    *out = NULL;
    parser ps = {.src = {name, text, len}, .p = text, .end = text + len, .line = 1,
                 .line_start = text, .vocab = vocab, .grow = grow_vocab, .err = err};
    for (;;) {
        skip_space(&ps);
        if (ps.p == ps.end) break;
        if (*ps.p != '(') {
            size_t n = token(&ps);
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(n ? (n < 63 ? n : 63) : 1), ps.p);
            ry_status s = *ps.p == ')'
                ? fail_at(&ps, ps.p, 1, "unbalanced parentheses: ')' without a matching '('%s", "")
                : fail_at(&ps, ps.p, (int)(n ? n : 1), "expected '(' to start a tree, found '%s'", buf);
            free_parts(&ps);
            return s;
        }
        if (parse_tree(&ps) != RY_OK) {
            free_parts(&ps);
            return RY_ERR;
        }
    }
    if (ps.ntrees == 0) {
        free_parts(&ps);
        return ry_error_file(err, name, "no trees: the treebank is empty");
    }
    ry_treebank *tb = ry_calloc(1, sizeof *tb);
    if (!tb) {
        free_parts(&ps);
        return ry_error_file(err, name, "out of memory");
    }
    for (int32_t i = 0; i < ps.ntrees; i++) ps.trees[i].nodes = ps.nodes + ps.tree_start[i];
    tb->ntrees = ps.ntrees;
    tb->trees = ps.trees;
    tb->pool = ps.nodes;
    ry_free(ps.tree_start);
    ry_free(ps.stack);
    *out = tb;
    return RY_OK;
}

ry_status ry_treebank_read(const char *path, ry_vocab *vocab, bool grow_vocab, ry_treebank **out,
                           ry_error *err) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    if (ry_ds_read_file(path, &buf, &len, err) != RY_OK) return RY_ERR;
    ry_status s = ry_treebank_parse(path, (const char *)buf, len, vocab, grow_vocab, out, err);
    ry_free(buf);
    return s;
}

void ry_treebank_free(ry_treebank *tb) {
    if (!tb) return;
    ry_free(tb->trees);
    ry_free(tb->pool);
    ry_free(tb);
}
