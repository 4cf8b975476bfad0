/*
 * init.c: parameter initializers drawn from the seeded ry_rng, with the
 * fans and gains of torch.nn.init, and the parser for a model file's
 * `// data:`, `// predict-data:` and `// init:` header lines. Draws go in
 * flat (C) order, one uniform or one normal per element, so a seed and a
 * shape fix every value. Binding names to a module's parameters is left to
 * the training loop.
 */
#include "relayc/init.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- fans and fills ---------------------------------------------------------- */

/* fan_in = shape[1] * receptive, fan_out = shape[0] * receptive,
 * receptive = prod(shape[2:]) (torch's _calculate_fan_in_and_fan_out) */
ry_status ry_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out,
                       ry_error *err) {
    if (ndim < 2)
        return ry_error_at(err, RY_NO_SPAN,
                           "init: fan in and fan out need a tensor of rank 2 or more, not %d",
                           ndim);
    int64_t receptive = 1;
    for (int i = 2; i < ndim; i++) receptive *= shape[i];
    *fan_in = shape[1] * receptive;
    *fan_out = shape[0] * receptive;
    return RY_OK;
}

static void fill_uniform(ry_tensor *t, ry_rng *rng, double lo, double hi) {
    for (int64_t i = 0; i < t->size; i++)
        ry_tensor_set(t, i, lo + (hi - lo) * ry_rng_uniform(rng));
}

static void fill_normal(ry_tensor *t, ry_rng *rng, double mean, double std) {
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, mean + std * ry_rng_normal(rng));
}

static void fill_const(ry_tensor *t, double v) {
    for (int64_t i = 0; i < t->size; i++) ry_tensor_set(t, i, v);
}

static bool needs_fans(ry_init_kind k) {
    return k == RY_INIT_XAVIER_UNIFORM || k == RY_INIT_XAVIER_NORMAL ||
           k == RY_INIT_KAIMING_UNIFORM || k == RY_INIT_KAIMING_NORMAL;
}

ry_status ry_init_fill(ry_tensor *t, const ry_init *init, ry_rng *rng, ry_error *err) {
    char desc[64];
    if (t->dtype != RY_FLOAT32 && t->dtype != RY_FLOAT64)
        return ry_error_at(err, RY_NO_SPAN, "init: can only fill float32 or float64, not %s",
                           ry_tensor_describe(t, desc, sizeof desc));
    int64_t fan_in = 0, fan_out = 0;
    if (needs_fans(init->kind) && ry_init_fans(t->ndim, t->shape, &fan_in, &fan_out, err))
        return RY_ERR;
    if (t->size == 0) return RY_OK; /* nothing to draw; fans may be 0 */
    /* Xavier: std = gain * sqrt(2 / (fan_in + fan_out)), uniform bound sqrt(3) * std.
     * Kaiming (fan_in, gain sqrt(2)): std = sqrt(2 / fan_in), bound sqrt(3) * std. */
    double xstd = init->a * sqrt(2.0 / (double)(fan_in + fan_out));
    double kstd = fan_in ? sqrt(2.0) / sqrt((double)fan_in) : 0;
    switch (init->kind) {
    case RY_INIT_ZEROS: fill_const(t, 0); break;
    case RY_INIT_ONES: fill_const(t, 1); break;
    case RY_INIT_UNIFORM: fill_uniform(t, rng, init->a, init->b); break;
    case RY_INIT_NORMAL: fill_normal(t, rng, init->a, init->b); break;
    case RY_INIT_XAVIER_UNIFORM: fill_uniform(t, rng, -sqrt(3.0) * xstd, sqrt(3.0) * xstd); break;
    case RY_INIT_XAVIER_NORMAL: fill_normal(t, rng, 0, xstd); break;
    case RY_INIT_KAIMING_UNIFORM: fill_uniform(t, rng, -sqrt(3.0) * kstd, sqrt(3.0) * kstd); break;
    case RY_INIT_KAIMING_NORMAL: fill_normal(t, rng, 0, kstd); break;
    }
    return RY_OK;
}

/* ---- one initializer ------------------------------------------------------------
 * init -> KIND | KIND '(' number (',' number)* ')'   (no blanks inside) */

typedef struct kind_name {
    const char *name;
    ry_init_kind kind;
    int min_args, max_args;
} kind_name;

static const kind_name kinds[] = {
    {"zeros", RY_INIT_ZEROS, 0, 0},
    {"ones", RY_INIT_ONES, 0, 0},
    {"uniform", RY_INIT_UNIFORM, 2, 2},
    {"normal", RY_INIT_NORMAL, 1, 2},
    {"xavier_uniform", RY_INIT_XAVIER_UNIFORM, 0, 1},
    {"xavier_normal", RY_INIT_XAVIER_NORMAL, 0, 1},
    {"glorot_uniform", RY_INIT_XAVIER_UNIFORM, 0, 1},
    {"glorot_normal", RY_INIT_XAVIER_NORMAL, 0, 1},
    {"kaiming_uniform", RY_INIT_KAIMING_UNIFORM, 0, 0},
    {"kaiming_normal", RY_INIT_KAIMING_NORMAL, 0, 0},
    {"he_uniform", RY_INIT_KAIMING_UNIFORM, 0, 0},
    {"he_normal", RY_INIT_KAIMING_NORMAL, 0, 0},
};
#define NKINDS (int)(sizeof kinds / sizeof kinds[0])

/* A finite number filling all of s[0..len). */
static bool parse_number(const char *s, size_t len, double *out) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end != buf + len || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* The arguments between the parentheses: numbers separated by commas. */
static ry_status parse_args(const char *s, size_t len, double *args, int *nargs, ry_error *err) {
    *nargs = 0;
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && s[j] != ',') j++;
        if (*nargs == 2)
            return ry_error_at(err, RY_NO_SPAN, "init: too many arguments in \"%.*s\"",
                               (int)len, s);
        if (!parse_number(s + i, j - i, &args[*nargs]))
            return ry_error_at(err, RY_NO_SPAN, "init: \"%.*s\" is not a number", (int)(j - i),
                               s + i);
        (*nargs)++;
        i = j + 1;
    }
    return RY_OK;
}

static const kind_name *find_kind(const char *s, size_t len) {
    for (int i = 0; i < NKINDS; i++)
        if (strlen(kinds[i].name) == len && memcmp(kinds[i].name, s, len) == 0) return &kinds[i];
    return NULL;
}

ry_status ry_init_parse(const char *s, size_t len, ry_init *out, ry_error *err) {
    size_t open = 0;
    while (open < len && s[open] != '(') open++;
    const kind_name *k = find_kind(s, open);
    if (!k)
        return ry_error_at(err, RY_NO_SPAN,
                           "init: unknown initializer \"%.*s\" (zeros, ones, uniform(a,b), "
                           "normal(std), xavier_uniform, xavier_normal, kaiming_uniform, "
                           "kaiming_normal)",
                           (int)open, s);
    double args[2] = {0, 0};
    int nargs = 0;
    if (open < len) {
        if (s[len - 1] != ')' || len - open < 2)
            return ry_error_at(err, RY_NO_SPAN, "init: expected \")\" at the end of \"%.*s\"",
                               (int)len, s);
        if (parse_args(s + open + 1, len - open - 2, args, &nargs, err)) return RY_ERR;
    }
    if (nargs < k->min_args || nargs > k->max_args)
        return ry_error_at(err, RY_NO_SPAN, "init: %s takes %d to %d arguments, not %d",
                           k->name, k->min_args, k->max_args, nargs);
    ry_init r = {.kind = k->kind, .a = 0, .b = 0};
    switch (k->kind) {
    case RY_INIT_UNIFORM:
        if (args[0] > args[1])
            return ry_error_at(err, RY_NO_SPAN, "init: uniform(%g,%g) has its bounds reversed",
                               args[0], args[1]);
        r.a = args[0], r.b = args[1];
        break;
    case RY_INIT_NORMAL:
        /* normal(std) or normal(mean,std) */
        r.a = nargs == 2 ? args[0] : 0;
        r.b = nargs == 2 ? args[1] : args[0];
        if (r.b < 0)
            return ry_error_at(err, RY_NO_SPAN, "init: normal needs std >= 0, not %g", r.b);
        break;
    case RY_INIT_XAVIER_UNIFORM:
    case RY_INIT_XAVIER_NORMAL:
        r.a = nargs ? args[0] : 1.0; /* gain */
        break;
    default: break;
    }
    *out = r;
    return RY_OK;
}

const char *ry_init_str(const ry_init *init, char *buf, size_t n) {
    const char *name = "?";
    for (int i = 0; i < NKINDS; i++)
        if (kinds[i].kind == init->kind) {
            name = kinds[i].name;
            break;
        }
    switch (init->kind) {
    case RY_INIT_UNIFORM: snprintf(buf, n, "%s(%.17g,%.17g)", name, init->a, init->b); break;
    case RY_INIT_NORMAL: snprintf(buf, n, "%s(%.17g,%.17g)", name, init->a, init->b); break;
    case RY_INIT_XAVIER_UNIFORM:
    case RY_INIT_XAVIER_NORMAL:
        if (init->a != 1.0) {
            snprintf(buf, n, "%s(%.17g)", name, init->a);
            break;
        }
        /* fall through */
    default: snprintf(buf, n, "%s", name); break;
    }
    return buf;
}

/* ---- header lines -------------------------------------------------------------
 * header -> '//' blank* ('data:' | 'predict-data:') (blank+ NAME)*
 *         | '//' blank* 'init:' (blank+ NAME '=' init)*
 *         | '//' blank* 'vocab:' blank+ NAME
 *         | '//' blank* 'metrics:' ((blank | ',')+ ('loss' | 'accuracy'))* */

typedef struct line_ctx {
    ry_source src;
    int line;
    const char *line_start;
    ry_error *err;
} line_ctx;

static ry_status fail_at(line_ctx *c, const char *p, size_t len, const char *fmt, const char *what,
                         size_t wlen) {
    ry_span sp = {&c->src, c->line, (int)(p - c->line_start) + 1, len ? (int)len : 1};
    return ry_error_at(c->err, sp, fmt, (int)wlen, what);
}

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Appends one name to a list of names. */
static ry_status add_name(line_ctx *c, char (**list)[RY_INIT_NAME_MAX], int *n, const char *p,
                          size_t len) {
    if (len >= RY_INIT_NAME_MAX) return fail_at(c, p, len, "name too long: \"%.*s\"", p, len);
    char(*grown)[RY_INIT_NAME_MAX] = ry_realloc(*list, (size_t)(*n + 1) * RY_INIT_NAME_MAX);
    if (!grown) return ry_error_at(c->err, RY_NO_SPAN, "init: out of memory");
    *list = grown;
    memcpy(grown[*n], p, len);
    grown[*n][len] = 0;
    (*n)++;
    return RY_OK;
}

static ry_status parse_names(line_ctx *c, const char *p, const char *end,
                             char (**list)[RY_INIT_NAME_MAX], int *n) {
    while (p < end) {
        while (p < end && is_blank(*p)) p++;
        const char *q = p;
        while (q < end && !is_blank(*q)) q++;
        if (q > p && add_name(c, list, n, p, (size_t)(q - p))) return RY_ERR;
        p = q;
    }
    return RY_OK;
}

static ry_status add_param(line_ctx *c, ry_init_spec *s, const char *p, size_t len) {
    const char *eq = memchr(p, '=', len);
    if (!eq || eq == p)
        return fail_at(c, p, len, "expected NAME=INITIALIZER, not \"%.*s\"", p, len);
    size_t nlen = (size_t)(eq - p);
    if (nlen >= RY_INIT_NAME_MAX) return fail_at(c, p, nlen, "name too long: \"%.*s\"", p, nlen);
    for (int i = 0; i < s->nparams; i++)
        if (strlen(s->params[i].name) == nlen && memcmp(s->params[i].name, p, nlen) == 0)
            return fail_at(c, p, nlen, "\"%.*s\" is given an initializer twice", p, nlen);
    ry_init init;
    const char *v = eq + 1;
    size_t vlen = len - nlen - 1;
    if (ry_init_parse(v, vlen, &init, c->err)) {
        char msg[RY_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", c->err->msg + (strncmp(c->err->msg, "init: ", 6) ? 0 : 6));
        ry_span sp = {&c->src, c->line, (int)(v - c->line_start) + 1, vlen ? (int)vlen : 1};
        return ry_error_at(c->err, sp, "%s", msg);
    }
    ry_init_entry *grown = ry_realloc(s->params, (size_t)(s->nparams + 1) * sizeof *grown);
    if (!grown) return ry_error_at(c->err, RY_NO_SPAN, "init: out of memory");
    s->params = grown;
    memcpy(grown[s->nparams].name, p, nlen);
    grown[s->nparams].name[nlen] = 0;
    grown[s->nparams].init = init;
    s->nparams++;
    return RY_OK;
}

static ry_status parse_inits(line_ctx *c, ry_init_spec *s, const char *p, const char *end) {
    while (p < end) {
        while (p < end && is_blank(*p)) p++;
        const char *q = p;
        while (q < end && !is_blank(*q)) q++;
        if (q > p && add_param(c, s, p, (size_t)(q - p))) return RY_ERR;
        p = q;
    }
    return RY_OK;
}

/* If [p, end) starts with word, returns the position after it. */
static const char *after(const char *p, const char *end, const char *word) {
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/* `vocab: NAME` (key: where "vocab:" starts, for errors) */
static ry_status parse_vocab(line_ctx *c, ry_init_spec *s, const char *key, const char *p,
                             const char *end) {
    if (s->vocab[0]) return fail_at(c, key, 6, "a second \"%.*s\" line", key, 6);
    char(*names)[RY_INIT_NAME_MAX] = NULL;
    int n = 0;
    ry_status st = parse_names(c, p, end, &names, &n);
    if (!st && n != 1) st = fail_at(c, key, 6, "\"%.*s\" names one dimension", key, 6);
    if (!st) memcpy(s->vocab, names[0], RY_INIT_NAME_MAX);
    ry_free(names);
    return st;
}

/* `metrics: loss, accuracy` */
static ry_status parse_metrics(line_ctx *c, ry_init_spec *s, const char *key, const char *p,
                               const char *end) {
    if (s->has_metrics) return fail_at(c, key, 8, "a second \"%.*s\" line", key, 8);
    s->has_metrics = true;
    while (p < end) {
        while (p < end && (is_blank(*p) || *p == ',')) p++;
        const char *q = p;
        while (q < end && !is_blank(*q) && *q != ',') q++;
        size_t n = (size_t)(q - p);
        if (n == 8 && memcmp(p, "accuracy", 8) == 0) s->accuracy = true;
        else if (n && !(n == 4 && memcmp(p, "loss", 4) == 0))
            return fail_at(c, p, n, "`// metrics:` lists loss and accuracy, not '%.*s'", p, n);
        p = q;
    }
    return RY_OK;
}

static ry_status parse_line(line_ctx *c, ry_init_spec *s, const char *p, const char *end) {
    while (p < end && is_blank(*p)) p++;
    if (!(p = after(p, end, "//"))) return RY_OK;
    while (p < end && is_blank(*p)) p++;
    const char *q;
    if ((q = after(p, end, "data:"))) {
        if (s->has_data) return fail_at(c, p, 5, "a second \"%.*s\" line", p, 5);
        s->has_data = true;
        return parse_names(c, q, end, &s->data, &s->ndata);
    }
    if ((q = after(p, end, "predict-data:"))) {
        if (s->has_predict_data) return fail_at(c, p, 13, "a second \"%.*s\" line", p, 13);
        s->has_predict_data = true;
        return parse_names(c, q, end, &s->predict_data, &s->npredict_data);
    }
    if ((q = after(p, end, "init:"))) return parse_inits(c, s, q, end);
    if ((q = after(p, end, "vocab:"))) return parse_vocab(c, s, p, q, end);
    if ((q = after(p, end, "metrics:"))) return parse_metrics(c, s, p, q, end);
    return RY_OK;
}

ry_status ry_init_spec_parse(const char *name, const char *text, size_t len,
                             ry_init_spec **out, ry_error *err) {
    *out = NULL;
    ry_init_spec *s = ry_calloc(1, sizeof *s);
    if (!s) return ry_error_at(err, RY_NO_SPAN, "init: out of memory");
    line_ctx c = {.src = {name, text, len}, .line = 1, .err = err};
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        c.line_start = p;
        if (parse_line(&c, s, p, le)) {
            ry_init_spec_free(s);
            return RY_ERR;
        }
        c.line++;
        p = nl ? nl + 1 : end;
    }
    *out = s;
    return RY_OK;
}

const ry_init *ry_init_spec_find(const ry_init_spec *s, const char *name) {
    for (int i = 0; i < s->nparams; i++)
        if (strcmp(s->params[i].name, name) == 0) return &s->params[i].init;
    return NULL;
}

bool ry_init_spec_is_data(const ry_init_spec *s, const char *name, bool predict) {
    int n = predict ? s->npredict_data : s->ndata;
    char(*list)[RY_INIT_NAME_MAX] = predict ? s->predict_data : s->data;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) return true;
    return false;
}

void ry_init_spec_free(ry_init_spec *s) {
    if (!s) return;
    ry_free(s->data);
    ry_free(s->predict_data);
    ry_free(s->params);
    ry_free(s);
}
