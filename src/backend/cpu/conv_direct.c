/*
 * conv_direct.c (cpu): the float32 forward of convolutions with few taps
 * per output (K = C*KH*KW <= 64: LeNet's one-channel conv1 has 25) at
 * stride 1 without dilation or groups, computed directly with AVX2 and FMA
 * where the CPU has them: no column matrix. Its im2col would write 25
 * copies of every image for a GEMM whose 6 x 25 weight matrix is too small
 * to hide them; here each output row is a few vector FMAs per tap, 32
 * output columns at a time (lanes past OW are computed and dropped). conv.c
 * decides when to use it (ry_conv_direct_ok) and owns the batch split.
 * (A direct weight gradient, tried the same way, lost to im2col + GEMM:
 * its loads, not its FMAs, bound it.)
 */
#include <string.h>

#include "backend/cpu/conv_kernels.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_DIRECT 1
#endif

/* The loops over a block's accumulators must unroll completely, or the
 * accumulators live in memory (gcc -O2 kept them there: 3x slower). */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 16")
#else
#define UNROLL
#endif

/* Output columns per block: four 8-float vectors. */
#define BW 32
/* Output channels per block of the forward (3 x 4 accumulators). */
#define OB 3

/* The padded image: (C, OH + KH - 1, ry_conv_direct_stride(g)), row r holding
 * ih = r - pt and column q holding iw = q - pl, zero outside the image and
 * in the slack that lets the last column block read whole vectors. */
int64_t ry_conv_direct_stride(const ry_conv_geom *g) {
    return (g->OW + BW - 1) / BW * BW + g->KW - 1;
}

int64_t ry_conv_direct_pad_elems(const ry_conv_geom *g) {
    return g->C * (g->OH + g->KH - 1) * ry_conv_direct_stride(g);
}

void ry_conv_direct_pad(const ry_conv_geom *g, const float *x, float *xp) {
    int64_t Hp = g->OH + g->KH - 1, Wq = ry_conv_direct_stride(g);
    int64_t lo = g->pl < Wq ? g->pl : Wq, hi = g->pl + g->W < Wq ? g->pl + g->W : Wq;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t r = 0; r < Hp; r++) {
            float *d = xp + (c * Hp + r) * Wq;
            int64_t ih = r - g->pt;
            memset(d, 0, sizeof(float) * (size_t)Wq);
            if (ih >= 0 && ih < g->H && hi > lo)
                memcpy(d + lo, x + (c * g->H + ih) * g->W + lo - g->pl,
                       sizeof(float) * (size_t)(hi - lo));
        }
}

#ifdef HAVE_DIRECT
static bool have_avx2_fma(void) {
    static int cached = -1; /* every thread computes the same value */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

bool ry_conv_direct_ok(const ry_conv_geom *g, ry_conv_ctype ct) {
#ifdef HAVE_DIRECT
    return ct == RY_CT_F32 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->G == 1 && g->C * g->KH * g->KW <= 64 && g->OW >= 16 && have_avx2_fma();
#else
    (void)g;
    (void)ct;
    return false;
#endif
}

#ifdef HAVE_DIRECT
/* lanes [0, n) of a vector set, the rest clear (n in 0..8) */
__attribute__((target("avx2"))) static __m256i lane_mask(int64_t n) {
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(m + 8 - n));
}

/* y[o][oh][ow] = sum over (c, kh, kw) in order of w[o][c][kh][kw] * xp[c][oh + kh][ow + kw]:
 * one image, w (O, C, KH, KW), y (O, OH, OW). */
__attribute__((target("avx2,fma"))) void ry_conv_direct_fwd(const ry_conv_geom *g,
                                                            const float *xp, const float *w,
                                                            float *y) {
    int64_t Hp = g->OH + g->KH - 1, Wq = ry_conv_direct_stride(g), K = g->C * g->KH * g->KW;
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += BW)
            for (int64_t o0 = 0; o0 < g->O; o0 += OB) {
                /* a short last block repeats the last channel and drops it */
                const float *wr[OB];
                UNROLL
                for (int i = 0; i < OB; i++)
                    wr[i] = w + (o0 + i < g->O ? o0 + i : g->O - 1) * K;
                __m256 acc[OB][4];
                UNROLL
                for (int i = 0; i < OB; i++)
                    UNROLL
                    for (int v = 0; v < 4; v++) acc[i][v] = _mm256_setzero_ps();
                int64_t k = 0;
                for (int64_t c = 0; c < g->C; c++)
                    for (int64_t kh = 0; kh < g->KH; kh++) {
                        const float *row = xp + (c * Hp + oh + kh) * Wq + ow0;
                        for (int64_t kw = 0; kw < g->KW; kw++, k++) {
                            __m256 xv[4];
                            UNROLL
                            for (int v = 0; v < 4; v++) xv[v] = _mm256_loadu_ps(row + kw + 8 * v);
                            UNROLL
                            for (int i = 0; i < OB; i++) {
                                __m256 wv = _mm256_broadcast_ss(wr[i] + k);
                                UNROLL
                                for (int v = 0; v < 4; v++)
                                    acc[i][v] = _mm256_fmadd_ps(wv, xv[v], acc[i][v]);
                            }
                        }
                    }
                UNROLL
                for (int i = 0; i < OB; i++) {
                    if (o0 + i >= g->O) break;
                    float *yr = y + ((o0 + i) * g->OH + oh) * g->OW + ow0;
                    UNROLL
                    for (int v = 0; v < 4; v++) {
                        int64_t n = g->OW - ow0 - 8 * v;
                        if (n >= 8) _mm256_storeu_ps(yr + 8 * v, acc[i][v]);
                        else if (n > 0) _mm256_maskstore_ps(yr + 8 * v, lane_mask(n), acc[i][v]);
                    }
                }
            }
}

#else
void ry_conv_direct_fwd(const ry_conv_geom *g, const float *xp, const float *w, float *y) {
    (void)g, (void)xp, (void)w, (void)y;
}
#endif
