/*
 * half_widen.c (export runtime): float16, held as its bits (uint16_t),
 * widened to float exactly, as the CPU target does (src/tensor/dtype.c);
 * half_narrow.c rounds back. The artifact links nothing of relayc, so the
 * conversion is spelled here again.
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
