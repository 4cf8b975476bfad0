#!/usr/bin/env python3
"""Writes tests/corpus/metadata.relay: a module whose non-scalar constants
live in a #[metadata] section, as TVM prints them (JSON nodes plus
"b64ndarrays", TVM's NDArray serialization in base64). The values are fixed
small tensors so the test can check them element by element.

Run from the repository root: python3 tools/gen_relay_metadata.py
"""
import base64
import struct

import numpy as np

MAGIC = 0xDD5E40F096B4A13F
DL = {  # numpy dtype -> (DLDataType code, bits)
    np.dtype("float32"): (2, 32),
    np.dtype("float64"): (2, 64),
    np.dtype("int32"): (0, 32),
    np.dtype("int64"): (0, 64),
    np.dtype("uint8"): (1, 8),
    np.dtype("bool"): (1, 1),
}


def ndarray_b64(a):
    """TVM's NDArray::Save: magic, reserved, device, ndim, dtype, shape, nbytes, data."""
    a = np.ascontiguousarray(a)
    code, bits = DL[a.dtype]
    head = struct.pack("<QQiiiBBH", MAGIC, 0, 1, 0, a.ndim, code, bits, 1)
    head += struct.pack("<%dq" % a.ndim, *a.shape)
    data = a.tobytes()
    return base64.b64encode(head + struct.pack("<q", len(data)) + data).decode()


def metadata(arrays):
    n = len(arrays)
    out = ['{\n  "root": 1,\n  "nodes": [\n    {\n      "type_key": ""\n    },\n']
    out.append('    {\n      "type_key": "Map",\n      "keys": [\n        "relay.Constant"\n'
               '      ],\n      "data": [2]\n    },\n')
    out.append('    {\n      "type_key": "Array",\n      "data": [%s]\n    }'
               % ", ".join(str(3 + i) for i in range(n)))
    for i in range(n):
        out.append(',\n    {\n      "type_key": "relay.Constant",\n      "attrs": {\n'
                   '        "_checked_type_": "0",\n        "data": "%d",\n'
                   '        "span": "0",\n        "virtual_device_": "0"\n      }\n    }' % i)
    out.append('\n  ],\n  "b64ndarrays": [')
    out.append(",".join('\n    "%s"' % ndarray_b64(a) for a in arrays))
    out.append('\n  ],\n  "attrs": {"tvm_version": "0.8.0"}\n}\n')
    return "".join(out)


def main():
    w = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 4  # exact in binary
    b = np.array([0.5, -1.0], dtype=np.float32)
    mask = np.array([True, False, True], dtype=np.bool_)
    ids = np.array([[1, 2], [3, -4]], dtype=np.int64)
    body = """#[version = "0.0.5"]
def @main(%x: Tensor[(4, 3), float32]) -> (Tensor[(4, 2), float32], Tensor[(3), bool], Tensor[(2, 2), int64]) {
  %0 = nn.dense(%x, meta[relay.Constant][0], units=2);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  (%1, meta[relay.Constant][2], meta[relay.Constant][3])
}

#[metadata]
"""
    with open("tests/corpus/metadata.relay", "w") as f:
        f.write(body + metadata([w, b, mask, ids]))


if __name__ == "__main__":
    main()
