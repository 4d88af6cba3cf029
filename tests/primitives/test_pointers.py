"""sparsegpu.primitives.pointers: the major index of every stored entry of a compressed layout.

CPU tests check :func:`expand_pointers` against ``np.repeat``; GPU tests (marked ``gpu``) run the
kernel (a memset, ``mark_row_starts`` and a max-scan) against the NumPy path on outputs that
land on poisoned memory.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparsegpu import primitives as P
from tests.conftest import to_numpy
from tests.primitives.helpers import device, poison_pool

INDEX_DTYPES = [np.int32, np.int64]


def random_indptr(rng, n_rows, dtype, *, start=0, empty_share=0.3, long_row=False):
    """Row pointers of ``n_rows`` fresh random rows (about ``empty_share`` of them empty, one of
    them very long with ``long_row``), starting at ``start``."""
    lengths = rng.integers(0, 9, size=n_rows)
    lengths[rng.random(n_rows) < empty_share] = 0
    if long_row and n_rows:
        lengths[rng.integers(0, n_rows)] = 5000
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(dtype)


def expected_rows(indptr):
    """The definition: -1 before ``indptr[0]``, then row i repeated ``indptr[i+1] - indptr[i]`` times."""
    head = np.full(int(indptr[0]), -1, dtype=indptr.dtype)
    rows = np.repeat(np.arange(indptr.size - 1, dtype=indptr.dtype), np.diff(indptr))
    return np.concatenate([head, rows])


# =========================================================================== CPU: NumPy


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("n_rows", [0, 1, 7, 1000])
def test_expand_pointers_matches_numpy(rng, dtype, n_rows):
    indptr = random_indptr(rng, n_rows, dtype, long_row=n_rows > 1)
    got = P.expand_pointers(indptr, np)
    assert got.dtype == dtype and got.size == int(indptr[-1])
    np.testing.assert_array_equal(got, expected_rows(indptr))


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_expand_pointers_marks_positions_before_the_first_row(rng, dtype):
    indptr = random_indptr(rng, 50, dtype, start=int(rng.integers(1, 20)))
    got = P.expand_pointers(indptr, np)
    first = int(indptr[0])
    assert (got[:first] == -1).all()
    np.testing.assert_array_equal(got, expected_rows(indptr))


def test_expand_pointers_of_empty_rows():
    assert P.expand_pointers(np.zeros(6, dtype=np.int64), np).size == 0
    assert P.expand_pointers(np.zeros(1, dtype=np.int32), np).dtype == np.int32


# =========================================================================== GPU: the kernel


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("n_rows", [1, 33, 1023, 70_001])
@pytest.mark.parametrize("start", [0, 5])
def test_gpu_expand_pointers_matches_numpy(rng, dtype, n_rows, start):
    import cupy

    indptr = random_indptr(rng, n_rows, dtype, start=start, long_row=True)
    poison_pool(int(indptr[-1]) * np.dtype(dtype).itemsize)
    got = P.expand_pointers(device(indptr), cupy)
    assert got.dtype == dtype
    np.testing.assert_array_equal(to_numpy(got), P.expand_pointers(indptr, np))
    np.testing.assert_array_equal(to_numpy(got), expected_rows(indptr))


@pytest.mark.gpu
def test_gpu_expand_pointers_of_empty_rows():
    import cupy

    assert P.expand_pointers(cupy.zeros(9, dtype=np.int32), cupy).size == 0
