/*
 * kernel_gen_norm.c: the normalizations and the small nn kernels as
 * generated kernels (kernel_gen_nn.h). Statistics follow
 * src/backend/cpu/norm.c: per group two passes (the mean, then the sum of
 * squared deviations) in the CPU's member order, in double where the
 * device has it; the normalizing expressions are the CPU's, term for
 * term. Dropout draws the CPU's stream: splitmix64 advances its state by
 * a constant per draw, so draw i is the mix of state + (i + 1) * gamma
 * and every work-item computes its own.
 */
#include <stdlib.h>

#include "backend/kernel_gen_nn.h"

static const char *stats =
    "@K k(@L n, @G@A *st, @L so, @Gconst @T *x, @L xo, @L GI, @L GS0, @L GS1,\n"
    "     @L M0, @L M1, @L M2, @L MS0, @L MS1) {\n"
    "    @L g = @I; if (g >= n) return;\n"
    "    @L base = xo + (g / GI) * GS0 + (g % GI) * GS1, cnt = M0 * M1 * M2;\n"
    "    @A s = 0, q = 0;\n"
    "    for (@L a = 0; a < M0; a++)\n"
    "        for (@L b = 0; b < M1; b++)\n"
    "            for (@L c = 0; c < M2; c++) s += (@A)x[base + a * MS0 + b * MS1 + c];\n"
    "    @A mean = s / (@A)cnt;\n"
    "    for (@L a = 0; a < M0; a++)\n"
    "        for (@L b = 0; b < M1; b++)\n"
    "            for (@L c = 0; c < M2; c++) {\n"
    "                @A d = (@A)x[base + a * MS0 + b * MS1 + c] - mean;\n"
    "                q += d * d;\n"
    "            }\n"
    "    st[so + 2 * g] = mean;\n"
    "    st[so + 2 * g + 1] = q;\n"
    "}\n";

char *ry_gen_norm_stats(const ry_dialect *d, const ry_gen_types *t) { return ry_gen_expand(d, stats, t); }

/* batch_norm per channel: the new moving statistics (PyTorch's momentum
 * 0.1, the unbiased variance) and the channel's mean and scale */
static const char *bn_finish =
    "@K k(@L C, @G@T *nm, @L nmo, @G@T *nv, @L nvo, @G@A *coef, @L co, @Gconst @A *st, @L so,\n"
    "     @Gconst @T *mm, @L mmo, @Gconst @T *mv, @L mvo, @Gconst @T *gamma, @L go, @L cnt,\n"
    "     @A eps, @L training, @L scale) {\n"
    "    @L ch = @I; if (ch >= C) return;\n"
    "    @A mean = (@A)mm[mmo + ch], var = (@A)mv[mvo + ch];\n"
    "    if (training) {\n"
    "        @A q = st[so + 2 * ch + 1];\n"
    "        mean = st[so + 2 * ch];\n"
    "        var = q / (@A)cnt;\n"
    "        nm[nmo + ch] = (@T)((@A)0.9 * (@A)mm[mmo + ch] + (@A)0.1 * mean);\n"
    "        nv[nvo + ch] = (@T)((@A)0.9 * (@A)mv[mvo + ch] + (@A)0.1 * q / (@A)(cnt - 1));\n"
    "    } else {\n"
    "        nm[nmo + ch] = mm[mmo + ch];\n"
    "        nv[nvo + ch] = mv[mvo + ch];\n"
    "    }\n"
    "    coef[co + 2 * ch] = mean;\n"
    "    coef[co + 2 * ch + 1] = (scale ? (@A)gamma[go + ch] : (@A)1) / sqrt(var + eps);\n"
    "}\n";

static const char *bn_apply =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @A *coef, @L co,\n"
    "     @Gconst @T *beta, @L bo, @L C, @L I, @L center) {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L ch = (i / I) % C;\n"
    "    @A b = center ? (@A)beta[bo + ch] : (@A)0;\n"
    "    y[yo + i] = (@T)(((@A)x[xo + i] - coef[co + 2 * ch]) * coef[co + 2 * ch + 1] + b);\n"
    "}\n";

/* layer_norm over (O, N, I): element (o, k, i) with the statistics of (o, i) */
static const char *ln_apply =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @A *st, @L so,\n"
    "     @Gconst @T *gamma, @L go, @Gconst @T *beta, @L bo, @L N, @L I, @A eps,\n"
    "     @L scale, @L center) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @L i = e % I, k = (e / I) % N, o = e / (I * N), g = o * I + i;\n"
    "    @A r = (@A)1 / sqrt(st[so + 2 * g + 1] / (@A)N + eps);\n"
    "    y[yo + e] = (@T)(((@A)x[xo + e] - st[so + 2 * g]) * r * (scale ? (@A)gamma[go + k] : (@A)1) +\n"
    "                     (center ? (@A)beta[bo + k] : (@A)0));\n"
    "}\n";

/* group_norm over (N, A, C, I), groups of cg channels: element (n, a,
 * ch, i) with the statistics of (n, ch / cg) */
static const char *gn_apply =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @A *st, @L so,\n"
    "     @Gconst @T *gamma, @L go, @Gconst @T *beta, @L bo, @L A, @L C, @L cg, @L I, @A eps,\n"
    "     @L scale, @L center) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @L ch = (e / I) % C, b = e / (I * C * A), g = b * (C / cg) + ch / cg;\n"
    "    @A rstd = (@A)1 / sqrt(st[so + 2 * g + 1] / (@A)(A * cg * I) + eps);\n"
    "    @A gm = (scale ? (@A)gamma[go + ch] : (@A)1) * rstd, bb = center ? (@A)beta[bo + ch] : (@A)0;\n"
    "    y[yo + e] = (@T)(((@A)x[xo + e] - st[so + 2 * g]) * gm + bb);\n"
    "}\n";

char *ry_gen_norm_apply(const ry_dialect *d, ry_gen_norm kind, const ry_gen_types *t) {
    const char *s = kind == RY_GEN_BN_FINISH ? bn_finish
                    : kind == RY_GEN_BN_APPLY ? bn_apply
                    : kind == RY_GEN_LN_APPLY ? ln_apply
                                              : gn_apply;
    return ry_gen_expand(d, s, t);
}

/* ---- the small kernels ---- */

/* (the window's half width is "hs": "half" is a type in OpenCL C) */
static const char *lrn =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @L C, @L I, @L size, @A bias, @A alpha,\n"
    "     @A beta) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @L i = e % I, ch = (e / I) % C, o = e / (I * C), hs = size / 2;\n"
    "    @L lo = ch - hs < 0 ? 0 : ch - hs, hi = ch + hs >= C ? C - 1 : ch + hs;\n"
    "    @A s = 0;\n"
    "    for (@L k = lo; k <= hi; k++) { @A v = (@A)x[xo + (o * C + k) * I + i]; s += v * v; }\n"
    "    y[yo + e] = (@T)((@A)x[xo + e] / pow(bias + alpha * s / (@A)size, beta));\n"
    "}\n";

static const char *prelu =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @T *al, @L ao, @L C, @L I) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @T v = x[xo + e];\n"
    "    y[yo + e] = v < 0 ? al[ao + (e / I) % C] * v : v;\n"
    "}\n";

/* one work-item: the CPU's sum, in its order */
static const char *xent =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @T *t, @L to, @L cnt, @L rows) {\n"
    "    if (@I != 0) return;\n"
    "    @A s = 0;\n"
    "    for (@L i = 0; i < cnt; i++) s += (@A)t[to + i] * TERM((@A)x[xo + i]);\n"
    "    y[yo] = (@T)(-s / (@A)rows);\n"
    "}\n";

static const char *dropout =
    "@K k(@L n, @G@T *y, @L yo, @G@T *m, @L mo, @Gconst @T *x, @L xo, @U state,\n"
    "     @U threshold, @T scale, @L training) {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    if (!training) { m[mo + i] = (@T)1; y[yo + i] = x[xo + i]; return; }\n"
    "    @U z = state + (@U)(i + 1) * 0x9E3779B97F4A7C15UL;\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;\n"
    "    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;\n"
    "    z ^= z >> 31;\n"
    "    bool keep = (z >> 11) >= threshold;\n"
    "    m[mo + i] = keep ? (@T)1 : (@T)0;\n"
    "    y[yo + i] = keep ? (@T)(x[xo + i] * scale) : (@T)0;\n"
    "}\n";

static const char *one_hot =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @X *ind, @L io, @Gconst @A *on, @L ono, @Gconst @A *off,\n"
    "     @L offo, @L depth, @L Q) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @L q = e % Q, d = (e / Q) % depth, p = e / (Q * depth);\n"
    "    y[yo + e] = (@L)ind[io + p * Q + q] == d ? (@T)on[ono] : (@T)off[offo];\n"
    "}\n";

/* gather_nd: out[j, s] = x[batch of j, idx[:, j], s] */
static const char *gather_nd =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @X *ind, @L io, @Gint *flag,\n"
    "     @L fo, @Gconst @L *dims, @L dmo, @L M, @L K, @L S, @L Yn, @L batch) {\n"
    "    @L e = @I; if (e >= n) return;\n"
    "    @L s = e % S, j = e / S, off = 0;\n"
    "    for (@L mi = 0; mi < M; mi++) {\n"
    "        @L v = (@L)ind[io + mi * K + j], dm = dims[dmo + mi];\n"
    "        if (v < 0 || v >= dm) { flag[fo] = 1; return; }\n"
    "        off = off * dm + v;\n"
    "    }\n"
    "    y[yo + e] = x[xo + (j / Yn) * batch + off * S + s];\n"
    "}\n";

/* scatter_nd: one work-item per column s of a slice, the index tuples in
 * order (t = 0, 1, ...): the CPU's order of adds and overwrites. add: 0
 * overwrites, 1 adds, 2 adds booleans (a logical or) */
static const char *scatter_nd =
    "@K k(@L S, @G@T *y, @L yo, @Gconst @T *up, @L uo, @Gconst @X *ind, @L io, @Gint *flag,\n"
    "     @L fo, @Gconst @L *dims, @L dmo, @L M, @L K, @L add) {\n"
    "    @L s = @I; if (s >= S) return;\n"
    "    for (@L t = 0; t < K; t++) {\n"
    "        @L off = 0;\n"
    "        for (@L mi = 0; mi < M; mi++) {\n"
    "            @L v = (@L)ind[io + mi * K + t], dm = dims[dmo + mi];\n"
    "            if (v < 0 || v >= dm) { flag[fo] = 1; return; }\n"
    "            off = off * dm + v;\n"
    "        }\n"
    "        @T u = up[uo + t * S + s];\n"
    "        @T o = y[yo + off * S + s];\n"
    "        y[yo + off * S + s] = add == 0 ? u : add == 1 ? (@T)(o + u) : (@T)(o != 0 || u != 0);\n"
    "    }\n"
    "}\n";

/* ---- rank-specialized: pad and l2_normalize's apply ---- */

/* per dimension r the result's extent e_r, x's extent d_r and the
 * padding before b_r (pad) or the extent and kept stride (l2) */
static char *ranked(const ry_dialect *d, ry_gen_misc kind, int rank, const ry_gen_types *t) {
    ry_sbuf b = {0};
    if (kind == RY_GEN_PAD) {
        /* pad.c's source index of o along an axis; -1: the pad value */
        ry_sbuf_add(&b, "#define SRC(o, bf, len, mode) ((o) - (bf) >= 0 && (o) - (bf) < (len) ? (o) - (bf) \\\n"
                        "    : (mode) == 0 ? -1 : (mode) == 1 ? ((o) - (bf) < 0 ? 0 : (len) - 1) \\\n"
                        "    : (mode) == 2 ? ((o) - (bf) < 0 ? (bf) - (o) : 2 * ((len) - 1) - ((o) - (bf))) \\\n"
                        "    : ((o) - (bf) < 0 ? (bf) - (o) - 1 : 2 * (len) - 1 - ((o) - (bf))))\n");
        ry_sbuf_add(&b, "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @A *pv, @L po, @L mode");
        for (int r = 0; r < rank; r++) ry_sbuf_add(&b, ", @L e%d, @L d%d, @L b%d", r, r, r);
        ry_sbuf_add(&b, ") {\n    @L i = @I; if (i >= n) return;\n    @L rest = i, src = 0, run = 1;\n");
        for (int r = rank - 1; r >= 0; r--)
            ry_sbuf_add(&b, "    { @L o = rest %% e%d, j = SRC(o, b%d, d%d, mode); rest /= e%d;\n"
                            "      if (j < 0) { y[yo + i] = (@T)pv[po]; return; }\n"
                            "      src += j * run; run *= d%d; }\n", r, r, r, r, r);
        ry_sbuf_add(&b, "    y[yo + i] = x[xo + src];\n}\n");
    } else {
        ry_sbuf_add(&b, "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @Gconst @A *sum, @L so, @A eps");
        for (int r = 0; r < rank; r++) ry_sbuf_add(&b, ", @L e%d, @L k%d", r, r);
        ry_sbuf_add(&b, ") {\n    @L i = @I; if (i >= n) return;\n    @L rest = i, kept = 0;\n");
        for (int r = rank - 1; r >= 0; r--)
            ry_sbuf_add(&b, "    kept += (rest %% e%d) * k%d; rest /= e%d;\n", r, r, r);
        ry_sbuf_add(&b, "    @A s = sum[so + kept];\n"
                        "    y[yo + i] = (@T)((@A)x[xo + i] / sqrt(s > eps ? s : eps));\n}\n");
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    char *s = ry_gen_expand(d, b.s, t);
    free(b.s);
    return s;
}

char *ry_gen_nn(const ry_dialect *d, ry_gen_misc kind, int rank, const ry_gen_types *t) {
    switch (kind) {
    case RY_GEN_PAD:
    case RY_GEN_L2_APPLY: return ranked(d, kind, rank, t);
    case RY_GEN_LRN: return ry_gen_expand(d, lrn, t);
    case RY_GEN_PRELU: return ry_gen_expand(d, prelu, t);
    case RY_GEN_XENT:
    case RY_GEN_XENT_LOGITS: {
        ry_sbuf b = {0};
        ry_sbuf_add(&b, "#define TERM(v) %s\n%s", kind == RY_GEN_XENT ? "log(v)" : "(v)", xent);
        char *s = b.oom ? NULL : ry_gen_expand(d, b.s, t);
        free(b.s);
        return s;
    }
    case RY_GEN_DROPOUT: return ry_gen_expand(d, dropout, t);
    case RY_GEN_ONE_HOT: return ry_gen_expand(d, one_hot, t);
    case RY_GEN_GATHER_ND: return ry_gen_expand(d, gather_nd, t);
    case RY_GEN_SCATTER_ND: return ry_gen_expand(d, scatter_nd, t);
    }
    return NULL;
}
