"""sparsegpu: sparse linear algebra on NVIDIA GPUs, with a CPU backend that runs anywhere.

>>> import numpy as np, scipy.sparse as sp, sparsegpu
>>> S = sp.random(100, 100, density=0.05, random_state=0)
>>> A = sparsegpu.from_scipy(S, format="csr", backend="cpu")
>>> bool(np.allclose(A @ np.ones(100), S @ np.ones(100)))
True
"""

from __future__ import annotations

from sparsegpu import csgraph, distributed, linalg, semiring
from sparsegpu._backend import BackendError, backend, get_options, gpu_available, options, set_options
from sparsegpu._kernels import KernelCompileError
from sparsegpu.advisor import Advice, MatrixStats, advise, from_scipy, matrix_stats
from sparsegpu.formats import (
    COO,
    CSC,
    CSR,
    ELL,
    HYB,
    JDS,
    SELL,
    SparseMatrix,
    SparseVector,
    TransposedOperator,
    diags,
    eye,
    hstack,
    kron,
    spgemm,
    vstack,
)
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

__version__ = "0.1.0"


__all__ = [
    "Advice",
    "MatrixStats",
    "OutOfCoreCSR",
    "PinnedPool",
    "TransferReport",
    "advise",
    "csgraph",
    "distributed",
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
    "SparseVector",
    "TransposedOperator",
    "backend",
    "from_scipy",
    "get_options",
    "gpu_available",
    "linalg",
    "options",
    "pin",
    "semiring",
    "pinned_empty",
    "set_options",
    "spgemm",
    "diags",
    "eye",
    "hstack",
    "kron",
    "vstack",
    "unpin",
    "upload",
    "upload_csr",
]
