/*
 * vocab.c: a word -> int32 id table: an array of owned words indexed by id,
 * and an open-addressing hash table (FNV-1a, linear probing, kept at most
 * half full) from word to id. Id 0 is "<unk>".
 */
#include <string.h>

#include "relayc/datasets.h"

struct ry_vocab {
    int32_t n, cap;     /* words, and room in words[] */
    char **words;
    size_t *lens;       /* words may hold NUL bytes, so lengths are kept */
    int32_t *slots;     /* hash slot -> id, -1 when empty */
    size_t nslots;      /* a power of two */
};

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* The slot holding word, or the empty slot where it would go. */
static size_t probe(const ry_vocab *v, const char *w, size_t n) {
    size_t mask = v->nslots - 1, i = (size_t)fnv1a(w, n) & mask;
    for (;;) {
        int32_t id = v->slots[i];
        if (id < 0) return i;
        if (v->lens[id] == n && memcmp(v->words[id], w, n) == 0) return i;
        i = (i + 1) & mask;
    }
}

static bool rehash(ry_vocab *v, size_t nslots) {
    int32_t *s = ry_malloc(nslots * sizeof *s);
    if (!s) return false;
    ry_free(v->slots);
    v->slots = s;
    v->nslots = nslots;
    for (size_t i = 0; i < nslots; i++) s[i] = -1;
    for (int32_t id = 0; id < v->n; id++) s[probe(v, v->words[id], v->lens[id])] = id;
    return true;
}

ry_vocab *ry_vocab_new(void) {
    ry_vocab *v = ry_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->cap = 64;
    v->words = ry_malloc((size_t)v->cap * sizeof *v->words);
    v->lens = ry_malloc((size_t)v->cap * sizeof *v->lens);
    if (!v->words || !v->lens || !rehash(v, 128) || ry_vocab_add(v, "<unk>", 5) != RY_VOCAB_UNK) {
        ry_vocab_free(v);
        return NULL;
    }
    return v;
}

void ry_vocab_free(ry_vocab *v) {
    if (!v) return;
    for (int32_t i = 0; i < v->n; i++) ry_free(v->words[i]);
    ry_free(v->words);
    ry_free(v->lens);
    ry_free(v->slots);
    ry_free(v);
}

int32_t ry_vocab_size(const ry_vocab *v) { return v->n; }

int32_t ry_vocab_find(const ry_vocab *v, const char *word, size_t len) {
    int32_t id = v->slots[probe(v, word, len)];
    return id < 0 ? RY_VOCAB_UNK : id;
}

int32_t ry_vocab_add(ry_vocab *v, const char *word, size_t len) {
    size_t slot = probe(v, word, len);
    if (v->slots[slot] >= 0) return v->slots[slot];
    if (v->n == INT32_MAX) return -1;
    /* keep the table at most half full so probes stay short (and end) */
    if ((size_t)(v->n + 1) * 2 > v->nslots) {
        if (!rehash(v, v->nslots * 2)) return -1;
        slot = probe(v, word, len);
    }
    if (v->n == v->cap) {
        int32_t ncap = v->cap > INT32_MAX / 2 ? INT32_MAX : v->cap * 2;
        char **w = ry_realloc(v->words, (size_t)ncap * sizeof *w);
        if (!w) return -1;
        v->words = w;
        size_t *l = ry_realloc(v->lens, (size_t)ncap * sizeof *l);
        if (!l) return -1;
        v->lens = l;
        v->cap = ncap;
    }
    char *copy = ry_malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, word, len);
    copy[len] = '\0';
    v->words[v->n] = copy;
    v->lens[v->n] = len;
    v->slots[slot] = v->n++;
    return v->n - 1;
}

const char *ry_vocab_word(const ry_vocab *v, int32_t id) {
    return id >= 0 && id < v->n ? v->words[id] : NULL;
}
