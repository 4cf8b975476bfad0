/*
 * gemm_kernel.c (export runtime): the GEMM's kernel, C's rows times a
 * K x 16 block of B (gemm.c's packed panels, or a convolution's patches
 * read in place): the loops every exported dense, matmul, fused.matmul
 * and conv2d runs. The kernel keeps a 4 x 16 tile of C in registers (eight 8-float vectors of gcc's
 * and clang's vector extension; a plain loop with other compilers). Each
 * C element is the sum over k in increasing order (OpenBLAS, which the VM
 * calls, blocks K, so the two agree to rounding, not bitwise). With gcc on
 * x86-64 Linux the kernel is also built for AVX2 and AVX-512, and the
 * widest the CPU has is picked when the program loads (target_clones; the
 * kernel is a function of its own so that each build lowers the vectors
 * for its own width).
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(RT_PLAIN_C)
#define RT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
/* The hottest tiles are written twice, also over 16-float vectors for
 * AVX-512 (RT_WIDE), picked when the CPU has it: there gcc keeps such a
 * vector in one register where the clones' pairs of 8-float vectors take
 * twice the instructions, and a convolution's loop is bound by their
 * decoding, not by its arithmetic (25% faster on LeNet's convolutions);
 * on AVX2 gcc lowers a 16-float vector through memory, so the pairs stay. */
#define RT_WIDE __attribute__((target("avx512f")))
#define RT_PICK(f) (__builtin_cpu_supports("avx512f") ? f##16 : f##8) /* the tile f's widest build here */
#else
#define RT_CLONES
#define RT_PICK(f) f##8
#endif

enum { RT_MR = 4, RT_NR = 16 };

/* Floats a packed B (K, N) takes. */
#define RT_PACKED(K, N) ((size_t)(K) * (size_t)(((N) + RT_NR - 1) / RT_NR * RT_NR))

/* P := B (K, N) in panels of 16 columns, each K x 16 contiguous and
 * zero-padded past N (inline: a convolution alone may not pack); B[k][j] is src[k * N + j], or src[j * K + k]
 * when trans (src is (N, K): a dense weight). */
static inline void rt_pack(int64_t K, int64_t N, const float *restrict src, int trans, float *restrict P) {
    for (int64_t j0 = 0; j0 < N; j0 += RT_NR) {
        int64_t nc = N - j0 < RT_NR ? N - j0 : RT_NR;
        for (int64_t k = 0; k < K; k++, P += RT_NR) {
            if (trans) {
                for (int64_t j = 0; j < nc; j++) P[j] = src[(j0 + j) * K + k];
            } else if (nc == RT_NR) { /* a constant size: vector moves, not rep movs */
                memcpy(P, src + k * N + j0, sizeof(float) * RT_NR);
            } else {
                memcpy(P, src + k * N + j0, sizeof(float) * (size_t)nc);
            }
            for (int64_t j = nc; j < RT_NR; j++) P[j] = 0;
        }
    }
}

#if defined(__GNUC__) && !defined(RT_PLAIN_C) /* -DRT_PLAIN_C: the plain loops everywhere */
typedef float rt_v8 __attribute__((vector_size(32)));
typedef float rt_v16 __attribute__((vector_size(64)));

/* Stores rows [0, mr) x columns [0, nc) of a tile of C (ldc apart) from
 * its 16-float rows acc (inline: each kernel's build lowers it its way). */
static inline void rt_tile_store(int mr, int nc, const void *acc, float *restrict c, int64_t ldc) {
    const float *t = acc;
    if (nc == RT_NR) /* a constant size: vector moves, no call */
        for (int r = 0; r < mr; r++) memcpy(c + r * ldc, t + r * RT_NR, sizeof(float) * RT_NR);
    else
        for (int r = 0; r < mr; r++) memcpy(c + r * ldc, t + r * RT_NR, sizeof(float) * (size_t)nc);
}

/* rows [0, mr) (mr <= 4) x columns [0, nc) of C (ldc apart) = A's rows
 * (K apart) times the K x 16 block at p, its rows ldp apart (16: a packed
 * panel; N: a row-major B read in place, whose rows may be read 16 wide
 * past column nc). */
RT_CLONES static void rt_gemm_tile8(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                                    int64_t ldp, float *restrict c, int64_t ldc) {
    rt_v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    const float *a1 = a + (mr > 1 ? K : 0), *a2 = a + (mr > 2 ? 2 * K : 0), *a3 = a + (mr > 3 ? 3 * K : 0);
    for (int64_t k = 0; k < K; k++, p += ldp) {
        rt_v8 b0, b1;
        memcpy(&b0, p, sizeof b0);
        memcpy(&b1, p + 8, sizeof b1);
        const float x0 = a[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
        c00 += x0 * b0, c01 += x0 * b1;
        c10 += x1 * b0, c11 += x1 * b1;
        c20 += x2 * b0, c21 += x2 * b1;
        c30 += x3 * b0, c31 += x3 * b1;
    }
    const rt_v8 acc[RT_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    rt_tile_store(mr, nc, acc, c, ldc);
}

#ifdef RT_WIDE
/* rt_gemm_tile8 over 16-float vectors (AVX-512). */
RT_WIDE static void rt_gemm_tile16(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                                   int64_t ldp, float *restrict c, int64_t ldc) {
    rt_v16 c0 = {0}, c1 = c0, c2 = c0, c3 = c0;
    const float *a1 = a + (mr > 1 ? K : 0), *a2 = a + (mr > 2 ? 2 * K : 0), *a3 = a + (mr > 3 ? 3 * K : 0);
    for (int64_t k = 0; k < K; k++, p += ldp) {
        rt_v16 b;
        memcpy(&b, p, sizeof b);
        c0 += a[k] * b, c1 += a1[k] * b, c2 += a2[k] * b, c3 += a3[k] * b;
    }
    const rt_v16 acc[RT_MR] = {c0, c1, c2, c3};
    rt_tile_store(mr, nc, acc, c, ldc);
}
#endif

/* rows [0, mr) (mr <= 4) x columns [0, nc) of C as rt_gemm_tile8 says, in
 * the widest build the CPU runs. */
static void rt_gemm_tile(int64_t K, int mr, int nc, const float *a, const float *p, int64_t ldp, float *c,
                         int64_t ldc) {
    RT_PICK(rt_gemm_tile)(K, mr, nc, a, p, ldp, c, ldc);
}

/* A 6 x 16 tile's twelve 8-float sums as named variables, not an array
 * (gcc -O2 keeps an array's in memory): RT_ACC6_ADD adds s_r times the
 * row (b0, b1) to row r, RT_ACC6_ROWS lists them as rt_v8 [6][2]. Shared
 * by rt_gemm_tile6 and conv_direct.c's 8-float tiles. */
#define RT_ACC6_DECL                                                                                                   \
    rt_v8 c00 = {0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,          \
          c41 = c00, c50 = c00, c51 = c00
#define RT_ACC6_ADD(s0, s1, s2, s3, s4, s5)                                                                            \
    (c00 += (s0) * b0, c01 += (s0) * b1, c10 += (s1) * b0, c11 += (s1) * b1, c20 += (s2) * b0, c21 += (s2) * b1,     \
     c30 += (s3) * b0, c31 += (s3) * b1, c40 += (s4) * b0, c41 += (s4) * b1, c50 += (s5) * b0, c51 += (s5) * b1)
#define RT_ACC6_ROWS {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}}

/* (b0, b1) := the 16 floats at q */
static inline void rt_row8(const float *q, rt_v8 *b0, rt_v8 *b1) {
    memcpy(b0, q, sizeof *b0);
    memcpy(b1, q + 8, sizeof *b1);
}

/* rt_gemm_tile for 5 or 6 rows (a convolution's 6 filters): twelve
 * accumulators, still within 16 vector registers. */
RT_CLONES static void rt_gemm_tile6(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p,
                                    int64_t ldp, float *restrict c, int64_t ldc) {
    RT_ACC6_DECL;
    const float *a5 = a + (mr > 5 ? 5 * K : 4 * K);
    for (int64_t k = 0; k < K; k++, p += ldp) {
        rt_v8 b0, b1;
        rt_row8(p, &b0, &b1);
        RT_ACC6_ADD(a[k], a[K + k], a[2 * K + k], a[3 * K + k], a[4 * K + k], a5[k]);
    }
    const rt_v8 acc[6][2] = RT_ACC6_ROWS;
    rt_tile_store(mr, nc, acc, c, ldc);
}

#else
static void rt_gemm_tile(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p, int64_t ldp,
                         float *restrict c, int64_t ldc) {
    float acc[RT_MR][RT_NR] = {{0}};
    for (int64_t k = 0; k < K; k++)
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < nc; j++) acc[r][j] += a[r * K + k] * p[k * ldp + j];
    for (int r = 0; r < mr; r++) memcpy(c + r * ldc, acc[r], sizeof(float) * (size_t)nc);
}

static void rt_gemm_tile6(int64_t K, int mr, int nc, const float *restrict a, const float *restrict p, int64_t ldp,
                          float *restrict c, int64_t ldc) {
    rt_gemm_tile(K, 4, nc, a, p, ldp, c, ldc);
    rt_gemm_tile(K, mr - 4, nc, a + 4 * K, p, ldp, c + 4 * ldc, ldc);
}
#endif

/* C's rows [0, M) x columns [0, nc) (ldc apart) = A (M, K) times the block
 * at p: tiles of 4 rows, and the last 5 or 6 rows as one tile. */
static void rt_gemm_panel(int64_t M, int64_t K, int nc, const float *A, const float *p, int64_t ldp, float *C,
                          int64_t ldc) {
    for (int64_t i = 0; i < M;) {
        int64_t left = M - i;
        if (left == 5 || left == 6) {
            rt_gemm_tile6(K, (int)left, nc, A + i * K, p, ldp, C + i * ldc, ldc);
            return;
        }
        rt_gemm_tile(K, left < RT_MR ? (int)left : RT_MR, nc, A + i * K, p, ldp, C + i * ldc, ldc);
        i += RT_MR;
    }
}
