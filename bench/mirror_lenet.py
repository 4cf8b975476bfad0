"""PyTorch mirror of relayc's LeNet-5 on Fashion-MNIST (issue 4's reported result).

conv 1->6 5x5 pad 2, ReLU, max-pool 2, conv 6->16 5x5, ReLU, max-pool 2,
dense 400-120-84-10 (ReLU between the dense layers); pixels / 255, SGD lr 0.05
momentum 0.9, batch 64, reshuffled each epoch. Reports test accuracy after
epochs 1 and 5 (as far as --epochs goes) and samples/s as one JSON line.
Usage: python3 bench/mirror_lenet.py [--epochs 5] [--threads 1] [--seed 0] [--init xavier]
"""
import torch.nn as nn

import mirror_common as mc


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # (N,6,14,14)
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),             # (N,16,5,5)
        nn.Flatten(),                                                # (N,400)
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def main():
    p = mc.base_parser(__doc__.splitlines()[0])
    mc.fashion_args(p, epochs=5)
    args = p.parse_args()
    gen = mc.setup(args)
    model = lenet()
    if args.init == "xavier":
        mc.init_xavier(model)
    epochs = mc.train_fashion(model, args, gen)
    config = {"model": "lenet-5 (conv6 5x5 pad2, pool, conv16 5x5, pool, 400-120-84-10, relu)",
              "data": "fashion-mnist, pixels/255", "optimizer": "sgd", "lr": args.lr,
              "momentum": args.momentum, "batch": args.batch, "epochs": args.epochs,
              "init": args.init, "loss": "mean cross-entropy", "threads": args.threads, "seed": args.seed}
    mc.report("lenet", config, mc.fashion_results(epochs), args.out)


if __name__ == "__main__":
    main()
