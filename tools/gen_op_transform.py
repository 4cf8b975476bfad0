#!/usr/bin/env python3
"""Generates the fixtures of tests/test_op_transform.c: for each case, the
inputs and the expected outputs as .npy files under tests/ops/transform/,
computed independently with NumPy (TVM's semantics written out by hand where
NumPy differs: exclude, multi-axis argmax, integer mean, take's batch_dims,
one_hot's axis). Reshape's special values use the examples of TVM's own
documentation with their documented result shapes.

Run from the repository root: python3 tools/gen_op_transform.py
With --table it prints the C case table that test_op_transform.c holds.
"""
import os
import sys

import numpy as np

OUT = "tests/ops/transform"
rng = np.random.default_rng(20261129)
cases = []


def reseed(family):
    """Each family draws from its own stream, so adding a case to one family
    leaves the fixtures of the others unchanged."""
    global rng
    rng = np.random.default_rng([20261129, sum(map(ord, family))])


def rand(shape, dtype=np.float64):
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-9, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def case(name, op, attrs, inputs, outputs, tuple_arg=False, tol=1e-12):
    cases.append(dict(name=name, op=op, attrs=attrs, inputs=inputs, outputs=outputs,
                      tuple_arg=tuple_arg, tol=tol))


def axes_of(axis, ndim, exclude):
    if axis is None or axis == []:  # TVM: None or [] reduces every axis
        return tuple(range(ndim))
    else:
        ax = [a % ndim for a in (axis if isinstance(axis, list) else [axis])]
    if exclude:
        ax = [d for d in range(ndim) if d not in ax]
    return tuple(sorted(ax))


def attr_str(**kw):
    parts = []
    for k, v in kw.items():
        if v is None:
            s = "None"
        elif isinstance(v, bool):
            s = "True" if v else "False"
        elif isinstance(v, str):
            s = '"%s"' % v
        elif isinstance(v, list):
            s = "[" + ", ".join(str(x) for x in v) + "]"
        else:
            s = str(v)
        parts.append("%s=%s" % (k, s))
    return "; ".join(parts)


# ---- reductions ----

def np_reduce(op, x, ax, keep):
    if op == "mean" and np.issubdtype(x.dtype, np.integer):
        # TVM: sum in the input dtype, then truncating division by the count
        s = np.sum(x, axis=ax, keepdims=keep, dtype=x.dtype).astype(np.int64)
        n = int(np.prod([x.shape[a] for a in ax]))
        q = (np.abs(s) // n) * np.sign(s)
        return np.asarray(q.astype(x.dtype))
    if op in ("sum", "mean") and x.dtype == np.float16:  # widened, rounded once
        f = np.sum if op == "sum" else np.mean
        return np.asarray(f(x.astype(np.float64), axis=ax, keepdims=keep).astype(np.float16))
    if op == "sum" and x.dtype == np.bool_:
        return np.asarray(np.any(x, axis=ax, keepdims=keep))  # TVM: sum of bool is any
    if op == "sum":
        return np.asarray(np.sum(x, axis=ax, keepdims=keep, dtype=x.dtype))
    f = {"mean": np.mean, "max": np.max, "min": np.min}[op]
    return np.asarray(f(x, axis=ax, keepdims=keep).astype(x.dtype))


def reduce_case(name, op, x, axis=None, keepdims=False, exclude=False, tol=1e-12, **extra):
    ax = axes_of(axis, x.ndim, exclude)
    y = np_reduce(op, x, ax, keepdims)
    kw = {}
    if axis is not None:
        kw["axis"] = axis
    if keepdims:
        kw["keepdims"] = True
    if exclude:
        kw["exclude"] = True
    case(name, op, attr_str(**kw), [x], [y], tol=tol)


def np_argreduce(op, x, ax, keep, last):
    kept = [d for d in range(x.ndim) if d not in ax]
    t = np.transpose(x, kept + list(ax))
    t = t.reshape([x.shape[d] for d in kept] + [-1])
    f = np.argmax if op == "argmax" else np.argmin
    if last:
        r = t.shape[-1] - 1 - f(t[..., ::-1], axis=-1)
    else:
        r = f(t, axis=-1)
    r = r.astype(np.int32)
    if keep:
        r = r.reshape([1 if d in ax else x.shape[d] for d in range(x.ndim)])
    return np.asarray(r)


def argreduce_case(name, op, x, axis=None, keepdims=False, exclude=False, last=False):
    ax = axes_of(axis, x.ndim, exclude)
    y = np_argreduce(op, x, ax, keepdims, last)
    kw = {}
    if axis is not None:
        kw["axis"] = axis
    if keepdims:
        kw["keepdims"] = True
    if last:
        kw["select_last_index"] = True
    if exclude:
        kw["exclude"] = True
    case(name, op, attr_str(**kw), [x], [y])


def gen_reductions():
    reseed("gen_reductions")
    x = rand((3, 4, 5))
    for op in ["sum", "mean", "max", "min"]:
        reduce_case(op + "_all", op, x)
        reduce_case(op + "_ax1", op, x, axis=1)
        reduce_case(op + "_axneg_keep", op, x, axis=[-1, 0], keepdims=True)
        reduce_case(op + "_excl", op, x, axis=[1], exclude=True)
        reduce_case(op + "_excl_keep", op, x, axis=[0, 2], keepdims=True, exclude=True)
    reduce_case("sum_f32", "sum", rand((4, 33), np.float32), axis=[1], tol=1e-6)
    reduce_case("mean_f32_keep", "mean", rand((2, 3, 4), np.float32), axis=[0, 2], keepdims=True, tol=1e-6)
    reduce_case("sum_f16", "sum", rand((2, 6), np.float16), axis=[1], tol=1e-3)
    reduce_case("mean_f16", "mean", rand((3, 4), np.float16), axis=[0], tol=1e-3)
    reduce_case("max_f16", "max", rand((3, 4), np.float16), axis=[1], tol=0)
    reduce_case("sum_i32", "sum", rand((3, 4), np.int32), axis=[0])
    reduce_case("sum_i8_wrap", "sum", np.full((2, 5), 100, np.int8), axis=[1])
    reduce_case("mean_i32_trunc", "mean", np.array([[-7, 2, 0], [5, 3, 1]], np.int32), axis=[1])
    reduce_case("mean_i64_all", "mean", rand((4, 3), np.int64))
    reduce_case("max_i8", "max", rand((3, 4), np.int8), axis=[1], keepdims=True)
    reduce_case("min_u8", "min", rng.integers(0, 255, size=(3, 4)).astype(np.uint8), axis=[0])
    reduce_case("sum_bool_any", "sum", np.array([[True, False, True], [False, False, False]]), axis=[1])
    reduce_case("max_bool", "max", np.array([[True, False], [False, False]]), axis=[1])
    reduce_case("min_scalar", "min", np.array(2.5))
    reduce_case("sum_zero_size", "sum", rand((0, 3)), axis=[0])
    reduce_case("mean_zero_rows", "mean", rand((0, 3)), axis=[1])
    reduce_case("sum_empty_axes", "sum", rand((2, 3)), axis=[])
    reduce_case("mean_empty_axes_excl", "mean", rand((2, 3)), axis=[], exclude=True)
    y = rand((2, 3, 2, 3))
    for op in ["argmax", "argmin"]:
        argreduce_case(op + "_all", op, y)
        argreduce_case(op + "_ax2", op, y, axis=2)
        argreduce_case(op + "_multi_keep", op, y, axis=[1, 3], keepdims=True)
        argreduce_case(op + "_excl", op, y, axis=[0], exclude=True)
        ties = np.array([[1, 3, 3, 0], [2, 2, 1, 2], [0, 0, 0, 0]], np.float64)
        if op == "argmin":
            ties = -ties
        argreduce_case(op + "_first", op, ties, axis=1)
        argreduce_case(op + "_last", op, ties, axis=1, last=True)
        argreduce_case(op + "_i32", op, rand((4, 5), np.int32), axis=0)
        argreduce_case(op + "_f32_neg", op, rand((3, 4), np.float32), axis=-1)


# ---- reshape (examples from TVM's documentation of relay.reshape) ----

def gen_reshape():
    reseed("gen_reshape")
    docs = [
        ("zero_copy", (2, 3, 4), [4, 0, 2], (4, 3, 2)),
        ("zero_all", (2, 3, 4), [2, 0, 0], (2, 3, 4)),
        ("infer_mid", (2, 3, 4), [6, 1, -1], (6, 1, 4)),
        ("infer_one", (2, 3, 4), [3, -1, 8], (3, 1, 8)),
        ("infer_flat", (2, 3, 4), [-1], (24,)),
        ("m2", (2, 3, 4), [-2], (2, 3, 4)),
        ("m2_after", (2, 3, 4), [2, -2], (2, 3, 4)),
        ("m2_ones", (2, 3, 4), [-2, 1, 1], (2, 3, 4, 1, 1)),
        ("m3", (2, 3, 4), [-3, 4], (6, 4)),
        ("m3_twice", (2, 3, 4, 5), [-3, -3], (6, 20)),
        ("m3_zero", (2, 3, 4), [0, -3], (2, 12)),
        ("m3_m2", (2, 3, 4), [-3, -2], (6, 4)),
        ("m4", (2, 3, 4), [-4, 1, 2, -2], (1, 2, 3, 4)),
        ("m4_infer", (2, 3, 4), [2, -4, -1, 3, -2], (2, 1, 3, 4)),
        ("plain", (2, 6), [3, 4], (3, 4)),
        ("to_scalar", (1, 1), [], ()),
    ]
    for name, shape, newshape, want in docs:
        x = rand(shape)
        case("reshape_" + name, "reshape", attr_str(newshape=newshape), [x], [x.reshape(want)])
    x = rand((2, 3), np.int32)
    case("reshape_i32", "reshape", attr_str(newshape=[3, -1]), [x], [x.reshape(3, 2)])
    x = rand((0, 3))
    case("reshape_allowzero", "reshape", attr_str(newshape=[3, 0], allowzero=True), [x],
         [x.reshape(3, 0)])


# ---- reshape_like (TVM's lhs/rhs ranges: data's dims [lb, le) take the
# shape of like's [rb, re)) ----

def gen_reshape_like():
    reseed("gen_reshape_like")
    x, like = rand((2, 3, 4)), rand((6, 4))
    case("reshape_like_whole", "reshape_like", "", [x, like], [x.reshape(6, 4)])
    x, like = rand((2, 3, 4)), rand((3, 2, 7))
    case("reshape_like_ranges", "reshape_like", attr_str(lhs_begin=0, lhs_end=2, rhs_begin=0, rhs_end=2),
         [x, like], [x.reshape(3, 2, 4)])
    x, like = rand((2, 12)), rand((5, 3, 4))
    case("reshape_like_negative", "reshape_like", attr_str(lhs_begin=-1, rhs_begin=-2), [x, like],
         [x.reshape(2, 3, 4)])
    x, like = rand((4, 2), np.int32), rand((8,))
    case("reshape_like_i32", "reshape_like", "", [x, like], [x.reshape(8)])


def gen_transpose():
    reseed("gen_transpose")
    x = rand((2, 3, 4))
    case("transpose_default", "transpose", "", [x], [np.transpose(x)])
    case("transpose_perm", "transpose", attr_str(axes=[1, 0, 2]), [x], [np.transpose(x, (1, 0, 2))])
    case("transpose_neg", "transpose", attr_str(axes=[-1, 0, 1]), [x], [np.transpose(x, (2, 0, 1))])
    y = rand((2, 3, 2, 5), np.float32)
    case("transpose_f32_4d", "transpose", attr_str(axes=[3, 1, 0, 2]), [y],
         [np.transpose(y, (3, 1, 0, 2))])
    z = rand((3, 5), np.float16)
    case("transpose_f16", "transpose", attr_str(axes=[1, 0]), [z], [z.T.copy()])
    big = rand((37, 45), np.float32)  # several 32 x 32 tiles, ragged edges
    case("transpose_tiles", "transpose", "", [big], [big.T.copy()])
    cube = rand((2, 33, 35), np.float32)
    case("transpose_tiles_3d", "transpose", attr_str(axes=[2, 0, 1]), [cube],
         [np.transpose(cube, (2, 0, 1)).copy()])
    z0 = rand((0, 3))
    case("transpose_zero_size", "transpose", "", [z0], [z0.T.copy()])
    w = rand((4, 3), np.int8)
    case("transpose_i8", "transpose", "", [w], [w.T.copy()])


def gen_concat_stack_split():
    reseed("gen_concat_stack_split")
    a, b, c = rand((2, 3)), rand((1, 3)), rand((4, 3))
    case("concatenate_ax0", "concatenate", "", [a, b, c], [np.concatenate([a, b, c], 0)], tuple_arg=True)
    a, b = rand((2, 3, 2), np.float32), rand((2, 1, 2), np.float32)
    case("concatenate_ax1", "concatenate", attr_str(axis=1), [a, b],
         [np.concatenate([a, b], 1)], tuple_arg=True)
    case("concatenate_neg", "concatenate", attr_str(axis=-1), [a, a],
         [np.concatenate([a, a], -1)], tuple_arg=True)
    e0, e1 = rand((0, 3)), rand((2, 3))
    case("concatenate_empty_part", "concatenate", "", [e0, e1], [np.concatenate([e0, e1])],
         tuple_arg=True)
    i1 = rand((3,), np.int64)
    case("concatenate_one", "concatenate", "", [i1], [i1.copy()], tuple_arg=True)
    a, b, c = rand((2, 3)), rand((2, 3)), rand((2, 3))
    case("stack_ax0", "stack", "", [a, b, c], [np.stack([a, b, c], 0)], tuple_arg=True)
    case("stack_ax1", "stack", attr_str(axis=1), [a, b], [np.stack([a, b], 1)], tuple_arg=True)
    case("stack_last", "stack", attr_str(axis=-1), [a, b, c], [np.stack([a, b, c], -1)], tuple_arg=True)
    s1, s2 = rand((), np.int32), rand((), np.int32)
    case("stack_scalars", "stack", "", [s1, s2], [np.stack([s1, s2])], tuple_arg=True)
    x = rand((6, 4))
    case("split_sections", "split", attr_str(indices_or_sections=3), [x], np.split(x, 3, 0))
    case("split_sections_ax1", "split", attr_str(indices_or_sections=2, axis=1), [x], np.split(x, 2, 1))
    case("split_indices", "split", attr_str(indices_or_sections=[1, 4]), [x], np.split(x, [1, 4], 0))
    y = rand((2, 7, 3), np.float32)
    case("split_indices_neg", "split", attr_str(indices_or_sections=[2, 3, 5], axis=-2), [y],
         np.split(y, [2, 3, 5], 1))
    case("split_one", "split", attr_str(indices_or_sections=1), [x], [x.copy()])


def take_batch(data, ind, axis, b, mode):
    n = data.shape[axis]
    if mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    elif mode == "wrap":
        ind = np.mod(ind, n)
    bshape = data.shape[:b]
    out_shape = data.shape[:axis] + ind.shape[b:] + data.shape[axis + 1:]
    out = np.empty(out_shape, data.dtype)
    for bi in np.ndindex(*bshape) if b else [()]:
        sub = data[bi]
        idx = ind[bi]
        out[bi] = np.take(sub, idx, axis=axis - b)
    return out


def gen_take():
    reseed("gen_take")
    x = rand((3, 4))
    idx = np.array([[0, 2], [1, 3]], np.int32)
    case("take_flat", "take", "", [x, idx], [np.take(x, idx)])
    case("take_ax0", "take", attr_str(axis=0), [x, np.array([2, 0, 2], np.int64)],
         [np.take(x, [2, 0, 2], axis=0)])
    case("take_ax1", "take", attr_str(axis=1), [x, idx], [np.take(x, idx, axis=1)])
    case("take_axneg", "take", attr_str(axis=-1), [x, np.array(3, np.int32)], [np.take(x, 3, axis=-1)])
    case("take_no_indices", "take", attr_str(axis=1), [x, np.zeros((0,), np.int64)],
         [np.take(x, np.zeros((0,), np.int64), axis=1)])
    bad = np.array([-5, -1, 0, 4, 9], np.int32)
    case("take_clip", "take", attr_str(axis=1), [x, bad], [np.take(x, bad, axis=1, mode="clip")])
    case("take_wrap", "take", attr_str(axis=1, mode="wrap"), [x, bad],
         [np.take(x, bad, axis=1, mode="wrap")])
    case("take_fast", "take", attr_str(axis=0, mode="fast"), [x, np.array([1, 2], np.int8)],
         [np.take(x, [1, 2], axis=0)])
    case("take_flat_wrap", "take", attr_str(mode="wrap"), [x, bad], [np.take(x, bad, mode="wrap")])
    d = rand((2, 3, 4), np.float32)
    bi = rng.integers(-1, 5, size=(2, 5)).astype(np.int64)
    case("take_batch1_ax1", "take", attr_str(batch_dims=1, axis=1), [d, bi],
         [take_batch(d, bi, 1, 1, "clip")])
    bi2 = rng.integers(0, 4, size=(2, 3, 2)).astype(np.int32)
    case("take_batch2_ax2", "take", attr_str(batch_dims=2, axis=2, mode="wrap"), [d, bi2],
         [take_batch(d, bi2, 2, 2, "wrap")])
    bi3 = rng.integers(0, 3, size=(2, 2)).astype(np.int32)
    case("take_batch1_ax2", "take", attr_str(batch_dims=1, axis=2), [d, bi3],
         [take_batch(d, bi3, 2, 1, "clip")])
    case("take_batchneg", "take", attr_str(batch_dims=-1, axis=1), [d, bi],
         [take_batch(d, bi, 1, 1, "clip")])


def gen_expand_squeeze():
    reseed("gen_expand_squeeze")
    x = rand((2, 3))
    case("expand_dims_0", "expand_dims", attr_str(axis=0), [x], [x.reshape(1, 2, 3)])
    case("expand_dims_end", "expand_dims", attr_str(axis=2), [x], [x.reshape(2, 3, 1)])
    case("expand_dims_neg", "expand_dims", attr_str(axis=-1, num_newaxis=2), [x], [x.reshape(2, 3, 1, 1)])
    case("expand_dims_neg3", "expand_dims", attr_str(axis=-3), [x], [x.reshape(1, 2, 3)])
    case("expand_dims_mid2", "expand_dims", attr_str(axis=1, num_newaxis=2), [x], [x.reshape(2, 1, 1, 3)])
    case("expand_dims_zero", "expand_dims", attr_str(axis=1, num_newaxis=0), [x], [x.copy()])
    y = rand((1, 3, 1, 2), np.int32)
    case("squeeze_all", "squeeze", "", [y], [np.squeeze(y)])
    case("squeeze_ax", "squeeze", attr_str(axis=[2]), [y], [np.squeeze(y, 2)])
    case("squeeze_neg", "squeeze", attr_str(axis=[-4, 2]), [y], [np.squeeze(y, (0, 2))])
    case("squeeze_empty", "squeeze", attr_str(axis=[]), [y], [y.copy()])


def one_hot_np(idx, on, off, depth, axis, dtype):
    hot = idx[..., None] == np.arange(depth)
    out = np.where(hot, on, off).astype(dtype)
    return np.moveaxis(out, -1, axis if axis >= 0 else idx.ndim + 1 + axis)


def gen_one_hot():
    reseed("gen_one_hot")
    idx = np.array([[0, 2, 1], [3, -1, 5]], np.int32)
    on, off = np.array(1.0, np.float32), np.array(0.0, np.float32)
    case("one_hot_last", "one_hot", attr_str(depth=4, dtype="float32"), [idx, on, off],
         [one_hot_np(idx, 1.0, 0.0, 4, -1, np.float32)])
    on64, off64 = np.array(2.5), np.array(-1.0)
    case("one_hot_ax0", "one_hot", attr_str(depth=3, axis=0, dtype="float64"), [idx, on64, off64],
         [one_hot_np(idx, 2.5, -1.0, 3, 0, np.float64)])
    case("one_hot_ax1", "one_hot", attr_str(depth=5, axis=1, dtype="float64"), [idx, on64, off64],
         [one_hot_np(idx, 2.5, -1.0, 5, 1, np.float64)])
    i64 = np.array([1, 0, 2], np.int64)
    oni, offi = np.array(7, np.int32), np.array(0, np.int32)
    case("one_hot_int", "one_hot", attr_str(depth=3, dtype="int32"), [i64, oni, offi],
         [one_hot_np(i64, 7, 0, 3, -1, np.int32)])
    case("one_hot_nodtype", "one_hot", attr_str(depth=2, axis=-2), [i64, on64, off64],
         [one_hot_np(i64, 2.5, -1.0, 2, -2, np.float64)])
    case("one_hot_f16", "one_hot", attr_str(depth=3, dtype="float16"), [i64, on64, off64],
         [one_hot_np(i64, 2.5, -1.0, 3, -1, np.float16)])
    case("one_hot_u8_bool", "one_hot", attr_str(depth=4, dtype="bool"),
         [np.array([[3, 0], [1, 200]], np.uint8), np.array(True), np.array(False)],
         [one_hot_np(np.array([[3, 0], [1, 200]]), True, False, 4, -1, np.bool_)])
    case("one_hot_default", "one_hot", "", [i64, oni, offi],
         [one_hot_np(i64, 7, 0, 1, -1, np.int32)])


def gen_program():
    """The inputs and results of the program in test_op_transform.c's
    test_program, which chains the family's operators through the parser,
    the type checker and the interpreter."""
    reseed("gen_program")
    x = rand((2, 3, 4))
    i = np.array([4, -1], np.int32)
    t1 = x.reshape(-1, 4).T
    p0, p1 = np.split(t1, 2, axis=1)
    t3 = np.stack([p0, p1], 0)
    t4 = np.take(t3, i, axis=2, mode="wrap")
    t6 = np.sum(t4, axis=1)
    t8 = np.concatenate([t6[None], t6.T[None]], 0)
    outs = [
        np.mean(t8, axis=(1, 2)),
        (t8.shape[2] - 1 - np.argmax(t8[..., ::-1], axis=2)).astype(np.int32),
        np.moveaxis((i[:, None] == np.arange(5)).astype(np.float64), -1, 0),
        np.max(x, axis=-1),
        np.array(np.min(x)),
    ]
    case("program", "(program)", "", [x, i], outs)


def main():
    gen_reductions()
    gen_reshape()
    gen_reshape_like()
    gen_transpose()
    gen_concat_stack_split()
    gen_take()
    gen_expand_squeeze()
    gen_one_hot()
    gen_program()
    if "--table" in sys.argv:
        for cs in cases:
            if cs["name"] == "program":
                continue
            print('    {"%s", "%s", "%s", %d, %d, %d, %g},' % (
                cs["name"], cs["op"], cs["attrs"].replace('"', '\\"'), len(cs["inputs"]),
                1 if cs["tuple_arg"] else 0, len(cs["outputs"]), cs["tol"]))
        return
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy"):
            os.remove(os.path.join(OUT, f))
    for cs in cases:
        for i, a in enumerate(cs["inputs"]):
            np.save(os.path.join(OUT, "%s_in%d.npy" % (cs["name"], i)), np.array(a, order="C"))
        for i, a in enumerate(cs["outputs"]):
            np.save(os.path.join(OUT, "%s_out%d.npy" % (cs["name"], i)), np.array(a, order="C"))
    print("%d cases written to %s" % (len(cases), OUT))


if __name__ == "__main__":
    main()
