/*
 * emit_fn.c: the entry's optimized A-normal form as C statements. A let
 * chain of operator calls, tuples and projections becomes straight-line
 * code; every operator call goes to its emitter (emit_ops.c), tuples and
 * projections are resolved at export time, an if becomes C's if (both
 * branches' buffers in the scratch block, the taken one's results through
 * pointers declared before it). Match, calls of other globals, closures,
 * ADTs and refs are emit_ctl.c's (c->dyn: buffers then come from the
 * context's arena, and dims known only at run time are C locals). Scratch
 * buffers are declared here: their sizes are C expressions of the
 * symbolic dims (NAME.c's scratch_layout).
 */
#include <stdarg.h>
#include <string.h>

#include "backend/c/emit.h"
#include "ir/parse.h" /* ry_expr_child */

ry_status ry_c_fail(cemit *c, ry_span span, const char *fmt, ...) {
    if (c->failed) return RY_ERR;
    char msg[RY_ERROR_MSG_MAX - 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = true;
    return ry_error_at(c->err, span, "export: %s", msg);
}

const char *ry_c_fmt(cemit *c, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ry_arena_strdup(c->a, buf);
}

const char *ry_c_ctype(ry_dtype d) {
    switch (d) {
    case RY_FLOAT32: return "float";
    case RY_FLOAT64: return "double";
    case RY_INT32: return "int32_t";
    case RY_INT64: return "int64_t";
    case RY_BOOL: return "uint8_t";
    case RY_INT8: return "int8_t";
    case RY_UINT8: return "uint8_t";
    case RY_INT16: return "int16_t";
    case RY_UINT16: return "uint16_t";
    case RY_FLOAT16: return "uint16_t"; /* its bits: rt/half_widen.c and half_narrow.c convert */
    default: return NULL;
    }
}

const char *ry_c_wrap(cemit *c, ry_dtype d, const char *x) {
    const char *u = d == RY_INT8 ? "uint8_t" : d == RY_INT16 ? "uint16_t" : d == RY_INT32 ? "uint32_t" : d == RY_INT64 ? "uint64_t" : NULL;
    return u ? ry_c_fmt(c, "(%s)(%s)(%s)", ry_c_ctype(d), u, x) : ry_c_fmt(c, "(%s)(%s)", ry_c_ctype(d), x);
}

void ry_c_int_limits(ry_dtype d, const char **lo, const char **hi) {
    switch (d) {
    case RY_INT8: *lo = "INT8_MIN", *hi = "INT8_MAX"; break;
    case RY_UINT8: *lo = "0", *hi = "UINT8_MAX"; break;
    case RY_INT16: *lo = "INT16_MIN", *hi = "INT16_MAX"; break;
    case RY_UINT16: *lo = "0", *hi = "UINT16_MAX"; break;
    case RY_INT32: *lo = "INT32_MIN", *hi = "INT32_MAX"; break;
    default: *lo = "INT64_MIN", *hi = "INT64_MAX"; break;
    }
}

const char *ry_c_cast(cemit *c, ry_dtype from, ry_dtype to, const char *x) {
    if (from == to) return x;
    if (from == RY_FLOAT16) c->rt |= RT_HALF_WIDEN;
    if (to == RY_FLOAT16 && from != RY_FLOAT16) c->rt |= RT_HALF_NARROW;
    if (from == RY_FLOAT16) x = ry_c_fmt(c, "rt_f16_to_f32(%s)", x), from = RY_FLOAT32;
    if (from == to) return x;
    if (to == RY_BOOL) return ry_c_fmt(c, "(uint8_t)(%s != 0)", x);
    if (from == RY_BOOL) x = ry_c_fmt(c, "(%s != 0)", x);
    if (to == RY_FLOAT16) return ry_c_fmt(c, "rt_f32_to_f16((float)(%s))", x);
    bool ffrom = from == RY_FLOAT32 || from == RY_FLOAT64;
    if (ffrom && ry_c_is_int(to)) { /* through double: truncated, saturated, NaN to 0 */
        const char *lo, *hi, *T = ry_c_ctype(to);
        ry_c_int_limits(to, &lo, &hi);
        return ry_c_fmt(c, "((double)%s != (double)%s ? (%s)0 : (double)%s <= (double)%s ? (%s)%s : (double)%s >= (double)%s ? (%s)%s : (%s)%s)",
                        x, x, T, x, lo, T, lo, x, hi, T, hi, T, x);
    }
    if (ry_c_is_int(to) && from != RY_BOOL) return ry_c_wrap(c, to, x);
    return ry_c_fmt(c, "(%s)%s", ry_c_ctype(to), x);
}

bool ry_c_is_int(ry_dtype d) {
    return d == RY_INT8 || d == RY_UINT8 || d == RY_INT16 || d == RY_UINT16 || d == RY_INT32 || d == RY_INT64;
}

const char *ry_c_dim(cemit *c, const ry_dim *d) {
    if (d->kind == RY_DIM_SYM) return d->name;
    return ry_c_fmt(c, "%lld", (long long)d->value);
}

const char *ry_c_count(cemit *c, int ndim, const ry_dim *dims) {
    char buf[1024] = "(int64_t)1";
    size_t n = strlen(buf);
    for (int i = 0; i < ndim; i++) n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, " * %s", ry_c_dim(c, &dims[i]));
    return ry_arena_strdup(c->a, buf);
}

/* A tensor type the export can hold: constant or symbolic dims, a dtype
 * with a C type. */
static ry_status check_tensor_type(cemit *c, const ry_type *t, ry_span span) {
    char buf[256];
    if (!t || t->kind != RY_TYPE_TENSOR)
        return ry_c_fail(c, span, "a value of type %s (only tensors and tuples of them are exported so far)",
                         t ? ry_type_str(t, buf, sizeof buf) : "unknown");
    if (!ry_c_ctype(t->tensor.dtype))
        return ry_c_fail(c, span, "dtype %s has no C type in the export", ry_dtype_name(t->tensor.dtype));
    for (int i = 0; i < t->tensor.ndim; i++) {
        const ry_dim *d = &t->tensor.dims[i];
        if (d->kind == RY_DIM_ANY)
            return ry_c_fail(c, span, "%s has a dimension known only at run time (?): not exported yet",
                             ry_type_str(t, buf, sizeof buf));
        bool known = d->kind != RY_DIM_SYM || c->dyn; /* dyn: a sym is the C expression of a local */
        for (int k = 0; !known && k < c->nsyms; k++) known = strcmp(c->syms[k], d->name) == 0;
        if (!known)
            return ry_c_fail(c, span, "%s has the dimension %s, which no input or weight fixes",
                             ry_type_str(t, buf, sizeof buf), d->name);
    }
    return RY_OK;
}

cval *ry_c_tensor_val(cemit *c, const char *expr, const ry_type *t) {
    cval *v = RY_NEW(c->a, cval);
    v->c = expr;
    v->dtype = t->tensor.dtype;
    v->ndim = t->tensor.ndim;
    memcpy(v->dims, t->tensor.dims, sizeof *v->dims * (size_t)v->ndim);
    v->weight = -1;
    return v;
}

const char *ry_c_tmp(cemit *c, const char *prefix) { return ry_c_fmt(c, "%s%d", prefix, c->ntmp++); }

const char *ry_c_where(cemit *c, ry_span span) {
    if (!span.src) return "(made by a pass)";
    return ry_c_fmt(c, "%s:%d:%d", span.src->name, span.line, span.col);
}

const char *ry_c_scratch(cemit *c, const char *ct, const char *count) {
    if (c->dyn) { /* from the arena, where the code needs it: its size may be known only here */
        const char *b = ry_c_fmt(c, "b%d", c->nbuf++);
        ry_sb_printf(&c->body, "    %s *%s = (%s *)rt_alloc(&ctx->arena, sizeof(%s) * (size_t)(%s));\n"
                               "    if (!%s) %s\n", ct, b, ct, ct, count, b, ry_c_fail_stmt(c, "RT_E_MEMORY", "out of memory"));
        return b;
    }
    int k = c->nbuf++;
    ry_sb_printf(&c->sizes, "    o[%d] = need;\n    need += RT_ALIGN(sizeof(%s) * (size_t)(%s));\n", k, ct, count);
    ry_sb_printf(&c->ptrs, "    %s *b%d = (%s *)(sp + o[%d]);\n", ct, k, ct, k);
    return ry_c_fmt(c, "b%d", k);
}

cval *ry_c_buffer(cemit *c, const ry_type *t, ry_span span) {
    if (check_tensor_type(c, t, span)) return NULL;
    cval *v = ry_c_tensor_val(c, NULL, t);
    v->c = ry_c_scratch(c, ry_c_ctype(t->tensor.dtype), ry_c_count(c, v->ndim, v->dims));
    v->scratch = true;
    return v;
}

cval *ry_c_view(cemit *c, const cval *v, const ry_type *t) {
    if (check_tensor_type(c, t, RY_NO_SPAN)) return NULL;
    cval *r = ry_c_tensor_val(c, v->c, t);
    r->weight = v->weight;
    r->scratch = v->scratch;
    return r;
}

/* ---- what the operators' emitters share ---- */

const ry_op *ry_c_op(const ry_expr *call) { return call->call.callee->op.op; }

ry_status ry_c_need_float(cemit *c, const ry_expr *call, const cval *const *vs, int n) {
    for (int k = 0; k < n; k++) {
        const cval *v = vs[k];
        if (!v->tuple && (v->dtype == RY_FLOAT32 || v->dtype == RY_FLOAT64) && v->dtype == vs[0]->dtype) continue;
        return ry_c_fail(c, call->span, "%s: the export's kernel takes float32 or float64 tensors of one dtype, not %s",
                         ry_c_op(call)->name, v->tuple ? "a tuple" : ry_dtype_name(v->dtype));
    }
    return RY_OK;
}

int ry_c_attr_axis(const ry_expr *call, const cval *x, const char *attr) {
    int64_t a = ry_attr_int(ry_c_op(call), &call->call.attrs, attr);
    return (int)(a < 0 ? a + x->ndim : a);
}

ry_status ry_c_layout_is(cemit *c, const ry_expr *call, const char *attr, const char *want) {
    const char *got = ry_attr_str(ry_c_op(call), &call->call.attrs, attr);
    if (!got || !*got || strcmp(got, want) == 0) return RY_OK;
    return ry_c_fail(c, call->span, "%s: %s=\"%s\" (the export takes %s)", ry_c_op(call)->name, attr, got, want);
}

ry_c_emit_fn ry_c_emitter_find(const ry_c_emitter *table, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].fn;
    return NULL;
}

const char *ry_c_kernel(cemit *c, uint32_t bits, ry_dtype d) {
    if (d == RY_FLOAT64) {
        c->rt64 |= bits;
        return "_f64";
    }
    c->rt |= bits;
    return "";
}

cval *ry_c_tuple_val(cemit *c, int n) {
    cval *v = RY_NEW(c->a, cval);
    v->tuple = true;
    v->n = n;
    v->weight = -1;
    v->fields = RY_NEW_ARRAY(c->a, cval *, n + 1);
    return v;
}

/* v of type t: a tuple of the values leaf gives for its tensors. */
static cval *per_tensor(cemit *c, const ry_type *t, ry_span span, cval *(*leaf)(cemit *, const ry_type *, ry_span)) {
    if (!t || t->kind != RY_TYPE_TUPLE) return leaf(c, t, span);
    cval *v = ry_c_tuple_val(c, t->tuple.n);
    for (int i = 0; i < v->n; i++)
        if (!(v->fields[i] = per_tensor(c, t->tuple.fields[i], span, leaf))) return NULL;
    return v;
}

cval *ry_c_result(cemit *c, const ry_type *t, ry_span span) { return per_tensor(c, t, span, ry_c_buffer); }

const char *ry_c_dims_count(cemit *c, const cval *v, int from, int to) {
    return ry_c_count(c, to - from, v->dims + from);
}

/* A constant tensor as a static array at file scope (floats in hex, so
 * the bits are the module's). */
static cval *constant(cemit *c, const ry_expr *e) {
    const ry_tensor *t = e->constant.value;
    if (check_tensor_type(c, e->type, e->span)) return NULL;
    const char *ct = ry_c_ctype(t->dtype);
    int k = c->nconst++;
    ry_sb_printf(&c->file, "static const %s k%d[%lld] = {", ct, k, (long long)(t->size ? t->size : 1));
    for (int64_t i = 0; i < t->size; i++) {
        double x = ry_tensor_get(t, i);
        if (i % 8 == 0) ry_sb_puts(&c->file, "\n    ");
        if (t->dtype == RY_FLOAT32 || t->dtype == RY_FLOAT64) {
            if (x != x) ry_sb_puts(&c->file, "NAN, ");
            else if (x > 1e308 || x < -1e308) ry_sb_puts(&c->file, x > 0 ? "INFINITY, " : "-INFINITY, ");
            else ry_sb_printf(&c->file, "%a%s, ", x, t->dtype == RY_FLOAT32 ? "f" : "");
        } else if (t->dtype == RY_FLOAT16) { /* its bits */
            ry_sb_printf(&c->file, "0x%04x, ", (unsigned)((const uint16_t *)t->data)[i]);
        } else if (t->dtype == RY_INT64) { /* exact past 2^53, and INT64_MIN has no literal */
            int64_t v = ((const int64_t *)t->data)[i];
            if (v == INT64_MIN) ry_sb_puts(&c->file, "INT64_MIN, ");
            else ry_sb_printf(&c->file, "INT64_C(%lld), ", (long long)v);
        } else {
            ry_sb_printf(&c->file, "%lld, ", (long long)x);
        }
    }
    if (!t->size) ry_sb_puts(&c->file, "0");
    ry_sb_puts(&c->file, "\n};\n");
    return ry_c_tensor_val(c, ry_c_fmt(c, "k%d", k), e->type);
}

/* ---- liveness over the entry's let chain ---- */

/* last[var] := i for every variable e reads (ANF: its atoms). */
static void reads(cemit *c, const ry_expr *e, int i) {
    if (e->kind == RY_EXPR_VAR) {
        ry_ptrmap_put(c->a, &c->last, e->var.var, i);
        return;
    }
    if (e->kind == RY_EXPR_FUNC) return;
    int slot;
    const ry_expr *k;
    for (int j = 0; (k = ry_expr_child(e, j, &slot)); j++) reads(c, k, i);
}

void ry_c_liveness(cemit *c, const ry_expr *body) {
    int i = 0;
    for (; body->kind == RY_EXPR_LET; body = body->let.body, i++) reads(c, body->let.value, i);
    reads(c, body, i);
}

/* The buffers under v are read until let `last` (at least). */
static void note_owner(cemit *c, const cval *v, int last) {
    if (v->tuple) {
        for (int i = 0; i < v->n; i++) note_owner(c, v->fields[i], last);
        return;
    }
    intptr_t got = -1;
    if (v->c && (!ry_ptrmap_get(&c->owner, v->c, &got) || got < last)) ry_ptrmap_put(c->a, &c->owner, v->c, last);
}

bool ry_c_dies_here(cemit *c, const cval *v) {
    intptr_t last = -1;
    if (v->tuple || !v->c || !v->scratch || c->nested > 0) return false;
    return !ry_ptrmap_get(&c->owner, v->c, &last) || last <= c->cur;
}

typedef ry_c_env env;

static cval *lookup(cemit *c, env *en, const ry_expr *e) {
    intptr_t got;
    if (ry_ptrmap_get(&en->vars, e->var.var, &got)) return (cval *)got;
    ry_c_fail(c, e->span, "%%%s is not bound here (free variables are not exported)", e->var.var->name);
    return NULL;
}

static const char *kind_name(ry_expr_kind k) {
    switch (k) {
    case RY_EXPR_IF: return "if";
    case RY_EXPR_MATCH: return "match";
    case RY_EXPR_FUNC: return "a function expression (closure)";
    case RY_EXPR_GLOBAL: return "a global used as a value";
    case RY_EXPR_CTOR: return "a constructor (ADT value)";
    case RY_EXPR_REF: return "ref";
    case RY_EXPR_REF_READ: return "ref_read";
    case RY_EXPR_REF_WRITE: return "ref_write";
    default: return "this expression";
    }
}

static cval *call(cemit *c, env *en, const ry_expr *e) {
    const ry_expr *f = e->call.callee;
    if (c->dyn && f->kind != RY_EXPR_OP) return ry_c_call_value(c, en, e);
    if (f->kind == RY_EXPR_GLOBAL) {
        ry_c_fail(c, e->span, "a call of @%s (calls of globals the optimizer did not inline are not exported yet)",
                  f->global.name);
        return NULL;
    }
    if (f->kind != RY_EXPR_OP) {
        ry_c_fail(c, e->span, "a call of %s (only operator calls are exported so far)", kind_name(f->kind));
        return NULL;
    }
    cval **args = RY_NEW_ARRAY(c->a, cval *, e->call.nargs + 1);
    for (int i = 0; i < e->call.nargs; i++)
        if (!(args[i] = ry_c_value(c, en, e->call.args[i]))) return NULL;
    cval *out = NULL;
    if (c->dyn) { /* the call with its type on the dims the code knows */
        ry_expr *k = RY_NEW(c->a, ry_expr);
        *k = *e;
        if (!(k->type = ry_c_call_type(c, e, args))) return NULL;
        e = k;
    }
    if (ry_c_emit_op(c, e, args, &out) != RY_OK) return NULL;
    return out;
}

/* The values an if's branches both give: a C pointer r<k> per tensor of
 * type t, declared before the if and set in each branch. */
static cval *join_leaf(cemit *c, const ry_type *t, ry_span span) {
    if (c->dyn && t && t->kind != RY_TYPE_TENSOR) { /* an rt_val */
        cval *v = RY_NEW(c->a, cval);
        v->boxed = true;
        v->type = t;
        v->weight = -1;
        v->c = ry_c_fmt(c, "r%d", c->njoin++);
        ry_sb_printf(&c->body, "    rt_val *%s = NULL;\n", v->c);
        return v;
    }
    if (c->dyn && t) { /* every dim a run-time local set by the branch taken (the checker may
                        * give a branch's 1 where the other's is ?); ry_c_join_settle keeps
                        * the constants all branches agree on */
        ry_type *u = ry_type_tensor_arena(c->a, t->tensor.dtype, t->tensor.ndim, t->tensor.dims);
        for (int i = 0; i < u->tensor.ndim; i++) {
            const char *d = ry_c_tmp(c, "_d");
            ry_sb_printf(&c->body, "    int64_t %s = 0;\n    (void)%s;\n", d, d);
            u->tensor.dims[i] = (ry_dim){.kind = RY_DIM_SYM, .name = d};
        }
        t = u;
    }
    if (check_tensor_type(c, t, span)) return NULL;
    cval *v = ry_c_tensor_val(c, ry_c_fmt(c, "r%d", c->njoin++), t);
    ry_sb_printf(&c->body, "    const %s *%s = NULL;\n", ry_c_ctype(v->dtype), v->c);
    return v;
}

cval *ry_c_join(cemit *c, const ry_type *t, ry_span span) { return per_tensor(c, t, span, join_leaf); }

void ry_c_join_settle(cemit *c, cval *join) {
    if (join->tuple) {
        for (int i = 0; i < join->n; i++) ry_c_join_settle(c, join->fields[i]);
        return;
    }
    for (int i = 0; join->seen && i < join->ndim; i++)
        if (join->seen[i].kind == RY_DIM_CONST) join->dims[i] = join->seen[i];
}

void ry_c_assign(cemit *c, cval *join, const cval *v) {
    if (join->tuple) {
        for (int i = 0; i < join->n && v->tuple && i < v->n; i++) ry_c_assign(c, join->fields[i], v->fields[i]);
        return;
    }
    if (join->boxed) {
        const char *b = ry_c_box(c, v, RY_NO_SPAN);
        if (b) ry_sb_printf(&c->body, "    %s = %s;\n", join->c, b);
        return;
    }
    ry_sb_printf(&c->body, "    %s = %s;\n", join->c, v->c);
    if (!c->dyn) return;
    bool first = !join->seen;
    if (first) join->seen = RY_NEW_ARRAY(c->a, ry_dim, join->ndim + 1);
    for (int i = 0; i < join->ndim && i < v->ndim; i++) {
        if (join->dims[i].kind == RY_DIM_SYM) ry_sb_printf(&c->body, "    %s = %s;\n", join->dims[i].name, ry_c_dim(c, &v->dims[i]));
        const ry_dim *d = &v->dims[i];
        bool same = d->kind == RY_DIM_CONST && join->seen[i].kind == RY_DIM_CONST && join->seen[i].value == d->value;
        join->seen[i] = first && d->kind == RY_DIM_CONST ? *d : same ? join->seen[i] : (ry_dim){.kind = RY_DIM_ANY};
    }
}
#define assign ry_c_assign

/* if (c) { t } else { f }: C's if over a bool scalar; each branch's code
 * runs only when taken, its results set the join's pointers. */
static cval *if_(cemit *c, env *en, const ry_expr *e) {
    cval *cond = ry_c_value(c, en, e->if_.cond);
    if (!cond) return NULL;
    if (cond->tuple || cond->ndim != 0 || cond->dtype != RY_BOOL) {
        ry_c_fail(c, e->if_.cond->span, "an if whose condition is not a bool scalar");
        return NULL;
    }
    cval *join = ry_c_join(c, e->type, e->span);
    if (!join) return NULL;
    c->nested++;
    ry_sb_printf(&c->body, "    if (%s[0]) {\n", cond->c);
    cval *t = ry_c_value(c, en, e->if_.then_);
    if (t) assign(c, join, t);
    ry_sb_puts(&c->body, "    } else {\n");
    cval *f = t ? ry_c_value(c, en, e->if_.else_) : NULL;
    if (f) assign(c, join, f);
    ry_sb_puts(&c->body, "    }\n");
    c->nested--;
    ry_c_join_settle(c, join);
    return t && f ? join : NULL;
}

cval *ry_c_value(cemit *c, env *en, const ry_expr *e) {
    if (c->dyn) switch (e->kind) {
        case RY_EXPR_MATCH: return ry_c_match(c, en, e);
        case RY_EXPR_FUNC: return ry_c_closure(c, en, e, NULL);
        case RY_EXPR_GLOBAL: return ry_c_global_value(c, e);
        case RY_EXPR_CTOR: return ry_c_ctor_value(c, en, e, 0, NULL, e->span);
        case RY_EXPR_REF:
        case RY_EXPR_REF_READ:
        case RY_EXPR_REF_WRITE: return ry_c_ref(c, en, e);
        default: break;
        }
    switch (e->kind) {
    case RY_EXPR_IF: return if_(c, en, e);
    case RY_EXPR_VAR: return lookup(c, en, e);
    case RY_EXPR_CONST: return constant(c, e);
    case RY_EXPR_CALL: return call(c, en, e);
    case RY_EXPR_TUPLE: {
        cval *t = ry_c_tuple_val(c, e->tuple.n);
        for (int i = 0; i < t->n; i++)
            if (!(t->fields[i] = ry_c_value(c, en, e->tuple.fields[i]))) return NULL;
        return t;
    }
    case RY_EXPR_PROJ: {
        cval *t = ry_c_value(c, en, e->proj.tuple);
        if (t && (!t->tuple || e->proj.index >= t->n)) {
            ry_c_fail(c, e->span, "projection .%d of a value that is not such a tuple", e->proj.index);
            return NULL;
        }
        return t ? t->fields[e->proj.index] : NULL;
    }
    case RY_EXPR_LET: {
        int base = c->cur;
        for (; e->kind == RY_EXPR_LET; e = e->let.body, c->cur++) {
            /* a function bound by let may call itself: the closure is its own capture */
            const ry_expr *x = e->let.value;
            cval *v = c->dyn && x->kind == RY_EXPR_FUNC ? ry_c_closure(c, en, x, e->let.var) : ry_c_value(c, en, x);
            if (!v) return NULL;
            ry_ptrmap_put(c->a, &en->vars, e->let.var, (intptr_t)v);
            intptr_t last = -1;
            ry_ptrmap_get(&c->last, e->let.var, &last);
            note_owner(c, v, (int)last);
        }
        cval *r = ry_c_value(c, en, e);
        c->cur = base;
        return r;
    }
    default:
        ry_c_fail(c, e->span, "%s is not exported yet (the export handles let chains of operator calls)",
                  kind_name(e->kind));
        return NULL;
    }
}

ry_status ry_c_emit_body(cemit *c, const ry_expr *fn, cval *const *params, cval **out) {
    env en;
    memset(&en, 0, sizeof en);
    for (int i = 0; i < fn->func.nparams; i++) ry_ptrmap_put(c->a, &en.vars, fn->func.params[i], (intptr_t)params[i]);
    ry_c_liveness(c, fn->func.body);
    c->cur = 0;
    *out = ry_c_value(c, &en, fn->func.body);
    return *out && !c->failed ? RY_OK : RY_ERR;
}
