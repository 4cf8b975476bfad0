/*
 * cu_impl.h (cuda, private): what the CUDA target's files share. The
 * toolkit's libraries are loaded with dlopen when first needed, so a
 * relayc built with the toolkit runs unchanged on a machine without it or
 * without a driver (the CUDA target then says why it is absent).
 */
#ifndef RELAYC_BACKEND_CUDA_IMPL_H
#define RELAYC_BACKEND_CUDA_IMPL_H

#include "backend/kernel_gen.h"
#include "relayc/base.h"

extern const ry_dialect ry_cuda_dialect;

/* PTX of CUDA C source for compute capability arch (90: sm_90) through
 * NVRTC (libnvrtc, loaded on first use), with the options every relayc
 * kernel is built with; *ptx malloc'd. Errors: NVRTC absent, a source
 * that does not compile (the log in the message). */
ry_status ry_nvrtc_ptx(const char *source, int arch, char **ptx, size_t *len, ry_error *err);

#endif
