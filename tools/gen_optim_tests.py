#!/usr/bin/env python3
"""gen_optim_tests.py: fixtures for tests/test_optim.c from PyTorch.

Writes tests/optim/*.npy: the starting parameters and 20 steps of gradients
(inputs.npy, grads.npy), then for each optimizer case and dtype the
parameters after every step (<case>_<dtype>.npy, shape (20, 17)) and the
final optimizer slots (<case>_<dtype>_slots.npy, shape (slots, 17)); the
learning rate of each schedule for steps 0..39 (sched_<name>.npy); and
clipping results (clip_<name>_<dtype>.npy: clipped gradients, then the
total norm); and a training loop's parameters (loop_<dtype>.npy). Two parameters, w (3, 4) and b (5,), are flattened into 17
values, w first. Run from the repository root: python3 tools/gen_optim_tests.py
"""
import math
import os

import numpy as np
import torch

OUT = "tests/optim"
STEPS = 20
SHAPES = [("w", (3, 4)), ("b", (5,))]
SIZE = 17

rng = np.random.default_rng(20261129)
P0 = rng.normal(0, 1, SIZE)
# Gradients of varied scale, with exact zeros (eps matters there).
G = rng.normal(0, 1, (STEPS, SIZE)) * np.logspace(-2, 1, STEPS)[:, None]
G[3, 2] = 0.0
G[7, 14] = 0.0
G[:, 5] += 0.5  # a steady drift on one element


def split(flat, dtype):
    out, k = [], 0
    for _, shp in SHAPES:
        n = int(np.prod(shp))
        out.append(torch.tensor(flat[k:k + n].reshape(shp), dtype=dtype))
        k += n
    return out


def flat(tensors):
    return np.concatenate([t.detach().to(torch.float64).numpy().ravel() for t in tensors])


# Each case: the torch optimizer, its arguments, the slots in optimizer.c's
# order, whether b is exempt from weight decay, and steps (lo, hi) during
# which b is frozen (no gradient). Mirrored in tests/test_optim.c.
CASES = [
    ("sgd_plain", torch.optim.SGD, dict(lr=0.1), [], False, None),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.05, momentum=0.9), ["momentum_buffer"], False, None),
    ("sgd_dampening", torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
     ["momentum_buffer"], False, None),
    ("sgd_nesterov", torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
     ["momentum_buffer"], False, None),
    ("sgd_frozen", torch.optim.SGD, dict(lr=0.05, momentum=0.9), ["momentum_buffer"], False, (0, 3)),
    ("adam", torch.optim.Adam, dict(lr=0.01), ["exp_avg", "exp_avg_sq"], False, None),
    ("adam_wd_amsgrad", torch.optim.Adam,
     dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=True),
     ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"], False, None),
    ("adam_frozen", torch.optim.Adam, dict(lr=0.01), ["exp_avg", "exp_avg_sq"], False, (5, 10)),
    ("adamw", torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1), ["exp_avg", "exp_avg_sq"], False, None),
    ("adamw_amsgrad_mask", torch.optim.AdamW, dict(lr=0.02, weight_decay=0.5, amsgrad=True),
     ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"], True, None),
    ("adagrad", torch.optim.Adagrad, dict(lr=0.1), ["sum"], False, None),
    ("adagrad_full", torch.optim.Adagrad,
     dict(lr=0.1, lr_decay=0.01, weight_decay=0.05, initial_accumulator_value=0.1, eps=1e-6),
     ["sum"], False, None),
    ("adagrad_mask", torch.optim.Adagrad, dict(lr=0.1, weight_decay=0.2), ["sum"], True, None),
    ("rmsprop", torch.optim.RMSprop, dict(lr=0.01), ["square_avg"], False, None),
    ("rmsprop_momentum", torch.optim.RMSprop, dict(lr=0.01, momentum=0.9, weight_decay=0.01),
     ["square_avg", "momentum_buffer"], False, None),
    ("rmsprop_centered", torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, centered=True),
     ["square_avg", "grad_avg"], False, None),
    ("rmsprop_centered_momentum", torch.optim.RMSprop,
     dict(lr=0.01, alpha=0.95, momentum=0.5, centered=True, weight_decay=0.02),
     ["square_avg", "momentum_buffer", "grad_avg"], False, (2, 6)),
]


def run_case(opt_cls, kwargs, slots, no_decay_b, frozen, dtype):
    params = [p.requires_grad_() for p in split(P0, dtype)]
    if no_decay_b:
        groups = [{"params": [params[0]]}, {"params": [params[1]], "weight_decay": 0.0}]
    else:
        groups = [{"params": params}]
    opt = opt_cls(groups, foreach=False, **kwargs)
    traj = []
    for t in range(STEPS):
        for p, g in zip(params, split(G[t], dtype)):
            p.grad = g.clone()
        if frozen and frozen[0] <= t < frozen[1]:
            params[1].grad = None
        opt.step()
        traj.append(flat(params))
    state = []
    for s in slots:
        vals = []
        for p in params:
            st = opt.state[p]
            vals.append(st[s] if s in st else torch.zeros_like(p))
        state.append(flat(vals))
    return np.array(traj), np.array(state).reshape(len(slots), SIZE)


def lr_trajectory(make, n=40, base=0.1):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base)
    sched = make(opt)
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return np.array(out, dtype=np.float64)


S = torch.optim.lr_scheduler
# Mirrored in tests/test_optim.c.
SCHEDULES = [
    ("step", lambda o: S.StepLR(o, step_size=7, gamma=0.5)),
    ("multistep", lambda o: S.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3)),
    ("exponential", lambda o: S.ExponentialLR(o, gamma=0.93)),
    ("cosine", lambda o: S.CosineAnnealingLR(o, T_max=15, eta_min=0.001)),
    ("cosine_zero", lambda o: S.CosineAnnealingLR(o, T_max=40)),
    ("linear", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=12)),
    ("warmup_cosine", lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=5),
            S.CosineAnnealingLR(o, T_max=30, eta_min=0.0)], milestones=[5])),
    ("warmup_step", lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, end_factor=1.0, total_iters=8),
            S.StepLR(o, step_size=4, gamma=0.7)], milestones=[8])),
]


def clip_case(dtype, fn):
    gs = split(G[12] * 3, dtype)
    ps = [torch.zeros_like(g, requires_grad=True) for g in gs]
    for p, g in zip(ps, gs):
        p.grad = g.clone()
    total = fn(ps)
    out = flat([p.grad for p in ps])
    return np.append(out, float(total) if total is not None else 0.0)


CLIPS = [
    ("norm2", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 1.5)),
    ("norm2_noclip", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 1e3)),
    ("norm1", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 2.0, norm_type=1.0)),
    ("norm3", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 2.0, norm_type=3.0)),
    ("norminf", lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.5, norm_type=math.inf)),
    ("value", lambda ps: torch.nn.utils.clip_grad_value_(ps, 1.0)),
]


def train_loop(dtype):
    """Adam under a warm-up + cosine schedule with clipping at norm 1:
    what a training loop does each step (clip, step, schedule)."""
    params = [p.requires_grad_() for p in split(P0, dtype)]
    opt = torch.optim.Adam(params, lr=0.05, foreach=False)
    sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.2, total_iters=4),
                                 S.CosineAnnealingLR(opt, T_max=16)], milestones=[4])
    traj = []
    for t in range(STEPS):
        for p, g in zip(params, split(G[t], dtype)):
            p.grad = g.clone()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        traj.append(flat(params))
    return np.array(traj)


def main():
    os.makedirs(OUT, exist_ok=True)
    np.save(f"{OUT}/inputs.npy", P0)
    np.save(f"{OUT}/grads.npy", G)
    for name, cls, kw, slots, nodecay, frozen in CASES:
        for dname, dt in [("f32", torch.float32), ("f64", torch.float64)]:
            traj, state = run_case(cls, kw, slots, nodecay, frozen, dt)
            np.save(f"{OUT}/{name}_{dname}.npy", traj)
            if slots:
                np.save(f"{OUT}/{name}_{dname}_slots.npy", state)
    for dname, dt in [("f32", torch.float32), ("f64", torch.float64)]:
        np.save(f"{OUT}/loop_{dname}.npy", train_loop(dt))
    for name, make in SCHEDULES:
        np.save(f"{OUT}/sched_{name}.npy", lr_trajectory(make))
    for name, fn in CLIPS:
        for dname, dt in [("f32", torch.float32), ("f64", torch.float64)]:
            np.save(f"{OUT}/clip_{name}_{dname}.npy", clip_case(dt, fn))


if __name__ == "__main__":
    main()
