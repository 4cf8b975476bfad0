/*
 * cu_nvrtc.h (cuda, private): the CUDA C dialect and NVRTC, which need no
 * driver or GPU (the CPU-side tests build every generated kernel with
 * them) and no CUDA header.
 */
#ifndef RELAYC_BACKEND_CUDA_NVRTC_H
#define RELAYC_BACKEND_CUDA_NVRTC_H

#include "backend/kernel_gen.h"
#include "relayc/base.h"

extern const ry_dialect ry_cuda_dialect;

/* PTX of CUDA C source for compute capability arch (90: sm_90) through
 * NVRTC (libnvrtc, loaded on first use), with the options every relayc
 * kernel is built with; *ptx malloc'd. Errors: NVRTC absent, a source
 * that does not compile (the log in the message). */
ry_status ry_nvrtc_ptx(const char *source, int arch, char **ptx, size_t *len, ry_error *err);
/* NVRTC's version (major * 1000 + minor * 10), 0 when absent: part of the
 * PTX cache's key */
int ry_nvrtc_version(void);

#endif
