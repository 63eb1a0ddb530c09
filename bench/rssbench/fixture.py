"""The benchmark input fixture, bit for bit the C++ generator's (docs/protocol.md, "The tools in detail")."""
import hashlib

# numpy is imported where it is used, so that --help works before the Python dependencies are installed.
GENERATOR = "splitmix64(seed+k)>>40, 8u-4, float32"
HASH_ELEMENTS = 1 << 20
_CHUNK = 1 << 24  # elements per vectorised step: bounds the uint64 temporaries to a few hundred MB


def splitmix64(z):
    """The splitmix64 finalizer applied to z + golden, element-wise on a uint64 array (wraps mod 2^64)."""
    import numpy as np
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def generate(seed, count, start=0):
    """Elements start .. start+count-1 of the fixture as a float32 array."""
    import numpy as np
    out = np.empty(count, dtype=np.float32)
    for lo in range(0, count, _CHUNK):
        n = min(_CHUNK, count - lo)
        with np.errstate(over="ignore"):
            k = np.arange(start + lo, start + lo + n, dtype=np.uint64) + np.uint64(seed % (1 << 64))
        out[lo:lo + n] = (8.0 * ((splitmix64(k) >> np.uint64(40)).astype(np.float64) / float(1 << 24)) - 4.0)
    return out


def matrix(seed, rows, cols):
    """The rows x cols fixture (row-major index k = i * cols + j)."""
    return generate(seed, rows * cols).reshape(rows, cols)


def describe(seed):
    """The fixture's facts in a raw record file's context; the hash is of its first HASH_ELEMENTS elements' bytes."""
    return {"seed": int(seed), "generator": GENERATOR,
            "hash": hashlib.sha256(generate(seed, HASH_ELEMENTS).astype("<f4").tobytes()).hexdigest()}
