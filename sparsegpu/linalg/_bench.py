"""Side-by-side timings of the solvers on the GPU: sparsegpu vs ``cupyx.scipy.sparse.linalg``
vs SciPy, per iteration, on the 2-D Poisson problem (the lead runs these on the GPU machine).

Every solve runs with ``rtol = atol = 0``, so it does exactly ``maxiter`` iterations. T(k) is
the median of ``repeats`` whole solves with ``maxiter = k`` after a warm-up run (kernels
compiled, plans built), timed with a device synchronisation before and after. Two figures:

- whole solve: ``(T(k) - T(1)) / (k - 1)``: everything a k-iteration solve costs beyond a
  1-iteration one (status checks, graph capture, the first batch) spread over its iterations;
- per iteration: ``(T(2k) - T(k)) / k``: the marginal cost of an iteration of a running solve.
"""

from __future__ import annotations

import inspect
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla


def poisson2d(n_side: int) -> sp.csr_array:
    """The 5-point Laplacian on an n_side x n_side grid (n_side**2 unknowns, ~5 per row)."""
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n_side, n_side))
    I = sp.eye_array(n_side)
    return sp.csr_array(sp.kron(I, T) + sp.kron(T, I))


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


def _zero_tolerance(solver: Callable) -> dict[str, float]:
    """rtol = atol = 0 under whichever name the solver uses for the relative tolerance."""
    names = inspect.signature(solver).parameters
    relative = "rtol" if "rtol" in names else "tol"
    return {relative: 0.0, "atol": 0.0}


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

    import sparsegpu
    from sparsegpu.linalg import cg

    if iterations < 2:
        raise ValueError("iterations must be at least 2")
    S = poisson2d(n_side).astype(dtype)
    rng = np.random.default_rng(0)
    b_host = rng.standard_normal(S.shape[0]).astype(dtype)
    b = cupy.asarray(b_host)
    A = sparsegpu.from_scipy(S, format="auto", backend="gpu")
    A_cupyx = csp.csr_matrix(S)

    def synchronize() -> None:
        cupy.cuda.Device().synchronize()

    ours, ours_whole = _both_measures(lambda k: cg(A, b, maxiter=k, rtol=0.0, atol=0.0), iterations,
                                      repeats, synchronize)
    cupyx_tolerance = _zero_tolerance(csla.cg)
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
    >>> x, info = fixed_iterations(sla.cg, poisson2d(4), np.ones(16), "cg")(3)
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

    import sparsegpu
    from sparsegpu.linalg import bicgstab, cg, gmres, minres

    S = poisson2d(n_side)
    b_host = np.random.default_rng(0).standard_normal(S.shape[0])
    b = cupy.asarray(b_host)
    A = sparsegpu.from_scipy(S, format="auto", backend="gpu")

    def synchronize() -> None:
        cupy.cuda.Device().synchronize()

    results = {}
    for method, ours_fn, ref_fn in (("cg", cg, sla.cg), ("bicgstab", bicgstab, sla.bicgstab),
                                    ("gmres", gmres, sla.gmres), ("minres", minres, sla.minres)):
        # GMRES's cost per inner iteration grows with the Krylov basis: both sides use the
        # same basis size.
        k_ours = min(iterations, 20) if method == "gmres" else iterations
        k_host = k_ours if method == "gmres" else scipy_iterations
        ours = ms_per_iteration(fixed_iterations(ours_fn, A, b, method), k_ours, repeats, synchronize)
        host = ms_per_iteration(fixed_iterations(ref_fn, S, b_host, method), k_host, 1, lambda: None)
        results[method] = {"sparsegpu_ms_per_iteration": ours, "scipy_ms_per_iteration": host,
                           "speedup_vs_scipy": host / ours, "nnz": float(S.nnz), "format": A.format}
    return results
