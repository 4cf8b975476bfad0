"""Shared helpers for the PyTorch mirrors under bench/.

The mirrors are reference programs for issue 4's reported results: each trains
the same model with the same configuration as relayc's C training loop, so the
two can be compared. This file holds what they all need: command-line options
common to all (--threads, --seed), seeding, the Fashion-MNIST IDX reader and
the one-line JSON report. The library itself never uses Python.
"""
import argparse
import gzip
import json
import os
import platform
import random
import struct
import sys
import time

import numpy as np
import torch

FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def base_parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed for torch, numpy and random")
    return p


def setup(args):
    """Applies --threads and --seed; returns a seeded torch.Generator for shuffling."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    g = torch.Generator()
    g.manual_seed(args.seed)
    return g


def read_idx(path):
    """Reads an IDX file (gzipped or not) as a numpy array, checking its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    dtypes = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if data[2] not in dtypes:
        raise ValueError(f"{path}: unknown IDX type 0x{data[2]:02x}")
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=dtypes[data[2]], offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {arr.size} values for dims {dims}")
    return arr.reshape(dims)


def load_fashion(split, directory=FASHION_DIR):
    """Images as float32 (N, 1, 28, 28) in [0, 1] (pixels / 255, no normalization), labels int64."""
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"))
    xt = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return xt, torch.from_numpy(y.astype(np.int64))


def report(name, config, results, out=None):
    """Prints one JSON line (and appends it to `out` when given)."""
    line = json.dumps({"mirror": name, "config": config, "results": results,
                       "env": {"torch": torch.__version__, "python": platform.python_version(),
                               "argv": sys.argv[1:]}}, sort_keys=False)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def init_xavier(model):
    """Xavier/Glorot-uniform weights and zero biases for every Linear and Conv2d."""
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / x.shape[0]


def train_fashion(model, args, gen):
    """SGD(lr, momentum) on mean cross-entropy over batches of args.batch, reshuffled
    every epoch (the last, shorter batch is kept); test accuracy after each epoch.
    Returns the per-epoch records."""
    xtr, ytr = load_fashion("train")
    xte, yte = load_fashion("test")
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    lossf = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    epochs = []
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        t0 = time.perf_counter()
        total, steps = 0.0, 0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        dt = time.perf_counter() - t0
        acc = evaluate(model, xte, yte)
        rec = {"epoch": epoch, "train_loss": round(total / steps, 5), "test_accuracy": round(acc, 4),
               "epoch_seconds": round(dt, 2), "samples_per_s": round(n / dt, 1)}
        print(json.dumps(rec), file=sys.stderr, flush=True)
        epochs.append(rec)
    return epochs


def fashion_args(p, epochs):
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--init", choices=["default", "xavier"], default="default",
                   help="PyTorch's default nn.Linear/Conv2d init, or Xavier-uniform with zero bias")
    p.add_argument("--out", default=None, help="also append the JSON line to this file")


def fashion_results(epochs):
    res = {"epochs": epochs}
    for e in epochs:
        if e["epoch"] in (1, 5):
            res[f"test_accuracy_epoch{e['epoch']}"] = e["test_accuracy"]
    res["mean_epoch_seconds"] = round(sum(e["epoch_seconds"] for e in epochs) / len(epochs), 2)
    res["mean_samples_per_s"] = round(sum(e["samples_per_s"] for e in epochs) / len(epochs), 1)
    return res
