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
    bool let_body;   /* the body of a let: if used once, it continues that let's chain */
    bool noted;      /* counted in the TVM report */
} node_info;

typedef struct scope_info {
    int parent, depth, buf; /* buf: index of its open buffer, or -1 */
} scope_info;

typedef struct printer {
    bool show_types;
    ry_print_report *tvm; /* printing for TVM's parser (ry_print_opts.tvm), else NULL */
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
    int *used;     /* hash set over names: index into names, -1 empty */
    int *suffix;   /* per name: the last numeric suffix tried after it */
    int cap_used, cap_suffix;
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
    *ni = (node_info){e, 0, 0, -1, -1, false, false, false};
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

static int nslots(const ry_expr *e) {
    switch (e->kind) {
    case RY_EXPR_LET:
    case RY_EXPR_FUNC: return 1;
    case RY_EXPR_IF: return 2;
    case RY_EXPR_MATCH: return e->match.nclauses;
    default: return 0;
    }
}

/* A DFS stack entry: a node and the index of its next child. */
typedef struct frame {
    const ry_expr *e;
    int next;
} frame;

static bool push_frame(printer *pr, frame **st, int *n, int *cap, const ry_expr *e) {
    frame *fresh = grow_arr(pr, *st, *n, cap, sizeof **st);
    if (!fresh) return false;
    *st = fresh;
    (*st)[(*n)++] = (frame){e, 0};
    return true;
}

/* Post-order over the DAG (children before parents), without recursion so
 * that long binding chains cannot overflow the stack. */
static const ry_expr **postorder(printer *pr, const ry_expr *root, int *n) {
    const ry_expr **order = NULL;
    int cap = 0, nst = 0, cst = 0;
    frame *st = NULL;
    *n = 0;
    node_info *ri = info_of(pr, root);
    if (!ri || !push_frame(pr, &st, &nst, &cst, root)) return NULL;
    ri->seen = true;
    while (nst > 0 && !pr->oom) {
        frame *f = &st[nst - 1];
        int slot;
        const ry_expr *c = ry_expr_child(f->e, f->next++, &slot);
        if (!c) {
            const ry_expr **fresh = grow_arr(pr, (void *)order, *n, &cap, sizeof *order);
            if (!fresh) break;
            order = fresh;
            order[(*n)++] = st[--nst].e;
            continue;
        }
        if (atomic(c)) continue;
        node_info *ci = info_of(pr, c);
        if (!ci || ci->seen) continue;
        ci->seen = true;
        push_frame(pr, &st, &nst, &cst, c);
    }
    ry_free(st);
    return order;
}

/* Counts uses and places every non-atomic node in the innermost scope that
 * holds all its uses; parents are placed before their children (reverse
 * post-order), so a node's scope is final when its children are visited.
 * root's scope is `outer`. */
static void analyze(printer *pr, const ry_expr *root, int outer) {
    int n = 0;
    const ry_expr **order = postorder(pr, root, &n);
    if (!order || pr->oom) {
        ry_free(order);
        return;
    }
    node_info *ri = info_of(pr, root);
    ri->scope = outer;
    ri->uses = 1;
    for (int i = n - 1; i >= 0 && !pr->oom; i--) {
        const ry_expr *e = order[i];
        int idx = *map_slot(&pr->nodes, e, false), scope = pr->info[idx].scope, ns = nslots(e);
        if (e->kind == RY_EXPR_LET && pr->info[idx].let_body && pr->info[idx].uses == 1) {
            pr->info[idx].inner = scope; /* a let chain prints as one scope */
        } else if (ns) {
            int first = new_scope(pr, scope);
            for (int s = 1; s < ns; s++) new_scope(pr, scope);
            pr->info[idx].inner = first;
        }
        if (e->kind == RY_EXPR_LET && !atomic(e->let.body))
            pr->info[*map_slot(&pr->nodes, e->let.body, false)].let_body = true;
        int slot;
        const ry_expr *c;
        for (int j = 0; (c = ry_expr_child(e, j, &slot)); j++) {
            if (atomic(c)) continue;
            node_info *ci = &pr->info[*map_slot(&pr->nodes, c, false)];
            int us = slot < 0 ? scope : pr->info[idx].inner + slot;
            ci->scope = ci->uses++ ? lca(pr, ci->scope, us) : us;
        }
    }
    ry_free(order);
}

/* ---- names ---- */

static size_t str_hash(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The slot of name s in the used-name set: its names index, or -1. */
static int *used_slot(const printer *pr, const char *s) {
    size_t mask = (size_t)pr->cap_used - 1, h = str_hash(s) & mask;
    while (pr->used[h] >= 0 && strcmp(pr->names[pr->used[h]], s) != 0) h = (h + 1) & mask;
    return &pr->used[h];
}

/* Keeps the set at most half full; false on out-of-memory. */
static bool grow_used(printer *pr) {
    if ((pr->nnames + 1) * 2 <= pr->cap_used) return true;
    int ncap = pr->cap_used ? pr->cap_used * 2 : 256;
    int *fresh = ry_malloc(sizeof *fresh * (size_t)ncap);
    if (!fresh) return false;
    for (int i = 0; i < ncap; i++) fresh[i] = -1;
    ry_free(pr->used);
    pr->used = fresh;
    pr->cap_used = ncap;
    for (int i = 0; i < pr->nnames; i++) *used_slot(pr, pr->names[i]) = i;
    return true;
}

/* TVM's rule: a name starts with a letter (else "v" is put in front) and is
 * made unique within the definition by a numeric suffix. Characters a name
 * cannot hold in the text (a pass may name a var "x.grad") become '_'. */
static const char *var_name(printer *pr, const ry_var *v) {
    int *slot = map_slot(&pr->vars, v, false);
    if (slot) return pr->names[*slot];
    char base[256], cand[300];
    const char *nm = v->name ? v->name : "";
    bool alpha = (nm[0] >= 'a' && nm[0] <= 'z') || (nm[0] >= 'A' && nm[0] <= 'Z');
    snprintf(base, sizeof base, "%s%s", alpha ? "" : "v", nm);
    for (char *c = base; *c; c++) /* only what the lexer reads as part of a name */
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '/'))
            *c = '_';
    snprintf(cand, sizeof cand, "%s", base);
    char **fresh = grow_arr(pr, pr->names, pr->nnames, &pr->cap_names, sizeof *pr->names);
    if (fresh) pr->names = fresh;
    int *sfx = grow_arr(pr, pr->suffix, pr->nnames, &pr->cap_suffix, sizeof *pr->suffix);
    if (sfx) pr->suffix = sfx;
    if (!fresh || !sfx || !grow_used(pr)) {
        pr->oom = true;
        return "oom";
    }
    int *base_slot = used_slot(pr, base);
    if (*base_slot >= 0) { /* taken: try base1, base2, ... from where we left off */
        int owner = *base_slot;
        do snprintf(cand, sizeof cand, "%s%d", base, ++pr->suffix[owner]);
        while (*used_slot(pr, cand) >= 0);
    }
    char *copy = ry_strdup(cand);
    if (!copy || !(slot = map_slot(&pr->vars, v, true))) {
        ry_free(copy);
        pr->oom = true;
        return "oom";
    }
    pr->names[pr->nnames] = copy;
    pr->suffix[pr->nnames] = 0;
    *used_slot(pr, copy) = pr->nnames;
    *slot = pr->nnames++;
    return copy;
}

static void reset_names(printer *pr) {
    for (int i = 0; i < pr->nnames; i++) ry_free(pr->names[i]);
    pr->nnames = 0;
    for (int i = 0; i < pr->cap_used; i++) pr->used[i] = -1;
    map_free(&pr->vars);
}

static void put_const(printer *pr, strbuf *b, const ry_expr *e) {
    ry_tensor *t = e->constant.value;
    /* TVM's lexer has no 8-bit integer literal (`3i8`; it reads `3i16`):
     * metadata for TVM */
    bool tvm_inline = !pr->tvm || t->dtype != RY_INT8;
    if (tvm_inline && ry_print_scalar(b, t)) return;
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

static void put_let_chain(printer *pr, strbuf *out, const ry_expr *e);

/* Prints e as the end of scope `scope`: its bindings, then e. A let that is
 * printed in parentheses (let_chain) starts its own scope with its chain. */
static void put_scope_of(printer *pr, strbuf *out, int scope, const ry_expr *e, bool let_chain) {
    strbuf *fresh = grow_arr(pr, pr->bufs, pr->nbufs, &pr->cap_bufs, sizeof *pr->bufs);
    if (!fresh) return;
    pr->bufs = fresh;
    int idx = pr->nbufs++;
    pr->bufs[idx] = (strbuf){0};
    if (scope >= 0 && scope < pr->nscopes) pr->scopes[scope].buf = idx;
    strbuf last = {0};
    if (let_chain) put_let_chain(pr, &last, e);
    else put_expr(pr, &last, e, true, true);
    strbuf lines = pr->bufs[idx];
    pr->nbufs--;
    if (scope >= 0 && scope < pr->nscopes) pr->scopes[scope].buf = -1;
    if (lines.data) ry_sb_put(out, lines.data, lines.len);
    if (last.data) ry_sb_put(out, last.data, last.len);
    pr->oom |= lines.oom || last.oom;
    ry_free(lines.data);
    ry_free(last.data);
}

static void put_scope(printer *pr, strbuf *out, int scope, const ry_expr *e) {
    put_scope_of(pr, out, scope, e, false);
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

/* An annotation TVM's parser cannot read back (a ref type) is dropped for
 * TVM: its type checker infers the binding's type instead. */
static bool tvm_drops(printer *pr, const ry_type *t) {
    if (!pr->tvm || !ry_type_has_ref(t)) return false;
    pr->tvm->ref_annots++;
    return true;
}

static void put_var_binding(printer *pr, strbuf *out, const ry_var *v) {
    ry_sb_printf(out, "%%%s", var_name(pr, v));
    if (v->annot && !tvm_drops(pr, v->annot)) {
        ry_sb_puts(out, ": ");
        ry_print_type_tvm(out, v->annot, pr->tvm);
    } else if (pr->tvm && !v->annot && ry_type_tvm_writable(v->type)) {
        /* the checker's type, where TVM can read it: TVM's operator
         * relations may run before an argument's type is solved, and its
         * conv2d_backward_weight then crashes */
        ry_sb_puts(out, ": ");
        ry_print_type_tvm(out, v->type, pr->tvm);
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
        ry_print_types_tvm(out, f->func.tparams, f->func.ntparams, pr->tvm);
        ry_sb_puts(out, "]");
    }
    ry_sb_puts(out, "(");
    for (int i = 0; i < f->func.nparams; i++) {
        if (i) ry_sb_puts(out, ", ");
        put_var_binding(pr, out, f->func.params[i]);
    }
    ry_print_attrs(out, &f->func.attrs, f->func.nparams == 0);
    ry_sb_puts(out, ") ");
    if (f->func.ret_annot && !tvm_drops(pr, f->func.ret_annot)) {
        ry_sb_puts(out, "-> ");
        ry_print_type_tvm(out, f->func.ret_annot, pr->tvm);
        ry_sb_puts(out, " ");
    }
    put_body(pr, out, inner_scope(pr, f, 0), f->func.body);
}

/* The attributes TVM's parser cannot do without (`units` of nn.dense) that
 * the call leaves at relayc's default, spelled after the given ones. */
static void put_required_attrs(strbuf *out, const ry_op *op, const ry_attrs *given, bool first) {
    first = first && given->n == 0;
    for (int i = 0; i < op->nattrs; i++) {
        if (!op->attrs[i].def.tvm_required) continue;
        bool have = false;
        for (int j = 0; j < given->n && !have; j++) have = strcmp(given->items[j].name, op->attrs[i].name) == 0;
        if (have) continue;
        ry_sb_printf(out, "%s%s=", first ? "" : ", ", op->attrs[i].name);
        ry_print_attr_value(out, &op->attrs[i].def);
        first = false;
    }
}

/* A call's attributes as TVM's parser takes them: TVM's reductions and
 * squeeze hold `axis` as an array (relayc also reads `axis=1`), and an
 * operator whose attribute class TVM's parser cannot find (the registry's
 * tvm_attrs_key: scatter_nd, cumsum) needs the class named, the way TVM
 * spells attributes of non-operator calls. */
static void put_tvm_attrs(strbuf *out, const ry_op *op, const ry_attrs *a, bool first) {
    bool array_axis = op->pattern == RY_PAT_COMM_REDUCE || strcmp(op->name, "squeeze") == 0;
    for (int i = 0; i < a->n; i++) {
        if (!first || i) ry_sb_puts(out, ", ");
        ry_sb_printf(out, "%s=", a->items[i].name);
        bool wrap = array_axis && strcmp(a->items[i].name, "axis") == 0 && a->items[i].value.kind == RY_AV_INT;
        if (wrap) ry_sb_puts(out, "[");
        ry_print_attr_value(out, &a->items[i].value);
        if (wrap) ry_sb_puts(out, "]");
    }
    if (op->tvm_attrs_key && a->n) ry_sb_printf(out, ", attrs_type_key=\"%s\"", op->tvm_attrs_key);
}

static void put_call(printer *pr, strbuf *out, const ry_expr *e) {
    strbuf args = {0};
    for (int i = 0; i < e->call.nargs; i++) {
        if (i) ry_sb_puts(&args, ", ");
        put_expr(pr, &args, e->call.args[i], false, false);
    }
    const ry_expr *c = e->call.callee;
    if (pr->tvm && c->kind == RY_EXPR_OP) put_tvm_attrs(&args, c->op.op, &e->call.attrs, e->call.nargs == 0);
    else ry_print_attrs(&args, &e->call.attrs, e->call.nargs == 0);
    if (c->kind == RY_EXPR_OP) put_required_attrs(&args, c->op.op, &e->call.attrs, e->call.nargs == 0);
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
    case RY_EXPR_CALL:
        if (pr->tvm && e->call.callee->kind == RY_EXPR_OP) {
            /* relayc's fused kernels: TVM has none (stop_gradient is put_expr's) */
            const char *name = e->call.callee->op.op->name;
            if (strncmp(name, "fused.", 6) == 0) pr->tvm->unsupported++;
        }
        put_call(pr, out, e);
        return;
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
    case RY_EXPR_PROJ: { /* `1f.0` would lex as a bad number: a literal gets parentheses */
        bool paren = e->proj.tuple->kind == RY_EXPR_CONST;
        if (paren) ry_sb_puts(out, "(");
        put_expr(pr, out, e->proj.tuple, false, false);
        ry_sb_printf(out, "%s.%d", paren ? ")" : "", e->proj.index);
        return;
    }
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
    ry_print_type(out, e->type);
    ry_sb_puts(out, " */");
}

static bool is_bound(printer *pr, const ry_expr *e) {
    int *slot = map_slot(&pr->nodes, e, false);
    return !slot || pr->info[*slot].tmp >= 0;
}

/* Binds, children first and in print order, every unbound node reachable
 * from e through its own scope's edges (arguments, fields, conditions): they
 * are all printed as `%N = ...;` anyway, and binding them here, without
 * recursion, keeps printing e one level deep however long the chain. */
static void prebind(printer *pr, const ry_expr *e) {
    frame *st = NULL;
    int nst = 0, cst = 0;
    if (!push_frame(pr, &st, &nst, &cst, e)) return;
    while (nst > 0 && !pr->oom) {
        frame *f = &st[nst - 1];
        int slot;
        const ry_expr *c = ry_expr_child(f->e, f->next++, &slot);
        if (c) {
            if (slot < 0 && !atomic(c) && !is_bound(pr, c)) push_frame(pr, &st, &nst, &cst, c);
            continue;
        }
        const ry_expr *done = st[--nst].e;
        if (done != e && !is_bound(pr, done)) {
            strbuf ignore = {0};
            put_expr(pr, &ignore, done, false, false);
            ry_free(ignore.data);
        }
    }
    ry_free(st);
}

/* Atoms print in place; a node already bound prints as its %N; a node used
 * once where inlining is allowed (a scope's end, a let's value) prints in
 * place; anything else is bound as `%N = e;` in its scope. A let that is
 * not at the end of a scope is wrapped in parentheses, as TVM does. */
/* stop_gradient(e), which TVM lacks: for TVM it prints as e (the identity
 * wherever values run; only gradients differ). */
static bool tvm_skips(printer *pr, const ry_expr *e) {
    return pr->tvm && e->kind == RY_EXPR_CALL && e->call.nargs == 1 && e->call.callee->kind == RY_EXPR_OP &&
           strcmp(e->call.callee->op.op->name, "stop_gradient") == 0;
}

static void put_expr(printer *pr, strbuf *out, const ry_expr *e, bool try_inline, bool tail) {
    if (tvm_skips(pr, e)) {
        int *slot = map_slot(&pr->nodes, e, false);
        if (slot && !pr->info[*slot].noted) pr->tvm->stop_gradients++;
        if (slot) pr->info[*slot].noted = true;
        put_expr(pr, out, e->call.args[0], try_inline, tail);
        return;
    }
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
    prebind(pr, e);
    ni = &pr->info[*slot];
    bool in_place = try_inline && ni->uses <= 1;
    strbuf text = {0};
    if (e->kind == RY_EXPR_LET && !(in_place && tail)) {
        strbuf inner = {0};
        ry_sb_puts(&inner, "(\n");
        put_scope_of(pr, &inner, inner_scope(pr, e, 0), e, true);
        put_indented(&text, inner.data ? inner.data : "", 2);
        ry_sb_puts(&text, "\n)");
        ry_free(inner.data);
    } else if (e->kind == RY_EXPR_MATCH && !(in_place && tail)) {
        /* TVM's parser reads a match as a binding's value only in parentheses */
        ry_sb_puts(&text, "(");
        visit(pr, &text, e);
        ry_sb_puts(&text, ")");
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
    reset_names(pr); /* next_tmp runs on: TVM's parser has one %N table per module */
}

static void printer_free(printer *pr) {
    printer_reset_def(pr);
    ry_free(pr->info);
    ry_free(pr->scopes);
    ry_free(pr->bufs);
    ry_free(pr->names);
    ry_free(pr->suffix);
    ry_free(pr->used);
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

static void put_typedef(strbuf *out, const ry_typedef *td, ry_print_report *tvm) {
    ry_sb_printf(out, "type %s", td->name);
    if (td->ntparams) {
        ry_sb_puts(out, "[");
        ry_print_types_tvm(out, td->tparams, td->ntparams, tvm);
        ry_sb_puts(out, "]");
    }
    ry_sb_puts(out, " {");
    for (int i = 0; i < td->nctors; i++) {
        const ry_ctor *c = td->ctors[i];
        ry_sb_printf(out, "\n  %s", c->name);
        if (c->nfields) {
            ry_sb_puts(out, "(");
            for (int k = 0; k < c->nfields && tvm; k++) tvm->unsupported += ry_type_has_ref(c->fields[k]);
            ry_print_types_tvm(out, c->fields, c->nfields, tvm);
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
    ry_print_report ignored = {0};
    if (opts && opts->tvm) pr.tvm = opts->report ? opts->report : &ignored;
    strbuf out = {0};
    ry_sb_puts(&out, "#[version = \"0.0.5\"]\n");
    int k = 0;
    for (int i = 0; i < m->ntypedefs; i++, k++) {
        if (k) ry_sb_puts(&out, "\n");
        put_typedef(&out, m->typedefs[i], pr.tvm);
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
