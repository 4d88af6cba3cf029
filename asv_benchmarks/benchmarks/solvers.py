"""Solvers: CG per iteration, sparsegpu.linalg against cupyx.scipy.sparse.linalg, on 2-D
Poisson with 99,856 and 4M unknowns (issue 8's targets)."""

from __future__ import annotations

import numpy as np

from sparsegpu import datasets
from sparsegpu.bench import solvers as bench

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
