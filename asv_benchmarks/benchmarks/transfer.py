"""Streamed host -> device uploads: ``upload_csr`` from pageable and from pinned arrays, with
and without its device checks (``check=False``: what validation costs), ``sparsegpu.from_scipy``
(streamed above ``transfer.STREAM_MIN_BYTES``), and cupyx's ``csr_matrix(S)``, as GB/s of the
matrix's host bytes, on a 620 MB CSR (5M rows x 10). Skipped without a GPU."""

from __future__ import annotations

import time
from typing import Any

import scipy.sparse as sp

import sparsegpu
from sparsegpu import transfer
from sparsegpu.bench import timing
from sparsegpu.bench.transfer import build_matrix

from ._common import require_gpu

ROWS = 5_000_000
REPEAT = 5


class Upload:
    """End to end: from host arrays to a ready (validated, canonical) device matrix."""

    params = [["upload_csr pageable", "upload_csr pageable check=False", "upload_csr pinned", "from_scipy",
               "cupyx"]]
    param_names = ["path"]
    unit = "GB/s"
    timeout = 300

    def setup(self, path: str) -> None:
        self.pinned: list[Any] = []  # before the skip: teardown runs after a skipped setup too
        require_gpu()
        S = build_matrix(ROWS)
        self.nbytes = S.data.nbytes + S.indices.nbytes + S.indptr.nbytes
        if path == "upload_csr pinned":
            self.pinned = [transfer.pin(a) for a in (S.data, S.indices, S.indptr)]
            S = sp.csr_array(tuple(self.pinned), shape=S.shape, copy=False)
        if path == "cupyx":
            import cupyx.scipy.sparse as csp

            self.run = lambda: csp.csr_matrix(S)
        elif path == "from_scipy":
            self.run = lambda: sparsegpu.from_scipy(S, backend="gpu")
        else:
            check = not path.endswith("check=False")
            self.run = lambda: transfer.upload_csr(S, backend="gpu", check=check)
        self.run()  # kernels compiled, staging pool allocated
        timing.synchronize("gpu")

    def teardown(self, path: str) -> None:
        for a in getattr(self, "pinned", []):
            transfer.unpin(a)
        self.pinned = []

    def track_gbps(self, path: str) -> float:
        samples = []
        for _ in range(REPEAT):
            timing.synchronize("gpu")
            start = time.perf_counter()
            self.run()
            timing.synchronize("gpu")
            samples.append(time.perf_counter() - start)
        return self.nbytes / sorted(samples)[REPEAT // 2] / 1e9
