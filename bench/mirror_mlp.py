"""PyTorch mirror of relayc's MLP on Fashion-MNIST (issue 4's reported result).

MLP 784-256-128-10 with ReLU, pixels / 255 (no normalization), SGD lr 0.05
momentum 0.9, batch 64, reshuffled each epoch; reports test accuracy after
epochs 1 and 5, wall time per epoch and training samples/s as one JSON line.
Usage: python3 bench/mirror_mlp.py [--epochs 5] [--threads 1] [--seed 0] [--init xavier]
"""
import torch.nn as nn

import mirror_common as mc


def main():
    p = mc.base_parser(__doc__.splitlines()[0])
    mc.fashion_args(p, epochs=5)
    args = p.parse_args()
    gen = mc.setup(args)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    if args.init == "xavier":
        mc.init_xavier(model)
    epochs = mc.train_fashion(model, args, gen)
    config = {"model": "mlp 784-256-128-10 relu", "data": "fashion-mnist, pixels/255",
              "optimizer": "sgd", "lr": args.lr, "momentum": args.momentum, "batch": args.batch,
              "epochs": args.epochs, "init": args.init, "loss": "mean cross-entropy",
              "threads": args.threads, "seed": args.seed}
    mc.report("mlp", config, mc.fashion_results(epochs), args.out)


if __name__ == "__main__":
    main()
