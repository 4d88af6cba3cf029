"""Primitives side by side: ``sparsegpu.primitives`` (when the package has it) against the
array library's own (CuPy on the GPU, NumPy on the CPU), each checked before it is timed.

=================  ======================================  ==================  ============
sparsegpu          baseline                                bytes model         check
=================  ======================================  ==================  ============
inclusive_scan(x)  ``xp.cumsum(x, dtype=x.dtype)``         read + write        per entry
reduce(x)          ``xp.sum(x)``                           read                scalar
histogram(v, 256)  ``xp.bincount(v, minlength=256)``       read                exact counts
=================  ======================================  ==================  ============

Float results are compared with a float64 NumPy reference relative to the sum of magnitudes
(``cumsum(|x|)`` for scans, ``sum(|x|)`` for reductions), tolerance as for SpMV.

>>> [r["op"] for r in bench_primitives("cpu", n=1000, repeat=2)][:2]
['inclusive_scan', 'inclusive_scan']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sparsegpu._backend import array_module
from sparsegpu.bench.bytes_model import effective_gbps, histogram_bytes, reduce_bytes, scan_bytes
from sparsegpu.bench.spmv import tolerance
from sparsegpu.bench.timing import measure

HISTOGRAM_BINS = 256
CASES = (("inclusive_scan", "int32"), ("inclusive_scan", "float64"), ("reduce", "int32"), ("reduce", "float64"),
         ("histogram", "int32"))


def make_input(op: str, dtype: str, n: int, backend: str, seed: int = 0) -> Any:
    """Input for ``op`` on ``backend``: histogram values uniform in [0, 256), scan and reduce
    inputs uniform in [0, 4) (integers stay far from overflow at 2^28 elements)."""
    rng = np.random.default_rng(seed)
    if op == "histogram":
        host = rng.integers(0, HISTOGRAM_BINS, n, dtype=np.int64).astype(dtype)
    elif np.dtype(dtype).kind == "i":
        host = rng.integers(0, 4, n, dtype=np.int64).astype(dtype)
    else:
        host = rng.uniform(0, 4, n).astype(dtype)
    return array_module(backend).asarray(host)


def implementations(op: str, backend: str) -> dict[str, Callable[[Any], Any]]:
    """``{"sparsegpu": fn, baseline: fn}`` for ``op`` (sparsegpu left out when absent)."""
    xp = array_module(backend)
    baseline = "cupy" if backend == "gpu" else "numpy"
    calls: dict[str, Callable[[Any], Any]] = {
        "inclusive_scan": lambda x: xp.cumsum(x, dtype=x.dtype),
        "reduce": lambda x: xp.sum(x),
        "histogram": lambda v: xp.bincount(v, minlength=HISTOGRAM_BINS),
    }
    from sparsegpu import primitives

    ours = {
        "inclusive_scan": lambda x: primitives.inclusive_scan(x),
        "reduce": lambda x: primitives.reduce(x, op="sum"),
        "histogram": lambda v: primitives.histogram(v, HISTOGRAM_BINS, range=(0, HISTOGRAM_BINS)),
    }
    return {"sparsegpu": ours[op], baseline: calls[op]}


def model_bytes(op: str, n: int, dtype: str) -> int:
    """The bytes model of ``op`` (see :mod:`sparsegpu.bench.bytes_model`)."""
    return {"inclusive_scan": scan_bytes, "reduce": reduce_bytes, "histogram": histogram_bytes}[op](n, dtype)


def error(op: str, x: np.ndarray, result: Any) -> float:
    """Relative error of ``result`` against NumPy in float64 (0 or inf for histograms)."""
    got = np.asarray(result.get() if hasattr(result, "get") else result)
    if op == "histogram":
        expected = np.bincount(x, minlength=HISTOGRAM_BINS)
        return 0.0 if got.shape == expected.shape and np.array_equal(got, expected) else float("inf")
    wide = x.astype(np.float64)
    if op == "inclusive_scan":
        expected, scale = np.cumsum(wide), np.maximum(np.cumsum(np.abs(wide)), 1e-300)
    else:
        expected, scale = np.sum(wide), max(float(np.sum(np.abs(wide))), 1e-300)
    if np.shape(got) != np.shape(expected):
        return float("inf")
    err = np.abs(got.astype(np.float64) - expected) / scale
    return float(np.max(np.where(np.isnan(err), np.inf, err))) if np.size(err) else 0.0


def bench_primitives(backend: str, n: int, repeat: int = 20, seed: int = 0) -> list[dict[str, Any]]:
    """Every case of :data:`CASES` for each implementation: status, seconds, GB/s."""
    rows = []
    for op, dtype in CASES:
        x = make_input(op, dtype, n, backend, seed)
        host = x.get() if hasattr(x, "get") else x
        nbytes = model_bytes(op, n, dtype)
        for impl, call in implementations(op, backend).items():
            row: dict[str, Any] = {"op": op, "dtype": dtype, "n": n, "impl": impl, "bytes": nbytes}
            try:
                err = error(op, host, call(x))
            except Exception as exc:  # report and go on
                rows.append({**row, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
                continue
            if not err <= (0.0 if np.dtype(dtype).kind == "i" else tolerance(dtype)):
                rows.append({**row, "status": "wrong", "max_rel_err": err})
                continue
            timing = measure(lambda i: call(x), backend, repeat)
            rows.append({**row, "status": "ok", "max_rel_err": err, "seconds": timing.seconds,
                         "gbps": effective_gbps(nbytes, timing.seconds)})
    return rows
