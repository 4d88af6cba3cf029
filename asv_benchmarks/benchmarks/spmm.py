"""SpMM: effective GB/s of ``A @ X`` (dense X of k columns, C or F order) for sparsegpu's
formats with SpMM kernels and for cupyx, on matrices larger than L2."""

from __future__ import annotations

import numpy as np

import sparsegpu
from sparsegpu.bench import effective_gbps, measure
from sparsegpu.bench.spmm import check_block, spmm_bytes

from ._common import REPEAT, medium, require_gpu

FAMILIES = ["poisson2d", "stencil27", "rmat"]
IMPLEMENTATIONS = ["csr", "sell", "cupyx"]


class SpMM:
    """Y = A @ X on each family's medium preset, float64, k = 4, 16, 64 in both orders of X:
    effective GB/s (A once, X read once, Y written once; CUDA events, median of samples)."""

    params = [IMPLEMENTATIONS, [4, 16, 64], ["C", "F"], FAMILIES]
    param_names = ["implementation", "k", "order", "family"]
    unit = "GB/s"

    def setup(self, impl: str, k: int, order: str, family: str) -> None:
        require_gpu()  # before building a matrix nobody will use
        import cupy

        S = medium(family).astype(np.float64)
        X_host = np.random.default_rng(0).standard_normal((S.shape[1], k))
        self.X = cupy.asarray(np.asarray(X_host, order=order))
        if impl == "cupyx":
            import cupyx.scipy.sparse as cusparse

            matrix = cusparse.csr_matrix(S)
            self.product = lambda: matrix @ self.X
        else:
            A = sparsegpu.from_scipy(S, format=impl, backend="gpu")
            self.product = lambda: A @ self.X
        message = check_block(self.product(), S, X_host, S @ X_host, np.float64)
        if message is not None:
            raise AssertionError(f"{impl} WRONG: {message}")
        self.nbytes = spmm_bytes(*S.shape, S.nnz, k, np.float64, S.indices.dtype)

    def track_gbps(self, impl: str, k: int, order: str, family: str) -> float:
        return effective_gbps(self.nbytes, measure(lambda i: self.product(), "gpu", REPEAT).seconds)
