"""PyTorch mirror of relayc's char-level LSTM on tinyshakespeare (issue 4's result).

Embedding 64, one LSTM layer of 256, a dense layer to the symbols; sequence 64,
batch 32; truncated BPTT with classic char-rnn batching, matching
ry_bptt_init/ry_bptt_window: the symbols are the bytes present in ascending
order, the text is cut into 32 contiguous streams of L = (n - 1) // 32 bytes,
window k holds positions [k*64, k*64+64) of every stream, targets the next byte,
and the (h, c) state carries from window to window, detached. Mean
cross-entropy over the 32x64 targets, Adam lr 2e-3, gradients clipped at
global norm 5, 300 steps. Reports the loss at step 300, the mean of the last 10
steps and sequences/s as one JSON line.
--cell lstm uses nn.LSTM; --cell loop a hand-written cell stepped in Python
(same parameter layout and the same initial values for a given seed).
"""
import json
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import mirror_common as mc

TEXT = "/work/shared/data/tinyshakespeare/input.txt"


class LoopLSTM(nn.Module):
    """One LSTM layer with nn.LSTM's parameters and gate order (i, f, g, o):

    gates = x W_ih^T + b_ih + h W_hh^T + b_hh        (B, 4H)
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
    """

    def __init__(self, ref):
        super().__init__()
        self.w_ih = nn.Parameter(ref.weight_ih_l0.detach().clone())
        self.w_hh = nn.Parameter(ref.weight_hh_l0.detach().clone())
        self.b_ih = nn.Parameter(ref.bias_ih_l0.detach().clone())
        self.b_hh = nn.Parameter(ref.bias_hh_l0.detach().clone())

    def forward(self, x, state):              # x (B, T, E), state ((1,B,H), (1,B,H))
        h, c = state[0][0], state[1][0]
        outs = []
        for t in range(x.shape[1]):
            gates = x[:, t] @ self.w_ih.t() + self.b_ih + h @ self.w_hh.t() + self.b_hh
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs, 1), (h.unsqueeze(0), c.unsqueeze(0))


class CharModel(nn.Module):
    def __init__(self, nsym, emb, hidden, cell):
        super().__init__()
        self.embed = nn.Embedding(nsym, emb)
        lstm = nn.LSTM(emb, hidden, batch_first=True)
        self.rnn = lstm if cell == "lstm" else LoopLSTM(lstm)
        self.out = nn.Linear(hidden, nsym)

    def forward(self, x, state):              # x (B, T) ids -> logits (B, T, nsym)
        y, state = self.rnn(self.embed(x), state)
        return self.out(y), state


def main():
    p = mc.base_parser("PyTorch mirror of relayc's char-level LSTM")
    p.add_argument("--cell", choices=["lstm", "loop"], default="lstm")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--text", default=TEXT)
    p.add_argument("--out", default=None, help="also append the JSON line to this file")
    args = p.parse_args()
    mc.setup(args)

    raw = np.frombuffer(open(args.text, "rb").read(), dtype=np.uint8)
    symbols = np.unique(raw)                                # ascending bytes
    id_of = np.full(256, -1, dtype=np.int64)
    id_of[symbols] = np.arange(len(symbols))
    ids = torch.from_numpy(id_of[raw])
    stream = (len(ids) - 1) // args.batch                   # L
    nwin = stream // args.seq
    rows = torch.arange(args.batch) * stream

    model = CharModel(len(symbols), args.embed, args.hidden, args.cell)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    lossf = nn.CrossEntropyLoss()
    zero = torch.zeros(1, args.batch, args.hidden)
    state = (zero, zero)
    losses = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        k = step % nwin
        if k == 0:                                          # a new pass over the streams
            state = (zero, zero)
        pos = rows[:, None] + k * args.seq + torch.arange(args.seq)[None, :]   # (B, T)
        x, y = ids[pos], ids[pos + 1]
        opt.zero_grad(set_to_none=True)
        logits, state = model(x, state)
        loss = lossf(logits.reshape(-1, len(symbols)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        state = (state[0].detach(), state[1].detach())
        losses.append(loss.item())
        if (step + 1) % 50 == 0:
            print(json.dumps({"step": step + 1, "loss": round(losses[-1], 4),
                              "elapsed_s": round(time.perf_counter() - t0, 1)}),
                  file=sys.stderr, flush=True)
    dt = time.perf_counter() - t0
    config = {"model": f"char-lstm embed {args.embed}, lstm {args.hidden}, dense {len(symbols)}",
              "cell": args.cell, "data": "tinyshakespeare, bytes", "symbols": int(len(symbols)),
              "batch": args.batch, "seq": args.seq, "bptt": "char-rnn contiguous streams, state carried",
              "optimizer": "adam", "lr": args.lr, "clip_global_norm": args.clip, "steps": args.steps,
              "loss": "mean cross-entropy", "threads": args.threads, "seed": args.seed}
    results = {"loss_first": round(losses[0], 4), "loss_at_last_step": round(losses[-1], 4),
               "loss_mean_last10": round(sum(losses[-10:]) / len(losses[-10:]), 4),
               "losses_every_50": [round(losses[i], 4) for i in range(49, len(losses), 50)],
               "seconds": round(dt, 2), "steps_per_s": round(args.steps / dt, 2),
               "sequences_per_s": round(args.steps * args.batch / dt, 1)}
    mc.report("charlstm", config, results, args.out)


if __name__ == "__main__":
    main()
