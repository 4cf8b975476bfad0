/*
 * dk_conv_gemm.c (device): nn.conv2d and its two gradients as the CPU runs
 * them (src/backend/cpu/conv.c), im2col + the device's GEMM (+ col2im for
 * the data gradient), but over a chunk of images at once rather than image
 * by image: a device wants few, large launches. Per chunk of NB images
 * (P = OH*OW, J = NB*P; K = Cg*KH*KW; per group g):
 *   forward:  yT_g (Og x J) = W_g (Og x K) * col_g (K x J), yT (O, NB, P)
 *             swapped into y (NB, O, P);
 *   data:     col_g (Og*KH*KW x NB*H*W) = W_g^T * dyT_g (Cg x NB*H*W),
 *             dyT (C, NB, H*W) swapped from dy; y = col2im(col);
 *   weight:   dw_g (Og x K) (+)= dyT_g (Og x J) * col_g^T, summed over
 *             the chunks by the GEMM (beta 1).
 * With one image in a chunk the swaps are the identity and are skipped.
 * Chunks keep the column matrix under ry_dk_conv_col_cap elements. float32 and
 * float64 (the device's BLAS); dk_conv.c decides which convolutions come
 * here (ry_dk_conv_gemm_pays) and runs the others as direct kernels.
 */
#include "backend/device/dk_ops.h"

ry_dk_conv_path ry_dk_conv_force = RY_DK_CONV_AUTO;
/* 2^22 elements (16 MB of float32) of column matrix: LeNet's batch of 64
 * is one chunk; a 64-channel 3x3 at 56x56 gets two images a GEMM, whose
 * 6272 columns still fill it, and scratch stays small beside a device's
 * memory (RELAYC_DEVICE_MEMORY_LIMIT) */
int64_t ry_dk_conv_col_cap = (int64_t)1 << 22;

/* the geometry of dk_conv.c (kernel_gen_nn.h's legend) by name */
enum { C_, H_, W_, O_, OH_, OW_, KH_, KW_, CG_, OG_ };

bool ry_dk_conv_gemm_pays(ry_gen_conv kind, const int64_t *g, int64_t N) {
    int64_t K = g[CG_] * g[KH_] * g[KW_];
    /* an empty sum or result: the direct kernel writes its zeros */
    if (N == 0 || K == 0 || g[OG_] == 0 || g[OH_] * g[OW_] == 0 || g[H_] * g[W_] == 0) return false;
    if (ry_dk_conv_force != RY_DK_CONV_AUTO) return ry_dk_conv_force == RY_DK_CONV_GEMM;
    /* Set from bench/device_conv on PoCL (README, The OpenCL target). The
     * three GEMMs of a group share one size, a group's filter, Og*Cg*KH*KW
     * multiply-adds per pixel: below 64 (depthwise 3x3: 9, a 2-channel
     * 3x3: 36) the launches and copies cost more than the direct loops
     * (1.5x to 9x slower); from LeNet's conv1 (150) up the forward and the
     * data gradient gain (to 0.1x). The weight gradient's GEMM reduces
     * over the whole batch into few outputs and gains later: LeNet's
     * conv1 (150) ran 1.05-1.2x slower, a grouped 3x3 (576) even, LeNet's
     * conv2 (2400) 0.6x. */
    int64_t filter = g[OG_] * K;
    return filter >= (kind == RY_GEN_CONV_DW ? 512 : 64);
}

/* one copy kernel (kernel_gen_im2col.c) of dtype dt over n elements */
static ry_status copy_run(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_conv_copy_kind kind,
                          ry_dtype dt, int64_t n, int nargs, const ry_karg *args) {
    if (n == 0) return RY_OK;
    ry_gen_types t = {ry_dk_type(d, dt), NULL, NULL};
    return ry_dk_gen_run(d, c, ry_gen_conv_copy(d->dialect, kind, &t), dt, (size_t)n, nargs, args);
}

/* y (A, B, P) at element yo of its tensor from x (B, A, P) at xo */
static ry_status swap01(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *y, int64_t yo,
                        const ry_tensor *x, int64_t xo, int64_t A, int64_t B, int64_t P) {
    ry_karg a[] = {KA_L(A * B), KA_B(y), KA_L(ry_dk_off(y) + yo), KA_B(x),
                   KA_L(ry_dk_off(x) + xo), KA_L(A), KA_L(B), KA_L(P)};
    return copy_run(d, c, RY_GEN_SWAP01, y->dtype, A * B, NARGS(a), a);
}

/* im2col or col2im (kind) into dst at element dsto from src at srco, NB
 * images, n rows (work-items) */
static ry_status col_copy(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_conv_copy_kind kind,
                          ry_tensor *dst, int64_t dsto, const ry_tensor *src, int64_t srco, int64_t NB,
                          const int64_t *g, int64_t n) {
    ry_karg a[24];
    int k = 0;
    a[k++] = KA_L(n);
    a[k++] = KA_B(dst);
    a[k++] = KA_L(ry_dk_off(dst) + dsto);
    a[k++] = KA_B(src);
    a[k++] = KA_L(ry_dk_off(src) + srco);
    a[k++] = KA_L(NB);
    for (int i = 0; i < 16; i++) a[k++] = KA_L(g[i]);
    return copy_run(d, c, kind, dst->dtype, n, k, a);
}

/* col (G, K, nb*OH*OW) of images [n0, n0 + nb) of x (N, C, H, W): a row
 * of OW per (channel, tap, image, output row) */
static ry_status im2col(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *col, const ry_tensor *x,
                        const int64_t *g, int64_t n0, int64_t nb) {
    int64_t rows = g[C_] * g[KH_] * g[KW_] * nb * g[OH_];
    return col_copy(d, c, RY_GEN_IM2COL, col, 0, x, n0 * g[C_] * g[H_] * g[W_], nb, g, rows);
}

static ry_status gemm(const ry_dk_device *d, ry_kernel_ctx *c, ry_dk_gemm gm) {
    if (gm.m == 0 || gm.n == 0 || gm.k == 0) return RY_OK;
    return d->gemm(c, &gm);
}

/* the images of a chunk: the column matrix of one image holds per_image
 * elements */
static int64_t chunk_of(int64_t N, int64_t per_image) {
    int64_t nb = per_image > 0 ? ry_dk_conv_col_cap / per_image : N;
    return nb < 1 ? 1 : nb < N ? nb : N;
}

/* Where group gi's rows (rows channels of ch, P elements each) of images
 * [n0, n0 + nb) start: in the swapped scratch (ch, nb, P) when nb > 1 (a
 * GEMM operand of leading dimension nb*P), else in the NCHW tensor itself
 * (one image: leading dimension P, the same) */
static int64_t group_at(int64_t nb, int64_t n0, int64_t gi, int64_t rows, int64_t ch, int64_t P) {
    return nb > 1 ? gi * rows * nb * P : n0 * ch * P + gi * rows * P;
}

/* forward: a = x (N, C, H, W), b = w (O, Cg, KH, KW), y (N, O, OH, OW) */
static ry_status fwd(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *y, const ry_tensor *x,
                     const ry_tensor *w, const int64_t *g, int64_t N, ry_tensor *col, ry_tensor *yT,
                     int64_t NB) {
    int64_t G = g[C_] / g[CG_], K = g[CG_] * g[KH_] * g[KW_], P = g[OH_] * g[OW_], Og = g[OG_];
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
        int64_t nb = n0 + NB <= N ? NB : N - n0, J = nb * P;
        if (im2col(d, c, col, x, g, n0, nb)) return RY_ERR;
        for (int64_t gi = 0; gi < G; gi++) {
            ry_dk_gemm gm = {.m = Og, .n = J, .k = K, .a = w, .aoff = gi * Og * K, .lda = K, .b = col,
                             .boff = gi * K * J, .ldb = J, .ldc = J};
            gm.c = nb > 1 ? yT : y;
            gm.coff = group_at(nb, n0, gi, Og, g[O_], P);
            if (gemm(d, c, gm)) return RY_ERR;
        }
        if (nb > 1 && swap01(d, c, y, n0 * g[O_] * P, yT, 0, nb, g[O_], P)) return RY_ERR;
    }
    return RY_OK;
}

/* data gradient: a = dy (N, C, H, W), b = w (C, Og, KH, KW), y (N, O, OH, OW) */
static ry_status dx(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *y, const ry_tensor *dy,
                    const ry_tensor *w, const int64_t *g, int64_t N, ry_tensor *col, ry_tensor *dyT,
                    int64_t NB) {
    int64_t G = g[C_] / g[CG_], HW = g[H_] * g[W_], Cg = g[CG_];
    int64_t M = g[OG_] * g[KH_] * g[KW_], Y = g[O_] * g[OH_] * g[OW_];
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
        int64_t nb = n0 + NB <= N ? NB : N - n0, J = nb * HW;
        if (nb > 1 && swap01(d, c, dyT, 0, dy, n0 * g[C_] * HW, g[C_], nb, HW)) return RY_ERR;
        for (int64_t gi = 0; gi < G; gi++) {
            ry_dk_gemm gm = {.ta = true, .m = M, .n = J, .k = Cg, .a = w, .aoff = gi * Cg * M,
                             .lda = M, .ldb = J, .c = col, .coff = gi * M * J, .ldc = J};
            gm.b = nb > 1 ? dyT : dy;
            gm.boff = group_at(nb, n0, gi, Cg, g[C_], HW);
            if (gemm(d, c, gm)) return RY_ERR;
        }
        if (col_copy(d, c, RY_GEN_COL2IM, y, n0 * Y, col, 0, nb, g, nb * g[O_] * g[OH_])) return RY_ERR;
    }
    return RY_OK;
}

/* weight gradient: a = dy (N, O, OH, OW), b = x (N, C, H, W), y = dw (O, Cg, KH, KW) */
static ry_status dw(const ry_dk_device *d, ry_kernel_ctx *c, ry_tensor *y, const ry_tensor *dy,
                    const ry_tensor *x, const int64_t *g, int64_t N, ry_tensor *col, ry_tensor *dyT,
                    int64_t NB) {
    int64_t G = g[C_] / g[CG_], K = g[CG_] * g[KH_] * g[KW_], P = g[OH_] * g[OW_], Og = g[OG_];
    for (int64_t n0 = 0; n0 < N; n0 += NB) {
        int64_t nb = n0 + NB <= N ? NB : N - n0, J = nb * P;
        if (im2col(d, c, col, x, g, n0, nb)) return RY_ERR;
        if (nb > 1 && swap01(d, c, dyT, 0, dy, n0 * g[O_] * P, g[O_], nb, P)) return RY_ERR;
        for (int64_t gi = 0; gi < G; gi++) {
            ry_dk_gemm gm = {.tb = true, .m = Og, .n = K, .k = J, .lda = J, .b = col,
                             .boff = gi * K * J, .ldb = J, .c = y, .coff = gi * Og * K, .ldc = K,
                             .acc = n0 > 0};
            gm.a = nb > 1 ? dyT : dy;
            gm.aoff = group_at(nb, n0, gi, Og, g[O_], P);
            if (gemm(d, c, gm)) return RY_ERR;
        }
    }
    return RY_OK;
}

ry_status ry_dk_conv_gemm(const ry_dk_device *d, ry_kernel_ctx *c, ry_gen_conv kind, ry_tensor *y,
                          const ry_tensor *a, const ry_tensor *b, const int64_t *g, int64_t N) {
    int64_t KK = g[KH_] * g[KW_];
    /* one image's column matrix, and the swapped operand or result */
    int64_t per = kind == RY_GEN_CONV_DX ? g[O_] * KK * g[H_] * g[W_] : g[C_] * KK * g[OH_] * g[OW_];
    int64_t swap = kind == RY_GEN_CONV_DX ? g[C_] * g[H_] * g[W_] : g[O_] * g[OH_] * g[OW_];
    int64_t NB = chunk_of(N, per);
    ry_tensor *col = ry_dk_scratch(d, c, y->dtype, 1, (int64_t[]){NB * per});
    ry_tensor *sw = col && NB > 1 ? ry_dk_scratch(d, c, y->dtype, 1, (int64_t[]){NB * swap}) : NULL;
    ry_status st = RY_ERR;
    if (col && (NB == 1 || sw)) {
        if (kind == RY_GEN_CONV_FWD) st = fwd(d, c, y, a, b, g, N, col, sw, NB);
        else if (kind == RY_GEN_CONV_DX) st = dx(d, c, y, a, b, g, N, col, sw, NB);
        else st = dw(d, c, y, a, b, g, N, col, sw, NB);
    }
    ry_tensor_release(col);
    ry_tensor_release(sw);
    return st;
}
