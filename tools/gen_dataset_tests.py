#!/usr/bin/env python3
"""Generates the fixtures of tests/test_datasets.c under tests/data/:
small IDX files (plain, gzipped, of every element type, and broken ones), a
fake MNIST directory, a small PTB treebank with its expected parse (and broken
treebanks), a text with its expected BPTT windows, .npy dataset arrays, and
reference outputs of xoshiro256** / splitmix64 computed here independently.
Run from the repository root: python3 tools/gen_dataset_tests.py
"""
import gzip
import os
import struct

import numpy as np

OUT = "tests/data"
M64 = (1 << 64) - 1


def save(name, arr):
    np.save(os.path.join(OUT, name), arr)


def write(name, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(OUT, name), mode) as f:
        f.write(data)


def gz(data):
    # mtime=0 so the bytes do not change from run to run
    return gzip.compress(data, compresslevel=9, mtime=0)


# ---- IDX ---------------------------------------------------------------------
def idx_bytes(arr, code):
    fmt = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[code]
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return head + arr.astype(fmt).tobytes()


def gen_idx(rng):
    images = rng.integers(0, 256, size=(6, 5, 4), dtype=np.uint8)
    images[0, 0, 0], images[0, 0, 1] = 0, 255
    labels = np.array([9, 0, 0, 3, 0, 2], dtype=np.uint8)
    t10k_images = rng.integers(0, 256, size=(3, 5, 4), dtype=np.uint8)
    t10k_labels = np.array([9, 2, 1], dtype=np.uint8)
    os.makedirs(os.path.join(OUT, "mnist"), exist_ok=True)
    # train gzipped, t10k plain: the loader must take either
    write("mnist/train-images-idx3-ubyte.gz", gz(idx_bytes(images, 0x08)))
    write("mnist/train-labels-idx1-ubyte.gz", gz(idx_bytes(labels, 0x08)))
    write("mnist/t10k-images-idx3-ubyte", idx_bytes(t10k_images, 0x08))
    write("mnist/t10k-labels-idx1-ubyte", idx_bytes(t10k_labels, 0x08))
    save("mnist_train_x.npy", images.astype(np.float32) / np.float32(255))
    save("mnist_train_y.npy", labels.astype(np.int32))
    save("mnist_t10k_x.npy", t10k_images.astype(np.float32) / np.float32(255))
    save("mnist_t10k_y.npy", t10k_labels.astype(np.int32))
    mean, std = np.float32(0.2860), np.float32(0.3530)
    norm = (images.astype(np.float32) / np.float32(255) - mean) / std
    save("mnist_train_x_norm.npy", norm.reshape(6, 20).astype(np.float32))

    # one file per element type, with its expected tensor
    typed = {
        "u8": (0x08, images[:2], np.uint8),
        "i8": (0x09, rng.integers(-128, 128, size=(3, 2)), np.int8),
        "i16": (0x0B, np.array([[-32768, -1, 0], [1, 300, 32767]]), np.int32),
        "i32": (0x0C, np.array([-2147483648, -7, 0, 65536, 2147483647]), np.int32),
        "f32": (0x0D, rng.standard_normal((2, 2, 3)).astype(np.float32), np.float32),
        "f64": (0x0E, rng.standard_normal((4,)), np.float64),
    }
    for name, (code, arr, dt) in typed.items():
        write(f"idx_{name}.idx", idx_bytes(np.asarray(arr), code))
        save(f"idx_{name}.npy", np.asarray(arr).astype(dt))
    write("idx_u8.idx.gz", gz(idx_bytes(images[:2], 0x08)))

    # broken files; the test checks the offset each message names
    good = idx_bytes(images, 0x08)
    write("bad_magic.idx", b"\x12\x34" + good[2:])
    write("bad_type.idx", bytes([0, 0, 0x0A, 3]) + good[4:])
    write("bad_extra.idx", good + b"\x00\x00\x00")   # 3 bytes more than the dims say
    write("bad_short.idx", good[:16 + 100])          # data cut short
    write("bad_header.idx", good[:10])               # cut inside the dims
    write("bad_tiny.idx", good[:3])
    zipped = gz(good)
    write("bad_trunc.idx.gz", zipped[: len(zipped) // 2])
    corrupt = bytearray(zipped)
    for i in range(12, 40):
        corrupt[i] ^= 0x5A
    write("bad_corrupt.idx.gz", bytes(corrupt))
    write("bad_trailing.idx.gz", zipped + b"junk")
    write("two_members.idx.gz", gz(good[:50]) + gz(good[50:]))
    write("bad_extra.idx.gz", gz(good + b"\x00\x00\x00"))


# ---- treebank ----------------------------------------------------------------------
TREES = [
    "(3 (2 It) (4 (2 's) (3 (2 a) (4 lovely))))",
    "(1 (2 a) (0 film))",
    "(4 lovely)",
    "(2 (2 (2 -LRB-) (2 It)) (2 -RRB-))",
]


def parse(s):
    """Recursive descent over one tree -> nested (label, word) / (label, l, r)."""
    toks = s.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def tree():
        nonlocal pos
        assert toks[pos] == "("
        label = int(toks[pos + 1])
        pos += 2
        if toks[pos] != "(":
            word = toks[pos]
            pos += 2
            return (label, word)
        left = tree()
        right = tree()
        pos += 1
        return (label, left, right)

    return tree()


def gen_treebank():
    # trees spread over lines with blank lines and CRLF in between
    text = TREES[0] + "\n\n" + TREES[1] + "\r\n" + "  " + TREES[2] + "\n" + TREES[3] + "\n"
    write("sst_small.txt", text)
    vocab = ["<unk>"]
    nodes, starts, counts = [], [], []
    for s in TREES:
        start = len(nodes)
        starts.append(start)

        def post(t):
            if len(t) == 2:
                if t[1] not in vocab:
                    vocab.append(t[1])
                nodes.append([t[0], vocab.index(t[1]), -1, -1])
            else:
                left = post(t[1])
                right = post(t[2])
                nodes.append([t[0], -1, left, right])
            return len(nodes) - 1 - start

        post(parse(s))
        counts.append(len(nodes) - start)
    save("sst_small_nodes.npy", np.array(nodes, dtype=np.int32))
    save("sst_small_counts.npy", np.array(counts, dtype=np.int32))
    write("sst_small_vocab.txt", "\n".join(vocab) + "\n")
    # dev with one unknown word, read with the train vocabulary frozen
    write("sst_small_dev.txt", "(2 (2 a) (3 masterpiece))\n")

    broken = {
        "unclosed": "(3 (2 It) (4 lovely))\n(2 (2 a)\n   (2 b)\n",
        "extra_close": "(3 (2 It) (4 lovely)))\n",
        "bad_label": "(3 (2 It) (4 lovely))\n(3 (2 a) (7 b))\n",
        "word_label": "(x (2 a) (2 b))\n",
        "unary": "(3 (2 a) (2 b))\n(1 (2 a))\n",
        "ternary": "(3 (2 a) (2 b) (2 c))\n",
        "two_words": "(2 two words)\n",
        "empty": "\n \n",
        "leaf_eof": "(2 (2 a) (2 b",
        "stray": "(2 (2 a) (2 b))\nhello\n",
        "inner_word": "(2 (2 a) word (2 b))\n",
        "no_child": "(2 (2 a) (3 ))\n",
    }
    for name, text in broken.items():
        write(f"sst_bad_{name}.txt", text)


# ---- text and BPTT ------------------------------------------------------------------
def gen_text():
    text = b"hello world, hello char-rnn!\nthe quick brown fox jumps over the lazy dog\n"
    write("text_small.txt", text)
    symbols = sorted(set(text))
    ids = np.array([symbols.index(c) for c in text], dtype=np.int32)
    save("text_small_symbols.npy", np.array(symbols, dtype=np.uint8))
    save("text_small_ids.npy", ids)
    begin, end, batch, seq = 3, len(text) - 2, 4, 5
    stream = (end - begin - 1) // batch
    nwin = -(-stream // seq)  # keep the partial last window
    xs = []
    for k in range(nwin):
        s = min(seq, stream - k * seq)
        x = np.stack([ids[begin + r * stream + k * seq: begin + r * stream + k * seq + s] for r in range(batch)])
        y = np.stack([ids[begin + r * stream + k * seq + 1: begin + r * stream + k * seq + s + 1] for r in range(batch)])
        save(f"bptt_x{k}.npy", x.astype(np.int32))
        save(f"bptt_y{k}.npy", y.astype(np.int32))
        xs.append(s)
    save("bptt_meta.npy", np.array([begin, end, batch, seq, stream, nwin], dtype=np.int64))


# ---- .npy datasets -----------------------------------------------------------------------
def gen_npy(rng):
    save("npy_x.npy", rng.standard_normal((10, 3)).astype(np.float32))
    save("npy_y.npy", np.arange(10, dtype=np.int32) % 3)
    save("npy_y_short.npy", np.arange(9, dtype=np.int32))
    save("npy_scalar.npy", np.array(1.5, dtype=np.float32))


# ---- the RNG, implemented here independently ----------------------------------------------
def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


class Xoshiro:
    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    def next(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - (M64 % n)
        while True:
            x = self.next()
            if x < limit:
                return x % n

    def permutation(self, n):
        a = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(i + 1)
            a[i], a[j] = a[j], a[i]
        return a


def as_i64(values):
    return np.array(values, dtype=np.uint64).view(np.int64)


def gen_rng():
    for seed in (0, 42, M64):
        r = Xoshiro(seed)
        state = list(r.s)
        outs = [r.next() for _ in range(8)]
        save(f"rng_seed{seed % 1000}_state.npy", as_i64(state))
        save(f"rng_seed{seed % 1000}_next.npy", as_i64(outs))
    r = Xoshiro(42)
    save("rng_uniform42.npy", np.array([(r.next() >> 11) * 2.0 ** -53 for _ in range(6)], dtype=np.float64))
    r = Xoshiro(7)
    save("rng_perm7.npy", np.array(r.permutation(10), dtype=np.int64))
    # the loader's epochs: seed 11, 10 items, one permutation per epoch in a row
    r = Xoshiro(11)
    save("loader_epochs11.npy", np.array([r.permutation(10) for _ in range(3)], dtype=np.int64))
    # a split: seed 5, 10 items, 3 for validation
    r = Xoshiro(5)
    p = r.permutation(10)
    save("split5_train.npy", np.array(sorted(p[:7]), dtype=np.int64))
    save("split5_val.npy", np.array(sorted(p[7:]), dtype=np.int64))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20260101)
    gen_idx(rng)
    gen_treebank()
    gen_text()
    gen_npy(rng)
    gen_rng()


if __name__ == "__main__":
    main()
