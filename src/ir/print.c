/*
 * print.c: modules, expressions and types in Relay's text format, in TVM's
 * printed style, so TVM can read what we print and print(parse(text)) is a
 * fixed point. Non-atomic subexpressions used more than once, or in argument
 * position, are bound as `%N = e;` (graph normal form, the DAG's sharing
 * kept); each binding goes into the innermost scope (function body, branch,
 * clause) that holds all its uses, found by a pass before printing.
 * Constants that are not simple scalars go into a #[metadata] section.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "relayc/op.h"

/* ---- a pointer -> int map (open addressing) ---- */
typedef struct ptrmap {
    const void **keys;
    int *vals;
    int cap, n;
    bool oom;
} ptrmap;

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL); }

static int *map_slot(ptrmap *m, const void *key, bool insert) {
    if (insert && (m->n + 1) * 2 > m->cap) {
        int ncap = m->cap ? m->cap * 2 : 64;
        const void **keys = ry_calloc((size_t)ncap, sizeof *keys);
        int *vals = ry_calloc((size_t)ncap, sizeof *vals);
        if (!keys || !vals) {
            ry_free(keys);
            ry_free(vals);
            m->oom = true;
            return NULL;
        }
        for (int i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t h = ptr_hash(m->keys[i]) & (size_t)(ncap - 1);
                while (keys[h]) h = (h + 1) & (size_t)(ncap - 1);
                keys[h] = m->keys[i];
                vals[h] = m->vals[i];
            }
        ry_free(m->keys);
        ry_free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
    }
    if (!m->cap) return NULL;
    size_t h = ptr_hash(key) & (size_t)(m->cap - 1);
    while (m->keys[h] && m->keys[h] != key) h = (h + 1) & (size_t)(m->cap - 1);
    if (m->keys[h]) return &m->vals[h];
    if (!insert) return NULL;
    m->keys[h] = key;
    m->n++;
    return &m->vals[h];
}

static void map_free(ptrmap *m) {
    ry_free(m->keys);
    ry_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- printer state ---- */
typedef struct node_info {
    const ry_expr *e;
    int uses;        /* parent edges */
    int scope;       /* innermost scope holding every use */
    int inner;       /* first of the scopes this node opens (body, branches, clauses) */
    int tmp;         /* its %N once bound, else -1 */
    bool seen;
} node_info;

typedef struct scope_info {
    int parent, depth, buf; /* buf: index of its open buffer, or -1 */
} scope_info;

typedef struct printer {
    bool show_types;
    ptrmap nodes; /* expr -> index in info */
    node_info *info;
    int ninfo, cap_info;
    scope_info *scopes;
    int nscopes, cap_scopes;
    strbuf *bufs; /* open scopes' lines */
    int nbufs, cap_bufs;
    int next_tmp;
    ptrmap vars;  /* ry_var -> index in names */
    char **names;
    int nnames, cap_names;
    ry_tensor **meta; /* constants printed as meta[relay.Constant][i] */
    int nmeta, cap_meta;
    bool oom;
} printer;

static void *grow_arr(printer *pr, void *p, int n, int *cap, size_t size) {
    if (n < *cap) return p;
    int ncap = *cap ? *cap * 2 : 64;
    void *fresh = ry_realloc(p, size * (size_t)ncap);
    if (!fresh) {
        pr->oom = true;
        return NULL;
    }
    *cap = ncap;
    return fresh;
}

static node_info *info_of(printer *pr, const ry_expr *e) {
    int *slot = map_slot(&pr->nodes, e, false);
    if (slot) return &pr->info[*slot];
    node_info *fresh = grow_arr(pr, pr->info, pr->ninfo, &pr->cap_info, sizeof *pr->info);
    if (!fresh) return NULL;
    pr->info = fresh;
    slot = map_slot(&pr->nodes, e, true);
    if (!slot) {
        pr->oom = true;
        return NULL;
    }
    *slot = pr->ninfo;
    node_info *ni = &pr->info[pr->ninfo++];
    *ni = (node_info){e, 0, 0, -1, -1, false};
    return ni;
}

static int new_scope(printer *pr, int parent) {
    scope_info *fresh = grow_arr(pr, pr->scopes, pr->nscopes, &pr->cap_scopes, sizeof *pr->scopes);
    if (!fresh) return 0;
    pr->scopes = fresh;
    int depth = parent >= 0 ? pr->scopes[parent].depth + 1 : 0;
    pr->scopes[pr->nscopes] = (scope_info){parent, depth, -1};
    return pr->nscopes++;
}

static int lca(const printer *pr, int a, int b) {
    while (a != b) {
        if (pr->scopes[a].depth >= pr->scopes[b].depth) a = pr->scopes[a].parent;
        else b = pr->scopes[b].parent;
    }
    return a;
}

static bool atomic(const ry_expr *e) {
    return e->kind == RY_EXPR_VAR || e->kind == RY_EXPR_GLOBAL || e->kind == RY_EXPR_CONST ||
           e->kind == RY_EXPR_OP || e->kind == RY_EXPR_CTOR;
}

/* The children of e in print order, each with the slot of the scope it is
 * printed in (-1: e's own scope; k >= 0: e's k-th inner scope). */
static int children(const ry_expr *e, const ry_expr **out, int *slot, int max) {
    int n = 0;
#define KID(x, s) do { if (n < max) { out[n] = (x); slot[n] = (s); n++; } } while (0)
    switch (e->kind) {
    case RY_EXPR_CALL:
        for (int i = 0; i < e->call.nargs; i++) KID(e->call.args[i], -1);
        KID(e->call.callee, -1);
        break;
    case RY_EXPR_LET: KID(e->let.value, 0); KID(e->let.body, 0); break;
    case RY_EXPR_IF: KID(e->if_.cond, -1); KID(e->if_.then_, 0); KID(e->if_.else_, 1); break;
    case RY_EXPR_MATCH:
        KID(e->match.data, -1);
        for (int i = 0; i < e->match.nclauses; i++) KID(e->match.clauses[i].body, i);
        break;
    case RY_EXPR_FUNC: KID(e->func.body, 0); break;
    case RY_EXPR_TUPLE:
        for (int i = 0; i < e->tuple.n; i++) KID(e->tuple.fields[i], -1);
        break;
    case RY_EXPR_PROJ: KID(e->proj.tuple, -1); break;
    case RY_EXPR_REF: KID(e->ref.value, -1); break;
    case RY_EXPR_REF_READ: KID(e->ref_read.ref, -1); break;
    case RY_EXPR_REF_WRITE: KID(e->ref_write.ref, -1); KID(e->ref_write.value, -1); break;
    default: break;
    }
#undef KID
    return n;
}

static int nkids(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_CALL: return e->call.nargs + 1;
    case RY_EXPR_MATCH: return e->match.nclauses + 1;
    case RY_EXPR_TUPLE: return e->tuple.n;
    default: return 3;
    }
}

static int nslots(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_LET:
    case RY_EXPR_FUNC: return 1;
    case RY_EXPR_IF: return 2;
    case RY_EXPR_MATCH: return e->match.nclauses;
    default: return 0;
    }
}

/* Post-order over the DAG: children before parents; reversed, a parent
 * comes before all its children. */
static void postorder(printer *pr, const ry_expr *e, const ry_expr ***order, int *n, int *cap) {
    node_info *ni = info_of(pr, e);
    if (!ni || ni->seen) return;
    ni->seen = true;
    int k = nkids(e);
    const ry_expr **kids = ry_malloc(sizeof *kids * (size_t)k);
    int *slot = ry_malloc(sizeof *slot * (size_t)k);
    if (!kids || !slot) {
        pr->oom = true;
    } else {
        k = children(e, kids, slot, k);
        for (int i = 0; i < k; i++)
            if (!atomic(kids[i])) postorder(pr, kids[i], order, n, cap);
    }
    ry_free(kids);
    ry_free(slot);
    const ry_expr **fresh = grow_arr(pr, (void *)*order, *n, cap, sizeof **order);
    if (!fresh) return;
    *order = fresh;
    (*order)[(*n)++] = e;
}

/* Counts uses and places every non-atomic node in the innermost scope that
 * holds all its uses. root's scope is `outer`. */
static void analyze(printer *pr, const ry_expr *root, int outer) {
    const ry_expr **order = NULL;
    int n = 0, cap = 0;
    postorder(pr, root, &order, &n, &cap);
    node_info *ri = info_of(pr, root);
    if (!ri || pr->oom) {
        ry_free(order);
        return;
    }
    ri->scope = outer;
    ri->uses = 1;
    for (int i = n - 1; i >= 0; i--) {
        const ry_expr *e = order[i];
        node_info *ni = info_of(pr, e);
        int ns = nslots(e), scope = ni->scope;
        if (ns) {
            ni->inner = new_scope(pr, scope);
            for (int s = 1; s < ns; s++) new_scope(pr, scope);
        }
        int k = nkids(e);
        const ry_expr *kids[k > 0 ? k : 1];
        int slot[k > 0 ? k : 1];
        k = children(e, kids, slot, k);
        for (int j = 0; j < k; j++) {
            if (atomic(kids[j])) continue;
            node_info *ci = info_of(pr, kids[j]);
            if (!ci) break;
            int us = slot[j] < 0 ? scope : pr->info[*map_slot(&pr->nodes, e, false)].inner + slot[j];
            ci->scope = ci->uses++ ? lca(pr, ci->scope, us) : us;
        }
    }
    ry_free(order);
}

/* ---- names ---- */

static bool name_used(const printer *pr, const char *s) {
    for (int i = 0; i < pr->nnames; i++)
        if (strcmp(pr->names[i], s) == 0) return true;
    return false;
}

/* TVM's rule: a name starts with a letter (else "v" is put in front) and is
 * made unique within the definition by a numeric suffix. */
static const char *var_name(printer *pr, const ry_var *v) {
    int *slot = map_slot(&pr->vars, v, false);
    if (slot) return pr->names[*slot];
    char base[256], cand[300];
    const char *nm = v->name ? v->name : "";
    bool alpha = (nm[0] >= 'a' && nm[0] <= 'z') || (nm[0] >= 'A' && nm[0] <= 'Z');
    snprintf(base, sizeof base, "%s%s", alpha ? "" : "v", nm);
    snprintf(cand, sizeof cand, "%s", base);
    for (int k = 1; name_used(pr, cand); k++) snprintf(cand, sizeof cand, "%s%d", base, k);
    char **fresh = grow_arr(pr, pr->names, pr->nnames, &pr->cap_names, sizeof *pr->names);
    char *copy = ry_strdup(cand);
    if (!fresh || !copy || !(slot = map_slot(&pr->vars, v, true))) {
        ry_free(copy);
        pr->oom = true;
        return "oom";
    }
    pr->names = fresh;
    pr->names[pr->nnames] = copy;
    *slot = pr->nnames++;
    return copy;
}

static void reset_names(printer *pr) {
    for (int i = 0; i < pr->nnames; i++) ry_free(pr->names[i]);
    pr->nnames = 0;
    map_free(&pr->vars);
}

/* ---- numbers, types, attributes ---- */

/* The shortest %g form that reads back as the same value (as a float when
 * single is set), so `0.1f` prints as 0.1f, not 0.100000001f. */
static void fmt_real(char *buf, size_t n, double v, bool single) {
    if (isinf(v)) {
        snprintf(buf, n, "%sinf", v < 0 ? "-" : "");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v) return;
    }
}

static void put_type(strbuf *b, const ry_type *t);

static void put_types(strbuf *b, ry_type *const *ts, int n) {
    for (int i = 0; i < n; i++) {
        if (i) ry_sb_puts(b, ", ");
        put_type(b, ts[i]);
    }
}

static void put_type(strbuf *b, const ry_type *t) {
    if (!t) {
        ry_sb_puts(b, "_");
        return;
    }
    switch (t->kind) {
    case RY_TYPE_TENSOR:
        if (t->tensor.ndim == 0) {
            ry_sb_puts(b, ry_dtype_name(t->tensor.dtype));
            return;
        }
        ry_sb_puts(b, "Tensor[(");
        for (int i = 0; i < t->tensor.ndim; i++) {
            const ry_dim *d = &t->tensor.dims[i];
            if (i) ry_sb_puts(b, ", ");
            if (d->kind == RY_DIM_CONST) ry_sb_printf(b, "%lld", (long long)d->value);
            else if (d->kind == RY_DIM_SYM) ry_sb_puts(b, d->name);
            else ry_sb_puts(b, "?");
        }
        ry_sb_printf(b, "), %s]", ry_dtype_name(t->tensor.dtype));
        return;
    case RY_TYPE_TUPLE:
        ry_sb_puts(b, "(");
        put_types(b, t->tuple.fields, t->tuple.n);
        ry_sb_puts(b, t->tuple.n == 1 ? ",)" : ")");
        return;
    case RY_TYPE_FUNC:
        ry_sb_puts(b, "fn ");
        if (t->func.ntparams) {
            ry_sb_puts(b, "[");
            put_types(b, t->func.tparams, t->func.ntparams);
            ry_sb_puts(b, "]");
        }
        ry_sb_puts(b, "(");
        put_types(b, t->func.args, t->func.nargs);
        ry_sb_puts(b, ") -> ");
        put_type(b, t->func.ret);
        return;
    case RY_TYPE_VAR: ry_sb_puts(b, t->var.name); return;
    case RY_TYPE_CALL:
        ry_sb_puts(b, t->call.adt->name);
        if (t->call.nargs) {
            ry_sb_puts(b, "[");
            put_types(b, t->call.args, t->call.nargs);
            ry_sb_puts(b, "]");
        }
        return;
    case RY_TYPE_REF:
        ry_sb_puts(b, "ref(");
        put_type(b, t->ref.inner);
        ry_sb_puts(b, ")");
        return;
    case RY_TYPE_INCOMPLETE: ry_sb_puts(b, "_"); return;
    }
}

const char *ry_type_str(const ry_type *t, char *buf, size_t n) {
    strbuf b = {0};
    put_type(&b, t);
    if (n) snprintf(buf, n, "%s", b.data && !b.oom ? b.data : "");
    ry_free(b.data);
    return buf;
}

static void put_string_lit(strbuf *b, const char *s) {
    ry_sb_puts(b, "\"");
    for (; *s; s++) {
        switch (*s) {
        case '"': ry_sb_puts(b, "\\\""); break;
        case '\\': ry_sb_puts(b, "\\\\"); break;
        case '\n': ry_sb_puts(b, "\\n"); break;
        case '\t': ry_sb_puts(b, "\\t"); break;
        case '\r': ry_sb_puts(b, "\\r"); break;
        default: ry_sb_put(b, s, 1);
        }
    }
    ry_sb_puts(b, "\"");
}

static void put_attr_value(strbuf *b, const ry_attr_value *v) {
    char num[64];
    switch (v->kind) {
    case RY_AV_NONE: ry_sb_puts(b, "None"); return;
    case RY_AV_INT: ry_sb_printf(b, "%lld", (long long)v->i); return;
    case RY_AV_FLOAT:
        fmt_real(num, sizeof num, v->f, false);
        ry_sb_printf(b, "%sf", num);
        return;
    case RY_AV_BOOL: ry_sb_puts(b, v->b ? "True" : "False"); return;
    case RY_AV_STR: put_string_lit(b, v->s ? v->s : ""); return;
    case RY_AV_LIST:
        ry_sb_puts(b, "[");
        for (int i = 0; i < v->list.n; i++) {
            if (i) ry_sb_puts(b, ", ");
            put_attr_value(b, &v->list.items[i]);
        }
        ry_sb_puts(b, "]");
        return;
    }
}

static void put_attrs(strbuf *b, const ry_attrs *a, bool first) {
    for (int i = 0; i < a->n; i++) {
        if (!first || i) ry_sb_puts(b, ", ");
        ry_sb_printf(b, "%s=", a->items[i].name);
        put_attr_value(b, &a->items[i].value);
    }
}

/* TVM's simple scalars print inline (1f, 2i64, True); others go to meta. */
static bool put_scalar(strbuf *b, const ry_tensor *t) {
    if (t->ndim != 0) return false;
    char num[64];
    double v = ry_tensor_get(t, 0);
    switch (t->dtype) {
    case RY_INT32: ry_sb_printf(b, "%d", *(const int32_t *)t->data); return true;
    case RY_INT64: ry_sb_printf(b, "%lldi64", (long long)*(const int64_t *)t->data); return true;
    case RY_INT8: ry_sb_printf(b, "%di8", *(const int8_t *)t->data); return true;
    case RY_BOOL: ry_sb_puts(b, v != 0 ? "True" : "False"); return true;
    case RY_FLOAT32:
    case RY_FLOAT64:
    case RY_FLOAT16:
        if (isnan(v)) return false;
        fmt_real(num, sizeof num, v, t->dtype != RY_FLOAT64);
        ry_sb_printf(b, "%s%s", num, t->dtype == RY_FLOAT32 ? "f" : t->dtype == RY_FLOAT64 ? "f64" : "f16");
        return true;
    default: return false;
    }
}

static void put_const(printer *pr, strbuf *b, const ry_expr *e) {
    ry_tensor *t = e->constant.value;
    if (put_scalar(b, t)) return;
    int k = 0;
    while (k < pr->nmeta && pr->meta[k] != t) k++;
    if (k == pr->nmeta) {
        ry_tensor **fresh = grow_arr(pr, pr->meta, pr->nmeta, &pr->cap_meta, sizeof *pr->meta);
        if (!fresh) return;
        pr->meta = fresh;
        pr->meta[pr->nmeta++] = t;
    }
    ry_sb_printf(b, "meta[relay.Constant][%d]", k);
}

/* ---- expressions ---- */

static void put_expr(printer *pr, strbuf *out, const ry_expr *e, bool try_inline, bool tail);

/* Appends s to out with every line after the first indented by n. */
static void put_indented(strbuf *out, const char *s, int n) {
    for (; *s; s++) {
        ry_sb_put(out, s, 1);
        if (*s == '\n' && s[1] != '\n' && s[1]) ry_sb_printf(out, "%*s", n, "");
    }
}

/* Prints e as the end of scope `scope`: its bindings, then e. */
static void put_scope(printer *pr, strbuf *out, int scope, const ry_expr *e) {
    strbuf *fresh = grow_arr(pr, pr->bufs, pr->nbufs, &pr->cap_bufs, sizeof *pr->bufs);
    if (!fresh) return;
    pr->bufs = fresh;
    int idx = pr->nbufs++;
    pr->bufs[idx] = (strbuf){0};
    if (scope >= 0 && scope < pr->nscopes) pr->scopes[scope].buf = idx;
    strbuf last = {0};
    put_expr(pr, &last, e, true, true);
    strbuf lines = pr->bufs[idx];
    pr->nbufs--;
    if (scope >= 0 && scope < pr->nscopes) pr->scopes[scope].buf = -1;
    if (lines.data) ry_sb_put(out, lines.data, lines.len);
    if (last.data) ry_sb_put(out, last.data, last.len);
    pr->oom |= lines.oom || last.oom;
    ry_free(lines.data);
    ry_free(last.data);
}

/* body -> '{' newline (indented scope) newline '}' */
static void put_body(printer *pr, strbuf *out, int scope, const ry_expr *e) {
    strbuf inner = {0};
    put_scope(pr, &inner, scope, e);
    ry_sb_puts(out, "{\n  ");
    put_indented(out, inner.data ? inner.data : "", 2);
    ry_sb_puts(out, "\n}");
    pr->oom |= inner.oom;
    ry_free(inner.data);
}

static int inner_scope(printer *pr, const ry_expr *e, int k) {
    int *slot = map_slot(&pr->nodes, e, false);
    return slot && pr->info[*slot].inner >= 0 ? pr->info[*slot].inner + k : -1;
}

static void put_var_binding(printer *pr, strbuf *out, const ry_var *v) {
    ry_sb_printf(out, "%%%s", var_name(pr, v));
    if (v->annot) {
        ry_sb_puts(out, ": ");
        put_type(out, v->annot);
    }
}

static void put_pattern(printer *pr, strbuf *out, const ry_pattern *p) {
    switch (p->kind) {
    case RY_PAT_WILDCARD: ry_sb_puts(out, "_"); return;
    case RY_PAT_VAR: put_var_binding(pr, out, p->var); return;
    case RY_PAT_CTOR:
        ry_sb_puts(out, p->ctor.ctor->name);
        if (p->ctor.n) {
            ry_sb_puts(out, "(");
            for (int i = 0; i < p->ctor.n; i++) {
                if (i) ry_sb_puts(out, ", ");
                put_pattern(pr, out, p->ctor.args[i]);
            }
            ry_sb_puts(out, ")");
        }
        return;
    case RY_PAT_TUPLE:
        ry_sb_puts(out, "(");
        for (int i = 0; i < p->tuple.n; i++) {
            if (i) ry_sb_puts(out, ", ");
            put_pattern(pr, out, p->tuple.fields[i]);
        }
        ry_sb_puts(out, ")");
        return;
    }
}

/* fn -> prefix tparams? '(' params (', ' attrs)? ') ' ('-> ' type ' ')? body */
static void put_func(printer *pr, strbuf *out, const char *prefix, const ry_expr *f) {
    ry_sb_puts(out, prefix);
    if (f->func.ntparams) {
        ry_sb_puts(out, "[");
        put_types(out, f->func.tparams, f->func.ntparams);
        ry_sb_puts(out, "]");
    }
    ry_sb_puts(out, "(");
    for (int i = 0; i < f->func.nparams; i++) {
        if (i) ry_sb_puts(out, ", ");
        put_var_binding(pr, out, f->func.params[i]);
    }
    put_attrs(out, &f->func.attrs, f->func.nparams == 0);
    ry_sb_puts(out, ") ");
    if (f->func.ret_annot) {
        ry_sb_puts(out, "-> ");
        put_type(out, f->func.ret_annot);
        ry_sb_puts(out, " ");
    }
    put_body(pr, out, inner_scope(pr, f, 0), f->func.body);
}

static void put_call(printer *pr, strbuf *out, const ry_expr *e) {
    strbuf args = {0};
    for (int i = 0; i < e->call.nargs; i++) {
        if (i) ry_sb_puts(&args, ", ");
        put_expr(pr, &args, e->call.args[i], false, false);
    }
    put_attrs(&args, &e->call.attrs, e->call.nargs == 0);
    const ry_expr *c = e->call.callee;
    if (c->kind == RY_EXPR_CTOR) ry_sb_puts(out, c->ctor.ctor->name);
    else put_expr(pr, out, c, false, false);
    if (!(c->kind == RY_EXPR_CTOR && e->call.nargs == 0)) {
        ry_sb_puts(out, "(");
        if (args.data) ry_sb_put(out, args.data, args.len);
        ry_sb_puts(out, ")");
    }
    pr->oom |= args.oom;
    ry_free(args.data);
}

static void put_match(printer *pr, strbuf *out, const ry_expr *e) {
    ry_sb_puts(out, e->match.complete ? "match (" : "match? (");
    put_expr(pr, out, e->match.data, false, false);
    ry_sb_puts(out, ") {");
    strbuf clauses = {0};
    for (int i = 0; i < e->match.nclauses; i++) {
        ry_sb_puts(&clauses, "\n");
        put_pattern(pr, &clauses, e->match.clauses[i].pat);
        ry_sb_puts(&clauses, " => ");
        put_body(pr, &clauses, inner_scope(pr, e, i), e->match.clauses[i].body);
        ry_sb_puts(&clauses, ",");
    }
    put_indented(out, clauses.data ? clauses.data : "", 2);
    ry_sb_puts(out, "\n}");
    ry_free(clauses.data);
}

/* A let chain at the end of a scope: each `let %x = v;` goes into the
 * scope's lines (after v's own bindings), the final body is the text. */
static void put_let_chain(printer *pr, strbuf *out, const ry_expr *e) {
    int buf = pr->nbufs - 1;
    for (;;) {
        int s = inner_scope(pr, e, 0);
        if (s >= 0) pr->scopes[s].buf = buf;
        strbuf line = {0};
        ry_sb_puts(&line, "let ");
        put_var_binding(pr, &line, e->let.var);
        ry_sb_puts(&line, " = ");
        put_expr(pr, &line, e->let.value, true, false);
        ry_sb_puts(&line, ";\n");
        if (line.data) ry_sb_put(&pr->bufs[buf], line.data, line.len);
        ry_free(line.data);
        const ry_expr *body = e->let.body;
        int *slot = map_slot(&pr->nodes, body, false);
        if (body->kind != RY_EXPR_LET || (slot && pr->info[*slot].uses > 1)) {
            put_expr(pr, out, body, true, true);
            return;
        }
        e = body;
    }
}

static void visit(printer *pr, strbuf *out, const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_VAR: ry_sb_printf(out, "%%%s", var_name(pr, e->var.var)); return;
    case RY_EXPR_GLOBAL: ry_sb_printf(out, "@%s", e->global.name); return;
    case RY_EXPR_CONST: put_const(pr, out, e); return;
    case RY_EXPR_OP: ry_sb_puts(out, e->op.op->name); return;
    case RY_EXPR_CTOR: ry_sb_puts(out, e->ctor.ctor->name); return;
    case RY_EXPR_CALL: put_call(pr, out, e); return;
    case RY_EXPR_LET: put_let_chain(pr, out, e); return;
    case RY_EXPR_IF:
        ry_sb_puts(out, "if (");
        put_expr(pr, out, e->if_.cond, false, false);
        ry_sb_puts(out, ") ");
        put_body(pr, out, inner_scope(pr, e, 0), e->if_.then_);
        ry_sb_puts(out, " else ");
        put_body(pr, out, inner_scope(pr, e, 1), e->if_.else_);
        return;
    case RY_EXPR_MATCH: put_match(pr, out, e); return;
    case RY_EXPR_FUNC: put_func(pr, out, "fn ", e); return;
    case RY_EXPR_TUPLE:
        ry_sb_puts(out, "(");
        for (int i = 0; i < e->tuple.n; i++) {
            if (i) ry_sb_puts(out, ", ");
            put_expr(pr, out, e->tuple.fields[i], false, false);
        }
        ry_sb_puts(out, e->tuple.n == 1 ? ",)" : ")");
        return;
    case RY_EXPR_PROJ:
        put_expr(pr, out, e->proj.tuple, false, false);
        ry_sb_printf(out, ".%d", e->proj.index);
        return;
    case RY_EXPR_REF:
        ry_sb_puts(out, "ref(");
        put_expr(pr, out, e->ref.value, false, false);
        ry_sb_puts(out, ")");
        return;
    case RY_EXPR_REF_READ:
        ry_sb_puts(out, "ref_read(");
        put_expr(pr, out, e->ref_read.ref, false, false);
        ry_sb_puts(out, ")");
        return;
    case RY_EXPR_REF_WRITE:
        ry_sb_puts(out, "ref_write(");
        put_expr(pr, out, e->ref_write.ref, false, false);
        ry_sb_puts(out, ", ");
        put_expr(pr, out, e->ref_write.value, false, false);
        ry_sb_puts(out, ")");
        return;
    }
}

static void put_type_info(printer *pr, strbuf *out, const ry_expr *e) {
    if (!pr->show_types || !e->type) return;
    if (e->kind != RY_EXPR_CALL && e->kind != RY_EXPR_TUPLE && e->kind != RY_EXPR_PROJ &&
        e->kind != RY_EXPR_CONST && e->kind != RY_EXPR_FUNC)
        return;
    ry_sb_puts(out, " /* ty=");
    put_type(out, e->type);
    ry_sb_puts(out, " */");
}

/* Atoms print in place; a node already bound prints as its %N; a node used
 * once where inlining is allowed (a scope's end, a let's value) prints in
 * place; anything else is bound as `%N = e;` in its scope. A let that is
 * not at the end of a scope is wrapped in parentheses, as TVM does. */
static void put_expr(printer *pr, strbuf *out, const ry_expr *e, bool try_inline, bool tail) {
    if (atomic(e)) {
        visit(pr, out, e);
        put_type_info(pr, out, e);
        return;
    }
    int *slot = map_slot(&pr->nodes, e, false);
    node_info *ni = slot ? &pr->info[*slot] : NULL;
    if (!ni) { /* not analyzed (out of memory): print in place */
        pr->oom = true;
        return;
    }
    if (ni->tmp >= 0) {
        ry_sb_printf(out, "%%%d", ni->tmp);
        return;
    }
    bool in_place = try_inline && ni->uses <= 1;
    strbuf text = {0};
    if (e->kind == RY_EXPR_LET && !(in_place && tail)) {
        strbuf inner = {0};
        ry_sb_puts(&inner, "(\n");
        put_scope(pr, &inner, inner_scope(pr, e, 0), e);
        put_indented(&text, inner.data ? inner.data : "", 2);
        ry_sb_puts(&text, "\n)");
        ry_free(inner.data);
    } else {
        visit(pr, &text, e);
    }
    put_type_info(pr, &text, e);
    if (in_place) {
        if (text.data) ry_sb_put(out, text.data, text.len);
    } else {
        int b = ni->scope >= 0 && ni->scope < pr->nscopes ? pr->scopes[ni->scope].buf : -1;
        if (b < 0) b = pr->nbufs - 1;
        ni->tmp = pr->next_tmp++;
        ry_sb_printf(&pr->bufs[b], "%%%d = ", ni->tmp);
        if (text.data) ry_sb_put(&pr->bufs[b], text.data, text.len);
        ry_sb_puts(&pr->bufs[b], ";\n");
        ry_sb_printf(out, "%%%d", ni->tmp);
    }
    pr->oom |= text.oom;
    ry_free(text.data);
}

/* ---- entry points ---- */

static void printer_reset_def(printer *pr) {
    map_free(&pr->nodes);
    pr->ninfo = 0;
    pr->nscopes = 0;
    pr->next_tmp = 0;
    reset_names(pr);
}

static void printer_free(printer *pr) {
    printer_reset_def(pr);
    ry_free(pr->info);
    ry_free(pr->scopes);
    ry_free(pr->bufs);
    ry_free(pr->names);
    ry_free(pr->meta);
}

/* A global: `def @name` and the function; its scope tree starts at 0. */
static void put_global(printer *pr, strbuf *out, const ry_global *g) {
    printer_reset_def(pr);
    int outer = new_scope(pr, -1);
    analyze(pr, g->func, outer);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "def @%s", g->name);
    strbuf *fresh = grow_arr(pr, pr->bufs, pr->nbufs, &pr->cap_bufs, sizeof *pr->bufs);
    if (!fresh) return;
    pr->bufs = fresh;
    pr->bufs[pr->nbufs++] = (strbuf){0};
    pr->scopes[outer].buf = pr->nbufs - 1;
    put_func(pr, out, prefix, g->func);
    pr->nbufs--;
    ry_free(pr->bufs[pr->nbufs].data);
}

static void put_typedef(strbuf *out, const ry_typedef *td) {
    ry_sb_printf(out, "type %s", td->name);
    if (td->ntparams) {
        ry_sb_puts(out, "[");
        put_types(out, td->tparams, td->ntparams);
        ry_sb_puts(out, "]");
    }
    ry_sb_puts(out, " {");
    for (int i = 0; i < td->nctors; i++) {
        const ry_ctor *c = td->ctors[i];
        ry_sb_printf(out, "\n  %s", c->name);
        if (c->nfields) {
            ry_sb_puts(out, "(");
            put_types(out, c->fields, c->nfields);
            ry_sb_puts(out, ")");
        }
        ry_sb_puts(out, ",");
    }
    ry_sb_puts(out, "\n}");
}

static char *finish(printer *pr, strbuf *out) {
    bool oom = pr->oom || out->oom || pr->nodes.oom || pr->vars.oom;
    printer_free(pr);
    if (oom) {
        ry_free(out->data);
        return NULL;
    }
    if (!out->data) ry_sb_puts(out, "");
    return out->oom ? NULL : out->data;
}

char *ry_module_print_ex(const ry_module *m, const ry_print_opts *opts) {
    printer pr = {0};
    pr.show_types = opts && opts->show_types;
    strbuf out = {0};
    ry_sb_puts(&out, "#[version = \"0.0.5\"]\n");
    int k = 0;
    for (int i = 0; i < m->ntypedefs; i++, k++) {
        if (k) ry_sb_puts(&out, "\n");
        put_typedef(&out, m->typedefs[i]);
        ry_sb_puts(&out, "\n");
    }
    for (int i = 0; i < m->nglobals; i++, k++) {
        if (k) ry_sb_puts(&out, "\n");
        put_global(&pr, &out, m->globals[i]);
        ry_sb_puts(&out, "\n");
    }
    if (pr.nmeta) {
        ry_sb_puts(&out, "\n#[metadata]\n");
        ry_metadata_print(&out, pr.meta, pr.nmeta);
    }
    return finish(&pr, &out);
}

char *ry_module_print(const ry_module *m) { return ry_module_print_ex(m, NULL); }

char *ry_expr_print(const ry_expr *e) {
    printer pr = {0};
    strbuf out = {0};
    int outer = new_scope(&pr, -1);
    analyze(&pr, e, outer);
    put_scope(&pr, &out, outer, e);
    if (pr.nmeta) { /* a constant too large for a message: say what it is */
        char desc[64];
        ry_sb_printf(&out, " /* meta[relay.Constant][0] is %s */",
                     ry_tensor_describe(pr.meta[0], desc, sizeof desc));
    }
    return finish(&pr, &out);
}
