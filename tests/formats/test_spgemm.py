"""Sparse times sparse (sparsegpu/formats/_spgemm.py): SciPy's pattern and values for the
arithmetic product, a dense oracle for semirings and masks, the reference's phases, row blocks,
determinism, and bad input. Tests taking ``backend`` run on the GPU too where there is one;
those marked gpu compare the CUDA kernels with the reference and SciPy."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu import semiring as sr
from sparsegpu.formats import _spgemm_device as _spgemm
from sparsegpu.formats._spgemm import spgemm
from sparsegpu.reference import spgemm as ref
from tests.conftest import REAL_MATRICES, requires_matrices, to_numpy

PREDEFINED = list(sr.PREDEFINED.values())
IDS = [s.name for s in PREDEFINED]
DTYPES = [(np.float64, np.int32), (np.float32, np.int64), (np.complex128, np.int32), (np.complex64, np.int64)]
DTYPE_IDS = ["f64-i32", "f32-i64", "c128-i32", "c64-i64"]


def random_csr(rng, m, n, density, dtype=np.float64):
    S = sp.random_array((m, n), density=density, format="csr", rng=rng, dtype=np.float64)
    S.data = rng.uniform(-2.0, 2.0, S.nnz)
    if np.dtype(dtype).kind == "c":
        S = S.astype(dtype)
        S.data += 1j * rng.uniform(-2.0, 2.0, S.nnz)
    return sp.csr_array(S.astype(dtype))


def scipy_product(S, T):
    C = sp.csr_array(S @ T)
    C.sort_indices()
    return C


def assert_same_pattern_and_values(C, expected, dtype):
    """C's pattern equals ``expected``'s exactly; values within the dtype's tolerance (row-wise
    relative in float64)."""
    got = C.to_scipy()
    assert C.shape == expected.shape
    assert np.array_equal(got.indptr, expected.indptr)
    assert np.array_equal(got.indices, expected.indices)
    tol = 1e-12 if np.dtype(dtype) in (np.float64, np.complex128) else 1e-5
    scale = np.abs(expected.data).max(initial=0.0) or 1.0
    assert np.abs(got.data - expected.data).max(initial=0.0) <= tol * scale * 4


def ones_pattern(S):
    return sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape)


def structure_product(S, T):
    """The pattern of every product of stored entries (explicit zeros included)."""
    return sp.csr_array((ones_pattern(S) @ ones_pattern(T)) > 0)


def dense_oracle(S, T, semiring, dtype):
    """(pattern, values): pattern[i, j] when some stored k joins them; values the fold over k in
    A's storage order (sorted here) of mul(A[i, k], B[k, j])."""
    m, n = S.shape[0], T.shape[1]
    identity = semiring.identity(dtype)
    values = np.full((m, n), identity, dtype=dtype)
    pattern = np.zeros((m, n), dtype=bool)
    for i in range(m):
        for p in range(S.indptr[i], S.indptr[i + 1]):
            k = S.indices[p]
            cols = T.indices[T.indptr[k]:T.indptr[k + 1]]
            terms = semiring.mul.apply(np.full(cols.size, S.data[p], dtype), T.data[T.indptr[k]:T.indptr[k + 1]])
            for j, term in zip(cols, terms):
                values[i, j] = semiring.add.ufunc(np.asarray([values[i, j]], dtype), np.asarray([term], dtype))[0]
                pattern[i, j] = True
    return pattern, values


def check_against_oracle(C, pattern, values, semiring):
    got = C.to_scipy()
    dense_pattern = np.zeros(pattern.shape, dtype=bool)
    rows = np.repeat(np.arange(got.shape[0]), np.diff(got.indptr))
    dense_pattern[rows, got.indices] = True
    assert np.array_equal(dense_pattern, pattern)
    assert all(np.all(np.diff(got.indices[got.indptr[i]:got.indptr[i + 1]]) > 0) for i in range(got.shape[0]))
    expected = values[rows, got.indices]
    if semiring.add == sr.PLUS_MONOID:
        tol = 1e-5 if got.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.data, expected, rtol=tol, atol=tol)
    else:
        assert np.array_equal(got.data, expected)


# --------------------------------------------------------------------------- arithmetic product


@pytest.mark.parametrize("dtype,index_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,k,n", [(40, 30, 50), (50, 30, 7), (1, 20, 30), (30, 20, 1), (25, 1, 25)])
def test_matches_scipy(rng, backend, dtype, index_dtype, m, k, n):
    S, T = random_csr(rng, m, k, 0.2, dtype), random_csr(rng, k, n, 0.2, dtype)
    A = sparsegpu.from_scipy(S, backend=backend, index_dtype=index_dtype)
    B = sparsegpu.from_scipy(T, backend=backend, index_dtype=index_dtype, format="csc")
    C = spgemm(A, B)
    assert C.format == "csr" and C.backend == backend and C.dtype == dtype
    assert C.index_dtype == index_dtype
    assert_same_pattern_and_values(C, scipy_product(S, T), dtype)


@pytest.mark.parametrize("shape_a,shape_b", [((0, 0), (0, 0)), ((0, 5), (5, 3)), ((4, 0), (0, 6)), ((3, 5), (5, 0)),
                                             ((6, 4), (4, 5))])
def test_empty_shapes_and_rows(backend, shape_a, shape_b):
    S = sp.csr_array(shape_a, dtype=np.float64)
    T = sp.csr_array(shape_b, dtype=np.float64)
    C = spgemm(sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend))
    assert C.shape == (shape_a[0], shape_b[1]) and C.nnz == 0
    assert to_numpy(C.indptr).tolist() == [0] * (shape_a[0] + 1)


def test_empty_rows_among_full_ones(rng, backend):
    S = random_csr(rng, 60, 40, 0.3)
    S = sp.csr_array(S.multiply(np.repeat(rng.random(60) < 0.5, 40).reshape(60, 40)))
    T = random_csr(rng, 40, 50, 0.2)
    C = spgemm(sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend))
    assert_same_pattern_and_values(C, scipy_product(S, T), np.float64)


def test_cancelling_sums_are_dropped_as_scipy_does(rng, backend):
    # Rows of A pair +v and -v over columns of B that hold the same row twice: every product cancels.
    T = random_csr(rng, 20, 30, 0.3)
    T = sp.csr_array(sp.vstack([T, T]))
    a = np.zeros((10, 40))
    a[np.arange(10), np.arange(10)] = 2.0
    a[np.arange(10), np.arange(10) + 20] = -2.0
    a[:5, 15] = 1.0  # half the rows keep some entries
    S = sp.csr_array(a)
    expected = scipy_product(S, T)
    A, B = sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend)
    C = spgemm(A, B)
    assert_same_pattern_and_values(C, expected, np.float64)
    assert np.all(to_numpy(C.data) != 0)
    kept = spgemm(A, B, semiring="plus_times")  # GraphBLAS: an entry wherever a product exists
    assert kept.nnz == structure_product(S, T).nnz > C.nnz
    assert np.count_nonzero(to_numpy(kept.data) == 0) == kept.nnz - C.nnz


def test_mixed_dtypes_promote_as_numpy(rng, backend):
    S, T = random_csr(rng, 20, 15, 0.3, np.float32), random_csr(rng, 15, 10, 0.3, np.complex64)
    C = spgemm(sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend, index_dtype=np.int64))
    assert C.dtype == np.complex64 and C.index_dtype == np.int64
    assert_same_pattern_and_values(C, scipy_product(S, T), np.complex64)


def test_transposed_and_scipy_operands(rng, backend):
    S = random_csr(rng, 35, 20, 0.2)
    A = sparsegpu.from_scipy(S, backend=backend)
    assert_same_pattern_and_values(spgemm(A.T, A), scipy_product(S.T.tocsr(), S), np.float64)
    assert_same_pattern_and_values(spgemm(A, S.T), scipy_product(S, S.T.tocsr()), np.float64)
    C = sparsegpu.from_scipy(S, backend=backend, format="csc")
    assert_same_pattern_and_values(spgemm(C.T, A), scipy_product(S.T.tocsr(), S), np.float64)


@pytest.mark.parametrize("fmt", ["coo", "ell", "hyb", "jds", "sell"])
def test_every_format_goes_through_csr(rng, backend, fmt):
    S, T = random_csr(rng, 30, 25, 0.2), random_csr(rng, 25, 20, 0.2)
    params = {"max_fill": None} if fmt == "ell" else {}
    A = sparsegpu.from_scipy(S, backend=backend, format=fmt, **params)
    B = sparsegpu.from_scipy(T, backend=backend, format=fmt, **params)
    assert_same_pattern_and_values(spgemm(A, B), scipy_product(S, T), np.float64)


def rows_of(rng, lengths, n_cols, dtype=np.float64):
    """A CSR whose row i holds lengths[i] distinct random columns of n_cols."""
    indices = [np.sort(rng.choice(n_cols, size=length, replace=False)) for length in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    data = rng.uniform(-2.0, 2.0, int(indptr[-1])).astype(dtype)
    return sp.csr_array((data, np.concatenate(indices + [np.zeros(0, np.int64)]), indptr), shape=(len(lengths), n_cols))


def every_bin_operands(rng, dtype=np.float64):
    """(S, T): T has 300 rows of 10 entries and 10 of 2700; S's rows reach bounds of 0, 20,
    100, 1000 and 1500 over the short rows and 2700 over a long one: every hash bin and a wide
    row."""
    T = rows_of(rng, [10] * 300 + [2700] * 10, 3000, dtype)
    S = rows_of(rng, [0, 2, 10, 100, 150] * 5, 300, dtype)
    S.resize((S.shape[0], 310))
    long_rows = sp.csr_array((rng.uniform(-2, 2, 3).astype(dtype), np.array([300, 305, 5]), np.array([0, 1, 3])),
                             shape=(2, 310))
    return sp.csr_array(sp.vstack([S, long_rows, S])), T


def test_rows_in_every_bin_and_wide(rng, backend):
    S, T = every_bin_operands(rng)
    bounds = np.minimum(ref.upper_bounds(S.indptr, S.indices, T.indptr), T.shape[1])
    assert set(ref.bin_rows(bounds, _spgemm.CAPACITIES).tolist()) == {-1, 0, 1, 2, 3, 4}
    A, B = sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend)
    assert_same_pattern_and_values(spgemm(A, B), scipy_product(S, T), np.float64)


def test_row_blocks_give_identical_bytes(rng, backend):
    S, T = random_csr(rng, 80, 60, 0.15), random_csr(rng, 60, 70, 0.15)
    A, B = sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend)
    mask = random_csr(rng, 80, 70, 0.4)
    for kwargs in ({"semiring": "plus_times"}, {}, {"semiring": "min_plus", "mask": mask}):
        whole = spgemm(A, B, **kwargs)
        blocked = spgemm(A, B, max_bytes=2000, **kwargs)  # one or a few rows per block
        for name in ("indptr", "indices", "data"):
            assert to_numpy(getattr(whole, name)).tobytes() == to_numpy(getattr(blocked, name)).tobytes()
    assert len(ref.row_blocks(np.full(80, 1000), 2000)) > 20


def test_runs_twice_bitwise(rng, backend):
    S = random_csr(rng, 200, 200, 0.05)
    A = sparsegpu.from_scipy(S, backend=backend)
    first, second = spgemm(A, A), spgemm(A, A)
    assert to_numpy(first.data).tobytes() == to_numpy(second.data).tobytes()
    assert to_numpy(first.indices).tobytes() == to_numpy(second.indices).tobytes()


# --------------------------------------------------------------------------- semirings and masks


@pytest.mark.parametrize("semiring", PREDEFINED, ids=IDS)
@pytest.mark.parametrize("dtype,index_dtype", DTYPES[:2], ids=DTYPE_IDS[:2])
def test_semiring_matches_dense_oracle(rng, backend, semiring, dtype, index_dtype):
    S, T = random_csr(rng, 25, 18, 0.25, dtype), random_csr(rng, 18, 22, 0.25, dtype)
    A = sparsegpu.from_scipy(S, backend=backend, index_dtype=index_dtype)
    B = sparsegpu.from_scipy(T, backend=backend, index_dtype=index_dtype)
    C = spgemm(A, B, semiring=semiring)
    assert C.dtype == dtype
    check_against_oracle(C, *dense_oracle(S, T, semiring, dtype), semiring)


def test_user_made_semiring(rng, backend):
    hop = sr.Semiring(sr.MIN, sr.BinaryOp("hop", lambda a, b: b + 1, "b + V(1)"))
    S, T = random_csr(rng, 20, 15, 0.3), random_csr(rng, 15, 25, 0.3)
    C = spgemm(sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend), semiring=hop)
    check_against_oracle(C, *dense_oracle(S, T, hop, np.float64), hop)


@pytest.mark.parametrize("semiring", [None, sr.plus_pair, sr.min_plus, sr.any_pair], ids=["scipy", "plus_pair",
                                                                                        "min_plus", "any_pair"])
@pytest.mark.parametrize("complement", [False, True])
def test_mask_keeps_its_pattern(rng, backend, semiring, complement):
    S, T = random_csr(rng, 30, 20, 0.2), random_csr(rng, 20, 26, 0.2)
    M = random_csr(rng, 30, 26, 0.3)
    M.data[:] = 0.0  # the pattern counts, not the values
    A, B = sparsegpu.from_scipy(S, backend=backend), sparsegpu.from_scipy(T, backend=backend)
    mask = sparsegpu.from_scipy(M, backend=backend, format="coo")
    C = spgemm(A, B, semiring=semiring, mask=mask, complement=complement)
    in_mask = sp.csr_array((np.ones(M.nnz), M.indices, M.indptr), M.shape).toarray() > 0
    allowed = ~in_mask if complement else in_mask
    if semiring is None:
        pattern, values = structure_product(S, T).toarray(), (S @ T).toarray()
        pattern &= values != 0
        semiring_check = sr.plus_times
    else:
        pattern, values = dense_oracle(S, T, semiring, np.float64)
        semiring_check = semiring
    check_against_oracle(C, pattern & allowed, values, semiring_check)


def test_masked_triangle_counts(rng, backend):
    # C<L> = L plus_pair L^T: the triangles through each edge of the lower triangle.
    G = sp.random_array((60, 60), density=0.15, rng=rng, format="csr")
    G = sp.csr_array(((G + G.T) > 0).astype(np.float64))
    G.setdiag(0)
    G.eliminate_zeros()
    L = sp.csr_array(sp.tril(G, k=-1))
    A = sparsegpu.from_scipy(L, backend=backend)
    C = spgemm(A, A.T, semiring="plus_pair", mask=A)
    dense = L.toarray()
    expected = (dense @ dense.T) * (dense > 0)
    assert float(to_numpy(C.data).sum()) == expected.sum()
    assert np.array_equal(C.to_scipy().toarray(), expected)


def test_unsorted_mask_rows(rng, backend):
    S = random_csr(rng, 20, 20, 0.3)
    M = random_csr(rng, 20, 20, 0.4)
    order = np.concatenate([rng.permutation(np.arange(M.indptr[i], M.indptr[i + 1])) for i in range(20)])
    shuffled = sparsegpu.CSR((M.data[order], M.indices[order], M.indptr), M.shape, backend=backend)
    A = sparsegpu.from_scipy(S, backend=backend)
    expected = spgemm(A, A, semiring="plus_times", mask=sparsegpu.from_scipy(M, backend=backend))
    got = spgemm(A, A, semiring="plus_times", mask=shuffled)
    assert np.array_equal(to_numpy(got.indices), to_numpy(expected.indices))


# --------------------------------------------------------------------------- bad input


def test_bad_input_is_named(rng):
    A = sparsegpu.from_scipy(random_csr(rng, 5, 4, 0.5), backend="cpu")
    with pytest.raises(ValueError, match=r"\(5, 4\).*\(5, 4\)"):
        spgemm(A, A)
    with pytest.raises(TypeError, match="B must be"):
        spgemm(A, np.ones((4, 4)))
    with pytest.raises(TypeError, match="A must be"):
        spgemm([[1.0]], A.T)
    with pytest.raises(ValueError, match="mask has shape"):
        spgemm(A, A.T, mask=sp.eye(4, format="csr"))
    with pytest.raises(TypeError, match="mask must be"):
        spgemm(A, A.T, mask=np.eye(5))
    with pytest.raises(ValueError, match="complement"):
        spgemm(A, A.T, complement=True)
    with pytest.raises(ValueError, match="max_bytes"):
        spgemm(A, A.T, max_bytes=0)
    with pytest.raises(TypeError, match="complex"):
        spgemm(A.astype(np.complex128), A.T, semiring="min_plus")
    with pytest.raises(ValueError, match="unknown semiring"):
        spgemm(A, A.T, semiring="nope")
    with pytest.raises(TypeError, match="at least one sparsegpu"):
        spgemm(sp.eye(3, format="csr"), sp.eye(3, format="csr"))


@pytest.mark.gpu
def test_operands_on_two_backends_are_refused(rng):
    S = random_csr(rng, 5, 5, 0.5)
    with pytest.raises(TypeError, match="cpu.*gpu|gpu.*cpu"):
        spgemm(sparsegpu.from_scipy(S, backend="cpu"), sparsegpu.from_scipy(S, backend="gpu"))


# --------------------------------------------------------------------------- the reference's phases


def test_reference_phases(rng):
    S, T = random_csr(rng, 50, 40, 0.1), random_csr(rng, 40, 60, 0.1)
    bounds = ref.upper_bounds(S.indptr, S.indices, T.indptr)
    pattern_only = sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), S.shape) @ \
        sp.csr_array((np.ones(T.nnz), T.indices, T.indptr), T.shape)
    assert np.array_equal(bounds, pattern_only.toarray().sum(axis=1))
    counts = ref.symbolic_counts(np.arange(50), (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data),
                                 None, False)
    assert np.array_equal(counts, np.diff(structure_product(S, T).indptr))
    assert ref.bin_rows(np.array([0, 1, 32, 33, 2049]), (32, 2048)).tolist() == [-1, 0, 0, 1, 2]
    costs = rng.integers(1, 100, 200)
    blocks = ref.row_blocks(costs, 250)
    assert blocks[0] == 0 and blocks[-1] == 200 and np.all(np.diff(blocks) > 0)
    assert all(costs[lo:hi].sum() <= 250 or hi - lo == 1 for lo, hi in pairwise(blocks))


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_hash_row_walk_matches_the_reference(rng, semiring):
    # The kernels' per-row algorithm (chunked walk, binary search, linear probing, sorted keys,
    # fold in visiting order), emulated row by row, against the vectorised reference.
    S, T = every_bin_operands(rng)
    S = sp.csr_array(S[:25])
    M = random_csr(rng, S.shape[0], T.shape[1], 0.3)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    for mask, complement in ((None, False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        counts = np.diff(expected[0])
        for row in range(S.shape[0]):
            bin_id = ref.bin_rows(counts[row:row + 1], _spgemm.CAPACITIES)[0]
            if bin_id < 0 or bin_id == len(_spgemm.HASH_BINS):
                continue
            _, threads, table = _spgemm.HASH_BINS[bin_id]
            keys, values = ref.hash_row(row, a, b, add, mul, identity, mask, complement, threads, table)
            lo, hi = expected[0][row], expected[0][row + 1]
            assert np.array_equal(keys, expected[1][lo:hi])
            assert values.tobytes() == expected[2][lo:hi].tobytes()


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_wide_row_walk_matches_the_reference_bitwise(rng, semiring):
    # The wide kernel's per-row algorithm (bitmap, word ranks, fold in visiting order at the
    # column's rank), emulated row by row, against the vectorised reference: the same bits.
    # Values of very different sizes make any other summation order show.
    S, T = dense_rows_operands(rng, 12, 3)
    T.data *= 10.0 ** rng.integers(-12, 12, T.nnz)
    M = random_csr(rng, S.shape[0], T.shape[1], 0.3)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    for mask, complement in ((None, False), ((M.indptr, M.indices), False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        for row in range(S.shape[0]):
            keys, values = ref.wide_row(row, a, b, add, mul, identity, mask, complement, T.shape[1],
                                        _spgemm.WIDE_THREADS, _spgemm.WIDE_TOUCH)
            lo, hi = expected[0][row], expected[0][row + 1]
            assert np.array_equal(keys, expected[1][lo:hi])
            assert values.tobytes() == expected[2][lo:hi].tobytes()


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus, sr.any_pair, sr.max_times], ids=lambda s: s.name)
def test_warp_row_in_registers_matches_the_reference_bitwise(rng, semiring):
    # The warp kernel's path for rows of at most 32 products (peers by column, leaders' ranks,
    # lane-order folds), emulated row by row, against the vectorised reference: the same bits.
    # Rows of up to 40 products: the larger ones are refused (the kernel's hash table takes them).
    T = rows_of(rng, rng.integers(0, 9, 200).tolist(), 40)
    T.data *= 10.0 ** rng.integers(-12, 12, T.nnz)
    S = rows_of(rng, rng.integers(0, 9, 300).tolist(), 200)
    S.data[::7] = 0.0
    M = random_csr(rng, S.shape[0], T.shape[1], 0.4)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    add, mul, identity = semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64)
    products = ref.upper_bounds(S.indptr, S.indices, T.indptr)
    assert np.any(products > 32) and np.count_nonzero(products <= 32) > 100
    for mask, complement in ((None, False), ((M.indptr, M.indices), False), ((M.indptr, M.indices), True)):
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement)
        for row in range(S.shape[0]):
            got = ref.warp_row(row, a, b, add, mul, identity, mask, complement)
            assert (got is None) == (products[row] > 32)
            if got is not None:
                lo, hi = expected[0][row], expected[0][row + 1]
                assert np.array_equal(got[0], expected[1][lo:hi])
                assert got[1].tobytes() == expected[2][lo:hi].tobytes()


NEVER_TURNS = 2**30  # a fold_turns no round exceeds: the lowest warp always folds


@pytest.mark.parametrize("threads", [32, 128, 256])
def test_fold_order_folds_each_slot_in_product_order(rng, threads):
    # The kernels' fold: per round, either the lowest warp holding a slot folds it across the
    # round's warps, or the warps take turns. Every product once, each slot's in product order,
    # whether mark bytes are per slot (exact) or shared by slots modulo a small table, and
    # whichever way the rule goes (always turns, the default, never).
    for n_slots, touch, exact in ((40, 64, True), (2000, 2048, True), (300, 4, False), (3000, 2048, False),
                                  (3, 64, True), (5, 4, False)):
        slots = rng.integers(-1, n_slots, 5 * threads + 17)
        for turns in (-1, 0, _spgemm.FOLD_TURNS, 4, NEVER_TURNS):
            order = np.asarray(ref.fold_order(slots, threads, touch, exact, turns))
            assert np.array_equal(np.sort(order), np.flatnonzero(slots >= 0))
            for s in np.unique(slots[slots >= 0]):
                assert np.all(np.diff(order[slots[order] == s]) > 0)
    if threads > 32:  # the exact shortcut needs a byte per slot: shared bytes lose products
        slots = rng.integers(0, 300, 5 * threads)
        assert len(ref.fold_order(slots, threads, 4, True, NEVER_TURNS)) < slots.size


def round_lanes(slots, threads, base=0):
    """slot -> warp -> lanes of the round of ``threads`` products from ``base``."""
    lanes = {}
    for t in range(base, min(base + threads, slots.size)):
        lanes.setdefault(int(slots[t]), {}).setdefault((t - base) // 32, []).append(t)
    return lanes


@pytest.mark.parametrize("threads", [128, 256])
def test_fold_rule_turns_for_few_columns_only(rng, threads):
    # Rounds whose slots spread over many warps (few columns) fold in warp turns; rounds of
    # distinct columns (no spans) fold by each slot's lowest warp; the rule's threshold decides
    # between. Few columns: the two orders differ, so the order shows which side was taken.
    warps = threads // 32
    few = rng.integers(0, 4, 3 * threads)  # every warp holds every slot: 4 (warps - 1) spans
    distinct = rng.permutation(3 * threads)  # no slot twice: no spans
    pairs = rng.permutation(np.repeat(np.arange(3 * threads // 2), 2))  # some slots in two warps
    for slots, touch, exact in ((few, 2048, True), (few, 4, False), (distinct, 2048, True), (pairs, 2048, True),
                                (pairs, 16, False)):
        for base in range(0, slots.size, threads):
            lanes = round_lanes(slots, threads, base)
            spans = ref.round_spans(lanes, touch)
            assert (spans == 0) == (slots is distinct and touch == 2048)
            for turns in (-1, 0, 1, 2, 3, 4, NEVER_TURNS):
                assert ref.takes_turns(lanes, threads, touch, turns) == (spans > turns * warps)
            if slots is not pairs:
                assert ref.takes_turns(lanes, threads, touch, _spgemm.FOLD_TURNS) == (slots is few)
    always, never = (ref.fold_order(few, threads, 2048, True, t) for t in (-1, NEVER_TURNS))
    assert always != never
    assert ref.fold_order(few, threads, 2048, True, _spgemm.FOLD_TURNS) == always
    assert ref.fold_order(few, threads, 2048, True, 4) == never  # fewer than 4 spans per warp
    assert not ref.takes_turns(round_lanes(few, 32), 32, 2048, -1)  # one warp never takes turns


def test_round_spans_count_leaders_beyond_the_first_per_byte():
    lanes = {0: {0: [0, 1], 1: [32]}, 4: {1: [33]}, 9: {0: [2], 1: [40], 2: [64]}}
    assert ref.round_spans(lanes, 2048) == 3  # slot 0 in 2 warps, slot 9 in 3
    assert ref.round_spans(lanes, 4) == 4  # slots 0 and 4 share byte 0


def test_reference_folds_each_entry_in_product_order(rng):
    # Sequential from the identity, as the kernels fold (not NumPy's pairwise reduction).
    values = rng.standard_normal(500) * 10.0 ** rng.integers(-10, 10, 500)
    local, cols = np.zeros(500, np.int64), rng.integers(0, 3, 500)
    _, columns, folded = ref.fold_runs(local, cols, values, 1, np.add, 0.0)
    for column, got in zip(columns, folded):
        expected = 0.0
        for v in values[cols == column]:
            expected += v
        assert got == expected


def dense_rows_operands(rng, n_rows, n_dense, n_cols=3000):
    """(S, T): S has ``n_rows`` rows of random length, ``n_dense`` of them nearly full, over T's
    400 rows of 5 to 60 entries in ``n_cols`` columns: the dense rows have bounds past 2048."""
    T = rows_of(rng, rng.integers(5, 60, 400).tolist(), n_cols)
    lengths = rng.integers(0, 20, n_rows)
    lengths[rng.choice(n_rows, n_dense, replace=False)] = rng.integers(300, 400, n_dense)
    S = rows_of(rng, lengths.tolist(), 400)
    return S, T


class EmulatedKernels:
    """kernels/spgemm.cu's kernels as NumPy functions of the same arguments, one call per
    launch (the hash rows through the reference's :func:`hash_row`, the plan through its
    bounds, bins and costs): the GPU path's host code runs on them without a GPU. Rows are
    listed in a shuffled order within each bin, as the kernel's atomics may list them."""

    def __init__(self, semiring, rng=None):
        semiring = semiring or sr.plus_times
        self.semiring = semiring
        self.rng = rng or np.random.default_rng(0)
        self.launches: list[str] = []
        self.wide_grids: list[tuple[int, bool]] = []
        self.fold_turns: list[int] = []

    def __call__(self, template):
        name = template.split("<")[0]
        self.launches.append(template)
        if name == "spgemm_rows":
            threads, table, phase = (part.strip() for part in template[:-1].split(",")[-3:])
            return lambda grid, block, args, shared_mem=0: self.rows(int(threads), int(table), phase == "true", args)
        if name == "spgemm_wide":
            numeric = template[:-1].split(",")[-1].strip() == "true"
            return lambda grid, block, args, shared_mem=0: self.wide(numeric, grid[0], block[0], shared_mem, args)
        return {"spgemm_plan": lambda grid, block, args: self.plan(args),
                "spgemm_count_bins": lambda grid, block, args: self.count_bins(args),
                "spgemm_list_rows": lambda grid, block, args: self.list_rows(args),
                "spgemm_drop_zeros": lambda grid, block, args: self.drop_zeros(args)}[name]

    def parts(self, dtype):
        return self.semiring.add.ufunc, self.semiring.mul.apply, self.semiring.identity(dtype)

    @staticmethod
    def mask_of(m_indptr, m_indices):
        return None if isinstance(m_indptr, np.uint64) else (m_indptr, m_indices)

    def plan(self, args):
        (_, a_indptr, a_indices, b_indptr, m_indptr, complement, n_cols, *caps, entry_bytes, wide_bytes,
         row_overhead, bins, costs, counts, stats) = args
        assert (wide_bytes, row_overhead) == (_spgemm.wide_scratch_bytes(int(n_cols)), ref.ROW_OVERHEAD_BYTES)
        counts[:] = 0
        products = ref.upper_bounds(a_indptr, a_indices, b_indptr)
        mask_lengths = None if isinstance(m_indptr, np.uint64) else np.diff(m_indptr)
        bounds = ref.output_bounds(products, int(n_cols), mask_lengths, bool(complement))
        bins[:] = ref.bin_rows(bounds, tuple(int(c) for c in caps))
        wide = bins == len(caps)
        costs[:] = ref.row_costs(bounds, wide, int(entry_bytes), int(wide_bytes))
        stats[:len(caps) + 1] += np.bincount(bins[bins >= 0], minlength=len(caps) + 1).astype(np.uint64)
        stats[_spgemm.STAT_COST] += np.uint64(costs.sum())
        stats[_spgemm.STAT_WIDE_PRODUCTS] += np.uint64(products[wide].sum())
        stats[_spgemm.STAT_PRODUCTS] += np.uint64(products.sum())

    def count_bins(self, args):
        lo, hi, counts, *caps, bins, indptr, stats = args
        lo, hi = int(lo), int(hi)
        if not isinstance(counts, np.uint64):
            planned = bins[lo:hi].copy()
            bins[lo:hi] = ref.bin_rows(counts[lo:hi], tuple(int(c) for c in caps))
            stats[_spgemm.STAT_MOVED] += np.uint64(np.count_nonzero((bins[lo:hi] >= 0) & (bins[lo:hi] != planned)))
        block = bins[lo:hi]
        stats[:len(caps) + 1] += np.bincount(block[block >= 0], minlength=len(caps) + 1).astype(np.uint64)
        if not isinstance(indptr, np.uint64):
            stats[_spgemm.STAT_TOTAL] = indptr[hi]

    def list_rows(self, args):
        lo, hi, bins, bin_rows, cursors, lists = args
        starts = np.concatenate([[0], np.cumsum(bin_rows[:_spgemm.N_BINS].astype(np.int64))])
        for b in range(_spgemm.N_BINS):
            rows = int(lo) + np.flatnonzero(bins[int(lo):int(hi)] == b)
            assert rows.size == bin_rows[b] and cursors[b] == 0
            lists[starts[b]:starts[b] + rows.size] = self.rng.permutation(rows)
            cursors[b] += np.uint64(rows.size)

    def drop_zeros(self, args):
        _, indptr, kept_ptr, indices, data, out_indices, out_data = args
        keep = data != 0
        out_indices[:] = indices[keep]
        out_data[:] = data[keep]
        assert np.array_equal(kept_ptr, np.concatenate([[0], np.cumsum(keep)])[indptr])

    def rows(self, threads, table, numeric, args):
        (n_rows, rows, indptr, counts, *operands, m_indptr, m_indices, complement, c_indices, c_data, stats,
         fold_turns) = args
        assert fold_turns == _spgemm.FOLD_TURNS and isinstance(fold_turns, np.int32)
        self.fold_turns.append(int(fold_turns))
        a, b = tuple(operands[:3]), tuple(operands[3:])
        add, mul, identity = self.parts(a[2].dtype)
        mask = self.mask_of(m_indptr, m_indices)
        for r in range(int(n_rows)):
            row = int(rows[r])
            small = ref.warp_row(row, a, b, add, mul, identity, mask, bool(complement)) if threads == 32 else None
            keys, values = small or ref.hash_row(row, a, b, add, mul, identity, mask, bool(complement), threads,
                                                 table, int(fold_turns))
            assert keys.size <= table // 2  # what the bin promises the kernel
            self.write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats)

    @staticmethod
    def write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats):
        """Symbolic: the count; numeric: the entries, and unless counts is null the nonzero
        count and the zeros added to stats[STAT_ZEROS]."""
        if numeric:
            assert indptr[row + 1] - indptr[row] == keys.size  # the symbolic count
            c_indices[indptr[row]:indptr[row] + keys.size] = keys
            c_data[indptr[row]:indptr[row] + keys.size] = values
            if not isinstance(counts, np.uint64):
                counts[row] = np.count_nonzero(values)
                stats[_spgemm.STAT_ZEROS] += np.uint64(keys.size - counts[row])
        else:
            assert isinstance(stats, np.uint64)
            counts[row] = keys.size

    def wide(self, numeric, grid, threads, shared_mem, args):
        """spgemm_wide: block g takes rows[g], rows[g + grid], ...; its bitmap (2 words per 32
        columns) in shared memory, or its slice of the scratch, zero on entry and left zero."""
        (n_rows, rows, indptr, counts, *operands, m_indptr, m_indices, complement, c_indices, c_data, n_cols,
         scratch, stats, fold_turns) = args
        assert fold_turns == _spgemm.FOLD_TURNS and isinstance(fold_turns, np.int32)
        self.fold_turns.append(int(fold_turns))
        a, b = tuple(operands[:3]), tuple(operands[3:])
        add, mul, identity = self.parts(a[2].dtype)
        words = -(-int(n_cols) // 32)
        walk = _spgemm.wide_walk_bytes(a[2].dtype.itemsize)
        in_shared = isinstance(scratch, np.uint64)
        assert threads == _spgemm.WIDE_THREADS and 1 <= grid <= max(int(n_rows), 1)
        assert shared_mem == walk + (8 * words if in_shared else 0)
        assert in_shared or (scratch.dtype == np.uint32 and scratch.size >= grid * 2 * words and not scratch.any())
        self.wide_grids.append((grid, in_shared))
        for g in range(grid):
            for r in range(g, int(n_rows), grid):
                row = int(rows[r])
                keys, values = ref.wide_row(row, a, b, add, mul, identity, self.mask_of(m_indptr, m_indices),
                                            bool(complement), int(n_cols), threads, _spgemm.WIDE_TOUCH,
                                            int(fold_turns))
                assert keys.size == 0 or keys[-1] < n_cols
                self.write_row(numeric, row, keys, values, indptr, counts, c_indices, c_data, stats)


@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus, sr.plus_pair], ids=lambda s: getattr(s, "name", "scipy"))
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_device_host_code_on_emulated_kernels(rng, semiring, index_dtype, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = every_bin_operands(rng)
    S.data[::3] = 0.0  # stored zeros: their products sum to zero, dropped without a semiring
    M = random_csr(rng, S.shape[0], T.shape[1], 0.5)
    a = tuple(x.astype(t) for x, t in zip((S.indptr, S.indices, S.data), (index_dtype, index_dtype, np.float64)))
    b = tuple(x.astype(t) for x, t in zip((T.indptr, T.indices, T.data), (index_dtype, index_dtype, np.float64)))
    pattern = (M.indptr.astype(index_dtype), M.indices.astype(index_dtype))
    A, B = sparsegpu.from_scipy(S, backend="cpu"), sparsegpu.from_scipy(T, backend="cpu")
    for mask, complement, max_bytes in ((None, False, 1 << 40), (pattern, False, 1 << 40), (pattern, True, 20_000),
                                        (None, False, 30_000)):
        kernels = EmulatedKernels(semiring)
        indptr, indices, data = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), semiring, mask, complement,
                                                       max_bytes, xp=np, kernels=kernels)
        expected = spgemm(A, B, semiring=semiring, mask=None if mask is None else M, complement=complement)
        # A mask of half the columns keeps every bound within the largest hash table.
        assert any("spgemm_wide" in k for k in kernels.launches) == (mask is None or complement)
        assert {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows")} >= {"32", "128"}
        assert np.array_equal(indptr, expected.indptr)
        assert np.array_equal(indices, expected.indices)
        np.testing.assert_allclose(data, expected.data, rtol=1e-13, atol=1e-13)
        if semiring is None or semiring == sr.plus_times:
            assert bool(np.all(data != 0)) == (semiring is None)


@pytest.mark.parametrize("dtype,index_dtype", DTYPES, ids=DTYPE_IDS)
def test_device_host_code_every_dtype(rng, dtype, index_dtype, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = every_bin_operands(rng, dtype)
    if np.dtype(dtype).kind == "c":
        S.data = S.data + 1j * rng.uniform(-1, 1, S.nnz)
    a = (S.indptr.astype(index_dtype), S.indices.astype(index_dtype), S.data.astype(dtype))
    b = (T.indptr.astype(index_dtype), T.indices.astype(index_dtype), T.data.astype(dtype))
    indptr, indices, data = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), None, None, False, 50_000,
                                                   xp=np, kernels=EmulatedKernels(None))
    C = sparsegpu.CSR((data, indices, indptr), (S.shape[0], T.shape[1]), backend="cpu")
    assert data.dtype == dtype and indices.dtype == index_dtype
    assert_same_pattern_and_values(C, scipy_product(S, T), dtype)


def test_device_host_code_few_reads_and_blocks_in_place(rng, monkeypatch):
    # One block without wide rows: two stats reads and the word of zeros; no wide launch. Many
    # blocks: the rows written in place into one output, bitwise the one-block result.
    monkeypatch.setattr(_spgemm, "POISON", True)
    reads = []
    monkeypatch.setattr(_spgemm, "to_host", lambda x: reads.append(x.size) or np.array(x, copy=True))
    S, T = random_csr(rng, 90, 70, 0.08), random_csr(rng, 70, 80, 0.08)
    S.data[::4] = 0.0
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(None, rng)
    whole = _spgemm.device_spgemm(a, b, (90, 80), None, None, False, 1 << 40, xp=np, kernels=kernels)
    assert reads == [_spgemm.STATS, _spgemm.STATS, 1]
    assert not any(k.startswith("spgemm_wide") for k in kernels.launches)
    assert any(k.startswith("spgemm_drop_zeros") for k in kernels.launches)
    expected = scipy_product(S, T)
    assert np.array_equal(whole[0], expected.indptr) and np.array_equal(whole[1], expected.indices)
    for max_bytes in (3000, 600):  # a few rows, then one row per block
        kernels = EmulatedKernels(None, rng)
        blocked = _spgemm.device_spgemm(a, b, (90, 80), None, None, False, max_bytes, xp=np, kernels=kernels)
        assert sum(k.startswith("spgemm_count_bins") for k in kernels.launches) > 4  # two per block
        for got, want in zip(blocked, whole):
            assert got.tobytes() == want.tobytes()


def small_rows_operands(rng, n_rows=120, few=False, a_lengths=7):
    """(S, T) with positive values (no sum is zero): every row of S @ T has 1 to 32 products
    (S's rows below ``a_lengths`` entries, T's below 5), so it is planned and computed in the
    warp bin; ``few``: a last row of 40 products on 4 columns, planned in the 256 bin and
    computed in the warp bin."""
    T = rows_of(rng, rng.integers(1, 5, 60).tolist(), 50)
    S = rows_of(rng, rng.integers(1, a_lengths, n_rows).tolist(), 60)
    S.data, T.data = np.abs(S.data) + 0.5, np.abs(T.data) + 0.5
    if few:
        T = sp.csr_array(sp.vstack([T, sp.csr_array((np.ones(40), np.tile([3, 9, 20, 30], 10), np.arange(0, 41, 4)),
                                                    shape=(10, 50))]))
        S.resize((n_rows, 70))
        S = sp.csr_array(sp.vstack([S, sp.csr_array((np.ones(10), np.arange(60, 70), [0, 10]), shape=(1, 70))]))
    return S, T


@pytest.mark.parametrize("case", ["no-zeros", "zeros", "moved", "semiring", "emptied-by-mask"])
def test_device_host_code_skips_what_it_does_not_need(rng, case, monkeypatch):
    # Rows that keep their planned bin reuse the plan's lists (one listing launch); a row that
    # moves lists them again. Without entries equal to zero (the numeric kernels' word of zeros,
    # one read) there is no scan of the kept counts and no compaction; with some, both, and no
    # further read. A semiring reads nothing after the numeric bins. Bitwise the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    reads, scans = [], []
    monkeypatch.setattr(_spgemm, "to_host", lambda x: reads.append(x.size) or np.array(x, copy=True))
    scan = _spgemm.primitives.exclusive_scan
    monkeypatch.setattr(_spgemm.primitives, "exclusive_scan", lambda x: scans.append(x.size) or scan(x))
    S, T = small_rows_operands(rng, few=case == "moved", a_lengths=4 if case == "zeros" else 7)
    if case == "zeros":
        S.data[::5] *= -1.0
        T = sp.csr_array(sp.vstack([T, T]))  # a row of A pairs +v and -v: every product cancels
        S = sp.csr_array(sp.hstack([S, -S]))
    mask, complement = None, False
    if case == "emptied-by-mask":  # complement of the row's whole product pattern: no entry left
        pattern = structure_product(S, T)
        keep = np.zeros(S.shape[0], bool)
        keep[::7] = True
        M = sp.csr_array(sp.diags_array(keep.astype(np.float64)) @ pattern)
        M.eliminate_zeros()
        M.sort_indices()  # the pattern's rows sorted, as spgemm passes masks
        mask, complement = (M.indptr, M.indices), True
    semiring = sr.plus_times if case == "semiring" else None
    m, n = S.shape[0], T.shape[1]
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(semiring, rng)
    got = _spgemm.device_spgemm(a, b, (m, n), semiring, mask, complement, 1 << 40, xp=np, kernels=kernels)
    expected = ref.csr_spgemm(a, b, np.add, np.multiply, 0.0, n_cols=n, mask=mask, complement=complement,
                              drop_zero_values=semiring is None)
    for g, e in zip(got, expected):
        assert g.astype(e.dtype).tobytes() == e.tobytes()
    lists = sum(k.startswith("spgemm_list_rows") for k in kernels.launches)
    dropped = any(k.startswith("spgemm_drop_zeros") for k in kernels.launches)
    assert lists == (2 if case == "moved" else 1)
    assert reads == [_spgemm.STATS, _spgemm.STATS] + ([] if semiring else [1])
    assert len(scans) == (2 if case == "zeros" else 1) and dropped == (case == "zeros")
    numeric = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "true" in k}
    assert numeric == {"32"}
    if case == "moved":
        symbolic = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "false" in k}
        assert symbolic == {"32", "128"}
    if case == "zeros":
        assert got[1].size < structure_product(S, T).nnz
    if case == "emptied-by-mask":
        assert np.count_nonzero(np.diff(got[0]) == 0) >= m // 7


@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus, sr.plus_pair], ids=lambda s: getattr(s, "name", "scipy"))
def test_device_wide_rows_in_global_scratch(rng, semiring, monkeypatch):
    # Bitmaps past the shared limit go to global scratch with a capped grid (blocks take rows in
    # turn); each wide row's cost counts its slice, so a small budget splits the wide rows into
    # row blocks. Bitwise the reference (or, without a semiring, its product with zeros dropped).
    monkeypatch.setattr(_spgemm, "POISON", True)
    monkeypatch.setattr(_spgemm, "WIDE_SHARED_BYTES", 0)
    monkeypatch.setattr(_spgemm, "WIDE_GRID", 2)
    S, T = dense_rows_operands(rng, 40, 7)
    S.data[::5] = 0.0
    M = random_csr(rng, S.shape[0], T.shape[1], 0.6)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    parts = semiring or sr.plus_times
    add, mul, identity = parts.add.ufunc, parts.mul.apply, parts.identity(np.float64)
    slice_bytes = _spgemm.wide_bitmap_bytes(T.shape[1])
    for mask, complement, max_bytes in ((None, False, 1 << 40), ((M.indptr, M.indices), True, 1 << 40),
                                        (None, False, 3 * slice_bytes)):
        kernels = EmulatedKernels(semiring, rng)
        got = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), semiring, mask, complement, max_bytes, xp=np,
                                    kernels=kernels)
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement,
                                  drop_zero_values=semiring is None)
        for g, e in zip(got, expected):
            assert g.astype(e.dtype).tobytes() == e.tobytes()
        assert kernels.wide_grids and all(not in_shared for _, in_shared in kernels.wide_grids)
        if max_bytes < 1 << 40:  # at most 3 wide rows per block: 2 blocks, then the rest in turn
            assert max(grid for grid, _ in kernels.wide_grids) <= 2
            assert sum(k.startswith("spgemm_wide") and k.endswith("false>") for k in kernels.launches) >= 3
        else:
            assert (2, False) in kernels.wide_grids


def test_device_wide_bound_few_columns_fills_in_a_hash_table(rng):
    # A row with more than 2048 products, all in 50 of 3000 columns: the wide kernel counts it,
    # then the numeric phase (rows binned by their count) fills it in a hash table.
    T = rows_of(rng, [10] * 300, 50)
    T.resize((300, 3000))
    S = sp.csr_array(sp.vstack([rows_of(rng, [250], 300), rows_of(rng, [3] * 20, 300)]))
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(None, rng)
    got = _spgemm.device_spgemm(a, b, (S.shape[0], 3000), sr.plus_times, None, False, 1 << 40, xp=np,
                                kernels=kernels)
    assert any(k.startswith("spgemm_wide") and k.endswith("false>") for k in kernels.launches)
    assert not any(k.startswith("spgemm_wide") and k.endswith("true>") for k in kernels.launches)
    expected = ref.csr_spgemm(a, b, np.add, np.multiply, 0.0, n_cols=3000)
    for g, e in zip(got, expected):
        assert g.astype(e.dtype).tobytes() == e.tobytes()


def test_wide_scratch_and_walk_sizes():
    assert _spgemm.wide_scratch_bytes(32 * (_spgemm.WIDE_SHARED_BYTES // 8)) == 0
    assert _spgemm.wide_scratch_bytes(32 * (_spgemm.WIDE_SHARED_BYTES // 8) + 1) == _spgemm.WIDE_SHARED_BYTES + 8
    for value_size in (4, 8, 16):
        assert _spgemm.wide_walk_bytes(value_size) + _spgemm.WIDE_SHARED_BYTES <= 227 * 1024


def test_device_product_too_large_raises_memory_error(rng, monkeypatch):
    S, T = every_bin_operands(rng)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    monkeypatch.setattr(_spgemm._validate, "available_bytes", lambda backend: 1000)
    kernels = EmulatedKernels(None)
    with pytest.raises(MemoryError, match=r"product has [\d,]+ entries"):
        _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), None, None, False, 1 << 40, xp=np, kernels=kernels)
    assert not any(k.endswith("true>") for k in kernels.launches)  # no numeric phase ran


def test_shared_layout_fits_every_bin():
    for value_size in (4, 8, 16):
        for index_size in (4, 8):
            for _, threads, table in _spgemm.HASH_BINS:
                groups = _spgemm.WARP_GROUPS if threads == 32 else 1
                assert groups * _spgemm.group_shared_bytes(value_size, index_size, threads, table) <= 227 * 1024


# --------------------------------------------------------------------------- real matrices

SMALL_PRODUCTS = 3_000_000  # products of A @ A (upper bound) a test computes


def real_square_product(name):
    S = datasets.load_matrix(name)
    T = S if S.shape[0] == S.shape[1] else sp.csr_array(S.T)
    products = int(ref.upper_bounds(S.indptr, S.indices, T.indptr).sum())
    return S, T, products


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices_plus_times_semiring(name):
    S, T, products = real_square_product(name)
    if products > SMALL_PRODUCTS:
        pytest.skip(f"{name}: {products} products")
    A, B = sparsegpu.from_scipy(S, backend="cpu"), sparsegpu.from_scipy(T, backend="cpu")
    kept = spgemm(A, B, semiring="plus_times").to_scipy()
    assert np.array_equal(kept.indptr, structure_product(S, T).indptr)
    expected = scipy_product(S, T)
    dropped = spgemm(A, B)
    assert_same_pattern_and_values(dropped, expected, np.float64)


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices_on_the_gpu(name):
    S, T, products = real_square_product(name)
    if products > 50 * SMALL_PRODUCTS:
        pytest.skip(f"{name}: {products} products")
    A, B = sparsegpu.from_scipy(S, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu")
    expected = scipy_product(S, T)
    C = spgemm(A, B)
    assert_same_pattern_and_values(C, expected, np.float64)
    again = spgemm(A, B, max_bytes=max(1, products * 4))
    assert to_numpy(again.data).tobytes() == to_numpy(C.data).tobytes()


# --------------------------------------------------------------------------- GPU kernels


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", PREDEFINED, ids=IDS)
def test_kernels_match_the_reference(rng, semiring, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S = sp.csr_array(sp.vstack([random_csr(rng, 40, 300, 0.02), random_csr(rng, 10, 300, 0.3),
                                random_csr(rng, 3, 300, 0.9)]))
    T = random_csr(rng, 300, 2500, 0.01)
    M = random_csr(rng, S.shape[0], 2500, 0.2)
    for mask, complement in ((None, False), (M, False), (M, True)):
        gpu = spgemm(sparsegpu.from_scipy(S, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu"),
                     semiring=semiring, mask=None if mask is None else sparsegpu.from_scipy(mask, backend="gpu"),
                     complement=complement)
        cpu = spgemm(sparsegpu.from_scipy(S, backend="cpu"), sparsegpu.from_scipy(T, backend="cpu"),
                     semiring=semiring, mask=mask, complement=complement)
        assert np.array_equal(to_numpy(gpu.indptr), cpu.indptr)
        assert np.array_equal(to_numpy(gpu.indices), cpu.indices)
        if semiring.add == sr.PLUS_MONOID:
            np.testing.assert_allclose(to_numpy(gpu.data), cpu.data, rtol=1e-12, atol=1e-12)
        else:
            assert np.array_equal(to_numpy(gpu.data), cpu.data)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,index_dtype", DTYPES, ids=DTYPE_IDS)
def test_kernels_poisoned_every_dtype(rng, dtype, index_dtype, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S = sp.csr_array(sp.vstack([random_csr(rng, 60, 400, 0.01, dtype), random_csr(rng, 4, 400, 0.8, dtype)]))
    T = random_csr(rng, 400, 3000, 0.02, dtype)
    A = sparsegpu.from_scipy(S, backend="gpu", index_dtype=index_dtype)
    B = sparsegpu.from_scipy(T, backend="gpu", index_dtype=index_dtype)
    C = spgemm(A, B)
    assert not np.isnan(to_numpy(C.data)).any()
    assert_same_pattern_and_values(C, scipy_product(S, T), dtype)
    blocked = spgemm(A, B, max_bytes=50_000)
    assert to_numpy(blocked.data).tobytes() == to_numpy(C.data).tobytes()


@pytest.mark.gpu
def test_int64_operands_give_int64_indices():
    S = datasets.poisson2d(30)
    A = sparsegpu.from_scipy(S, backend="gpu", index_dtype=np.int64)
    C = spgemm(A, A)
    assert C.index_dtype == np.int64 and C.indptr.dtype == np.int64
    assert_same_pattern_and_values(C, scipy_product(S, S), np.float64)


def test_one_dimensional_sparse_operand_is_refused_by_name(rng):
    A = sparsegpu.from_scipy(sp.random_array((4, 3), density=0.5, rng=rng, format="csr"), backend="cpu")
    with pytest.raises(ValueError, match="B must be a 2-D sparse matrix"):
        A @ sp.coo_array(rng.random(3))
    with pytest.raises(ValueError, match="A must be a 2-D sparse matrix"):
        sparsegpu.spgemm(sp.coo_array(rng.random(4)), A)


# --------------------------------------------------------------------------- wide rows on the GPU


def bitwise_reference(S, T, semiring=None, mask=None):
    """The NumPy reference's (indptr, indices, data) of S (+.x) T: SciPy's pattern rule (zeros
    dropped) without a semiring."""
    parts = semiring or sr.plus_times
    pattern = None if mask is None else (mask.indptr, mask.indices)
    return ref.csr_spgemm((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), parts.add.ufunc,
                          parts.mul.apply, parts.identity(S.dtype), n_cols=T.shape[1], mask=pattern,
                          drop_zero_values=semiring is None)


def assert_bitwise(C, expected):
    assert to_numpy(C.indptr).astype(np.int64).tobytes() == expected[0].tobytes()
    assert to_numpy(C.indices).astype(np.int64).tobytes() == expected[1].tobytes()
    assert to_numpy(C.data).tobytes() == expected[2].tobytes()


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", ["ego-Facebook", "as-caida"])
def test_gpu_wide_rows_of_real_graphs_bitwise(rng, name, monkeypatch):
    # Power-law graphs: hundreds of rows past 2048 products. Values of many magnitudes, so any
    # summation order other than the product order shows in the bits.
    monkeypatch.setattr(_spgemm, "POISON", True)
    S = datasets.load_matrix(name)
    S.data = rng.uniform(0.5, 2.0, S.nnz) * 10.0 ** rng.integers(-8, 8, S.nnz)
    bounds = ref.upper_bounds(S.indptr, S.indices, S.indptr)
    assert np.count_nonzero(bounds > _spgemm.CAPACITIES[-1]) > 100
    A = sparsegpu.from_scipy(S, backend="gpu")
    assert_bitwise(spgemm(A, A), bitwise_reference(S, S))
    blocked = spgemm(A, A, max_bytes=int(bounds.sum()))  # several row blocks
    assert_bitwise(blocked, bitwise_reference(S, S))


@pytest.mark.gpu
@requires_matrices
def test_gpu_masked_triangle_counts_on_a_real_graph(monkeypatch):
    # C<L> = L plus_pair L^T (triangle counting) with wide rows, bitwise the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    G = datasets.load_matrix("ego-Facebook")
    G = sp.csr_array(((G + G.T) > 0).astype(np.float64))
    L = sp.csr_array(sp.tril(G, k=-1))
    LT = sp.csr_array(L.T)
    A = sparsegpu.from_scipy(L, backend="gpu")
    C = spgemm(A, sparsegpu.from_scipy(LT, backend="gpu"), semiring="plus_pair", mask=A)
    assert_bitwise(C, bitwise_reference(L, LT, sr.plus_pair, L))


@pytest.mark.gpu
@pytest.mark.parametrize("shared", [True, False], ids=["shared-bitmap", "global-bitmap"])
@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus], ids=lambda s: getattr(s, "name", "scipy"))
def test_gpu_random_matrix_with_dense_rows_bitwise(rng, shared, semiring, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    if not shared:  # every bitmap in global scratch, few blocks taking rows in turn
        monkeypatch.setattr(_spgemm, "WIDE_SHARED_BYTES", 0)
        monkeypatch.setattr(_spgemm, "WIDE_GRID", 3)
    S, T = dense_rows_operands(rng, 300, 20, n_cols=20_000)
    S.data *= 10.0 ** rng.integers(-8, 8, S.nnz)
    S.data[::7] = 0.0
    M = random_csr(rng, S.shape[0], T.shape[1], 0.3)
    A, B = sparsegpu.from_scipy(S, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu")
    assert_bitwise(spgemm(A, B, semiring=semiring), bitwise_reference(S, T, semiring))
    masked = spgemm(A, B, semiring=semiring, mask=sparsegpu.from_scipy(M, backend="gpu"))
    assert_bitwise(masked, bitwise_reference(S, T, semiring, M))
    blocked = spgemm(A, B, semiring=semiring, max_bytes=200_000)
    assert_bitwise(blocked, bitwise_reference(S, T, semiring))


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus], ids=lambda s: getattr(s, "name", "scipy"))
def test_gpu_warp_rows_in_registers_bitwise(rng, semiring, monkeypatch):
    # A 2-D Poisson matrix: every row of A @ A has at most 25 products, the warp's register path;
    # values of many magnitudes, so any other summation order shows. Masked, and every bin at once.
    monkeypatch.setattr(_spgemm, "POISON", True)
    S = sp.csr_array(datasets.poisson2d(70))
    S.data = rng.uniform(0.5, 2.0, S.nnz) * 10.0 ** rng.integers(-8, 8, S.nnz)
    assert ref.upper_bounds(S.indptr, S.indices, S.indptr).max() <= 32
    A = sparsegpu.from_scipy(S, backend="gpu")
    assert_bitwise(spgemm(A, A, semiring=semiring), bitwise_reference(S, S, semiring))
    M = random_csr(rng, S.shape[0], S.shape[1], 0.001)
    masked = spgemm(A, A, semiring=semiring, mask=sparsegpu.from_scipy(M, backend="gpu"))
    assert_bitwise(masked, bitwise_reference(S, S, semiring, M))
    P, T = every_bin_operands(rng)
    P.data *= 10.0 ** rng.integers(-8, 8, P.nnz)
    got = spgemm(sparsegpu.from_scipy(P, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu"), semiring=semiring)
    assert_bitwise(got, bitwise_reference(P, T, semiring))


# --------------------------------------------------------------------------- the fold's rule and fixed costs


def few_column_operands(rng, n_cols, n_rows=40, a_lengths=None):
    """(S, T): T's 300 rows of 20 to 80 entries within ``n_cols`` columns, S's ``n_rows`` rows of
    10 to 60 entries (or ``a_lengths``): rows of thousands of products on at most ``n_cols``
    columns (many per entry), values of many magnitudes so that any other summation order shows
    in the bits."""
    T = rows_of(rng, rng.integers(20, min(80, n_cols), 300).tolist(), n_cols)
    lengths = rng.integers(10, 60, n_rows).tolist() if a_lengths is None else a_lengths
    S = rows_of(rng, lengths, 300)
    S.data *= 10.0 ** rng.integers(-8, 8, S.nnz)
    return S, T


@requires_matrices
def test_hash_rows_of_a_real_few_column_matrix_bitwise_every_rule(rng):
    # ani4_amd_chol's rows of many products per entry: most rounds span every warp, so the rule
    # takes turns; bitwise the reference whichever way it goes.
    S = sp.csr_array(datasets.load_matrix("ani4_amd_chol"))
    S.data = rng.uniform(0.5, 2.0, S.nnz) * 10.0 ** rng.integers(-8, 8, S.nnz)
    a = (S.indptr, S.indices, S.data)
    counts = np.diff(sp.csr_array(structure_product(S, S)).indptr)
    products = ref.upper_bounds(S.indptr, S.indices, S.indptr)
    bins = ref.bin_rows(counts, _spgemm.CAPACITIES)
    rows = [int(r) for b in (1, 2) for r in rng.choice(np.flatnonzero((bins == b) & (products < 4000)), 2)]
    expected = ref.csr_spgemm(a, a, np.add, np.multiply, 0.0, n_cols=S.shape[1])
    turned = 0
    for row in rows:
        _, threads, table = _spgemm.HASH_BINS[bins[row]]
        lo, hi = expected[0][row], expected[0][row + 1]
        for turns in (-1, _spgemm.FOLD_TURNS, NEVER_TURNS):
            keys, values = ref.hash_row(row, a, a, np.add, np.multiply, 0.0, None, False, threads, table, turns)
            assert np.array_equal(keys, expected[1][lo:hi]) and values.tobytes() == expected[2][lo:hi].tobytes()
        _, _, _, cols, _ = ref._walked_products(row, a, a, None, False, threads)
        slots = np.searchsorted(np.unique(cols), cols)
        turned += sum(ref.takes_turns(round_lanes(slots, threads, base), threads, table // 2, _spgemm.FOLD_TURNS)
                      for base in range(0, slots.size, threads))
    assert turned > 0


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus], ids=lambda s: s.name)
def test_few_column_rows_on_emulated_kernels_every_rule(rng, semiring, monkeypatch):
    # Rows of many products per entry in every block bin and wide, through the GPU path's host
    # code, for each side of the fold's rule: the same bits as the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = few_column_operands(rng, 3000, a_lengths=[4, 8, 20, 40, 60, 150])
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    expected = ref.csr_spgemm(a, b, semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64),
                              n_cols=T.shape[1])
    for turns in (-1, 1, NEVER_TURNS):
        monkeypatch.setattr(_spgemm, "FOLD_TURNS", turns)
        kernels = EmulatedKernels(semiring, rng)
        got = _spgemm.device_spgemm(a, b, S.shape[:1] + T.shape[1:], semiring, None, False, 1 << 40, xp=np,
                                    kernels=kernels)
        assert kernels.fold_turns and set(kernels.fold_turns) == {turns}
        numeric = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "true" in k}
        assert numeric >= {"128", "256"} and "spgemm_wide<{V}, {I}, {S}, true>" in kernels.launches
        for g, e in zip(got, expected):
            assert g.astype(e.dtype).tobytes() == e.tobytes()


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("turns", [-1, "default", NEVER_TURNS], ids=["always-turns", "rule", "never-turns"])
@pytest.mark.parametrize("name", ["ego-Facebook", "ani4_amd_chol"])
def test_gpu_fold_rule_on_real_matrices_bitwise(rng, name, turns, monkeypatch):
    # Rounds folded in warp turns or by each slot's lowest warp, forced either way or by the
    # rule: the reference's bits every time, masked, over a semiring, and in row blocks.
    monkeypatch.setattr(_spgemm, "POISON", True)
    if turns != "default":
        monkeypatch.setattr(_spgemm, "FOLD_TURNS", turns)
    S = sp.csr_array(datasets.load_matrix(name))
    S.data = rng.uniform(0.5, 2.0, S.nnz) * 10.0 ** rng.integers(-8, 8, S.nnz)
    A = sparsegpu.from_scipy(S, backend="gpu")
    assert_bitwise(spgemm(A, A), bitwise_reference(S, S))
    M = random_csr(rng, S.shape[0], S.shape[1], 0.05)
    masked = spgemm(A, A, semiring=sr.min_plus, mask=sparsegpu.from_scipy(M, backend="gpu"))
    assert_bitwise(masked, bitwise_reference(S, S, sr.min_plus, M))
    bounds = ref.upper_bounds(S.indptr, S.indices, S.indptr)
    blocked = spgemm(A, A, semiring=sr.plus_times, max_bytes=int(bounds.sum()))
    assert_bitwise(blocked, bitwise_reference(S, S, sr.plus_times))


@pytest.mark.gpu
@pytest.mark.parametrize("turns", [-1, "default", NEVER_TURNS], ids=["always-turns", "rule", "never-turns"])
@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus, sr.max_times],
                         ids=lambda s: getattr(s, "name", "scipy"))
def test_gpu_few_column_rows_bitwise(rng, semiring, turns, monkeypatch):
    # Random rows of thousands of products on 100 to 2600 columns: every block bin and wide
    # rows, most rounds spanning every warp. Masked, complemented and in row blocks.
    monkeypatch.setattr(_spgemm, "POISON", True)
    if turns != "default":
        monkeypatch.setattr(_spgemm, "FOLD_TURNS", turns)
    for n_cols in (100, 600, 1500, 2600):
        S, T = few_column_operands(rng, n_cols)
        S.data[::9] = 0.0
        A, B = sparsegpu.from_scipy(S, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu")
        assert_bitwise(spgemm(A, B, semiring=semiring), bitwise_reference(S, T, semiring))
        M = random_csr(rng, S.shape[0], n_cols, 0.5)
        masked = spgemm(A, B, semiring=semiring, mask=sparsegpu.from_scipy(M, backend="gpu"))
        assert_bitwise(masked, bitwise_reference(S, T, semiring, M))
        parts = semiring or sr.plus_times
        outside = spgemm(A, B, semiring=semiring, mask=sparsegpu.from_scipy(M, backend="gpu"), complement=True)
        want = ref.csr_spgemm((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), parts.add.ufunc,
                              parts.mul.apply, parts.identity(S.dtype), n_cols=n_cols, mask=(M.indptr, M.indices),
                              complement=True, drop_zero_values=semiring is None)
        assert_bitwise(outside, want)
        blocked = spgemm(A, B, semiring=semiring, max_bytes=20_000)
        assert_bitwise(blocked, bitwise_reference(S, T, semiring))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["no-zeros", "zeros", "moved", "emptied-by-mask"])
def test_gpu_fixed_cost_paths_bitwise(rng, case, monkeypatch):
    # The plan's lists reused (or listed again when a row moves), the word of zeros read instead
    # of a scan: three reads, bitwise the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    reads = []
    to_host = _spgemm.to_host
    monkeypatch.setattr(_spgemm, "to_host", lambda x: reads.append(x.size) or to_host(x))
    S, T = small_rows_operands(rng, n_rows=3000, few=case == "moved", a_lengths=4 if case == "zeros" else 7)
    S.data *= 10.0 ** rng.integers(-8, 8, S.nnz)
    M, complement = None, False
    if case == "zeros":
        T = sp.csr_array(sp.vstack([T, T]))
        S = sp.csr_array(sp.hstack([S, -S]))
    if case == "emptied-by-mask":
        keep = np.zeros(S.shape[0], bool)
        keep[::7] = True
        M = sp.csr_array(sp.diags_array(keep.astype(np.float64)) @ structure_product(S, T))
        M.eliminate_zeros()
        complement = True
    A, B = sparsegpu.from_scipy(S, backend="gpu"), sparsegpu.from_scipy(T, backend="gpu")
    C = spgemm(A, B, mask=None if M is None else sparsegpu.from_scipy(M, backend="gpu"), complement=complement)
    parts = sr.plus_times
    pattern = None if M is None else (M.indptr, M.indices)
    if M is not None:
        M.sort_indices()
        pattern = (M.indptr, M.indices)
    want = ref.csr_spgemm((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), parts.add.ufunc,
                          parts.mul.apply, 0.0, n_cols=T.shape[1], mask=pattern, complement=complement,
                          drop_zero_values=True)
    assert_bitwise(C, want)
    assert reads == [_spgemm.STATS, _spgemm.STATS, 1]
