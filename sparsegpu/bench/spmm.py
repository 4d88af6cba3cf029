"""SpMM side by side: sparsegpu's ``A @ X`` against the baseline (``cupyx.scipy.sparse``'s
``csr_matrix @ X``, cuSPARSE, on the GPU; SciPy on the CPU) per matrix, column count k and
order of X, each result checked before it is timed, with the copy ceiling beside them.

Effective GB/s = :func:`spmm_bytes` / seconds: the matrix counted once (values, indices, row
pointers), X read once and Y written once, whatever the implementation rereads. Checking: each
product is compared entry by entry with SciPy's in float64 (complex128):
``|Y_ij - ref_ij| <= tol * (|A| |X|)_ij`` with the SpMV benchmark's ``tol``
(:func:`sparsegpu.bench.spmv.tolerance`); a product that fails is reported ``wrong`` and never
timed. Timing: :func:`sparsegpu.bench.timing.measure` (warm-up calls, then the median of
samples timed by CUDA events; the host clock on the CPU).

>>> from sparsegpu import datasets
>>> rows = run_spmm({"poisson": datasets.poisson2d(8)}, ks=(2,), orders=("C", "F"), backend="cpu", repeat=2)
>>> [(r["k"], r["order"], r["outcomes"]["csr"]["status"], r["baseline"]) for r in rows]
[(2, 'C', 'ok', 'scipy'), (2, 'F', 'ok', 'scipy')]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu._backend import array_module, resolve_backend
from sparsegpu.bench.bytes_model import effective_gbps
from sparsegpu.bench.spmv import REFUSALS, tolerance
from sparsegpu.bench.timing import copy_ceiling, measure


def spmm_bytes(rows: int, cols: int, nnz: int, k: int, value_dtype: Any = np.float64,
               index_dtype: Any = np.int32) -> int:
    """Least bytes ``Y = A @ X`` moves for a ``rows x cols`` matrix of ``nnz`` stored entries
    and X of ``k`` columns: the matrix once (``nnz * (value + index) + (rows + 1) * index``),
    X read once (``cols * k * value``) and Y written once (``rows * k * value``).

    >>> spmm_bytes(3, 4, 5, 2)          # 5*12 + 4*4 + 4*2*8 + 3*2*8
    188
    """
    value, index = np.dtype(value_dtype).itemsize, np.dtype(index_dtype).itemsize
    return int(nnz) * (value + index) + (int(rows) + 1) * index + (int(cols) + int(rows)) * int(k) * value


def check_block(got: Any, S: sp.csr_array, X: np.ndarray, reference: np.ndarray, dtype: Any) -> str | None:
    """None when ``got`` matches ``reference`` (SciPy's product in double precision) within
    ``tolerance(dtype) * (|S| |X|)`` entry by entry, else a message naming the worst entry."""
    got = got.get() if hasattr(got, "get") else np.asarray(got)
    if got.shape != reference.shape:
        return f"shape {got.shape}, expected {reference.shape}"
    scale = abs(S).astype(np.float64) @ np.abs(X).astype(np.float64) if S.nnz else np.zeros(reference.shape)
    bound = tolerance(dtype) * scale + np.finfo(np.float64).tiny
    excess = np.abs(got - reference) - bound
    if excess.size == 0 or not (np.isnan(excess).any() or excess.max() > 0):
        return None
    worst = np.unravel_index(int(np.nanargmax(np.where(np.isnan(excess), np.inf, excess))), excess.shape)
    return f"entry {tuple(int(i) for i in worst)}: got {got[worst]}, expected {reference[worst]}"


def _baseline(S: sp.csr_array, backend: str) -> tuple[str, Callable[[Any], Any]]:
    """The baseline's name and product: cupyx's ``csr_matrix @ X`` on the GPU, SciPy on the CPU."""
    if backend != "gpu":
        return "scipy", lambda X: S @ X
    import cupyx.scipy.sparse as cusparse

    matrix = cusparse.csr_matrix(S)
    return "cupyx", lambda X: matrix @ X


def _timed(product: Callable[[Any], Any], X: Any, S: sp.csr_array, X_host: np.ndarray, reference: np.ndarray,
           dtype: Any, backend: str, repeat: int, nbytes: int) -> dict[str, Any]:
    """Check ``product(X)``, then time it if it is right."""
    try:
        message = check_block(product(X), S, X_host, reference, dtype)
    except Exception as exc:  # reported, and the run goes on
        return {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
    if message is not None:
        return {"status": "wrong", "message": message}
    seconds = measure(lambda i: product(X), backend, repeat).seconds
    return {"status": "ok", "seconds": seconds, "gbps": effective_gbps(nbytes, seconds)}


def _matrices(matrices: Mapping[str, Any] | Iterable[str], seed: int) -> Iterable[tuple[str, sp.csr_array]]:
    """(name, CSR) pairs: a mapping's items, or labels loaded by :func:`sparsegpu.datasets.matrix`."""
    if isinstance(matrices, Mapping):
        for name, S in matrices.items():
            yield name, sp.csr_array(S)
    else:
        for label in matrices:
            yield label, datasets.matrix(label, seed=seed)


def run_spmm(matrices: Mapping[str, Any] | Iterable[str], ks: Sequence[int] = (4, 16, 64),
             orders: Sequence[str] = ("C", "F"), *, formats: Sequence[str] = ("csr",), dtype: Any = np.float64,
             backend: str | None = None, repeat: int = 20, seed: int = 0,
             on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Time ``A @ X`` of each sparsegpu format in ``formats`` and the baseline per matrix, k
    and order of X.

    Parameters
    ----------
    matrices : mapping of name to scipy sparse matrix, or iterable of str
        The matrices, or labels :func:`sparsegpu.datasets.matrix` loads (real names,
        ``family:size``).
    ks : sequence of int, optional
        Columns of X (default 4, 16, 64).
    orders : sequence of {"C", "F"}, optional
        Orders of X (and so of the result); the same values in each order.
    formats : sequence of str, optional
        sparsegpu formats to time (default CSR).
    dtype : dtype, optional
        Value type of A and X (default float64).
    backend : {"gpu", "cpu"}, optional
        Default: :func:`sparsegpu.backend`.
    repeat : int, optional
        Timed samples per product (the median is reported).
    seed : int, optional
        Seed of X's values and of generated matrices.
    on_row : callable, optional
        Called with each result row as it finishes (a long run reports as it goes).

    Returns
    -------
    list of dict
        One per (matrix, k, order): ``matrix``, ``rows``, ``cols``, ``nnz``, ``k``, ``order``,
        ``bytes`` (:func:`spmm_bytes`), ``baseline``, ``outcomes`` (per implementation: ``status``
        ok / wrong / refused / error, ``seconds``, ``gbps``, ``message``), ``speedup`` (the
        baseline's seconds over the fastest correct format's) and ``copy_gbps`` (the ceiling,
        None on the CPU).

    Raises
    ------
    ValueError
        An order other than "C" or "F"; a k below 1.

    Examples
    --------
    See the module docstring.
    """
    backend = resolve_backend(backend)
    if any(order not in ("C", "F") for order in orders):
        raise ValueError(f"orders must be 'C' or 'F', got {list(orders)}")
    if any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be at least 1, got {list(ks)}")
    xp = array_module(backend)
    ceiling = copy_ceiling(backend)
    rng = np.random.default_rng(seed)
    results = []
    for name, S in _matrices(matrices, seed):
        S = S.astype(dtype)
        ours = {}
        for fmt in formats:
            try:
                ours[fmt] = sparsegpu.from_scipy(S, format=fmt, backend=backend, dtype=dtype)
            except REFUSALS as exc:
                ours[fmt] = exc
        baseline, baseline_product = _baseline(S, backend)
        for k in ks:
            X_host = rng.standard_normal((S.shape[1], int(k))).astype(dtype)
            reference = S.astype(np.result_type(dtype, np.float64)) @ X_host.astype(np.result_type(dtype, np.float64))
            nbytes = spmm_bytes(*S.shape, S.nnz, k, dtype, S.indices.dtype)
            for order in orders:
                X = xp.asarray(np.asarray(X_host, order=order))
                outcomes = {}
                for fmt, A in ours.items():
                    if isinstance(A, Exception):
                        outcomes[fmt] = {"status": "refused", "message": str(A)}
                        continue
                    outcomes[fmt] = _timed(A.__matmul__, X, S, X_host, reference, dtype, backend, repeat, nbytes)
                outcomes[baseline] = _timed(baseline_product, X, S, X_host, reference, dtype, backend, repeat, nbytes)
                results.append({"matrix": name, "rows": S.shape[0], "cols": S.shape[1], "nnz": int(S.nnz), "k": int(k),
                                "order": order, "bytes": nbytes, "baseline": baseline, "outcomes": outcomes,
                                "speedup": _speedup(outcomes, baseline),
                                "copy_gbps": None if ceiling is None else ceiling["gbps"]})
                if on_row is not None:
                    on_row(results[-1])
    return results


def _speedup(outcomes: dict[str, dict[str, Any]], baseline: str) -> float | None:
    """The baseline's seconds over the fastest correct sparsegpu format's (None when either
    has no timing)."""
    base = outcomes.get(baseline, {})
    ours = [o["seconds"] for f, o in outcomes.items() if f != baseline and o.get("status") == "ok"]
    if base.get("status") != "ok" or not ours:
        return None
    return base["seconds"] / min(ours)


def geomean_speedups(results: Sequence[dict[str, Any]]) -> dict[tuple[int, str], float]:
    """The geometric mean of :func:`run_spmm`'s speedups per (k, order), over the results that
    have one.

    >>> geomean_speedups([{"k": 4, "order": "C", "speedup": 2.0}, {"k": 4, "order": "C", "speedup": 8.0},
    ...                   {"k": 4, "order": "F", "speedup": None}])
    {(4, 'C'): 4.0}
    """
    groups: dict[tuple[int, str], list[float]] = {}
    for row in results:
        if row.get("speedup"):
            groups.setdefault((row["k"], row["order"]), []).append(math.log(row["speedup"]))
    return {key: math.exp(sum(logs) / len(logs)) for key, logs in groups.items()}


def format_results(results: Sequence[dict[str, Any]]) -> str:
    """A plain-text table of :func:`run_spmm`'s results: one line per matrix, k and order, with
    each implementation's GB/s (or its status), the speedup and the copy ceiling.

    >>> outcomes = {"csr": {"status": "ok", "gbps": 3.0}, "scipy": {"status": "ok", "gbps": 2.0}}
    >>> print(format_results([{"matrix": "m", "k": 4, "order": "C", "baseline": "scipy", "speedup": 1.5,
    ...                        "copy_gbps": None, "outcomes": outcomes}]))
    matrix  k  order  csr  scipy  speedup  copy
    m       4  C      3.0  2.0    1.50     -
    """
    header = ["matrix", "k", "order"]
    impls = list(dict.fromkeys(impl for row in results for impl in row["outcomes"]))
    lines = [header + impls + ["speedup", "copy"]]
    for row in results:
        cells = [str(row["matrix"]), str(row["k"]), row["order"]]
        for impl in impls:
            outcome = row["outcomes"].get(impl, {"status": "-"})
            cells.append(f"{outcome['gbps']:.1f}" if outcome.get("status") == "ok" else outcome["status"].upper())
        cells.append("-" if row.get("speedup") is None else f"{row['speedup']:.2f}")
        cells.append("-" if row.get("copy_gbps") is None else f"{row['copy_gbps']:.0f}")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines)
