"""Shared helpers of the primitives tests: sizes, dtypes, fresh random inputs, the definitions
the results are checked against (loops and float64 bounds), and the GPU tests' poisoning."""

from __future__ import annotations

import numpy as np

from sparsegpu import primitives as P
from sparsegpu.reference import primitives as reference
from tests.conftest import to_numpy

DTYPES = [np.int32, np.int64, np.float32, np.float64]
OPS = ["sum", "min", "max"]
UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}
SMALL_SIZES = [0, 1, 31, 32, 33, 1023]
# Plain scan tiles hold SCAN_BLOCK * SCAN_THREAD_BYTES bytes (4096 8-byte or 8192 4-byte
# elements): one tile exactly, one more or less, for either size.
_SCAN_TILE_BYTES = P.SCAN_BLOCK * P.SCAN_THREAD_BYTES
GPU_SIZES = sorted({0, 1, 31, 32, 33, 1023, 2**20 + 7}
                   | {_SCAN_TILE_BYTES // size + d for size in (4, 8) for d in (-1, 0, 1)})


def random_values(rng, n, dtype, low=-1000, high=1000):
    """Fresh random data of ``dtype``: integers in [low, high), floats standard normal."""
    if np.dtype(dtype).kind == "i":
        return rng.integers(low, high, size=n, dtype=dtype)
    return rng.standard_normal(n).astype(dtype)


def random_offsets(rng, n, n_segments, *, empty_share=0.3, whole=True):
    """Sorted offsets into [0, n] with about ``empty_share`` of the segments empty."""
    cuts = np.sort(rng.integers(0, n + 1, size=max(n_segments - 1, 0)))
    offsets = np.concatenate([[0], cuts, [n]]) if whole else np.sort(rng.integers(0, n + 1, size=n_segments + 1))
    repeat = rng.random(offsets.size) < empty_share
    repeat[0] = repeat[-1] = False
    offsets[repeat] = offsets[np.flatnonzero(repeat) - 1]
    return np.maximum.accumulate(offsets).astype(np.int64)


def scan_loop(x, heads, inclusive, op):
    """The definition, one element at a time (small inputs only)."""
    out = np.empty_like(x)
    acc = reference.identity(op, x.dtype)
    with np.errstate(over="ignore"):
        for i, v in enumerate(x):
            if i == 0 or heads[i]:
                acc = reference.identity(op, x.dtype)
            before = acc
            acc = UFUNC[op](acc, v, dtype=x.dtype)
            out[i] = acc if inclusive else before
    return out


def scan_bound(x, dtype):
    """Elementwise error bound for a float sum-scan of x: eps times (a generous depth) times
    the running sum of |x|, the scale of every partial sum."""
    n = max(x.size, 1)
    depth = 64 + 4 * np.log2(n + 1) + n / 1024
    return np.finfo(dtype).eps * depth * np.cumsum(np.abs(x.astype(np.float64))) + np.finfo(np.float64).tiny


def assert_segment_sums(got, x, offsets, depth=128):
    """Float segment sums within eps * depth * (sum of |x| over the segment) of float64 sums."""
    got = to_numpy(got).astype(np.float64)
    want = reference.segmented_reduce(x.astype(np.float64), offsets)
    scale = reference.segmented_reduce(np.abs(x.astype(np.float64)), offsets)
    bound = np.finfo(x.dtype).eps * depth * scale + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    assert np.all(err <= bound), f"worst segment {int(np.argmax(err - bound))}"


def assert_segmented_scan(got, x, offsets, inclusive):
    """Segmented sum-scans: integers exactly as the reference; floats within scan_bound's depth
    times the segment's running sum of |x|, against float64."""
    if x.dtype.kind == "i":
        np.testing.assert_array_equal(to_numpy(got), reference.segmented_scan(x, heads_of(offsets, x.size), inclusive))
        return
    got = to_numpy(got).astype(np.float64)
    want = reference.segmented_scan(x.astype(np.float64), heads_of(offsets, x.size), inclusive)
    scale = reference.segmented_scan(np.abs(x.astype(np.float64)), heads_of(offsets, x.size), True)
    n = max(x.size, 1)
    bound = np.finfo(x.dtype).eps * (64 + 4 * np.log2(n + 1) + n / 1024) * scale + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    assert np.all(err <= bound), f"worst entry {int(np.argmax(err - bound))}"


def heads_of(offsets, n):
    heads = np.zeros(n, dtype=bool)
    heads[offsets[offsets < n]] = True
    return heads


def assert_scan(got, x, inclusive=True):
    """Integers exactly as np.cumsum(dtype=x.dtype); floats within scan_bound of float64."""
    got = to_numpy(got)
    assert got.dtype == x.dtype and got.shape == x.shape
    want = np.cumsum(x, dtype=x.dtype) if x.dtype.kind == "i" else np.cumsum(x.astype(np.float64))
    if not inclusive and x.size:
        want = np.concatenate([[0], want[:-1]]).astype(want.dtype)
    if x.dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        bound = scan_bound(x, x.dtype)
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= bound), f"worst entry {int(np.argmax(err - bound))}"


def device(x):
    import cupy

    return cupy.asarray(x)


def poison_pool(nbytes):
    """Fill a pool block of ``nbytes`` with 0xA5 bytes and free it, so the next output of that
    size most likely lands on it: entries a kernel leaves unwritten then show (NaN-free but
    absurd values for every dtype)."""
    import cupy

    if nbytes:
        block = cupy.empty(nbytes, dtype=np.uint8)
        block.fill(0xA5)
        del block


def assert_same_bits(got, want):
    got, want = to_numpy(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"first differing entry {int(np.argmax(got != want))}"
