/*
 * lexer.h (private): the tokens of Relay's text format (TVM 0.0.5) and the
 * lexer that turns a whole source into an array of them, as TVM's tokenizer
 * does. The parser (parse*.c) is the only user. Literal values are decoded
 * here; what they mean (a constant, an attribute) is the parser's business.
 */
#ifndef RELAYC_IR_LEXER_H
#define RELAYC_IR_LEXER_H

#include "relayc/ir.h"

typedef enum tok_kind {
    TK_EOF,
    TK_INT,      /* 3, -1, 2i64 */
    TK_FLOAT,    /* 1f, 0.5f, 1e-05f, 2f64, inff */
    TK_IDENT,    /* nn.conv2d, float32, Cons, A (may hold '.' and '/') */
    TK_LOCAL,    /* %x */
    TK_GRAPH,    /* %0 */
    TK_GLOBAL,   /* @main */
    TK_STRING,   /* "NCHW" */
    TK_META,     /* meta[relay.Constant][0] */
    TK_VERSION,  /* #[version = "0.0.5"] */
    TK_METADATA, /* #[metadata] and the rest of the file */
    /* keywords */
    TK_LET, TK_FN, TK_DEF, TK_IF, TK_ELSE, TK_TYPE, TK_MATCH, TK_MATCHQ, TK_REF,
    TK_REF_READ, TK_REF_WRITE, TK_FREE_VAR, TK_EXTERN, TK_TRUE, TK_FALSE, TK_UNDERSCORE,
    /* punctuation */
    TK_LPAREN, TK_RPAREN, TK_LBRACK, TK_RBRACK, TK_LBRACE, TK_RBRACE, TK_COMMA,
    TK_SEMI, TK_COLON, TK_DOT, TK_EQ, TK_ARROW, TK_FATARROW, TK_PLUS, TK_MINUS,
    TK_STAR, TK_SLASH, TK_LT, TK_GT, TK_LE, TK_GE, TK_EQEQ, TK_NE, TK_QUESTION,
    TK_COUNT
} tok_kind;

typedef struct token {
    tok_kind kind;
    ry_span span;       /* line, col and byte length of the whole token */
    size_t off;         /* byte offset of the token in the text */
    const char *name;   /* TK_IDENT/LOCAL/GLOBAL/META: NUL-terminated, no sigil (arena) */
    int64_t i;          /* TK_INT value, TK_GRAPH number, TK_META index, TK_VERSION offset */
    double f;           /* TK_FLOAT value */
    ry_dtype dtype;     /* TK_INT/TK_FLOAT: int32/float32 unless suffixed */
    bool suffixed;      /* a width suffix was written (2i64, 1f64) */
    const char *str;    /* TK_STRING contents (escapes decoded), TK_VERSION's version */
    size_t str_len;
} token;

typedef struct lexed {
    token *toks; /* ry_malloc'ed; the last is TK_EOF */
    int n;
    const char *meta_text; /* the JSON after #[metadata], or NULL */
    size_t meta_len;
    ry_span meta_span;     /* where #[metadata] was written */
} lexed;

/* Tokenizes the whole source; names and strings go into arena. On error
 * (an unknown character, an unterminated comment or string, a bad number)
 * err is located at the offending text and out holds nothing to free. */
ry_status ry_lex(const ry_source *src, ry_arena *arena, lexed *out, ry_error *err);
void ry_lex_free(lexed *l);
/* "`(`", "an identifier", ... for messages. */
const char *ry_tok_name(tok_kind k);

#endif
