"""Runs a PyTorch mirror (bench/mirror_*.py) beside a relayc benchmark line.

Glue for `bench/run NAME --peer`: given relayc's JSON line from
bench/train_step, it runs the matching mirror at the same thread count,
sized to take about --seconds of training, reads the mirror's throughput
from its JSON line, and prints one JSON line with both and their ratio
(relayc / PyTorch). The library never uses Python; only this harness does.
Usage: python3 bench/bench_peer.py NAME --threads N --seconds S --relayc JSON
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def mirror_command(name, threads, seconds):
    """The mirror's command line and a function reading its throughput.

    The Fashion-MNIST mirrors run whole epochs (one: about 1.5 s for the MLP,
    8 s for LeNet); the char-LSTM takes a step count (about 14 steps/s) and
    the Tree-LSTM a tree limit (about 80 trees/s)."""
    base = [sys.executable, os.path.join(HERE, f"mirror_{name}.py"), "--threads", str(threads)]
    if name in ("mlp", "lenet"):
        return base + ["--epochs", "1"], lambda r: r["mean_samples_per_s"]
    if name == "charlstm":
        steps = max(20, int(seconds * 14))
        return base + ["--steps", str(steps)], lambda r: r["sequences_per_s"]
    if name == "treelstm":
        limit = max(100, int(seconds * 80))
        return base + ["--limit", str(limit)], lambda r: r["trees_per_s"]
    raise SystemExit(f"bench_peer: no mirror for {name}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--relayc", required=True, help="relayc's JSON line")
    args = p.parse_args()
    ours = json.loads(args.relayc)
    cmd, read = mirror_command(args.name, args.threads, args.seconds)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-4000:])
        raise SystemExit(f"bench_peer: mirror failed with status {run.returncode}")
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("{")][-1]
    peer = json.loads(line)
    peer_tp = float(read(peer["results"]))
    out = {"name": args.name, "throughput": ours["throughput"], "unit": ours["unit"],
           "threads": args.threads, "relayc": ours,
           "peer": {"framework": "pytorch", "torch": peer["env"]["torch"],
                    "throughput": peer_tp, "unit": ours["unit"],
                    "command": " ".join(["python3"] + [os.path.relpath(c) if c.endswith(".py") else c
                                                        for c in cmd[1:]]),
                    "config": peer["config"]},
           "ratio": round(ours["throughput"] / peer_tp, 3) if peer_tp > 0 else None}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
