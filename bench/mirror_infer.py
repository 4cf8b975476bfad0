"""PyTorch mirror of bench/export_infer: inference of the models' @predict.

The same networks as models/mlp.relay and models/lenet.relay (logits, no
softmax), models/charlstm.relay (one step of the LSTM at the batch: the
scores and the new state, from a given state) and models/treelstm.relay
(the root's scores of the PTB tree on line LINE of FILE, --tree FILE:LINE,
by per-node recursion as bench/mirror_treelstm.py evaluates), random
weights, random inputs of the batch, one thread by default, under
torch.inference_mode: eager PyTorch and TorchScript (torch.jit.script, then
torch.jit.freeze and optimize_for_inference; not for the Tree-LSTM, whose
recursion over a tree TorchScript cannot script). Each engine is timed
call by call for --calls calls after --warm warm ones; prints one JSON
line with the median and mean microseconds per call of each. Nothing
asserts a time.
Usage: python3 bench/mirror_infer.py mlp|lenet|charlstm|treelstm [--batch 1] [--calls 2000] [--warm 50]
       [--threads 1] [--tree FILE:LINE]
"""
import statistics
import time
import warnings

import torch
import torch.nn as nn

import mirror_common as mc
import mirror_treelstm as mt


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


class CharLSTMStep(nn.Module):
    """models/charlstm.relay's @predict over a window of one step: embed, the
    LSTM cell (PyTorch's gate order and two biases), decode."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(65, 64)
        self.lstm = nn.LSTM(64, 256, batch_first=True)
        self.out = nn.Linear(256, 65)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(self.embed(x), (h0.unsqueeze(0), c0.unsqueeze(0)))
        return self.out(y), h.squeeze(0), c.squeeze(0)


def tree_predict(model, tree):
    """The root's scores (1, 5), as models/treelstm.relay's @predict."""
    words = []
    mt.leaves(tree, words)
    _, h = model.encode(tree, iter(model.embed(torch.tensor(words)).unbind(0)), [], [])
    return model.classify(h).unsqueeze(0)


def numbered_tree(spec):
    """The PTB tree on line LINE of FILE, its words numbered 1, 2, ... by first
    appearance (relayc run's sst: input and NAME_parse_tree number them so)."""
    path, line = spec.rsplit(":", 1)
    with open(path, encoding="utf-8") as f:
        text = f.read().splitlines()[int(line) - 1]
    tree = mt.parse_tree(text, int(line), path)
    vocab = {}

    def number(t):
        if len(t) == 2:
            return (t[0], vocab.setdefault(t[1], len(vocab) + 1))
        return (t[0], number(t[1]), number(t[2]))

    return number(tree)


MODELS = {"mlp": (mlp, (784,)), "lenet": (lenet, (1, 28, 28))}


def time_calls(fn, x, calls, warm):
    """Microseconds of each of `calls` calls after `warm` untimed ones."""
    for _ in range(warm):
        fn(x)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn(x)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return {"median_us": round(statistics.median(times), 2), "mean_us": round(statistics.fmean(times), 2)}


def main():
    p = mc.base_parser(__doc__.splitlines()[0])
    p.add_argument("name", choices=sorted(MODELS) + ["charlstm", "treelstm"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--warm", type=int, default=50)
    p.add_argument("--tree", default=None, help="treelstm: FILE:LINE of the PTB tree")
    args = p.parse_args()
    mc.setup(args)
    with torch.inference_mode():
        if args.name == "treelstm":
            if not args.tree:
                raise SystemExit("mirror_infer: treelstm needs --tree FILE:LINE")
            model = mt.TreeLSTM(18281, 300, 150, 5, "normal").eval()
            tree = numbered_tree(args.tree)
            eager = time_calls(lambda t: tree_predict(model, t), tree, args.calls, args.warm)
            script = None  # recursion over a tree: TorchScript does not script recursive functions
        else:
            if args.name == "charlstm":
                model = CharLSTMStep().eval()
                x = (torch.randint(0, 65, (args.batch, 1)), torch.zeros(args.batch, 256), torch.zeros(args.batch, 256))
            else:
                make, shape = MODELS[args.name]
                model = make().eval()
                x = (torch.rand((args.batch,) + shape),)
            eager = time_calls(lambda a: model(*a), x, args.calls, args.warm)
            # Deprecated in favour of torch.compile, which needs a C++ compiler
            # at run time; TorchScript is what the issue names.
            warnings.simplefilter("ignore", FutureWarning)
            scripted = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
            script = time_calls(lambda a: scripted(*a), x, args.calls, args.warm)
            want, got = model(*x), scripted(*x)
            want, got = (want,) if torch.is_tensor(want) else want, (got,) if torch.is_tensor(got) else got
            if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(want, got)):
                raise SystemExit("mirror_infer: TorchScript and eager disagree")
    print(mc.json.dumps({"mirror": "infer", "model": args.name, "batch": args.batch, "calls": args.calls,
                         "input": args.tree or "random", "threads": args.threads, "torch": torch.__version__,
                         "eager": eager, "torchscript": script}), flush=True)


if __name__ == "__main__":
    main()
