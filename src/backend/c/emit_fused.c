/*
 * emit_fused.c: a fused program (src/op/fused_prog.h) as one C loop nest,
 * the C target's "compile a fused program". Each instruction becomes one
 * statement on scalars in the loop body, so intermediates live in
 * registers and the compiler vectorizes the innermost loop; inputs that
 * broadcast are read with stride 0 along their broadcast dims. The
 * expressions are the CPU target's (src/backend/cpu/fused_loops.h), NaN
 * handling included, so results are the same bits except exp, log, tanh
 * and sigmoid, which are libm's here and vmath.c's vector forms there
 * (within 2 ulp).
 */
#include <math.h>
#include <string.h>

#include "backend/c/emit.h"
#include "op/fused_prog.h"

static ry_dtype val_dt(const ry_fz_prog *p, int v) {
    if (v < p->nin) return p->in_dt[v];
    if (v < p->nin + p->nconst) return p->cdt[v - p->nin];
    return p->ins[v - p->nin - p->nconst].odt;
}

/* The C name of value v: an input a<k>, a literal, or an instruction's t<i>. */
static const char *val(cemit *c, const ry_fz_prog *p, int v) {
    if (v < p->nin) return ry_c_fmt(c, "a%d", v);
    if (v >= p->nin + p->nconst) return ry_c_fmt(c, "t%d", v - p->nin - p->nconst);
    double x = p->cval[v - p->nin];
    ry_dtype dt = p->cdt[v - p->nin];
    if (dt == RY_BOOL) return x != 0 ? "(uint8_t)1" : "(uint8_t)0";
    const char *cast = dt == RY_FLOAT32 ? "(float)" : "(double)";
    if (x != x) return ry_c_fmt(c, "%sNAN", cast);
    if (isinf(x)) return ry_c_fmt(c, "%s%sINFINITY", cast, x < 0 ? "-" : "");
    return ry_c_fmt(c, "%s%a", cast, x);
}

static bool same_dim(const ry_dim *a, const ry_dim *b) {
    if (a->kind != b->kind) return false;
    return a->kind == RY_DIM_CONST ? a->value == b->value : strcmp(a->name, b->name) == 0;
}

static bool is_one(const ry_dim *d) { return d->kind == RY_DIM_CONST && d->value == 1; }

/* The flat index of input x at the output's loop indices i0.. (x's dims
 * right-aligned against the output's, broadcast ones read with stride 0).
 * A dim of x that only run time knows and that is not the output's own
 * may be a 1 that broadcasts (emit_dims.c checked it is 1 or the
 * output's): its index is 0 when it is. */
static const char *index_of(cemit *c, const cval *x, const cval *o) {
    char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    int off = o->ndim - x->ndim;
    for (int j = 0; j < o->ndim; j++) {
        int jj = j - off;
        const ry_dim *d = jj < 0 ? NULL : &x->dims[jj];
        if (!d || is_one(d)) continue;
        if (d->kind == RY_DIM_SYM && !same_dim(d, &o->dims[j]))
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s(%s == 1 ? 0 : i%d)", n ? " + " : "", d->name, j);
        else
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%si%d", n ? " + " : "", j);
        for (int k = jj + 1; k < x->ndim; k++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, " * %s", ry_c_dim(c, &x->dims[k]));
        if (n >= sizeof buf) n = sizeof buf - 1;
    }
    return n ? ry_arena_strdup(c->a, buf) : "0";
}

static bool single(const cval *x) {
    bool one = true;
    for (int i = 0; i < x->ndim; i++) one &= is_one(&x->dims[i]);
    return one;
}

/* Whether x has the output's dims or is a single element: one flat loop. */
static bool flat_ok(const cval *x, const cval *o) {
    if (single(x)) return true;
    if (x->ndim != o->ndim) return false;
    for (int i = 0; i < x->ndim; i++)
        if (!same_dim(&x->dims[i], &o->dims[i])) return false;
    return true;
}

/* Loops i0.. over o's dims and, inside them, i: o's flat index. */
static void open_nest(cemit *c, const cval *o) {
    strbuf *b = &c->body;
    for (int j = 0; j < o->ndim; j++)
        ry_sb_printf(b, "        for (int64_t i%d = 0; i%d < %s; i%d++)\n", j, j, ry_c_dim(c, &o->dims[j]), j);
    ry_sb_puts(b, "        {\n            const int64_t i = ");
    for (int j = 0; j < o->ndim; j++) {
        ry_sb_printf(b, "%si%d", j ? " + " : "", j);
        for (int k = j + 1; k < o->ndim; k++) ry_sb_printf(b, " * %s", ry_c_dim(c, &o->dims[k]));
    }
    ry_sb_puts(b, o->ndim ? ";\n" : "0;\n");
}

/* The C expression of instruction in, operands x, y, z. */
static const char *expr(cemit *c, const ry_fz_ins *in, const char *x, const char *y, const char *z) {
    bool f = in->dt == RY_FLOAT32;
    const char *sf = f ? "f" : "", *T = ry_c_ctype(in->dt), *TO = ry_c_ctype(in->odt);
    if (ry_c_is_int(in->dt)) { /* emit_ops.c's integer programs: arithmetic wraps, in unsigned */
        const char *U = in->dt == RY_INT64 ? "uint64_t" : "uint32_t";
        if (in->op == RY_FZ_ADD) return ry_c_wrap(c, in->dt, ry_c_fmt(c, "(%s)%s + (%s)%s", U, x, U, y));
        if (in->op == RY_FZ_SUB) return ry_c_wrap(c, in->dt, ry_c_fmt(c, "(%s)%s - (%s)%s", U, x, U, y));
        if (in->op == RY_FZ_MUL) return ry_c_wrap(c, in->dt, ry_c_fmt(c, "(%s)%s * (%s)%s", U, x, U, y));
        if (in->op == RY_FZ_NEG) return ry_c_wrap(c, in->dt, ry_c_fmt(c, "0u - (%s)%s", U, x));
    }
    switch (in->op) {
    case RY_FZ_ADD: return ry_c_fmt(c, "%s + %s", x, y);
    case RY_FZ_SUB: return ry_c_fmt(c, "%s - %s", x, y);
    case RY_FZ_MUL: return ry_c_fmt(c, "%s * %s", x, y);
    case RY_FZ_DIV: return ry_c_fmt(c, "%s / %s", x, y);
    case RY_FZ_POW: return ry_c_fmt(c, "pow%s(%s, %s)", sf, x, y);
    case RY_FZ_MAX: return ry_c_fmt(c, "%s != %s ? %s : (%s > %s ? %s : %s)", x, x, x, x, y, x, y);
    case RY_FZ_MIN: return ry_c_fmt(c, "%s != %s ? %s : (%s < %s ? %s : %s)", x, x, x, x, y, x, y);
    case RY_FZ_EQ: return ry_c_fmt(c, "(uint8_t)(%s == %s)", x, y);
    case RY_FZ_NE: return ry_c_fmt(c, "(uint8_t)(%s != %s)", x, y);
    case RY_FZ_LT: return ry_c_fmt(c, "(uint8_t)(%s < %s)", x, y);
    case RY_FZ_LE: return ry_c_fmt(c, "(uint8_t)(%s <= %s)", x, y);
    case RY_FZ_GT: return ry_c_fmt(c, "(uint8_t)(%s > %s)", x, y);
    case RY_FZ_GE: return ry_c_fmt(c, "(uint8_t)(%s >= %s)", x, y);
    case RY_FZ_AND: return ry_c_fmt(c, "(uint8_t)((%s != 0) & (%s != 0))", x, y);
    case RY_FZ_OR: return ry_c_fmt(c, "(uint8_t)((%s != 0) | (%s != 0))", x, y);
    case RY_FZ_NOT: return ry_c_fmt(c, "(uint8_t)(%s == 0)", x);
    case RY_FZ_NEG: return ry_c_fmt(c, "-%s", x);
    case RY_FZ_EXP: return ry_c_fmt(c, "exp%s(%s)", sf, x);
    case RY_FZ_LOG: return ry_c_fmt(c, "log%s(%s)", sf, x);
    case RY_FZ_SQRT: return ry_c_fmt(c, "sqrt%s(%s)", sf, x);
    case RY_FZ_RSQRT: return ry_c_fmt(c, "1 / sqrt%s(%s)", sf, x);
    case RY_FZ_TANH: return ry_c_fmt(c, "tanh%s(%s)", sf, x);
    case RY_FZ_SIGMOID: /* vmath.h's form: exp of -|x| never overflows */
        return ry_c_fmt(c, "%s != %s ? %s : (%s >= 0 ? (%s)1 : exp%s(-fabs%s(%s))) / ((%s)1 + exp%s(-fabs%s(%s)))",
                        x, x, x, x, T, sf, sf, x, T, sf, sf, x);
    case RY_FZ_ABS: return ry_c_fmt(c, "fabs%s(%s)", sf, x);
    case RY_FZ_RELU: return ry_c_fmt(c, "%s > 0 ? %s : (%s != %s ? %s : 0)", x, x, x, x, x);
    case RY_FZ_LEAKY: return ry_c_fmt(c, "%s > 0 ? %s : %s * (%s)%a", x, x, x, T, in->p[0]);
    case RY_FZ_CLIP: {
        const char *lo = ry_c_fmt(c, "(%s)%a", T, in->p[0]), *hi = ry_c_fmt(c, "(%s)%a", T, in->p[1]);
        const char *m = ry_c_fmt(c, "(%s < %s ? %s : %s)", x, hi, x, hi);
        return ry_c_fmt(c, "%s != %s ? %s : (%s > %s ? %s : %s)", x, x, x, m, lo, m, lo);
    }
    case RY_FZ_CAST: return ry_c_cast(c, in->dt, in->odt, x);
    case RY_FZ_COPY: return x;
    case RY_FZ_ZEROS: return ry_c_fmt(c, "(%s)0", TO);
    case RY_FZ_ONES: return ry_c_fmt(c, "(%s)1", TO);
    case RY_FZ_WHERE: return ry_c_fmt(c, "%s ? %s : %s", x, y, z);
    default: return NULL;
    }
}

ry_status ry_c_emit_fused(cemit *c, const ry_fz_prog *p, cval *const *ins, int nin, cval *const *outs,
                          ry_span span) {
    bool move = p->nins == 1 && p->ins[0].op == RY_FZ_COPY; /* broadcast_to_like: float16's bits moved as they are */
    bool half = p->out_dt == RY_FLOAT16; /* a fused program's operands are loaded as they are */
    for (int k = 0; k < p->nin; k++) half |= p->in_dt[k] == RY_FLOAT16;
    if (half && !move) return ry_c_fail(c, span, "a fused program over float16 has no C kernel in the export yet");
    const cval *o = outs[0];
    bool flat = true;
    for (int k = 0; k < nin; k++) flat &= flat_ok(ins[k], o);
    strbuf *b = &c->body;
    ry_sb_puts(b, "    {\n");
    if (flat) {
        ry_sb_printf(b, "        const int64_t count = %s;\n", ry_c_count(c, o->ndim, o->dims));
        ry_sb_puts(b, "        for (int64_t i = 0; i < count; i++) {\n");
    } else {
        open_nest(c, o);
    }
    for (int k = 0; k < nin; k++) {
        const char *ix = !flat ? index_of(c, ins[k], o) : single(ins[k]) ? "0" : "i";
        const char *load = ry_c_fmt(c, "%s[%s]", ins[k]->c, ix);
        if (ins[k]->dtype == RY_FLOAT16 && val_dt(p, k) == RY_FLOAT32) load = ry_c_cast(c, RY_FLOAT16, RY_FLOAT32, load);
        ry_sb_printf(b, "            const %s a%d = %s;\n            (void)a%d; /* zeros_like reads none */\n", ry_c_ctype(val_dt(p, k)), k, load, k);
    }
    for (int i = 0; i < p->nins; i++) {
        const ry_fz_ins *in = &p->ins[i];
        const char *x = val(c, p, in->a[0]);
        const char *y = in->nargs > 1 ? val(c, p, in->a[1]) : NULL, *z = in->nargs > 2 ? val(c, p, in->a[2]) : NULL;
        const char *e = expr(c, in, x, y, z);
        if (!e) return ry_c_fail(c, span, "fused instruction %s has no C form", ry_fz_op_name(in->op));
        ry_sb_printf(b, "            const %s t%d = %s;\n", ry_c_ctype(in->odt), i, e);
    }
    for (int k = 0; k < p->nout; k++) {
        const char *v = val(c, p, p->outs[k]);
        if (outs[k]->dtype == RY_FLOAT16 && val_dt(p, p->outs[k]) == RY_FLOAT32) v = ry_c_cast(c, RY_FLOAT32, RY_FLOAT16, v);
        ry_sb_printf(b, "            %s[i] = %s;\n", outs[k]->c, v);
    }
    /* a value nothing reads (an input a program ignores) is no warning */
    bool used[RY_FZ_MAX_IN + RY_FZ_MAX_CONST + RY_FZ_MAX_INS] = {0};
    for (int i = 0; i < p->nins; i++) /* zeros_like and ones_like read no operand */
        for (int k = 0; k < p->ins[i].nargs && p->ins[i].op != RY_FZ_ZEROS && p->ins[i].op != RY_FZ_ONES; k++)
            used[p->ins[i].a[k]] = true;
    for (int k = 0; k < p->nout; k++) used[p->outs[k]] = true;
    for (int v = 0; v < p->nin + p->nconst + p->nins; v++)
        if (!used[v] && (v < p->nin || v >= p->nin + p->nconst)) ry_sb_printf(b, "            (void)%s;\n", val(c, p, v));
    ry_sb_puts(b, "        }\n    }\n");
    return RY_OK;
}

void ry_c_check_fits(cemit *c, const cval *small, const cval *big, const char *what, ry_span span) {
    int off = big->ndim - small->ndim;
    for (int j = 0; j < small->ndim; j++) {
        const ry_dim *s = &small->dims[j], *d = &big->dims[j + off];
        if (is_one(s) || same_dim(s, d) || (s->kind == RY_DIM_CONST && d->kind == RY_DIM_CONST)) continue;
        const char *msg = ry_c_fmt(c, "%s: %s: dimension %d does not broadcast at run time", ry_c_where(c, span), what, j + off);
        ry_sb_printf(&c->body, "    if (%s != 1 && %s != %s) %s\n", ry_c_dim(c, s), ry_c_dim(c, s), ry_c_dim(c, d),
                     ry_c_fail_stmt(c, "RT_E_DIM", msg));
    }
}

/* collapse_sum_like's loop: x's elements in x's order added into the
 * result's at their broadcast index, in double for floats and wrapping
 * uint64_t for integers (the CPU target's accumulators, so the same bits),
 * then stored in the result's dtype (integers modulo 2^bits). */
void ry_c_emit_collapse_sum(cemit *c, const cval *x, const cval *out) {
    bool flt = x->dtype == RY_FLOAT32 || x->dtype == RY_FLOAT64;
    const char *TA = flt ? "double" : "uint64_t", *count = ry_c_count(c, out->ndim, out->dims);
    const char *acc = x->dtype == RY_FLOAT64 ? out->c : ry_c_scratch(c, TA, count);
    strbuf *b = &c->body;
    ry_sb_printf(b, "    for (int64_t i = 0; i < %s; i++) %s[i] = 0;\n    {\n", count, acc);
    open_nest(c, x);
    ry_sb_printf(b, "            %s[%s] += (%s)%s%s[i];\n        }\n    }\n", acc, index_of(c, out, x), TA, flt ? "" : "(int64_t)",
                 x->c);
    if (acc != out->c)
        ry_sb_printf(b, "    for (int64_t i = 0; i < %s; i++) %s[i] = %s;\n", count, out->c,
                     flt ? ry_c_fmt(c, "(float)%s[i]", acc) : ry_c_wrap(c, out->dtype, ry_c_fmt(c, "%s[i]", acc)));
}
