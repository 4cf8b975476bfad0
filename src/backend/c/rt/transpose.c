/*
 * transpose.c (export runtime): a 2-d float32 transpose, for a GEMM
 * operand read transposed (nn.matmul's transpose_a) that is not a weight.
 */
#include <stdint.h>

/* T (C, R) = X (R, C) transposed. */
static void rt_transpose(int64_t R, int64_t C, const float *restrict X, float *restrict T) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) T[c * R + r] = X[r * C + c];
}
