/*
 * fused_kernels.h: the CPU kernels of the fused operators (private to
 * src/op/fused.c and src/backend/cpu/fused_exec.c). Both run a compiled
 * program (src/op/fused_prog.h) tile by tile over the result; fused.matmul
 * first runs its GEMM through nn.matmul's kernel (OpenBLAS) and applies
 * the program as its epilogue.
 */
#ifndef RELAYC_CPU_FUSED_KERNELS_H
#define RELAYC_CPU_FUSED_KERNELS_H

#include "op/fused_prog.h"

ry_status ry_cpu_fused_elemwise(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                                ry_tensor *const *out);
ry_status ry_cpu_fused_matmul(ry_kernel_ctx *c, int nin, ry_tensor *const *in, int nout,
                              ry_tensor *const *out);

/* Runs program p over out's shape: input slot k reads in[k], which must
 * broadcast to out (numpy rules). out may share memory with an input.
 * pre, when not NULL, holds the result of the first instruction already
 * (out's shape; it may be out itself): the run starts at the second. */
ry_status ry_fz_exec(const ry_fz_prog *p, ry_tensor *out, int nin, ry_tensor *const *in,
                     const ry_tensor *pre, ry_kernel_ctx *c);
/* The same for a program with nout results (p->nout), of one shape, in
 * outs[0..nout) (none sharing memory with another). */
ry_status ry_fz_exec_n(const ry_fz_prog *p, int nout, ry_tensor *const *outs, int nin,
                       ry_tensor *const *in, const ry_tensor *pre, ry_kernel_ctx *c);

#endif
