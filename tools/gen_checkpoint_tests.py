#!/usr/bin/env python3
"""gen_checkpoint_tests.py: writes tests/checkpoint/h5py_written.h5, a
checkpoint made by h5py alone (no seal, variable-length strings, nested
parameter name), with its checksum computed in Python, and the expected
values as .npy files, for test_checkpoint.c's test_reads_h5py_file.

    python3 tools/gen_checkpoint_tests.py      (from the repository root)
"""
import os

import h5py
import numpy as np

from check_checkpoint import checksum

OUT = "tests/checkpoint"


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(4)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    wm = rng.standard_normal((2, 3)).astype(np.float32)
    bm = np.zeros(3, np.float32)
    arrays = {"/params/dense/w": w, "/params/b": b,
              "/optimizer/dense/w/momentum": wm, "/optimizer/b/momentum": bm}
    model = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 3), float32]) { %x }\n'
    config = "optimizer=sgd\nlr=0.05\n"
    words = [12345, 2**64 - 1]
    with h5py.File(os.path.join(OUT, "h5py_written.h5"), "w") as f:
        for path, a in arrays.items():
            f.create_dataset(path, data=a)
        f.attrs["format"] = "relayc-checkpoint"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["step"] = np.int64(300)
        f.attrs["epoch"] = np.int64(2)
        f.attrs["rng_state"] = np.array(words, dtype=np.uint64)
        f.attrs["model_text"] = model
        f.attrs["config"] = config
        f.attrs["checksum"] = np.uint32(checksum(arrays, 300, 2, words, model.encode(), config.encode()))
    np.save(os.path.join(OUT, "dense_w.npy"), w)
    np.save(os.path.join(OUT, "b.npy"), b)
    np.save(os.path.join(OUT, "dense_w_momentum.npy"), wm)


if __name__ == "__main__":
    main()
