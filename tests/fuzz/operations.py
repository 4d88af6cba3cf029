"""The operations fuzzer: valid but awkward operands for the products, the arithmetic, the
and the constructors, each result checked against SciPy (the graph algorithms are in
tests/fuzz/graphs.py), and
invalid arguments, each of which must raise ValueError or TypeError naming the argument.

Awkward means: shapes with zero rows or columns, one row or column, rectangular both ways;
int64 indices; complex values; non-canonical arrays (unsorted indices, duplicates, explicit
zeros); NaN and inf. Sparse results are compared with SciPy's exactly in pattern and dtype and
to 1e-12 relative in value (summation order may differ); dense ones likewise.

tests/test_fuzz_operations.py runs this module and graphs.py in a subprocess, so a crash fails that test
instead of ending the test run. Run alone:
``SPARSEGPU_FUZZ_EXAMPLES=300 python3 -m pytest tests/fuzz/operations.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsegpu

EXAMPLES = int(os.environ.get("SPARSEGPU_FUZZ_EXAMPLES", "300"))
BACKEND = os.environ.get("SPARSEGPU_FUZZ_BACKEND") or sparsegpu.backend()
FORMATS = tuple(sorted(sparsegpu.SparseMatrix.formats))
VALUE_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
DENSE_DTYPES = (np.int32, np.int64, np.float32, np.float64, np.complex128)
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.complex64): 1e-5}
TESTS = 8  # the hypothesis tests here and in tests/fuzz/graphs.py share the example count
SETTINGS = settings(max_examples=max(EXAMPLES // TESTS, 1), deadline=None, derandomize=False, database=None,
                    suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------- helpers


def host(value: Any) -> Any:
    """A NumPy array (or scipy matrix) of a result on any backend."""
    if isinstance(value, sparsegpu.SparseMatrix):
        return value.to_scipy()
    if hasattr(value, "get"):
        return value.get()
    return value


def canonical(S: Any) -> sp.csr_array:
    """``S`` as a CSR with sorted indices and duplicates summed, explicit zeros kept."""
    C = sp.csr_array(S, copy=True)
    C.sum_duplicates()
    return C


def assert_same_sparse(got: Any, want: Any, what: str) -> None:
    """The same shape, dtype, pattern (explicit zeros included) and values (to rounding)."""
    got = host(got)
    assert sp.issparse(got), f"{what}: got {type(got).__name__}, not a sparse matrix"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, SciPy {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, SciPy {want.dtype}"
    g, w = canonical(got), canonical(want)
    assert np.array_equal(g.indptr, w.indptr) and np.array_equal(g.indices, w.indices), (
        f"{what}: pattern differs from SciPy's\n got {g.indptr.tolist()} {g.indices.tolist()} {g.data.tolist()}\n"
        f"want {w.indptr.tolist()} {w.indices.tolist()} {w.data.tolist()}")
    assert_close(g.data, w.data, what)


def assert_close(got: Any, want: Any, what: str, check_dtype: bool = True) -> None:
    got, want = np.asarray(host(got)), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, SciPy {want.shape}"
    if check_dtype:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, SciPy {want.dtype}"
    rtol = RTOL.get(np.dtype(got.dtype), 1e-12)
    assert np.allclose(got, want, rtol=rtol, atol=rtol * (np.abs(want[np.isfinite(want)]).max(initial=0) + 1e-300),
                       equal_nan=True), f"{what}: values differ\n got {got.tolist()}\nwant {want.tolist()}"


def expect_error(call: Any, words: tuple[str, ...], what: str) -> None:
    """``call()`` raises ValueError or TypeError whose message names one of ``words``."""
    try:
        call()
    except (ValueError, TypeError) as error:
        message = str(error)
        assert any(w in message for w in words), f"{what}: the message does not name {words}: {message!r}"
        return
    except Exception as error:  # any other exception is the finding
        raise AssertionError(f"{what}: {type(error).__name__} instead of ValueError/TypeError: {error}") from error
    raise AssertionError(f"{what}: accepted without an error")


def build(S: Any, fmt: str) -> sparsegpu.SparseMatrix:
    params = {"max_fill": None} if fmt == "ell" else {}
    return sparsegpu.from_scipy(S, format=fmt, backend=BACKEND, **params)


def values(rng: np.random.Generator, size: int, dtype: Any, zeros: float) -> np.ndarray:
    """Small integers (exact sums) with a share of explicit zeros, in ``dtype``."""
    v = rng.integers(-4, 5, size).astype(np.float64)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.integers(-4, 5, size)
    v[rng.random(size) < zeros] = 0
    return v.astype(dtype)


@st.composite
def matrices(draw: Any, shape: tuple[int, int] | None = None, dtype: Any = None, large: bool = False) -> sp.csr_array:
    """A CSR (possibly non-canonical: unsorted indices, duplicates, explicit zeros) of a drawn
    or given shape and dtype, int32 or int64 indices. ``large``: sometimes up to 80 rows or
    columns, past the slice heights and row-length splits of the padded formats."""
    sizes = st.one_of(st.integers(0, 6), st.integers(7, 80)) if large else st.integers(0, 6)
    m, n = shape if shape is not None else (draw(sizes), draw(sizes))
    dtype = dtype if dtype is not None else draw(st.sampled_from(VALUE_DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.05, 0.3, 1.0, 2.0]))  # 2: duplicates likely
    nnz = int(rng.integers(0, density * m * n + 1)) if m * n else 0
    rows, cols = np.sort(rng.integers(0, m, nnz)), rng.integers(0, n, nnz)  # within a row: any order
    if not draw(st.booleans()):  # or canonical: sorted, no duplicates
        keys = np.unique(rows * max(n, 1) + cols)
        rows, cols = keys // max(n, 1), keys % max(n, 1)
    data = values(rng, rows.size, dtype, zeros=draw(st.sampled_from([0.0, 0.3])))
    if draw(st.integers(0, 9)) == 0 and data.size:
        data[rng.integers(0, data.size)] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    indptr = np.zeros(m + 1, index_dtype)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return sp.csr_array((data, cols.astype(index_dtype), indptr), shape=(m, n))


def finite(S: sp.csr_array) -> bool:
    return bool(np.isfinite(S.data).all())


def log(*parts: Any) -> None:
    print("case:", *parts, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- SpMM


@SETTINGS
@given(st.data())
def test_spmm_matches_scipy(data: Any) -> None:
    S = data.draw(matrices(large=True))
    fmt = data.draw(st.sampled_from(FORMATS))
    m, n = S.shape
    k = data.draw(st.integers(0, 5))
    xdtype = data.draw(st.sampled_from(DENSE_DTYPES))
    order = data.draw(st.sampled_from("CF"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    X = np.asarray(values(rng, n * k, xdtype, 0.2).reshape(n, k), order=order)
    if X.size and xdtype in (np.float32, np.float64, np.complex128) and data.draw(st.integers(0, 5)) == 0:
        X.flat[rng.integers(0, X.size)] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    log("spmm", fmt, S.shape, S.dtype, S.indices.dtype, k, xdtype, order)
    A = build(S, fmt)
    S = canonical(S)  # what the matrix holds: from_scipy sums duplicates (documented), so the
    want = S @ X      # oracle does too (with inf among duplicates, 0 * inf would otherwise differ)
    assert_close(A @ X, want, f"{fmt} A @ X")
    assert_close(A.spmm(X), want, f"{fmt} A.spmm(X)")
    got_order = (A @ X)
    if not (X.flags.c_contiguous and X.flags.f_contiguous) and m > 1:  # both: C order, documented
        assert got_order.flags[f"{order}_CONTIGUOUS"], f"{fmt} A @ X: not in X's order {order}"
    Y = np.full((m, k), np.nan, dtype=want.dtype, order=data.draw(st.sampled_from("CF")))
    assert A.spmm(X, Y) is Y
    assert_close(Y, want, f"{fmt} A.spmm(X, Y)")
    Y[...] = 1
    alpha, beta = data.draw(st.sampled_from([(2, 1), (0, 3), (1, 0), (-1, 0.5)]))
    A.spmm(X, Y, alpha=alpha, beta=beta)
    scaled = want if alpha == 1 else alpha * want  # 1 * (inf + inf j) is NaN in complex arithmetic
    assert_close(Y, scaled + beta * np.ones_like(want) if beta else scaled, f"{fmt} A.spmm(X, Y, {alpha}, {beta})")
    wide = np.asarray(values(rng, n * (2 * k + 1), xdtype, 0.2).reshape(n, 2 * k + 1), order=order)
    view = wide[::-1, ::2][:, :k] if data.draw(st.booleans()) else wide[:, 1::2]  # strided, maybe reversed
    assert_close(A @ view, S @ np.ascontiguousarray(view), f"{fmt} A @ strided view")
    Xt = np.asarray(values(rng, m * k, xdtype, 0.2).reshape(m, k), order=order)
    Yt = np.full((n, k), np.nan, dtype=np.result_type(S.dtype, Xt.dtype))
    A.T.spmm(Xt, Yt) if hasattr(A.T, "spmm") else None
    assert_close(A.T @ Xt, S.T @ Xt, f"{fmt} A.T @ X")
    if hasattr(A.T, "spmm"):
        assert_close(Yt, S.T @ Xt, f"{fmt} A.T.spmm(X, Y)")
    x = values(rng, n, xdtype, 0.2)
    try:  # spmv casts x only where the cast is safe (documented), else TypeError naming x
        assert_close(A @ x, S @ x, f"{fmt} A @ x (1-D)", check_dtype=False)
    except TypeError as error:
        assert "x" in str(error) and not np.can_cast(x.dtype, A.dtype), f"A @ x refused: {error}"
    # invalid arguments
    expect_error(lambda: A @ np.ones((n + 1, max(k, 1))), ("X", "dimension", "mismatch"), "X of wrong rows")
    expect_error(lambda: A.spmm(np.ones((n, k, 1))), ("X",), "X 3-D")
    expect_error(lambda: A.spmm(np.ones(n)), ("X", "2-D", "spmv"), "spmm with 1-D X")
    expect_error(lambda: A.spmm(np.ones((n, k), dtype=object)), ("X",), "X of objects")
    expect_error(lambda: A.spmm(np.ones((n, k), dtype="U1")), ("X",), "X of strings")
    expect_error(lambda: A.spmm(np.ones((n, k), dtype=np.longdouble)), ("X", "dtype"), "X longdouble")
    expect_error(lambda: A.spmm(X, np.empty((m + 1, k), want.dtype)), ("Y",), "Y of wrong shape")
    expect_error(lambda: A.spmm(X, np.empty((m, k), np.int8)), ("Y",), "Y of wrong dtype")
    expect_error(lambda: A.spmm(X, beta=1), ("beta", "Y"), "beta without Y")
    expect_error(lambda: A.spmm(X, alpha="2"), ("alpha",), "alpha a string")
    if want.dtype.kind != "c":
        expect_error(lambda: A.spmm(X, alpha=1j), ("alpha", "complex"), "complex alpha for a real product")


# --------------------------------------------------------------------------- SpGEMM

SEMIRINGS = ("plus_times", "min_plus", "max_plus", "plus_pair", "any_pair")


def semiring_reference(S: sp.csr_array, T: sp.csr_array, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(present, value) dense arrays of the GraphBLAS product over ``name`` (real operands)."""
    m, n = S.shape[0], T.shape[1]
    present = np.zeros((m, n), bool)
    value = np.zeros((m, n))
    Sc, Tc = canonical(S).tocoo(), canonical(T)  # duplicates are one entry, their sum
    for i, kk, a in zip(Sc.row, Sc.col, Sc.data):
        for p in range(Tc.indptr[kk], Tc.indptr[kk + 1]):
            j, b = Tc.indices[p], Tc.data[p]
            term = {"plus_times": a * b, "min_plus": a + b, "max_plus": a + b}.get(name, 1.0)
            if not present[i, j]:
                present[i, j], value[i, j] = True, term
            elif name in ("plus_times", "plus_pair"):
                value[i, j] += term
            elif name == "min_plus":
                value[i, j] = min(value[i, j], term)
            elif name == "max_plus":
                value[i, j] = max(value[i, j], term)
    return present, value


@SETTINGS
@given(st.data())
def test_spgemm_matches_scipy(data: Any) -> None:
    m, kk, n = (data.draw(st.integers(0, 6)) for _ in range(3))
    S = data.draw(matrices((m, kk)))
    T = data.draw(matrices((kk, n)))
    fa, fb = data.draw(st.sampled_from(FORMATS)), data.draw(st.sampled_from(FORMATS))
    log("spgemm", fa, fb, S.shape, S.dtype, S.indices.dtype, T.shape, T.dtype, T.indices.dtype)
    A, B = build(S, fa), build(T, fb)
    S, T = canonical(S), canonical(T)  # what the matrices hold (see test_spmm_matches_scipy)
    want = sp.csr_array(S @ T)
    want.sort_indices()
    # NaN and inf included: SciPy keeps a NaN sum (only exact zeros drop)
    assert_same_sparse(A @ B, want, f"{fa} @ {fb}")
    assert_same_sparse(sparsegpu.spgemm(A, B), want, f"spgemm({fa}, {fb})")
    assert_same_sparse(sparsegpu.spgemm(A, T), want, f"spgemm({fa}, scipy)")
    # masks
    M = data.draw(matrices((m, n), np.float64))
    complement = data.draw(st.booleans())
    inside = pattern(M)
    keep = ~inside if complement else inside
    got = host(sparsegpu.spgemm(A, B, mask=M, complement=complement)).toarray()
    assert_close(got, np.where(keep, (S @ T).toarray(), 0), "masked spgemm", check_dtype=False)
    # semirings (real operands: complex supports plus_times only)
    name = data.draw(st.sampled_from(SEMIRINGS))
    if S.dtype.kind != "c" and T.dtype.kind != "c" and finite(S) and finite(T):
        present, value = semiring_reference(S, T, name)
        C = canonical(host(sparsegpu.spgemm(A, B, semiring=name)))
        got_present = np.zeros(C.shape, bool)
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        got_present[rows, C.indices] = True
        assert np.array_equal(got_present, present), f"spgemm {name}: pattern differs"
        got_value = np.zeros(C.shape)
        got_value[rows, C.indices] = C.data.real
        if name not in ("any_pair",):
            assert_close(np.where(present, got_value, 0), np.where(present, value, 0), f"spgemm {name}",
                         check_dtype=False)
    elif name not in ("plus_times",) and (S.dtype.kind == "c" or T.dtype.kind == "c"):
        expect_error(lambda: sparsegpu.spgemm(A, B, semiring=name), ("semiring", "complex"), f"complex {name}")
    # invalid arguments
    W = build(sp.csr_array((kk + 1, n)), "csr")
    expect_error(lambda: A @ W, ("shape", "dimension", "mismatch", "inner"), "mismatched inner dimensions")
    expect_error(lambda: sparsegpu.spgemm(A, B, mask=sp.csr_array((m + 1, n))), ("mask",), "mask of wrong shape")
    expect_error(lambda: sparsegpu.spgemm(A, B, semiring="plus_bogus"), ("semiring", "plus_bogus"), "bad semiring")
    expect_error(lambda: sparsegpu.spgemm(A, B, complement=True), ("complement", "mask"), "complement, no mask")
    expect_error(lambda: sparsegpu.spgemm(A, np.ones((kk, n))), ("B", "sparse"), "dense B")
    expect_error(lambda: sparsegpu.spgemm(A, B, max_bytes=0), ("max_bytes",), "max_bytes 0")
    expect_error(lambda: sparsegpu.spgemm(A, B, mask=np.ones((m, n))), ("mask",), "dense mask")
    expect_error(lambda: sparsegpu.spgemm(A, B, semiring=3), ("semiring",), "semiring an int")
    expect_error(lambda: sparsegpu.spgemm("A", B), ("A", "operand"), "A a string")


def pattern(M: sp.csr_array) -> np.ndarray:
    present = np.zeros(M.shape, bool)
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    present[rows, M.indices] = True
    return present


# --------------------------------------------------------------------------- arithmetic


@SETTINGS
@given(st.data())
def test_arithmetic_matches_scipy(data: Any) -> None:
    S = data.draw(matrices(large=True))
    m, n = S.shape
    T = data.draw(matrices((m, n)))
    fa, fb = data.draw(st.sampled_from(FORMATS)), data.draw(st.sampled_from(FORMATS))
    log("arith", fa, fb, S.shape, S.dtype, S.indices.dtype, T.dtype, T.indices.dtype)
    A, B = build(S, fa), build(T, fb)
    S, T = canonical(S), canonical(T)  # what the matrices hold (see test_spmm_matches_scipy)
    assert_same_sparse(A + B, S + T, f"{fa} + {fb}")
    assert_same_sparse(A - B, S - T, f"{fa} - {fb}")
    assert_same_sparse(A.multiply(B), S.multiply(T), f"{fa}.multiply({fb})")
    assert_same_sparse(A * B, S * T, f"{fa} * {fb}")
    assert_same_sparse(A + T, S + T, f"{fa} + scipy")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ddtype = data.draw(st.sampled_from(DENSE_DTYPES))
    dshape = data.draw(st.sampled_from([(m, n), (1, n), (m, 1), (n,), (1, 1)]))
    D = values(rng, int(np.prod(dshape)), ddtype, 0.2).reshape(dshape)
    if dshape in ((m, n),):
        assert_close(A + D, S + D, f"{fa} + dense")
        assert_close(A - D, S - D, f"{fa} - dense")
        assert_close(D - A, D - S, f"dense - {fa}")
    want = S.multiply(D)
    got = A.multiply(D)
    if sp.issparse(want):
        assert_same_sparse(got, want, f"{fa}.multiply(dense {dshape} {ddtype.__name__})")
    else:
        assert_close(got, want, f"{fa}.multiply(dense {dshape})")
    c = data.draw(st.sampled_from([2, -1.5, np.float32(3), 1j, np.int64(-2), 0]))
    assert_same_sparse(A * c, S * c, f"{fa} * {c!r}")
    assert_same_sparse(c * A, c * S, f"{c!r} * {fa}")
    if c != 0:
        assert_same_sparse(A / c, S / c, f"{fa} / {c!r}")
    else:
        with pytest.raises(ZeroDivisionError):  # a Python zero: SciPy's and Python's rule, documented
            A / c
    assert_same_sparse(-A, -S, f"-{fa}")
    assert_same_sparse(abs(A), abs(S), f"abs({fa})")
    assert_same_sparse(A.conj(), S.conj(), f"{fa}.conj()")
    assert_same_sparse(A.transpose(), S.transpose(), f"{fa}.transpose()")
    assert_close(A.toarray(), S.toarray(), f"{fa}.toarray()")
    for axis in (None, 0, 1, -1, -2):
        want = np.asarray(S.sum(axis=axis))
        got = A.sum(axis=axis)
        if not finite(S) and S.dtype.kind == "c":
            # SciPy sums a complex axis of CSC rows (CSR columns) by a product with ones, so
            # inf * 0j makes NaN; CSR and CSC on the CPU run SciPy's pass, the other formats add
            # the entries: SciPy's answer for either layout, or NumPy's, passes.
            for other in (np.asarray(S.tocsc().sum(axis=axis)), S.toarray().sum(axis=axis)):
                other = np.asarray(other, dtype=want.dtype)
                if np.allclose(host(got), other, equal_nan=True):
                    want = other
        assert_close(got, want, f"{fa}.sum(axis={axis})")
    d = data.draw(st.integers(-7, 7))
    assert_close(A.diagonal(d), S.diagonal(d), f"{fa}.diagonal({d})")
    if S.dtype.kind != "c":
        for op in ("max", "min"):
            for axis in (None, 0, 1):
                try:
                    want = getattr(S, op)(axis=axis)
                except ValueError:
                    expect_error(lambda op=op, axis=axis: getattr(A, op)(axis=axis), ("empty", "axis", "zero-size"),
                                 f"{op} empty")
                    continue
                want = want.toarray() if sp.issparse(want) else want
                assert_close(getattr(A, op)(axis=axis), want, f"{fa}.{op}(axis={axis})", check_dtype=False)
    # invalid arguments
    W = build(sp.csr_array((m + 1, n)), "csr")
    expect_error(lambda: A + W, ("shape",), "sum of mismatched shapes")
    if (m, n) != (1, 1):  # a 1 x 1 matrix broadcasts to any shape
        expect_error(lambda: A.multiply(np.ones((m + 2, n + 2))), ("shape",), "multiply by a dense of wrong shape")
    expect_error(lambda: A + np.ones((1, 2, 3)), ("dimension", "shape"), "a 3-D operand")
    expect_error(lambda: A.multiply(np.array([["a"]])), ("dtype", "number"), "a string operand")
    expect_error(lambda: A.multiply(A.T), ("other",), "multiply by the operator A.T")
    expect_error(lambda: A.sum(axis=2), ("axis",), "sum axis 2")
    expect_error(lambda: A.sum(axis=1.5), ("axis",), "sum axis 1.5")
    expect_error(lambda: A.diagonal(1.5), ("k",), "diagonal k=1.5")


# --------------------------------------------------------------------------- constructors


@SETTINGS
@given(st.data())
def test_constructors_match_scipy(data: Any) -> None:
    m, n = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 6))
    k = data.draw(st.integers(-7, 7))
    dtype = data.draw(st.sampled_from(VALUE_DTYPES))
    fmt = data.draw(st.sampled_from((None,) + FORMATS))
    log("construct", m, n, k, dtype, fmt)
    params = {} if fmt is None else {"format": fmt}
    try:
        want = sp.eye_array(m, n, k=k, dtype=dtype)
    except ValueError:  # a diagonal past the edge: SciPy refuses it, so must sparsegpu
        expect_error(lambda: sparsegpu.eye(m, n, k=k, dtype=dtype, backend=BACKEND), ("k", "diagonal"), "eye k")
    else:
        try:
            got = sparsegpu.eye(m, n, k=k, dtype=dtype, backend=BACKEND, **params)
        except ValueError as error:  # ELL's documented refusal of padding past max_fill
            assert fmt == "ell" and "max_fill" in str(error), f"eye({m}, {n}, {k}, format={fmt}): {error}"
        else:
            assert_same_sparse(got, want, f"eye({m}, {n}, {k})")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    offsets = sorted(set(data.draw(st.lists(st.integers(-max(m - 1, 0), max(n - 1, 0)), min_size=1, max_size=3))))
    if m and n:
        diagonals = [values(rng, max(0, min(m + min(o, 0), n - max(o, 0))), dtype, 0.3) for o in offsets]
        assert_same_sparse(sparsegpu.diags(diagonals, offsets, shape=(m, n), backend=BACKEND),
                           sp.diags_array(diagonals, offsets=offsets, shape=(m, n)), f"diags {offsets} ({m}, {n})")
        value = dtype(data.draw(st.sampled_from([0, 1, -2.5])))  # a bare scalar: SciPy needs it in a list
        assert_same_sparse(sparsegpu.diags(value, offsets[0], shape=(m, n), backend=BACKEND),
                           sp.diags_array([value], offsets=[offsets[0]], shape=(m, n)).tocsr(), f"diags({value!r})")
    S, T = data.draw(matrices()), data.draw(matrices())
    if finite(S) and finite(T):
        # SciPy gives float64 for an empty kron whatever the dtypes; sparsegpu keeps the promotion
        want = sp.kron(S, T, format="csr").astype(np.result_type(S.dtype, T.dtype))
        assert_same_sparse(sparsegpu.kron(build(S, "csr"), build(T, "coo")), want, "kron")
    U = data.draw(matrices((data.draw(st.integers(0, 4)), S.shape[1])))
    V = data.draw(matrices((S.shape[0], data.draw(st.integers(0, 4)))))
    fa = data.draw(st.sampled_from(FORMATS))
    assert_same_sparse(sparsegpu.vstack([build(S, fa), build(U, "csr")]), sp.vstack([S, U]), "vstack")
    assert_same_sparse(sparsegpu.hstack([build(S, fa), build(V, "csc")]), sp.hstack([S, V]), "hstack")
    # invalid arguments
    expect_error(lambda: sparsegpu.eye(-1, backend=BACKEND), ("m", "negative", "shape"), "eye(-1)")
    expect_error(lambda: sparsegpu.eye(2.5, backend=BACKEND), ("m",), "eye(2.5)")
    expect_error(lambda: sparsegpu.eye(3, k=0.5, backend=BACKEND), ("k",), "eye k=0.5")
    expect_error(lambda: sparsegpu.eye(3, dtype=object, backend=BACKEND), ("dtype",), "eye dtype object")
    expect_error(lambda: sparsegpu.eye(3, format="bogus", backend=BACKEND), ("format",), "eye format bogus")
    expect_error(lambda: sparsegpu.diags([[1.0, 2.0]], [0, 1], backend=BACKEND), ("offsets", "diagonals"),
                 "diags with more offsets than diagonals")
    expect_error(lambda: sparsegpu.diags([[1.0, 2.0]], [0], shape=(5, 5), backend=BACKEND), ("diagonal",),
                 "diags with a short diagonal")
    expect_error(lambda: sparsegpu.vstack([build(S, "csr"), build(sp.csr_array((1, S.shape[1] + 1)), "csr")]),
                 ("column", "shape", "blocks"), "vstack of mismatched widths")
    expect_error(lambda: sparsegpu.hstack([build(S, "csr"), build(sp.csr_array((S.shape[0] + 1, 1)), "csr")]),
                 ("row", "shape", "blocks"), "hstack of mismatched heights")
    expect_error(lambda: sparsegpu.vstack([], backend=BACKEND), ("blocks",), "vstack of nothing")
    expect_error(lambda: sparsegpu.kron(build(S, "csr"), "x"), ("B",), "kron of a string")


# --------------------------------------------------------------------------- more operand shapes


@SETTINGS
@given(st.data())
def test_transposes_broadcasts_and_stacks_match_scipy(data: Any) -> None:
    S = data.draw(matrices(large=True))
    m, n = S.shape
    fa = data.draw(st.sampled_from(FORMATS))
    log("more", fa, S.shape, S.dtype, S.indices.dtype)
    A = build(S, fa)
    S = canonical(S)  # what the matrix holds (see test_spmm_matches_scipy)
    # products with transposed and scipy operands; the result's index dtype
    T = data.draw(matrices((m, data.draw(st.integers(0, 5)))))
    if finite(S) and finite(T):
        want = sp.csr_array(S.T @ T)
        assert_same_sparse(A.T @ build(T, "csr"), want, f"{fa}.T @ B")
        assert_same_sparse(sparsegpu.spgemm(S.T, build(T, "coo")), want, "spgemm(scipy, B)")
        B = build(T, "csr")
        C = sparsegpu.spgemm(A.T, B)
        wide = np.int64 in (A.index_dtype, B.index_dtype)
        assert C.index_dtype == (np.int64 if wide else np.int32), f"spgemm index dtype {C.index_dtype}"
    # sparse rows and columns broadcast in multiply
    row, col = data.draw(matrices((1, n))), data.draw(matrices((m, 1)))
    assert_same_sparse(A.multiply(row), S.multiply(row), f"{fa}.multiply(sparse row)")
    assert_same_sparse(A.multiply(col), S.multiply(col), f"{fa}.multiply(sparse column)")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    D = values(rng, m * n, data.draw(st.sampled_from(DENSE_DTYPES)), 0.0).reshape(m, n)
    D[D == 0] = 2
    assert_same_sparse(A / D, S / D, f"{fa} / dense") if S.nnz else None
    if S.dtype.kind != "c" and m and n:
        for op in ("max", "min"):
            for axis in (None, 0, 1):
                want = getattr(S, op)(axis=axis, explicit=True)
                want = want.toarray() if sp.issparse(want) else want
                assert_close(getattr(A, op)(axis=axis, explicit=True), want, f"{fa}.{op}({axis}, explicit)",
                             check_dtype=False)
    # astype, stacks with a format and dtype, kron with a 1 x 1
    dtype = data.draw(st.sampled_from(VALUE_DTYPES))
    if S.dtype.kind != "c" or np.dtype(dtype).kind == "c":
        assert_same_sparse(A.astype(dtype), S.astype(dtype), f"{fa}.astype({dtype.__name__})")
    else:
        expect_error(lambda: A.astype(dtype), ("dtype", "complex", "cast"), "complex astype real")
    fmt = data.draw(st.sampled_from(FORMATS))
    try:
        stacked = sparsegpu.vstack([A, A], format=fmt, dtype=np.complex128)
    except ValueError as error:  # ELL's documented refusal of padding past max_fill
        assert fmt == "ell" and "max_fill" in str(error), f"vstack(format={fmt}): {error}"
    else:
        assert stacked.format == fmt, f"vstack format {stacked.format}, asked {fmt}"
        assert_same_sparse(stacked.to_csr(), sp.vstack([S, S], format="csr", dtype=np.complex128), "vstack(dtype)")
    one = sp.csr_array(np.array([[data.draw(st.sampled_from([0.0, 2.0]))]]))
    if finite(S):
        want = sp.kron(one, S, format="csr").astype(np.result_type(one.dtype, S.dtype))
        assert_same_sparse(sparsegpu.kron(build(one, "csr"), A), want, "kron(1x1, A)")
    expect_error(lambda: sparsegpu.vstack([A, A], dtype=object), ("dtype",), "vstack dtype object")
    expect_error(lambda: sparsegpu.hstack([A, "x"]), ("blocks", "block"), "hstack of a string")
    expect_error(lambda: A.multiply(sp.csr_array((m + 2, n + 3))), ("shape",), "multiply by a sparse of wrong shape")
