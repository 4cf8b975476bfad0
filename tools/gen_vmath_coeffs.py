#!/usr/bin/env python3
"""gen_vmath_coeffs.py: fits the polynomial of vmath.h's float32 tanh for small
|x|: tanh(x) ~ x + x^3 P(x^2) on [0, 0.55], P of degree 5, by least squares on
the relative error (the minimax polynomial would do slightly better; this is
well within float32's precision). Prints the #defines pasted into vmath.h.
Run: python3 tools/gen_vmath_coeffs.py"""
import numpy as np

LIMIT = 0.55
DEG = 5
k = np.arange(4000)
x = LIMIT * (0.5 + 0.5 * np.cos(np.pi * (k + 0.5) / len(k)))  # Chebyshev nodes on [0, LIMIT]
x = x[x > 1e-4]
z = x * x
# tanh(x) = x + x^3 P(z)  =>  P(z) = (tanh(x) - x) / x^3; weight by x^3 / tanh(x)
target = (np.tanh(x) - x) / x**3
w = x**3 / np.tanh(x)
A = np.stack([z**i for i in range(DEG + 1)], axis=1)
c, *_ = np.linalg.lstsq(A * w[:, None], target * w, rcond=None)
xs = np.linspace(0, LIMIT, 200001)[1:]
xf = xs.astype(np.float32)
zf = (xf * xf).astype(np.float32)
p = np.float32(c[DEG])
for i in range(DEG - 1, -1, -1):
    p = (p * zf + np.float32(c[i])).astype(np.float32)
y = (xf + xf * zf * p).astype(np.float32)
ref = np.tanh(xf.astype(np.float64))
ulp = np.abs(y - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)
print(f"/* max error over [0, {LIMIT}] in float32: {ulp.max():.2f} ulp */")
for i in range(DEG + 1):
    print(f"#define RY_VM_TANH_C{i + 1} {np.float32(c[i]).item():.9e}f")
