#!/usr/bin/env python3
"""Generates the fixtures of tests/test_op_nn.c into tests/ops/nn/.

Each case NAME writes NAME_in0.npy, NAME_in1.npy, ... (the operator's
arguments) and NAME_out0.npy, ... (its results, flattened depth-first),
computed independently with numpy and torch. The attributes of each case
are written next to its name in tests/test_op_nn.c; keep the two in step.
Run from the repository root: python3 tools/gen_op_nn.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = "tests/ops/nn"
rng = np.random.default_rng(20261129)


def save(name, ins, outs):
    for i, a in enumerate(ins):
        np.save(os.path.join(OUT, f"{name}_in{i}.npy"), np.asarray(a))
    for i, a in enumerate(outs):
        np.save(os.path.join(OUT, f"{name}_out{i}.npy"), np.asarray(a))


def randn(*shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def rint(lo, hi, *shape, dtype=np.int32):
    return rng.integers(lo, hi, size=shape).astype(dtype)


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ---- dense: out = data @ weight.T (weight is (units, k)) ----
def dense():
    for name, ds, ws, dt in [("dense_f64_2d", (3, 5), (4, 5), np.float64),
                             ("dense_f64_3d", (2, 3, 5), (4, 5), np.float64),
                             ("dense_f64_1d", (5,), (4, 5), np.float64),
                             ("dense_f32", (4, 7), (6, 7), np.float32)]:
        d, w = randn(*ds, dtype=dt), randn(*ws, dtype=dt)
        save(name, [d, w], [F.linear(t(d), t(w)).numpy()])
    d, w = rint(-20, 20, 3, 4), rint(-20, 20, 2, 4)
    save("dense_i32", [d, w], [(d.astype(np.int64) @ w.T.astype(np.int64)).astype(np.int32)])
    # int8 inputs, out_dtype="int32": products exceed int8
    d, w = rint(-128, 128, 3, 6, dtype=np.int8), rint(-128, 128, 5, 6, dtype=np.int8)
    save("dense_i8_i32", [d, w], [(d.astype(np.int32) @ w.T.astype(np.int32))])
    # float32 inputs, out_dtype="float64"
    d, w = randn(2, 3, dtype=np.float32), randn(4, 3, dtype=np.float32)
    save("dense_f32_f64", [d, w], [d.astype(np.float64) @ w.T.astype(np.float64)])
    # float16 inputs (computed in float32 and rounded)
    d, w = randn(3, 4, dtype=np.float16), randn(2, 4, dtype=np.float16)
    save("dense_f16", [d, w], [(d.astype(np.float32) @ w.T.astype(np.float32)).astype(np.float16)])


# ---- matmul: op(a) @ op(b) ----
def matmul():
    for name, a_s, b_s, ta, tb, dt in [
            ("matmul_f64", (3, 5), (5, 4), False, False, np.float64),
            ("matmul_f64_ta", (5, 3), (5, 4), True, False, np.float64),
            ("matmul_f64_tb", (3, 5), (4, 5), False, True, np.float64),
            ("matmul_f64_tatb", (5, 3), (4, 5), True, True, np.float64),
            ("matmul_f64_batch_ta", (2, 5, 3), (5, 4), True, False, np.float64),
            ("matmul_f32_3d", (2, 3, 5), (5, 4), False, False, np.float32)]:
        a, b = randn(*a_s, dtype=dt), randn(*b_s, dtype=dt)
        ta_ = np.swapaxes(a, -1, -2) if ta else a
        tb_ = b.T if tb else b
        save(name, [a, b], [torch.matmul(t(ta_), t(tb_)).numpy()])


# ---- batch_matmul: per batch op(x) @ op(y), a batch of 1 broadcasts ----
def batch_matmul():
    for name, xs, ys, ta, tb, dt in [
            ("bmm_f64", (2, 3, 5), (2, 5, 4), False, False, np.float64),
            ("bmm_f64_ta", (2, 5, 3), (2, 5, 4), True, False, np.float64),
            ("bmm_f64_tb", (2, 3, 5), (2, 4, 5), False, True, np.float64),
            ("bmm_f64_tatb", (2, 5, 3), (2, 4, 5), True, True, np.float64),
            ("bmm_f64_bx", (1, 3, 5), (3, 5, 4), False, False, np.float64),
            ("bmm_f64_by", (3, 3, 5), (1, 5, 4), False, False, np.float64),
            ("bmm_f32", (4, 2, 6), (4, 6, 3), False, False, np.float32)]:
        x, y = randn(*xs, dtype=dt), randn(*ys, dtype=dt)
        tx = np.swapaxes(x, 1, 2) if ta else x
        ty = np.swapaxes(y, 1, 2) if tb else y
        save(name, [x, y], [torch.matmul(t(tx), t(ty)).numpy()])
    x, y = rint(-9, 9, 2, 3, 4, dtype=np.int64), rint(-9, 9, 2, 4, 2, dtype=np.int64)
    save("bmm_i64", [x, y], [np.matmul(x, y)])


# ---- bias_add: bias broadcast along axis ----
def bias_add():
    for name, ds, axis, dt in [("bias_f64_axis1", (2, 3, 4), 1, np.float64),
                               ("bias_f64_axisneg1", (2, 3, 4), -1, np.float64),
                               ("bias_f64_axis0", (3, 2), 0, np.float64),
                               ("bias_f32", (4, 5), 1, np.float32)]:
        d = randn(*ds, dtype=dt)
        b = randn(ds[axis], dtype=dt)
        shape = [1] * len(ds)
        shape[axis] = ds[axis]
        save(name, [d, b], [d + b.reshape(shape)])
    d, b = rint(-100, 100, 2, 3), rint(-100, 100, 3)
    save("bias_i32", [d, b], [d + b.reshape(1, 3)])


# ---- softmax, log_softmax (torch) ----
def softmax():
    for name, shape, axis, dt, big in [("sm_f64_last", (3, 5), -1, np.float64, False),
                                       ("sm_f64_axis0", (3, 5), 0, np.float64, False),
                                       ("sm_f64_mid", (2, 3, 4), 1, np.float64, False),
                                       ("sm_f64_big", (2, 4), -1, np.float64, True),
                                       ("sm_f32", (4, 6), -1, np.float32, True)]:
        x = randn(*shape, dtype=dt)
        if big:  # exp would overflow without subtracting the max
            x = x * 300 + 800
        save(name, [x], [F.softmax(t(x), dim=axis).numpy()])
        save("log" + name, [x], [F.log_softmax(t(x), dim=axis).numpy()])


def batch_flatten():
    x = randn(2, 3, 4)
    save("flat_f64", [x], [x.reshape(2, -1)])
    x = rint(0, 9, 5)
    save("flat_i32_1d", [x], [x.reshape(5, 1)])


# ---- pad: numpy's pad; negative widths crop (pad, then slice) ----
def pad():
    cases = [("pad_f64_const", (3, 4), [[1, 2], [0, 1]], "constant", 1.5, np.float64),
             ("pad_f64_edge", (3, 4), [[2, 1], [1, 2]], "edge", 0.0, np.float64),
             ("pad_f64_reflect", (3, 4), [[2, 1], [1, 3]], "reflect", 0.0, np.float64),
             ("pad_f64_reflect3", (2, 3, 4), [[1, 1], [0, 2], [3, 0]], "reflect", 0.0, np.float64),
             ("pad_f32_const3", (2, 3, 2), [[0, 1], [1, 0], [2, 2]], "constant", -1.0, np.float32),
             ("pad_i32_const", (2, 3), [[1, 1], [2, 0]], "constant", 7, np.int32)]
    for name, shape, width, mode, value, dt in cases:
        x = randn(*shape, dtype=dt) if dt != np.int32 else rint(-50, 50, *shape)
        if mode == "constant":
            y = np.pad(x, width, mode="constant", constant_values=value)
        else:
            y = np.pad(x, width, mode=mode)
        save(name, [x, np.array(value, dtype=dt)], [y])
    # negative widths crop: [[-1, 2], [1, -2]] on (4, 5)
    x = randn(4, 5)
    y = np.pad(x, [[0, 2], [1, 0]], constant_values=0.5)[1:, :-2]
    save("pad_f64_crop", [x, np.array(0.5)], [y])
    # a pad value of another dtype is cast to data's (float32 value, float64 data)
    x = randn(2, 2)
    save("pad_f64_castval", [x, np.array(2.5, dtype=np.float32)],
         [np.pad(x, [[1, 0], [0, 1]], constant_values=2.5)])


# ---- batch_norm: torch, momentum 0.1 (running var updated unbiased) ----
def batch_norm():
    cases = [("bn_f64_inf", (4, 3, 2, 2), 1, False, True, True, 1e-5, np.float64),
             ("bn_f64_train", (4, 3, 2, 2), 1, True, True, True, 1e-5, np.float64),
             ("bn_f64_last", (2, 2, 2, 3), 3, True, True, True, 1e-3, np.float64),
             ("bn_f64_plain_inf", (5, 3), 1, False, False, False, 1e-5, np.float64),
             ("bn_f64_plain_train", (5, 3), 1, True, False, False, 1e-5, np.float64),
             ("bn_f32_train", (6, 4), 1, True, True, True, 1e-5, np.float32)]
    for name, shape, axis, train, center, scale, eps, dt in cases:
        x = randn(*shape, dtype=dt)
        C = shape[axis]
        g, b = randn(C, dtype=dt), randn(C, dtype=dt)
        mm, mv = randn(C, dtype=dt), (rng.random(C) + 0.5).astype(dt)
        # torch wants channels on axis 1
        xt = t(np.moveaxis(x, axis, 1))
        rm, rv = t(mm.copy()), t(mv.copy())
        y = F.batch_norm(xt, rm, rv, t(g) if scale else None, t(b) if center else None,
                         training=train, momentum=0.1, eps=eps)
        y = np.moveaxis(y.numpy(), 1, axis)
        save(name, [x, g, b, mm, mv], [y, rm.numpy(), rv.numpy()])


# ---- layer_norm: normalized over the single axis ----
def layer_norm():
    x = randn(3, 6)
    g, b = randn(6), randn(6)
    save("ln_f64_last", [x, g, b], [F.layer_norm(t(x), (6,), t(g), t(b), eps=1e-5).numpy()])
    x = randn(4, 5, dtype=np.float32)
    g, b = randn(5, dtype=np.float32), randn(5, dtype=np.float32)
    save("ln_f32", [x, g, b], [F.layer_norm(t(x), (5,), t(g), t(b), eps=1e-5).numpy()])
    for name, center, scale, eps in [("ln_f64_axis1", True, True, 1e-5),
                                     ("ln_f64_axis1_plain", False, False, 1e-2)]:
        x = randn(2, 4, 3)
        g, b = randn(4), randn(4)
        m = x.mean(axis=1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=1, keepdims=True)
        y = (x - m) / np.sqrt(v + eps)
        if scale:
            y = y * g.reshape(1, 4, 1)
        if center:
            y = y + b.reshape(1, 4, 1)
        save(name, [x, g, b], [y])


# ---- dropout: the mask from splitmix64, as documented in backend/cpu/nn.c ----
M64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def dropout():
    for name, shape, rate, seed in [("drop_f64", (4, 8), 0.3, 42), ("drop_f64_half", (3, 5), 0.5, 7)]:
        x = randn(*shape)
        s, mask = seed, np.empty(x.size)
        for i in range(x.size):
            s, z = splitmix64(s)
            u = (z >> 11) * 2.0 ** -53
            mask[i] = 1.0 if u >= rate else 0.0
        mask = mask.reshape(shape)
        save(name, [x], [x * mask / (1.0 - rate), mask])


# ---- prelu, instance_norm, group_norm, l2_normalize, cross_entropy ----
def extras():
    x, a = randn(2, 3, 4), randn(3)
    save("prelu_f64", [x, a], [F.prelu(t(x), t(a)).numpy()])
    x, a = randn(4, 5, dtype=np.float32), randn(5, dtype=np.float32)
    save("prelu_f32_last", [x, a], [np.where(x < 0, a.reshape(1, 5) * x, x)])
    x, g, b = randn(2, 3, 4, 5), randn(3), randn(3)
    save("inorm_f64", [x, g, b], [F.instance_norm(t(x), weight=t(g), bias=t(b), eps=1e-5).numpy()])
    x, g, b = randn(2, 4, 6, dtype=np.float32), randn(6, dtype=np.float32), randn(6, dtype=np.float32)
    # channels last (axis=2): statistics per (n, c) over axis 1
    y = F.instance_norm(t(np.moveaxis(x, 2, 1)), weight=t(g), bias=t(b), eps=1e-5).numpy()
    save("inorm_f32_last", [x, g, b], [np.moveaxis(y, 1, 2)])
    x, g, b = randn(2, 6, 3, 2), randn(6), randn(6)
    save("gnorm_f64", [x, g, b], [F.group_norm(t(x), 3, t(g), t(b), eps=1e-5).numpy()])
    save("gnorm_f64_plain", [x, g, b], [F.group_norm(t(x), 2, None, None, eps=1e-3).numpy()])
    x = randn(3, 4, 5)
    for name, axes, eps in [("l2n_f64_last", (2,), 1e-12), ("l2n_f64_01", (0, 1), 1e-12),
                            ("l2n_f64_eps", (1,), 50.0)]:
        ss = (x * x).sum(axis=axes, keepdims=True)
        save(name, [x], [x / np.sqrt(np.maximum(ss, eps))])
    p = F.softmax(t(randn(4, 5)), dim=1).numpy()
    y = np.eye(5)[[0, 3, 1, 4]]
    save("xent_f64", [p, y], [np.array(-(y * np.log(p)).sum() / 4)])
    logits = randn(3, 4)
    yy = rng.random((3, 4))
    save("xentl_f64", [logits, yy], [np.array(-(yy * logits).sum() / 3)])
    p32, y32 = p.astype(np.float32), y.astype(np.float32)
    save("xent_f32", [p32, y32], [np.array(-(y * np.log(p32.astype(np.float64))).sum() / 4, dtype=np.float32)])


# ---- a small program through the text format and the interpreter ----
def program():
    x, w, b = randn(3, 5), randn(4, 5), randn(4)
    g, be = randn(4), randn(4)
    h = F.layer_norm(F.linear(t(x), t(w), t(b)), (4,), t(g), t(be), eps=1e-5)
    save("prog_mlp", [x, w, b, g, be], [F.log_softmax(h, dim=-1).numpy()])



# ---- mirror_pad: SYMMETRIC repeats the edge, REFLECT does not ----
def mirror_pad():
    x = randn(3, 4)
    save("mpad_f64_sym", [x], [np.pad(x, [[3, 1], [2, 4]], mode="symmetric")])
    save("mpad_f64_refl", [x], [np.pad(x, [[2, 1], [3, 0]], mode="reflect")])



# ---- lrn: torch's local_response_norm (k is TVM's bias) for odd sizes ----
def lrn():
    x = randn(2, 6, 3, 2)
    save("lrn_f64", [x], [F.local_response_norm(t(x), 5, alpha=1e-4, beta=0.75, k=2.0).numpy()])
    x = randn(2, 3, 7)  # channels last, a large alpha so the window matters
    y = F.local_response_norm(t(np.moveaxis(x, 2, 1)), 3, alpha=0.5, beta=0.6, k=1.0).numpy()
    save("lrn_f64_last", [x], [np.moveaxis(y, 1, 2)])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    dense()
    matmul()
    batch_matmul()
    bias_add()
    softmax()
    batch_flatten()
    pad()
    batch_norm()
    layer_norm()
    dropout()
    extras()
    program()
    mirror_pad()
    lrn()
