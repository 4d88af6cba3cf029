"""Conjugate gradients per iteration: ``sparsegpu.linalg.cg`` (when the package has it) against
``cupyx.scipy.sparse.linalg.cg`` on the GPU and ``scipy.sparse.linalg.cg``, on 2-D Poisson.

Each solver is first checked: after k iterations its true relative residual
``||b - A x|| / ||b||`` must match SciPy's after k iterations within 0.1% (the iterates of CG
in float64 agree that closely this early); one that does not is reported ``wrong`` and not
timed. Then it runs with a tolerance it cannot meet (``rtol=1e-30``, ``atol=0``) for k and for
2k iterations; time per iteration = (t(2k) - t(k)) / k, so conversion, allocation and the
first synchronisation cancel out. Each row also has the whole-solve figure
(t(k) - t(1)) / (k - 1), which keeps what a k-iteration solve pays beyond a 1-iteration one
(status checks, graph capture), and sparsegpu's rows the speed-ups over cupyx by both. The bytes model of an iteration is
:func:`sparsegpu.bench.bytes_model.cg_iteration_bytes`.

>>> rows = bench_cg("cpu", grids=(16,), iterations=4, repeat=1)
>>> rows[-1]["impl"], rows[-1]["status"]
('scipy', 'ok')
"""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sparsegpu import datasets
from sparsegpu.bench.bytes_model import cg_iteration_bytes, effective_gbps
from sparsegpu.bench.timing import synchronize

#: Grid sides the issue 8 targets name: 2000^2 = 4M unknowns and 316^2 = 99,856 (about 10^5).
TARGET_GRIDS = (2000, 316)
UNREACHABLE = {"rtol": 1e-30, "atol": 0.0}


def _tolerance_kwargs(cg: Callable[..., Any]) -> dict[str, float]:
    """``rtol`` (SciPy >= 1.12, sparsegpu) or ``tol`` (older cupyx) set out of reach."""
    names = inspect.signature(cg).parameters
    return dict(UNREACHABLE) if "rtol" in names else {"tol": UNREACHABLE["rtol"], "atol": 0.0}


def solvers(backend: str, S: Any, b_host: np.ndarray) -> dict[str, Callable[[int], Any]]:
    """``{name: run(iterations)}`` for every CG available on ``backend``, solving ``S x = b``,
    each on its own copy of ``S`` and b (converted once, outside the timing)."""
    import sparsegpu
    from sparsegpu import linalg

    A = sparsegpu.from_scipy(S, "csr", backend=backend)
    b = sparsegpu.formats._base.to_backend(b_host, backend)
    kwargs = _tolerance_kwargs(linalg.cg)
    out: dict[str, Callable[[int], Any]] = {"sparsegpu": lambda k: linalg.cg(A, b, maxiter=k, **kwargs)}
    if backend == "gpu":
        import cupy
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cla

        A_cx, b_cx = csp.csr_matrix(S), cupy.asarray(b_host)
        kwargs_cx = _tolerance_kwargs(cla.cg)
        out["cupyx"] = lambda k: cla.cg(A_cx, b_cx, maxiter=k, **kwargs_cx)
    import scipy.sparse.linalg as sla

    kwargs_sp = _tolerance_kwargs(sla.cg)
    out["scipy"] = lambda k: sla.cg(S, b_host, maxiter=k, **kwargs_sp)
    return out


def residual(S: Any, b: np.ndarray, result: Any) -> float:
    """``||b - S x|| / ||b||`` for a solver's ``(x, info)``, x on either backend."""
    x = result[0]
    x = x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)
    return float(np.linalg.norm(b - S @ x) / np.linalg.norm(b))


def per_iteration(run: Callable[[int], Any], iterations: int, backend: str, repeat: int) -> float:
    """Median over ``repeat`` of (t(2k) - t(k)) / k seconds, after one warm-up run."""
    return timed_iterations(run, iterations, backend, repeat)[0]


def timed_iterations(run: Callable[[int], Any], iterations: int, backend: str, repeat: int) -> tuple[float, float]:
    """(per iteration, whole solve) seconds: medians over ``repeat`` of (t(2k) - t(k)) / k and
    of (t(k) - t(1)) / (k - 1), after one warm-up run."""
    def wall(k: int) -> float:
        synchronize(backend)
        start = time.perf_counter()
        run(k)
        synchronize(backend)
        return time.perf_counter() - start

    wall(iterations)
    running, whole = [], []
    for _ in range(repeat):
        one, k, two_k = wall(1), wall(iterations), wall(2 * iterations)
        running.append((two_k - k) / iterations)
        whole.append((k - one) / max(iterations - 1, 1))
    return statistics.median(running), statistics.median(whole)


def bench_cg(backend: str, grids: Sequence[int] = TARGET_GRIDS, iterations: int = 50, repeat: int = 3,
             scipy_iterations: int = 5) -> list[dict[str, Any]]:
    """Per-iteration time of each CG on 2-D Poisson of each grid side; SciPy runs
    ``scipy_iterations`` (it is the slow one)."""
    rows = []
    for grid in grids:
        S = datasets.poisson2d(grid)
        nbytes = cg_iteration_bytes(S.shape[0], S.nnz)
        b = np.random.default_rng(0).uniform(-1, 1, S.shape[0])
        runs = solvers(backend, S, b)
        expected = residual(S, b, runs["scipy"](iterations))
        for impl, run in runs.items():
            k = scipy_iterations if impl == "scipy" and backend == "gpu" else iterations
            row: dict[str, Any] = {"matrix": f"poisson2d n={grid}", "unknowns": S.shape[0], "nnz": S.nnz,
                                   "impl": impl, "iterations": k, "bytes_per_iteration": nbytes}
            try:
                got = residual(S, b, run(iterations))
                if not abs(got - expected) <= 1e-3 * expected:
                    rows.append({**row, "status": "wrong", "message": f"residual after {iterations} iterations "
                                 f"{got:.6g}, SciPy's {expected:.6g}"})
                    continue
                seconds, whole = timed_iterations(run, k, backend, repeat)
            except Exception as exc:  # report and go on
                rows.append({**row, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
                continue
            rows.append({**row, "status": "ok", "residual": got, "ms_per_iteration": seconds * 1e3,
                         "whole_solve_ms_per_iteration": whole * 1e3, "gbps": effective_gbps(nbytes, seconds)})
        _speedups(rows)
    return rows


def _speedups(rows: list[dict[str, Any]]) -> None:
    """Adds to the latest grid's sparsegpu row its speed-ups over cupyx, by both measures."""
    latest = rows[-1]["matrix"] if rows else None
    by_impl = {r["impl"]: r for r in rows if r["matrix"] == latest and r.get("status") == "ok"}
    ours, theirs = by_impl.get("sparsegpu"), by_impl.get("cupyx")
    if ours and theirs:
        ours["speedup_vs_cupyx_per_iteration"] = theirs["ms_per_iteration"] / ours["ms_per_iteration"]
        ours["speedup_vs_cupyx_whole_solve"] = (theirs["whole_solve_ms_per_iteration"]
                                                / ours["whole_solve_ms_per_iteration"])


def linalg_compare_cg(grids: Sequence[int], iterations: int = 50, repeats: int = 3) -> list[Any]:
    """``sparsegpu.linalg._bench.compare_cg(n_side, iterations, repeats)`` (issue 8's own
    GPU comparison) for each grid side. A call that raises is recorded as
    ``{"n_side": ..., "error": ...}``."""
    from sparsegpu.linalg._bench import compare_cg as compare

    out = []
    for grid in grids:
        try:
            out.append(compare(n_side=grid, iterations=iterations, repeats=repeats))
        except Exception as exc:  # its failure must not lose the rest of the run
            out.append({"n_side": grid, "error": f"{type(exc).__name__}: {exc}"})
    return out
