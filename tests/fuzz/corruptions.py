"""The corruption fuzzer's cases: valid scipy matrices with one array changed after construction
(as SciPy allows), given to every entry point that takes a sparse matrix.

An independent NumPy oracle decides from the raw arrays whether they still describe a matrix.
Where they do (unsorted indices, duplicates, explicit zeros, NaN), every entry point must give
the right product; where they do not, it must raise ValueError or TypeError. Anything else (a
crash, another exception, a wrong answer) fails. tests/test_fuzz.py runs this module in a
subprocess, so a crash fails that test instead of ending the test run.

Run alone: ``SPARSEGPU_FUZZ_EXAMPLES=2000 python3 -m pytest tests/fuzz/corruptions.py``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import convert

EXAMPLES = int(os.environ.get("SPARSEGPU_FUZZ_EXAMPLES", "500"))
BACKEND = os.environ.get("SPARSEGPU_FUZZ_BACKEND") or sparsegpu.backend()
FORMATS = tuple(sorted(sparsegpu.SparseMatrix.formats))  # every registered format
LAYOUTS = ("csr", "csc", "coo")
CORRUPTIONS = (
    "none", "pointer_huge", "pointer_negative", "pointer_swap", "pointer_first", "pointer_last",
    "pointer_short", "pointer_long", "pointer_float", "index_negative", "index_past_end", "index_far",
    "index_2_32", "index_short", "index_float", "data_short", "data_2d", "data_object", "unsorted",
    "duplicate", "explicit_zero", "nan",
)
ENTRY_POINTS = tuple(os.environ.get("SPARSEGPU_FUZZ_ENTRIES", "").split(",") if os.environ.get("SPARSEGPU_FUZZ_ENTRIES")
                     else ("from_scipy", "constructor", "advise", "matrix_stats", "upload_csr", "out_of_core",
                           "coo_to_csr", "cg"))


@dataclass
class Case:
    layout: str
    shape: tuple[int, int]
    arrays: dict[str, np.ndarray]  # indptr/indices/data, or row/col/data

    def scipy(self) -> Any:
        """The scipy matrix with these arrays, set after a valid construction."""
        m, n = self.shape
        if self.layout == "coo":
            S = sp.coo_array((np.zeros(0), (np.zeros(0, np.int32), np.zeros(0, np.int32))), shape=self.shape)
            S.data = self.arrays["data"]
            S.coords = (self.arrays["row"], self.arrays["col"])
            return S
        empty = sp.csr_array((m, n)) if self.layout == "csr" else sp.csc_array((m, n))
        for name in ("data", "indices", "indptr"):
            setattr(empty, name, self.arrays[name])
        return empty


def oracle(case: Case) -> list[tuple[int, int, Any]] | None:
    """The stored (row, column, value) triples when the arrays describe a matrix, else None."""
    m, n = case.shape
    a = case.arrays
    data = a["data"]
    if data.ndim != 1 or data.dtype.kind not in "biufc":
        return None
    if case.layout == "coo":
        row, col = a["row"], a["col"]
        if row.dtype.kind not in "iu" or col.dtype.kind not in "iu" or row.ndim != 1 or col.ndim != 1:
            return None
        if not (row.size == col.size == data.size):
            return None
        if row.size and (row.min() < 0 or row.max() >= m or col.min() < 0 or col.max() >= n):
            return None
        return list(zip(row.tolist(), col.tolist(), data.tolist()))
    indptr, indices = a["indptr"], a["indices"]
    n_major, n_minor = (m, n) if case.layout == "csr" else (n, m)
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu" or indptr.ndim != 1 or indices.ndim != 1:
        return None
    if indptr.size != n_major + 1 or indices.size != data.size:
        return None
    if indptr[0] != 0 or indptr[-1] != indices.size or np.any(np.diff(indptr.astype(np.int64)) < 0):
        return None
    if indices.size and (indices.min() < 0 or indices.max() >= n_minor):
        return None
    triples = []
    for major in range(n_major):
        for j in range(int(indptr[major]), int(indptr[major + 1])):
            r, c = (major, int(indices[j])) if case.layout == "csr" else (int(indices[j]), major)
            triples.append((r, c, data[j].item()))
    return triples


def product(triples: list[tuple[int, int, Any]], x: np.ndarray, m: int, dtype: Any) -> np.ndarray:
    y = np.zeros(m, dtype=np.result_type(dtype, np.float64))
    for r, c, v in triples:
        y[r] += v * x[c]
    return y


@st.composite
def cases(draw: Any) -> tuple[Case, str, str]:
    layout = draw(st.sampled_from(LAYOUTS))
    m, n = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    S = sp.random_array((m, n), density=draw(st.sampled_from([0.2, 0.5, 0.9])), rng=rng, format=layout)
    if S.nnz == 0:
        S = sp.coo_array(([1.0], ([0], [0])), shape=(m, n)).asformat(layout)
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    if layout == "coo":
        arrays = {"row": S.coords[0].astype(index_dtype), "col": S.coords[1].astype(index_dtype), "data": S.data.copy()}
    else:
        arrays = {"indptr": S.indptr.astype(index_dtype), "indices": S.indices.astype(index_dtype), "data": S.data.copy()}
    corruption = draw(st.sampled_from(CORRUPTIONS))
    corrupt(arrays, layout, corruption, draw, (m, n))
    return Case(layout, (m, n), arrays), corruption, draw(st.sampled_from(ENTRY_POINTS))


def corrupt(arrays: dict[str, np.ndarray], layout: str, how: str, draw: Any, shape: tuple[int, int]) -> None:
    major_name = "row" if layout == "coo" else "indptr"
    minor_name = "col" if layout == "coo" else "indices"
    pointer, index, data = arrays[major_name], arrays[minor_name], arrays["data"]
    k = draw(st.integers(0, max(pointer.size - 1, 0)))
    j = draw(st.integers(0, max(index.size - 1, 0)))
    bound = shape[1] if layout in ("csr", "coo") else shape[0]
    if how == "pointer_huge":
        pointer[k] = 10**8 if pointer.dtype == np.int32 else 10**12
    elif how == "pointer_negative":
        pointer[k] = -1 - k
    elif how == "pointer_swap" and pointer.size > 2:
        pointer[[k, (k + 1) % pointer.size]] = pointer[[(k + 1) % pointer.size, k]]
    elif how == "pointer_first":
        pointer[0] += 1
    elif how == "pointer_last":
        pointer[-1] += draw(st.sampled_from([-1, 1, 5]))
    elif how == "pointer_short":
        arrays[major_name] = pointer[:-1]
    elif how == "pointer_long":
        arrays[major_name] = np.append(pointer, pointer[-1])
    elif how == "pointer_float":
        arrays[major_name] = pointer.astype(np.float64)
    elif how == "index_negative":
        index[j] = -1
    elif how == "index_past_end":
        index[j] = bound
    elif how == "index_far":
        index[j] = bound + draw(st.integers(1, 1000))
    elif how == "index_2_32":
        arrays[minor_name] = index.astype(np.int64)
        arrays[minor_name][j] = 2**32 + draw(st.integers(0, bound))  # would wrap to a valid int32
    elif how == "index_short":
        arrays[minor_name] = index[:-1]
    elif how == "index_float":
        arrays[minor_name] = index.astype(np.float32)
    elif how == "data_short":
        arrays["data"] = data[:-1]
    elif how == "data_2d":
        arrays["data"] = data.reshape(-1, 1)
    elif how == "data_object":
        arrays["data"] = data.astype(object)
    elif how == "unsorted" and index.size > 1:
        index[[0, -1]] = index[[-1, 0]]
    elif how == "duplicate" and index.size > 1:
        index[j] = index[j - 1]
    elif how == "explicit_zero":
        data[j] = 0
    elif how == "nan":
        data[j] = np.nan


def run_entry(entry: str, case: Case, x: np.ndarray) -> np.ndarray:
    """y = A x through ``entry``, on the fuzzer's backend, as NumPy."""
    S = case.scipy()
    if entry == "from_scipy":
        fmt = FORMATS[int(x.size + case.shape[0]) % len(FORMATS)]
        params = {"max_fill": None} if fmt == "ell" else {}
        return sparsegpu.from_scipy(S, format=fmt, backend=BACKEND, **params) @ x
    if entry == "constructor":
        a = case.arrays
        if case.layout == "coo":
            return sparsegpu.COO((a["data"], (a["row"], a["col"])), case.shape, backend=BACKEND) @ x
        cls = sparsegpu.CSR if case.layout == "csr" else sparsegpu.CSC
        return cls((a["data"], a["indices"], a["indptr"]), case.shape, backend=BACKEND) @ x
    if entry == "advise":
        sparsegpu.advise(S, backend=BACKEND)
        return sparsegpu.CSR.from_scipy(S, backend=BACKEND) @ x
    if entry == "matrix_stats":
        sparsegpu.matrix_stats(S, backend=BACKEND)
        return sparsegpu.CSR.from_scipy(S, backend=BACKEND) @ x
    if entry == "upload_csr":
        return sparsegpu.upload_csr(S, backend=BACKEND) @ x
    if entry == "out_of_core":
        if BACKEND == "cpu":
            return sparsegpu.OutOfCoreCSR(S, device_budget_bytes=1 << 12) @ x
        return sparsegpu.OutOfCoreCSR(S) @ x
    if entry == "coo_to_csr":
        if case.layout != "coo":
            return sparsegpu.from_scipy(S, backend=BACKEND) @ x
        a = case.arrays
        indptr, indices, data = convert.coo_to_csr(a["row"], a["col"], a["data"], case.shape)
        return sp.csr_array((data, indices, indptr), shape=case.shape) @ x
    if entry == "cg":  # a square part of the matrix as a Jacobi-free operator; only the checks matter
        sparsegpu.linalg.cg(S, np.ones(case.shape[0]), maxiter=1) if case.shape[0] == case.shape[1] else None
        return sparsegpu.from_scipy(S, backend=BACKEND) @ x
    raise AssertionError(entry)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=False, database=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_corruption_gives_a_clean_error_or_the_right_answer(drawn: tuple[Case, str, str]) -> None:
    case, corruption, entry = drawn
    print(f"case: {entry} {case.layout} {case.shape} {corruption} "
          f"{ {k: v.tolist() for k, v in case.arrays.items()} }", file=sys.stderr, flush=True)
    triples = oracle(case)
    x = np.random.default_rng(0).standard_normal(case.shape[1])
    try:
        got = np.asarray(run_entry(entry, case, x))
    except (ValueError, TypeError) as error:
        if triples is not None:
            message = str(error)
            # A valid matrix may still be refused for a documented reason, never silently.
            assert any(word in message for word in ("max_fill", "maxiter", "square", "symmetric", "complex")), (
                f"{entry} refused a valid matrix ({corruption}): {message}")
        return
    assert triples is not None, f"{entry} accepted corrupted arrays ({corruption}) without an error"
    want = product(triples, x, case.shape[0], got.dtype)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-8, equal_nan=True), f"{entry} ({corruption}): wrong answer"
