"""sparsegpu.primitives.reduce: reductions and segmented reductions.

CPU tests check the NumPy references against NumPy and per-segment loops; GPU tests (marked
``gpu``) run the kernels on fresh random data, compare them with the reference and check
bitwise run-to-run reproducibility.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu import primitives as P
from sparsegpu.reference import primitives as reference
from tests.conftest import to_numpy
from tests.primitives.helpers import (
    DTYPES,
    GPU_SIZES,
    OPS,
    SMALL_SIZES,
    UFUNC,
    assert_segment_sums,
    device,
    random_offsets,
    random_values,
)

# =========================================================================== CPU: the references


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", SMALL_SIZES + [2**20 + 7])
def test_reference_reduce_matches_numpy(rng, dtype, op, n):
    x = random_values(rng, n, np.dtype(dtype))
    got = P.reduce(x, op)
    assert isinstance(got, np.generic) and got.dtype == x.dtype
    if n == 0:
        assert got == reference.identity(op, x.dtype)
    elif x.dtype.kind == "i" or op != "sum":
        assert got == UFUNC[op].reduce(x, dtype=x.dtype)
    else:
        assert abs(float(got) - float(np.sum(x.astype(np.float64)))) <= 1e-5 * n * np.abs(x).max()


def test_reduce_extremes():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.array([info.max, info.min, 0, info.max], dtype=dtype)
        assert P.reduce(x, "min") == info.min and P.reduce(x, "max") == info.max
    x = np.array([1.0, np.inf, -np.inf, 2.0])
    assert P.reduce(x, "min") == -np.inf and P.reduce(x, "max") == np.inf
    assert np.isnan(P.reduce(np.array([1.0, np.nan, 0.0]), "min"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reference_segmented_reduce_matches_loop(rng, dtype, op):
    x = random_values(rng, 500, np.dtype(dtype))
    for whole in (True, False):
        offsets = random_offsets(rng, 500, 60, whole=whole)
        got = P.segmented_reduce(x, offsets, op)
        want = [P.reduce(x[a:b], op) for a, b in zip(offsets[:-1], offsets[1:])]
        if x.dtype.kind == "i" or op != "sum":
            np.testing.assert_array_equal(got, np.array(want, dtype=x.dtype))
        else:
            assert_segment_sums(got, x, offsets)


def test_segmented_reduce_empty_segments_give_identity():
    x = np.arange(4, dtype=np.int32)
    offsets = np.array([0, 0, 2, 2, 4, 4])
    assert P.segmented_reduce(x, offsets).tolist() == [0, 1, 0, 5, 0]
    big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    assert P.segmented_reduce(x, offsets, "min").tolist() == [big, 0, big, 2, big]
    assert P.segmented_reduce(x, offsets, "max").tolist() == [small, 1, small, 3, small]
    assert P.segmented_reduce(x, np.array([3])).size == 0


# =========================================================================== GPU: the kernels


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_reduce(rng, dtype, op, n):
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    got = P.reduce(xd, op)
    assert got.shape == () and got.dtype == x.dtype
    if n == 0:
        assert to_numpy(got) == reference.identity(op, x.dtype)
    elif x.dtype.kind == "i" or op != "sum":
        assert to_numpy(got) == UFUNC[op].reduce(x, dtype=x.dtype)
    else:
        want = np.sum(x.astype(np.float64))
        assert abs(float(got) - want) <= np.finfo(x.dtype).eps * 64 * np.abs(x).astype(np.float64).sum() + 1e-300
        assert to_numpy(P.reduce(xd, op)).tobytes() == to_numpy(got).tobytes(), "not bitwise reproducible"
    if n > 8:  # a view that is not 16-byte aligned
        view = x[3:-1]
        got = P.reduce(xd[3:-1], op)
        if x.dtype.kind == "f" and op == "sum":
            assert_segment_sums(to_numpy(got).reshape(1), view, np.array([0, view.size]))
        else:
            assert to_numpy(got) == P.reduce(view, op)


@pytest.mark.gpu
def test_gpu_reduce_extremes():
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        x = np.full(100_001, info.max, dtype=dtype)
        x[77_777] = info.min
        assert int(P.reduce(device(x), "min")) == info.min and int(P.reduce(device(x), "max")) == info.max
    x = np.zeros(100_001)
    x[5], x[99_000] = np.inf, -np.inf
    assert float(P.reduce(device(x), "max")) == np.inf and float(P.reduce(device(x), "min")) == -np.inf
    x[1234] = np.nan
    assert np.isnan(float(P.reduce(device(x), "min"))) and np.isnan(float(P.reduce(device(x), "sum")))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_segmented_reduce(rng, dtype, op, index_dtype):
    n = 2**20 + 7
    x = random_values(rng, n, np.dtype(dtype))
    xd = device(x)
    cases = [
        random_offsets(rng, n, n // 4),  # short segments, many empty
        random_offsets(rng, n, 300),  # long ones: the chunk kernels
        np.array([0, n]),  # a single segment
        np.array([0, 0, 5, 5, n, n]),  # empty segments around a long one
        random_offsets(rng, n, 1000, whole=False),  # offsets not starting at 0
    ]
    for offsets in cases:
        offsets = offsets.astype(index_dtype)
        got = P.segmented_reduce(xd, device(offsets), op)
        if x.dtype.kind == "f" and op == "sum":
            assert_segment_sums(got, x, offsets)
        else:
            np.testing.assert_array_equal(to_numpy(got), P.segmented_reduce(x, offsets, op))
        assert to_numpy(P.segmented_reduce(xd, device(offsets), op)).tobytes() == to_numpy(got).tobytes()
