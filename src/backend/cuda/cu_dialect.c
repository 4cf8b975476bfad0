/*
 * cu_dialect.c (cuda): the kernel generator's CUDA C dialect
 * (kernel_gen.h), for NVRTC: the table of spellings in which it differs
 * from OpenCL C. Kernels get C linkage so that they are found by name;
 * NVRTC is given --fmad=false, the OpenCL dialect's FP_CONTRACT OFF.
 * Infinity and NaN are spelled through the bit-pattern intrinsics (NVRTC
 * sees no <math.h> macros).
 */
#include "backend/cuda/cu_nvrtc.h"

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

/* float16 as its 16 bits, converted by PTX's cvt (rounding to nearest
 * even, as the CPU's narrowing): no cuda_fp16.h, which NVRTC would need
 * the toolkit's include path for */
static const char prelude[] =
    "__device__ static float ry_h2f(unsigned short h) {\n"
    "    float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n"
    "}\n"
    "__device__ static unsigned short ry_f2h(float f) {\n"
    "    unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n"
    "}\n";

static void half_load(ry_sbuf *b, const char *ptr, const char *index) {
    ry_sbuf_add(b, "ry_h2f(%s[%s])", ptr, index);
}

static void half_store(ry_sbuf *b, const char *ptr, const char *index, const char *value) {
    ry_sbuf_add(b, "%s[%s] = ry_f2h(%s)", ptr, index, value);
}

const ry_dialect ry_cuda_dialect = {
    .name = "cuda",
    .prelude = prelude,
    .kernel = "extern \"C\" __global__ void",
    .global = "",
    .index = "((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)",
    .i64 = "long long",
    .type = cu_type,
    .inf = "__int_as_float(0x7f800000)",
    .nan = "__int_as_float(0x7fc00000)",
    .half_storage = "unsigned short",
    .half_load = half_load,
    .half_store = half_store,
};
