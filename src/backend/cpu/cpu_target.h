/*
 * cpu_target.h: what the CPU target's files give its target value
 * (target.c): the kernel table (kernels.c), the caching allocator
 * (cpu_alloc.c) and the training kernels (train_kernels.c, with the
 * optimizers' rules in update_*.c). Private to src/backend/cpu/.
 */
#ifndef RELAYC_BACKEND_CPU_TARGET_H
#define RELAYC_BACKEND_CPU_TARGET_H

#include "backend/target.h"

/* kernels.c */
const ry_kernel *ry_cpu_kernel(const ry_op *op);

/* cpu_alloc.c (target.h's memory functions) */
ry_allocator *ry_cpu_result_allocator(void);
ry_pool *ry_cpu_pool_new(void);
ry_allocator *ry_cpu_pool_allocator(ry_pool *p);
void ry_cpu_pool_close(ry_pool *p);
long ry_cpu_pool_kept(ry_pool *p);
size_t ry_cpu_capacity(const ry_tensor *t);

/* train_kernels.c (target.h's training kernels) */
void ry_cpu_update(const ry_optim_config *c, const ry_update_args *a);
int64_t ry_cpu_grad_scan(const ry_tensor *t, const int64_t *rows, int64_t nrows, double *norm);
bool ry_cpu_grad_add(ry_tensor *d, const ry_tensor *x, int64_t lo_d, int64_t lo_x, int64_t n,
                     bool first);
void ry_cpu_grad_clip(ry_tensor *t, int64_t lo, int64_t n, double c);
void ry_cpu_grad_zero(ry_tensor *t, int64_t lo, int64_t n);
void ry_cpu_grad_scale(ry_tensor *t, int64_t lo, int64_t n, double c);

#endif
