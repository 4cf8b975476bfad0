/*
 * kernel_gen_im2col.c: the copies that turn a device convolution into
 * GEMMs (src/backend/device/dk_conv_gemm.c runs them around the device's
 * BLAS), one work-item per element written, gathering (no atomics):
 * im2col of a chunk of images, col2im as a gather of the taps that land
 * on each result element (the CPU's col2im order: kh, then kw), and the
 * swap of a tensor's first two axes that puts a batch beside the GEMM's
 * columns. The direct kernels are kernel_gen_conv.c's.
 */
#include "backend/kernel_gen_nn.h"

#define GEOM "@L C, @L H, @L W, @L O, @L OH, @L OW, @L KH, @L KW, @L Cg, @L Og,\n" \
             "     @L sh, @L sw, @L dh, @L dw, @L pt, @L pl"

/* Each work-item writes one row of OW (or P) elements: the index
 * arithmetic (64-bit divisions, most of an element's cost on a CPU
 * device) is paid once per row, not per element. */

/* col (G, Cg*KH*KW, NB*OH*OW) of images x (NB, C, H, W):
 * col[g][(c*KH + kh)*KW + kw][b*OH*OW + oh*OW + ow]
 *   = x[b][g*Cg + c][oh*sh - pt + kh*dh][ow*sw - pl + kw*dw], 0 outside;
 * work-item i: row (g, c, kh, kw, b, oh), n = G*Cg*KH*KW*NB*OH of them */
static const char *im2col =
    "@K k(@L n, @G@T *col, @L co, @Gconst @T *x, @L xo, @L NB,\n     " GEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L oh = i % OH, r = i / OH, b = r % NB; r /= NB;\n"
    "    @L kw = r % KW; r /= KW;\n"
    "    @L kh = r % KH; r /= KH;\n"
    "    @L c = r % Cg, g = r / Cg;\n"
    "    @L ih = oh * sh - pt + kh * dh, w0 = kw * dw - pl;\n"
    "    @G@T *d = col + co + i * OW;\n"
    "    (void)O; (void)Og;\n"
    "    if (ih < 0 || ih >= H) {\n"
    "        for (@L ow = 0; ow < OW; ow++) d[ow] = (@T)0;\n"
    "        return;\n"
    "    }\n"
    "    @Gconst @T *s = x + xo + ((b * C + g * Cg + c) * H + ih) * W;\n"
    "    for (@L ow = 0; ow < OW; ow++) {\n"
    "        @L iw = ow * sw + w0;\n"
    "        d[ow] = iw >= 0 && iw < W ? s[iw] : (@T)0;\n"
    "    }\n"
    "}\n";

/* y (NB, O, OH, OW), conv2d_transpose's result, from col (G, Og*KH*KW,
 * NB*H*W) (H W its input's): y[b][g*Og + og][p][q] sums, over kh then kw,
 * col[g][(og*KH + kh)*KW + kw][b*H*W + h*W + v] where h*sh = p + pt - kh*dh
 * and v*sw = q + pl - kw*dw; work-item i: row (b, o, p), n = NB*O*OH */
static const char *col2im =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *col, @L co, @L NB,\n     " GEOM ") {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L p = i % OH, r = i / OH, o = r % O, b = r / O, HW = H * W, J = NB * HW;\n"
    "    @Gconst @T *base = col + co + o * KH * KW * J + b * HW;\n"
    "    @G@T *d = y + yo + i * OW;\n"
    "    (void)C; (void)Cg; (void)Og;\n"
    "    for (@L q = 0; q < OW; q++) d[q] = (@T)0;\n"
    "    for (@L kh = 0; kh < KH; kh++) {\n"
    "        @L th = p + pt - kh * dh;\n"
    "        if (th < 0 || th % sh != 0 || th / sh >= H) continue;\n"
    "        for (@L kw = 0; kw < KW; kw++) {\n"
    "            @Gconst @T *s = base + (kh * KW + kw) * J + (th / sh) * W;\n"
    "            @L t0 = pl - kw * dw;\n"
    "            if (sw == 1) {\n"
    "                @L lo = t0 < 0 ? -t0 : 0, hi = W - t0 < OW ? W - t0 : OW;\n"
    "                for (@L q = lo; q < hi; q++) d[q] += s[q + t0];\n"
    "                continue;\n"
    "            }\n"
    "            for (@L q = 0; q < OW; q++) {\n"
    "                @L tw = q + t0;\n"
    "                if (tw >= 0 && tw % sw == 0 && tw / sw < W) d[q] += s[tw / sw];\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n";

/* y (A, B, P) from x (B, A, P); work-item i: run (a, b), n = A*B */
static const char *swap01 =
    "@K k(@L n, @G@T *y, @L yo, @Gconst @T *x, @L xo, @L A, @L B, @L P) {\n"
    "    @L i = @I; if (i >= n) return;\n"
    "    @L b = i % B, a = i / B;\n"
    "    @G@T *d = y + yo + i * P;\n"
    "    @Gconst @T *s = x + xo + (b * A + a) * P;\n"
    "    for (@L p = 0; p < P; p++) d[p] = s[p];\n"
    "}\n";

char *ry_gen_conv_copy(const ry_dialect *d, ry_gen_conv_copy_kind kind, const ry_gen_types *t) {
    const char *s = kind == RY_GEN_IM2COL ? im2col : kind == RY_GEN_COL2IM ? col2im : swap01;
    return ry_gen_expand(d, s, t);
}
