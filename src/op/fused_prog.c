/*
 * fused_prog.c: reads and types the programs of the fused operators (the
 * language is described in fused_prog.h) and caches the compiled form, so
 * that the type relation and the kernel of a call, run thousands of times,
 * compile its program once. Execution is the backend's business
 * (src/backend/cpu/fused_exec.c); writing programs is the fusion pass's.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "op/fused_prog.h"

/* ---- the operators a program may call ---- */

typedef enum { K_ARITH, K_CMP, K_LOGIC, K_FLOAT1, K_NUM1, K_BOOL1, K_ANY1, K_CAST, K_WHERE } kind;

typedef struct opdef {
    const char *name; /* TVM's */
    ry_fz_opcode op;
    int nargs;
    kind k;
} opdef;

static const opdef ops[] = {
    {"add", RY_FZ_ADD, 2, K_ARITH},           {"subtract", RY_FZ_SUB, 2, K_ARITH},
    {"multiply", RY_FZ_MUL, 2, K_ARITH},      {"divide", RY_FZ_DIV, 2, K_ARITH},
    {"power", RY_FZ_POW, 2, K_ARITH},         {"maximum", RY_FZ_MAX, 2, K_ARITH},
    {"minimum", RY_FZ_MIN, 2, K_ARITH},       {"equal", RY_FZ_EQ, 2, K_CMP},
    {"not_equal", RY_FZ_NE, 2, K_CMP},        {"less", RY_FZ_LT, 2, K_CMP},
    {"less_equal", RY_FZ_LE, 2, K_CMP},       {"greater", RY_FZ_GT, 2, K_CMP},
    {"greater_equal", RY_FZ_GE, 2, K_CMP},    {"logical_and", RY_FZ_AND, 2, K_LOGIC},
    {"logical_or", RY_FZ_OR, 2, K_LOGIC},     {"negative", RY_FZ_NEG, 1, K_NUM1},
    {"exp", RY_FZ_EXP, 1, K_FLOAT1},          {"log", RY_FZ_LOG, 1, K_FLOAT1},
    {"sqrt", RY_FZ_SQRT, 1, K_FLOAT1},        {"rsqrt", RY_FZ_RSQRT, 1, K_FLOAT1},
    {"tanh", RY_FZ_TANH, 1, K_FLOAT1},        {"sigmoid", RY_FZ_SIGMOID, 1, K_FLOAT1},
    {"abs", RY_FZ_ABS, 1, K_NUM1},            {"nn.relu", RY_FZ_RELU, 1, K_NUM1},
    {"nn.leaky_relu", RY_FZ_LEAKY, 1, K_FLOAT1}, {"clip", RY_FZ_CLIP, 1, K_NUM1},
    {"logical_not", RY_FZ_NOT, 1, K_BOOL1},   {"cast", RY_FZ_CAST, 1, K_CAST},
    {"copy", RY_FZ_COPY, 1, K_ANY1},          {"zeros_like", RY_FZ_ZEROS, 1, K_ANY1},
    {"ones_like", RY_FZ_ONES, 1, K_ANY1},     {"where", RY_FZ_WHERE, 3, K_WHERE},
};
#define NOPS (int)(sizeof ops / sizeof ops[0])

int ry_fz_opcode_of(const char *op_name) {
    for (int i = 0; i < NOPS; i++)
        if (strcmp(ops[i].name, op_name) == 0) return (int)ops[i].op;
    return -1;
}

const char *ry_fz_op_name(ry_fz_opcode op) {
    for (int i = 0; i < NOPS; i++)
        if (ops[i].op == op) return ops[i].name;
    return "?";
}

static bool fdt(ry_dtype d) { return d == RY_FLOAT32 || d == RY_FLOAT64; }

/* ---- the reader ---- */

typedef struct rd {
    const char *s, *p;
    ry_fz_prog *g;
    ry_span span;
    ry_error *err;
    bool failed;
} rd;

__attribute__((format(printf, 2, 3))) static void fail(rd *r, const char *fmt, ...) {
    if (r->failed) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ry_error_at(r->err, r->span, "fused program: %s (at offset %d of \"%s\")", msg,
                (int)(r->p - r->s), r->s);
    r->failed = true;
}

static void skip(rd *r) {
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n') r->p++;
}

static bool eat(rd *r, char c) {
    skip(r);
    if (*r->p != c) return false;
    r->p++;
    return true;
}

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* An identifier (operator, attribute, dtype name) into buf. */
static bool ident(rd *r, char *buf, size_t n) {
    skip(r);
    size_t k = 0;
    while (name_char(r->p[k]) && k + 1 < n) k++;
    if (k == 0 || name_char(r->p[k])) return false;
    memcpy(buf, r->p, k);
    buf[k] = 0;
    r->p += k;
    return true;
}

/* A Relay literal: 1f, 0.5f, -2.5e-3f32, 1f64, True, False. */
static bool literal(rd *r, double *v, ry_dtype *dt) {
    skip(r);
    if (strncmp(r->p, "True", 4) == 0 || strncmp(r->p, "False", 5) == 0) {
        bool t = r->p[0] == 'T';
        r->p += t ? 4 : 5;
        *v = t;
        *dt = RY_BOOL;
        return true;
    }
    char *end;
    double d = strtod(r->p, &end);
    if (end == r->p || *end != 'f') return false;
    r->p = end + 1;
    *dt = RY_FLOAT32;
    if (strncmp(r->p, "64", 2) == 0) *dt = RY_FLOAT64, r->p += 2;
    else if (strncmp(r->p, "32", 2) == 0) r->p += 2;
    *v = *dt == RY_FLOAT32 ? (double)(float)d : d;
    return true;
}

static int add_const(rd *r, double v, ry_dtype dt) {
    ry_fz_prog *g = r->g;
    for (int i = 0; i < g->nconst; i++)
        if (g->cdt[i] == dt && memcmp(&g->cval[i], &v, sizeof v) == 0) return g->nin + i;
    if (g->nconst == RY_FZ_MAX_CONST) {
        fail(r, "more than %d literals", RY_FZ_MAX_CONST);
        return 0;
    }
    g->cval[g->nconst] = v;
    g->cdt[g->nconst] = dt;
    return g->nin + g->nconst++;
}

static ry_dtype value_dt(const ry_fz_prog *g, int v) {
    if (v < g->nin) return g->in_dt[v];
    if (v < g->nin + RY_FZ_MAX_CONST) return g->cdt[v - g->nin];
    return g->ins[v - g->nin - RY_FZ_MAX_CONST].odt;
}

/* operand := xK | tI | acc | literal. Instruction results are numbered
 * after all possible literals while reading (the literal count is known
 * only at the end) and renumbered then. */
static int operand(rd *r) {
    skip(r);
    ry_fz_prog *g = r->g;
    double v;
    ry_dtype dt;
    if (literal(r, &v, &dt)) return add_const(r, v, dt);
    char id[32];
    if (!ident(r, id, sizeof id)) {
        fail(r, "expected an operand (xK, tI, acc or a literal)");
        return 0;
    }
    if (strcmp(id, "acc") == 0) {
        if (!g->acc) fail(r, "acc is the GEMM result of fused.matmul only");
        return 0;
    }
    char *end;
    long k = strtol(id + 1, &end, 10);
    if ((id[0] != 'x' && id[0] != 't') || !id[1] || *end || k < 0) {
        fail(r, "unknown operand '%s'", id);
        return 0;
    }
    if (id[0] == 't') {
        if (k >= g->nins) fail(r, "t%ld is not computed before instruction %d", k, g->nins);
        return g->nin + RY_FZ_MAX_CONST + (int)k;
    }
    int slot = g->acc ? (int)k - 1 : (int)k;
    if (g->acc && k < 2) fail(r, "x%ld is a GEMM operand, not an elementwise input", k);
    else if (slot >= g->nin) fail(r, "x%ld: the call has %d inputs", k, g->nin + (g->acc ? 1 : 0));
    return slot;
}

/* attr := NAME '=' (literal | NAME) */
static void attribute(rd *r, ry_fz_ins *in, unsigned *seen) {
    char name[32];
    if (!ident(r, name, sizeof name) || !eat(r, '=')) {
        fail(r, "expected an operand or an attribute name=value");
        return;
    }
    double v;
    ry_dtype dt;
    if (in->op == RY_FZ_CAST && strcmp(name, "dtype") == 0) {
        char d[32];
        if (!ident(r, d, sizeof d) || !ry_dtype_parse(d, strlen(d), &in->odt) ||
            !(fdt(in->odt) || in->odt == RY_BOOL))
            fail(r, "cast: dtype must be float32, float64 or bool");
        return;
    }
    int slot = in->op == RY_FZ_CLIP && strcmp(name, "a_min") == 0   ? 0
               : in->op == RY_FZ_CLIP && strcmp(name, "a_max") == 0 ? 1
               : in->op == RY_FZ_LEAKY && strcmp(name, "alpha") == 0 ? 0
                                                                     : -1;
    if (slot < 0) {
        fail(r, "%s has no attribute '%s' here", ry_fz_op_name(in->op), name);
        return;
    }
    *seen |= 1u << slot;
    if (!literal(r, &v, &dt)) {
        fail(r, "attribute %s needs a float literal", name);
        return;
    }
    in->p[slot] = v;
}

/* The dtype rules of one instruction (Relay's, restricted to the dtypes
 * programs compute in). */
static void type_ins(rd *r, const opdef *d, ry_fz_ins *in) {
    ry_dtype t[3];
    for (int i = 0; i < in->nargs; i++) t[i] = value_dt(r->g, in->a[i]);
    in->dt = t[0];
    switch (d->k) {
    case K_ARITH:
        if (!fdt(t[0]) || t[1] != t[0]) fail(r, "%s needs two float operands of one dtype", d->name);
        in->odt = t[0];
        break;
    case K_CMP:
        if (!(fdt(t[0]) || t[0] == RY_BOOL) || t[1] != t[0])
            fail(r, "%s needs two operands of one dtype", d->name);
        in->odt = RY_BOOL;
        break;
    case K_LOGIC:
        if (t[0] != RY_BOOL || t[1] != RY_BOOL) fail(r, "%s needs bool operands", d->name);
        in->odt = RY_BOOL;
        break;
    case K_FLOAT1: case K_NUM1:
        if (!fdt(t[0])) fail(r, "%s needs a float operand", d->name);
        in->odt = t[0];
        break;
    case K_BOOL1:
        if (t[0] != RY_BOOL) fail(r, "%s needs a bool operand", d->name);
        in->odt = RY_BOOL;
        break;
    case K_ANY1:
        in->odt = t[0];
        break;
    case K_CAST:
        break; /* odt from the attribute (checked below) */
    case K_WHERE:
        if (t[0] != RY_BOOL || t[1] != t[2])
            fail(r, "where needs a bool condition and x, y of one dtype");
        in->dt = t[1];
        in->odt = t[1];
        break;
    }
}

/* ins := NAME '(' operand (',' operand)* (',' attr)* ')' */
static void instruction(rd *r) {
    ry_fz_prog *g = r->g;
    char name[32];
    if (g->nins == RY_FZ_MAX_INS) {
        fail(r, "more than %d instructions", RY_FZ_MAX_INS);
        return;
    }
    if (!ident(r, name, sizeof name)) {
        fail(r, "expected an operator name");
        return;
    }
    const opdef *d = NULL;
    for (int i = 0; i < NOPS && !d; i++)
        if (strcmp(ops[i].name, name) == 0) d = &ops[i];
    if (!d) {
        fail(r, "'%s' is not an operator fused programs hold", name);
        return;
    }
    ry_fz_ins *in = &g->ins[g->nins];
    memset(in, 0, sizeof *in);
    in->op = d->op;
    in->odt = RY_DTYPE_COUNT;
    if (d->op == RY_FZ_LEAKY) in->p[0] = 0.25; /* TVM's default alpha */
    if (!eat(r, '(')) {
        fail(r, "expected '(' after %s", name);
        return;
    }
    unsigned seen = 0;
    for (int i = 0; !r->failed; i++) {
        if (i > 0 && eat(r, ')')) break;
        if (i > 0 && !eat(r, ',')) {
            fail(r, "expected ',' or ')'");
            break;
        }
        if (i < d->nargs) {
            in->a[in->nargs++] = operand(r);
            continue;
        }
        attribute(r, in, &seen);
    }
    if (r->failed) return;
    if (in->nargs != d->nargs) return fail(r, "%s takes %d operands", name, d->nargs);
    if (d->op == RY_FZ_CLIP && seen != 3u) return fail(r, "clip needs a_min and a_max");
    if (d->op == RY_FZ_CAST && in->odt == RY_DTYPE_COUNT) return fail(r, "cast needs dtype=");
    type_ins(r, d, in);
    if (d->op == RY_FZ_CAST && !(fdt(in->dt) || in->dt == RY_BOOL))
        fail(r, "cast: the operand must be float32, float64 or bool");
    g->nins++;
}

/* results := '(' tI (',' tI)* ')', the program's last statement: the
 * instruction indices into g->outs (renumbered by finish). */
static void results(rd *r) {
    ry_fz_prog *g = r->g;
    g->nout = 0;
    for (int i = 0; !r->failed; i++) {
        if (i > 0 && eat(r, ')')) break;
        if (i > 0 && !eat(r, ',')) return fail(r, "expected ',' or ')' in the results");
        char id[32], *end;
        if (!ident(r, id, sizeof id) || id[0] != 't') return fail(r, "a result must be an instruction's (tI)");
        long k = strtol(id + 1, &end, 10);
        if (!id[1] || *end || k < 0 || k >= g->nins) return fail(r, "no instruction %s to return", id);
        for (int j = 0; j < g->nout; j++)
            if (g->outs[j] == (int)k) return fail(r, "%s returned twice", id);
        if (g->nout == RY_FZ_MAX_OUT) return fail(r, "more than %d results", RY_FZ_MAX_OUT);
        g->outs[g->nout++] = (int)k;
    }
    if (!r->failed && g->nout < 2) fail(r, "a list of results needs at least two");
}

/* Renumbers instruction results to follow the literals directly and
 * records each value's last reader (the executor frees tile buffers then);
 * results live to the end. */
static void finish(ry_fz_prog *g) {
    int base = g->nin + RY_FZ_MAX_CONST, shift = RY_FZ_MAX_CONST - g->nconst;
    int first = g->nin + g->nconst, nvals = first + g->nins;
    for (int v = 0; v < nvals; v++) g->last_use[v] = -1;
    for (int i = 0; i < g->nins; i++)
        for (int k = 0; k < g->ins[i].nargs; k++) {
            int *a = &g->ins[i].a[k];
            if (*a >= base) *a -= shift;
            g->last_use[*a] = i;
        }
    if (g->nout == 0) g->outs[g->nout++] = g->nins - 1; /* the last instruction */
    for (int k = 0; k < g->nout; k++) {
        g->out_dts[k] = g->ins[g->outs[k]].odt;
        g->outs[k] += first;
        g->last_use[g->outs[k]] = g->nins;
    }
    g->out_dt = g->out_dts[0];
}

static ry_status compile(const char *code, bool acc, int nin, const ry_dtype *dts, ry_span span,
                         ry_error *err, ry_fz_prog *g) {
    memset(g, 0, sizeof *g);
    rd r = {code, code, g, span, err, false};
    if (nin > RY_FZ_MAX_IN) {
        return ry_error_at(err, span, "fused program: %d inputs, more than %d", nin, RY_FZ_MAX_IN);
    }
    g->acc = acc;
    g->nin = nin;
    for (int i = 0; i < nin; i++) {
        if (!(fdt(dts[i]) || dts[i] == RY_BOOL))
            return ry_error_at(err, span, "fused program: input %d has dtype %s (float32, float64 "
                               "or bool expected)", i, ry_dtype_name(dts[i]));
        g->in_dt[i] = dts[i];
    }
    for (;;) {
        skip(&r);
        if (*r.p == '(' && g->nins > 0) { /* the results, last */
            r.p++;
            results(&r);
            if (r.failed) return RY_ERR;
            skip(&r);
            if (*r.p) {
                fail(&r, "the list of results must come last");
                return RY_ERR;
            }
            break;
        }
        instruction(&r);
        if (r.failed) return RY_ERR;
        skip(&r);
        if (!*r.p) break;
        if (!eat(&r, ';')) {
            fail(&r, "expected ';' between instructions");
            return RY_ERR;
        }
        skip(&r);
        if (!*r.p) break;
    }
    finish(g);
    return RY_OK;
}

/* ---- the cache ----
 * Keyed by the text and the input dtypes; entries live until exit (a
 * training run has a few dozen programs). When a key's probe window is
 * full, the program goes on an overflow list (compiled again next time). */
#define CACHE_SLOTS 1024
#define PROBES 8

typedef struct entry {
    char *code;
    bool acc;
    int nin;
    ry_dtype dts[RY_FZ_MAX_IN];
    ry_fz_prog *prog;
} entry;

typedef struct overflow {
    ry_fz_prog *prog;
    struct overflow *next;
} overflow;

static entry cache[CACHE_SLOTS];
static overflow *overflows;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned hash(const char *s, bool acc, int nin, const ry_dtype *dts) {
    unsigned h = 2166136261u ^ (unsigned)acc;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    for (int i = 0; i < nin; i++) h = (h ^ (unsigned)dts[i]) * 16777619u;
    return h;
}

static bool same_key(const entry *e, const char *code, bool acc, int nin, const ry_dtype *dts) {
    return e->code && e->acc == acc && e->nin == nin &&
           memcmp(e->dts, dts, sizeof *dts * (size_t)nin) == 0 && strcmp(e->code, code) == 0;
}

const ry_fz_prog *ry_fz_get(const char *code, bool acc, int nin, const ry_dtype *dts,
                            ry_span span, ry_error *err) {
    if (nin < 0 || nin > RY_FZ_MAX_IN)
        return ry_error_at(err, span, "fused program: %d inputs, more than %d", nin, RY_FZ_MAX_IN),
               NULL;
    unsigned h = hash(code, acc, nin, dts);
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < PROBES; k++) {
        entry *e = &cache[(h + (unsigned)k) % CACHE_SLOTS];
        if (same_key(e, code, acc, nin, dts)) {
            const ry_fz_prog *p = e->prog;
            pthread_mutex_unlock(&cache_lock);
            return p;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    /* compile outside the lock; a racing thread may compile it too */
    ry_fz_prog *g = malloc(sizeof *g);
    char *copy = malloc(strlen(code) + 1);
    if (!g || !copy) {
        free(g);
        free(copy);
        return ry_error_at(err, span, "out of memory"), NULL;
    }
    strcpy(copy, code);
    if (compile(code, acc, nin, dts, span, err, g) != RY_OK) {
        free(g);
        free(copy);
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    entry *slot = NULL;
    for (int k = 0; k < PROBES; k++) {
        entry *e = &cache[(h + (unsigned)k) % CACHE_SLOTS];
        if (same_key(e, code, acc, nin, dts)) { /* another thread won */
            const ry_fz_prog *p = e->prog;
            pthread_mutex_unlock(&cache_lock);
            free(g);
            free(copy);
            return p;
        }
        if (!e->code && !slot) slot = e;
    }
    if (!slot) {
        /* a full window: kept on a list instead (never freed, as a kernel
         * on another thread may still hold it) */
        overflow *o = malloc(sizeof *o);
        if (!o) {
            pthread_mutex_unlock(&cache_lock);
            free(g);
            free(copy);
            return ry_error_at(err, span, "out of memory"), NULL;
        }
        o->prog = g;
        o->next = overflows;
        overflows = o;
        pthread_mutex_unlock(&cache_lock);
        free(copy);
        return g;
    }
    slot->code = copy;
    slot->acc = acc;
    slot->nin = nin;
    memcpy(slot->dts, dts, sizeof *dts * (size_t)nin);
    slot->prog = g;
    pthread_mutex_unlock(&cache_lock);
    return g;
}
