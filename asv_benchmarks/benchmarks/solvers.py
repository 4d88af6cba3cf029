"""Solvers: CG per iteration, sparsegpu.linalg against
cupyx.scipy.sparse.linalg, on 2-D Poisson with 99,856 and 4M unknowns; and all four solvers per
iteration against SciPy at 10^7 nonzeros."""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg as sla

import sparsegpu
from sparsegpu import datasets, linalg
from sparsegpu.bench import solvers as bench
from sparsegpu.bench.solvers import fixed_iterations

from ._common import require_gpu

ITERATIONS = 50


class CG:
    """Milliseconds per iteration: (t(2k) - t(k)) / k, k = 50, after a check that the residual
    after k iterations matches cupyx's."""

    params = [[316, 2000], ["sparsegpu", "cupyx"]]
    param_names = ["grid", "implementation"]
    unit = "ms"

    def setup(self, grid: int, impl: str) -> None:
        require_gpu()
        S = datasets.poisson2d(grid)
        b = np.random.default_rng(0).uniform(-1, 1, S.shape[0])
        runs = bench.solvers("gpu", S, b)
        self.run = runs[impl]
        got, expected = (bench.residual(S, b, runs[name](ITERATIONS)) for name in (impl, "cupyx"))
        if not abs(got - expected) <= 1e-3 * expected:
            raise AssertionError(f"{impl} CG WRONG: residual {got:.6g} after {ITERATIONS} iterations, cupyx {expected:.6g}")

    def track_ms_per_iteration(self, grid: int, impl: str) -> float:
        return bench.per_iteration(self.run, ITERATIONS, "gpu", repeat=3) * 1e3


class Solvers:
    """Milliseconds per iteration, (t(2k) - t(k)) / k, of each solver on 2-D Poisson 1415^2
    (10^7 nonzeros): sparsegpu on the GPU (the advisor's format) against SciPy on the CPU
    (k = 30, SciPy 5; GMRES is one cycle of k inner iterations on both sides, so both build the
    same basis)."""

    params = [["cg", "bicgstab", "gmres", "minres"], ["sparsegpu", "scipy"]]
    param_names = ["method", "implementation"]
    unit = "ms"
    timeout = 600
    grid = 1415

    def setup(self, method: str, impl: str) -> None:
        require_gpu()
        S = datasets.poisson2d(self.grid)
        b = np.random.default_rng(0).standard_normal(S.shape[0])
        if impl == "sparsegpu":
            import cupy

            A, rhs, self.backend = sparsegpu.from_scipy(S, format="auto", backend="gpu"), cupy.asarray(b), "gpu"
            solver = getattr(linalg, method)
        else:
            A, rhs, self.backend, solver = S, b, "cpu", getattr(sla, method)
        self.run = fixed_iterations(solver, A, rhs, method)
        self.iterations = 20 if method == "gmres" else 30 if impl == "sparsegpu" else 5

    def track_ms_per_iteration(self, method: str, impl: str) -> float:
        repeat = 3 if self.backend == "gpu" else 1
        return bench.per_iteration(self.run, self.iterations, self.backend, repeat=repeat) * 1e3
