/*
 * conv_im2col.c (cpu): im2col and col2im of one image, the copies that turn
 * a convolution into a GEMM (conv.c runs the GEMMs and splits the batch).
 * Stride 1 without dilation (LeNet's every conv, most CNNs' 3x3s) takes a
 * fast path: the image is zero-padded once, after which every column row is
 * a branch-free copy (im2col) or add (col2im) of whole spans; the cost of
 * the old per-row bounds work, not the bytes, was most of LeNet's conv time.
 * Strided or dilated convolutions take the general loops. Types: the
 * compute types of conv_kernels.h (float32, float64, wrapping int64).
 */
/* the copy and add loops are what vectorization is for (clang does at -O2);
 * and gcc must not turn the short copy loops back into memmove calls */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", \
                     "no-tree-loop-distribute-patterns")
#endif

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backend/cpu/conv_kernels.h"

static size_t ct_bytes(ry_conv_ctype ct) { return ct == RY_CT_F32 ? sizeof(float) : 8; }

static bool stride1(const ry_conv_geom *g) {
    return g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1;
}

/* ---- the general loops (any stride and dilation) ----
 * im2col: col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][oh*sh - pt + kh*dh][ow*sw - pl + kw*dw],
 *   zero outside the image; x is one group's (Cg, H, W) slice.
 * col2im: the adjoint:
 *   y[o][ih*sh - pt + kh*dh][iw*sw - pl + kw*dw] += col[(o*KH + kh)*KW + kw][ih*W + iw],
 *   in a fixed order (o, kh, kw, ih, iw), so results are deterministic.
 * The range of ow (iw) whose tap lands inside the image is computed once per
 * (kh, kw), so the interior loop has no bounds checks. */

/* ceil(a / b) for b > 0 and any a */
static int64_t cdiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* [lo, hi) of o in [0, n) with 0 <= o*s - pad + k*d < len */
static void tap_range(int64_t pad, int64_t k, int64_t d, int64_t s, int64_t len, int64_t n,
                      int64_t *lo, int64_t *hi) {
    int64_t a = cdiv(pad - k * d, s), b = cdiv(len + pad - k * d, s);
    *lo = a < 0 ? 0 : a > n ? n : a;
    *hi = b > n ? n : b < *lo ? *lo : b;
}

/* Integer sums wrap (as TVM's int arithmetic does) instead of overflowing. */
#define ADD_F(a, b) ((a) + (b))
#define ADD_I(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))

#define DEFINE_GENERAL(T, SUF, ADD)                                                              \
    static void im2col_any_##SUF(const ry_conv_geom *g, int64_t Cg, const T *x, int64_t oh0,     \
                                 int64_t oh1, T *col) {                                          \
        int64_t ld = (oh1 - oh0) * g->OW;                                                        \
        for (int64_t c = 0; c < Cg; c++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                         \
                    int64_t lo, hi;                                                              \
                    tap_range(g->pl, kw, g->dw, g->sw, g->W, g->OW, &lo, &hi);                   \
                    int64_t off = lo * g->sw - g->pl + kw * g->dw;                               \
                    for (int64_t oh = oh0; oh < oh1; oh++) {                                     \
                        int64_t ih = oh * g->sh - g->pt + kh * g->dh;                            \
                        T *dst = row + (oh - oh0) * g->OW;                                       \
                        if (ih < 0 || ih >= g->H) {                                              \
                            memset(dst, 0, sizeof(T) * (size_t)g->OW);                           \
                            continue;                                                            \
                        }                                                                        \
                        const T *src = x + (c * g->H + ih) * g->W + off;                         \
                        for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;                         \
                        for (int64_t i = 0; i < hi - lo; i++) dst[lo + i] = src[i * g->sw];      \
                        for (int64_t ow = hi; ow < g->OW; ow++) dst[ow] = 0;                     \
                    }                                                                            \
                }                                                                                \
    }                                                                                            \
    static void col2im_any_##SUF(const ry_conv_geom *g, int64_t Og, const T *col, T *y) {        \
        int64_t ld = g->H * g->W;                                                                \
        memset(y, 0, sizeof(T) * (size_t)(Og * g->OH * g->OW));                                  \
        for (int64_t o = 0; o < Og; o++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    const T *row = col + ((o * g->KH + kh) * g->KW + kw) * ld;                   \
                    int64_t lo, hi;                                                              \
                    tap_range(g->pl, kw, g->dw, g->sw, g->OW, g->W, &lo, &hi);                   \
                    int64_t off = lo * g->sw - g->pl + kw * g->dw;                               \
                    for (int64_t ih = 0; ih < g->H; ih++) {                                      \
                        int64_t oh = ih * g->sh - g->pt + kh * g->dh;                            \
                        if (oh < 0 || oh >= g->OH) continue;                                     \
                        T *dst = y + (o * g->OH + oh) * g->OW + off;                             \
                        const T *src = row + ih * g->W + lo;                                     \
                        for (int64_t i = 0; i < hi - lo; i++)                                    \
                            dst[i * g->sw] = ADD(dst[i * g->sw], src[i]);                        \
                    }                                                                            \
                }                                                                                \
    }
DEFINE_GENERAL(float, f32, ADD_F)
DEFINE_GENERAL(double, f64, ADD_F)
DEFINE_GENERAL(int64_t, i64, ADD_I)

/* ---- stride 1, no dilation ----
 * With the image zero-padded into xp (Cg, OH+KH-1, OW+KW-1), the taps are
 * col[(c*KH + kh)*KW + kw][oh*OW + ow] = xp[c][oh + kh][ow + kw]: for each
 * (c, kh, oh) one source row feeds KW destination spans of OW elements. */

/* A span of n bytes (n a multiple of the element size): fixed 16-byte
 * moves, the last one overlapping the previous end, so short spans (LeNet's
 * conv2: 40 bytes) cost three moves and no loop setup or tail. d and s
 * never overlap. */
static inline void copy_span(char *restrict d, const char *restrict s, size_t n) {
    if (n >= 16) {
        size_t i = 0;
        for (; i + 16 <= n; i += 16) memcpy(d + i, s + i, 16);
        if (i < n) memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    }
}

/* xp: the padded (ch, Hp, Wp) copy of x (ch, H, W), row r holding ih = r - pt
 * and column q holding iw = q - pl, zero outside the image. */
static void pad_image(const ry_conv_geom *g, size_t es, int64_t ch, const char *x, int64_t Hp,
                      int64_t Wp, char *xp) {
    int64_t lo = g->pl < Wp ? g->pl : Wp, hi = g->pl + g->W < Wp ? g->pl + g->W : Wp;
    for (int64_t c = 0; c < ch; c++)
        for (int64_t r = 0; r < Hp; r++) {
            char *d = xp + (size_t)((c * Hp + r) * Wp) * es;
            int64_t ih = r - g->pt;
            if (ih < 0 || ih >= g->H || hi <= lo) {
                memset(d, 0, (size_t)Wp * es);
                continue;
            }
            memset(d, 0, (size_t)lo * es);
            memcpy(d + (size_t)lo * es, x + (size_t)((c * g->H + ih) * g->W + lo - g->pl) * es,
                   (size_t)(hi - lo) * es);
            memset(d + (size_t)hi * es, 0, (size_t)(Wp - hi) * es);
        }
}

static bool im2col_needs_pad(const ry_conv_geom *g) {
    return g->pt > 0 || g->pl > 0 || g->OH + g->KH - 1 > g->H || g->OW + g->KW - 1 > g->W;
}

/* Rows [oh0, oh1) of the column matrix (ld = (oh1 - oh0) * OW) from src,
 * the image or its padded copy; COPY moves one span. */
#define DEFINE_IM2COL_S1(NAME, COPY)                                                             \
    static void NAME(const ry_conv_geom *g, size_t es, int64_t ch, const char *src, int64_t oh0, \
                     int64_t oh1, char *col) {                                                   \
        int64_t rs = g->W, ps = g->H * g->W, ld = (oh1 - oh0) * g->OW;                           \
        if (im2col_needs_pad(g)) {                                                               \
            rs = g->OW + g->KW - 1;                                                              \
            ps = (g->OH + g->KH - 1) * rs;                                                       \
        }                                                                                        \
        size_t span = (size_t)g->OW * es, kstep = (size_t)ld * es;                               \
        for (int64_t c = 0; c < ch; c++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                             \
                char *d = col + (size_t)((c * g->KH + kh) * g->KW * ld) * es;                    \
                const char *s = src + (size_t)(c * ps + (oh0 + kh) * rs) * es;                   \
                for (int64_t oh = oh0; oh < oh1; oh++, d += span, s += (size_t)rs * es)          \
                    for (int64_t kw = 0; kw < g->KW; kw++)                                       \
                        COPY(d + (size_t)kw * kstep, s + (size_t)kw * es, span);                 \
            }                                                                                    \
    }
DEFINE_IM2COL_S1(im2col_s1, copy_span)

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_COPY 1
/* copy_span in 32-byte moves where the CPU has AVX2: a sixth less time
 * for LeNet's conv1 weight gradient (memcpy of 32 bytes compiles to two
 * 16-byte moves even there, hence the intrinsics) */
__attribute__((target("avx2"))) static inline void copy_span32(char *restrict d,
                                                              const char *restrict s, size_t n) {
    if (n < 32) {
        copy_span(d, s, n);
        return;
    }
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(void *)(d + i),
                            _mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
    if (i < n)
        _mm256_storeu_si256((__m256i *)(void *)(d + n - 32),
                            _mm256_loadu_si256((const __m256i *)(const void *)(s + n - 32)));
}
__attribute__((target("avx2"))) DEFINE_IM2COL_S1(im2col_s1_avx2, copy_span32)

static bool have_avx2(void) {
    static int cached = -1; /* every thread computes the same value */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") != 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

/* col2im at stride 1: yp[o][ih + kh][iw + kw] += col[(o*KH + kh)*KW + kw][ih*W + iw]
 * over yp (Og, H+KH-1, W+KW-1), which is y itself when y has exactly that
 * shape and no head padding, else scratch cropped into y afterwards (rows
 * and columns beyond yp, output_padding's, are zero). Order (o, kh, kw, ih)
 * as the general loop: consecutive adds land in different rows, so a load
 * never waits on the store just before it. */

/* d[0, n) += s[0, n); whole 4-float vectors, then 2 and 1 (never an
 * overlapping vector: its load would wait for the previous store). 8-float
 * AVX2 vectors measured slower here (LeNet's conv2: 10-float rows). */
static inline void add_span_f32(float *restrict d, const float *restrict s, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(d + i, _mm_add_ps(_mm_loadu_ps(d + i), _mm_loadu_ps(s + i)));
    if (i + 2 <= n) {
        __m128 a = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)(d + i)));
        __m128 b = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)(s + i)));
        _mm_storel_epi64((__m128i *)(void *)(d + i), _mm_castps_si128(_mm_add_ps(a, b)));
        i += 2;
    }
#endif
    for (; i < n; i++) d[i] += s[i];
}

static inline void add_span_f64(double *restrict d, const double *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}

static inline void add_span_i64(int64_t *restrict d, const int64_t *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = ADD_I(d[i], s[i]);
}

#define DEFINE_COL2IM_S1(T, NAME, ADD)                                                           \
    static void NAME(const ry_conv_geom *g, int64_t Og, const T *col, T *y, T *pad) {            \
        int64_t Hp = g->H + g->KH - 1, Wp = g->W + g->KW - 1, hw = g->H * g->W;                  \
        bool direct = g->pt == 0 && g->pl == 0 && Hp == g->OH && Wp == g->OW;                   \
        T *yp = direct ? y : pad;                                                                \
        memset(yp, 0, sizeof(T) * (size_t)(Og * Hp * Wp));                                       \
        for (int64_t o = 0; o < Og; o++)                                                         \
            for (int64_t kh = 0; kh < g->KH; kh++)                                               \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                         \
                    const T *s = col + ((o * g->KH + kh) * g->KW + kw) * hw;                     \
                    T *d = yp + (o * Hp + kh) * Wp + kw;                                         \
                    for (int64_t ih = 0; ih < g->H; ih++, s += g->W, d += Wp)                    \
                        ADD(d, s, g->W);                                                         \
                }                                                                                \
        if (direct) return;                                                                      \
        int64_t lo = g->pl < Wp ? g->pl : Wp, n = lo + g->OW < Wp ? g->OW : Wp - lo;             \
        for (int64_t o = 0; o < Og; o++)                                                         \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                             \
                T *d = y + (o * g->OH + oh) * g->OW;                                             \
                int64_t r = oh + g->pt;                                                          \
                int64_t m = r < Hp ? n : 0;                                                      \
                if (m > 0) memcpy(d, yp + (o * Hp + r) * Wp + lo, sizeof(T) * (size_t)m);        \
                memset(d + m, 0, sizeof(T) * (size_t)(g->OW - m));                               \
            }                                                                                    \
    }
DEFINE_COL2IM_S1(float, col2im_s1_f32, add_span_f32)
DEFINE_COL2IM_S1(double, col2im_s1_f64, add_span_f64)
DEFINE_COL2IM_S1(int64_t, col2im_s1_i64, add_span_i64)


/* ---- entry points ---- */

int64_t ry_conv_pad_elems(const ry_conv_geom *g, int64_t ch, bool col2im) {
    if (!stride1(g)) return 0;
    if (!col2im)
        return im2col_needs_pad(g) ? ch * (g->OH + g->KH - 1) * (g->OW + g->KW - 1) : 0;
    int64_t Hp = g->H + g->KH - 1, Wp = g->W + g->KW - 1;
    bool direct = g->pt == 0 && g->pl == 0 && Hp == g->OH && Wp == g->OW;
    return direct ? 0 : ch * Hp * Wp;
}

const void *ry_conv_im2col_source(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch,
                                  const void *x, void *pad) {
    if (!stride1(g) || !im2col_needs_pad(g)) return x;
    pad_image(g, ct_bytes(ct), ch, x, g->OH + g->KH - 1, g->OW + g->KW - 1, pad);
    return pad;
}

void ry_conv_im2col_rows(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch, const void *src,
                         int64_t oh0, int64_t oh1, void *col) {
    if (stride1(g)) {
#ifdef HAVE_AVX2_COPY
        if (have_avx2()) {
            im2col_s1_avx2(g, ct_bytes(ct), ch, src, oh0, oh1, col);
            return;
        }
#endif
        im2col_s1(g, ct_bytes(ct), ch, src, oh0, oh1, col);
        return;
    }
    if (ct == RY_CT_F32) im2col_any_f32(g, ch, src, oh0, oh1, col);
    else if (ct == RY_CT_F64) im2col_any_f64(g, ch, src, oh0, oh1, col);
    else im2col_any_i64(g, ch, src, oh0, oh1, col);
}

void ry_conv_col2im(const ry_conv_geom *g, ry_conv_ctype ct, int64_t ch, const void *col, void *y,
                    void *pad) {
    if (stride1(g)) {
        if (ct == RY_CT_F32) col2im_s1_f32(g, ch, col, y, pad);
        else if (ct == RY_CT_F64) col2im_s1_f64(g, ch, col, y, pad);
        else col2im_s1_i64(g, ch, col, y, pad);
        return;
    }
    if (ct == RY_CT_F32) col2im_any_f32(g, ch, col, y);
    else if (ct == RY_CT_F64) col2im_any_f64(g, ch, col, y);
    else col2im_any_i64(g, ch, col, y);
}
