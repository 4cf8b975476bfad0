"""gen_interp_tests.py: fixtures for tests/test_interp.c.

Computes three model forwards with PyTorch (float32) and writes inputs,
weights and expected outputs as .npy under tests/interp/<model>/:
  mlp:      softmax(dense(relu(dense(x, w1) + b1), w2) + b2)
  lstm:     an LSTM cell folded over a list of inputs (gates from one dense
            each for x and h, split into i, f, g, o as TVM's split does)
  treelstm: a binary TreeLSTM over ((x0, x1), (x2, (x3, x4)))
Run from the repository root: python3 tools/gen_interp_tests.py
"""
import os

import numpy as np
import torch

OUT = "tests/interp"


def save(model, name, arr):
    d = os.path.join(OUT, model)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, name + ".npy"), np.ascontiguousarray(arr, dtype=np.float32))


def t(a):
    return torch.from_numpy(a)


def dense(x, w):  # TVM's nn.dense: x (n, k), w (m, k) -> (n, m)
    return x @ w.T


def mlp(rng):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w1 = rng.standard_normal((8, 4)).astype(np.float32) * 0.5
    b1 = rng.standard_normal((8,)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((3, 8)).astype(np.float32) * 0.5
    b2 = rng.standard_normal((3,)).astype(np.float32) * 0.1
    h = torch.relu(dense(t(x), t(w1)) + t(b1))
    out = torch.softmax(dense(h, t(w2)) + t(b2), dim=-1)
    for k, v in dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2).items():
        save("mlp", k, v)
    save("mlp", "out", out.numpy())


def lstm(rng, T=5, I=4, H=3):
    xs = rng.standard_normal((T, 1, I)).astype(np.float32)
    w = rng.standard_normal((4 * H, I)).astype(np.float32) * 0.5
    u = rng.standard_normal((4 * H, H)).astype(np.float32) * 0.5
    b = rng.standard_normal((1, 4 * H)).astype(np.float32) * 0.1
    h = torch.zeros(1, H)
    c = torch.zeros(1, H)
    for i in range(T):
        g = dense(t(xs[i]), t(w)) + dense(h, t(u)) + t(b)
        gi, gf, gg, go = torch.split(g, H, dim=1)
        c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
        h = torch.sigmoid(go) * torch.tanh(c)
    for k, v in dict(xs=xs, w=w, u=u, b=b).items():
        save("lstm", k, v)
    save("lstm", "h", h.numpy())
    save("lstm", "c", c.numpy())


def treelstm(rng, I=4, H=3):
    leaves = rng.standard_normal((5, 1, I)).astype(np.float32)
    wl = rng.standard_normal((3 * H, I)).astype(np.float32) * 0.5
    bl = rng.standard_normal((1, 3 * H)).astype(np.float32) * 0.1
    un = rng.standard_normal((5 * H, 2 * H)).astype(np.float32) * 0.5
    bn = rng.standard_normal((1, 5 * H)).astype(np.float32) * 0.1

    def leaf(x):
        gi, go, gu = torch.split(dense(t(x), t(wl)) + t(bl), H, dim=1)
        c = torch.sigmoid(gi) * torch.tanh(gu)
        return torch.sigmoid(go) * torch.tanh(c), c

    def node(l, r):
        (hl, cl), (hr, cr) = l, r
        g = dense(torch.cat([hl, hr], dim=1), t(un)) + t(bn)
        gi, gfl, gfr, go, gu = torch.split(g, H, dim=1)
        c = (torch.sigmoid(gi) * torch.tanh(gu) + torch.sigmoid(gfl) * cl
             + torch.sigmoid(gfr) * cr)
        return torch.sigmoid(go) * torch.tanh(c), c

    lv = [leaf(leaves[i]) for i in range(5)]
    h, c = node(node(lv[0], lv[1]), node(lv[2], node(lv[3], lv[4])))
    for k, v in dict(leaves=leaves, wl=wl, bl=bl, un=un, bn=bn).items():
        save("treelstm", k, v)
    save("treelstm", "h", h.numpy())
    save("treelstm", "c", c.numpy())


if __name__ == "__main__":
    rng = np.random.default_rng(20261129)
    with torch.no_grad():
        mlp(rng)
        lstm(rng)
        treelstm(rng)
