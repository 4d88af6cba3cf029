"""The solvers against SciPy and cupyx: per iteration on the GPU, whole solves on the CPU.

:func:`bench_cg`: conjugate gradients per iteration, ``sparsegpu.linalg.cg`` against
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

:func:`compare_cg` and :func:`compare_solvers`: side-by-side GPU timings per iteration. Every
solve runs with ``rtol = atol = 0``, so it does exactly ``maxiter`` iterations. T(k) is the
median of ``repeats`` whole solves with ``maxiter = k`` after a warm-up run (kernels compiled,
plans built), timed with a device synchronisation before and after. Two figures:

- whole solve: ``(T(k) - T(1)) / (k - 1)``: everything a k-iteration solve costs beyond a
  1-iteration one (status checks, graph capture, the first batch) spread over its iterations;
- per iteration: ``(T(2k) - T(k)) / k``: the marginal cost of an iteration of a running solve.

:func:`cpu_against_scipy`: whole solves on the CPU backend against SciPy's solvers on the same
matrix and tolerance, as the ratio of the medians.
"""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import scipy.sparse.linalg as sla

from sparsegpu import datasets, from_scipy, linalg
from sparsegpu._backend import to_backend
from sparsegpu.bench.bytes_model import cg_iteration_bytes, effective_gbps
from sparsegpu.bench.timing import synchronize

#: Grid sides of the solver targets: 2000^2 = 4M unknowns and 316^2 = 99,856 (about 10^5).
TARGET_GRIDS = (2000, 316)
UNREACHABLE = {"rtol": 1e-30, "atol": 0.0}


def _tolerance_kwargs(cg: Callable[..., Any], rtol: float = UNREACHABLE["rtol"]) -> dict[str, float]:
    """``rtol`` (SciPy >= 1.12, sparsegpu) or ``tol`` (older cupyx) set to ``rtol`` (by default
    out of reach), and ``atol = 0``."""
    names = inspect.signature(cg).parameters
    return {"rtol" if "rtol" in names else "tol": rtol, "atol": 0.0}


def solvers(backend: str, S: Any, b_host: np.ndarray) -> dict[str, Callable[[int], Any]]:
    """``{name: run(iterations)}`` for every CG available on ``backend``, solving ``S x = b``,
    each on its own copy of ``S`` and b (converted once, outside the timing)."""
    A = from_scipy(S, "csr", backend=backend)
    b = to_backend(b_host, backend)
    kwargs = _tolerance_kwargs(linalg.cg)
    out: dict[str, Callable[[int], Any]] = {"sparsegpu": lambda k: linalg.cg(A, b, maxiter=k, **kwargs)}
    if backend == "gpu":
        import cupy
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cla

        A_cx, b_cx = csp.csr_matrix(S), cupy.asarray(b_host)
        kwargs_cx = _tolerance_kwargs(cla.cg)
        out["cupyx"] = lambda k: cla.cg(A_cx, b_cx, maxiter=k, **kwargs_cx)
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
    """:func:`compare_cg` (n_side, iterations, repeats) for each grid side. A call that raises
    is recorded as ``{"n_side": ..., "error": ...}``."""
    out = []
    for grid in grids:
        try:
            out.append(compare_cg(n_side=grid, iterations=iterations, repeats=repeats))
        except Exception as exc:  # its failure must not lose the rest of the run
            out.append({"n_side": grid, "error": f"{type(exc).__name__}: {exc}"})
    return out


# --------------------------------------------------------------------------- GPU per iteration


def _median_seconds(run: Callable[[], Any], repeats: int, synchronize: Callable[[], None]) -> float:
    run()  # warm-up
    synchronize()
    samples = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        run()
        synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def ms_per_iteration(solve: Callable[[int], Any], iterations: int, repeats: int,
                   synchronize: Callable[[], None]) -> float:
    """Milliseconds per iteration of whole solves: (T(k) - T(1)) / (k - 1)."""
    long = _median_seconds(lambda: solve(iterations), repeats, synchronize)
    short = _median_seconds(lambda: solve(1), repeats, synchronize)
    return 1e3 * (long - short) / (iterations - 1)


def _both_measures(solve: Callable[[int], Any], iterations: int, repeats: int,
                   synchronize: Callable[[], None]) -> tuple[float, float]:
    """(per iteration, whole solve) milliseconds per iteration: (T(2k) - T(k)) / k and
    (T(k) - T(1)) / (k - 1), from the same T(k)."""
    one = _median_seconds(lambda: solve(1), repeats, synchronize)
    k = _median_seconds(lambda: solve(iterations), repeats, synchronize)
    two_k = _median_seconds(lambda: solve(2 * iterations), repeats, synchronize)
    return 1e3 * (two_k - k) / iterations, 1e3 * (k - one) / (iterations - 1)


def compare_cg(n_side: int, iterations: int, repeats: int = 5, scipy_iterations: int | None = None,
               dtype: Any = np.float64) -> dict[str, Any]:
    """CG per iteration on 2-D Poisson with ``n_side**2`` unknowns: sparsegpu (GPU) vs
    ``cupyx.scipy.sparse.linalg.cg`` vs ``scipy.sparse.linalg.cg`` (CPU).

    ``scipy_iterations`` (default: ``min(iterations, 50)``) keeps the SciPy run short on big
    grids (SciPy: whole-solve measure only). Returns milliseconds per iteration by both measures
    of the module docstring (``*_per_iteration``: (T(2k) - T(k)) / k; ``*_whole_solve``:
    (T(k) - T(1)) / (k - 1)) and the speed-ups by each.
    """
    import cupy
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as csla

    if iterations < 2:
        raise ValueError("iterations must be at least 2")
    S = datasets.poisson2d(n_side).astype(dtype)
    rng = np.random.default_rng(0)
    b_host = rng.standard_normal(S.shape[0]).astype(dtype)
    b = cupy.asarray(b_host)
    A = from_scipy(S, format="auto", backend="gpu")
    A_cupyx = csp.csr_matrix(S)

    def synchronize() -> None:
        cupy.cuda.Device().synchronize()

    ours, ours_whole = _both_measures(lambda k: linalg.cg(A, b, maxiter=k, rtol=0.0, atol=0.0), iterations,
                                      repeats, synchronize)
    cupyx_tolerance = _tolerance_kwargs(csla.cg, 0.0)
    theirs, theirs_whole = _both_measures(lambda k: csla.cg(A_cupyx, b, maxiter=k, **cupyx_tolerance),
                                          iterations, repeats, synchronize)
    scipy_k = max(2, min(iterations, 50) if scipy_iterations is None else scipy_iterations)
    host = ms_per_iteration(lambda k: sla.cg(S, b_host, maxiter=k, rtol=0.0, atol=0.0), scipy_k,
                          max(1, min(repeats, 3)), lambda: None)
    return {
        "problem": f"2-D Poisson {n_side}x{n_side}",
        "unknowns": int(S.shape[0]),
        "nnz": int(S.nnz),
        "dtype": str(np.dtype(dtype)),
        "sparsegpu_format": A.format,
        "iterations": iterations,
        "sparsegpu_ms_per_iteration": ours,
        "cupyx_ms_per_iteration": theirs,
        "speedup_vs_cupyx_per_iteration": theirs / ours,
        "sparsegpu_ms_per_iteration_whole_solve": ours_whole,
        "cupyx_ms_per_iteration_whole_solve": theirs_whole,
        "speedup_vs_cupyx_whole_solve": theirs_whole / ours_whole,
        "scipy_ms_per_iteration_whole_solve": host,
        "speedup_vs_scipy_whole_solve": host / ours_whole,
    }


def fixed_iterations(solver: Callable, matrix: Any, rhs: Any, method: str) -> Callable[[int], Any]:
    """``k -> solver(matrix, rhs, ...)`` doing exactly k iterations (rtol = atol = 0): for GMRES
    one cycle of k inner iterations (``restart = k``), for MINRES (no atol in SciPy's) k
    Lanczos steps. The same call for sparsegpu's solvers and SciPy's.

    >>> import numpy as np
    >>> x, info = fixed_iterations(sla.cg, datasets.poisson2d(4), np.ones(16), "cg")(3)
    >>> info
    3
    """
    if method == "gmres":
        return lambda k: solver(matrix, rhs, restart=k, maxiter=1, rtol=0.0, atol=0.0)
    if method == "minres":
        return lambda k: solver(matrix, rhs, maxiter=k, rtol=0.0)
    return lambda k: solver(matrix, rhs, maxiter=k, rtol=0.0, atol=0.0)


def compare_solvers(n_side: int, iterations: int, repeats: int = 3,
                    scipy_iterations: int = 10) -> dict[str, dict[str, Any]]:
    """All four solvers per iteration on 2-D Poisson (SPD, so every method applies), sparsegpu
    on the GPU vs SciPy on the CPU. ``n_side = 1415`` gives about 10^7 nonzeros. GMRES counts
    inner iterations (``restart = min(iterations, 20)``, one cycle, on both sides)."""
    import cupy

    S = datasets.poisson2d(n_side)
    b_host = np.random.default_rng(0).standard_normal(S.shape[0])
    b = cupy.asarray(b_host)
    A = from_scipy(S, format="auto", backend="gpu")

    def synchronize() -> None:
        cupy.cuda.Device().synchronize()

    results = {}
    for method in ("cg", "bicgstab", "gmres", "minres"):
        ours_fn, ref_fn = getattr(linalg, method), getattr(sla, method)
        # GMRES's cost per inner iteration grows with the Krylov basis: both sides use the
        # same basis size.
        k_ours = min(iterations, 20) if method == "gmres" else iterations
        k_host = k_ours if method == "gmres" else scipy_iterations
        ours = ms_per_iteration(fixed_iterations(ours_fn, A, b, method), k_ours, repeats, synchronize)
        host = ms_per_iteration(fixed_iterations(ref_fn, S, b_host, method), k_host, 1, lambda: None)
        results[method] = {"sparsegpu_ms_per_iteration": ours, "scipy_ms_per_iteration": host,
                           "speedup_vs_scipy": host / ours, "nnz": float(S.nnz), "format": A.format}
    return results


# --------------------------------------------------------------------------- CPU whole solves


#: The CPU comparison's matrices: 2-D Poisson 300 x 300 and, when the real matrices are
#: available, bcsstk16 (SPD, 4,884 rows, 290,378 entries).
CPU_MATRICES = ("poisson2d:300", "bcsstk16")


def _cpu_matrix(name: str) -> Any:
    if name.startswith("poisson2d:"):
        return datasets.poisson2d(int(name.split(":")[1]))
    return datasets.load_matrix(name)


def cpu_against_scipy(matrices: Sequence[str] = CPU_MATRICES, methods: Sequence[str] = ("cg",),
                      rtol: float = 1e-6, repeats: int = 7, maxiter: int | None = None) -> list[dict[str, Any]]:
    """Whole solves on the CPU backend against ``scipy.sparse.linalg`` on the same matrix,
    right-hand side and tolerance: the median of ``repeats`` solves each (after a warm-up
    solve), and their ratio (``ratio`` < 1: sparsegpu is faster). The matrix is converted
    once, outside the timing. A real matrix that is not available is skipped.

    >>> rows = cpu_against_scipy(["poisson2d:8"], repeats=1)
    >>> rows[0]["method"], rows[0]["info"] == rows[0]["scipy_info"] == 0
    ('cg', True)
    """
    rows = []
    for name in matrices:
        try:
            S = _cpu_matrix(name)
        except (FileNotFoundError, KeyError, ValueError):
            continue
        b = np.random.default_rng(0).standard_normal(S.shape[0])
        A = from_scipy(S, "csr", backend="cpu")
        for method in methods:
            ours, theirs = getattr(linalg, method), getattr(sla, method)
            kwargs = {"rtol": rtol, "maxiter": maxiter}
            info = ours(A, b, **kwargs)[1]
            scipy_info = theirs(S, b, **kwargs)[1]
            seconds = _median_seconds(lambda: ours(A, b, **kwargs), repeats, lambda: None)
            scipy_seconds = _median_seconds(lambda: theirs(S, b, **kwargs), repeats, lambda: None)
            rows.append({"matrix": name, "method": method, "rows": int(S.shape[0]), "nnz": int(S.nnz),
                         "info": int(info), "scipy_info": int(scipy_info), "ms": 1e3 * seconds,
                         "scipy_ms": 1e3 * scipy_seconds, "ratio": seconds / scipy_seconds})
    return rows
