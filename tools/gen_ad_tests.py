"""gen_ad_tests.py: golden gradients from PyTorch for tests/test_ad.c.

Writes tests/ad/<case>/in_<param>.npy and grad_<param>.npy (float64) for
models whose relayc text is in test_ad.c: the two-layer perceptron with a
log-softmax loss (mlp), a TreeLSTM over a three-leaf tree (treelstm) and an
LSTM run over a list of four inputs by recursion (lstm).
Each gradient is of the sum of the model's outputs, as ry_grad seeds them.
Run from the repository root: python3 tools/gen_ad_tests.py
"""
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(7)


def save(case, tensors, grads):
    d = os.path.join("tests", "ad", case)
    os.makedirs(d, exist_ok=True)
    for name, t in tensors.items():
        np.save(os.path.join(d, f"in_{name}.npy"), t.detach().numpy())
    for name, g in grads.items():
        np.save(os.path.join(d, f"grad_{name}.npy"), g.numpy())


def params(shapes):
    return {n: torch.tensor(rng.uniform(-1, 1, s), requires_grad=True) for n, s in shapes.items()}


def mlp():
    p = params({"x": (4, 5), "w1": (6, 5), "b1": (6,), "w2": (3, 6), "b2": (3,)})
    h = torch.tanh(p["x"] @ p["w1"].T + p["b1"])
    z = torch.log_softmax(h @ p["w2"].T + p["b2"], dim=1)
    loss = -z.mean()
    loss.backward()
    save("mlp", p, {n: t.grad for n, t in p.items()})


def cell(x, h, c, wi, ui):
    i, f, g, o = torch.split(x @ wi.T + h @ ui.T, 4, dim=1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


def treelstm():
    p = params({"e1": (1, 3), "e2": (1, 3), "e3": (1, 3), "wi": (16, 3), "ui": (16, 4)})
    z, x0 = torch.zeros(1, 4), torch.zeros(1, 3)

    def leaf(e):
        return cell(e, z, z, p["wi"], p["ui"])

    def node(a, b):
        return cell(x0, a[0] + b[0], a[1] + b[1], p["wi"], p["ui"])

    h, _ = node(leaf(p["e1"]), node(leaf(p["e2"]), leaf(p["e3"])))
    h.sum().backward()
    save("treelstm", p, {n: t.grad for n, t in p.items()})


def lstm():
    p = params({"x1": (1, 3), "x2": (1, 3), "x3": (1, 3), "x4": (1, 3), "wi": (16, 3), "ui": (16, 4)})
    h, c = torch.zeros(1, 4), torch.zeros(1, 4)
    for name in ("x1", "x2", "x3", "x4"):
        h, c = cell(p[name], h, c, p["wi"], p["ui"])
    (h.sum() + c.sum()).backward()
    save("lstm", p, {n: t.grad for n, t in p.items()})


if __name__ == "__main__":
    mlp()
    treelstm()
    lstm()
