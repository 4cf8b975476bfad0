/*
 * lexer.c: Relay's text format (TVM 0.0.5) as tokens. Follows TVM's
 * tokenizer: `-1` is one literal, floats need an `f` suffix, `%0` is a graph
 * binding and `%x` a local, identifiers may hold `/` (and `.` between name
 * parts, as in nn.conv2d), block comments nest, `#[metadata]` swallows the
 * rest of the file. It never reads past text + len. Parsing is done in parse.c.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lexer.h"

typedef struct lexer {
    const ry_source *src;
    ry_arena *arena;
    const char *p, *end;
    int line, col;
    token *toks;
    int n, cap;
    ry_error *err;
    lexed *out; /* holds toks as they grow, for the parse's undo (oom.h) */
} lexer;

static const char *const tok_names[TK_COUNT] = {
    [TK_EOF] = "the end of the file", [TK_INT] = "an integer", [TK_FLOAT] = "a float",
    [TK_IDENT] = "an identifier", [TK_LOCAL] = "a local variable", [TK_GRAPH] = "a graph binding",
    [TK_GLOBAL] = "a global", [TK_STRING] = "a string", [TK_META] = "a meta reference",
    [TK_VERSION] = "a version attribute", [TK_METADATA] = "the metadata section",
    [TK_LET] = "`let`", [TK_FN] = "`fn`", [TK_DEF] = "`def`", [TK_IF] = "`if`",
    [TK_ELSE] = "`else`", [TK_TYPE] = "`type`", [TK_MATCH] = "`match`", [TK_MATCHQ] = "`match?`",
    [TK_REF] = "`ref`", [TK_REF_READ] = "`ref_read`", [TK_REF_WRITE] = "`ref_write`",
    [TK_FREE_VAR] = "`free_var`", [TK_EXTERN] = "`extern`", [TK_TRUE] = "`True`", [TK_FALSE] = "`False`",
    [TK_UNDERSCORE] = "`_`", [TK_LPAREN] = "`(`", [TK_RPAREN] = "`)`", [TK_LBRACK] = "`[`",
    [TK_RBRACK] = "`]`", [TK_LBRACE] = "`{`", [TK_RBRACE] = "`}`", [TK_COMMA] = "`,`",
    [TK_SEMI] = "`;`", [TK_COLON] = "`:`", [TK_DOT] = "`.`", [TK_EQ] = "`=`", [TK_ARROW] = "`->`",
    [TK_FATARROW] = "`=>`", [TK_PLUS] = "`+`", [TK_MINUS] = "`-`", [TK_STAR] = "`*`",
    [TK_SLASH] = "`/`", [TK_LT] = "`<`", [TK_GT] = "`>`", [TK_LE] = "`<=`", [TK_GE] = "`>=`",
    [TK_EQEQ] = "`==`", [TK_NE] = "`!=`", [TK_QUESTION] = "`?`",
};

const char *ry_tok_name(tok_kind k) { return k < TK_COUNT && tok_names[k] ? tok_names[k] : "?"; }

static const struct {
    const char *word;
    tok_kind kind;
} keywords[] = {
    {"let", TK_LET},         {"fn", TK_FN},           {"def", TK_DEF},
    {"if", TK_IF},           {"else", TK_ELSE},       {"type", TK_TYPE},
    {"match", TK_MATCH},     {"ref", TK_REF},         {"ref_read", TK_REF_READ},
    {"ref_write", TK_REF_WRITE}, {"free_var", TK_FREE_VAR}, {"extern", TK_EXTERN}, {"True", TK_TRUE},
    {"False", TK_FALSE},     {"_", TK_UNDERSCORE},
};

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_start(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_ident(char c) { return is_ident_start(c) || is_digit(c) || c == '/'; }

static int peekc(const lexer *lx, int k) { return lx->p + k < lx->end ? (unsigned char)lx->p[k] : -1; }

static void advance(lexer *lx) {
    if (*lx->p == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
    lx->p++;
}

static ry_span here(const lexer *lx, int len) { return (ry_span){lx->src, lx->line, lx->col, len}; }

static token *push(lexer *lx, tok_kind kind, ry_span span, const char *start) {
    if (lx->n == lx->cap) {
        int ncap = lx->cap ? lx->cap * 2 : 256;
        token *fresh = ry_realloc(lx->toks, sizeof *fresh * (size_t)ncap);
        if (!fresh) return NULL;
        lx->toks = lx->out->toks = fresh;
        lx->cap = ncap;
    }
    token *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->span = span;
    t->off = (size_t)(start - lx->src->text);
    t->dtype = RY_INT32;
    return t;
}

static ry_status oom(lexer *lx) { return ry_error_at(lx->err, here(lx, 1), "out of memory while reading the source"); }

/* comment -> '//' ... newline | '/' '*' (comment | any)* '*' '/'  (they nest) */
static ry_status skip_block_comment(lexer *lx) {
    ry_span start = here(lx, 2);
    int depth = 0;
    while (lx->p < lx->end) {
        if (peekc(lx, 0) == '/' && peekc(lx, 1) == '*') {
            depth++;
            advance(lx);
            advance(lx);
        } else if (peekc(lx, 0) == '*' && peekc(lx, 1) == '/') {
            depth--;
            advance(lx);
            advance(lx);
            if (depth == 0) return RY_OK;
        } else {
            advance(lx);
        }
    }
    return ry_error_at(lx->err, start, "unterminated block comment");
}

/* Width suffixes: i8 i16 i32 i64 for integers, f16 f32 f64 for floats. */
static bool suffix_dtype(bool is_float, long width, ry_dtype *out) {
    if (is_float) {
        if (width == 16) *out = RY_FLOAT16;
        else if (width == 32) *out = RY_FLOAT32;
        else if (width == 64) *out = RY_FLOAT64;
        else return false;
    } else {
        if (width == 8) *out = RY_INT8;
        else if (width == 16) *out = RY_INT16;
        else if (width == 32) *out = RY_INT32;
        else if (width == 64) *out = RY_INT64;
        else return false;
    }
    return true;
}

/* number -> '-'? digit+ ('.' digit+)? ([eE] [+-]? digit+)? ('i' width? | 'f' width?)
 * A '.' or exponent without an `f` suffix is an error (TVM: floats need a
 * suffix). After a `.` only digits are read, so `%t.0.1` is two projections. */
static ry_status lex_number(lexer *lx, bool digits_only) {
    const char *start = lx->p;
    int line = lx->line, col = lx->col;
    bool is_float = false, neg = false;
    if (*lx->p == '-') {
        neg = true;
        advance(lx);
    }
    const char *num = lx->p;
    while (lx->p < lx->end && is_digit(*lx->p)) advance(lx);
    if (!digits_only) {
        if (peekc(lx, 0) == '.' && peekc(lx, 1) >= 0 && is_digit((char)peekc(lx, 1))) {
            is_float = true;
            advance(lx);
            while (lx->p < lx->end && is_digit(*lx->p)) advance(lx);
        }
        if (peekc(lx, 0) == 'e' || peekc(lx, 0) == 'E') {
            int k = (peekc(lx, 1) == '+' || peekc(lx, 1) == '-') ? 2 : 1;
            if (peekc(lx, k) >= 0 && is_digit((char)peekc(lx, k))) {
                is_float = true;
                for (int i = 0; i < k; i++) advance(lx);
                while (lx->p < lx->end && is_digit(*lx->p)) advance(lx);
            }
        }
    }
    const char *num_end = lx->p;
    bool suffixed = false, f_suffix = false;
    long width = 32;
    if (!digits_only && (peekc(lx, 0) == 'f' || peekc(lx, 0) == 'i')) {
        f_suffix = *lx->p == 'f';
        advance(lx);
        if (lx->p < lx->end && is_digit(*lx->p)) {
            suffixed = true;
            width = 0;
            while (lx->p < lx->end && is_digit(*lx->p)) {
                if (width < 1000) width = width * 10 + (*lx->p - '0');
                advance(lx);
            }
        }
    }
    ry_span span = {lx->src, line, col, (int)(lx->p - start)};
    if (lx->p < lx->end && (is_ident(*lx->p) || (*lx->p == '.' && !digits_only)))
        return ry_error_at(lx->err, span, "invalid numeric literal '%.*s%c'", (int)(lx->p - start), start, *lx->p);
    bool suffix_seen = lx->p != num_end;
    if (is_float && !f_suffix)
        return ry_error_at(lx->err, span,
                           suffix_seen ? "a float literal takes an `f` suffix, not `i`"
                                       : "a float literal needs a suffix, e.g. `%.*sf`",
                           (int)(num_end - start), start);
    if (f_suffix) is_float = true;
    ry_dtype dt;
    if (!suffix_dtype(is_float, width, &dt))
        return ry_error_at(lx->err, span, "unsupported width %ld in numeric suffix", width);
    char buf[128];
    size_t n = (size_t)(num_end - num);
    if (n == 0 || n >= sizeof buf) return ry_error_at(lx->err, span, "invalid numeric literal");
    memcpy(buf, num, n);
    buf[n] = '\0';
    token *t = push(lx, is_float ? TK_FLOAT : TK_INT, span, start);
    if (!t) return oom(lx);
    t->dtype = dt;
    t->suffixed = suffixed;
    if (is_float) {
        double v = strtod(buf, NULL);
        /* TVM: a finite literal its width cannot represent is an error */
        bool over = isinf(v) || (dt == RY_FLOAT32 && isinf((float)v)) || (dt == RY_FLOAT16 && v >= 65520.0);
        if (over) return ry_error_at(lx->err, span, "float literal out of range for %s", ry_dtype_name(dt));
        t->f = neg ? -v : v;
        return RY_OK;
    }
    errno = 0;
    unsigned long long u = strtoull(buf, NULL, 10);
    if (errno == ERANGE || u > (unsigned long long)INT64_MAX + (neg ? 1u : 0u))
        return ry_error_at(lx->err, span, "integer literal out of range");
    int64_t v = neg ? (int64_t)(0 - u) : (int64_t)u;
    if (!suffixed && dt == RY_INT32 && (v > INT32_MAX || v < INT32_MIN))
        t->dtype = RY_INT64; /* TVM: unsuffixed integers too big for int32 are int64 */
    else if (dt == RY_INT32 && (v > INT32_MAX || v < INT32_MIN))
        return ry_error_at(lx->err, span, "integer literal out of range for int32");
    else if (dt == RY_INT8 && (v > 127 || v < -128))
        return ry_error_at(lx->err, span, "integer literal out of range for int8");
    else if (dt == RY_INT16 && (v > INT16_MAX || v < INT16_MIN))
        return ry_error_at(lx->err, span, "integer literal out of range for int16");
    t->i = v;
    return RY_OK;
}

static ry_status lex_name(lexer *lx, tok_kind kind, const char *start, int line, int col,
                          bool dotted) {
    const char *name = lx->p;
    while (lx->p < lx->end) {
        if (is_ident(*lx->p)) advance(lx);
        else if (dotted && *lx->p == '.' && peekc(lx, 1) >= 0 && is_ident_start((char)peekc(lx, 1)))
            advance(lx);
        else break;
    }
    ry_span span = {lx->src, line, col, (int)(lx->p - start)};
    size_t n = (size_t)(lx->p - name);
    if (kind == TK_IDENT) {
        if (n == 4 && memcmp(name, "inff", 4) == 0) {
            token *t = push(lx, TK_FLOAT, span, start);
            if (!t) return oom(lx);
            t->f = INFINITY;
            t->dtype = RY_FLOAT32;
            return RY_OK;
        }
        for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
            if (strlen(keywords[k].word) == n && memcmp(keywords[k].word, name, n) == 0) {
                kind = keywords[k].kind;
                if (kind == TK_MATCH && peekc(lx, 0) == '?') {
                    advance(lx);
                    kind = TK_MATCHQ;
                    span.len++;
                }
                break;
            }
    }
    token *t = push(lx, kind, span, start);
    if (!t) return oom(lx);
    t->name = ry_arena_strndup(lx->arena, name, n);
    return RY_OK;
}

/* string -> '"' (char | '\' escape)* '"' */
static ry_status lex_string(lexer *lx) {
    const char *start = lx->p;
    int line = lx->line, col = lx->col;
    advance(lx);
    char *buf = ry_arena_alloc(lx->arena, (size_t)(lx->end - lx->p) + 1);
    size_t n = 0;
    for (;;) {
        if (lx->p >= lx->end)
            return ry_error_at(lx->err, (ry_span){lx->src, line, col, 1}, "unterminated string");
        char c = *lx->p;
        if (c == '"') break;
        if (c == '\\') {
            ry_span esc = here(lx, 2);
            advance(lx);
            if (lx->p >= lx->end)
                return ry_error_at(lx->err, (ry_span){lx->src, line, col, 1}, "unterminated string");
            switch (*lx->p) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '0': c = '\0'; break;
            case '\\': c = '\\'; break;
            case '"': c = '"'; break;
            case '\'': c = '\''; break;
            default: return ry_error_at(lx->err, esc, "unknown escape sequence '\\%c' in string", *lx->p);
            }
        }
        buf[n++] = c;
        advance(lx);
    }
    advance(lx);
    buf[n] = '\0';
    token *t = push(lx, TK_STRING, (ry_span){lx->src, line, col, (int)(lx->p - start)}, start);
    if (!t) return oom(lx);
    t->str = buf;
    t->str_len = n;
    return RY_OK;
}

/* meta_ref -> 'meta' '[' type_key ']' '[' digit+ ']' */
static ry_status lex_meta(lexer *lx) {
    const char *start = lx->p;
    int line = lx->line, col = lx->col;
    for (int i = 0; i < 5; i++) advance(lx); /* meta[ */
    const char *key = lx->p;
    while (lx->p < lx->end && *lx->p != ']' && *lx->p != '\n') advance(lx);
    size_t keylen = (size_t)(lx->p - key);
    ry_span span = {lx->src, line, col, (int)(lx->p - start)};
    if (peekc(lx, 0) != ']' || peekc(lx, 1) != '[' || keylen == 0)
        return ry_error_at(lx->err, span, "malformed meta reference: expected meta[TYPE][INDEX]");
    advance(lx);
    advance(lx);
    int64_t index = 0;
    const char *digits = lx->p;
    while (lx->p < lx->end && is_digit(*lx->p)) {
        if (index < 100000000) index = index * 10 + (*lx->p - '0');
        advance(lx);
    }
    span.len = (int)(lx->p - start) + 1;
    if (lx->p == digits || peekc(lx, 0) != ']')
        return ry_error_at(lx->err, span, "malformed meta reference: expected meta[TYPE][INDEX]");
    advance(lx);
    token *t = push(lx, TK_META, span, start);
    if (!t) return oom(lx);
    t->name = ry_arena_strndup(lx->arena, key, keylen);
    t->i = index;
    return RY_OK;
}

/* attribute -> '#[' 'version' '=' '"' text '"' ']' | '#[' 'metadata' ']' json-to-end */
static ry_status lex_attribute(lexer *lx, bool *stop) {
    const char *start = lx->p;
    int line = lx->line, col = lx->col;
    ry_span at = here(lx, 1);
    advance(lx);
    if (peekc(lx, 0) != '[')
        return ry_error_at(lx->err, at, "`#` must be followed by `[` (an attribute like #[version = \"0.0.5\"])");
    advance(lx);
    const char *body = lx->p;
    while (lx->p < lx->end && *lx->p != ']' && *lx->p != '\n') advance(lx);
    if (peekc(lx, 0) != ']') return ry_error_at(lx->err, at, "unterminated attribute: missing `]`");
    const char *b = body, *e = lx->p;
    advance(lx);
    while (b < e && (*b == ' ' || *b == '\t')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
    ry_span span = {lx->src, line, col, (int)(lx->p - start)};
    if (e - b == 8 && memcmp(b, "metadata", 8) == 0) {
        token *t = push(lx, TK_METADATA, span, start);
        if (!t) return oom(lx);
        t->str = lx->p;
        t->str_len = (size_t)(lx->end - lx->p);
        *stop = true;
        return RY_OK;
    }
    if (e - b > 7 && memcmp(b, "version", 7) == 0) {
        const char *v = b + 7;
        while (v < e && (*v == ' ' || *v == '\t')) v++;
        if (v < e && *v == '=') {
            v++;
            while (v < e && (*v == ' ' || *v == '\t')) v++;
            if (e - v >= 2 && *v == '"' && e[-1] == '"') {
                token *t = push(lx, TK_VERSION, span, start);
                if (!t) return oom(lx);
                t->i = v - start; /* the quoted version's column offset, for errors */
                t->str = ry_arena_strndup(lx->arena, v + 1, (size_t)(e - v - 2));
                t->str_len = (size_t)(e - v - 2);
                return RY_OK;
            }
        }
        return ry_error_at(lx->err, span, "malformed version attribute: expected #[version = \"0.0.5\"]");
    }
    return ry_error_at(lx->err, span, "unsupported attribute #[%.*s]", (int)(e - b), b);
}

static const struct {
    const char *text;
    tok_kind kind;
} puncts[] = {
    {"->", TK_ARROW}, {"=>", TK_FATARROW}, {"<=", TK_LE}, {">=", TK_GE}, {"==", TK_EQEQ},
    {"!=", TK_NE},    {"(", TK_LPAREN},    {")", TK_RPAREN}, {"[", TK_LBRACK}, {"]", TK_RBRACK},
    {"{", TK_LBRACE}, {"}", TK_RBRACE},    {",", TK_COMMA},  {";", TK_SEMI},   {":", TK_COLON},
    {".", TK_DOT},    {"=", TK_EQ},        {"+", TK_PLUS},   {"-", TK_MINUS},  {"*", TK_STAR},
    {"/", TK_SLASH},  {"<", TK_LT},        {">", TK_GT},     {"?", TK_QUESTION},
};

static ry_status lex_one(lexer *lx, bool *stop) {
    char c = *lx->p;
    int c1 = peekc(lx, 1);
    const char *start = lx->p;
    int line = lx->line, col = lx->col;
    if (c == '/' && c1 == '/') {
        while (lx->p < lx->end && *lx->p != '\n') advance(lx);
        return RY_OK;
    }
    if (c == '/' && c1 == '*') return skip_block_comment(lx);
    if (c == '"') return lex_string(lx);
    if (c == '#') return lex_attribute(lx, stop);
    bool after_dot = lx->n > 0 && lx->toks[lx->n - 1].kind == TK_DOT;
    if (is_digit(c)) return lex_number(lx, after_dot);
    if (c == '-' && c1 >= 0 && is_digit((char)c1)) return lex_number(lx, false);
    if (c == '-' && lx->end - lx->p >= 5 && memcmp(lx->p + 1, "inff", 4) == 0 &&
        !(lx->end - lx->p > 5 && is_ident(lx->p[5]))) {
        for (int i = 0; i < 5; i++) advance(lx);
        token *t = push(lx, TK_FLOAT, (ry_span){lx->src, line, col, 5}, start);
        if (!t) return oom(lx);
        t->f = -INFINITY;
        t->dtype = RY_FLOAT32;
        return RY_OK;
    }
    if (c == 'm' && lx->end - lx->p > 5 && memcmp(lx->p, "meta[", 5) == 0) return lex_meta(lx);
    if (is_ident_start(c)) return lex_name(lx, TK_IDENT, start, line, col, true);
    if (c == '%' || c == '@') {
        advance(lx);
        if (c == '%' && lx->p < lx->end && is_digit(*lx->p)) {
            int64_t v = 0;
            while (lx->p < lx->end && is_digit(*lx->p)) {
                if (v < 100000000) v = v * 10 + (*lx->p - '0');
                advance(lx);
            }
            token *t = push(lx, TK_GRAPH, (ry_span){lx->src, line, col, (int)(lx->p - start)}, start);
            if (!t) return oom(lx);
            t->i = v;
            return RY_OK;
        }
        if (lx->p >= lx->end || !is_ident_start(*lx->p))
            return ry_error_at(lx->err, (ry_span){lx->src, line, col, 1},
                               "expected a name after `%c`", c);
        return lex_name(lx, c == '%' ? TK_LOCAL : TK_GLOBAL, start, line, col, false);
    }
    for (size_t k = 0; k < sizeof puncts / sizeof puncts[0]; k++) {
        size_t n = strlen(puncts[k].text);
        if ((size_t)(lx->end - lx->p) >= n && memcmp(lx->p, puncts[k].text, n) == 0) {
            for (size_t i = 0; i < n; i++) advance(lx);
            return push(lx, puncts[k].kind, (ry_span){lx->src, line, col, (int)n}, start) ? RY_OK : oom(lx);
        }
    }
    if (c >= 0x20 && c < 0x7f)
        return ry_error_at(lx->err, here(lx, 1), "unexpected character '%c'", c);
    return ry_error_at(lx->err, here(lx, 1), "unexpected byte 0x%02x", (unsigned char)c);
}

ry_status ry_lex(const ry_source *src, ry_arena *arena, lexed *out, ry_error *err) {
    memset(out, 0, sizeof *out);
    lexer lx = {src, arena, src->text, src->text + src->len, 1, 1, NULL, 0, 0, err, out};
    bool stop = false;
    while (lx.p < lx.end && !stop) {
        char c = *lx.p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            advance(&lx);
            continue;
        }
        if (lex_one(&lx, &stop) != RY_OK) {
            ry_lex_free(out);
            return RY_ERR;
        }
    }
    if (stop) {
        token *m = &lx.toks[lx.n - 1];
        out->meta_text = m->str;
        out->meta_len = m->str_len;
        out->meta_span = m->span;
        lx.n--; /* the parser sees the metadata through out->meta_* */
        /* the EOF token sits at the end of the file */
        while (lx.p < lx.end) advance(&lx);
    }
    if (!push(&lx, TK_EOF, here(&lx, 1), lx.p)) {
        ry_lex_free(out);
        return oom(&lx);
    }
    out->toks = lx.toks;
    out->n = lx.n;
    return RY_OK;
}

void ry_lex_free(lexed *l) {
    ry_free(l->toks);
    l->toks = NULL;
    l->n = 0;
}
