"""gen_sparse_tests.py: NumPy results of scatter_nd and gather_nd for
tests/test_sparse.c.

Writes tests/sparse/<case>_in<k>.npy (data, indices, updates) and
<case>_out.npy. TVM's semantics: indices (M, Y...) index the first M dims
of data (after batch_dims B for gather_nd); scatter_nd with mode="add"
accumulates repeated indices, mode="update" writes (cases keep the written
indices distinct, where TVM leaves the order open).
Run from the repository root: python3 tools/gen_sparse_tests.py
"""
import os

import numpy as np

rng = np.random.default_rng(11)
OUT = os.path.join("tests", "sparse")


def save(case, ins, out):
    os.makedirs(OUT, exist_ok=True)
    for k, a in enumerate(ins):
        np.save(os.path.join(OUT, f"{case}_in{k}.npy"), a)
    np.save(os.path.join(OUT, f"{case}_out.npy"), out)


def scatter(case, data, idx, upd, mode):
    out = data.copy()
    if mode == "add":
        np.add.at(out, tuple(idx), upd)
    else:
        out[tuple(idx)] = upd
    save(case, [data, idx, upd], out)


def gather(case, data, idx, batch_dims=0):
    if batch_dims == 0:
        out = data[tuple(idx)]
    else:  # one batch dim: out[b, y...] = data[b, idx[:, b, y...]]
        out = np.stack([data[b][tuple(idx[:, b])] for b in range(data.shape[0])])
    save(case, [data, idx], out)


def f(dtype, *shape):
    return rng.uniform(-2, 2, shape).astype(dtype)


# scatter_nd
scatter("sc_add_rows", f("float32", 5, 3), np.array([[4, 0, 4, 2]], "int32"),
        f("float32", 4, 3), "add")
scatter("sc_update_elems", f("float64", 4, 5), np.array([[0, 3, 1], [4, 0, 2]], "int64"),
        f("float64", 3), "update")
scatter("sc_add_int_2d", rng.integers(-5, 5, (3, 4, 2)).astype("int32"),
        np.array([[[0, 2], [0, 1]], [[3, 3], [1, 3]]], "int32"),
        rng.integers(-5, 5, (2, 2, 2)).astype("int32"), "add")
scatter("sc_add_vec_y2", f("float64", 6), np.array([[[5, 0, 5], [1, 5, 2]]], "int64"),
        f("float64", 2, 3), "add")
scatter("sc_update_rows", f("float32", 4, 2, 3), np.array([[3, 1]], "int32"),
        f("float32", 2, 2, 3), "update")
scatter("sc_add_i64", rng.integers(-9, 9, (5, 2)).astype("int64"), np.array([[1, 1, 0]], "int32"),
        rng.integers(-9, 9, (3, 2)).astype("int64"), "add")
scatter("sc_add_f16", f("float16", 4, 2), np.array([[3, 0, 3]], "int32"), f("float16", 3, 2), "add")

# gather_nd
gather("ga_rows", f("float32", 5, 3), np.array([[4, 0, 4, 2]], "int32"))
gather("ga_pairs", f("float64", 3, 4, 2), np.array([[[0, 2, 1], [2, 2, 0]], [[3, 0, 1], [1, 1, 3]]], "int64"))
gather("ga_elems_int", rng.integers(-9, 9, (2, 3, 4)).astype("int32"),
       np.array([[1, 0, 1, 0, 1], [2, 0, 1, 2, 0], [3, 3, 0, 1, 2]], "int32"))
gather("ga_bool", rng.integers(0, 2, (4, 3)).astype("bool"), np.array([[3, 3, 0]], "uint8"))
gather("ga_batch1", f("float32", 2, 3, 4), np.array([[[2, 0, 1, 2, 2], [1, 1, 0, 2, 0]]], "int32"), 1)
