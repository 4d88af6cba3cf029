"""The sort of rows by length that JDS and SELL-C-sigma build on
(:func:`sparsegpu.formats.jds.sorted_by_length`): the counting and radix sort against an argsort
of a unique key, on every backend, and the GPU's construction kernels against their NumPy
references (marked gpu)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsegpu import datasets
from sparsegpu.formats import CSR
from sparsegpu.formats import jds as jds_module
from sparsegpu.formats.jds import RANK_BLOCK, sorted_by_length
from sparsegpu.reference import regular as regular_reference
from tests.conftest import to_numpy
from tests.formats.test_regular import (
    REAL_MATRICES,
    equal_rows_matrix,
    long_row_matrix,
    random_matrix,
    real,
    requires_matrices,
)


def argsort_by_length(lengths, window) -> np.ndarray:
    """The permutation by its definition (an argsort of a unique int64 key): what
    the counting sort must reproduce exactly."""
    m = lengths.size
    if m == 0 or window == 1:
        return np.arange(m)
    longest = int(lengths.max())
    rows = np.arange(m, dtype=np.int64)
    shortness = longest - lengths.astype(np.int64)
    return np.argsort(((rows // window) * (longest + 1) + shortness) * window + rows % window)


def matrix_of_lengths(lengths, rng) -> sp.csr_array:
    """A matrix whose row r holds lengths[r] entries (random distinct columns)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n = max(int(lengths.max()) if lengths.size else 1, 1)
    cols = [np.sort(rng.choice(n, size=k, replace=False)) for k in lengths]
    indptr = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    cols = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    return sp.csr_array((rng.standard_normal(cols.size), cols, indptr), shape=(lengths.size, n))


# Windows around the block size (the in-block sort up to 256 rows, radix passes above).
SORT_WINDOWS = (1, 2, 3, 20, 32, 255, 256, 257, 300, 1000, 4096)


def sort_cases(rng) -> dict[str, sp.csr_array]:
    few_long = np.concatenate([rng.integers(0, 3, size=1500), [70_000]])  # 17-bit key: three passes
    rng.shuffle(few_long)
    return {
        "empty rows": random_matrix(rng, 1300, 200, 0.03, empty_rows=600),
        "all rows equal": equal_rows_matrix(rng, 777, 50, 6),
        "no nonzeros": sp.csr_array((900, 4)),
        "one very long row": long_row_matrix(rng, m=700, n=5000, long=5000),
        "lengths past 256": matrix_of_lengths(rng.integers(0, 600, size=1100), rng),
        "lengths past 65536": matrix_of_lengths(few_long, rng),
        "one row": sp.csr_array(np.ones((1, 5))),
        "no rows": sp.csr_array((0, 5)),
        "lower triangular": datasets.generate("lower_triangular", "small"),
        "rmat": datasets.generate("rmat", "small"),
        "powerlaw": datasets.generate("powerlaw", "small"),
    }


def assert_sort_equals_the_argsort(S, backend, windows=SORT_WINDOWS, index_dtype=None) -> None:
    A = CSR.from_scipy(S, backend=backend, index_dtype=index_dtype)
    lengths = np.diff(sp.csr_array(S).indptr)
    m = S.shape[0]
    for window in (*windows, max(m, 1), m + 5):
        perm = sorted_by_length(A, window)
        assert perm.dtype == A.index_dtype and perm.shape == (m,)
        np.testing.assert_array_equal(to_numpy(perm), argsort_by_length(lengths, window),
                                      err_msg=f"window {window}")


SORT_CASES = ["empty rows", "all rows equal", "no nonzeros", "one very long row", "lengths past 256", "lengths past 65536",
              "one row", "no rows", "lower triangular", "rmat", "powerlaw"]


@pytest.mark.parametrize("case", SORT_CASES)
def test_sorted_by_length_equals_the_argsort(case, rng, backend):
    assert_sort_equals_the_argsort(sort_cases(rng)[case], backend)


def test_sorted_by_length_int64_indices_and_known_longest(rng, backend):
    S = matrix_of_lengths(rng.integers(0, 300, size=900), rng)
    assert_sort_equals_the_argsort(S, backend, windows=(7, 256, 600), index_dtype=np.int64)
    A = CSR.from_scipy(S, backend=backend)
    longest = int(np.diff(S.indptr).max())
    np.testing.assert_array_equal(to_numpy(sorted_by_length(A, 900, longest)),
                                  argsort_by_length(np.diff(S.indptr), 900))


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_sorted_by_length_on_real_matrices(name, backend):
    assert_sort_equals_the_argsort(real(name), backend, windows=(32, 256, 1000))


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40) | st.integers(0, 3000), max_size=1200),
       window=st.integers(1, 1500), seed=st.integers(0, 2**32 - 1))
def test_sorted_by_length_property(lengths, window, seed):
    S = matrix_of_lengths(lengths, np.random.default_rng(seed))
    perm = sorted_by_length(CSR.from_scipy(S, backend="cpu"), window)
    np.testing.assert_array_equal(perm, argsort_by_length(np.asarray(lengths, dtype=np.int64), window))


def test_sort_stages_follow_the_kernel_layout(rng):
    """The radix reference's counts are laid out window-major, digit-major, tile-minor, so one
    exclusive scan gives each (window, digit, tile) its first rank."""
    S = matrix_of_lengths(rng.integers(0, 5, size=700), rng)
    indptr = S.indptr.astype(np.int32)
    window, tiles = 600, -(-600 // RANK_BLOCK)
    counts = np.full(2 * 8 * tiles, -1, dtype=np.int32)
    regular_reference.radix_pass(indptr, np.empty(0, np.int32), 1, 700, window, tiles, 4, 0, 8, counts, None, False)
    lengths = np.diff(indptr)
    for w, tile, digit in [(0, 0, 0), (0, 2, 4), (1, 0, 1)]:
        rows = np.arange(w * window + tile * RANK_BLOCK, min(w * window + min((tile + 1) * RANK_BLOCK, window), 700))
        assert counts[(w * 8 + digit) * tiles + tile] == np.count_nonzero(4 - lengths[rows] == digit)
    assert counts.sum() == 700


# --------------------------------------------------------------------------- GPU: the sort and construction kernels


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_sort_kernels_vs_references(index_dtype, rng):
    """The device sort (in-block and radix passes) against the references and the argsort definition; a
    permutation in the right dtype, every entry written."""
    for name, S in sort_cases(rng).items():
        lengths = np.diff(S.indptr)
        A = CSR.from_scipy(S, backend="gpu", index_dtype=index_dtype)
        T = CSR.from_scipy(S, backend="cpu", index_dtype=index_dtype)
        for window in (*SORT_WINDOWS, max(S.shape[0], 1)):
            got = to_numpy(sorted_by_length(A, window))
            np.testing.assert_array_equal(got, to_numpy(sorted_by_length(T, window)), err_msg=f"{name}, {window}")
            np.testing.assert_array_equal(got, argsort_by_length(lengths, window), err_msg=f"{name}, {window}")
            assert got.dtype == np.dtype(index_dtype)


@pytest.mark.gpu
def test_gpu_construction_kernels_write_every_entry(rng):
    """jds_diagonal_lengths and sell_slice_widths fill outputs poisoned with -7 exactly as their
    references do."""
    import cupy

    from sparsegpu.formats.sell import SELL_BLOCK, SELL_KERNELS

    for S in (long_row_matrix(rng, m=900, n=3000, long=3000), random_matrix(rng, 1000, 300, 0.02, empty_rows=200)):
        A = CSR.from_scipy(S, backend="gpu")
        m, lengths = S.shape[0], np.diff(S.indptr)
        perm = sorted_by_length(A, m)
        longest = int(lengths.max())
        got = cupy.full(longest + 1, -7, dtype=np.int64)
        jds_module._launch(A, "jds_diagonal_lengths<{I}>", m, A.indptr, perm, np.int64(m), got)
        expected = np.full(longest + 1, -7, dtype=np.int64)
        regular_reference.jds_diagonal_lengths(S.indptr, perm.get(), m, expected)
        np.testing.assert_array_equal(got.get(), expected)
        for C, sigma in [(32, 256), (8, 20), (4, 1), (256, 1000)]:
            perm = sorted_by_length(A, sigma)
            n_slices = -(-m // C)
            widths = cupy.full(n_slices + 1, -7, dtype=np.int64)
            SELL_KERNELS.function("sell_slice_widths<{I}>", A.dtype, A.index_dtype)(
                (-(-(n_slices + 1) // SELL_BLOCK),), (SELL_BLOCK,),
                (A.indptr, perm, np.int64(m), np.int64(C), np.int64(sigma), np.int64(n_slices), widths))
            expected = np.full(n_slices + 1, -7, dtype=np.int64)
            regular_reference.sell_slice_widths(S.indptr, perm.get(), m, C, sigma, n_slices, expected)
            np.testing.assert_array_equal(widths.get(), expected, err_msg=f"C={C}, sigma={sigma}")
