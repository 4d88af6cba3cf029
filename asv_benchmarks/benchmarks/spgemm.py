"""SpGEMM: ``A @ A`` and ``A.T @ A`` with sparsegpu's spgemm and cupyx (cuSPARSE) on R-MAT,
the stencils and cupy/cupy#10033's matrix; milliseconds and peak pool MiB for each."""

from __future__ import annotations

from typing import Any

from sparsegpu import datasets
from sparsegpu.bench.spgemm import bench_product, cupy_issue_matrix

from ._common import REPEAT, require_gpu

MATRICES = {
    "rmat16": lambda: datasets.rmat(16),
    "poisson2d_1000": lambda: datasets.poisson2d(1000),
    "stencil27_60": lambda: datasets.stencil27(60),
    "cupy10033": cupy_issue_matrix,
}
PRODUCTS = ["AA", "ATA"]


class SpGEMM:
    """One product per parameter pair, checked against cupyx (a wrong or failed cupyx answer
    leaves cupyx's numbers out: asv shows them as missing)."""

    params = [list(MATRICES), PRODUCTS]
    param_names = ["matrix", "product"]
    timeout = 600

    def setup(self, matrix: str, product: str) -> None:
        require_gpu()
        if matrix == "cupy10033" and product == "AA":
            raise NotImplementedError("A @ A needs a square matrix")
        self.row: dict[str, Any] = bench_product(matrix, MATRICES[matrix](), product, "gpu", REPEAT)

    def track_ours_ms(self, matrix: str, product: str) -> float:
        return self.row["ours_ms"]

    def track_cupyx_ms(self, matrix: str, product: str) -> float:
        if self.row["baseline_status"] != "ok":
            raise NotImplementedError(self.row["baseline_status"])
        return self.row["baseline_ms"]

    def track_ours_peak_mib(self, matrix: str, product: str) -> float:
        return self.row["ours_peak_bytes"] / 2**20

    def track_cupyx_peak_mib(self, matrix: str, product: str) -> float:
        if "baseline_peak_bytes" not in self.row:
            raise NotImplementedError(self.row["baseline_status"])
        return self.row["baseline_peak_bytes"] / 2**20
