/*
 * kernel_gen_reduce.c: the generator's reductions and softmax
 * (kernel_gen.h), in any dialect. They fold in the CPU's orders' place a
 * plain sequential order per result element (the CPU sums a row with four
 * interleaved partials): both accumulate float32 in double, so results
 * agree to the last bit almost always and to rounding always.
 */
#include <stdlib.h>

#include "backend/kernel_gen.h"

void ry_gen_reduce_dims(int nd, const int64_t *shape, const bool *mask, int *kr, int64_t *kd,
                        int64_t *ks, int *rr, int64_t *rd, int64_t *rs, int64_t *m) {
    int64_t stride[RY_MAX_RANK], run = 1;
    for (int d = nd - 1; d >= 0; d--) stride[d] = run, run *= shape[d];
    *kr = *rr = 0;
    *m = 1;
    for (int d = 0; d < nd; d++) {
        if (mask[d]) *m *= shape[d];
        if (shape[d] == 1) continue;
        int *n = mask[d] ? rr : kr;
        int64_t *ds = mask[d] ? rd : kd, *ss = mask[d] ? rs : ks;
        if (*n > 0 && ss[*n - 1] == stride[d] * shape[d]) { /* contiguous with the last: merge */
            ds[*n - 1] *= shape[d];
            ss[*n - 1] = stride[d];
            continue;
        }
        ds[*n] = shape[d];
        ss[*n] = stride[d];
        (*n)++;
    }
}

/* decomposes the flat index `var` over dims P##d (strides Q##d) into off */
static void decompose(ry_sbuf *b, const char *L, const char *var, int n, const char *P,
                      const char *Q, const char *off) {
    ry_sbuf_add(b, "    { %s r = %s, c;", L, var);
    for (int k = n - 1; k >= 0; k--)
        ry_sbuf_add(b, " c = r %% %s%d; r /= %s%d; %s += c * %s%d;", P, k, P, k, off, Q, k);
    ry_sbuf_add(b, " }\n");
}

char *ry_gen_reduce(const ry_dialect *d, ry_gen_red kind, ry_dtype in, ry_dtype out, bool f64acc,
                    int kr, int rr, bool last_index, const char *name) {
    /* float16: read and written through the dialect, summed as float32 is */
    const char *TI = ry_gen_compute(d, in), *TO = ry_gen_compute(d, out), *L = d->i64;
    if (!TI || !TO) return NULL;
    ry_gen_observe(&(ry_gen_request){.kind = RY_GEN_REDUCE, .red = kind, .in = in, .out = out,
                                     .f64acc = f64acc, .kr = kr, .rr = rr, .last = last_index});
    bool fl = ry_dtype_is_float(in);
    const char *A = fl ? (f64acc ? "double" : TI) : L;
    ry_sbuf b = {0};
    ry_sbuf_add(&b, "%s%s %s(%s n, %s%s *o, %s oo, %sconst %s *x, %s xo, %s m", d->prelude, d->kernel,
                name, L, d->global, ry_gen_storage(d, out), L, d->global, ry_gen_storage(d, in), L, L);
    for (int k = 0; k < kr; k++) ry_sbuf_add(&b, ", %s kd%d", L, k);
    for (int k = 0; k < kr; k++) ry_sbuf_add(&b, ", %s ks%d", L, k);
    for (int k = 0; k < rr; k++) ry_sbuf_add(&b, ", %s rd%d", L, k);
    for (int k = 0; k < rr; k++) ry_sbuf_add(&b, ", %s rs%d", L, k);
    ry_sbuf_add(&b, ") {\n    %s i = %s;\n    if (i >= n) return;\n    %s base = xo;\n", L, d->index, L);
    decompose(&b, L, "i", kr, "kd", "ks", "base");
    bool arg = kind == RY_GEN_ARGMAX || kind == RY_GEN_ARGMIN;
    bool max = kind == RY_GEN_MAX || kind == RY_GEN_ARGMAX;
    ry_sbuf_add(&b, "    %s acc = 0; %s at = -1;\n", A, L);
    ry_sbuf_add(&b, "    for (%s j = 0; j < m; j++) {\n        %s off = base;\n", L, L);
    decompose(&b, L, "j", rr, "rd", "rs", "off");
    ry_sbuf_add(&b, "        %s v = (%s)", A, A);
    ry_gen_load(&b, d, in, "x", "off");
    ry_sbuf_add(&b, ";\n");
    const char *gt = max ? ">" : "<";
    switch (kind) {
    case RY_GEN_SUM:
    case RY_GEN_MEAN: ry_sbuf_add(&b, "        acc += v;\n"); break;
    case RY_GEN_SUMSQ: ry_sbuf_add(&b, "        acc += v * v;\n"); break;
    case RY_GEN_MAX:
    case RY_GEN_MIN:
        /* a NaN wins, as in NumPy (the CPU's fold) */
        if (fl) ry_sbuf_add(&b, "        if (j == 0 || v %s acc || v != v) acc = v;\n", gt);
        else ry_sbuf_add(&b, "        if (j == 0 || v %s acc) acc = v;\n", gt);
        break;
    case RY_GEN_ARGMAX:
    case RY_GEN_ARGMIN:
        /* ties: first (or last) index; the first NaN wins and stays */
        ry_sbuf_add(&b, "        bool take = at < 0;\n");
        if (fl) ry_sbuf_add(&b, "        if (!take && acc == acc) take = v != v || v %s%s acc;\n", gt,
                            last_index ? "=" : "");
        else ry_sbuf_add(&b, "        if (!take) take = v %s%s acc;\n", gt, last_index ? "=" : "");
        ry_sbuf_add(&b, "        if (take) { acc = v; at = j; }\n");
        break;
    }
    ry_sbuf_add(&b, "    }\n");
    /* the result as r, then stored (narrowed to float16 there) */
    if (arg) ry_sbuf_add(&b, "    %s r = (%s)(at < 0 ? 0 : at);\n", TO, TO);
    else if (kind == RY_GEN_MEAN) ry_sbuf_add(&b, "    %s r = (%s)(m ? acc / (%s)m : acc / (%s)0);\n", TO, TO, A, A);
    else if (!fl && kind != RY_GEN_SUM) ry_sbuf_add(&b, "    %s r = (%s)acc;\n", TO, TO);
    else if (kind == RY_GEN_MAX || kind == RY_GEN_MIN)
        ry_sbuf_add(&b, "    %s r = m ? (%s)acc : (%s)(%s%s);\n", TO, TO, TO, max ? "-" : "", d->inf);
    else ry_sbuf_add(&b, "    %s r = (%s)acc;\n", TO, TO);
    ry_sbuf_add(&b, "    ");
    ry_gen_store(&b, d, out, "o", "oo + i", "r");
    ry_sbuf_add(&b, ";\n");
    ry_sbuf_add(&b, "}\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *ry_gen_softmax(const ry_dialect *d, ry_dtype dt, bool log, const char *name) {
    const char *T = ry_gen_compute(d, dt), *S = ry_gen_storage(d, dt), *L = d->i64;
    if (!T || !ry_dtype_is_float(dt)) return NULL;
    ry_gen_observe(&(ry_gen_request){.kind = RY_GEN_SOFTMAX, .in = dt, .log = log});
    ry_sbuf b = {0};
    /* element k of x read, and of o written, as macros (float16 through
     * the dialect's loads and stores) */
    ry_sbuf_add(&b, "%s#define LD(k) ", d->prelude);
    ry_gen_load(&b, d, dt, "x", "xo + (k)");
    ry_sbuf_add(&b, "\n#define ST(k, v) ");
    ry_gen_store(&b, d, dt, "o", "oo + (k)", "(v)");
    ry_sbuf_add(&b,
                "\n%s %s(%s n, %s%s *o, %s oo, %sconst %s *x, %s xo, %s len, %s inner) {\n"
                "    %s i = %s;\n    if (i >= n) return;\n"
                "    %s base = (i / inner) * len * inner + i %% inner;\n"
                "    %s mx = -%s;\n"
                "    for (%s j = 0; j < len; j++) { %s v = LD(base + j * inner); mx = v > mx || v != v ? v : mx; }\n"
                "    %s s = 0;\n"
                "    for (%s j = 0; j < len; j++) s += exp(LD(base + j * inner) - mx);\n",
                d->kernel, name, L, d->global, S, L, d->global, S, L, L, L, L, d->index, L, T,
                d->inf, L, T, T, L);
    if (log)
        ry_sbuf_add(&b, "    %s ls = log(s);\n"
                        "    for (%s j = 0; j < len; j++) ST(base + j * inner, LD(base + j * inner) - mx - ls);\n",
                    T, L);
    else
        ry_sbuf_add(&b, "    for (%s j = 0; j < len; j++) ST(base + j * inner, exp(LD(base + j * inner) - mx) / s);\n",
                    L);
    ry_sbuf_add(&b, "}\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
