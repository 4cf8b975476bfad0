/*
 * cl_dialect.c (opencl): the kernel generator's OpenCL C dialect
 * (kernel_gen.h): the table of spellings every generated or templated
 * kernel of the device layer (src/backend/device/) is written in here.
 */
#include "backend/kernel_gen.h"
#include "backend/opencl/cl_impl.h"

/* float16 without cl_khr_fp16: half pointers through vload_half /
 * vstore_half (OpenCL 1.2 core), the arithmetic in float; vstore_half
 * rounds to nearest even, as the CPU's narrowing does */
static void half_load(ry_sbuf *b, const char *ptr, const char *index) {
    ry_sbuf_add(b, "vload_half(%s, %s)", index, ptr);
}
static void half_store(ry_sbuf *b, const char *ptr, const char *index, const char *value) {
    ry_sbuf_add(b, "vstore_half(%s, %s, %s)", value, index, ptr);
}

const ry_dialect ry_cl_dialect = {
    .name = "opencl",
    /* no contraction into fused multiply-adds: the CPU build has none, so
     * elementwise arithmetic rounds as the CPU rounds it */
    .prelude = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#pragma OPENCL FP_CONTRACT OFF\n",
    .kernel = "__kernel void",
    .global = "__global ",
    .index = "(long)get_global_id(0)",
    .i64 = "long",
    .type = ry_cl_type,
    .inf = "INFINITY",
    .nan = "NAN",
    .half_storage = "half",
    .half_load = half_load,
    .half_store = half_store,
};
