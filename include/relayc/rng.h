/*
 * rng.h: the library's seeded random number generator: xoshiro256** with
 * its 256-bit state seeded by splitmix64 (Blackman and Vigna's reference
 * algorithms). Its whole state is four uint64 words that a checkpoint stores
 * and restores, so a resumed run draws exactly the numbers it would have.
 * Shuffling, splits, initializers and dropout masks all draw from it.
 */
#ifndef RELAYC_RNG_H
#define RELAYC_RNG_H

#include "relayc/base.h"

RY_BEGIN_API

typedef struct ry_rng {
    uint64_t s[4]; /* never all zero */
} ry_rng;

/* s[i] = the i-th output of splitmix64 started at seed. Any seed is fine. */
void ry_rng_seed(ry_rng *r, uint64_t seed);
/* The next 64 random bits (xoshiro256**). */
uint64_t ry_rng_next(ry_rng *r);
/* Uniform in [0, 1): the top 53 bits of one draw. */
double ry_rng_uniform(ry_rng *r);
/* Uniform in [0, n) without modulo bias (rejection); n == 0 returns 0. */
uint64_t ry_rng_below(ry_rng *r, uint64_t n);
/* Standard normal by Box-Muller: two draws per call, nothing cached, so the
 * four state words stay the whole state. */
double ry_rng_normal(ry_rng *r);
/* Fisher-Yates, from the last element down: a[i] swaps with a[below(i+1)]. */
void ry_rng_shuffle(ry_rng *r, int64_t *a, int64_t n);
/* out[0..n) := a uniformly random permutation of 0..n-1. */
void ry_rng_permutation(ry_rng *r, int64_t n, int64_t *out);

/* The state as four words, for checkpoints. */
void ry_rng_get_state(const ry_rng *r, uint64_t out[4]);
/* Restores a saved state; an all-zero state (which xoshiro can never leave)
 * is rejected as corrupt. */
ry_status ry_rng_set_state(ry_rng *r, const uint64_t in[4], ry_error *err);

RY_END_API

#endif
