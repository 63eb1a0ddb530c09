#!/usr/bin/env python3
"""NumPy reference of rms_scaled_softmax, for readers (and checked against the C++ reference by the tests).

    m_i = max_j x_ij
    r_i = 1 / sqrt(mean_j x_ij^2 + 1e-5)        (positive, so max(r x) = r max(x))
    y_ij = exp(r_i (x_ij - m_i)) / sum_k exp(r_i (x_ik - m_i))

Usage: reference.py IN.f32 OUT.f64 ROWS COLS  (raw little-endian float32 in, float64 out); needs numpy.
"""
import sys

EPSILON = 1e-5


def rms_scaled_softmax(x):
    """y of the rows of x (array-like, last axis = a row), in float64."""
    import numpy as np  # here, so that --help works without numpy

    x = np.asarray(x, dtype=np.float64)
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPSILON)
    e = np.exp(r * (x - np.max(x, axis=-1, keepdims=True)))
    return e / np.sum(e, axis=-1, keepdims=True)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0)
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip())
    import numpy as np

    src, dst, rows, cols = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    x = np.fromfile(src, dtype="<f4").reshape(rows, cols)
    rms_scaled_softmax(x).astype("<f8").tofile(dst)
