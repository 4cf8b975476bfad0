/*
 * cu_dialect.c (cuda): the kernel generator's CUDA C dialect
 * (kernel_gen.h), for NVRTC: the table of spellings in which it differs
 * from OpenCL C. Kernels get C linkage so that they are found by name;
 * NVRTC is given --fmad=false, the OpenCL dialect's FP_CONTRACT OFF.
 * Infinity and NaN are spelled through the bit-pattern intrinsics (NVRTC
 * sees no <math.h> macros).
 */
#include "backend/cuda/cu_impl.h"

static const char *cu_type(ry_dtype dt) {
    switch (dt) {
    case RY_FLOAT32: return "float";
    case RY_FLOAT64: return "double";
    case RY_INT8: return "signed char";
    case RY_INT16: return "short";
    case RY_UINT16: return "unsigned short";
    case RY_INT32: return "int";
    case RY_INT64: return "long long";
    case RY_UINT8:
    case RY_BOOL: return "unsigned char";
    default: return NULL;
    }
}

const ry_dialect ry_cuda_dialect = {
    .name = "cuda",
    .prelude = "",
    .kernel = "extern \"C\" __global__ void",
    .global = "",
    .index = "((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)",
    .i64 = "long long",
    .type = cu_type,
    .inf = "__int_as_float(0x7f800000)",
    .nan = "__int_as_float(0x7fc00000)",
};
