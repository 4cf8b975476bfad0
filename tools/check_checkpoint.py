#!/usr/bin/env python3
"""check_checkpoint.py: opens a relayc checkpoint with h5py, by name, as a
user outside relayc would; lists it and recomputes its checksum (the CRC-32
stream documented in include/relayc/checkpoint.h) and each dataset's crc32
attribute, to show both sides agree.

    python3 tools/check_checkpoint.py FILE.h5     (needs: pip install h5py)

Exit status 0 when the recorded checksum matches. The seal in the user block
is checked by relayc itself, not here.
"""
import struct
import sys
import zlib

import h5py
import numpy as np

VERSION = 1


def datasets(f, bad):
    """Every dataset under /params and /optimizer, {path: numpy array};
    paths whose own crc32 attribute does not match go to bad."""
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            a = obj[()]
            out["/" + name] = a
            if "crc32" in obj.attrs:
                data = np.asarray(a).astype(a.dtype.newbyteorder("<")).tobytes(order="C")
                if zlib.crc32(data) != int(obj.attrs["crc32"]):
                    bad.append("/" + name)

    for root in ("params", "optimizer"):
        if root in f:
            f[root].visititems(lambda n, o, r=root: visit(r + "/" + n, o))
    return out


def text(v):
    """A string attribute as bytes (h5py gives bytes for fixed-length
    strings, str for variable-length ones)."""
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).rstrip(b"\0")
    return str(v).encode("utf-8")


def checksum(arrays, step, epoch, rng, model_text, config):
    """The CRC-32 stream of checkpoint.h, from plain values."""
    u64 = lambda v: struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
    crc = zlib.crc32(u64(VERSION))
    for path in sorted(arrays, key=lambda p: p.encode("utf-8")):
        a = np.asarray(arrays[path])
        name = {np.dtype("float32"): "float32", np.dtype("float64"): "float64"}[a.dtype.newbyteorder("=")]
        crc = zlib.crc32(path.encode("utf-8") + b"\0" + name.encode() + b"\0", crc)
        crc = zlib.crc32(u64(a.ndim) + b"".join(u64(d) for d in a.shape), crc)
        crc = zlib.crc32(a.astype(a.dtype.newbyteorder("<")).tobytes(order="C"), crc)
    crc = zlib.crc32(u64(step) + u64(epoch) + u64(len(rng)) + b"".join(u64(int(w)) for w in rng), crc)
    for s in (model_text, config):
        crc = zlib.crc32(u64(len(s)) + s, crc)
    return crc


def main(path):
    with h5py.File(path, "r") as f:
        a = f.attrs
        print("format", text(a["format"]).decode(), "version", int(a["format_version"]))
        print("step", int(a["step"]), "epoch", int(a["epoch"]))
        print("rng_state", [int(w) for w in a["rng_state"]])
        model_text, config = text(a["model_text"]), text(a["config"])
        print("model_text", len(model_text), "bytes; config", len(config), "bytes")
        bad = []
        arrays = datasets(f, bad)
        for p in sorted(arrays):
            print(p, arrays[p].dtype, list(arrays[p].shape), "CRC-32 MISMATCH" if p in bad else "")
        got = checksum(arrays, int(a["step"]), int(a["epoch"]), list(a["rng_state"]), model_text, config)
        want = int(a["checksum"])
        print("checksum recorded 0x%08x, recomputed 0x%08x: %s" % (want, got, "ok" if got == want else "MISMATCH"))
        return 0 if got == want and not bad else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
