#!/usr/bin/env python3
"""Fixtures for tests/test_models.c: small inputs and the outputs PyTorch
computes for every model of models/*.relay (its @loss and @predict) on them.

Parameters are not stored: they are a hash of the element index, made the
same way in the C test (model_param there), so the full-size parameter
tensors (up to 18281 x 300) cost no fixture bytes:

    h = (k * 2654435761 + salt * 40503 + 12345) mod 2^32
    v = (h / 2^32 * 2 - 1) * scale,   scale = 1/sqrt(prod(shape[1:])) for
                                       rank >= 2, else 0.1

with k the flat index and salt the parameter's position among the
parameters (0-based). Expected values are computed in float64.
Run from the repository root: python3 tools/gen_model_tests.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = "tests/models"
rng = np.random.default_rng(20261129)
torch.set_default_dtype(torch.float64)


def hparam(shape, salt):
    size = int(np.prod(shape)) if shape else 1
    k = np.arange(size, dtype=np.uint64)
    h = (k * np.uint64(2654435761) + np.uint64(salt * 40503 + 12345)) % np.uint64(2**32)
    fan = int(np.prod(shape[1:])) if len(shape) >= 2 else 0
    scale = 1.0 / np.sqrt(fan) if len(shape) >= 2 else 0.1
    v = (h.astype(np.float64) / 2.0**32 * 2.0 - 1.0) * scale
    # the C side stores into float32; compute from the same rounded values
    return torch.from_numpy(v.astype(np.float32).astype(np.float64).reshape(shape))


def params(shapes):
    return [hparam(s, i).requires_grad_() for i, s in enumerate(shapes)]


def save_grads(model, loss, ps, suffix=""):
    """The gradient of loss with respect to each parameter j, in two small
    files: gsub_j (every stride-th element of the flat gradient, stride =
    max(1, size // 40)) and gsum_j (sum and sum of squares of all of it)."""
    gs = torch.autograd.grad(loss, ps, allow_unused=True)
    for j, (g, p) in enumerate(zip(gs, ps)):
        g = torch.zeros_like(p) if g is None else g
        flat = g.detach().reshape(-1)
        stride = max(1, flat.numel() // 40)
        save(model, f"gsub{suffix}_{j}", f32(flat[::stride]))
        save(model, f"gsum{suffix}_{j}", f32(torch.stack([flat.sum(), (flat * flat).sum()])))


def save(model, name, a):
    os.makedirs(f"{OUT}/{model}", exist_ok=True)
    if isinstance(a, torch.Tensor):
        a = a.detach().numpy()
    np.save(f"{OUT}/{model}/{name}.npy", a)


def f32(a):
    if isinstance(a, torch.Tensor):
        a = a.detach().numpy()
    return np.asarray(a, dtype=np.float32)


def inputs(model, **arrays):
    """Saves each input and returns it as a float64 (or int64) torch tensor,
    from the stored (float32 / int32) values."""
    out = {}
    for k, a in arrays.items():
        save(model, k, a)
        out[k] = torch.from_numpy(a.astype(np.float64 if a.dtype == np.float32 else np.int64))
    return out


def gen_mlp():
    n = 3
    d = inputs("mlp", x=f32(rng.standard_normal((n, 784))),
               y=rng.integers(0, 10, n).astype(np.int32))
    w1, b1, w2, b2, w3, b3 = params([(256, 784), (256,), (128, 256), (128,), (10, 128), (10,)])
    h = F.relu(F.linear(d["x"], w1, b1))
    h = F.relu(F.linear(h, w2, b2))
    logits = F.linear(h, w3, b3)
    save("mlp", "predict_0", f32(logits))
    loss = F.cross_entropy(logits, d["y"])
    save("mlp", "loss_0", f32(loss))
    save_grads("mlp", loss, [w1, b1, w2, b2, w3, b3])


def gen_lenet():
    n = 2
    d = inputs("lenet", x=f32(rng.standard_normal((n, 1, 28, 28))),
               y=rng.integers(0, 10, n).astype(np.int32))
    ps = c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b, f3w, f3b = params(
        [(6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (120, 400), (120,), (84, 120), (84,),
         (10, 84), (10,)])
    h = F.max_pool2d(F.relu(F.conv2d(d["x"], c1w, c1b, padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, c2w, c2b)), 2)
    h = h.reshape(n, 400)
    h = F.relu(F.linear(h, f1w, f1b))
    h = F.relu(F.linear(h, f2w, f2b))
    logits = F.linear(h, f3w, f3b)
    save("lenet", "predict_0", f32(logits))
    loss = F.cross_entropy(logits, d["y"])
    save("lenet", "loss_0", f32(loss))
    save_grads("lenet", loss, ps)


def gen_char(kind):
    """charlstm / chargru / charrnn with batch 2, window 5 (n, t symbolic)."""
    model = "char" + kind
    n, t, H, V, E = 2, 5, 256, 65, 64
    G = {"lstm": 4, "gru": 3, "rnn": 1}[kind] * H
    arrays = dict(x=rng.integers(0, V, (n, t)).astype(np.int32),
                  y=rng.integers(0, V, (n, t)).astype(np.int32),
                  h0=f32(0.5 * rng.standard_normal((n, H))))
    if kind == "lstm":
        arrays["c0"] = f32(0.5 * rng.standard_normal((n, H)))
    d = inputs(model, **arrays)
    ps = emb, w_ih, w_hh, b_ih, b_hh, w_out, b_out = params(
        [(V, E), (G, E), (G, H), (G,), (G,), (V, H), (V,)])
    # The recurrence by hand, so autograd reaches w_ih, ... themselves; it
    # must agree with PyTorch's own nn.LSTM / nn.GRU / nn.RNN (checked).
    xe = F.embedding(d["x"], emb)
    h = d["h0"]
    c = d.get("c0")
    outs = []
    for i in range(t):
        gi = F.linear(xe[:, i], w_ih, b_ih)
        gh = F.linear(h, w_hh, b_hh)
        if kind == "lstm":
            ig, fg, gg, og = (gi + gh).chunk(4, 1)
            c = torch.sigmoid(fg) * c + torch.sigmoid(ig) * torch.tanh(gg)
            h = torch.sigmoid(og) * torch.tanh(c)
        elif kind == "gru":
            ir, iz, inn = gi.chunk(3, 1)
            hr, hz, hn = gh.chunk(3, 1)
            r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
            nn_ = torch.tanh(inn + r * hn)
            h = (1 - z) * nn_ + z * h
        else:
            h = torch.tanh(gi + gh)
        outs.append(h)
    out = torch.stack(outs, 1)
    st = (h[None], c[None]) if kind == "lstm" else h[None]
    net = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind](
        E, H, batch_first=True)
    with torch.no_grad():
        net.weight_ih_l0.copy_(w_ih)
        net.weight_hh_l0.copy_(w_hh)
        net.bias_ih_l0.copy_(b_ih)
        net.bias_hh_l0.copy_(b_hh)
        state = (d["h0"][None], d["c0"][None]) if kind == "lstm" else d["h0"][None]
        ref, _ = net(xe, state)
        assert torch.allclose(ref, out, atol=1e-12), kind
    logits = F.linear(out, w_out, b_out)                      # (n, t, V)
    loss = F.cross_entropy(logits.reshape(n * t, V), d["y"].reshape(n * t))
    finals = [st[0][0], st[1][0]] if kind == "lstm" else [st[0]]
    save(model, "loss_0", f32(loss))
    save(model, "predict_0", f32(logits))
    save_grads(model, loss, ps)
    for i, s in enumerate(finals):
        save(model, f"loss_{i + 1}", f32(s))
        save(model, f"predict_{i + 1}", f32(s))


# Trees in PTB format; word ids as ry_treebank_parse gives them with a fresh
# vocabulary grown in reading order (1, 2, ...; 0 is <unk>).
TREES = [
    "(3 (2 It) (4 (2 's) (3 (2 a) (4 lovely))))",
    "(1 (2 (2 a) (3 film)) (0 (1 not) (2 lovely)))",
    "(4 lovely)",
    # a word twice in one tree: its two leaves share one leaf state
    "(2 (3 (2 the) (3 film)) (1 (2 the) (1 (3 film) (0 not))))",
]


def parse_tree(s, vocab):
    toks = s.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node():
        nonlocal pos
        assert toks[pos] == "("
        label = int(toks[pos + 1])
        pos += 2
        if toks[pos] != "(":
            word = toks[pos]
            vocab.setdefault(word, len(vocab) + 1)
            pos += 2  # word, ")"
            return ("leaf", vocab[word], label)
        left = node()
        right = node()
        pos += 1
        return ("node", left, right, label)

    return node()


def gen_treelstm():
    ps = emb, wc, bc, wo, bo, u, bu, ws, bs = params(
        [(18281, 300), (150, 300), (150,), (150, 300), (150,), (750, 300), (750,), (5, 150),
         (5,)])

    def encode(t):
        if t[0] == "leaf":
            x = emb[t[1]][None]
            c = F.linear(x, wc, bc)
            h = torch.sigmoid(F.linear(x, wo, bo)) * torch.tanh(c)
            loss = torch.zeros(())
        else:
            hl, cl, ll = encode(t[1])
            hr, cr, lr = encode(t[2])
            g = F.linear(torch.cat([hl, hr], 1), u, bu).split(150, 1)
            i, o, uu, fl, fr = g
            c = (torch.sigmoid(i) * torch.tanh(uu) + torch.sigmoid(fl) * cl
                 + torch.sigmoid(fr) * cr)
            h = torch.sigmoid(o) * torch.tanh(c)
            loss = ll + lr
        scores = F.linear(h, ws, bs)
        label = t[-1]
        loss = loss - F.log_softmax(scores, -1)[0, label]
        return h, c, loss

    vocab = {}
    with open(f"{OUT}/treelstm_trees.txt", "w") as f:
        f.write("\n".join(TREES) + "\n")
    for k, s in enumerate(TREES):
        t = parse_tree(s, vocab)
        h, _, loss = encode(t)
        save("treelstm", f"loss_{k}", f32(loss))
        save_grads("treelstm", loss, ps, suffix=str(k))
        save("treelstm", f"predict_{k}", f32(F.linear(h, ws, bs)))


if __name__ == "__main__":
    gen_mlp()
    gen_lenet()
    for kind in ("lstm", "gru", "rnn"):
        gen_char(kind)
    os.makedirs(OUT, exist_ok=True)
    gen_treelstm()
