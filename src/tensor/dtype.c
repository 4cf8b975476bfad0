/*
 * dtype.c: the ten element types (their TVM names and sizes), IEEE half
 * precision <-> single precision conversion, and device names.
 *
 * Conversions of whole tensors live with the kernels; this file only knows
 * one element at a time.
 */
#include <stdio.h>
#include <string.h>

#include "relayc/tensor.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[RY_DTYPE_COUNT] = {
    [RY_FLOAT32] = {"float32", 4}, [RY_FLOAT64] = {"float64", 8},
    [RY_FLOAT16] = {"float16", 2}, [RY_INT8] = {"int8", 1},
    [RY_INT32] = {"int32", 4},     [RY_INT64] = {"int64", 8},
    [RY_UINT8] = {"uint8", 1},     [RY_BOOL] = {"bool", 1},
    [RY_INT16] = {"int16", 2},     [RY_UINT16] = {"uint16", 2},
};

static bool valid(ry_dtype d) { return (unsigned)d < RY_DTYPE_COUNT; }

size_t ry_dtype_size(ry_dtype d) { return valid(d) ? dtypes[d].size : 0; }

const char *ry_dtype_name(ry_dtype d) { return valid(d) ? dtypes[d].name : "invalid"; }

/* s need not be NUL-terminated: exactly n bytes must spell a name. */
bool ry_dtype_parse(const char *s, size_t n, ry_dtype *out) {
    if (!s) return false;
    for (int d = 0; d < RY_DTYPE_COUNT; d++) {
        if (strlen(dtypes[d].name) == n && memcmp(dtypes[d].name, s, n) == 0) {
            if (out) *out = (ry_dtype)d;
            return true;
        }
    }
    return false;
}

bool ry_dtype_is_float(ry_dtype d) { return d == RY_FLOAT16 || d == RY_FLOAT32 || d == RY_FLOAT64; }

bool ry_dtype_is_int(ry_dtype d) {
    return d == RY_INT8 || d == RY_INT16 || d == RY_INT32 || d == RY_INT64 || d == RY_UINT8 ||
           d == RY_UINT16;
}

const char *ry_device_name(ry_device d) {
    static _Thread_local char buf[32];
    static const char *const kinds[] = {"cpu", "opencl", "cuda"};
    if (d.kind == RY_DEVICE_CPU) return "cpu";
    if ((unsigned)d.kind >= sizeof kinds / sizeof *kinds) return "unknown";
    snprintf(buf, sizeof buf, "%s:%d", kinds[d.kind], d.id);
    return buf;
}

/* ---- half precision ----------------------------------------------------
 * half:   1 sign | 5 exponent (bias 15)  | 10 mantissa
 * single: 1 sign | 8 exponent (bias 127) | 23 mantissa
 * Bits are moved through memcpy so no aliasing rule is bent. */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ry_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or nan keeping its payload (quiet bit included) */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return bits_f32(sign); /* signed zero */
        /* Subnormal: value = man * 2^-24, exact in single precision. */
        float v = (float)man * bits_f32(0x33800000u); /* 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13)); /* 112 = 127 - 15 */
}

/* Rounds the 24-bit significand (with implicit one) shifted right by `shift`
 * to nearest, ties to even. The carry out of the mantissa bumps the exponent
 * naturally because the caller adds the result to the exponent bits. */
static uint32_t round_shift(uint32_t m, unsigned shift) {
    if (shift >= 32) return 0;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

uint16_t ry_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) {
        if (man == 0) return sign | 0x7c00u; /* inf */
        /* nan: keep the top payload bits, and stay a nan (quiet) */
        return sign | 0x7e00u | (uint16_t)(man >> 13);
    }
    int e = (int)exp - 127 + 15; /* half exponent field if normal */
    if (e >= 0x1f) return sign | 0x7c00u; /* overflow to inf */
    if (e <= 0) {
        /* Subnormal half (or zero): value = q * 2^-24 with
         * q = (1.man) * 2^(exp-127+24), i.e. significand >> (126 - exp - 23 + ...) */
        if (exp == 0) return sign; /* single subnormals are far below half's range */
        uint32_t m = man | 0x800000u;
        unsigned shift = (unsigned)(14 - e); /* 13 for mantissa width + (1 - e) */
        if (shift > 24) return sign;         /* below half the smallest subnormal */
        return sign | (uint16_t)round_shift(m, shift);
    }
    /* Normal: drop 13 mantissa bits with rounding; a carry may roll into the
     * exponent and up to inf, which is the right answer. */
    uint32_t r = ((uint32_t)e << 10) + round_shift(man | 0x800000u, 13) - 0x400u;
    return sign | (uint16_t)r;
}
