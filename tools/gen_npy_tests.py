#!/usr/bin/env python3
"""gen_npy_tests.py: writes the .npy fixtures of tests/test_npy.c into tests/npy/.

Every array's element i is a formula of i that tests/test_npy.c recomputes
(value_of below mirrors fixture_value there), so the C test checks real values
without a table copied from here. Files numpy cannot write (odd headers,
broken files) are built byte by byte. Run from the repository root:
    python3 tools/gen_npy_tests.py
"""
import os
import struct

import numpy as np

OUT = "tests/npy"
SHAPES = {0: (), 1: (5,), 2: (2, 3), 3: (2, 3, 4), 4: (2, 1, 3, 2)}
DTYPES = ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "bool", "int16", "uint16"]


def value_of(dtype, i):
    """Element i of every generated array of this dtype (see fixture_value)."""
    base = (i * 7 + 3) % 19 - 9  # -9 .. 9
    if dtype == "float16":
        return base * 0.5
    if dtype == "float32":
        return base * 0.5 + 0.1  # rounded to float32 by numpy, by C's cast
    if dtype == "float64":
        return base / 3.0
    if dtype == "int8":
        return base * 14
    if dtype == "int32":
        return base * 100003
    if dtype == "int64":
        return base * 1000000000007
    if dtype == "uint8":
        return (i * 13 + 5) % 256
    if dtype == "bool":
        return i % 3 == 0
    if dtype == "int16":
        return base * 3001
    if dtype == "uint16":
        return (i * 2671 + 17) % 65536
    raise ValueError(dtype)


def make(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    flat = np.array([value_of(dtype, i) for i in range(n)], dtype=dtype)
    return flat.reshape(shape)


def save(name, arr, **kw):
    path = os.path.join(OUT, name)
    if kw:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, **kw)
    else:
        np.save(path, arr, allow_pickle=False)


def raw(name, header, data):
    """A version 1.0 file with exactly this header text (padding included)."""
    h = header.encode("latin1")
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        if old.endswith(".npy"):
            os.remove(os.path.join(OUT, old))

    # Every dtype at ranks 0..4, as numpy writes them (also the bytes that
    # relayc's writer must reproduce).
    for dt in DTYPES:
        for rank, shape in SHAPES.items():
            save(f"{dt}_r{rank}.npy", make(dt, shape))

    # Big-endian data, byte-swapped on read.
    for dt in ["float16", "float32", "float64", "int32", "int64"]:
        save(f"be_{dt}.npy", make(dt, (2, 3)).astype(np.dtype(dt).newbyteorder(">")))

    # Header versions 2.0 and 3.0 (3.0: the header is UTF-8).
    save("v2_float32.npy", make("float32", (2, 3)), version=(2, 0))
    save("v3_int64.npy", make("int64", (2, 3)), version=(3, 0))

    # Empty arrays.
    save("empty_float32.npy", np.zeros((0,), dtype=np.float32))
    save("empty_int32_2x0x3.npy", np.zeros((2, 0, 3), dtype=np.int32))

    # Values that test the float16 and float32 paths at their edges.
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 6.1035156e-05, 5.9604645e-08, -2.0, 1.0]
    save("special_float16.npy", np.array(special, dtype=np.float16))
    save("special_float32.npy", np.array(special + [3.4028235e38, 1.4e-45], dtype=np.float32))

    # Fortran order of a 1-D array is the same layout: readable. A 2-D one is not.
    save("fortran_2x3.npy", np.asfortranarray(make("float32", (2, 3))))
    raw("fortran_1d.npy",
        "{'descr': '<i4', 'fortran_order': True, 'shape': (5,), }" + " " * 59 + "\n",
        make("int32", (5,)).tobytes())

    # Refused dtypes.
    np.save(os.path.join(OUT, "object.npy"), np.array([1, "a", None], dtype=object),
            allow_pickle=True)
    save("complex64.npy", np.zeros(3, dtype=np.complex64))
    save("uint32.npy", np.zeros(3, dtype=np.uint32))
    save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))

    # Headers numpy would accept though numpy never writes them: keys in
    # another order, double quotes, odd whitespace, no trailing comma, a
    # trailing comma in the shape tuple.
    data = make("float32", (2, 3)).tobytes()
    raw("keys_reordered.npy",
        "{ 'shape' :(2,3,) ,\t\"fortran_order\": False,'descr':'<f4'}    \n", data)
    raw("header_unpadded.npy", "{'descr':'<f4','fortran_order':False,'shape':(2, 3)}\n", data)
    raw("rank9.npy",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }\n",
        np.zeros(1, dtype=np.float32).tobytes())
    raw("negative_dim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }\n", b"")
    raw("overflow_dim.npy",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, ), }\n", b"")
    raw("overflow_size.npy",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", b"")
    raw("missing_shape.npy", "{'descr': '<f4', 'fortran_order': False, }\n", b"")
    raw("extra_key.npy",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'color': 'red', }\n", data[:4])
    raw("truncated_data.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        data[:20])
    raw("oversized_data.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        data + b"\0\0\0\0")
    with open(os.path.join(OUT, "bad_magic.npy"), "wb") as f:
        f.write(b"\x93NUMPZ\x01\x00\x10\x00{}" + b" " * 13 + b"\n")
    with open(os.path.join(OUT, "bad_version.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x04\x00\x10\x00" + b" " * 15 + b"\n")
    with open(os.path.join(OUT, "truncated_header.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_")
    with open(os.path.join(OUT, "absurd_header.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{}\n")

    # float32 -> float16 rounding as numpy does it (round to nearest even):
    # random bit patterns across half's range and beyond, and exact halfway
    # points between neighbouring halves, where ties must go to even.
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=1500, dtype=np.uint64)
    exps = rng.integers(98, 146, size=1500, dtype=np.uint64)  # 2^-29 .. 2^18
    bits = (bits & np.uint64(0x807FFFFF)) | (exps << np.uint64(23))
    lo = rng.integers(0, 0x7BFF, size=500).astype(np.uint16).view(np.float16)
    hi = (lo.view(np.uint16) + 1).view(np.float16)
    mid = (lo.astype(np.float32) + hi.astype(np.float32)) / np.float32(2)
    f32 = np.concatenate([bits.astype(np.uint32).view(np.float32), mid])
    save("f16_round_in.npy", f32)
    with np.errstate(over="ignore"):  # values past 65520 become inf, as intended
        save("f16_round_out.npy", f32.astype(np.float16))

    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, into {OUT}")


if __name__ == "__main__":
    main()
