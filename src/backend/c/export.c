/*
 * export.c: relayc's C export (export.h), the driver. The pipeline on one
 * screen: optimize as relayc run does (hoist, the level-2 pipeline), take
 * the entry's A-normal form, split its parameters into weights (found in
 * the parameter set) and data arguments, emit the body (emit_fn.c),
 * assemble NAME.c (emit_model.c) and the other files (emit_files.c), and
 * write every file whole. Weights become NAME.weights (layout in
 * rt/weights.c) or C arrays.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "backend/c/emit.h"
#include "relayc/pass.h"

/* ---- names ---- */

static bool is_keyword(const char *s) {
    static const char *const kw[] = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
                                     "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
                                     "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
                                     "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "ctx",
                                     "need", "sp", "rc", "count", "g", "i", "o", "main", "NULL"};
    if (s[0] == '_') return true; /* the generated code's inline loops name their locals _x */
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(s, kw[i]) == 0) return true;
    return false;
}

/* The generated code's own locals: b0, k1, a2, t3, i4, out5, o_b6 ... */
static bool is_local(const char *s) {
    size_t pre = strspn(s, "abktio_ut");
    return pre > 0 && pre <= 3 && s[pre] && strspn(s + pre, "0123456789") == strlen(s + pre);
}

static bool is_ident(const char *s) {
    if (!*s || isdigit((unsigned char)*s)) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* A C name for a Relay name: itself where that is a fresh identifier,
 * else prefix + the name with every other character as '_'. */
static const char *c_name(cemit *c, const char *name, const char *prefix) {
    if (is_ident(name) && !is_keyword(name) && !is_local(name) && name[0] != '_') return name;
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", prefix, name);
    for (char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_') *p = '_';
    return ry_arena_strdup(c->a, buf);
}

/* ---- files ---- */

static ry_status write_file(const char *dir, const char *name, const void *data, size_t n, ry_error *err) {
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return ry_error_file(err, dir, "path too long");
    int fd;
    if (ry_tmpfile_create(path, tmp, sizeof tmp, &fd, err)) return RY_ERR;
    const char *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w, left -= (size_t)w;
    }
    bool ok = left == 0;
    if (close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) == 0) return RY_OK;
    int e = errno;
    unlink(tmp);
    return ry_error_file(err, path, "cannot write: %s", strerror(e));
}

static ry_status write_sb(const char *dir, const char *name, strbuf *b, ry_error *err) {
    if (b->oom) return ry_error_file(err, dir, "out of memory writing %s", name);
    return write_file(dir, name, b->data ? b->data : "", b->len, err);
}

/* ---- weights ---- */

static void put32(strbuf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    ry_sb_put(b, (const char *)x, 4);
}

static void pad64(strbuf *b) {
    static const char zeros[64];
    if (b->len % 64) ry_sb_put(b, zeros, 64 - b->len % 64);
}

/* The manifest lines "name float32 256,784\n" of the weights in order. */
static void manifest(strbuf *b, int n, const ry_tensor *const *ts, const char *const *names) {
    for (int i = 0; i < n; i++) {
        ry_sb_printf(b, "%s %s ", names[i], ry_dtype_name(ts[i]->dtype));
        for (int k = 0; k < ts[i]->ndim; k++) ry_sb_printf(b, "%s%lld", k ? "," : "", (long long)ts[i]->shape[k]);
        ry_sb_puts(b, "\n");
    }
}

/* The weights file's image (rt/weights.c's layout); offs[i]: weight i's byte offset. */
static void weights_image(strbuf *img, const char *man, int n, const ry_tensor *const *ts, size_t *offs) {
    ry_sb_put(img, "RYCWGT01", 8);
    put32(img, (uint32_t)strlen(man));
    ry_sb_puts(img, man);
    pad64(img);
    for (int i = 0; i < n; i++) {
        offs[i] = img->len;
        ry_sb_put(img, ts[i]->data, ry_tensor_nbytes(ts[i]));
        pad64(img);
    }
    if (!img->oom) put32(img, (uint32_t)crc32(0L, (const unsigned char *)img->data, (uInt)img->len));
}

/* ---- the driver ---- */

static void flatten(cemit *c, const cval *v, cmodel *md, int cap) {
    if (v->tuple && !v->boxed) {
        for (int i = 0; i < v->n; i++) flatten(c, v->fields[i], md, cap);
    } else if (md->nouts < cap) {
        md->outs[md->nouts++] = v;
    }
}

static int count_tensors(const cval *v) {
    if (!v->tuple || v->boxed) return 1;
    int n = 0;
    for (int i = 0; i < v->n; i++) n += count_tensors(v->fields[i]);
    return n;
}

static bool has_sym(const cmodel *md, const char *s) {
    for (int i = 0; i < md->nsyms; i++)
        if (strcmp(md->syms[i], s) == 0) return true;
    return false;
}

/* The tensor types of t depth-first into ts[*n..cap). */
static void flat_types(const ry_type *t, const ry_type **ts, int *n, int cap) {
    if (t && t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++) flat_types(t->tuple.fields[i], ts, n, cap);
    } else if (*n < cap) {
        ts[(*n)++] = t;
    }
}

static bool entry_dim(const cmodel *md, const ry_dim *d) {
    return d->kind == RY_DIM_CONST || (d->kind == RY_DIM_SYM && has_sym(md, d->name));
}

/* Every symbolic dim of each output is one of the entry's; with control
 * flow over data, a dim held in a local that the entry's type gives as a
 * constant or an input's dim is checked equal to it when the call ends
 * (the type guarantees it) and becomes it, and an output with another
 * dim still is filled by the call (out_dyn): also one a broadcast made at
 * run time, which the type may give as the operand that was 1. */
static ry_status check_syms(cemit *c, cmodel *md, const ry_type *ret, ry_span span) {
    md->out_dyn = RY_NEW_ARRAY(c->a, bool, md->nouts + 1);
    md->out_value = RY_NEW_ARRAY(c->a, bool, md->nouts + 1);
    const ry_type **ts = RY_NEW_ARRAY(c->a, const ry_type *, md->nouts + 1);
    int nts = 0;
    flat_types(ret, ts, &nts, md->nouts);
    for (int k = 0; k < md->nouts; k++) {
        cval *v = (cval *)md->outs[k];
        const ry_type *t = nts == md->nouts ? ts[k] : NULL;
        for (int i = 0; md->dyn && !v->boxed && t && t->kind == RY_TYPE_TENSOR && t->tensor.ndim == v->ndim && i < v->ndim; i++) {
            const ry_dim *d = &t->tensor.dims[i];
            intptr_t bcast;
            if (entry_dim(md, &v->dims[i]) || !entry_dim(md, d)) continue;
            if (v->dims[i].kind == RY_DIM_SYM && ry_ptrmap_get(&c->bcast_dims, v->dims[i].name, &bcast)) continue;
            const char *msg = ry_c_fmt(c, "%s: result %d: dimension %d differs from the entry's type", ry_c_where(c, span), k, i);
            ry_sb_printf(&c->body, "    if (%s != %s) %s\n", ry_c_dim(c, &v->dims[i]), ry_c_dim(c, d),
                         ry_c_fail_stmt(c, "RT_E_DIM", msg));
            v->dims[i] = *d;
        }
        if (v->boxed) {
            char buf[128];
            if (!ry_c_value_result_ok(v->type))
                return ry_c_fail(c, span, "the result holds a value of type %s (the entry's results are tensors, tuples and ADT values, not closures or refs)",
                                 ry_type_str(v->type, buf, sizeof buf));
            md->out_value[k] = true;
            md->nvalue_outs++;
            continue;
        }
        for (int i = 0; i < v->ndim; i++)
            if (v->dims[i].kind == RY_DIM_SYM && !has_sym(md, v->dims[i].name)) {
                if (!md->dyn)
                    return ry_c_fail(c, span, "the result's dimension %s is not a dimension of the inputs", v->dims[i].name);
                md->out_dyn[k] = true;
            }
    }
    return RY_OK;
}

/* A weight's symbolic dim d (a vocabulary's size) is the constant v its
 * tensor gives, the same in every weight. */
static ry_status weight_sym(cemit *c, cmodel *md, const ry_var *p, const ry_dim *d, int64_t v) {
    if (d->kind != RY_DIM_SYM) return RY_OK;
    for (int k = 0; k < md->nwsyms; k++)
        if (strcmp(md->wsyms[k], d->name) == 0) {
            if (md->wsym_values[k] == v) return RY_OK;
            return ry_c_fail(c, p->span, "weight %%%s has %s = %lld, another weight %lld", p->name, d->name, (long long)v,
                             (long long)md->wsym_values[k]);
        }
    if (!is_ident(d->name) || is_keyword(d->name) || is_local(d->name))
        return ry_c_fail(c, p->span, "symbolic dimension %s is not a C identifier the export can use", d->name);
    md->wsyms[md->nwsyms] = d->name;
    md->wsym_values[md->nwsyms++] = v;
    return RY_OK;
}

/* The entry arguments a parameter of type t takes: one per tensor of a
 * tuple (nested ones too), else one. */
static int nleaves(const ry_type *t) {
    if (!t || t->kind != RY_TYPE_TUPLE) return 1;
    int n = 0;
    for (int i = 0; i < t->tuple.n; i++) n += nleaves(t->tuple.fields[i]);
    return n;
}

/* The entry argument cname of tensor type t (parameter p, or a tensor of
 * its tuple): its value; its ? dims named for the caller, its symbolic
 * dims the entry's. NULL after a located error. */
static cval *input_tensor(cemit *c, const ry_module *m, cmodel *md, const ry_var *p, const ry_type *t, const char *cname) {
    if (!ry_c_ctype(t->tensor.dtype)) {
        ry_c_fail(c, p->span, "parameter %%%s: dtype %s has no C type", p->name, ry_dtype_name(t->tensor.dtype));
        return NULL;
    }
    cval *v = RY_NEW(c->a, cval);
    v->dtype = t->tensor.dtype;
    v->ndim = t->tensor.ndim;
    memcpy(v->dims, t->tensor.dims, sizeof *v->dims * (size_t)v->ndim);
    v->weight = -1;
    md->args[md->nargs] = p;
    v->c = md->arg_c[md->nargs] = cname;
    for (int d = 0; d < t->tensor.ndim; d++) {
        ry_dim *dd = &v->dims[d];
        if (dd->kind == RY_DIM_ANY) { /* named for the caller: x_dim1, another _ while that is taken */
            const char *s = ry_c_fmt(c, "%s_dim%d", v->c, d);
            while (has_sym(md, s) || ry_module_find_global(m, s)) s = ry_c_fmt(c, "%s_", s);
            *dd = (ry_dim){.kind = RY_DIM_SYM, .name = s};
        }
        bool fixed = false;
        for (int k = 0; k < md->nwsyms && dd->kind == RY_DIM_SYM; k++) fixed |= strcmp(md->wsyms[k], dd->name) == 0;
        if (dd->kind == RY_DIM_SYM && !fixed && !has_sym(md, dd->name)) {
            if (!is_ident(dd->name) || is_keyword(dd->name) || is_local(dd->name)) {
                ry_c_fail(c, p->span, "symbolic dimension %s is not a C identifier the export can use", dd->name);
                return NULL;
            }
            md->syms[md->nsyms++] = dd->name;
        }
    }
    md->arg_t[md->nargs++] = ry_type_tensor_arena(c->a, v->dtype, v->ndim, v->dims);
    return v;
}

/* The value of input parameter p of type t: a tensor argument, or for a
 * tuple one argument per tensor (cname_0, cname_1, ..., nested: cname_1_0). */
static cval *input_value(cemit *c, const ry_module *m, cmodel *md, const ry_var *p, const ry_type *t, const char *cname) {
    char buf[256];
    if (t && t->kind == RY_TYPE_TUPLE) {
        cval *v = ry_c_tuple_val(c, t->tuple.n);
        for (int i = 0; i < t->tuple.n; i++)
            if (!(v->fields[i] = input_value(c, m, md, p, t->tuple.fields[i], ry_c_fmt(c, "%s_%d", cname, i)))) return NULL;
        return v;
    }
    if (!t || t->kind != RY_TYPE_TENSOR) {
        ry_c_fail(c, p->span, "parameter %%%s has type %s (the export takes tensors, tuples of them and ADT values)", p->name,
                  t ? ry_type_str(t, buf, sizeof buf) : "unknown");
        return NULL;
    }
    return input_tensor(c, m, md, p, t, cname);
}

/* Splits fn's parameters: weights (in set) become the context's, the
 * others the entry's arguments, their symbolic dims the entry's first. */
static ry_status classify(cemit *c, const ry_module *m, const ry_expr *fn, const ry_param_set *set, cmodel *md, ry_c_weights *w,
                         cval **params) {
    int np = fn->func.nparams, nl = 0;
    for (int i = 0; i < np; i++) nl += nleaves(fn->func.params[i]->type);
    md->args = RY_NEW_ARRAY(c->a, const ry_var *, nl + 1);
    md->arg_c = RY_NEW_ARRAY(c->a, const char *, nl + 1);
    md->arg_t = RY_NEW_ARRAY(c->a, const ry_type *, nl + 1);
    md->syms = RY_NEW_ARRAY(c->a, const char *, nl * RY_MAX_RANK + 1);
    md->wsyms = RY_NEW_ARRAY(c->a, const char *, np * RY_MAX_RANK + 1);
    md->wsym_values = RY_NEW_ARRAY(c->a, int64_t, np * RY_MAX_RANK + 1);
    c->weight_vars = RY_NEW_ARRAY(c->a, const ry_var *, np + 1);
    w->ts = RY_NEW_ARRAY(c->a, const ry_tensor *, np + 1);
    w->names = RY_NEW_ARRAY(c->a, const char *, np + 1);
    w->offs = RY_NEW_ARRAY(c->a, size_t, np + 1);
    char buf[256], got[128];
    for (int k = 0; set && k < set->n; k++)
        if (!ry_module_has_param(m, set->names[k]))
            return ry_c_fail(c, fn->span, "the weights hold %s, which no global of the model takes (another model's?)",
                             set->names[k]);
    for (int i = 0; i < np; i++) {
        const ry_var *p = fn->func.params[i];
        const ry_type *t = p->type;
        if (c->dyn && ry_c_is_value_arg(p)) { /* an ADT: a NAME_value * of the caller's */
            cval *v = RY_NEW(c->a, cval);
            v->boxed = true;
            v->type = t;
            v->weight = -1;
            md->args[md->nargs] = p;
            md->arg_t[md->nargs] = t;
            md->arg_c[md->nargs] = c_name(c, p->name, "arg_");
            v->c = ry_c_fmt(c, "((rt_val *)&%s->v)", md->arg_c[md->nargs++]);
            params[i] = v;
            continue;
        }
        int k = set ? ry_params_find(set, p->name) : -1;
        if (k >= 0 && (!t || t->kind != RY_TYPE_TENSOR))
            return ry_c_fail(c, p->span, "parameter %%%s has type %s, but the weights hold a tensor of that name", p->name,
                             t ? ry_type_str(t, buf, sizeof buf) : "unknown");
        if (k < 0) {
            if (!(params[i] = input_value(c, m, md, p, t, c_name(c, p->name, "arg_")))) return RY_ERR;
            continue;
        }
        cval *v = RY_NEW(c->a, cval);
        v->dtype = t->tensor.dtype;
        v->ndim = t->tensor.ndim;
        memcpy(v->dims, t->tensor.dims, sizeof *v->dims * (size_t)v->ndim);
        v->weight = -1;
        params[i] = v;
        const ry_tensor *x = set->views[k];
        bool ok = x->dtype == t->tensor.dtype && x->ndim == t->tensor.ndim;
        for (int d = 0; ok && d < x->ndim; d++) {
            ok = t->tensor.dims[d].kind != RY_DIM_ANY && (t->tensor.dims[d].kind != RY_DIM_CONST || t->tensor.dims[d].value == x->shape[d]);
            v->dims[d] = (ry_dim){.kind = RY_DIM_CONST, .value = x->shape[d]};
        }
        if (!ok)
            return ry_c_fail(c, p->span, "parameter %%%s is %s, but the weights hold %s", p->name,
                             ry_type_str(t, buf, sizeof buf), ry_tensor_describe(x, got, sizeof got));
        if (x->dtype != RY_FLOAT32 && x->dtype != RY_FLOAT64)
            return ry_c_fail(c, p->span, "weight %%%s: %s weights are not exported yet (float32 and float64 are)", p->name,
                             ry_dtype_name(x->dtype));
        for (int d = 0; d < x->ndim; d++)
            if (weight_sym(c, md, p, &t->tensor.dims[d], x->shape[d])) return RY_ERR;
        v->weight = w->n;
        v->c = ry_c_fmt(c, "((const %s *)ctx->w[%d])", ry_c_ctype(x->dtype), w->n);
        c->weight_vars[w->n] = p;
        w->ts[w->n] = x;
        w->names[w->n++] = set->names[k];
    }
    for (int i = 0; i < md->nargs; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(md->arg_c[i], md->arg_c[j]) == 0)
                return ry_c_fail(c, md->args[i]->span, "parameter %%%s: its C name %s is another argument's", md->args[i]->name,
                                 md->arg_c[i]);
    for (int i = 0; i < md->nargs; i++)
        for (int s = 0; s < md->nsyms; s++)
            if (strcmp(md->arg_c[i], md->syms[s]) == 0)
                return ry_c_fail(c, md->args[i]->span, "parameter %%%s has the name of a symbolic dimension", md->args[i]->name);
    c->nweights = w->n;
    c->syms = RY_NEW_ARRAY(c->a, const char *, md->nsyms + md->nwsyms + 1);
    for (int i = 0; i < md->nsyms; i++) c->syms[c->nsyms++] = md->syms[i];
    for (int i = 0; i < md->nwsyms; i++) c->syms[c->nsyms++] = md->wsyms[i];
    return RY_OK;
}

static const char *upper(cemit *c, const char *s) {
    char *u = ry_arena_strdup(c->a, s);
    for (char *p = u; *p; p++) *p = (char)toupper((unsigned char)*p);
    return u;
}

static ry_status make_dir(const char *dir, ry_error *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return ry_error_file(err, dir, "cannot create: %s", strerror(errno));
    return RY_OK;
}

static ry_status write_all(const char *dir, cemit *c, cmodel *md, ry_c_weights *w, ry_error *err) {
    strbuf man = {0}, img = {0}, code = {0}, hdr = {0}, mk = {0}, rd = {0}, ex = {0};
    manifest(&man, w->n, w->ts, w->names);
    ry_status st = RY_OK;
    if (!md->embed) {
        weights_image(&img, man.data ? man.data : "", w->n, w->ts, w->offs);
        w->size = img.len;
    }
    st = ry_c_write_model(&code, c, md, w, man.data ? man.data : "");
    ry_c_write_header(&hdr, md);
    ry_c_write_makefile(&mk, md);
    ry_c_write_readme(&rd, md);
    ry_c_write_example(&ex, md);
    char name[300];
    if (st == RY_OK) st = make_dir(dir, err);
    if (st == RY_OK && !md->embed) {
        snprintf(name, sizeof name, "%s.weights", md->name);
        st = write_sb(dir, name, &img, err);
    }
    snprintf(name, sizeof name, "%s.c", md->name);
    if (st == RY_OK) st = write_sb(dir, name, &code, err);
    snprintf(name, sizeof name, "%s.h", md->name);
    if (st == RY_OK) st = write_sb(dir, name, &hdr, err);
    if (st == RY_OK) st = write_sb(dir, "Makefile", &mk, err);
    if (st == RY_OK) st = write_sb(dir, "README", &rd, err);
    if (st == RY_OK) st = write_sb(dir, "example.c", &ex, err);
    strbuf *all[] = {&man, &img, &code, &hdr, &mk, &rd, &ex};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ry_free(all[i]->data);
    return st;
}

ry_status ry_export_c(ry_module *m, const char *entry, const ry_param_set *weights, const char *dir,
                      const ry_export_opts *opts, ry_error *err) {
    ry_export_opts o = opts ? *opts : (ry_export_opts){0};
    const char *name = o.name ? o.name : "model";
    if (!is_ident(name) || is_keyword(name)) return ry_error_file(err, dir, "export: the name '%s' is not a C identifier", name);
    if (ry_hoist(m, err) || ry_optimize(m, 2, err)) return RY_ERR;
    ry_global *g = ry_module_find_global(m, entry);
    if (!g) return ry_error_file(err, o.source ? o.source : dir, "export: no global @%s", entry);
    if (!is_ident(entry)) /* prefixed: NAME_entry */
        return ry_error_at(err, g->span, "export: the entry's name @%s is not a C identifier", entry);
    cemit c = {.a = ry_arena_new(), .err = err};
    cmodel md = {.name = name, .NAME = upper(&c, name), .entry = entry, .source = o.source ? o.source : "a module",
                 .embed = o.embed_weights, .blas = o.blas};
    ry_c_weights w = {0};
    const ry_expr *fn = ry_anf(m, g->func);
    cval **params = RY_NEW_ARRAY(c.a, cval *, fn->func.nparams + 1);
    cval *res = NULL;
    /* recursion, match, ADTs, closures, refs: emit_ctl.c's */
    md.dyn = c.dyn = ry_c_needs_dyn(fn);
    c.keep_all = ry_c_module_has_refs(m);
    c.m = m;
    c.name = md.name;
    c.NAME = md.NAME;
    ry_status st = classify(&c, m, fn, weights, &md, &w, params);
    if (st == RY_OK) st = ry_c_emit_body(&c, fn, params, &res);
    if (st == RY_OK) {
        int n = count_tensors(res);
        md.outs = RY_NEW_ARRAY(c.a, const cval *, n + 1);
        flatten(&c, res, &md, n);
        st = check_syms(&c, &md, fn->func.body->type, fn->span);
    }
    if (st == RY_OK) {
        ry_c_collect_adts(&c, &md);
        st = write_all(dir, &c, &md, &w, err);
    }
    strbuf *bufs[] = {&c.body, &c.sizes, &c.ptrs, &c.file, &c.open, &c.funcs, &c.protos};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ry_free(bufs[i]->data);
    ry_arena_free(c.a);
    return st;
}
