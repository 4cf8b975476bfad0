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
    if name in ("charlstm", "charlstm-loop"):
        # nn.LSTM, or the same cell stepped in Python (--cell loop): issue 5
        # compares the IR cell with both.
        steps = max(20, int(seconds * 14))
        cell = "loop" if name == "charlstm-loop" else "lstm"
        base[1] = os.path.join(HERE, "mirror_charlstm.py")
        return base + ["--steps", str(steps), "--cell", cell], lambda r: r["sequences_per_s"]
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
    out = {"name": args.name, "throughput": ours["throughput"], "unit": ours["unit"],
           "threads": args.threads, "relayc": ours}
    peers = [args.name] + (["charlstm-loop"] if args.name == "charlstm" else [])
    for i, peer_name in enumerate(peers):
        peer = run_peer(peer_name, args.threads, args.seconds, ours["unit"])
        suffix = "" if i == 0 else "_loop"
        out["peer" + suffix] = peer
        tp = peer["throughput"]
        out["ratio" + suffix] = round(ours["throughput"] / tp, 3) if tp > 0 else None
    print(json.dumps(out), flush=True)


def run_peer(name, threads, seconds, unit):
    """Runs one mirror and returns its description and throughput."""
    cmd, read = mirror_command(name, threads, seconds)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-4000:])
        raise SystemExit(f"bench_peer: mirror failed with status {run.returncode}")
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("{")][-1]
    peer = json.loads(line)
    return {"framework": "pytorch", "torch": peer["env"]["torch"],
            "throughput": float(read(peer["results"])), "unit": unit,
            "command": " ".join(["python3"] + [os.path.relpath(c) if c.endswith(".py") else c
                                               for c in cmd[1:]]),
            "config": peer["config"]}


if __name__ == "__main__":
    main()
