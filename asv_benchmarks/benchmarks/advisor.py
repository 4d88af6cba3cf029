"""The advisor's statistics on the GPU against one CSR SpMV: issue 6 asks for at most one."""

from __future__ import annotations

import statistics
import time

import sparsegpu
from sparsegpu import advisor, datasets

from ._common import medium, require_gpu

#: Calls per median: each is a few tens to hundreds of microseconds.
CALLS = 200


def median_call_seconds(call) -> float:
    """Median wall time of ``call()`` (which ends with a synchronisation), after a warm-up."""
    for _ in range(10):
        call()
    samples = []
    for _ in range(CALLS):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class AdvisorStatistics:
    """``matrix_stats`` (``csr_stats`` then ``stats_summary``, one synchronisation) over one
    ``csr.spmv(x, y)`` call timed the same way, launch to synchronised result: on three medium
    families (beyond L2) and a 1000-row matrix (both calls latency-bound)."""

    params = [["poisson2d", "rmat", "powerlaw", "random 1000 rows"]]
    param_names = ["matrix"]
    unit = "ratio"

    def setup(self, matrix: str) -> None:
        require_gpu()
        import cupy

        S = datasets.random_uniform(1000, 8, seed=0) if matrix == "random 1000 rows" else medium(matrix)
        self.csr = sparsegpu.CSR.from_scipy(S, backend="gpu")
        self.x, self.y = cupy.ones(S.shape[1]), cupy.empty(S.shape[0])
        self.stream = cupy.cuda.get_current_stream()
        advisor.matrix_stats(self.csr)  # the workspace allocated, the kernels loaded
        self.spmv_call()

    def spmv_call(self) -> None:
        self.csr.spmv(self.x, self.y)
        self.stream.synchronize()

    def track_statistics_over_spmv(self, matrix: str) -> float:
        return (median_call_seconds(lambda: advisor.matrix_stats(self.csr))
                / median_call_seconds(self.spmv_call))

    def time_statistics(self, matrix: str) -> None:
        advisor.matrix_stats(self.csr)
