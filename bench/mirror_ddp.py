"""PyTorch DistributedDataParallel mirror of `mpirun -np N relayc train` (issue 19).

The MLP or LeNet of bench/mirror_{mlp,lenet}.py on Fashion-MNIST, SGD lr 0.05
momentum 0.9, a global batch of --batch samples split evenly over --world
processes (as relayc splits its batch over the ranks), one thread each,
gradients all-reduced by DDP over gloo (CPU). Runs --steps steps after
--warm untimed ones on a fixed permutation and prints one JSON line with
rank 0's steps/s and samples/s; --world 1 is one process without DDP.
Usage: python3 bench/mirror_ddp.py mlp|lenet [--world 2] [--batch 256] [--steps 200] [--warm 10]
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import mirror_common as mc


def make(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def worker(rank, args, port, out):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make(args.name)
    if args.world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=args.world)
        model = nn.parallel.DistributedDataParallel(model)
    x, y = mc.load_fashion("train")
    perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(0))
    per = args.batch // args.world
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()

    def step(k):
        start = (k * args.batch) % (x.shape[0] - args.batch) + rank * per
        idx = perm[start:start + per]
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        return loss

    for k in range(args.warm):
        step(k)
    if args.world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for k in range(args.steps):
        loss = step(args.warm + k)
    loss = loss.item()
    dt = time.perf_counter() - t0
    if rank == 0:
        out.put({"mirror": "ddp", "model": args.name, "world": args.world, "batch": args.batch,
                 "per_rank_batch": per, "steps": args.steps, "threads_per_rank": 1, "torch": torch.__version__,
                 "steps_per_s": round(args.steps / dt, 2), "samples_per_s": round(args.steps * args.batch / dt, 1),
                 "last_loss": round(loss, 5)})
    if args.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name", choices=["mlp", "lenet"])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warm", type=int, default=10)
    p.add_argument("--port", type=int, default=29517)
    args = p.parse_args()
    if args.world < 1 or args.batch % args.world:
        raise SystemExit("mirror_ddp: --batch must split evenly over --world")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, args.port, out)) for r in range(args.world)]
    for pr in procs:
        pr.start()
    line = out.get()
    for pr in procs:
        pr.join()
        if pr.exitcode != 0:
            raise SystemExit(f"mirror_ddp: a rank exited with {pr.exitcode}")
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
