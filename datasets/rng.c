/*
 * rng.c: xoshiro256** seeded by splitmix64, and the draws built on it
 * (uniform, bounded integers, normals, shuffles). Deterministic on every
 * platform: only integer arithmetic and IEEE double conversions.
 */
#include <math.h>

#include "relayc/rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void ry_rng_seed(ry_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    /* splitmix64 is a bijection of its counter, so four outputs cannot all
     * be zero; the state is valid for any seed. */
}

uint64_t ry_rng_next(ry_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ry_rng_uniform(ry_rng *r) { return (double)(ry_rng_next(r) >> 11) * 0x1.0p-53; }

/* Rejection keeps only draws below the largest multiple of n, so every
 * residue is equally likely. */
uint64_t ry_rng_below(ry_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = ry_rng_next(r);
    while (x >= limit);
    return x % n;
}

/* Box-Muller: u1 in (0, 1] so the log is finite. */
double ry_rng_normal(ry_rng *r) {
    double u1 = 1.0 - ry_rng_uniform(r);
    double u2 = ry_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ry_rng_shuffle(ry_rng *r, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ry_rng_below(r, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void ry_rng_permutation(ry_rng *r, int64_t n, int64_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = i;
    ry_rng_shuffle(r, out, n);
}

void ry_rng_get_state(const ry_rng *r, uint64_t out[4]) {
    for (int i = 0; i < 4; i++) out[i] = r->s[i];
}

ry_status ry_rng_set_state(ry_rng *r, const uint64_t in[4], ry_error *err) {
    if ((in[0] | in[1] | in[2] | in[3]) == 0)
        return ry_error_at(err, RY_NO_SPAN, "invalid random state: all four words are zero");
    for (int i = 0; i < 4; i++) r->s[i] = in[i];
    return RY_OK;
}
