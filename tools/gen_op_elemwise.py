#!/usr/bin/env python3
"""Generates the fixtures of tests/test_op_elemwise.c: for each case, the
input tensors and the expected result as .npy files under tests/ops/elemwise/,
and one line per case in tests/ops/elemwise/cases.txt:

    OP CASE NIN [ATTR=KIND:VALUE ...]

with KIND i (int), f (float), s (string) or l (comma-separated int list).
Inputs are CASE_in0.npy ..., the expected result CASE_out.npy. Expected
values are computed here with numpy (independently of the C kernels), with
integer semantics spelled out where numpy's differ from TVM's (truncating
division, saturating float-to-int casts, clip's max(min(x, hi), lo)).

Run from the repository root: python3 tools/gen_op_elemwise.py
"""
import os
import shutil

import numpy as np

OUT = "tests/ops/elemwise"
rng = np.random.default_rng(20261129)
lines = []
counter = {}


def case(op, inputs, expected, attrs=None, tag=None):
    """Writes one case; attrs maps name -> (kind, value)."""
    base = (tag or op).replace(".", "_")
    counter[base] = counter.get(base, 0) + 1
    name = f"{base}_{counter[base]}"
    for i, x in enumerate(inputs):
        np.save(f"{OUT}/{name}_in{i}.npy", np.asarray(x))
    np.save(f"{OUT}/{name}_out.npy", np.asarray(expected))
    fields = [op, name, str(len(inputs))]
    for k, (kind, v) in (attrs or {}).items():
        if kind == "l":
            v = ",".join(str(int(e)) for e in v)
        fields.append(f"{k}={kind}:{v}")
    lines.append(" ".join(fields))


def rand(shape, dtype, lo=-2.0, hi=2.0):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(dtype)
    lo, hi = max(int(lo), info.min), min(int(hi), info.max)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


# ---- binary arithmetic -------------------------------------------------
BCAST_SHAPES = [
    ((3, 4), (3, 4)),                # same shape
    ((2, 3, 4), (3, 1)),             # broadcast inner and outer
    ((4, 1, 5), (1, 6, 1)),          # both sides stretch
    ((), (2, 3)),                    # scalar left
    ((2, 3), ()),                    # scalar right
    ((2, 1, 3, 1, 2, 1, 2, 1), (1, 2, 1, 2, 1, 2, 1, 2)),  # rank 8
    ((0, 3), (1, 3)),                # empty
]


def trunc_div(a, b):
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64)) * q).astype(a.dtype)


def arith(op, f, lo=-2.0, hi=2.0, blo=None, bhi=None, int_f=None, ilo=-20, ihi=20,
          iblo=None, ibhi=None):
    blo = lo if blo is None else blo
    bhi = hi if bhi is None else bhi
    for sa, sb in BCAST_SHAPES:
        a, b = rand(sa, np.float64, lo, hi), rand(sb, np.float64, blo, bhi)
        case(op, [a, b], f(a, b))
    a, b = rand((5, 1), np.float32, lo, hi), rand((1, 7), np.float32, blo, bhi)
    case(op, [a, b], f(a, b).astype(np.float32))
    a, b = rand((2, 3), np.float16, lo, hi), rand((3,), np.float16, blo, bhi)
    case(op, [a, b], f(a.astype(np.float32), b.astype(np.float32)).astype(np.float16))
    g = int_f or f
    iblo = ilo if iblo is None else iblo
    ibhi = ihi if ibhi is None else ibhi
    for dt in (np.int32, np.int64, np.int8, np.uint8):
        lo_, blo_ = (0, max(iblo, 0)) if dt == np.uint8 else (ilo, iblo)
        a, b = rand((3, 4), dt, lo_, ihi), rand((4,), dt, blo_, ibhi)
        if op == "divide":
            b[b == 0] = 3
        case(op, [a, b], g(a, b).astype(dt))


with np.errstate(all="ignore"):
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))

    arith("add", np.add)
    arith("subtract", np.subtract)
    arith("multiply", np.multiply)
    arith("divide", np.divide, blo=0.5, bhi=2.0, int_f=trunc_div)
    arith("power", np.power, lo=0.5, hi=2.0, blo=-2.0, bhi=2.0, ilo=-4, ihi=4, iblo=0, ibhi=4)
    arith("maximum", np.maximum)
    arith("minimum", np.minimum)
    # integer wrap-around, as two's complement
    a = np.array([127, -128, 100], np.int8)
    b = np.array([1, -1, 100], np.int8)
    case("add", [a, b], (a.astype(np.int64) + b).astype(np.int8), tag="add_wrap")
    case("multiply", [a, b], (a.astype(np.int64) * b).astype(np.int8), tag="multiply_wrap")
    a = np.array([7, -7, 7, -7, -2147483648], np.int32)
    b = np.array([2, 2, -2, -2, -1], np.int32)
    case("divide", [a, b], np.array([3, -3, -3, 3, -2147483648], np.int32), tag="divide_trunc")
    # negative integer exponents: trunc(1 / x^-y)
    a = np.array([1, -1, -1, 2, -3], np.int32)
    b = np.array([-3, -3, -2, -1, -2], np.int32)
    case("power", [a, b], np.array([1, -1, 1, 0, 0], np.int32), tag="power_negexp")
    # NaN propagates through maximum and minimum
    a = np.array([np.nan, 1.0, 2.0])
    b = np.array([0.0, np.nan, 1.0])
    case("maximum", [a, b], np.maximum(a, b), tag="maximum_nan")
    case("minimum", [a, b], np.minimum(a, b), tag="minimum_nan")

    # ---- comparisons ---------------------------------------------------
    for op, f in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                  ("less_equal", np.less_equal), ("greater", np.greater),
                  ("greater_equal", np.greater_equal)]:
        # small integers as floats, so ties occur
        a = rng.integers(-2, 3, size=(2, 3, 4)).astype(np.float64)
        b = rng.integers(-2, 3, size=(3, 1)).astype(np.float64)
        case(op, [a, b], f(a, b))
        a, b = rand((4,), np.float32), rand((3, 1), np.float32)
        b[0, 0] = a[0]
        case(op, [a, b], f(a, b))
        for dt in (np.int32, np.int64, np.int8, np.uint8):
            a, b = rand((3, 4), dt, 0, 3), rand((4,), dt, 0, 3)
            case(op, [a, b], f(a, b))
        a, b = rand((2, 3), np.bool_), rand((2, 1), np.bool_)
        case(op, [a, b], f(a, b))
        a, b = rand((), np.float64), rand((5,), np.float64)
        case(op, [a, b], f(a, b))
        a = rng.integers(-2, 3, size=(2, 3)).astype(np.float16)
        b = rng.integers(-2, 3, size=(3,)).astype(np.float16)
        case(op, [a, b], f(a, b))

    for op, f in [("logical_and", np.logical_and), ("logical_or", np.logical_or)]:
        for sa, sb in [((3, 4), (3, 4)), ((2, 3, 4), (3, 1)), ((), (2, 2)), ((2, 5), ())]:
            a, b = rand(sa, np.bool_), rand(sb, np.bool_)
            case(op, [a, b], f(a, b))
    for s in [(3, 4), (), (2, 1, 3)]:
        a = rand(s, np.bool_)
        case("logical_not", [a], np.logical_not(a))

    # ---- unary ----------------------------------------------------------
    def unary(op, f, lo=-3.0, hi=3.0, ints=False, attrs=None, int_f=None):
        for s in [(3, 4), (), (2, 3, 5)]:
            x = rand(s, np.float64, lo, hi)
            case(op, [x], f(x), attrs)
        x = rand((4, 5), np.float32, lo, hi)
        case(op, [x], f(x).astype(np.float32), attrs)
        x = rand((7,), np.float16, lo, hi)
        case(op, [x], f(x.astype(np.float32)).astype(np.float16), attrs)
        if ints:
            g = int_f or f
            for dt in (np.int32, np.int64, np.int8, np.uint8):
                x = rand((3, 4), dt, -50 if dt != np.uint8 else 0, 50 if dt != np.uint8 else 255)
                case(op, [x], g(x).astype(dt), attrs)

    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    unary("negative", np.negative, ints=True)
    unary("abs", np.abs, ints=True)
    unary("nn.relu", lambda x: np.maximum(x, 0).astype(x.dtype), ints=True)
    unary("exp", np.exp)
    unary("log", np.log, lo=0.1, hi=5.0)
    unary("sqrt", np.sqrt, lo=0.0, hi=5.0)
    unary("rsqrt", lambda x: 1.0 / np.sqrt(x), lo=0.1, hi=5.0)
    unary("tanh", np.tanh)
    unary("sigmoid", sigmoid, lo=-8.0, hi=8.0)
    unary("nn.leaky_relu", lambda x: np.where(x > 0, x, 0.25 * x))  # default alpha
    for alpha in (0.1, 0.0, 2.0):
        unary("nn.leaky_relu", lambda x: np.where(x > 0, x, x.dtype.type(alpha) * x),
              attrs={"alpha": ("f", alpha)})
    for lo, hi in [(-0.5, 0.5), (0, 6), (1.0, -1.0)]:
        kind = "i" if isinstance(lo, int) else "f"

        def clip(x, lo=lo, hi=hi):
            return np.maximum(np.minimum(x, x.dtype.type(hi)), x.dtype.type(lo))

        def iclip(x, lo=lo, hi=hi):
            return np.maximum(np.minimum(x, np.trunc(hi)), np.trunc(lo)).astype(x.dtype)

        unary("clip", clip, ints=True, int_f=iclip,
              attrs={"a_min": (kind, lo), "a_max": (kind, hi)})
    x = np.array([-128, -1, 0, 127], np.int8)
    case("negative", [x], np.negative(x), tag="negative_wrap")
    case("abs", [x], np.abs(x), tag="abs_wrap")
    x = np.array([np.nan, -1.0, 2.0])
    case("nn.relu", [x], np.array([np.nan, 0.0, 2.0]), tag="relu_nan")
    case("clip", [x], np.array([np.nan, -0.5, 0.5]), tag="clip_nan",
         attrs={"a_min": ("f", -0.5), "a_max": ("f", 0.5)})

    # ---- where ------------------------------------------------------------
    for dt in (np.float64, np.float32, np.int32, np.int8, np.float16, np.bool_, np.int64):
        for sc, sx, sy in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)),
                           ((), (2, 3), (3,)), ((2, 1, 3), (), (4, 1))]:
            cnd, x, y = rand(sc, np.bool_), rand(sx, dt, -9, 9), rand(sy, dt, -9, 9)
            case("where", [cnd, x, y], np.where(cnd, x, y))

    # ---- cast ---------------------------------------------------------------
    def sat_int(x, dt):
        info = np.iinfo(dt)
        out = []
        for v in np.asarray(x, np.float64).ravel():
            if np.isnan(v):
                out.append(0)
            elif v <= info.min:
                out.append(info.min)
            elif v >= info.max:
                out.append(info.max)
            else:
                out.append(int(np.trunc(v)))
        return np.array(out, dtype=dt).reshape(np.shape(x))

    special = np.array([0.0, -0.0, 1.5, -1.5, 2.9, -2.9, 1e10, -1e10, np.inf, -np.inf, np.nan,
                        255.5, 300.0, -3.0])
    for dt in (np.int32, np.int64, np.int8, np.uint8):
        case("cast", [special], sat_int(special, dt), {"dtype": ("s", np.dtype(dt).name)})
    x32 = special.astype(np.float32)
    case("cast", [x32], sat_int(x32, np.int32), {"dtype": ("s", "int32")})
    case("cast", [special], special != 0, {"dtype": ("s", "bool")})
    x = rand((3, 4), np.float64, -100, 100)
    for dt in ("float32", "float16"):
        case("cast", [x], x.astype(dt), {"dtype": ("s", dt)})
    x = rand((2, 5), np.float32)
    case("cast", [x], x.astype(np.float64), {"dtype": ("s", "float64")})
    x = rand((2, 5), np.float16)
    case("cast", [x], x.astype(np.float32), {"dtype": ("s", "float32")})
    x = np.array([-300, -129, -128, -1, 0, 127, 128, 255, 256, 2**31 - 1], np.int64)
    for dt in ("int8", "uint8", "int32", "float64", "float32"):
        case("cast", [x], x.astype(dt), {"dtype": ("s", dt)})
    x = np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32)
    for dt in ("int64", "uint8", "bool", "float64"):
        case("cast", [x], x.astype(dt), {"dtype": ("s", dt)})
    x = rand((2, 3), np.bool_)
    for dt in ("float32", "int32", "uint8", "bool"):
        case("cast", [x], x.astype(dt), {"dtype": ("s", dt)})
    x = np.array([0, 1, 200, 255], np.uint8)
    for dt in ("int8", "int64", "float64"):
        case("cast", [x], x.astype(dt), {"dtype": ("s", dt)})

    # ---- creation -------------------------------------------------------------
    for shape, dt in [((2, 3), "float32"), ((), "float64"), ((4,), "int64"), ((2, 2), "bool"),
                      ((3,), "float16"), ((0, 2), "int32"), ((2, 1, 2), "uint8")]:
        case("zeros", [], np.zeros(shape, dt), {"shape": ("l", shape), "dtype": ("s", dt)})
        case("ones", [], np.ones(shape, dt), {"shape": ("l", shape), "dtype": ("s", dt)})
    for v, shape, dt, want in [
            (np.float64(3.5), (2, 3), "float32", np.full((2, 3), 3.5, np.float32)),
            (np.int32(7), (4,), None, np.full((4,), 7, np.int32)),
            (np.float64(2.9), (2, 2), "int32", np.full((2, 2), 2, np.int32)),
            (np.float64(-2.9), (3,), "int64", np.full((3,), -2, np.int64)),
            (np.int32(-1), (2,), "uint8", np.full((2,), 255, np.uint8)),
            (np.float32(0.5), (), None, np.float32(0.5)),
            (np.float64(1.0), (2, 2), "bool", np.ones((2, 2), np.bool_)),
            (np.float64(0.1), (3,), "float16", np.full((3,), 0.1, np.float16))]:
        attrs = {"shape": ("l", shape)}
        if dt:
            attrs["dtype"] = ("s", dt)
        case("full", [np.asarray(v)], want, attrs)
    for dt in (np.float64, np.float32, np.int32, np.bool_, np.float16, np.int8):
        x = rand((2, 3), dt)
        case("zeros_like", [x], np.zeros_like(x))
        case("ones_like", [x], np.ones_like(x))
    for x, v, want in [
            (rand((2, 3), np.float32), np.float64(1.5), np.full((2, 3), 1.5, np.float32)),
            (rand((4,), np.int32), np.float64(-2.5), np.full((4,), -2, np.int32)),
            (rand((), np.float64), np.int64(3), np.float64(3.0)),
            (rand((2, 2), np.bool_), np.float32(0.0), np.zeros((2, 2), np.bool_)),
            (rand((3,), np.float16), np.float64(0.25), np.full((3,), 0.25, np.float16))]:
        case("full_like", [x, np.asarray(v)], want)

    # ---- broadcast_to, collapse_sum_like, copy ---------------------------------
    for dt in (np.float64, np.float32, np.int32, np.float16, np.bool_, np.int8):
        for s, to in [((3, 1), (2, 3, 4)), ((), (2, 2)), ((1,), (5,)), ((2, 3), (2, 3)),
                      ((1, 2, 1), (3, 2, 2))]:
            x = rand(s, dt, -9, 9)
            case("broadcast_to", [x], np.broadcast_to(x, to).copy(), {"shape": ("l", to)})

    def collapse(x, shape):
        nd = len(shape)
        lead = x.ndim - nd
        s = x.sum(axis=tuple(range(lead)), dtype=np.float64 if x.dtype.kind == "f" else np.int64)
        axes = tuple(i for i in range(nd) if shape[i] == 1 and s.shape[i] != 1)
        if axes:
            s = s.sum(axis=axes, keepdims=True)
        return s.reshape(shape)

    for dt in (np.float64, np.float32, np.int32, np.float16, np.int8):
        for s, to in [((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)), ((2, 3, 4), ()),
                      ((2, 3, 4), (2, 1, 1)), ((2, 3, 4), (1, 3, 4)), ((3, 4), (3, 4)),
                      ((5, 1, 6), (1, 1))]:
            x = rand(s, dt, -9, 9)
            like = np.zeros(to, dt)
            case("collapse_sum_like", [x, like], collapse(x, to).astype(dt))
    # int8 sums wrap after the accumulation, like every integer op
    x = np.full((4, 3), 100, np.int8)
    want = np.full((3,), 400, np.int64).astype(np.int8)
    case("collapse_sum_like", [x, np.zeros((3,), np.int8)], want, tag="collapse_sum_like_wrap")
    for dt in (np.float64, np.int8, np.bool_, np.float16, np.int64):
        x = rand((3, 2), dt)
        case("copy", [x], x.copy())

    # ---- a whole program (tests/test_op_elemwise.c: text_program) -------------
    x = rand((2, 3), np.float32)
    y = rand((3,), np.float32, 0.5, 2.0)
    cnd = np.array([[True], [False]])
    t = x + y
    t = np.where(t > 0, t, np.float32(0.1) * t)
    t = np.maximum(np.minimum(t, np.float32(1.0)), np.float32(-0.5))
    t = np.where(cnd, t, x).astype(np.float64)
    outs = [t < 0, np.broadcast_to(x.sum(axis=0, dtype=np.float64).astype(np.float32), (4, 3)),
            x * y - x / y]
    for i, v in enumerate([x, y, cnd]):
        np.save(f"{OUT}/program_in{i}.npy", v)
    for i, v in enumerate(outs):
        np.save(f"{OUT}/program_out{i}.npy", np.ascontiguousarray(v))

with open(f"{OUT}/cases.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
print(f"{len(lines)} cases, {total} bytes in {OUT}")
