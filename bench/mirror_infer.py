"""PyTorch mirror of bench/export_infer: inference of the MLP's and LeNet's @predict.

The same networks as models/mlp.relay and models/lenet.relay (logits, no
softmax), random weights, random inputs of the batch, one thread by
default, under torch.inference_mode: eager PyTorch and TorchScript
(torch.jit.script, then torch.jit.freeze and optimize_for_inference). Each
engine is timed call by call for --calls calls after --warm warm ones;
prints one JSON line with the median and mean microseconds per call of
each. Nothing asserts a time.
Usage: python3 bench/mirror_infer.py mlp|lenet [--batch 1] [--calls 2000] [--warm 50] [--threads 1]
"""
import statistics
import time
import warnings

import torch
import torch.nn as nn

import mirror_common as mc


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


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
    p.add_argument("name", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--warm", type=int, default=50)
    args = p.parse_args()
    mc.setup(args)
    make, shape = MODELS[args.name]
    model = make().eval()
    x = torch.rand((args.batch,) + shape)
    with torch.inference_mode():
        eager = time_calls(model, x, args.calls, args.warm)
        # Deprecated in favour of torch.compile, which needs a C++ compiler
        # at run time; TorchScript is what the issue names.
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
        script = time_calls(scripted, x, args.calls, args.warm)
        if not torch.allclose(model(x), scripted(x), rtol=1e-4, atol=1e-5):
            raise SystemExit("mirror_infer: TorchScript and eager disagree")
    print(mc.json.dumps({"mirror": "infer", "model": args.name, "batch": args.batch, "calls": args.calls,
                         "threads": args.threads, "torch": torch.__version__,
                         "eager": eager, "torchscript": script}), flush=True)


if __name__ == "__main__":
    main()
