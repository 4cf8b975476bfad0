/*
 * half_narrow.c (export runtime): float rounded to float16's bits as the
 * CPU target does (src/tensor/dtype.c): to nearest, ties to even,
 * overflow to infinity, NaN kept quiet with its top payload bits.
 */
#include <stdint.h>
#include <string.h>

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
