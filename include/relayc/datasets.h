/*
 * datasets.h: data loaders and batching for training from C: IDX files
 * (MNIST, Fashion-MNIST), the PTB-format Stanford Sentiment Treebank (as C
 * trees and as the IR's Tree ADT values), character text for char-level
 * models, .npy arrays, and the seeded shuffling, batching and train /
 * validation splitting they share. Loaders work on tensors and values only;
 * they know nothing of programs, parameters or optimizers.
 *
 * Errors from data files are values: a malformed or truncated file fills
 * the ry_error with the file name and the byte offset (IDX, gzip) or the
 * line and column (treebank) where it went wrong.
 *
 * An epoch of Fashion-MNIST in batches of 64, error checks left out:
 *
 *   ry_tensor *x, *y, *bx, *by;
 *   ry_mnist_load(NULL, "train", NULL, &x, &y, &err);
 *   ry_loader *l;
 *   ry_loader_new(x->shape[0], &(ry_loader_opts){.batch = 64, .shuffle = true, .seed = 1}, &l, &err);
 *   const int64_t *idx;
 *   for (int64_t k; (k = ry_loader_next(l, &idx)) > 0;) {
 *       ry_data_take_rows(x, idx, k, &bx, &err);   // (k, 1, 28, 28) float32
 *       ry_data_take_rows(y, idx, k, &by, &err);   // (k) int32
 *       ... step ...; ry_tensor_release(bx); ry_tensor_release(by);
 *   }
 */
#ifndef RELAYC_DATASETS_H
#define RELAYC_DATASETS_H

#include "relayc/rng.h"
#include "relayc/tensor.h"
#include "relayc/value.h"

RY_BEGIN_API

/* ---- batching --------------------------------------------------------------
 * A loader deals the indices 0..n-1 in batches, in a fresh seeded order each
 * epoch (or in order when shuffle is false). The order of an epoch is a
 * permutation drawn from the loader's own ry_rng, so its state (the RNG words
 * at the start of the epoch, the epoch number and the position) restores the
 * exact sequence of batches after a resume. */
typedef struct ry_loader_opts {
    int64_t batch;   /* >= 1 */
    bool shuffle;
    bool drop_last;  /* drop a last batch smaller than `batch` */
    uint64_t seed;
} ry_loader_opts;

typedef struct ry_loader_state {
    uint64_t rng[4]; /* the loader's RNG before it drew this epoch's order */
    int64_t epoch;   /* 0-based */
    int64_t pos;     /* indices of this epoch already dealt */
} ry_loader_state;

typedef struct ry_loader ry_loader;

/* A loader over n items (n >= 0), at epoch 0, position 0. *out is owned by
 * the caller (ry_loader_free). Errors: batch < 1, n < 0, out of memory. */
ry_status ry_loader_new(int64_t n, const ry_loader_opts *opts, ry_loader **out, ry_error *err);
void ry_loader_free(ry_loader *l); /* NULL is fine */
/* Batches per epoch: n / batch with drop_last, else ceil(n / batch). */
int64_t ry_loader_batches(const ry_loader *l);
/* The next batch: sets *idx to its indices (borrowed, valid until the next
 * call on l) and returns how many. Returns 0 once at the end of an epoch,
 * having already started the next (epoch + 1, newly shuffled). */
int64_t ry_loader_next(ry_loader *l, const int64_t **idx);
void ry_loader_get_state(const ry_loader *l, ry_loader_state *st);
/* Restores a state from ry_loader_get_state (on a loader made with the same
 * n and options). Errors: a position past the epoch's end, a negative epoch,
 * an all-zero RNG state. */
ry_status ry_loader_set_state(ry_loader *l, const ry_loader_state *st, ry_error *err);

/* Rows idx[0..k) of t (along its first axis) gathered into a new tensor of
 * shape (k, t's other dims), owned by the caller. Errors: t a scalar, an
 * index out of range, out of memory. */
ry_status ry_data_take_rows(const ry_tensor *t, const int64_t *idx, int64_t k, ry_tensor **out,
                            ry_error *err);
/* A seeded train / validation split of 0..n-1: the permutation
 * ry_rng_permutation draws from ry_rng_seed(seed); its last nval entries are
 * validation, the rest training, each then sorted ascending. *train (n - nval
 * entries) and *val (nval entries) are owned by the caller (ry_free).
 * Errors: nval outside [0, n], out of memory. */
ry_status ry_data_split(int64_t n, int64_t nval, uint64_t seed, int64_t **train, int64_t **val,
                        ry_error *err);
/* ry_data_split applied to narrays tensors with the same first dimension:
 * train[i] and val[i] are new tensors owned by the caller. On error all
 * outputs are NULL. */
ry_status ry_data_split_tensors(int narrays, ry_tensor *const *arrays, int64_t nval,
                                uint64_t seed, ry_tensor **train, ry_tensor **val, ry_error *err);

/* ---- .npy arrays as a dataset ------------------------------------------------
 * Reads n .npy files (e.g. inputs and labels) into out[0..n), new tensors
 * owned by the caller, checking that each has at least one dimension and
 * that all share the first one (the number of examples). On error all
 * outputs are NULL and err names the file. */
ry_status ry_npy_data_read(int n, const char *const *paths, ry_tensor **out, ry_error *err);

/* ---- IDX (MNIST, Fashion-MNIST) ------------------------------------------------
 * An IDX file: two zero bytes, a type byte, a rank byte, the dims as
 * big-endian uint32, then the big-endian data. Gzipped files are detected by
 * their magic bytes (1f 8b) and inflated with zlib. The tensor's dtype
 * follows the type byte: 0x08 ubyte -> uint8, 0x09 byte -> int8, 0x0B short
 * -> int32 (no int16 dtype), 0x0C int -> int32, 0x0D float -> float32,
 * 0x0E double -> float64. *out is owned by the caller. Errors name the file
 * and the byte offset (of the decompressed data for a gzipped file): bad
 * magic, unknown type, dims not matching the size, a truncated or corrupt
 * gzip stream. */
ry_status ry_idx_read(const char *path, ry_tensor **out, ry_error *err);
ry_status ry_idx_read_mem(const char *name, const void *buf, size_t len, ry_tensor **out,
                          ry_error *err);

/* Where Debian's dataset-fashion-mnist package puts the files, and the
 * training set's pixel mean and standard deviation (of pixel / 255), for
 * ry_mnist_opts. */
#define RY_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define RY_FASHION_MNIST_MEAN 0.2860f
#define RY_FASHION_MNIST_STD 0.3530f

typedef struct ry_mnist_opts {
    bool flatten;     /* images (N, rows*cols) instead of (N, 1, rows, cols) */
    float mean, std;  /* x := (x - mean) / std after scaling; std == 0: no normalization */
} ry_mnist_opts;

/* Reads DIR/SPLIT-images-idx3-ubyte[.gz] and DIR/SPLIT-labels-idx1-ubyte[.gz]
 * (the gzipped name first). dir NULL means RY_FASHION_MNIST_DIR; split is
 * "train" or "t10k"; opts NULL means not flattened, not normalized. Images
 * are float32 scaled to [0, 1] (pixel / 255), labels int32 (N). Both owned by
 * the caller; NULL on error. Errors: missing files, images not uint8 of rank
 * 3, labels not uint8 of rank 1, counts that differ. */
ry_status ry_mnist_load(const char *dir, const char *split, const ry_mnist_opts *opts,
                        ry_tensor **images, ry_tensor **labels, ry_error *err);

/* ---- vocabularies -------------------------------------------------------------
 * Words to dense int32 ids. Id 0 is always the unknown word "<unk>", so an
 * embedding table of ry_vocab_size rows covers every id a lookup returns. */
#define RY_VOCAB_UNK 0

typedef struct ry_vocab ry_vocab;
ry_vocab *ry_vocab_new(void); /* holds "<unk>"; NULL on out-of-memory; free with ry_vocab_free */
void ry_vocab_free(ry_vocab *v); /* NULL is fine */
int32_t ry_vocab_size(const ry_vocab *v);
/* The id of word[0..len), or RY_VOCAB_UNK when absent. */
int32_t ry_vocab_find(const ry_vocab *v, const char *word, size_t len);
/* The id of word[0..len), added with the next id if absent; -1 on out of
 * memory. */
int32_t ry_vocab_add(ry_vocab *v, const char *word, size_t len);
/* The word of id (borrowed, lives as long as v), NULL when out of range. */
const char *ry_vocab_word(const ry_vocab *v, int32_t id);

/* ---- the sentiment treebank (PTB format) ------------------------------------------
 * One tree per line, e.g. `(3 (2 It) (4 (2 's) (3 (2 a) (4 lovely))))`:
 *
 *   tree -> '(' label word ')'          a leaf
 *         | '(' label tree tree ')'     an internal node (binary)
 *   label -> a decimal integer 0..4, word -> any run of bytes other than
 *   whitespace and parentheses (PTB writes them -LRB- and -RRB-)
 *
 * Nodes are stored in post-order (children before parents, left before
 * right), so a bottom-up pass is a loop and the root is the last node. */
#define RY_TREEBANK_LABELS 5

typedef struct ry_tree_node {
    int32_t label;        /* 0..4 */
    int32_t word;         /* vocabulary id for a leaf, -1 for an internal node */
    int32_t left, right;  /* indices into the tree's nodes, -1 for a leaf */
} ry_tree_node;

typedef struct ry_tree {
    int32_t nnodes;       /* 2 * leaves - 1 */
    ry_tree_node *nodes;  /* borrowed from the treebank */
    int32_t line;         /* 1-based line where the tree starts */
} ry_tree;

typedef struct ry_treebank {
    int32_t ntrees;
    ry_tree *trees;
    ry_tree_node *pool;   /* every tree's nodes, back to back */
} ry_treebank;

/* Parses a treebank file. Words are looked up in vocab; with grow_vocab an
 * absent word is added (build the vocabulary on train), without it maps to
 * RY_VOCAB_UNK (dev and test). *out is owned by the caller
 * (ry_treebank_free); vocab stays the caller's. Errors give the line and
 * column: unbalanced parentheses, a bad label, a node that is neither a leaf
 * nor binary, an empty file. */
ry_status ry_treebank_read(const char *path, ry_vocab *vocab, bool grow_vocab,
                           ry_treebank **out, ry_error *err);
ry_status ry_treebank_parse(const char *name, const char *text, size_t len, ry_vocab *vocab,
                            bool grow_vocab, ry_treebank **out, ry_error *err);
void ry_treebank_free(ry_treebank *tb); /* NULL is fine */

/* A tree as an ADT value of the caller's module. The constructors must have
 * this layout (the names are free):
 *
 *   type Tree {
 *     Leaf(int32, int32),        -- word id, label
 *     Node(Tree, Tree, int32),   -- left, right, label
 *   }
 *
 * or the same without the labels (Leaf(int32), Node(Tree, Tree)),
 * where int32 is Tensor[(), int32]: every word and label becomes a scalar
 * int32 tensor. The value is built bottom-up without recursion; *out is a
 * new reference owned by the caller. Errors: constructors of another layout
 * or of two different types, out of memory. */
ry_status ry_tree_to_value(const ry_tree *t, const ry_ctor *leaf, const ry_ctor *node,
                           ry_value **out, ry_error *err);

/* ---- character text ---------------------------------------------------------------
 * A text as int32 symbol ids. The vocabulary is the set of bytes present,
 * numbered in ascending byte order, so the same text always gets the same
 * ids. */
typedef struct ry_text {
    int32_t nsymbols;     /* distinct bytes, 1..256 */
    uint8_t symbol[256];  /* id -> byte, for ids < nsymbols */
    int16_t id_of[256];   /* byte -> id, -1 when the byte is absent */
    int64_t n;            /* length in bytes */
    int32_t *ids;         /* n ids */
} ry_text;

/* Reads a whole file (or buffer) as text. *out owned by the caller
 * (ry_text_free). Errors: cannot read, an empty text. */
ry_status ry_text_read(const char *path, ry_text **out, ry_error *err);
ry_status ry_text_from_mem(const char *name, const void *buf, size_t len, ry_text **out,
                           ry_error *err);
void ry_text_free(ry_text *t); /* NULL is fine */

/* Truncated-BPTT windows over ids[begin..end), as in classic char-rnn: the
 * range is cut into `batch` contiguous streams of length
 * L = (end - begin - 1) / batch, row r reading ids[begin + r*L ..]; window k
 * holds positions [k*seq, k*seq + seq) of every stream as inputs and the
 * following ids as targets, so a row's state carries from window k to k+1.
 *
 *   x[r][t] = ids[begin + r*L + k*seq + t],  y[r][t] = x's next id
 *
 * There are L / seq whole windows, plus one shorter last window when
 * keep_partial and seq does not divide L. */
typedef struct ry_bptt {
    const ry_text *text;  /* borrowed */
    int64_t begin, batch, seq;
    int64_t stream;       /* L */
    int64_t nwindows;
} ry_bptt;

/* Errors: a range outside the text, batch or seq < 1, a range too short to
 * give every row one window (no windows). */
ry_status ry_bptt_init(ry_bptt *b, const ry_text *t, int64_t begin, int64_t end, int64_t batch,
                       int64_t seq, bool keep_partial, ry_error *err);
/* Window k (0 <= k < nwindows) as new int32 tensors x and y of shape
 * (batch, seq_k), owned by the caller. */
ry_status ry_bptt_window(const ry_bptt *b, int64_t k, ry_tensor **x, ry_tensor **y,
                         ry_error *err);

RY_END_API

#endif
