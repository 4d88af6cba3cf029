"""Sparse times dense: ``A @ X``, ``A.T @ X`` and ``A.spmm(X, Y, alpha, beta)`` for 2-D X on
every format, against SciPy and the NumPy references (both backends), the CUDA kernels against
both and run to run bitwise (gpu)."""

from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.formats import _spmm_device
from sparsegpu.reference import spmm as ref
from tests.conftest import REAL_MATRICES, poisoned, requires_matrices, to_numpy, xp_for
from tests.formats.helpers import TOLERANCE, random_values, real

FORMATS = [("csr", {}), ("csc", {}), ("coo", {}), ("ell", {"max_fill": None}), ("hyb", {}), ("jds", {}),
           ("sell", {}), ("sell", {"C": 4, "sigma": 1, "split": 0, "hot": 0}), ("sell", {"C": 8, "split": 2, "hot": 2})]
FORMAT_IDS = [f"{f}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for f, p in FORMATS]
VALUE_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
#: Column counts reaching every kernel shape: one lane per row up to 32 lanes of 4 chunks, wider
#: panels, odd k (no vector loads), k past a column tile.
KS = [1, 2, 3, 4, 5, 8, 16, 17, 32, 63, 64, 65, 128, 200, 257, 300]


def random_sparse(rng, m, n, density, dtype=np.float64):
    S = sp.random_array((m, n), density=density, rng=rng, format="csr")
    S.data = random_values(rng, S.nnz, dtype)
    return S


def dense_block(rng, n, k, dtype, order="C", xp=np):
    return xp.asarray(np.asarray(random_values(rng, (n, k), dtype), order=order))


def assert_close(got, want, S, X, dtype, what=""):
    """|got - want| within tol * (|S| |X| + |want|) elementwise: the scale of each sum's terms."""
    got, want, X = to_numpy(got), np.asarray(want), to_numpy(X)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    scale = abs(S).astype(np.float64) @ np.abs(X.astype(wide)) if S.shape[1] else np.zeros(want.shape)
    bound = TOLERANCE[np.dtype(dtype).type] * (scale + np.abs(want)) + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    if err.size:
        worst = np.unravel_index(int(np.argmax(err - bound)), err.shape)
        assert np.all(err <= bound), f"{what}: entry {worst}: got {got[worst]}, want {want[worst]}"


def reference_product(A, X, transpose=False):
    """op(A) X by the reference over A's own layout for ELL and direct SELL (the layouts with
    kernels of their own), else the CSR reference over A's CSR (host arrays)."""
    dtype = np.result_type(A.dtype, X.dtype)
    host = A.asbackend("cpu")
    if not transpose and (A.format == "ell" or (A.format == "sell" and A.mode == "direct")):
        out = np.full((A.shape[0], X.shape[1]), np.nan, dtype)
        X = to_numpy(X).astype(dtype)
        if A.format == "ell":
            return ref.ell_spmm(host.indices, host.data.astype(dtype), host.width, X, out)
        return ref.sell_spmm(host.slice_ptr, host.indices, host.data.astype(dtype), host.perm, host.C, X, out)
    csr = host.to_csr()
    S = csr.to_scipy()
    if transpose:
        S = sp.csr_array(S.T)
    out = np.full((S.shape[0], X.shape[1]), np.nan, dtype)
    return ref.csr_spmm(S.indptr, S.indices, S.data.astype(dtype), to_numpy(X).astype(dtype), out)


def check_products(A, S, rng, dtype, k, order="C"):
    """A @ X, A.T @ Z and the alpha/beta forms against SciPy and the reference; on the GPU,
    also bitwise reproducible."""
    m, n = S.shape
    xp = xp_for(A.backend)
    Sd = S.astype(dtype)
    X = dense_block(rng, n, k, dtype, order)
    Z = dense_block(rng, m, k, dtype, order)
    out = A @ xp.asarray(X)
    assert type(to_numpy(out)) is np.ndarray and out.dtype == dtype
    if not (X.flags.c_contiguous and X.flags.f_contiguous):  # X's order is the result's
        assert (out.flags.f_contiguous if order == "F" else out.flags.c_contiguous)
    assert_close(out, Sd @ X, Sd, X, dtype, f"A @ X, k={k}, {order}")
    assert_close(out, reference_product(A, X), Sd, X, dtype, f"kernel vs reference, k={k}, {order}")
    assert_close(A.T @ xp.asarray(Z), Sd.T @ Z, Sd.T, Z, dtype, f"A.T @ Z, k={k}, {order}")
    Y0 = dense_block(rng, m, k, dtype, order)
    Y = xp.asarray(Y0.copy(order="A"))
    assert A.spmm(xp.asarray(X), Y, alpha=2, beta=-0.5) is Y
    assert_close(Y, 2 * (Sd @ X) - 0.5 * Y0, Sd, X, dtype, f"alpha/beta, k={k}, {order}")
    Y = poisoned((m, k), dtype, xp)  # beta == 0: the NaNs in Y are never read
    A.spmm(xp.asarray(X), Y, alpha=1.5)
    assert_close(Y, 1.5 * (Sd @ X), Sd, X, dtype, f"beta=0 over NaN, k={k}, {order}")
    if A.backend == "gpu":
        first = to_numpy(A @ xp.asarray(X))
        for _ in range(2):
            assert np.array_equal(to_numpy(A @ xp.asarray(X)), first, equal_nan=True), "not reproducible"


# --------------------------------------------------------------------------- reference


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_references_match_scipy(rng, dtype, order):
    S = random_sparse(rng, 61, 47, 0.1, dtype)
    X = dense_block(rng, 47, 6, dtype, order)
    out = np.full((61, 6), np.nan, dtype, order=order)
    ref.csr_spmm(S.indptr, S.indices, S.data, X, out)
    assert_close(out, S @ X, S, X, dtype, "csr reference")
    A = sparsegpu.from_scipy(S, format="ell", backend="cpu", max_fill=None)
    out = np.full((61, 6), np.nan, dtype)
    ref.ell_spmm(A.indices, A.data, A.width, X, out)
    assert_close(out, S @ X, S, X, dtype, "ell reference")
    B = sparsegpu.from_scipy(S, format="sell", backend="cpu", C=8, sigma=16, split=0, hot=0)
    Y0 = dense_block(rng, 61, 6, dtype)
    out = Y0.copy()
    ref.sell_spmm(B.slice_ptr, B.indices, B.data, B.perm, B.C, X, out, alpha=3, beta=2)
    assert_close(out, 3 * (S @ X) + 2 * Y0, S, X, dtype, "sell reference")


def test_sell_reference_refuses_hot_columns():
    with pytest.raises(ValueError, match="hot columns"):
        ref.sell_spmm(np.array([0, 2]), np.array([-2, -1]), np.ones(2), np.array([0, 1]), 2, np.ones((3, 1)),
                      np.empty((2, 1)))


# --------------------------------------------------------------------------- every format, both backends


@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("k", [1, 4, 17, 64])
def test_formats_and_orders(rng, backend, fmt, params, order, k):
    S = random_sparse(rng, 83, 71, 0.08)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **params)
    check_products(A, S, rng, np.float64, k, order)


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_dtypes_and_int64_indices(rng, backend, dtype, index_dtype):
    S = random_sparse(rng, 120, 90, 0.05, dtype)
    A = sparsegpu.from_scipy(S, backend=backend, index_dtype=index_dtype)
    assert A.index_dtype == index_dtype
    for order in ("C", "F"):
        check_products(A, S, rng, dtype, 8, order)


EDGE_CASES = {
    "0x0": lambda rng: sp.csr_array((0, 0)),
    "no nonzeros": lambda rng: sp.csr_array((7, 5)),
    "one row": lambda rng: random_sparse(rng, 1, 300, 0.3),
    "one column": lambda rng: random_sparse(rng, 300, 1, 0.3),
    "wide": lambda rng: random_sparse(rng, 40, 3000, 0.01),
    "tall": lambda rng: random_sparse(rng, 3000, 40, 0.02),
    "empty rows": lambda rng: sp.csr_array(random_sparse(rng, 500, 400, 0.01).multiply(rng.random((500, 1)) < 0.5)),
    "one long row": lambda rng: sp.csr_array(sp.vstack([random_sparse(rng, 50, 5000, 0.001),
                                                        random_sparse(rng, 1, 5000, 0.9)])),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
@pytest.mark.parametrize("fmt", ["csr", "csc", "ell", "sell"])
@pytest.mark.parametrize("k", [0, 1, 5])
def test_edge_cases(rng, backend, case, fmt, k):
    S = EDGE_CASES[case](rng)
    params = {"max_fill": None} if fmt == "ell" else {}
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **params)
    for order in ("C", "F"):
        check_products(A, S, rng, np.float64, k, order)


def test_zero_columns_of_x_give_an_empty_result(backend):
    A = sparsegpu.from_scipy(sp.eye(4, format="csr"), backend=backend)
    out = A @ np.ones((4, 0))
    assert isinstance(out, np.ndarray) and out.shape == (4, 0)


# --------------------------------------------------------------------------- semantics


def test_numpy_in_numpy_out_and_list_input(backend, rng):
    S = random_sparse(rng, 30, 20, 0.2)
    A = sparsegpu.from_scipy(S, backend=backend)
    X = rng.standard_normal((20, 3))
    out = A @ X.tolist()
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, S @ X, rtol=1e-12, atol=1e-12)


def test_one_dimensional_x_stays_spmv(backend, rng):
    S = random_sparse(rng, 30, 20, 0.2)
    A = sparsegpu.from_scipy(S, backend=backend)
    x = rng.standard_normal(20)
    out = A @ x
    assert out.shape == (30,)
    np.testing.assert_allclose(out, S @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="2-D"):
        A.spmm(x)
    with pytest.raises(ValueError, match="1-D"):  # spmv takes vectors only; @ takes both
        A.spmv(np.ones((20, 1)))
    with pytest.raises(ValueError, match="1-D"):
        A.T.spmv(np.ones((30, 1)))


@pytest.mark.parametrize("x_dtype,want", [(np.float32, np.float64), (np.int64, np.float64), (np.bool_, np.float64),
                                          (np.complex64, np.complex128)])
def test_mixed_dtypes_promote_as_scipy(rng, backend, x_dtype, want):
    S = random_sparse(rng, 25, 15, 0.2)
    A = sparsegpu.from_scipy(S, backend=backend)
    X = (rng.standard_normal((15, 4)) * 3).astype(x_dtype)
    expected = S @ X
    out = A @ X
    assert out.dtype == want == expected.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_narrow_matrix_promotes_to_x(rng, backend):
    S = random_sparse(rng, 25, 15, 0.2, np.float32)
    A = sparsegpu.from_scipy(S, backend=backend)
    X = rng.standard_normal((15, 4))
    out = A @ X
    assert out.dtype == np.float64 == (S @ X).dtype
    np.testing.assert_allclose(out, S.astype(np.float64) @ X, rtol=1e-12, atol=1e-12)
    assert A.dtype == np.float32  # the matrix is unchanged


def test_strided_views_are_read_and_written_in_place(rng, backend):
    S = random_sparse(rng, 40, 30, 0.15)
    A = sparsegpu.from_scipy(S, backend=backend)
    xp = xp_for(backend)
    big = xp.asarray(rng.standard_normal((60, 20)))
    X = big[::2, 1::3]  # neither C nor F contiguous
    Ybig = xp.zeros((80, 40))
    Y = Ybig[::2, ::6]
    assert Y.shape == (40, 7)
    A.spmm(X, Y)
    np.testing.assert_allclose(to_numpy(Y), S @ to_numpy(X), rtol=1e-12, atol=1e-12)
    assert np.all(to_numpy(Ybig)[1::2] == 0)
    reversed_x = big[:30][::-1, ::-1]
    np.testing.assert_allclose(to_numpy(A @ reversed_x), S @ to_numpy(reversed_x), rtol=1e-12, atol=1e-12)


def test_y_order_is_kept(rng, backend):
    S = random_sparse(rng, 40, 30, 0.15)
    A = sparsegpu.from_scipy(S, backend=backend)
    xp = xp_for(backend)
    X = xp.asarray(rng.standard_normal((30, 6)))
    Y = xp.asarray(np.full((40, 6), np.nan, order="F"))
    assert A.spmm(X, Y) is Y and Y.flags.f_contiguous
    np.testing.assert_allclose(to_numpy(Y), S @ to_numpy(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", ["csr", "csc", "sell"])
def test_transposed_spmm_with_alpha_and_beta(rng, backend, fmt):
    S = random_sparse(rng, 50, 35, 0.12)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    xp = xp_for(backend)
    X = rng.standard_normal((50, 5))
    Y0 = rng.standard_normal((35, 5))
    Y = xp.asarray(np.asfortranarray(Y0))
    assert A.T.spmm(xp.asarray(X), Y, alpha=2.0, beta=-0.5) is Y and Y.flags.f_contiguous
    np.testing.assert_allclose(to_numpy(Y), 2 * (S.T @ X) - 0.5 * Y0, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="beta"):
        A.T.spmm(xp.asarray(X), beta=1.0)


def test_sparse_operands_go_to_spgemm(backend, rng):
    S = random_sparse(rng, 5, 5, 0.5)
    A = sparsegpu.from_scipy(S, backend=backend)
    for got, expected in ((A @ S, S @ S), (A @ A, S @ S), (A.T @ A, S.T @ S), (S @ A, S @ S)):
        assert isinstance(got, sparsegpu.CSR) and got.backend == backend
        np.testing.assert_allclose(got.to_scipy().toarray(), expected.toarray(), rtol=1e-12)


def test_bad_operands(rng, backend):
    A = sparsegpu.from_scipy(random_sparse(rng, 6, 4, 0.5), backend=backend)
    xp = xp_for(backend)
    X = xp.ones((4, 3))
    with pytest.raises(ValueError, match=r"6x4.*5x3"):
        A @ xp.ones((5, 3))
    with pytest.raises(ValueError, match="2-D"):
        A.spmm(xp.ones((4, 3, 1)))
    with pytest.raises(TypeError, match="not numeric"):
        A @ np.array([["a"] * 3] * 4)
    with pytest.raises(TypeError, match="float128|longdouble|computes in"):
        A @ np.ones((4, 3), dtype=np.longdouble)
    with pytest.raises(ValueError, match="Y must be 6x3"):
        A.spmm(X, xp.empty((6, 2)))
    with pytest.raises(TypeError, match="Y has dtype float32"):
        A.spmm(X, xp.empty((6, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="Y must be a NumPy or CuPy array"):
        A.spmm(X, [[0.0] * 3] * 6)
    with pytest.raises(ValueError, match="beta is nonzero"):
        A.spmm(X, beta=1)
    with pytest.raises(TypeError, match="complex"):
        A.spmm(X, alpha=1j)
    square = sparsegpu.from_scipy(sp.eye(4, format="csr"), backend=backend)
    both = xp.ones((4, 4))
    with pytest.raises(ValueError, match="overlap"):
        square.spmm(both, both)
    frozen = np.empty((6, 3))
    frozen.flags.writeable = False
    if backend == "cpu":
        with pytest.raises(ValueError, match="read-only"):
            A.spmm(np.ones((4, 3)), frozen)


def test_cupy_x_with_a_cpu_matrix_is_refused(rng):
    cupy = pytest.importorskip("cupy")
    A = sparsegpu.from_scipy(random_sparse(rng, 6, 4, 0.5), backend="cpu")
    try:
        X = cupy.ones((4, 2))
    except Exception:  # CuPy imports but no device answers
        pytest.skip("no CUDA device")
    with pytest.raises(TypeError, match="CPU backend"):
        A @ X


def test_memory_check_comes_before_allocation(backend):
    A = sparsegpu.from_scipy(sp.csr_array((1 << 20, 4)), backend=backend)
    with pytest.raises(ValueError, match="product needs"):  # 8 TiB of result
        A @ np.ones((4, 1 << 20))


# --------------------------------------------------------------------------- real matrices


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices(name, backend, rng):
    S = real(name)
    dtype = np.complex128 if S.dtype.kind == "c" else np.float64
    for fmt in ("csr", "sell"):
        A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
        for k, order in ((4, "C"), (16, "F")):
            check_products(A, S, rng, dtype, k, order)


# --------------------------------------------------------------------------- GPU kernels


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_every_kernel_shape(rng, dtype, index_dtype, order):
    S = random_sparse(rng, 157, 131, 0.06, dtype)
    A = sparsegpu.from_scipy(S, backend="gpu", index_dtype=index_dtype)
    for k in KS:
        check_products(A, S, rng, dtype, k, order)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
def test_gpu_kernels_match_reference_bitwise_run_to_run(rng, fmt, params):
    import cupy

    S = random_sparse(rng, 700, 500, 0.02)
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", **params)
    for k, order in ((4, "C"), (64, "C"), (6, "F"), (33, "F")):
        X = cupy.asarray(dense_block(rng, 500, k, np.float64, order))
        Y = poisoned((700, k), np.float64, cupy)
        A.spmm(X, Y)
        first = Y.get()
        assert not np.isnan(first).any()
        assert_close(first, reference_product(A, X), S, X, np.float64, f"{fmt} k={k} {order}")
        for _ in range(3):
            Y = poisoned((700, k), np.float64, cupy)
            A.spmm(X, Y)
            assert np.array_equal(Y.get(), first)


@pytest.mark.gpu
def test_unaligned_and_odd_layouts_fall_back_to_scalar_loads(rng):
    import cupy

    S = random_sparse(rng, 90, 70, 0.1)
    A = sparsegpu.from_scipy(S, backend="gpu")
    flat = cupy.asarray(rng.standard_normal(70 * 8 + 1))
    X = flat[1:].reshape(70, 8)  # 8-byte aligned, not 16
    assert X.data.ptr % 16 != 0
    assert not _spmm_device.can_vectorise(X, cupy.empty((90, 8)))
    assert_close(A @ X, S @ X.get(), S, X, np.float64, "unaligned X")
    Y = cupy.asarray(np.full((90, 9), np.nan))[:, 1:]
    A.spmm(X, Y)
    assert_close(Y, S @ X.get(), S, X, np.float64, "unaligned Y")


def test_kernel_shapes_cover_k():
    for itemsize in (4, 8, 16):
        for vector in (True, False):
            for k in KS:
                lanes, tiles, width = _spmm_device.row_shape(k, itemsize, vector)
                assert (lanes, tiles) in _spmm_device.ROW_SHAPES
                assert lanes * tiles * width >= min(k, 32 * 4 * width)
                assert lanes == 1 or (lanes // 2) * width < k
    assert [_spmm_device.lanes_per_row(mean) for mean in (0, 5, 7.5, 15.5, 100, 1000)] == [1, 1, 2, 4, 16, 32]


def test_long_rows_are_cut_into_segments_in_order(rng):
    lengths = rng.integers(0, 40, 300)
    lengths[rng.choice(300, 5, replace=False)] = rng.integers(1000, 3000, 5)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    split = _spmm_device.long_rows(indptr, 256, np)
    long = np.flatnonzero(lengths > 256)
    assert split.n_long == long.size and np.array_equal(split.rows, long)
    for slot, row in enumerate(long):
        segments = range(split.seg_first[slot], split.seg_first[slot + 1])
        covered = np.concatenate([np.arange(split.begins[s], split.ends[s]) for s in segments])
        assert np.array_equal(covered, np.arange(indptr[row], indptr[row + 1]))  # in order, no gaps
        assert all(0 < split.ends[s] - split.begins[s] <= 256 for s in segments)
    assert split.n_segments == split.seg_first[-1] == sum(-(-lengths[long] // 256))
    assert _spmm_device.long_rows(np.array([0, 3, 5], np.int64), 256, np).n_long == 0


# --------------------------------------------------------------------------- benchmark and asv


def test_bench_checks_then_times(rng):
    from sparsegpu.bench import spmm as bench

    S = random_sparse(rng, 300, 200, 0.05)
    rows = bench.run_spmm({"random": S}, ks=(3, 8), orders=("C", "F"), formats=("csr", "ell"), backend="cpu",
                          repeat=2)
    assert [(r["k"], r["order"]) for r in rows] == [(3, "C"), (3, "F"), (8, "C"), (8, "F")]
    for row in rows:
        assert row["baseline"] == "scipy" and row["bytes"] == bench.spmm_bytes(300, 200, S.nnz, row["k"])
        for impl in ("csr", "scipy"):
            assert row["outcomes"][impl]["status"] == "ok" and row["outcomes"][impl]["gbps"] > 0
        assert row["outcomes"]["ell"]["status"] in ("ok", "refused")
        assert row["speedup"] > 0
    wrong = S.toarray() @ np.ones((200, 2))
    wrong[5, 1] += 1.0
    assert "entry (5, 1)" in bench.check_block(wrong, S, np.ones((200, 2)), S @ np.ones((200, 2)), np.float64)
    assert bench.check_block(S @ np.ones((200, 2)), S, np.ones((200, 2)), S @ np.ones((200, 2)), np.float64) is None
    with pytest.raises(ValueError, match="orders"):
        bench.run_spmm({"random": S}, orders=("K",), backend="cpu")
    assert "random" in bench.format_results(rows)


def test_asv_spmm_suite_skips_without_a_gpu(monkeypatch):
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "asv_benchmarks"))
    import benchmarks.spmm as suite

    assert suite.SpMM.unit == "GB/s" and suite.SpMM.params[0][-1] == "cupyx"
    if not sparsegpu.gpu_available():
        with pytest.raises(NotImplementedError):
            suite.SpMM().setup("csr", 4, "C", "poisson2d")


@pytest.mark.gpu
def test_bench_on_gpu_small():
    from sparsegpu.bench import spmm as bench

    rows = bench.run_spmm({"poisson": datasets.poisson2d(300), "rmat": datasets.rmat(14)}, ks=(4, 16),
                          formats=("csr", "sell"), backend="gpu", repeat=3)
    for row in rows:
        assert row["outcomes"]["csr"]["status"] == "ok" and row["outcomes"]["cupyx"]["status"] == "ok"
        assert row["copy_gbps"] > 100


@pytest.mark.parametrize("fmt", ["csr", "coo", "csc", "ell", "hyb", "jds", "sell"])
def test_complex_products_keep_infinite_parts_as_scipy_does(rng, backend, fmt):
    """With alpha one, a product is the plain sum SciPy forms: a complex one times inf + nan*j
    would turn the infinite part to NaN, so neither the kernels nor the references multiply by
    it (kernels/common.cuh sg::scaled)."""
    n = int(rng.integers(3, 40))
    S = sp.csr_array(sp.random_array((n, n), density=0.3, rng=rng, format="csr") + sp.eye_array(n)).astype(np.complex64)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    x[int(rng.integers(n))] = np.inf
    xp = xp_for(backend)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    with np.errstate(invalid="ignore"):
        want_vector, want_block = S @ x, S @ np.stack([x, x[::-1]], axis=1)
        got_vector = to_numpy(A @ xp.asarray(x))
        got_block = to_numpy(A @ xp.asarray(np.stack([x, x[::-1]], axis=1)))
        np.testing.assert_allclose(got_vector, want_vector, rtol=1e-5, equal_nan=True)
        np.testing.assert_allclose(got_block, want_block, rtol=1e-5, equal_nan=True)
        np.testing.assert_allclose(A.reference_spmv(x), want_vector, rtol=1e-5, equal_nan=True)
    assert np.isinf(want_vector).any() and np.isinf(got_vector).any()
