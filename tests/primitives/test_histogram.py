"""sparsegpu.primitives.histogram: exact counts per bin, as np.histogram gives them.

CPU tests check the NumPy reference and the argument checks; GPU tests (marked ``gpu``) run the
kernel on fresh random data and extreme keys against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu import primitives as P
from tests.conftest import to_numpy
from tests.primitives.helpers import DTYPES, device, poison_pool, random_values

# =========================================================================== CPU: the reference


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_histogram_matches_numpy(rng, dtype):
    values = random_values(rng, 5000, np.dtype(dtype), low=-20, high=300)
    for bins, range_ in [(256, (0, 256)), (7, None), (1, (5, 5)), (100, (-3.5, 17.25)), (64, (-64, 320))]:
        got = P.histogram(values, bins, range=range_)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.histogram(values.astype(np.float64), bins, range=range_)[0])
    edges = np.array([-25.0, -1.0, 0.0, 0.0, 3.5, 100.0, 299.0])
    np.testing.assert_array_equal(P.histogram(values, edges), np.histogram(values.astype(np.float64), edges)[0])


def test_histogram_drops_out_of_range_and_nan():
    values = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan, np.inf], dtype=np.float64)
    assert P.histogram(values, 2, range=(0, 1)).tolist() == [1, 2]
    ints = np.array([np.iinfo(np.int64).min, 0, 3, np.iinfo(np.int64).max], dtype=np.int64)
    assert P.histogram(ints, 4, range=(0, 4)).tolist() == [1, 0, 0, 1]


def test_histogram_all_equal_values():
    values = np.full(1000, 7, dtype=np.int32)
    assert P.histogram(values, 3).tolist() == [0, 1000, 0]  # range (6.5, 7.5), as NumPy widens it


def test_bad_histogram_arguments_raise():
    values = np.arange(10, dtype=np.int32)
    with pytest.raises(ValueError, match="positive"):
        P.histogram(values, 0)
    with pytest.raises(ValueError, match="positive"):
        P.histogram(values, -3)
    with pytest.raises(TypeError, match="bins"):
        P.histogram(values, 2.5)
    with pytest.raises(TypeError, match="bins"):
        P.histogram(values, True)
    with pytest.raises(ValueError, match="lo <= hi"):
        P.histogram(values, 4, range=(5, 1))
    with pytest.raises(ValueError, match="finite"):
        P.histogram(values, 4, range=(0, np.inf))
    with pytest.raises(ValueError, match="non-decreasing"):
        P.histogram(values, np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="range applies"):
        P.histogram(values, np.array([0.0, 1.0]), range=(0, 1))
    with pytest.raises(ValueError, match="not finite"):
        P.histogram(np.array([0.0, np.inf]), 4)


# =========================================================================== GPU: the kernels


# =========================================================================== GPU: the kernel


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 33, 1023, 2**20 + 7])
def test_gpu_histogram(rng, dtype, n):
    values = random_values(rng, n, np.dtype(dtype), low=-10, high=300)
    vd = device(values)
    reference = values.astype(np.float64)
    # Integer-width bins (integer values: integer arithmetic), others, shared and global memory.
    # 256 and 384 bins: a column per lane; 1000 and 3000: a table per warp; 100000: global.
    cases = [(256, (0, 256)), (64, (-64, 320)), (100_000, (0, 300_000)), (256, None), (13, (-2.5, 200.0)),
             (100_000, (0, 300)), (1, (0, 1)), (384, (-84, 300)), (1000, (-10, 290)), (3000, (-10.0, 300.0))]
    for bins, range_ in cases:
        if range_ is None and n == 0:
            continue
        got = P.histogram(vd, bins, range=range_)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(to_numpy(got), P.histogram(values, bins, range=range_))
        np.testing.assert_array_equal(to_numpy(got), np.histogram(reference, bins, range=range_)[0])
    for edges in (np.array([-5.0, 0.0, 0.0, 1.5, 64.0, 299.0]), np.linspace(-10, 300, 6001), np.linspace(-10, 300, 258)):
        got = P.histogram(vd, edges)
        np.testing.assert_array_equal(to_numpy(got), np.histogram(reference, edges)[0])


@pytest.mark.gpu
def test_gpu_histogram_equal_keys_and_extremes():
    values = np.full(2**20 + 7, 42, dtype=np.int32)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(values), 256, range=(0, 256))), np.bincount(values, minlength=256))
    np.testing.assert_array_equal(to_numpy(P.histogram(device(values), 50_000, range=(0, 50_000))), np.bincount(values, minlength=50_000))
    info = np.iinfo(np.int64)
    ints = np.array([info.min, 0, 1, 255, 256, info.max] * 1000, dtype=np.int64)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(ints), 256, range=(0, 256))), P.histogram(ints, 256, range=(0, 256)))
    floats = np.array([np.nan, -np.inf, np.inf, 0.0, 1.0, 0.5] * 1000)
    np.testing.assert_array_equal(to_numpy(P.histogram(device(floats), 4, range=(0, 1))), [1000, 0, 1000, 1000])


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 33, 4097, 2**20 + 7])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_histogram_all_equal_keys(n, dtype):
    """All-equal keys land in one bin: every lane of every warp adds to the same bin."""
    for key, bins, range_ in ((200, 256, (0, 256)), (0, 256, (0, 256)), (255, 256, (0, 256)), (7, 1000, (0, 1000))):
        values = np.full(n, key, dtype=dtype)
        poison_pool(8 * bins)
        got = P.histogram(device(values), bins, range=range_)
        np.testing.assert_array_equal(to_numpy(got), np.histogram(values.astype(np.float64), bins, range=range_)[0])


@pytest.mark.gpu
def test_gpu_histogram_int32_extremes_at_the_32_bit_limits(rng):
    """int32 keys binned in 32-bit arithmetic when the range allows, 64-bit otherwise: the
    same counts as NumPy at the ends of int32 and of ranges beyond it."""
    info = np.iinfo(np.int32)
    values = np.concatenate([np.array([info.min, info.min + 1, -1, 0, 1, 255, 256, info.max - 1, info.max] * 100, dtype=np.int32),
                             rng.integers(info.min, info.max, size=100_000, dtype=np.int32, endpoint=True)])
    ranges = [(0, 256), (-(2**31), 2**31), (2**31 - 256, 2**31), (2**31 - 1, 2**31 - 1 + 2**32), (-(2**40), 2**40),
              (-(2**31) - 256, -(2**31)), (-(2**31), -(2**31) + 256)]
    for range_ in ranges:
        got = P.histogram(device(values), 256, range=range_)
        np.testing.assert_array_equal(to_numpy(got), P.histogram(values, 256, range=range_), err_msg=str(range_))
        np.testing.assert_array_equal(to_numpy(got), np.histogram(values.astype(np.float64), 256, range=range_)[0],
                                      err_msg=str(range_))
