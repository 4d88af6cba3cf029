"""Column-major X staged through a row-major scratch (sparsegpu/formats/_spmm_device.py): the
locality statistic and the rule (CPU), the transpose kernel against its reference, staged
products against SciPy, the references and the row-major path bit for bit (gpu)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.formats import _spmm_device as device
from sparsegpu.reference import spmm as ref
from tests.conftest import REAL_MATRICES, poisoned, requires_matrices
from tests.formats.helpers import random_values, real
from tests.formats.test_spmm import (
    KS,
    assert_close,
    check_products,
    random_sparse,
    reference_product,
)

STAGED_KS = [1, 3, 4, 16, 33, 64, 100]
STAGED_DTYPES = [np.float32, np.float64, np.complex128]
POWER_LAW = [name for name in ("as-caida", "bio-dmela", "cit-HepPh", "tech-WHOIS") if name in REAL_MATRICES]


def random_graph(rng, n, degree, dtype=np.float64):
    """An n x n graph with about ``degree`` entries per row at uniformly random columns."""
    S = sp.random_array((n, n), density=degree / n, rng=rng, format="csr")
    S.data = random_values(rng, S.nnz, dtype)
    return S


def f_view(rng, n, k, dtype):
    """An n x k column-major view one column into a wider F-order array (an offset base)."""
    return np.asfortranarray(random_values(rng, (n, k + 1), dtype))[:, 1:]


def scatter_of(S):
    S = sp.csr_array(S)
    S.sort_indices()
    return device.csr_scatter(S.indptr, S.indices, np)


# --------------------------------------------------------------------------- the rule (CPU)


def test_statistic_counts_entries_far_from_both_neighbours():
    # Row 0: columns 0 (no neighbour), 40 (far from 0); row 1: 1 (near 0 across), 50 (near 40
    # across), 80 (far from 50; nothing across).
    S = sp.csr_array((np.ones(5), np.array([0, 40, 1, 50, 80]), np.array([0, 2, 5])), shape=(2, 100))
    assert device.csr_scatter(S.indptr, S.indices, np) == device.Scatter(5, 3)
    A = sparsegpu.from_scipy(S, format="ell", backend="cpu", max_fill=None)
    assert device.padded_scatter(A.indices, None, A.shape[0], np) == device.Scatter(5, 3)


def test_banded_matrix_does_not_stage_and_random_graph_does(rng):
    n = 20000
    banded = sp.diags_array([np.ones(n - abs(d)) for d in range(-3, 4)], offsets=range(-3, 4), format="csr")
    graph = random_graph(rng, n, 12)
    for S, want in ((banded, False), (datasets.poisson2d(120), False), (datasets.stencil27(24), False),
                    (graph, True), (datasets.rmat(14), True)):
        scatter = scatter_of(S)
        n_cols, n_rows = S.shape[1], S.shape[0]
        for itemsize in (4, 8, 16):
            assert device.stages_for(scatter, n_cols, n_rows, 16, itemsize) is want, (S.shape, scatter, itemsize)
        assert not device.stages_for(scatter, n_cols, n_rows, device.STAGE_MIN_K - 1, 8)
    assert scatter_of(banded).scattered == 1  # its first entry: no neighbour
    assert scatter_of(graph).scattered > 0.9 * graph.nnz


def test_padded_statistic_matches_the_csr_one_for_ell(rng):
    S = random_graph(rng, 3000, 6)
    A = sparsegpu.from_scipy(S, format="ell", backend="cpu", max_fill=None)
    assert device.padded_scatter(A.indices, None, A.shape[0], np) == scatter_of(S)
    B = sparsegpu.from_scipy(S, format="sell", backend="cpu", split=0, hot=0)
    sell = device.padded_scatter(B.indices, B.slice_ptr, B.C, np)
    assert sell.entries == S.nnz and 0.9 * S.nnz < sell.scattered <= S.nnz


def test_statistic_passes_cover_every_entry(rng, monkeypatch):
    S = random_graph(rng, 2000, 5)
    whole = scatter_of(S)
    monkeypatch.setattr(device, "STATISTIC_CHUNK", 777)
    assert scatter_of(S) == whole
    assert device.csr_scatter(np.zeros(4, np.int32), np.zeros(0, np.int32), np) == device.Scatter()


@pytest.mark.parametrize("dtype", STAGED_DTYPES)
def test_transpose_reference(rng, dtype):
    n, k = 45, 7
    X = f_view(rng, n, k, dtype)
    flat_x = X.base.reshape(-1, order="F")[n:]  # X's columns, one after another
    rows = np.full(n * k, np.nan, dtype)
    ref.dense_transpose(flat_x, 1, n, rows, k, 1, n, k)  # r walks X's rows, c its columns
    assert np.array_equal(rows.reshape(n, k), X)
    Y0 = np.asfortranarray(random_values(rng, (n, k), dtype))
    flat_y = Y0.reshape(-1, order="F").copy()
    ref.dense_transpose(rows, 1, k, flat_y, n, 1, k, n, alpha=2, beta=-0.5)  # r walks columns, c rows
    assert np.array_equal(flat_y.reshape(n, k, order="F"), 2 * X - 0.5 * Y0)


# --------------------------------------------------------------------------- GPU


def spy_staging(monkeypatch):
    """A list that grows by one each time a product stages."""
    calls = []
    staged = device.staged_spmm

    def spy(*args):
        calls.append(1)
        return staged(*args)

    monkeypatch.setattr(device, "staged_spmm", spy)
    return calls


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 1), (33, 5), (100, 64), (1000, 3), (31, 100), (70, 33)])
def test_transpose_kernel_against_reference(rng, dtype, shape):
    import cupy

    n, k = shape
    X = f_view(rng, n, k, dtype)
    rows = poisoned((n, k), dtype, cupy)
    device.copy_layout(cupy.asarray(X.base)[:, 1:], rows, dtype(1), dtype(0))  # F view -> C
    assert np.array_equal(rows.get(), X)
    Y0 = np.asfortranarray(random_values(rng, (n, k), dtype))
    Y = cupy.asarray(Y0)
    device.copy_layout(rows, Y, dtype(2), dtype(-0.5))  # C -> F, alpha and beta applied
    want = Y0.reshape(-1, order="F").copy()
    ref.dense_transpose(np.ascontiguousarray(X).reshape(-1), 1, k, want, n, 1, k, n, alpha=2, beta=-0.5)
    assert Y.flags.f_contiguous and np.array_equal(Y.get(), want.reshape(n, k, order="F"))
    assert np.array_equal(Y.get(), 2 * X - 0.5 * Y0)


def check_staged(A, S, rng, dtype, k, calls, want_staged, transpose=False):
    """A @ X (or A.T @ X) for an F-order view X with an offset: F-order result equal bit for bit
    to the row-major path's, close to SciPy and the reference; spmm into poisoned and offset F
    views of Y, and alpha/beta reading a given F-order Y; ``calls`` grows when it stages."""
    import cupy

    Sd = sp.csr_array(S.T if transpose else S).astype(dtype)
    m, n = Sd.shape
    op = A.T if transpose else A
    host = f_view(rng, n, k, dtype)
    X = cupy.asarray(host.base)[:, 1:]
    assert X.strides[0] == X.itemsize and X.data.ptr != cupy.asarray(host.base).data.ptr
    before = len(calls)
    out = op @ X
    assert (len(calls) > before) is (want_staged and k >= device.STAGE_MIN_K)
    assert out.flags.f_contiguous and out.dtype == dtype
    assert_close(out, Sd @ host, Sd, host, dtype, f"staged k={k}")
    assert_close(out, reference_product(A, host, transpose), Sd, host, dtype, f"reference k={k}")
    if len(calls) > before:  # the staged product is the row-major one
        assert np.array_equal(out.get(), (op @ cupy.ascontiguousarray(X)).get())
    Ybig = poisoned((m, k + 2), dtype, cupy)
    Ybig = cupy.asfortranarray(Ybig)
    Y = Ybig[:, 1:-1]
    assert op.spmm(X, Y) is Y
    assert np.array_equal(Y.get(), out.get())
    assert np.isnan(Ybig[:, 0].get()).all() and np.isnan(Ybig[:, -1].get()).all()
    Y0 = np.asfortranarray(random_values(rng, (m, k), dtype))
    Y = cupy.asarray(Y0)
    op.spmm(X, Y, alpha=2, beta=-0.5)
    assert Y.flags.f_contiguous
    assert_close(Y, 2 * (Sd @ host) - 0.5 * Y0, Sd, host, dtype, f"alpha/beta k={k}")
    Yc = cupy.asarray(np.ascontiguousarray(Y0))
    op.spmm(cupy.ascontiguousarray(X), Yc, alpha=2, beta=-0.5)
    if len(calls) > before:
        assert np.array_equal(Y.get(), Yc.get())
    Yrow = poisoned((m, k), dtype, cupy)  # F-order X, C-order Y: written directly
    op.spmm(X, Yrow)
    assert_close(Yrow, Sd @ host, Sd, host, dtype, f"C-order Y k={k}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", STAGED_DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_staged_products_on_random_graphs(rng, monkeypatch, dtype, index_dtype):
    calls = spy_staging(monkeypatch)
    S = random_graph(rng, 3000, 14, dtype)
    for fmt, params in (("csr", {}), ("sell", {"split": 0, "hot": 0}), ("coo", {})):
        A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", index_dtype=index_dtype, **params)
        for k in STAGED_KS:
            check_staged(A, S, rng, dtype, k, calls, True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", STAGED_DTYPES)
def test_staged_rectangular_and_transposed(rng, monkeypatch, dtype):
    calls = spy_staging(monkeypatch)
    S = random_sparse(rng, 2500, 1800, 12 / 1800, dtype)
    for fmt in ("csr", "csc"):
        A = sparsegpu.from_scipy(S, format=fmt, backend="gpu")
        for k in (4, 33, 100):
            check_staged(A, S, rng, dtype, k, calls, True)
            check_staged(A, S, rng, dtype, k, calls, True, transpose=True)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [16, 64])
def test_power_law_generators_stage_and_stencils_do_not(rng, monkeypatch, k):
    calls = spy_staging(monkeypatch)
    for S, staged in ((datasets.rmat(13), True), (datasets.powerlaw(20000, 10, 10, 3000), True),
                      (datasets.poisson2d(100), False), (datasets.stencil27(20), False)):
        A = sparsegpu.from_scipy(S, backend="gpu")
        check_staged(A, S, rng, np.float64, k, calls, staged)


@pytest.mark.gpu
@requires_matrices
@pytest.mark.skipif(not POWER_LAW, reason="no real power-law matrix found")
@pytest.mark.parametrize("name", POWER_LAW)
def test_staged_real_power_law_matrices(name, rng, monkeypatch):
    calls = spy_staging(monkeypatch)
    S = real(name)
    A = sparsegpu.from_scipy(S, backend="gpu")
    staged = device.stages_for(scatter_of(S), S.shape[1], S.shape[0], 16, 8)
    for k in (4, 16, 33):
        check_staged(A, S, rng, np.float64, k, calls, staged)


@pytest.mark.gpu
def test_statistic_is_computed_once_and_scratch_shortage_falls_back(rng, monkeypatch):
    import cupy

    calls = spy_staging(monkeypatch)
    S = random_graph(rng, 2000, 10)
    A = sparsegpu.from_scipy(S, backend="gpu")
    X = cupy.asfortranarray(cupy.asarray(rng.standard_normal((2000, 8))))
    A @ X
    assert A._cache["spmm_scatter"] == scatter_of(S) and calls == [1]
    computed = []
    monkeypatch.setattr(device, "csr_scatter", lambda *args: computed.append(1))
    A @ X
    assert computed == [] and calls == [1, 1]

    def no_room(nbytes, what, backend):
        raise ValueError("no room")

    monkeypatch.setattr(device, "_validate", SimpleNamespace(ensure_fits=no_room))
    out = A @ X
    assert calls == [1, 1] and out.flags.f_contiguous
    assert_close(out, S @ X.get(), S, X, np.float64, "unstaged for lack of room")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_column_kernels_still_run_without_staging(rng, monkeypatch, dtype):
    """Random matrices now stage; the column-major kernels (kept for stencils) are checked here
    at every k with staging off."""
    monkeypatch.setattr(device, "STAGE_MIN_K", 1 << 30)
    S = random_sparse(rng, 157, 131, 0.06, dtype)
    A = sparsegpu.from_scipy(S, backend="gpu")
    for k in KS:
        check_products(A, S, rng, dtype, k, "F")
