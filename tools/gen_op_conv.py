#!/usr/bin/env python3
"""gen_op_conv.py: fixtures for tests/test_op_conv.c (the conv/pool family).

Writes tests/ops/conv/<case>_{x,w,y}.npy and tests/ops/conv/cases.h, the C
table naming each case's operator and attributes, so the cases are listed
once, here. Run from the repository root: python3 tools/gen_op_conv.py

References come from torch.nn.functional (conv2d, conv_transpose2d,
max_pool2d, avg_pool2d) in float64. Pooling follows TVM where it differs
from PyTorch (asymmetric padding, dilated average pooling, a last ceil_mode
window that starts in the padding): those cases use tvm_pool() below, a
direct transcription of TVM's topi pool_impl_nd semantics, which the script
first checks against PyTorch on every case where the two agree.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = "tests/ops/conv"
os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):  # no stale fixtures from removed cases
    if old.endswith(".npy"):
        os.remove(os.path.join(OUT, old))
rng = np.random.default_rng(20261129)
cases = []  # (name, op, nin, attrs, rtol, atol)


def rand(shape, dtype=np.float64):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def save(name, op, attrs, arrays, y, rtol=1e-10, atol=1e-10):
    for suffix, a in zip("xw", arrays):
        np.save(f"{OUT}/{name}_{suffix}.npy", a)
    np.save(f"{OUT}/{name}_y.npy", y)
    cases.append((name, op, len(arrays), attrs, rtol, atol))


def pad4(p):
    """TVM's get_pad_tuple: (top, left, bottom, right)."""
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return tuple(p)


def attr_str(d):
    parts = []
    for k, v in d.items():
        if isinstance(v, bool):
            parts.append(f"{k}=b:{int(v)}")
        elif isinstance(v, int):
            parts.append(f"{k}=i:{v}")
        elif isinstance(v, str):
            parts.append(f"{k}=s:{v}")
        else:
            parts.append(f"{k}=l:{','.join(str(x) for x in v)}")
    return ";".join(parts)


# ---- conv2d ----------------------------------------------------------------

def torch_conv2d(x, w, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    t, l, b, r = pad4(padding)
    xt = F.pad(torch.from_numpy(x.astype(np.float64)), (l, r, t, b))
    y = F.conv2d(xt, torch.from_numpy(w.astype(np.float64)), stride=strides,
                 dilation=dilation, groups=groups)
    return y.numpy()


# Attributes that only restate what the shapes say (channels, kernel_size,
# layouts): passed to relayc, not to PyTorch.
EXTRA = ("channels", "kernel_size", "data_layout", "kernel_layout", "out_layout", "layout")


def conv_case(name, xs, ws, dtype=np.float64, out_dtype=None, rtol=1e-10, atol=1e-10, **kw):
    x, w = rand(xs, dtype), rand(ws, dtype)
    y = torch_conv2d(x, w, **{k: v for k, v in kw.items() if k not in EXTRA})
    attrs = dict(kw)
    if out_dtype:
        attrs["out_dtype"] = out_dtype
    y = y.astype(np.dtype(out_dtype) if out_dtype else dtype)
    save(name, "nn.conv2d", attr_str(attrs), [x, w], y, rtol, atol)


conv_case("conv_basic", (2, 3, 7, 6), (4, 3, 3, 3))
conv_case("conv_stride_pad", (1, 2, 8, 9), (3, 2, 3, 3), strides=(2, 2), padding=(1, 1))
conv_case("conv_pad4_dil", (1, 2, 7, 8), (2, 2, 3, 2), strides=(2, 1), padding=(1, 0, 2, 1),
          dilation=(1, 2))
conv_case("conv_pad1", (1, 1, 9, 9), (2, 1, 3, 3), padding=(2,), dilation=(2, 2))
conv_case("conv_groups", (2, 4, 5, 5), (6, 2, 3, 3), padding=(1, 1), groups=2, channels=6,
          kernel_size=(3, 3), data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW")
conv_case("conv_depthwise", (1, 3, 6, 6), (3, 1, 3, 3), strides=(2, 2), padding=(1,), groups=3)
conv_case("conv_1x1", (1, 5, 4, 4), (3, 5, 1, 1))
conv_case("conv_rect", (1, 2, 5, 9), (2, 2, 2, 4), strides=(1, 3), padding=(0, 2))
conv_case("conv_f32", (2, 3, 10, 10), (8, 3, 5, 5), np.float32, padding=(2, 2), rtol=1e-5,
          atol=1e-5)
conv_case("conv_f32_groups", (1, 6, 7, 7), (4, 3, 3, 3), np.float32, strides=(2, 2),
          padding=(1, 2, 0, 1), groups=2, rtol=1e-5, atol=1e-5)
conv_case("conv_f32_to_f64", (1, 2, 5, 5), (2, 2, 3, 3), np.float32, out_dtype="float64",
          rtol=1e-12, atol=1e-12)
conv_case("conv_i32", (1, 2, 5, 5), (3, 2, 3, 3), np.int32, padding=(1, 1), rtol=0, atol=0)
conv_case("conv_i8_to_i32", (1, 3, 4, 4), (2, 3, 2, 2), np.int8, out_dtype="int32", rtol=0,
          atol=0)
conv_case("conv_f16", (1, 2, 5, 5), (2, 2, 3, 3), np.float16, rtol=1e-2, atol=1e-2)


# ---- conv2d_transpose -------------------------------------------------------

def torch_conv2d_t(x, w, strides=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1),
                   groups=1):
    """Asymmetric padding: transpose without padding, then crop each side."""
    t, l, b, r = pad4(padding)
    y = F.conv_transpose2d(torch.from_numpy(x.astype(np.float64)),
                           torch.from_numpy(w.astype(np.float64)), stride=strides,
                           output_padding=output_padding, dilation=dilation, groups=groups)
    y = y.numpy()
    return y[:, :, t:y.shape[2] - b, l:y.shape[3] - r]


def convt_case(name, xs, ws, dtype=np.float64, rtol=1e-10, atol=1e-10, **kw):
    x, w = rand(xs, dtype), rand(ws, dtype)
    y = torch_conv2d_t(x, w, **{k: v for k, v in kw.items() if k not in EXTRA}).astype(dtype)
    save(name, "nn.conv2d_transpose", attr_str(kw), [x, w], y, rtol, atol)


# Check the crop trick on a symmetric case against PyTorch's own padding.
_x, _w = rand((1, 2, 3, 3)), rand((2, 2, 3, 3))
assert np.allclose(torch_conv2d_t(_x, _w, strides=(2, 2), padding=(1, 1), output_padding=(1, 1)),
                   F.conv_transpose2d(torch.from_numpy(_x), torch.from_numpy(_w), stride=2,
                                      padding=1, output_padding=1).numpy())

convt_case("convt_basic", (1, 2, 4, 4), (2, 3, 3, 3))
convt_case("convt_stride_pad_opad", (2, 3, 3, 4), (3, 2, 3, 3), strides=(2, 2), padding=(1, 1),
           output_padding=(1, 1))
convt_case("convt_groups_dil", (1, 4, 4, 3), (4, 3, 2, 3), strides=(1, 2), dilation=(2, 1),
           groups=2, channels=6, kernel_size=(2, 3), data_layout="NCHW", kernel_layout="IOHW",
           out_layout="")
convt_case("convt_pad4", (1, 2, 4, 5), (2, 2, 3, 3), strides=(2, 2), padding=(1, 0, 0, 2),
           output_padding=(1, 0))
convt_case("convt_f32", (2, 3, 5, 5), (3, 4, 4, 4), np.float32, strides=(2, 2), padding=(1, 1),
           rtol=1e-5, atol=1e-5)
convt_case("convt_i32", (1, 2, 3, 3), (2, 2, 2, 2), np.int32, strides=(2, 2), rtol=0, atol=0)


# ---- pooling: TVM's semantics ----------------------------------------------

def tdiv(a, b):
    """Integer division truncating toward zero (C's and TVM's)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def tvm_pool(x, kind, pool_size, strides=(1, 1), dilation=(1, 1), padding=(0, 0),
             ceil_mode=False, count_include_pad=False):
    """topi pool_impl_nd on NCHW, written out with loops."""
    N, C, H, W = x.shape
    pt, pl, pb, pr = pad4(padding)
    dims = []
    for n, k, s, d, head, tail in ((H, pool_size[0], strides[0], dilation[0], pt, pb),
                                   (W, pool_size[1], strides[1], dilation[1], pl, pr)):
        extra = s - 1 if ceil_mode else 0
        dims.append((n - (k - 1) * d - 1 + head + tail + extra) // s + 1)
    OH, OW = dims
    isint = np.issubdtype(x.dtype, np.integer)
    lowest = np.iinfo(x.dtype).min if isint else np.finfo(x.dtype).min
    y = np.zeros((N, C, OH, OW), dtype=x.dtype)

    def taps(o, s, d, k, head, n):
        return [o * s - head + j * d for j in range(k) if 0 <= o * s - head + j * d < n]

    def count(o, s, d, k, head, tail, n):
        start = o * s - head
        last = start + (k - 1) * d
        if count_include_pad:
            return tdiv(min(last, n + tail - 1) - start, d) + 1
        first = start + d * max(0, tdiv(d - 1 - start, d))
        return tdiv(min(last, n - 1) - first, d) + 1

    for oh in range(OH):
        hs = taps(oh, strides[0], dilation[0], pool_size[0], pt, H)
        for ow in range(OW):
            ws = taps(ow, strides[1], dilation[1], pool_size[1], pl, W)
            win = x[:, :, hs][:, :, :, ws].reshape(N, C, -1)
            if kind == "max":
                y[:, :, oh, ow] = win.max(axis=2) if win.shape[2] else lowest
                continue
            n = (count(oh, strides[0], dilation[0], pool_size[0], pt, pb, H) *
                 count(ow, strides[1], dilation[1], pool_size[1], pl, pr, W))
            if not count_include_pad:
                n = max(n, 1)
            s = win.astype(np.int64 if isint else x.dtype).sum(axis=2)
            if isint:
                y[:, :, oh, ow] = [[tdiv(int(v), n) if n else 0 for v in row] for row in s]
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    y[:, :, oh, ow] = s / x.dtype.type(n)
    return y


def torch_pool(x, kind, pool_size, strides=(1, 1), dilation=(1, 1), padding=(0, 0),
               ceil_mode=False, count_include_pad=False):
    xt = torch.from_numpy(x.astype(np.float64))
    if kind == "max":
        return F.max_pool2d(xt, pool_size, strides, padding, dilation, ceil_mode).numpy()
    assert dilation == (1, 1)
    return F.avg_pool2d(xt, pool_size, strides, padding, ceil_mode, count_include_pad).numpy()


def pool_case(name, kind, xs, dtype=np.float64, torch_agrees=True, rtol=1e-12, atol=1e-12, **kw):
    x = rand(xs, dtype)
    pk = {k: v for k, v in kw.items() if k not in EXTRA}
    y = tvm_pool(x, kind, **pk)
    if torch_agrees:  # check our transcription of TVM where PyTorch computes the same
        ref = torch_pool(x, kind, **pk)
        assert ref.shape == y.shape, (name, ref.shape, y.shape)
        assert np.allclose(ref, y.astype(np.float64), rtol=1e-6, atol=1e-6), name
    op = "nn.max_pool2d" if kind == "max" else "nn.avg_pool2d"
    if kind == "max":
        kw.pop("count_include_pad", None)
    save(name, op, attr_str(kw), [x], y, rtol, atol)


pool_case("max_2x2", "max", (2, 3, 6, 6), pool_size=(2, 2), strides=(2, 2), layout="NCHW",
          out_layout="NCHW")
pool_case("max_3x3_pad", "max", (1, 2, 5, 7), pool_size=(3, 3), padding=(1, 1))
pool_case("max_rect", "max", (1, 2, 7, 6), pool_size=(3, 2), strides=(2, 1), padding=(1, 0))
pool_case("max_dilated", "max", (1, 1, 7, 7), pool_size=(2, 2), dilation=(2, 2), strides=(2, 2))
pool_case("max_ceil", "max", (1, 2, 5, 5), pool_size=(2, 2), strides=(2, 2), ceil_mode=True)
pool_case("max_ceil_dil_pad", "max", (1, 2, 8, 9), pool_size=(3, 2), strides=(2, 3),
          padding=(1, 1), dilation=(2, 1), ceil_mode=True)
# TVM only: asymmetric padding, and a last ceil_mode window wholly in the
# bottom/right padding (PyTorch drops it; TVM yields the dtype's lowest).
pool_case("max_pad4", "max", (1, 2, 6, 6), torch_agrees=False, pool_size=(3, 3), strides=(2, 2),
          padding=(1, 0, 2, 1))
pool_case("max_ceil_tvm", "max", (1, 1, 5, 5), torch_agrees=False, pool_size=(2, 2),
          strides=(2, 2), padding=(1, 1), ceil_mode=True)
pool_case("max_f32", "max", (2, 3, 8, 8), np.float32, pool_size=(3, 3), strides=(2, 2),
          padding=(1, 1), rtol=0, atol=0)
pool_case("max_i32", "max", (1, 2, 5, 5), np.int32, pool_size=(2, 2), strides=(1, 1),
          padding=(1, 1), rtol=0, atol=0)
pool_case("max_i8", "max", (1, 2, 4, 4), np.int8, torch_agrees=False, pool_size=(2, 2),
          strides=(2, 2), padding=(0, 0, 1, 1), rtol=0, atol=0)

pool_case("avg_2x2", "avg", (2, 3, 6, 6), pool_size=(2, 2), strides=(2, 2), layout="NCHW",
          out_layout="")
pool_case("avg_pad_excl", "avg", (1, 2, 5, 7), pool_size=(3, 3), padding=(1, 1),
          count_include_pad=False)
pool_case("avg_pad_incl", "avg", (1, 2, 5, 7), pool_size=(3, 3), padding=(1, 1),
          count_include_pad=True)
pool_case("avg_ceil_excl", "avg", (1, 2, 7, 8), pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
          ceil_mode=True, count_include_pad=False)
pool_case("avg_ceil_incl", "avg", (1, 2, 7, 8), pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
          ceil_mode=True, count_include_pad=True)
pool_case("avg_rect", "avg", (1, 3, 6, 9), pool_size=(2, 3), strides=(2, 3), padding=(1, 1),
          count_include_pad=True)
# TVM only: dilated average pooling, asymmetric padding, ceil windows in the
# padding (one wholly there: TVM's divisor is then 0 with count_include_pad,
# giving 0/0 = NaN).
pool_case("avg_dilated", "avg", (1, 2, 8, 8), torch_agrees=False, pool_size=(3, 2),
          dilation=(2, 3), padding=(2, 1), count_include_pad=False)
pool_case("avg_dilated_incl", "avg", (1, 2, 8, 8), torch_agrees=False, pool_size=(3, 2),
          dilation=(2, 3), padding=(2, 1), count_include_pad=True)
pool_case("avg_pad4", "avg", (1, 2, 6, 6), torch_agrees=False, pool_size=(3, 3), strides=(2, 2),
          padding=(0, 1, 2, 0), count_include_pad=True)
pool_case("avg_ceil_tvm_excl", "avg", (1, 1, 5, 5), torch_agrees=False, pool_size=(2, 2),
          strides=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=False)
pool_case("avg_ceil_tvm_incl", "avg", (1, 1, 4, 4), torch_agrees=False, pool_size=(1, 1),
          strides=(2, 2), ceil_mode=True, count_include_pad=True)
pool_case("avg_f32", "avg", (2, 3, 8, 8), np.float32, pool_size=(3, 3), strides=(2, 2),
          padding=(1, 1), count_include_pad=False, rtol=1e-6, atol=1e-6)
pool_case("avg_i32", "avg", (1, 2, 5, 5), np.int32, torch_agrees=False, pool_size=(2, 2),
          padding=(1, 1), count_include_pad=False, rtol=0, atol=0)


# ---- global_avg_pool2d -----------------------------------------------------

def gap_case(name, xs, dtype=np.float64, rtol=1e-12, atol=1e-12):
    x = rand(xs, dtype)
    if np.issubdtype(dtype, np.integer):
        s = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        n = xs[2] * xs[3]
        y = np.vectorize(lambda v: tdiv(int(v), n))(s).astype(dtype)
    else:
        y = F.adaptive_avg_pool2d(torch.from_numpy(x.astype(np.float64)), 1).numpy().astype(dtype)
    save(name, "nn.global_avg_pool2d", "", [x], y, rtol, atol)


gap_case("gap_f64", (2, 3, 5, 4))
gap_case("gap_f32", (1, 4, 3, 3), np.float32, 1e-6, 1e-6)
gap_case("gap_i32", (2, 2, 3, 2), np.int32, 0, 0)


# ---- global_max_pool2d and the adaptive pools ------------------------------

def adaptive_ref(x, kind, out):
    """Windows [floor(o*n/on), ceil((o+1)*n/on)), as TVM and PyTorch take them."""
    N, C, H, W = x.shape
    y = np.zeros((N, C) + tuple(out), dtype=x.dtype)
    for oh in range(out[0]):
        h0, h1 = oh * H // out[0], -(-(oh + 1) * H // out[0])
        for ow in range(out[1]):
            w0, w1 = ow * W // out[1], -(-(ow + 1) * W // out[1])
            win = x[:, :, h0:h1, w0:w1].reshape(N, C, -1)
            if kind == "max":
                y[:, :, oh, ow] = win.max(axis=2)
            elif np.issubdtype(x.dtype, np.integer):
                n = win.shape[2]
                y[:, :, oh, ow] = np.vectorize(lambda v: tdiv(int(v), n))(
                    win.astype(np.int64).sum(axis=2))
            else:
                y[:, :, oh, ow] = win.sum(axis=2) / win.shape[2]
    return y


def adaptive_case(name, kind, xs, output_size, dtype=np.float64, rtol=1e-12, atol=1e-12):
    x = rand(xs, dtype)
    sizes = tuple(output_size or ())  # global: None, adaptive [] also (1, 1)
    out = (1, 1) if not sizes else (sizes[0], sizes[0]) if len(sizes) == 1 else sizes
    y = adaptive_ref(x, kind, out)
    if not np.issubdtype(dtype, np.integer):
        f = F.adaptive_max_pool2d if kind == "max" else F.adaptive_avg_pool2d
        ref = f(torch.from_numpy(x.astype(np.float64)), out).numpy()
        assert np.allclose(ref, y, rtol=1e-6, atol=1e-6), name
    op = "nn.global_max_pool2d" if output_size is None else f"nn.adaptive_{kind}_pool2d"
    save(name, op, "" if output_size is None else attr_str({"output_size": output_size}), [x],
         y, rtol, atol)


adaptive_case("gmax_f64", "max", (2, 3, 5, 4), None)
adaptive_case("gmax_f32", "max", (1, 4, 3, 3), None, np.float32, 0, 0)
adaptive_case("gmax_i32", "max", (2, 2, 3, 2), None, np.int32, 0, 0)
adaptive_case("ada_avg", "avg", (2, 3, 7, 9), (3, 4))
adaptive_case("ada_avg_up", "avg", (1, 2, 3, 5), (5, 7))
adaptive_case("ada_avg_one", "avg", (1, 2, 6, 7), (4,))
adaptive_case("ada_avg_default", "avg", (1, 2, 5, 4), ())
adaptive_case("ada_avg_f32", "avg", (2, 3, 8, 8), (3, 3), np.float32, 1e-6, 1e-6)
adaptive_case("ada_avg_i32", "avg", (1, 2, 5, 7), (2, 3), np.int32, 0, 0)
adaptive_case("ada_max", "max", (2, 2, 7, 9), (3, 4))
adaptive_case("ada_max_up", "max", (1, 1, 2, 3), (3, 5))


# ---- the adjoint ops: nn.conv2d_backward_weight, nn.max_pool2d_grad, nn.avg_pool2d_grad
# Inputs in argument order: <case>_x.npy is the output gradient, <case>_w.npy the data.

def bw_case(name, xs, ws, dtype=np.float64, rtol=1e-10, atol=1e-10, **kw):
    x, w = rand(xs, dtype), rand(ws, dtype)
    t, l, b, r = pad4(kw.get("padding", (0, 0)))
    xt = F.pad(torch.from_numpy(x.astype(np.float64)), (l, r, t, b))
    wt = torch.from_numpy(w.astype(np.float64)).requires_grad_()
    y = F.conv2d(xt, wt, stride=kw.get("strides", (1, 1)), dilation=kw.get("dilation", (1, 1)),
                 groups=kw.get("groups", 1))
    dy = rand(tuple(y.shape), dtype)
    y.backward(torch.from_numpy(dy.astype(np.float64)))
    attrs = dict(kw, kernel_size=ws[2:])
    save(name, "nn.conv2d_backward_weight", attr_str(attrs), [dy, x],
         wt.grad.numpy().astype(dtype), rtol, atol)


bw_case("bw_basic", (2, 3, 6, 5), (4, 3, 3, 3))
bw_case("bw_all", (2, 4, 9, 8), (6, 2, 3, 2), strides=(2, 1), padding=(1, 0, 2, 1),
        dilation=(1, 2), groups=2)
bw_case("bw_f32", (2, 3, 8, 8), (5, 3, 3, 3), np.float32, strides=(2, 2), padding=(1, 1),
        rtol=1e-5, atol=1e-5)


def tvm_pool_grad(dy, x, kind, pool_size, strides=(1, 1), dilation=(1, 1), padding=(0, 0),
                  ceil_mode=False, count_include_pad=False):
    """The adjoint of tvm_pool: max to the first argmax inside the data,
    average spread over the taps inside the data by TVM's divisor."""
    N, C, H, W = x.shape
    pt, pl, pb, pr = pad4(padding)
    dx = np.zeros_like(x)
    OH, OW = dy.shape[2:]

    def taps(o, s, d, k, head, n):
        return [o * s - head + j * d for j in range(k) if 0 <= o * s - head + j * d < n]

    def count(o, s, d, k, head, tail, n):
        start = o * s - head
        last = start + (k - 1) * d
        if count_include_pad:
            return tdiv(min(last, n + tail - 1) - start, d) + 1
        first = start + d * max(0, tdiv(d - 1 - start, d))
        return tdiv(min(last, n - 1) - first, d) + 1

    for oh in range(OH):
        hs = taps(oh, strides[0], dilation[0], pool_size[0], pt, H)
        for ow in range(OW):
            ws = taps(ow, strides[1], dilation[1], pool_size[1], pl, W)
            if not hs or not ws:
                continue
            for n in range(N):
                for c in range(C):
                    if kind == "max":
                        win = [(x[n, c, h, w], h, w) for h in hs for w in ws]
                        best = max(range(len(win)), key=lambda i: (win[i][0], -i))
                        dx[n, c, win[best][1], win[best][2]] += dy[n, c, oh, ow]
                    else:
                        k = (count(oh, strides[0], dilation[0], pool_size[0], pt, pb, H) *
                             count(ow, strides[1], dilation[1], pool_size[1], pl, pr, W))
                        k = k if count_include_pad else max(k, 1)
                        for h in hs:
                            for w in ws:
                                dx[n, c, h, w] += dy[n, c, oh, ow] / k
    return dx


def pool_grad_case(name, kind, xs, dtype=np.float64, torch_agrees=True, rtol=1e-12, atol=1e-12,
                   **kw):
    x = rand(xs, dtype)
    y = tvm_pool(x, kind, **kw)
    dy = rand(y.shape, dtype)
    dx = tvm_pool_grad(dy, x, kind, **kw)
    if torch_agrees:
        xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
        if kind == "max":
            yt = F.max_pool2d(xt, kw["pool_size"], kw.get("strides", (1, 1)),
                              kw.get("padding", (0, 0)), kw.get("dilation", (1, 1)),
                              kw.get("ceil_mode", False))
        else:
            yt = F.avg_pool2d(xt, kw["pool_size"], kw.get("strides", (1, 1)),
                              kw.get("padding", (0, 0)), kw.get("ceil_mode", False),
                              kw.get("count_include_pad", False))
        yt.backward(torch.from_numpy(dy.astype(np.float64)))
        assert np.allclose(xt.grad.numpy(), dx, rtol=1e-6, atol=1e-6), name
    op = "nn.max_pool2d_grad" if kind == "max" else "nn.avg_pool2d_grad"
    save(name, op, attr_str(kw), [dy, x], dx, rtol, atol)


pool_grad_case("maxg_overlap", "max", (2, 2, 6, 7), pool_size=(3, 3), strides=(2, 1),
               padding=(1, 1))
pool_grad_case("maxg_dil_ceil", "max", (1, 2, 8, 9), pool_size=(3, 2), strides=(2, 3),
               padding=(1, 1), dilation=(2, 1), ceil_mode=True)
pool_grad_case("maxg_tvm", "max", (1, 2, 5, 6), torch_agrees=False, pool_size=(2, 2),
               strides=(2, 2), padding=(1, 0, 2, 1), ceil_mode=True)
pool_grad_case("maxg_f32", "max", (1, 3, 6, 6), np.float32, pool_size=(2, 2), strides=(2, 2),
               rtol=1e-6, atol=1e-6)
pool_grad_case("avgg_excl", "avg", (2, 2, 6, 7), pool_size=(3, 3), strides=(2, 1),
               padding=(1, 1), ceil_mode=True)
pool_grad_case("avgg_incl", "avg", (1, 2, 7, 8), pool_size=(3, 3), strides=(2, 2),
               padding=(1, 1), ceil_mode=True, count_include_pad=True)
pool_grad_case("avgg_tvm", "avg", (1, 2, 8, 8), torch_agrees=False, pool_size=(3, 2),
               dilation=(2, 3), padding=(2, 1, 0, 1), count_include_pad=False)
pool_grad_case("avgg_f32", "avg", (1, 3, 6, 6), np.float32, pool_size=(2, 2), strides=(2, 2),
               rtol=1e-6, atol=1e-6)


# ---- gradient rules: d(sum(y * dy)) / d(inputs) by PyTorch autograd ----------
# Files <case>_{x,w,g,dx,dw}.npy; tests/test_op_conv.c writes the same call
# in the text format, differentiates it with the rule and runs the result.

def grad_case(name, fn, shapes):
    ins = [torch.from_numpy(rand(sh)).requires_grad_() for sh in shapes]
    y = fn(*ins)
    dy = torch.from_numpy(rand(tuple(y.shape)))
    y.backward(dy)
    for suffix, t in zip("xw", ins):
        np.save(f"{OUT}/{name}_{suffix}.npy", t.detach().numpy())
        np.save(f"{OUT}/{name}_d{suffix}.npy", t.grad.numpy())
    np.save(f"{OUT}/{name}_g.npy", dy.numpy())


grad_case("grad_conv2d",
          lambda x, w: F.conv2d(F.pad(x, (0, 1, 1, 2)), w, stride=(2, 1), dilation=(1, 2),
                                groups=2), [(2, 4, 9, 8), (6, 2, 3, 2)])
grad_case("grad_conv2d_transpose",
          lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=(1, 0),
                                          groups=2), [(1, 4, 3, 4), (4, 3, 3, 3)])
grad_case("grad_max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [(2, 2, 7, 7)])
grad_case("grad_avg_pool2d",
          lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True),
          [(1, 2, 7, 8)])
grad_case("grad_global_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 1), [(2, 3, 4, 5)])
grad_case("grad_global_max_pool2d", lambda x: F.adaptive_max_pool2d(x, 1), [(2, 3, 4, 5)])


def write_header():
    lines = ["/* cases.h: generated by tools/gen_op_conv.py; do not edit. One row per",
             " * fixture: name (files <name>_{x,w,y}.npy), operator, inputs, attributes",
             " * (name=kind:value;... with kinds i int, l list, b bool, s string), rtol, atol. */"]
    for name, op, nin, attrs, rtol, atol in cases:
        lines.append(f'{{"{name}", "{op}", {nin}, "{attrs}", {rtol!r}, {atol!r}}},')
    with open(f"{OUT}/cases.h", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    write_header()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(cases)} cases, {total} bytes in {OUT}")
