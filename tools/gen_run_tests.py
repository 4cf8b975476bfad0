#!/usr/bin/env python3
"""gen_run_tests.py: inputs and expected outputs for the programs in
tests/run/, computed independently with numpy and torch. Writes
tests/run/NAME/in_<param>.npy and tests/run/NAME/out_<k>.npy (the result
flattened depth-first, as `relayc run` writes it). Run from the repository
root; the outputs are committed."""
import os
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261129)
ROOT = "tests/run"


def save(name, inputs, outputs):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    for k, v in inputs.items():
        np.save(os.path.join(d, f"in_{k}.npy"), v)
    for i, v in enumerate(outputs):
        np.save(os.path.join(d, f"out_{i}.npy"), np.asarray(v))


def rand(*shape, scale=0.5, dtype=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def t(a):
    return torch.from_numpy(np.asarray(a))


def mlp():
    p = dict(x=rand(4, 64, scale=1.0), w1=rand(32, 64, scale=0.2), b1=rand(32, scale=0.1),
             w2=rand(16, 32, scale=0.2), b2=rand(16, scale=0.1), w3=rand(10, 16, scale=0.2), b3=rand(10, scale=0.1))
    q = {k: t(v) for k, v in p.items()}
    h = F.relu(F.linear(q["x"], q["w1"], q["b1"]))
    h = F.relu(F.linear(h, q["w2"], q["b2"]))
    y = F.log_softmax(F.linear(h, q["w3"], q["b3"]), dim=-1)
    save("mlp", p, [y.numpy()])


def lenet():
    p = dict(x=rand(2, 1, 28, 28, scale=1.0), c1w=rand(6, 1, 5, 5, scale=0.3), c1b=rand(6, scale=0.1),
             c2w=rand(16, 6, 5, 5, scale=0.1), c2b=rand(16, scale=0.1), f1w=rand(120, 400, scale=0.05),
             f1b=rand(120, scale=0.1), f2w=rand(84, 120, scale=0.1), f2b=rand(84, scale=0.1),
             f3w=rand(10, 84, scale=0.1), f3b=rand(10, scale=0.1))
    q = {k: t(v) for k, v in p.items()}
    h = F.max_pool2d(F.relu(F.conv2d(q["x"], q["c1w"], q["c1b"], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, q["c2w"], q["c2b"])), 2)
    h = h.flatten(1)
    h = F.relu(F.linear(h, q["f1w"], q["f1b"]))
    h = F.relu(F.linear(h, q["f2w"], q["f2b"]))
    y = F.linear(h, q["f3w"], q["f3b"])
    save("lenet", p, [y.numpy()])


def lstm_list():
    p = dict(xs=rand(5, 1, 8, scale=1.0), wi=rand(24, 8), wh=rand(24, 6), b=rand(24, scale=0.1))
    cell = torch.nn.LSTMCell(8, 6)
    with torch.no_grad():
        cell.weight_ih.copy_(t(p["wi"]))
        cell.weight_hh.copy_(t(p["wh"]))
        cell.bias_ih.copy_(t(p["b"]))
        cell.bias_hh.zero_()
        h = torch.zeros(1, 6)
        c = torch.zeros(1, 6)
        for i in range(5):
            h, c = cell(t(p["xs"][i]), (h, c))
    save("lstm_list", p, [h.numpy(), c.numpy()])


def treelstm():
    p = dict(emb=rand(10, 6, scale=1.0), wc=rand(4, 6), bc=rand(4, scale=0.1), wo=rand(4, 6),
             bo=rand(4, scale=0.1), u=rand(20, 8), bu=rand(20, scale=0.1))
    q = {k: t(v).double() for k, v in p.items()}

    def leaf(i):
        x = q["emb"][i:i + 1]
        c = F.linear(x, q["wc"], q["bc"])
        h = torch.sigmoid(F.linear(x, q["wo"], q["bo"])) * torch.tanh(c)
        return h, c

    def node(l, r):
        g = F.linear(torch.cat([l[0], r[0]], 1), q["u"], q["bu"])
        i, o, u, fl, fr = g.split(4, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * l[1] + torch.sigmoid(fr) * r[1]
        return torch.sigmoid(o) * torch.tanh(c), c

    def tree(tr):
        if isinstance(tr, int):
            s = leaf(tr)
            return s, s[0]
        (sa, ha), (sb, hb) = tree(tr[0]), tree(tr[1])
        s = node(sa, sb)
        return s, ha + hb + s[0]

    s, total = tree(((3, 1), (4, (1, 5))))
    save("treelstm", p, [s[0].float().numpy(), total.float().numpy()])


def higher_order():
    p = dict(a=rand(3, scale=1.0), b=rand(3, scale=1.0), s=rand(3, scale=1.0))
    f = lambda v: np.exp(v.astype(np.float64)) * p["s"]
    mapped = sum(f(v) for v in (p["a"], p["b"], p["s"]))
    plain = p["a"].astype(np.float64) + p["b"] + p["s"]
    save("higher_order", p, [mapped.astype(np.float32), plain.astype(np.float32)])


def refs():
    x = rand(2, 2, scale=1.0, dtype=np.float64)
    acc = x.copy()
    for _ in range(10):
        acc = acc * 0.5 + x
    save("refs", dict(x=x), [acc, np.array(10, dtype=np.int32)])


def deep_recursion():
    n = 100000
    save("deep_recursion", dict(n=np.array(n, dtype=np.int32)), [np.array(n * (n + 1) / 2, dtype=np.float64)])


def symbolic():
    p = dict(x=rand(5, 4, scale=1.0), w=rand(3, 4, scale=1.0))
    y = np.maximum(p["x"].astype(np.float64) @ p["w"].T.astype(np.float64), 0)
    save("symbolic", p, [y.astype(np.float32), y.sum(1, keepdims=True).astype(np.float32)])


if __name__ == "__main__":
    for gen in (mlp, lenet, lstm_list, treelstm, higher_order, refs, deep_recursion, symbolic):
        gen()
