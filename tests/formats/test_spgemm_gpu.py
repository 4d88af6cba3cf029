"""The CUDA SpGEMM kernels (kernels/spgemm.cu) on the GPU, poisoned outputs throughout: against
the CPU reference for every semiring and dtype, and bitwise the reference on wide rows, warp
rows, few-column rows under each side of the fold's rule, and the fixed-cost paths."""

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
from tests.conftest import requires_matrices, to_numpy
from tests.formats.spgemm_cases import (
    DTYPE_IDS,
    DTYPES,
    IDS,
    NEVER_TURNS,
    PREDEFINED,
    assert_bitwise,
    assert_same_pattern_and_values,
    bitwise_reference,
    dense_rows_operands,
    every_bin_operands,
    few_column_operands,
    random_csr,
    scipy_product,
    small_rows_operands,
    structure_product,
)

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


# --------------------------------------------------------------------------- wide rows on the GPU


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


# --------------------------------------------------------------------------- the fold's rule and fixed costs on the GPU


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
