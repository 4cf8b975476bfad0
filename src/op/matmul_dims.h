/*
 * matmul_dims.h: nn.matmul's and nn.dense's operands as GEMMs (every
 * target's kernels): a (R..., K) [ta: (R..., K, N)] times b (K, M) [tb:
 * (M, K)]. Without ta the leading dims fold into the rows of one GEMM;
 * with ta there is one GEMM per leading index.
 */
#ifndef RELAYC_OP_MATMUL_DIMS_H
#define RELAYC_OP_MATMUL_DIMS_H

#include "relayc/tensor.h"

typedef struct ry_matmul_dims {
    int64_t rows, M, K, batch;
} ry_matmul_dims;

static inline ry_matmul_dims ry_matmul_dims_of(const ry_tensor *a, const ry_tensor *b, bool ta, bool tb) {
    ry_matmul_dims d = {1, tb ? b->shape[0] : b->shape[1], tb ? b->shape[1] : b->shape[0], 1};
    int nd = a->ndim;
    if (!ta)
        for (int i = 0; i < nd - 1; i++) d.rows *= a->shape[i];
    else {
        d.rows = a->shape[nd - 1];
        for (int i = 0; i < nd - 2; i++) d.batch *= a->shape[i];
    }
    return d;
}

#endif
