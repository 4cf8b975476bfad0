/*
 * emit_ctl.c: control flow over data in the generated C (c->dyn): calls of
 * globals (recursion), match, constructors (ADT values), closures and
 * refs. Such values are rt_val pointers (rt/value.c) allocated from the
 * context's arena; tensors and tuples stay unboxed inside a function
 * (pointers and dims in C locals, so the operators' emitters see them as
 * they see the entry's) and are boxed only where they cross into a call,
 * a constructor, a closure or a ref.
 *
 * Every global the entry reaches becomes one C function per pattern of
 * weights its call sites pass: a parameter that is always the same weight
 * is that weight in the function (not an argument), so a GEMM reads the
 * weight's panels packed once when the context opens, as in the entry;
 * the recursion passes its weights through and so calls itself. Closures
 * are C functions of their own with the captured values in the closure's
 * fields. Each function counts its depth against NAME_MAX_DEPTH, so a
 * deep input is a located error and not a crash of the C stack.
 */
#include <string.h>

#include "backend/c/emit.h"
#include "ir/parse.h" /* ry_expr_child */
#include "relayc/pass.h" /* ry_anf */

/* ---- what needs it ---- */


/* Whether t holds a tensor with a dim the checker left "?" (a broadcast
 * of two symbols, or of a symbol and a constant): only run time knows it,
 * so it is a C local (emit_dims.c), as dims are under control flow. */
static bool has_any_dim(const ry_type *t) {
    if (!t) return false;
    if (t->kind == RY_TYPE_TUPLE)
        for (int i = 0; i < t->tuple.n; i++)
            if (has_any_dim(t->tuple.fields[i])) return true;
    if (t->kind != RY_TYPE_TENSOR) return false;
    for (int i = 0; i < t->tensor.ndim; i++)
        if (t->tensor.dims[i].kind == RY_DIM_ANY) return true;
    return false;
}

static bool dyn_expr(const ry_expr *e) {
    if (e->kind == RY_EXPR_CALL && has_any_dim(e->type)) return true;
    switch (e->kind) {
    case RY_EXPR_GLOBAL:
    case RY_EXPR_MATCH:
    case RY_EXPR_CTOR:
    case RY_EXPR_FUNC:
    case RY_EXPR_REF:
    case RY_EXPR_REF_READ:
    case RY_EXPR_REF_WRITE: return true;
    default: break;
    }
    int slot;
    const ry_expr *k;
    for (int j = 0; (k = ry_expr_child(e, j, &slot)); j++)
        if (dyn_expr(k)) return true;
    return false;
}

static bool has_refs(const ry_expr *e) {
    if (e->kind == RY_EXPR_REF || e->kind == RY_EXPR_REF_WRITE) return true;
    int slot;
    const ry_expr *k;
    for (int j = 0; (k = ry_expr_child(e, j, &slot)); j++)
        if (has_refs(k)) return true;
    return false;
}

bool ry_c_module_has_refs(const ry_module *m) {
    for (int i = 0; i < m->nglobals; i++)
        if (has_refs(m->globals[i]->func)) return true;
    return false;
}

/* A tensor, or a tuple of them (nested too): entry arguments, nothing boxed. */
static bool tensors_only(const ry_type *t) {
    if (t && t->kind == RY_TYPE_TUPLE) {
        for (int i = 0; i < t->tuple.n; i++)
            if (!tensors_only(t->tuple.fields[i])) return false;
        return true;
    }
    return t && t->kind == RY_TYPE_TENSOR;
}

bool ry_c_needs_dyn(const ry_expr *fn) {
    for (int i = 0; i < fn->func.nparams; i++)
        if (!tensors_only(fn->func.params[i]->type)) return true;
    return dyn_expr(fn->func.body);
}

const char *ry_c_fail_stmt(cemit *c, const char *rc, const char *msg) {
    char buf[1024];
    size_t n = 0;
    for (const char *s = msg; *s && n + 3 < sizeof buf; s++) {
        if (*s == '"' || *s == '\\') buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = 0;
    return ry_c_fmt(c, "return fail(ctx, %s, \"%s\");", rc, buf);
}

static const char *oom(cemit *c) { return ry_c_fail_stmt(c, "RT_E_MEMORY", "out of memory"); }

/* ---- boxing ---- */

const char *ry_c_box(cemit *c, const cval *v, ry_span span) {
    if (v->boxed) return v->c;
    const char *b = ry_c_tmp(c, "_v");
    if (v->tuple) {
        ry_sb_printf(&c->body, "    rt_val *%s = rt_new(&ctx->arena, RT_V_TUPLE, %d);\n    if (!%s) %s\n", b, v->n, b, oom(c));
        for (int i = 0; i < v->n; i++) {
            const char *f = ry_c_box(c, v->fields[i], span);
            if (!f) return NULL;
            ry_sb_printf(&c->body, "    %s->f[%d] = %s;\n", b, i, f);
        }
        return b;
    }
    ry_sb_printf(&c->body, "    rt_val *%s = rt_tensor(&ctx->arena, (void *)%s, %d, sizeof(%s), %d);\n    if (!%s) %s\n", b, v->c,
                 v->ndim, ry_c_ctype(v->dtype), ry_c_dtype_index(v->dtype), b, oom(c));
    for (int i = 0; i < v->ndim; i++) ry_sb_printf(&c->body, "    %s->shape[%d] = %s;\n", b, i, ry_c_dim(c, &v->dims[i]));
    return b;
}

static cval *boxed(cemit *c, const char *expr, const ry_type *t) {
    cval *v = RY_NEW(c->a, cval);
    v->boxed = true;
    v->type = t;
    v->c = expr;
    v->weight = -1;
    return v;
}

/* params: a function's parameters, whose equal dim symbols share one local */
cval *ry_c_unbox(cemit *c, const char *box, const ry_type *t, bool params) {
    if (t && t->kind == RY_TYPE_TUPLE) {
        cval *v = ry_c_tuple_val(c, t->tuple.n);
        for (int i = 0; i < v->n; i++)
            if (!(v->fields[i] = ry_c_unbox(c, ry_c_fmt(c, "%s->f[%d]", box, i), t->tuple.fields[i], params))) return NULL;
        return v;
    }
    if (!t || t->kind != RY_TYPE_TENSOR) {
        const char *b = ry_c_tmp(c, "_v");
        ry_sb_printf(&c->body, "    rt_val *%s = %s;\n    (void)%s;\n", b, box, b);
        return boxed(c, b, t);
    }
    const char *ct = ry_c_ctype(t->tensor.dtype);
    if (!ct) {
        ry_c_fail(c, t->span, "dtype %s has no C type in the export", ry_dtype_name(t->tensor.dtype));
        return NULL;
    }
    ry_type *u = ry_type_tensor_arena(c->a, t->tensor.dtype, t->tensor.ndim, t->tensor.dims);
    for (int i = 0; i < u->tensor.ndim; i++) {
        ry_dim *d = &u->tensor.dims[i];
        if (d->kind == RY_DIM_CONST) continue;
        struct ry_c_symmap *sm = &c->syms_of_params;
        int k = 0;
        while (params && d->kind == RY_DIM_SYM && k < sm->n && strcmp(sm->from[k], d->name) != 0) k++;
        if (params && d->kind == RY_DIM_SYM && k < sm->n) {
            *d = (ry_dim){.kind = RY_DIM_SYM, .name = sm->to[k]};
            continue;
        }
        const char *name = ry_c_tmp(c, "_d");
        ry_sb_printf(&c->body, "    const int64_t %s = %s->shape[%d];\n    (void)%s;\n", name, box, i, name);
        if (params && d->kind == RY_DIM_SYM && sm->n < 64) {
            sm->from[sm->n] = d->name;
            sm->to[sm->n++] = name;
        }
        *d = (ry_dim){.kind = RY_DIM_SYM, .name = name};
    }
    const char *x = ry_c_tmp(c, "_x");
    ry_sb_printf(&c->body, "    %s *%s = (%s *)%s->data;\n    (void)%s;\n", ct, x, ct, box, x);
    return ry_c_tensor_val(c, x, u);
}

/* ---- functions ---- */

typedef struct fnstate {
    strbuf body;
    int cur, nested;
    struct ry_c_symmap syms;
} fnstate;

/* Starts a C function: statements now go to its body. */
static void fn_begin(cemit *c, fnstate *s, const char *name, const char *what, ry_span span) {
    s->body = c->body;
    s->cur = c->cur;
    s->nested = c->nested;
    s->syms = c->syms_of_params;
    memset(&c->body, 0, sizeof c->body);
    c->syms_of_params.n = 0;
    c->cur = 0;
    c->nested = 0;
    ry_sb_printf(&c->protos, "static int %s(void *vctx, rt_val **res, rt_val *self, rt_val *const *args);\n", name);
    ry_sb_printf(&c->body, "/* %s (%s) */\nstatic int %s(void *vctx, rt_val **res, rt_val *self, rt_val *const *args) {\n"
                           "    %s_ctx *ctx = vctx;\n    int rc = RT_OK;\n    (void)rc;\n    (void)self;\n    (void)args;\n",
                 what, ry_c_where(c, span), name, c->name);
    ry_sb_printf(&c->body, "    if (++ctx->depth > %s_MAX_DEPTH) {\n"
                           "        snprintf(ctx->msg, sizeof ctx->msg, \"%s: %s: the recursion is deeper than %%d calls (%s_MAX_DEPTH)\", %s_MAX_DEPTH);\n"
                           "        return RT_E_DEPTH;\n    }\n",
                 c->NAME, ry_c_where(c, span), what, c->NAME, c->NAME);
    ry_sb_puts(&c->body, "    const rt_mark mark = rt_arena_mark(&ctx->arena);\n    (void)mark;\n");
}

/* Whether v holds only tensors, tuples and ADT values (a result rt_keep
 * can move: no closure, which may capture itself). */
static bool movable(const cval *v) {
    if (v->boxed) return ry_c_value_result_ok(v->type);
    for (int i = 0; v->tuple && i < v->n; i++)
        if (!movable(v->fields[i])) return false;
    return true;
}

/* Ends it with result v: boxed into *res. */
static ry_status fn_end(cemit *c, fnstate *s, const cval *v, ry_span span) {
    const char *b = v ? ry_c_box(c, v, span) : NULL;
    if (b && !c->keep_all && movable(v)) /* the frame's other values dropped */
        ry_sb_printf(&c->body, "    rt_val *kept = %s;\n    if (rt_keep(&ctx->arena, mark, &kept, &ctx->keep) != RT_OK) %s\n", b, oom(c)), b = "kept";
    if (b) ry_sb_printf(&c->body, "    *res = %s;\n    ctx->depth--;\n    return RT_OK;\n}\n\n", b);
    if (c->body.data) ry_sb_puts(&c->funcs, c->body.data);
    ry_free(c->body.data);
    c->body = s->body;
    c->cur = s->cur;
    c->nested = s->nested;
    c->syms_of_params = s->syms;
    return b && !c->failed ? RY_OK : RY_ERR;
}

static const char *spec_find(cemit *c, const char *key) {
    for (int i = 0; i < c->nspec; i++)
        if (strcmp(c->spec_key[i], key) == 0) return c->spec_name[i];
    return NULL;
}

static void spec_add(cemit *c, const char *key, const char *name) {
    if (c->nspec == c->spec_cap) {
        int cap = c->spec_cap ? 2 * c->spec_cap : 16;
        const char **k = RY_NEW_ARRAY(c->a, const char *, cap), **n = RY_NEW_ARRAY(c->a, const char *, cap);
        if (c->nspec) {
            memcpy(k, c->spec_key, sizeof *k * (size_t)c->nspec);
            memcpy(n, c->spec_name, sizeof *n * (size_t)c->nspec);
        }
        c->spec_key = k, c->spec_name = n, c->spec_cap = cap;
    }
    c->spec_key[c->nspec] = key;
    c->spec_name[c->nspec++] = name;
}

/* A C-safe rendering of a Relay name, for function names. */
static const char *c_safe(cemit *c, const char *s) {
    char *r = ry_arena_strdup(c->a, s);
    for (char *p = r; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) *p = '_';
    return r;
}

/* The weights signature of values vs: "3,-,5". */
static const char *weight_sig(cemit *c, int n, cval *const *vs) {
    strbuf b = {0};
    ry_sb_puts(&b, "");
    for (int i = 0; i < n; i++) {
        if (vs[i] && !vs[i]->tuple && !vs[i]->boxed && vs[i]->weight >= 0) ry_sb_printf(&b, "%d,", vs[i]->weight);
        else ry_sb_puts(&b, "-,");
    }
    const char *r = ry_arena_strdup(c->a, b.data ? b.data : "");
    ry_free(b.data);
    return r;
}

/* The C function of global name for arguments like args (their weights;
 * NULL: none is a weight), emitted on first use. */
static const char *global_fn(cemit *c, const char *name, int nargs, cval *const *args, ry_span span) {
    ry_global *g = ry_module_find_global(c->m, name);
    if (!g) {
        ry_c_fail(c, span, "no global @%s", name);
        return NULL;
    }
    const char *sig = args ? weight_sig(c, nargs, args) : "";
    const char *key = ry_c_fmt(c, "@%s|%s", name, sig);
    const char *fname = spec_find(c, key);
    if (fname) return fname;
    fname = ry_c_fmt(c, "g%d_%s", c->nfn++, c_safe(c, name));
    spec_add(c, key, fname);
    const ry_expr *fn = ry_anf(c->m, g->func);
    if (fn->func.nparams != nargs && args) {
        ry_c_fail(c, span, "@%s takes %d arguments, not %d", name, fn->func.nparams, nargs);
        return NULL;
    }
    fnstate s;
    fn_begin(c, &s, fname, ry_c_fmt(c, "@%s", name), g->span);
    ry_c_env en;
    memset(&en, 0, sizeof en);
    for (int i = 0; i < fn->func.nparams; i++) {
        const ry_var *p = fn->func.params[i];
        cval *v = args && !args[i]->tuple && !args[i]->boxed && args[i]->weight >= 0 ? args[i]
                                                                                    : ry_c_unbox(c, ry_c_fmt(c, "args[%d]", i), p->type, true);
        if (!v) break;
        ry_ptrmap_put(c->a, &en.vars, p, (intptr_t)v);
    }
    cval *r = NULL;
    if (!c->failed) {
        ry_c_liveness(c, fn->func.body);
        r = ry_c_value(c, &en, fn->func.body);
    }
    return fn_end(c, &s, r, g->span) == RY_OK ? fname : NULL;
}

/* Boxed arguments av[] (weights the function has built in left out as NULL). */
static const char *arg_array(cemit *c, int n, cval *const *args, bool drop_weights, ry_span span) {
    const char *av = ry_c_tmp(c, "_a");
    const char **b = RY_NEW_ARRAY(c->a, const char *, n + 1);
    for (int i = 0; i < n; i++) {
        bool w = drop_weights && !args[i]->tuple && !args[i]->boxed && args[i]->weight >= 0;
        if (!(b[i] = w ? "NULL" : ry_c_box(c, args[i], span))) return NULL;
    }
    ry_sb_printf(&c->body, "    rt_val *%s[%d] = {", av, n ? n : 1);
    for (int i = 0; i < n; i++) ry_sb_printf(&c->body, "%s%s", i ? ", " : "", b[i]);
    ry_sb_puts(&c->body, n ? "};\n" : "NULL};\n");
    return av;
}

/* res = f(self, av): the call, its failure returned, its result unboxed as t. */
static cval *invoke(cemit *c, const char *f, const char *self, const char *av, const ry_type *t) {
    const char *r = ry_c_tmp(c, "_r");
    ry_sb_printf(&c->body, "    rt_val *%s = NULL;\n    if ((rc = %s(ctx, &%s, %s, %s)) != RT_OK) return rc;\n", r, f, r, self, av);
    return ry_c_unbox(c, r, t, false);
}

cval *ry_c_call_value(cemit *c, ry_c_env *en, const ry_expr *e) {
    const ry_expr *f = e->call.callee;
    int n = e->call.nargs;
    if (f->kind == RY_EXPR_CTOR) return ry_c_ctor_value(c, en, f, n, e->call.args, e->span);
    cval **args = RY_NEW_ARRAY(c->a, cval *, n + 1);
    for (int i = 0; i < n; i++)
        if (!(args[i] = ry_c_value(c, en, e->call.args[i]))) return NULL;
    if (f->kind == RY_EXPR_GLOBAL) {
        const char *fn = global_fn(c, f->global.name, n, args, e->span);
        const char *av = fn ? arg_array(c, n, args, true, e->span) : NULL;
        return av ? invoke(c, fn, "NULL", av, e->type) : NULL;
    }
    cval *clo = ry_c_value(c, en, f);
    if (!clo) return NULL;
    if (!clo->boxed) {
        ry_c_fail(c, e->span, "a call of a value that is not a function");
        return NULL;
    }
    const char *av = arg_array(c, n, args, false, e->span);
    return av ? invoke(c, ry_c_fmt(c, "%s->fn", clo->c), clo->c, av, e->type) : NULL;
}

/* A global as a value: a closure without captures over its function. */
cval *ry_c_global_value(cemit *c, const ry_expr *e) {
    const char *fn = global_fn(c, e->global.name, 0, NULL, e->span);
    if (!fn) return NULL;
    const char *v = ry_c_tmp(c, "_v");
    ry_sb_printf(&c->body, "    rt_val *%s = rt_new(&ctx->arena, RT_V_CLOSURE, 0);\n    if (!%s) %s\n    %s->fn = %s;\n", v, v,
                 oom(c), v, fn);
    return boxed(c, v, e->type);
}

cval *ry_c_closure(cemit *c, ry_c_env *en, const ry_expr *fn, const ry_var *self_var) {
    ry_arena *scratch = ry_arena_new();
    int ncap = 0;
    const ry_var **caps = ry_func_free_vars(scratch, c->a, fn, &ncap);
    ry_arena_free(scratch);
    cval **capv = RY_NEW_ARRAY(c->a, cval *, ncap + 1);
    for (int i = 0; i < ncap; i++) {
        intptr_t got;
        if (caps[i] == self_var) continue;
        if (!ry_ptrmap_get(&en->vars, caps[i], &got)) {
            ry_c_fail(c, fn->span, "%%%s is not bound here", caps[i]->name);
            return NULL;
        }
        capv[i] = (cval *)got;
    }
    /* one C function per pattern of weights among the captures */
    const char *key = ry_c_fmt(c, "fn%p|%s", (const void *)fn, weight_sig(c, ncap, capv));
    const char *name = spec_find(c, key);
    if (!name) {
        name = ry_c_fmt(c, "lam%d", c->nfn++);
        spec_add(c, key, name);
        fnstate s;
        fn_begin(c, &s, name, "a closure", fn->span);
        ry_c_env inner;
        memset(&inner, 0, sizeof inner);
        for (int i = 0; i < ncap && !c->failed; i++) {
            cval *v = caps[i] == self_var                                ? boxed(c, "self", fn->type)
                      : !capv[i]->tuple && !capv[i]->boxed && capv[i]->weight >= 0 ? capv[i]
                                                                        : ry_c_unbox(c, ry_c_fmt(c, "self->f[%d]", i), caps[i]->type, false);
            if (v) ry_ptrmap_put(c->a, &inner.vars, caps[i], (intptr_t)v);
        }
        for (int i = 0; i < fn->func.nparams && !c->failed; i++) {
            cval *v = ry_c_unbox(c, ry_c_fmt(c, "args[%d]", i), fn->func.params[i]->type, true);
            if (v) ry_ptrmap_put(c->a, &inner.vars, fn->func.params[i], (intptr_t)v);
        }
        cval *r = NULL;
        if (!c->failed) {
            ry_c_liveness(c, fn->func.body);
            r = ry_c_value(c, &inner, fn->func.body);
        }
        if (fn_end(c, &s, r, fn->span)) return NULL;
    }
    const char *v = ry_c_tmp(c, "_v");
    ry_sb_printf(&c->body, "    rt_val *%s = rt_new(&ctx->arena, RT_V_CLOSURE, %d);\n    if (!%s) %s\n    %s->fn = %s;\n", v, ncap,
                 v, oom(c), v, name);
    cval *clo = boxed(c, v, fn->type);
    if (self_var) ry_ptrmap_put(c->a, &en->vars, self_var, (intptr_t)clo);
    for (int i = 0; i < ncap; i++) {
        const char *b = caps[i] == self_var ? v : ry_c_box(c, capv[i], fn->span);
        if (!b) return NULL;
        ry_sb_printf(&c->body, "    %s->f[%d] = %s;\n", v, i, b);
    }
    return clo;
}

cval *ry_c_ctor_value(cemit *c, ry_c_env *en, const ry_expr *ctor, int nargs, ry_expr *const *args, ry_span span) {
    const ry_ctor *k = ctor->ctor.ctor;
    const char **b = RY_NEW_ARRAY(c->a, const char *, nargs + 1);
    for (int i = 0; i < nargs; i++) {
        cval *v = ry_c_value(c, en, args[i]);
        if (!v || !(b[i] = ry_c_box(c, v, span))) return NULL;
    }
    const char *v = ry_c_tmp(c, "_v");
    ry_sb_printf(&c->body, "    rt_val *%s = rt_new(&ctx->arena, RT_V_ADT, %d);\n    if (!%s) %s\n    %s->tag = %d; /* %s */\n", v,
                 nargs, v, oom(c), v, k->tag, k->name);
    for (int i = 0; i < nargs; i++) ry_sb_printf(&c->body, "    %s->f[%d] = %s;\n", v, i, b[i]);
    const ry_type *t = ctor->type && ctor->type->kind == RY_TYPE_FUNC ? ctor->type->func.ret : ctor->type;
    return boxed(c, v, t);
}

cval *ry_c_ref(cemit *c, ry_c_env *en, const ry_expr *e) {
    if (e->kind == RY_EXPR_REF) {
        cval *x = ry_c_value(c, en, e->ref.value);
        const char *b = x ? ry_c_box(c, x, e->span) : NULL;
        if (!b) return NULL;
        const char *v = ry_c_tmp(c, "_v");
        ry_sb_printf(&c->body, "    rt_val *%s = rt_new(&ctx->arena, RT_V_REF, 1);\n    if (!%s) %s\n    %s->f[0] = %s;\n", v, v,
                     oom(c), v, b);
        return boxed(c, v, e->type);
    }
    cval *r = ry_c_value(c, en, e->kind == RY_EXPR_REF_READ ? e->ref_read.ref : e->ref_write.ref);
    if (!r) return NULL;
    if (e->kind == RY_EXPR_REF_READ) return ry_c_unbox(c, ry_c_fmt(c, "%s->f[0]", r->c), e->type, false);
    cval *x = ry_c_value(c, en, e->ref_write.value);
    const char *b = x ? ry_c_box(c, x, e->span) : NULL;
    if (!b) return NULL;
    ry_sb_printf(&c->body, "    %s->f[0] = %s;\n", r->c, b);
    return ry_c_tuple_val(c, 0); /* () */
}

/* ---- match ---- */

/* The C condition that pattern p matches the rt_val expression x. */
static const char *pat_cond(cemit *c, const ry_pattern *p, const char *x) {
    if (p->kind == RY_PAT_WILDCARD || p->kind == RY_PAT_VAR) return "1";
    strbuf b = {0};
    int n = p->kind == RY_PAT_CTOR ? p->ctor.n : p->tuple.n;
    ry_pattern **sub = p->kind == RY_PAT_CTOR ? p->ctor.args : p->tuple.fields;
    if (p->kind == RY_PAT_CTOR) ry_sb_printf(&b, "%s->tag == %d", x, p->ctor.ctor->tag);
    else ry_sb_puts(&b, "1");
    for (int i = 0; i < n; i++) {
        const char *s = pat_cond(c, sub[i], ry_c_fmt(c, "%s->f[%d]", x, i));
        if (strcmp(s, "1") != 0) ry_sb_printf(&b, " && (%s)", s);
    }
    const char *r = ry_arena_strdup(c->a, b.data ? b.data : "1");
    ry_free(b.data);
    return r;
}

/* Binds p's variables to the parts of x (unboxed). */
static ry_status pat_bind(cemit *c, ry_c_env *en, const ry_pattern *p, const char *x) {
    if (p->kind == RY_PAT_WILDCARD) return RY_OK;
    if (p->kind == RY_PAT_VAR) {
        cval *v = ry_c_unbox(c, x, p->var->type, false);
        if (!v) return RY_ERR;
        ry_ptrmap_put(c->a, &en->vars, p->var, (intptr_t)v);
        return RY_OK;
    }
    int n = p->kind == RY_PAT_CTOR ? p->ctor.n : p->tuple.n;
    ry_pattern **sub = p->kind == RY_PAT_CTOR ? p->ctor.args : p->tuple.fields;
    for (int i = 0; i < n; i++)
        if (pat_bind(c, en, sub[i], ry_c_fmt(c, "%s->f[%d]", x, i))) return RY_ERR;
    return RY_OK;
}

/* match (d) { p => e, ... }: the clauses in order as C's if/else if over
 * the value's tags, each one's bindings and body inside its block, the
 * results through the join's pointers; no clause matching is a located
 * error of the call. */
cval *ry_c_match(cemit *c, ry_c_env *en, const ry_expr *e) {
    cval *d = ry_c_value(c, en, e->match.data);
    const char *x = d ? ry_c_box(c, d, e->span) : NULL;
    if (!x) return NULL;
    cval *join = ry_c_join(c, e->type, e->span);
    if (!join) return NULL;
    c->nested++;
    for (int i = 0; i < e->match.nclauses && !c->failed; i++) {
        const ry_clause *k = &e->match.clauses[i];
        ry_sb_printf(&c->body, "    %sif (%s) {\n", i ? "} else " : "", pat_cond(c, k->pat, x));
        if (pat_bind(c, en, k->pat, x)) break;
        cval *v = ry_c_value(c, en, k->body);
        if (v) ry_c_assign(c, join, v);
    }
    ry_sb_printf(&c->body, "    %s{\n        %s\n    }\n", e->match.nclauses ? "} else " : "",
                 ry_c_fail_stmt(c, "RT_E_MATCH", ry_c_fmt(c, "%s: match: no clause matches the value", ry_c_where(c, e->span))));
    c->nested--;
    ry_c_join_settle(c, join);
    return c->failed ? NULL : join;
}
