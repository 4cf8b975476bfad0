"""PyTorch mirror of relayc's binary Tree-LSTM on SST fine-grained (issue 4's result).

The constituency Tree-LSTM of Tai et al. (2015), evaluated by per-node
recursion in Python, one tree at a time (as relayc's interpreter walks the
Tree ADT). Vocabulary from train in order of first appearance with id 0 the
unknown word (as ry_vocab / ry_treebank_read), case kept; embeddings 300,
random init normal(0, 0.05) by default (--emb-init uniform: U(-0.05, 0.05)),
trained; memory 150; PyTorch's default nn.Linear init; no dropout. A softmax
classifier at every node, cross-entropy summed over nodes and over the 25 trees
of an update; Adagrad lr 0.05 with weight decay 1e-4 on every parameter but the
embeddings; train shuffled (seeded), one epoch. Reports root fine-grained
accuracy on dev (and the accuracy over all dev nodes) and trees/s.
"""
import json
import re
import sys
import time

import torch
import torch.nn as nn

import mirror_common as mc

SST = "/work/shared/data/sst"
TOKEN = re.compile(r"[()]|[^\s()]+", re.ASCII)


# ---- PTB-format trees ---------------------------------------------------------
# tree := "(" LABEL WORD ")" | "(" LABEL tree tree ")"
# Parsed to (label, word) for a leaf and (label, left, right) for a node.

def parse_tree(line, lineno, path):
    # Only ASCII whitespace separates (as relayc's treebank reader): SST has
    # words like "8\u00a01\\/2" with a no-break space inside.
    toks = TOKEN.findall(line)
    pos = 0

    def fail(msg):
        raise ValueError(f"{path}:{lineno}: {msg}")

    def tree():
        nonlocal pos
        if pos >= len(toks) or toks[pos] != "(":
            fail("expected '('")
        pos += 1
        if pos >= len(toks) or not toks[pos].isdigit():
            fail("expected a label")
        label = int(toks[pos])
        pos += 1
        if pos < len(toks) and toks[pos] != "(":
            word = toks[pos]
            pos += 1
            node = (label, word)
        else:
            left = tree()
            right = tree()
            node = (label, left, right)
        if pos >= len(toks) or toks[pos] != ")":
            fail("expected ')' (only binary trees are accepted)")
        pos += 1
        return node

    t = tree()
    if pos != len(toks):
        fail("text after the tree")
    return t


def read_trees(path):
    with open(path, encoding="utf-8") as f:
        return [parse_tree(line, i + 1, path) for i, line in enumerate(f) if line.strip()]


def build_vocab(trees):
    vocab = {"<unk>": 0}

    def walk(t):
        if len(t) == 2:
            vocab.setdefault(t[1], len(vocab))
        else:
            walk(t[1])
            walk(t[2])

    for t in trees:
        walk(t)
    return vocab


def index_tree(t, vocab):
    """Words to ids (unknown -> 0); nodes keep their labels."""
    if len(t) == 2:
        return (t[0], vocab.get(t[1], 0))
    return (t[0], index_tree(t[1], vocab), index_tree(t[2], vocab))


# ---- the model -----------------------------------------------------------------

class TreeLSTM(nn.Module):
    """leaf:  c = W_c x + b_c;  h = sigmoid(W_o x + b_o) * tanh(c)
    node:  [i; f_l; f_r; o; u] = U [h_l; h_r] + b           (5*mem)
           c = sigmoid(i) * tanh(u) + sigmoid(f_l) * c_l + sigmoid(f_r) * c_r
           h = sigmoid(o) * tanh(c)
    every node: logits = W_s h + b_s (5 classes)"""

    def __init__(self, nvocab, dim, mem, nclass, emb_init):
        super().__init__()
        self.mem = mem
        # Sparse gradients: Adagrad then touches only the rows a batch used, which
        # is exactly the dense update (a zero gradient leaves a row and its sum
        # unchanged) without a 18k x 300 dense gradient per tree.
        self.embed = nn.Embedding(nvocab, dim, sparse=True)
        if emb_init == "normal":
            nn.init.normal_(self.embed.weight, 0.0, 0.05)
        else:
            nn.init.uniform_(self.embed.weight, -0.05, 0.05)
        self.leaf_c = nn.Linear(dim, mem)
        self.leaf_o = nn.Linear(dim, mem)
        self.node = nn.Linear(2 * mem, 5 * mem)
        self.classify = nn.Linear(mem, nclass)

    def encode(self, t, xs, hs, labels):
        """Returns (c, h) of tree t (each (mem,)); appends every node's h and label.
        xs is an iterator over the embeddings of the tree's words, left to right."""
        if len(t) == 2:
            x = next(xs)
            c = self.leaf_c(x)
            h = torch.sigmoid(self.leaf_o(x)) * torch.tanh(c)
        else:
            cl, hl = self.encode(t[1], xs, hs, labels)
            cr, hr = self.encode(t[2], xs, hs, labels)
            i, fl, fr, o, u = self.node(torch.cat([hl, hr])).split(self.mem)
            c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
            h = torch.sigmoid(o) * torch.tanh(c)
        hs.append(h)
        labels.append(t[0])
        return c, h

    def forward(self, t):
        """Logits of every node (root last) and their labels."""
        words = []
        leaves(t, words)
        hs, labels = [], []
        self.encode(t, iter(self.embed(torch.tensor(words)).unbind(0)), hs, labels)
        return self.classify(torch.stack(hs)), torch.tensor(labels)


def leaves(t, out):
    """The word ids of t, left to right."""
    if len(t) == 2:
        out.append(t[1])
    else:
        leaves(t[1], out)
        leaves(t[2], out)


def evaluate(model, trees):
    root = nodes = total = 0
    with torch.no_grad():
        for t in trees:
            logits, labels = model(t)
            pred = logits.argmax(1)
            root += int(pred[-1] == labels[-1])
            nodes += int((pred == labels).sum())
            total += len(labels)
    return root / len(trees), nodes / total


def main():
    p = mc.base_parser("PyTorch mirror of relayc's Tree-LSTM on SST")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--trees-per-update", type=int, default=25)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--mem", type=int, default=150)
    p.add_argument("--dim", type=int, default=300)
    p.add_argument("--emb-init", choices=["normal", "uniform"], default="normal")
    p.add_argument("--limit", type=int, default=0, help="train on the first N shuffled trees only (0: all)")
    p.add_argument("--data", default=SST)
    p.add_argument("--out", default=None, help="also append the JSON line to this file")
    args = p.parse_args()
    gen = mc.setup(args)

    train_raw = read_trees(f"{args.data}/train.txt")
    vocab = build_vocab(train_raw)
    train = [index_tree(t, vocab) for t in train_raw]
    dev = [index_tree(t, vocab) for t in read_trees(f"{args.data}/dev.txt")]

    model = TreeLSTM(len(vocab), args.dim, args.mem, 5, args.emb_init)
    rest = [p_ for n, p_ in model.named_parameters() if not n.startswith("embed.")]
    opt = torch.optim.Adagrad([{"params": [model.embed.weight], "weight_decay": 0.0},
                               {"params": rest, "weight_decay": args.weight_decay}], lr=args.lr)
    lossf = nn.CrossEntropyLoss(reduction="sum")
    epochs = []
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(train), generator=gen).tolist()
        if args.limit:
            order = order[:args.limit]
        t0 = time.perf_counter()
        total, nnodes = 0.0, 0
        for b in range(0, len(order), args.trees_per_update):
            opt.zero_grad(set_to_none=True)
            loss = 0.0
            for j in order[b:b + args.trees_per_update]:
                logits, labels = model(train[j])
                loss = loss + lossf(logits, labels)
                nnodes += len(labels)
            loss.backward()
            opt.step()
            total += loss.item()
            done = min(b + args.trees_per_update, len(order))
            if done % 1000 < args.trees_per_update or done == len(order):
                el = time.perf_counter() - t0
                print(json.dumps({"epoch": epoch, "trees": done, "loss_per_node": round(total / nnodes, 4),
                                  "elapsed_s": round(el, 1),
                                  "projected_epoch_s": round(el * len(order) / done, 1)}),
                      file=sys.stderr, flush=True)
        dt = time.perf_counter() - t0
        te = time.perf_counter()
        root, allnodes = evaluate(model, dev)
        rec = {"epoch": epoch, "trees": len(order), "train_loss_per_node": round(total / nnodes, 4),
               "dev_root_accuracy": round(root, 4), "dev_all_nodes_accuracy": round(allnodes, 4),
               "epoch_seconds": round(dt, 1), "trees_per_s": round(len(order) / dt, 1),
               "dev_eval_seconds": round(time.perf_counter() - te, 1)}
        print(json.dumps(rec), file=sys.stderr, flush=True)
        epochs.append(rec)
    config = {"model": f"binary tree-lstm (Tai et al. 2015), embed {args.dim}, mem {args.mem}, 5 classes",
              "data": "sst fine-grained (PTB), vocab from train, <unk>=0", "vocab": len(vocab),
              "train_trees": len(train), "dev_trees": len(dev), "embedding_init": f"{args.emb_init} 0.05",
              "linear_init": "pytorch default", "dropout": 0, "loss": "cross-entropy summed over nodes and trees",
              "optimizer": "adagrad", "lr": args.lr, "weight_decay_non_embedding": args.weight_decay,
              "trees_per_update": args.trees_per_update, "epochs": args.epochs, "limit": args.limit,
              "evaluation": "per-node python recursion, one tree at a time",
              "threads": args.threads, "seed": args.seed}
    results = {"epochs": epochs, "dev_root_accuracy": epochs[-1]["dev_root_accuracy"],
               "trees_per_s": epochs[-1]["trees_per_s"]}
    mc.report("treelstm", config, results, args.out)


if __name__ == "__main__":
    main()
