"""The advisor's statistics on the GPU against one CSR SpMV: the target is at most one."""

from __future__ import annotations

import sparsegpu
from sparsegpu import advisor, datasets
from sparsegpu.bench.timing import median_call_seconds

from ._common import medium, require_gpu

#: Calls per median: each is a few tens to hundreds of microseconds.
CALLS = 200


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
        return (median_call_seconds(lambda: advisor.matrix_stats(self.csr), CALLS)
                / median_call_seconds(self.spmv_call, CALLS))

    def time_statistics(self, matrix: str) -> None:
        advisor.matrix_stats(self.csr)
