/*
 * half.c (export runtime): float16 held as its bits (uint16_t), converted
 * to and from float as the CPU target does (src/tensor/dtype.c): exact
 * widening; narrowing to nearest, ties to even, overflow to infinity,
 * NaN kept quiet with its top payload bits. The artifact links nothing
 * of relayc, so the conversion is spelled here again.
 */
#include <stdint.h>
#include <string.h>

static float rt_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact */
        float v = (float)m * 5.9604644775390625e-8f;
        return s ? -v : v;
    }
    u = e == 0x1f ? s | 0x7f800000u | m << 13 : s | (e + 112u) << 23 | m << 13;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* m >> k rounded to nearest, ties to even (k in 1..24). */
static uint32_t rt_f16_round(uint32_t m, unsigned k) {
    uint32_t q = m >> k, r = m & ((1u << k) - 1u), half = 1u << (k - 1);
    return q + (r > half || (r == half && (q & 1u)));
}

static uint16_t rt_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t s = (uint16_t)(u >> 16 & 0x8000u);
    uint32_t e = u >> 23 & 0xffu, m = u & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(s | (m ? 0x7e00u | m >> 13 : 0x7c00u));
    int he = (int)e - 112; /* the half's exponent field, if normal */
    if (he >= 0x1f) return (uint16_t)(s | 0x7c00u);
    if (he <= 0) { /* a half subnormal, or zero */
        unsigned k = (unsigned)(14 - he);
        return e == 0 || k > 24 ? s : (uint16_t)(s | rt_f16_round(m | 0x800000u, k));
    }
    /* a carry out of the mantissa rolls into the exponent, up to infinity */
    return (uint16_t)(s | (((uint32_t)he << 10) + rt_f16_round(m | 0x800000u, 13) - 0x400u));
}
