/*
 * kernel_gen_conv.c: convolutions and pools as generated kernels
 * (kernel_gen_nn.h), one work-item per result element. The convolutions
 * gather: the forward sums its window, the data gradient (conv2d_transpose)
 * sums the input positions whose windows reach its element, the weight
 * gradient sums over the batch and the output plane; the accumulator is
 * the caller's (double for float32 where the device has it). The pools
 * follow src/backend/cpu/pool.c exactly: the same taps in the same order,
 * TVM's divisors, NaN winning a max; their gradients gather, per input
 * element, the windows that hold it in the order the CPU scatters them, so
 * the sums are the same bits.
 */
#include <stdlib.h>

#include "backend/kernel_gen_nn.h"

#define GEOM "@L C, @L H, @L W, @L O, @L OH, @L OW, @L KH, @L KW, @L Cg, @L Og,\n" \
             "     @L sh, @L sw, @L dh, @L dw, @L pt, @L pl"

static const char *conv_fwd =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @X *x, @L xo, @Gconst @X *w, @L wo,\n     " GEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L ow = i % OW, r = i / OW, oh = r % OH; r /= OH;\n"
    "    @L o = r % O, b = r / O, g = o / Og;\n"
    "    @A acc = 0;\n"
    "    for (@L c = 0; c < Cg; c++) {\n"
    "        @L xb = xo + (b * C + g * Cg + c) * H * W, wb = wo + (o * Cg + c) * KH * KW;\n"
    "        for (@L kh = 0; kh < KH; kh++) {\n"
    "            @L ih = oh * sh - pt + kh * dh;\n"
    "            if (ih < 0 || ih >= H) continue;\n"
    "            for (@L kw = 0; kw < KW; kw++) {\n"
    "                @L iw = ow * sw - pl + kw * dw;\n"
    "                if (iw >= 0 && iw < W) acc += (@A)x[xb + ih * W + iw] * (@A)w[wb + kh * KW + kw];\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    y[yo + i] = (@T)acc;\n"
    "}\n";

/* y (N, O, OH, OW) from dy (N, C, H, W) and w (C, Og, KH, KW): element
 * (p, q) of output channel o receives dy[c, h, v] * w[c, o, kh, kw] for
 * every tap with h*sh - pt + kh*dh = p (and alike along the width) */
static const char *conv_dx =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @X *x, @L xo, @Gconst @X *w, @L wo,\n     " GEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L q = i % OW, r = i / OW, p = r % OH; r /= OH;\n"
    "    @L o = r % O, b = r / O, g = o / Og, og = o % Og;\n"
    "    @A acc = 0;\n"
    "    for (@L c = 0; c < Cg; c++) {\n"
    "        @L xb = xo + (b * C + g * Cg + c) * H * W, wb = wo + ((g * Cg + c) * Og + og) * KH * KW;\n"
    "        for (@L kh = 0; kh < KH; kh++) {\n"
    "            @L th = p + pt - kh * dh;\n"
    "            if (th < 0 || th % sh != 0 || th / sh >= H) continue;\n"
    "            for (@L kw = 0; kw < KW; kw++) {\n"
    "                @L tw = q + pl - kw * dw;\n"
    "                if (tw < 0 || tw % sw != 0 || tw / sw >= W) continue;\n"
    "                acc += (@A)x[xb + (th / sh) * W + tw / sw] * (@A)w[wb + kh * KW + kw];\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    y[yo + i] = (@T)acc;\n"
    "}\n";

/* dw (O, Cg, KH, KW) = sum over images and output positions of
 * dy[b, o, oh, ow] * x[b, g*Cg + c, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw] */
static const char *conv_dw =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @X *dy, @L dyo, @Gconst @X *x, @L xo, @L N,\n     " GEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L kw = i % KW, r = i / KW, kh = r % KH; r /= KH;\n"
    "    @L c = r % Cg, o = r / Cg, g = o / Og;\n"
    "    @A acc = 0;\n"
    "    for (@L b = 0; b < N; b++) {\n"
    "        @L db = dyo + (b * O + o) * OH * OW, xb = xo + (b * C + g * Cg + c) * H * W;\n"
    "        for (@L oh = 0; oh < OH; oh++) {\n"
    "            @L ih = oh * sh - pt + kh * dh;\n"
    "            if (ih < 0 || ih >= H) continue;\n"
    "            for (@L ow = 0; ow < OW; ow++) {\n"
    "                @L iw = ow * sw - pl + kw * dw;\n"
    "                if (iw >= 0 && iw < W) acc += (@A)dy[db + oh * OW + ow] * (@A)x[xb + ih * W + iw];\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    y[yo + i] = (@T)acc;\n"
    "}\n";

char *ry_gen_conv2d(const ry_dialect *d, ry_gen_conv kind, const ry_gen_types *t) {
    return ry_gen_expand(d, kind == RY_GEN_CONV_FWD ? conv_fwd : kind == RY_GEN_CONV_DX ? conv_dx : conv_dw, t);
}

/* ---- pools ---- */

#define PGEOM "@L H, @L W, @L OH, @L OW, @L PH, @L PW, @L sh, @L sw, @L dh, @L dw,\n" \
              "     @L pt, @L pl, @L pb, @L pr"

/* TVM's element counts (pool.c's divisor), as macros: both dialects
 * have them, and a helper function would need a qualifier in CUDA */
static const char *pool_divisor =
    "#define MIN_(a, b) ((a) < (b) ? (a) : (b))\n"
    "#define MAX_(a, b) ((a) > (b) ? (a) : (b))\n"
    "#define START(o, s, head) ((o) * (s) - (head))\n"
    "#define COUNT_INCL(o, s, d, k, head, len, tail) \\\n"
    "    ((MIN_(START(o, s, head) + ((k) - 1) * (d), (len) + (tail) - 1) - START(o, s, head)) / (d) + 1)\n"
    "#define COUNT_EXCL(o, s, d, k, head, len) \\\n"
    "    ((MIN_(START(o, s, head) + ((k) - 1) * (d), (len) - 1) \\\n"
    "      - (START(o, s, head) + (d) * MAX_(((d) - 1 - START(o, s, head)) / (d), (@L)0))) / (d) + 1)\n"
    "#define DIVISOR(oh, ow) (incl ? COUNT_INCL(oh, sh, dh, PH, pt, H, pb) * COUNT_INCL(ow, sw, dw, PW, pl, W, pr) \\\n"
    "    : MAX_(COUNT_EXCL(oh, sh, dh, PH, pt, H) * COUNT_EXCL(ow, sw, dw, PW, pl, W), (@L)1))\n";

static const char *div_float = "#define DIV(s, n) ((s) / (@A)(n))\n";
static const char *div_int = "#define DIV(s, n) ((n) == 0 ? (@A)0 : (s) / (@A)(n))\n";

static const char *pool_max =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @A lowest,\n     " PGEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L ow = i % OW, r = i / OW, oh = r % OH, p = r / OH, xb = xo + p * H * W;\n"
    "    @A m = lowest;\n"
    "    for (@L kh = 0; kh < PH; kh++) {\n"
    "        @L ih = oh * sh - pt + kh * dh;\n"
    "        if (ih < 0 || ih >= H) continue;\n"
    "        for (@L kw = 0; kw < PW; kw++) {\n"
    "            @L iw = ow * sw - pl + kw * dw;\n"
    "            if (iw < 0 || iw >= W) continue;\n"
    "            @A v = (@A)x[xb + ih * W + iw];\n"
    "            if (v > m || ISNAN(v)) m = v;\n"
    "        }\n"
    "    }\n"
    "    y[yo + i] = (@T)m;\n"
    "}\n";

static const char *pool_avg =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @L incl,\n     " PGEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L ow = i % OW, r = i / OW, oh = r % OH, p = r / OH, xb = xo + p * H * W;\n"
    "    @A s = 0;\n"
    "    for (@L kh = 0; kh < PH; kh++) {\n"
    "        @L ih = oh * sh - pt + kh * dh;\n"
    "        if (ih < 0 || ih >= H) continue;\n"
    "        for (@L kw = 0; kw < PW; kw++) {\n"
    "            @L iw = ow * sw - pl + kw * dw;\n"
    "            if (iw >= 0 && iw < W) s = s + (@A)x[xb + ih * W + iw];\n"
    "        }\n"
    "    }\n"
    "    y[yo + i] = (@T)DIV(s, DIVISOR(oh, ow));\n"
    "}\n";

/* dx[p, ih, iw]: the windows (oh, ow) whose taps reach (ih, iw), in the
 * CPU's order (row-major); a max window gives its dy to its first
 * maximum (or first NaN) */
static const char *pool_grad_head =
    "@K k(@L n, @G@T *dx, @L dxo, @Gconst @T *dy, @L dyo, @Gconst @T *x, @L xo, @L incl,\n     " PGEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L iw = i % W, r = i / W, ih = r % H, p = r / H;\n"
    "    @L xb = xo + p * H * W, db = dyo + p * OH * OW, me = ih * W + iw;\n"
    "    @L t = ih + pt - (PH - 1) * dh, oh0 = t <= 0 ? 0 : (t + sh - 1) / sh, oh1 = (ih + pt) / sh;\n"
    "    t = iw + pl - (PW - 1) * dw;\n"
    "    @L ow0 = t <= 0 ? 0 : (t + sw - 1) / sw, ow1 = (iw + pl) / sw;\n"
    "    if (oh1 > OH - 1) oh1 = OH - 1;\n"
    "    if (ow1 > OW - 1) ow1 = OW - 1;\n"
    "    @A acc = 0;\n"
    "    for (@L oh = oh0; oh <= oh1; oh++) {\n"
    "        if ((ih + pt - oh * sh) % dh != 0) continue;\n"
    "        for (@L ow = ow0; ow <= ow1; ow++) {\n"
    "            if ((iw + pl - ow * sw) % dw != 0) continue;\n";

static const char *pool_max_grad_body =
    "            @L arg = -1;\n"
    "            for (@L kh = 0; kh < PH; kh++) {\n"
    "                @L jh = oh * sh - pt + kh * dh;\n"
    "                if (jh < 0 || jh >= H) continue;\n"
    "                for (@L kw = 0; kw < PW; kw++) {\n"
    "                    @L jw = ow * sw - pl + kw * dw, j = jh * W + jw;\n"
    "                    if (jw < 0 || jw >= W) continue;\n"
    "                    @T a = arg < 0 ? (@T)0 : x[xb + arg], v = x[xb + j];\n"
    "                    if (arg < 0 || (!ISNAN(a) && (v > a || ISNAN(v)))) arg = j;\n"
    "                }\n"
    "            }\n"
    "            if (arg == me) acc = acc + (@A)dy[db + oh * OW + ow];\n"
    "        }\n"
    "    }\n"
    "    dx[dxo + i] = (@T)acc;\n"
    "}\n";

static const char *pool_avg_grad_body =
    "            (void)xb; (void)me; /* the max's */\n"
    "            acc += DIV((@A)dy[db + oh * OW + ow], DIVISOR(oh, ow));\n"
    "        }\n"
    "    }\n"
    "    dx[dxo + i] = (@T)acc;\n"
    "}\n";

/* adaptive windows: [floor(o*n/on), ceil((o+1)*n/on)) */
static const char *pool_adaptive =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @A lowest, @L H, @L W, @L OH, @L OW) {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L ow = i % OW, r = i / OW, oh = r % OH, p = r / OH, xb = xo + p * H * W;\n"
    "    @L h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;\n"
    "    @L w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;\n"
    "    @A acc = IS_MAX ? lowest : (@A)0;\n"
    "    for (@L ih = h0; ih < h1; ih++)\n"
    "        for (@L iw = w0; iw < w1; iw++) {\n"
    "            @A v = (@A)x[xb + ih * W + iw];\n"
    "            if (!IS_MAX) acc = acc + v;\n"
    "            else if (v > acc || ISNAN(v)) acc = v;\n"
    "        }\n"
    "    y[yo + i] = (@T)(IS_MAX ? acc : DIV(acc, (h1 - h0) * (w1 - w0)));\n"
    "}\n";

char *ry_gen_pool2d(const ry_dialect *d, ry_gen_pool kind, bool integer, const ry_gen_types *t) {
    ry_sbuf b = {0};
    ry_sbuf_add(&b, "%s", integer ? div_int : div_float);
    ry_sbuf_add(&b, "#define ISNAN(v) %s\n", integer ? "0" : "((v) != (v))");
    switch (kind) {
    case RY_GEN_POOL_MAX: ry_sbuf_add(&b, "%s", pool_max); break;
    case RY_GEN_POOL_AVG: ry_sbuf_add(&b, "%s%s", pool_divisor, pool_avg); break;
    case RY_GEN_POOL_MAX_GRAD: ry_sbuf_add(&b, "%s%s", pool_grad_head, pool_max_grad_body); break;
    case RY_GEN_POOL_AVG_GRAD:
        ry_sbuf_add(&b, "%s%s%s", pool_divisor, pool_grad_head, pool_avg_grad_body);
        break;
    case RY_GEN_POOL_ADAPTIVE_MAX:
    case RY_GEN_POOL_ADAPTIVE_AVG:
        ry_sbuf_add(&b, "#define IS_MAX %d\n%s", kind == RY_GEN_POOL_ADAPTIVE_MAX, pool_adaptive);
        break;
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    char *s = ry_gen_expand(d, b.s, t);
    free(b.s);
    return s;
}
