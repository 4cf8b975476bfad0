/*
 * metadata.c: the `#[metadata]` section TVM writes after a module: JSON
 * whose "nodes" hold the relay.Constant array that meta[relay.Constant][N]
 * indexes, each constant's "data" attribute indexing "b64ndarrays", TVM's
 * NDArray serialization in base64. Reads it (a small JSON reader, bounded
 * depth, located errors) and writes it (so TVM can load what we print).
 * It knows nothing of the rest of the syntax.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"

/* ---- growable strings (shared with print.c) ---- */

void ry_sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *fresh = ry_realloc(b->data, cap);
        if (!fresh) {
            b->oom = true;
            return;
        }
        b->data = fresh;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ry_sb_puts(strbuf *b, const char *s) { ry_sb_put(b, s, strlen(s)); }

void ry_sb_printf(strbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        ry_sb_put(b, small, (size_t)n);
        return;
    }
    char *big = ry_malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ry_sb_put(b, big, (size_t)n);
    ry_free(big);
}

/* ---- a small JSON reader ---- */

typedef enum jkind { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jval jval;
struct jval {
    jkind kind;
    double num;
    const char *str; /* J_STR (arena, NUL-terminated) */
    int n;           /* J_ARR, J_OBJ */
    jval **items;
    const char **keys; /* J_OBJ */
};

typedef struct jreader {
    const char *start, *p, *end;
    ry_arena *arena;
    ry_span at; /* where #[metadata] is written: errors count lines from there */
    ry_error *err;
    int depth;
} jreader;

static ry_status jfail(jreader *r, const char *what) {
    ry_span s = r->at;
    s.len = 1;
    /* the JSON starts right after `#[metadata]` on the same line */
    s.col += r->at.len;
    for (const char *q = r->start; q < r->p && q < r->end; q++) {
        if (*q == '\n') {
            s.line++;
            s.col = 1;
        } else {
            s.col++;
        }
    }
    return ry_error_at(r->err, s, "malformed metadata: %s", what);
}

static void jspace(jreader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) r->p++;
}

static ry_status jvalue(jreader *r, jval **out);

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
}

static ry_status jstring(jreader *r, const char **out) {
    r->p++; /* " */
    char *buf = ry_arena_alloc(r->arena, (size_t)(r->end - r->p) + 1);
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        char c = *r->p++;
        if (c == '\\') {
            if (r->p >= r->end) break;
            char e = *r->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* \u00XX only: TVM escapes nothing wider in metadata */
                if (r->end - r->p < 4) return jfail(r, "bad \\u escape");
                c = (char)(hexval(r->p[2]) << 4 | hexval(r->p[3]));
                r->p += 4;
                break;
            default: c = e;
            }
        }
        buf[n++] = c;
    }
    if (r->p >= r->end) return jfail(r, "unterminated string");
    r->p++;
    buf[n] = '\0';
    *out = buf;
    return RY_OK;
}

/* list -> open (value (',' value)*)? close, for arrays (keys NULL) and objects */
static ry_status jlist(jreader *r, jval *v, char close) {
    r->p++;
    int cap = 0;
    jspace(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return RY_OK;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            jval **items = RY_NEW_ARRAY(r->arena, jval *, cap);
            const char **keys = RY_NEW_ARRAY(r->arena, const char *, cap);
            if (v->n) {
                memcpy(items, v->items, sizeof *items * (size_t)v->n);
                memcpy(keys, v->keys, sizeof *keys * (size_t)v->n);
            }
            v->items = items;
            v->keys = keys;
        }
        jspace(r);
        if (close == '}') {
            if (r->p >= r->end || *r->p != '"') return jfail(r, "expected a key string");
            if (jstring(r, &v->keys[v->n])) return RY_ERR;
            jspace(r);
            if (r->p >= r->end || *r->p != ':') return jfail(r, "expected ':'");
            r->p++;
        }
        if (jvalue(r, &v->items[v->n])) return RY_ERR;
        v->n++;
        jspace(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return RY_OK;
        }
        return jfail(r, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
    }
}

static ry_status jvalue(jreader *r, jval **out) {
    if (++r->depth > 64) return jfail(r, "nested too deeply");
    jspace(r);
    if (r->p >= r->end) return jfail(r, "unexpected end of the metadata");
    jval *v = RY_NEW(r->arena, jval);
    *out = v;
    char c = *r->p;
    ry_status st = RY_OK;
    if (c == '{') {
        v->kind = J_OBJ;
        st = jlist(r, v, '}');
    } else if (c == '[') {
        v->kind = J_ARR;
        st = jlist(r, v, ']');
    } else if (c == '"') {
        v->kind = J_STR;
        st = jstring(r, &v->str);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (r->p < r->end && n < sizeof buf - 1 && strchr("+-.eE0123456789", *r->p)) buf[n++] = *r->p++;
        buf[n] = '\0';
        v->kind = J_NUM;
        v->num = strtod(buf, NULL);
    } else if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
        v->kind = J_BOOL;
        v->num = 1;
        r->p += 4;
    } else if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
        v->kind = J_BOOL;
        r->p += 5;
    } else if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
        v->kind = J_NULL;
        r->p += 4;
    } else {
        return jfail(r, "expected a JSON value");
    }
    r->depth--;
    return st;
}

static const jval *jget(const jval *o, const char *key) {
    if (!o || o->kind != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) return o->items[i];
    return NULL;
}

/* An index written as a number or as a string of digits ("3"). */
static long jindex(const jval *v) {
    if (!v) return -1;
    if (v->kind == J_NUM && v->num >= 0 && v->num < 1e9) return (long)v->num;
    if (v->kind == J_STR && v->str[0]) {
        char *end;
        long i = strtol(v->str, &end, 10);
        return *end || i < 0 ? -1 : i;
    }
    return -1;
}

/* ---- base64 and TVM's NDArray serialization ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64val(char c) {
    const char *q = c ? strchr(b64chars, c) : NULL;
    return q ? (int)(q - b64chars) : -1;
}

/* Decodes into a ry_malloc'ed buffer; NULL if not base64. */
static unsigned char *b64decode(const char *s, size_t *outlen) {
    size_t n = strlen(s);
    unsigned char *out = ry_malloc(n / 4 * 3 + 3);
    if (!out) return NULL;
    size_t k = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64val(s[i]);
        if (v < 0) {
            ry_free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    *outlen = k;
    return out;
}

#define NDARRAY_MAGIC 0xDD5E40F096B4A13FULL

static const struct {
    ry_dtype dtype;
    uint8_t code, bits;
} dl_types[] = {
    {RY_FLOAT32, 2, 32}, {RY_FLOAT64, 2, 64}, {RY_FLOAT16, 2, 16}, {RY_INT8, 0, 8},
    {RY_INT32, 0, 32},   {RY_INT64, 0, 64},   {RY_UINT8, 1, 8},    {RY_BOOL, 1, 1},
    {RY_INT16, 0, 16},   {RY_UINT16, 1, 16},
};

static uint64_t rd_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t rd_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ndarray -> u64 magic, u64 reserved, i32 device type, i32 device id, i32 ndim,
 *            u8 code, u8 bits, u16 lanes, i64 shape[ndim], i64 nbytes, data */
static ry_tensor *ndarray_load(const unsigned char *b, size_t n, const char **why) {
    *why = "truncated NDArray";
    if (n < 36) return NULL;
    if (rd_u64(b) != NDARRAY_MAGIC) return *why = "bad NDArray magic number", NULL;
    int32_t ndim = (int32_t)rd_u32(b + 24);
    uint8_t code = b[28], bits = b[29];
    uint16_t lanes = (uint16_t)(b[30] | b[31] << 8);
    if (ndim < 0 || ndim > RY_MAX_RANK) return *why = "unsupported NDArray rank", NULL;
    if (lanes != 1) return *why = "vector dtypes are not supported", NULL;
    int d = -1;
    for (int i = 0; i < (int)(sizeof dl_types / sizeof dl_types[0]); i++)
        if (dl_types[i].code == code && dl_types[i].bits == bits) d = i;
    if (d < 0) return *why = "unsupported NDArray dtype", NULL;
    if (n < 32 + 8 * (size_t)ndim + 8) return NULL;
    int64_t shape[RY_MAX_RANK];
    for (int i = 0; i < ndim; i++) shape[i] = (int64_t)rd_u64(b + 32 + 8 * i);
    uint64_t nbytes = rd_u64(b + 32 + 8 * ndim);
    size_t off = 32 + 8 * (size_t)ndim + 8;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || shape[i] > (int64_t)n) return *why = "bad NDArray shape", NULL;
    ry_tensor *t = ry_tensor_new(dl_types[d].dtype, ndim, shape);
    if (!t) return *why = "out of memory", NULL;
    if (nbytes != ry_tensor_nbytes(t) || n - off < nbytes) {
        ry_tensor_release(t);
        return *why = "NDArray data size does not match its shape", NULL;
    }
    memcpy(t->data, b + off, nbytes);
    return t;
}

ry_status ry_metadata_parse(const char *text, size_t len, ry_span at, ry_tensor ***out, int *n,
                            ry_error *err) {
    *out = NULL;
    *n = 0;
    ry_arena *arena = ry_arena_new();
    jreader r = {text, text, text + len, arena, at, err, 0};
    jval *root = NULL;
    ry_status st = jvalue(&r, &root);
    if (!st) {
        jspace(&r);
        if (r.p != r.end) st = jfail(&r, "unexpected text after the JSON");
    }
    const jval *nodes = st ? NULL : jget(root, "nodes"), *arrays = st ? NULL : jget(root, "b64ndarrays");
    if (!st && (!nodes || nodes->kind != J_ARR)) st = jfail(&r, "no \"nodes\" array");
    long top = st ? -1 : jindex(jget(root, "root"));
    const jval *consts = NULL;
    if (!st && top >= 0 && top < nodes->n) {
        const jval *map = nodes->items[top], *keys = jget(map, "keys"), *data = jget(map, "data");
        for (int i = 0; keys && data && keys->kind == J_ARR && data->kind == J_ARR && i < keys->n && i < data->n; i++)
            if (keys->items[i]->kind == J_STR && strcmp(keys->items[i]->str, "relay.Constant") == 0) {
                long a = jindex(data->items[i]);
                if (a >= 0 && a < nodes->n) consts = jget(nodes->items[a], "data");
            }
    }
    if (!st && consts && consts->kind == J_ARR && consts->n > 0) {
        *out = ry_calloc((size_t)consts->n, sizeof(ry_tensor *));
        if (!*out) st = ry_error_at(err, at, "out of memory reading the metadata");
        for (int i = 0; !st && i < consts->n; i++) {
            long k = jindex(consts->items[i]);
            const jval *node = k >= 0 && k < nodes->n ? nodes->items[k] : NULL;
            long b = jindex(jget(jget(node, "attrs"), "data"));
            if (!arrays || arrays->kind != J_ARR || b < 0 || b >= arrays->n || arrays->items[b]->kind != J_STR) {
                st = ry_error_at(err, at, "malformed metadata: relay.Constant %d has no ndarray", i);
                break;
            }
            size_t nb = 0;
            unsigned char *bytes = b64decode(arrays->items[b]->str, &nb);
            if (!bytes) {
                st = ry_error_at(err, at, "malformed metadata: ndarray %ld is not base64", b);
                break;
            }
            const char *why = NULL;
            (*out)[i] = ndarray_load(bytes, nb, &why);
            ry_free(bytes);
            if (!(*out)[i]) st = ry_error_at(err, at, "malformed metadata: constant %d: %s", i, why);
            else (*n)++;
        }
    }
    ry_arena_free(arena);
    if (st) {
        for (int i = 0; i < *n; i++) ry_tensor_release((*out)[i]);
        ry_free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

/* ---- writing ---- */

static void b64encode(strbuf *b, const unsigned char *s, size_t n) {
    char quad[4];
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        quad[0] = b64chars[v >> 18 & 63];
        quad[1] = b64chars[v >> 12 & 63];
        quad[2] = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
        quad[3] = i + 2 < n ? b64chars[v & 63] : '=';
        ry_sb_put(b, quad, 4);
    }
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void ndarray_save(strbuf *b, const ry_tensor *t) {
    size_t head = 32 + 8 * (size_t)t->ndim + 8, nbytes = ry_tensor_nbytes(t);
    unsigned char *buf = ry_malloc(head + nbytes);
    if (!buf) {
        b->oom = true;
        return;
    }
    memset(buf, 0, head);
    put_u64(buf, NDARRAY_MAGIC);
    buf[16] = 1; /* kDLCPU, device id 0 */
    buf[24] = (unsigned char)t->ndim;
    for (int i = 0; i < (int)(sizeof dl_types / sizeof dl_types[0]); i++)
        if (dl_types[i].dtype == t->dtype) {
            buf[28] = dl_types[i].code;
            buf[29] = dl_types[i].bits;
        }
    buf[30] = 1; /* lanes */
    for (int i = 0; i < t->ndim; i++) put_u64(buf + 32 + 8 * i, (uint64_t)t->shape[i]);
    put_u64(buf + 32 + 8 * t->ndim, nbytes);
    memcpy(buf + head, t->data, nbytes);
    b64encode(b, buf, head + nbytes);
    ry_free(buf);
}

/* TVM's SaveJSON layout: node 0 is null, 1 the root map, 2 the constant
 * array, then one relay.Constant node per constant. */
void ry_metadata_print(strbuf *b, ry_tensor *const *ts, int n) {
    ry_sb_puts(b, "{\n  \"root\": 1,\n  \"nodes\": [\n    {\n      \"type_key\": \"\"\n    },\n");
    ry_sb_puts(b, "    {\n      \"type_key\": \"Map\",\n      \"keys\": [\n        \"relay.Constant\"\n"
                  "      ],\n      \"data\": [2]\n    },\n");
    ry_sb_puts(b, "    {\n      \"type_key\": \"Array\",\n      \"data\": [");
    for (int i = 0; i < n; i++) ry_sb_printf(b, "%s%d", i ? ", " : "", 3 + i);
    ry_sb_puts(b, "]\n    }");
    for (int i = 0; i < n; i++)
        ry_sb_printf(b, ",\n    {\n      \"type_key\": \"relay.Constant\",\n      \"attrs\": {\n"
                        "        \"_checked_type_\": \"0\",\n        \"data\": \"%d\",\n"
                        "        \"span\": \"0\",\n        \"virtual_device_\": \"0\"\n      }\n    }",
                     i);
    ry_sb_puts(b, "\n  ],\n  \"b64ndarrays\": [");
    for (int i = 0; i < n; i++) {
        ry_sb_puts(b, i ? ",\n    \"" : "\n    \"");
        ndarray_save(b, ts[i]);
        ry_sb_puts(b, "\"");
    }
    ry_sb_puts(b, "\n  ],\n  \"attrs\": {\"tvm_version\": \"0.8.0\"}\n}\n");
}
