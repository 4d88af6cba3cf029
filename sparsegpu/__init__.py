"""sparsegpu: sparse linear algebra on NVIDIA GPUs, with a CPU backend that runs anywhere.

>>> import numpy as np, scipy.sparse as sp, sparsegpu
>>> S = sp.random(100, 100, density=0.05, random_state=0)
>>> A = sparsegpu.from_scipy(S, format="csr")
>>> bool(np.allclose(A @ np.ones(100), S @ np.ones(100)))
True
"""

from __future__ import annotations

from typing import Any

from sparsegpu._backend import (
    BackendError,
    backend,
    get_options,
    gpu_available,
    options,
    set_options,
)
from sparsegpu._kernels import KernelCompileError
from sparsegpu.advisor import Advice, MatrixStats, advise, matrix_stats
from sparsegpu.formats import COO, CSC, CSR, ELL, HYB, JDS, SELL, SparseMatrix, TransposedOperator
from sparsegpu.transfer import (
    OutOfCoreCSR,
    PinnedPool,
    TransferReport,
    pin,
    pinned_empty,
    unpin,
    upload,
    upload_csr,
)

from sparsegpu import linalg  # noqa: E402  (after the formats it solves with)

__version__ = "0.1.0"


def from_scipy(S: Any, format: str = "csr", **kwargs: Any) -> SparseMatrix:
    """Build a sparsegpu matrix of ``format`` from any scipy sparse matrix or array.

    ``format="auto"`` asks :func:`advise` and converts to its choice (on the device, from one
    upload). On the CPU backend it keeps CSR: the CPU runs reference twins, of which CSR's is
    the fastest, while the advice describes the GPU. ``kwargs`` go to the format's
    ``from_scipy`` (``dtype``, ``index_dtype``, ``backend``, and format parameters).
    """
    key = format.lower()
    if key == "auto":
        csr = CSR.from_scipy(S, **kwargs)
        if csr.backend == "cpu":
            return csr
        advice = advise(csr)
        return csr.asformat(advice.format, **advice.params)
    if key not in SparseMatrix.formats:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(sorted(SparseMatrix.formats))}")
    return SparseMatrix.formats[key].from_scipy(S, **kwargs)


__all__ = [
    "Advice",
    "MatrixStats",
    "OutOfCoreCSR",
    "PinnedPool",
    "TransferReport",
    "advise",
    "matrix_stats",
    "COO",
    "CSC",
    "CSR",
    "ELL",
    "HYB",
    "JDS",
    "SELL",
    "BackendError",
    "KernelCompileError",
    "SparseMatrix",
    "TransposedOperator",
    "backend",
    "from_scipy",
    "get_options",
    "gpu_available",
    "linalg",
    "options",
    "pin",
    "pinned_empty",
    "set_options",
    "unpin",
    "upload",
    "upload_csr",
]
