/*
 * kernel_gen.c: the fused-program generator (kernel_gen.h). Each value of
 * the program becomes one local (v0, v1, ...) in the order the program
 * numbers them; the operators are spelled as the CPU's fused executor
 * computes them (src/backend/cpu/fused_loops.h: NaN passes through max,
 * min, relu and clip; sigmoid in its two-sided form; rsqrt as 1/sqrt), so
 * results agree with the CPU to the rounding of the device's math
 * functions.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_gen.h"

void ry_sbuf_add(ry_sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->s && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

const char *ry_gen_storage(const ry_dialect *d, ry_dtype dt) {
    return dt == RY_FLOAT16 ? (d->half_load ? d->half_storage : NULL) : d->type(dt);
}

const char *ry_gen_compute(const ry_dialect *d, ry_dtype dt) {
    if (dt != RY_FLOAT16) return d->type(dt);
    return ry_gen_storage(d, dt) ? d->type(RY_FLOAT32) : NULL;
}

void ry_gen_load(ry_sbuf *b, const ry_dialect *d, ry_dtype dt, const char *ptr, const char *index) {
    if (dt == RY_FLOAT16) d->half_load(b, ptr, index);
    else ry_sbuf_add(b, "%s[%s]", ptr, index);
}

void ry_gen_store(ry_sbuf *b, const ry_dialect *d, ry_dtype dt, const char *ptr, const char *index,
                  const char *value) {
    if (dt == RY_FLOAT16) d->half_store(b, ptr, index, value);
    else ry_sbuf_add(b, "%s[%s] = %s", ptr, index, value);
}

void ry_gen_bcast(int nin, const int *nd, const int64_t *const *shapes, int out_nd,
                  const int64_t *out, int *rank, int64_t *dims, ry_gen_access *access,
                  int64_t (*strides)[RY_MAX_RANK]) {
    /* per input and result dimension: the input's stride (elements of a
     * C-contiguous input, right-aligned; 0 where it is broadcast) */
    int64_t st[RY_FZ_MAX_IN + 8][RY_MAX_RANK];
    for (int k = 0; k < nin; k++) {
        int64_t n = 1, run = 1;
        bool same = nd[k] == out_nd;
        for (int d = out_nd - 1; d >= 0; d--) {
            int id = d - (out_nd - nd[k]);
            int64_t e = id >= 0 ? shapes[k][id] : 1;
            st[k][d] = e == 1 ? 0 : run;
            run *= e;
            n *= e;
            if (e != out[d]) same = false;
        }
        access[k] = same ? RY_GEN_DIRECT : n == 1 ? RY_GEN_SCALAR : RY_GEN_STRIDED;
    }
    /* collapse: dimension d joins the group before it when every strided
     * input steps through both as through one (stride before = stride of d
     * times d's extent); extents of 1 drop out */
    int r = 0;
    for (int d = 0; d < out_nd; d++) {
        if (out[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < nin && merge; k++)
            if (access[k] == RY_GEN_STRIDED && strides[k][r - 1] != st[k][d] * out[d]) merge = false;
        if (merge) {
            dims[r - 1] *= out[d];
            for (int k = 0; k < nin; k++) strides[k][r - 1] = st[k][d];
            continue;
        }
        dims[r] = out[d];
        for (int k = 0; k < nin; k++) strides[k][r] = st[k][d];
        r++;
    }
    if (r == 0) dims[r++] = 1; /* a scalar result, or all extents 1 */
    *rank = r;
}

void ry_gen_single(ry_fz_prog *out, ry_fz_opcode op, int nargs, const ry_dtype *dts, ry_dtype odt,
                   const double *p) {
    memset(out, 0, sizeof *out);
    out->nin = nargs;
    for (int i = 0; i < nargs; i++) out->in_dt[i] = dts[i];
    out->nins = 1;
    ry_fz_ins *in = &out->ins[0];
    in->op = op;
    in->dt = op == RY_FZ_WHERE ? dts[1] : dts[0];
    in->odt = odt;
    in->nargs = nargs;
    for (int i = 0; i < nargs; i++) in->a[i] = i;
    if (p) in->p[0] = p[0], in->p[1] = p[1];
    out->out_dt = odt;
    out->nout = 1;
    out->outs[0] = nargs;
    out->out_dts[0] = odt;
}

/* A literal of dtype dt, exactly (hexadecimal floats). */
static void literal(ry_sbuf *b, const ry_dialect *d, double v, ry_dtype dt) {
    const char *t = ry_gen_compute(d, dt);
    if (isnan(v)) ry_sbuf_add(b, "((%s)%s)", t, d->nan);
    else if (isinf(v)) ry_sbuf_add(b, "((%s)(%s%s))", t, v < 0 ? "-" : "", d->inf);
    else if (ry_dtype_is_float(dt)) ry_sbuf_add(b, "((%s)%a)", t, v);
    else ry_sbuf_add(b, "((%s)%.0f)", t, v);
}

static ry_dtype value_dt(const ry_fz_prog *p, int v) {
    int nin = p->nin, nc = p->nconst;
    if (v < nin) return p->in_dt[v];
    if (v < nin + nc) return p->cdt[v - nin];
    return p->ins[v - nin - nc].odt;
}

static void instruction(ry_sbuf *b, const ry_dialect *d, const ry_fz_prog *p, int i) {
    const ry_fz_ins *in = &p->ins[i];
    int me = p->nin + p->nconst + i;
    /* float16 values are floats here: loads widen, stores narrow */
    const char *T = ry_gen_compute(d, in->odt), *A = ry_gen_compute(d, in->dt);
    char x[16], y[16], z[16];
    snprintf(x, sizeof x, "v%d", in->a[0]);
    snprintf(y, sizeof y, "v%d", in->a[1]);
    snprintf(z, sizeof z, "v%d", in->a[2]);
    ry_sbuf_add(b, "    %s v%d = ", T, me);
    switch (in->op) {
    case RY_FZ_ADD: ry_sbuf_add(b, "%s + %s", x, y); break;
    case RY_FZ_SUB: ry_sbuf_add(b, "%s - %s", x, y); break;
    case RY_FZ_MUL: ry_sbuf_add(b, "%s * %s", x, y); break;
    case RY_FZ_DIV: ry_sbuf_add(b, "%s / %s", x, y); break;
    case RY_FZ_POW: ry_sbuf_add(b, "pow(%s, %s)", x, y); break;
    case RY_FZ_MAX: ry_sbuf_add(b, "%s != %s ? %s : (%s > %s ? %s : %s)", x, x, x, x, y, x, y); break;
    case RY_FZ_MIN: ry_sbuf_add(b, "%s != %s ? %s : (%s < %s ? %s : %s)", x, x, x, x, y, x, y); break;
    case RY_FZ_EQ: ry_sbuf_add(b, "(%s)(%s == %s)", T, x, y); break;
    case RY_FZ_NE: ry_sbuf_add(b, "(%s)(%s != %s)", T, x, y); break;
    case RY_FZ_LT: ry_sbuf_add(b, "(%s)(%s < %s)", T, x, y); break;
    case RY_FZ_LE: ry_sbuf_add(b, "(%s)(%s <= %s)", T, x, y); break;
    case RY_FZ_GT: ry_sbuf_add(b, "(%s)(%s > %s)", T, x, y); break;
    case RY_FZ_GE: ry_sbuf_add(b, "(%s)(%s >= %s)", T, x, y); break;
    case RY_FZ_AND: ry_sbuf_add(b, "(%s)((%s != 0) & (%s != 0))", T, x, y); break;
    case RY_FZ_OR: ry_sbuf_add(b, "(%s)((%s != 0) | (%s != 0))", T, x, y); break;
    case RY_FZ_NOT: ry_sbuf_add(b, "(%s)(%s == 0)", T, x); break;
    case RY_FZ_NEG: ry_sbuf_add(b, "-%s", x); break;
    case RY_FZ_EXP: ry_sbuf_add(b, "exp(%s)", x); break;
    case RY_FZ_LOG: ry_sbuf_add(b, "log(%s)", x); break;
    case RY_FZ_SQRT: ry_sbuf_add(b, "sqrt(%s)", x); break;
    case RY_FZ_RSQRT: ry_sbuf_add(b, "(%s)1 / sqrt(%s)", T, x); break;
    case RY_FZ_TANH: ry_sbuf_add(b, "tanh(%s)", x); break;
    case RY_FZ_SIGMOID:
        ry_sbuf_add(b, "%s >= 0 ? (%s)1 / ((%s)1 + exp(-%s)) : exp(%s) / ((%s)1 + exp(%s))", x, T, T,
                    x, x, T, x);
        break;
    case RY_FZ_ABS:
        if (ry_dtype_is_float(in->dt)) ry_sbuf_add(b, "fabs(%s)", x);
        else ry_sbuf_add(b, "%s < 0 ? -%s : %s", x, x, x);
        break;
    case RY_FZ_RELU: ry_sbuf_add(b, "%s > 0 ? %s : (%s != %s ? %s : (%s)0)", x, x, x, x, x, T); break;
    case RY_FZ_LEAKY:
        ry_sbuf_add(b, "%s > 0 ? %s : %s * ", x, x, x);
        literal(b, d, in->p[0], in->dt);
        break;
    case RY_FZ_CLIP: {
        ry_sbuf_add(b, "%s; { %s hi = ", x, A);
        literal(b, d, in->p[1], in->dt);
        ry_sbuf_add(b, "; %s lo = ", A);
        literal(b, d, in->p[0], in->dt);
        ry_sbuf_add(b, "; %s c = %s < hi ? %s : hi; v%d = %s != %s ? %s : (c > lo ? c : lo); }", A, x,
                    x, me, x, x, x);
        ry_sbuf_add(b, "\n");
        return;
    }
    case RY_FZ_CAST:
        if (in->odt == RY_BOOL) ry_sbuf_add(b, "(%s)(%s != 0)", T, x);
        else if (in->dt == RY_BOOL) ry_sbuf_add(b, "(%s)(%s != 0)", T, x);
        else ry_sbuf_add(b, "(%s)%s", T, x);
        break;
    case RY_FZ_COPY: ry_sbuf_add(b, "%s", x); break;
    case RY_FZ_ZEROS: ry_sbuf_add(b, "(%s)0", T); break;
    case RY_FZ_ONES: ry_sbuf_add(b, "(%s)1", T); break;
    case RY_FZ_WHERE: ry_sbuf_add(b, "%s ? %s : %s", x, y, z); break;
    case RY_FZ_NOPS: break;
    }
    ry_sbuf_add(b, ";\n");
}

static void (*observer)(const ry_gen_request *r, void *ctx);
static void *observer_ctx;

void ry_gen_set_observer(void (*fn)(const ry_gen_request *r, void *ctx), void *ctx) {
    observer = fn;
    observer_ctx = ctx;
}

void ry_gen_observe(const ry_gen_request *r) {
    if (observer) observer(r, observer_ctx);
}

char *ry_gen_request_source(const ry_gen_request *r, const ry_dialect *d, const char *name) {
    switch (r->kind) {
    case RY_GEN_ELEMWISE: return ry_gen_elemwise(d, &r->prog, r->access, r->rank, name);
    case RY_GEN_REDUCE: return ry_gen_reduce(d, r->red, r->in, r->out, r->f64acc, r->kr, r->rr, r->last, name);
    case RY_GEN_SOFTMAX: return ry_gen_softmax(d, r->in, r->log, name);
    }
    return NULL;
}

char *ry_gen_elemwise(const ry_dialect *d, const ry_fz_prog *p, const ry_gen_access *access,
                      int rank, const char *name) {
    for (int v = 0; v < p->nin + p->nconst + p->nins; v++)
        if (!ry_gen_storage(d, value_dt(p, v))) return NULL;
    if (observer) {
        ry_gen_request r = {.kind = RY_GEN_ELEMWISE, .prog = *p, .rank = rank};
        for (int k = 0; k < p->nin; k++) r.access[k] = access[k];
        ry_gen_observe(&r);
    }
    ry_sbuf b = {0};
    const char *L = d->i64;
    ry_sbuf_add(&b, "%s%s %s(%s n", d->prelude, d->kernel, name, L);
    for (int o = 0; o < p->nout; o++)
        ry_sbuf_add(&b, ", %s%s *o%d, %s oo%d", d->global, ry_gen_storage(d, p->out_dts[o]), o, L, o);
    for (int k = 0; k < p->nin; k++)
        ry_sbuf_add(&b, ", %sconst %s *x%d, %s xo%d", d->global, ry_gen_storage(d, p->in_dt[k]), k, L, k);
    for (int r = 0; r < rank; r++) ry_sbuf_add(&b, ", %s d%d", L, r);
    for (int k = 0; k < p->nin; k++)
        if (access[k] == RY_GEN_STRIDED)
            for (int r = 0; r < rank; r++) ry_sbuf_add(&b, ", %s s%d_%d", L, k, r);
    ry_sbuf_add(&b, ") {\n    %s i = %s;\n    if (i >= n) return;\n", L, d->index);
    bool strided = false;
    for (int k = 0; k < p->nin; k++) strided |= access[k] == RY_GEN_STRIDED;
    if (strided) {
        for (int k = 0; k < p->nin; k++)
            if (access[k] == RY_GEN_STRIDED) ry_sbuf_add(&b, "    %s j%d = 0;\n", L, k);
        ry_sbuf_add(&b, "    { %s r = i, c;\n", L);
        for (int r = rank - 1; r >= 0; r--) {
            ry_sbuf_add(&b, "      c = r %% d%d; r /= d%d;", r, r);
            for (int k = 0; k < p->nin; k++)
                if (access[k] == RY_GEN_STRIDED) ry_sbuf_add(&b, " j%d += c * s%d_%d;", k, k, r);
            ry_sbuf_add(&b, "\n");
        }
        ry_sbuf_add(&b, "    }\n");
    }
    for (int k = 0; k < p->nin; k++) {
        char ptr[16], at[32];
        snprintf(ptr, sizeof ptr, "x%d", k);
        if (access[k] == RY_GEN_STRIDED) snprintf(at, sizeof at, "xo%d + j%d", k, k);
        else snprintf(at, sizeof at, "xo%d + %s", k, access[k] == RY_GEN_DIRECT ? "i" : "0");
        ry_sbuf_add(&b, "    %s v%d = ", ry_gen_compute(d, p->in_dt[k]), k);
        ry_gen_load(&b, d, p->in_dt[k], ptr, at);
        ry_sbuf_add(&b, ";\n");
    }
    for (int c = 0; c < p->nconst; c++) {
        ry_sbuf_add(&b, "    %s v%d = ", ry_gen_compute(d, p->cdt[c]), p->nin + c);
        literal(&b, d, p->cval[c], p->cdt[c]);
        ry_sbuf_add(&b, ";\n");
    }
    for (int i = 0; i < p->nins; i++) instruction(&b, d, p, i);
    for (int o = 0; o < p->nout; o++) {
        char ptr[16], at[32], v[16];
        snprintf(ptr, sizeof ptr, "o%d", o);
        snprintf(at, sizeof at, "oo%d + i", o);
        snprintf(v, sizeof v, "v%d", p->outs[o]);
        ry_sbuf_add(&b, "    ");
        ry_gen_store(&b, d, p->out_dts[o], ptr, at, v);
        ry_sbuf_add(&b, ";\n");
    }
    ry_sbuf_add(&b, "}\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
