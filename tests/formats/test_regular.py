"""ELL, HYB, JDS and SELL-C-sigma: layouts, conversions, products (CPU references against scipy;
CUDA kernels against their references and scipy, marked gpu)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets, reference
from sparsegpu.formats import ELL, HYB, JDS, SELL
from sparsegpu.formats import jds as jds_module
from sparsegpu.formats.ell import DEFAULT_MAX_FILL
from sparsegpu.formats.hyb import hyb_width
from sparsegpu.formats.sell import SELL_CHUNKS
from sparsegpu.reference import regular as regular_reference
from tests.conftest import poisoned, to_numpy, xp_for

REAL_MATRICES = datasets.real_matrix_names()
requires_matrices = pytest.mark.skipif(not REAL_MATRICES, reason="real matrices not found (set SPARSEGPU_MATRICES)")
REGULAR = ("ell", "hyb", "jds", "sell")
ALL_FORMATS = ("coo", "csr", "csc") + REGULAR
# Each format with its default parameters and with awkward ones.
VARIANTS = [
    ("ell", {"max_fill": None}),
    ("hyb", {}),
    ("hyb", {"width": 0}),
    ("hyb", {"width": 1}),
    ("jds", {}),
    ("sell", {}),
    ("sell", {"C": 4, "sigma": 1}),
    ("sell", {"C": 8, "sigma": 20}),
    ("sell", {"C": 1, "sigma": 3}),
    ("sell", {"C": 256, "sigma": 1000}),
    ("sell", {"C": 8, "split": 2, "hot": 2}),
]
VARIANT_IDS = [f"{f}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for f, p in VARIANTS]


# --------------------------------------------------------------------------- helpers


def canonical(S, dtype=None) -> sp.csr_array:
    """What a round trip must give back: duplicates summed, indices sorted, zeros kept."""
    C = sp.csr_array(S, copy=True)
    C.sum_duplicates()
    return C.astype(dtype) if dtype is not None else C


def assert_same_matrix(A, S) -> None:
    """A holds exactly S's entries (explicit zeros included), to the bit."""
    expected = canonical(S, A.dtype)
    got = A.to_scipy()
    assert got.shape == expected.shape
    got = sp.csr_array(got)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.data, expected.data)
    assert A.nnz == expected.nnz


def random_vector(rng, n, dtype, xp):
    v = rng.standard_normal(n) + 0.5
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return xp.asarray(v.astype(dtype))


def exact_product(S, x, alpha=1.0, beta=0.0, y0=None):
    """(alpha * S x + beta * y0 in complex128, a bound on the rounding error of computing it
    in ``x``'s dtype with any summation order)."""
    S64 = sp.csr_array(S).astype(np.complex128)
    x64 = to_numpy(x).astype(np.complex128)
    expected = alpha * (S64 @ x64)
    scale = abs(alpha) * (abs(S64) @ np.abs(x64))
    if beta != 0:
        y64 = to_numpy(y0).astype(np.complex128)
        expected = expected + beta * y64
        scale = scale + abs(beta) * np.abs(y64)
    eps = np.finfo(to_numpy(x).dtype).eps
    longest = int(np.diff(sp.csr_array(S).indptr).max()) if S.shape[0] else 0
    return expected, 4 * eps * (longest + 2) * scale + 1e-30


def assert_close(got, S, x, dtype, alpha=1.0, beta=0.0, y0=None) -> None:
    """got == alpha * S x + beta * y0 up to rounding of ``dtype``."""
    expected, bound = exact_product(S, x, alpha, beta, y0)
    got = to_numpy(got)
    assert got.dtype == np.dtype(dtype)
    assert np.all(np.abs(got - expected) <= bound), "product mismatch"


def check_products(A, S, rng, backend) -> None:
    """A @ x, spmv with alpha/beta into a poisoned or live y, A.T @ x and the format's reference,
    against scipy."""
    xp = xp_for(backend)
    m, n = S.shape
    dtype = A.dtype
    x = random_vector(rng, n, dtype, xp)
    assert_close(A @ x, S, x, dtype)
    alpha = dtype.type(1.5 - 0.5j) if dtype.kind == "c" else dtype.type(-1.25)
    # beta == 0: y is never read, so NaN in it must not show.
    y = poisoned(m, dtype, xp)
    assert A.spmv(x, y, alpha=alpha, beta=0) is y
    assert_close(y, S, x, dtype, alpha=alpha)
    y0 = random_vector(rng, m, dtype, xp)
    y = y0.copy()
    A.spmv(x, y, alpha=alpha, beta=0.75)
    assert_close(y, S, x, dtype, alpha=alpha, beta=0.75, y0=y0)
    xt = random_vector(rng, m, dtype, xp)
    yt = poisoned(n, dtype, xp)
    A.T.spmv(xt, yt, alpha=alpha)
    assert_close(yt, sp.csr_array(S).T, xt, dtype, alpha=alpha)
    assert_close(A.T @ xt, sp.csr_array(S).T, xt, dtype)
    # The format's NumPy reference over its own layout (the GPU kernels' oracle), against SciPy.
    host_x = x.get() if hasattr(x, "get") else x
    reference = A.reference_spmv(host_x, np.full(m, np.nan, dtype), alpha=alpha)
    assert_close(reference, S, host_x, dtype, alpha=alpha)


@functools.cache
def real(name: str) -> sp.csr_array:
    return datasets.load_matrix(name)


def ell_fill(S) -> float:
    S = sp.csr_array(S)
    m = S.shape[0]
    width = int(np.diff(S.indptr).max()) if m else 0
    return (width * m - S.nnz) / S.nnz if S.nnz else 0.0


def random_matrix(rng, m, n, density=0.1, dtype=np.float64, empty_rows=0) -> sp.csr_array:
    S = sp.random_array((m, n), density=density, format="csr", rng=rng, dtype=np.float64)
    if dtype in (np.complex64, np.complex128):
        S = S + 1j * sp.random_array((m, n), density=density, format="csr", rng=rng)
    S = sp.csr_array(S.astype(dtype))
    if empty_rows and m:
        S = sp.lil_array(S)
        for r in rng.choice(m, size=min(empty_rows, m), replace=False):
            S[r, :] = 0
        S = sp.csr_array(S)
        S.eliminate_zeros()
    return S


def long_row_matrix(rng, m=20, n=100_000, long=100_000) -> sp.csr_array:
    """One row of ``long`` entries among short ones."""
    rows = [np.full(long, 3)]
    cols = [rng.choice(n, size=long, replace=False)]
    for r in range(m):
        if r != 3:
            rows.append(np.full(2, r))
            cols.append(rng.choice(n, size=2, replace=False))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(m, n))


def equal_rows_matrix(rng, m, n, per_row) -> sp.csr_array:
    cols = np.concatenate([rng.choice(n, size=per_row, replace=False) for _ in range(m)])
    rows = np.repeat(np.arange(m), per_row)
    return sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(m, n))


def edge_cases(rng) -> dict[str, sp.csr_array]:
    with_zeros = random_matrix(rng, 40, 30, 0.2)
    with_zeros.data[::3] = 0.0  # explicit zeros are stored entries and must survive
    return {
        "0x0": sp.csr_array((0, 0)),
        "3x0": sp.csr_array((3, 0)),
        "0x4": sp.csr_array((0, 4)),
        "no nonzeros": sp.csr_array((7, 5)),
        "empty rows": random_matrix(rng, 300, 250, 0.03, empty_rows=120),
        "all rows equal": equal_rows_matrix(rng, 333, 100, 7),
        "tall": random_matrix(rng, 517, 40, 0.1),
        "wide": random_matrix(rng, 37, 600, 0.1),
        "explicit zeros": with_zeros,
        "one entry": sp.csr_array(([2.5], ([4], [1])), shape=(9, 3)),
        "lower triangular": sp.csr_array(sp.tril(random_matrix(rng, 200, 200, 0.2))),
    }


EDGE_NAMES = ["0x0", "3x0", "0x4", "no nonzeros", "empty rows", "all rows equal", "tall", "wide",
              "explicit zeros", "one entry", "lower triangular"]


# --------------------------------------------------------------------------- round trips, products


@pytest.mark.parametrize("case", EDGE_NAMES)
@pytest.mark.parametrize(("fmt", "params"), VARIANTS, ids=VARIANT_IDS)
def test_edge_cases(case, fmt, params, rng, backend):
    S = edge_cases(rng)[case]
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **params)
    assert type(A).format == fmt and A.shape == S.shape and A.backend == backend
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


@pytest.mark.parametrize(("fmt", "params"), VARIANTS, ids=VARIANT_IDS)
def test_one_very_long_row(fmt, params, rng, backend):
    S = long_row_matrix(rng)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **params)
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("fmt", REGULAR)
def test_value_and_index_types(fmt, dtype, index_dtype, rng, backend):
    S = random_matrix(rng, 150, 130, 0.05, dtype=dtype, empty_rows=10)
    params = {"max_fill": None} if fmt == "ell" else {}
    A = sparsegpu.from_scipy(S, format=fmt, index_dtype=index_dtype, backend=backend, **params)
    assert A.dtype == np.dtype(dtype) and A.index_dtype == np.dtype(index_dtype)
    for name, array in A._arrays().items():
        if name not in ("slice_ptr", "jd_ptr") and array.dtype.kind in "iu":
            assert array.dtype == np.dtype(index_dtype), name
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
@pytest.mark.parametrize("fmt", ["hyb", "jds", "sell"])
def test_real_matrices(name, fmt, rng, backend):
    S = real(name)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices_ell_and_its_fill_guard(name, rng, backend):
    S = real(name)
    fill = ell_fill(S)
    if fill <= DEFAULT_MAX_FILL:
        A = sparsegpu.from_scipy(S, format="ell", backend=backend)
    else:
        with pytest.raises(ValueError, match=rf"padding ratio {fill:.2f} .* exceeds max_fill=3\.0.*HYB.*SELL"):
            sparsegpu.from_scipy(S, format="ell", backend=backend)
        width = int(np.diff(S.indptr).max())
        if width * S.shape[0] > 3_000_000:
            return  # refusing was the point; building this one would take gigabytes
        A = sparsegpu.from_scipy(S, format="ell", backend=backend, max_fill=None)
    assert A.fill == pytest.approx(fill)
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


# --------------------------------------------------------------------------- conversions


@pytest.mark.parametrize("source", ALL_FORMATS)
@pytest.mark.parametrize("target", ALL_FORMATS)
def test_every_format_converts_to_every_other(source, target, rng, backend):
    S = random_matrix(rng, 90, 70, 0.06, empty_rows=5)
    S.data[::4] = 0.0
    params = {"max_fill": None} if source == "ell" else {}
    A = sparsegpu.from_scipy(S, format=source, backend=backend, **params)
    B = A.asformat(target, **({"max_fill": None} if target == "ell" else {}))
    assert B.format == target and B.backend == backend
    assert_same_matrix(B, S)
    x = random_vector(rng, 70, np.float64, xp_for(backend))
    assert_close(B @ x, S, x, np.float64)


def test_conversion_parameters_and_constructors(rng):
    S = equal_rows_matrix(rng, 100, 80, 5)
    A = SELL(S, C=16, sigma=32, backend="cpu")
    assert (A.C, A.sigma) == (16, 32)
    B = A.asformat("sell", C=4)
    assert (B.C, B.sigma) == (4, 256)
    assert A.asformat("sell") is A
    H = HYB(A, width=2)
    assert H.width == 2 and H.coo_data.size == S.nnz - 2 * 100
    assert_same_matrix(H, S)
    assert_same_matrix(JDS(sparsegpu.COO.from_scipy(S, backend="cpu")), S)
    assert_same_matrix(ELL(S, backend="cpu", dtype=np.float32), S.astype(np.float32))
    with pytest.raises(TypeError, match="dtype, index_dtype and backend"):
        ELL(A, dtype=np.float32)
    with pytest.raises(TypeError, match="scipy sparse matrix or a sparsegpu matrix"):
        JDS(np.eye(3))


def test_asbackend_keeps_the_layout(rng, backend):
    S = long_row_matrix(rng, m=30, n=400, long=300)
    for fmt, params in [("ell", {"max_fill": None}), ("hyb", {"width": 3}), ("sell", {"C": 8, "sigma": 16}), ("jds", {})]:
        A = sparsegpu.from_scipy(S, format=fmt, backend="cpu", **params)
        B = A.asbackend(backend)
        assert B.backend == backend and type(B) is type(A)
        for name, array in A._arrays().items():
            np.testing.assert_array_equal(to_numpy(getattr(B, name)), array, err_msg=name)
        assert B.asbackend("cpu")._layout_params() == A._layout_params()


def test_astype_and_nbytes(rng):
    S = equal_rows_matrix(rng, 64, 50, 3)
    for fmt in REGULAR:
        A = sparsegpu.from_scipy(S, format=fmt, backend="cpu")
        B = A.astype(np.complex64)
        assert type(B) is type(A) and B.dtype == np.complex64 and B.nnz == A.nnz
        assert_same_matrix(B, S.astype(np.complex64))
        assert A.nbytes == sum(a.nbytes for a in A._arrays().values())
    ell = ELL.from_scipy(S, backend="cpu")
    assert ell.nbytes == 64 * 3 * (8 + 4) and ell.fill == 0.0
    assert "ELL 64x50, float64, int32 indices, 192 stored, on cpu" in repr(ell)


# --------------------------------------------------------------------------- layouts


def test_ell_layout_is_column_major_with_trailing_padding():
    S = sp.csr_array(np.array([[1.0, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 0], [4, 5, 6, 0.0]]))
    A = ELL.from_scipy(S, backend="cpu", max_fill=None)
    assert A.width == 3
    np.testing.assert_array_equal(A.indices.reshape(3, 4), [[0, -1, 1, 0], [2, -1, -1, 1], [-1, -1, -1, 2]])
    np.testing.assert_array_equal(A.data.reshape(3, 4), [[1, 0, 3, 4], [2, 0, 0, 5], [0, 0, 0, 6]])
    assert A.nnz == 6 and A.fill == pytest.approx(1.0)


def test_ell_fill_guard_message_and_override(rng):
    S = long_row_matrix(rng, m=30, n=5000, long=3000)
    ratio = ell_fill(S)
    with pytest.raises(ValueError) as info:
        ELL.from_scipy(S, backend="cpu")
    message = str(info.value)
    assert f"padding ratio {ratio:.2f}" in message and "max_fill=3.0" in message
    assert "HYB" in message and "SELL" in message and "max_fill=None" in message
    assert ELL.from_scipy(S, backend="cpu", max_fill=ratio + 1).fill == pytest.approx(ratio)
    assert ELL.from_scipy(S, backend="cpu", max_fill=None).width == 3000
    with pytest.raises(ValueError, match="non-negative"):
        ELL.from_scipy(S, backend="cpu", max_fill=-1)
    with pytest.raises(TypeError, match="max_fill must be a number"):
        ELL.from_scipy(S, backend="cpu", max_fill="lots")


def test_hyb_splits_rows_at_width(rng):
    S = random_matrix(rng, 80, 60, 0.1)
    for width in (0, 1, 3, 100):
        A = HYB.from_scipy(S, backend="cpu", width=width)
        lengths = np.diff(S.indptr)
        assert A.width == width
        assert A.coo_data.size == int(np.maximum(lengths - width, 0).sum())
        assert np.all(np.diff(A.coo_row) >= 0), "COO part sorted by row"
        assert_same_matrix(A, S)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_hyb_without_overflow_has_an_empty_coo_part(index_dtype, rng, backend):
    """The default width of a matrix whose longest row fits skips the overflow gather; the empty
    COO part keeps the matrix's dtypes."""
    S = equal_rows_matrix(rng, 300, 90, 4).astype(np.complex64)
    A = HYB.from_scipy(S, backend=backend, index_dtype=index_dtype)
    assert A.width == 4 and A.coo_data.size == 0
    assert A.coo_row.dtype == A.coo_col.dtype == np.dtype(index_dtype) and A.coo_data.dtype == np.complex64
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


def brute_force_hyb_width(lengths, value_bytes, index_bytes) -> int:
    costs = []
    for width in range(int(lengths.max()) + 1):
        overflow = np.maximum(lengths - width, 0)
        costs.append(lengths.size * width * (value_bytes + index_bytes)
                     + overflow.sum() * (value_bytes + 2 * index_bytes)
                     + np.count_nonzero(overflow) * 2 * value_bytes)
    return int(np.argmin(costs))


@pytest.mark.parametrize(("dtype", "index_dtype"), [(np.float64, np.int32), (np.float32, np.int64), (np.complex128, np.int32)])
def test_hyb_width_rule_minimises_the_bytes_model(dtype, index_dtype, rng):
    for _ in range(20):
        lengths = np.concatenate([rng.poisson(rng.uniform(0.5, 12), size=rng.integers(1, 400)),
                                  rng.integers(0, 300, size=rng.integers(0, 4))])
        expected = brute_force_hyb_width(lengths, np.dtype(dtype).itemsize, np.dtype(index_dtype).itemsize)
        assert hyb_width(lengths, dtype, index_dtype, np) == expected
    assert hyb_width(np.array([6] * 50 + [5] * 3), np.float64, np.int32, np) == 6
    assert hyb_width(np.zeros(10, dtype=np.int32), np.float64, np.int32, np) == 0
    assert hyb_width(np.zeros(0, dtype=np.int32), np.float64, np.int32, np) == 0


def test_jds_layout(rng):
    S = random_matrix(rng, 120, 90, 0.07, empty_rows=15)
    A = JDS.from_scipy(S, backend="cpu")
    lengths = np.diff(S.indptr)
    # stable sort by length, longest first
    np.testing.assert_array_equal(A.perm, np.lexsort((np.arange(120), -lengths)))
    diagonal_lengths = np.diff(A.jd_ptr)
    assert diagonal_lengths.size == lengths.max()
    assert np.all(np.diff(diagonal_lengths) <= 0)
    np.testing.assert_array_equal(diagonal_lengths, [(lengths > d).sum() for d in range(lengths.max())])
    assert A.indices.size == S.nnz  # no padding


@pytest.mark.parametrize(("C", "sigma"), [(32, 256), (4, 1), (8, 20), (2, 1000), (256, 256)])
def test_sell_layout(C, sigma, rng):
    S = random_matrix(rng, 300, 90, 0.05, empty_rows=30)
    A = SELL.from_scipy(S, backend="cpu", C=C, sigma=sigma)
    lengths = np.diff(S.indptr)
    perm = A.perm
    # sorted by length, longest first, stably, inside each window of sigma rows
    for start in range(0, 300, sigma):
        window = np.arange(start, min(start + sigma, 300))
        np.testing.assert_array_equal(perm[window], window[np.lexsort((window, -lengths[window]))])
    n_slices = -(-300 // C)
    assert A.slice_ptr.size == n_slices + 1 and A.slice_ptr.dtype == np.int64
    padded = np.zeros(n_slices * C, dtype=np.int64)
    padded[:300] = lengths[perm]
    np.testing.assert_array_equal(np.diff(A.slice_ptr), padded.reshape(-1, C).max(axis=1) * C)
    # column-major inside a slice: lane l's slot k at slice_ptr[s] + k * C + l
    s = 1 if n_slices > 1 else 0
    width = (A.slice_ptr[s + 1] - A.slice_ptr[s]) // C
    block = A.indices[A.slice_ptr[s]:A.slice_ptr[s + 1]].reshape(width, C)
    for lane in range(min(C, 300 - s * C)):
        row = perm[s * C + lane]
        cols = S.indices[S.indptr[row]:S.indptr[row + 1]]
        np.testing.assert_array_equal(block[:lengths[row], lane], cols)
        assert np.all(block[lengths[row]:, lane] == -1)
    assert A.fill == pytest.approx((A.slice_ptr[-1] - S.nnz) / S.nnz)


def test_parameter_errors():
    S = sp.csr_array(np.eye(4))
    with pytest.raises(ValueError, match="C must be one of"):
        SELL.from_scipy(S, C=3, backend="cpu")
    with pytest.raises(ValueError, match="sigma must be at least 1"):
        SELL.from_scipy(S, sigma=0, backend="cpu")
    with pytest.raises(TypeError, match="C must be an integer"):
        SELL.from_scipy(S, C=32.0, backend="cpu")
    with pytest.raises(ValueError, match="width must be at least 0"):
        HYB.from_scipy(S, width=-1, backend="cpu")
    for fmt in REGULAR:
        with pytest.raises(TypeError, match="unknown format parameters"):
            sparsegpu.from_scipy(S, format=fmt, backend="cpu", colour="red")
    A = JDS.from_scipy(S, backend="cpu")
    with pytest.raises(ValueError, match="length 3, but the operator needs 4"):
        A @ np.ones(3)


def test_transposed_product_without_determinism(rng, backend):
    S = random_matrix(rng, 70, 45, 0.1)
    xp = xp_for(backend)
    for fmt in REGULAR:
        A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **({"max_fill": None} if fmt == "ell" else {}))
        x = random_vector(rng, 70, np.float64, xp)
        with sparsegpu.options(deterministic=False):
            assert_close(A.T @ x, S.T, x, np.float64)
            y = random_vector(rng, 45, np.float64, xp)
            assert_close(A @ y, S, y, np.float64)


def test_references_follow_the_kernel_arguments(rng):
    """The references read exactly the stored arrays, padding and all (no hidden state)."""
    S = random_matrix(rng, 50, 40, 0.1, empty_rows=5)
    x = rng.standard_normal(40)
    A = SELL.from_scipy(S, backend="cpu", C=8)
    y = np.full(50, np.nan)
    regular_reference.sell_spmv(A.slice_ptr, A.indices, A.data, A.perm, A.split_slice, A.split_part, A.split,
                                A.hot_cols, A.C, x, y, 2.0, 0.0)
    np.testing.assert_allclose(y, 2.0 * (S @ x), rtol=1e-13, atol=1e-13)
    assert reference.segment_sum is regular_reference.segment_sum


# --------------------------------------------------------------------------- GPU: kernels vs references


def _gpu_vs_reference(S, fmt, params, rng, dtype=None, index_dtype=None):
    import cupy

    if dtype is None:  # the matrix's own kind: complex matrices stay complex
        dtype = np.complex128 if S.dtype.kind == "c" else np.float64
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", dtype=dtype, index_dtype=index_dtype, **params)
    T = sparsegpu.from_scipy(S, format=fmt, backend="cpu", dtype=dtype, index_dtype=index_dtype, **params)
    assert all(isinstance(a, cupy.ndarray) for a in A._arrays().values())
    for name, array in A._arrays().items():  # built on the device, same layout as the reference's
        np.testing.assert_array_equal(to_numpy(array), T._arrays()[name], err_msg=name)
    m, n = S.shape
    x = random_vector(rng, n, A.dtype, np)
    y0 = random_vector(rng, m, A.dtype, np)
    for alpha, beta in [(1.0, 0.0), (-0.5, 2.0)]:
        got = poisoned(m, A.dtype, cupy) if beta == 0 else cupy.asarray(y0)
        A.spmv(cupy.asarray(x), got, alpha=alpha, beta=beta)
        expected = np.full(m, np.nan, A.dtype) if beta == 0 else y0.copy()
        T.reference_spmv(x, expected, alpha=alpha, beta=beta)
        assert_close(got, S, x, A.dtype, alpha=alpha, beta=beta, y0=y0)
        _, bound = exact_product(S, x, alpha, beta, y0)
        assert np.all(np.abs(to_numpy(got) - expected) <= 2 * bound), "kernel and reference differ"
        again = poisoned(m, A.dtype, cupy) if beta == 0 else cupy.asarray(y0)
        A.spmv(cupy.asarray(x), again, alpha=alpha, beta=beta)
        np.testing.assert_array_equal(to_numpy(again), to_numpy(got))  # bitwise reproducible
    xt = random_vector(rng, m, A.dtype, np)
    first = A.T @ cupy.asarray(xt)
    assert_close(first, sp.csr_array(S).T, xt, A.dtype)
    np.testing.assert_array_equal(to_numpy(A.T @ cupy.asarray(xt)), to_numpy(first))
    assert isinstance(A @ x, np.ndarray)  # NumPy in, NumPy out


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
@pytest.mark.parametrize(("fmt", "params"), [("hyb", {}), ("jds", {}), ("sell", {}), ("sell", {"C": 8, "sigma": 64})])
def test_gpu_real_matrices(name, fmt, params, rng):
    _gpu_vs_reference(real(name), fmt, params, rng)


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_gpu_real_matrices_ell(name, rng):
    S = real(name)
    if int(np.diff(S.indptr).max()) * S.shape[0] <= 3_000_000:
        _gpu_vs_reference(S, "ell", {"max_fill": None}, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("case", EDGE_NAMES + ["long row"])
@pytest.mark.parametrize(("fmt", "params"), VARIANTS, ids=VARIANT_IDS)
def test_gpu_edge_cases(case, fmt, params, rng):
    S = long_row_matrix(rng) if case == "long row" else edge_cases(rng)[case]
    _gpu_vs_reference(S, fmt, params, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("fmt", REGULAR)
def test_gpu_types(fmt, dtype, index_dtype, rng):
    S = random_matrix(rng, 3000, 2500, 0.004, dtype=dtype, empty_rows=100)
    _gpu_vs_reference(S, fmt, {"max_fill": None} if fmt == "ell" else {}, rng, dtype, index_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("C", SELL_CHUNKS)
def test_gpu_sell_every_slice_height(C, rng):
    S = random_matrix(rng, 1000, 900, 0.01, empty_rows=50)
    _gpu_vs_reference(S, "sell", {"C": C, "sigma": 4 * C}, rng)


@pytest.mark.gpu
def test_gpu_hyb_overflow_and_atomics(rng):
    """A big COO part (several levels of the carry tree) and the atomic path."""
    import cupy

    S = sp.csr_array(sp.vstack([long_row_matrix(rng, m=40, n=300_000, long=300_000), random_matrix(rng, 500, 300_000, 1e-4)]))
    _gpu_vs_reference(S, "hyb", {}, rng)
    A = HYB.from_scipy(S, backend="gpu")
    x = random_vector(rng, S.shape[1], np.float64, cupy)
    with sparsegpu.options(deterministic=False):
        assert_close(A @ x, S, x, np.float64)
        xt = random_vector(rng, S.shape[0], np.float64, cupy)
        assert_close(A.T @ xt, S.T, xt, np.float64)


@pytest.mark.gpu
@pytest.mark.parametrize("hints", [True, False])
def test_gpu_jds_cache_hint_variants(hints, rng, monkeypatch):
    """Both builds of the JDS product (evict-first loads and an evict-last y store, or plain)."""
    monkeypatch.setattr(jds_module, "JDS_CACHE_HINTS", hints)
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        _gpu_vs_reference(datasets.generate("lower_triangular", "small"), "jds", {}, rng, dtype)
    _gpu_vs_reference(long_row_matrix(rng), "jds", {}, rng)
