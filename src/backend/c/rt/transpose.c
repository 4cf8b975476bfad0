/*
 * transpose.c (export runtime, one copy per float dtype RT_T,
 * emit_model.c): a 2-d transpose, for a GEMM operand read transposed
 * (nn.matmul's transpose_a, or a float64 b) that is not a weight.
 */
#include <stdint.h>

/* T (C, R) = X (R, C) transposed. */
static void RT_(rt_transpose)(int64_t R, int64_t C, const RT_T *restrict X, RT_T *restrict T) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) T[c * R + r] = X[r * C + c];
}
