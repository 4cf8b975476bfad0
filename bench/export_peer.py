"""Runs bench/export_infer beside its PyTorch mirror (bench/mirror_infer.py).

Issue 16 compares the exported C with the VM and with PyTorch's eager and
TorchScript inference of the same model, one thread, in one run. This
alternates the two programs --rounds times (the machine is shared, so
single runs move by 30%) and prints one JSON line: the median over the
rounds of each engine's median microseconds per call, and the ratios of
PyTorch's and the VM's times to the export's (above 1: the export is
faster). The library never uses Python; only this harness does.
TorchScript cannot script the Tree-LSTM's recursion: its entries are null.
Usage: python3 bench/export_peer.py mlp|lenet|charlstm|treelstm [--batch 1] [--calls 2000] [--rounds 3]
       [--build build] [--tree FILE:LINE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name", choices=["mlp", "lenet", "charlstm", "treelstm"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--build", default="build")
    p.add_argument("--tree", default=None, help="treelstm: the PTB tree on line LINE of FILE")
    args = p.parse_args()
    size = ["--batch", str(args.batch), "--calls", str(args.calls)] + (["--tree", args.tree] if args.tree else [])
    ours = [os.path.join(args.build, "bench", "export_infer"), args.name] + size
    theirs = [sys.executable, os.path.join(HERE, "mirror_infer.py"), args.name, "--threads", "1"] + size
    times = {"vm": [], "export": [], "eager": [], "torchscript": []}
    for _ in range(args.rounds):
        r = run_json(ours)
        times["vm"].append(r["vm_median_us"])
        times["export"].append(r["export_median_us"])
        m = run_json(theirs)
        times["eager"].append(m["eager"]["median_us"])
        times["torchscript"].append(m["torchscript"]["median_us"] if m["torchscript"] else None)
    med = {k: round(statistics.median(v), 2) if None not in v else None for k, v in times.items()}
    line = {"bench": "export_peer", "model": args.name, "input": args.tree or "random", "batch": args.batch, "calls": args.calls,
            "rounds": args.rounds, "torch": m["torch"], "median_us": med,
            "eager_over_export": round(med["eager"] / med["export"], 2),
            "torchscript_over_export": round(med["torchscript"] / med["export"], 2) if med["torchscript"] else None,
            "vm_over_export": round(med["vm"] / med["export"], 2), "runs_us": times}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
