/*
 * kernel_gen_nn.h: the device targets' kernels of the nn family
 * (convolutions, pools, normalizations, padding, scatter and gather,
 * dropout, cross-entropy), generated as source in a dialect
 * (kernel_gen.h) from templates, so that OpenCL and a later CUDA target
 * share them. Each kernel is one work-item per result element (or per
 * statistic), looping over what it sums in the CPU kernel's order, so
 * results agree with the CPU to rounding (and bit for bit where the CPU
 * sums in one order too: pools, their gradients, the normalizations'
 * statistics).
 *
 * Every source holds one kernel named "k"; its parameters are listed
 * beside each generator. Integers are 64-bit; a tensor is its buffer and
 * an element offset.
 */
#ifndef RELAYC_BACKEND_KERNEL_GEN_NN_H
#define RELAYC_BACKEND_KERNEL_GEN_NN_H

#include "backend/kernel_gen.h"

/* The types a template is spelled with: @T the element, @A the compute
 * (accumulator) type, @X a third (an index's). */
typedef struct ry_gen_types {
    const char *T, *A, *X;
} ry_gen_types;

/* tmpl with the dialect's spellings substituted: @K the kernel qualifier,
 * @G the buffers' address space, @I the work-item's index, @L the 64-bit
 * integer, @U the unsigned one, @N a quiet NaN, @T @A @X the types; the prelude first. A
 * malloc'd string, NULL on out of memory or a type left NULL that tmpl
 * uses. */
char *ry_gen_expand(const ry_dialect *d, const char *tmpl, const ry_gen_types *t);

/* ---- convolutions and pools (kernel_gen_conv.c) ----
 * The geometry arguments of every convolution kernel, after its tensors:
 * C H W O OH OW KH KW Cg Og sh sw dh dw pt pl (conv_kernels.h's legend;
 * for the transpose C H W are its input's, O OH OW its output's). */
typedef enum { RY_GEN_CONV_FWD, RY_GEN_CONV_DX, RY_GEN_CONV_DW } ry_gen_conv;
/* FWD: (n, y, x, w); DX: (n, y, dy, w); DW: (n, dw, dy, x, N); then the
 * geometry. @T the result's type, @X the two operands' (out_dtype may
 * differ from theirs), @A the accumulator. */
char *ry_gen_conv2d(const ry_dialect *d, ry_gen_conv kind, const ry_gen_types *t);

/* The copies of a convolution through GEMMs (kernel_gen_im2col.c), @T
 * the element: IM2COL (n, col, x, NB, then the geometry): col (G,
 * Cg*KH*KW, NB*OH*OW) of NB images; COL2IM (n, y, col, NB, then the
 * geometry, C H W the transpose's input's): y (NB, O, OH, OW) gathered
 * from col (G, Og*KH*KW, NB*H*W); SWAP01 (n, y, x, A, B, P): y (A, B, P)
 * from x (B, A, P). */
typedef enum { RY_GEN_IM2COL, RY_GEN_COL2IM, RY_GEN_SWAP01 } ry_gen_conv_copy_kind;
char *ry_gen_conv_copy(const ry_dialect *d, ry_gen_conv_copy_kind kind, const ry_gen_types *t);

/* Pools over planes of H x W into OH x OW, geometry arguments after the
 * tensors: H W OH OW PH PW sh sw dh dw pt pl pb pr.
 * MAX: (n, y, x, lowest: an @A), AVG: (n, y, x, include_pad), then the
 * geometry; MAX_GRAD / AVG_GRAD: (n, dx, dy, x, include_pad), then the
 * geometry (one work-item per dx element, the windows that hold it in the
 * CPU's order). ADAPTIVE_MAX / ADAPTIVE_AVG: (n, y, x, lowest, H, W, OH,
 * OW). @A: T for floats, 64-bit for integers. */
typedef enum {
    RY_GEN_POOL_MAX, RY_GEN_POOL_AVG, RY_GEN_POOL_MAX_GRAD, RY_GEN_POOL_AVG_GRAD,
    RY_GEN_POOL_ADAPTIVE_MAX, RY_GEN_POOL_ADAPTIVE_AVG
} ry_gen_pool;
char *ry_gen_pool2d(const ry_dialect *d, ry_gen_pool kind, bool integer, const ry_gen_types *t);

/* ---- normalizations and the rest (kernel_gen_norm.c) ---- */

/* Statistics of groups: group g = (go, gi), gi < GI, starts at go*GS0 +
 * gi*GS1; its members are (m0, m1, m2) < (M0, M1, M2) at m0*MS0 + m1*MS1
 * + m2, in that order. Writes st[2g] = mean, st[2g+1] = the sum of
 * squared deviations (two passes, in @A). Parameters: (n groups, st, x,
 * GI, GS0, GS1, M0, M1, M2, MS0, MS1). */
char *ry_gen_norm_stats(const ry_dialect *d, const ry_gen_types *t);

typedef enum { RY_GEN_BN_FINISH, RY_GEN_BN_APPLY, RY_GEN_LN_APPLY, RY_GEN_GN_APPLY } ry_gen_norm;
/* BN_FINISH, per channel: (C, nm, nv, coef, st, mm, mv, gamma, count,
 *   eps, training, scale: nm nv the new moving statistics, coef[2ch] the
 *   mean and coef[2ch+1] the scale g of channel ch.
 * BN_APPLY: (n, y, x, coef, beta, C, I, center): y = (x - mean) * g + b.
 * LN_APPLY: (n, y, x, st, gamma, beta, N, I, eps, scale, center).
 * GN_APPLY: (n, y, x, st, gamma, beta, A, C, cg, I, eps, scale, center).
 * @A the statistics' type; eps an @A. */
char *ry_gen_norm_apply(const ry_dialect *d, ry_gen_norm kind, const ry_gen_types *t);

/* Small nn kernels, one source each:
 *   PAD: (n, y, x, pv, mode, then per dimension the result's extent, x's
 *     extent, the padding before): generated for a rank.
 *   L2_APPLY: (n, y, x, sum, eps, then per dimension extent and kept
 *     stride) for a rank.
 *   LRN: (n, y, x, C, I, size, bias, alpha, beta) (@A doubles where the
 *     device has them).
 *   PRELU: (n, y, x, alpha, C, I).
 *   XENT / XENT_LOGITS: (1, y (one element), x, t, count, rows): one
 *     work-item summing in index order.
 *   DROPOUT: (n, y, m, x, state, threshold, scale, training): kept where
 *     draw >> 11 >= threshold.
 *   ONE_HOT: (n, y, ind (@X), on, off (@A), depth, Q).
 *   GATHER_ND: (n, y, x, ind (@X), flag, dims, M, K, S, Yn, batch) and
 *     SCATTER_ND: (S, y, up, ind, flag, dims, M, K, add), dims the
 *     extents of the M indexed axes (a buffer of 64-bit integers): flag[0]
 *     is set on an index out of range. */
typedef enum {
    RY_GEN_PAD, RY_GEN_L2_APPLY, RY_GEN_LRN, RY_GEN_PRELU, RY_GEN_XENT, RY_GEN_XENT_LOGITS,
    RY_GEN_DROPOUT, RY_GEN_ONE_HOT, RY_GEN_GATHER_ND, RY_GEN_SCATTER_ND
} ry_gen_misc;
char *ry_gen_nn(const ry_dialect *d, ry_gen_misc kind, int rank, const ry_gen_types *t);

#endif
