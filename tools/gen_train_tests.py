#!/usr/bin/env python3
"""gen_train_tests.py: fixtures for tests/test_train.c.

A tiny MLP (4-8-3, ReLU, mean cross-entropy) on 64 points drawn around three
centres, and PyTorch's trajectory of four SGD steps (lr 0.1, momentum 0.9)
on the consecutive batches rows [16k, 16k+16): the loss of every step and
the parameters after the last, so the C training step (gradient program +
optimizer) is checked against torch. Also the character text the RNN test
trains on. Writes tests/train/*.npy and tests/train/text.txt.
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "train")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    centres = np.array([[2, 0, 0, 1], [0, 2, 1, 0], [-1, -1, 2, 2]], np.float32)
    y = rng.integers(0, 3, size=64).astype(np.int32)
    x = (centres[y] + 0.5 * rng.standard_normal((64, 4))).astype(np.float32)
    w1 = (rng.standard_normal((8, 4)) * 0.5).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((3, 8)) * 0.5).astype(np.float32)
    b2 = (rng.standard_normal(3) * 0.1).astype(np.float32)
    for name, a in [("x", x), ("y", y), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]:
        np.save(os.path.join(OUT, name + ".npy"), a)

    ps = [torch.tensor(a, requires_grad=True) for a in (w1, b1, w2, b2)]
    opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9)
    losses = []
    for k in range(4):
        xb = torch.tensor(x[16 * k:16 * k + 16])
        yb = torch.tensor(y[16 * k:16 * k + 16]).long()
        h = torch.relu(xb @ ps[0].T + ps[1])
        logits = h @ ps[2].T + ps[3]
        loss = torch.nn.functional.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.save(os.path.join(OUT, "losses.npy"), np.array(losses, np.float64))
    for name, p in zip(("w1", "b1", "w2", "b2"), ps):
        np.save(os.path.join(OUT, "after_" + name + ".npy"), p.detach().numpy())

    # a short, repetitive text: an RNN learns it quickly
    text = ("the cat sat on the mat. the dog sat on the log. " * 12).encode()
    with open(os.path.join(OUT, "text.txt"), "wb") as f:
        f.write(text)


if __name__ == "__main__":
    main()
