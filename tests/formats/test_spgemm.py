"""Sparse times sparse (sparsegpu/formats/_spgemm.py) through the public call: SciPy's pattern
and values for the arithmetic product, a dense oracle for semirings and masks, row blocks,
determinism, bad input and real matrices. Tests taking ``backend`` run on the GPU too where
there is one."""

from __future__ import annotations

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
from tests.formats.spgemm_cases import (
    DTYPE_IDS,
    DTYPES,
    IDS,
    PREDEFINED,
    SMALL_PRODUCTS,
    assert_same_pattern_and_values,
    check_against_oracle,
    dense_oracle,
    every_bin_operands,
    random_csr,
    real_square_product,
    scipy_product,
    structure_product,
)

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


@pytest.mark.gpu
def test_int64_operands_give_int64_indices():
    S = datasets.poisson2d(30)
    A = sparsegpu.from_scipy(S, backend="gpu", index_dtype=np.int64)
    C = spgemm(A, A)
    assert C.index_dtype == np.int64 and C.indptr.dtype == np.int64
    assert_same_pattern_and_values(C, scipy_product(S, S), np.float64)


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


def test_one_dimensional_sparse_operand_is_refused_by_name(rng):
    A = sparsegpu.from_scipy(sp.random_array((4, 3), density=0.5, rng=rng, format="csr"), backend="cpu")
    with pytest.raises(ValueError, match="B must be a 2-D sparse matrix"):
        A @ sp.coo_array(rng.random(3))
    with pytest.raises(ValueError, match="A must be a 2-D sparse matrix"):
        sparsegpu.spgemm(sp.coo_array(rng.random(4)), A)


# --------------------------------------------------------------------------- real matrices


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
